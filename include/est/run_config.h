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

typedef struct est_var_store est_var_store;   /* est/variables.h */

/* Data parallelism hook. A single process needs none (config.distribution = NULL: the
 * Estimator then runs on est_dist_one_rank(), est/dist.h, whose collectives are the
 * identity, so one process and N ranks take the same code path).
 * An MPI layer fills one in (est_dist_configure_run_config): the estimator then combines
 * the gradient buffer after each model call, sums metric accumulators after evaluation,
 * broadcasts the chief's initial parameters, gathers every rank's input position into
 * the checkpoint, gathers predictions to the chief in input order, and lets only the
 * chief (rank 0) write checkpoints, summaries and results.
 *
 * The first four entries are required; the others are optional. Every rank makes the
 * same calls in the same order (they are collectives), except abort. */
typedef struct est_distribution {
  int rank;
  int world_size;
  void *ctx;
  est_status (*allreduce_mean)(void *ctx, float *data, size_t n);
  est_status (*allreduce_sum)(void *ctx, double *data, size_t n);
  est_status (*broadcast)(void *ctx, float *data, size_t n);            /* from rank 0 */
  /* recv holds world_size * n values, rank r's n at r * n. */
  est_status (*allgather_i64)(void *ctx, const int64_t *send, size_t n, int64_t *recv);

  est_status (*barrier)(void *ctx);
  /* Rows sharded as Dataset.shard(world_size, rank) (global row g on rank g % world_size)
   * back in input order on the chief: *out = malloc'ed total_rows * row_bytes there,
   * NULL elsewhere (est_dist_gather_rows). Needed by predict on more than one rank. */
  est_status (*gather_rows)(void *ctx, const void *local, size_t local_rows, size_t row_bytes, void **out,
                            size_t *total_rows);
  /* Stops every rank of the job (a caller's last resort after a failure that the other
   * ranks cannot learn of); may return when there is nothing to stop. */
  void (*abort)(void *ctx, int exit_code);

  /* Gradient reduction overlapped with backward (all three or none; without them the
   * estimator calls allreduce_mean on the whole buffer after the model call).
   * grads_begin starts a step over `vars`' gradient buffer: each rank's gradient is
   * multiplied by `weight` and the results summed over ranks; grads_ready says floats
   * [offset, offset + count) of the buffer are final for this step (the model reports
   * them through est_grads_ready as its backward proceeds, so their reduction can start
   * at once); grads_finish returns once the whole buffer holds the combined gradient. */
  est_status (*grads_begin)(void *ctx, est_var_store *vars, double weight);
  est_status (*grads_ready)(void *ctx, size_t offset, size_t count);
  est_status (*grads_finish)(void *ctx);
} est_distribution;

/* How the per-rank gradients of one step combine. */
typedef enum est_grad_reduction {
  EST_GRAD_MEAN = 0,   /* the mean: N ranks with a global batch B train as one process with B */
  EST_GRAD_SUM = 1,    /* the sum (TPU CrossShardOptimizer, docs/optimizer.md §4): N times the
                        * mean, as BERT's TPU runs apply it; one process: the same as MEAN */
} est_grad_reduction;

/* How N ranks split the TRAIN input (est_input_params.sharding; the input_fn applies it,
 * e.g. est_input_shard_dataset). EVAL and PREDICT always shard the records (element i to
 * rank i % N), which predict's in-order gather and eval's batches rely on. */
typedef enum est_input_sharding {
  /* Every rank reads and shuffles the whole input with the run's seed and takes rows
   * [r*b, (r+1)*b) of each global batch of N*b (b = the per-rank train batch): N ranks
   * train on exactly one process's batches (est_dataset_shard_global_batches). Each rank
   * reads all the input. */
  EST_INPUT_SHARDING_GLOBAL = 0,
  /* TF's order: each rank keeps records i % N == r, then repeats and shuffles its shard
   * alone (est_dataset_shard): 1/N of the parsing and shuffle buffering per rank, but
   * other batches (and so another model) for every rank count. */
  EST_INPUT_SHARDING_SHARD_FIRST = 1,
} est_input_sharding;

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
  est_grad_reduction grad_reduction;      /* EST_GRAD_MEAN */
  est_input_sharding input_sharding;      /* EST_INPUT_SHARDING_GLOBAL */
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
