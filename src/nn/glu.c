/* Gated linear units (GeGLU, ModernBERT's feed-forward; SwiGLU's shape): the first dense
 * layer gives [N, 2I], its first I columns the input x and its last I the gate g
 * (transformers: input, gate = Wi(h).chunk(2, dim=-1)), and
 *   out = act(x) * g                      forward
 *   dx = dout * g * act'(x),  dg = dout * act(x)   backward.
 * act is est_activation_forward's (the erf GELU for ModernBERT's "gelu"). */
#include <math.h>

#include "est/nn.h"
#include "nn/fastmath.h"

static const float INV_SQRT2 = 0.70710678118654752f;
static const float INV_SQRT_2PI = 0.39894228040143268f;

/* act(x) and, when grad is not NULL, act'(x): the scalar forms of activation.c's. */
static inline float act_of(float x, est_activation act, float *grad) {
  switch (act) {
  case EST_ACT_GELU:
    if (grad) *grad = est_fast_gelu_grad(x);
    return est_fast_gelu(x);
  case EST_ACT_GELU_EXACT: {
    const float cdf = 0.5f * (1.0f + erff(x * INV_SQRT2));
    if (grad) *grad = cdf + x * INV_SQRT_2PI * expf(-0.5f * x * x);
    return x * cdf;
  }
  case EST_ACT_RELU:
    if (grad) *grad = x > 0.0f ? 1.0f : 0.0f;
    return x > 0.0f ? x : 0.0f;
  case EST_ACT_TANH: {
    const float t = tanhf(x);
    if (grad) *grad = 1.0f - t * t;
    return t;
  }
  case EST_ACT_LINEAR: break;
  }
  if (grad) *grad = 1.0f;
  return x;
}

void est_glu_forward(float *out, const float *inp, int N, int IM, est_activation act) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    const float *x = inp + (size_t)n * 2 * IM, *g = x + IM;
    float *o = out + (size_t)n * IM;
    for (int i = 0; i < IM; i++) o[i] = act_of(x[i], act, NULL) * g[i];
  }
}

void est_glu_backward_mode(float *dinp, const float *dout, const float *inp, int N, int IM, est_activation act,
                           est_grad_mode mode) {
  const int add = mode == EST_GRAD_ADD;
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    const float *x = inp + (size_t)n * 2 * IM, *g = x + IM, *d = dout + (size_t)n * IM;
    float *dx = dinp + (size_t)n * 2 * IM, *dg = dx + IM;
    for (int i = 0; i < IM; i++) {
      float grad;
      const float a = act_of(x[i], act, &grad);
      const float vx = d[i] * g[i] * grad, vg = d[i] * a;
      dx[i] = add ? dx[i] + vx : vx;
      dg[i] = add ? dg[i] + vg : vg;
    }
  }
}
