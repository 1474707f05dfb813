/* fp32 GEMM on AVX-512F: C[M,N] = alpha op(A) op(B) + beta C, with an optional epilogue
 * (bias per column, tanh-GELU into a second output) applied to each C tile while it is in
 * registers. Reference twin: gemm_f32_ref.c; which GEMM runs for which shape: gemm.c.
 *
 * Same structure as the bf16 kernel (gemm_bf16.c), with fp32 FMAs:
 *   B  -> packed once per call, tile-major: Bp[n / NR][k][NR] (n padded to NR with zeros),
 *         so one kernel's B stream is contiguous and two zmm loads give a k's 32 columns
 *   A  -> NoTrans A is not transposed: the kernel broadcasts a tile's rows (k contiguous),
 *         at most 12, a block's rows cut into tiles as even as can be (even_tile_rows), and
 *         reads only its rows. Where A's rows share L1 sets, a row block's k block is
 *         copied per worker, row for row, to a stride of an odd number of lines
 *         (est_unaliased_stride): A's own stride is often a multiple of 4 KiB (the FFN's
 *         3072 floats), which puts a tile's 12 rows in one 8-way L1 set; the copy took 128
 *         x 768 x 3072 from ~178 to ~215 GFLOP/s on 2 Zen 4 cores (bench/README.md, "A's
 *         rows on distinct cache sets"), and costs one load and store per element per item
 *         where a transposing pack (as BLIS does) would cost a strided store per element:
 *         on Tiny's N = 128 a quarter of the FMA time. Trans A (stored [K][M]) has a tile's
 *         12 values next to each other but each k on another line (and page): a row block's
 *         k block is copied to [tile][k][12] per worker (one masked 12-float load/store per
 *         k).
 *   C  -> a 12x32 tile lives in 24 zmm accumulators while the kernel runs over a k block;
 *         its lines are prefetched when the kernel starts.
 *
 * Blocking: k in blocks of KC (the B slice of a tile, KC x NR floats = 96 KiB, stays in L2
 * while the kernel walks a block's row tiles: two loads per 24 FMAs are well within L2's
 * bandwidth, and BERT's K <= 768 then needs no second pass over C; KC = 256, an L1-sized
 * slice, was 2-7% slower on Base's shapes, bench/README.md), rows in blocks of MC, columns in groups of
 * tiles when rows alone give the threads too few blocks. Work items (row block, column
 * group) are handed out dynamically to the OpenMP threads. Every C element is summed over
 * k in the same order (k blocks in turn, k ascending inside each) whatever the thread
 * count or the item that computes it, so results do not depend on the thread count. */
#include <immintrin.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/frozen.h"
#include "nn/cpu_features.h"
#include "nn/fastmath.h"
#include "nn/gelu_avx512.h"
#include "nn/gemm_kernels.h"
#include "nn/gemm_util.h"
#include "nn/thread_buf.h"

#define F32_TARGET __attribute__((target("avx512f")))

enum { MR = 12, NR = 32, MC = 16 * MR, KC = 768, GROUP_TILES = 8, ITEMS_PER_THREAD = 4 };

/* Bp[t][k][j] = op(B)[k][t NR + j] for the tiles t in [t0, t1), zero where t NR + j >= N. */
F32_TARGET static void pack_b(float *bp, const float *B, int ldb, int trans, int K, int N, int t0, int t1) {
  for (int t = t0; t < t1; t++) {
    float *dst = bp + (size_t)t * K * NR;
    int n0 = t * NR, cols = N - n0 < NR ? N - n0 : NR;
    if (!trans) { /* B [K][N]: a tile row is a contiguous piece of B's row k */
      __mmask16 m0 = est_lanes16(cols), m1 = est_lanes16(cols - 16);
      for (int k = 0; k < K; k++) {
        const float *s = B + (size_t)k * ldb + n0;
        _mm512_store_ps(dst + (size_t)k * NR, _mm512_maskz_loadu_ps(m0, s));
        _mm512_store_ps(dst + (size_t)k * NR + 16, _mm512_maskz_loadu_ps(m1, s + 16));
      }
    } else if (ldb > INT32_MAX / 16) { /* B [N][K], rows too far apart for gather offsets */
      if (cols < NR) memset(dst, 0, (size_t)K * NR * sizeof(float));
      for (int j = 0; j < cols; j++)
        for (int k = 0; k < K; k++) dst[(size_t)k * NR + j] = B[(size_t)(n0 + j) * ldb + k];
    } else { /* B [N][K]: column j of the tile is B's row n0 + j; a k's 16 columns are one
              * gather down 16 rows (attention packs K^T per (example, head), where a
              * scalar copy was ~3% of Tiny's inference) */
      __m512i rows16 = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                          _mm512_set1_epi32(ldb));
      for (int h = 0; h < 2; h++) {
        __mmask16 m = est_lanes16(cols - 16 * h);
        const float *s = B + (size_t)(n0 + 16 * h) * ldb;
        for (int k = 0; k < K; k++)
          _mm512_store_ps(dst + (size_t)k * NR + 16 * h,
                          _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, rows16, s + k, 4));
      }
    }
  }
}

/* What the store of a tile does besides C = alpha acc + (C or 0). */
typedef struct {
  int load_c;       /* add C's current value (beta = 1, or a later k block) */
  const float *bias; /* bias[n] added (first k block only), or NULL */
  float *act;       /* last k block: act[m][n] = gelu(C[m][n]), or NULL */
  long ld_act;
  const float *pre; /* last k block: C[m][n] *= gelu'(pre[m][n]), or NULL */
  float *pre_act;   /* and then pre_act[m][n] = gelu(pre[m][n]), or NULL */
  long ld_pre;
} store_op;

/* C[rows][cols] (rows <= MR, cols <= NR) = alpha * sum_p A(i,p) Bp[p][j] + store extras.
 * A(i, p) is a[i * a_m + p * a_k]: a_m = lda, a_k = 1 for NoTrans A; a_m = 1, a_k = lda
 * for Trans A and the tail copy. */
F32_TARGET static inline __attribute__((always_inline)) void kernel_body(int kc, const float *a, long a_m, long a_k,
                                                                         const float *b, float *c, long ldc,
                                                                         float alpha, int R, int rows, int cols,
                                                                         const store_op *op, int n0) {
  /* C's tile (and GELU's) is touched only after the k loop: its lines asked for now */
  est_prefetch_tile_rows(c, ldc, rows);
  if (op->act) est_prefetch_tile_rows(op->act, op->ld_act, rows);
  if (op->pre) est_prefetch_tile_rows(op->pre, op->ld_pre, rows);
  __m512 acc[MR][2];
#pragma GCC unroll 12
  for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int p = 0; p < kc; p++) {
    __m512 b0 = _mm512_load_ps(b + (size_t)p * NR), b1 = _mm512_load_ps(b + (size_t)p * NR + 16);
    const float *ap = a + (size_t)p * a_k;
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++)
      if (i < R) {
        __m512 ai = _mm512_set1_ps(ap[i * a_m]);
        acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
        acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
      }
  }
  __mmask16 m0 = est_lanes16(cols), m1 = est_lanes16(cols - 16);
  __m512 va = _mm512_set1_ps(alpha);
  __m512 bias0 = _mm512_setzero_ps(), bias1 = _mm512_setzero_ps();
  if (op->bias) bias0 = _mm512_maskz_loadu_ps(m0, op->bias + n0), bias1 = _mm512_maskz_loadu_ps(m1, op->bias + n0 + 16);
#pragma GCC unroll 12
  for (int i = 0; i < MR; i++)
    if (i < rows) {
      float *ci = c + (size_t)i * ldc;
      __m512 c0 = bias0, c1 = bias1;
      if (op->load_c) c0 = _mm512_add_ps(c0, _mm512_maskz_loadu_ps(m0, ci)), c1 = _mm512_add_ps(c1, _mm512_maskz_loadu_ps(m1, ci + 16));
      c0 = _mm512_fmadd_ps(acc[i][0], va, c0);
      c1 = _mm512_fmadd_ps(acc[i][1], va, c1);
      if (op->pre) { /* the backward through a GELU: the passes' code (gelu_avx512.h), their values */
        const float *pi = op->pre + (size_t)i * op->ld_pre;
        __m512 g0, g1;
        est_gelu_backward16(c0, _mm512_maskz_loadu_ps(m0, pi), &c0, &g0);
        est_gelu_backward16(c1, _mm512_maskz_loadu_ps(m1, pi + 16), &c1, &g1);
        if (op->pre_act) {
          float *out = op->pre_act + (size_t)i * op->ld_pre;
          _mm512_mask_storeu_ps(out, m0, g0);
          _mm512_mask_storeu_ps(out + 16, m1, g1);
        }
      }
      _mm512_mask_storeu_ps(ci, m0, c0);
      _mm512_mask_storeu_ps(ci + 16, m1, c1);
      if (op->act) { /* the GELU est_activation_forward runs too (gelu_avx512.h): its values */
        float *out = op->act + (size_t)i * op->ld_act;
        _mm512_mask_storeu_ps(out, m0, est_gelu16(c0));
        _mm512_mask_storeu_ps(out + 16, m1, est_gelu16(c1));
      }
    }
}

/* The kernels: A(i, p) at a[i lda + p] (NoTrans A, where it is or copied apart:
 * kernel_rows, specialized for each row count, so a tile of fewer than 12 rows computes
 * only its rows, and reads no row past A: at one 16-token request, 8 + 8 rows)
 * or at a[i + p lda] (Trans A packed, or a copied tail: kernel_cols, always MR rows). */
F32_TARGET static void kernel_rows(int kc, const float *a, long lda, const float *b, float *c, long ldc, float alpha,
                                   int rows, int cols, const store_op *op, int n0) {
#define PACKED(r) kernel_body(kc, a, lda, 1, b, c, ldc, alpha, r, rows, cols, op, n0)
  EST_SWITCH_ROWS_12(rows, PACKED)
#undef PACKED
}
F32_TARGET static void kernel_cols(int kc, const float *a, long lda, const float *b, float *c, long ldc, float alpha,
                                   int rows, int cols, const store_op *op, int n0) {
  kernel_body(kc, a, 1, lda, b, c, ldc, alpha, MR, rows, cols, op, n0);
}

/* Trans A (stored [K][M]): the block's rows [m0, m1) x k block [k0, k0 + kc) copied to
 * ap[tile][p][i] (MR a tile, zeros below M). The source rows are contiguous already, so
 * this is a 12-float copy per k; it spares the kernel 256 different lines (and pages,
 * with lda = 3072) per call, and the kernel reads one stream. */
F32_TARGET static void pack_a_trans(float *ap, const float *A, int lda, int k0, int kc, int m0, int m1) {
  for (int m = m0; m < m1; m += MR) {
    int rows = m1 - m < MR ? m1 - m : MR;
    __mmask16 in = est_lanes16(rows);
    float *dst = ap + (size_t)(m - m0) * kc;
    for (int p = 0; p < kc; p++)
      _mm512_mask_storeu_ps(dst + (size_t)p * MR, 0x0FFF, _mm512_maskz_loadu_ps(in, A + (size_t)(k0 + p) * lda + m));
  }
}

/* NoTrans A: the block's rows [m0, m1) x k block [k0, k0 + kc) copied to ap[m - m0][p] at
 * row stride lds. */
F32_TARGET static void copy_rows_apart(float *ap, int lds, const float *A, int lda, int k0, int kc, int m0, int m1) {
  for (int m = m0; m < m1; m++) {
    const float *s = A + (size_t)m * lda + k0;
    float *d = ap + (size_t)(m - m0) * lds;
    for (int p = 0; p < kc; p += 16) _mm512_store_ps(d + p, _mm512_maskz_loadu_ps(est_lanes16(kc - p), s + p));
  }
}

/* Whether NoTrans A's rows, lda floats apart, put 3 or more of a tile's 12 rows on one L1
 * set (est_unaliased_stride says why that costs): then the copy pays. Where they do not
 * (lda 128, Tiny's; 384, MiniLM's) the copy is pure cost, ~8% of Tiny's products, whose
 * items have only 4 column tiles to share it. */
static int rows_share_sets(int lda) {
  int per_set[64] = {0}, most = 0;
  for (int i = 0; i < MR; i++) {
    int set = (int)((size_t)i * lda * sizeof(float) / 64 % 64);
    if (++per_set[set] > most) most = per_set[set];
  }
  return most >= 3;
}

/* Rows in row tile i of a span of rows split into the fewest tiles of at most MR, their
 * sizes as even as can be: 16 rows are 8 + 8, not 12 + 4. A tile's kernel loads a k's 32
 * weights for its rows' FMAs; a 4-row tile does 8 FMAs a load pair and ran at 59% of one
 * Zen 4 core's FMA peak where 8 rows ran at 84% (`build/bench_gemm 1 M 256 256`), so a
 * 16-token request's products lost a tenth to their last 4 rows. */
static inline int even_tile_rows(int span, int i) {
  int tiles = (span + MR - 1) / MR;
  return span / tiles + (i < span % tiles);
}

/* Rows [m0, m1) x tiles [t0, t1) of C, every k block. */
F32_TARGET static void run_item(int ta, int N, int K, float alpha, const float *A, int lda, const float *bp,
                                float beta, float *C, int ldc, const est_gemm_epilogue *ep, int m0, int m1, int t0,
                                int t1) {
  float tail[KC * MR] __attribute__((aligned(64))); /* 36 KiB of stack */
  /* Per k block, Trans A is packed (pack_a_trans), and NoTrans A whose rows share L1 sets
   * is copied row for row at a stride whose lines fall on distinct ones (copy_rows_apart):
   * one pass over the block's A, which every column tile of the item then reads. An item
   * of one column tile (a short batch's products of 256 columns or fewer) reads the block
   * once either way, so the copy would only add a pass: 16 x 256 x 256 ran at 160 GFLOP/s
   * with it, 176 without (bench/README.md, "Q, K and V in one team"). Without the buffer
   * (out of memory) A is read where it is, for the same bits. */
  const int lds = est_unaliased_stride(KC);
  float *ap = ta                                   ? est_thread_buf(EST_TBUF_GEMM_A, (size_t)MC * KC)
              : t1 - t0 > 1 && rows_share_sets(lda) ? est_thread_buf(EST_TBUF_GEMM_A, (size_t)MC * lds)
                                                   : NULL;
  const int tail_m = m0 + (m1 - m0) / MR * MR, tail_rows = m1 - tail_m; /* a last row tile short of MR */
  for (int k0 = 0; k0 < K; k0 += KC) {
    int kc = K - k0 < KC ? K - k0 : KC;
    if (ap && ta) pack_a_trans(ap, A, lda, k0, kc, m0, m1);
    else if (ap) copy_rows_apart(ap, lds, A, lda, k0, kc, m0, m1);
    else if (ta && tail_rows) /* no block buffer: a short last tile's Trans A copied to tail[p][i] */
      for (int p = 0; p < kc; p++)
        for (int i = 0; i < MR; i++) tail[p * MR + i] = i < tail_rows ? A[(size_t)(k0 + p) * lda + tail_m + i] : 0.0f;
    const int last = k0 + kc == K;
    store_op op = {k0 > 0 || beta != 0.0f, k0 == 0 && ep ? ep->bias : NULL,
                   last && ep ? ep->gelu_out : NULL, ep ? ep->ld_gelu : 0,
                   last && ep ? ep->gelu_pre : NULL, last && ep ? ep->gelu_act : NULL, ep ? ep->ld_pre : 0};
    for (int t = t0; t < t1; t++) {
      int n0 = t * NR, cols = N - n0 < NR ? N - n0 : NR;
      const float *b = bp + (size_t)t * K * NR + (size_t)k0 * NR;
      /* NoTrans A in even row tiles; Trans A's packing is by whole tiles of MR from m0 */
      for (int m = m0, i = 0, rows; m < m1; m += rows, i++) {
        rows = ta ? (m1 - m < MR ? m1 - m : MR) : even_tile_rows(m1 - m0, i);
        float *c = C + (size_t)m * ldc + n0;
        store_op o = op;
        if (o.act) o.act += (size_t)m * o.ld_act + n0;
        if (o.pre) o.pre += (size_t)m * o.ld_pre + n0;
        if (o.pre_act) o.pre_act += (size_t)m * o.ld_pre + n0;
        if (!ta && ap) kernel_rows(kc, ap + (size_t)(m - m0) * lds, lds, b, c, ldc, alpha, rows, cols, &o, n0);
        else if (!ta) kernel_rows(kc, A + (size_t)m * lda + k0, lda, b, c, ldc, alpha, rows, cols, &o, n0);
        else if (ap) kernel_cols(kc, ap + (size_t)(m - m0) * kc, MR, b, c, ldc, alpha, rows, cols, &o, n0);
        else if (rows < MR) kernel_cols(kc, tail, MR, b, c, ldc, alpha, rows, cols, &o, n0);
        else kernel_cols(kc, A + (size_t)k0 * lda + m, lda, b, c, ldc, alpha, rows, cols, &o, n0);
      }
    }
  }
}

static void make_packed(void *copy, void *ctx) {
  const est_weight_src *s = ctx;
  pack_b(copy, s->B, s->ldb, s->tb != CblasNoTrans, s->K, s->N, 0, (s->N + NR - 1) / NR);
}

const float *est_f32_frozen_packed(const float *B, int ldb, CBLAS_TRANSPOSE tb, int K, int N) {
  if (K <= 0 || N <= 0) return NULL;
  est_weight_src src = {B, ldb, K, N, tb};
  uint64_t key[4];
  est_weight_key(&src, 0x46333250 /* "F32P" */, key);
  return est_frozen_derived(B, est_weight_extent(&src), key, est_f32_packed_floats(K, N) * sizeof(float), make_packed,
                            &src);
}

size_t est_f32_packed_floats(int K, int N) { return (size_t)((N + NR - 1) / NR) * (size_t)K * NR; }

F32_TARGET void est_f32_pack(float *bp, const float *B, int ldb, CBLAS_TRANSPOSE tb, int K, int N) {
  pack_b(bp, B, ldb, tb != CblasNoTrans, K, N, 0, (N + NR - 1) / NR);
}

F32_TARGET void est_f32_gemm_packed(int M, int N, int K, float alpha, const float *A, int lda, const float *bp,
                                    float *C, int ldc) {
  int tiles = (N + NR - 1) / NR;
  for (int m0 = 0; m0 < M; m0 += MC)
    run_item(0, N, K, alpha, A, lda, bp, 0.0f, C, ldc, NULL, m0, m0 + MC < M ? m0 + MC : M, 0, tiles);
}

/* Column groups per row block of a product tiles column tiles wide: groups at most
 * GROUP_TILES tiles wide, so an item's C block (MC x 256 floats, 192 KiB) stays in L2 across
 * its k blocks (a 3072-wide block went to memory and back once per k block: -25%), and more
 * of them, up to one a tile, when the rblocks row blocks give fewer than want items. */
static int column_groups(int tiles, int rblocks, int want) {
  int groups = (tiles + GROUP_TILES - 1) / GROUP_TILES;
  if (rblocks * groups < want) {
    groups = (want + rblocks - 1) / rblocks;
    if (groups > tiles) groups = tiles;
  }
  return groups;
}

/* One est_sgemm_f32 product cut into items: row block it / groups (MC rows) times column
 * group it % groups (of the packed B's tiles); every thread count runs the same items. */
typedef struct gemm_job {
  int trans_a, M, N, K;
  float alpha, beta;
  const float *A, *bp;
  int lda, ldc;
  float *C;
  const est_gemm_epilogue *ep;
  int tiles, groups;
} gemm_job;

static void run_job_item(const gemm_job *j, int it) {
  const int rb = it / j->groups, g = it % j->groups;
  const int m0 = rb * MC, m1 = m0 + MC < j->M ? m0 + MC : j->M;
  const int t0 = (int)((long)j->tiles * g / j->groups), t1 = (int)((long)j->tiles * (g + 1) / j->groups);
  run_item(j->trans_a, j->N, j->K, j->alpha, j->A, j->lda, j->bp, j->beta, j->C, j->ldc, j->ep, m0, m1, t0, t1);
}

int est_sgemm_f32(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha, const float *A, int lda,
                  const float *B, int ldb, float beta, float *C, int ldc, const est_gemm_epilogue *ep) {
  if (!est_cpu_has_avx512f()) return -1;
  if (M <= 0 || N <= 0) return 0;
  if (K <= 0 || alpha == 0.0f) return -1; /* nothing to multiply: the caller's BLAS path scales C */
  int tiles = (N + NR - 1) / NR;
  /* a frozen weight's packed form is kept (core/frozen.h): inference packs each weight once */
  const float *kept = est_f32_frozen_packed(B, ldb, tb, K, N);
  float *bp = kept ? NULL : est_thread_buf(EST_TBUF_GEMM_B, (size_t)tiles * K * NR);
  if (!kept && !bp) return -1; /* out of memory for the packed copy: the caller's BLAS path needs none */
  if (beta != 0.0f && beta != 1.0f)
    for (int m = 0; m < M; m++)
      for (int n = 0; n < N; n++) C[(size_t)m * ldc + n] *= beta;
  int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  int rblocks = (M + MC - 1) / MC;
  int groups = column_groups(tiles, rblocks, threads > 1 ? ITEMS_PER_THREAD * threads : 0);
  int items = rblocks * groups;
  const gemm_job job = {.trans_a = ta != CblasNoTrans, .M = M, .N = N, .K = K, .alpha = alpha, .A = A, .lda = lda,
                        .bp = kept ? kept : bp, .beta = beta, .C = C, .ldc = ldc, .ep = ep, .tiles = tiles,
                        .groups = groups};
  if (threads == 1 || items == 1) {
    /* One thread: the calling one, without a team. Inside a caller's parallel loop (the
     * attention backward's per-(example, head) products) a `parallel num_threads(1)` still
     * started a nested team each call: 9216 of the 9707 parallel regions of a Base training
     * step (docs/performance.md §6). The same items in the same order, so the same bits. */
    if (!kept) pack_b(bp, B, ldb, tb != CblasNoTrans, K, N, 0, tiles);
    for (int it = 0; it < items; it++) run_job_item(&job, it);
    return 0;
  }
#pragma omp parallel num_threads(items < threads ? items : threads)
  {
    int from, to;
    est_team_share(tiles, &from, &to);
    if (!kept) {
      pack_b(bp, B, ldb, tb != CblasNoTrans, K, N, from, to);
#pragma omp barrier
    }
#pragma omp for schedule(dynamic, 1)
    for (int it = 0; it < items; it++) run_job_item(&job, it);
  }
  return 0;
}

int est_sgemm_f32_shared(int M, int K, const float *A, int lda, const est_gemm_product *prods, int count) {
  if (!est_cpu_has_avx512f() || M <= 0 || K <= 0 || count <= 0 || count > EST_GEMM_MAX_SHARED) return -1;
  const float *packed[EST_GEMM_MAX_SHARED];
  int groups[EST_GEMM_MAX_SHARED], items_per_rblock = 0;
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads(), rblocks = (M + MC - 1) / MC;
  /* each product cut as if it ran alone (the team's items shared among the products instead,
   * fewer and wider, so fewer copies of A's rows, measured level: bench/README.md) */
  const int want = threads > 1 ? ITEMS_PER_THREAD * threads : 0;
  for (int j = 0; j < count; j++) {
    const est_gemm_product *p = prods + j;
    if (p->N <= 0 || (p->ep && p->ep->gelu_pre)) return -1;
    packed[j] = est_f32_frozen_packed(p->B, p->ldb, CblasNoTrans, K, p->N);
    if (!packed[j]) return -1; /* not an inference weight: each product packs its own B */
    groups[j] = column_groups((p->N + NR - 1) / NR, rblocks, want);
    items_per_rblock += groups[j];
  }
  const int items = rblocks * items_per_rblock;
  /* items: row block outer, then every product's column groups, so a row block's A is read by
   * the products in turn while it is in L2 */
#pragma omp parallel for schedule(dynamic, 1) num_threads(items < threads ? items : threads)
  for (int it = 0; it < items; it++) {
    int rb = it / items_per_rblock, g = it % items_per_rblock, j = 0;
    while (g >= groups[j]) g -= groups[j++];
    const est_gemm_product *p = prods + j;
    int tiles = (p->N + NR - 1) / NR, m0 = rb * MC, m1 = m0 + MC < M ? m0 + MC : M;
    int t0 = (int)((long)tiles * g / groups[j]), t1 = (int)((long)tiles * (g + 1) / groups[j]);
    run_item(0, p->N, K, 1.0f, A, lda, packed[j], 0.0f, p->C, p->ldc, p->ep, m0, m1, t0, t1);
  }
  return 0;
}
