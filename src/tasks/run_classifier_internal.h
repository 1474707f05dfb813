/* Pieces of est_run_classifier_main: the text side (run_classifier_records.c: processor,
 * tokenizer, records), used by run_classifier.c with the BERT model_fn and the classifier
 * head (est/bert_head.h). It declares the same
 * things whatever was included before it. */
#ifndef EST_RUN_CLASSIFIER_INTERNAL_H
#define EST_RUN_CLASSIFIER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "est/bert_classifier.h"
#include "est/estimator.h"
#include "est/processors.h"
#include "est/run_classifier.h"
#include "est/status.h"

/* ---- the task: processor, label list, tokenizer (run_classifier_records.c) ---- */

typedef struct est_rc_task est_rc_task;

/* The processor options of c's --tsv_* flags. */
est_tsv_task_config est_rc_tsv_config(const est_run_classifier_config *c);

/* Creates the processor for c->task_name (NOT_FOUND "Task not found: ..."), reads its label
 * list and opens the tokenizer on c->vocab_file with c->do_lower_case. */
est_status est_rc_task_open(est_rc_task **out, const est_run_classifier_config *c);
void est_rc_task_free(est_rc_task *t);

/* The task's processor (name, extra metric, splits), owned by t. */
const est_processor *est_rc_task_processor(const est_rc_task *t);
size_t est_rc_task_num_labels(const est_rc_task *t);
const char *const *est_rc_task_labels(const est_rc_task *t);
int32_t est_rc_task_vocab_size(const est_rc_task *t);

/* get_train/dev/test_examples (split 0/1/2), kept in t; *num_examples gets the count. */
est_status est_rc_task_load(est_rc_task *t, const char *data_dir, int split, int64_t *num_examples);

/* file_based_convert_examples_to_features of the loaded split into `path` (atomically),
 * then drops the examples. */
est_status est_rc_task_write_records(est_rc_task *t, int split, int max_seq_length, const char *path);

/* --long_documents: the test split's records as windows (est_file_based_convert_windows);
 * after est_rc_task_write_records, each window's example (NULL when not windowed). */
void est_rc_task_set_windows(est_rc_task *t, int doc_stride);
const int64_t *est_rc_task_windows(const est_rc_task *t, size_t *num_windows);

/* Multi-label: --multi_label, or --bert_config_file a HuggingFace config whose problem_type is
 * "multi_label_classification". */
bool est_rc_multi_label(const est_run_classifier_config *c);
/* Multi-label: the labels of split's examples as written to its records, [count, num_labels]
 * of 0 / 1 (NULL before est_rc_task_write_records, or single-label). */
const int32_t *est_rc_task_gold(const est_rc_task *t, int split, size_t *count);

#endif
