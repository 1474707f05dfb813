/* The reference fp32 GEMM with epilogue (see gemm_kernels.h): the readable twin that est_sgemm_f32
 * (gemm_f32.c) is tested against. Sums in double, k ascending. */
#include "nn/fastmath.h"
#include "nn/gemm_kernels.h"

void est_sgemm_f32_ref(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha, const float *A,
                       int lda, const float *B, int ldb, float beta, float *C, int ldc, const est_gemm_epilogue *ep) {
  for (int m = 0; m < M; m++)
    for (int n = 0; n < N; n++) {
      double acc = 0.0;
      for (int k = 0; k < K; k++) {
        double a = ta == CblasNoTrans ? A[(size_t)m * lda + k] : A[(size_t)k * lda + m];
        double b = tb == CblasNoTrans ? B[(size_t)k * ldb + n] : B[(size_t)n * ldb + k];
        acc += a * b;
      }
      float *c = &C[(size_t)m * ldc + n];
      double v = alpha * acc + (beta == 0.0f ? 0.0 : (double)beta * *c);
      if (ep && ep->bias) v += ep->bias[n];
      *c = (float)v;
      if (ep && ep->gelu_out) ep->gelu_out[(size_t)m * ep->ld_gelu + n] = est_fast_gelu(*c);
      if (ep && ep->gelu_pre) { /* the backward through a GELU: d pre = d act * GELU'(pre) */
        float pre = ep->gelu_pre[(size_t)m * ep->ld_pre + n];
        *c *= est_fast_gelu_grad(pre);
        if (ep->gelu_act) ep->gelu_act[(size_t)m * ep->ld_pre + n] = est_fast_gelu(pre);
      }
    }
}
