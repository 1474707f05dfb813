/* Attention in tiles with an online softmax (the forward of FlashAttention, Dao et al. 2022,
 * in plain C): memory O(S), no [S, S] tensor. Per (example, head) pair and block of TQ query
 * rows, the key blocks within reach (every block, or under a sliding window only those the
 * window touches: the others are skipped whole) run one after another:
 *   s = scale Q_i K_j^T + madd                    (TQ x TK scores, in a per-thread buffer)
 *   m' = max(m, rowmax s);  c = exp(m - m')        (the running max and its correction)
 *   p = exp(s - m');  l = c l + rowsum p;  acc = c acc + p V_j
 * and at the end ctx_i = acc / l. The numbers are those of est_attention_forward_window_at
 * without dropout up to the order of fp32 sums (tested against est_attention_forward_window_ref,
 * the two kernels' common reference twin). Inference only: no probabilities are kept for a
 * backward, and the products run fp32 whatever the precision. */
#include <cblas.h>
#include <math.h>

#include "est/nn.h"
#include "nn/fastmath.h"
#include "nn/gemm.h"
#include "nn/thread_buf.h"

enum { TQ = 64, TK = 128 }; /* query rows, keys per block: the scores block is 32 KiB */

void est_attention_forward_tiled(float *ctx, const float *q, const float *k, const float *v,
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
    int j_lo = 0, j_hi = S;
    if (window >= 0) {
      j_lo = i0 - window > 0 ? i0 - window : 0;
      j_hi = i0 + rows + window < S ? i0 + rows + window : S;
    }
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
    }
  }
}
