/* The collective checkpoint save of a train call (est_trainer_save, train/train_loop.h):
 * every rank's input position gathered as one [world, n] block, the chief's check that no
 * parameter is non-finite, the chief's write, and every rank waiting for it. */
#include <stdio.h>
#include <stdlib.h>

#include "est/float_format.h"
#include "train/train_loop.h"

static est_status gather_rows(est_estimator *e, const int64_t *local, size_t n, int64_t **out, size_t *n_out);

/* Every rank's input position as one [world, n] block (n = 0: the input cannot say). */
static est_status gather_input_state(est_estimator *e, est_input *in, int64_t **out, size_t *n_out) {
  *out = NULL;
  *n_out = 0;
  size_t n = 0;
  int64_t *local = NULL;
  if (in->get_state && in->state_size) {
    n = in->state_size(in->self);
    if (n > EST_INPUT_STATE_MAX)
      return est_error(EST_ERR_INTERNAL, "input_fn: input state of %zu values (at most %d)", n, EST_INPUT_STATE_MAX);
    local = malloc((n ? n : 1) * sizeof *local);
    if (!local) return est_error(EST_ERR_NO_MEMORY, "out of memory");
    est_status st = in->get_state(in->self, local, n, &n);
    if (st != EST_OK) {
      free(local);
      return est_error_prefix("input_fn: saving the input position: ");
    }
  }
  est_status result = gather_rows(e, local, n, out, n_out);
  free(local);
  return result;
}

static est_status gather_rows(est_estimator *e, const int64_t *local, size_t n, int64_t **out, size_t *n_out) {
  const int world = est_world_size(e);
  const est_distribution *d = e->config.distribution;
  int64_t mine = (int64_t)n, *all_n = calloc((size_t)world, sizeof *all_n);
  if (!all_n) return est_error(EST_ERR_NO_MEMORY, "out of memory");
  est_status st = d->allgather_i64(d->ctx, &mine, 1, all_n);
  for (int r = 0; st == EST_OK && r < world; r++)
    if (all_n[r] != mine) st = est_error(EST_ERR_FAILED_PRECONDITION, "input state sizes differ across ranks");
  free(all_n);
  if (st != EST_OK) return st;
  if (n == 0) return EST_OK;
  int64_t *all = calloc((size_t)world * n, sizeof *all);
  if (!all) return est_error(EST_ERR_NO_MEMORY, "out of memory");
  st = d->allgather_i64(d->ctx, local, n, all);
  if (st != EST_OK) {
    free(all);
    return st;
  }
  *out = all;
  *n_out = n;
  return EST_OK;
}

/* A checkpoint must never hold a diverged model: the chief looks at every value before
 * writing one (the ranks hold the same parameters, so its answer is theirs). */
static est_status check_finite_before_save(est_hook_run *t) {
  size_t var, elem;
  float value;
  if (!est_first_nonfinite(t->s.vars, &var, &elem, &value)) return EST_OK;
  char vb[32];
  return est_error(EST_ERR_ABORTED,
                   "non-finite parameters at global step %lld: variable '%s' element %zu is %s; not saving "
                   "model.ckpt-%lld; last good checkpoint: %s",
                   (long long)t->s.global_step, est_vars_at(t->s.vars, var)->name, elem,
                   est_format_float32(value, vb, sizeof vb), (long long)t->s.global_step,
                   t->last_saved[0] ? t->last_saved : "none");
}

est_status est_trainer_save(est_hook_run *t, int notify) {
  int64_t *state = NULL;
  size_t n = 0;
  est_status st = gather_input_state(t->e, &t->in, &state, &n);
  if (st != EST_OK) {
    free(state);
    return st;
  }
  if (t->have_mgr) st = check_finite_before_save(t);
  if (t->have_mgr && st == EST_OK)
    st = est_session_save(t->e, &t->s, &t->mgr, state, est_world_size(t->e), n, t->last_saved, sizeof t->last_saved);
  free(state);
  /* The other ranks wait here until the chief's checkpoint is on disk (or its write
   * failed): whatever they do next (return from train and evaluate "the latest
   * checkpoint", train_and_evaluate's evaluation of this one) sees it. */
  st = est_agree(t->e, st, "writing the checkpoint");
  if (st != EST_OK) return st;
  if (!t->have_mgr) {
    snprintf(t->last_saved, sizeof t->last_saved, "%s/model.ckpt-%lld", t->e->model_dir, (long long)t->s.global_step);
  }
  t->saved_step = t->s.global_step;
  est_summaries_flush(&t->e->train_summaries);
  if (notify && t->after_save) {
    char prefix[4096];
    snprintf(prefix, sizeof prefix, "%s/model.ckpt-%lld", t->e->model_dir, (long long)t->s.global_step);
    st = t->after_save(t->after_save_ctx, prefix, t->s.global_step);
  }
  return st;
}
