/* The one driver of the `est run_*` tasks (est/bert_task.h): the shared flags' checks and
 * the reference scripts' common main() around a task's data and head. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "est/bert_task.h"
#include "est/dist.h"
#include "est/file.h"
#include "est/hf_model.h"
#include "est/log.h"
#include "est/precision.h"

est_task_flags est_task_flags_default(void) {
  est_task_flags f = {0};
  f.max_seq_length = 128;
  f.train_batch_size = 32;
  f.eval_batch_size = 8;
  f.predict_batch_size = 8;
  f.learning_rate = 5e-5;
  f.save_checkpoints_steps = 1000;
  f.iterations_per_loop = 1000;
  f.num_tpu_cores = 8;
  f.precision = "fp32";
  f.keep_checkpoint_max = 5;   /* tf.estimator.RunConfig's */
  f.log_step_count_steps = 100;
  return f;
}

/* ---- the shared checks ----------------------------------------------------------------- */

est_status est_task_need_file(const char *flag, const char *value, const char *path) {
  struct stat sb;
  const char *sep = strcmp(value, path) ? ": " : "";
  const char *shown = strcmp(value, path) ? path : "";
  if (stat(path, &sb) != 0)
    return est_error(EST_ERR_NOT_FOUND, "--%s=%s%s%s: %s", flag, value, sep, shown, strerror(errno));
  if (S_ISDIR(sb.st_mode))
    return est_error(EST_ERR_INVALID_ARGUMENT, "--%s=%s%s%s is a directory, not a file", flag, value, sep, shown);
  return EST_OK;
}

est_status est_task_flags_validate(const est_task_flags *f, const char *do_flags_message) {
  /* Required string flags may also be missing when the config comes from a program. */
  const struct {
    const char *name, *value;
  } required[] = {{"bert_config_file", f->bert_config_file}, {"output_dir", f->output_dir}};
  for (size_t i = 0; i < sizeof required / sizeof *required; i++)
    if (!required[i].value || !*required[i].value)
      return est_error(EST_ERR_INVALID_ARGUMENT, "flag --%s must be specified", required[i].name);
  /* est's own words first: a value no run could use */
  if (!f->precision) return est_error(EST_ERR_INVALID_ARGUMENT, "--precision=: must be fp32, bf16 or int8");
  est_status st = est_precision_check_flag(f->precision);
  if (st == EST_OK) st = est_precision_check_training(f->precision, f->do_train);
  if (st != EST_OK) return st;
  if (f->input_sharding && strcmp(f->input_sharding, "global") && strcmp(f->input_sharding, "shard_first"))
    return est_error(EST_ERR_INVALID_ARGUMENT, "--input_sharding=%s: must be global or shard_first",
                     f->input_sharding);
  if (!f->do_train && !f->do_eval && !f->do_predict && !f->do_export)
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s", do_flags_message);

  /* Values the references would only trip over later, or never. */
  const struct {
    const char *name;
    int64_t value;
    bool used;
  } positive[] = {{"max_seq_length", f->max_seq_length, true},
                  {"train_batch_size", f->train_batch_size, f->do_train},
                  {"eval_batch_size", f->eval_batch_size, f->do_eval},
                  {"predict_batch_size", f->predict_batch_size, f->do_predict},
                  {"save_checkpoints_steps", f->save_checkpoints_steps, f->do_train},
                  {"log_step_count_steps", f->log_step_count_steps, true}};
  for (size_t i = 0; i < sizeof positive / sizeof *positive; i++)
    if (positive[i].used && positive[i].value < 1)
      return est_error(EST_ERR_INVALID_ARGUMENT, "--%s=%lld: must be at least 1", positive[i].name,
                       (long long)positive[i].value);
  if (f->train_batch_size > (1 << 20) || f->eval_batch_size > (1 << 20) || f->predict_batch_size > (1 << 20))
    return est_error(EST_ERR_INVALID_ARGUMENT, "batch sizes above %d are not supported", 1 << 20);
  if (f->do_train && !(f->learning_rate > 0))
    return est_error(EST_ERR_INVALID_ARGUMENT, "--learning_rate=%g: must be > 0", f->learning_rate);
  if (f->num_threads < 0 || f->num_threads > 4096)
    return est_error(EST_ERR_INVALID_ARGUMENT, "--num_threads=%lld: must be in [0, 4096] (0 = default)",
                     (long long)f->num_threads);
  if (f->keep_checkpoint_max < 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "--keep_checkpoint_max=%lld: must be >= 0 (0 keeps all)",
                     (long long)f->keep_checkpoint_max);
  if (f->seed < 0) return est_error(EST_ERR_INVALID_ARGUMENT, "--seed=%lld: must be >= 0", (long long)f->seed);
  if (f->export_format && strcmp(f->export_format, "est") && strcmp(f->export_format, "hf"))
    return est_error(EST_ERR_INVALID_ARGUMENT, "--export_format=%s: must be est or hf", f->export_format);

  return EST_OK;
}

/* The shared files, after the task's own checks (run_classifier.py's main() checks the
 * checkpoint's case first), so a typo fails now and not after an hour of training. */
static est_status check_files(const est_task_flags *f) {
  char config_json[4096]; /* --bert_config_file=DIR: a HuggingFace model's config.json */
  const char *config = f->bert_config_file;
  if (est_is_directory(config) && est_path_join(config_json, sizeof config_json, config, "config.json") == EST_OK)
    config = config_json;
  est_status st = est_task_need_file("bert_config_file", f->bert_config_file, config);
  if (st != EST_OK) return st;
  if (f->init_checkpoint && *f->init_checkpoint && est_hf_is_checkpoint(f->init_checkpoint)) {
    if (!est_file_exists(f->init_checkpoint))
      return est_error(EST_ERR_NOT_FOUND, "--init_checkpoint=%s does not exist", f->init_checkpoint);
  } else if (f->init_checkpoint && *f->init_checkpoint) {
    char index[4096];
    snprintf(index, sizeof index, "%s.index", f->init_checkpoint);
    if (!est_file_exists(index))
      return est_error(EST_ERR_NOT_FOUND,
                       "--init_checkpoint=%s: %s does not exist (give the checkpoint prefix, e.g. "
                       ".../bert_model.ckpt)", f->init_checkpoint, index);
  }
  if (est_file_exists(f->output_dir) && !est_is_directory(f->output_dir))
    return est_error(EST_ERR_INVALID_ARGUMENT, "--output_dir=%s exists and is not a directory", f->output_dir);
  return EST_OK;
}


/* ---- main() ------------------------------------------------------------------------------- */

/* The reference's check that the model supports the sequence length (modeling.py's text). */
static est_status read_bert_config(const est_task_flags *f, est_bert_config *cfg) {
  est_status st = est_bert_config_from_json_file(cfg, f->bert_config_file);
  if (st != EST_OK) return est_error_prefix("--bert_config_file: ");
  if (f->max_seq_length > cfg->max_position_embeddings)
    return est_error(EST_ERR_INVALID_ARGUMENT,
                     "Cannot use sequence length %lld because the BERT model was only trained up to sequence "
                     "length %d (--max_seq_length > max_position_embeddings of --bert_config_file=%s)",
                     (long long)f->max_seq_length, cfg->max_position_embeddings, f->bert_config_file);
  return EST_OK;
}

/* tf.estimator.RunConfig from the shared flags; under mpirun the batch flags are GLOBAL (as
 * TPUEstimator's over its shards): each rank trains on train_batch_size / N examples. */
static est_status make_run_config(const est_task_flags *f, est_run_config *rc, est_distribution *dist) {
  *rc = est_run_config_default();
  rc->model_dir = f->output_dir;
  rc->save_checkpoints_steps = f->save_checkpoints_steps;
  rc->keep_checkpoint_max = (int)f->keep_checkpoint_max;
  rc->log_step_count_steps = f->log_step_count_steps;
  rc->log_progress = 1;
  rc->seed = (uint64_t)f->seed;
  rc->num_threads = (int)f->num_threads;
  rc->train_batch_size = (int)f->train_batch_size;
  rc->eval_batch_size = (int)f->eval_batch_size;
  rc->predict_batch_size = (int)f->predict_batch_size;
  rc->input_sharding = f->input_sharding && !strcmp(f->input_sharding, "shard_first") ? EST_INPUT_SHARDING_SHARD_FIRST
                                                                                      : EST_INPUT_SHARDING_GLOBAL;
  const int world = est_dist_world_size();
  if (f->do_train && f->train_batch_size % world != 0)
    return est_error(EST_ERR_INVALID_ARGUMENT,
                     "--train_batch_size=%lld is the global batch and must be a multiple of the %d ranks",
                     (long long)f->train_batch_size, world);
  if (!f->do_train && rc->train_batch_size % world) rc->train_batch_size = world; /* unused: any multiple will do */
  return est_dist_configure_run_config(rc, dist);
}

/* N ranks: how much of the gradient all-reduce ran during backward (the encoder and heads
 * report each group of gradients as it is final; est_bert_encoder_set_grads_ready). */
static void log_gradient_reduction(void) {
  if (est_dist_world_size() < 2 || !est_dist_is_chief()) return;
  const est_dist_grad_sync_stats gs = est_dist_hook_grad_stats();
  if (gs.steps < 1) return;
  EST_LOG_INFO("gradient all-reduce: %lld steps x %lld buckets, %lld of them started during backward; %.1f MB, "
               "%.3f s in MPI of which %.3f s waiting after backward",
               (long long)gs.steps, (long long)gs.buckets, (long long)gs.buckets_overlapped, gs.bytes / 1e6,
               gs.reduce_seconds, gs.wait_seconds);
}

static est_status run_modes(const est_task *t, const est_task_flags *f, est_estimator *e, int64_t num_train_steps) {
  est_input_fn input_fn;
  int64_t eval_steps = 0;
  est_status st = EST_OK;
  if (f->do_train) {
    if ((st = t->open_input(t->self, EST_MODE_TRAIN, &input_fn, &eval_steps)) != EST_OK) return st;
    if ((st = est_estimator_train(e, &input_fn, 0, num_train_steps)) != EST_OK) return st;
    log_gradient_reduction();
  }
  if (f->do_eval) {
    if ((st = t->open_input(t->self, EST_MODE_EVAL, &input_fn, &eval_steps)) != EST_OK) return st;
    est_eval_result result = {0};
    st = est_estimator_evaluate(e, &input_fn, eval_steps, NULL, NULL, &result);
    char path[4096];
    if (st == EST_OK) st = est_path_join(path, sizeof path, f->output_dir, "eval_results.txt");
    /* every rank holds the same reduced metrics; one file, from the chief */
    if (st == EST_OK && est_dist_is_chief()) {
      est_eval_result_log(&result);
      st = est_eval_result_write(&result, path);
    }
    est_eval_result_clear(&result);
    if (st != EST_OK) return st;
  }
  if (f->do_predict) {
    if (!t->on_prediction || !t->write_predictions)
      return est_error(EST_ERR_UNIMPLEMENTED, "%s has no predict mode", t->name);
    if ((st = t->open_input(t->self, EST_MODE_PREDICT, &input_fn, &eval_steps)) != EST_OK) return st;
    if ((st = est_estimator_predict(e, &input_fn, NULL, t->on_prediction, t->self)) != EST_OK) return st;
    /* The estimator gathers every rank's rows to the chief in input order: the other
     * ranks saw no predictions and write nothing. */
    if (est_dist_is_chief()) st = t->write_predictions(t->self, f->output_dir);
  }
  return st;
}

/* --do_export and no do_*: only the export runs, and it checks what it needs itself. */
static int export_only(const est_task_flags *f) {
  return f->do_export && !f->do_train && !f->do_eval && !f->do_predict;
}

static est_status check_export(const est_task *t, const est_task_flags *f) {
  if (f->do_export && !t->export)
    return est_error(EST_ERR_INVALID_ARGUMENT, "--do_export: %s has no servable head to export", t->name);
  return EST_OK;
}

/* Every check, in the order est_task_validate documents; *cfg gets the model config (not
 * read for an export alone). */
static est_status validate(const est_task *t, const est_task_flags *f, est_bert_config *cfg) {
  est_status st = check_export(t, f);
  if (st != EST_OK || export_only(f)) return st;
  st = est_task_flags_validate(f, t->do_flags_message);
  if (st == EST_OK && t->validate) st = t->validate(t->self, f);
  if (st == EST_OK) st = check_files(f);
  return st == EST_OK ? read_bert_config(f, cfg) : st; /* and the sequence length it supports */
}

est_status est_task_validate(const est_task *t, const est_task_flags *f) {
  est_bert_config cfg;
  return validate(t, f, &cfg);
}

est_status est_task_run(const est_task *t, const est_task_flags *f) {
  est_bert_config cfg;
  est_status st = validate(t, f, &cfg);
  if (st != EST_OK) return st;
  if (export_only(f)) return t->export(t->self, f);
  est_precision precision;
  if ((st = est_precision_apply_flag(f->precision, &precision)) != EST_OK) return st;
  est_task_model m = {0};
  if ((st = t->prepare(t->self, f, &cfg, &m)) != EST_OK) return st;
  if ((st = est_mkdirs(f->output_dir)) != EST_OK) return st;
  est_run_config rc;
  est_distribution dist;
  if ((st = make_run_config(f, &rc, &dist)) != EST_OK) return st;
  est_bert_model_params params = {.bert_config = cfg,
                                  .head = m.head,
                                  .head_params = m.head_params,
                                  .max_seq_length = (int)f->max_seq_length,
                                  .init_checkpoint = f->init_checkpoint,
                                  .init_checkpoint_partial = f->init_checkpoint_partial,
                                  .learning_rate = f->learning_rate,
                                  .num_train_steps = m.num_train_steps,
                                  .num_warmup_steps = m.num_warmup_steps,
                                  .recompute = f->recompute,
                                  .precision = precision};
  est_model_fn model_fn = est_bert_model_fn(&params);
  est_estimator *e = NULL;
  st = est_estimator_create(&e, &model_fn, &rc);
  if (st == EST_OK) st = run_modes(t, f, e, m.num_train_steps);
  est_estimator_free(e);
  if (st == EST_OK && f->do_export && est_dist_is_chief()) st = t->export(t->self, f);
  return st;
}
