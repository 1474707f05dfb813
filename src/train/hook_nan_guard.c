/* The NaN guard (tf.train.NanTensorHook, est_nan_guard_hook): a non-finite loss ends
 * training with ABORTED before anything of the step is logged or saved, so the last
 * checkpoint stays the last good one. Then the clipped-gradient check: a finite loss with
 * an Inf or NaN gradient has just turned the parameters into NaN through clipping by that
 * norm (as tf.clip_by_global_norm would); they are not saved either. (The norm is 0 when
 * clipping is off; the saver's finite check still stands between such parameters and a
 * checkpoint.) */
#include <math.h>

#include "est/float_format.h"
#include "train/train_loop.h"

static const char *last_good(const est_hook_run *run) { return run->last_saved[0] ? run->last_saved : "none"; }

static est_status nan_guard_after_run(void *self, est_hook_run *run, const est_step_record *step) {
  (void)self;
  if (!step->has_batch) return EST_OK;
  char lb[32], nb[32];
  if (!isfinite(step->loss))
    return est_error(EST_ERR_ABORTED, "NaN loss during training: loss = %s at global step %lld; last good checkpoint: %s",
                     est_format_float32(step->loss, lb, sizeof lb), (long long)step->global_step, last_good(run));
  if (!isfinite(step->global_norm))
    return est_error(EST_ERR_ABORTED,
                     "non-finite gradients during training: global norm = %s at global step %lld (loss = %s); "
                     "last good checkpoint: %s",
                     est_format_float32(step->global_norm, nb, sizeof nb), (long long)step->global_step,
                     est_format_float32(step->loss, lb, sizeof lb), last_good(run));
  return EST_OK;
}

est_session_run_hook est_nan_guard_hook(void) {
  return (est_session_run_hook){.name = "nan_guard", .after_run = nan_guard_after_run};
}
