/* est/fault_hooks.h — a seam for tests and fault drills: callbacks that the training loop
 * and the checkpoint manager call at the points where a drill wants the process to crash
 * or receive a signal, so a test can stop a run at a point that does not depend on timing.
 *
 *   static void kill_mid_save(void *ctx, int64_t step, const char *phase) {
 *     if (step == 14 && !strcmp(phase, "state")) raise(SIGKILL);
 *   }
 *   est_fault_hooks h = {.checkpoint_phase = kill_mid_save};
 *   est_set_fault_hooks(&h);
 *   est_estimator_train(e, &input, 0, 40);   // dies inside the save of step 14
 *
 * Nothing in libest installs hooks and nothing reads the environment for them; with none
 * installed a training step pays one test of a NULL pointer. Tests install them in
 * process, or for the `est` command through the LD_PRELOAD shim tests/fault/fault_hooks.c,
 * which finds est_set_fault_hooks among the executable's dynamic symbols (the `est`
 * target exports it; docs/testing.md, "Fault injection"). */
#ifndef EST_FAULT_HOOKS_H
#define EST_FAULT_HOOKS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct est_fault_hooks {
  /* At the start of global step `global_step` of a train call, on rank `rank` (0 in one
   * process), after the step's batch was read and before the model call; only on a rank
   * that got a batch. A signal raised here is seen by the step's stop-request check. */
  void (*before_step)(void *ctx, int rank, int64_t global_step);
  /* Inside the checkpoint save of global step `step` (every rank that saves), at `phase`
   * "bundle" (the checkpoint's files are complete, the `checkpoint` state file does not
   * name them yet) and then "state" (the state file names them, the checkpoints that fell
   * off keep_checkpoint_max are not deleted yet). */
  void (*checkpoint_phase)(void *ctx, int64_t step, const char *phase);
  void *ctx; /* passed to both */
} est_fault_hooks;

/* Installs a copy of `hooks` for the whole process (either callback may be NULL); NULL
 * removes them. Not synchronised: call it before training starts, not during a train call
 * (a train call reads the hooks once, when it starts). */
void est_set_fault_hooks(const est_fault_hooks *hooks);

/* The installed hooks, or NULL when none are. */
const est_fault_hooks *est_get_fault_hooks(void);

#ifdef __cplusplus
}
#endif

#endif
