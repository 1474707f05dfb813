/* run_classifier's result files: str(np.float32) formatting, eval_results.txt and
 * test_results.tsv. Expected strings were printed by NumPy 1.24 (str(np.float32(v))) for
 * the listed bit patterns. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "est/est.h"
#include "est/run_classifier.h"
#include "test_util.h"

static const struct {
  uint32_t bits;
  const char *text;
} numpy_str[] = {
  {0x3f587879u, "0.84558827"}, {0x3749539cu, "1.2e-05"},     {0x38d1b717u, "1e-04"},
  {0x38d18167u, "9.99e-05"},   {0x3f000000u, "0.5"},         {0x3f800000u, "1.0"},
  {0x47c35000u, "100000.0"},   {0x58635fa9u, "1000000000000000.0"},
  {0x5a0e1bcau, "1e+16"},      {0x5ad529afu, "3e+16"},       {0x4ceb79a3u, "123456790.0"},
  {0xb48637bdu, "-2.5e-07"},   {0x3dcccccdu, "0.1"},         {0x3eaaaaabu, "0.33333334"},
  {0x4b800000u, "16777216.0"}, {0x00000001u, "1e-45"},       {0x7f7fc99eu, "3.4e+38"},
  {0x3901725bu, "0.00012345"}, {0x3f26cfd3u, "0.65160865"},  {0x3f3a5a5au, "0.72794116"},
  {0x40000000u, "2.0"},        {0xc0e00000u, "-7.0"},        {0x2edbe6ffu, "1e-10"},
  {0x38d1b725u, "0.0001000001"}, {0x477fe000u, "65504.0"},   {0x449a5000u, "1234.5"},
  {0x4557fd79u, "3455.842"},   {0x42a452d9u, "82.16181"},    {0x330debf1u, "3.3043708e-08"},
  {0xb25fe176u, "-1.3031572e-08"}, {0x4e57da89u, "905355840.0"}, {0x4a883903u, "4463745.5"},
  {0xcc4cd4d7u, "-53695324.0"}, {0x4268727eu, "58.11181"},   {0x3ea8d298u, "0.3297317"},
  {0x3f49d677u, "0.7884287"},  {0x3e9b3c5au, "0.30319482"},  {0x3ee830e0u, "0.4534979"},
  {0x3e09423au, "0.1340417"},  {0x3ece64d3u, "0.40311298"},
  {0x00000000u, "0.0"},        {0x80000000u, "-0.0"},        {0x7fc00000u, "nan"},
  {0x7f800000u, "inf"},        {0xff800000u, "-inf"},
};

static void test_format_float32_matches_numpy(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof numpy_str / sizeof numpy_str[0]; i++) {
    float v;
    memcpy(&v, &numpy_str[i].bits, 4);
    char buf[48];
    est_format_float32(v, buf, sizeof buf);
    if (strcmp(buf, numpy_str[i].text) != 0)
      fail_msg("bits 0x%08x: got '%s', NumPy prints '%s'", numpy_str[i].bits, buf, numpy_str[i].text);
  }
}

/* Every printed value must parse back to the same float32 (the round-trip half of the
 * contract), over a sweep of bit patterns. */
static void test_format_float32_round_trips(void **state) {
  (void)state;
  for (uint32_t bits = 0x00000001u; bits < 0x7f800000u; bits += 0x000f4243u) {
    float v;
    memcpy(&v, &bits, 4);
    char buf[48];
    est_format_float32(v, buf, sizeof buf);
    assert_true(strtof(buf, NULL) == v);
  }
}

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
  est_metric_value m[] = {
    {"loss", loss, 0, 0}, {"global_step", 0, 1, 343}, {"eval_loss", loss, 0, 0}, {"eval_accuracy", acc, 0, 0},
  };
  assert_int_equal(est_run_classifier_write_eval_results(path, m, 4), EST_OK);
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
    cmocka_unit_test(test_format_float32_matches_numpy),
    cmocka_unit_test(test_format_float32_round_trips),
    cmocka_unit_test(test_eval_results_sorted_and_formatted),
    cmocka_unit_test(test_test_results_lines),
    cmocka_unit_test(test_train_step_arithmetic),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
