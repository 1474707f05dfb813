/* Internal: the GEMM kernels behind the dispatch (nn/gemm.h, nn/gemm_int8.h), each with a
 * plain-C twin that the tests compare it with:
 *
 *   fp32  est_sgemm_f32: est's own AVX-512F kernel (gemm_f32.c)        twin est_sgemm_f32_ref
 *   bf16  est_sgemm_bf16: the AMX tiles (gemm_amx.c) where the choice   twin est_sgemm_bf16_ref
 *         allows them, else VDPBF16PS (gemm_bf16.c)
 *   int8  blocks of C on the AMX tiles (gemm_int8_amx.c), AVX512-VNNI  twin est_sgemm_int8_ref
 *         (gemm_int8_vnni512.c) or AVX-VNNI (gemm_int8_avxvnni.c), over
 *         the layouts of nn/quant_int8.h
 *
 * A kernel asks the kernel choice (nn/kernel_choice.h) or, for its own instructions, the
 * probes (nn/cpu_features.h); it never calls the dispatch, whose header it does not include
 * (tests/test_layout.c). */
#ifndef EST_NN_GEMM_KERNELS_H
#define EST_NN_GEMM_KERNELS_H

#include <cblas.h>
#include <stddef.h>
#include <stdint.h>

#include "nn/quant_int8.h"

/* What a GEMM does to C's tiles while they are hot, after C = alpha op(A) op(B) + beta C:
 * C[m][n] += bias[n] (bias may be NULL), then gelu_out[m * ld_gelu + n] = tanh-GELU(C[m][n])
 * (est_fast_gelu; gelu_out may be NULL). C keeps the pre-activation (the backward needs it).
 *
 * Or, for the backward through a GELU (the input gradient of a layer whose input was
 * gelu(pre), BERT's FFN output): with gelu_pre set, C[m][n] *= est_fast_gelu_grad(p) and,
 * when gelu_act is set, gelu_act[m][n] = est_fast_gelu(p), where p = gelu_pre[m][n] and
 * both matrices are ld_pre apart: C becomes d pre, and the forward's GELU, which the
 * weight gradient reads, is recomputed from the same load of pre. Not with bias or
 * gelu_out. */
typedef struct {
  const float *bias;
  float *gelu_out;
  int ld_gelu;
  const float *gelu_pre;
  float *gelu_act;
  int ld_pre;
} est_gemm_epilogue;

/* One forward product of a shared A: C[M,N] (ldc apart) = A op(B) (ldb apart) with ep. */
typedef struct {
  const float *B;
  int ldb, N;
  float *C;
  int ldc;
  const est_gemm_epilogue *ep;
} est_gemm_product;
enum { EST_GEMM_MAX_SHARED = 4 };

/* ---- fp32 ---- */

/* est's own fp32 AVX-512F GEMM (gemm_f32.c), OpenMP-parallel unless called inside a parallel
 * region. Returns 0 when done, non-zero when it did nothing (no AVX-512F on this CPU, K = 0
 * or alpha = 0, or no memory for the packed B): the caller then uses its BLAS path. */
int est_sgemm_f32(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha, const float *A, int lda,
                  const float *B, int ldb, float beta, float *C, int ldc, const est_gemm_epilogue *ep);
/* Its readable twin (gemm_f32_ref.c): sums in double, in k order, so the only error left
 * is the final rounding: the fast kernel's gap to it is fp32 summation error,
 * |fast - ref| <= (K + 2) * 2^-24 * (sum_k |a_mk b_kn| + |beta C| + |bias|). */
void est_sgemm_f32_ref(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha, const float *A,
                       int lda, const float *B, int ldb, float beta, float *C, int ldc, const est_gemm_epilogue *ep);
/* The kernel's packed form of op(B) when B lies in a read-only range (core/frozen.h: an
 * inference model's weights), made on first use and kept; NULL otherwise. est_sgemm_f32
 * then packs nothing per call; gemm.c runs every NoTrans-A product of such a B here. */
const float *est_f32_frozen_packed(const float *B, int ldb, CBLAS_TRANSPOSE tb, int K, int N);
/* count products of one A [M,K] (lda apart) whose weights are inference weights (their packed
 * form kept, est_f32_frozen_packed) in one team: their items handed out together, so the team
 * starts and waits once (BERT's Q, K and V). Each C has est_sgemm_f32's bits. Non-zero, with
 * nothing done, when a weight is not kept or AVX-512F is missing. */
int est_sgemm_f32_shared(int M, int K, const float *A, int lda, const est_gemm_product *prods, int count);
/* The same kernel in pieces, single-threaded, for a caller that runs many small products
 * in its own parallel loop and multiplies several row strips by one B (attention's
 * per-(example, head) products, attention.c). Need est_cpu_has_avx512f().
 *   est_f32_pack:        bp[est_f32_packed_floats(K, N)] = op(B) [K, N], tile-major
 *   est_f32_gemm_packed: C[M,N] = alpha A[M,K] op(B) (A row-major, lda apart; beta = 0) */
size_t est_f32_packed_floats(int K, int N);
void est_f32_pack(float *bp, const float *B, int ldb, CBLAS_TRANSPOSE tb, int K, int N);
void est_f32_gemm_packed(int M, int N, int K, float alpha, const float *A, int lda, const float *bp, float *C,
                         int ldc);

/* ---- bf16 ---- */

/* bf16 mixed precision: op(A) and op(B) rounded to bfloat16 (8 bits of precision),
 * products summed in fp32, C stays fp32 — what AVX512-BF16's VDPBF16PS computes, at twice
 * the FLOP rate of fp32 FMAs. Same arguments as cblas_sgemm (row-major). The fast one needs
 * est_cpu_has_avx512_bf16(); the reference runs anywhere and sums in double, so the only
 * error it has is the inputs' rounding: |ref - exact| <= 2 * 2^-8 * sum_k |a_mk| |b_kn|. */
void est_sgemm_bf16(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha, const float *A, int lda,
                    const float *B, int ldb, float beta, float *C, int ldc);
/* The same with an epilogue (ep non-NULL) fused into the kernel the CPU allows (AMX, else
 * VDPBF16PS, which fuses it for beta = 0 only); 0 when done, non-zero when that kernel did
 * nothing: the caller then runs est_sgemm_bf16 and the epilogue as passes. */
int est_sgemm_bf16_ep(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha, const float *A,
                      int lda, const float *B, int ldb, float beta, float *C, int ldc, const est_gemm_epilogue *ep);
/* est_sgemm_bf16 runs one of two kernels with the same arithmetic (bf16 inputs, fp32 sums;
 * the order of the fp32 sums differs), the tiles where est_kernel_amx() (nn/kernel_choice.h):
 *   est_sgemm_amx      AMX tiles (TDPBF16PS), gemm_amx.c; returns 0 when done, non-zero
 *                      when it did nothing (no AMX, or the kernel refused it the state,
 *                      K = 0, alpha = 0, no memory): then the next one runs. It applies
 *                      an epilogue (ep, may be NULL) to each block of C while it is hot,
 *                      with the values est_sgemm_parallel_ep's separate passes give
 *   est_sgemm_bf16_dp  AVX512-BF16 (VDPBF16PS), gemm_bf16.c; needs est_cpu_has_avx512_bf16() */
int est_sgemm_amx(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha, const float *A, int lda,
                  const float *B, int ldb, float beta, float *C, int ldc, const est_gemm_epilogue *ep);
void est_sgemm_bf16_dp(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha, const float *A,
                       int lda, const float *B, int ldb, float beta, float *C, int ldc);
/* The VDPBF16PS kernel with a dense layer's epilogue (bias, tanh-GELU into gelu_out) applied
 * to each tile as it leaves the registers, with the separate passes' bits; beta = 0 only
 * (inference's products). Returns 0 when done, -1 when it did nothing (beta != 0, a GELU
 * backward, K = 0, alpha = 0, no memory): the caller then takes the separate route. */
int est_sgemm_bf16_dp_ep(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha, const float *A,
                         int lda, const float *B, int ldb, float beta, float *C, int ldc, const est_gemm_epilogue *ep);
/* count products of one A [M,K] (lda apart) on the VDPBF16PS kernel, A converted to bf16 once
 * and every product's items in one team (BERT's Q, K and V), each C with est_sgemm_bf16_dp_ep's
 * bits. Inference weights only (B's words kept, core/frozen.h): non-zero, with nothing done,
 * otherwise, or without AVX512-BF16 or memory. */
int est_sgemm_bf16_shared(int M, int K, const float *A, int lda, const est_gemm_product *prods, int count);
void est_sgemm_bf16_ref(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha, const float *A,
                        int lda, const float *B, int ldb, float beta, float *C, int ldc);

/* float <-> bfloat16 bits, round to nearest even (NaN stays NaN). */
uint16_t est_bf16_from_float(float x);
float est_bf16_to_float(uint16_t h);
float est_bf16_round(float x); /* to bf16 and back */

/* ---- int8 ---- */

/* est_sgemm_int8's readable twin (gemm_int8_ref.c): the same numbers, bit for bit, from the
 * definition (nn/quant_int8.h). */
void est_sgemm_int8_ref(CBLAS_TRANSPOSE tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                        float *C, int ldc, const est_gemm_epilogue *ep);

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

#endif
