/* bf16 GEMM on AVX512-BF16: C[M,N] = alpha op(A) op(B) + beta C with op(A), op(B) rounded
 * to bf16 and every product summed in fp32 (see gemm_kernels.h; reference twin: gemm_bf16_ref.c).
 *
 * VDPBF16PS multiplies 16 pairs of bf16 and adds both products into 16 fp32 lanes: 64 FLOP
 * per instruction, twice an fp32 FMA's 32. So both operands are packed as 32-bit words,
 * each holding a k-pair (element k in the low half, k+1 in the high half):
 *   B  -> Bw[kp][n]  (n padded to a multiple of NR): one zmm load = 16 columns' pairs
 *   A  -> one word per (m, kp), broadcast to every lane; NoTrans A keeps its row order
 *         (Aw[m][kp], just converted), Trans A is packed like B (Aw[kp][m])
 * and a 12x32 tile of C lives in 24 zmm accumulators while the kernel runs over k.
 * B's words are panel-major, Bw[n / NR][kp][NR], so a tile's kernel reads one stream; an
 * inference weight (read-only, core/frozen.h) is packed so once and kept.
 *
 * Blocking: rows of C go in blocks of MC (A's block stays in L2), k in blocks of KC pairs,
 * columns in tiles of NR (the B slice, KC x NR words = 32 KiB, stays in L1 across the
 * block's row tiles). Work items (row block, group of column tiles; several groups when
 * the rows alone give the threads too few items, as at one short request) are handed out
 * dynamically to the OpenMP threads. Every C element is summed over k in the same order
 * whichever item computes it, so C does not depend on the thread count. Conversion is
 * round-to-nearest-even (VCVTNEPS2BF16), as est_bf16_from_float. */
#include <immintrin.h>
#include <omp.h>
#include <string.h>

#include "core/frozen.h"
#include "nn/cpu_features.h"
#include "nn/gelu_avx512.h"
#include "nn/gemm_kernels.h"
#include "nn/gemm_util.h"
#include "nn/kernel_choice.h"
#include "nn/thread_buf.h"

#define BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

enum { MR = 12, NR = 32, MC = 16 * MR, KC = 256, ITEMS_PER_THREAD = 4 };

/* Packed operands: the calling thread's bf16 scratch slots (nn/thread_buf.h), shared with the
 * tile kernel (a thread runs one GEMM at a time), grown as needed and kept, so the step loop
 * stays allocation-free once the largest GEMM has run; handed back when the thread ends. */
static int32_t *scratch_get(est_thread_buf_slot slot, size_t words) {
  return (int32_t *)est_thread_buf(slot, words); /* floats and words are both 4 bytes */
}

/* dst[m][0..Kp) = bf16(src row m), rows `stride` words apart (est_unaliased_stride: the
 * kernel reads 12 rows at the same pair), rows M..Mp zero; Kp = 2 * kp2 (a zero pads odd K). */
BF16_TARGET static void pack_rows(int32_t *dst, int stride, const float *src, int ld, int M, int Mp, int K, int kp2,
                                  int from, int to) {
  for (int m = from; m < to; m++) {
    uint16_t *row = (uint16_t *)(dst + (size_t)m * stride);
    if (m >= M) {
      memset(row, 0, (size_t)kp2 * sizeof(int32_t));
      continue;
    }
    const float *s = src + (size_t)m * ld;
    for (int k = 0; k < 2 * kp2; k += 32) {
      __m512 lo = _mm512_maskz_loadu_ps(est_lanes16(K - k), s + k);
      __m512 hi = _mm512_maskz_loadu_ps(est_lanes16(K - k - 16), s + k + 16);
      __m512i h = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
      int n = 2 * kp2 - k;
      _mm512_mask_storeu_epi16(row + k, n >= 32 ? ~(__mmask32)0 : (__mmask32)((1u << n) - 1), h);
    }
  }
  (void)Mp;
}

/* The word of (pair kp, column c) in a packed operand of kp2 pairs and Cp columns: row-major
 * [kp][Cp] (Trans A), or panel-major [c / NR][kp][NR] (B). */
static inline size_t word_at(int panels, int kp2, int Cp, int kp, int c) {
  return panels ? ((size_t)(c / NR) * kp2 + kp) * NR + c % NR : (size_t)kp * Cp + c;
}

/* dst(kp, c) = pair(src[2kp][c], src[2kp+1][c]) for c < C, zero up to Cp: the k-pairs of a
 * matrix stored with k as its row index (NoTrans B, Trans A). Rows kp in [from, to). */
BF16_TARGET static void pack_pairs_of_rows(int32_t *dst, int panels, const float *src, int ld, int K, int kp2, int C,
                                           int Cp, int from, int to) {
  for (int kp = from; kp < to; kp++) {
    const float *r0 = src + (size_t)(2 * kp) * ld, *r1 = 2 * kp + 1 < K ? r0 + ld : NULL;
    for (int c = 0; c < Cp; c += 16) { /* 16 columns never cross a panel (NR = 32) */
      __mmask16 in = est_lanes16(C - c);
      __m512 x0 = _mm512_maskz_loadu_ps(in, r0 + c);
      __m512 x1 = r1 ? _mm512_maskz_loadu_ps(in, r1 + c) : _mm512_setzero_ps();
      __m512i w0 = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(x0));
      __m512i w1 = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(x1));
      _mm512_mask_storeu_epi32(dst + word_at(panels, kp2, Cp, kp, c), est_lanes16(Cp - c),
                               _mm512_or_si512(w0, _mm512_slli_epi32(w1, 16)));
    }
  }
}

/* w[i][j] <- w[j][i] for a 16 x 16 block of 32-bit words, in four rounds: round b swaps, in
 * every 2b x 2b block, the b x b block above the diagonal with the one below it (rows i and
 * i + b, columns with and without bit b), which after b = 8, 4, 2, 1 is the transpose. */
BF16_TARGET static void transpose16_words(__m512i w[16]) {
  for (int b = 8; b >= 1; b /= 2) {
    int keep[16], take[16];
    for (int j = 0; j < 16; j++) {
      keep[j] = j & b ? 16 + j - b : j; /* row i: its own left columns, row i + b's left ones moved right */
      take[j] = j & b ? 16 + j : j + b; /* row i + b: row i's right columns moved left, its own right ones */
    }
    const __m512i ik = _mm512_loadu_si512(keep), it = _mm512_loadu_si512(take);
    for (int i = 0; i < 16; i++)
      if (!(i & b)) {
        __m512i lo = w[i], hi = w[i + b];
        w[i] = _mm512_permutex2var_epi32(lo, ik, hi);
        w[i + b] = _mm512_permutex2var_epi32(lo, it, hi);
      }
  }
}

/* Bw(kp, n) = pair(src[n][2kp], src[n][2kp+1]), panel-major: Trans B (stored [N][K]), whose
 * pairs are adjacent in memory but belong in a column of Bw. 16 rows at a time: each row's
 * next 16 pairs are one vector, and their transpose gives each pair's 16 columns, stored
 * whole (a scatter per row, the first form, was ~3/4 of packing K^T for the attention's
 * scores). Rows n in [0, C); rows C up to a multiple of 16 are written zero, the rest of the
 * last panel is zeroed by the caller. */
BF16_TARGET static void pack_pairs_of_cols(int32_t *dst, const float *src, int ld, int K, int kp2, int C) {
  for (int n0 = 0; n0 < C; n0 += 16)
    for (int k = 0; k < 2 * kp2; k += 32) {
      __m512i w[16];
      for (int r = 0; r < 16; r++) {
        __m512 lo = _mm512_setzero_ps(), hi = _mm512_setzero_ps();
        if (n0 + r < C) {
          const float *s = src + (size_t)(n0 + r) * ld + k;
          lo = _mm512_maskz_loadu_ps(est_lanes16(K - k), s);
          hi = _mm512_maskz_loadu_ps(est_lanes16(K - k - 16), s + 16);
        }
        w[r] = (__m512i)_mm512_cvtne2ps_pbh(hi, lo); /* pairs kp = k/2 .. k/2+15 of row n0 + r */
      }
      transpose16_words(w); /* w[j]: pair k/2 + j of the 16 rows */
      for (int j = 0; j < 16 && k / 2 + j < kp2; j++)
        _mm512_storeu_si512(dst + word_at(1, kp2, 0, k / 2 + j, n0), w[j]);
    }
}

/* B's panels [t0, t1) (all of B's columns but those beyond N zero), tb as cblas. */
BF16_TARGET static void pack_b_panels(int32_t *bw, const float *B, int ldb, CBLAS_TRANSPOSE tb, int K, int N, int kp2,
                                      int t0, int t1) {
  if (t0 >= t1) return;
  int32_t *first = bw + (size_t)t0 * kp2 * NR;
  const int c0 = t0 * NR, c1 = t1 * NR < N ? t1 * NR : N;
  if (tb == CblasNoTrans) {
    pack_pairs_of_rows(first, 1, B + c0, ldb, K, kp2, c1 - c0, (t1 - t0) * NR, 0, kp2);
  } else {
    if (t1 * NR > N) memset(bw + (size_t)(t1 - 1) * kp2 * NR, 0, (size_t)kp2 * NR * sizeof(int32_t));
    pack_pairs_of_cols(first, B + (size_t)c0 * ldb, ldb, K, kp2, c1 - c0);
  }
}

static void make_packed(void *copy, void *ctx) {
  const est_weight_src *s = ctx;
  pack_b_panels(copy, s->B, s->ldb, s->tb, s->K, s->N, (s->K + 1) / 2, 0, (s->N + NR - 1) / NR);
}

/* The kept panel-major words of a read-only B (core/frozen.h), or NULL. */
static const int32_t *frozen_words(const float *B, int ldb, CBLAS_TRANSPOSE tb, int K, int N) {
  est_weight_src src = {B, ldb, K, N, tb};
  uint64_t key[4];
  est_weight_key(&src, 0x42463136 /* "BF16" */, key);
  const size_t words = (size_t)(K + 1) / 2 * ((size_t)(N + NR - 1) / NR * NR);
  return est_frozen_derived(B, est_weight_extent(&src), key, words * sizeof(int32_t), make_packed, &src);
}

/* What a tile's store does besides C = alpha acc + (C or the start value). */
typedef struct {
  int load_c;        /* add C's value (a later k block, or beta != 0) */
  const float *bias; /* the tile's bias columns, the start value when !load_c; or NULL (zero) */
  float *act;        /* the last k block: act[i][j] = gelu(C[i][j]), or NULL */
  long ld_act;
} store_op;

/* C[rows][cols] (rows <= MR, cols <= NR) = alpha * sum over kpairs of A-pairs . B-pairs + (C,
 * or op's start value), then op's GELU; R rows computed (a constant where inlined).
 * a: word of (row i, pair p) at a[i * a_m + p * a_k]; b: pair p's NR columns at b + p * b_k. */
BF16_TARGET static inline __attribute__((always_inline)) void kernel_body(int kpairs, const int32_t *a, long a_m,
                                                                          long a_k, const int32_t *b, long b_k,
                                                                          float *c, long ldc, float alpha, int R,
                                                                          int rows, int cols, const store_op *op) {
  /* C's tile (and GELU's) is touched only after the k loop: its lines asked for now (Base
   * batch-32 products 5-12% faster, bench/README.md, "A's rows on distinct cache sets") */
  est_prefetch_tile_rows(c, ldc, rows);
  if (op->act) est_prefetch_tile_rows(op->act, op->ld_act, rows);
  __m512 acc[MR][2];
#pragma GCC unroll 12
  for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int p = 0; p < kpairs; p++) {
    __m512bh b0 = (__m512bh)_mm512_loadu_si512(b + (size_t)p * b_k);
    __m512bh b1 = (__m512bh)_mm512_loadu_si512(b + (size_t)p * b_k + 16);
    const int32_t *ap = a + (size_t)p * a_k;
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++)
      if (i < R) {
        __m512bh ai = (__m512bh)_mm512_set1_epi32(ap[i * a_m]);
        acc[i][0] = _mm512_dpbf16_ps(acc[i][0], ai, b0);
        acc[i][1] = _mm512_dpbf16_ps(acc[i][1], ai, b1);
      }
  }
  __mmask16 m0 = est_lanes16(cols), m1 = est_lanes16(cols - 16);
  __m512 va = _mm512_set1_ps(alpha);
  __m512 bias0 = _mm512_setzero_ps(), bias1 = _mm512_setzero_ps();
  if (op->bias) bias0 = _mm512_maskz_loadu_ps(m0, op->bias), bias1 = _mm512_maskz_loadu_ps(m1, op->bias + 16);
#pragma GCC unroll 12
  for (int i = 0; i < MR; i++)
    if (i < rows) {
      float *ci = c + (size_t)i * ldc;
      /* C (or, in the first k block of a beta = 0 product, the bias or zero) + alpha acc:
       * the bits of the separate route (C = bias, then C += alpha acc) */
      __m512 c0 = op->load_c ? _mm512_maskz_loadu_ps(m0, ci) : bias0;
      __m512 c1 = op->load_c ? _mm512_maskz_loadu_ps(m1, ci + 16) : bias1;
      c0 = _mm512_fmadd_ps(acc[i][0], va, c0);
      c1 = _mm512_fmadd_ps(acc[i][1], va, c1);
      _mm512_mask_storeu_ps(ci, m0, c0);
      _mm512_mask_storeu_ps(ci + 16, m1, c1);
      if (op->act) { /* last k block: the FFN's tanh-GELU, est_gelu_row's values */
        float *out = op->act + (size_t)i * op->ld_act;
        _mm512_mask_storeu_ps(out, m0, est_gelu16(c0));
        _mm512_mask_storeu_ps(out + 16, m1, est_gelu16(c1));
      }
    }
}

/* The kernel specialized for each row count: a short last tile (a 16-token request's 4
 * rows after 12) computes its rows only. */
BF16_TARGET static void kernel(int kpairs, const int32_t *a, long a_m, long a_k, const int32_t *b, long b_k, float *c,
                               long ldc, float alpha, int rows, int cols, const store_op *op) {
#define ROWS(r) kernel_body(kpairs, a, a_m, a_k, b, b_k, c, ldc, alpha, r, rows, cols, op)
  EST_SWITCH_ROWS_12(rows, ROWS)
#undef ROWS
}

/* One product's packed operands and shape, as its work items read them. */
typedef struct {
  int M, N, kp2;
  float alpha, beta;
  const int32_t *aw; /* A's words: row i, pair p at aw[i a_m + p a_k] */
  long a_m, a_k;
  const int32_t *b_words; /* B's panels */
  float *C;
  int ldc;
  const est_gemm_epilogue *ep;
  int groups, tiles; /* column groups per row block; column tiles of NR */
} dp_product;

/* Work item it: row block it / groups, column group it % groups, every k block in order. */
static void run_item(const dp_product *P, int it) {
  const int groups = P->groups, tiles = P->tiles, kp2 = P->kp2, M = P->M, N = P->N;
  const est_gemm_epilogue *ep = P->ep;
  int rb = it / groups, g = it % groups;
  int m0 = rb * MC, m1 = m0 + MC < M ? m0 + MC : M;
  int t0 = (int)((long)tiles * g / groups), t1 = (int)((long)tiles * (g + 1) / groups);
  for (int k0 = 0; k0 < kp2; k0 += KC) {
    int kc = kp2 - k0 < KC ? kp2 - k0 : KC;
    const int last = k0 + kc == kp2;
    for (int t = t0; t < t1; t++) {
      int n0 = t * NR;
      for (int m = m0; m < m1; m += MR) {
        store_op op = {k0 > 0 || P->beta != 0.0f, ep && ep->bias ? ep->bias + n0 : NULL,
                       last && ep && ep->gelu_out ? ep->gelu_out + (size_t)m * ep->ld_gelu + n0 : NULL,
                       ep ? ep->ld_gelu : 0};
        kernel(kc, P->aw + (size_t)m * P->a_m + (size_t)k0 * P->a_k, P->a_m, P->a_k,
               P->b_words + ((size_t)t * kp2 + k0) * NR, NR, P->C + (size_t)m * P->ldc + n0, P->ldc, P->alpha,
               m1 - m < MR ? m1 - m : MR, N - n0 < NR ? N - n0 : NR, &op);
      }
    }
  }
}

int est_sgemm_bf16_ep(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha, const float *A,
                      int lda, const float *B, int ldb, float beta, float *C, int ldc, const est_gemm_epilogue *ep) {
  if (est_kernel_amx()) return est_sgemm_amx(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, ep);
  return est_sgemm_bf16_dp_ep(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, ep);
}

void est_sgemm_bf16(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha, const float *A, int lda,
                    const float *B, int ldb, float beta, float *C, int ldc) {
  /* the tile unit where the CPU, Linux and the kernel choice allow it (gemm_amx.c), else
   * VDPBF16PS */
  if (est_kernel_amx() && est_sgemm_amx(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, NULL) == 0) return;
  est_sgemm_bf16_dp(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void est_sgemm_bf16_dp(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha, const float *A,
                       int lda, const float *B, int ldb, float beta, float *C, int ldc) {
  est_sgemm_bf16_dp_ep(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, NULL);
}

/* A's words, packed by the team that runs the products: NoTrans A by rows (aw[m][kp], rows
 * a_stride words apart), Trans A by pairs (aw[kp][m]); rows M..Mp zero. */
typedef struct {
  CBLAS_TRANSPOSE ta;
  const float *A;
  int lda, M, Mp, K, kp2, a_stride;
  int32_t *aw;
} a_source;

/* The calling thread's share of A's packing in the products' team, or all of it (in_team 0:
 * one thread, maybe inside a caller's own parallel loop). */
static void pack_a_share(const a_source *a, int in_team) {
  int from = 0, to = a->ta == CblasNoTrans ? a->Mp : a->kp2;
  if (in_team) est_team_share(to, &from, &to);
  if (a->ta == CblasNoTrans) pack_rows(a->aw, a->a_stride, a->A, a->lda, a->M, a->Mp, a->K, a->kp2, from, to);
  else pack_pairs_of_rows(a->aw, 0, a->A, a->lda, a->K, a->kp2, a->M, a->Mp, from, to);
}

/* A B to pack into bw with the products' A (one product, its B not kept), or bw NULL. */
typedef struct {
  const float *B;
  int ldb;
  CBLAS_TRANSPOSE tb;
  int32_t *bw;
} b_source;

/* Column groups per row block for a product tiles column tiles wide: one, or more (up to one
 * a tile) when the rblocks row blocks give fewer than want items. */
static int column_groups(int tiles, int rblocks, int want) {
  int groups = 1;
  if (rblocks < want) {
    groups = (want + rblocks - 1) / rblocks;
    if (groups > tiles) groups = tiles;
  }
  return groups;
}

/* count products of A (their rows are A's: rblocks row blocks each) on threads: A packed (and
 * b's B) by the team, then every product's items handed out dynamically, row block outer, so
 * a row block's words are read by the products in turn while they are in L2. */
static void run_products(const a_source *a, const b_source *b, const dp_product *P, int count, int threads) {
  const int rblocks = (P[0].M + MC - 1) / MC;
  int items_per_rblock = 0;
  for (int j = 0; j < count; j++) items_per_rblock += P[j].groups;
  const int items = rblocks * items_per_rblock;
  if (threads == 1) { /* inside a caller's parallel loop (attention's pairs) or one thread: no
                       * team of one, whose start cost ~20% of such a small product (AMX's) */
    pack_a_share(a, 0);
    if (b->bw) pack_b_panels(b->bw, b->B, b->ldb, b->tb, a->K, P[0].N, a->kp2, 0, P[0].tiles);
    for (int j = 0; j < count; j++)
      for (int it = 0; it < rblocks * P[j].groups; it++) run_item(P + j, it);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    pack_a_share(a, 1);
    if (b->bw) {
      int from, to;
      est_team_share(P[0].tiles, &from, &to);
      pack_b_panels(b->bw, b->B, b->ldb, b->tb, a->K, P[0].N, a->kp2, from, to);
    }
#pragma omp barrier
#pragma omp for schedule(dynamic, 1)
    for (int it = 0; it < items; it++) {
      int rb = it / items_per_rblock, g = it % items_per_rblock, j = 0;
      while (g >= P[j].groups) g -= P[j].groups, j++;
      run_item(P + j, rb * P[j].groups + g);
    }
  }
}

int est_sgemm_bf16_dp_ep(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha, const float *A,
                         int lda, const float *B, int ldb, float beta, float *C, int ldc, const est_gemm_epilogue *ep) {
  if (ep && (ep->gelu_pre || beta != 0.0f || K <= 0 || alpha == 0.0f)) return -1; /* the separate route's */
  if (M <= 0 || N <= 0) return 0;
  /* beta = 0 needs no pass: the first k block starts from the bias or zero */
  if (beta != 1.0f && beta != 0.0f)
    for (int m = 0; m < M; m++)
      for (int n = 0; n < N; n++) C[(size_t)m * ldc + n] *= beta;
  if (K <= 0 || alpha == 0.0f) {
    if (beta == 0.0f)
      for (int m = 0; m < M; m++) memset(C + (size_t)m * ldc, 0, (size_t)N * sizeof(float));
    return 0;
  }
  int kp2 = (K + 1) / 2, Mp = (M + MR - 1) / MR * MR, Np = (N + NR - 1) / NR * NR, tiles = Np / NR;
  const int32_t *kept = frozen_words(B, ldb, tb, K, N);
  const int a_stride = ta == CblasNoTrans ? est_unaliased_stride(kp2) : kp2; /* words between A's packed rows */
  int32_t *aw = scratch_get(EST_TBUF_BF16_A, (size_t)Mp * a_stride);
  int32_t *bw = kept ? NULL : scratch_get(EST_TBUF_BF16_B, (size_t)kp2 * Np);
  if (!aw || (!kept && !bw)) { /* out of memory for the packed copies: the fp32 GEMM needs none */
    if (ep) return -1;                                                                   /* C untouched */
    cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc); /* C holds beta C */
    return 0;
  }
  long a_m = ta == CblasNoTrans ? a_stride : 1, a_k = ta == CblasNoTrans ? 1 : Mp;
  int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  int groups = column_groups(tiles, (M + MC - 1) / MC, threads > 1 ? ITEMS_PER_THREAD * threads : 0);
  const dp_product P = {M, N, kp2, alpha, beta, aw, a_m, a_k, kept ? kept : bw, C, ldc, ep, groups, tiles};
  const a_source a = {ta, A, lda, M, Mp, K, kp2, a_stride, aw};
  const b_source b = {B, ldb, tb, bw};
  run_products(&a, &b, &P, 1, threads);
  return 0;
}

int est_sgemm_bf16_shared(int M, int K, const float *A, int lda, const est_gemm_product *prods, int count) {
  if (!est_cpu_has_avx512_bf16() || M <= 0 || K <= 0 || count <= 0 || count > EST_GEMM_MAX_SHARED) return -1;
  const int kp2 = (K + 1) / 2, Mp = (M + MR - 1) / MR * MR, a_stride = est_unaliased_stride(kp2);
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads(), rblocks = (M + MC - 1) / MC;
  /* each product cut as if it ran alone (the team's items shared among the products instead,
   * fewer and wider, measured level: bench/README.md) */
  const int want = threads > 1 ? ITEMS_PER_THREAD * threads : 0;
  dp_product P[EST_GEMM_MAX_SHARED];
  for (int j = 0; j < count; j++) {
    const est_gemm_product *p = prods + j;
    if (p->N <= 0 || (p->ep && p->ep->gelu_pre)) return -1;
    const int32_t *kept = frozen_words(p->B, p->ldb, CblasNoTrans, K, p->N);
    if (!kept) return -1; /* not an inference weight: each product packs its own B */
    const int tiles = (p->N + NR - 1) / NR;
    P[j] = (dp_product){M, p->N, kp2, 1.0f, 0.0f, NULL, a_stride, 1, kept, p->C, p->ldc, p->ep,
                        column_groups(tiles, rblocks, want), tiles};
  }
  int32_t *aw = scratch_get(EST_TBUF_BF16_A, (size_t)Mp * a_stride);
  if (!aw) return -1;
  for (int j = 0; j < count; j++) P[j].aw = aw;
  const a_source a = {CblasNoTrans, A, lda, M, Mp, K, kp2, a_stride, aw};
  const b_source none = {0};
  run_products(&a, &none, P, count, threads);
  return 0;
}
