/* The vectorised softmax cross-entropy for vocabulary-sized rows (src/nn/crossentropy.c)
 * against its libm reference, and its thread-count independence. */
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fast_rows_match_reference),
      cmocka_unit_test(test_batch_thread_independent),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
