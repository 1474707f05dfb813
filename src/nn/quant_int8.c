/* int8 quantization (nn/quant_int8.h): the definition in plain C, the weights' packed form,
 * and the quantization of activation rows into the kernels' layouts, in plain C and with
 * AVX-512 (the same bits). */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "nn/gemm_util.h" /* est_lanes16 */
#include "nn/quant_int8.h"

#define VNNI512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

/* The packed block: a header (the four ints), then words, colsum and scale, each 64-byte aligned. */
enum { HEADER = 64 };
static size_t aligned(size_t bytes) { return (bytes + 63) / 64 * 64; }

size_t est_int8_weights_bytes(int K, int N) {
  size_t groups = ((size_t)K + 3) / 4, Np = ((size_t)N + EST_INT8_NR - 1) / EST_INT8_NR * EST_INT8_NR;
  return HEADER + aligned(groups * Np * 4) + 2 * aligned(Np * 4);
}

est_int8_weights est_int8_weights_view(const void *mem) {
  const int *h = mem;
  est_int8_weights w = {h[0], h[1], h[2], h[3], NULL, NULL, NULL};
  const char *p = (const char *)mem + HEADER;
  w.words = (const int32_t *)p;
  p += aligned((size_t)w.groups * w.Np * 4);
  w.colsum = (const int32_t *)p;
  w.scale = (const float *)(p + aligned((size_t)w.Np * 4));
  return w;
}

float est_int8_quantize(const float *x, long stride, int n, int8_t *q, long qstride) {
  float amax = 0.0f;
  int nan = 0;
  for (int i = 0; i < n; i++) {
    float a = fabsf(x[i * stride]);
    if (a != a) nan = 1;
    else amax = fmaxf(amax, a);
  }
  float inv = est_int8_inverse(amax);
  for (int i = 0; i < n; i++) q[i * qstride] = (int8_t)est_int8_code(x[i * stride], inv);
  return nan ? NAN : amax / 127.0f;
}

/* An empty block for [K,N] with its header written. */
static est_int8_weights start_block(void *mem, int K, int N) {
  memset(mem, 0, est_int8_weights_bytes(K, N));
  int *h = mem;
  h[0] = K, h[1] = N, h[2] = (K + 3) / 4, h[3] = (N + EST_INT8_NR - 1) / EST_INT8_NR * EST_INT8_NR;
  return est_int8_weights_view(mem);
}

/* Column n's codes (K of them, `stride` apart) and scale into the block. */
static void place_column(const est_int8_weights *w, int n, const int8_t *codes, long stride, float scale) {
  int8_t *q = (int8_t *)est_int8_column(w, n); /* byte k % 4 of word (k / 4, n): little-endian words */
  int32_t sum = 0;
  for (int k = 0; k < w->K; k++) { /* code k to byte k % 4 of group k / 4's word */
    q[(size_t)(k / 4) * EST_INT8_NR * 4 + k % 4] = codes[k * stride];
    sum += codes[k * stride];
  }
  ((int32_t *)w->colsum)[n] = sum;
  ((float *)w->scale)[n] = scale;
}

est_int8_weights est_int8_weights_pack(void *mem, const float *B, int ldb, CBLAS_TRANSPOSE tb, int K, int N) {
  est_int8_weights w = start_block(mem, K, N);
  for (int n = 0; n < N; n++) {
    /* column n of op(B): B[k][n] (NoTrans) or B[n][k] (Trans) */
    const float *col = tb == CblasNoTrans ? B + n : B + (size_t)n * ldb;
    long stride = tb == CblasNoTrans ? ldb : 1;
    int8_t codes[K > 0 ? K : 1];
    float s = est_int8_quantize(col, stride, K, codes, 1);
    place_column(&w, n, codes, 1, s);
  }
  return w;
}

est_int8_weights est_int8_weights_pack_codes(void *mem, const int8_t *codes, const float *scale, int K, int N) {
  est_int8_weights w = start_block(mem, K, N);
  for (int n = 0; n < N; n++) place_column(&w, n, codes + n, N, scale[n]);
  return w;
}

void est_int8_quantize_rows(est_int8_a_layout layout, uint8_t *qa, float *sa, const float *A, int lda, int M, int K,
                            int groups, int from, int to) {
  uint8_t row[4 * (size_t)groups]; /* the row's codes, then placed in qa's tiled words */
  for (int m = from; m < to; m++) {
    memset(row, 128, (size_t)4 * groups);
    sa[m] = 0.0f;
    if (m < M) {
      int8_t codes[K > 0 ? K : 1];
      sa[m] = est_int8_quantize(A + (size_t)m * lda, 1, K, codes, 1);
      for (int k = 0; k < K; k++) row[k] = (uint8_t)(codes[k] + 128);
    }
    est_int8_store_row(layout, qa, m, row, groups);
  }
}

VNNI512_TARGET void est_int8_quantize_rows_avx512(est_int8_a_layout layout, uint8_t *qa, float *sa, const float *A,
                                                  int lda, int M, int K, int groups, int from, int to) {
  const __m512 lim = _mm512_set1_ps(127.0f), abs_mask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FFFFFFF));
  uint8_t row[4 * (size_t)groups]; /* the row's codes, then placed in qa's tiled words */
  for (int m = from; m < to; m++) {
    if (m >= M) {
      memset(row, 128, (size_t)4 * groups), sa[m] = 0.0f;
      est_int8_store_row(layout, qa, m, row, groups);
      continue;
    }
    const float *a = A + (size_t)m * lda;
    __m512 vmax = _mm512_setzero_ps();
    __mmask16 nan = 0;
    for (int k = 0; k < K; k += 16) {
      __m512 x = _mm512_and_ps(abs_mask, _mm512_maskz_loadu_ps(est_lanes16(K - k), a + k));
      nan |= _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
      vmax = _mm512_max_ps(vmax, x);
    }
    float amax = _mm512_reduce_max_ps(vmax);
    sa[m] = nan ? NAN : amax / 127.0f; /* the row's outputs NaN, as est_int8_quantize's */
    __m512 inv = _mm512_set1_ps(est_int8_inverse(amax));
    for (int k = 0; k < 4 * groups; k += 16) {
      __mmask16 in = est_lanes16(K - k);
      __m512 r = _mm512_roundscale_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(in, a + k), inv),
                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      r = _mm512_min_ps(_mm512_max_ps(r, _mm512_sub_ps(_mm512_setzero_ps(), lim)), lim);
      __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(r), _mm512_set1_epi32(128)); /* lanes beyond K: 128 */
      _mm_mask_storeu_epi8(row + k, est_lanes16(4 * groups - k), _mm512_cvtepi32_epi8(q));
    }
    est_int8_store_row(layout, qa, m, row, groups);
  }
}
