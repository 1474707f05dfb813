/* est/run_squad.h — google-research/bert run_squad.py as a library call (docs/squad.md §8-§10).
 *
 *     est_run_squad_config c = est_run_squad_config_default();
 *     c.common.bert_config_file = "uncased_L-12_H-768_A-12/bert_config.json";
 *     c.common.init_checkpoint = "uncased_L-12_H-768_A-12/bert_model.ckpt";
 *     c.common.output_dir = "squad_out";
 *     c.common.do_train = c.common.do_predict = true;
 *     c.vocab_file = "uncased_L-12_H-768_A-12/vocab.txt";
 *     c.train_file = "train-v1.1.json";
 *     c.predict_file = "dev-v1.1.json";
 *     if (est_run_squad_main(&c) != EST_OK) die(est_error_message());
 *
 * Training converts train_file to output_dir/train.tf_record (the examples shuffled with
 * random.Random(12345) first, as main() does) and fine-tunes the encoder with the squad head
 * (est/bert_head.h); prediction converts predict_file to eval.tf_record, runs the model and
 * writes predictions.json, nbest_predictions.json and (version 2) null_odds.json as
 * write_predictions does, then eval_results.txt with the official evaluation's metrics when
 * predict_file holds answers. */
#ifndef EST_RUN_SQUAD_H
#define EST_RUN_SQUAD_H

#include <stdbool.h>
#include <stdint.h>

#include "est/bert_task.h"
#include "est/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct est_run_squad_config {
  /* The shared flags (est/bert_task.h), with run_squad.py's defaults: max_seq_length 384,
   * train_batch_size 32, predict_batch_size 8, learning_rate 5e-5; no eval mode (do_eval and
   * eval_batch_size are not run_squad.py's flags). seed 12345, as run_classifier's. */
  est_task_flags common;
  /* ---- run_squad.py's own flags (same names and defaults) ---- */
  const char *vocab_file;        /* required */
  const char *train_file;        /* required with do_train */
  const char *predict_file;      /* required with do_predict */
  bool do_lower_case;            /* true */
  int64_t doc_stride;            /* 128 */
  int64_t max_query_length;      /* 64 */
  double num_train_epochs;       /* 3.0 */
  double warmup_proportion;      /* 0.1 */
  int64_t n_best_size;           /* 20 */
  int64_t max_answer_length;     /* 30 */
  bool verbose_logging;          /* false */
  bool version_2_with_negative;  /* false */
  double null_score_diff_threshold; /* 0.0 */
  /* ---- est's own ---- */
  /* > 0: train this many steps, instead of int(examples / train_batch_size *
   * num_train_epochs); warmup is warmup_proportion of it. 0: from num_train_epochs. */
  int64_t num_train_steps;
  /* With do_predict: every predict feature's RawResult (the model's logits, before
   * write_predictions) as a TFRecord of tf.train.Example {unique_ids: int64, start_logits,
   * end_logits: float[max_seq_length]}, in eval.tf_record's order; for ensembling, other
   * post-processing, or feeding run_squad.py's write_predictions (docs/squad.md §8). NULL: none. */
  const char *raw_results_file;
} est_run_squad_config;

est_run_squad_config est_run_squad_config_default(void);

/* validate_flags_or_throw and every other check that needs no work: the shared flags, the
 * required files, max_seq_length > max_query_length + 3 and <= max_position_embeddings. */
est_status est_run_squad_validate(const est_run_squad_config *c);

/* run_squad.py's main(). */
est_status est_run_squad_main(const est_run_squad_config *c);

#ifdef __cplusplus
}
#endif
#endif
