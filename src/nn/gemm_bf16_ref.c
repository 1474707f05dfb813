/* bf16 conversions and the reference bf16 GEMM (see gemm_kernels.h): the readable twin that the
 * AVX512-BF16 kernel in gemm_bf16.c is tested against. */
#include <math.h>
#include <string.h>

#include "nn/gemm_kernels.h"

/* bfloat16 is the top half of a float32: sign, 8 exponent bits, 7 mantissa bits (8 bits of
 * precision with the implicit one, so round-to-nearest has a relative error of at most
 * 2^-8). Rounding to nearest even on the dropped 16 bits, as VCVTNEPS2BF16 does. */
uint16_t est_bf16_from_float(float x) {
  uint32_t bits;
  memcpy(&bits, &x, sizeof bits);
  if (isnan(x)) return (uint16_t)((bits >> 16) | 0x0040); /* stays a (quiet) NaN */
  uint32_t rounding = 0x7FFF + ((bits >> 16) & 1);
  return (uint16_t)((bits + rounding) >> 16);
}

float est_bf16_to_float(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float x;
  memcpy(&x, &bits, sizeof x);
  return x;
}

float est_bf16_round(float x) { return est_bf16_to_float(est_bf16_from_float(x)); }

/* op(A)[m][k] and op(B)[k][n] of row-major operands. */
static inline float at_a(const float *A, int lda, CBLAS_TRANSPOSE ta, int m, int k) {
  return ta == CblasNoTrans ? A[(size_t)m * lda + k] : A[(size_t)k * lda + m];
}
static inline float at_b(const float *B, int ldb, CBLAS_TRANSPOSE tb, int k, int n) {
  return tb == CblasNoTrans ? B[(size_t)k * ldb + n] : B[(size_t)n * ldb + k];
}

void est_sgemm_bf16_ref(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha, const float *A,
                        int lda, const float *B, int ldb, float beta, float *C, int ldc) {
  for (int m = 0; m < M; m++)
    for (int n = 0; n < N; n++) {
      /* The product of two bf16 values is exact in float (8 + 8 bits <= 24), so summing in
       * double leaves the inputs' rounding as the only error: what bf16 costs. */
      double acc = 0.0;
      for (int k = 0; k < K; k++)
        acc += (double)est_bf16_round(at_a(A, lda, ta, m, k)) * est_bf16_round(at_b(B, ldb, tb, k, n));
      float *c = &C[(size_t)m * ldc + n];
      *c = (float)(alpha * acc + (beta == 0.0f ? 0.0 : (double)beta * *c));
    }
}
