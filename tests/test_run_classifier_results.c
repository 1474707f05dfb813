/* run_classifier's result files, eval_results.txt (the Estimator's writer) and
 * test_results.tsv, and its step arithmetic. The float formatter's own tests are in
 * test_float_format.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "est/est.h"
#include "est/run_classifier.h"
#include "test_util.h"

static void test_eval_results_sorted_and_formatted(void **state) {
  (void)state;
  char dir[256], path[512];
  test_make_tmpdir(dir, sizeof dir);
  est_path_join(path, sizeof path, dir, "eval_results.txt");
  float acc, loss;
  uint32_t acc_bits = 0x3f3a5a5au, loss_bits = 0x3f26cfd3u;
  memcpy(&acc, &acc_bits, 4);
  memcpy(&loss, &loss_bits, 4);
  /* Given out of order: the writer sorts as Python's sorted(result.keys()). */
  char *names[] = {"loss", "global_step", "eval_loss", "eval_accuracy"};
  double values[] = {loss, 343, loss, acc};
  const est_eval_result r = {.count = 4, .names = names, .values = values, .global_step = 343};
  assert_int_equal(est_eval_result_write(&r, path), EST_OK);
  uint8_t *text;
  size_t size;
  assert_int_equal(est_read_file(path, &text, &size), EST_OK);
  /* The golden file written by TF 1.15 (shared/data run_classifier_mrpc_bert_tiny). */
  assert_string_equal((char *)text,
                      "eval_accuracy = 0.72794116\neval_loss = 0.65160865\nglobal_step = 343\n"
                      "loss = 0.65160865\n");
  free(text);
  test_remove_tree(dir);
}

static void test_test_results_lines(void **state) {
  (void)state;
  char dir[256], path[512];
  test_make_tmpdir(dir, sizeof dir);
  est_path_join(path, sizeof path, dir, "test_results.tsv");
  const float p[] = {0.25f, 0.75f, 1.0f, 0.0f, 0.33333334f, 0.6666666f};
  assert_int_equal(est_run_classifier_write_test_results(path, p, 3, 2), EST_OK);
  uint8_t *text;
  size_t size;
  assert_int_equal(est_read_file(path, &text, &size), EST_OK);
  assert_string_equal((char *)text, "0.25\t0.75\n1.0\t0.0\n0.33333334\t0.6666666\n");
  free(text);
  /* Zero examples: an empty file, not a missing one. */
  assert_int_equal(est_run_classifier_write_test_results(path, p, 0, 2), EST_OK);
  assert_int_equal(est_read_file(path, &text, &size), EST_OK);
  assert_int_equal(size, 0);
  free(text);
  test_remove_tree(dir);
}

static void test_train_step_arithmetic(void **state) {
  (void)state;
  /* docs/run_classifier.md §9 step 6: MRPC 3668 / 32 * 3 = 343.875 -> 343 steps, 34 warm-up. */
  assert_int_equal(est_run_classifier_num_train_steps(3668, 32, 3.0), 343);
  assert_int_equal(est_run_classifier_num_warmup_steps(343, 0.1), 34);
  /* XNLI-zh: 392702 / 32 * 2 = 24543.875 -> 24543. */
  assert_int_equal(est_run_classifier_num_train_steps(392702, 32, 2.0), 24543);
  assert_int_equal(est_run_classifier_num_train_steps(10, 32, 1.0), 0);
  /* SST-2 one epoch at batch 32. */
  assert_int_equal(est_run_classifier_num_train_steps(67349, 32, 1.0), 2104);
  assert_int_equal(est_run_classifier_num_warmup_steps(2104, 0.1), 210);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_eval_results_sorted_and_formatted),
    cmocka_unit_test(test_test_results_lines),
    cmocka_unit_test(test_train_step_arithmetic),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
