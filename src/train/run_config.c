/* RunConfig defaults (tf.estimator.RunConfig + TPUEstimator's batch sizes) and checks. */
#include "est/run_config.h"

#include <math.h>

est_run_config est_run_config_default(void) {
  return (est_run_config){
      .model_dir = NULL,
      .save_checkpoints_steps = 0,
      .save_checkpoints_secs = 0.0,   /* both 0: 600 s, decided at train time */
      .keep_checkpoint_max = 5,
      .log_step_count_steps = 100,
      .save_summary_steps = 100,
      .log_progress = 1,
      .seed = 0,
      .num_threads = 0,
      .train_batch_size = 32,
      .eval_batch_size = 8,
      .predict_batch_size = 8,
      .warm_start_from = NULL,
      .warm_start_vars = NULL,
      .distribution = NULL,
      .grad_reduction = EST_GRAD_MEAN,
      .input_sharding = EST_INPUT_SHARDING_GLOBAL,
  };
}

est_status est_run_config_validate(const est_run_config *rc) {
  if (!rc->model_dir || !*rc->model_dir)
    return est_error(EST_ERR_INVALID_ARGUMENT, "RunConfig: model_dir must be set");
  if (rc->save_checkpoints_steps < 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "RunConfig: save_checkpoints_steps is %lld, must be >= 0",
                     (long long)rc->save_checkpoints_steps);
  if (!(rc->save_checkpoints_secs >= 0.0) || isinf(rc->save_checkpoints_secs))
    return est_error(EST_ERR_INVALID_ARGUMENT, "RunConfig: save_checkpoints_secs is %g, must be finite and >= 0",
                     rc->save_checkpoints_secs);
  /* tf.estimator.RunConfig raises the same ValueError. */
  if (rc->save_checkpoints_steps > 0 && rc->save_checkpoints_secs > 0.0)
    return est_error(EST_ERR_INVALID_ARGUMENT,
                     "RunConfig: save_checkpoints_steps and save_checkpoints_secs cannot both be set");
  if (rc->keep_checkpoint_max < 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "RunConfig: keep_checkpoint_max is %d, must be >= 0 (0 keeps all)",
                     rc->keep_checkpoint_max);
  if (rc->log_step_count_steps < 0 || rc->save_summary_steps < 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "RunConfig: log_step_count_steps/save_summary_steps must be >= 0");
  if (rc->num_threads < 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "RunConfig: num_threads is %d, must be >= 0", rc->num_threads);
  if (rc->train_batch_size <= 0 || rc->eval_batch_size <= 0 || rc->predict_batch_size <= 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "RunConfig: batch sizes must be positive (train %d, eval %d, predict %d)",
                     rc->train_batch_size, rc->eval_batch_size, rc->predict_batch_size);
  const est_distribution *d = rc->distribution;
  if (d) {
    if (d->world_size < 1 || d->rank < 0 || d->rank >= d->world_size)
      return est_error(EST_ERR_INVALID_ARGUMENT, "RunConfig: distribution rank %d / world_size %d out of range",
                       d->rank, d->world_size);
    if (d->world_size > 1 && (!d->allreduce_mean || !d->allreduce_sum || !d->broadcast || !d->allgather_i64))
      return est_error(EST_ERR_INVALID_ARGUMENT,
                       "RunConfig: distribution with world_size %d needs allreduce_mean, allreduce_sum, broadcast "
                       "and allgather_i64", d->world_size);
    const int grads = !!d->grads_begin + !!d->grads_ready + !!d->grads_finish;
    if (grads != 0 && grads != 3)
      return est_error(EST_ERR_INVALID_ARGUMENT,
                       "RunConfig: distribution needs all of grads_begin, grads_ready and grads_finish or none");
  }
  if (rc->input_sharding != EST_INPUT_SHARDING_GLOBAL && rc->input_sharding != EST_INPUT_SHARDING_SHARD_FIRST)
    return est_error(EST_ERR_INVALID_ARGUMENT,
                     "RunConfig: input_sharding is %d, must be EST_INPUT_SHARDING_GLOBAL or _SHARD_FIRST",
                     (int)rc->input_sharding);
  if (rc->grad_reduction != EST_GRAD_MEAN && rc->grad_reduction != EST_GRAD_SUM)
    return est_error(EST_ERR_INVALID_ARGUMENT, "RunConfig: grad_reduction is %d, must be EST_GRAD_MEAN or EST_GRAD_SUM",
                     (int)rc->grad_reduction);
  return EST_OK;
}
