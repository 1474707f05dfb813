/* Internal: the 8-lane (ymm) int8 kernel's body (nn/gemm_kernels.h), included by the files that
 * give it an instruction encoding:
 *   gemm_int8_avxvnni.c       VEX VPDPBUSD (AVX-VNNI: CPUs without AVX-512), the kernel est runs
 *   gemm_int8_ymm_evex.c      EVEX VPDPBUSD ymm (AVX512-VNNI + VL): the same arithmetic, so that
 *                             a CPU with AVX-512 but no AVX-VNNI (Zen 4, Ice Lake) tests it
 * Each defines YMM_TARGET (its target attribute), YMM_DPBUSD (the intrinsic) and YMM_BLOCK (the
 * block function's name) first. 16 ymm registers, so a tile is 4 rows x 16 columns (8
 * accumulators, 2 weight loads, one broadcast); the activations come quantized by the scalar
 * est_int8_quantize_rows. The same integer sums and dequantizing FMA as the AVX-512 kernel. */
#include <immintrin.h>

#include "nn/gemm_kernels.h"

enum { MR = 4, NR = 16 };

/* Lanes [0, n) of 8 as a mask for maskload/maskstore. */
YMM_TARGET static __m256i lanes8(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

YMM_TARGET static void tile(const int32_t *a, int a_g, int groups, const int32_t *b, int b_g, const int32_t *colsum,
                            const float *sw, const float *sa, const float *bias, float *c, int ldc, int rows, int cols) {
  __m256i acc[MR][2];
#pragma GCC unroll 4
  for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm256_setzero_si256();
  for (int g = 0; g < groups; g++) {
    __m256i b0 = _mm256_loadu_si256((const __m256i *)(b + (size_t)g * b_g));
    __m256i b1 = _mm256_loadu_si256((const __m256i *)(b + (size_t)g * b_g + 8));
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++) {
      __m256i ai = _mm256_set1_epi32(a[(size_t)g * a_g + i]);
      acc[i][0] = YMM_DPBUSD(acc[i][0], ai, b0);
      acc[i][1] = YMM_DPBUSD(acc[i][1], ai, b1);
    }
  }
  /* constant indices only, so the accumulators stay in registers (see gemm_int8_vnni512.c) */
  const __m256i in0 = lanes8(cols), in1 = lanes8(cols - 8);
  const __m256i comp0 = _mm256_slli_epi32(_mm256_loadu_si256((const __m256i *)colsum), 7); /* 128 colsum */
  const __m256i comp1 = _mm256_slli_epi32(_mm256_loadu_si256((const __m256i *)(colsum + 8)), 7);
  const __m256 s0 = _mm256_loadu_ps(sw), s1 = _mm256_loadu_ps(sw + 8);
  const __m256 bias0 = bias ? _mm256_maskload_ps(bias, in0) : _mm256_setzero_ps();
  const __m256 bias1 = bias ? _mm256_maskload_ps(bias + 8, in1) : _mm256_setzero_ps();
#pragma GCC unroll 4
  for (int i = 0; i < MR; i++)
    if (i < rows) {
      __m256 si = _mm256_set1_ps(sa[i]);
      float *ci = c + (size_t)i * ldc;
      __m256 v0 = _mm256_cvtepi32_ps(_mm256_sub_epi32(acc[i][0], comp0));
      __m256 v1 = _mm256_cvtepi32_ps(_mm256_sub_epi32(acc[i][1], comp1));
      _mm256_maskstore_ps(ci, in0, _mm256_fmadd_ps(v0, _mm256_mul_ps(si, s0), bias0));
      _mm256_maskstore_ps(ci + 8, in1, _mm256_fmadd_ps(v1, _mm256_mul_ps(si, s1), bias1));
    }
}

YMM_TARGET void YMM_BLOCK(est_int8_a_layout layout, const est_int8_weights *w, const uint8_t *qa, const float *sa,
                          const float *bias, float *C, int ldc, int m0, int m1, int n0, int n1) {
  est_int8_tiles(tile, MR, NR, layout, w, qa, sa, bias, C, ldc, m0, m1, n0, n1);
}
