/* Stop on request (est_request_stop, docs/estimator.md §7; est_stop_on_signal_hook): when
 * some rank was asked at this step's check, the step just run is saved (unless the
 * cadence did it) by the ordinary save, so the rerun resumes from it exactly, and
 * training ends with CANCELLED. A rank that was not asked itself takes the request on,
 * so its caller (the est command line's exit code) sees the same stop. */
#include "est/log.h"
#include "train/train_loop.h"

static est_status stop_on_signal_after_run(void *self, est_hook_run *run, const est_step_record *step) {
  (void)self;
  if (!step->has_batch || step->stop_signal_ranks <= 0) return EST_OK;
  const int signo = step->stop_signo;
  const long long gs = (long long)run->s.global_step;
  int mine = 0;
  if (!est_stop_requested(&mine)) est_request_stop(signo);
  est_status st = run->s.global_step != run->saved_step ? est_trainer_save(run, 0) : EST_OK;
  if (st != EST_OK) return est_error_prefix("stopping on request at step %lld: ", gs);
  char name[32];
  est_stop_signal_name(signo, name, sizeof name);
  EST_LOG_WARN("Received %s at step %lld; saved checkpoint %s; exiting", name, gs, run->last_saved);
  return est_error(EST_ERR_CANCELLED, "Received %s at step %lld; saved checkpoint %s; exiting", name, gs,
                   run->last_saved);
}

est_session_run_hook est_stop_on_signal_hook(void) {
  return (est_session_run_hook){.name = "stop_on_signal", .after_run = stop_on_signal_after_run};
}
