/* est_layernorm_forward_residual (src/nn/layernorm.c) against its unfused twin: x += residual,
 * then est_layernorm_forward. Both do the same float operations per element and per row, so
 * the results must be the same bits (x, out, mean, rstd), for 1 and 2 threads; and the
 * output within fp32 rounding of a double-precision LayerNorm: C-term sums and the rstd give
 * a relative error of a few C * 2^-24 on xhat, times |gamma|, plus |beta|'s rounding. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "est/est.h"
#include "test_util.h"

static uint64_t rng_state = 0x853C49E6748FEA9Bull;
static float uniform(void) { /* in [-1, 1) */
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((rng_state >> 40) * (1.0 / (1 << 23)) - 1.0);
}

static void test_fused_equals_add_then_norm(void **state) {
  (void)state;
  const int N = 67, C = 200;
  size_t n = (size_t)N * C;
  float *x0 = malloc(n * sizeof(float)), *res = malloc(n * sizeof(float)), *g = malloc(C * sizeof(float));
  float *b = malloc(C * sizeof(float)), *xu = malloc(n * sizeof(float)), *xf = malloc(n * sizeof(float));
  float *ou = malloc(n * sizeof(float)), *of = malloc(n * sizeof(float));
  float mu[67], ru[67], mf[67], rf[67];
  for (size_t i = 0; i < n; i++) x0[i] = 3.0f * uniform() + 1.0f, res[i] = uniform();
  for (int c = 0; c < C; c++) g[c] = 1.0f + 0.5f * uniform(), b[c] = 0.1f * uniform();
  memcpy(xu, x0, n * sizeof(float));
  for (size_t i = 0; i < n; i++) xu[i] += res[i];
  est_layernorm_forward(ou, mu, ru, xu, g, b, N, C);
  for (int threads = 1; threads <= 2; threads++) {
    est_set_num_threads(threads);
    memcpy(xf, x0, n * sizeof(float));
    est_layernorm_forward_residual(of, mf, rf, xf, res, g, b, N, C);
    assert_memory_equal(xf, xu, n * sizeof(float));
    assert_memory_equal(of, ou, n * sizeof(float));
    assert_memory_equal(mf, mu, sizeof mu);
    assert_memory_equal(rf, ru, sizeof ru);
  }
  est_set_num_threads(1);
  for (int r = 0; r < N; r++) { /* against LayerNorm in double */
    double m = 0, v = 0;
    for (int c = 0; c < C; c++) m += (double)x0[(size_t)r * C + c] + res[(size_t)r * C + c];
    m /= C;
    for (int c = 0; c < C; c++) {
      double d = (double)x0[(size_t)r * C + c] + res[(size_t)r * C + c] - m;
      v += d * d;
    }
    double s = 1.0 / sqrt(v / C + 1e-12);
    for (int c = 0; c < C; c++) {
      double xhat = ((double)x0[(size_t)r * C + c] + res[(size_t)r * C + c] - m) * s;
      double want = xhat * g[c] + b[c];
      assert_true(fabs(of[(size_t)r * C + c] - want) <= 4.0 * C * 0x1p-24 * (fabs(xhat) + 1.0) * fabs(g[c]) + 0x1p-23 * fabs(b[c]));
    }
  }
  free(x0), free(res), free(g), free(b), free(xu), free(xf), free(ou), free(of);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_fused_equals_add_then_norm)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
