/* The training loop's parts (docs/hooks.md): the state of one train call (struct
 * est_hook_run, what every hook is handed), its step function, the collective save, and
 * the built-in hooks, each in a file of its own (hook_*.c). */
#ifndef EST_TRAIN_TRAIN_LOOP_H
#define EST_TRAIN_TRAIN_LOOP_H

#include <stddef.h>
#include <stdint.h>

#include "est/fault_hooks.h"
#include "train/estimator_internal.h"

struct est_hook_run {
  est_estimator *e;
  est_session s;
  est_input in;
  est_ckpt_manager mgr;
  int have_mgr;
  int64_t saved_step;        /* global_step of the last checkpoint written or restored; -1: none */
  char last_saved[4096];
  int64_t start_step;        /* global_step when the loop began */
  double t_started;          /* est_now_seconds() then */
  int64_t target;            /* the global_step training ends at; -1: the end of the input */
  int stop_requested;        /* est_hook_request_stop on this rank */
  const est_fault_hooks *fault;   /* a test's seam; normally NULL */
  est_after_save_fn after_save;   /* the checkpoint saver's listener */
  void *after_save_ctx;
};

/* One step (train_step.c): read a batch, run the model, reduce the gradients, sum the
 * ranks' step outcome (one all-reduce of a named struct), apply the optimizer and advance
 * global_step. Fills *rec; an input that ended on some rank is rec->has_batch = 0 and OK
 * (nothing applied). A rank's input or model failure fails every rank. */
est_status est_train_step(est_hook_run *t, est_step_record *rec);

/* Collective: every rank gathers its input position; the chief checks the parameters are
 * finite and writes model.ckpt-<global_step>; all wait for it. notify: then call the
 * after_save listener (train_and_evaluate's evaluation). trainer_save.c. */
est_status est_trainer_save(est_hook_run *t, int notify);

/* ---- built-in hooks; each keeps its state in the struct its constructor is given ---- */

/* NanTensorHook, and the clipped-gradient-norm check after it. */
est_session_run_hook est_nan_guard_hook(void);

/* SummarySaverHook: loss and learning_rate every save_summary_steps, stamped with the
 * global_step after the update. */
typedef struct est_summary_saver_state {
  int64_t every;
} est_summary_saver_state;
est_session_run_hook est_summary_saver_hook(est_summary_saver_state *s, int64_t every_n_steps);

/* LoggingTensorHook + StepCounterHook: the loss every log_step_count_steps, steps/sec
 * (logged and a summary), and with log_progress the ETA to the target step. */
typedef struct est_logging_state {
  int64_t every;
  int log_progress;
  int batch, world;          /* examples per step: batch * world */
  double t_last;             /* clock at the last line */
  int64_t step_last;         /* global_step after the last logged step */
} est_logging_state;
est_session_run_hook est_logging_hook(est_logging_state *s, const est_run_config *rc, int world);

/* CheckpointSaverHook: the starting point after create_session (fresh start), then every
 * save_checkpoints_steps (or secs, on the chief's clock), and the final step at end; its
 * listener is est_hook_run.after_save. */
typedef struct est_checkpoint_saver_state {
  int64_t save_steps;        /* > 0: by steps */
  double save_secs;          /* else by time */
  double t_save;
} est_checkpoint_saver_state;
est_session_run_hook est_checkpoint_saver_hook(est_checkpoint_saver_state *s, const est_run_config *rc);

/* est_request_stop (a signal): saves the step just run, logs, and ends with CANCELLED. */
est_session_run_hook est_stop_on_signal_hook(void);

/* StopAtStepHook: requests the stop once global_step reaches est_hook_run.target. */
est_session_run_hook est_stop_at_step_hook(void);

#endif
