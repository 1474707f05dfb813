/* The text side of run_classifier's main(): processor, labels, tokenizer, and the
 * train/eval/predict.tf_record files written from the TSVs (docs/run_classifier.md §3-§5). */
#include <stdlib.h>
#include <string.h>

#include "est/classifier_features.h"
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
};

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
  return tc;
}

est_status est_rc_task_open(est_rc_task **out, const est_run_classifier_config *c) {
  *out = NULL;
  est_rc_task *t = calloc(1, sizeof *t);
  if (!t) return est_error(EST_ERR_NO_MEMORY, "run_classifier: out of memory");
  for (int i = 0; i < 3; i++) est_examples_init(&t->ex[i]);
  est_tsv_task_config tc = est_rc_tsv_config(c);
  est_status st = est_processor_create(&t->proc, c->task_name, &tc);
  if (st == EST_OK) st = est_processor_get_labels(t->proc, c->data_dir, &t->labels, &t->nlabels);
  if (st == EST_OK && t->nlabels < 2)
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
  for (int i = 0; i < 3; i++) est_examples_free(&t->ex[i]);
  est_tokenizer_free(t->tok);
  est_processor_free(t->proc);
  free(t);
}

const est_processor *est_rc_task_processor(const est_rc_task *t) { return t->proc; }
size_t est_rc_task_num_labels(const est_rc_task *t) { return t->nlabels; }
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
  est_status st = est_file_based_convert_examples_to_features(&t->ex[split], t->labels, t->nlabels,
                                                              max_seq_length, t->tok, path);
  est_examples_free(&t->ex[split]);
  return st;
}
