/* Pieces of est_run_classifier_main, one file per side: the text side
 * (run_classifier_records.c: processors, tokenizer, records) and the model side
 * (classifier_model_fn.c: the BERT classifier as an Estimator model_fn) meet in
 * run_classifier.c through this header, which needs neither side's headers. */
#ifndef EST_RUN_CLASSIFIER_INTERNAL_H
#define EST_RUN_CLASSIFIER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "est/run_classifier.h"
#include "est/status.h"

/* ---- the task: processor, label list, tokenizer (run_classifier_records.c) ---- */

typedef struct est_rc_task est_rc_task;

/* Creates the processor for c->task_name (NOT_FOUND "Task not found: ..."), reads its label
 * list and opens the tokenizer on c->vocab_file with c->do_lower_case. */
est_status est_rc_task_open(est_rc_task **out, const est_run_classifier_config *c);
void est_rc_task_free(est_rc_task *t);

const char *est_rc_task_name(const est_rc_task *t);
size_t est_rc_task_num_labels(const est_rc_task *t);
const char *const *est_rc_task_labels(const est_rc_task *t);
int32_t est_rc_task_vocab_size(const est_rc_task *t);

/* The split's file under data_dir (for messages and existence checks). */
const char *est_rc_task_split_path(const est_rc_task *t, const char *data_dir, int split, char *buf,
                                   size_t size);

/* get_train/dev/test_examples (split 0/1/2), kept in t; *num_examples gets the count. */
est_status est_rc_task_load(est_rc_task *t, const char *data_dir, int split, int64_t *num_examples);

/* file_based_convert_examples_to_features of the loaded split into `path` (atomically),
 * then drops the examples. */
est_status est_rc_task_write_records(est_rc_task *t, int split, int max_seq_length, const char *path);

/* ---- the model_fn (classifier_model_fn.c) ---- */

/* Reads bert_config_file; the two numbers the flag checks need. */
est_status est_rc_read_bert_config(const char *path, int64_t *max_position_embeddings, int64_t *vocab_size);

#ifdef EST_BERT_MODEL_H
enum { EST_RC_METRIC_NONE = 0, EST_RC_METRIC_F1 = 1, EST_RC_METRIC_MCC = 2 };

/* What model_fn_builder closes over. */
typedef struct est_rc_model_params {
  est_bert_config bert_config;
  int num_labels;
  int max_seq_length;
  const char *init_checkpoint;    /* NULL/"": none */
  double learning_rate;
  int64_t num_train_steps, num_warmup_steps;
  int extra_metric;               /* EST_RC_METRIC_* */
} est_rc_model_params;

#ifdef EST_ESTIMATOR_H
/* The classifier as an Estimator model_fn; params must outlive the estimator. */
est_model_fn est_rc_classifier_model_fn(const est_rc_model_params *params);
#endif
#endif

#endif
