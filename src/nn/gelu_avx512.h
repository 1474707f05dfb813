/* Internal: tanh-GELU and its derivative on 16 floats at once (AVX-512F), the one
 * vectorised form that every GELU of est runs where the CPU has AVX-512F: the GEMM
 * epilogues (gemm_f32.c, gemm_amx.c, gemm.c's pass) and est_activation_forward/backward.
 * One implementation for all of them means the forward's GELU (an epilogue) and the
 * backward's recomputation of it (a pass) give the same bits.
 *
 * The arithmetic is fastmath.h's scalar est_fast_gelu / est_fast_gelu_grad (the readable
 * twins these are tested against, tests/test_nn_gradcheck.c), step for step, with the
 * multiply-adds fused where written below. Why not leave the scalar code to the vectoriser,
 * as before: GCC threads est_fast_expf's two clamps into three copies of the rest, each
 * with its own masked division, so a vector of GELU cost three vdivps (the slowest AVX-512
 * instruction here). That made the fused GELU epilogue of the FFN's GEMM slower than a
 * separate pass (bench/README.md, "One vectorised GELU"). Here the clamps are two blends
 * and there is one division per vector. */
#ifndef EST_NN_GELU_AVX512_H
#define EST_NN_GELU_AVX512_H

#include <immintrin.h>

#include "nn/fastmath.h"

#define GELU_AVX512_TARGET __attribute__((target("avx512f")))
#define GELU_AVX512_INLINE static inline GELU_AVX512_TARGET __attribute__((always_inline))

/* est_fast_expf on 16 lanes: clamp to [-87, 88] (a NaN stays NaN), 2^n r-polynomial, and 0
 * where x < -87. */
GELU_AVX512_INLINE __m512 est_expf16(__m512 x) {
  const __mmask16 under = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_LT_OQ);
  x = _mm512_mask_blend_ps(under, x, _mm512_set1_ps(-87.0f));
  x = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(88.0f), _CMP_GT_OQ), x, _mm512_set1_ps(88.0f));
  const __m512 shifter = _mm512_set1_ps(12582912.0f); /* 1.5 * 2^23: rounds to an integer */
  __m512 n = _mm512_sub_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), shifter), shifter);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r), _mm512_set1_ps(1.0f));
  /* 2^n into the exponent bits (n in [-126, 127] after the clamp) */
  __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvttps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_maskz_mov_ps((__mmask16)~under, _mm512_mul_ps(p, _mm512_castsi512_ps(bits)));
}

/* e = exp(-2u), u = k (x + a x^3): the part the GELU and its derivative share. */
GELU_AVX512_INLINE __m512 est_gelu_exp16(__m512 x) {
  __m512 ax2 = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(EST_GELU_A), x), x);
  __m512 u = _mm512_mul_ps(_mm512_set1_ps(EST_GELU_K), _mm512_fmadd_ps(ax2, x, x));
  return est_expf16(_mm512_mul_ps(_mm512_set1_ps(-2.0f), u));
}

/* est_fast_gelu from e: x / (1 + e) */
GELU_AVX512_INLINE __m512 est_gelu_from_exp16(__m512 x, __m512 e) {
  return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

/* est_fast_gelu_grad from e: s + x s (e s) 2 u',  s = 1 / (1 + e), u' = k (1 + 3 a x^2) */
GELU_AVX512_INLINE __m512 est_gelu_grad_from_exp16(__m512 x, __m512 e) {
  __m512 s = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_add_ps(_mm512_set1_ps(1.0f), e));
  __m512 a3x = _mm512_mul_ps(_mm512_set1_ps(3.0f * EST_GELU_A), x);
  __m512 du = _mm512_mul_ps(_mm512_set1_ps(EST_GELU_K), _mm512_fmadd_ps(a3x, x, _mm512_set1_ps(1.0f)));
  __m512 t = _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(x, s), _mm512_mul_ps(e, s)), _mm512_set1_ps(2.0f));
  return _mm512_fmadd_ps(t, du, s);
}

GELU_AVX512_INLINE __m512 est_gelu16(__m512 x) { return est_gelu_from_exp16(x, est_gelu_exp16(x)); }
GELU_AVX512_INLINE __m512 est_gelu_grad16(__m512 x) { return est_gelu_grad_from_exp16(x, est_gelu_exp16(x)); }

/* The backward through a GELU on 16 lanes, one exp for both: *d = d act * GELU'(pre) and
 * *act = GELU(pre), the recomputed forward (est_matmul_backward_gelu's epilogue). */
GELU_AVX512_INLINE void est_gelu_backward16(__m512 dact, __m512 pre, __m512 *d, __m512 *act) {
  __m512 e = est_gelu_exp16(pre);
  *d = _mm512_mul_ps(dact, est_gelu_grad_from_exp16(pre, e));
  *act = est_gelu_from_exp16(pre, e);
}

/* Whole arrays, one thread (callers split the work): out[i] = gelu(in[i]), and
 * d[i] = dout[i] * gelu'(in[i]) written or added (add = 1). The tails are masked. */
GELU_AVX512_INLINE void est_gelu_rows16(float *out, const float *in, long n) {
  for (long i = 0; i < n; i += 16) {
    __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1u);
    _mm512_mask_storeu_ps(out + i, m, est_gelu16(_mm512_maskz_loadu_ps(m, in + i)));
  }
}
GELU_AVX512_INLINE void est_gelu_grad_rows16(float *d, const float *dout, const float *in, long n, int add) {
  for (long i = 0; i < n; i += 16) {
    __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1u);
    __m512 dy = _mm512_maskz_loadu_ps(m, dout + i), g = est_gelu_grad16(_mm512_maskz_loadu_ps(m, in + i));
    /* d + dy g with one rounding, so that adding into zeros gives the written dy g */
    _mm512_mask_storeu_ps(d + i, m, add ? _mm512_fmadd_ps(dy, g, _mm512_maskz_loadu_ps(m, d + i)) : _mm512_mul_ps(dy, g));
  }
}

/* d[i] = d[i] * GELU'(pre[i]) in place and act[i] = GELU(pre[i]) (act may be NULL). */
GELU_AVX512_INLINE void est_gelu_backward_rows16(float *d, float *act, const float *pre, long n) {
  for (long i = 0; i < n; i += 16) {
    __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1u);
    __m512 dv, av;
    est_gelu_backward16(_mm512_maskz_loadu_ps(m, d + i), _mm512_maskz_loadu_ps(m, pre + i), &dv, &av);
    _mm512_mask_storeu_ps(d + i, m, dv);
    if (act) _mm512_mask_storeu_ps(act + i, m, av);
  }
}

/* The same over one row of n, on the calling thread, with the scalar fastmath.h functions
 * (the same values) on a CPU without AVX-512F (activation.c): for the passes that split
 * their rows over the threads themselves. */
void est_gelu_row(float *out, const float *in, long n);
void est_gelu_grad_row(float *d, const float *dout, const float *in, long n, int add);
void est_gelu_backward_row(float *d, float *act, const float *pre, long n);

#endif
