/* Streaming metrics against hand-computed values; padding rows (weight 0) are chosen to be
 * wrong / extreme, so counting them would change every result. AUC references were computed
 * with numpy following metrics_impl.py (float32 thresholds, 1e-7 / 1e-6 epsilons). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "est/metrics.h"

/*                              real rows ........................ | padding */
static const int32_t labels[10] = {1, 0, 1, 1, 0, 0, 1, 0, /**/ 1, 0};
static const int32_t preds[10] = {1, 0, 0, 1, 1, 0, 1, 1, /**/ 0, 1};
static const float is_real[10] = {1, 1, 1, 1, 1, 1, 1, 1, /**/ 0, 0};
static const float scores[10] = {0.9f, 0.1f, 0.3f, 0.8f, 0.7f, 0.2f, 0.6f, 0.4f, /**/ 0.0f, 1.0f};

static double run_classes(est_metric_kind kind, size_t split) {
  est_metric *m;
  assert_int_equal(est_metric_create(&m, kind, "m"), EST_OK);
  /* two batches: streaming must not depend on where the batches split */
  assert_int_equal(est_metric_update_classes(m, labels, preds, is_real, split), EST_OK);
  assert_int_equal(est_metric_update_classes(m, labels + split, preds + split, is_real + split, 10 - split), EST_OK);
  double r = est_metric_result(m);
  est_metric_free(m);
  return r;
}

static void test_classification_metrics(void **state) {
  (void)state;
  /* real rows: tp = 3 (0,3,6), fp = 2 (4,7), fn = 1 (2), tn = 2 (1,5); 5 of 8 correct */
  for (size_t split = 0; split <= 10; split += 5) {
    assert_float_equal(run_classes(EST_METRIC_ACCURACY, split), 0.625, 1e-12);
    assert_float_equal(run_classes(EST_METRIC_PRECISION, split), 0.6, 1e-12);
    assert_float_equal(run_classes(EST_METRIC_RECALL, split), 0.75, 1e-12);
    assert_float_equal(run_classes(EST_METRIC_F1, split), 2.0 / 3.0, 1e-12);
    assert_float_equal(run_classes(EST_METRIC_MCC, split), 4.0 / sqrt(240.0), 1e-12);
  }
  /* unweighted (NULL weights): all ten rows count; 5 of 10 correct */
  est_metric *m;
  assert_int_equal(est_metric_create(&m, EST_METRIC_ACCURACY, "eval_accuracy"), EST_OK);
  assert_string_equal(est_metric_name(m), "eval_accuracy");
  assert_int_equal(est_metric_update_classes(m, labels, preds, NULL, 10), EST_OK);
  assert_float_equal(est_metric_result(m), 0.5, 1e-12);
  /* multi-class accuracy compares classes, not truthiness */
  est_metric_reset(m);
  assert_int_equal(est_metric_update_classes(m, (int32_t[]){2, 1, 0}, (int32_t[]){2, 2, 0}, NULL, 3), EST_OK);
  assert_float_equal(est_metric_result(m), 2.0 / 3.0, 1e-12);
  est_metric_free(m);
}

static void test_degenerate_cases_are_zero(void **state) {
  (void)state;
  const est_metric_kind kinds[] = {EST_METRIC_MEAN, EST_METRIC_ACCURACY, EST_METRIC_PRECISION, EST_METRIC_RECALL,
                                   EST_METRIC_F1, EST_METRIC_MCC};
  for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
    est_metric *m;
    assert_int_equal(est_metric_create(&m, kinds[k], "m"), EST_OK);
    assert_true(est_metric_result(m) == 0.0);  /* nothing seen: 0/0 -> 0 */
    est_metric_free(m);
  }
  /* all predictions negative: precision 0/0 = 0, MCC denominator 0 = 0 */
  est_metric *p, *mcc;
  assert_int_equal(est_metric_create(&p, EST_METRIC_PRECISION, "p"), EST_OK);
  assert_int_equal(est_metric_create(&mcc, EST_METRIC_MCC, "mcc"), EST_OK);
  int32_t l[3] = {1, 0, 1}, z[3] = {0, 0, 0};
  assert_int_equal(est_metric_update_classes(p, l, z, NULL, 3), EST_OK);
  assert_int_equal(est_metric_update_classes(mcc, l, z, NULL, 3), EST_OK);
  assert_true(est_metric_result(p) == 0.0 && est_metric_result(mcc) == 0.0);
  /* perfect prediction: MCC 1 */
  est_metric_reset(mcc);
  assert_int_equal(est_metric_update_classes(mcc, l, l, NULL, 3), EST_OK);
  assert_float_equal(est_metric_result(mcc), 1.0, 1e-12);
  est_metric_free(p);
  est_metric_free(mcc);
}

static void test_mean(void **state) {
  (void)state;
  est_metric *m;
  assert_int_equal(est_metric_create(&m, EST_METRIC_MEAN, "eval_loss"), EST_OK);
  const float loss[10] = {0.5f, 1.0f, 1.5f, 2.0f, 2.5f, 3.0f, 3.5f, 4.0f, NAN, 100.0f};
  assert_int_equal(est_metric_update_values(m, loss, is_real, 10), EST_OK);
  assert_float_equal(est_metric_result(m), 18.0 / 8.0, 1e-12);
  est_metric_reset(m);
  assert_int_equal(est_metric_update_values(m, (float[]){1.0f, 4.0f}, (float[]){0.5f, 2.0f}, 2), EST_OK);
  assert_float_equal(est_metric_result(m), (0.5 + 8.0) / 2.5, 1e-12);
  /* wrong update function for the kind */
  assert_int_equal(est_metric_update_classes(m, labels, preds, NULL, 10), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "eval_loss"));
  est_metric_free(m);
}

static void test_auc(void **state) {
  (void)state;
  est_metric *m;
  assert_int_equal(est_metric_create(&m, EST_METRIC_AUC, "auc"), EST_OK);
  assert_int_equal(est_metric_update_scores(m, labels, scores, is_real, 10), EST_OK);
  /* pairwise: 13 of 16 (positive, negative) pairs ordered; TF's epsilons shift it by 1.6e-7 */
  assert_float_equal(est_metric_result(m), 0.812499843750, 1e-10);
  double *acc;
  size_t n;
  est_metric_state(m, &acc, &n);
  assert_int_equal(n, 4 * EST_METRIC_AUC_THRESHOLDS);
  assert_true(acc[0] == 4.0);                                  /* tp at threshold -1e-7 */
  assert_true(acc[3 * EST_METRIC_AUC_THRESHOLDS + 0] == 4.0);  /* fp at threshold -1e-7 */

  /* both scores in one threshold bucket: the trapezoid gives 0.5, not the exact 0 */
  est_metric_reset(m);
  assert_int_equal(est_metric_update_scores(m, (int32_t[]){1, 0}, (float[]){0.501f, 0.502f}, NULL, 2), EST_OK);
  assert_float_equal(est_metric_result(m), 0.5, 1e-12);
  /* fractional weights */
  est_metric_reset(m);
  assert_int_equal(
      est_metric_update_scores(m, (int32_t[]){1, 0, 1}, (float[]){0.2f, 0.9f, 0.95f}, (float[]){1, 1, 0.5f}, 3),
      EST_OK);
  assert_float_equal(est_metric_result(m), 0.333333444444, 1e-10);
  /* out-of-range scores are refused and change nothing */
  double before = est_metric_result(m);
  assert_int_equal(est_metric_update_scores(m, (int32_t[]){1, 0}, (float[]){0.5f, 1.5f}, NULL, 2),
                   EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "element 1"));
  assert_int_equal(est_metric_update_scores(m, (int32_t[]){1}, (float[]){NAN}, NULL, 1), EST_ERR_INVALID_ARGUMENT);
  assert_true(est_metric_result(m) == before);
  est_metric_free(m);
}

/* Two "ranks" each see half the data; summing their states equals one pass over all. */
static void test_merge_equals_single_pass(void **state) {
  (void)state;
  const est_metric_kind kinds[] = {EST_METRIC_ACCURACY, EST_METRIC_F1, EST_METRIC_MCC, EST_METRIC_AUC};
  for (size_t k = 0; k < 4; k++) {
    est_metric *all, *a, *b;
    assert_int_equal(est_metric_create(&all, kinds[k], "all"), EST_OK);
    assert_int_equal(est_metric_create(&a, kinds[k], "a"), EST_OK);
    assert_int_equal(est_metric_create(&b, kinds[k], "b"), EST_OK);
    if (kinds[k] == EST_METRIC_AUC) {
      assert_int_equal(est_metric_update_scores(all, labels, scores, is_real, 10), EST_OK);
      assert_int_equal(est_metric_update_scores(a, labels, scores, is_real, 3), EST_OK);
      assert_int_equal(est_metric_update_scores(b, labels + 3, scores + 3, is_real + 3, 7), EST_OK);
    } else {
      assert_int_equal(est_metric_update_classes(all, labels, preds, is_real, 10), EST_OK);
      assert_int_equal(est_metric_update_classes(a, labels, preds, is_real, 3), EST_OK);
      assert_int_equal(est_metric_update_classes(b, labels + 3, preds + 3, is_real + 3, 7), EST_OK);
    }
    /* a reduction as MPI would do it: sum b's raw state into a's in place */
    double *sa, *sb;
    size_t na, nb;
    est_metric_state(a, &sa, &na);
    est_metric_state(b, &sb, &nb);
    assert_int_equal(na, nb);
    for (size_t i = 0; i < na; i++) sa[i] += sb[i];
    assert_float_equal(est_metric_result(a), est_metric_result(all), 1e-12);
    assert_int_equal(est_metric_merge(b, all), EST_OK);  /* b + all = all + b half */
    assert_true(est_metric_result(all) != 0.0);
    est_metric_free(all);
    est_metric_free(a);
    est_metric_free(b);
  }
  est_metric *x, *y;
  assert_int_equal(est_metric_create(&x, EST_METRIC_MEAN, "x"), EST_OK);
  assert_int_equal(est_metric_create(&y, EST_METRIC_AUC, "y"), EST_OK);
  assert_int_equal(est_metric_merge(x, y), EST_ERR_INVALID_ARGUMENT);
  est_metric_free(x);
  est_metric_free(y);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_classification_metrics),
    cmocka_unit_test(test_degenerate_cases_are_zero),
    cmocka_unit_test(test_mean),
    cmocka_unit_test(test_auc),
    cmocka_unit_test(test_merge_equals_single_pass),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
