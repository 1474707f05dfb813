/* run_pretraining.py's main(): flag checks, input_fn_builder over the record files, then
 * training and/or evaluation through the Estimator with the pretraining model_fn
 * (est/bert_pretraining.h), eval_results.txt as run_classifier writes it. */
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/bert_head.h"
#include "est/bert_pretraining.h"
#include "est/dataset.h"
#include "est/dist.h"
#include "est/estimator.h"
#include "est/example.h"
#include "est/file.h"
#include "est/log.h"
#include "est/run_classifier.h"

est_run_pretraining_config est_run_pretraining_config_default(void) {
  est_run_pretraining_config c = {0};
  c.max_seq_length = 128;
  c.max_predictions_per_seq = 20;
  c.train_batch_size = 32;
  c.eval_batch_size = 8;
  c.learning_rate = 5e-5;
  c.num_train_steps = 100000;
  c.num_warmup_steps = 10000;
  c.save_checkpoints_steps = 1000;
  c.iterations_per_loop = 1000;
  c.max_eval_steps = 100;
  c.num_tpu_cores = 8;
  c.keep_checkpoint_max = 5;
  c.log_step_count_steps = 100;
  return c;
}

/* ---- --input_file: comma-separated globs (tf.gfile.Glob each) ------------------------- */

typedef struct file_list {
  char **paths;
  size_t n;
} file_list;

static void file_list_free(file_list *l) {
  for (size_t i = 0; i < l->n; i++) free(l->paths[i]);
  free(l->paths);
  l->paths = NULL;
  l->n = 0;
}

static est_status expand_input_files(const char *spec, file_list *out) {
  char *copy = strdup(spec);
  if (!copy) return est_error(EST_ERR_NO_MEMORY, "out of memory");
  est_status st = EST_OK;
  char *save = NULL;
  for (char *pat = strtok_r(copy, ",", &save); pat && !st; pat = strtok_r(NULL, ",", &save)) {
    if (!*pat) continue;
    glob_t g;
    int rc = glob(pat, 0, NULL, &g);
    if (rc == GLOB_NOMATCH) {
      st = est_error(EST_ERR_NOT_FOUND, "--input_file: %s matches no file", pat);
    } else if (rc != 0) {
      st = est_error(EST_ERR_INTERNAL, "--input_file: cannot expand %s", pat);
    } else {
      char **grown = realloc(out->paths, (out->n + g.gl_pathc) * sizeof *grown);
      if (!grown) st = est_error(EST_ERR_NO_MEMORY, "out of memory");
      for (size_t i = 0; !st && i < g.gl_pathc; i++) {
        out->paths = grown;
        if (!(out->paths[out->n] = strdup(g.gl_pathv[i]))) st = est_error(EST_ERR_NO_MEMORY, "out of memory");
        else out->n++;
      }
      globfree(&g);
    }
  }
  free(copy);
  if (!st && out->n == 0) st = est_error(EST_ERR_INVALID_ARGUMENT, "--input_file names no file");
  return st;
}

/* ---- input_fn_builder ------------------------------------------------------------------ */

/* run_pretraining's input_fn_builder as est_tfrecord_input_fn's options (est/estimator.h).
 * Training: the file list repeated and shuffled, min(4, files) files read at a time, a
 * record from each in turn (the reference's num_cpu_threads = 4 cycle; its interleave is
 * sloppy, est's the deterministic order of est_dataset_interleave) -> shuffle(100) ->
 * parse -> batch(drop_remainder). Eval: the files in order, repeated (max_eval_steps
 * bounds it) -> parse -> batch(drop_remainder). Every int64 feature arrives as int32. */
typedef struct pt_input {
  est_feature_spec specs[7];
  est_tfrecord_input config;
} pt_input;

static void pt_input_init(pt_input *in, const file_list *files, int64_t S, int64_t P) {
  const est_feature_spec specs[7] = {
    {.key = "input_ids", .dtype = EST_DT_INT64, .rank = 1, .shape = {S}},
    {.key = "input_mask", .dtype = EST_DT_INT64, .rank = 1, .shape = {S}},
    {.key = "segment_ids", .dtype = EST_DT_INT64, .rank = 1, .shape = {S}},
    {.key = "masked_lm_positions", .dtype = EST_DT_INT64, .rank = 1, .shape = {P}},
    {.key = "masked_lm_ids", .dtype = EST_DT_INT64, .rank = 1, .shape = {P}},
    {.key = "masked_lm_weights", .dtype = EST_DT_FLOAT, .rank = 1, .shape = {P}},
    {.key = "next_sentence_labels", .dtype = EST_DT_INT64, .rank = 1, .shape = {1}},
  };
  memcpy(in->specs, specs, sizeof specs);
  in->config = (est_tfrecord_input){.paths = (const char *const *)files->paths, .num_paths = files->n,
                                    .compression = EST_COMPRESSION_NONE, .specs = in->specs, .num_specs = 7,
                                    .cast = EST_DATASET_CAST_INT32, .shuffle_buffer = 100, .drop_remainder = 1,
                                    .prefetch = 2, .interleave_cycle_length = files->n < 4 ? (int)files->n : 4,
                                    .eval_repeat = 1};
}

/* A record whose fixed-length features disagree with the flags fails in the parser with
 * TF's text, naming the file, record and key; say which flags it is about. */
static est_status explain_length_mismatch(est_status st, const est_run_pretraining_config *c) {
  if (st == EST_OK || !strstr(est_error_message(), "Can't parse serialized Example")) return st;
  char msg[2048];
  snprintf(msg, sizeof msg, "%s", est_error_message());
  return est_error(st, "%s (a feature of another length than the flags give: input_ids/input_mask/segment_ids "
                   "must have --max_seq_length=%lld values and masked_lm_positions/ids/weights "
                   "--max_predictions_per_seq=%lld; the records were written with other flags?)",
                   msg, (long long)c->max_seq_length, (long long)c->max_predictions_per_seq);
}

/* ---- main() ------------------------------------------------------------------------------ */

static est_status validate(const est_run_pretraining_config *c) {
  const struct {
    const char *name, *value;
  } required[] = {{"bert_config_file", c->bert_config_file}, {"input_file", c->input_file},
                  {"output_dir", c->output_dir}};
  for (size_t i = 0; i < 3; i++)
    if (!required[i].value || !*required[i].value)
      return est_error(EST_ERR_INVALID_ARGUMENT, "flag --%s must be specified", required[i].name);
  if (!c->do_train && !c->do_eval)
    return est_error(EST_ERR_INVALID_ARGUMENT, "At least one of `do_train` or `do_eval` must be True.");
  const struct {
    const char *name;
    int64_t value;
    bool used;
  } positive[] = {{"max_seq_length", c->max_seq_length, true},
                  {"max_predictions_per_seq", c->max_predictions_per_seq, true},
                  {"train_batch_size", c->train_batch_size, c->do_train},
                  {"eval_batch_size", c->eval_batch_size, c->do_eval},
                  {"num_train_steps", c->num_train_steps, c->do_train},
                  {"save_checkpoints_steps", c->save_checkpoints_steps, c->do_train},
                  {"max_eval_steps", c->max_eval_steps, c->do_eval},
                  {"log_step_count_steps", c->log_step_count_steps, true}};
  for (size_t i = 0; i < sizeof positive / sizeof *positive; i++)
    if (positive[i].used && positive[i].value < 1)
      return est_error(EST_ERR_INVALID_ARGUMENT, "--%s=%lld: must be at least 1", positive[i].name,
                       (long long)positive[i].value);
  if (c->max_predictions_per_seq > c->max_seq_length)
    return est_error(EST_ERR_INVALID_ARGUMENT, "--max_predictions_per_seq=%lld exceeds --max_seq_length=%lld",
                     (long long)c->max_predictions_per_seq, (long long)c->max_seq_length);
  if (c->do_train && !(c->learning_rate > 0))
    return est_error(EST_ERR_INVALID_ARGUMENT, "--learning_rate=%g: must be > 0", c->learning_rate);
  if (c->num_warmup_steps < 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "--num_warmup_steps=%lld: must be >= 0", (long long)c->num_warmup_steps);
  if (c->seed < 0) return est_error(EST_ERR_INVALID_ARGUMENT, "--seed=%lld: must be >= 0", (long long)c->seed);
  if (c->init_checkpoint && *c->init_checkpoint) {
    char index[4096];
    snprintf(index, sizeof index, "%s.index", c->init_checkpoint);
    if (!est_file_exists(index))
      return est_error(EST_ERR_NOT_FOUND, "--init_checkpoint=%s: %s does not exist (give the checkpoint prefix, e.g. "
                       ".../bert_model.ckpt)", c->init_checkpoint, index);
  }
  return EST_OK;
}

est_status est_run_pretraining_main(const est_run_pretraining_config *c) {
  est_status st = validate(c);
  if (st != EST_OK) return st;
  est_bert_pretraining_head_params head = {.max_predictions_per_seq = (int)c->max_predictions_per_seq};
  est_bert_model_params params = {.head = &est_bert_pretraining_head_type, .head_params = &head};
  st = est_bert_config_from_json_file(&params.bert_config, c->bert_config_file);
  if (st != EST_OK) return est_error_prefix("--bert_config_file: ");
  if (c->max_seq_length > params.bert_config.max_position_embeddings)
    return est_error(EST_ERR_INVALID_ARGUMENT,
                     "Cannot use sequence length %lld because the BERT model was only trained up to sequence "
                     "length %d (--max_seq_length > max_position_embeddings of --bert_config_file=%s)",
                     (long long)c->max_seq_length, params.bert_config.max_position_embeddings, c->bert_config_file);
  params.init_checkpoint = c->init_checkpoint;
  params.init_checkpoint_partial = c->init_checkpoint_partial;
  params.learning_rate = c->learning_rate;
  params.num_train_steps = c->num_train_steps;
  params.num_warmup_steps = c->num_warmup_steps;
  params.max_seq_length = (int)c->max_seq_length;
  params.recompute = c->recompute;

  file_list files = {0};
  est_estimator *e = NULL;
  est_eval_result result = {0};
  if ((st = expand_input_files(c->input_file, &files)) != EST_OK) goto done;
  EST_LOG_INFO("*** Input Files ***");
  for (size_t i = 0; i < files.n; i++) EST_LOG_INFO("  %s", files.paths[i]);
  if ((st = est_mkdirs(c->output_dir)) != EST_OK) goto done;

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
  rc.predict_batch_size = (int)c->eval_batch_size;
  const int world = est_dist_world_size();
  if (c->do_train && c->train_batch_size % world != 0) {
    st = est_error(EST_ERR_INVALID_ARGUMENT,
                   "--train_batch_size=%lld is the global batch and must be a multiple of the %d ranks",
                   (long long)c->train_batch_size, world);
    goto done;
  }
  if (!c->do_train && rc.train_batch_size % world) rc.train_batch_size = world;
  est_distribution dist_hook;
  if ((st = est_dist_configure_run_config(&rc, &dist_hook)) != EST_OK) goto done;
  est_model_fn model_fn = est_bert_model_fn(&params);
  if ((st = est_estimator_create(&e, &model_fn, &rc)) != EST_OK) goto done;

  pt_input in;
  pt_input_init(&in, &files, c->max_seq_length, c->max_predictions_per_seq);
  est_input_fn input_fn = est_tfrecord_input_fn(&in.config);
  if (c->do_train) {
    EST_LOG_INFO("***** Running training *****");
    EST_LOG_INFO("  Batch size = %lld", (long long)c->train_batch_size);
    if ((st = est_estimator_train(e, &input_fn, 0, c->num_train_steps)) != EST_OK) goto done;
  }
  if (c->do_eval) {
    EST_LOG_INFO("***** Running evaluation *****");
    EST_LOG_INFO("  Batch size = %lld", (long long)c->eval_batch_size);
    if ((st = est_estimator_evaluate(e, &input_fn, c->max_eval_steps, NULL, NULL, &result)) != EST_OK) goto done;
    char out_path[4096];
    if ((st = est_path_join(out_path, sizeof out_path, c->output_dir, "eval_results.txt")) != EST_OK) goto done;
    /* every rank holds the same reduced metrics; one file, from the chief */
    if (est_dist_is_chief()) {
      est_eval_result_log(&result);
      st = est_eval_result_write(&result, out_path);
    }
  }

done:
  est_eval_result_clear(&result);
  st = explain_length_mismatch(st, c);
  est_estimator_free(e);
  file_list_free(&files);
  return st;
}
