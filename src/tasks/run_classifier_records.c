/* The text side of run_classifier's main(): processor, labels, tokenizer, and the
 * train/eval/predict.tf_record files written from the TSVs (docs/run_classifier.md §3-§5). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/classifier_features.h"
#include "est/file.h"
#include "est/log.h"
#include "est/processors.h"
#include "est/tokenizer.h"
#include "tasks/run_classifier_internal.h"

struct est_rc_task {
  est_processor *proc;
  est_tokenizer *tok;
  const char *const *labels;
  size_t nlabels;
  est_examples ex[3];          /* per split, between load and write */
  bool multi_label;
  int32_t *gold[3];            /* multi-label: [count, nlabels] per split, from write */
  size_t gold_count[3];
  int doc_stride;              /* > 0: the test split in windows */
  int64_t *window_example;     /* [num_windows] */
  size_t num_windows;
};

void est_rc_task_set_windows(est_rc_task *t, int doc_stride) { t->doc_stride = doc_stride; }

const int64_t *est_rc_task_windows(const est_rc_task *t, size_t *num_windows) {
  *num_windows = t->num_windows;
  return t->window_example;
}

bool est_rc_multi_label(const est_run_classifier_config *c) {
  if (c->multi_label) return true;
  const char *cfg = c->common.bert_config_file;
  if (!cfg || !*cfg) return false;
  char path[4096];
  if (est_is_directory(cfg)) {
    if (est_path_join(path, sizeof path, cfg, "config.json") != EST_OK) return false;
  } else {
    snprintf(path, sizeof path, "%s", cfg);
  }
  json_t *root = json_load_file(path, 0, NULL);
  const json_t *pt = json_object_get(root, "problem_type");
  const bool multi = json_is_string(pt) && !strcmp(json_string_value(pt), "multi_label_classification");
  json_decref(root);
  return multi;
}

const int32_t *est_rc_task_gold(const est_rc_task *t, int split, size_t *count) {
  if (split < 0 || split > 2) return NULL;
  *count = t->gold_count[split];
  return t->gold[split];
}

est_tsv_task_config est_rc_tsv_config(const est_run_classifier_config *c) {
  est_tsv_task_config tc = est_tsv_task_config_default();
  tc.text_a_column = (int)c->tsv_text_a_column;
  tc.text_b_column = (int)c->tsv_text_b_column;
  tc.label_column = (int)c->tsv_label_column;
  tc.test_text_a_column = (int)c->tsv_test_text_a_column;
  tc.test_text_b_column = (int)c->tsv_test_text_b_column;
  tc.test_label_column = (int)c->tsv_test_label_column;
  tc.skip_header = c->tsv_skip_header;
  tc.labels = c->tsv_labels;
  tc.multi_label = est_rc_multi_label(c);
  return tc;
}

est_status est_rc_task_open(est_rc_task **out, const est_run_classifier_config *c) {
  *out = NULL;
  est_rc_task *t = calloc(1, sizeof *t);
  if (!t) return est_error(EST_ERR_NO_MEMORY, "run_classifier: out of memory");
  for (int i = 0; i < 3; i++) est_examples_init(&t->ex[i]);
  est_tsv_task_config tc = est_rc_tsv_config(c);
  t->multi_label = tc.multi_label;
  est_status st = est_processor_create(&t->proc, c->task_name, &tc);
  if (st == EST_OK) st = est_processor_get_labels(t->proc, c->data_dir, &t->labels, &t->nlabels);
  if (st == EST_OK && t->nlabels < 2 && !t->multi_label)
    st = est_error(EST_ERR_INVALID_ARGUMENT, "task %s: %zu label(s); a classifier needs at least 2",
                   est_processor_name(t->proc), t->nlabels);
  if (st == EST_OK) st = est_tokenizer_open_any(&t->tok, c->vocab_file, c->do_lower_case);
  if (st != EST_OK) {
    est_rc_task_free(t);
    return st;
  }
  *out = t;
  return EST_OK;
}

void est_rc_task_free(est_rc_task *t) {
  if (!t) return;
  for (int i = 0; i < 3; i++) est_examples_free(&t->ex[i]), free(t->gold[i]);
  free(t->window_example);
  est_tokenizer_free(t->tok);
  est_processor_free(t->proc);
  free(t);
}

const est_processor *est_rc_task_processor(const est_rc_task *t) { return t->proc; }
size_t est_rc_task_num_labels(const est_rc_task *t) { return t->nlabels; }
const char *const *est_rc_task_labels(const est_rc_task *t) { return t->labels; }
int32_t est_rc_task_vocab_size(const est_rc_task *t) { return est_tokenizer_size(t->tok); }

est_status est_rc_task_load(est_rc_task *t, const char *data_dir, int split, int64_t *num_examples) {
  if (split < 0 || split > 2) return est_error(EST_ERR_INVALID_ARGUMENT, "split %d is not 0, 1 or 2", split);
  est_examples_free(&t->ex[split]);
  est_status st = est_processor_get_examples(t->proc, data_dir, (est_split)split, &t->ex[split]);
  if (st != EST_OK) {
    est_examples_free(&t->ex[split]);
    return st;
  }
  *num_examples = (int64_t)t->ex[split].count;
  return EST_OK;
}

est_status est_rc_task_write_records(est_rc_task *t, int split, int max_seq_length, const char *path) {
  if (split < 0 || split > 2) return est_error(EST_ERR_INVALID_ARGUMENT, "split %d is not 0, 1 or 2", split);
  if (split == 2 && t->doc_stride > 0) {
    free(t->window_example);
    est_status st = est_file_based_convert_windows(&t->ex[split], t->labels, t->nlabels, max_seq_length, t->tok,
                                                   t->doc_stride, t->multi_label, path, &t->window_example,
                                                   &t->num_windows);
    est_examples_free(&t->ex[split]);
    return st;
  }
  if (!t->multi_label) {
    est_status st = est_file_based_convert_examples_to_features(&t->ex[split], t->labels, t->nlabels,
                                                                max_seq_length, t->tok, path);
    est_examples_free(&t->ex[split]);
    return st;
  }
  est_status st = est_file_based_convert_multi_label(&t->ex[split], t->labels, t->nlabels, max_seq_length, t->tok,
                                                     path);
  /* the gold labels, for the multi-label metrics (run_classifier's finish_eval) */
  const est_examples *ex = &t->ex[split];
  free(t->gold[split]);
  t->gold[split] = st == EST_OK ? malloc((ex->count + 1) * t->nlabels * sizeof(int32_t)) : NULL;
  t->gold_count[split] = ex->count;
  if (st == EST_OK && !t->gold[split]) st = est_error(EST_ERR_NO_MEMORY, "multi-label gold labels");
  for (size_t i = 0; st == EST_OK && i < ex->count; i++)
    st = est_multi_label_ids(ex->items[i].label ? ex->items[i].label : "", t->labels, t->nlabels,
                             t->gold[split] + i * t->nlabels);
  est_examples_free(&t->ex[split]);
  return st;
}
