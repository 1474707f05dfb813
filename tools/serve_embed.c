/* `est serve`'s embedding APIs (serve_internal.h, docs/embeddings.md §4), for an export whose
 * head is an embedding model's (est_served_head.embedding_normalized: the pooling head):
 *   POST /embed           HuggingFace text-embeddings-inference: {"inputs": str | [str],
 *                         "normalize": bool (true), "truncate": bool (false)} -> [[f, ...], ...]
 *   POST /v1/embeddings   OpenAI: {"input": str | [str], "model": str} -> {"object": "list",
 *                         "data": [{"object": "embedding", "embedding": [...], "index": i}],
 *                         "model": ..., "usage": {"prompt_tokens": n, "total_tokens": n}}
 * Each request is one job of the shared queue, batched with :predict's jobs of the same
 * version by the one batcher (serve_core.c), so answers equal `est embed`'s vectors.
 * Errors have TEI's statuses (serve_tei.c: 400 no texts, 413 more than --max_client_batch_size
 * texts or one over max_seq_length without truncate, 422 a field of the wrong form, 424 not an
 * embedding model, 429 overloaded) in each API's own error shape: TEI's {"error",
 * "error_type"}, OpenAI's {"error": {"message", "type", "param", "code"}} with TEI's
 * OpenAICompatErrorResponse fields beside it ({"message", "code": status, "error_type"}).
 * "dimensions" keeps the first so many floats of each vector (Matryoshka) and normalizes
 * them when asked. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/float_format.h"
#include "serve_internal.h"

static char *error_body(est_embed_api api, unsigned status, const char *msg) {
  if (api == EST_EMBED_API_TEI) return serve_tei_error(status, "%s", msg);
  /* OpenAI's own shape, which OpenAI's clients read, and beside it TEI's
   * OpenAICompatErrorResponse fields (message, code, error_type) from TEI's error body */
  const char *type = status >= 500 || status == 424 || status == 429 ? "server_error" : "invalid_request_error";
  char *tei = serve_tei_error(status, "%s", msg);
  json_t *t = tei ? json_loads(tei, 0, NULL) : NULL;
  free(tei);
  json_t *j = json_pack("{s:{s:s,s:s,s:n,s:n},s:s,s:i,s:O}", "error", "message", msg, "type", type, "param", "code",
                        "message", msg, "code", (int)status, "error_type", json_object_get(t, "error_type"));
  json_decref(t);
  char *text = j ? json_dumps(j, 0) : NULL;
  json_decref(j);
  return text;
}

/* One vector as a JSON list (its first W floats), L2-normalised first when asked. */
static void write_vector(FILE *f, const float *v, int W, bool normalize) {
  double norm = 1;
  if (normalize) {
    double sq = 0;
    for (int k = 0; k < W; k++) sq += (double)v[k] * v[k];
    norm = sqrt(sq) > 1e-12 ? sqrt(sq) : 1e-12;
  }
  char num[48];
  fputc('[', f);
  for (int k = 0; k < W; k++)
    fprintf(f, "%s%s", k ? ", " : "", est_format_float32(normalize ? (float)(v[k] / norm) : v[k], num, sizeof num));
  fputc(']', f);
}

static char *answer_body(est_embed_api api, const serve_job *job, int W, int dims, bool normalize, const char *model,
                         long long tokens) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) return NULL;
  fputs(api == EST_EMBED_API_TEI ? "[" : "{\"object\": \"list\", \"data\": [", f);
  for (int i = 0; i < job->n; i++) {
    fputs(i ? ", " : "", f);
    if (api == EST_EMBED_API_OPENAI) fputs("{\"object\": \"embedding\", \"embedding\": ", f);
    write_vector(f, job->probs + (size_t)i * W, dims, normalize);
    if (api == EST_EMBED_API_OPENAI) fprintf(f, ", \"index\": %d}", i);
  }
  if (api == EST_EMBED_API_TEI) {
    fputs("]\n", f);
  } else {
    json_t *name = json_string(model);
    char *enc = name ? json_dumps(name, JSON_ENCODE_ANY) : NULL;
    json_decref(name);
    fprintf(f, "], \"model\": %s, \"usage\": {\"prompt_tokens\": %lld, \"total_tokens\": %lld}}\n", enc ? enc : "\"\"",
            tokens, tokens);
    free(enc);
  }
  fclose(f);
  return buf;
}

/* Tokenizes the texts into the job's rows; a text over max_seq_length tokens is cut when
 * the request allows it, else refused (*status 413 for TEI, 400 for OpenAI). */
static est_status build_rows(serve_job *job, served_model *m, const est_embed_request *req, est_embed_api api,
                             long long *tokens, unsigned *status) {
  const est_model_meta *meta = est_servable_meta(m->servable);
  const size_t S = (size_t)meta->max_seq_length, n = req->count;
  job->model = m;
  job->n = (int)n;
  job->ids = calloc(n * S, sizeof(int32_t)), job->mask = calloc(n * S, sizeof(int32_t));
  job->segs = calloc(n * S, sizeof(int32_t));
  job->probs = malloc(n * (size_t)est_servable_row_width(m->servable) * sizeof(float));
  *status = MHD_HTTP_INTERNAL_SERVER_ERROR;
  if (!job->ids || !job->mask || !job->segs || !job->probs) return est_error(EST_ERR_NO_MEMORY, "request");
  est_featurizer *f = NULL;
  est_status st = est_featurizer_create(&f, m->servable);
  const char *field = api == EST_EMBED_API_TEI ? "inputs" : "input";
  job->longest = 1;
  *tokens = 0;
  for (size_t i = 0; st == EST_OK && i < n; i++) {
    int count, len;
    st = est_featurizer_count_tokens(f, req->texts[i], NULL, &count);
    if (st == EST_OK && count > (int)S && req->truncate != 1) {
      *status = MHD_HTTP_CONTENT_TOO_LARGE; /* TEI's Validation, on both routes */
      st = est_error(EST_ERR_INVALID_ARGUMENT, "%s[%zu]: %d tokens, above the model's max_seq_length %zu%s", field, i,
                     count, S, api == EST_EMBED_API_TEI ? " (send \"truncate\": true to cut it)" : "");
      break;
    }
    if (st == EST_OK) st = est_featurizer_run(f, req->texts[i], NULL, job->ids + i * S, job->mask + i * S,
                                              job->segs + i * S, &len);
    if (st != EST_OK) break;
    if (len > job->longest) job->longest = len;
    *tokens += len;
  }
  est_featurizer_free(f);
  job->tokens = *tokens;
  return st;
}

char *serve_embed_answer(serve_http *h, est_embed_api api, const char *body, size_t size, bool *queued,
                         unsigned *status) {
  *queued = false;
  served_model *m = serve_acquire(h->server);
  if (!m) return *status = MHD_HTTP_SERVICE_UNAVAILABLE, error_body(api, *status, "no model is loaded");
  const est_model_meta *meta = est_servable_meta(m->servable);
  const est_served_head *head = est_model_meta_head(meta);
  if (!head->embedding_normalized) { /* not an embedding model: TEI's 424 */
    char msg[256];
    snprintf(msg, sizeof msg, "the served model's head is \"%s\", not an embedding model (est embed --export_dir "
             "writes one)", head->name);
    serve_release(h->server, m);
    return *status = 424, error_body(api, *status, msg);
  }
  if (!serve_tei_acquire(h)) {
    serve_release(h->server, m);
    return *status = 429, error_body(api, *status, "Model is overloaded (--max_concurrent_requests)");
  }
  /* TEI's max_client_batch_size (413) comes before est's queue bound (429) */
  est_request_limits lim = {meta->max_seq_length, meta->bert_config.vocab_size, meta->bert_config.type_vocab_size,
                            (size_t)h->opt->max_client_batch_size};
  est_embed_request req;
  serve_job job = {0};
  long long tokens = 0;
  *status = 422; /* a body that is not the route's schema (axum's answer in TEI) */
  est_status st = est_embed_request_parse(&req, api, body ? body : "", size, &lim);
  if (st != EST_OK && strstr(est_error_message(), " per request")) *status = 413; /* over max_client_batch_size */
  if (st != EST_OK && strstr(est_error_message(), ": empty;")) *status = 400;     /* TEI's Empty */
  if (st != EST_OK && strstr(est_error_message(), "\"prompt_name\"")) *status = 413; /* TEI: no such prompt */
  /* TEI's "truncate" defaults to --auto_truncate */
  if (st == EST_OK && req.truncate < 0) req.truncate = h->opt->auto_truncate;
  /* "dimensions" keeps the first so many floats (Matryoshka); TEI then normalizes */
  const int W = est_servable_output_width(m->servable), dims = req.dimensions ? req.dimensions : W;
  if (st == EST_OK && dims > W)
    *status = 413, st = est_error(EST_ERR_INVALID_ARGUMENT, "\"dimensions\": %d, above the model's %d", dims, W);
  /* TEI's normalize defaults to true; an export that normalises cannot give raw vectors (a
   * prefix of its unit vectors is normalised again) */
  const bool normalized = head->embedding_normalized(meta);
  const bool normalize = api == EST_EMBED_API_TEI ? req.normalize != 0 && (!normalized || dims < W)
                                                  : normalized && dims < W;
  if (st == EST_OK && api == EST_EMBED_API_TEI && req.normalize == 0 && normalized)
    st = est_error(EST_ERR_INVALID_ARGUMENT, "\"normalize\": false: this export's vectors are L2-normalised "
                   "(est_model.json \"pooling\".\"normalize\"); export without --normalize for raw ones");
  if (st == EST_OK) st = build_rows(&job, m, &req, api, &tokens, status);
  if (st == EST_OK) {
    *queued = true;
    st = serve_run_job(h->server, &job);
    *status = st == EST_OK ? MHD_HTTP_OK : st == EST_ERR_ABORTED ? 429 : 424;
  }
  char *text = st == EST_OK ? answer_body(api, &job, W, dims, normalize, req.model ? req.model : h->opt->model_name,
                                          tokens)
                            : error_body(api, *status, est_error_message());
  serve_tei_release(h);
  free(job.ids), free(job.mask), free(job.segs), free(job.probs);
  est_embed_request_clear(&req);
  serve_release(h->server, m);
  return text;
}
