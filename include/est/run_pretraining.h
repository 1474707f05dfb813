/* est/run_pretraining.h — google-research/bert run_pretraining.py as a library call: the
 * pretraining heads (est/bert_pretraining.h) trained and evaluated on TFRecords of masked
 * examples (est/pretraining_data.h makes them) through the task driver (est/bert_task.h);
 * docs/bert.md §9.
 *
 *     est_run_pretraining_config c = est_run_pretraining_config_default();
 *     c.common.bert_config_file = "bert_config.json";
 *     c.common.output_dir = "pretraining_output";
 *     c.common.do_train = true;
 *     c.input_file = "tf_examples.tfrecord";
 *     if (est_run_pretraining_main(&c) != EST_OK) die(est_error_message());
 */
#ifndef EST_RUN_PRETRAINING_H
#define EST_RUN_PRETRAINING_H

#include <stdint.h>

#include "est/bert_task.h"
#include "est/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The flags of run_pretraining.py (defaults as there), plus est's own. */
typedef struct est_run_pretraining_config {
  /* The flags every run_* shares (est/bert_task.h); do_predict is not one of
   * run_pretraining.py's (an error if set), seed defaults to 0 (drawn and recorded). */
  est_task_flags common;
  const char *input_file;        /* required: comma-separated globs */
  int64_t max_predictions_per_seq; /* 20 */
  int64_t num_train_steps;       /* 100000 */
  int64_t num_warmup_steps;      /* 10000 */
  int64_t max_eval_steps;        /* 100 */
} est_run_pretraining_config;

est_run_pretraining_config est_run_pretraining_config_default(void);
/* Every flag check, no work (what `est run_pretraining` calls before starting MPI). */
est_status est_run_pretraining_validate(const est_run_pretraining_config *c);
/* Flag checks, then training and/or evaluation through the Estimator; eval_results.txt
 * in output_dir. Errors name the flag, or the file and record of a malformed input. */
est_status est_run_pretraining_main(const est_run_pretraining_config *c);

#ifdef __cplusplus
}
#endif
#endif
