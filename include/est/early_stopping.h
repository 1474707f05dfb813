/* est/early_stopping.h — tf.estimator.experimental's early-stopping hooks
 * (tensorflow_estimator: python/estimator/early_stopping.py) and read_eval_metrics, for
 * est_estimator_train_with_hooks or est_train_spec.hooks (docs/hooks.md §4).
 *
 *     est_early_stopping es;
 *     est_session_run_hook h;
 *     est_stop_if_no_decrease_hook(&es, e, "loss", 300, 0, 1, &h);   // (eval) loss
 *     est_train_spec ts = {.input_fn = train_in, .max_steps = 10000, .hooks = &h, .num_hooks = 1};
 *     est_eval_spec ev = {.input_fn = eval_in, .every_n_steps = 100};
 *     est_train_and_evaluate(e, &ts, &ev, NULL);
 *
 * As TF's, a hook reads every evaluation written under the estimator's eval directory
 * (model_dir/eval: the events files est_estimator_evaluate writes, all of them, in step
 * order, a later event for a step overriding an earlier one), so a run restarted after a
 * crash decides from the evaluations of the runs before it too. It checks after the first
 * step and then every run_every_steps steps (or run_every_secs seconds when
 * run_every_steps is 0), after the checkpoint saver's after_run, so it sees the evaluation
 * of a checkpoint saved at that step; a decision to stop requests the stop (training ends
 * after that step, the final checkpoint saved) and logs the global step training ends at
 * (TF's log line prints the step before: docs/hooks.md §4). With run_every_steps = 1 the
 * stop step is a function of the evaluations alone: the same after a kill and restart. */
#ifndef EST_EARLY_STOPPING_H
#define EST_EARLY_STOPPING_H

#include <stddef.h>
#include <stdint.h>

#include "est/estimator.h"
#include "est/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum est_early_stopping_kind {
  EST_STOP_IF_NO_DECREASE = 0,   /* no new minimum for max_steps_without_improvement steps */
  EST_STOP_IF_NO_INCREASE = 1,   /* no new maximum for that many steps */
  EST_STOP_IF_HIGHER = 2,        /* some evaluation's value > threshold */
  EST_STOP_IF_LOWER = 3,         /* some evaluation's value < threshold */
} est_early_stopping_kind;

/* A hook's state; filled by the constructors below, must outlive the train call. */
typedef struct est_early_stopping {
  est_early_stopping_kind kind;
  char eval_dir[4096];
  char metric_name[256];
  int64_t max_steps_without_improvement;
  double threshold;
  int64_t min_steps;           /* evaluations at steps below this are ignored */
  int64_t run_every_steps;     /* > 0: check every this many steps */
  double run_every_secs;       /* else every this many seconds */
  int64_t last_checked_step;   /* -1: none yet */
  double last_checked_time;
} est_early_stopping;

/* Each fills *state and *hook (hook->self = state). INVALID_ARGUMENT for an empty metric
 * name, max_steps_without_* <= 0, or a negative min_steps or run_every_steps (0: every
 * 60 seconds, TF's default run_every_secs). */
est_status est_stop_if_no_decrease_hook(est_early_stopping *state, const est_estimator *e, const char *metric_name,
                                        int64_t max_steps_without_decrease, int64_t min_steps,
                                        int64_t run_every_steps, est_session_run_hook *hook);
est_status est_stop_if_no_increase_hook(est_early_stopping *state, const est_estimator *e, const char *metric_name,
                                        int64_t max_steps_without_increase, int64_t min_steps,
                                        int64_t run_every_steps, est_session_run_hook *hook);
est_status est_stop_if_higher_hook(est_early_stopping *state, const est_estimator *e, const char *metric_name,
                                   double threshold, int64_t min_steps, int64_t run_every_steps,
                                   est_session_run_hook *hook);
est_status est_stop_if_lower_hook(est_early_stopping *state, const est_estimator *e, const char *metric_name,
                                  double threshold, int64_t min_steps, int64_t run_every_steps,
                                  est_session_run_hook *hook);

/* The stop decision on the evaluations in state->eval_dir now (what the hook asks at each
 * check): *stop = 1 to stop. */
est_status est_early_stopping_should_stop(const est_early_stopping *state, int *stop);

/* read_eval_metrics for one metric: every events file (events.out.tfevents.*) of
 * eval_dir, in name order, each scalar `metric_name` of an event by its step, a later one
 * overriding, an event without it leaving the step's value: TF's dict.update); returned in
 * step order (malloc'ed; *n = 0 and NULLs when none; a directory that does not exist has
 * none). A step whose scalars lack the metric is NOT_FOUND naming the step (TF's KeyError;
 * the hooks fail so only at steps >= min_steps, as TF's). A truncated or corrupted record
 * ends that file with a warning (TF's _summaries on DataLossError). */
est_status est_read_eval_metric(const char *eval_dir, const char *metric_name, int64_t **steps, double **values,
                                size_t *n);

#ifdef __cplusplus
}
#endif
#endif
