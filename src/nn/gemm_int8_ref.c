/* The reference int8 GEMM (nn/gemm_kernels.h, the definition in nn/quant_int8.h): the definition, element by element, that the
 * VNNI and AMX kernels equal bit for bit. */
#include <math.h>
#include <stdlib.h>

#include "nn/gelu_avx512.h" /* est_gelu_row */
#include "nn/gemm_kernels.h"

void est_sgemm_int8_ref(CBLAS_TRANSPOSE tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                        float *C, int ldc, const est_gemm_epilogue *ep) {
  if (M <= 0 || N <= 0) return;
  size_t k1 = K > 0 ? (size_t)K : 1;
  int8_t *qa = malloc((size_t)M * k1), *qb = malloc((size_t)N * k1); /* qb: column n at qb + n K */
  float *sa = malloc((size_t)M * sizeof(float)), *sw = malloc((size_t)N * sizeof(float));
  if (!qa || !qb || !sa || !sw) abort(); /* a test's helper: small shapes only */
  for (int m = 0; m < M; m++) sa[m] = est_int8_quantize(A + (size_t)m * lda, 1, K, qa + (size_t)m * k1, 1);
  for (int n = 0; n < N; n++)
    sw[n] = tb == CblasNoTrans ? est_int8_quantize(B + n, ldb, K, qb + (size_t)n * k1, 1)
                               : est_int8_quantize(B + (size_t)n * ldb, 1, K, qb + (size_t)n * k1, 1);
  for (int m = 0; m < M; m++) {
    for (int n = 0; n < N; n++) {
      int32_t acc = 0; /* exact: |acc| <= K 127^2 */
      for (int k = 0; k < K; k++) acc += (int32_t)qa[(size_t)m * k1 + k] * qb[(size_t)n * k1 + k];
      float bias = ep && ep->bias ? ep->bias[n] : 0.0f;
      C[(size_t)m * ldc + n] = fmaf((float)acc, sa[m] * sw[n], bias);
    }
    if (ep && ep->gelu_out) est_gelu_row(ep->gelu_out + (size_t)m * ep->ld_gelu, C + (size_t)m * ldc, N);
  }
  free(qa), free(qb), free(sa), free(sw);
}
