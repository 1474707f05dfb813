/* tf.estimator.experimental's early-stopping hooks (tensorflow_estimator: early_stopping.py,
 * _stop_if_no_metric_improvement_hook, _stop_if_threshold_crossed_hook and
 * _StopOnPredicateHook with its SecondOrStepTimer); est/early_stopping.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/early_stopping.h"
#include "est/file.h"
#include "est/log.h"
#include "train/estimator_internal.h"

/* TF's words in its log lines. */
static const char *const kind_names[] = {"decrease", "increase", "greater", "less"};

est_status est_early_stopping_should_stop(const est_early_stopping *s, int *stop) {
  *stop = 0;
  int64_t *steps;
  double *values;
  unsigned char *present;
  size_t n;
  est_status st = est_read_eval_metric_steps(s->eval_dir, s->metric_name, &steps, &values, &present, &n);
  if (st != EST_OK) return est_error_prefix("early stopping on '%s': ", s->metric_name);
  const int higher_is_better = s->kind == EST_STOP_IF_NO_INCREASE || s->kind == EST_STOP_IF_HIGHER;
  int have_best = 0;
  double best = 0;
  int64_t best_step = 0;
  for (size_t i = 0; i < n && !*stop; i++) {
    if (steps[i] < s->min_steps) continue;
    if (!present[i]) {
      st = est_error(EST_ERR_NOT_FOUND, "early stopping on '%s': %s: the evaluation at step %lld has no metric '%s'",
                     s->metric_name, s->eval_dir, (long long)steps[i], s->metric_name);
      break;
    }
    const double v = values[i];
    if (s->kind == EST_STOP_IF_HIGHER || s->kind == EST_STOP_IF_LOWER) {
      *stop = higher_is_better ? v > s->threshold : v < s->threshold;
      if (*stop)
        EST_LOG_INFO("At step %lld, metric \"%s\" has value %g which is %s than the configured threshold (%g) for "
                     "early stopping.", (long long)steps[i], s->metric_name, v, kind_names[s->kind], s->threshold);
      continue;
    }
    if (!have_best || (higher_is_better ? v > best : v < best)) {
      have_best = 1;
      best = v;
      best_step = steps[i];
    }
    if (steps[i] - best_step >= s->max_steps_without_improvement) {
      *stop = 1;
      EST_LOG_INFO("No %s in metric \"%s\" for %lld steps, which is greater than or equal to max steps (%lld) "
                   "configured for early stopping.", kind_names[s->kind], s->metric_name,
                   (long long)(steps[i] - best_step), (long long)s->max_steps_without_improvement);
    }
  }
  free(steps);
  free(values);
  free(present);
  if (st != EST_OK) *stop = 0;
  return st;
}

/* SecondOrStepTimer.should_trigger_for_step: the first step, then every n steps (or secs). */
static int due(const est_early_stopping *s, int64_t step, double now) {
  if (s->last_checked_step < 0) return 1;
  if (s->last_checked_step == step) return 0;
  if (s->run_every_steps > 0) return step >= s->last_checked_step + s->run_every_steps;
  return now >= s->last_checked_time + s->run_every_secs;
}

static est_status early_stopping_after_run(void *self, est_hook_run *run, const est_step_record *step) {
  est_early_stopping *s = self;
  const double now = est_now_seconds();
  if (!step->has_batch || !due(s, step->global_step, now)) return EST_OK;
  s->last_checked_step = step->global_step;
  s->last_checked_time = now;
  int stop = 0;
  est_status st = est_early_stopping_should_stop(s, &stop);
  if (st == EST_OK && stop) {
    /* TF's hook logs the global step it fetched with the train op, read before that op's
     * update (CheckpointSaverHook calls it stale_global_step): "at global step 349", and
     * training then ends at 350. The check, its timer and the stop are TF's, on that same
     * step; the log names the step training ends at. */
    EST_LOG_INFO("Requesting early stopping at global step %lld", (long long)est_hook_global_step(run));
    est_hook_request_stop(run);
  }
  return st;
}

static est_status make(est_early_stopping *s, est_early_stopping_kind kind, const est_estimator *e,
                       const char *metric, int64_t max_steps, double threshold, int64_t min_steps,
                       int64_t run_every_steps, est_session_run_hook *hook) {
  if (!metric || !*metric) return est_error(EST_ERR_INVALID_ARGUMENT, "early stopping: no metric name");
  if ((kind == EST_STOP_IF_NO_DECREASE || kind == EST_STOP_IF_NO_INCREASE) && max_steps <= 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "early stopping on '%s': max_steps_without_%s must be > 0, not %lld",
                     metric, kind_names[kind], (long long)max_steps);
  if (min_steps < 0 || run_every_steps < 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "early stopping on '%s': min_steps (%lld) and run_every_steps (%lld) "
                     "must be >= 0", metric, (long long)min_steps, (long long)run_every_steps);
  memset(s, 0, sizeof *s);
  if (snprintf(s->metric_name, sizeof s->metric_name, "%s", metric) >= (int)sizeof s->metric_name)
    return est_error(EST_ERR_INVALID_ARGUMENT, "early stopping: metric name '%.40s...' is too long", metric);
  /* estimator.eval_dir(): model_dir/eval, where evaluate (name NULL) writes its events. */
  est_status st = est_path_join(s->eval_dir, sizeof s->eval_dir, est_estimator_config(e)->model_dir, "eval");
  if (st != EST_OK) return st;
  s->kind = kind;
  s->max_steps_without_improvement = max_steps;
  s->threshold = threshold;
  s->min_steps = min_steps;
  s->run_every_steps = run_every_steps;
  s->run_every_secs = 60.0;   /* TF's default, when run_every_steps is 0 */
  s->last_checked_step = -1;
  *hook = (est_session_run_hook){.name = "early_stopping", .self = s, .after_run = early_stopping_after_run};
  return EST_OK;
}

est_status est_stop_if_no_decrease_hook(est_early_stopping *state, const est_estimator *e, const char *metric_name,
                                        int64_t max_steps_without_decrease, int64_t min_steps,
                                        int64_t run_every_steps, est_session_run_hook *hook) {
  return make(state, EST_STOP_IF_NO_DECREASE, e, metric_name, max_steps_without_decrease, 0, min_steps,
              run_every_steps, hook);
}

est_status est_stop_if_no_increase_hook(est_early_stopping *state, const est_estimator *e, const char *metric_name,
                                        int64_t max_steps_without_increase, int64_t min_steps,
                                        int64_t run_every_steps, est_session_run_hook *hook) {
  return make(state, EST_STOP_IF_NO_INCREASE, e, metric_name, max_steps_without_increase, 0, min_steps,
              run_every_steps, hook);
}

est_status est_stop_if_higher_hook(est_early_stopping *state, const est_estimator *e, const char *metric_name,
                                   double threshold, int64_t min_steps, int64_t run_every_steps,
                                   est_session_run_hook *hook) {
  return make(state, EST_STOP_IF_HIGHER, e, metric_name, 0, threshold, min_steps, run_every_steps, hook);
}

est_status est_stop_if_lower_hook(est_early_stopping *state, const est_estimator *e, const char *metric_name,
                                  double threshold, int64_t min_steps, int64_t run_every_steps,
                                  est_session_run_hook *hook) {
  return make(state, EST_STOP_IF_LOWER, e, metric_name, 0, threshold, min_steps, run_every_steps, hook);
}
