/* Estimator.train: agree on the start, restore or initialise, then the loop over the step
 * function (train_step.c) and the hooks: the built-in ones (hook_*.c: NaN guard,
 * summaries, logging, checkpoint saver, stop on signal, stop at step) and the caller's.
 * docs/hooks.md. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "est/float_format.h"
#include "est/log.h"
#include "est/optimizer.h"
#include "train/train_loop.h"

static uint64_t pick_seed(est_estimator *e, const est_restored *rs) {
  if (e->config.seed) {
    if (rs->has_seed && rs->seed != e->config.seed)
      EST_LOG_WARN("the checkpoint was trained with seed %llu, continuing with seed %llu",
                   (unsigned long long)rs->seed, (unsigned long long)e->config.seed);
    return e->config.seed;
  }
  if (rs->has_seed) return rs->seed;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t seed = ((uint64_t)ts.tv_sec * 1000000007ull) ^ (uint64_t)ts.tv_nsec;
  return seed ? seed : 1;
}

/* One allgather of (status, seed, global_step, has a checkpoint) before training: a rank
 * that failed to read the checkpoint fails all; the chief's seed wins; and every rank
 * must start from the same checkpoint, because the parameter broadcast that follows
 * does not cover global_step, the optimizer's slots or the input positions (a model_dir
 * not shared by all ranks' machines would otherwise train silently wrong). */
static est_status agree_on_start(est_estimator *e, est_status local, uint64_t *seed, int64_t global_step,
                                 int has_checkpoint) {
  const int world = est_world_size(e);
  const est_distribution *d = e->config.distribution;
  int64_t mine[4] = {(int64_t)local, (int64_t)*seed, global_step, has_checkpoint};
  int64_t *all = calloc((size_t)world * 4, sizeof *all);
  char why[2048] = "";
  if (local != EST_OK) snprintf(why, sizeof why, "%s", est_error_message());
  est_status st = all ? d->allgather_i64(d->ctx, mine, 4, all) : est_error(EST_ERR_NO_MEMORY, "out of memory");
  if (st == EST_OK && local != EST_OK) st = est_error(local, "%s", why);
  for (int r = 0; st == EST_OK && r < world; r++) {
    const int64_t *a = all + 4 * r;
    if (a[0] != EST_OK)
      st = est_error(EST_ERR_ABORTED, "train: reading the checkpoint failed on rank %d of %d (its log says why)", r,
                     world);
    else if (a[2] != all[2] || a[3] != all[3])
      st = est_error(EST_ERR_FAILED_PRECONDITION,
                     "rank %d starts training at global step %lld but the chief at %lld: all ranks must see the "
                     "same model_dir %s (a shared filesystem)",
                     r, (long long)a[2], (long long)all[2], e->model_dir);
  }
  if (st == EST_OK) *seed = (uint64_t)all[1];   /* the chief's */
  free(all);
  return st;
}

/* Everything a rank does alone before training: the model, its values (restored,
 * or initialised), the optimizer, the input and its position. */
static est_status start_local(est_hook_run *t, const est_input_fn *input_fn, const char *latest, const est_restored *rs,
                              uint64_t seed) {
  est_estimator *e = t->e;
  est_status st = est_session_create(e, EST_MODE_TRAIN, seed, &t->s);
  if (st != EST_OK) return st;
  if (!e->fn.create_optimizer)
    return est_error(EST_ERR_INVALID_ARGUMENT, "model_fn %s has no create_optimizer: cannot train",
                     e->fn.name ? e->fn.name : "");
  if (!latest[0]) {
    st = est_session_initialize(e, &t->s);
    if (st != EST_OK) return st;
  }
  st = e->fn.create_optimizer(t->s.model, t->s.vars, &t->s.opt);
  if (st != EST_OK) return est_error_prefix("model_fn %s create_optimizer: ", e->fn.name ? e->fn.name : "");
  if (!t->s.opt) return est_error(EST_ERR_INVALID_ARGUMENT, "create_optimizer returned no optimizer");
  if (latest[0]) {
    st = est_session_restore(e, &t->s, latest, 1);
    if (st != EST_OK) return st;
  }

  st = est_open_input(e, input_fn, EST_MODE_TRAIN, seed, &t->in);
  if (st != EST_OK) return st;
  if (rs->input_state) {
    if (!t->in.set_state) {
      EST_LOG_WARN("the checkpoint records the input position but this input_fn cannot restore it: the input "
                   "restarts from its beginning");
    } else if (rs->input_world != est_world_size(e)) {
      EST_LOG_WARN("the input position was saved by %lld ranks, this run has %d: the input restarts from its "
                   "beginning", (long long)rs->input_world, est_world_size(e));
    } else {
      st = t->in.set_state(t->in.self, rs->input_state + (size_t)est_rank(e) * rs->input_n, rs->input_n);
      if (st != EST_OK) return est_error_prefix("input_fn: restoring the input position from %s: ", latest);
    }
  } else if (latest[0]) {
    EST_LOG_WARN("%s holds no input position (" EST_CKPT_INPUT_STATE "): the input restarts from its beginning",
                 latest);
  }

  if (est_is_chief(e)) {
    st = est_ckpt_manager_open(&t->mgr, e->model_dir, e->config.keep_checkpoint_max);
    if (st != EST_OK) return st;
    t->have_mgr = 1;
  }
  return EST_OK;
}

static est_status start(est_hook_run *t, const est_input_fn *input_fn, const char *latest, const est_restored *rs,
                        uint64_t seed) {
  est_estimator *e = t->e;
  /* A rank that fails alone (a missing input file, a corrupt restore) must not leave the
   * others waiting in the broadcast below until the collective timeout. */
  est_status st = est_agree(e, start_local(t, input_fn, latest, rs, seed), "starting training");
  if (st != EST_OK) return st;
  const est_distribution *d = e->config.distribution;
  st = d->broadcast(d->ctx, est_vars_params(t->s.vars), est_vars_size(t->s.vars));
  if (st != EST_OK) return est_error_prefix("broadcasting the initial parameters: ");
  est_log_variables(t->s.vars);
  EST_LOG_INFO("Create CheckpointSaverHook.");
  if (latest[0]) {
    t->saved_step = t->s.global_step;
    snprintf(t->last_saved, sizeof t->last_saved, "%s", latest);
  }
  return EST_OK;
}

/* The hooks of one train call: the built-in ones, then the caller's. */
enum { NUM_BUILTIN_HOOKS = 6 };
typedef struct hook_list {
  est_summary_saver_state summary;
  est_logging_state logging;
  est_checkpoint_saver_state saver;
  est_session_run_hook *hooks;
  size_t n, num_callers;
} hook_list;

static est_status hook_list_init(hook_list *l, est_estimator *e, const est_session_run_hook *callers, size_t n) {
  const est_run_config *rc = &e->config;
  l->hooks = malloc((NUM_BUILTIN_HOOKS + n) * sizeof *l->hooks);
  if (!l->hooks) return est_error(EST_ERR_NO_MEMORY, "out of memory");
  est_session_run_hook builtin[NUM_BUILTIN_HOOKS] = {
      est_nan_guard_hook(),
      est_summary_saver_hook(&l->summary, rc->save_summary_steps),
      est_logging_hook(&l->logging, rc, est_world_size(e)),
      est_checkpoint_saver_hook(&l->saver, rc),
      est_stop_on_signal_hook(),
      est_stop_at_step_hook(),
  };
  memcpy(l->hooks, builtin, sizeof builtin);
  if (n) memcpy(l->hooks + NUM_BUILTIN_HOOKS, callers, n * sizeof *callers);
  l->n = NUM_BUILTIN_HOOKS + n;
  l->num_callers = n;
  return EST_OK;
}

typedef enum hook_phase {
  PHASE_BEGIN,
  PHASE_AFTER_CREATE_SESSION,
  PHASE_BEFORE_RUN,
  PHASE_AFTER_RUN,
  PHASE_END
} hook_phase;
static const char *const phase_names[] = {"begin", "after_create_session", "before_run", "after_run", "end"};

/* Calls `phase` of every hook in order; the first error ends the round, prefixed with
 * the hook's name when it is a caller's. */
static est_status run_hooks(hook_list *l, est_hook_run *t, hook_phase phase, const est_step_record *rec) {
  for (size_t i = 0; i < l->n; i++) {
    const est_session_run_hook *h = &l->hooks[i];
    est_status st = EST_OK;
    switch (phase) {
      case PHASE_BEGIN: st = h->begin ? h->begin(h->self, t) : EST_OK; break;
      case PHASE_AFTER_CREATE_SESSION:
        st = h->after_create_session ? h->after_create_session(h->self, t) : EST_OK;
        break;
      case PHASE_BEFORE_RUN: st = h->before_run ? h->before_run(h->self, t, t->s.global_step) : EST_OK; break;
      case PHASE_AFTER_RUN: st = h->after_run ? h->after_run(h->self, t, rec) : EST_OK; break;
      case PHASE_END: st = h->end ? h->end(h->self, t) : EST_OK; break;
    }
    if (st != EST_OK && i >= NUM_BUILTIN_HOOKS)
      return est_error_prefix("hook '%s' %s at global step %lld: ", h->name ? h->name : "", phase_names[phase],
                              (long long)t->s.global_step);
    if (st != EST_OK) return st;
  }
  return EST_OK;
}

/* Over N ranks with caller hooks, which may decide differently per rank: one sum of
 * (ranks whose hooks asked to stop, ranks whose hooks failed), so every rank stops, or
 * fails, after the same step. The built-in hooks decide alike on every rank by
 * themselves. */
static est_status agree_on_hooks(hook_list *l, est_hook_run *t, est_status local) {
  if (l->num_callers == 0 || est_world_size(t->e) == 1) return local;
  const est_distribution *d = t->e->config.distribution;
  double asked[2] = {t->stop_requested, local != EST_OK};
  char why[2048] = "";
  if (local != EST_OK) snprintf(why, sizeof why, "%s", est_error_message());
  est_status st = d->allreduce_sum(d->ctx, asked, 2);
  if (st != EST_OK) return est_error_prefix("hooks' stop agreement at global step %lld: ", (long long)t->s.global_step);
  if (local != EST_OK) return est_error(local, "%s", why);
  if (asked[1] > 0)
    return est_error(EST_ERR_ABORTED,
                     "training stopped at global step %lld: a hook failed on %g other rank(s) (their logs say why)",
                     (long long)t->s.global_step, asked[1]);
  t->stop_requested = asked[0] > 0;
  return EST_OK;
}

/* begin -> start -> after_create_session -> {before_run, step, after_run} until a stop
 * -> end. Returns the number of steps applied and the last loss through the pointers. */
static est_status run_loop(hook_list *l, est_hook_run *t, const est_input_fn *input_fn, const char *latest,
                           const est_restored *rs, uint64_t seed, int64_t steps, int64_t max_steps, int64_t *steps_done,
                           float *loss) {
  est_status st = run_hooks(l, t, PHASE_BEGIN, NULL);
  if (st == EST_OK) st = start(t, input_fn, latest, rs, seed);
  if (st != EST_OK) return st;
  t->start_step = t->s.global_step;
  t->t_started = est_now_seconds();
  t->target = max_steps > 0 ? max_steps : steps > 0 ? t->start_step + steps : -1;
  st = agree_on_hooks(l, t, run_hooks(l, t, PHASE_AFTER_CREATE_SESSION, NULL));
  while (st == EST_OK && !t->stop_requested) {
    est_step_record rec;
    st = run_hooks(l, t, PHASE_BEFORE_RUN, NULL);
    if (st == EST_OK) st = est_train_step(t, &rec);
    if (st != EST_OK) break;
    if (rec.has_batch) {
      *loss = rec.loss;
      ++*steps_done;
    }
    st = agree_on_hooks(l, t, run_hooks(l, t, PHASE_AFTER_RUN, &rec));
    if (!rec.has_batch) break;
  }
  return st == EST_OK ? run_hooks(l, t, PHASE_END, NULL) : st;
}

est_status est_train_impl(est_estimator *e, const est_input_fn *input_fn, int64_t steps, int64_t max_steps,
                          const est_session_run_hook *hooks, size_t num_hooks, est_after_save_fn after_save, void *ctx,
                          int64_t *final_step, char *last_saved, size_t size) {
  if (steps < 0 || max_steps < 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "train: steps (%lld) and max_steps (%lld) must be >= 0",
                     (long long)steps, (long long)max_steps);
  if (steps > 0 && max_steps > 0) return est_error(EST_ERR_INVALID_ARGUMENT, "Can not provide both steps and max_steps.");
  if (num_hooks && !hooks) return est_error(EST_ERR_INVALID_ARGUMENT, "train: %zu hooks given as NULL", num_hooks);

  char latest[4096] = "";
  est_status st = est_find_checkpoint(e, NULL, latest, sizeof latest);
  est_restored rs = {0};
  if (st == EST_OK && latest[0] && est_read_train_state(latest, &rs) != EST_OK)
    st = est_error_prefix("restoring %s: ", latest);
  uint64_t seed = st == EST_OK ? pick_seed(e, &rs) : 0;
  st = agree_on_start(e, st, &seed, rs.global_step, latest[0] != 0);
  if (st != EST_OK) {
    est_restored_clear(&rs);
    return st;
  }
  if (final_step) *final_step = rs.global_step;
  if (last_saved && size) snprintf(last_saved, size, "%s", latest);
  if (max_steps > 0 && latest[0] && rs.global_step >= max_steps) {
    EST_LOG_INFO("Skipping training since max_steps has already saved.");
    est_restored_clear(&rs);
    return EST_OK;
  }

  est_hook_run t = {.e = e, .after_save = after_save, .after_save_ctx = ctx, .saved_step = -1,
                    .fault = est_get_fault_hooks()};
  hook_list l = {0};
  st = hook_list_init(&l, e, hooks, num_hooks);
  int64_t steps_done = 0;
  float loss = NAN;
  if (st == EST_OK) st = run_loop(&l, &t, input_fn, latest, &rs, seed, steps, max_steps, &steps_done, &loss);
  est_restored_clear(&rs);
  if (st == EST_OK) {
    char lb[32];
    const int64_t examples = (int64_t)e->config.train_batch_size * est_world_size(e);
    if (steps_done) EST_LOG_INFO("Loss for final step: %s.", est_format_float32(loss, lb, sizeof lb));
    double dt = est_now_seconds() - t.t_started;
    EST_LOG_INFO("Trained %lld steps in %.3f sec (%.1f examples/sec).", (long long)steps_done, dt,
                 dt > 0 ? (double)(steps_done * examples) / dt : 0.0);
  }
  if (final_step) *final_step = t.s.global_step;
  if (last_saved && size && t.last_saved[0]) snprintf(last_saved, size, "%s", t.last_saved);
  est_summaries_flush(&e->train_summaries);
  est_close_input(&t.in);
  if (t.have_mgr) est_ckpt_manager_close(&t.mgr);
  est_session_free(e, &t.s);
  free(l.hooks);
  return st;
}

est_status est_estimator_train(est_estimator *e, const est_input_fn *input_fn, int64_t steps, int64_t max_steps) {
  return est_train_impl(e, input_fn, steps, max_steps, NULL, 0, NULL, NULL, NULL, NULL, 0);
}

est_status est_estimator_train_with_hooks(est_estimator *e, const est_input_fn *input_fn, int64_t steps,
                                          int64_t max_steps, const est_session_run_hook *hooks, size_t num_hooks) {
  return est_train_impl(e, input_fn, steps, max_steps, hooks, num_hooks, NULL, NULL, NULL, NULL, 0);
}
