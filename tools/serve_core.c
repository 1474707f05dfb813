/* `est serve`'s core (serve_internal.h): the served version and its hot swap, the bounded
 * queue, dynamic batching, and the metrics.
 *
 * Batching, as TF Serving's BasicBatchScheduler: the batcher takes the oldest job, then
 * waits up to batch_timeout_micros for more jobs of the same model until max_batch_size
 * examples are there (but only while some POST is still arriving or being parsed; with
 * none on its way, waiting would add latency and nothing else), and runs them as one forward pass at the batch's own length (its
 * longest row rounded up to 8). A job larger than max_batch_size runs alone, in pieces.
 * --max_batch_tokens (TEI's token-budget batching) also stops a batch before its jobs' real
 * tokens pass the budget; the oldest job always runs.
 * Versions: the poller looks at model_base_path every poll_wait_seconds; a newer complete
 * version is loaded beside the serving one and swapped in under the lock; the old one is
 * freed when its last job is done. A version that fails to load is logged and not retried. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commands.h"
#include "est/log.h"
#include "serve_internal.h"

/* ---- metrics ---------------------------------------------------------------------------- */

static const double latency_bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
enum { NLAT = sizeof latency_bounds / sizeof latency_bounds[0], NBATCH = 11, NTOKENS = 15 };
static const int status_codes[] = {200, 400, 404, 405, 413, 500, 503};
enum { NSTATUS = sizeof status_codes / sizeof status_codes[0] };

struct serve_metrics {
  pthread_mutex_t lock;
  uint64_t requests[NSTATUS + 1];      /* by status; the last slot: any other code */
  uint64_t latency[NLAT + 1];          /* cumulative buckets are summed on output */
  double latency_sum;
  uint64_t batches[NBATCH + 1];        /* bounds 1, 2, 4, ..., 1024 */
  double batch_sum;
  uint64_t batch_tokens[NTOKENS + 1];  /* bounds 8, 16, ..., 131072 */
  double batch_tokens_sum;
};

void serve_metrics_request(serve_server *s, int http_status, double seconds) {
  serve_metrics *m = s->metrics;
  pthread_mutex_lock(&m->lock);
  int k = 0;
  while (k < NSTATUS && status_codes[k] != http_status) k++;
  m->requests[k]++;
  int b = 0;
  while (b < NLAT && seconds > latency_bounds[b]) b++;
  m->latency[b]++;
  m->latency_sum += seconds;
  pthread_mutex_unlock(&m->lock);
}

static void metrics_batch(serve_server *s, int size, int64_t tokens) {
  serve_metrics *m = s->metrics;
  pthread_mutex_lock(&m->lock);
  int b = 0;
  while (b < NBATCH && size > (1 << b)) b++;
  m->batches[b]++;
  m->batch_sum += size;
  b = 0;
  while (b < NTOKENS && tokens > (8 << b)) b++;
  m->batch_tokens[b]++;
  m->batch_tokens_sum += (double)tokens;
  pthread_mutex_unlock(&m->lock);
}

/* One Prometheus histogram of counts[nb + 1] over bounds base << k. */
static void histogram(FILE *f, const char *name, const char *help, const uint64_t *counts, int nb, int base,
                      double sum) {
  fprintf(f, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
  uint64_t cum = 0;
  for (int k = 0; k <= nb; k++) {
    cum += counts[k];
    if (k < nb) fprintf(f, "%s_bucket{le=\"%d\"} %llu\n", name, base << k, (unsigned long long)cum);
    else fprintf(f, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)cum);
  }
  fprintf(f, "%s_sum %.17g\n%s_count %llu\n", name, sum, name, (unsigned long long)cum);
}

void serve_metrics_batches_tei(serve_server *s, FILE *f) {
  serve_metrics *m = s->metrics;
  pthread_mutex_lock(&m->lock);
  histogram(f, "te_batch_next_size", "Examples per forward pass.", m->batches, NBATCH, 1, m->batch_sum);
  histogram(f, "te_batch_next_tokens", "Real tokens per forward pass.", m->batch_tokens, NTOKENS, 8,
            m->batch_tokens_sum);
  pthread_mutex_unlock(&m->lock);
}

void serve_queue_size(serve_server *s, size_t *examples, int64_t *tokens) {
  pthread_mutex_lock(&s->lock);
  *examples = s->queued;
  *tokens = 0;
  for (const serve_job *j = s->head; j; j = j->next) *tokens += j->tokens;
  pthread_mutex_unlock(&s->lock);
}

char *serve_metrics_text(serve_server *s) {
  serve_metrics *m = s->metrics;
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) return NULL;
  const char *name = s->opt.model_name;
  pthread_mutex_lock(&s->lock);
  long long version = s->current ? (long long)s->current->version : -1;
  size_t queued = s->queued;
  int preparing = s->preparing;
  pthread_mutex_unlock(&s->lock);
  pthread_mutex_lock(&m->lock);
  fprintf(f, "# HELP est_serving_request_count Requests answered, by HTTP status.\n"
             "# TYPE est_serving_request_count counter\n");
  for (int k = 0; k <= NSTATUS; k++) {
    if (k < NSTATUS) fprintf(f, "est_serving_request_count{model_name=\"%s\",status=\"%d\"} %llu\n", name,
                             status_codes[k], (unsigned long long)m->requests[k]);
    else fprintf(f, "est_serving_request_count{model_name=\"%s\",status=\"other\"} %llu\n", name,
                 (unsigned long long)m->requests[k]);
  }
  fprintf(f, "# HELP est_serving_request_latency_seconds Time from a request's start to its answer.\n"
             "# TYPE est_serving_request_latency_seconds histogram\n");
  uint64_t cum = 0;
  for (int b = 0; b < NLAT; b++) {
    cum += m->latency[b];
    fprintf(f, "est_serving_request_latency_seconds_bucket{model_name=\"%s\",le=\"%g\"} %llu\n", name,
            latency_bounds[b], (unsigned long long)cum);
  }
  cum += m->latency[NLAT];
  fprintf(f, "est_serving_request_latency_seconds_bucket{model_name=\"%s\",le=\"+Inf\"} %llu\n", name,
          (unsigned long long)cum);
  fprintf(f, "est_serving_request_latency_seconds_sum{model_name=\"%s\"} %.6f\n", name, m->latency_sum);
  fprintf(f, "est_serving_request_latency_seconds_count{model_name=\"%s\"} %llu\n", name, (unsigned long long)cum);
  fprintf(f, "# HELP est_serving_batch_size Examples per forward pass.\n# TYPE est_serving_batch_size histogram\n");
  cum = 0;
  for (int b = 0; b < NBATCH; b++) {
    cum += m->batches[b];
    fprintf(f, "est_serving_batch_size_bucket{model_name=\"%s\",le=\"%d\"} %llu\n", name, 1 << b,
            (unsigned long long)cum);
  }
  cum += m->batches[NBATCH];
  fprintf(f, "est_serving_batch_size_bucket{model_name=\"%s\",le=\"+Inf\"} %llu\n", name, (unsigned long long)cum);
  fprintf(f, "est_serving_batch_size_sum{model_name=\"%s\"} %.0f\n", name, m->batch_sum);
  fprintf(f, "est_serving_batch_size_count{model_name=\"%s\"} %llu\n", name, (unsigned long long)cum);
  pthread_mutex_unlock(&m->lock);
  fprintf(f, "# HELP est_serving_queued_examples Examples waiting for the batcher.\n"
             "# TYPE est_serving_queued_examples gauge\nest_serving_queued_examples{model_name=\"%s\"} %zu\n",
          name, queued);
  fprintf(f, "# HELP est_serving_requests_arriving POST requests begun and not yet queued.\n"
             "# TYPE est_serving_requests_arriving gauge\nest_serving_requests_arriving{model_name=\"%s\"} %d\n",
          name, preparing);
  fprintf(f, "# HELP est_serving_model_version The version being served.\n"
             "# TYPE est_serving_model_version gauge\nest_serving_model_version{model_name=\"%s\"} %lld\n",
          name, version);
  fclose(f);
  return buf;
}

/* ---- the served model ------------------------------------------------------------------- */

served_model *serve_acquire(serve_server *s) {
  pthread_mutex_lock(&s->lock);
  served_model *m = s->current;
  if (m) m->refs++;
  pthread_mutex_unlock(&s->lock);
  return m;
}

static void release_locked(serve_server *s, served_model *m) {
  (void)s;
  if (m && --m->refs == 0) {
    EST_LOG_INFO("unloaded version %lld", (long long)m->version);
    est_servable_free(m->servable);
    est_tokenizer_free(m->tokenizer);
    pthread_mutex_destroy(&m->tokenizer_lock);
    free(m);
  }
}

void serve_release(serve_server *s, served_model *m) {
  if (!m) return;
  pthread_mutex_lock(&s->lock);
  release_locked(s, m);
  pthread_mutex_unlock(&s->lock);
}

static double monotonic_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static est_status load_model(serve_server *s, const char *dir, served_model **out) {
  *out = NULL;
  served_model *m = calloc(1, sizeof *m);
  if (!m) return est_error(EST_ERR_NO_MEMORY, "model");
  est_status st = est_servable_load(&m->servable, dir, s->opt.max_batch_size);
  if (st != EST_OK) {
    free(m);
    return st;
  }
  /* Each version runs its own precision: the flag's, else the one its est_model.json records
   * (est/precision.h), so versions of different precisions are served side by side. */
  st = est_cli_apply_model_precision(s->opt.precision, m->servable);
  if (st != EST_OK) {
    est_servable_free(m->servable);
    free(m);
    return st;
  }
  /* One forward pass of the largest batch the batcher can form (max_batch_size rows of
   * max_seq_length) before the version is served. The servable reserves its activations
   * for that shape at load, but their pages are only touched by the first batch that large:
   * without this the first real request paid for touching the scratch memory (a BERT-Base
   * version's first answer took 0.2-1.3 s against 70-130 ms after), and the RSS stepped up
   * whenever the first full batch came (bench/README.md, sustained load), so memory was
   * not at its final size when serving began. A version that cannot run is refused here
   * like one that cannot load. Ids 0 with a full mask are a valid row of any vocabulary.
   * Cost: one forward of max_batch_size x max_seq_length tokens per version loaded. */
  const est_model_meta *meta = est_servable_meta(m->servable);
  const size_t S = (size_t)meta->max_seq_length, B = (size_t)est_servable_max_batch(m->servable);
  const size_t C = (size_t)est_servable_row_width(m->servable); /* floats per example */
  int32_t *rows = calloc(3 * B * S, sizeof(int32_t));
  float *probs = malloc(B * C * sizeof(float));
  if (!rows || !probs) st = est_error(EST_ERR_NO_MEMORY, "warm-up batch of %zu x %zu", B, S);
  for (size_t t = 0; st == EST_OK && t < B * S; t++) rows[B * S + t] = 1;
  const double t0 = monotonic_seconds();
  if (st == EST_OK)
    st = est_servable_predict_rows(m->servable, rows, rows + B * S, rows + 2 * B * S, (int)B, (int)S, (int)S, probs,
                                   NULL);
  free(rows), free(probs);
  if (st == EST_OK)
    EST_LOG_INFO("warm-up: one batch of %zu x %zu tokens in %.2f s", B, S, monotonic_seconds() - t0);
  if (st != EST_OK) {
    st = est_error_prefix("warm-up forward pass: ");
    est_servable_free(m->servable);
    free(m);
    return st;
  }
  pthread_mutex_init(&m->tokenizer_lock, NULL);
  m->version = est_servable_version(m->servable);
  m->refs = 1;
  *out = m;
  return EST_OK;
}

/* One look at model_base_path: load and swap in a newer version. */
static void poll_versions(serve_server *s) {
  char dir[4096];
  int64_t v;
  if (est_export_resolve(s->opt.model_base_path, dir, sizeof dir, &v) != EST_OK) return;
  pthread_mutex_lock(&s->lock);
  bool newer = s->current && v > s->current->version && v != s->failed_version;
  pthread_mutex_unlock(&s->lock);
  if (!newer) return;
  served_model *m;
  if (load_model(s, dir, &m) != EST_OK) {
    EST_LOG_ERROR("version %lld under %s not loaded, still serving the current one: %s", (long long)v,
                  s->opt.model_base_path, est_error_message());
    pthread_mutex_lock(&s->lock);
    s->failed_version = v;
    pthread_mutex_unlock(&s->lock);
    return;
  }
  pthread_mutex_lock(&s->lock);
  served_model *old = s->current;
  s->current = m;
  release_locked(s, old);
  pthread_mutex_unlock(&s->lock);
  EST_LOG_INFO("serving %s version %lld", s->opt.model_name, (long long)m->version);
}

static void deadline_in(struct timespec *t, double seconds) {
  clock_gettime(CLOCK_REALTIME, t);
  long long ns = (long long)(seconds * 1e9) + t->tv_nsec;
  t->tv_sec += ns / 1000000000LL;
  t->tv_nsec = ns % 1000000000LL;
}

static void *poller_main(void *arg) {
  serve_server *s = arg;
  pthread_mutex_lock(&s->lock);
  while (!s->stopping) {
    struct timespec t;
    deadline_in(&t, s->opt.poll_wait_seconds);
    int rc = 0;
    while (!s->stopping && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&s->poll_cv, &s->lock, &t);
    if (s->stopping) break;
    pthread_mutex_unlock(&s->lock);
    poll_versions(s);
    pthread_mutex_lock(&s->lock);
  }
  pthread_mutex_unlock(&s->lock);
  return NULL;
}

/* ---- queue and batcher --------------------------------------------------------------------- */

static size_t queue_capacity(const serve_server *s) {
  return (size_t)s->opt.max_enqueued_batches * (size_t)s->opt.max_batch_size;
}

void serve_prepare_begin(serve_server *s) {
  pthread_mutex_lock(&s->lock);
  s->preparing++;
  pthread_mutex_unlock(&s->lock);
}

void serve_prepare_abandon(serve_server *s) {
  pthread_mutex_lock(&s->lock);
  s->preparing--;
  pthread_cond_signal(&s->work_cv);   /* a batch may have been waiting for this one */
  pthread_mutex_unlock(&s->lock);
}

est_status serve_run_job(serve_server *s, serve_job *job) {
  pthread_mutex_lock(&s->lock);
  s->preparing--;
  if (s->stopping || (s->queued > 0 && s->queued + (size_t)job->n > queue_capacity(s))) {
    pthread_mutex_unlock(&s->lock);
    return est_error(EST_ERR_ABORTED, s->stopping ? "the server is shutting down"
                                                  : "the batch queue is full; retry later");
  }
  job->done = false;
  job->next = NULL;
  if (s->tail) s->tail->next = job;
  else s->head = job;
  s->tail = job;
  s->queued += (size_t)job->n;
  pthread_cond_signal(&s->work_cv);
  while (!job->done) pthread_cond_wait(&s->done_cv, &s->lock);
  pthread_mutex_unlock(&s->lock);
  if (job->status != EST_OK) return est_error(job->status, "%s", job->error);
  return EST_OK;
}

/* Examples queued for model m that a batch of `room` more examples could take. */
static int fill_for(const serve_server *s, const served_model *m, int room) {
  int n = 0;
  for (const serve_job *j = s->head; j && n < room; j = j->next)
    if (j->model == m && j->n <= room - n) n += j->n;
  return n;
}

/* Runs the gathered jobs as one forward pass (lock not held). */
static void run_batch(serve_server *s, serve_job **jobs, int njobs) {
  est_servable *sv = jobs[0]->model->servable;
  const est_model_meta *meta = est_servable_meta(sv);
  const int S = meta->max_seq_length, C = est_servable_row_width(sv);
  int total = 0, longest = 1;
  int64_t tokens = 0;
  for (int i = 0; i < njobs; i++) {
    total += jobs[i]->n;
    tokens += jobs[i]->tokens;
    if (jobs[i]->longest > longest) longest = jobs[i]->longest;
  }
  est_status st = EST_OK;
  const int32_t *ids = jobs[0]->ids, *mask = jobs[0]->mask, *segs = jobs[0]->segs;
  float *probs = jobs[0]->probs;
  if (njobs > 1) {
    /* Grown to the largest batch seen; S and C may change with the version. */
    size_t need = (size_t)total * S, need_probs = (size_t)total * C;
    if (need > s->batch_cap) {
      free(s->batch_ids), free(s->batch_mask), free(s->batch_segs);
      s->batch_ids = malloc(need * sizeof(int32_t));
      s->batch_mask = malloc(need * sizeof(int32_t));
      s->batch_segs = malloc(need * sizeof(int32_t));
      s->batch_cap = s->batch_ids && s->batch_mask && s->batch_segs ? need : 0;
    }
    if (need_probs > s->batch_probs_cap) {
      free(s->batch_probs);
      s->batch_probs = malloc(need_probs * sizeof(float));
      s->batch_probs_cap = s->batch_probs ? need_probs : 0;
    }
    if (s->batch_cap < need || s->batch_probs_cap < need_probs)
      st = est_error(EST_ERR_NO_MEMORY, "batch of %d examples", total);
    size_t off = 0;
    for (int i = 0; st == EST_OK && i < njobs; i++) {
      size_t n = (size_t)jobs[i]->n * S;
      memcpy(s->batch_ids + off, jobs[i]->ids, n * sizeof(int32_t));
      memcpy(s->batch_mask + off, jobs[i]->mask, n * sizeof(int32_t));
      memcpy(s->batch_segs + off, jobs[i]->segs, n * sizeof(int32_t));
      off += n;
    }
    ids = s->batch_ids, mask = s->batch_mask, segs = s->batch_segs, probs = s->batch_probs;
  }
  /* the encoder's output per token, when a job asks for it (TEI's /embed_all): a batch of
   * one writes it into the job, a larger batch into a buffer of its own */
  const size_t T = (size_t)S * (size_t)meta->bert_config.hidden_size;
  float *token_out = NULL;
  bool own_tokens = false;
  for (int i = 0; i < njobs; i++)
    if (jobs[i]->token_out) token_out = jobs[i]->token_out;
  if (token_out && njobs > 1 && st == EST_OK) {
    own_tokens = true;
    if (!(token_out = malloc((size_t)total * T * sizeof(float))))
      st = est_error(EST_ERR_NO_MEMORY, "token outputs of %d examples", total);
  }
  if (st == EST_OK)
    st = est_servable_predict_rows(sv, ids, mask, segs, total, S, est_serving_bucket_length(longest, S), probs,
                                   token_out);
  metrics_batch(s, total, tokens);
  size_t off = 0, row = 0;
  for (int i = 0; i < njobs; i++) {
    jobs[i]->status = st;
    if (st != EST_OK) snprintf(jobs[i]->error, sizeof jobs[i]->error, "%s", est_error_message());
    else if (njobs > 1) memcpy(jobs[i]->probs, probs + off, (size_t)jobs[i]->n * C * sizeof(float));
    if (st == EST_OK && own_tokens && jobs[i]->token_out)
      memcpy(jobs[i]->token_out, token_out + row * T, (size_t)jobs[i]->n * T * sizeof(float));
    off += (size_t)jobs[i]->n * C;
    row += (size_t)jobs[i]->n;
  }
  if (own_tokens) free(token_out);
}

static void *batcher_main(void *arg) {
  serve_server *s = arg;
  const int maxb = s->opt.max_batch_size;
  serve_job **jobs = s->batch_jobs;
  pthread_mutex_lock(&s->lock);
  for (;;) {
    while (!s->head && !s->stopping) pthread_cond_wait(&s->work_cv, &s->lock);
    if (!s->head) break; /* stopping with nothing left */
    served_model *m = s->head->model;
    if (s->opt.enable_batching && s->opt.batch_timeout_micros > 0 && s->head->n < maxb) {
      struct timespec t;
      deadline_in(&t, (double)s->opt.batch_timeout_micros * 1e-6);
      int rc = 0;
      /* Waiting only makes sense while another request is on its way: a lone request
       * (one connection) runs at once instead of paying the timeout. */
      while (!s->stopping && !s->draining && s->preparing > 0 && rc != ETIMEDOUT && fill_for(s, m, maxb) < maxb)
        rc = pthread_cond_timedwait(&s->work_cv, &s->lock, &t);
    }
    /* Take the head, then (batching) every later job of the same model that still fits. */
    int njobs = 0, total = 0;
    int64_t tokens = 0; /* --max_batch_tokens: TEI's token budget of a batch */
    const int64_t max_tokens = s->opt.max_batch_tokens > 0 ? s->opt.max_batch_tokens : INT64_MAX;
    serve_job **link = &s->head, *prev = NULL;
    while (*link && njobs < maxb) {
      serve_job *j = *link;
      bool take = njobs == 0 || (s->opt.enable_batching && j->model == m && total + j->n <= maxb &&
                                 tokens + j->tokens <= max_tokens);
      if (!take) {
        prev = j;
        link = &j->next;
        continue;
      }
      *link = j->next;
      if (s->tail == j) s->tail = prev;
      jobs[njobs++] = j;
      total += j->n;
      tokens += j->tokens;
      s->queued -= (size_t)j->n;
      if (!s->opt.enable_batching || total >= maxb) break;
    }
    pthread_mutex_unlock(&s->lock);
    run_batch(s, jobs, njobs);
    pthread_mutex_lock(&s->lock);
    for (int i = 0; i < njobs; i++) jobs[i]->done = true;
    pthread_cond_broadcast(&s->done_cv);
  }
  pthread_mutex_unlock(&s->lock);
  return NULL;
}

/* ---- start / stop ---------------------------------------------------------------------------- */

est_status serve_server_start(serve_server *s, const serve_options *opt) {
  memset(s, 0, sizeof *s);
  s->opt = *opt;
  s->failed_version = -1;
  s->metrics = calloc(1, sizeof *s->metrics);
  if (!s->metrics) return est_error(EST_ERR_NO_MEMORY, "metrics");
  pthread_mutex_init(&s->metrics->lock, NULL);
  pthread_mutex_init(&s->lock, NULL);
  pthread_cond_init(&s->work_cv, NULL);
  pthread_cond_init(&s->done_cv, NULL);
  pthread_cond_init(&s->poll_cv, NULL);
  s->batch_jobs = malloc((size_t)opt->max_batch_size * sizeof *s->batch_jobs);
  if (!s->batch_jobs) return est_error(EST_ERR_NO_MEMORY, "batch");
  /* The newest version that loads; broken newer ones are logged and passed over. */
  char dir[4096];
  int64_t below = INT64_MAX, v;
  est_status st;
  for (;;) {
    st = est_export_resolve_below(opt->model_base_path, below, dir, sizeof dir, &v);
    if (st != EST_OK) return st;
    if ((st = load_model(s, dir, &s->current)) == EST_OK) break;
    EST_LOG_ERROR("version %lld under %s not loaded: %s", (long long)v, opt->model_base_path, est_error_message());
    if (s->failed_version < 0) s->failed_version = v;
    below = v;
  }
  EST_LOG_INFO("serving %s version %lld from %s", opt->model_name, (long long)s->current->version,
               est_servable_dir(s->current->servable));
  if (pthread_create(&s->batcher, NULL, batcher_main, s) != 0)
    return est_error(EST_ERR_INTERNAL, "cannot start the batching thread");
  if (opt->poll_wait_seconds > 0 && pthread_create(&s->poller, NULL, poller_main, s) != 0)
    return est_error(EST_ERR_INTERNAL, "cannot start the version poller");
  return EST_OK;
}

void serve_server_drain(serve_server *s) {
  pthread_mutex_lock(&s->lock);
  s->draining = true;
  pthread_cond_broadcast(&s->work_cv);
  pthread_mutex_unlock(&s->lock);
}

void serve_server_stop(serve_server *s) {
  pthread_mutex_lock(&s->lock);
  s->stopping = true;
  pthread_cond_broadcast(&s->work_cv);
  pthread_cond_broadcast(&s->poll_cv);
  pthread_mutex_unlock(&s->lock);
  pthread_join(s->batcher, NULL);
  if (s->opt.poll_wait_seconds > 0) pthread_join(s->poller, NULL);
  pthread_mutex_lock(&s->lock);
  release_locked(s, s->current);
  s->current = NULL;
  pthread_mutex_unlock(&s->lock);
  free(s->batch_ids), free(s->batch_mask), free(s->batch_segs), free(s->batch_probs);
  free(s->batch_jobs);
  free(s->metrics);
}
