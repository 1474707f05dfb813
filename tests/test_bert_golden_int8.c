/* int8 golden: est's BERT classifier (the BERT model_fn with the classifier head, PREDICT)
 * with --precision=int8 (the dense layers' GEMMs on int8 codes with int32 sums,
 * nn/quant_int8.h) against the fp32 PyTorch tensors of tests/data/golden/
 * (tests/reference/bert_golden.py), the logits through the probabilities (log p against
 * the golden's log_softmax, at twice the logits' tolerance), and against the same model run
 * with the int8 reference twin (EST_KERNEL=int8ref): equal bit for bit. Skipped where int8
 * runs fp32 (no VNNI, or EST_KERNEL=noavx512 on a CPU without AVX-VNNI).
 *
 * Tolerance. One int8 matmul y = sum_k a_k b_k quantizes a to steps of sa = max|a| / 127 and
 * b to steps of sw = max|b| / 127; the rounding errors are uniform within half a step,
 * independent and zero-mean, so rms(dy) = sqrt(sum_k (a_k^2 sw^2 + b_k^2 sa^2) / 12) (the
 * product of the two errors is 127 times smaller). With c = max / rms of a vector (its crest
 * factor), that is rms(y) sqrt((c_a^2 + c_b^2) / 12) / 127 where rms(y) ~ sqrt(K) rms(a) rms(b)
 * for mixed signs: a relative error E1 = sqrt((c_a^2 + c_b^2) / 12) / 127 whatever K. The
 * golden's weights are normal (c ~ 3.5-4 at these sizes) and its LayerNorm'd activations too,
 * GELU's outputs a little heavier: c <= 5 gives E1 = sqrt(50 / 12) / 127 = 1.6%. A logit is
 * D = 4L + 1 int8 matmuls deep (per layer Q/K/V, attention output, FFN in, FFN out; then the
 * pooler; the classifier output stays fp32, and the attention's per-head products run bf16
 * where the CPU has AVX512-BF16, fp32 elsewhere: bf16's rounding, at most 2^-9 relative per
 * operand, is ~1/10 of E1 and adds to it in quadrature, so it is not counted); LayerNorm
 * keeps each layer's scale, so the errors add in quadrature: E = E1 sqrt(D), checked at 6 E
 * relative to the logits' largest |value|, as test_bert_golden_bf16 does for bf16. A wrong
 * scale, a lost compensation term or a transposed operand is off by O(1), far outside. */
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
#include "nn/kernel_choice.h"
#include "test_util.h"

static double int8_tolerance(int depth) { return 6.0 * sqrt(50.0 / 12.0) / 127.0 * sqrt((double)depth); }

static void check_config(const char *name) {
  golden g;
  bert_fn m;
  golden_classifier_open(&g, name, EST_PRECISION_INT8, EST_MODE_PREDICT, &m);
  est_vars_set_read_only(m.vs, 1); /* as inference runs it: the weights packed once */
  const int B = g.batch, C = g.num_labels, L = m.params.bert_config.num_hidden_layers;
  int32_t *ids = golden_ints(&g, "input_ids"), *mask = golden_ints(&g, "input_mask");
  int32_t *segs = golden_ints(&g, "segment_ids");
  float *probs = malloc((size_t)B * C * sizeof(float));
  assert_int_equal(bert_fn_call(&m, ids, mask, segs, NULL, B, 0), EST_OK);
  memcpy(probs, bert_fn_probabilities(&m), (size_t)B * C * sizeof(float));
  const float *ref_logits = golden_get(&g, "logits", NULL);
  const double tol = int8_tolerance(4 * L + 1);
  /* the logits through the probabilities: log p against log_softmax of the golden's, at
   * twice the logits' tolerance (golden_logp_error) */
  double r = golden_logp_error(probs, ref_logits, B, C, tol);
  printf("%s: int8 vs fp32 torch logits at %.3f of the tolerance (%.2f%% of their scale)\n", name, r, 100 * tol);
  if (r > 1) fail_msg("%s: logits off by %.2fx the int8 tolerance", name, r);
  /* int8 really ran: somewhere the probabilities are off by more than fp32 rounding */
  assert_true(golden_logp_error(probs, ref_logits, B, C, 1e-5) > 1.0);

  /* the same model through the reference twin: the same bits. Not under noavx512: there
   * the fp32 ops around the products (GELU, LayerNorm, softmax) run their AVX2 paths, which
   * int8ref, leaving AVX-512 on, does not; that kernel's products (AVX-VNNI where the CPU
   * has it) are held to the twin's bits product by product in test_gemm_int8@noavx512. */
  est_kernel was = est_kernel_get();
  if (was == EST_KERNEL_NOAVX512) goto done;
  assert_int_equal(est_kernel_set(EST_KERNEL_INT8REF), EST_OK);
  assert_int_equal(bert_fn_call(&m, ids, mask, segs, NULL, B, 0), EST_OK);
  assert_int_equal(est_kernel_set(was), EST_OK);
  assert_memory_equal(probs, bert_fn_probabilities(&m), (size_t)B * C * sizeof(float));

done:
  free(probs), free(ids), free(mask), free(segs);
  bert_fn_free(&m);
  golden_free(&g);
}

/* both golden configurations (the second: odd hidden size 36, 3 labels, 40 tokens) */
static void test_int8_golden(void **state) {
  (void)state;
  if (est_precision_resolve(EST_PRECISION_INT8) != EST_PRECISION_INT8) skip(); /* fp32 here: nothing to check */
  static const char *const configs[] = {"h64_l2_s16", "h36_l2_s40_c3"};
  for (size_t i = 0; i < sizeof configs / sizeof *configs; i++) check_config(configs[i]);
}

int main(void) {
  (void)expect_close, (void)worst_ratio; /* golden_util.h's fp32 checks; this test has its own */
  test_forced_kernel_or_skip(); /* ctest runs it per int8 kernel too (docs/testing.md §3) */
  est_set_num_threads(2);
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_int8_golden)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
