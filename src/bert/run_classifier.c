/* run_classifier.py's main(): flag checks, then train / eval / predict through the
 * Estimator with the BERT classifier model_fn (docs/run_classifier.md §6, §9). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "est/bert_head.h"
#include "est/bert_model.h"
#include "est/dataset.h"
#include "est/dist.h"
#include "est/estimator.h"
#include "est/features.h"
#include "est/file.h"
#include "est/precision.h"
#include "est/log.h"
#include "est/processors.h"
#include "est/tokenizer.h"
#include "run_classifier_internal.h"

/* ---- flag checks ---------------------------------------------------------------------- */

/* `path` must be a readable file; `flag`=`value` is what the user typed that led to it. */
static est_status need_file(const char *flag, const char *value, const char *path) {
  struct stat sb;
  const char *sep = strcmp(value, path) ? ": " : "";
  const char *shown = strcmp(value, path) ? path : "";
  if (stat(path, &sb) != 0)
    return est_error(EST_ERR_NOT_FOUND, "--%s=%s%s%s: %s", flag, value, sep, shown, strerror(errno));
  if (S_ISDIR(sb.st_mode))
    return est_error(EST_ERR_INVALID_ARGUMENT, "--%s=%s%s%s is a directory, not a file", flag, value, sep, shown);
  return EST_OK;
}

est_status est_run_classifier_validate(const est_run_classifier_config *c) {
  /* Required string flags may also be missing when the config comes from a program. */
  const struct {
    const char *name, *value;
  } required[] = {{"data_dir", c->data_dir}, {"bert_config_file", c->bert_config_file},
                  {"task_name", c->task_name}, {"vocab_file", c->vocab_file}, {"output_dir", c->output_dir}};
  for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
    if (!required[i].value || !*required[i].value)
      return est_error(EST_ERR_INVALID_ARGUMENT, "flag --%s must be specified", required[i].name);

  /* main() step 1: the released checkpoints' case. */
  est_status st = est_validate_case_matches_checkpoint(c->do_lower_case, c->init_checkpoint);
  if (st != EST_OK) return st;
  /* step 2 (the reference's text, quotes and all). */
  if (!c->do_train && !c->do_eval && !c->do_predict)
    return est_error(EST_ERR_INVALID_ARGUMENT,
                     "At least one of `do_train`, `do_eval` or `do_predict' must be True.");

  /* Values the reference would only trip over later, or never. */
  if (c->max_seq_length < 3)
    return est_error(EST_ERR_INVALID_ARGUMENT,
                     "--max_seq_length=%lld: must be at least 3 ([CLS] a [SEP] b [SEP] needs 3 special tokens)",
                     (long long)c->max_seq_length);
  const struct {
    const char *name;
    int64_t value;
    bool used;
  } positive[] = {{"train_batch_size", c->train_batch_size, c->do_train},
                  {"eval_batch_size", c->eval_batch_size, c->do_eval},
                  {"predict_batch_size", c->predict_batch_size, c->do_predict},
                  {"save_checkpoints_steps", c->save_checkpoints_steps, c->do_train},
                  {"log_step_count_steps", c->log_step_count_steps, true}};
  for (size_t i = 0; i < sizeof positive / sizeof positive[0]; i++)
    if (positive[i].used && positive[i].value < 1)
      return est_error(EST_ERR_INVALID_ARGUMENT, "--%s=%lld: must be at least 1", positive[i].name,
                       (long long)positive[i].value);
  if (c->train_batch_size > (1 << 20) || c->eval_batch_size > (1 << 20) || c->predict_batch_size > (1 << 20))
    return est_error(EST_ERR_INVALID_ARGUMENT, "batch sizes above %d are not supported", 1 << 20);
  if (c->do_train) {
    if (!(c->learning_rate > 0))
      return est_error(EST_ERR_INVALID_ARGUMENT, "--learning_rate=%g: must be > 0", c->learning_rate);
    if (!(c->num_train_epochs > 0))
      return est_error(EST_ERR_INVALID_ARGUMENT, "--num_train_epochs=%g: must be > 0 to train",
                       c->num_train_epochs);
    if (!(c->warmup_proportion >= 0 && c->warmup_proportion <= 1))
      return est_error(EST_ERR_INVALID_ARGUMENT, "--warmup_proportion=%g: must be in [0, 1]", c->warmup_proportion);
  }
  if (c->num_threads < 0 || c->num_threads > 4096)
    return est_error(EST_ERR_INVALID_ARGUMENT, "--num_threads=%lld: must be in [0, 4096] (0 = default)",
                     (long long)c->num_threads);
  if (!c->precision) return est_error(EST_ERR_INVALID_ARGUMENT, "--precision=: must be fp32 or bf16");
  st = est_precision_check_flag(c->precision);
  if (st != EST_OK) return st;
  if (c->keep_checkpoint_max < 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "--keep_checkpoint_max=%lld: must be >= 0 (0 keeps all)",
                     (long long)c->keep_checkpoint_max);
  if (c->seed < 0) return est_error(EST_ERR_INVALID_ARGUMENT, "--seed=%lld: must be >= 0", (long long)c->seed);
  if (c->input_sharding && strcmp(c->input_sharding, "global") && strcmp(c->input_sharding, "shard_first"))
    return est_error(EST_ERR_INVALID_ARGUMENT, "--input_sharding=%s: must be global or shard_first",
                     c->input_sharding);

  /* The task (the reference looks it up after creating output_dir; est before any work). */
  est_tsv_task_config tc = est_rc_tsv_config(c);
  est_processor *proc;
  st = est_processor_create(&proc, c->task_name, &tc);
  if (st != EST_OK) return est_error_prefix("--task_name: ");
  if (c->do_predict && !est_processor_has_split(proc, EST_SPLIT_TEST)) {
    st = est_error(EST_ERR_UNIMPLEMENTED, "--do_predict: task %s has no test set (the reference raises "
                                          "NotImplementedError)", est_processor_name(proc));
    est_processor_free(proc);
    return st;
  }

  /* Input files, so a typo fails now and not after an hour of training. */
  if (!est_is_directory(c->data_dir)) {
    est_processor_free(proc);
    return est_error(EST_ERR_NOT_FOUND, "--data_dir=%s: no such directory", c->data_dir);
  }
  const bool splits[3] = {c->do_train, c->do_eval, c->do_predict};
  for (int s = 0; s < 3 && st == EST_OK; s++) {
    char path[4096];
    if (splits[s])
      st = need_file("data_dir", c->data_dir, est_processor_split_path(proc, c->data_dir, (est_split)s, path, sizeof path));
  }
  est_processor_free(proc);
  if (st != EST_OK) return st;
  if ((st = need_file("vocab_file", c->vocab_file, c->vocab_file)) != EST_OK) return st;
  if ((st = need_file("bert_config_file", c->bert_config_file, c->bert_config_file)) != EST_OK) return st;
  if (c->init_checkpoint && *c->init_checkpoint) {
    char index[4096];
    snprintf(index, sizeof index, "%s.index", c->init_checkpoint);
    if (!est_file_exists(index))
      return est_error(EST_ERR_NOT_FOUND,
                       "--init_checkpoint=%s: %s does not exist (give the checkpoint prefix, e.g. "
                       ".../bert_model.ckpt)", c->init_checkpoint, index);
  }
  if (est_file_exists(c->output_dir) && !est_is_directory(c->output_dir))
    return est_error(EST_ERR_INVALID_ARGUMENT, "--output_dir=%s exists and is not a directory", c->output_dir);

  /* step 3: the model config and the sequence length it supports. */
  est_bert_config cfg;
  st = est_bert_config_from_json_file(&cfg, c->bert_config_file);
  if (st != EST_OK) return est_error_prefix("--bert_config_file: ");
  const int64_t max_pos = cfg.max_position_embeddings;
  if (c->max_seq_length > max_pos)
    return est_error(EST_ERR_INVALID_ARGUMENT,
                     "Cannot use sequence length %lld because the BERT model was only trained up to sequence "
                     "length %lld (--max_seq_length > max_position_embeddings of --bert_config_file=%s)",
                     (long long)c->max_seq_length, (long long)max_pos, c->bert_config_file);
  return EST_OK;
}

/* ---- input_fn: file_based_input_fn_builder ------------------------------------------ */

/* One split's records through the public TFRecord input_fn: TRAIN reads them -> repeat
 * forever -> shuffle(100) -> batch(drop_remainder); EVAL / PREDICT in file order with the
 * final short batch kept (drop_remainder = use_tpu, false here). Every int64 feature
 * arrives as int32, as the reference's _decode_record casts. The input's exact position
 * (est_input.state_size: 24 + 3 * 100 values with shuffle(100)) goes into each checkpoint,
 * so a resumed run continues with the batches it would have seen. */
typedef struct rc_input {
  const char *path;
  est_feature_spec specs[EST_CLASSIFIER_NUM_FEATURES];
  est_tfrecord_input config;
} rc_input;

static est_input_fn rc_input_fn(rc_input *in, const char *path, int64_t max_seq_length) {
  in->path = path;
  est_classifier_feature_specs(max_seq_length, in->specs);
  in->config = (est_tfrecord_input){.paths = &in->path, .num_paths = 1, .compression = EST_COMPRESSION_NONE,
                                    .specs = in->specs, .num_specs = EST_CLASSIFIER_NUM_FEATURES,
                                    .cast = EST_DATASET_CAST_INT32, .shuffle_buffer = 100,
                                    .drop_remainder = 0, .prefetch = 0};
  return est_tfrecord_input_fn(&in->config);
}

/* ---- predictions -> test_results.tsv ---------------------------------------------- */

typedef struct rc_predictions {
  float *probs;
  int64_t count, cap;
  int num_labels;
} rc_predictions;

static est_status collect_prediction(void *ctx, const est_prediction *p) {
  rc_predictions *r = ctx;
  const est_tensor *t = NULL;
  for (size_t i = 0; i < p->count; i++)
    if (!strcmp(p->names[i], "probabilities")) t = &p->values[i];
  if (!t || t->dtype != EST_DT_FLOAT || est_tensor_num_elements(t) != r->num_labels)
    return est_error(EST_ERR_INTERNAL, "prediction %lld: no float 'probabilities' of %d classes",
                     (long long)p->index, r->num_labels);
  if (r->count == r->cap) {
    int64_t cap = r->cap ? 2 * r->cap : 1024;
    float *grown = realloc(r->probs, (size_t)cap * (size_t)r->num_labels * sizeof(float));
    if (!grown) return est_error(EST_ERR_NO_MEMORY, "out of memory collecting predictions");
    r->probs = grown;
    r->cap = cap;
  }
  memcpy(r->probs + (size_t)r->count * (size_t)r->num_labels, t->data, (size_t)r->num_labels * sizeof(float));
  r->count++;
  return EST_OK;
}

/* ---- main() --------------------------------------------------------------------------- */

/* The chief converts a split to records; every rank then reads that one file (a shared
 * output_dir, which the Estimator checks), each its own shard of it. */
static est_status write_records_on_chief(est_rc_task *task, int split, int max_seq_length, const char *path) {
  est_status st = est_dist_is_chief() ? est_rc_task_write_records(task, split, max_seq_length, path) : EST_OK;
  if (st != EST_OK) return st; /* the caller aborts the job, releasing the ranks at the barrier */
  return est_dist_barrier();
}

/* N ranks: how much of the gradient all-reduce ran during backward (the BERT model reports
 * each layer's gradients as they are final; see est_bert_classifier_set_grads_ready). */
static void log_gradient_reduction(void) {
  if (est_dist_world_size() < 2 || !est_dist_is_chief()) return;
  const est_dist_grad_sync_stats gs = est_dist_hook_grad_stats();
  if (gs.steps < 1) return;
  EST_LOG_INFO("gradient all-reduce: %lld steps x %lld buckets, %lld of them started during backward; %.1f MB, "
               "%.3f s in MPI of which %.3f s waiting after backward",
               (long long)gs.steps, (long long)gs.buckets, (long long)gs.buckets_overlapped, gs.bytes / 1e6,
               gs.reduce_seconds, gs.wait_seconds);
}

est_status est_run_classifier_main(const est_run_classifier_config *c) {
  est_status st = est_run_classifier_validate(c);
  if (st != EST_OK) return st;
  st = est_precision_apply_flag(c->precision);
  if (st != EST_OK) return st;

  est_bert_model_params params = {.head = &est_bert_classifier_head_type};
  est_bert_classifier_head_params head = {0};
  params.head_params = &head;
  st = est_bert_config_from_json_file(&params.bert_config, c->bert_config_file);
  if (st != EST_OK) return st;

  est_rc_task *task = NULL;
  est_estimator *e = NULL;
  rc_predictions preds = {0};
  est_eval_result result = {0};
  char path[4096];

  st = est_rc_task_open(&task, c);
  if (st != EST_OK) goto done;
  /* An id past the embedding table would be an out-of-range gather in the reference. */
  if (est_rc_task_vocab_size(task) > params.bert_config.vocab_size) {
    st = est_error(EST_ERR_INVALID_ARGUMENT,
                   "--vocab_file=%s has %d tokens but --bert_config_file=%s has vocab_size %d: they do not belong "
                   "to the same model", c->vocab_file, est_rc_task_vocab_size(task), c->bert_config_file,
                   params.bert_config.vocab_size);
    goto done;
  }
  /* Read every requested split now, so that a malformed TSV fails before any output. */
  int64_t counts[3] = {0, 0, 0};
  const bool wanted[3] = {c->do_train, c->do_eval, c->do_predict};
  for (int s = 0; s < 3; s++)
    if (wanted[s] && (st = est_rc_task_load(task, c->data_dir, s, &counts[s])) != EST_OK) goto done;

  head.num_labels = (int)est_rc_task_num_labels(task);
  head.extra_metric = (int)est_processor_extra_metric(est_rc_task_processor(task));
  params.max_seq_length = (int)c->max_seq_length;
  params.init_checkpoint = c->init_checkpoint;
  params.init_checkpoint_partial = c->init_checkpoint_partial;
  params.learning_rate = c->learning_rate;
  params.recompute = c->recompute;
  if (c->do_train) {
    params.num_train_steps = est_run_classifier_num_train_steps(counts[0], c->train_batch_size, c->num_train_epochs);
    params.num_warmup_steps = est_run_classifier_num_warmup_steps(params.num_train_steps, c->warmup_proportion);
    if (params.num_train_steps < 1) {
      st = est_error(EST_ERR_INVALID_ARGUMENT,
                     "%lld training examples / --train_batch_size=%lld * --num_train_epochs=%g gives %lld "
                     "training steps; need at least 1",
                     (long long)counts[0], (long long)c->train_batch_size, c->num_train_epochs,
                     (long long)params.num_train_steps);
      goto done;
    }
  }

  st = est_mkdirs(c->output_dir);
  if (st != EST_OK) goto done;

  est_run_config rc = est_run_config_default();
  rc.model_dir = c->output_dir;
  rc.save_checkpoints_steps = c->save_checkpoints_steps;
  rc.keep_checkpoint_max = (int)c->keep_checkpoint_max;
  rc.log_step_count_steps = c->log_step_count_steps;
  rc.log_progress = 1;
  rc.seed = (uint64_t)c->seed;
  rc.num_threads = (int)c->num_threads;
  rc.train_batch_size = (int)c->train_batch_size;
  rc.eval_batch_size = (int)c->eval_batch_size;
  rc.predict_batch_size = (int)c->predict_batch_size;
  rc.input_sharding = c->input_sharding && !strcmp(c->input_sharding, "shard_first") ? EST_INPUT_SHARDING_SHARD_FIRST
                                                                                    : EST_INPUT_SHARDING_GLOBAL;
  /* Under mpirun the batch flags are GLOBAL (as TPUEstimator's over its shards): each rank
   * trains on train_batch_size / N examples per step (its slice of the global batch). */
  const int world = est_dist_world_size();
  if (c->do_train && c->train_batch_size % world != 0) {
    st = est_error(EST_ERR_INVALID_ARGUMENT,
                   "--train_batch_size=%lld is the global batch and must be a multiple of the %d ranks",
                   (long long)c->train_batch_size, world);
    goto done;
  }
  if (!c->do_train && rc.train_batch_size % world) rc.train_batch_size = world; /* unused: any multiple will do */
  est_distribution dist_hook;
  st = est_dist_configure_run_config(&rc, &dist_hook);
  if (st != EST_OK) goto done;
  est_model_fn model_fn = est_bert_model_fn(&params);
  st = est_estimator_create(&e, &model_fn, &rc);
  if (st != EST_OK) goto done;

  if (c->do_train) {
    if ((st = est_path_join(path, sizeof path, c->output_dir, "train.tf_record")) != EST_OK) goto done;
    st = write_records_on_chief(task, 0, (int)c->max_seq_length, path);
    if (st != EST_OK) goto done;
    EST_LOG_INFO("***** Running training *****");
    EST_LOG_INFO("  Num examples = %lld", (long long)counts[0]);
    EST_LOG_INFO("  Batch size = %lld", (long long)c->train_batch_size);
    EST_LOG_INFO("  Num steps = %lld", (long long)params.num_train_steps);
    rc_input in;
    const est_input_fn input_fn = rc_input_fn(&in, path, c->max_seq_length);
    st = est_estimator_train(e, &input_fn, 0, params.num_train_steps);
    if (st != EST_OK) goto done;
    log_gradient_reduction();
  }

  if (c->do_eval) {
    if ((st = est_path_join(path, sizeof path, c->output_dir, "eval.tf_record")) != EST_OK) goto done;
    st = write_records_on_chief(task, 1, (int)c->max_seq_length, path);
    if (st != EST_OK) goto done;
    EST_LOG_INFO("***** Running evaluation *****");
    EST_LOG_INFO("  Num examples = %lld (%lld actual, %d padding)", (long long)counts[1], (long long)counts[1], 0);
    EST_LOG_INFO("  Batch size = %lld", (long long)c->eval_batch_size);
    rc_input in;
    const est_input_fn input_fn = rc_input_fn(&in, path, c->max_seq_length);
    st = est_estimator_evaluate(e, &input_fn, 0, NULL, NULL, &result);
    if (st != EST_OK) goto done;
    char out_path[4096];
    if ((st = est_path_join(out_path, sizeof out_path, c->output_dir, "eval_results.txt")) != EST_OK) goto done;
    /* every rank holds the same reduced metrics; one file, from the chief */
    if (est_dist_is_chief()) {
      est_eval_result_log(&result);
      st = est_eval_result_write(&result, out_path);
    }
    if (st != EST_OK) goto done;
  }

  if (c->do_predict) {
    if ((st = est_path_join(path, sizeof path, c->output_dir, "predict.tf_record")) != EST_OK) goto done;
    st = write_records_on_chief(task, 2, (int)c->max_seq_length, path);
    if (st != EST_OK) goto done;
    EST_LOG_INFO("***** Running prediction*****");
    EST_LOG_INFO("  Num examples = %lld (%lld actual, %d padding)", (long long)counts[2], (long long)counts[2], 0);
    EST_LOG_INFO("  Batch size = %lld", (long long)c->predict_batch_size);
    rc_input in;
    const est_input_fn input_fn = rc_input_fn(&in, path, c->max_seq_length);
    preds.num_labels = head.num_labels;
    st = est_estimator_predict(e, &input_fn, NULL, collect_prediction, &preds);
    if (st != EST_OK) goto done;
    /* The estimator gathers every rank's rows to the chief in input order: the other
     * ranks saw no predictions and write nothing. */
    if (!est_dist_is_chief()) goto done;
    EST_LOG_INFO("***** Predict results *****");
    if (preds.count != counts[2]) {
      st = est_error(EST_ERR_INTERNAL, "%lld predictions for %lld test examples", (long long)preds.count,
                     (long long)counts[2]);
      goto done;
    }
    char out_path[4096];
    if ((st = est_path_join(out_path, sizeof out_path, c->output_dir, "test_results.tsv")) != EST_OK) goto done;
    st = est_run_classifier_write_test_results(out_path, preds.probs, (size_t)preds.count, head.num_labels);
    if (st != EST_OK) goto done;
  }

done:
  est_eval_result_clear(&result);
  free(preds.probs);
  est_estimator_free(e);
  est_rc_task_free(task);
  return st;
}
