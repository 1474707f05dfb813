/* The AVX-VNNI int8 kernel (nn/gemm_int8.h), for CPUs with VPDPBUSD in its VEX (AVX2-width)
 * form but no AVX-512 (Alder Lake and later cores, Zen 5 client parts): 8 int32 lanes per ymm, 16
 * ymm registers, so a tile is 4 rows x 16 columns (8 accumulators, 2 weight loads, one
 * broadcast). The activations come quantized by the scalar est_int8_quantize_rows. The same
 * integer sums and the same dequantizing FMA as the AVX-512 kernel and the reference. */
#include <immintrin.h>

#include "nn/gemm_int8.h"

#define AVXVNNI_TARGET __attribute__((target("avx2,fma,avxvnni")))

enum { MR = 4, NR = 16 };

int est_cpu_has_avx_vnni(void) {
  static int cached = -1; /* a benign race: every thread computes the same value */
  if (cached < 0) {
    __builtin_cpu_init();
    cached = __builtin_cpu_supports("avxvnni") != 0;
  }
  return cached;
}

/* Lanes [0, n) of 8 as a mask for maskload/maskstore. */
AVXVNNI_TARGET static __m256i lanes8(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

AVXVNNI_TARGET static void tile(const int32_t *a, int groups, const int32_t *b, int Np, const int32_t *colsum,
                                const float *sw, const float *sa, const float *bias, float *c, int ldc, int rows,
                                int cols) {
  __m256i acc[MR][2];
  for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm256_setzero_si256();
  for (int g = 0; g < groups; g++) {
    __m256i b0 = _mm256_loadu_si256((const __m256i *)(b + (size_t)g * Np));
    __m256i b1 = _mm256_loadu_si256((const __m256i *)(b + (size_t)g * Np + 8));
#pragma GCC unroll 4
    for (int i = 0; i < MR; i++) {
      __m256i ai = _mm256_set1_epi32(a[(size_t)i * groups + g]);
      acc[i][0] = _mm256_dpbusd_avx_epi32(acc[i][0], ai, b0);
      acc[i][1] = _mm256_dpbusd_avx_epi32(acc[i][1], ai, b1);
    }
  }
  for (int j = 0; j < 2; j++) {
    __m256i in = lanes8(cols - 8 * j);
    __m256i comp = _mm256_slli_epi32(_mm256_loadu_si256((const __m256i *)(colsum + 8 * j)), 7); /* 128 colsum */
    __m256 s = _mm256_loadu_ps(sw + 8 * j);
    __m256 bv = bias ? _mm256_maskload_ps(bias + 8 * j, in) : _mm256_setzero_ps();
    for (int i = 0; i < rows; i++) {
      __m256 v = _mm256_cvtepi32_ps(_mm256_sub_epi32(acc[i][j], comp));
      _mm256_maskstore_ps(c + (size_t)i * ldc + 8 * j, in, _mm256_fmadd_ps(v, _mm256_mul_ps(_mm256_set1_ps(sa[i]), s), bv));
    }
  }
}

AVXVNNI_TARGET void est_int8_block_avxvnni(const est_int8_weights *w, const uint8_t *qa, const float *sa,
                                           const float *bias, float *C, int ldc, int m0, int m1, int n0, int n1) {
  est_int8_tiles(tile, MR, NR, w, qa, sa, bias, C, ldc, m0, m1, n0, n1);
}
