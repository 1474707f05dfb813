/* est/run_classifier.h — google-research/bert run_classifier.py as a library call.
 *
 * `est run_classifier` (tools/cmd_run_classifier.c) fills an est_run_classifier_config from
 * the same flags as the reference (names, types, defaults) and calls
 * est_run_classifier_main, which does what the reference's main() does:
 *
 *     est_run_classifier_config c = est_run_classifier_config_default();
 *     c.task_name = "mrpc"; c.data_dir = "glue/MRPC"; c.vocab_file = "vocab.txt";
 *     c.common.bert_config_file = "bert_config.json"; c.common.output_dir = "out";
 *     c.common.do_train = c.common.do_eval = true;
 *     if (est_run_classifier_main(&c) != EST_OK) fprintf(stderr, "%s\n", est_error_message());
 *
 *  1. checks every flag and input file before doing any work (est_run_classifier_validate);
 *  2. do_train: writes output_dir/train.tf_record, trains max_steps =
 *     int(num_examples / train_batch_size * num_train_epochs) steps with
 *     int(steps * warmup_proportion) warm-up steps, checkpoints every save_checkpoints_steps,
 *     resuming from the newest checkpoint in output_dir;
 *  3. do_eval: writes eval.tf_record, evaluates the newest checkpoint, writes
 *     eval_results.txt with est_eval_result_write (eval_accuracy, eval_loss, global_step,
 *     loss; plus the task's extra metric: eval_f1 for MRPC, eval_mcc for CoLA);
 *  4. do_predict: writes predict.tf_record and test_results.tsv (one line of TAB-separated
 *     class probabilities per test example, as str(np.float32): est/float_format.h).
 * Every step's input is est_tfrecord_input_fn over the records it wrote (est/estimator.h),
 * the model the BERT model_fn with the classifier head (est/bert_head.h), run by the task
 * driver (est/bert_task.h): run_classifier is a user of the public API.
 */
#ifndef EST_RUN_CLASSIFIER_H
#define EST_RUN_CLASSIFIER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "est/bert_task.h"
#include "est/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct est_run_classifier_config {
  /* The flags every run_* shares (est/bert_task.h): bert_config_file, output_dir,
   * init_checkpoint, max_seq_length, do_train / do_eval / do_predict, batch sizes,
   * learning_rate, save_checkpoints_steps, the TPU flags, and est's threads, precision,
   * recompute, seed (12345 here: run_classifier.py sets none, so its runs are not
   * reproducible), keep_checkpoint_max, log_step_count_steps, input_sharding. */
  est_task_flags common;
  /* ---- run_classifier.py's own flags (same names and defaults) ---- */
  const char *data_dir;          /* required */
  const char *task_name;         /* required; case-insensitive */
  const char *vocab_file;        /* required */
  bool do_lower_case;            /* true */
  double num_train_epochs;       /* 3.0 */
  double warmup_proportion;      /* 0.1 */
  /* ---- est's own: the generic TSV task (task_name "tsv"; est/processors.h) ---- */
  /* 0-based columns, -1 none. */
  int64_t tsv_text_a_column;     /* 0 */
  int64_t tsv_text_b_column;     /* -1: single-sentence */
  int64_t tsv_label_column;      /* 1; -1: every example gets the first label */
  /* test.tsv's columns; -2: the same as train/dev. */
  int64_t tsv_test_text_a_column, tsv_test_text_b_column, tsv_test_label_column;
  const char *tsv_labels;        /* "neg,pos": label order; NULL: train.tsv's labels, sorted */
  bool tsv_skip_header;          /* true */
  /* Multi-label (task tsv; docs/run_classifier.md §12): each label field lists any number of
   * labels, comma-separated; sigmoid outputs and binary cross-entropy. Also on when
   * --bert_config_file is a HuggingFace config.json with problem_type
   * "multi_label_classification". */
  bool multi_label;              /* false */
  /* Long documents in --do_predict (docs/run_classifier.md §13): "truncate" (NULL, the
   * reference's: the first max_seq_length - 2 tokens), or every window of text_a, each
   * doc_stride tokens after the previous, their logits pooled by "mean" or "max" before the
   * softmax (sigmoid when multi-label). doc_stride 0: half a window. */
  const char *long_documents;
  int64_t doc_stride;            /* 0 */
} est_run_classifier_config;

est_run_classifier_config est_run_classifier_config_default(void);

/* Every check the reference makes before work starts (and the ones it makes too late or
 * not at all): a do_* flag set, a known task, batch sizes and lengths positive,
 * max_seq_length <= max_position_embeddings, the case of a released checkpoint, input files
 * present, vocab no larger than the model's vocab_size. INVALID_ARGUMENT / NOT_FOUND with a
 * message naming the flag. Writes nothing. */
est_status est_run_classifier_validate(const est_run_classifier_config *c);

/* The reference's main(). Logs progress through est/log.h. */
est_status est_run_classifier_main(const est_run_classifier_config *c);

/* int(num_examples / batch * epochs) and int(steps * warmup_proportion), float division then
 * truncation as in the reference. */
int64_t est_run_classifier_num_train_steps(int64_t num_examples, int64_t batch, double epochs);
int64_t est_run_classifier_num_warmup_steps(int64_t num_train_steps, double warmup_proportion);

/* test_results.tsv: num_examples lines of num_classes TAB-separated probabilities, as
 * str(np.float32), atomically. (eval_results.txt: est_eval_result_write, est/estimator.h.) */
est_status est_run_classifier_write_test_results(const char *path, const float *probabilities,
                                                 size_t num_examples, int num_classes);

/* --do_export (src/tasks/run_classifier_export.c): exports the newest checkpoint of
 * c->output_dir (labels from the task, as run_classifier's processor gives them) to
 * export_dir, default <output_dir>/export (an est servable, est/serving.h) or <output_dir>/hf
 * (--export_format=hf, docs/hf.md §6). Checks the flags it needs (task_name, output_dir,
 * vocab_file, bert_config_file, max_seq_length) and says which is wrong. The version or HF
 * directory written goes to version_dir (may be NULL). */
est_status est_export_classifier(const est_run_classifier_config *c, const char *export_dir, char *version_dir,
                                 size_t size);

#ifdef __cplusplus
}
#endif
#endif
