/* est/run_config.h — how an Estimator runs: where it writes, how often it saves, logs and
 * summarises, its seed, its batch sizes, and (optionally) how it talks to other ranks.
 *
 * Fields and defaults follow tf.estimator.RunConfig; the three batch sizes are
 * TPUEstimator's constructor arguments (BERT's run_classifier passes them there).
 *
 *     est_run_config rc = est_run_config_default();
 *     rc.model_dir = "out";
 *     rc.save_checkpoints_steps = 1000;     // BERT's --save_checkpoints_steps
 *     rc.train_batch_size = 32;
 *     rc.seed = 12345;                       // 0: pick one, record it in the checkpoint
 */
#ifndef EST_RUN_CONFIG_H
#define EST_RUN_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "est/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Data parallelism hook. A single process needs none (config.distribution = NULL).
 * An MPI layer fills one in: the estimator then all-reduces (mean) the gradient buffer
 * after each model call, sums metric accumulators after evaluation, broadcasts the
 * chief's initial parameters, gathers every rank's input position into the checkpoint,
 * and lets only the chief (rank 0) write checkpoints, summaries and results. */
typedef struct est_distribution {
  int rank;
  int world_size;
  void *ctx;
  est_status (*allreduce_mean)(void *ctx, float *data, size_t n);
  est_status (*allreduce_sum)(void *ctx, double *data, size_t n);
  est_status (*broadcast)(void *ctx, float *data, size_t n);            /* from rank 0 */
  /* recv holds world_size * n values, rank r's n at r * n. */
  est_status (*allgather_i64)(void *ctx, const int64_t *send, size_t n, int64_t *recv);
} est_distribution;

typedef struct est_run_config {
  const char *model_dir;            /* checkpoints, events, eval/ (required) */

  /* Checkpoint cadence: at most one of the two may be > 0. When both are 0,
   * save_checkpoints_secs = 600 is used (tf.estimator's default). A checkpoint is also
   * written when training starts from scratch and when it ends. */
  int64_t save_checkpoints_steps;
  double save_checkpoints_secs;
  int keep_checkpoint_max;          /* 5; 0 keeps all */

  int64_t log_step_count_steps;     /* 100: "loss = ..., step = ..." and global_step/sec */
  int64_t save_summary_steps;       /* 100: loss / learning_rate into the event file; 0 = off */
  int log_progress;                 /* 1: also "step N/M (p%), X examples/sec, ETA ..." */

  /* tf_random_seed. 0 = none given: a seed is drawn from the clock on a fresh start and
   * saved in the checkpoint (est/seed), so a resumed run keeps using it. */
  uint64_t seed;
  int num_threads;                  /* 0 = leave the process default */

  /* TPUEstimator's per-mode batch sizes (params["batch_size"] for input_fn/model_fn). */
  int train_batch_size;             /* 32 */
  int eval_batch_size;              /* 8 */
  int predict_batch_size;           /* 8 */

  /* tf.estimator.WarmStartSettings: when model_dir has no checkpoint yet, variables whose
   * name matches warm_start_vars (POSIX extended regex, NULL = ".*") and that exist in
   * warm_start_from are loaded from it. NULL = no warm start. */
  const char *warm_start_from;
  const char *warm_start_vars;

  const est_distribution *distribution;   /* NULL: one process */
} est_run_config;

est_run_config est_run_config_default(void);

/* INVALID_ARGUMENT naming the field when a value is out of range or two fields conflict
 * (e.g. both save_checkpoints_steps and save_checkpoints_secs set). */
est_status est_run_config_validate(const est_run_config *rc);

static inline int est_run_config_is_chief(const est_run_config *rc) {
  return !rc->distribution || rc->distribution->rank == 0;
}

#ifdef __cplusplus
}
#endif
#endif
