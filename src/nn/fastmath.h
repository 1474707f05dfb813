/* Branch-free float kernels that the compiler can vectorise (no libm calls in hot loops,
 * no -ffast-math). Internal to src/nn. */
#ifndef EST_NN_FASTMATH_H
#define EST_NN_FASTMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* exp(x), ~1 ulp (Cephes expf polynomial): x = n ln2 + r with |r| <= ln2/2, exp(r) by a
 * degree-6 polynomial, 2^n put straight into the exponent bits. Below -87 the result is 0
 * (true values there are denormal or 0; masked attention scores must give exactly 0).
 * Above 88 it saturates at exp(88) ~ 1.65e38 instead of inf, so 1 + e and e/(1+e) in the
 * GELU derivative stay finite. */
static inline float est_fast_expf(float x) {
  float underflow = x < -87.0f ? 0.0f : 1.0f;
  x = x < -87.0f ? -87.0f : x;
  x = x > 88.0f ? 88.0f : x;
  /* n = round(x / ln2) by the 1.5 * 2^23 trick: branch-free and vectorisable, where
   * floorf is a libm call without -ffast-math. Exact for |x / ln2| < 2^22. */
  float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  /* n in [-126, 127] after the clamp, so 2^n is a normal float; x = 88 gives n = 127. */
  /* Shifted as unsigned: a NaN x gives a meaningless n (the result is NaN through p anyway),
   * and a left shift of a negative int would be undefined. */
  uint32_t bits = (uint32_t)((int32_t)n + 127) << 23;
  float scale;
  memcpy(&scale, &bits, sizeof scale);
  return p * scale * underflow;
}

#define EST_GELU_K 0.7978845608028654f   /* sqrt(2/pi) */
#define EST_GELU_A 0.044715f

/* tanh-GELU written as x * sigmoid(2u), u = k (x + a x^3): the identity
 * 0.5 (1 + tanh u) = 1 / (1 + exp(-2u)) avoids both libm tanh and the cancellation of
 * 1 + tanh(u) for negative x. */
static inline float est_fast_gelu(float x) {
  float u = EST_GELU_K * (x + EST_GELU_A * x * x * x);
  return x / (1.0f + est_fast_expf(-2.0f * u));
}

/* d/dx [x sigmoid(2u)] = s + x s (1 - s) 2 u',  s = sigmoid(2u), u' = k (1 + 3 a x^2). */
static inline float est_fast_gelu_grad(float x) {
  float u = EST_GELU_K * (x + EST_GELU_A * x * x * x);
  float e = est_fast_expf(-2.0f * u);
  float s = 1.0f / (1.0f + e);
  float du = EST_GELU_K * (1.0f + 3.0f * EST_GELU_A * x * x);
  return s + x * s * (e * s) * 2.0f * du;
}

#endif
