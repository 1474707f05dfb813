/* run_ner as a task on the driver (est/run_ner.h, est/bert_task.h): CoNLL / JSON lines read
 * into windows (est/ner.h), the token classification head, seqeval's metrics over dev.txt's
 * words added to eval_results.txt, test_predictions.txt in CoNLL form. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/bert_head.h"
#include "est/dataset.h"
#include "est/dist.h"
#include "est/estimator.h"
#include "est/example.h"
#include "est/file.h"
#include "est/hf_model.h"
#include "est/log.h"
#include "est/ner.h"
#include "est/run_classifier.h"
#include "est/run_ner.h"
#include "est/serving.h"
#include "est/tfrecord.h"
#include "est/tokenizer.h"

static const char *const SPLIT_FILES[3] = {"train.txt", "dev.txt", "test.txt"};
static const char *const FEATURE_KEYS[4] = {"input_ids", "input_mask", "segment_ids", "label_ids"};

est_run_ner_config est_run_ner_config_default(void) {
  est_run_ner_config c = {.common = est_task_flags_default()};
  c.do_lower_case = true;
  c.num_train_epochs = 3.0;
  c.warmup_proportion = 0.1;
  c.common.seed = 12345; /* as run_classifier: two runs of one command give one model */
  return c;
}

/* ---- flag checks ---------------------------------------------------------------------- */

static est_status ner_validate(const est_run_ner_config *c) {
  const struct {
    const char *name, *value;
  } required[] = {{"data_dir", c->data_dir}, {"vocab_file", c->vocab_file}};
  for (size_t i = 0; i < 2; i++)
    if (!required[i].value || !*required[i].value)
      return est_error(EST_ERR_INVALID_ARGUMENT, "flag --%s must be specified", required[i].name);
  est_status st = est_validate_case_matches_checkpoint(c->do_lower_case, c->common.init_checkpoint);
  if (st != EST_OK) return st;
  if (c->common.max_seq_length < 3)
    return est_error(EST_ERR_INVALID_ARGUMENT, "--max_seq_length=%lld: must be at least 3 ([CLS] word [SEP])",
                     (long long)c->common.max_seq_length);
  if (c->doc_stride < 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "--doc_stride=%lld: must be >= 0 (0: half a window)",
                     (long long)c->doc_stride);
  if ((st = est_task_check_epochs(&c->common, c->num_train_epochs, c->warmup_proportion)) != EST_OK) return st;
  if (!est_is_directory(c->data_dir))
    return est_error(EST_ERR_NOT_FOUND, "--data_dir=%s: no such directory", c->data_dir);
  /* train.txt always (the labels), dev.txt and test.txt for the modes asked for */
  const bool splits[3] = {c->common.do_train || c->common.do_eval || c->common.do_predict, c->common.do_eval,
                          c->common.do_predict};
  for (int s = 0; s < 3; s++) {
    char path[4096];
    if (!splits[s]) continue;
    if ((st = est_path_join(path, sizeof path, c->data_dir, SPLIT_FILES[s])) != EST_OK) return st;
    if ((st = est_task_need_file("data_dir", c->data_dir, path)) != EST_OK) return st;
  }
  if (est_is_directory(c->vocab_file)) return EST_OK; /* a HuggingFace model's */
  return est_task_need_file("vocab_file", c->vocab_file, c->vocab_file);
}

/* ---- the task ------------------------------------------------------------------------- */

typedef struct ner_task {
  const est_run_ner_config *c;
  est_tokenizer *tok;
  char **labels;
  size_t num_labels;
  est_ner_data data[3];
  est_ner_features features[3];
  est_bert_token_classifier_head_params head;
  int64_t num_train_steps;
  /* predictions of the split being predicted: [count][S * C] */
  float *probs;
  int64_t num_probs;
  int pred_split;
} ner_task;

static est_status task_validate(void *self, const est_task_flags *f) {
  (void)f;
  return ner_validate(((ner_task *)self)->c);
}

static est_status load_split(ner_task *t, int s) {
  char path[4096];
  est_status st = est_path_join(path, sizeof path, t->c->data_dir, SPLIT_FILES[s]);
  if (st == EST_OK) st = est_ner_read_file(&t->data[s], path);
  if (st == EST_OK && s > 0 && !t->data[s].count)
    st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: no sentences", path);
  return st;
}

/* t->labels put in the order of names[n] (the same set), which `source` holds. */
static est_status reorder_labels(ner_task *t, const char *const *names, size_t n, const char *source) {
  if (n != t->num_labels)
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s has %zu labels, train.txt has %zu", source, n, t->num_labels);
  char **order = calloc(n ? n : 1, sizeof *order);
  if (!order) return est_error(EST_ERR_NO_MEMORY, "out of memory");
  est_status st = EST_OK;
  for (size_t i = 0; st == EST_OK && i < n; i++) {
    const int k = est_ner_label_index((const char *const *)t->labels, t->num_labels, names[i]);
    if (k < 0) st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: label %zu is %s, not one of train.txt's", source, i, names[i]);
    for (size_t j = 0; st == EST_OK && j < i; j++)
      if (order[j] == t->labels[k]) st = est_error(EST_ERR_INVALID_ARGUMENT, "%s repeats label %s", source, names[i]);
    if (st == EST_OK) order[i] = t->labels[k];
  }
  if (st == EST_OK) {
    memcpy(t->labels, order, n * sizeof *order);
    EST_LOG_INFO("Labels in the order of %s", source);
  }
  free(order);
  return st;
}

/* output_dir/label_list.txt (one label a line, the classifier's rows), written when training
 * starts: later runs in that output_dir (eval, predict, export) keep the trained order. */
static const char LABEL_LIST[] = "label_list.txt";

static est_status saved_label_order(ner_task *t, const char *output_dir) {
  char path[4096];
  est_status st = est_path_join(path, sizeof path, output_dir, LABEL_LIST);
  if (st != EST_OK || !est_file_exists(path)) return st;
  est_ner_data d; /* one word a line: read as CoNLL, each line a word */
  if ((st = est_ner_read_file(&d, path)) != EST_OK) return st;
  const char **names = d.count ? (const char **)d.sentences[0].words : NULL;
  st = d.count == 1 ? reorder_labels(t, names, d.sentences[0].num_words, path)
                    : est_error(EST_ERR_INVALID_ARGUMENT, "%s: expected one label a line", path);
  est_ner_data_free(&d);
  return st;
}

static est_status write_label_list(const ner_task *t, const char *output_dir) {
  char path[4096];
  est_status st = est_path_join(path, sizeof path, output_dir, LABEL_LIST);
  est_atomic_file *f = NULL;
  if (st == EST_OK) st = est_atomic_open(&f, path);
  if (st != EST_OK) return st;
  for (size_t i = 0; i < t->num_labels; i++) fprintf(est_atomic_stream(f), "%s\n", t->labels[i]);
  return est_atomic_commit(f);
}

/* id2label in: a HuggingFace --init_checkpoint directory whose config.json's id2label names
 * the same labels as train.txt gives their order (its classifier rows are in that order); one
 * that names others is an error, since its rows would be read as other labels. */
static est_status hf_label_order(ner_task *t, const char *dir) {
  char path[4096];
  est_status st = est_path_join(path, sizeof path, dir, "config.json");
  if (st != EST_OK) return st;
  json_error_t jerr;
  json_t *root = json_load_file(path, 0, &jerr);
  if (!root) return est_error(EST_ERR_INVALID_ARGUMENT, "%s: not JSON: %s", path, jerr.text);
  json_t *id2label = json_object_get(root, "id2label");
  const size_t n = json_is_object(id2label) ? json_object_size(id2label) : 0;
  const char **names = calloc(n + 1, sizeof *names);
  if (!names) st = est_error(EST_ERR_NO_MEMORY, "out of memory");
  for (size_t i = 0; st == EST_OK && i < n; i++) {
    char key[32];
    snprintf(key, sizeof key, "%zu", i);
    json_t *v = json_object_get(id2label, key);
    if (!json_is_string(v))
      st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: id2label[\"%s\"]: expected a label string", path, key);
    else names[i] = json_string_value(v);
  }
  char source[4200];
  snprintf(source, sizeof source, "%s's id2label", path);
  if (st == EST_OK && n) st = reorder_labels(t, names, n, source); /* none there: train.txt's order */
  free(names);
  json_decref(root);
  return st;
}

/* The classifier's label order: output_dir's label_list.txt when it has one; else a
 * HuggingFace --init_checkpoint's id2label when it has one; else train.txt's. */
static est_status label_order(ner_task *t, const est_task_flags *f) {
  char path[4096];
  est_status st = est_path_join(path, sizeof path, f->output_dir, LABEL_LIST);
  if (st != EST_OK) return st;
  if (est_file_exists(path)) return saved_label_order(t, f->output_dir);
  if (f->init_checkpoint && est_is_directory(f->init_checkpoint) && est_hf_is_checkpoint(f->init_checkpoint) &&
      (st = hf_label_order(t, f->init_checkpoint)) != EST_OK)
    return est_error_prefix("--init_checkpoint=%s: ", f->init_checkpoint);
  return EST_OK;
}

static est_status task_prepare(void *self, const est_task_flags *f, const est_bert_config *cfg, est_task_model *m) {
  ner_task *t = self;
  const est_run_ner_config *c = t->c;
  est_status st = est_tokenizer_open_any(&t->tok, c->vocab_file, c->do_lower_case);
  if (st != EST_OK) return st;
  if (est_tokenizer_size(t->tok) > cfg->vocab_size)
    return est_error(EST_ERR_INVALID_ARGUMENT,
                     "--vocab_file=%s has %d tokens but --bert_config_file=%s has vocab_size %d: they do not belong "
                     "to the same model", c->vocab_file, est_tokenizer_size(t->tok),
                     f->bert_config_file, cfg->vocab_size);
  if ((st = load_split(t, 0)) != EST_OK) return st;
  if ((st = est_ner_labels_from(&t->data[0], &t->labels, &t->num_labels)) != EST_OK)
    return est_error_prefix("--data_dir=%s: train.txt: ", c->data_dir);
  EST_LOG_INFO("%zu labels from train.txt (\"O\" first, the rest sorted)", t->num_labels);
  if ((st = label_order(t, f)) != EST_OK) return st;
  const est_ner_feature_options o = {.max_seq_length = (int)f->max_seq_length, .doc_stride = (int)c->doc_stride,
                                     .label_all_tokens = c->label_all_tokens};
  const bool wanted[3] = {f->do_train, f->do_eval, f->do_predict};
  for (int s = 0; s < 3; s++) {
    if (!wanted[s]) continue;
    if (s > 0 && (st = load_split(t, s)) != EST_OK) return st;
    st = est_ner_features_build(&t->features[s], &t->data[s], (const char *const *)t->labels, t->num_labels, t->tok,
                                &o);
    if (st != EST_OK) return est_error_prefix("--data_dir=%s: %s: ", c->data_dir, SPLIT_FILES[s]);
  }
  t->head.num_labels = (int)t->num_labels;
  m->head = &est_bert_token_classifier_head_type;
  m->head_params = &t->head;
  if (!f->do_train) return EST_OK;
  /* run_classifier's arithmetic, over windows */
  m->num_train_steps =
      est_run_classifier_num_train_steps((int64_t)t->features[0].count, f->train_batch_size, c->num_train_epochs);
  m->num_warmup_steps = est_run_classifier_num_warmup_steps(m->num_train_steps, c->warmup_proportion);
  if (m->num_train_steps < 1)
    return est_error(EST_ERR_INVALID_ARGUMENT,
                     "%zu training windows / --train_batch_size=%lld * --num_train_epochs=%g gives %lld training "
                     "steps; need at least 1", t->features[0].count, (long long)f->train_batch_size,
                     c->num_train_epochs, (long long)m->num_train_steps);
  t->num_train_steps = m->num_train_steps;
  return EST_OK;
}

/* One window a tf.train.Example of four int64 lists of max_seq_length. */
static est_status write_records(void *self, int split, const char *path) {
  const est_ner_features *fs = &((ner_task *)self)->features[split];
  const int S = fs->seq_length;
  est_tfrecord_writer *w = NULL;
  est_status st = est_tfrecord_writer_open(&w, path, EST_COMPRESSION_NONE);
  est_example rec;
  est_example_init(&rec);
  for (size_t i = 0; st == EST_OK && i < fs->count; i++) {
    const est_ner_feature *x = &fs->items[i];
    const int32_t *rows[4] = {x->input_ids, x->input_mask, x->segment_ids, x->label_ids};
    for (int k = 0; st == EST_OK && k < 4; k++) st = est_example_set_int32(&rec, FEATURE_KEYS[k], rows[k], (size_t)S);
    if (st == EST_OK) st = est_example_write(w, &rec);
  }
  est_example_clear(&rec);
  return est_tfrecord_writer_finish(w, st, path);
}

static est_input_fn ner_input_fn(const char *path, int64_t S) {
  est_feature_spec specs[4];
  for (int k = 0; k < 4; k++)
    specs[k] = (est_feature_spec){.key = FEATURE_KEYS[k], .dtype = EST_DT_INT64, .rank = 1, .shape = {S}};
  const est_tfrecord_input config = {.paths = &path, .num_paths = 1, .compression = EST_COMPRESSION_NONE,
                                     .specs = specs, .num_specs = 4, .cast = EST_DATASET_CAST_INT32,
                                     .shuffle_buffer = 100, .drop_remainder = 0, .prefetch = 0};
  return est_tfrecord_input_fn(&config);
}

/* The mode's records (written by the chief) as an input_fn. */
static est_status open_split(ner_task *t, est_mode mode, est_input_fn *out) {
  char path[4096];
  est_status st = est_task_mode_records(&t->c->common, mode, write_records, t, path, sizeof path);
  if (st == EST_OK) *out = ner_input_fn(path, t->c->common.max_seq_length);
  return st;
}

static est_status task_open_input(void *self, est_mode mode, est_input_fn *out, int64_t *eval_steps) {
  ner_task *t = self;
  const est_task_flags *f = &t->c->common;
  const int split = (int)mode; /* EST_MODE_TRAIN/EVAL/PREDICT = train/dev/test */
  *eval_steps = 0;
  const long long sentences = (long long)t->data[split].count, windows = (long long)t->features[split].count;
  char note[64];
  snprintf(note, sizeof note, " (%lld sentences)", sentences);
  est_task_log_running(f, mode, windows, note, t->num_train_steps);
  t->pred_split = 2;
  if (mode == EST_MODE_TRAIN && est_dist_is_chief()) {
    est_status st = write_label_list(t, f->output_dir);
    if (st != EST_OK) return st;
  }
  return open_split(t, mode, out);
}

static est_status task_on_prediction(void *self, const est_prediction *p) {
  ner_task *t = self;
  const est_ner_features *fs = &t->features[t->pred_split];
  const size_t per = (size_t)fs->seq_length * t->num_labels;
  const est_tensor *v = NULL;
  for (size_t i = 0; i < p->count; i++)
    if (!strcmp(p->names[i], "probabilities")) v = &p->values[i];
  if (!v || v->dtype != EST_DT_FLOAT || (size_t)est_tensor_num_elements(v) != per)
    return est_error(EST_ERR_INTERNAL, "prediction %lld: no float 'probabilities' of %zu values", (long long)p->index,
                     per);
  if ((size_t)t->num_probs >= fs->count)
    return est_error(EST_ERR_INTERNAL, "more predictions than the %zu windows", fs->count);
  if (!t->probs && !(t->probs = malloc((fs->count ? fs->count : 1) * per * sizeof(float))))
    return est_error(EST_ERR_NO_MEMORY, "out of memory for %zu windows' predictions", fs->count);
  memcpy(t->probs + (size_t)t->num_probs * per, v->data, per * sizeof(float));
  t->num_probs++;
  return EST_OK;
}

/* The collected predictions of split merged back: tags[k][w], one label name a word. */
static est_status merge(ner_task *t, int split, const char ***tags_out) {
  const est_ner_data *d = &t->data[split];
  const est_ner_features *fs = &t->features[split];
  if ((size_t)t->num_probs != fs->count)
    return est_error(EST_ERR_INTERNAL, "%lld predictions for %zu windows", (long long)t->num_probs, fs->count);
  size_t words = 0;
  for (size_t k = 0; k < d->count; k++) words += d->sentences[k].num_words;
  int32_t **ids = malloc((d->count + 1) * sizeof *ids);
  int32_t *block = malloc((words + 1) * sizeof *block);
  const float **rows = malloc((fs->count + 1) * sizeof *rows);
  if (!ids || !block || !rows) {
    free(ids), free(block), free(rows);
    return est_error(EST_ERR_NO_MEMORY, "out of memory merging predictions");
  }
  for (size_t k = 0, o = 0; k < d->count; o += d->sentences[k].num_words, k++) ids[k] = block + o;
  const size_t per = (size_t)fs->seq_length * t->num_labels;
  for (size_t j = 0; j < fs->count; j++) rows[j] = t->probs + j * per;
  est_status st = est_ner_merge_predictions(ids, d, fs, rows, (int)t->num_labels);
  for (size_t k = 0; st == EST_OK && k < d->count; k++) {
    tags_out[k] = malloc((d->sentences[k].num_words + 1) * sizeof **tags_out);
    if (!tags_out[k]) {
      st = est_error(EST_ERR_NO_MEMORY, "out of memory merging predictions");
      break;
    }
    for (size_t w = 0; w < d->sentences[k].num_words; w++)
      tags_out[k][w] = ids[k][w] >= 0 ? t->labels[ids[k][w]] : "O";
  }
  free(ids), free(block), free(rows);
  return st;
}

static void free_tags(const char ***tags, size_t n) {
  for (size_t k = 0; tags && k < n; k++) free(tags[k]);
  free(tags);
}

/* test_predictions.txt: "word tag" a line, a blank line between sentences. */
static est_status task_write_predictions(void *self, const char *output_dir) {
  ner_task *t = self;
  EST_LOG_INFO("***** Predict results *****");
  const est_ner_data *d = &t->data[2];
  const char ***tags = calloc(d->count + 1, sizeof *tags);
  if (!tags) return est_error(EST_ERR_NO_MEMORY, "out of memory");
  est_status st = merge(t, 2, tags);
  char path[4096];
  if (st == EST_OK) st = est_path_join(path, sizeof path, output_dir, "test_predictions.txt");
  est_atomic_file *f = NULL;
  if (st == EST_OK) st = est_atomic_open(&f, path);
  if (st == EST_OK) {
    FILE *out = est_atomic_stream(f);
    for (size_t k = 0; k < d->count; k++) {
      if (k) fputc('\n', out);
      for (size_t w = 0; w < d->sentences[k].num_words; w++)
        fprintf(out, "%s %s\n", d->sentences[k].words[w], tags[k][w]);
    }
    st = est_atomic_commit(f);
  }
  free_tags(tags, d->count);
  return st;
}

/* seqeval over dev.txt's words, from predictions of the evaluated checkpoint. */
static est_status task_finish_eval(void *self, est_estimator *e, est_eval_result *result) {
  ner_task *t = self;
  est_input_fn input;
  est_status st = open_split(t, EST_MODE_EVAL, &input);
  if (st != EST_OK) return st;
  free(t->probs);
  t->probs = NULL, t->num_probs = 0, t->pred_split = 1;
  st = est_estimator_predict(e, &input, result->checkpoint_path, task_on_prediction, t);
  est_input_fn_release(&input);
  if (st != EST_OK || !est_dist_is_chief()) return st;
  const est_ner_data *d = &t->data[1];
  const char ***pred = calloc(d->count + 1, sizeof *pred);
  const char *const **gold = calloc(d->count + 1, sizeof *gold);
  size_t *lens = calloc(d->count + 1, sizeof *lens);
  if (!pred || !gold || !lens) {
    free(pred), free(gold), free(lens);
    return est_error(EST_ERR_NO_MEMORY, "out of memory");
  }
  st = merge(t, 1, pred);
  for (size_t k = 0; k < d->count; k++)
    gold[k] = (const char *const *)d->sentences[k].tags, lens[k] = d->sentences[k].num_words;
  est_ner_report r = {0};
  if (st == EST_OK) st = est_ner_evaluate(&r, gold, (const char *const *const *)pred, lens, d->count);
  free_tags(pred, d->count), free(gold), free(lens);
  if (st != EST_OK) return st;
  const struct {
    const char *name;
    double v;
  } micro[] = {{"eval_precision", r.precision}, {"eval_recall", r.recall}, {"eval_f1", r.f1},
               {"eval_accuracy", r.accuracy}};
  for (size_t i = 0; st == EST_OK && i < 4; i++) st = est_eval_result_set(result, micro[i].name, micro[i].v);
  for (size_t i = 0; st == EST_OK && i < r.num_types; i++) {
    const est_ner_type_score *s = &r.types[i];
    const char *suffix[4] = {"precision", "recall", "f1", "number"};
    const double v[4] = {s->precision, s->recall, s->f1, (double)s->support};
    for (int k = 0; st == EST_OK && k < 4; k++) {
      char name[512];
      snprintf(name, sizeof name, "eval_%s_%s", s->type, suffix[k]);
      st = est_eval_result_set(result, name, v[k]);
    }
  }
  est_ner_report_free(&r);
  free(t->probs);
  t->probs = NULL, t->num_probs = 0, t->pred_split = 2;
  return st;
}

/* --do_export: an est servable whose est_model.json names the token classifier head
 * (est/served_head.h) and train.txt's labels in the classifier's order, which est predict and
 * est serve answer with entities (docs/ner.md §6); --export_format=hf: a HuggingFace
 * BertForTokenClassification directory with those labels as id2label (docs/hf.md §6). */
static est_status task_export(void *self, const est_task_flags *f) {
  ner_task *t = self;
  est_status st = EST_OK;
  if (!t->labels && (st = load_split(t, 0)) == EST_OK &&
      (st = est_ner_labels_from(&t->data[0], &t->labels, &t->num_labels)) == EST_OK)
    st = label_order(t, f);
  if (st != EST_OK) return est_error_prefix("--do_export: --data_dir=%s: train.txt: ", t->c->data_dir);
  est_model_meta meta = {0};
  if (!f->export_format || strcmp(f->export_format, "hf")) {
    meta.do_lower_case = t->c->do_lower_case;
    snprintf(meta.task, sizeof meta.task, "ner");
    const est_model_token_classifier config = {.aggregation_strategy = EST_AGGREGATION_SIMPLE};
    est_model_meta_set_head(&meta, &est_served_token_classifier, &config);
    meta.labels = t->labels; /* borrowed: est_export_task copies what it writes */
    meta.num_labels = t->num_labels;
    char dir[4096];
    st = est_export_task(f, t->c->vocab_file, &meta, dir, sizeof dir);
    if (st == EST_OK) EST_LOG_INFO("Exported the token classifier to %s", dir);
    return st;
  }
  char ckpt[4096], base[4096];
  st = est_export_prepare(f, t->c->vocab_file, &meta, ckpt, sizeof ckpt);
  if (st == EST_OK) {
    if (f->export_dir && *f->export_dir) snprintf(base, sizeof base, "%s", f->export_dir);
    else st = est_path_join(base, sizeof base, f->output_dir, "hf");
  }
  const est_hf_export_params hp = {.cfg = &meta.bert_config, .vocab_file = t->c->vocab_file,
                                   .do_lower_case = t->c->do_lower_case, .labels = (const char *const *)t->labels,
                                   .num_labels = (int)t->num_labels, .architecture = "BertForTokenClassification"};
  if (st == EST_OK) st = est_hf_export(ckpt, base, &hp);
  if (st == EST_OK) EST_LOG_INFO("Exported a BertForTokenClassification directory to %s", base);
  est_model_meta_clear(&meta);
  return st;
}

static void task_release(void *self) {
  ner_task *t = self;
  free(t->probs);
  for (int s = 0; s < 3; s++) est_ner_features_free(&t->features[s]), est_ner_data_free(&t->data[s]);
  est_ner_labels_free(t->labels, t->num_labels);
  est_tokenizer_free(t->tok);
}

static est_status run(const est_run_ner_config *c, int validate_only) {
  ner_task t = {.c = c, .pred_split = 2};
  const est_task task = {.name = "run_ner", .self = &t,
                         .do_flags_message = "At least one of `do_train`, `do_eval` or `do_predict' must be True.",
                         .validate = task_validate, .prepare = task_prepare, .open_input = task_open_input,
                         .on_prediction = task_on_prediction, .write_predictions = task_write_predictions,
                         .export = task_export, .finish_eval = task_finish_eval, .release = task_release};
  return est_task_main(&task, &c->common, validate_only);
}

est_status est_run_ner_validate(const est_run_ner_config *c) { return run(c, 1); }
est_status est_run_ner_main(const est_run_ner_config *c) { return run(c, 0); }
