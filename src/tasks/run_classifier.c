/* run_classifier.py as a task on the driver (est/bert_task.h): its own flags' checks, the
 * TSVs read into records, the classifier head, test_results.tsv (docs/run_classifier.md §6,
 * §9). The shared flags, the Estimator and eval_results.txt are the driver's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/bert_head.h"
#include "est/bert_classifier.h"
#include "est/bert_task.h"
#include "est/dataset.h"
#include "est/dist.h"
#include "est/estimator.h"
#include "est/classifier_features.h"
#include "est/file.h"
#include "est/log.h"
#include "est/multi_label.h"
#include "est/serving.h"
#include "est/processors.h"
#include "est/tokenizer.h"
#include "tasks/run_classifier_internal.h"

/* ---- flag checks ---------------------------------------------------------------------- */

/* run_classifier.py's own flags and input files (the shared ones: est_task_flags_validate). */
static est_status classifier_validate(const est_run_classifier_config *c) {
  const struct {
    const char *name, *value;
  } required[] = {{"data_dir", c->data_dir}, {"task_name", c->task_name}, {"vocab_file", c->vocab_file}};
  for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
    if (!required[i].value || !*required[i].value)
      return est_error(EST_ERR_INVALID_ARGUMENT, "flag --%s must be specified", required[i].name);
  /* main() step 1: the released checkpoints' case. */
  est_status st = est_validate_case_matches_checkpoint(c->do_lower_case, c->common.init_checkpoint);
  if (st != EST_OK) return st;
  if (c->common.max_seq_length < 3)
    return est_error(EST_ERR_INVALID_ARGUMENT,
                     "--max_seq_length=%lld: must be at least 3 ([CLS] a [SEP] b [SEP] needs 3 special tokens)",
                     (long long)c->common.max_seq_length);
  if (c->common.do_train) {
    if (!(c->num_train_epochs > 0))
      return est_error(EST_ERR_INVALID_ARGUMENT, "--num_train_epochs=%g: must be > 0 to train",
                       c->num_train_epochs);
    if (!(c->warmup_proportion >= 0 && c->warmup_proportion <= 1))
      return est_error(EST_ERR_INVALID_ARGUMENT, "--warmup_proportion=%g: must be in [0, 1]", c->warmup_proportion);
  }

  if (c->long_documents && strcmp(c->long_documents, "truncate") && strcmp(c->long_documents, "mean") &&
      strcmp(c->long_documents, "max"))
    return est_error(EST_ERR_INVALID_ARGUMENT, "--long_documents=%s: expected truncate, mean or max",
                     c->long_documents);
  if (c->doc_stride < 0 || c->doc_stride > 1 << 20)
    return est_error(EST_ERR_INVALID_ARGUMENT, "--doc_stride=%lld: must be >= 0 (0: half a window)",
                     (long long)c->doc_stride);

  /* The task (the reference looks it up after creating output_dir; est before any work). */
  est_tsv_task_config tc = est_rc_tsv_config(c);
  est_processor *proc;
  st = est_processor_create(&proc, c->task_name, &tc);
  if (st != EST_OK) return est_error_prefix("--task_name: ");
  if (c->common.do_predict && !est_processor_has_split(proc, EST_SPLIT_TEST)) {
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
  const bool splits[3] = {c->common.do_train, c->common.do_eval, c->common.do_predict};
  for (int s = 0; s < 3 && st == EST_OK; s++) {
    char path[4096];
    if (splits[s])
      st = est_task_need_file("data_dir", c->data_dir,
                              est_processor_split_path(proc, c->data_dir, (est_split)s, path, sizeof path));
  }
  est_processor_free(proc);
  if (st != EST_OK) return st;
  if (est_is_directory(c->vocab_file)) return EST_OK; /* a HuggingFace model's (est_tokenizer_open_any) */
  return est_task_need_file("vocab_file", c->vocab_file, c->vocab_file);
}

/* ---- input_fn: file_based_input_fn_builder ------------------------------------------ */

/* One split's records through the public TFRecord input_fn: TRAIN reads them -> repeat
 * forever -> shuffle(100) -> batch(drop_remainder); EVAL / PREDICT in file order with the
 * final short batch kept (drop_remainder = use_tpu, false here). Every int64 feature
 * arrives as int32, as the reference's _decode_record casts. The input's exact position
 * (est_input.state_size: 24 + 3 * 100 values with shuffle(100)) goes into each checkpoint,
 * so a resumed run continues with the batches it would have seen. */
static est_input_fn rc_input_fn(const char *path, int64_t max_seq_length, int64_t multi_labels) {
  est_feature_spec specs[EST_CLASSIFIER_NUM_FEATURES];
  if (multi_labels) est_classifier_feature_specs_multi_label(max_seq_length, multi_labels, specs);
  else est_classifier_feature_specs(max_seq_length, specs);
  const est_tfrecord_input config = {.paths = &path, .num_paths = 1, .compression = EST_COMPRESSION_NONE,
                                     .specs = specs, .num_specs = EST_CLASSIFIER_NUM_FEATURES,
                                     .cast = EST_DATASET_CAST_INT32, .shuffle_buffer = 100,
                                     .drop_remainder = 0, .prefetch = 0};
  return est_tfrecord_input_fn(&config); /* a copy: path and specs may go when this returns */
}

/* ---- predictions -> test_results.tsv ---------------------------------------------- */

typedef struct rc_predictions {
  float *probs, *logits;        /* [cap, num_labels] each */
  int64_t count, cap;
  int num_labels;
} rc_predictions;

static est_status collect_prediction(void *ctx, const est_prediction *p) {
  rc_predictions *r = ctx;
  const est_tensor *t = NULL, *z = NULL;
  for (size_t i = 0; i < p->count; i++) {
    if (!strcmp(p->names[i], "probabilities")) t = &p->values[i];
    if (!strcmp(p->names[i], "logits")) z = &p->values[i];
  }
  if (!t || t->dtype != EST_DT_FLOAT || est_tensor_num_elements(t) != r->num_labels)
    return est_error(EST_ERR_INTERNAL, "prediction %lld: no float 'probabilities' of %d classes",
                     (long long)p->index, r->num_labels);
  if (r->count == r->cap) {
    int64_t cap = r->cap ? 2 * r->cap : 1024;
    float *grown = realloc(r->probs, (size_t)cap * (size_t)r->num_labels * sizeof(float));
    if (grown) r->probs = grown;
    float *grown_z = realloc(r->logits, (size_t)cap * (size_t)r->num_labels * sizeof(float));
    if (grown_z) r->logits = grown_z;
    if (!grown || !grown_z) return est_error(EST_ERR_NO_MEMORY, "out of memory collecting predictions");
    r->cap = cap;
  }
  memcpy(r->probs + (size_t)r->count * (size_t)r->num_labels, t->data, (size_t)r->num_labels * sizeof(float));
  if (z && est_tensor_num_elements(z) == r->num_labels)
    memcpy(r->logits + (size_t)r->count * (size_t)r->num_labels, z->data, (size_t)r->num_labels * sizeof(float));
  r->count++;
  return EST_OK;
}

/* ---- the task on the driver (est/bert_task.h) ------------------------------------------ */

typedef struct classifier_task {
  const est_run_classifier_config *c;
  est_rc_task *text;            /* processor, labels, tokenizer, the loaded splits */
  int64_t counts[3];            /* examples per split */
  est_bert_classifier_head_params head;
  int64_t num_train_steps;
  rc_predictions preds;
} classifier_task;

static est_status task_validate(void *self, const est_task_flags *f) {
  (void)f;
  return classifier_validate(((classifier_task *)self)->c);
}

/* Reads every requested split now, so that a malformed TSV fails before any output. */
static est_status task_prepare(void *self, const est_task_flags *f, const est_bert_config *cfg, est_task_model *m) {
  classifier_task *t = self;
  const est_run_classifier_config *c = t->c;
  est_status st = est_rc_task_open(&t->text, c);
  if (st != EST_OK) return st;
  /* An id past the embedding table would be an out-of-range gather in the reference. */
  if (est_rc_task_vocab_size(t->text) > cfg->vocab_size)
    return est_error(EST_ERR_INVALID_ARGUMENT,
                     "--vocab_file=%s has %d tokens but --bert_config_file=%s has vocab_size %d: they do not belong "
                     "to the same model", c->vocab_file, est_rc_task_vocab_size(t->text), f->bert_config_file,
                     cfg->vocab_size);
  const bool wanted[3] = {f->do_train, f->do_eval, f->do_predict};
  for (int s = 0; s < 3; s++)
    if (wanted[s] && (st = est_rc_task_load(t->text, c->data_dir, s, &t->counts[s])) != EST_OK) return st;
  t->head.num_labels = (int)est_rc_task_num_labels(t->text);
  t->head.extra_metric = (int)est_processor_extra_metric(est_rc_task_processor(t->text));
  t->head.multi_label = est_rc_multi_label(c);
  if (c->long_documents && strcmp(c->long_documents, "truncate"))
    est_rc_task_set_windows(t->text, c->doc_stride ? (int)c->doc_stride : ((int)f->max_seq_length - 2) / 2 > 0
                                                                                ? ((int)f->max_seq_length - 2) / 2
                                                                                : 1);
  m->head = &est_bert_classifier_head_type;
  m->head_params = &t->head;
  if (!f->do_train) return EST_OK;
  m->num_train_steps = est_run_classifier_num_train_steps(t->counts[0], f->train_batch_size, c->num_train_epochs);
  m->num_warmup_steps = est_run_classifier_num_warmup_steps(m->num_train_steps, c->warmup_proportion);
  if (m->num_train_steps < 1)
    return est_error(EST_ERR_INVALID_ARGUMENT,
                     "%lld training examples / --train_batch_size=%lld * --num_train_epochs=%g gives %lld "
                     "training steps; need at least 1",
                     (long long)t->counts[0], (long long)f->train_batch_size, c->num_train_epochs,
                     (long long)m->num_train_steps);
  t->num_train_steps = m->num_train_steps;
  return EST_OK;
}

static est_status write_split(void *self, int split, const char *path) {
  classifier_task *t = self;
  return est_rc_task_write_records(t->text, split, (int)t->c->common.max_seq_length, path);
}

/* The chief converts the mode's split to records; every rank then reads that one file (a
 * shared output_dir, which the Estimator checks), each its own shard of it. */
static est_status task_open_input(void *self, est_mode mode, est_input_fn *out, int64_t *eval_steps) {
  classifier_task *t = self;
  const est_task_flags *f = &t->c->common;
  const int split = (int)mode; /* EST_MODE_TRAIN/EVAL/PREDICT = splits train/dev/test */
  *eval_steps = 0;
  char path[4096]; /* the mode's records */
  est_status st = est_task_mode_records(f, mode, write_split, t, path, sizeof path);
  if (st != EST_OK) return st;
  const long long n = (long long)t->counts[split];
  char note[64] = "";
  if (mode != EST_MODE_TRAIN) snprintf(note, sizeof note, " (%lld actual, 0 padding)", n);
  est_task_log_running(f, mode, n, note, t->num_train_steps);
  *out = rc_input_fn(path, f->max_seq_length, t->head.multi_label ? t->head.num_labels : 0);
  t->preds.num_labels = t->head.num_labels;
  return EST_OK;
}

/* --long_documents=mean|max: each example's windows' logits pooled, then its softmax (sigmoid
 * when multi-label), over t->preds in place; preds.count becomes the examples'. */
static est_status pool_windows(classifier_task *t) {
  size_t nw = 0;
  const int64_t *map = est_rc_task_windows(t->text, &nw);
  if (!map) return EST_OK;
  if ((size_t)t->preds.count != nw)
    return est_error(EST_ERR_INTERNAL, "%lld predictions for %zu windows", (long long)t->preds.count, nw);
  const int C = t->preds.num_labels, use_max = !strcmp(t->c->long_documents, "max");
  const size_t n = (size_t)t->counts[2];
  double *acc = calloc(n * (size_t)C + 1, sizeof *acc);
  int64_t *windows = calloc(n + 1, sizeof *windows), *first = calloc(n + 1, sizeof *first);
  if (!acc || !windows || !first) {
    free(acc), free(windows), free(first);
    return est_error(EST_ERR_NO_MEMORY, "pooling windows");
  }
  for (size_t w = 0; w < nw; w++) {
    const size_t e = (size_t)map[w];
    const float *z = t->preds.logits + w * (size_t)C;
    for (int c = 0; c < C; c++) {
      double *a = &acc[e * (size_t)C + (size_t)c];
      *a = use_max ? (windows[e] ? (z[c] > *a ? z[c] : *a) : z[c]) : *a + z[c];
    }
    if (!windows[e]++) first[e] = (int64_t)w;
  }
  /* in example order, each reading its windows' rows at or after its own: nothing is read
   * after it is written */
  for (size_t e = 0; e < n; e++) {
    double *a = acc + e * (size_t)C, top = -INFINITY, sum = 0.0;
    float *p = t->preds.probs + e * (size_t)C;
    if (windows[e] == 1) { /* one window: the head's own probabilities, as --long_documents=truncate */
      memmove(p, t->preds.probs + (size_t)first[e] * (size_t)C, (size_t)C * sizeof *p);
      continue;
    }
    for (int c = 0; c < C; c++) {
      if (!use_max) a[c] /= (double)windows[e];
      top = a[c] > top ? a[c] : top;
    }
    for (int c = 0; c < C; c++) sum += t->head.multi_label ? 0.0 : exp(a[c] - top);
    for (int c = 0; c < C; c++)
      p[c] = (float)(t->head.multi_label ? 1.0 / (1.0 + exp(-a[c])) : exp(a[c] - top) / sum);
  }
  free(acc), free(windows), free(first);
  EST_LOG_INFO("%zu windows pooled (%s of logits) into %zu examples", nw, t->c->long_documents, n);
  t->preds.count = (int64_t)n;
  return EST_OK;
}

static est_status task_write_predictions(void *self, const char *output_dir) {
  classifier_task *t = self;
  EST_LOG_INFO("***** Predict results *****");
  est_status pst = pool_windows(t);
  if (pst != EST_OK) return pst;
  if (t->preds.count != t->counts[2])
    return est_error(EST_ERR_INTERNAL, "%lld predictions for %lld test examples", (long long)t->preds.count,
                     (long long)t->counts[2]);
  char path[4096];
  est_status st = est_path_join(path, sizeof path, output_dir, "test_results.tsv");
  return st ? st : est_run_classifier_write_test_results(path, t->preds.probs, (size_t)t->preds.count,
                                                         t->head.num_labels);
}

static est_status task_export(void *self, const est_task_flags *f) {
  return est_export_classifier(((classifier_task *)self)->c, f->export_dir, NULL, 0);
}

static est_status task_on_prediction(void *self, const est_prediction *p) {
  return collect_prediction(&((classifier_task *)self)->preds, p);
}

static void task_release(void *self) {
  classifier_task *t = self;
  free(t->preds.probs), free(t->preds.logits);
  est_rc_task_free(t->text);
}

/* Multi-label: after the final evaluation, the evaluated checkpoint's probabilities over
 * dev.tsv against its labels, as scikit-learn computes the metrics (est/multi_label.h):
 * eval_accuracy (exact match), eval_{precision,recall,f1}_{micro,macro}, and per label
 * eval_<label>_{precision,recall,f1,number}. */
static est_status task_finish_eval(void *self, est_estimator *e, est_eval_result *result) {
  classifier_task *t = self;
  if (!t->head.multi_label) return EST_OK;
  size_t n = 0;
  const int32_t *gold = est_rc_task_gold(t->text, 1, &n);
  if (!gold) return est_error(EST_ERR_INTERNAL, "multi-label: dev.tsv's labels were not kept");
  char path[4096];
  est_status st = est_path_join(path, sizeof path, t->c->common.output_dir, "eval.tf_record");
  if (st != EST_OK) return st;
  est_input_fn input = rc_input_fn(path, t->c->common.max_seq_length, t->head.num_labels);
  t->preds.count = 0;
  st = est_estimator_predict(e, &input, result->checkpoint_path, task_on_prediction, t);
  est_input_fn_release(&input);
  if (st != EST_OK || !est_dist_is_chief()) return st;
  if ((size_t)t->preds.count != n)
    return est_error(EST_ERR_INTERNAL, "%lld predictions for %zu dev examples", (long long)t->preds.count, n);
  est_multi_label_report r;
  st = est_multi_label_evaluate(&r, gold, t->preds.probs, n, (size_t)t->head.num_labels, 0.5);
  t->preds.count = 0;
  if (st != EST_OK) return st;
  const struct {
    const char *name;
    double v;
  } all[] = {{"eval_accuracy", r.exact_match},        {"eval_f1_micro", r.micro_f1},
             {"eval_precision_micro", r.micro_precision}, {"eval_recall_micro", r.micro_recall},
             {"eval_f1_macro", r.macro_f1},            {"eval_precision_macro", r.macro_precision},
             {"eval_recall_macro", r.macro_recall}};
  for (size_t i = 0; st == EST_OK && i < sizeof all / sizeof *all; i++)
    st = est_eval_result_set(result, all[i].name, all[i].v);
  const char *const *labels = est_rc_task_labels(t->text);
  for (size_t c = 0; st == EST_OK && c < r.num_labels; c++) {
    const char *suffix[4] = {"precision", "recall", "f1", "number"};
    const est_multi_label_score *s = &r.labels[c];
    const double v[4] = {s->precision, s->recall, s->f1, (double)s->support};
    for (int k = 0; st == EST_OK && k < 4; k++) {
      char name[512];
      snprintf(name, sizeof name, "eval_%s_%s", labels[c], suffix[k]);
      st = est_eval_result_set(result, name, v[k]);
    }
  }
  est_multi_label_report_free(&r);
  return st;
}

/* Validation alone (what the command line runs before MPI starts) or the whole run. */
static est_status run(const est_run_classifier_config *c, int validate_only) {
  classifier_task t = {.c = c};
  const est_task task = {.name = "run_classifier", .self = &t,
                         .do_flags_message = "At least one of `do_train`, `do_eval` or `do_predict' must be True.",
                         .validate = task_validate, .prepare = task_prepare, .open_input = task_open_input,
                         .on_prediction = task_on_prediction, .write_predictions = task_write_predictions,
                         .export = task_export, .finish_eval = task_finish_eval, .release = task_release};
  return est_task_main(&task, &c->common, validate_only);
}

est_status est_run_classifier_validate(const est_run_classifier_config *c) { return run(c, 1); }
est_status est_run_classifier_main(const est_run_classifier_config *c) { return run(c, 0); }
