/* Estimator.train: restore or initialise, then the step loop with tf.estimator's hooks
 * (logging, step counter, summaries, checkpoint saver, NaN guard) folded in, and est's
 * stop on request (preemption: docs/estimator.md §7). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "est/fault_hooks.h"
#include "est/float_format.h"
#include "est/log.h"
#include "est/optimizer.h"
#include "train/estimator_internal.h"

static void format_duration(double secs, char *buf, size_t size) {
  if (!(secs >= 0) || secs > 1e9) {
    snprintf(buf, size, "?");
    return;
  }
  long s = (long)(secs + 0.5);
  if (s >= 3600) snprintf(buf, size, "%ldh%02ldm%02lds", s / 3600, (s / 60) % 60, s % 60);
  else if (s >= 60) snprintf(buf, size, "%ldm%02lds", s / 60, s % 60);
  else snprintf(buf, size, "%lds", s);
}

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

typedef struct trainer {
  est_estimator *e;
  est_session s;
  est_input in;
  est_ckpt_manager mgr;
  int have_mgr;
  int64_t saved_step;        /* global_step of the last checkpoint written or restored */
  char last_saved[4096];
  est_after_save_fn after_save;
  void *after_save_ctx;
} trainer;

/* A checkpoint must never hold a diverged model: the chief looks at every value before
 * writing one (the ranks hold the same parameters, so its answer is theirs). */
static est_status check_finite_before_save(trainer *t) {
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

/* Collective: every rank gathers the input state; the chief writes. */
static est_status save(trainer *t, int notify) {
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
static est_status start_local(trainer *t, const est_input_fn *input_fn, const char *latest, const est_restored *rs,
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

static est_status start(trainer *t, const est_input_fn *input_fn, const char *latest, const est_restored *rs,
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
    return EST_OK;
  }
  /* As CheckpointSaverHook.after_create_session: the starting point is saved at once. */
  return save(t, 0);
}

/* The signal of the ranks that were asked to stop, when they name the same one (sum of
 * signos = count x signo); else SIGTERM's number, the usual preemption notice. */
static int agreed_signo(double count, double signo_sum) {
  double each = signo_sum / count;
  if (each == (double)(int)each && each >= 0 && each < 1000) return (int)each;
  return 15;
}

/* The step just finished is saved (unless the cadence did it), then training ends with
 * CANCELLED. The checkpoint is written by the ordinary save, so the rerun resumes from
 * it exactly. A rank that was not asked itself takes the request on, so its caller
 * (the est command line's exit code) sees the same stop. */
static est_status stop_on_request(trainer *t, int signo) {
  int mine = 0;
  if (!est_stop_requested(&mine)) est_request_stop(signo);
  est_status st = t->s.global_step != t->saved_step ? save(t, 0) : EST_OK;
  if (st != EST_OK) return est_error_prefix("stopping on request at step %lld: ", (long long)t->s.global_step);
  char name[32];
  est_stop_signal_name(signo, name, sizeof name);
  EST_LOG_WARN("Received %s at step %lld; saved checkpoint %s; exiting", name, (long long)t->s.global_step,
               t->last_saved);
  return est_error(EST_ERR_CANCELLED, "Received %s at step %lld; saved checkpoint %s; exiting", name,
                   (long long)t->s.global_step, t->last_saved);
}

est_status est_train_impl(est_estimator *e, const est_input_fn *input_fn, int64_t steps, int64_t max_steps,
                          est_after_save_fn after_save, void *ctx, int64_t *final_step, char *last_saved,
                          size_t size) {
  if (steps < 0 || max_steps < 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "train: steps (%lld) and max_steps (%lld) must be >= 0",
                     (long long)steps, (long long)max_steps);
  if (steps > 0 && max_steps > 0) return est_error(EST_ERR_INVALID_ARGUMENT, "Can not provide both steps and max_steps.");
  const est_run_config *rc = &e->config;

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

  trainer t = {.e = e, .after_save = after_save, .after_save_ctx = ctx, .saved_step = -1};
  st = start(&t, input_fn, latest, &rs, seed);
  est_restored_clear(&rs);

  const int64_t start_step = t.s.global_step;
  const int64_t target = max_steps > 0 ? max_steps : steps > 0 ? start_step + steps : -1;
  const int64_t log_every = rc->log_step_count_steps;
  const int64_t summary_every = rc->save_summary_steps;
  const int64_t save_steps = rc->save_checkpoints_steps;
  const double save_secs = save_steps > 0 ? 0.0 : rc->save_checkpoints_secs > 0 ? rc->save_checkpoints_secs : 600.0;
  const est_distribution *dist = rc->distribution;
  const int world = est_world_size(e);
  const int batch = rc->train_batch_size;
  double t_log = est_now_seconds(), t_save = t_log, t_begin = t_log;
  int64_t step_log = start_step;
  float loss = NAN;
  int64_t steps_done = 0;
  const est_fault_hooks *hooks = est_get_fault_hooks();   /* a test's seam; normally NULL */
  const int rank = est_rank(e);

  while (st == EST_OK && (target < 0 || t.s.global_step < target)) {
    est_var_store *vs = t.s.vars;
    const int64_t gs = t.s.global_step;
    est_features features = {0};
    est_status local = t.in.next(t.in.self, &features);
    int have = local == EST_OK;
    if (local == EST_ERR_OUT_OF_RANGE) {
      est_error_clear();
      local = EST_OK;
    } else if (local != EST_OK) {
      est_error_prefix("input_fn (train) at global step %lld: ", (long long)gs);
    }
    if (have && hooks && hooks->before_step) hooks->before_step(hooks->ctx, rank, gs);
    est_vars_zero_grads(vs);
    st = est_grads_step_begin(e, &t.s);
    if (st != EST_OK) break;
    est_estimator_spec spec = {0};
    if (have) {
      local = e->fn.call(t.s.model, vs, &features, EST_MODE_TRAIN, gs, &spec);
      if (local == EST_OK && t.s.notifier.failed != EST_OK) local = t.s.notifier.failed;
      if (local != EST_OK)
        est_error_prefix("model_fn %s (train) at global step %lld: ", e->fn.name ? e->fn.name : "", (long long)gs);
    }
    /* Every rank joins both reductions whatever happened locally, so the collective
     * sequence stays the same on all: first the gradients (whose buckets may already be
     * in flight), then one sum of (has a batch, failed, loss, ranks asked to stop, their
     * signal numbers) that lets every rank take the same decision about this step. Over
     * one rank both are the identity. A stop request that comes after this read is seen
     * at the next step's. */
    st = est_grads_step_finish(e, &t.s);
    if (st != EST_OK) {
      est_error_prefix("at global step %lld: ", (long long)gs);
      break;
    }
    int stop_signo = 0;
    const int stop_local = est_stop_requested(&stop_signo);
    double flags[5] = {have && local == EST_OK, local != EST_OK, have && local == EST_OK ? spec.loss : 0.0,
                       stop_local, stop_local ? stop_signo : 0};
    char why[2048] = "";  /* the whole message (status.c keeps 2048 bytes) */
    if (local != EST_OK) snprintf(why, sizeof why, "%s", est_error_message());
    st = dist->allreduce_sum(dist->ctx, flags, 5);
    if (st != EST_OK) {
      est_error_prefix("all-reduce at global step %lld: ", (long long)gs);
      break;
    }
    if (local != EST_OK) {
      st = est_error(local, "%s", why);
      break;
    }
    if (flags[1] > 0) {
      st = est_error(EST_ERR_ABORTED, "training stopped at global step %lld: %g other rank(s) failed (their logs say why)",
                     (long long)gs, flags[1]);
      break;
    }
    if (flags[0] < world) {
      /* TF's input exhaustion: the first shard to run out ends training for all. */
      if (world == 1) EST_LOG_INFO("Input ended at global step %lld.", (long long)gs);
      else EST_LOG_INFO("Input ended at global step %lld (on %d of %d ranks).", (long long)gs, world - (int)flags[0], world);
      break;
    }
    /* The mean of the ranks' losses; exactly the loss itself over one rank. */
    const float step_loss = (float)(flags[2] / world);
    if (!isfinite(step_loss)) {
      /* NanTensorHook: stop before the update; the last checkpoint stays the last good one. */
      char lb[32];
      st = est_error(EST_ERR_ABORTED, "NaN loss during training: loss = %s at global step %lld; last good checkpoint: %s",
                     est_format_float32(step_loss, lb, sizeof lb), (long long)gs, t.last_saved[0] ? t.last_saved : "none");
      break;
    }
    st = est_optimizer_apply(t.s.opt, gs);
    if (st != EST_OK) {
      est_error_prefix("optimizer at global step %lld: ", (long long)gs);
      break;
    }
    /* A finite loss with an Inf or NaN gradient: clipping by that norm has just turned the
     * parameters into NaN (as tf.clip_by_global_norm would). They are not saved: stop
     * here. (The norm is 0 when clipping is off; check_finite_before_save still stands
     * between such parameters and a checkpoint.) */
    const float grad_norm = est_optimizer_last_global_norm(t.s.opt);
    if (!isfinite(grad_norm)) {
      char nb[32], lb[32];
      st = est_error(EST_ERR_ABORTED,
                     "non-finite gradients during training: global norm = %s at global step %lld (loss = %s); "
                     "last good checkpoint: %s",
                     est_format_float32(grad_norm, nb, sizeof nb), (long long)gs,
                     est_format_float32(step_loss, lb, sizeof lb), t.last_saved[0] ? t.last_saved : "none");
      break;
    }
    float lr = est_optimizer_learning_rate(t.s.opt, gs);
    t.s.global_step = gs + 1;
    loss = step_loss;
    steps_done++;

    char lb[32];
    /* Train summaries carry the global step after this step's update, as tf.estimator's
     * SummarySaverHook and StepCounterHook stamp them (1, 101, 201 with
     * save_summary_steps=100; checked against TF by tests/interop/test_estimator_oracle.py);
     * the log line names the step the loss was computed at, as its LoggingTensorHook does. */
    if (summary_every > 0 && gs % summary_every == 0) {
      const char *tags[2] = {"loss", "learning_rate"};
      float values[2] = {loss, lr};
      est_summaries_scalars(&e->train_summaries, t.s.global_step, 2, tags, values);
    }
    if (log_every > 0 && (gs - start_step) % log_every == 0) {
      double now = est_now_seconds();
      if (gs == start_step) {
        EST_LOG_INFO("loss = %s, step = %lld", est_format_float32(loss, lb, sizeof lb), (long long)gs);
      } else {
        double dt = now - t_log;
        double rate = dt > 0 ? (double)(t.s.global_step - step_log) / dt : 0.0;
        EST_LOG_INFO("global_step/sec: %.4g", rate);
        est_summaries_scalar(&e->train_summaries, t.s.global_step, "global_step/sec", (float)rate);
        EST_LOG_INFO("loss = %s, step = %lld (%.3f sec)", est_format_float32(loss, lb, sizeof lb), (long long)gs, dt);
        if (rc->log_progress && target > 0) {
          char eta[32];
          format_duration(rate > 0 ? (double)(target - t.s.global_step) / rate : -1, eta, sizeof eta);
          EST_LOG_INFO("step %lld/%lld (%.1f%%), %.1f examples/sec, ETA %s", (long long)t.s.global_step,
                       (long long)target, 100.0 * (double)t.s.global_step / (double)target,
                       rate * batch * world, eta);
        }
      }
      t_log = now;
      step_log = t.s.global_step;
    }

    int due = save_steps > 0 ? t.s.global_step - t.saved_step >= save_steps
                             : est_now_seconds() - t_save >= save_secs;
    if (save_steps <= 0) {
      /* Time-based saves follow the chief's clock so every rank joins the same save. */
      float flag = (float)due;
      st = dist->broadcast(dist->ctx, &flag, 1);
      if (st != EST_OK) break;
      due = flag != 0.0f;
    }
    if (due && !(target > 0 && t.s.global_step >= target)) {
      st = save(&t, 1);
      t_save = est_now_seconds();
      if (st != EST_OK) break;
    }
    if (flags[3] > 0) {
      st = stop_on_request(&t, stop_local ? stop_signo : agreed_signo(flags[3], flags[4]));
      break;
    }
  }

  if (st == EST_OK && t.s.global_step != t.saved_step) st = save(&t, 1);
  if (st == EST_OK) {
    char lb[32];
    if (steps_done) EST_LOG_INFO("Loss for final step: %s.", est_format_float32(loss, lb, sizeof lb));
    double dt = est_now_seconds() - t_begin;
    EST_LOG_INFO("Trained %lld steps in %.3f sec (%.1f examples/sec).", (long long)steps_done, dt,
                 dt > 0 ? (double)steps_done * batch * world / dt : 0.0);
  }
  if (final_step) *final_step = t.s.global_step;
  if (last_saved && size && t.last_saved[0]) snprintf(last_saved, size, "%s", t.last_saved);
  est_summaries_flush(&e->train_summaries);
  est_close_input(&t.in);
  if (t.have_mgr) est_ckpt_manager_close(&t.mgr);
  est_session_free(e, &t.s);
  return st;
}

est_status est_estimator_train(est_estimator *e, const est_input_fn *input_fn, int64_t steps, int64_t max_steps) {
  return est_train_impl(e, input_fn, steps, max_steps, NULL, NULL, NULL, NULL, 0);
}
