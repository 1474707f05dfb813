/* Scaled dot-product attention over all heads, BERT style (modeling.attention_layer).
 *
 * Work is split by (example, head) pairs across OpenMP threads; each pair's small GEMMs
 * ([S,Dh].[Dh,S] and [S,S].[S,Dh]) run single-threaded in OpenBLAS. Threading inside such
 * small products costs more than it gains (docs/performance.md §1), and a per-pair
 * split gives results that do not depend on the thread count.
 *
 * Per pair (b, h), with Q, K, V the [S, Dh] slices (row stride N*Dh):
 *   forward   P  = softmax(Q K^T / sqrt(Dh) + madd),  madd[j] = (1 - input_mask[b,j]) * -10000
 *             Pd = dropout(P);  ctx = Pd V
 *   backward  dV += Pd^T dctx;  dPd = dctx V^T;  dP = dropout_backward(dPd)
 *             dS = P * (dP - rowsum(dP * P)) / sqrt(Dh);  dQ += dS K;  dK += dS^T Q
 * (the three input gradients accumulate: their GEMMs run with beta = 1) */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "est/nn.h"
#include "nn/fastmath.h"
#include "nn/gemm.h"

size_t est_attention_scratch_floats(int B, int N, int S) { return 2 * (size_t)B * N * S * S; }

/* Row-wise softmax of p[S,S] in place, after adding the key mask. */
static void masked_softmax_rows(float *p, const float *madd, int S) {
  for (int i = 0; i < S; i++) {
    float *row = p + (size_t)i * S;
    float mx = -INFINITY;
    /* a max reduction (exact in any order): without the simd clause this loop ran
     * scalar, one vmaxss latency per key, ~60% of the softmax's time */
#pragma omp simd reduction(max : mx)
    for (int j = 0; j < S; j++) {
      row[j] += madd[j];
      mx = row[j] > mx ? row[j] : mx;
    }
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < S; j++) {
      float e = est_fast_expf(row[j] - mx);
      row[j] = e;
      sum += e;
    }
    float inv = 1.0f / sum;
#pragma omp simd
    for (int j = 0; j < S; j++) row[j] *= inv;
  }
}

void est_attention_forward(float *ctx, float *probs, uint8_t *dropout_mask, float *scratch, const float *q,
                           const float *k, const float *v, const int32_t *input_mask, int B, int S, int N,
                           int Dh, float dropout_prob, uint64_t seed, uint64_t step, uint32_t tensor_id) {
  est_attention_forward_at(ctx, probs, dropout_mask, scratch, q, k, v, input_mask, B, S, N, Dh, dropout_prob, seed,
                           step, tensor_id, 0);
}

void est_attention_forward_at(float *ctx, float *probs, uint8_t *dropout_mask, float *scratch, const float *q,
                              const float *k, const float *v, const int32_t *input_mask, int B, int S, int N,
                              int Dh, float dropout_prob, uint64_t seed, uint64_t step, uint32_t tensor_id,
                              int64_t first_example) {
  const int HD = N * Dh;
  const float scale = 1.0f / sqrtf((float)Dh);
  const size_t SS = (size_t)S * S;
  const int dropout = dropout_prob > 0.0f;
  const float keep_scale = dropout ? 1.0f / (1.0f - dropout_prob) : 1.0f;
  est_blas_use_one_thread();
#pragma omp parallel
  {
    float madd[S];  /* VLA: S <= max_position_embeddings, a few KiB at most */
#pragma omp for schedule(static)
    for (int bh = 0; bh < B * N; bh++) {
      int b = bh / N, h = bh % N;
      for (int j = 0; j < S; j++)
        madd[j] = input_mask ? (1.0f - (float)input_mask[(size_t)b * S + j]) * -10000.0f : 0.0f;
      const float *qb = q + (size_t)b * S * HD + (size_t)h * Dh;
      const float *kb = k + (size_t)b * S * HD + (size_t)h * Dh;
      const float *vb = v + (size_t)b * S * HD + (size_t)h * Dh;
      float *p = probs + (size_t)bh * SS;
      /* P[S,S] = scale * Q K^T */
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, S, S, Dh, scale, qb, HD, kb, HD, 0.0f, p, S);
      masked_softmax_rows(p, madd, S);
      const float *pd = p;
      if (dropout) {
        uint8_t *m = dropout_mask + (size_t)bh * SS;
        float *tmp = scratch + (size_t)bh * SS;
        est_dropout_mask(m, ((size_t)first_example * N + (size_t)bh) * SS, SS, dropout_prob, seed, step, tensor_id);
        for (size_t e = 0; e < SS; e++) tmp[e] = m[e] ? p[e] * keep_scale : 0.0f;
        pd = tmp;
      }
      /* ctx[S,Dh] = Pd V */
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, S, Dh, S, 1.0f, pd, S, vb, HD, 0.0f,
                  ctx + (size_t)b * S * HD + (size_t)h * Dh, HD);
    }
  }
}

void est_attention_backward(float *dq, float *dk, float *dv, float *scratch, const float *dctx, const float *q,
                            const float *k, const float *v, const float *probs, const uint8_t *dropout_mask,
                            int B, int S, int N, int Dh, float dropout_prob) {
  const int HD = N * Dh;
  const float scale = 1.0f / sqrtf((float)Dh);
  const size_t SS = (size_t)S * S;
  const int dropout = dropout_prob > 0.0f;
  const float keep_scale = dropout ? 1.0f / (1.0f - dropout_prob) : 1.0f;
  est_blas_use_one_thread();
#pragma omp parallel for schedule(static)
  for (int bh = 0; bh < B * N; bh++) {
    int b = bh / N, h = bh % N;
    size_t off = (size_t)b * S * HD + (size_t)h * Dh;
    const float *p = probs + (size_t)bh * SS;
    const uint8_t *m = dropout ? dropout_mask + (size_t)bh * SS : NULL;
    float *pd = scratch + (size_t)bh * SS;                        /* dropped probs */
    float *dp = scratch + (size_t)B * N * SS + (size_t)bh * SS;   /* d(probs), then d(scores) */
    const float *pdrop = p;
    if (dropout) {
      for (size_t e = 0; e < SS; e++) pd[e] = m[e] ? p[e] * keep_scale : 0.0f;
      pdrop = pd;
    }
    /* dV[S,Dh] += Pd^T dctx */
    if (dv)
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, S, Dh, S, 1.0f, pdrop, S, dctx + off, HD, 1.0f,
                  dv + off, HD);
    /* dPd[S,S] = dctx V^T */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, S, S, Dh, 1.0f, dctx + off, HD, v + off, HD, 0.0f, dp, S);
    for (int i = 0; i < S; i++) {
      float *drow = dp + (size_t)i * S;
      const float *prow = p + (size_t)i * S;
      if (dropout) {
        const uint8_t *mrow = m + (size_t)i * S;
        for (int j = 0; j < S; j++) drow[j] = mrow[j] ? drow[j] * keep_scale : 0.0f;
      }
      float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
      for (int j = 0; j < S; j++) dot += drow[j] * prow[j];
      /* softmax backward, then the 1/sqrt(Dh) of the scores; the additive mask has no gradient */
#pragma omp simd
      for (int j = 0; j < S; j++) drow[j] = prow[j] * (drow[j] - dot) * scale;
    }
    /* dQ[S,Dh] += dS K;  dK[S,Dh] += dS^T Q */
    if (dq) cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, S, Dh, S, 1.0f, dp, S, k + off, HD, 1.0f, dq + off, HD);
    if (dk) cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, S, Dh, S, 1.0f, dp, S, q + off, HD, 1.0f, dk + off, HD);
  }
}
