/* est/run_classifier.h — google-research/bert run_classifier.py as a library call.
 *
 * `est run_classifier` (tools/cmd_run_classifier.c) fills an est_run_classifier_config from
 * the same flags as the reference (names, types, defaults) and calls
 * est_run_classifier_main, which does what the reference's main() does:
 *
 *     est_run_classifier_config c = est_run_classifier_config_default();
 *     c.task_name = "mrpc"; c.data_dir = "glue/MRPC"; c.vocab_file = "vocab.txt";
 *     c.bert_config_file = "bert_config.json"; c.output_dir = "out";
 *     c.do_train = c.do_eval = true;
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
 * the model the BERT classifier model_fn: run_classifier is a user of the public API.
 */
#ifndef EST_RUN_CLASSIFIER_H
#define EST_RUN_CLASSIFIER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "est/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct est_run_classifier_config {
  /* ---- run_classifier.py's flags (same names and defaults) ---- */
  const char *data_dir;          /* required */
  const char *bert_config_file;  /* required */
  const char *task_name;         /* required; case-insensitive */
  const char *vocab_file;        /* required */
  const char *output_dir;        /* required; created; also the Estimator's model_dir */
  const char *init_checkpoint;   /* NULL: from scratch */
  bool init_checkpoint_partial;  /* [est] accept an init_checkpoint that leaves encoder variables random */
  bool do_lower_case;            /* true */
  int64_t max_seq_length;        /* 128 */
  bool do_train, do_eval, do_predict;
  int64_t train_batch_size;      /* 32 */
  int64_t eval_batch_size;       /* 8 */
  int64_t predict_batch_size;    /* 8 */
  double learning_rate;          /* 5e-5 */
  double num_train_epochs;       /* 3.0 */
  double warmup_proportion;      /* 0.1 */
  int64_t save_checkpoints_steps; /* 1000 */
  int64_t iterations_per_loop;   /* 1000, TPU only: accepted and ignored */
  bool use_tpu;                  /* TPU only: accepted and ignored */
  const char *tpu_name, *tpu_zone, *gcp_project, *master; /* TPU only */
  int64_t num_tpu_cores;         /* 8, TPU only */

  /* ---- est's own ---- */
  int64_t num_threads;           /* 0: OpenMP's default */
  const char *precision;         /* "fp32" (default) or "bf16": the matmuls' arithmetic (est/precision.h) */
  bool recompute;                /* false: training keeps every layer's activations; true: each layer's
                                    forward runs again in backward (est_bert_encoder_set_recompute) */
  int64_t seed;                  /* initialisation, dropout and shuffling */
  int64_t keep_checkpoint_max;   /* 5, as tf.estimator.RunConfig */
  int64_t log_step_count_steps;  /* 100, as tf.estimator.RunConfig */
  /* Under mpirun: "global" (NULL too): N ranks train on one process's batches; or
   * "shard_first": TF's record sharding (est_input_sharding, est/run_config.h). */
  const char *input_sharding;
  /* The generic TSV task (task_name "tsv"; est/processors.h): 0-based columns, -1 none. */
  int64_t tsv_text_a_column;     /* 0 */
  int64_t tsv_text_b_column;     /* -1: single-sentence */
  int64_t tsv_label_column;      /* 1; -1: every example gets the first label */
  /* test.tsv's columns; -2: the same as train/dev. */
  int64_t tsv_test_text_a_column, tsv_test_text_b_column, tsv_test_label_column;
  const char *tsv_labels;        /* "neg,pos": label order; NULL: train.tsv's labels, sorted */
  bool tsv_skip_header;          /* true */
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

#ifdef __cplusplus
}
#endif
#endif
