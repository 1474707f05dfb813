/* Inverted dropout with a counter-based mask.
 *
 * Element e of tensor `tensor_id` at `step` is kept when the top 24 bits of word e%4 of
 * Philox4x32-10(key = seed, counter = {e/4, tensor_id, step lo, step hi}) are >= prob * 2^24.
 * That is TF's rule (keep when uniform >= 1 - keep_prob) on a 24-bit uniform. The mask is
 * a pure function of its coordinates, so any thread may compute any slice of it. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "est/nn.h"
#include "est/rng.h"

/* Philox4x32-10 again (est/rng.h has the reference), inlined so the per-block loop has
 * no call in it; a test checks both agree. */
static inline void philox_block(uint32_t k0, uint32_t k1, uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                                uint32_t out[4]) {
  for (int round = 0; round < 10; round++) {
    uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n1 = (uint32_t)p1;
    uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1, n3 = (uint32_t)p0;
    c0 = n0; c1 = n1; c2 = n2; c3 = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

static uint32_t keep_threshold(float prob) {
  double t = ceil((double)prob * 16777216.0);
  return t > 16777216.0 ? 16777216u : (uint32_t)t;
}

/* Philox over LANES = 16 consecutive blocks at once: one zmm register per counter word
 * with AVX-512, plain loops otherwise. Same numbers either way (a test checks them
 * against est_philox4x32). */
enum { LANES = 16 };

#if defined(__AVX512F__)
#include <immintrin.h>

/* (hi, lo) 32-bit halves of the 16 products x[j] * m. */
static inline void mul_hilo(__m512i x, __m512i m, __m512i *hi, __m512i *lo) {
  *lo = _mm512_mullo_epi32(x, m);
  __m512i even = _mm512_srli_epi64(_mm512_mul_epu32(x, m), 32);            /* hi of lanes 0,2,.. */
  __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(x, 32), m);             /* hi of lanes 1,3,.. in the top */
  *hi = _mm512_or_si512(even, _mm512_and_si512(odd, _mm512_set1_epi64((long long)0xFFFFFFFF00000000ull)));
}

static void philox_lanes(uint32_t k0, uint32_t k1, uint32_t first_block, uint32_t c1, uint32_t c2, uint32_t c3,
                         uint32_t out[4][LANES]) {
  __m512i x0 = _mm512_add_epi32(_mm512_set1_epi32((int)first_block),
                                _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
  __m512i x1 = _mm512_set1_epi32((int)c1), x2 = _mm512_set1_epi32((int)c2), x3 = _mm512_set1_epi32((int)c3);
  const __m512i m0 = _mm512_set1_epi32((int)0xD2511F53u), m1 = _mm512_set1_epi32((int)0xCD9E8D57u);
  for (int round = 0; round < 10; round++) {
    __m512i hi0, lo0, hi1, lo1;
    mul_hilo(x0, m0, &hi0, &lo0);
    mul_hilo(x2, m1, &hi1, &lo1);
    __m512i n0 = _mm512_xor_si512(_mm512_xor_si512(hi1, x1), _mm512_set1_epi32((int)k0));
    __m512i n2 = _mm512_xor_si512(_mm512_xor_si512(hi0, x3), _mm512_set1_epi32((int)k1));
    x0 = n0; x1 = lo1; x2 = n2; x3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  _mm512_storeu_si512(out[0], x0);
  _mm512_storeu_si512(out[1], x1);
  _mm512_storeu_si512(out[2], x2);
  _mm512_storeu_si512(out[3], x3);
}
#else
static void philox_lanes(uint32_t k0, uint32_t k1, uint32_t first_block, uint32_t c1, uint32_t c2, uint32_t c3,
                         uint32_t out[4][LANES]) {
  for (int j = 0; j < LANES; j++) {
    uint32_t w[4];
    philox_block(k0, k1, first_block + (uint32_t)j, c1, c2, c3, w);
    for (int i = 0; i < 4; i++) out[i][j] = w[i];
  }
}
#endif

static void fill_mask(uint8_t *mask, size_t start, size_t n, uint32_t threshold, uint64_t seed, uint64_t step,
                      uint32_t tensor_id) {
  uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
  uint32_t s0 = (uint32_t)step, s1 = (uint32_t)(step >> 32);
  size_t end = start + n;
  size_t blk = start >> 2, last = (end - 1) >> 2;
  /* whole groups of LANES blocks (4 * LANES elements) in the vector path */
  while (blk + LANES - 1 <= last) {
    uint32_t w[4][LANES];
    philox_lanes(k0, k1, (uint32_t)blk, tensor_id, s0, s1, w);
    if (blk * 4 >= start && (blk + LANES) * 4 <= end) {
      uint8_t *out = mask + (blk * 4 - start);
      for (int j = 0; j < LANES; j++)
        for (int lane = 0; lane < 4; lane++) out[4 * j + lane] = (uint8_t)((w[lane][j] >> 8) >= threshold);
      blk += LANES;
      continue;
    }
    for (int j = 0; j < LANES; j++)
      for (int lane = 0; lane < 4; lane++) {
        size_t e = (blk + (size_t)j) * 4 + (size_t)lane;
        if (e >= start && e < end) mask[e - start] = (uint8_t)((w[lane][j] >> 8) >= threshold);
      }
    blk += LANES;
  }
  for (; blk <= last; blk++) {
    uint32_t w[4];
    philox_block(k0, k1, (uint32_t)blk, tensor_id, s0, s1, w);
    for (int lane = 0; lane < 4; lane++) {
      size_t e = blk * 4 + (size_t)lane;
      if (e >= start && e < end) mask[e - start] = (uint8_t)((w[lane] >> 8) >= threshold);
    }
  }
}

enum { CHUNK = 1 << 14 };  /* elements per parallel work item; a multiple of 4 */

void est_dropout_mask(uint8_t *mask, size_t start, size_t n, float prob, uint64_t seed, uint64_t step,
                      uint32_t tensor_id) {
  if (n == 0) return;
  uint32_t threshold = keep_threshold(prob);
  if (omp_in_parallel()) {  /* e.g. per (example, head) inside attention: no nested team */
    fill_mask(mask, start, n, threshold, seed, step, tensor_id);
    return;
  }
  ptrdiff_t nchunks = (ptrdiff_t)((n + CHUNK - 1) / CHUNK);
#pragma omp parallel for schedule(static)
  for (ptrdiff_t c = 0; c < nchunks; c++) {
    size_t off = (size_t)c * CHUNK, len = n - off < CHUNK ? n - off : CHUNK;
    fill_mask(mask + off, start + off, len, threshold, seed, step, tensor_id);
  }
}

void est_dropout_forward(float *out, uint8_t *mask, const float *inp, size_t n, float prob, uint64_t seed,
                         uint64_t step, uint32_t tensor_id) {
  est_dropout_forward_at(out, mask, inp, n, 0, prob, seed, step, tensor_id);
}

void est_dropout_forward_at(float *out, uint8_t *mask, const float *inp, size_t n, size_t first, float prob,
                            uint64_t seed, uint64_t step, uint32_t tensor_id) {
  if (prob <= 0.0f) {
    if (out != inp) memmove(out, inp, n * sizeof(float));
    return;
  }
  uint32_t threshold = keep_threshold(prob);
  float scale = 1.0f / (1.0f - prob);
  ptrdiff_t nchunks = (ptrdiff_t)((n + CHUNK - 1) / CHUNK);
#pragma omp parallel for schedule(static)
  for (ptrdiff_t c = 0; c < nchunks; c++) {
    size_t off = (size_t)c * CHUNK, len = n - off < CHUNK ? n - off : CHUNK;
    fill_mask(mask + off, first + off, len, threshold, seed, step, tensor_id);
    for (size_t i = off; i < off + len; i++) out[i] = mask[i] ? inp[i] * scale : 0.0f;
  }
}

void est_dropout_backward(float *dinp, const float *dout, const uint8_t *mask, size_t n, float prob) {
  est_dropout_backward_mode(dinp, dout, mask, n, prob, EST_GRAD_ADD);
}

/* dinp[i] = G or += G, the choice outside the loop so that WRITE never reads dinp. */
#define EACH_ELEMENT(G)                                                                              \
  do {                                                                                               \
    if (write) {                                                                                     \
      _Pragma("omp parallel for simd schedule(static)") for (ptrdiff_t i = 0; i < len; i++) dinp[i] = (G);  \
    } else {                                                                                         \
      _Pragma("omp parallel for simd schedule(static)") for (ptrdiff_t i = 0; i < len; i++) dinp[i] += (G); \
    }                                                                                                \
  } while (0)

void est_dropout_backward_mode(float *dinp, const float *dout, const uint8_t *mask, size_t n, float prob,
                               est_grad_mode mode) {
  const ptrdiff_t len = (ptrdiff_t)n;
  const int write = mode == EST_GRAD_WRITE;
  if (prob <= 0.0f) {
    EACH_ELEMENT(dout[i]);
    return;
  }
  const float scale = 1.0f / (1.0f - prob);
  EACH_ELEMENT(mask[i] ? dout[i] * scale : 0.0f);
}
