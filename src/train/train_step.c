/* One training step (est_train_step, train/train_loop.h): what tf.estimator's train_op
 * does in session.run, plus the agreement of the ranks about the step. The checks of its
 * outcome (NaN loss, non-finite gradients) and everything around it are hooks. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "est/log.h"
#include "est/optimizer.h"
#include "train/train_loop.h"

/* What the ranks sum after every step, so that all take the same decision about it. Over
 * one rank the sum is the identity. */
typedef union step_outcome {
  struct {
    double ranks_with_batch;   /* the rank had a batch and its model call succeeded */
    double ranks_failed;       /* its input or model call failed */
    double loss_sum;           /* its batch loss (0 without one) */
    double ranks_asked_to_stop;   /* est_stop_requested at this step's check */
    double stop_signo_sum;     /* their signal numbers */
  };
  double values[5];
} step_outcome;
_Static_assert(sizeof(step_outcome) == 5 * sizeof(double), "step_outcome is summed as doubles");

/* The signal of the ranks that were asked to stop, when they name the same one (sum of
 * signos = count x signo); else SIGTERM's number, the usual preemption notice. */
static int agreed_signo(double count, double signo_sum) {
  double each = signo_sum / count;
  if (each == (double)(int)each && each >= 0 && each < 1000) return (int)each;
  return 15;
}

est_status est_train_step(est_hook_run *t, est_step_record *rec) {
  est_estimator *e = t->e;
  est_var_store *vs = t->s.vars;
  const est_distribution *dist = e->config.distribution;
  const int world = est_world_size(e);
  const int64_t gs = t->s.global_step;
  memset(rec, 0, sizeof *rec);
  rec->global_step = gs;

  est_features features = {0};
  est_status local = t->in.next(t->in.self, &features);
  const int have = local == EST_OK;
  if (local == EST_ERR_OUT_OF_RANGE) {
    est_error_clear();
    local = EST_OK;
  } else if (local != EST_OK) {
    est_error_prefix("input_fn (train) at global step %lld: ", (long long)gs);
  }
  if (have && t->fault && t->fault->before_step) t->fault->before_step(t->fault->ctx, est_rank(e), gs);
  est_vars_zero_grads(vs);
  est_status st = est_grads_step_begin(e, &t->s);
  if (st != EST_OK) return st;
  est_estimator_spec spec = {0};
  if (have) {
    local = e->fn.call(t->s.model, vs, &features, EST_MODE_TRAIN, gs, &spec);
    if (local == EST_OK && t->s.notifier.failed != EST_OK) local = t->s.notifier.failed;
    if (local != EST_OK)
      est_error_prefix("model_fn %s (train) at global step %lld: ", e->fn.name ? e->fn.name : "", (long long)gs);
  }
  /* Every rank joins both reductions whatever happened locally, so the collective
   * sequence stays the same on all: first the gradients (whose buckets may already be in
   * flight), then the step's outcome. A stop request that comes after this read is seen
   * at the next step's. */
  st = est_grads_step_finish(e, &t->s);
  if (st != EST_OK) return est_error_prefix("at global step %lld: ", (long long)gs);
  int stop_signo = 0;
  const int stop_local = est_stop_requested(&stop_signo);
  const int ok = have && local == EST_OK;
  step_outcome sum = {.ranks_with_batch = ok,
                      .ranks_failed = local != EST_OK,
                      .loss_sum = ok ? spec.loss : 0.0,
                      .ranks_asked_to_stop = stop_local,
                      .stop_signo_sum = stop_local ? stop_signo : 0};
  char why[2048] = "";  /* the whole message (status.c keeps 2048 bytes) */
  if (local != EST_OK) snprintf(why, sizeof why, "%s", est_error_message());
  st = dist->allreduce_sum(dist->ctx, sum.values, sizeof sum.values / sizeof sum.values[0]);
  if (st != EST_OK) return est_error_prefix("all-reduce at global step %lld: ", (long long)gs);
  if (local != EST_OK) return est_error(local, "%s", why);
  if (sum.ranks_failed > 0)
    return est_error(EST_ERR_ABORTED, "training stopped at global step %lld: %g other rank(s) failed (their logs say why)",
                     (long long)gs, sum.ranks_failed);
  rec->stop_signal_ranks = (int)sum.ranks_asked_to_stop;
  rec->stop_signo = stop_local               ? stop_signo
                    : rec->stop_signal_ranks ? agreed_signo(sum.ranks_asked_to_stop, sum.stop_signo_sum)
                                             : 0;
  if (sum.ranks_with_batch < world) {
    /* TF's input exhaustion: the first shard to run out ends training for all. */
    if (world == 1) EST_LOG_INFO("Input ended at global step %lld.", (long long)gs);
    else EST_LOG_INFO("Input ended at global step %lld (on %d of %d ranks).", (long long)gs, world - (int)sum.ranks_with_batch, world);
    rec->time = est_now_seconds();
    return EST_OK;
  }
  /* The mean of the ranks' losses; exactly the loss itself over one rank. */
  rec->loss = (float)(sum.loss_sum / world);
  rec->has_batch = 1;
  rec->examples = (int64_t)e->config.train_batch_size * world;
  st = est_optimizer_apply(t->s.opt, gs);
  if (st != EST_OK) return est_error_prefix("optimizer at global step %lld: ", (long long)gs);
  rec->global_norm = est_optimizer_last_global_norm(t->s.opt);
  rec->learning_rate = est_optimizer_learning_rate(t->s.opt, gs);
  t->s.global_step = gs + 1;
  rec->time = est_now_seconds();
  return EST_OK;
}
