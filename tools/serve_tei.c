/* `est serve`'s text-embeddings-inference routes (serve_internal.h, docs/serving.md §6): the
 * table of routes, TEI's error shape and statuses, the --max_concurrent_requests permits, the
 * shared "texts -> one job of the queue" step, and GET /health, /info and /metrics. The
 * answers of the other routes are in serve_tei_tokenize.c (/tokenize, /decode),
 * serve_tei_predict.c (/predict, /rerank), serve_tei_embed.c (/similarity, /embed_all) and
 * serve_embed.c (/embed, /v1/embeddings); /embed_sparse is answered here (no SPLADE head).
 *
 * Statuses and error_type as TEI's router/src/http/server.rs maps ErrorType: 400 Empty (no
 * inputs), 413 Validation (too many inputs, an input over max_input_length without truncate,
 * a prompt name), 422 Tokenizer (a body or field that does not parse as the request's
 * schema, which axum answers 422 too), 424 Backend (the model cannot answer the route, e.g.
 * /rerank on an embedding model: "model is not a re-ranker model"), 429 Overloaded, 503
 * Unhealthy. What a route answers is the model's head's (est_served_head.tei_model_type,
 * tei_scores): nothing here knows a head by name. */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve_internal.h"

#ifndef EST_VERSION_STRING
#define EST_VERSION_STRING "0"
#endif

static const struct {
  const char *url, *metric; /* metric: TEI's te_<route>_* prefix */
  bool get;
} ROUTES[TEI_NROUTES] = {
  [TEI_HEALTH] = {"/health", "health", true},       [TEI_INFO] = {"/info", "info", true},
  [TEI_METRICS] = {"/metrics", "metrics", true},    [TEI_TOKENIZE] = {"/tokenize", "tokenize", false},
  [TEI_DECODE] = {"/decode", "decode", false},      [TEI_EMBED] = {"/embed", "embed", false},
  [TEI_EMBED_ALL] = {"/embed_all", "embed_all", false}, [TEI_EMBED_SPARSE] = {"/embed_sparse", "embed_sparse", false},
  [TEI_SIMILARITY] = {"/similarity", "similarity", false}, [TEI_PREDICT] = {"/predict", "predict", false},
  [TEI_RERANK] = {"/rerank", "rerank", false},      [TEI_OPENAI] = {"/v1/embeddings", "openai", false},
};

int serve_tei_route_of(const char *url) {
  for (int r = 0; r < TEI_NROUTES; r++)
    if (!strcmp(url, ROUTES[r].url)) return r;
  return -1;
}

bool serve_tei_route_get(serve_tei_route route) { return ROUTES[route].get; }

/* ---- metrics ------------------------------------------------------------------------------ */

static const double DURATION_BOUNDS[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
enum { NDUR = sizeof DURATION_BOUNDS / sizeof *DURATION_BOUNDS };

typedef struct serve_tei_metrics {
  pthread_mutex_t lock;
  struct {
    uint64_t count, success, failure[6]; /* failure by error_type: see FAILURES */
    uint64_t duration[NDUR + 1];
    double duration_sum;
  } route[TEI_NROUTES];
} serve_tei_metrics;

static const char *const FAILURES[6] = {"empty", "validation", "tokenizer", "backend", "overloaded", "other"};

static int failure_of(unsigned status) {
  switch (status) {
  case 400: return 0;
  case 413: return 1;
  case 422: return 2;
  case 424: return 3;
  case 429: return 4;
  default: return 5;
  }
}

est_status serve_tei_start(serve_http *h) {
  if (!(h->tei = calloc(1, sizeof *h->tei))) return est_error(EST_ERR_NO_MEMORY, "metrics");
  pthread_mutex_init(&h->tei->lock, NULL);
  return EST_OK;
}

void serve_tei_stop(serve_http *h) {
  if (h->tei) pthread_mutex_destroy(&h->tei->lock);
  free(h->tei);
  h->tei = NULL;
}

void serve_tei_count(serve_http *h, serve_tei_route route, unsigned status, double seconds) {
  serve_tei_metrics *m = h->tei;
  pthread_mutex_lock(&m->lock);
  m->route[route].count++;
  if (status == 200) m->route[route].success++;
  else m->route[route].failure[failure_of(status)]++;
  int b = 0;
  while (b < NDUR && seconds > DURATION_BOUNDS[b]) b++;
  m->route[route].duration[b]++;
  m->route[route].duration_sum += seconds;
  pthread_mutex_unlock(&m->lock);
}

/* TEI's names: te_request_count / _success / _failure{err} over the inference routes,
 * te_<route>_count / _success / _failure / _duration per route, te_queue_size, and the
 * batcher's te_batch_next_size / te_batch_next_tokens. */
static char *metrics_text(serve_http *h) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) return NULL;
  serve_tei_metrics *m = h->tei;
  size_t queued;
  int64_t queued_tokens;
  serve_queue_size(h->server, &queued, &queued_tokens);
  pthread_mutex_lock(&m->lock);
  uint64_t count = 0, success = 0, failure[6] = {0};
  for (int r = TEI_TOKENIZE; r < TEI_NROUTES; r++) {
    count += m->route[r].count, success += m->route[r].success;
    for (int k = 0; k < 6; k++) failure[k] += m->route[r].failure[k];
  }
  fprintf(f, "# HELP te_request_count Requests of the TEI routes.\n# TYPE te_request_count counter\n"
             "te_request_count %llu\n# HELP te_request_success Requests answered 200.\n"
             "# TYPE te_request_success counter\nte_request_success %llu\n"
             "# HELP te_request_failure Requests refused, by error_type.\n# TYPE te_request_failure counter\n",
          (unsigned long long)count, (unsigned long long)success);
  for (int k = 0; k < 6; k++)
    fprintf(f, "te_request_failure{err=\"%s\"} %llu\n", FAILURES[k], (unsigned long long)failure[k]);
  for (int r = TEI_TOKENIZE; r < TEI_NROUTES; r++) {
    const char *n = ROUTES[r].metric;
    fprintf(f, "# TYPE te_%s_count counter\nte_%s_count %llu\n# TYPE te_%s_success counter\nte_%s_success %llu\n"
               "# TYPE te_%s_failure counter\n",
            n, n, (unsigned long long)m->route[r].count, n, n, (unsigned long long)m->route[r].success, n);
    for (int k = 0; k < 6; k++)
      fprintf(f, "te_%s_failure{err=\"%s\"} %llu\n", n, FAILURES[k], (unsigned long long)m->route[r].failure[k]);
    fprintf(f, "# HELP te_%s_duration Seconds from a request's first byte to its answer.\n"
               "# TYPE te_%s_duration histogram\n", n, n);
    uint64_t cum = 0;
    for (int b = 0; b <= NDUR; b++) {
      cum += m->route[r].duration[b];
      if (b < NDUR)
        fprintf(f, "te_%s_duration_bucket{le=\"%g\"} %llu\n", n, DURATION_BOUNDS[b], (unsigned long long)cum);
      else fprintf(f, "te_%s_duration_bucket{le=\"+Inf\"} %llu\n", n, (unsigned long long)cum);
    }
    fprintf(f, "te_%s_duration_sum %.17g\nte_%s_duration_count %llu\n", n, m->route[r].duration_sum, n,
            (unsigned long long)cum);
  }
  pthread_mutex_unlock(&m->lock);
  fprintf(f, "# HELP te_queue_size Examples waiting for the batcher.\n# TYPE te_queue_size gauge\n"
             "te_queue_size %zu\n# HELP te_queue_tokens Real tokens waiting for the batcher.\n"
             "# TYPE te_queue_tokens gauge\nte_queue_tokens %lld\n", queued, (long long)queued_tokens);
  serve_metrics_batches_tei(h->server, f);
  fclose(f);
  return buf;
}

/* ---- errors and permits -------------------------------------------------------------------- */

char *serve_tei_error(unsigned status, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const char *type = status == 400 ? "Empty" : status == 413 ? "Validation" : status == 422 ? "Tokenizer"
                   : status == 429 ? "Overloaded" : status == 503 ? "Unhealthy" : "Backend";
  json_t *j = json_pack("{s:s,s:s}", "error", msg, "error_type", type);
  char *text = j ? json_dumps(j, 0) : NULL;
  json_decref(j);
  return text;
}

bool serve_tei_acquire(serve_http *h) {
  pthread_mutex_lock(&h->lock);
  const bool ok = h->tei_active < h->opt->max_concurrent_requests;
  if (ok) h->tei_active++;
  pthread_mutex_unlock(&h->lock);
  return ok;
}

void serve_tei_release(serve_http *h) {
  pthread_mutex_lock(&h->lock);
  h->tei_active--;
  pthread_mutex_unlock(&h->lock);
}

/* ---- texts -> one job ----------------------------------------------------------------------- */

void serve_tei_job_free(serve_job *job) {
  free(job->ids), free(job->mask), free(job->segs), free(job->probs), free(job->token_out);
  memset(job, 0, sizeof *job);
}

est_status serve_tei_run(serve_http *h, served_model *m, const char *const *a, const char *const *b, size_t n,
                         bool truncate, bool per_token, const char *field, serve_job *job, bool *queued,
                         unsigned *status) {
  const est_model_meta *meta = est_servable_meta(m->servable);
  const size_t S = (size_t)meta->max_seq_length;
  memset(job, 0, sizeof *job);
  job->model = m;
  job->n = (int)n;
  job->ids = calloc(n * S, sizeof(int32_t)), job->mask = calloc(n * S, sizeof(int32_t));
  job->segs = calloc(n * S, sizeof(int32_t));
  job->probs = malloc((n + 1) * (size_t)est_servable_row_width(m->servable) * sizeof(float));
  if (per_token) job->token_out = malloc(n * S * (size_t)meta->bert_config.hidden_size * sizeof(float));
  *status = 500;
  if (!job->ids || !job->mask || !job->segs || !job->probs || (per_token && !job->token_out))
    return est_error(EST_ERR_NO_MEMORY, "request");
  est_featurizer *f = NULL;
  est_status st = est_featurizer_create(&f, m->servable);
  job->longest = 1;
  for (size_t i = 0; st == EST_OK && i < n; i++) {
    int count, len;
    st = est_featurizer_count_tokens(f, a[i], b ? b[i] : NULL, &count);
    if (st == EST_OK && count > (int)S && !truncate) {
      *status = 413; /* TEI's words: "`inputs` must have less than 512 tokens. Given: 600" */
      st = est_error(EST_ERR_INVALID_ARGUMENT, "`%s` must have less than %zu tokens. Given: %d (%s[%zu]; send "
                     "\"truncate\": true to cut it)", field, S, count, field, i);
      break;
    }
    if (st == EST_OK) st = est_featurizer_run(f, a[i], b ? b[i] : NULL, job->ids + i * S, job->mask + i * S,
                                              job->segs + i * S, &len);
    if (st != EST_OK) {
      if (*status == 500) *status = 422; /* the tokenizer's */
      break;
    }
    if (len > job->longest) job->longest = len;
    job->tokens += len;
  }
  est_featurizer_free(f);
  if (st != EST_OK) return st;
  *queued = true;
  st = serve_run_job(h->server, job);
  *status = st == EST_OK ? 200 : st == EST_ERR_ABORTED ? 429 : 424;
  return st;
}

/* ---- /health and /info ---------------------------------------------------------------------- */

/* TEI's Info (openapi.json): the model and the server's limits. */
static char *info_text(serve_http *h, served_model *m) {
  const est_model_meta *meta = est_servable_meta(m->servable);
  const est_served_head *head = est_model_meta_head(meta);
  json_t *type = head->tei_model_type ? head->tei_model_type(meta) : NULL;
  if (!type) type = json_pack("{s:{s:s}}", "embedding", "pooling", "none"); /* no TEI route answers it */
  const est_precision p = est_servable_precision(m->servable);
  const char *dtype = p == EST_PRECISION_BF16 ? "bfloat16" : p == EST_PRECISION_INT8 ? "int8" : "float32";
  char sha[32];
  snprintf(sha, sizeof sha, "%lld", (long long)m->version);
  json_t *j = json_pack("{s:s,s:s,s:s,s:s,s:o,s:i,s:i,s:I,s:i,s:i,s:b,s:i,s:s,s:n,s:n}", "model_id",
                        h->opt->model_base_path, "model_sha", sha, "model_dtype", dtype, "served_model_name",
                        h->opt->model_name, "model_type", type, "max_concurrent_requests",
                        h->opt->max_concurrent_requests, "max_input_length", meta->max_seq_length,
                        "max_batch_tokens", (json_int_t)h->opt->max_batch_tokens, "max_batch_requests",
                        h->opt->max_batch_size, "max_client_batch_size", h->opt->max_client_batch_size,
                        "auto_truncate", h->opt->auto_truncate, "tokenization_workers", h->opt->max_connections,
                        "version", EST_VERSION_STRING, "sha", "docker_label");
  char *text = j ? json_dumps(j, JSON_INDENT(1)) : NULL;
  json_decref(j);
  return text;
}

/* ---- dispatch -------------------------------------------------------------------------------- */

char *serve_tei_answer(serve_http *h, serve_tei_route route, const char *body, size_t size, bool *queued,
                       unsigned *status, const char **content_type) {
  *queued = false;
  *content_type = "application/json";
  if (route == TEI_METRICS) {
    *status = 200;
    *content_type = "text/plain; version=0.0.4";
    return metrics_text(h);
  }
  served_model *m = serve_acquire(h->server);
  if (!m) return *status = 503, serve_tei_error(*status, "no model is loaded");
  char *text = NULL;
  if (route == TEI_HEALTH) {
    *status = 200;
    text = strdup("");
  } else if (route == TEI_INFO) {
    *status = 200;
    text = info_text(h, m);
  } else {
    json_error_t err;
    json_t *root = json_loadb(body ? body : "", size, JSON_REJECT_DUPLICATES, &err);
    const bool infer = route != TEI_TOKENIZE && route != TEI_DECODE;
    if (!root) {
      *status = 422;
      text = serve_tei_error(*status, "Failed to parse the request body as JSON: %s (line %d, column %d)", err.text,
                             err.line, err.column);
    } else if (!json_is_object(root)) {
      *status = 422;
      text = serve_tei_error(*status, "Failed to deserialize the JSON body: expected an object");
    } else if (infer && !serve_tei_acquire(h)) {
      *status = 429;
      text = serve_tei_error(*status, "Model is overloaded (--max_concurrent_requests=%d)",
                             h->opt->max_concurrent_requests);
    } else {
      switch (route) {
      case TEI_TOKENIZE: text = serve_tei_tokenize(h, m, root, status); break;
      case TEI_DECODE: text = serve_tei_decode(h, m, root, status); break;
      case TEI_PREDICT: text = serve_tei_predict(h, m, root, queued, status); break;
      case TEI_RERANK: text = serve_tei_rerank(h, m, root, queued, status); break;
      case TEI_SIMILARITY: text = serve_tei_similarity(h, m, root, queued, status); break;
      case TEI_EMBED_ALL: text = serve_tei_embed_all(h, m, root, queued, status); break;
      default: /* TEI_EMBED_SPARSE */
        *status = 424;
        text = serve_tei_error(*status, "Model is not an embedding model with SPLADE pooling (est serves no "
                               "masked-LM head); use POST /embed");
        break;
      }
      if (infer) serve_tei_release(h);
    }
    json_decref(root);
  }
  serve_release(h->server, m);
  return text;
}
