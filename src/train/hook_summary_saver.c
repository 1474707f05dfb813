/* The train summaries (tf.train.SummarySaverHook, est_summary_saver_hook): loss and
 * learning_rate of every save_summary_steps-th step, stamped with the global step after
 * the step's update as tf.estimator stamps them (1, 101, 201 with save_summary_steps=100;
 * checked against TF by tests/interop/test_estimator_oracle.py). */
#include "train/train_loop.h"

static est_status summary_saver_after_run(void *self, est_hook_run *run, const est_step_record *step) {
  const est_summary_saver_state *s = self;
  if (!step->has_batch || s->every <= 0 || step->global_step % s->every != 0) return EST_OK;
  const char *tags[2] = {"loss", "learning_rate"};
  float values[2] = {step->loss, step->learning_rate};
  est_summaries_scalars(&run->e->train_summaries, step->global_step + 1, 2, tags, values);
  return EST_OK;
}

est_session_run_hook est_summary_saver_hook(est_summary_saver_state *s, int64_t every_n_steps) {
  s->every = every_n_steps;
  return (est_session_run_hook){.name = "summary_saver", .self = s, .after_run = summary_saver_after_run};
}
