/* Scaled dot-product attention over all heads, BERT style (modeling.attention_layer).
 *
 * Work is split by (example, head) pairs across OpenMP threads; each pair's small GEMMs
 * ([S,Dh].[Dh,S] and [S,S].[S,Dh]) run single-threaded. Threading inside such small
 * products costs more than it gains (docs/performance.md §1), and a per-pair split gives
 * results that do not depend on the thread count. The forward runs est's own AVX-512
 * kernel (gemm_f32.c) fused per pair: K^T and V packed once, then strips of query rows
 * go scores -> mask + softmax -> context while the strip is in L1 (OpenBLAS's small
 * products re-packed both operands on every call, and the scores made a round trip to L2
 * between three passes). Of the backward's four products per pair, the two with NoTrans A
 * run the own kernel too, the two with Trans A OpenBLAS (pair_gemm). In bf16 and int8 modes
 * the forward's two take bf16 inputs (pair_forward_bf16: AMX tiles, else VDPBF16PS), and on
 * AMX the backward's four too (pair_gemm).
 *
 * Per pair (b, h), with Q, K, V the [S, Dh] slices (row stride N*Dh):
 *   forward   P  = softmax(Q K^T / sqrt(Dh) + madd),  madd[j] = (1 - input_mask[b,j]) * -10000
 *             Pd = dropout(P);  ctx = Pd V
 *   backward  dV += Pd^T dctx;  dPd = dctx V^T;  dP = dropout_backward(dPd)
 *             dS = P * (dP - rowsum(dP * P)) / sqrt(Dh);  dQ += dS K;  dK += dS^T Q
 * (the three input gradients accumulate: their GEMMs run with beta = 1) */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "est/nn.h"
#include "nn/fastmath.h"
#include "nn/gemm.h"
#include "nn/kernel_choice.h"
#include "nn/thread_buf.h"

size_t est_attention_scratch_floats(int B, int N, int S) { return 2 * (size_t)B * N * S * S; }

/* Row-wise softmax of p[S,S] in place, after scaling (x scale: 1 where the product
 * applied it already, which changes no bit) and adding the key mask. window >= 0: query row
 * i0 + i sees only keys j with |i0 + i - j| <= window (a sliding window, ModernBERT's local
 * layers); the others get probability 0 exactly, and the max and the sum run over the
 * window alone (the numbers of a -inf score there). window < 0: every key. */
static void masked_softmax_rows(float *p, const float *madd, float scale, int rows, int S, int i0, int window) {
  for (int i = 0; i < rows; i++) {
    float *row = p + (size_t)i * S;
    int lo = 0, hi = S;
    if (window >= 0) {
      lo = i0 + i - window > 0 ? i0 + i - window : 0;
      hi = i0 + i + window + 1 < S ? i0 + i + window + 1 : S;
      for (int j = 0; j < lo; j++) row[j] = 0.0f;
      for (int j = hi; j < S; j++) row[j] = 0.0f;
    }
    float mx = -INFINITY;
    /* a max reduction (exact in any order): without the simd clause this loop ran
     * scalar, one vmaxss latency per key, ~60% of the softmax's time */
#pragma omp simd reduction(max : mx)
    for (int j = lo; j < hi; j++) {
      row[j] = row[j] * scale + madd[j];
      mx = row[j] > mx ? row[j] : mx;
    }
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int j = lo; j < hi; j++) {
      float e = est_fast_expf(row[j] - mx);
      row[j] = e;
      sum += e;
    }
    float inv = 1.0f / sum;
#pragma omp simd
    for (int j = lo; j < hi; j++) row[j] *= inv;
  }
}

void est_attention_forward(float *ctx, float *probs, uint8_t *dropout_mask, float *scratch, const float *q,
                           const float *k, const float *v, const int32_t *input_mask, int B, int S, int N,
                           int Dh, float dropout_prob, uint64_t seed, uint64_t step, uint32_t tensor_id,
                           est_precision precision) {
  est_attention_forward_at(ctx, probs, dropout_mask, scratch, q, k, v, input_mask, B, S, N, Dh, dropout_prob, seed,
                           step, tensor_id, 0, precision);
}

/* Whether the per-pair products may run est's own kernel (AVX-512F, and neither
 * EST_KERNEL=blas nor noavx512, nn/kernel_choice.h). */
static int own_kernel_allowed(void) { return est_kernel_avx512f() && est_kernel_get() != EST_KERNEL_BLAS; }

/* Query rows per strip: a [STRIP, S] block of scores (24 KiB at S = 128) stays in L1
 * between the scores product, the softmax and the context product. */
enum { STRIP = 48 };

/* One (example, head) pair with est's own kernel: K^T and V packed once, then per strip
 * of query rows  scores = scale Q K^T -> masked softmax (into probs) -> dropout -> ctx = P V,
 * the strip's scores still in L1 when the softmax and the second product read them.
 * Returns non-zero, having done nothing, when a buffer cannot be had. */
static int pair_forward_own(float *ctx, float *probs, const uint8_t *m, const float *qb, const float *kb,
                            const float *vb, const float *madd, int S, int Dh, int HD, float scale, int dropout,
                            float keep_scale, int window) {
  float *kp = est_thread_buf(EST_TBUF_ATT_K, est_f32_packed_floats(Dh, S));
  float *vp = est_thread_buf(EST_TBUF_ATT_V, est_f32_packed_floats(S, Dh));
  float *strip = est_thread_buf(EST_TBUF_ATT_STRIP, (size_t)STRIP * S);
  if (!kp || !vp || !strip) return -1;
  est_f32_pack(kp, kb, HD, CblasTrans, Dh, S);   /* op(B) = K^T [Dh, S] */
  est_f32_pack(vp, vb, HD, CblasNoTrans, S, Dh); /* V [S, Dh] */
  for (int i0 = 0; i0 < S; i0 += STRIP) {
    int rows = S - i0 < STRIP ? S - i0 : STRIP;
    float *p = probs + (size_t)i0 * S;
    est_f32_gemm_packed(rows, S, Dh, scale, qb + (size_t)i0 * HD, HD, kp, p, S);
    masked_softmax_rows(p, madd, 1.0f, rows, S, i0, window);
    const float *pd = p;
    if (dropout) {
      const uint8_t *mr = m + (size_t)i0 * S;
      for (size_t e = 0; e < (size_t)rows * S; e++) strip[e] = mr[e] ? p[e] * keep_scale : 0.0f;
      pd = strip;
    }
    est_f32_gemm_packed(rows, Dh, S, 1.0f, pd, S, vp, ctx + (size_t)i0 * HD, HD);
  }
  return 0;
}

/* One pair with bf16 products (attention_plan's bf16): the two products on bf16 inputs with
 * fp32 sums, as every dense layer's, run single-threaded on this thread (called inside a
 * parallel region, each kernel works alone and opens no team): on the AMX tiles
 * (est_sgemm_amx) where the CPU has them, else VDPBF16PS (est_sgemm_bf16_dp). The masked
 * softmax and the dropout stay fp32, in between. The whole [S, S] of scores at once: the bf16
 * kernels pack their operands per call, so strips would pack K^T and V again per strip. In
 * fp32 this pair took ~12% of a bf16 Small inference step on AMX, against ~60% for every
 * dense layer together, and ~12% of an int8 Base step at batch 32 on a Zen 4 (perf). Returns
 * non-zero when the tile kernel refuses (no memory for its packed operands); the fp32 paths
 * then run and write P and ctx whole. */
static int pair_forward_bf16(float *ctx, float *p, const uint8_t *m, const float *qb, const float *kb,
                             const float *vb, const float *madd, int S, int Dh, int HD, float scale, int dropout,
                             float keep_scale, int amx, int window) {
  float *pd = p;
  if (dropout && !(pd = est_thread_buf(EST_TBUF_ATT_STRIP, (size_t)S * S))) return -1;
  /* P[S,S] = Q K^T, scaled in the softmax: with alpha = 1 the tiles are stored straight
   * into P rather than through a buffer */
  if (amx) {
    if (est_sgemm_amx(CblasNoTrans, CblasTrans, S, S, Dh, 1.0f, qb, HD, kb, HD, 0.0f, p, S, NULL) != 0) return -1;
  } else {
    est_sgemm_bf16_dp(CblasNoTrans, CblasTrans, S, S, Dh, 1.0f, qb, HD, kb, HD, 0.0f, p, S);
  }
  masked_softmax_rows(p, madd, scale, S, S, 0, window);
  if (dropout)
    for (size_t e = 0; e < (size_t)S * S; e++) pd[e] = m[e] ? p[e] * keep_scale : 0.0f;
  /* ctx[S,Dh] = Pd V */
  if (!amx) {
    est_sgemm_bf16_dp(CblasNoTrans, CblasNoTrans, S, Dh, S, 1.0f, pd, S, vb, HD, 0.0f, ctx, HD);
    return 0;
  }
  return est_sgemm_amx(CblasNoTrans, CblasNoTrans, S, Dh, S, 1.0f, pd, S, vb, HD, 0.0f, ctx, HD, NULL);
}

/* The same pair through OpenBLAS (no AVX-512F, EST_KERNEL=blas or noavx512, or no memory
 * for the packed copies). */
static void pair_forward_blas(float *ctx, float *p, const uint8_t *m, float *tmp, const float *qb, const float *kb,
                              const float *vb, const float *madd, int S, int Dh, int HD, float scale, int dropout,
                              float keep_scale, int window) {
  const size_t SS = (size_t)S * S;
  /* P[S,S] = scale * Q K^T */
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, S, S, Dh, scale, qb, HD, kb, HD, 0.0f, p, S);
  masked_softmax_rows(p, madd, 1.0f, S, S, 0, window);
  const float *pd = p;
  if (dropout) {
    for (size_t e = 0; e < SS; e++) tmp[e] = m[e] ? p[e] * keep_scale : 0.0f;
    pd = tmp;
  }
  /* ctx[S,Dh] = Pd V */
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, S, Dh, S, 1.0f, pd, S, vb, HD, 0.0f, ctx, HD);
}

/* What forward and backward derive from the shapes, the dropout and the kernel choice, once
 * per call (on the calling thread, before the parallel region). */
typedef struct attention_plan {
  int HD;            /* N * Dh: a row of Q, K, V, ctx */
  float scale;       /* 1 / sqrt(Dh) */
  size_t SS;         /* S * S: one (example, head)'s probabilities */
  int dropout;       /* dropout_prob > 0 */
  float keep_scale;  /* 1 / (1 - dropout_prob) */
  int own;           /* est's fp32 kernel allowed */
  int bf16, amx;     /* products on bf16 inputs (on the AMX tiles where amx, else VDPBF16PS) */
} attention_plan;

/* The per-head products run on bf16 inputs in bf16 mode, and in int8 mode too where the CPU
 * has a bf16 instruction: their operands (Q, K, the probabilities, V) are activations, which
 * int8's per-row quantization handles poorly (softmax's outputs span orders of magnitude), while
 * bf16 keeps 8 bits of every value's own scale, at twice fp32's rate (four times on AMX).
 * Without AVX512-BF16 they stay fp32 (docs/int8.md §1). The choice follows the CPU and the
 * kernel choice only, never a timing, so a CPU's results do not change from run to run. */
static int products_in_bf16(est_precision precision) {
  return (precision == EST_PRECISION_BF16 || precision == EST_PRECISION_INT8) && est_kernel_avx512_bf16();
}

static attention_plan attention_plan_of(int S, int N, int Dh, float dropout_prob, est_precision precision) {
  attention_plan p = {.HD = N * Dh, .scale = 1.0f / sqrtf((float)Dh), .SS = (size_t)S * S,
                      .dropout = dropout_prob > 0.0f, .own = own_kernel_allowed(),
                      .bf16 = products_in_bf16(precision)};
  p.amx = p.bf16 && est_kernel_amx();
  p.keep_scale = p.dropout ? 1.0f / (1.0f - dropout_prob) : 1.0f;
  est_blas_use_one_thread();
  return p;
}

void est_attention_forward_at(float *ctx, float *probs, uint8_t *dropout_mask, float *scratch, const float *q,
                              const float *k, const float *v, const int32_t *input_mask, int B, int S, int N,
                              int Dh, float dropout_prob, uint64_t seed, uint64_t step, uint32_t tensor_id,
                              int64_t first_example, est_precision precision) {
  est_attention_forward_window_at(ctx, probs, dropout_mask, scratch, q, k, v, input_mask, B, S, N, Dh, -1,
                                  dropout_prob, seed, step, tensor_id, first_example, precision);
}

void est_attention_forward_window_at(float *ctx, float *probs, uint8_t *dropout_mask, float *scratch, const float *q,
                                     const float *k, const float *v, const int32_t *input_mask, int B, int S, int N,
                                     int Dh, int window, float dropout_prob, uint64_t seed, uint64_t step,
                                     uint32_t tensor_id, int64_t first_example, est_precision precision) {
  const attention_plan P = attention_plan_of(S, N, Dh, dropout_prob, precision);
  const int HD = P.HD, dropout = P.dropout, own = P.own, bf16 = P.bf16, amx = P.amx;
  const float scale = P.scale, keep_scale = P.keep_scale;
  const size_t SS = P.SS;
#pragma omp parallel
  {
    float madd[S];  /* VLA: S <= max_position_embeddings, a few KiB at most */
#pragma omp for schedule(static)
    for (int bh = 0; bh < B * N; bh++) {
      int b = bh / N, h = bh % N;
      for (int j = 0; j < S; j++)
        madd[j] = input_mask ? (1.0f - (float)input_mask[(size_t)b * S + j]) * -10000.0f : 0.0f;
      size_t off = (size_t)b * S * HD + (size_t)h * Dh;
      float *p = probs + (size_t)bh * SS;
      uint8_t *m = dropout ? dropout_mask + (size_t)bh * SS : NULL;
      if (dropout)
        est_dropout_mask(m, ((size_t)first_example * N + (size_t)bh) * SS, SS, dropout_prob, seed, step, tensor_id);
      if (bf16 && pair_forward_bf16(ctx + off, p, m, q + off, k + off, v + off, madd, S, Dh, HD, scale, dropout,
                                    keep_scale, amx, window) == 0)
        continue;
      if (own && pair_forward_own(ctx + off, p, m, q + off, k + off, v + off, madd, S, Dh, HD, scale, dropout,
                                  keep_scale, window) == 0)
        continue;
      float *tmp = dropout ? scratch + (size_t)bh * SS : NULL;
      pair_forward_blas(ctx + off, p, m, tmp, q + off, k + off, v + off, madd, S, Dh, HD, scale, dropout,
                        keep_scale, window);
    }
  }
}

/* One single-threaded product of the backward: in bf16 mode with AMX the tile kernel (bf16
 * inputs, fp32 sums, as the forward's); else est's own kernel (which runs on the calling
 * thread inside a parallel region) for NoTrans A, OpenBLAS otherwise. The rule is gemm.c's:
 * with A transposed the own kernel copies A's k blocks first and OpenBLAS was ahead; with
 * EST_KERNEL=own it runs those too. */
static void pair_gemm(int own, int amx, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha,
                      const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc) {
  if (amx && est_sgemm_amx(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, NULL) == 0) return;
  if (own && (ta == CblasNoTrans || est_kernel_get() == EST_KERNEL_OWN) &&
      est_sgemm_f32(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, NULL) == 0)
    return;
  cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void est_attention_backward(float *dq, float *dk, float *dv, float *scratch, const float *dctx, const float *q,
                            const float *k, const float *v, const float *probs, const uint8_t *dropout_mask,
                            int B, int S, int N, int Dh, float dropout_prob, est_precision precision) {
  est_attention_backward_mode(dq, dk, dv, scratch, dctx, q, k, v, probs, dropout_mask, B, S, N, Dh, dropout_prob,
                              EST_GRAD_ADD, precision);
}

/* Each (example, head) pair owns its columns of dQ, dK, dV, so WRITE is beta 0 in its
 * three products (beta 0 never reads C). */
void est_attention_backward_mode(float *dq, float *dk, float *dv, float *scratch, const float *dctx,
                                 const float *q, const float *k, const float *v, const float *probs,
                                 const uint8_t *dropout_mask, int B, int S, int N, int Dh, float dropout_prob,
                                 est_grad_mode mode, est_precision precision) {
  const float beta = mode == EST_GRAD_WRITE ? 0.0f : 1.0f;
  const attention_plan P = attention_plan_of(S, N, Dh, dropout_prob, precision);
  const int HD = P.HD, dropout = P.dropout, own = P.own, amx = P.amx;
  const float scale = P.scale, keep_scale = P.keep_scale;
  const size_t SS = P.SS;
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
    /* dV[S,Dh] (+)= Pd^T dctx */
    if (dv)
      pair_gemm(own, amx, CblasTrans, CblasNoTrans, S, Dh, S, 1.0f, pdrop, S, dctx + off, HD, beta, dv + off, HD);
    /* dPd[S,S] = dctx V^T */
    pair_gemm(own, amx, CblasNoTrans, CblasTrans, S, S, Dh, 1.0f, dctx + off, HD, v + off, HD, 0.0f, dp, S);
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
    /* dQ[S,Dh] (+)= dS K;  dK[S,Dh] (+)= dS^T Q */
    if (dq) pair_gemm(own, amx, CblasNoTrans, CblasNoTrans, S, Dh, S, 1.0f, dp, S, k + off, HD, beta, dq + off, HD);
    if (dk) pair_gemm(own, amx, CblasTrans, CblasNoTrans, S, Dh, S, 1.0f, dp, S, q + off, HD, beta, dk + off, HD);
  }
}
