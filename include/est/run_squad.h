/* est/run_squad.h — google-research/bert run_squad.py as a library call (docs/squad.md §8).
 *
 *     est_run_squad_config c = est_run_squad_config_default();
 *     c.common.bert_config_file = "bert_config.json"; c.common.output_dir = "out";
 *     c.vocab_file = "vocab.txt"; c.train_file = "train-v1.1.json"; c.common.do_train = true;
 *     c.predict_file = "dev-v1.1.json"; c.common.do_predict = true;
 *     if (est_run_squad_main(&c) != EST_OK) die(est_error_message());
 *
 * The third task on the driver (est/bert_task.h): SQuAD JSON read as read_squad_examples,
 * the training examples shuffled with random.Random(12345), train.tf_record / eval.tf_record
 * as convert_examples_to_features + FeatureWriter (est/squad.h), the SQuAD head
 * (est_bert_squad_head_type), predictions.json / nbest_predictions.json / null_odds.json as
 * write_predictions, and eval_results.txt from est_squad_evaluate when the predict file has
 * answers. */
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
  /* The shared flags (est/bert_task.h); max_seq_length 384 here, seed 12345 (run_squad.py
   * sets none). run_squad.py has no eval mode: do_eval stays false. */
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
} est_run_squad_config;

est_run_squad_config est_run_squad_config_default(void);

/* validate_flags_or_throw and every other check before work starts: INVALID_ARGUMENT /
 * NOT_FOUND naming the flag (what `est run_squad` turns into exit code 2). */
est_status est_run_squad_validate(const est_run_squad_config *c);

/* run_squad.py's main(). */
est_status est_run_squad_main(const est_run_squad_config *c);

#ifdef __cplusplus
}
#endif
#endif
