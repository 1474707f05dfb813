/* Rotary position embeddings (RoFormer; transformers' ModernBERT / Llama form, rotate_half):
 * in each head's Dh columns, the pair (x[k], x[k + Dh/2]), k < Dh/2, of the token at position
 * s turns by the angle s * theta^(-2k/Dh):
 *   out[k]        = x[k] cos - x[k + Dh/2] sin
 *   out[k + Dh/2] = x[k + Dh/2] cos + x[k] sin
 * A rotation: its backward turns the gradient back by the same angle (the transpose).
 *
 * The fast form reads a table of cos and sin made once per theta (est_rotary_table); the
 * reference computes every angle in double from theta. */
#include <math.h>

#include "est/nn.h"

void est_rotary_table(float *table, int P, int Dh, double theta) {
  const int half = Dh / 2;
  float *cos_t = table, *sin_t = table + (size_t)P * half;
  for (int k = 0; k < half; k++) {
    /* transformers: inv_freq = 1 / theta^(arange(0, Dh, 2) / Dh) in float32, then
     * position . inv_freq in float32, then cos and sin of that float */
    const float inv_freq = (float)(1.0 / pow(theta, (double)(2 * k) / (double)Dh));
    for (int s = 0; s < P; s++) {
      const float angle = (float)s * inv_freq;
      cos_t[(size_t)s * half + k] = (float)cos((double)angle);
      sin_t[(size_t)s * half + k] = (float)sin((double)angle);
    }
  }
}

/* x [B,S,N*Dh] in place by +angle (dir = 1) or -angle (dir = -1). */
static void rotate(float *x, const float *table, int B, int S, int N, int Dh, int P, float dir) {
  const int half = Dh / 2, HD = N * Dh;
  const float *cos_t = table, *sin_t = table + (size_t)P * half;
#pragma omp parallel for schedule(static)
  for (int bs = 0; bs < B * S; bs++) {
    const int s = bs % S;
    const float *c = cos_t + (size_t)s * half, *sn = sin_t + (size_t)s * half;
    for (int h = 0; h < N; h++) {
      float *lo = x + (size_t)bs * HD + (size_t)h * Dh, *hi = lo + half;
#pragma omp simd
      for (int k = 0; k < half; k++) {
        const float a = lo[k], b = hi[k], si = dir * sn[k];
        lo[k] = a * c[k] - b * si;
        hi[k] = b * c[k] + a * si;
      }
    }
  }
}

void est_rotary_forward(float *x, const float *table, int B, int S, int N, int Dh, int P) {
  rotate(x, table, B, S, N, Dh, P, 1.0f);
}

void est_rotary_backward(float *dx, const float *table, int B, int S, int N, int Dh, int P) {
  rotate(dx, table, B, S, N, Dh, P, -1.0f);
}

void est_rotary_forward_ref(float *out, const float *x, int B, int S, int N, int Dh, double theta) {
  const int half = Dh / 2, HD = N * Dh;
  for (int b = 0; b < B; b++)
    for (int s = 0; s < S; s++)
      for (int h = 0; h < N; h++) {
        const size_t base = ((size_t)b * S + s) * HD + (size_t)h * Dh;
        for (int k = 0; k < half; k++) {
          const double angle = s / pow(theta, (double)(2 * k) / (double)Dh);
          const double lo = x[base + k], hi = x[base + k + half];
          out[base + k] = (float)(lo * cos(angle) - hi * sin(angle));
          out[base + k + half] = (float)(hi * cos(angle) + lo * sin(angle));
        }
      }
}
