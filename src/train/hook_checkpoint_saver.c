/* The checkpoint saver (tf.train.CheckpointSaverHook, est_checkpoint_saver_hook). A fresh
 * start is saved at once (after_create_session); then every save_checkpoints_steps steps,
 * or every save_checkpoints_secs (600 when neither is set) on the chief's clock, so every
 * rank joins the same save; the target step is left to end, which saves the last step
 * when the cadence did not. Each save of the cadence and of end calls the listener
 * (est_hook_run.after_save). */
#include "train/train_loop.h"

static est_status saver_after_create_session(void *self, est_hook_run *run) {
  est_checkpoint_saver_state *s = self;
  est_status st = run->saved_step < 0 ? est_trainer_save(run, 0) : EST_OK;
  s->t_save = est_now_seconds();
  return st;
}

static est_status saver_after_run(void *self, est_hook_run *run, const est_step_record *step) {
  est_checkpoint_saver_state *s = self;
  if (!step->has_batch) return EST_OK;
  const int64_t gs = run->s.global_step;
  int due = s->save_steps > 0 ? gs - run->saved_step >= s->save_steps : est_now_seconds() - s->t_save >= s->save_secs;
  if (s->save_steps <= 0) {
    const est_distribution *dist = run->e->config.distribution;
    float flag = (float)due;
    est_status st = dist->broadcast(dist->ctx, &flag, 1);
    if (st != EST_OK) return st;
    due = flag != 0.0f;
  }
  if (!due || (run->target > 0 && gs >= run->target)) return EST_OK;
  est_status st = est_trainer_save(run, 1);
  s->t_save = est_now_seconds();
  return st;
}

static est_status saver_end(void *self, est_hook_run *run) {
  (void)self;
  return run->s.global_step != run->saved_step ? est_trainer_save(run, 1) : EST_OK;
}

est_session_run_hook est_checkpoint_saver_hook(est_checkpoint_saver_state *s, const est_run_config *rc) {
  s->save_steps = rc->save_checkpoints_steps;
  s->save_secs = s->save_steps > 0 ? 0.0 : rc->save_checkpoints_secs > 0 ? rc->save_checkpoints_secs : 600.0;
  return (est_session_run_hook){.name = "checkpoint_saver",
                                .self = s,
                                .after_create_session = saver_after_create_session,
                                .after_run = saver_after_run,
                                .end = saver_end};
}
