/* run_squad.py as a task on the driver (est/bert_task.h, docs/squad.md §8): its flags' checks
 * (validate_flags_or_throw), the SQuAD files read and converted to records, the SQuAD head,
 * write_predictions, and eval_results.txt scored by the official scripts' rules when the
 * predict file has answers. The shared flags, the Estimator and the checkpoints are the
 * driver's. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/bert_head.h"
#include "est/bert_task.h"
#include "est/dataset.h"
#include "est/dist.h"
#include "est/file.h"
#include "est/log.h"
#include "est/pyrandom.h"
#include "est/run_classifier.h"
#include "est/run_squad.h"
#include "est/squad.h"
#include "est/tokenizer.h"

est_run_squad_config est_run_squad_config_default(void) {
  est_run_squad_config c = {.common = est_task_flags_default()};
  c.common.max_seq_length = 384;
  c.common.seed = 12345; /* as run_classifier: two runs of one command give one model */
  c.do_lower_case = true;
  c.doc_stride = 128;
  c.max_query_length = 64;
  c.num_train_epochs = 3.0;
  c.warmup_proportion = 0.1;
  c.n_best_size = 20;
  c.max_answer_length = 30;
  return c;
}

/* ---- flag checks: validate_flags_or_throw and est's own ----------------------------- */

static est_status squad_validate(const est_run_squad_config *c) {
  const est_task_flags *f = &c->common;
  if (!c->vocab_file || !*c->vocab_file) return est_error(EST_ERR_INVALID_ARGUMENT, "flag --vocab_file must be specified");
  est_status st = est_validate_case_matches_checkpoint(c->do_lower_case, f->init_checkpoint);
  if (st != EST_OK) return st;
  if (f->do_eval)
    return est_error(EST_ERR_INVALID_ARGUMENT, "run_squad has no eval mode: use --do_predict (it writes "
                                               "eval_results.txt when --predict_file has answers)");
  if (f->do_train && (!c->train_file || !*c->train_file))
    return est_error(EST_ERR_INVALID_ARGUMENT, "If `do_train` is True, then `train_file` must be specified.");
  if (f->do_predict && (!c->predict_file || !*c->predict_file))
    return est_error(EST_ERR_INVALID_ARGUMENT, "If `do_predict` is True, then `predict_file` must be specified.");
  if (f->max_seq_length <= c->max_query_length + 3)
    return est_error(EST_ERR_INVALID_ARGUMENT, "The max_seq_length (%lld) must be greater than max_query_length (%lld) + 3",
                     (long long)f->max_seq_length, (long long)c->max_query_length);
  /* What the reference would loop forever on, or index with, given these. */
  if (c->doc_stride < 1)
    return est_error(EST_ERR_INVALID_ARGUMENT, "--doc_stride=%lld: must be at least 1", (long long)c->doc_stride);
  if (c->max_query_length < 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "--max_query_length=%lld: must be >= 0", (long long)c->max_query_length);
  if (c->n_best_size < 0 || c->n_best_size > 1000000)
    return est_error(EST_ERR_INVALID_ARGUMENT, "--n_best_size=%lld: must be in [0, 1000000]", (long long)c->n_best_size);
  if (c->max_answer_length < 0 || c->max_answer_length > 1000000)
    return est_error(EST_ERR_INVALID_ARGUMENT, "--max_answer_length=%lld: must be in [0, 1000000]",
                     (long long)c->max_answer_length);
  if (f->do_train && !(c->num_train_epochs > 0))
    return est_error(EST_ERR_INVALID_ARGUMENT, "--num_train_epochs=%g: must be > 0 to train", c->num_train_epochs);
  if (f->do_train && !(c->warmup_proportion >= 0 && c->warmup_proportion <= 1))
    return est_error(EST_ERR_INVALID_ARGUMENT, "--warmup_proportion=%g: must be in [0, 1]", c->warmup_proportion);
  if (f->do_train && (st = est_task_need_file("train_file", c->train_file, c->train_file)) != EST_OK) return st;
  if (f->do_predict && (st = est_task_need_file("predict_file", c->predict_file, c->predict_file)) != EST_OK)
    return st;
  return est_task_need_file("vocab_file", c->vocab_file, c->vocab_file);
}

/* ---- input_fn_builder ----------------------------------------------------------------- */

/* name_to_features: unique_ids, input_ids, input_mask, segment_ids and, training,
 * start_positions, end_positions (is_impossible is written but not read), int64 cast to
 * int32. Training: repeat, shuffle(100), batch with drop_remainder; prediction in file
 * order with the last short batch kept. */
enum { SQUAD_NUM_FEATURES = 6 };

typedef struct squad_input {
  const char *path;
  est_feature_spec specs[SQUAD_NUM_FEATURES];
  est_tfrecord_input config;
} squad_input;

static est_input_fn squad_input_fn(squad_input *in, const char *path, int64_t S, bool is_training) {
  const est_feature_spec specs[SQUAD_NUM_FEATURES] = {
    {.key = "unique_ids", .dtype = EST_DT_INT64, .rank = 0},
    {.key = "input_ids", .dtype = EST_DT_INT64, .rank = 1, .shape = {S}},
    {.key = "input_mask", .dtype = EST_DT_INT64, .rank = 1, .shape = {S}},
    {.key = "segment_ids", .dtype = EST_DT_INT64, .rank = 1, .shape = {S}},
    {.key = "start_positions", .dtype = EST_DT_INT64, .rank = 0},
    {.key = "end_positions", .dtype = EST_DT_INT64, .rank = 0},
  };
  memcpy(in->specs, specs, sizeof specs);
  in->path = path;
  in->config = (est_tfrecord_input){.paths = &in->path, .num_paths = 1, .specs = in->specs,
                                    .num_specs = is_training ? 6 : 4, .cast = EST_DATASET_CAST_INT32,
                                    .shuffle_buffer = 100};
  return est_tfrecord_input_fn(&in->config);
}

/* ---- the task ------------------------------------------------------------------------- */

typedef struct squad_task {
  const est_run_squad_config *c;
  est_tokenizer *tok;
  est_squad_examples *train, *predict;
  size_t *train_order;          /* the training examples after rng.shuffle */
  int64_t num_train_steps;
  est_squad_predictions *preds;
  est_squad_feature_writer *writer; /* the prediction records, written beside preds */
  int64_t num_results;
  char path[4096];
  squad_input input;
} squad_task;

static est_status task_validate(void *self, const est_task_flags *f) {
  (void)f;
  return squad_validate(((squad_task *)self)->c);
}

/* Reads both SQuAD files now, so that a malformed one fails before any output. */
static est_status task_prepare(void *self, const est_task_flags *f, const est_bert_config *cfg, est_task_model *m) {
  squad_task *t = self;
  const est_run_squad_config *c = t->c;
  est_status st = est_tokenizer_open(&t->tok, c->vocab_file, c->do_lower_case);
  if (st != EST_OK) return st;
  const int32_t vocab_size = est_vocab_size(est_tokenizer_vocab(t->tok));
  if (vocab_size > cfg->vocab_size)
    return est_error(EST_ERR_INVALID_ARGUMENT, "--vocab_file=%s (%d tokens) is larger than --bert_config_file=%s's "
                     "vocab_size %d: not the same model", c->vocab_file, vocab_size, f->bert_config_file,
                     cfg->vocab_size);
  m->head = &est_bert_squad_head_type;
  m->head_params = NULL;
  if (f->do_predict &&
      (st = est_squad_read_examples(c->predict_file, false, c->version_2_with_negative, &t->predict)) != EST_OK)
    return st;
  if (!f->do_train) return EST_OK;
  if ((st = est_squad_read_examples(c->train_file, true, c->version_2_with_negative, &t->train)) != EST_OK) return st;
  const size_t n = t->train->count;
  m->num_train_steps = est_run_classifier_num_train_steps((int64_t)n, f->train_batch_size, c->num_train_epochs);
  m->num_warmup_steps = est_run_classifier_num_warmup_steps(m->num_train_steps, c->warmup_proportion);
  if (m->num_train_steps < 1)
    return est_error(EST_ERR_INVALID_ARGUMENT, "--train_file=%s: %zu training examples / --train_batch_size=%lld * "
                     "--num_train_epochs=%g gives %lld training steps; need at least 1", c->train_file, n,
                     (long long)f->train_batch_size, c->num_train_epochs, (long long)m->num_train_steps);
  t->num_train_steps = m->num_train_steps;
  /* rng = random.Random(12345); rng.shuffle(train_examples): the permutation depends only
   * on the count, so shuffling indices gives the script's order. */
  t->train_order = malloc((n + 1) * sizeof *t->train_order);
  if (!t->train_order) return est_error(EST_ERR_NO_MEMORY, "run_squad: out of memory for %zu examples", n);
  for (size_t i = 0; i < n; i++) t->train_order[i] = i;
  est_pyrandom rng;
  est_pyrandom_seed(&rng, 12345);
  est_pyrandom_shuffle(&rng, t->train_order, n, sizeof *t->train_order);
  return EST_OK;
}

static est_squad_feature_config feature_config(const est_run_squad_config *c, bool is_training) {
  est_squad_feature_config fc = est_squad_feature_config_default();
  fc.max_seq_length = (int)c->common.max_seq_length;
  fc.doc_stride = (int)c->doc_stride;
  fc.max_query_length = (int)c->max_query_length;
  fc.is_training = is_training;
  return fc;
}

/* train.tf_record: the shuffled examples through convert_examples_to_features. */
static est_status write_train_records(squad_task *t, int64_t *num_features) {
  const est_squad_feature_config fc = feature_config(t->c, true);
  est_squad_feature_writer *w;
  est_squad_converter *conv;
  est_status st = est_squad_feature_writer_open(&w, t->path, fc.max_seq_length, true);
  if (st != EST_OK) return st;
  if ((st = est_squad_converter_create(&conv, t->tok, &fc)) != EST_OK) {
    est_squad_feature_writer_abort(w);
    return st;
  }
  for (size_t i = 0; i < t->train->count && st == EST_OK; i++)
    st = est_squad_converter_convert(conv, &t->train->examples[t->train_order[i]], i, est_squad_feature_writer_write, w);
  est_squad_converter_free(conv);
  *num_features = est_squad_feature_writer_count(w);
  if (st != EST_OK) {
    est_squad_feature_writer_abort(w);
    return st;
  }
  return est_squad_feature_writer_close(w);
}

/* eval.tf_record and, beside it, what write_predictions needs of each feature. */
static est_status keep_and_write(void *self, const est_squad_feature *f) {
  squad_task *t = self;
  est_status st = est_squad_predictions_add_feature(t->preds, f);
  return st ? st : est_squad_feature_writer_write(t->writer, f);
}

static est_status write_predict_records(squad_task *t) {
  const est_run_squad_config *c = t->c;
  const est_squad_feature_config fc = feature_config(c, false);
  const est_squad_prediction_config pc = {.n_best_size = (int)c->n_best_size,
                                          .max_answer_length = (int)c->max_answer_length,
                                          .version_2_with_negative = c->version_2_with_negative,
                                          .null_score_diff_threshold = c->null_score_diff_threshold,
                                          .verbose_logging = c->verbose_logging};
  est_status st = est_squad_predictions_create(&t->preds, t->predict, t->tok, fc.max_seq_length, &pc);
  if (st == EST_OK) st = est_squad_feature_writer_open(&t->writer, t->path, fc.max_seq_length, false);
  if (st != EST_OK) return st;
  st = est_squad_convert_examples(t->predict, t->tok, &fc, keep_and_write, t);
  if (st != EST_OK) {
    est_squad_feature_writer_abort(t->writer);
    t->writer = NULL;
    return st;
  }
  st = est_squad_feature_writer_close(t->writer);
  t->writer = NULL;
  return st;
}

static est_status task_open_input(void *self, est_mode mode, est_input_fn *out, int64_t *eval_steps) {
  squad_task *t = self;
  const est_task_flags *f = &t->c->common;
  const bool training = mode == EST_MODE_TRAIN;
  *eval_steps = 0;
  if (!training && mode != EST_MODE_PREDICT)
    return est_error(EST_ERR_INVALID_ARGUMENT, "run_squad has no eval mode");
  est_status st = est_path_join(t->path, sizeof t->path, f->output_dir, training ? "train.tf_record" : "eval.tf_record");
  int64_t num_features = 0;
  if (st == EST_OK && est_dist_is_chief()) st = training ? write_train_records(t, &num_features) : write_predict_records(t);
  if (st != EST_OK) return st;
  if ((st = est_dist_barrier()) != EST_OK) return st;
  if (training) {
    EST_LOG_INFO("***** Running training *****");
    EST_LOG_INFO("  Num orig examples = %zu", t->train->count);
    EST_LOG_INFO("  Num split examples = %lld", (long long)num_features);
    EST_LOG_INFO("  Batch size = %lld", (long long)f->train_batch_size);
    EST_LOG_INFO("  Num steps = %lld", (long long)t->num_train_steps);
  } else {
    EST_LOG_INFO("***** Running predictions *****");
    EST_LOG_INFO("  Num orig examples = %zu", t->predict->count);
    EST_LOG_INFO("  Num split examples = %zu", t->preds ? est_squad_predictions_num_features(t->preds) : (size_t)0);
    EST_LOG_INFO("  Batch size = %lld", (long long)f->predict_batch_size);
  }
  *out = squad_input_fn(&t->input, t->path, f->max_seq_length, training);
  return EST_OK;
}

/* One RawResult: unique_ids, start_logits, end_logits of one feature. */
static est_status task_on_prediction(void *self, const est_prediction *p) {
  squad_task *t = self;
  const est_tensor *ids = NULL, *start = NULL, *end = NULL;
  for (size_t i = 0; i < p->count; i++) {
    if (!strcmp(p->names[i], "unique_ids")) ids = &p->values[i];
    if (!strcmp(p->names[i], "start_logits")) start = &p->values[i];
    if (!strcmp(p->names[i], "end_logits")) end = &p->values[i];
  }
  const int64_t S = t->c->common.max_seq_length;
  if (!ids || !start || !end || ids->dtype != EST_DT_INT32 || start->dtype != EST_DT_FLOAT ||
      est_tensor_num_elements(start) != S || est_tensor_num_elements(end) != S)
    return est_error(EST_ERR_INTERNAL, "prediction %lld: not unique_ids, start_logits [%lld], end_logits [%lld]",
                     (long long)p->index, (long long)S, (long long)S);
  if (t->num_results % 1000 == 0) EST_LOG_INFO("Processing example: %lld", (long long)t->num_results);
  t->num_results++;
  return est_squad_predictions_add_result(t->preds, ((const int32_t *)ids->data)[0], start->data, end->data);
}

/* Whether the official script can score against the SQuAD file: it has a "version" (both
 * scripts read it) and some question has a non-empty "answers" list (a dev file, not a test
 * file). The file was read before, so it parses. */
static bool scorable(const char *path) {
  json_t *root = json_load_file(path, 0, NULL);
  bool found = false;
  json_t *article, *paragraph, *qa;
  size_t i, j, k;
  json_array_foreach(json_object_get(root, "data"), i, article) {
    json_array_foreach(json_object_get(article, "paragraphs"), j, paragraph) {
      json_array_foreach(json_object_get(paragraph, "qas"), k, qa) {
        if (json_array_size(json_object_get(qa, "answers")) > 0) found = true;
      }
    }
  }
  const bool versioned = json_is_string(json_object_get(root, "version"));
  json_decref(root);
  if (found && !versioned)
    EST_LOG_INFO("--predict_file=%s has answers but no \"version\" (the evaluation scripts need it): no "
                 "eval_results.txt", path);
  return found && versioned;
}

/* eval_results.txt: "key = value" lines of evaluate-v1.1.py's / evaluate-v2.0.py's dict. */
static est_status write_eval_results(const est_run_squad_config *c, const char *pred_path, const char *odds_path,
                                     const char *out_path) {
  est_squad_eval_config ec = est_squad_eval_config_default();
  ec.data_file = c->predict_file;
  ec.pred_file = pred_path;
  ec.na_prob_file = c->version_2_with_negative ? odds_path : NULL;
  ec.version = c->version_2_with_negative ? EST_SQUAD_EVAL_V2_0 : EST_SQUAD_EVAL_V1_1;
  est_squad_eval_result r;
  est_status st = est_squad_evaluate(&ec, &r);
  if (st != EST_OK) return est_error_prefix("scoring %s against --predict_file: ", pred_path);
  char *json = est_squad_eval_json(&r, false);
  est_squad_eval_result_free(&r);
  json_t *dict = json ? json_loads(json, JSON_PRESERVE_ORDER, NULL) : NULL;
  free(json);
  if (!dict) return est_error(EST_ERR_NO_MEMORY, "run_squad: out of memory writing eval_results.txt");
  /* the script's printed numbers, one per line: "exact_match = 81.2" */
  char *text = NULL;
  size_t size = 0;
  FILE *mem = open_memstream(&text, &size);
  const char *key;
  json_t *value;
  EST_LOG_INFO("***** Eval results *****");
  json_object_foreach(dict, key, value) {
    char *v = json_dumps(value, JSON_ENCODE_ANY | JSON_REAL_PRECISION(17));
    char buf[40];
    const char *shown = json_is_real(value) ? est_squad_format_pyfloat(json_real_value(value), buf, sizeof buf) : v;
    if (mem) fprintf(mem, "%s = %s\n", key, shown);
    EST_LOG_INFO("  %s = %s", key, shown);
    free(v);
  }
  json_decref(dict);
  if (!mem) return est_error(EST_ERR_NO_MEMORY, "run_squad: out of memory writing eval_results.txt");
  fclose(mem);
  st = est_write_file_atomic(out_path, text, size);
  free(text);
  return st;
}

static est_status task_write_predictions(void *self, const char *output_dir) {
  squad_task *t = self;
  char pred[4096], nbest[4096], odds[4096], results[4096];
  est_status st = est_path_join(pred, sizeof pred, output_dir, "predictions.json");
  if (st == EST_OK) st = est_path_join(nbest, sizeof nbest, output_dir, "nbest_predictions.json");
  if (st == EST_OK) st = est_path_join(odds, sizeof odds, output_dir, "null_odds.json");
  if (st == EST_OK) st = est_path_join(results, sizeof results, output_dir, "eval_results.txt");
  if (st == EST_OK) st = est_squad_predictions_write(t->preds, pred, nbest, odds);
  if (st != EST_OK || !scorable(t->c->predict_file)) return st;
  return write_eval_results(t->c, pred, odds, results);
}

static est_status run(const est_run_squad_config *c, int validate_only) {
  squad_task t = {.c = c};
  const est_task task = {.name = "run_squad",
                         .self = &t,
                         .do_flags_message = "At least one of `do_train` or `do_predict` must be True.",
                         .validate = task_validate,
                         .prepare = task_prepare,
                         .open_input = task_open_input,
                         .on_prediction = task_on_prediction,
                         .write_predictions = task_write_predictions};
  est_status st = validate_only ? est_task_validate(&task, &c->common) : est_task_run(&task, &c->common);
  est_squad_feature_writer_abort(t.writer);
  est_squad_predictions_free(t.preds);
  est_squad_examples_free(t.train);
  est_squad_examples_free(t.predict);
  free(t.train_order);
  est_tokenizer_free(t.tok);
  return st;
}

est_status est_run_squad_validate(const est_run_squad_config *c) { return run(c, 1); }
est_status est_run_squad_main(const est_run_squad_config *c) { return run(c, 0); }
