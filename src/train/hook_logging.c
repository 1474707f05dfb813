/* The step log (est_logging_hook): tf.estimator's LoggingTensorHook and StepCounterHook
 * every log_step_count_steps steps, counted from the step training started at. The line
 * names the step the loss was computed at, as LoggingTensorHook does; global_step/sec is
 * logged and written as a summary at the global step after the update; with
 * run_config.log_progress and a known target, a progress line with examples/sec and ETA. */
#include <stdio.h>

#include "est/float_format.h"
#include "est/log.h"
#include "train/train_loop.h"

/* The clock starts at the first step, after the restore and the first save. */
static est_status logging_before_run(void *self, est_hook_run *run, int64_t global_step) {
  est_logging_state *s = self;
  if (global_step != run->start_step) return EST_OK;
  s->t_last = est_now_seconds();
  s->step_last = global_step;
  return EST_OK;
}

static est_status logging_after_run(void *self, est_hook_run *run, const est_step_record *step) {
  est_logging_state *s = self;
  const int64_t gs = step->global_step, after = gs + 1;
  if (!step->has_batch || s->every <= 0 || (gs - run->start_step) % s->every != 0) return EST_OK;
  char lb[32];
  double now = est_now_seconds();
  if (gs == run->start_step) {
    EST_LOG_INFO("loss = %s, step = %lld", est_format_float32(step->loss, lb, sizeof lb), (long long)gs);
  } else {
    double dt = now - s->t_last;
    double rate = dt > 0 ? (double)(after - s->step_last) / dt : 0.0;
    EST_LOG_INFO("global_step/sec: %.4g", rate);
    est_summaries_scalar(&run->e->train_summaries, after, "global_step/sec", (float)rate);
    EST_LOG_INFO("loss = %s, step = %lld (%.3f sec)", est_format_float32(step->loss, lb, sizeof lb), (long long)gs, dt);
    const int64_t target = run->target;
    if (s->log_progress && target > 0) {
      char eta[32];
      est_format_duration(rate > 0 ? (double)(target - after) / rate : -1, eta, sizeof eta);
      EST_LOG_INFO("step %lld/%lld (%.1f%%), %.1f examples/sec, ETA %s", (long long)after, (long long)target,
                   100.0 * (double)after / (double)target, rate * s->batch * s->world, eta);
    }
  }
  s->t_last = now;
  s->step_last = after;
  return EST_OK;
}

est_session_run_hook est_logging_hook(est_logging_state *s, const est_run_config *rc, int world) {
  *s = (est_logging_state){.every = rc->log_step_count_steps,
                           .log_progress = rc->log_progress,
                           .batch = rc->train_batch_size,
                           .world = world};
  return (est_session_run_hook){.name = "logging",
                                .self = s,
                                .before_run = logging_before_run,
                                .after_run = logging_after_run};
}
