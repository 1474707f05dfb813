/* The one-rank distribution: what an Estimator uses when its run config names none.
 *
 * Every collective over one rank is the identity (a sum, mean or gather of one rank's
 * values is those values), so the Estimator runs the same step loop, the same agreement
 * and the same gradient hook calls in one process as on N ranks, and none of its code
 * asks how many ranks there are. Stateless, so any number of estimators (in any threads)
 * share the one instance. */
#include <stdlib.h>
#include <string.h>

#include "est/dist.h"

static est_status one_allreduce_mean(void *ctx, float *data, size_t n) {
  (void)ctx, (void)data, (void)n;
  return EST_OK;
}

static est_status one_allreduce_sum(void *ctx, double *data, size_t n) {
  (void)ctx, (void)data, (void)n;
  return EST_OK;
}

static est_status one_broadcast(void *ctx, float *data, size_t n) {
  (void)ctx, (void)data, (void)n;
  return EST_OK;
}

static est_status one_allgather_i64(void *ctx, const int64_t *send, size_t n, int64_t *recv) {
  (void)ctx;
  if (n && recv != send) memmove(recv, send, n * sizeof *send);
  return EST_OK;
}

static est_status one_barrier(void *ctx) {
  (void)ctx;
  return EST_OK;
}

static est_status one_gather_rows(void *ctx, const void *local, size_t local_rows, size_t row_bytes, void **out,
                                  size_t *total_rows) {
  (void)ctx;
  *total_rows = local_rows;
  *out = malloc(local_rows && row_bytes ? local_rows * row_bytes : 1);
  if (!*out) return est_error(EST_ERR_NO_MEMORY, "gather of %zu rows", local_rows);
  if (local_rows && row_bytes) memcpy(*out, local, local_rows * row_bytes);
  return EST_OK;
}

static void one_abort(void *ctx, int exit_code) { (void)ctx, (void)exit_code; }

/* One rank's weight is 1 (the mean over one rank, or the sum): the combined gradient is
 * the local one, so there is nothing to scale or send. */
static est_status one_grads_begin(void *ctx, est_var_store *vars, double weight) {
  (void)ctx, (void)vars;
  if (weight != 1.0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "one-rank gradient reduction: weight %g (one rank's is 1)", weight);
  return EST_OK;
}

static est_status one_grads_ready(void *ctx, size_t offset, size_t count) {
  (void)ctx, (void)offset, (void)count;
  return EST_OK;
}

static est_status one_grads_finish(void *ctx) {
  (void)ctx;
  return EST_OK;
}

static const est_distribution ONE_RANK = {
  .rank = 0,
  .world_size = 1,
  .allreduce_mean = one_allreduce_mean,
  .allreduce_sum = one_allreduce_sum,
  .broadcast = one_broadcast,
  .allgather_i64 = one_allgather_i64,
  .barrier = one_barrier,
  .gather_rows = one_gather_rows,
  .abort = one_abort,
  .grads_begin = one_grads_begin,
  .grads_ready = one_grads_ready,
  .grads_finish = one_grads_finish,
};

const est_distribution *est_dist_one_rank(void) { return &ONE_RANK; }
