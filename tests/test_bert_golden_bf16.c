/* bf16 golden: est's BERT classifier (the BERT model_fn with the classifier head) with
 * --precision=bf16 (every matmul layer's GEMM, forward and backward, on bfloat16 inputs with
 * fp32 sums) against the fp32 PyTorch tensors of tests/data/golden/
 * (tests/reference/bert_golden.py) that test_bert_golden checks to 1e-5: the logits through
 * PREDICT's probabilities (log p against the golden's log_softmax, at twice the logits'
 * tolerance), the per-example losses, every gradient of a TRAIN call. Skipped on a CPU
 * without AVX512-BF16 (bf16 falls back to fp32 there).
 *
 * Tolerances, from bf16's 8-bit significand (unit roundoff u = 2^-8):
 *   - One matmul y = sum_k a_k b_k on rounded operands: each product is off by a relative
 *     d_k with |d_k| <= (1+u)^2 - 1 < 2.01u; the fp32 sum adds at most K 2^-24 sum|a_k b_k|
 *     (for K <= 3072, under 1/40 of the rounding term, and ~sqrt(K) 2^-24 in practice).
 *     In the worst case |dy| <= 2.01u sum_k |a_k b_k|, which grows like K; but the d_k
 *     are independent and zero-mean (uniform within +-u per operand), so the error is a
 *     random sum: rms(dy) = sqrt(2/3) u sqrt(sum_k (a_k b_k)^2), growing like sqrt(K) --
 *     as |y| itself does when the products have mixed signs. Relative to the scale of its
 *     output a matmul therefore adds rms error E1 = sqrt(2/3) u ~ 0.82u, whatever K.
 *   - Chained: a logit is D = 4L + 2 matmuls deep (per layer the Q/K/V projection, the
 *     attention output, FFN in and FFN out; then pooler and classifier), 6L + 2 where AMX
 *     runs the attention's two per-head products (scores, context) in bf16 too. LayerNorm keeps each
 *     layer's scale at ~1, so the independent errors add in quadrature: E = E1 sqrt(D)
 *     relative to the tensor's scale. A parameter gradient is up to 2D + 1 matmuls deep
 *     (forward, then back down through the input gradients, then the weight gradient).
 *   - The check: every entry within 6 E of the fp32 value, E taken relative to the tensor's
 *     largest |value| (the entries near zero carry the same absolute error as the big ones).
 *     6 sigma over a few thousand entries leaves room for the tails of the sum, for
 *     tanh/GELU/softmax slopes above 1 and for the scale exceeding the rms; a bf16 path that
 *     rounded to fewer bits, skipped the fp32 sums, or mixed up an operand would not fit.
 * And the test makes sure bf16 ran at all: the log probabilities must differ from the fp32
 * golden's by more than the fp32 test's own tolerance somewhere. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/bert_classifier.h"
#include "est/precision.h"
#include "est/threads.h"
#include "est/variables.h"
#include "golden_util.h"
#include "nn/kernel_choice.h" /* est_kernel_amx */
#include "test_util.h"

static const double U_BF16 = 1.0 / 256; /* 2^-8 */

/* 6 sigma of the chained rounding error of `depth` bf16 matmuls, relative to the scale. */
static double bf16_tolerance(int depth) { return 6.0 * sqrt(2.0 / 3.0) * U_BF16 * sqrt((double)depth); }

/* Largest |a - b| / (rel * max|b|) over the tensor; <= 1 passes. */
static double scaled_error(const float *a, const float *b, size_t n, double rel) {
  double scale = 0, worst = 0;
  for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(b[i]));
  for (size_t i = 0; i < n; i++) {
    double r = fabs((double)a[i] - b[i]) / (rel * scale + 1e-30);
    if (!(r <= worst)) worst = isnan(r) ? INFINITY : r;
  }
  return worst;
}

static void check_config(const char *name) {
  golden g;
  bert_fn train, predict;
  golden_classifier_open(&g, name, EST_PRECISION_BF16, EST_MODE_TRAIN, &train);
  golden_free(&g);
  golden_classifier_open(&g, name, EST_PRECISION_BF16, EST_MODE_PREDICT, &predict);
  char key[400];
  const int B = g.batch, C = g.num_labels, L = train.params.bert_config.num_hidden_layers;
  int32_t *ids = golden_ints(&g, "input_ids"), *mask = golden_ints(&g, "input_mask");
  int32_t *segs = golden_ints(&g, "segment_ids"), *labels = golden_ints(&g, "label_ids");

  assert_int_equal(bert_fn_call(&predict, ids, mask, segs, NULL, B, 0), EST_OK);
  const float *probs = bert_fn_probabilities(&predict);
  const float *ref_logits = golden_get(&g, "logits", NULL);
  const int per_layer = est_kernel_amx() ? 6 : 4; /* the attention's products on tiles, or fp32 */
  const double tol_fwd = bf16_tolerance(per_layer * L + 2);
  /* the logits through the probabilities: log p against log_softmax of the golden's, at
   * twice the logits' tolerance (golden_logp_error) */
  double r_logits = golden_logp_error(probs, ref_logits, B, C, tol_fwd);
  /* the loss is -log softmax(logits)[label]: its slope in each logit is below 1 in size,
   * two logits move it, so it gets twice the logits' absolute tolerance */
  double logit_scale = 0;
  for (int i = 0; i < B * C; i++) logit_scale = fmax(logit_scale, fabs(ref_logits[i]));
  const float *ref_losses = golden_get(&g, "per_example_loss", NULL);
  double r_loss = 0;
  for (int b = 0; b < B; b++)
    r_loss = fmax(r_loss, fabs(-log((double)probs[(size_t)b * C + labels[b]]) - ref_losses[b]) /
                              (2 * tol_fwd * logit_scale));
  /* bf16 really ran: somewhere the probabilities are off by more than fp32 rounding */
  assert_true(golden_logp_error(probs, ref_logits, B, C, 1e-5) > 1.0);

  est_vars_zero_grads(train.vs);
  assert_int_equal(bert_fn_call(&train, ids, mask, segs, labels, B, 0), EST_OK);
  const double tol_bwd = bf16_tolerance(2 * (per_layer * L + 2) + 1);
  double r_grad = 0;
  const char *worst_name = "";
  for (size_t i = 0; i < est_vars_count(train.vs); i++) {
    const est_variable *v = est_vars_at(train.vs, i);
    snprintf(key, sizeof key, "grad:%s", v->name);
    const float *ref = golden_get(&g, key, NULL);
    /* The key bias's true gradient is zero (a constant added to a row of scores leaves its
     * softmax unchanged): both sides are rounding noise, bf16's far larger. No check. */
    if (strstr(v->name, "/key/bias")) continue;
    double r = scaled_error(est_vars_grad(train.vs, i), ref, v->count, tol_bwd);
    if (r > r_grad) r_grad = r, worst_name = v->name;
  }
  printf("%s: bf16 vs fp32 torch at %.3f (logits), %.3f (loss), %.3f (gradients, worst %s) of the tolerance "
         "(forward %.2f%%, backward %.2f%% of each tensor's scale)\n",
         name, r_logits, r_loss, r_grad, worst_name, 100 * tol_fwd, 100 * tol_bwd);
  if (r_logits > 1) fail_msg("%s: logits off by %.2fx the bf16 tolerance", name, r_logits);
  if (r_loss > 1) fail_msg("%s: per-example loss off by %.2fx the bf16 tolerance", name, r_loss);
  if (r_grad > 1) fail_msg("%s: gradient of %s off by %.2fx the bf16 tolerance", name, worst_name, r_grad);

  free(ids), free(mask), free(segs), free(labels);
  bert_fn_free(&train);
  bert_fn_free(&predict);
  golden_free(&g);
}

static int setup(void **state) {
  (void)state;
  if (est_precision_resolve(EST_PRECISION_BF16) != EST_PRECISION_BF16)
    printf("no AVX512-BF16 on this CPU: bf16 runs fp32 here, nothing to check\n");
  return 0;
}

static void test_bf16_golden_h64_l2_s16(void **state) {
  (void)state;
  if (est_precision_resolve(EST_PRECISION_BF16) != EST_PRECISION_BF16) skip();
  check_config("h64_l2_s16");
}

static void test_bf16_golden_h36_l2_s40_c3(void **state) {
  (void)state;
  if (est_precision_resolve(EST_PRECISION_BF16) != EST_PRECISION_BF16) skip();
  check_config("h36_l2_s40_c3");
}

int main(void) {
  (void)expect_close, (void)worst_ratio; /* golden_util.h's fp32 checks; this test has its own */
  test_forced_kernel_or_skip(); /* ctest runs it per bf16 kernel too (docs/testing.md §3) */
  est_set_num_threads(2);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bf16_golden_h64_l2_s16),
      cmocka_unit_test(test_bf16_golden_h36_l2_s40_c3),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
