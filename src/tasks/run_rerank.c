/* run_rerank as a task on the driver (est/run_rerank.h, est/bert_task.h): (query, passage,
 * label) files read (est/rerank.h) into pair records, the classifier head with one output and
 * a pair loss, MRR@10 / NDCG@10 over dev's queries added to eval_results.txt, test_results.tsv
 * with each pair's score and rank (docs/rerank.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/bert_head.h"
#include "est/classifier_features.h"
#include "est/dataset.h"
#include "est/dist.h"
#include "est/estimator.h"
#include "est/example.h"
#include "est/file.h"
#include "est/hf_model.h"
#include "est/log.h"
#include "est/float_format.h"
#include "est/rerank.h"
#include "est/run_classifier.h"
#include "est/run_rerank.h"
#include "est/serving.h"
#include "est/tfrecord.h"
#include "est/tokenizer.h"

static const char *const SPLIT_NAMES[3] = {"train", "dev", "test"};
enum { RERANK_NUM_FEATURES = 4, RERANK_AT = 10 };
static const char *const FEATURE_KEYS[RERANK_NUM_FEATURES] = {"input_ids", "input_mask", "segment_ids",
                                                              "label_values"};

est_run_rerank_config est_run_rerank_config_default(void) {
  est_run_rerank_config c = {.common = est_task_flags_default()};
  c.do_lower_case = true;
  c.num_train_epochs = 3.0;
  c.warmup_proportion = 0.1;
  c.common.seed = 12345; /* as run_classifier: two runs of one command give one model */
  return c;
}

static int loss_kind(const est_run_rerank_config *c) {
  return !c->loss || !strcmp(c->loss, "bce") ? EST_PAIR_LOSS_BCE : !strcmp(c->loss, "mse") ? EST_PAIR_LOSS_MSE : 0;
}

/* data_dir/<split>.tsv, else data_dir/<split>.jsonl; the .tsv name when neither exists. */
static est_status split_path(const char *data_dir, int split, char *path, size_t size) {
  char name[32];
  snprintf(name, sizeof name, "%s.tsv", SPLIT_NAMES[split]);
  est_status st = est_path_join(path, size, data_dir, name);
  if (st != EST_OK || est_file_exists(path)) return st;
  char alt[4096];
  snprintf(name, sizeof name, "%s.jsonl", SPLIT_NAMES[split]);
  if ((st = est_path_join(alt, sizeof alt, data_dir, name)) != EST_OK) return st;
  if (est_file_exists(alt)) snprintf(path, size, "%s", alt);
  return EST_OK;
}

/* ---- flag checks ---------------------------------------------------------------------- */

static est_status rerank_validate(const est_run_rerank_config *c) {
  const struct {
    const char *name, *value;
  } required[] = {{"data_dir", c->data_dir}, {"vocab_file", c->vocab_file}};
  for (size_t i = 0; i < 2; i++)
    if (!required[i].value || !*required[i].value)
      return est_error(EST_ERR_INVALID_ARGUMENT, "flag --%s must be specified", required[i].name);
  if (!loss_kind(c)) return est_error(EST_ERR_INVALID_ARGUMENT, "--loss=%s: expected bce or mse", c->loss);
  est_status st = est_validate_case_matches_checkpoint(c->do_lower_case, c->common.init_checkpoint);
  if (st != EST_OK) return st;
  if (c->common.max_seq_length < 3)
    return est_error(EST_ERR_INVALID_ARGUMENT,
                     "--max_seq_length=%lld: must be at least 3 ([CLS] query [SEP] passage [SEP] needs 3 special "
                     "tokens)", (long long)c->common.max_seq_length);
  if ((st = est_task_check_epochs(&c->common, c->num_train_epochs, c->warmup_proportion)) != EST_OK) return st;
  if (!est_is_directory(c->data_dir))
    return est_error(EST_ERR_NOT_FOUND, "--data_dir=%s: no such directory", c->data_dir);
  const bool splits[3] = {c->common.do_train, c->common.do_eval, c->common.do_predict};
  for (int s = 0; s < 3; s++) {
    char path[4096];
    if (!splits[s]) continue;
    if ((st = split_path(c->data_dir, s, path, sizeof path)) != EST_OK) return st;
    if (!est_file_exists(path))
      return est_error(EST_ERR_NOT_FOUND, "--data_dir=%s: no %s.tsv or %s.jsonl", c->data_dir, SPLIT_NAMES[s],
                       SPLIT_NAMES[s]);
  }
  if (est_is_directory(c->vocab_file)) return EST_OK; /* a HuggingFace model's */
  return est_task_need_file("vocab_file", c->vocab_file, c->vocab_file);
}

/* ---- the task ------------------------------------------------------------------------- */

typedef struct rerank_task {
  const est_run_rerank_config *c;
  est_tokenizer *tok;
  est_rerank_data data[3];
  est_bert_classifier_head_params head;
  int64_t num_train_steps;
  float *scores;                /* the split being predicted's "probabilities", one a pair */
  size_t num_scores;
  int pred_split;
} rerank_task;

static est_status task_validate(void *self, const est_task_flags *f) {
  (void)f;
  return rerank_validate(((rerank_task *)self)->c);
}

static est_status load_split(rerank_task *t, int s) {
  char path[4096];
  est_status st = split_path(t->c->data_dir, s, path, sizeof path);
  if (st == EST_OK) st = est_rerank_read_file(&t->data[s], path);
  if (st == EST_OK && !t->data[s].count) st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: no pairs", path);
  for (size_t i = 0; st == EST_OK && s < 2 && t->head.pair_loss == EST_PAIR_LOSS_BCE && i < t->data[s].count; i++)
    if (t->data[s].items[i].label < 0 || t->data[s].items[i].label > 1)
      st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: pair %zu's label %g: --loss=bce needs labels in [0, 1] (--loss=mse "
                     "for scores)", path, i + 1, (double)t->data[s].items[i].label);
  if (st == EST_OK)
    EST_LOG_INFO("%s: %zu pairs of %zu queries", path, t->data[s].count, t->data[s].num_queries);
  return st;
}

static est_status task_prepare(void *self, const est_task_flags *f, const est_bert_config *cfg, est_task_model *m) {
  rerank_task *t = self;
  const est_run_rerank_config *c = t->c;
  est_status st = est_tokenizer_open_any(&t->tok, c->vocab_file, c->do_lower_case);
  if (st != EST_OK) return st;
  if (est_vocab_size(est_tokenizer_vocab(t->tok)) > cfg->vocab_size)
    return est_error(EST_ERR_INVALID_ARGUMENT,
                     "--vocab_file=%s has %d tokens but --bert_config_file=%s has vocab_size %d: they do not belong "
                     "to the same model", c->vocab_file, est_vocab_size(est_tokenizer_vocab(t->tok)),
                     f->bert_config_file, cfg->vocab_size);
  t->head = (est_bert_classifier_head_params){.num_labels = 1, .pair_loss = loss_kind(c)};
  const bool wanted[3] = {f->do_train, f->do_eval, f->do_predict};
  for (int s = 0; s < 3; s++)
    if (wanted[s] && (st = load_split(t, s)) != EST_OK) return st;
  m->head = &est_bert_classifier_head_type;
  m->head_params = &t->head;
  if (!f->do_train) return EST_OK;
  m->num_train_steps =
      est_run_classifier_num_train_steps((int64_t)t->data[0].count, f->train_batch_size, c->num_train_epochs);
  m->num_warmup_steps = est_run_classifier_num_warmup_steps(m->num_train_steps, c->warmup_proportion);
  if (m->num_train_steps < 1)
    return est_error(EST_ERR_INVALID_ARGUMENT,
                     "%zu training pairs / --train_batch_size=%lld * --num_train_epochs=%g gives %lld training "
                     "steps; need at least 1", t->data[0].count, (long long)f->train_batch_size,
                     c->num_train_epochs, (long long)m->num_train_steps);
  t->num_train_steps = m->num_train_steps;
  return EST_OK;
}

/* One pair a tf.train.Example: run_classifier's pair features (est_convert_single_example:
 * [CLS] query [SEP] passage [SEP], the longer side truncated first) and label_values [1]. */
static est_status write_records(void *self, int split, const char *path) {
  rerank_task *t = self;
  const est_rerank_data *d = &t->data[split];
  const int S = (int)t->c->common.max_seq_length;
  static const char *const ONE_LABEL[1] = {"score"};
  est_feature_converter conv;
  est_status st = est_feature_converter_init(&conv, t->tok, ONE_LABEL, 1, S);
  if (st != EST_OK) return st;
  int32_t *rows = malloc(3 * (size_t)S * sizeof *rows);
  if (!rows) return est_error(EST_ERR_NO_MEMORY, "writing %s", path);
  est_tfrecord_writer *w = NULL;
  st = est_tfrecord_writer_open(&w, path, EST_COMPRESSION_NONE);
  est_example rec;
  est_example_init(&rec);
  for (size_t i = 0; st == EST_OK && i < d->count; i++) {
    const est_rerank_pair *x = &d->items[i];
    char guid[64];
    snprintf(guid, sizeof guid, "%s-%zu", SPLIT_NAMES[split], i);
    const est_input_example ex = {.guid = guid, .text_a = x->query, .text_b = x->passage, .label = "score"};
    int32_t label_id, real;
    st = est_convert_single_example(&conv, (int64_t)i, &ex, rows, rows + S, rows + 2 * S, &label_id, &real);
    for (int k = 0; st == EST_OK && k < 3; k++)
      st = est_example_set_int32(&rec, FEATURE_KEYS[k], rows + (size_t)k * S, (size_t)S);
    if (st == EST_OK) st = est_example_set_float(&rec, FEATURE_KEYS[3], &x->label, 1);
    if (st == EST_OK) st = est_example_write(w, &rec);
  }
  est_example_clear(&rec);
  free(rows);
  return est_tfrecord_writer_finish(w, st, path);
}

static est_input_fn rerank_input_fn(const char *path, int64_t S) {
  est_feature_spec specs[RERANK_NUM_FEATURES];
  for (int k = 0; k < 3; k++)
    specs[k] = (est_feature_spec){.key = FEATURE_KEYS[k], .dtype = EST_DT_INT64, .rank = 1, .shape = {S}};
  specs[3] = (est_feature_spec){.key = FEATURE_KEYS[3], .dtype = EST_DT_FLOAT, .rank = 0};
  const est_tfrecord_input config = {.paths = &path, .num_paths = 1, .compression = EST_COMPRESSION_NONE,
                                     .specs = specs, .num_specs = RERANK_NUM_FEATURES,
                                     .cast = EST_DATASET_CAST_INT32, .shuffle_buffer = 100, .drop_remainder = 0,
                                     .prefetch = 0};
  return est_tfrecord_input_fn(&config);
}

/* The mode's records (written by the chief) as an input_fn. */
static est_status open_split(rerank_task *t, est_mode mode, est_input_fn *out) {
  char path[4096];
  est_status st = est_task_mode_records(&t->c->common, mode, write_records, t, path, sizeof path);
  if (st == EST_OK) *out = rerank_input_fn(path, t->c->common.max_seq_length);
  return st;
}

static est_status task_open_input(void *self, est_mode mode, est_input_fn *out, int64_t *eval_steps) {
  rerank_task *t = self;
  const est_task_flags *f = &t->c->common;
  const int split = (int)mode; /* EST_MODE_TRAIN/EVAL/PREDICT = train/dev/test */
  *eval_steps = 0;
  const long long pairs = (long long)t->data[split].count, queries = (long long)t->data[split].num_queries;
  char note[64];
  snprintf(note, sizeof note, " (%lld queries)", queries);
  est_task_log_running(f, mode, pairs, note, t->num_train_steps);
  t->pred_split = 2;
  return open_split(t, mode, out);
}

static est_status task_on_prediction(void *self, const est_prediction *p) {
  rerank_task *t = self;
  const size_t n = t->data[t->pred_split].count;
  const est_tensor *v = NULL;
  for (size_t i = 0; i < p->count; i++)
    if (!strcmp(p->names[i], "probabilities")) v = &p->values[i];
  if (!v || v->dtype != EST_DT_FLOAT || est_tensor_num_elements(v) != 1)
    return est_error(EST_ERR_INTERNAL, "prediction %lld: no float 'probabilities' of 1 value", (long long)p->index);
  if (t->num_scores >= n) return est_error(EST_ERR_INTERNAL, "more predictions than the %zu pairs", n);
  if (!t->scores && !(t->scores = malloc((n ? n : 1) * sizeof *t->scores)))
    return est_error(EST_ERR_NO_MEMORY, "out of memory for %zu pairs' scores", n);
  t->scores[t->num_scores++] = ((const float *)v->data)[0];
  return EST_OK;
}

/* Each pair's 1-based rank among its query's pairs: higher score first, input order on ties
 * (est_rerank_evaluate's order). O(pairs of the query) per pair. */
static void ranks_of(const est_rerank_data *d, const float *scores, int64_t *rank) {
  size_t *first = malloc((d->num_queries + 1) * sizeof *first), *next = malloc((d->count + 1) * sizeof *next);
  if (!first || !next) { /* ranks by the quadratic scan below */
    for (size_t i = 0; i < d->count; i++) {
      rank[i] = 1;
      for (size_t j = 0; j < d->count; j++)
        if (d->items[j].query_index == d->items[i].query_index &&
            (scores[j] > scores[i] || (scores[j] == scores[i] && j < i)))
          rank[i]++;
    }
    free(first), free(next);
    return;
  }
  for (size_t q = 0; q < d->num_queries; q++) first[q] = SIZE_MAX;
  for (size_t i = d->count; i-- > 0;) next[i] = first[d->items[i].query_index], first[d->items[i].query_index] = i;
  for (size_t i = 0; i < d->count; i++) {
    rank[i] = 1;
    for (size_t j = first[d->items[i].query_index]; j != SIZE_MAX; j = next[j])
      if (scores[j] > scores[i] || (scores[j] == scores[i] && j < i)) rank[i]++;
  }
  free(first), free(next);
}

/* test_results.tsv: "score<TAB>rank" a line, one a test pair, in order. */
static est_status task_write_predictions(void *self, const char *output_dir) {
  rerank_task *t = self;
  EST_LOG_INFO("***** Predict results *****");
  const est_rerank_data *d = &t->data[2];
  if (t->num_scores != d->count)
    return est_error(EST_ERR_INTERNAL, "%zu predictions for %zu test pairs", t->num_scores, d->count);
  int64_t *rank = malloc((d->count + 1) * sizeof *rank);
  if (!rank) return est_error(EST_ERR_NO_MEMORY, "out of memory");
  ranks_of(d, t->scores, rank);
  char path[4096];
  est_status st = est_path_join(path, sizeof path, output_dir, "test_results.tsv");
  est_atomic_file *f = NULL;
  if (st == EST_OK) st = est_atomic_open(&f, path);
  if (st == EST_OK) {
    FILE *out = est_atomic_stream(f);
    for (size_t i = 0; i < d->count; i++) {
      char num[64];
      est_format_float32(t->scores[i], num, sizeof num);
      fprintf(out, "%s\t%lld\n", num, (long long)rank[i]);
    }
    st = est_atomic_commit(f);
  }
  free(rank);
  return st;
}

/* MRR@10 and NDCG@10 over dev's queries, from the evaluated checkpoint's scores. */
static est_status task_finish_eval(void *self, est_estimator *e, est_eval_result *result) {
  rerank_task *t = self;
  est_input_fn input;
  est_status st = open_split(t, EST_MODE_EVAL, &input);
  if (st != EST_OK) return st;
  free(t->scores);
  t->scores = NULL, t->num_scores = 0, t->pred_split = 1;
  st = est_estimator_predict(e, &input, result->checkpoint_path, task_on_prediction, t);
  est_input_fn_release(&input);
  if (st != EST_OK || !est_dist_is_chief()) return st;
  const est_rerank_data *d = &t->data[1];
  if (t->num_scores != d->count)
    return est_error(EST_ERR_INTERNAL, "%zu predictions for %zu dev pairs", t->num_scores, d->count);
  int64_t *q = malloc((d->count + 1) * sizeof *q);
  float *labels = malloc((d->count + 1) * sizeof *labels);
  if (!q || !labels) st = est_error(EST_ERR_NO_MEMORY, "out of memory");
  for (size_t i = 0; st == EST_OK && i < d->count; i++) q[i] = d->items[i].query_index, labels[i] = d->items[i].label;
  est_rerank_report r;
  if (st == EST_OK) st = est_rerank_evaluate(&r, q, labels, t->scores, d->count, RERANK_AT);
  free(q), free(labels);
  if (st == EST_OK) st = est_eval_result_set(result, "eval_mrr@10", r.mrr);
  if (st == EST_OK) st = est_eval_result_set(result, "eval_ndcg@10", r.ndcg);
  if (st == EST_OK) st = est_eval_result_set(result, "eval_num_queries", (double)r.num_queries);
  if (st == EST_OK && r.num_skipped)
    EST_LOG_INFO("%zu dev queries have no relevant passage (label >= 0.5): left out of MRR and NDCG", r.num_skipped);
  free(t->scores);
  t->scores = NULL, t->num_scores = 0, t->pred_split = 2;
  return st;
}

/* --do_export: an est servable whose est_model.json names the classifier of one output read
 * as a raw score (problem_type regression: what a HuggingFace cross-encoder directory serves
 * as, est/served_head.h); --export_format=hf: a BertForSequenceClassification directory of
 * one label (LABEL_0), which sentence-transformers' CrossEncoder(DIR) loads with its sigmoid. */
static est_status task_export(void *self, const est_task_flags *f) {
  rerank_task *t = self;
  static char label0[] = "LABEL_0";
  char *labels[1] = {label0};
  est_model_meta meta = {0};
  est_status st = EST_OK;
  if (!f->export_format || strcmp(f->export_format, "hf")) {
    meta.do_lower_case = t->c->do_lower_case;
    snprintf(meta.task, sizeof meta.task, "rerank");
    const est_model_classifier config = {.problem_type = EST_PROBLEM_REGRESSION};
    est_model_meta_set_head(&meta, &est_served_classifier, &config);
    meta.labels = labels; /* borrowed: est_export_task copies what it writes */
    meta.num_labels = 1;
    char dir[4096];
    st = est_export_task(f, t->c->vocab_file, &meta, dir, sizeof dir);
    if (st == EST_OK) EST_LOG_INFO("Exported the cross-encoder to %s", dir);
    return st;
  }
  char ckpt[4096], base[4096];
  st = est_export_prepare(f, t->c->vocab_file, &meta, ckpt, sizeof ckpt);
  if (st == EST_OK) {
    if (f->export_dir && *f->export_dir) snprintf(base, sizeof base, "%s", f->export_dir);
    else st = est_path_join(base, sizeof base, f->output_dir, "hf");
  }
  const est_hf_export_params hp = {.cfg = &meta.bert_config, .vocab_file = t->c->vocab_file,
                                   .do_lower_case = t->c->do_lower_case, .labels = NULL, .num_labels = 1};
  if (st == EST_OK) st = est_hf_export(ckpt, base, &hp);
  if (st == EST_OK) EST_LOG_INFO("Exported a cross-encoder (BertForSequenceClassification, 1 label) to %s", base);
  est_model_meta_clear(&meta);
  return st;
}

static void task_release(void *self) {
  rerank_task *t = self;
  free(t->scores);
  for (int s = 0; s < 3; s++) est_rerank_data_free(&t->data[s]);
  est_tokenizer_free(t->tok);
}

static est_status run(const est_run_rerank_config *c, int validate_only) {
  rerank_task t = {.c = c, .pred_split = 2};
  const est_task task = {.name = "run_rerank", .self = &t,
                         .do_flags_message = "At least one of `do_train`, `do_eval` or `do_predict' must be True.",
                         .validate = task_validate, .prepare = task_prepare, .open_input = task_open_input,
                         .on_prediction = task_on_prediction, .write_predictions = task_write_predictions,
                         .export = task_export, .finish_eval = task_finish_eval, .release = task_release};
  return est_task_main(&task, &c->common, validate_only);
}

est_status est_run_rerank_validate(const est_run_rerank_config *c) { return run(c, 1); }
est_status est_run_rerank_main(const est_run_rerank_config *c) { return run(c, 0); }
