/* Layer norm over the last axis, as TF contrib layer_norm in BERT (eps 1e-12, or the config's).
 *
 * forward:  xhat = (x - mean) * rstd,  rstd = 1/sqrt(var + eps) with the biased variance,
 *           y = xhat * gamma + beta.
 * backward: with g = dy * gamma,
 *           dx += rstd * (g - mean_c(g) - xhat * mean_c(g * xhat))
 *           dgamma += sum_n dy * xhat,  dbeta += sum_n dy.
 * Rows are independent (parallel over n); the parameter gradients are column sums done
 * in a second, column-parallel pass so no two threads add into the same element. */
#include <math.h>

#include "est/nn.h"

/* One row: y = LayerNorm(x), the row's mean and rstd returned. */
static inline void layernorm_row(float *y, float *mean, float *rstd, const float *x, const float *gamma,
                                 const float *beta, int C, float eps) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int c = 0; c < C; c++) sum += x[c];
  float m = sum / (float)C;
  /* Two-pass variance: exact enough where one-pass E[x^2]-m^2 would cancel. */
  float sq = 0.0f;
#pragma omp simd reduction(+ : sq)
  for (int c = 0; c < C; c++) {
    float d = x[c] - m;
    sq += d * d;
  }
  float s = 1.0f / sqrtf(sq / (float)C + eps);
  if (beta) {
#pragma omp simd
    for (int c = 0; c < C; c++) y[c] = (x[c] - m) * s * gamma[c] + beta[c];
  } else { /* no bias (ModernBERT's norm_bias false) */
#pragma omp simd
    for (int c = 0; c < C; c++) y[c] = (x[c] - m) * s * gamma[c];
  }
  if (mean) *mean = m;
  if (rstd) *rstd = s;
}

void est_layernorm_forward_eps(float *out, float *mean, float *rstd, const float *inp, const float *gamma,
                               const float *beta, int N, int C, float eps) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++)
    layernorm_row(out + (size_t)n * C, mean ? mean + n : NULL, rstd ? rstd + n : NULL, inp + (size_t)n * C, gamma,
                  beta, C, eps);
}

void est_layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *gamma,
                           const float *beta, int N, int C) {
  est_layernorm_forward_eps(out, mean, rstd, inp, gamma, beta, N, C, EST_LAYERNORM_EPS);
}

/* The residual add and the norm in one pass over the rows: each row of x += residual is
 * still in L1 when its statistics and output are computed (the separate add read and
 * wrote all of x once more). The same float operations as add, then est_layernorm_forward. */
void est_layernorm_forward_residual(float *out, float *mean, float *rstd, float *x, const float *residual,
                                    const float *gamma, const float *beta, int N, int C) {
  est_layernorm_forward_residual_eps(out, mean, rstd, x, residual, gamma, beta, N, C, EST_LAYERNORM_EPS);
}

void est_layernorm_forward_residual_eps(float *out, float *mean, float *rstd, float *x, const float *residual,
                                        const float *gamma, const float *beta, int N, int C, float eps) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    float *xr = x + (size_t)n * C;
    const float *r = residual + (size_t)n * C;
#pragma omp simd
    for (int c = 0; c < C; c++) xr[c] += r[c];
    layernorm_row(out + (size_t)n * C, mean ? mean + n : NULL, rstd ? rstd + n : NULL, xr, gamma, beta, C, eps);
  }
}

/* d x of one element: rstd * (dy gamma - mean_c(dy gamma) - xhat mean_c(dy gamma xhat)) */
static inline float dx_elem(float dy, float gamma, float x, float mean, float rstd, float mg, float mgx) {
  float xhat = (x - mean) * rstd;
  return rstd * (dy * gamma - mg - xhat * mgx);
}

void est_layernorm_backward(float *dinp, float *dgamma, float *dbeta, const float *dout, const float *inp,
                            const float *gamma, const float *mean, const float *rstd, int N, int C) {
  est_layernorm_backward_mode(dinp, dgamma, dbeta, dout, inp, gamma, mean, rstd, N, C, EST_GRAD_ADD);
}

void est_layernorm_backward_mode(float *dinp, float *dgamma, float *dbeta, const float *dout, const float *inp,
                                 const float *gamma, const float *mean, const float *rstd, int N, int C,
                                 est_grad_mode mode) {
  const int write = mode == EST_GRAD_WRITE;
  if (dinp) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
      const float *x = inp + (size_t)n * C, *dy = dout + (size_t)n * C;
      float *dx = dinp + (size_t)n * C;
      float m = mean[n], s = rstd[n];
      float sum_g = 0.0f, sum_gx = 0.0f;
#pragma omp simd reduction(+ : sum_g, sum_gx)
      for (int c = 0; c < C; c++) {
        float g = dy[c] * gamma[c];
        sum_g += g;
        sum_gx += g * (x[c] - m) * s;
      }
      float mg = sum_g / (float)C, mgx = sum_gx / (float)C;
      if (write) /* two loops, so that WRITE never reads dx */
#pragma omp simd
        for (int c = 0; c < C; c++) dx[c] = dx_elem(dy[c], gamma[c], x[c], m, s, mg, mgx);
      else
#pragma omp simd
        for (int c = 0; c < C; c++) dx[c] += dx_elem(dy[c], gamma[c], x[c], m, s, mg, mgx);
    }
  }
  if (!dgamma && !dbeta) return;
  enum { BLOCK = 64 };
  int nblocks = (C + BLOCK - 1) / BLOCK;
#pragma omp parallel for schedule(static)
  for (int blk = 0; blk < nblocks; blk++) {
    int c0 = blk * BLOCK, c1 = c0 + BLOCK < C ? c0 + BLOCK : C;
    float ag[BLOCK] = {0}, ab[BLOCK] = {0};
    for (int n = 0; n < N; n++) {
      const float *x = inp + (size_t)n * C, *dy = dout + (size_t)n * C;
      float m = mean[n], s = rstd[n];
#pragma omp simd
      for (int c = c0; c < c1; c++) {
        ag[c - c0] += dy[c] * (x[c] - m) * s;
        ab[c - c0] += dy[c];
      }
    }
    for (int c = c0; c < c1; c++) {
      if (dgamma) dgamma[c] += ag[c - c0];
      if (dbeta) dbeta[c] += ab[c - c0];
    }
  }
}
