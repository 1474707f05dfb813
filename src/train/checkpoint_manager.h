/* The estimator's checkpoint manager (tf.train.Saver as Estimator uses it): writes
 * model_dir/model.ckpt-<step>, then the `checkpoint` state file, then deletes the
 * checkpoints beyond keep_checkpoint_max. Each step is atomic, in that order, so a crash
 * at any moment leaves a state file that names only complete checkpoints. */
#ifndef EST_TRAIN_CHECKPOINT_MANAGER_H
#define EST_TRAIN_CHECKPOINT_MANAGER_H

#include <stddef.h>
#include <stdint.h>

#include "est/status.h"
#include "est/tensor.h"

typedef struct est_ckpt_manager {
  char *dir;
  int keep_max;          /* 0 keeps all */
  size_t count;          /* checkpoints kept, oldest first, as written in the state file */
  char **paths;
} est_ckpt_manager;

/* Picks up model_dir's existing `checkpoint` file (its list is kept and pruned as new
 * checkpoints arrive, as Saver.recover_last_checkpoints does). A state file that does
 * not parse is an error (nothing is overwritten). */
est_status est_ckpt_manager_open(est_ckpt_manager *m, const char *dir, int keep_max);
void est_ckpt_manager_close(est_ckpt_manager *m);

/* Writes <dir>/model.ckpt-<step> with the n tensors, records it as the latest, and
 * deletes the oldest checkpoints beyond keep_max. prefix (may be NULL) receives the full
 * prefix written. */
est_status est_ckpt_manager_save(est_ckpt_manager *m, int64_t step, size_t n, const char *const *names,
                                 const est_tensor *tensors, char *prefix, size_t size);

/* Full prefix of a path from the state file (relative paths are joined onto dir); NULL
 * (the error recorded) when it does not fit in size bytes. */
char *est_ckpt_manager_full_path(const est_ckpt_manager *m, const char *path, char *buf, size_t size);

#endif
