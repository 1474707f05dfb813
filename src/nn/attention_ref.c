/* The attention core written as plain loops over (b, h, i, j, d), the reference the
 * BLAS-per-head kernels in attention.c are tested against. Slow; never used by the model. */
#include <math.h>
#include <stdlib.h>

#include "est/nn.h"

/* element (b, s, h, d) of a [B, S, N*Dh] tensor */
#define AT(t, b, s, h, d) (t)[((size_t)(b) * S + (s)) * HD + (size_t)(h) * Dh + (d)]
/* element (b, h, i, j) of a [B, N, S, S] tensor */
#define PR(t, b, h, i, j) (t)[(((size_t)(b) * N + (h)) * S + (i)) * S + (j)]

static float keep_factor(const uint8_t *mask, size_t e, float prob) {
  if (prob <= 0.0f) return 1.0f;
  return mask[e] ? 1.0f / (1.0f - prob) : 0.0f;
}

void est_attention_forward_ref(float *ctx, float *probs, const uint8_t *dropout_mask, const float *q,
                               const float *k, const float *v, const int32_t *input_mask, int B, int S, int N,
                               int Dh, float dropout_prob) {
  est_attention_forward_window_ref(ctx, probs, dropout_mask, q, k, v, input_mask, B, S, N, Dh, -1, dropout_prob);
}

/* A key outside the window (|i - j| > window, window >= 0) is left out of the softmax: its
 * probability is 0 (transformers' sliding-window mask, a -inf score). */
void est_attention_forward_window_ref(float *ctx, float *probs, const uint8_t *dropout_mask, const float *q,
                                      const float *k, const float *v, const int32_t *input_mask, int B, int S,
                                      int N, int Dh, int window, float dropout_prob) {
  const int HD = N * Dh;
  const double scale = 1.0 / sqrt((double)Dh);
  double *row = malloc((size_t)S * sizeof(double));
  for (int b = 0; b < B; b++)
    for (int h = 0; h < N; h++)
      for (int i = 0; i < S; i++) {
        double mx = -INFINITY, sum = 0.0;
        for (int j = 0; j < S; j++) {
          if (window >= 0 && abs(i - j) > window) {
            row[j] = -INFINITY;
            continue;
          }
          double dot = 0.0;
          for (int d = 0; d < Dh; d++) dot += (double)AT(q, b, i, h, d) * AT(k, b, j, h, d);
          double m = input_mask ? input_mask[(size_t)b * S + j] : 1;
          row[j] = dot * scale + (1.0 - m) * -10000.0;
          if (row[j] > mx) mx = row[j];
        }
        for (int j = 0; j < S; j++) sum += exp(row[j] - mx);
        for (int j = 0; j < S; j++) PR(probs, b, h, i, j) = (float)(exp(row[j] - mx) / sum);
        for (int d = 0; d < Dh; d++) {
          double acc = 0.0;
          for (int j = 0; j < S; j++) {
            size_t e = (((size_t)b * N + h) * S + i) * S + j;
            acc += (double)PR(probs, b, h, i, j) * keep_factor(dropout_mask, e, dropout_prob) * AT(v, b, j, h, d);
          }
          AT(ctx, b, i, h, d) = (float)acc;
        }
      }
  free(row);
}

void est_attention_backward_ref(float *dq, float *dk, float *dv, const float *dctx, const float *q,
                                const float *k, const float *v, const float *probs,
                                const uint8_t *dropout_mask, int B, int S, int N, int Dh, float dropout_prob) {
  const int HD = N * Dh;
  const double scale = 1.0 / sqrt((double)Dh);
  double *dp = malloc((size_t)S * S * sizeof(double));
  for (int b = 0; b < B; b++)
    for (int h = 0; h < N; h++) {
      size_t base = ((size_t)b * N + h) * S * S;
      /* dv[j] = sum_i pd[i,j] dctx[i];  dp[i,j] = keep(i,j) * (dctx[i] . v[j]) */
      for (int i = 0; i < S; i++)
        for (int j = 0; j < S; j++) {
          double kf = keep_factor(dropout_mask, base + (size_t)i * S + j, dropout_prob), dot = 0.0;
          for (int d = 0; d < Dh; d++) {
            AT(dv, b, j, h, d) += (float)(PR(probs, b, h, i, j) * kf * AT(dctx, b, i, h, d));
            dot += (double)AT(dctx, b, i, h, d) * AT(v, b, j, h, d);
          }
          dp[(size_t)i * S + j] = kf * dot;
        }
      /* ds = p * (dp - sum_j dp p) * scale;  dq[i] += ds[i,j] k[j];  dk[j] += ds[i,j] q[i] */
      for (int i = 0; i < S; i++) {
        double s = 0.0;
        for (int j = 0; j < S; j++) s += dp[(size_t)i * S + j] * PR(probs, b, h, i, j);
        for (int j = 0; j < S; j++) {
          double ds = PR(probs, b, h, i, j) * (dp[(size_t)i * S + j] - s) * scale;
          for (int d = 0; d < Dh; d++) {
            AT(dq, b, i, h, d) += (float)(ds * AT(k, b, j, h, d));
            AT(dk, b, j, h, d) += (float)(ds * AT(q, b, i, h, d));
          }
        }
      }
    }
  free(dp);
}
