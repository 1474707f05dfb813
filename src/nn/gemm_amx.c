/* bf16 GEMM on AMX (Intel Advanced Matrix Extensions): the same arithmetic as gemm_bf16.c
 * (op(A), op(B) rounded to bf16, products summed in fp32; reference twin gemm_bf16_ref.c),
 * on the tile unit instead of zmm registers.
 *
 * One TDPBF16PS multiplies a 16 x 32 bf16 tile of A by a 32 x 16 bf16 tile of B into a
 * 16 x 16 fp32 tile of C: 16384 FLOP per instruction, one per ~16 cycles, 14-18x the FLOP
 * rate of VFMADD231PS per core on the Xeon this was written on (bench/bench_peak); this
 * kernel reaches 13-32% of that on BERT's shapes (bench/README.md). The tiles want:
 *   A tile: 16 rows m, each 16 words = 32 consecutive k as bf16 (k even in the low half)
 *   B tile: 16 rows kp (k-pairs), each 16 words = 16 columns n, word = (k = 2kp, 2kp + 1)
 * so both operands are packed once per call into 1 KiB tiles laid end to end (a tile load
 * then reads 1 KiB contiguously) -- except a B that lies in a read-only store (inference's
 * weights, est_vars_set_read_only): its tiles are packed on first use and kept
 * (core/frozen.h), which at one example of 128 tokens was ~85% of the packing:
 *   Ap[mt][kt][16 m][16 kp]   Bp[nt][kt][16 kp][16 n]     (mt, nt, kt: tile indices)
 * padded with zeros to whole tiles (K to a multiple of 32; M and N to an even number of
 * tiles, so every kernel call has two A and two B tiles).
 *
 * Tiles 0-3 hold a 32 x 32 block of C; tiles 4-5 the block's two A tiles and 6-7 its two B
 * tiles for one kt: four tile loads feed four TDPBF16PS. Each C block runs over all of K
 * in kt order, so a result does not depend on the thread count or the blocking. Blocks
 * of BM rows x BN columns are handed to the OpenMP threads dynamically (a descheduled
 * thread's share is taken by the others); within one, A's BM rows (BM x K bf16, <= 0.8 MiB
 * for K = 3072) and B's BN columns stay in L2 while its 32 x 32 blocks run.
 *
 * Linux hands out AMX state only to a process that asks (arch_prctl ARCH_REQ_XCOMP_PERM,
 * once per process, for all its threads: est_cpu_has_amx_bf16, nn/cpu_features.c); each thread loads its tile configuration on
 * entry and releases the tiles when done, so a context switch outside a GEMM saves none.
 * The instruction facts and their public sources: docs/performance.md §4. */
#include <immintrin.h>
#include <omp.h>
#include <stdint.h>
#include <string.h>

#include "core/frozen.h"
#include "nn/amx.h"
#include "nn/cpu_features.h"
#include "nn/fastmath.h"
#include "nn/gelu_avx512.h"
#include "nn/gemm_kernels.h"
#include "nn/gemm_util.h"
#include "nn/thread_buf.h"

#if defined(__x86_64__) && defined(__linux__)
#define AMX_BUILD 1
#define AMX_TARGET __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16")))
#else
#define AMX_BUILD 0
#endif

enum { TILE_ROWS = 16, TILE_WORDS = 16, TILE_K = 32, TILE = TILE_ROWS * TILE_WORDS };
enum { BM = 256, BN = 256 }; /* block of C per work item at most: 8 x 8 blocks of 32 x 32 */
enum { ITEMS_PER_THREAD = 4 };  /* fewer, and the items shrink (est_sgemm_amx) */

#if AMX_BUILD
/* 32 floats from src (n of them valid, the rest 0) as 32 bf16 = 16 words, k-order. */
AMX_TARGET static inline __m512i bf16_words(const float *src, int n) {
  __m512 lo = _mm512_maskz_loadu_ps(est_lanes16(n), src);
  __m512 hi = _mm512_maskz_loadu_ps(est_lanes16(n - 16), src + 16);
  return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
}

/* 16 words from two source rows: word i = (bf16(r0[i]) low, bf16(r1[i]) high); r1 may be
 * NULL (an odd K's last pair: zero high half). n of the 16 valid. */
AMX_TARGET static inline __m512i pair_words(const float *r0, const float *r1, int n) {
  __m512i w0 = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(est_lanes16(n), r0)));
  if (!r1) return w0;
  __m512i w1 = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(est_lanes16(n), r1)));
  return _mm512_or_si512(w0, _mm512_slli_epi32(w1, 16));
}

/* dst[c][r] = src[r][c] for a 16 x 16 block of words (src rows 16 words apart). */
AMX_TARGET static void transpose16(int32_t *dst, const int32_t *src) {
  const __m512i column = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                            _mm512_set1_epi32(16));
  for (int c = 0; c < 16; c++) _mm512_store_si512(dst + 16 * c, _mm512_i32gather_epi32(column, src + c, 4));
}

/* dst row r (16 words) = 32 consecutive values of source row c0 + r from column k0, as
 * bf16 (rows at or past C, and values past K, are zero): a k-contiguous source. */
AMX_TARGET static void words_of_rows(int32_t *dst, const float *src, int ld, int C, int K, int c0, int k0) {
  for (int r = 0; r < TILE_ROWS; r++) {
    int c = c0 + r;
    __m512i w = c < C ? bf16_words(src + (size_t)c * ld + k0, K - k0) : _mm512_setzero_si512();
    _mm512_store_si512(dst + 16 * r, w);
  }
}

/* dst row p (16 words) = the pairs (source rows k0 + 2p, k0 + 2p + 1) of columns c0.. c0 + 15
 * (rows past K and columns past C zero): a source whose rows are k. */
AMX_TARGET static void words_of_row_pairs(int32_t *dst, const float *src, int ld, int C, int K, int c0, int k0) {
  for (int p = 0; p < TILE_ROWS; p++) {
    int k = k0 + 2 * p;
    __m512i w = k < K ? pair_words(src + (size_t)k * ld + c0, k + 1 < K ? src + (size_t)(k + 1) * ld + c0 : NULL,
                                   C - c0)
                      : _mm512_setzero_si512();
    _mm512_store_si512(dst + 16 * p, w);
  }
}

/* One 1 KiB tile (ct, kt) of an operand whose other dimension is C (M for A, N for B).
 * k_contiguous: the source holds k along its rows (A NoTrans, B Trans), else down its
 * columns. An A tile wants rows of m, a B tile rows of k-pairs (rows_are_pairs); when the
 * source has the other orientation, the 16 x 16 words are built the way it allows and
 * transposed (A Trans, B Trans). */
AMX_TARGET static void pack_tile(int32_t *tile, const float *src, int ld, int k_contiguous, int rows_are_pairs,
                                 int C, int K, int ct, int kt) {
  int32_t __attribute__((aligned(64))) t[TILE];
  int32_t *dst = k_contiguous == rows_are_pairs ? t : tile;
  if (k_contiguous) words_of_rows(dst, src, ld, C, K, ct * TILE_ROWS, kt * TILE_K);
  else words_of_row_pairs(dst, src, ld, C, K, ct * TILE_WORDS, kt * TILE_K);
  if (dst == t) transpose16(tile, t);
}

/* Tiles [from, to) of an operand's Ct x Kt tiles (C's tile index ct, k's kt), each stored
 * at dst[(ct Kt + kt) TILE] as laid out above. The i-th is taken in the order that walks
 * the source forward: kt fastest where k runs along the source's rows, ct fastest where
 * its rows are k -- there one k tile's 32 rows are read whole, tile after tile, rather than
 * a 64-byte strip down all K rows, a strided walk the prefetchers lose at every page (its
 * loads held ~40% of pack_tile's samples in bf16 Tiny training). Same tiles either way. */
AMX_TARGET static void pack_tiles(int32_t *dst, const float *src, int ld, int k_contiguous, int rows_are_pairs,
                                  int C, int K, int Ct, int Kt, int from, int to) {
  for (int i = from; i < to; i++) {
    int ct = k_contiguous ? i / Kt : i % Ct, kt = k_contiguous ? i % Kt : i / Ct;
    pack_tile(dst + ((size_t)ct * Kt + kt) * TILE, src, ld, k_contiguous, rows_are_pairs, C, K, ct, kt);
  }
}

/* gelu_out = tanh-GELU(C) on the 32 x 32 block at row m0, column n0 (clipped to M x N),
 * while it is in L1, by the vectorised GELU every other path runs (gelu_avx512.h). */
AMX_TARGET static void gelu_block(const float *C, int ldc, const est_gemm_epilogue *ep, int m0, int n0, int M,
                                  int N) {
  int rows = M - m0 < 32 ? M - m0 : 32, cols = N - n0 < 32 ? N - n0 : 32;
  for (int r = 0; r < rows; r++)
    est_gelu_rows16(ep->gelu_out + (size_t)(m0 + r) * ep->ld_gelu + n0, C + (size_t)(m0 + r) * ldc + n0, cols);
}

/* The 32 x 32 block of C at (mt, nt) (tile indices, both even): acc = sum over kt of
 * A tiles x B tiles, then C = alpha acc + beta C on the rows < M and columns < N. With
 * beta = 1 and alpha = 1 the sum starts from C (C + p1 + p2 + ... rather than C + (p1 + p2
 * + ...)): fp32 rounding in another order, within the same bound (gemm_kernels.h). */
AMX_TARGET static void block32(const int32_t *Ap, const int32_t *Bp, int Kt, int mt, int nt, float alpha, float beta,
                               float *C, int ldc, int M, int N, const est_gemm_epilogue *ep) {
  const float *bias = ep ? ep->bias : NULL;
  const int32_t *a0 = Ap + (size_t)mt * Kt * TILE, *a1 = a0 + (size_t)Kt * TILE;
  const int32_t *b0 = Bp + (size_t)nt * Kt * TILE, *b1 = b0 + (size_t)Kt * TILE;
  /* A block wholly inside C with alpha = 1 and beta 0 or 1 (every GEMM of BERT's layers)
   * starts from C itself, the bias or zero, and is stored straight back: no trip through a
   * buffer. The bias starts the sums as a tile whose 16 rows are one load of it (row
   * stride 0): bias + p1 + p2 + ..., what C = bias followed by a beta = 1 GEMM computes. */
  float *c = C + (size_t)mt * TILE_ROWS * ldc + (size_t)nt * TILE_WORDS;
  const long ld = (long)ldc * (long)sizeof(float);
  const int direct = alpha == 1.0f && (beta == 0.0f || beta == 1.0f) && (mt + 2) * TILE_ROWS <= M &&
                     (nt + 2) * TILE_WORDS <= N;
  if (direct && beta == 1.0f) {
    _tile_loadd(0, c, ld);
    _tile_loadd(1, c + TILE_WORDS, ld);
    _tile_loadd(2, c + TILE_ROWS * (size_t)ldc, ld);
    _tile_loadd(3, c + TILE_ROWS * (size_t)ldc + TILE_WORDS, ld);
  } else if (direct && bias) {
    const float *b = bias + (size_t)nt * TILE_WORDS;
    _tile_loadd(0, b, 0);
    _tile_loadd(1, b + TILE_WORDS, 0);
    _tile_loadd(2, b, 0);
    _tile_loadd(3, b + TILE_WORDS, 0);
  } else {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  for (int kt = 0; kt < Kt; kt++) {
    _tile_loadd(4, a0 + (size_t)kt * TILE, 64);
    _tile_loadd(5, a1 + (size_t)kt * TILE, 64);
    _tile_loadd(6, b0 + (size_t)kt * TILE, 64);
    _tile_loadd(7, b1 + (size_t)kt * TILE, 64);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  if (direct) {
    _tile_stored(0, c, ld);
    _tile_stored(1, c + TILE_WORDS, ld);
    _tile_stored(2, c + TILE_ROWS * (size_t)ldc, ld);
    _tile_stored(3, c + TILE_ROWS * (size_t)ldc + TILE_WORDS, ld);
    if (bias && beta == 1.0f) /* (C + p1 + p2 + ...) + bias, as a GEMM then a bias pass */
      for (int r = 0; r < 2 * TILE_ROWS; r++)
        for (int h = 0; h < 2; h++) {
          float *row = c + (size_t)r * ldc + h * TILE_WORDS;
          _mm512_storeu_ps(row, _mm512_add_ps(_mm512_loadu_ps(row), _mm512_loadu_ps(bias + (nt + h) * TILE_WORDS)));
        }
    return;
  }
  float __attribute__((aligned(64))) acc[4][TILE];
  _tile_stored(0, acc[0], 64);
  _tile_stored(1, acc[1], 64);
  _tile_stored(2, acc[2], 64);
  _tile_stored(3, acc[3], 64);
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  for (int q = 0; q < 4; q++) {
    int m0 = (mt + (q >> 1)) * TILE_ROWS, n0 = (nt + (q & 1)) * TILE_WORDS;
    __mmask16 cols = est_lanes16(N - n0);
    if (!cols) continue;
    for (int r = 0; r < TILE_ROWS && m0 + r < M; r++) {
      float *row = C + (size_t)(m0 + r) * ldc + n0;
      __m512 v = _mm512_mul_ps(va, _mm512_load_ps(acc[q] + 16 * r));
      if (beta != 0.0f) v = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(cols, row), v);
      if (bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(cols, bias + n0));
      _mm512_mask_storeu_ps(row, cols, v);
    }
  }
}

/* The backward through a GELU (est_gemm_epilogue.gelu_pre) on the same block: C *=
 * GELU'(pre), gelu_act = GELU(pre), by the code gemm.c's pass and the fp32 kernel run. */
AMX_TARGET static void gelu_backward_block(float *C, int ldc, const est_gemm_epilogue *ep, int m0, int n0, int M,
                                           int N) {
  int rows = M - m0 < 32 ? M - m0 : 32, cols = N - n0 < 32 ? N - n0 : 32;
  for (int r = 0; r < rows; r++) {
    size_t p = (size_t)(m0 + r) * ep->ld_pre + n0;
    est_gelu_backward_rows16(C + (size_t)(m0 + r) * ldc + n0, ep->gelu_act ? ep->gelu_act + p : NULL,
                             ep->gelu_pre + p, cols);
  }
}

/* The 32 x 32 blocks of C in tile rows [mt0, mt1) x tile columns [nt0, nt1), column pairs
 * outermost (a pair's B tiles are reused down the rows), each with its epilogue. */
AMX_TARGET static void run_blocks(const int32_t *Ap, const int32_t *Bp, int Kt, int mt0, int mt1, int nt0, int nt1,
                                  float alpha, float beta, float *C, int ldc, int M, int N,
                                  const est_gemm_epilogue *ep) {
  for (int nt = nt0; nt < nt1; nt += 2)
    for (int mt = mt0; mt < mt1; mt += 2) {
      block32(Ap, Bp, Kt, mt, nt, alpha, beta, C, ldc, M, N, ep);
      /* the block's GELU while it is in L1. Measured against gemm.c's pass over C
       * afterwards (Small inference, perf): the same share of the step in sum, the memory
       * pass gone; the bias tile above is what removed a pass (gemm.c's C = bias copy, 10%
       * of a bf16 Small inference step) */
      if (ep && ep->gelu_out) gelu_block(C, ldc, ep, mt * TILE_ROWS, nt * TILE_WORDS, M, N);
      if (ep && ep->gelu_pre) gelu_backward_block(C, ldc, ep, mt * TILE_ROWS, nt * TILE_WORDS, M, N);
    }
}

/* B's tiles [Nt][Kt] (Bp above), [from, to) of them: the per-call packing and the copy
 * kept for a read-only weight share it. */
typedef struct {
  int32_t *Bp;
  const float *B;
  int ldb, trans, N, K, Kt, tiles;
} b_tiles;

AMX_TARGET static void pack_b_tiles(const b_tiles *b, int from, int to) {
  pack_tiles(b->Bp, b->B, b->ldb, b->trans, 1, b->N, b->K, b->tiles / b->Kt, b->Kt, from, to);
}

AMX_TARGET static void make_b_copy(void *copy, void *ctx) {
  b_tiles b = *(const b_tiles *)ctx;
  b.Bp = copy;
#pragma omp parallel
  {
    int from, to;
    est_team_share(b.tiles, &from, &to);
    pack_b_tiles(&b, from, to);
  }
}

/* B packed as tiles: the copy kept for a read-only weight (core/frozen.h) when B lies in
 * one, else packed into the thread's scratch slot by the team (*pack_here set). */
static const int32_t *b_operand(b_tiles *b, int *pack_here) {
  *pack_here = 0;
  size_t extent = b->trans ? ((size_t)(b->N - 1) * b->ldb + b->K) * sizeof(float)
                           : ((size_t)(b->K - 1) * b->ldb + b->N) * sizeof(float);
  const uint64_t key[4] = {0x414d5842 /* "AMXB" */, (uint64_t)b->ldb, (uint64_t)b->trans,
                           (uint64_t)b->K << 32 | (uint32_t)b->N};
  const int32_t *kept = est_frozen_derived(b->B, extent, key, (size_t)b->tiles * TILE * sizeof(int32_t), make_b_copy, b);
  if (kept) return kept;
  b->Bp = (int32_t *)est_thread_buf(EST_TBUF_BF16_B, (size_t)b->tiles * TILE);
  *pack_here = 1;
  return b->Bp;
}

AMX_TARGET int est_sgemm_amx(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha,
                             const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc,
                             const est_gemm_epilogue *ep) {
  if (!est_cpu_has_amx_bf16() || M <= 0 || N <= 0 || K <= 0 || alpha == 0.0f) return -1;
  int Kt = (K + TILE_K - 1) / TILE_K;
  int Mt = (M + 2 * TILE_ROWS - 1) / (2 * TILE_ROWS) * 2, Nt = (N + 2 * TILE_WORDS - 1) / (2 * TILE_WORDS) * 2;
  /* packed A: the calling thread's scratch slot (floats and words are both 4 bytes) */
  int32_t *Ap = (int32_t *)est_thread_buf(EST_TBUF_BF16_A, (size_t)Mt * Kt * TILE);
  b_tiles b = {NULL, B, ldb, tb == CblasTrans, N, K, Kt, Nt * Kt};
  int pack_b = 0;
  const int32_t *Bp = Ap ? b_operand(&b, &pack_b) : NULL;
  if (!Ap || !Bp) return -1;
  if (omp_in_parallel()) { /* a small product of a caller's parallel loop: this thread alone,
                            * without a nested team (libgomp's start of one was ~20% of
                            * bf16 attention's per-head products) */
    pack_tiles(Ap, A, lda, ta == CblasNoTrans, 0, M, K, Mt, Kt, 0, Mt * Kt);
    if (pack_b) pack_b_tiles(&b, 0, Nt * Kt);
    /* the packing's stores before the tile loads: GCC's _tile_loadd does not say it reads
     * memory (the team's path below has its barrier, a call, in between) */
    __asm__ volatile("" ::: "memory");
    est_amx_configure(8);
    run_blocks(Ap, Bp, Kt, 0, Mt, 0, Nt, alpha, beta, C, ldc, M, N, ep);
    _tile_release();
    return 0;
  }
  int threads = omp_get_max_threads();
  /* Work items of bm x bn tiles: 16 x 16 (256 x 256 of C) where there are enough of them,
   * narrower when not (one example of 128 tokens and N = 768 gives 3 items of the full
   * size for 2 threads: a third of the time one idles). The blocks' sums do not depend on
   * the items' size, so neither do the results. */
  int bm = BM / TILE_ROWS, bn = BN / TILE_WORDS;
  while (bn > 2 && ((Mt + bm - 1) / bm) * ((Nt + bn - 1) / bn) < ITEMS_PER_THREAD * threads) bn /= 2;
  while (bm > 2 && ((Mt + bm - 1) / bm) * ((Nt + bn - 1) / bn) < ITEMS_PER_THREAD * threads) bm /= 2;
  int mblocks = (Mt + bm - 1) / bm, nblocks = (Nt + bn - 1) / bn;
#pragma omp parallel num_threads(threads)
  {
    int from, to;
    est_team_share(Mt * Kt, &from, &to);
    pack_tiles(Ap, A, lda, ta == CblasNoTrans, 0, M, K, Mt, Kt, from, to);
    if (pack_b) {
      est_team_share(Nt * Kt, &from, &to);
      pack_b_tiles(&b, from, to);
    }
#pragma omp barrier
    est_amx_configure(8);
#pragma omp for schedule(dynamic, 1)
    for (int item = 0; item < mblocks * nblocks; item++) {
      int mt0 = item / nblocks * bm, nt0 = item % nblocks * bn;
      run_blocks(Ap, Bp, Kt, mt0, mt0 + bm < Mt ? mt0 + bm : Mt, nt0, nt0 + bn < Nt ? nt0 + bn : Nt, alpha, beta, C,
                 ldc, M, N, ep);
    }
    _tile_release();
  }
  return 0;
}
#else
int est_sgemm_amx(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha, const float *A, int lda,
                  const float *B, int ldb, float beta, float *C, int ldc, const est_gemm_epilogue *ep) {
  (void)ta, (void)tb, (void)M, (void)N, (void)K, (void)alpha, (void)A, (void)lda, (void)B, (void)ldb, (void)beta;
  (void)C, (void)ldc, (void)ep;
  return -1;
}
#endif
