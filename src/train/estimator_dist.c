/* The Estimator's collectives over its distribution hook (est_run_config.distribution):
 * agreement on failure, and the per-step gradient reduction with the model's
 * est_grads_ready reports forwarded to the hook. One process runs them too, over the
 * one-rank distribution (est_dist_one_rank), where each is the identity. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/log.h"
#include "train/estimator_internal.h"

est_status est_agree(est_estimator *e, est_status local, const char *what) {
  const int world = est_world_size(e);
  const est_distribution *d = e->config.distribution;
  int64_t mine = (int64_t)local, *all = calloc((size_t)world, sizeof *all);
  if (!all) return local != EST_OK ? local : est_error(EST_ERR_NO_MEMORY, "out of memory");
  /* The local message survives the collective unless the collective itself fails. */
  char why[2048] = "";  /* the whole message: one process passes it through too */
  if (local != EST_OK) snprintf(why, sizeof why, "%s", est_error_message());
  est_status st = d->allgather_i64(d->ctx, &mine, 1, all);
  if (st != EST_OK) {
    free(all);
    return st;
  }
  int bad = -1;
  for (int r = 0; r < world && bad < 0; r++)
    if (all[r] != EST_OK) bad = r;
  const int64_t code = bad >= 0 ? all[bad] : 0;
  free(all);
  if (local != EST_OK) return est_error(local, "%s", why);
  if (bad < 0) return EST_OK;
  return est_error(EST_ERR_ABORTED, "%s failed on rank %d of %d (status %lld; its log says why)", what, bad, world,
                   (long long)code);
}

/* The hook to use for this step's gradients, or NULL for allreduce_mean. */
static const est_distribution *grads_hook(const est_estimator *e) {
  const est_distribution *d = e->config.distribution;
  return d->grads_begin ? d : NULL;
}

est_status est_grads_step_begin(est_estimator *e, est_session *s) {
  est_grads_notifier *n = &s->notifier;
  n->failed = EST_OK;
  n->in_step = 0;
  const est_distribution *d = grads_hook(e);
  n->dist = d;
  if (!d) return EST_OK;
  /* Equal local batches (the train input drops remainders and the global batch divides
   * over the ranks): the mean over the global batch is the sum of the ranks' means / N. */
  const double weight = e->config.grad_reduction == EST_GRAD_SUM ? 1.0 : 1.0 / (double)d->world_size;
  est_status st = d->grads_begin(d->ctx, s->vars, weight);
  if (st != EST_OK) return est_error_prefix("starting the gradient all-reduce: ");
  n->in_step = 1;
  return EST_OK;
}

est_status est_grads_ready(est_grads_notifier *n, size_t offset, size_t count) {
  if (!n || !n->in_step || !n->dist) return EST_OK;
  est_status st = n->dist->grads_ready(n->dist->ctx, offset, count);
  if (st != EST_OK && n->failed == EST_OK) n->failed = st;
  return st;
}

est_status est_grads_step_finish(est_estimator *e, est_session *s) {
  const int world = est_world_size(e);
  est_grads_notifier *n = &s->notifier;
  const est_distribution *d = e->config.distribution;
  est_status st;
  if (n->dist) {
    n->in_step = 0;
    st = d->grads_finish(d->ctx);
  } else {
    st = d->allreduce_mean(d->ctx, est_vars_grads(s->vars), est_vars_size(s->vars));
    if (st == EST_OK && e->config.grad_reduction == EST_GRAD_SUM) {
      /* Sum = N x mean: exact for a power-of-two N, within one rounding otherwise. */
      float *g = est_vars_grads(s->vars);
      const size_t size = est_vars_size(s->vars);
      for (size_t i = 0; i < size; i++) g[i] *= (float)world;
    }
  }
  if (st != EST_OK) return est_error_prefix("gradient all-reduce: ");
  return EST_OK;
}
