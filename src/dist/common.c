/* The transport-independent half of est/dist.h, compiled in every build: the collective
 * timeout, the communication statistics, the shard arithmetic, the in-order interleave of
 * gathered rows, and the Estimator's hook over est_dist_* (est_dist_make_distribution).
 *
 * The transport is src/dist/mpi.c + mpi_grad_sync.c with MPI, src/dist/no_mpi.c without
 * (CMakeLists.txt picks); src/dist/one_rank.c is the Estimator's default distribution. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dist/dist_internal.h"
#include "est/dist.h"
#include "est/log.h"

/* 600 s: longer than any legitimate gap between two collectives (the chief writing a
 * BERT-Large checkpoint to a slow disk), far shorter than "forever". */
static double g_timeout = 600.0;

void est_dist_set_timeout(double seconds) {
  if (seconds > 0 && isfinite(seconds)) g_timeout = seconds;
}

double est_dist_timeout(void) { return g_timeout; }

void est_dist_load_timeout_from_env(void) {
  const char *t = getenv("EST_DIST_TIMEOUT");
  if (!t || !*t) return;
  char *end = NULL;
  double v = strtod(t, &end);
  if (end && *end == 0 && v > 0 && isfinite(v)) g_timeout = v;
  else EST_LOG_WARN("ignoring EST_DIST_TIMEOUT=%s (want seconds > 0)", t);
}

static est_dist_comm_stats g_stats;

void est_dist_stats_record(double bytes, double seconds) {
  g_stats.calls++;
  g_stats.bytes += bytes;
  g_stats.seconds += seconds;
}

est_dist_comm_stats est_dist_get_comm_stats(void) { return g_stats; }
void est_dist_reset_comm_stats(void) { memset(&g_stats, 0, sizeof g_stats); }

double est_dist_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

size_t est_dist_shard_rows(size_t total, int rank, int world) {
  if (world <= 0 || rank < 0 || rank >= world || (size_t)rank >= total) return 0;
  return (total - (size_t)rank + (size_t)world - 1) / (size_t)world;
}

int64_t est_dist_local_batch(int64_t global_batch, int rank, int world) {
  if (world <= 0 || rank < 0 || rank >= world || global_batch <= 0) return 0;
  return global_batch / world + (rank < global_batch % world ? 1 : 0);
}

est_status est_dist_interleave_rows(const void *const *blocks, const size_t *counts, int world,
                                    size_t row_bytes, void *out) {
  size_t total = 0;
  for (int r = 0; r < world; r++) total += counts[r];
  /* shard(N, r) of a `total`-row input gives rank r exactly ceil((total - r) / N) rows;
   * anything else means the ranks did not read one input the same way. */
  for (int r = 0; r < world; r++)
    if (counts[r] != est_dist_shard_rows(total, r, world))
      return est_error(EST_ERR_FAILED_PRECONDITION,
                       "gather: rank %d produced %zu rows but a %zu-row input sharded %d ways gives it %zu: the "
                       "ranks did not read the same input",
                       r, counts[r], total, world, est_dist_shard_rows(total, r, world));
  char *dst = out;
  for (size_t g = 0; g < total; g++) {
    int r = (int)(g % (size_t)world);
    const char *src = (const char *)blocks[r] + (g / (size_t)world) * row_bytes;
    memcpy(dst + g * row_bytes, src, row_bytes);
  }
  return EST_OK;
}

est_dist_grad_sync_config est_dist_grad_sync_default(void) {
  /* 16 MiB: BERT-Base's 440 MB of gradients in ~27 buckets, each large enough that
   * per-message latency is noise on 10 GbE (16 MiB takes ~13 ms there). */
  return (est_dist_grad_sync_config){.bucket_bytes = (size_t)16 << 20};
}

est_status est_dist_grad_sync_create_for_vars(est_dist_grad_sync **out, est_var_store *vs,
                                              const est_dist_grad_sync_config *config) {
  *out = NULL;
  if (!est_vars_finalized(vs)) return est_error(EST_ERR_FAILED_PRECONDITION, "grad_sync: variable store not finalized");
  size_t nv = est_vars_count(vs);
  size_t *off = malloc(sizeof(size_t) * (nv ? nv : 1)), *cnt = malloc(sizeof(size_t) * (nv ? nv : 1));
  if (!off || !cnt) {
    free(off);
    free(cnt);
    return est_error(EST_ERR_NO_MEMORY, "grad_sync: %zu variables", nv);
  }
  size_t k = 0;
  for (size_t i = 0; i < nv; i++) {
    const est_variable *v = est_vars_at(vs, i);
    if (!v->trainable) continue;
    off[k] = v->offset;
    cnt[k] = v->count;
    k++;
  }
  est_dist_grad_sync *s;
  est_status st = est_dist_grad_sync_create(&s, est_vars_grads(vs), est_vars_size(vs), config);
  if (st == EST_OK && (st = est_dist_grad_sync_set_layout(s, off, cnt, k)) != EST_OK) est_dist_grad_sync_free(s);
  free(off);
  free(cnt);
  if (st == EST_OK) *out = s;
  return st;
}

/* ---- the Estimator's hook ---- */

static est_status hook_allreduce_mean(void *ctx, float *data, size_t n) {
  (void)ctx;
  return est_dist_allreduce_f32(data, n, EST_DIST_MEAN);
}

static est_status hook_allreduce_sum(void *ctx, double *data, size_t n) {
  (void)ctx;
  return est_dist_allreduce_sum_f64(data, n);
}

static est_status hook_broadcast(void *ctx, float *data, size_t n) {
  (void)ctx;
  return est_dist_broadcast(data, n * sizeof(float), 0);
}

static est_status hook_allgather_i64(void *ctx, const int64_t *send, size_t n, int64_t *recv) {
  (void)ctx;
  return est_dist_allgather_i64(send, n, recv);
}

static est_status hook_barrier(void *ctx) {
  (void)ctx;
  return est_dist_barrier();
}

static est_status hook_gather_rows(void *ctx, const void *local, size_t local_rows, size_t row_bytes, void **out,
                                   size_t *total_rows) {
  (void)ctx;
  return est_dist_gather_rows(local, local_rows, row_bytes, out, total_rows);
}

static void hook_abort(void *ctx, int exit_code) {
  (void)ctx;
  est_dist_abort(exit_code);
}

/* The hook's bucketed gradient sync, made for the first var store that trains and made
 * again when another one (a new train() call) comes: keyed by the store, its buffer and
 * its size. One per process, as there is one MPI job; freed by est_dist_finalize. */
static struct {
  est_dist_grad_sync *sync;
  const est_var_store *vars;
  const float *grads;
  size_t n, nvars;
  size_t bucket_bytes;   /* 0: est_dist_grad_sync_default() */
} g_hook;

void est_dist_set_grad_bucket_bytes(size_t bytes) { g_hook.bucket_bytes = bytes; }

est_dist_grad_sync_stats est_dist_hook_grad_stats(void) {
  if (!g_hook.sync) return (est_dist_grad_sync_stats){0};
  return est_dist_grad_sync_get_stats(g_hook.sync);
}

void est_dist_hook_release(void) {
  est_dist_grad_sync_free(g_hook.sync);
  const size_t keep = g_hook.bucket_bytes;
  memset(&g_hook, 0, sizeof g_hook);
  g_hook.bucket_bytes = keep;
}

static est_status hook_grads_begin(void *ctx, est_var_store *vars, double weight) {
  (void)ctx;
  if (!g_hook.sync || g_hook.vars != vars || g_hook.grads != est_vars_grads(vars) || g_hook.n != est_vars_size(vars) ||
      g_hook.nvars != est_vars_count(vars)) {
    est_dist_hook_release();
    est_dist_grad_sync_config c = est_dist_grad_sync_default();
    if (g_hook.bucket_bytes) c.bucket_bytes = g_hook.bucket_bytes;
    est_status st = est_dist_grad_sync_create_for_vars(&g_hook.sync, vars, &c);
    if (st != EST_OK) return st;
    g_hook.vars = vars;
    g_hook.grads = est_vars_grads(vars);
    g_hook.n = est_vars_size(vars);
    g_hook.nvars = est_vars_count(vars);
  }
  return est_dist_grad_sync_begin(g_hook.sync, weight);
}

static est_status hook_grads_ready(void *ctx, size_t offset, size_t count) {
  (void)ctx;
  if (!g_hook.sync) return est_error(EST_ERR_FAILED_PRECONDITION, "grads_ready before grads_begin");
  return est_dist_grad_sync_ready(g_hook.sync, offset, count);
}

static est_status hook_grads_finish(void *ctx) {
  (void)ctx;
  if (!g_hook.sync) return est_error(EST_ERR_FAILED_PRECONDITION, "grads_finish before grads_begin");
  return est_dist_grad_sync_finish(g_hook.sync);
}

void est_dist_make_distribution(est_distribution *out) {
  memset(out, 0, sizeof *out);
  out->rank = est_dist_rank();
  out->world_size = est_dist_world_size();
  out->allreduce_mean = hook_allreduce_mean;
  out->allreduce_sum = hook_allreduce_sum;
  out->broadcast = hook_broadcast;
  out->allgather_i64 = hook_allgather_i64;
  out->barrier = hook_barrier;
  out->gather_rows = hook_gather_rows;
  out->abort = hook_abort;
  out->grads_begin = hook_grads_begin;
  out->grads_ready = hook_grads_ready;
  out->grads_finish = hook_grads_finish;
}

est_status est_dist_configure_run_config(est_run_config *rc, est_distribution *hook) {
  int world = est_dist_world_size();
  if (world <= 1) return EST_OK;
  if (rc->train_batch_size % world != 0)
    return est_error(EST_ERR_INVALID_ARGUMENT,
                     "train_batch_size=%d is the global batch and must divide evenly over the %d ranks", rc->train_batch_size,
                     world);
  est_dist_make_distribution(hook);
  rc->distribution = hook;
  rc->train_batch_size /= world;
  if (rc->eval_batch_size % world == 0) rc->eval_batch_size /= world;
  else if (est_dist_is_chief())
    EST_LOG_WARN("eval_batch_size=%d does not divide over %d ranks: each rank evaluates batches of %d (metrics are "
                 "exact sums; the mean-of-batch-means \"loss\" averages batches of %d rows, so it can differ "
                 "slightly from one process)",
                 rc->eval_batch_size, world, rc->eval_batch_size, rc->eval_batch_size * world);
  if (rc->predict_batch_size % world == 0) rc->predict_batch_size /= world;
  if (est_dist_is_chief())
    EST_LOG_INFO("data parallel: %d ranks x train batch %d (global %d)", world, rc->train_batch_size,
                 rc->train_batch_size * world);
  return EST_OK;
}
