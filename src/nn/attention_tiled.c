/* Attention in tiles with an online softmax (the forward of FlashAttention, Dao et al. 2022,
 * in plain C): memory O(S), no [S, S] tensor. Per (example, head) pair and block of TQ query
 * rows, the key blocks within reach (every block, or under a sliding window only those the
 * window touches: the others are skipped whole) run one after another:
 *   s = scale Q_i K_j^T + madd                    (TQ x TK scores, in a per-thread buffer)
 *   m' = max(m, rowmax s);  c = exp(m - m')        (the running max and its correction)
 *   p = exp(s - m');  l = c l + rowsum p;  acc = c acc + p V_j
 * and at the end ctx_i = acc / l. The numbers are those of est_attention_forward_window_at
 * without dropout up to the order of fp32 sums (tested against est_attention_forward_window_ref,
 * the two kernels' common reference twin). No probabilities are kept: with lse given, the
 * forward saves each row's log-sum-exp (m + log l) and est_attention_backward_tiled computes
 * them again tile by tile from it (FlashAttention's backward):
 *   P = exp(s - lse),  D_i = rowsum(dctx_i * ctx_i)
 *   dV_j += P^T dctx_i;  dP = dctx_i V_j^T;  dS = P * (dP - D) * scale;  dK_j += dS^T Q_i;  dQ_i += dS K_j
 * in two passes, one over key blocks (each owns its rows of dK and dV) and one over query
 * blocks (dQ), so no two threads add into the same row and the sums do not depend on the
 * thread count. No dropout; the products run fp32 whatever the precision. */
#include <cblas.h>
#include <math.h>

#include "est/nn.h"
#include "nn/fastmath.h"
#include "nn/gemm.h"
#include "nn/thread_buf.h"

enum { TQ = 64, TK = 128 }; /* query rows, keys per block: the scores block is 32 KiB */

/* The key range [*lo, *hi) that rows [i0, i0 + rows) may see, or the query range that
 * keys [j0, j0 + cols) are seen from (the window is symmetric). */
static void reach(int i0, int rows, int S, int window, int *lo, int *hi) {
  *lo = 0, *hi = S;
  if (window < 0) return;
  *lo = i0 - window > 0 ? i0 - window : 0;
  *hi = i0 + rows + window < S ? i0 + rows + window : S;
}

void est_attention_forward_tiled(float *ctx, const float *q, const float *k, const float *v,
                                 const int32_t *input_mask, int B, int S, int N, int Dh, int window) {
  est_attention_forward_tiled_lse(ctx, NULL, q, k, v, input_mask, B, S, N, Dh, window);
}

void est_attention_forward_tiled_lse(float *ctx, float *lse, const float *q, const float *k, const float *v,
                                     const int32_t *input_mask, int B, int S, int N, int Dh, int window) {
  const int HD = N * Dh, nq = (S + TQ - 1) / TQ;
  const float scale = 1.0f / sqrtf((float)Dh);
  est_blas_use_one_thread();
#pragma omp parallel for schedule(dynamic)
  for (long w = 0; w < (long)B * N * nq; w++) {
    const int bh = (int)(w / nq), b = bh / N, h = bh % N, i0 = (int)(w % nq) * TQ;
    const int rows = S - i0 < TQ ? S - i0 : TQ;
    float *sc = est_thread_buf(EST_TBUF_ATT_TILE, (size_t)TQ * TK + (size_t)TQ * Dh + 2 * TQ);
    if (!sc) continue; /* no memory for 40 KiB: the context stays as it was */
    float *acc = sc + TQ * TK, *mx = acc + (size_t)TQ * Dh, *sum = mx + TQ;
    for (int r = 0; r < rows; r++) mx[r] = -INFINITY, sum[r] = 0.0f;
    for (size_t e = 0; e < (size_t)rows * Dh; e++) acc[e] = 0.0f;
    const size_t base = (size_t)b * S * HD + (size_t)h * Dh;
    const int32_t *mask = input_mask ? input_mask + (size_t)b * S : NULL;
    /* the keys any row of the block may see */
    int j_lo, j_hi;
    reach(i0, rows, S, window, &j_lo, &j_hi);
    for (int j0 = j_lo; j0 < j_hi; j0 += TK) {
      const int cols = j_hi - j0 < TK ? j_hi - j0 : TK;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, cols, Dh, scale, q + base + (size_t)i0 * HD, HD,
                  k + base + (size_t)j0 * HD, HD, 0.0f, sc, TK);
      for (int r = 0; r < rows; r++) {
        float *s = sc + (size_t)r * TK;
        const int i = i0 + r;
        /* this row's keys in the block: [c0, c1) */
        int c0 = 0, c1 = cols;
        if (window >= 0) {
          c0 = i - window - j0 > 0 ? i - window - j0 : 0;
          c1 = i + window + 1 - j0 < cols ? i + window + 1 - j0 : cols;
        }
        float m = mx[r];
        for (int c = c0; c < c1; c++) {
          if (mask) s[c] += (1.0f - (float)mask[j0 + c]) * -10000.0f;
          m = s[c] > m ? s[c] : m;
        }
        if (c1 <= c0) { /* none of this block's keys in reach of row i */
          for (int c = 0; c < cols; c++) s[c] = 0.0f;
          continue;
        }
        const float corr = est_fast_expf(mx[r] - m); /* 0 on the first block: exp(-inf) */
        float l = 0.0f;
        for (int c = 0; c < c0; c++) s[c] = 0.0f;
        for (int c = c0; c < c1; c++) {
          s[c] = est_fast_expf(s[c] - m);
          l += s[c];
        }
        for (int c = c1; c < cols; c++) s[c] = 0.0f;
        sum[r] = sum[r] * corr + l;
        mx[r] = m;
        float *a = acc + (size_t)r * Dh;
        for (int d = 0; d < Dh; d++) a[d] *= corr;
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, Dh, cols, 1.0f, sc, TK, v + base + (size_t)j0 * HD,
                  HD, 1.0f, acc, Dh);
    }
    for (int r = 0; r < rows; r++) {
      float *out = ctx + base + (size_t)(i0 + r) * HD;
      const float inv = 1.0f / sum[r];
      for (int d = 0; d < Dh; d++) out[d] = acc[(size_t)r * Dh + d] * inv;
      if (lse) lse[(size_t)bh * S + i0 + r] = mx[r] + logf(sum[r]);
    }
  }
}

/* P[rows, cols] = exp(scale Q_i K_j^T + madd - lse) of rows i0.. and keys j0.. of one pair,
 * 0 outside the window. */
static void probs_block(float *p, const float *qb, const float *kb, const float *lse_b, const int32_t *mask, int i0,
                        int rows, int j0, int cols, int Dh, int HD, float scale, int window) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, cols, Dh, scale, qb + (size_t)i0 * HD, HD,
              kb + (size_t)j0 * HD, HD, 0.0f, p, TK);
  for (int r = 0; r < rows; r++) {
    float *row = p + (size_t)r * TK;
    const int i = i0 + r;
    const float l = lse_b[i];
    for (int c = 0; c < cols; c++) {
      const int j = j0 + c;
      if (window >= 0 && (j < i - window || j > i + window)) {
        row[c] = 0.0f;
        continue;
      }
      const float s = mask ? row[c] + (1.0f - (float)mask[j]) * -10000.0f : row[c];
      row[c] = est_fast_expf(s - l);
    }
  }
}

/* D_i = rowsum(dctx_i * ctx_i) for rows i0.. of one pair, into dd[rows]. */
static void row_dots(float *dd, const float *dctx_b, const float *ctx_b, int i0, int rows, int Dh, int HD) {
  for (int r = 0; r < rows; r++) {
    const float *a = dctx_b + (size_t)(i0 + r) * HD, *b = ctx_b + (size_t)(i0 + r) * HD;
    float acc = 0.0f;
    for (int d = 0; d < Dh; d++) acc += a[d] * b[d];
    dd[r] = acc;
  }
}

/* dS = P * (dP - D) * scale in place over dp, with dP = dctx_i V_j^T computed into it. */
static void dscores_block(float *dp, const float *p, const float *dd, const float *dctx_b, const float *vb, int i0,
                          int rows, int j0, int cols, int Dh, int HD, float scale) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, cols, Dh, 1.0f, dctx_b + (size_t)i0 * HD, HD,
              vb + (size_t)j0 * HD, HD, 0.0f, dp, TK);
  for (int r = 0; r < rows; r++)
    for (int c = 0; c < cols; c++) {
      const size_t e = (size_t)r * TK + c;
      dp[e] = p[e] * (dp[e] - dd[r]) * scale;
    }
}

void est_attention_backward_tiled(float *dq, float *dk, float *dv, const float *dctx, const float *q, const float *k,
                                  const float *v, const float *ctx, const float *lse, const int32_t *input_mask,
                                  int B, int S, int N, int Dh, int window, est_grad_mode mode) {
  const int HD = N * Dh, nq = (S + TQ - 1) / TQ, nk = (S + TK - 1) / TK;
  const float scale = 1.0f / sqrtf((float)Dh), beta = mode == EST_GRAD_WRITE ? 0.0f : 1.0f;
  est_blas_use_one_thread();
  /* pass 1: per key block, dK and dV over the query blocks in reach */
#pragma omp parallel for schedule(dynamic)
  for (long w = 0; w < (long)B * N * nk; w++) {
    const int bh = (int)(w / nk), b = bh / N, h = bh % N, j0 = (int)(w % nk) * TK;
    const int cols = S - j0 < TK ? S - j0 : TK;
    float *p = est_thread_buf(EST_TBUF_ATT_TILE, 2 * (size_t)TQ * TK + 2 * (size_t)TK * Dh + TQ);
    if (!p) continue;
    float *dp = p + (size_t)TQ * TK, *dk_acc = dp + (size_t)TQ * TK, *dv_acc = dk_acc + (size_t)TK * Dh;
    float *dd = dv_acc + (size_t)TK * Dh;
    for (size_t e = 0; e < 2 * (size_t)TK * Dh; e++) dk_acc[e] = 0.0f;
    const size_t base = (size_t)b * S * HD + (size_t)h * Dh;
    const int32_t *mask = input_mask ? input_mask + (size_t)b * S : NULL;
    int i_lo, i_hi;
    reach(j0, cols, S, window, &i_lo, &i_hi);
    for (int i0 = i_lo; i0 < i_hi; i0 += TQ) {
      const int rows = i_hi - i0 < TQ ? i_hi - i0 : TQ;
      probs_block(p, q + base, k + base, lse + (size_t)bh * S, mask, i0, rows, j0, cols, Dh, HD, scale, window);
      /* dV_j += P^T dctx_i */
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, cols, Dh, rows, 1.0f, p, TK, dctx + base + (size_t)i0 * HD,
                  HD, 1.0f, dv_acc, Dh);
      row_dots(dd, dctx + base, ctx + base, i0, rows, Dh, HD);
      dscores_block(dp, p, dd, dctx + base, v + base, i0, rows, j0, cols, Dh, HD, scale);
      /* dK_j += dS^T Q_i */
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, cols, Dh, rows, 1.0f, dp, TK, q + base + (size_t)i0 * HD,
                  HD, 1.0f, dk_acc, Dh);
    }
    for (int c = 0; c < cols; c++) {
      float *ok = dk + base + (size_t)(j0 + c) * HD, *ov = dv + base + (size_t)(j0 + c) * HD;
      for (int d = 0; d < Dh; d++) {
        ok[d] = beta * ok[d] + dk_acc[(size_t)c * Dh + d];
        ov[d] = beta * ov[d] + dv_acc[(size_t)c * Dh + d];
      }
    }
  }
  /* pass 2: per query block, dQ over the key blocks in reach */
#pragma omp parallel for schedule(dynamic)
  for (long w = 0; w < (long)B * N * nq; w++) {
    const int bh = (int)(w / nq), b = bh / N, h = bh % N, i0 = (int)(w % nq) * TQ;
    const int rows = S - i0 < TQ ? S - i0 : TQ;
    float *p = est_thread_buf(EST_TBUF_ATT_TILE, 2 * (size_t)TQ * TK + (size_t)TQ * Dh + TQ);
    if (!p) continue;
    float *dp = p + (size_t)TQ * TK, *dq_acc = dp + (size_t)TQ * TK, *dd = dq_acc + (size_t)TQ * Dh;
    for (size_t e = 0; e < (size_t)TQ * Dh; e++) dq_acc[e] = 0.0f;
    const size_t base = (size_t)b * S * HD + (size_t)h * Dh;
    const int32_t *mask = input_mask ? input_mask + (size_t)b * S : NULL;
    row_dots(dd, dctx + base, ctx + base, i0, rows, Dh, HD);
    int j_lo, j_hi;
    reach(i0, rows, S, window, &j_lo, &j_hi);
    for (int j0 = j_lo; j0 < j_hi; j0 += TK) {
      const int cols = j_hi - j0 < TK ? j_hi - j0 : TK;
      probs_block(p, q + base, k + base, lse + (size_t)bh * S, mask, i0, rows, j0, cols, Dh, HD, scale, window);
      dscores_block(dp, p, dd, dctx + base, v + base, i0, rows, j0, cols, Dh, HD, scale);
      /* dQ_i += dS K_j */
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, Dh, cols, 1.0f, dp, TK, k + base + (size_t)j0 * HD,
                  HD, 1.0f, dq_acc, Dh);
    }
    for (int r = 0; r < rows; r++) {
      float *o = dq + base + (size_t)(i0 + r) * HD;
      for (int d = 0; d < Dh; d++) o[d] = beta * o[d] + dq_acc[(size_t)r * Dh + d];
    }
  }
}
