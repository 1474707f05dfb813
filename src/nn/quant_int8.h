/* Internal: int8 quantization for the inference GEMMs, its definition and its layouts
 * (quant_int8.c): dynamic quantization as ONNX Runtime's and PyTorch's quantize_dynamic do
 * it (docs/int8.md §1):
 *
 *   weights     per output channel (column n of op(B) [K,N]), symmetric:
 *               sw[n] = max_k |b_kn| / 127,  qb[k][n] = rint(b_kn / sw[n]) in [-127, 127]
 *   activations per row of A [M,K], at run time, symmetric the same way:
 *               sa[m] = max_k |a_mk| / 127,  qa[m][k] = rint(a_mk / sa[m])
 *   sums        acc[m][n] = sum_k qa[m][k] qb[k][n] in int32: exact, so every kernel and
 *               thread count gives the same integers (|acc| <= K 127^2 < 2^31 for K < 133000)
 *   dequantize  C[m][n] = fmaf((float)acc, sa[m] * sw[n], bias[n])   (bias 0 when none),
 *               then gelu_out = GELU(C) as est_gemm_epilogue says.
 * The division is done as a product by the reciprocal, 127.0f / max (float, round to
 * nearest even), and an all-zero row or column has scale 0 and zero codes. A NaN makes its
 * row's (column's) scale NaN, so its outputs are NaN, as fp32's would be; an infinity makes
 * it infinite (outputs infinite or NaN).
 *
 * VPDPBUSD (AVX512-VNNI, AVX-VNNI) and TDPBUSD (AMX) multiply unsigned by signed bytes, so
 * the kernels feed qa + 128 (u8) and subtract 128 sum_k qb[k][n] (colsum, kept with the
 * packed weights) from the integer sums before they are converted: the same acc, exactly.
 *
 * Here: the weights' packed block, the activations' layouts and their quantization, which
 * the kernels (nn/gemm_kernels.h) read and the dispatch (nn/gemm_int8.h) makes; this file
 * knows neither. */
#ifndef EST_NN_QUANT_INT8_H
#define EST_NN_QUANT_INT8_H

#include <cblas.h>
#include <stddef.h>
#include <stdint.h>

enum { EST_INT8_NR = 32 }; /* packed weights' columns are padded to a multiple of this */

/* Quantized, packed op(B) [K,N] in one block of memory (so that core/frozen.h can keep it):
 * the word of (group g, column n) holds qb[4g..4g+3][n] as four signed bytes, k ascending
 * from the low byte (what VPDPBUSD multiplies with a word of four u8 activations), zero
 * beyond K and N. Words are panel-major: panel p = n / EST_INT8_NR holds its columns'
 * words [groups][EST_INT8_NR], contiguous, so a tile's kernel reads one stream (est_int8_column);
 * [groups][Np] rows, one per g and Np apart, made a 16-token request's weight reads one
 * 128-byte piece per page (bench/README.md, "Inference weights packed once, panel-major"). */
typedef struct {
  int K, N, groups, Np; /* groups = ceil(K / 4); Np = N rounded up to EST_INT8_NR */
  const int32_t *words; /* [Np / EST_INT8_NR][groups][EST_INT8_NR] */
  const int32_t *colsum; /* [Np] sum_k qb[k][n] */
  const float *scale;    /* [Np] sw[n] */
} est_int8_weights;

/* Bytes est_int8_weights_pack writes for a [K,N] operand. */
size_t est_int8_weights_bytes(int K, int N);
/* Quantizes op(B) (row-major, ldb apart; tb as cblas) into mem (64-byte aligned,
 * est_int8_weights_bytes long) and returns its view. Plain C, run once per frozen weight. */
est_int8_weights est_int8_weights_pack(void *mem, const float *B, int ldb, CBLAS_TRANSPOSE tb, int K, int N);
/* The same block from codes [K][N] (row-major; what est_int8_quantize gives each column of a
 * NoTrans [K,N] weight) and scales [N]: from the same codes and scales, the same bytes as
 * est_int8_weights_pack. How an int8 export's stored weights become the kernels' operand. */
est_int8_weights est_int8_weights_pack_codes(void *mem, const int8_t *codes, const float *scale, int K, int N);
/* The view of a block est_int8_weights_pack wrote. */
est_int8_weights est_int8_weights_view(const void *mem);

/* The scale of n values x[0], x[stride], ...: max |x| / 127 (0 for all zeros), and their codes
 * q[i * qstride] = rint(x * (127 / max)) in [-127, 127]. The plain-C definition. */
float est_int8_quantize(const float *x, long stride, int n, int8_t *q, long qstride);
/* One code: what est_int8_quantize does to x with inv = 127 / max (0 when max is 0). */
static inline int est_int8_code(float x, float inv) {
  float r = __builtin_rintf(x * inv); /* round to nearest even, as VCVTPS2DQ */
  return r != r ? 0 : r > 127.0f ? 127 : r < -127.0f ? -127 : (int)r; /* NaN: its scale is NaN */
}
static inline float est_int8_inverse(float amax) { return amax > 0.0f ? 127.0f / amax : 0.0f; }

/* Quantized activations (est_int8_quantize_rows*): u8 codes, four k to a word, laid out as the
 * kernel that reads them wants, so that no kernel copies them again. The layout's value:
 *   1 .. EST_INT8_MR  row tiles of that many rows, h: [Mp / h][groups][h] words; the VNNI
 *                     kernels broadcast row i's word of group g from a[g h + i], one pointer
 *                     for all the rows of a tile. est_int8_rows_layout picks h.
 *   EST_INT8_TILES16  [Mp / 16][Kt][16][16] words (Kt = ceil(groups / 16); words past the
 *                     groups 0): AMX's A tiles, 16 rows of 16 words, 1 KiB each, as TILELOADD
 *                     reads them (gemm_int8_amx.h) */
typedef int est_int8_a_layout;
/* Row tiles: the VNNI kernels' (at most EST_INT8_MR rows) and AMX's; rows are padded to a
 * multiple of 48 (est_int8_padded_rows), which holds any layout's whole tiles. */
enum { EST_INT8_MR = 12, EST_INT8_AMX_ROWS = 16, EST_INT8_ROW_PAD = 48, EST_INT8_TILES16 = 0 };
/* The word of (group 0, column n); group g's is EST_INT8_NR g words further. */
static inline const int32_t *est_int8_column(const est_int8_weights *w, int n) {
  return w->words + (size_t)(n / EST_INT8_NR) * w->groups * EST_INT8_NR + n % EST_INT8_NR;
}
static inline int est_int8_layout_rows(est_int8_a_layout layout) {
  return layout == EST_INT8_TILES16 ? EST_INT8_AMX_ROWS : layout;
}
/* The row layout for M rows: the fewest tiles of at most EST_INT8_MR rows, h = ceil(M / t)
 * rows each for t = ceil(M / 12), so the last is short by less than t rows (16 rows as 8 +
 * 8: a 4-row tile does 8 VPDPBUSD per pair of weight loads, and a 16-token product ran at
 * 361-380 G ops/s on one Zen 4 core as 12 + 4, where 8 or 12 rows alone ran at 388-416).
 * Above 132 rows h is 12. t h < M + t stays within est_int8_padded_rows(M) (test_gemm_int8). */
static inline est_int8_a_layout est_int8_rows_layout(int M) {
  if (M <= 0) return EST_INT8_MR;
  const int tiles = (M + EST_INT8_MR - 1) / EST_INT8_MR;
  return (M + tiles - 1) / tiles;
}
static inline int est_int8_padded_rows(int M) {
  return (M + EST_INT8_ROW_PAD - 1) / EST_INT8_ROW_PAD * EST_INT8_ROW_PAD;
}
/* Words a row holds in either layout (the groups, rounded up to 16 for the tiles). */
static inline int est_int8_padded_groups(int groups) { return (groups + 15) / 16 * 16; }
static inline size_t est_int8_a_word(est_int8_a_layout layout, int m, int g, int groups) {
  if (layout == EST_INT8_TILES16)
    return ((size_t)(m / 16) * (size_t)(est_int8_padded_groups(groups) / 16) + (size_t)(g / 16)) * 256 +
           (size_t)(m % 16) * 16 + (size_t)(g % 16);
  return ((size_t)(m / layout) * groups + g) * (size_t)layout + (size_t)(m % layout);
}
/* Row m's u8 codes (4 groups bytes, row[k] = code k + 128) into qa's words in the layout:
 * one word every h (row tiles of h), or runs of 16 words, one a tile, whose last gets zeros
 * past the groups (16-row tiles). */
static inline void est_int8_store_row(est_int8_a_layout layout, uint8_t *qa, int m, const uint8_t *row, int groups) {
  int32_t *words = (int32_t *)qa + est_int8_a_word(layout, m, 0, groups);
  if (layout == EST_INT8_TILES16) {
    for (int g = 0; g < groups; g += 16) {
      const int have = groups - g < 16 ? groups - g : 16;
      int32_t *tile_row = words + (size_t)(g / 16) * 256;
      __builtin_memcpy(tile_row, row + 4 * (size_t)g, 4 * (size_t)have);
      __builtin_memset(tile_row + have, 0, 4 * (size_t)(16 - have));
    }
    return;
  }
  for (int g = 0; g < groups; g++) __builtin_memcpy(words + (size_t)g * layout, row + 4 * (size_t)g, 4);
}
/* The activation quantization of rows [from, to) into qa/sa in the layout (AVX-512 and scalar
 * forms, same bits as est_int8_quantize; rows from M on get 128s and scale 0). */
void est_int8_quantize_rows_avx512(est_int8_a_layout layout, uint8_t *qa, float *sa, const float *A, int lda, int M,
                                   int K, int groups, int from, int to);
void est_int8_quantize_rows(est_int8_a_layout layout, uint8_t *qa, float *sa, const float *A, int lda, int M, int K,
                            int groups, int from, int to);

#endif
