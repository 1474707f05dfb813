/* The vectorised softmax cross-entropy for vocabulary-sized rows (src/nn/crossentropy.c)
 * against its libm reference, and its thread-count independence; the masked LM's fused
 * form (src/nn/vocab_xent.c) against its reference twin, the composition of
 * est_crossentropy_forward, a first-maximum argmax and est_crossentropy_backward. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "est/nn.h"
#include "est/rng.h"
#include "est/threads.h"
#include "test_util.h"

enum { V = 30522, ROWS = 6 };

static float *random_logits(size_t n, float scale, uint64_t seed) {
  est_rng r;
  est_rng_init(&r, seed);
  float *x = malloc(n * sizeof(float));
  for (size_t i = 0; i < n; i++) x[i] = scale * (2.0f * est_rng_uniform(&r) - 1.0f);
  return x;
}

/* est_fast_expf is within ~2 ulp of exp; 1/sum and the product add one rounding each: a few
 * float ulps (relative 1e-6 leaves 8x room). The fast kernel also forms d = x - max in float
 * (the reference in double), an absolute error up to |d| 2^-24 in exp's argument, i.e. a
 * relative one in the probability: the bound is 1e-6 + |d| 2^-23. The sums are in double in
 * both, so the log-normaliser differs only by the terms' ulps: 1e-6 relative to its size. */
static void check_rows(int C, float scale) {
  float *x = random_logits((size_t)C, scale, (uint64_t)C);
  float *p = malloc((size_t)C * sizeof(float)), *r = malloc((size_t)C * sizeof(float));
  float lse = est_crossentropy_row(p, x, C), lse_ref = est_crossentropy_row_ref(r, x, C);
  if (fabsf(lse - lse_ref) > 1e-6f * (1.0f + fabsf(lse_ref))) fail_msg("C=%d: lse %.9g vs %.9g", C, lse, lse_ref);
  float mx = -INFINITY;
  for (int c = 0; c < C; c++) mx = x[c] > mx ? x[c] : mx;
  double total = 0.0;
  for (int c = 0; c < C; c++) {
    double tol = (1e-6 + (double)(mx - x[c]) * 0x1p-23) * r[c] + 1e-37;
    if (fabs((double)p[c] - r[c]) > tol) fail_msg("C=%d class %d: %.9g vs %.9g", C, c, p[c], r[c]);
    total += p[c];
  }
  assert_true(fabs(total - 1.0) < 1e-5);
  free(x);
  free(p);
  free(r);
}

static void test_fast_rows_match_reference(void **state) {
  (void)state;
  check_rows(V, 8.0f);
  check_rows(V, 40.0f); /* most classes far below the max: exp underflows towards 0 */
  check_rows(256, 5.0f);
  check_rows(1000, 0.0f); /* all equal: uniform */
}

/* The forward's losses equal lse - x[label] from the row kernel, and a masked-LM-sized batch
 * gives bit-identical losses, probs and dlogits with 1 and 2 threads (rows are independent). */
static void run_batch(int threads, float *loss, float *probs, float *dlog, const float *x, const int32_t *labels) {
  est_set_num_threads(threads);
  assert_int_equal(est_crossentropy_forward(loss, probs, x, labels, ROWS, V), EST_OK);
  memset(dlog, 0, (size_t)ROWS * V * sizeof(float));
  est_crossentropy_backward(dlog, probs, labels, 0.125f, ROWS, V);
}

static void test_batch_thread_independent(void **state) {
  (void)state;
  const size_t n = (size_t)ROWS * V;
  float *x = random_logits(n, 6.0f, 7);
  int32_t labels[ROWS];
  for (int b = 0; b < ROWS; b++) labels[b] = b * 4999;
  float l1[ROWS], l2[ROWS];
  float *p1 = malloc(n * sizeof(float)), *p2 = malloc(n * sizeof(float));
  float *d1 = malloc(n * sizeof(float)), *d2 = malloc(n * sizeof(float));
  run_batch(1, l1, p1, d1, x, labels);
  run_batch(2, l2, p2, d2, x, labels);
  if (test_threads_that_ran() != 2) fail_msg("the second run did not get 2 OpenMP threads");
  assert_memory_equal(l1, l2, sizeof l1);
  assert_memory_equal(p1, p2, n * sizeof(float));
  assert_memory_equal(d1, d2, n * sizeof(float));
  float *row = malloc((size_t)V * sizeof(float));
  for (int b = 0; b < ROWS; b++) {
    float lse = est_crossentropy_row(row, x + (size_t)b * V, V);
    assert_float_equal(l1[b], lse - x[(size_t)b * V + labels[b]], 0.0f);
    assert_float_equal(d1[(size_t)b * V + labels[b]], 0.125f * (p1[(size_t)b * V + labels[b]] - 1.0f), 0.0f);
  }
  free(row);
  free(x);
  free(p1);
  free(p2);
  free(d1);
  free(d2);
}

/* The reference twin of est_vocab_xent_*: probs kept, argmax by the scalar scan, dlogits
 * zeroed then accumulated, rows of scale 0 left at zero (the pretraining heads' old path). */
static void xent_reference(float *loss, int32_t *preds, float *dlog, const float *x, const int32_t *labels,
                           const float *scale, int N) {
  float *probs = malloc((size_t)N * V * sizeof(float));
  assert_int_equal(est_crossentropy_forward(loss, probs, x, labels, N, V), EST_OK);
  memset(dlog, 0, (size_t)N * V * sizeof(float));
  for (int n = 0; n < N; n++) {
    const float *z = x + (size_t)n * V;
    int best = 0;
    for (int c = 1; c < V; c++)
      if (z[c] > z[best]) best = c;
    preds[n] = best;
    if (scale[n] != 0.0f)
      est_crossentropy_backward(dlog + (size_t)n * V, probs + (size_t)n * V, labels + n, scale[n], 1, V);
  }
  free(probs);
}

static void xent_fused(int threads, float *loss, int32_t *preds, float *x_to_d, const int32_t *labels,
                       const float *scale, int N) {
  est_set_num_threads(threads);
  float mx[ROWS], inv[ROWS];
  assert_int_equal(est_vocab_xent_forward(loss, preds, mx, inv, x_to_d, labels, N, V), EST_OK);
  est_vocab_xent_backward_inplace(x_to_d, mx, inv, labels, scale, N, V);
}

/* Both compute each value by the same operations; only the vectorised sums' order may
 * differ, by float ulps in 1/sum: relative 1e-6 on probabilities and dlogits, on the loss
 * (log-normaliser minus a logit, ~10) 1e-6 absolute. preds are equal exactly, including a
 * row whose maximum appears twice (the first index wins). Rows of scale 0 are zeros. */
static void test_fused_matches_reference(void **state) {
  (void)state;
  const size_t n = (size_t)ROWS * V;
  float *x = random_logits(n, 8.0f, 11);
  x[3 * (size_t)V + 20000] = x[3 * (size_t)V + 7] = 9.5f; /* row 3: a tied maximum */
  int32_t labels[ROWS] = {0, 30521, 4999, 7, 12345, 20000};
  const float scale[ROWS] = {0.05f, 0.05f, 0.0f, 0.05f, 1.0f / 3.0f, 0.025f};
  float lr[ROWS], l1[ROWS], l2[ROWS];
  int32_t pr[ROWS], p1[ROWS], p2[ROWS];
  float *dr = malloc(n * sizeof(float)), *d1 = malloc(n * sizeof(float)), *d2 = malloc(n * sizeof(float));
  xent_reference(lr, pr, dr, x, labels, scale, ROWS);
  memcpy(d1, x, n * sizeof(float));
  memcpy(d2, x, n * sizeof(float));
  xent_fused(1, l1, p1, d1, labels, scale, ROWS);
  xent_fused(2, l2, p2, d2, labels, scale, ROWS);
  if (test_threads_that_ran() != 2) fail_msg("the second run did not get 2 OpenMP threads");
  assert_memory_equal(l1, l2, sizeof l1);
  assert_memory_equal(p1, p2, sizeof p1);
  assert_memory_equal(d1, d2, n * sizeof(float));
  assert_int_equal(pr[3], 7);
  for (int b = 0; b < ROWS; b++) {
    assert_int_equal(p1[b], pr[b]);
    if (fabsf(l1[b] - lr[b]) > 1e-6f * (1.0f + fabsf(lr[b]))) fail_msg("row %d: loss %.9g vs %.9g", b, l1[b], lr[b]);
    for (int c = 0; c < V; c++) {
      const size_t i = (size_t)b * V + c;
      if (fabsf(d1[i] - dr[i]) > 1e-6f * fabsf(dr[i]) + 1e-30f)
        fail_msg("row %d class %d: dlogit %.9g vs %.9g", b, c, d1[i], dr[i]);
    }
  }
  for (int c = 0; c < V; c++) assert_true(d1[2 * (size_t)V + c] == 0.0f);
  /* a label outside the vocabulary is refused */
  float mx[ROWS], inv[ROWS];
  labels[1] = V;
  assert_int_equal(est_vocab_xent_forward(l1, p1, mx, inv, x, labels, ROWS, V), EST_ERR_INVALID_ARGUMENT);
  free(x);
  free(dr);
  free(d1);
  free(d2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fast_rows_match_reference),
      cmocka_unit_test(test_batch_thread_independent),
      cmocka_unit_test(test_fused_matches_reference),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
