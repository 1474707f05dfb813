/* est/dist.h without MPI: every collective over one rank (a sum over one rank is the
 * identity), so callers never need an #ifdef and the same code path (weights, buckets)
 * runs in a single process. CMakeLists.txt compiles this file only in builds without
 * MPI; src/dist/mpi.c and mpi_grad_sync.c are the MPI transport. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dist/dist_internal.h"
#include "est/dist.h"


int est_dist_built_with_mpi(void) { return 0; }
int est_dist_active(void) { return 0; }
int est_dist_rank(void) { return 0; }
int est_dist_world_size(void) { return 1; }
int est_dist_is_chief(void) { return 1; }

est_status est_dist_init(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  est_dist_load_timeout_from_env();
  const char *mode = getenv("EST_DIST");
  if (mode && !strcmp(mode, "mpi"))
    return est_error(EST_ERR_UNIMPLEMENTED, "EST_DIST=mpi, but this est was built without MPI");
  return EST_OK;
}

void est_dist_finalize(void) { est_dist_hook_release(); }
void est_dist_abort(int exit_code) { (void)exit_code; }
est_status est_dist_barrier(void) { return EST_OK; }

est_status est_dist_allreduce_f32(float *buf, size_t n, est_dist_reduce op) {
  (void)buf;
  (void)n;
  (void)op;
  return EST_OK;
}

est_status est_dist_allreduce_sum_f64(double *buf, size_t n) {
  (void)buf;
  (void)n;
  return EST_OK;
}

est_status est_dist_allreduce_sum_i64(int64_t *buf, size_t n) {
  (void)buf;
  (void)n;
  return EST_OK;
}

est_status est_dist_allreduce_max_f64(double *buf, size_t n) {
  (void)buf;
  (void)n;
  return EST_OK;
}

est_status est_dist_broadcast(void *buf, size_t bytes, int root) {
  (void)buf;
  (void)bytes;
  if (root != 0) return est_error(EST_ERR_INVALID_ARGUMENT, "broadcast root %d is not a rank of 1", root);
  return EST_OK;
}

est_status est_dist_allgather_i64(const int64_t *send, size_t n, int64_t *recv) {
  if (recv != send) memmove(recv, send, n * sizeof *send);
  return EST_OK;
}

est_status est_dist_check_same(const void *buf, size_t bytes, const char *what) {
  (void)buf;
  (void)bytes;
  (void)what;
  return EST_OK;
}

est_status est_dist_gather_rows(const void *local, size_t local_rows, size_t row_bytes, void **out,
                                size_t *total_rows) {
  *total_rows = local_rows;
  *out = malloc(local_rows && row_bytes ? local_rows * row_bytes : 1);
  if (!*out) return est_error(EST_ERR_NO_MEMORY, "gather of %zu rows", local_rows);
  if (local_rows) memcpy(*out, local, local_rows * row_bytes);
  return EST_OK;
}

/* One rank: the "all-reduce" of a bucket is scaling it by the weight. */
struct est_dist_grad_sync {
  float *grads;
  size_t n;
  double weight;
  int in_step;
  est_dist_grad_sync_stats stats;
};

est_status est_dist_grad_sync_create(est_dist_grad_sync **out, float *grads, size_t n,
                                     const est_dist_grad_sync_config *config) {
  (void)config;
  *out = NULL;
  if (!grads && n) return est_error(EST_ERR_INVALID_ARGUMENT, "grad_sync: NULL gradient buffer of %zu floats", n);
  est_dist_grad_sync *s = calloc(1, sizeof *s);
  if (!s) return est_error(EST_ERR_NO_MEMORY, "grad_sync");
  s->grads = grads;
  s->n = n;
  s->weight = 1.0;
  s->stats.buckets = 1;
  *out = s;
  return EST_OK;
}

void est_dist_grad_sync_free(est_dist_grad_sync *s) { free(s); }

est_status est_dist_grad_sync_set_layout(est_dist_grad_sync *s, const size_t *offsets, const size_t *counts,
                                         size_t nranges) {
  for (size_t r = 0; r < nranges; r++)
    if (offsets[r] > s->n || counts[r] > s->n - offsets[r])
      return est_error(EST_ERR_INVALID_ARGUMENT, "grad_sync: range %zu [%zu, +%zu) outside the %zu-float buffer", r,
                       offsets[r], counts[r], s->n);
  return EST_OK;
}

est_status est_dist_grad_sync_begin(est_dist_grad_sync *s, double weight) {
  if (s->in_step) return est_error(EST_ERR_FAILED_PRECONDITION, "grad_sync: begin twice without finish");
  if (!(weight > 0.0) || !isfinite(weight))
    return est_error(EST_ERR_INVALID_ARGUMENT, "grad_sync: weight %g must be positive", weight);
  s->weight = weight;
  s->in_step = 1;
  return EST_OK;
}

est_status est_dist_grad_sync_ready(est_dist_grad_sync *s, size_t offset, size_t count) {
  if (!s->in_step) return est_error(EST_ERR_FAILED_PRECONDITION, "grad_sync: ready() outside begin/finish");
  if (offset > s->n || count > s->n - offset)
    return est_error(EST_ERR_INVALID_ARGUMENT, "grad_sync: ready range [%zu, +%zu) outside the %zu-float buffer",
                     offset, count, s->n);
  return EST_OK;
}

est_status est_dist_grad_sync_finish(est_dist_grad_sync *s) {
  if (!s->in_step) return est_error(EST_ERR_FAILED_PRECONDITION, "grad_sync: finish() without begin()");
  s->in_step = 0;
  if (s->weight != 1.0) {
    const float w = (float)s->weight;
    for (size_t i = 0; i < s->n; i++) s->grads[i] *= w;
  }
  s->stats.steps++;
  s->stats.bytes += (double)s->n * sizeof(float);
  return EST_OK;
}

est_dist_grad_sync_stats est_dist_grad_sync_get_stats(const est_dist_grad_sync *s) { return s->stats; }
