/* run_squad.py as a task on the driver (est/bert_task.h): its own flags' checks, the SQuAD
 * JSON read into examples (squad_read.c), converted to train.tf_record / eval.tf_record
 * (squad_features.c), the squad head (head_squad.c), and write_predictions
 * (squad_predictions.c) with the official evaluation's metrics in eval_results.txt
 * (squad_eval.c). The shared flags and the Estimator are the driver's (docs/squad.md §8). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/bert_head.h"
#include "est/bert_task.h"
#include "est/dataset.h"
#include "est/dist.h"
#include "est/estimator.h"
#include "est/example.h"
#include "est/file.h"
#include "est/log.h"
#include "est/pyrandom.h"
#include "est/run_squad.h"
#include "est/serving.h"
#include "est/squad.h"
#include "est/tfrecord.h"
#include "est/tokenizer.h"
#include "squad/squad_internal.h"

est_run_squad_config est_run_squad_config_default(void) {
  est_task_flags common = est_task_flags_default();
  common.max_seq_length = 384;
  common.seed = 12345; /* est's own: two runs of one command give one model */
  return (est_run_squad_config){.common = common, .do_lower_case = true, .doc_stride = 128, .max_query_length = 64,
                                .num_train_epochs = 3.0, .warmup_proportion = 0.1, .n_best_size = 20,
                                .max_answer_length = 30};
}

/* ---- flag checks: validate_flags_or_throw and the rest --------------------------------- */

static est_status squad_validate(const est_run_squad_config *c) {
  const est_task_flags *f = &c->common;
  if (!c->vocab_file || !*c->vocab_file) return est_error(EST_ERR_INVALID_ARGUMENT, "flag --vocab_file must be specified");
  est_status st = est_validate_case_matches_checkpoint(c->do_lower_case, f->init_checkpoint);
  if (st != EST_OK) return st;
  if (f->do_eval)
    return est_error(EST_ERR_INVALID_ARGUMENT, "run_squad has no eval mode: --do_predict writes the predictions and, "
                                               "when the predict file has answers, eval_results.txt");
  if (f->do_train && (!c->train_file || !*c->train_file))
    return est_error(EST_ERR_INVALID_ARGUMENT, "If `do_train` is True, then `train_file` must be specified.");
  if (f->do_predict && (!c->predict_file || !*c->predict_file))
    return est_error(EST_ERR_INVALID_ARGUMENT, "If `do_predict` is True, then `predict_file` must be specified.");
  if (c->raw_results_file && *c->raw_results_file && !f->do_predict)
    return est_error(EST_ERR_INVALID_ARGUMENT, "--raw_results_file=%s: the raw results are do_predict's; add --do_predict",
                     c->raw_results_file);
  if (f->max_seq_length <= c->max_query_length + 3)
    return est_error(EST_ERR_INVALID_ARGUMENT, "The max_seq_length (%lld) must be greater than max_query_length (%lld) + 3",
                     (long long)f->max_seq_length, (long long)c->max_query_length);
  /* what the reference would loop forever on or fail on later */
  if (c->doc_stride < 1) return est_error(EST_ERR_INVALID_ARGUMENT, "--doc_stride=%lld: must be at least 1",
                                          (long long)c->doc_stride);
  if (c->max_query_length < 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "--max_query_length=%lld: must be at least 0",
                     (long long)c->max_query_length);
  if (c->n_best_size < 1 || c->n_best_size > 1000000)
    return est_error(EST_ERR_INVALID_ARGUMENT, "--n_best_size=%lld: must be in [1, 1000000]", (long long)c->n_best_size);
  if (c->max_answer_length < 1 || c->max_answer_length > 1000000)
    return est_error(EST_ERR_INVALID_ARGUMENT, "--max_answer_length=%lld: must be in [1, 1000000]",
                     (long long)c->max_answer_length);
  if (c->num_train_steps < 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "--num_train_steps=%lld: must be > 0 (or 0: from --num_train_epochs)",
                     (long long)c->num_train_steps);
  if (f->do_train && !c->num_train_steps && !(c->num_train_epochs > 0))
    return est_error(EST_ERR_INVALID_ARGUMENT, "--num_train_epochs=%g: must be > 0 to train", c->num_train_epochs);
  if (f->do_train && !(c->warmup_proportion >= 0 && c->warmup_proportion <= 1))
    return est_error(EST_ERR_INVALID_ARGUMENT, "--warmup_proportion=%g: must be in [0, 1]", c->warmup_proportion);
  if (f->do_train && (st = est_task_need_file("train_file", c->train_file, c->train_file)) != EST_OK) return st;
  if (f->do_predict && (st = est_task_need_file("predict_file", c->predict_file, c->predict_file)) != EST_OK)
    return st;
  if (est_is_directory(c->vocab_file)) return EST_OK; /* a HuggingFace model's (est_tokenizer_open_any) */
  return est_task_need_file("vocab_file", c->vocab_file, c->vocab_file);
}

/* ---- the input_fn: input_fn_builder ------------------------------------------------- */

enum { SQUAD_MAX_FEATURES = 6 };

/* The records through the public TFRecord input_fn: TRAIN repeats, shuffles(100) and drops
 * the remainder; PREDICT reads in file order, the last short batch kept. int64 -> int32 as
 * the reference's _decode_record. */
static est_input_fn squad_input_fn(const char *path, int64_t S, bool is_training) {
  const est_feature_spec specs[SQUAD_MAX_FEATURES] = {
    {.key = "unique_ids", .dtype = EST_DT_INT64, .rank = 0},
    {.key = "input_ids", .dtype = EST_DT_INT64, .rank = 1, .shape = {S}},
    {.key = "input_mask", .dtype = EST_DT_INT64, .rank = 1, .shape = {S}},
    {.key = "segment_ids", .dtype = EST_DT_INT64, .rank = 1, .shape = {S}},
    {.key = "start_positions", .dtype = EST_DT_INT64, .rank = 0},
    {.key = "end_positions", .dtype = EST_DT_INT64, .rank = 0},
  };
  const est_tfrecord_input config = {.paths = &path, .num_paths = 1, .compression = EST_COMPRESSION_NONE,
                                     .specs = specs, .num_specs = is_training ? 6 : 4,
                                     .cast = EST_DATASET_CAST_INT32, .shuffle_buffer = 100, .drop_remainder = 0};
  return est_tfrecord_input_fn(&config); /* a copy: path and specs may go when this returns */
}

/* ---- the task ------------------------------------------------------------------------- */

typedef struct squad_task {
  const est_run_squad_config *c;
  est_tokenizer *tok;
  est_squad_examples *train, *eval;
  int64_t num_train_steps;
  est_squad_predictor *predictor;  /* the predict file's features, then their results */
  est_tfrecord_writer *raw_results; /* --raw_results_file, open while predicting */
  est_progress progress;           /* prediction's, over the predict features (the chief's) */
  char path[4096];                  /* the records of the mode being written */
} squad_task;

static est_squad_feature_config feature_config(const est_run_squad_config *c, bool is_training) {
  return (est_squad_feature_config){.max_seq_length = (int)c->common.max_seq_length, .doc_stride = (int)c->doc_stride,
                                    .max_query_length = (int)c->max_query_length, .is_training = is_training};
}

static est_status task_validate(void *self, const est_task_flags *f) {
  (void)f;
  return squad_validate(((squad_task *)self)->c);
}

/* random.Random(12345).shuffle(train_examples): the same permutation drawn over indexes,
 * then applied to the examples. */
static est_status shuffle_examples(est_squad_examples *ex) {
  const size_t n = ex->count;
  size_t *order = malloc((n ? n : 1) * sizeof *order);
  est_squad_example *shuffled = malloc((n ? n : 1) * sizeof *shuffled);
  if (!order || !shuffled) {
    free(order), free(shuffled);
    return est_error(EST_ERR_NO_MEMORY, "shuffling %zu training examples: out of memory", n);
  }
  for (size_t i = 0; i < n; i++) order[i] = i;
  est_pyrandom rng;
  est_pyrandom_seed(&rng, 12345);
  est_pyrandom_shuffle(&rng, order, n, sizeof *order);
  for (size_t i = 0; i < n; i++) shuffled[i] = ex->examples[order[i]];
  memcpy(ex->examples, shuffled, n * sizeof *shuffled);
  free(order), free(shuffled);
  return EST_OK;
}

/* Reads the files of the modes asked for, so a malformed one fails before any output. */
static est_status task_prepare(void *self, const est_task_flags *f, const est_bert_config *cfg, est_task_model *m) {
  squad_task *t = self;
  const est_run_squad_config *c = t->c;
  est_status st = est_tokenizer_open_any(&t->tok, c->vocab_file, c->do_lower_case);
  if (st != EST_OK) return st;
  const int32_t nvocab = est_tokenizer_size(t->tok);
  if (nvocab > cfg->vocab_size)
    return est_error(EST_ERR_INVALID_ARGUMENT,
                     "--vocab_file=%s has %d tokens but --bert_config_file=%s has vocab_size %d: they do not belong "
                     "to the same model", c->vocab_file, nvocab, f->bert_config_file, cfg->vocab_size);
  m->head = &est_bert_squad_head_type;
  m->head_params = NULL;
  if (f->do_predict &&
      (st = est_squad_read_examples(c->predict_file, false, c->version_2_with_negative, &t->eval)) != EST_OK)
    return st;
  if (!f->do_train) return EST_OK;
  if ((st = est_squad_read_examples(c->train_file, true, c->version_2_with_negative, &t->train)) != EST_OK) return st;
  /* int(len(train_examples) / train_batch_size * num_train_epochs): examples, not windows;
   * or est's --num_train_steps */
  m->num_train_steps = c->num_train_steps > 0 ? c->num_train_steps
                     : (int64_t)((double)t->train->count / (double)f->train_batch_size * c->num_train_epochs);
  m->num_warmup_steps = (int64_t)((double)m->num_train_steps * c->warmup_proportion);
  if (m->num_train_steps < 1)
    return est_error(EST_ERR_INVALID_ARGUMENT,
                     "%zu training examples in --train_file=%s / --train_batch_size=%lld * --num_train_epochs=%g "
                     "gives %lld training steps; need at least 1 (or give --num_train_steps)", t->train->count,
                     c->train_file, (long long)f->train_batch_size, c->num_train_epochs,
                     (long long)m->num_train_steps);
  t->num_train_steps = m->num_train_steps;
  /* "Pre-shuffle the input to avoid having to make a very large shuffle buffer" */
  return shuffle_examples(t->train);
}

/* FeatureWriter over the training examples; returns the number of features. */
static est_status write_train_records(squad_task *t, int64_t *num_features) {
  est_squad_feature_writer *w;
  est_squad_feature_config fc = feature_config(t->c, true);
  est_status st = est_squad_feature_writer_open(&w, t->path, fc.max_seq_length, true);
  if (st != EST_OK) return st;
  st = est_squad_convert_examples(t->train, t->tok, &fc, est_squad_feature_writer_write, w);
  *num_features = est_squad_feature_writer_count(w);
  if (st != EST_OK) {
    est_squad_feature_writer_abort(w);
    return st;
  }
  return est_squad_feature_writer_close(w);
}

/* append_feature: each predict feature both written and kept for write_predictions. */
typedef struct predict_sink {
  est_squad_feature_writer *w;
  est_squad_predictor *p;
} predict_sink;

static est_status append_feature(void *ctx, const est_squad_feature *f) {
  predict_sink *s = ctx;
  est_status st = est_squad_feature_writer_write(s->w, f);
  return st == EST_OK ? est_squad_predictor_add_feature(s->p, f) : st;
}

static est_status write_eval_records(squad_task *t) {
  const est_run_squad_config *c = t->c;
  const est_squad_prediction_config pc = {.n_best_size = (int)c->n_best_size,
                                          .max_answer_length = (int)c->max_answer_length,
                                          .version_2_with_negative = c->version_2_with_negative,
                                          .null_score_diff_threshold = c->null_score_diff_threshold,
                                          .verbose_logging = c->verbose_logging};
  est_status st = est_squad_predictor_create(&t->predictor, t->eval, t->tok, &pc);
  if (st != EST_OK) return st;
  if (c->raw_results_file && *c->raw_results_file &&
      (st = est_tfrecord_writer_open(&t->raw_results, c->raw_results_file, EST_COMPRESSION_NONE)) != EST_OK)
    return est_error_prefix("--raw_results_file=%s: ", c->raw_results_file);
  est_squad_feature_config fc = feature_config(c, false);
  predict_sink sink = {.p = t->predictor};
  if ((st = est_squad_feature_writer_open(&sink.w, t->path, fc.max_seq_length, false)) != EST_OK) return st;
  st = est_squad_convert_examples(t->eval, t->tok, &fc, append_feature, &sink);
  if (st != EST_OK) {
    est_squad_feature_writer_abort(sink.w);
    return st;
  }
  /* The reference logs "Processing example" every 1000 features only: a BERT-Base run on a
   * few cores takes minutes for that many. A line after the first batch, then every 10 s,
   * with the rate and an ETA, as training's log (the log only; no file changes). */
  est_progress_start(&t->progress, "Predicting feature", "features", est_squad_predictor_num_features(t->predictor),
                     c->common.predict_batch_size, 10.0);
  return est_squad_feature_writer_close(sink.w);
}

/* The chief converts; every rank then reads the one file (a shared output_dir). */
static est_status task_open_input(void *self, est_mode mode, est_input_fn *out, int64_t *eval_steps) {
  squad_task *t = self;
  const est_task_flags *f = &t->c->common;
  *eval_steps = 0;
  if (mode == EST_MODE_EVAL) return est_error(EST_ERR_INVALID_ARGUMENT, "run_squad has no eval mode");
  const bool train = mode == EST_MODE_TRAIN;
  est_status st = est_path_join(t->path, sizeof t->path, f->output_dir, train ? "train.tf_record" : "eval.tf_record");
  int64_t num_features = 0;
  if (st == EST_OK && est_dist_is_chief()) st = train ? write_train_records(t, &num_features) : write_eval_records(t);
  if (st == EST_OK && !train && t->predictor) num_features = est_squad_predictor_num_features(t->predictor);
  if (st != EST_OK) return st; /* the caller aborts the job, releasing the ranks at the barrier */
  if ((st = est_dist_barrier()) != EST_OK) return st;
  if (train) {
    EST_LOG_INFO("***** Running training *****");
    EST_LOG_INFO("  Num orig examples = %zu", t->train->count);
    if (est_dist_is_chief()) EST_LOG_INFO("  Num split examples = %lld", (long long)num_features);
    EST_LOG_INFO("  Batch size = %lld", (long long)f->train_batch_size);
    EST_LOG_INFO("  Num steps = %lld", (long long)t->num_train_steps);
  } else {
    EST_LOG_INFO("***** Running predictions *****");
    EST_LOG_INFO("  Num orig examples = %zu", t->eval->count);
    if (est_dist_is_chief()) EST_LOG_INFO("  Num split examples = %lld", (long long)num_features);
    EST_LOG_INFO("  Batch size = %lld", (long long)f->predict_batch_size);
  }
  *out = squad_input_fn(t->path, f->max_seq_length, train);
  return EST_OK;
}

static const est_tensor *prediction_named(const est_prediction *p, const char *name) {
  for (size_t i = 0; i < p->count; i++)
    if (!strcmp(p->names[i], name)) return &p->values[i];
  return NULL;
}

/* One --raw_results_file record: the feature's RawResult as a tf.train.Example. */
static est_status write_raw_result(est_tfrecord_writer *w, int64_t unique_id, const float *start_logits,
                                   const float *end_logits, int n) {
  est_example ex;
  est_example_init(&ex);
  uint8_t *bytes = NULL;
  size_t size = 0;
  est_status st = est_example_set_int64(&ex, "unique_ids", &unique_id, 1);
  if (st == EST_OK) st = est_example_set_float(&ex, "start_logits", start_logits, (size_t)n);
  if (st == EST_OK) st = est_example_set_float(&ex, "end_logits", end_logits, (size_t)n);
  if (st == EST_OK) st = est_example_serialize(&ex, &bytes, &size);
  if (st == EST_OK) st = est_tfrecord_writer_write(w, bytes, size);
  free(bytes);
  est_example_clear(&ex);
  return st;
}

/* RawResult(unique_id, start_logits, end_logits) of one feature. */
static est_status task_on_prediction(void *self, const est_prediction *p) {
  squad_task *t = self;
  if (p->index % 1000 == 0) EST_LOG_INFO("Processing example: %lld", (long long)p->index);
  const est_tensor *id = prediction_named(p, "unique_ids"), *s = prediction_named(p, "start_logits"),
                   *e = prediction_named(p, "end_logits");
  if (!id || id->dtype != EST_DT_INT32 || !s || !e || s->dtype != EST_DT_FLOAT || e->dtype != EST_DT_FLOAT)
    return est_error(EST_ERR_INTERNAL, "prediction %lld: no unique_ids, start_logits and end_logits",
                     (long long)p->index);
  const int n = (int)est_tensor_num_elements(s);
  est_status st = est_squad_predictor_add_result(t->predictor, *(const int32_t *)id->data, s->data, e->data, n);
  if (st == EST_OK && t->raw_results) st = write_raw_result(t->raw_results, *(const int32_t *)id->data, s->data, e->data, n);
  if (st == EST_OK) est_progress_update(&t->progress, p->index + 1);
  return st;
}

/* eval_results.txt: the official script's metrics, "name = value" in the order it prints
 * them (Python's repr of each float, totals as integers). */
static est_status write_eval_results(const char *path, const est_squad_eval_result *r) {
  est_atomic_file *af;
  est_status st = est_atomic_open(&af, path);
  if (st != EST_OK) return st;
  FILE *f = est_atomic_stream(af);
  char *json = est_squad_eval_json(r, false);
  json_error_t err;
  json_t *o = json ? json_loads(json, 0, &err) : NULL;
  free(json);
  if (!o) {
    est_atomic_abort(af);
    return est_error(EST_ERR_NO_MEMORY, "%s: out of memory", path);
  }
  const char *key;
  json_t *v;
  json_object_foreach(o, key, v) {
    char buf[40];
    if (json_is_integer(v)) snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(v));
    else est_squad_format_pyfloat(json_real_value(v), buf, sizeof buf);
    fprintf(f, "%s = %s\n", key, buf);
    EST_LOG_INFO("  %s = %s", key, buf);
  }
  json_decref(o);
  return est_atomic_commit(af);
}

/* Whether the SQuAD file at path has a top-level "version": evaluate-v1.1.py reads it (a
 * KeyError without), so a 1.1 file without one (e.g. a hand-made dev file) is not scored. */
static bool has_version(const char *path) {
  json_t *root = json_load_file(path, 0, NULL);
  const bool found = json_object_get(root, "version") != NULL;
  json_decref(root);
  return found;
}

static est_status task_write_predictions(void *self, const char *output_dir) {
  squad_task *t = self;
  const est_run_squad_config *c = t->c;
  char pred[4096], nbest[4096], odds[4096], results[4096];
  est_status st = est_path_join(pred, sizeof pred, output_dir, "predictions.json");
  if (st == EST_OK) st = est_path_join(nbest, sizeof nbest, output_dir, "nbest_predictions.json");
  if (st == EST_OK) st = est_path_join(odds, sizeof odds, output_dir, "null_odds.json");
  if (st == EST_OK) st = est_path_join(results, sizeof results, output_dir, "eval_results.txt");
  if (st == EST_OK) st = est_squad_predictor_write(t->predictor, pred, nbest, odds);
  if (st == EST_OK && t->raw_results) {
    st = est_tfrecord_writer_close(t->raw_results); /* the file appears only now, whole */
    t->raw_results = NULL;
    if (st == EST_OK) EST_LOG_INFO("Writing raw results to: %s", c->raw_results_file);
  }
  if (st != EST_OK) return st;
  /* Scored when the predict file can be: version 1 needs answers to every question (the
   * v1.1 script's max() fails on one without), version 2 any answers at all. */
  const est_squad_examples *ex = t->eval;
  const bool scorable = c->version_2_with_negative ? ex->num_with_answers > 0
                                                   : ex->num_questions > 0 && ex->num_with_answers == ex->num_questions;
  if (!scorable) {
    EST_LOG_INFO("--predict_file=%s has no answers to score: no eval_results.txt", c->predict_file);
    return EST_OK;
  }
  if (!c->version_2_with_negative && !has_version(c->predict_file)) {
    EST_LOG_INFO("--predict_file=%s has no \"version\", which evaluate-v1.1.py reads: no eval_results.txt",
                 c->predict_file);
    return EST_OK;
  }
  est_squad_eval_config ec = est_squad_eval_config_default();
  ec.data_file = c->predict_file;
  ec.pred_file = pred;
  ec.na_prob_file = c->version_2_with_negative ? odds : NULL;
  ec.version = c->version_2_with_negative ? EST_SQUAD_EVAL_V2_0 : EST_SQUAD_EVAL_V1_1;
  est_squad_eval_result r;
  if ((st = est_squad_evaluate(&ec, &r)) != EST_OK) return est_error_prefix("scoring %s: ", pred);
  EST_LOG_INFO("***** Eval results *****");
  st = write_eval_results(results, &r);
  est_squad_eval_result_free(&r);
  return st;
}

/* --do_export: a "squad" servable with what prediction needs (est/serving.h). */
static est_status task_export(void *self, const est_task_flags *f) {
  const est_run_squad_config *c = ((squad_task *)self)->c;
  if (f->export_format && !strcmp(f->export_format, "hf"))
    return est_error(EST_ERR_INVALID_ARGUMENT, "--export_format=hf: run_squad exports est servables only (a "
                     "HuggingFace directory is run_classifier's); leave --export_format at est");
  est_model_meta meta = {.do_lower_case = c->do_lower_case};
  const est_model_squad q = {.doc_stride = (int)c->doc_stride, .max_query_length = (int)c->max_query_length,
                             .n_best_size = (int)c->n_best_size, .max_answer_length = (int)c->max_answer_length,
                             .version_2_with_negative = c->version_2_with_negative,
                             .null_score_diff_threshold = c->null_score_diff_threshold};
  est_model_meta_set_head(&meta, &est_served_squad, &q);
  snprintf(meta.task, sizeof meta.task, "squad");
  return est_export_task(f, c->vocab_file, &meta, NULL, 0);
}

static void task_release(void *self) {
  squad_task *t = self;
  if (t->raw_results) est_tfrecord_writer_abort(t->raw_results); /* a failed run leaves no partial file */
  est_squad_predictor_free(t->predictor);
  est_squad_examples_free(t->train);
  est_squad_examples_free(t->eval);
  est_tokenizer_free(t->tok);
}

static est_status run(const est_run_squad_config *c, int validate_only) {
  squad_task t = {.c = c};
  const est_task task = {.name = "run_squad", .self = &t,
                         .do_flags_message = "At least one of `do_train` or `do_predict` must be True.",
                         .validate = task_validate, .prepare = task_prepare, .open_input = task_open_input,
                         .on_prediction = task_on_prediction, .write_predictions = task_write_predictions,
                         .export = task_export, .release = task_release};
  return est_task_main(&task, &c->common, validate_only);
}

est_status est_run_squad_validate(const est_run_squad_config *c) { return run(c, 1); }
est_status est_run_squad_main(const est_run_squad_config *c) { return run(c, 0); }
