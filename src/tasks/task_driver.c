/* The one driver of the `est run_*` tasks (est/bert_task.h): the shared flags' checks and
 * the reference scripts' common main() around a task's data and head. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "est/bert_task.h"
#include "est/dist.h"
#include "est/early_stopping.h"
#include "est/exporter.h"
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
  f.exports_to_keep = 5;       /* tf.estimator.BestExporter's */
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

/* --eval_every_steps and the flags that need it (docs/hooks.md §7). */
static est_status validate_eval_during_training(const est_task_flags *f) {
  if (f->eval_every_steps < 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "--eval_every_steps=%lld: must be >= 0 (0: evaluate after training)",
                     (long long)f->eval_every_steps);
  if (f->eval_every_steps > 0 && !(f->do_train && f->do_eval))
    return est_error(EST_ERR_INVALID_ARGUMENT, "--eval_every_steps=%lld evaluates during training: it needs both "
                     "--do_train and --do_eval", (long long)f->eval_every_steps);
  const char *needs = f->early_stopping_metric ? "--early_stopping_metric"
                      : f->early_stopping_patience_steps ? "--early_stopping_patience_steps"
                      : f->export_best ? "--export_best" : NULL;
  if (needs && f->eval_every_steps < 1)
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s acts on evaluations during training: it needs --do_train, "
                     "--do_eval and --eval_every_steps=N", needs);
  if (f->early_stopping_metric && !*f->early_stopping_metric)
    return est_error(EST_ERR_INVALID_ARGUMENT, "--early_stopping_metric=: give a metric of eval_results.txt, "
                     "e.g. eval_loss");
  if ((f->early_stopping_metric != NULL) != (f->early_stopping_patience_steps != 0))
    return est_error(EST_ERR_INVALID_ARGUMENT, "--early_stopping_metric and --early_stopping_patience_steps go "
                     "together (the metric to watch, and for how many steps it may fail to improve)");
  if (f->early_stopping_patience_steps < 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "--early_stopping_patience_steps=%lld: must be at least 1",
                     (long long)f->early_stopping_patience_steps);
  if (f->exports_to_keep < 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "--exports_to_keep=%lld: must be >= 0 (0 keeps all)",
                     (long long)f->exports_to_keep);
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
  return validate_eval_during_training(f);
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

/* est_export_fn of a task's export (the task and the flags in ctx). */
typedef struct task_export_ctx {
  const est_task *t;
  const est_task_flags *f;
} task_export_ctx;

/* The version lands under `base` (the exporter's staging base, where the exporter finds it). */
static est_status export_checkpoint(void *ctx, const char *ckpt, const char *base, char *version_dir, size_t size) {
  const task_export_ctx *x = ctx;
  est_task_flags f = *x->f;
  f.export_checkpoint = ckpt;
  f.export_dir = base;
  f.export_format = NULL;   /* a servable version, whatever --do_export writes */
  (void)version_dir, (void)size;
  return x->t->export(x->t->self, &f);
}

/* A *_loss metric is better smaller; any other (accuracy, ...) larger. */
static int higher_is_better(const char *metric) {
  size_t n = strlen(metric);
  return !(n >= 4 && !strcmp(metric + n - 4, "loss"));
}

/* eval_results.txt and its log lines, from the chief (every rank holds the same metrics). */
static est_status write_eval_results(const est_task_flags *f, const est_eval_result *result) {
  char path[4096];
  est_status st = est_path_join(path, sizeof path, f->output_dir, "eval_results.txt");
  if (st == EST_OK && est_dist_is_chief()) {
    est_eval_result_log(result);
    st = est_eval_result_write(result, path);
  }
  return st;
}

/* --do_train --do_eval --eval_every_steps=N: one train_and_evaluate, with the early-stopping
 * hook and the best exporter when asked for; eval_results.txt from its final evaluation. */
static est_status train_and_evaluate(const est_task *t, const est_task_flags *f, est_estimator *e,
                                     int64_t num_train_steps) {
  est_input_fn train_input = {0}, eval_input = {0};
  int64_t eval_steps = 0, unused = 0;
  /* both open at once: the EVAL input_fn is built after the TRAIN one and opened between
   * its steps, which is why every input_fn owns what it reads */
  est_status st = t->open_input(t->self, EST_MODE_TRAIN, &train_input, &unused);
  if (st == EST_OK) st = t->open_input(t->self, EST_MODE_EVAL, &eval_input, &eval_steps);
  est_early_stopping es;
  est_session_run_hook hook;
  const char *metric = f->early_stopping_metric;
  if (st == EST_OK && metric)
    st = higher_is_better(metric)
             ? est_stop_if_no_increase_hook(&es, e, metric, f->early_stopping_patience_steps, 0, 1, &hook)
             : est_stop_if_no_decrease_hook(&es, e, metric, f->early_stopping_patience_steps, 0, 1, &hook);
  task_export_ctx xctx = {t, f};
  est_exporter best;
  if (st == EST_OK && f->export_best)
    st = est_best_exporter(&best, "best", export_checkpoint, &xctx, metric ? metric : "loss",
                           metric && higher_is_better(metric), f->exports_to_keep);
  if (st != EST_OK) {
    est_input_fn_release(&train_input), est_input_fn_release(&eval_input);
    return st;
  }
  est_train_spec ts = {.input_fn = train_input, .max_steps = num_train_steps, .hooks = metric ? &hook : NULL,
                       .num_hooks = metric ? 1 : 0};
  est_eval_spec ev = {.input_fn = eval_input, .steps = eval_steps, .every_n_steps = f->eval_every_steps,
                      .exporters = f->export_best ? &best : NULL, .num_exporters = f->export_best ? 1 : 0};
  est_eval_result result = {0};
  st = est_train_and_evaluate(e, &ts, &ev, &result);
  est_input_fn_release(&train_input), est_input_fn_release(&eval_input);
  if (st == EST_OK) log_gradient_reduction();
  if (st == EST_OK && t->finish_eval) st = t->finish_eval(t->self, e, &result);
  if (st == EST_OK) st = write_eval_results(f, &result);
  est_eval_result_clear(&result);
  return st;
}

static est_status run_modes(const est_task *t, const est_task_flags *f, est_estimator *e, int64_t num_train_steps) {
  est_input_fn input_fn;
  int64_t eval_steps = 0;
  est_status st = EST_OK;
  const int during_training = f->do_train && f->do_eval && f->eval_every_steps > 0;
  if (during_training) st = train_and_evaluate(t, f, e, num_train_steps);
  if (f->do_train && !during_training) {
    if ((st = t->open_input(t->self, EST_MODE_TRAIN, &input_fn, &eval_steps)) != EST_OK) return st;
    st = est_estimator_train(e, &input_fn, 0, num_train_steps);
    est_input_fn_release(&input_fn);
    if (st != EST_OK) return st;
    log_gradient_reduction();
  }
  if (st != EST_OK) return st;
  if (f->do_eval && !during_training) {
    if ((st = t->open_input(t->self, EST_MODE_EVAL, &input_fn, &eval_steps)) != EST_OK) return st;
    est_eval_result result = {0};
    st = est_estimator_evaluate(e, &input_fn, eval_steps, NULL, NULL, &result);
    est_input_fn_release(&input_fn);
    if (st == EST_OK && t->finish_eval) st = t->finish_eval(t->self, e, &result);
    if (st == EST_OK) st = write_eval_results(f, &result);
    est_eval_result_clear(&result);
    if (st != EST_OK) return st;
  }
  if (f->do_predict) {
    if (!t->on_prediction || !t->write_predictions)
      return est_error(EST_ERR_UNIMPLEMENTED, "%s has no predict mode", t->name);
    if ((st = t->open_input(t->self, EST_MODE_PREDICT, &input_fn, &eval_steps)) != EST_OK) return st;
    st = est_estimator_predict(e, &input_fn, NULL, t->on_prediction, t->self);
    est_input_fn_release(&input_fn);
    if (st != EST_OK) return st;
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
  if ((f->do_export || f->export_best) && !t->export)
    return est_error(EST_ERR_INVALID_ARGUMENT, "--%s: %s has no servable head to export",
                     f->do_export ? "do_export" : "export_best", t->name);
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

est_status est_task_main(const est_task *t, const est_task_flags *f, int validate_only) {
  est_status st = validate_only ? est_task_validate(t, f) : est_task_run(t, f);
  if (t->release) t->release(t->self);
  return st;
}

void est_task_log_running(const est_task_flags *f, est_mode mode, long long num_examples, const char *note,
                          int64_t num_train_steps) {
  static const char *const HEADS[3] = {"***** Running training *****", "***** Running evaluation *****",
                                       "***** Running prediction*****"}; /* sic: the reference's */
  const int64_t batch[3] = {f->train_batch_size, f->eval_batch_size, f->predict_batch_size};
  EST_LOG_INFO("%s", HEADS[mode]);
  EST_LOG_INFO("  Num examples = %lld%s", num_examples, note);
  EST_LOG_INFO("  Batch size = %lld", (long long)batch[mode]);
  if (mode == EST_MODE_TRAIN) EST_LOG_INFO("  Num steps = %lld", (long long)num_train_steps);
}

est_status est_task_check_epochs(const est_task_flags *f, double num_train_epochs, double warmup_proportion) {
  if (f->do_train && !(num_train_epochs > 0))
    return est_error(EST_ERR_INVALID_ARGUMENT, "--num_train_epochs=%g: must be > 0 to train", num_train_epochs);
  if (f->do_train && !(warmup_proportion >= 0 && warmup_proportion <= 1))
    return est_error(EST_ERR_INVALID_ARGUMENT, "--warmup_proportion=%g: must be in [0, 1]", warmup_proportion);
  return EST_OK;
}

est_status est_task_mode_records(const est_task_flags *f, est_mode mode, est_task_write_records_fn write, void *ctx,
                                 char *path, size_t size) {
  static const char *const FILES[3] = {"train.tf_record", "eval.tf_record", "predict.tf_record"};
  est_status st = est_path_join(path, size, f->output_dir, FILES[mode]);
  if (st == EST_OK && est_dist_is_chief()) st = write(ctx, (int)mode, path);
  return st != EST_OK ? st : est_dist_barrier();
}
