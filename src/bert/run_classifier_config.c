/* run_classifier's configuration: the reference's flag defaults and its step arithmetic. */
#include "est/run_classifier.h"

est_run_classifier_config est_run_classifier_config_default(void) {
  est_run_classifier_config c = {0};
  c.do_lower_case = true;
  c.max_seq_length = 128;
  c.train_batch_size = 32;
  c.eval_batch_size = 8;
  c.predict_batch_size = 8;
  c.learning_rate = 5e-5;
  c.num_train_epochs = 3.0;
  c.warmup_proportion = 0.1;
  c.save_checkpoints_steps = 1000;
  c.iterations_per_loop = 1000;
  c.num_tpu_cores = 8;
  /* est's own; the two RunConfig ones keep tf.estimator's defaults. */
  c.num_threads = 0;
  c.precision = "fp32";
  c.seed = 12345;
  c.keep_checkpoint_max = 5;
  c.log_step_count_steps = 100;
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
