/* StopAtStepHook (est_stop_at_step_hook): train's steps / max_steps, as the global step
 * to end at (est_hook_run.target; -1: train to the end of the input). */
#include "train/train_loop.h"

static est_status stop_at_step_check(est_hook_run *run) {
  if (run->target >= 0 && run->s.global_step >= run->target) est_hook_request_stop(run);
  return EST_OK;
}

static est_status stop_at_step_after_create_session(void *self, est_hook_run *run) {
  (void)self;
  return stop_at_step_check(run);
}

static est_status stop_at_step_after_run(void *self, est_hook_run *run, const est_step_record *step) {
  (void)self;
  return step->has_batch ? stop_at_step_check(run) : EST_OK;
}

est_session_run_hook est_stop_at_step_hook(void) {
  return (est_session_run_hook){.name = "stop_at_step",
                                .after_create_session = stop_at_step_after_create_session,
                                .after_run = stop_at_step_after_run};
}
