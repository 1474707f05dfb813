/* Internal: int8 GEMMs for inference, dynamic quantization as ONNX Runtime's and PyTorch's
 * quantize_dynamic do it (docs/int8.md §1):
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
 * packed weights) from the integer sums before they are converted: the same acc, exactly. */
#ifndef EST_NN_GEMM_INT8_H
#define EST_NN_GEMM_INT8_H

#include <cblas.h>
#include <stddef.h>
#include <stdint.h>

#include "nn/gemm.h"

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
/* Makes the packed form of codes/scale THE int8 form of the frozen NoTrans weight B [K,N]
 * (ldb = N) that est_sgemm_int8 will look up (core/frozen.h), so that B's fp32 values are never
 * read. Returns 0, or -1 when B is not inside a read-only range, already has its copy, or
 * memory is short. */
int est_int8_weights_adopt(const float *B, int K, int N, const int8_t *codes, const float *scale);
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

/* C[M,N] = dequantized int8 product of A [M,K] (NoTrans, lda apart) and op(B), with ep's bias
 * and gelu_out (ep may be NULL; gelu_pre is not supported). Threads as est_sgemm_parallel.
 * Runs the kernel est_kernel_int8() names (nn/kernel_choice.h); a frozen B's packed form is
 * made once (core/frozen.h). Returns 0 when done, non-zero when it did nothing (no int8
 * kernel, M, N or K not positive, no memory): the caller runs fp32. */
int est_sgemm_int8(CBLAS_TRANSPOSE tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb, float *C,
                   int ldc, const est_gemm_epilogue *ep);
/* Several products of one A (BERT's Q, K and V projections of x): A's rows quantized once
 * (a pass over A each, ~6% of an int8 Base step for all of them), and the products' blocks
 * handed out in one parallel region, each row block through every product before the next.
 * The same bits as est_sgemm_int8 per product (C from op(B), nn/gemm.h's est_gemm_product).
 * count <= EST_GEMM_MAX_SHARED; the weights must be read-only (kept packed) for the shared
 * pass, else they run one by one. Returns as est_sgemm_int8 (non-zero: nothing done). */
int est_sgemm_int8_shared(CBLAS_TRANSPOSE tb, int M, int K, const float *A, int lda, const est_gemm_product *prods,
                          int count);
/* BERT's feed-forward block in int8, both GEMMs NoTrans: in->C = A[M,K] in->B + bias with
 * act = in->ep->gelu_out = GELU(in->C) (F = in->N wide), then out->C = act out->B + bias: the
 * bits of est_sgemm_int8 twice. Where each work item spans whole rows (the batch is long
 * enough), the first GEMM quantizes act's rows for the second as it writes them, from L1,
 * instead of the second reading all of act back (the FFN's 3072-wide input was over half of
 * all quantization in a Base step). Returns non-zero when it did nothing usable (no GELU
 * output, no kernel, no memory): the caller runs both products its own way. */
int est_sgemm_int8_ffn(int M, int K, const float *A, const est_gemm_product *in, const est_gemm_product *out);
/* The readable twin (gemm_int8_ref.c): the same numbers, bit for bit, from the definition. */
void est_sgemm_int8_ref(CBLAS_TRANSPOSE tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                        float *C, int ldc, const est_gemm_epilogue *ep);

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

/* The kernels behind est_sgemm_int8, each on one block of C: rows [m0, m1) and columns
 * [n0, n1) (n0 a multiple of EST_INT8_NR) from the u8 activations qa (qa[m][k] + 128, 128
 * beyond K, in the layout the kernel reads, est_int8_a_layout; m0 a multiple of its row
 * tile, rows up to m1 rounded up to it readable) and their scales sa. They write
 * C = fmaf(acc, sa sw, bias). */
typedef void est_int8_block_fn(est_int8_a_layout layout, const est_int8_weights *w, const uint8_t *qa, const float *sa,
                               const float *bias, float *C, int ldc, int m0, int m1, int n0, int n1);
est_int8_block_fn est_int8_block_amx, est_int8_block_vnni512, est_int8_block_avxvnni;
/* the AVX-VNNI kernel assembled with EVEX encodings, for tests on AVX-512 CPUs (gemm_int8_ymm_evex.c) */
est_int8_block_fn est_int8_block_ymm_evex;
/* the AMX kernel's body on tiles emulated in C, for tests on CPUs without AMX (gemm_int8_amx_emulated.c) */
est_int8_block_fn est_int8_block_amx_emulated;
/* A kernel's tile: C[rows][cols] (rows <= its MR, cols <= its NR) from the u8 words at a (row
 * i's of group g at a[g a_g + i]; rows readable) and the packed weight words at b (group g's at
 * b + g b_g). */
typedef void est_int8_tile_fn(const int32_t *a, int a_g, int groups, const int32_t *b, int b_g, const int32_t *colsum,
                              const float *sw, const float *sa, const float *bias, float *c, int ldc, int rows,
                              int cols);
/* The word of (group 0, column n); group g's is EST_INT8_NR g words further. */
static inline const int32_t *est_int8_column(const est_int8_weights *w, int n) {
  return w->words + (size_t)(n / EST_INT8_NR) * w->groups * EST_INT8_NR + n % EST_INT8_NR;
}
static inline size_t est_int8_a_word(est_int8_a_layout layout, int m, int g, int groups);
/* A block as tiles of at most mr x nr, each column tile's weights reused down the block's
 * rows; a tile gets its first activation word (rows the row layout's h apart within a group:
 * layout is 1..EST_INT8_MR here) and its first weight word (groups EST_INT8_NR words apart).
 * Row tiles of mr where mr divides h (the 4-row AVX-VNNI tile in 12-row layouts), else one
 * per layout tile (mr >= h). */
static inline void est_int8_tiles(est_int8_tile_fn *tile, int mr, int nr, est_int8_a_layout layout,
                                  const est_int8_weights *w, const uint8_t *qa, const float *sa, const float *bias,
                                  float *C, int ldc, int m0, int m1, int n0, int n1) {
  const int32_t *a = (const int32_t *)qa;
  const int step = mr < layout ? mr : layout;
  for (int n = n0; n < n1; n += nr)
    for (int m = m0; m < m1; m += step)
      tile(a + est_int8_a_word(layout, m, 0, w->groups), layout, w->groups, est_int8_column(w, n), EST_INT8_NR,
           w->colsum + n, w->scale + n, sa + m, bias ? bias + n : NULL, C + (size_t)m * ldc + n, ldc,
           m1 - m < step ? m1 - m : step, n1 - n < nr ? n1 - n : nr);
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
