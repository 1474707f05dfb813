/* run_classifier's configuration: the reference's flag defaults and its step arithmetic. */
#include "est/run_classifier.h"

est_run_classifier_config est_run_classifier_config_default(void) {
  est_run_classifier_config c = {.common = est_task_flags_default()};
  c.do_lower_case = true;
  c.num_train_epochs = 3.0;
  c.warmup_proportion = 0.1;
  /* est's own: a fixed seed, so that two runs of the same command give the same model */
  c.common.seed = 12345;
  c.tsv_text_a_column = 0;
  c.tsv_text_b_column = -1;
  c.tsv_label_column = 1;
  c.tsv_test_text_a_column = c.tsv_test_text_b_column = c.tsv_test_label_column = -2;
  c.tsv_skip_header = true;
  return c;
}

/* Python: int(len(train_examples) / train_batch_size * num_train_epochs). The division is
 * a float division in double precision, then the product, then truncation toward zero. */
int64_t est_run_classifier_num_train_steps(int64_t num_examples, int64_t batch, double epochs) {
  if (batch <= 0) return 0;
  return (int64_t)((double)num_examples / (double)batch * epochs);
}

int64_t est_run_classifier_num_warmup_steps(int64_t num_train_steps, double warmup_proportion) {
  return (int64_t)((double)num_train_steps * warmup_proportion);
}
