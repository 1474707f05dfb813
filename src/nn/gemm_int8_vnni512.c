/* The AVX512-VNNI int8 kernel (nn/gemm_kernels.h): VPDPBUSD multiplies 64 u8 activations by
 * 64 s8 weights and adds each group of four products into one of 16 int32 lanes: 128
 * integer ops per instruction, four times an fp32 FMA's 32 FLOP.
 *
 * A 12x32 tile of C lives in 24 zmm int32 accumulators while the kernel runs over all of K
 * (no k blocking: the sums must stay integers until the end); each step loads two zmm of
 * packed weights (32 columns, 4 k each) and broadcasts one word (4 k) of each row's u8
 * activations. The end of a tile subtracts 128 colsum, converts, and dequantizes with one
 * FMA per lane: fmaf(acc, sa sw, bias), the reference's arithmetic. The rows it reads are
 * quantized by quant_int8.c. */
#include <immintrin.h>

#include "nn/gemm_kernels.h"
#include "nn/gemm_util.h"

#define VNNI512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

enum { MR = EST_INT8_MR, NR = EST_INT8_NR };

/* acc + the products of a's u8 and b's s8 bytes, four to a lane: _mm512_dpbusd_epi32, as one
 * instruction that updates acc's register in place. With the intrinsic, GCC 12 kept the
 * accumulators of 9, 10 and 11-row tiles in registers only in part: it copied each through
 * the stack or another register every step (`gcc -S`), and those tiles ran at 260-308 G
 * ops/s on one Zen 4 core where 8 and 12 rows ran at 390-416 (`build/bench_gemm 1 M 768 768`). */
VNNI512_TARGET static inline __attribute__((always_inline)) __m512i dpbusd_in_place(__m512i acc, __m512i a, __m512i b) {
  __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
  return acc;
}

/* The tile at C (rows <= MR, cols <= NR): a = the tile's u8 words, row i's of group g at
 * a[g a_g + i] (est_int8_a_word; a_g the layout's tile rows); b = the packed words of the
 * tile's first column. R rows computed (a constant where inlined, tile below). */
VNNI512_TARGET static inline __attribute__((always_inline)) void tile_body(
    const int32_t *a, int a_g, int groups, const int32_t *b, int b_g, const int32_t *colsum, const float *sw,
    const float *sa, const float *bias, float *c, int ldc, int R, int rows, int cols) {
  /* C's tile is written only after the k loop: its lines asked for now (Base's 3072-wide
   * FFN product 6-8% faster, bench/README.md, "A's rows on distinct cache sets") */
  est_prefetch_tile_rows(c, ldc, rows);
  __m512i acc[MR][2];
#pragma GCC unroll 12
  for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm512_setzero_si512();
  for (int g = 0; g < groups; g++) {
    __m512i b0 = _mm512_loadu_si512(b + (size_t)g * b_g), b1 = _mm512_loadu_si512(b + (size_t)g * b_g + 16);
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++)
      if (i < R) {
        __m512i ai = _mm512_set1_epi32(a[(size_t)g * a_g + i]);
        acc[i][0] = dpbusd_in_place(acc[i][0], ai, b0);
        acc[i][1] = dpbusd_in_place(acc[i][1], ai, b1);
      }
  }
  /* the accumulators stay in registers only if every index is a constant: both halves
   * written out, the row loop unrolled (a loop over the halves made GCC keep acc on the stack) */
  const __mmask16 m0 = est_lanes16(cols), m1 = est_lanes16(cols - 16);
  const __m512i comp0 = _mm512_slli_epi32(_mm512_loadu_si512(colsum), 7); /* 128 colsum */
  const __m512i comp1 = _mm512_slli_epi32(_mm512_loadu_si512(colsum + 16), 7);
  const __m512 s0 = _mm512_loadu_ps(sw), s1 = _mm512_loadu_ps(sw + 16);
  const __m512 bias0 = bias ? _mm512_maskz_loadu_ps(m0, bias) : _mm512_setzero_ps();
  const __m512 bias1 = bias ? _mm512_maskz_loadu_ps(m1, bias + 16) : _mm512_setzero_ps();
#pragma GCC unroll 12
  for (int i = 0; i < MR; i++)
    if (i < rows) {
      __m512 si = _mm512_set1_ps(sa[i]);
      float *ci = c + (size_t)i * ldc;
      __m512 v0 = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc[i][0], comp0));
      __m512 v1 = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc[i][1], comp1));
      _mm512_mask_storeu_ps(ci, m0, _mm512_fmadd_ps(v0, _mm512_mul_ps(si, s0), bias0));
      _mm512_mask_storeu_ps(ci + 16, m1, _mm512_fmadd_ps(v1, _mm512_mul_ps(si, s1), bias1));
    }
}

/* The tile specialized for each row count: a tile of fewer than 12 rows (a 16-token
 * request's 8, est_int8_rows_layout) computes its rows only, where the 12-row body had spent
 * as long on a 4-row tile as on a full one. */
VNNI512_TARGET static void tile(const int32_t *a, int a_g, int groups, const int32_t *b, int b_g,
                                const int32_t *colsum, const float *sw, const float *sa, const float *bias, float *c,
                                int ldc, int rows, int cols) {
#define ROWS(r) tile_body(a, a_g, groups, b, b_g, colsum, sw, sa, bias, c, ldc, r, rows, cols)
  EST_SWITCH_ROWS_12(rows, ROWS)
#undef ROWS
}

VNNI512_TARGET void est_int8_block_vnni512(est_int8_a_layout layout, const est_int8_weights *w, const uint8_t *qa,
                                           const float *sa, const float *bias, float *C, int ldc, int m0, int m1,
                                           int n0, int n1) {
  est_int8_tiles(tile, MR, NR, layout, w, qa, sa, bias, C, ldc, m0, m1, n0, n1);
}
