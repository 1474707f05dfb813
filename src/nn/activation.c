/* Activations for the FFN (modeling.get_activation) and the pooler's tanh.
 * GELU (tanh form) is the hot one: BERT-Base evaluates it on 4096 x 3072 elements per
 * layer per step, so it runs the vectorised form from fastmath.h; the libm form below is
 * its reference. */
#include <math.h>
#include <strings.h>

#include "est/nn.h"
#include "nn/fastmath.h"
#include "nn/gelu_avx512.h"
#include "nn/kernel_choice.h"

est_status est_activation_from_name(const char *name, est_activation *out) {
  /* get_activation: None/"" means no activation; the match is case-insensitive. */
  if (!name || !*name || !strcasecmp(name, "linear")) *out = EST_ACT_LINEAR;
  else if (!strcasecmp(name, "relu")) *out = EST_ACT_RELU;
  else if (!strcasecmp(name, "gelu")) *out = EST_ACT_GELU;
  else if (!strcasecmp(name, "gelu_exact")) *out = EST_ACT_GELU_EXACT;
  else if (!strcasecmp(name, "tanh")) *out = EST_ACT_TANH;
  else return est_error(EST_ERR_INVALID_ARGUMENT, "Unsupported activation: %s", name);
  return EST_OK;
}

const char *est_activation_name(est_activation act) {
  switch (act) {
  case EST_ACT_LINEAR: return "linear";
  case EST_ACT_RELU: return "relu";
  case EST_ACT_GELU: return "gelu";
  case EST_ACT_GELU_EXACT: return "gelu_exact";
  case EST_ACT_TANH: return "tanh";
  }
  return "?";
}

/* References in double precision. 0.5 (1 + tanh u) is evaluated as 1 / (1 + exp(-2u)):
 * in double the tanh form itself cancels for u < -18 and would be the less exact one. */
float est_gelu_tanh_ref(float x) {
  double xd = x, u = 0.7978845608028654 * (xd + 0.044715 * xd * xd * xd);
  return (float)(xd / (1.0 + exp(-2.0 * u)));
}

float est_gelu_tanh_grad_ref(float x) {
  double xd = x, u = 0.7978845608028654 * (xd + 0.044715 * xd * xd * xd);
  double e = exp(-2.0 * u), s = 1.0 / (1.0 + e);
  double du = 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * xd * xd);
  return (float)(s + xd * s * (e / (1.0 + e)) * 2.0 * du);
}

GELU_AVX512_TARGET static void gelu_row_avx512(float *out, const float *in, long n) { est_gelu_rows16(out, in, n); }
GELU_AVX512_TARGET static void gelu_grad_row_avx512(float *d, const float *dout, const float *in, long n, int add) {
  est_gelu_grad_rows16(d, dout, in, n, add);
}

/* The scalar forms (CPUs without AVX-512F), one compiled copy each. GCC fuses a * b + c into
 * FMAs (-ffp-contract=fast, GNU C's default) as each loop's code allows, and a loop that
 * computed both GELU and GELU' of the same x shared x^3 and the exp between them and fused
 * otherwise: its GELU differed from the forward pass's in the last bit (EST_KERNEL=noavx512
 * showed it, test_nn_gradcheck's fused GELU backward). So every scalar GELU runs
 * gelu_row_scalar and every GELU' gelu_grad_row_scalar, as the AVX-512 forms all run
 * gelu_avx512.h. */
__attribute__((noinline)) static void gelu_row_scalar(float *out, const float *in, long n) {
  for (long i = 0; i < n; i++) out[i] = est_fast_gelu(in[i]);
}

__attribute__((noinline)) static void gelu_grad_row_scalar(float *d, const float *dout, const float *in, long n,
                                                           int add) {
  if (add)
    for (long i = 0; i < n; i++) d[i] += dout[i] * est_fast_gelu_grad(in[i]);
  else
    for (long i = 0; i < n; i++) d[i] = dout[i] * est_fast_gelu_grad(in[i]);
}

void est_gelu_row(float *out, const float *in, long n) {
  if (est_kernel_avx512f()) gelu_row_avx512(out, in, n);
  else gelu_row_scalar(out, in, n);
}

void est_gelu_grad_row(float *d, const float *dout, const float *in, long n, int add) {
  if (est_kernel_avx512f()) gelu_grad_row_avx512(d, dout, in, n, add);
  else gelu_grad_row_scalar(d, dout, in, n, add);
}

GELU_AVX512_TARGET static void gelu_backward_row_avx512(float *d, float *act, const float *pre, long n) {
  est_gelu_backward_rows16(d, act, pre, n);
}

void est_gelu_backward_row(float *d, float *act, const float *pre, long n) {
  if (est_kernel_avx512f()) {
    gelu_backward_row_avx512(d, act, pre, n);
    return;
  }
  gelu_grad_row_scalar(d, d, pre, n, 0); /* d *= GELU'(pre), then act = GELU(pre): two loops */
  if (act) gelu_row_scalar(act, pre, n);
}

/* GELU passes split into blocks of this many elements over the threads */
enum { GELU_BLOCK = 4096 };

static const float INV_SQRT2 = 0.70710678118654752f;
static const float INV_SQRT_2PI = 0.39894228040143268f;

void est_activation_forward(float *out, const float *inp, size_t n, est_activation act) {
  ptrdiff_t len = (ptrdiff_t)n;
  switch (act) {
  case EST_ACT_LINEAR:
    if (out != inp)
#pragma omp parallel for simd schedule(static)
      for (ptrdiff_t i = 0; i < len; i++) out[i] = inp[i];
    break;
  case EST_ACT_RELU:
#pragma omp parallel for simd schedule(static)
    for (ptrdiff_t i = 0; i < len; i++) out[i] = inp[i] > 0.0f ? inp[i] : 0.0f;
    break;
  case EST_ACT_GELU: {
    ptrdiff_t blocks = (len + GELU_BLOCK - 1) / GELU_BLOCK;
#pragma omp parallel for schedule(static)
    for (ptrdiff_t b = 0; b < blocks; b++) {
      ptrdiff_t i = b * GELU_BLOCK;
      est_gelu_row(out + i, inp + i, len - i < GELU_BLOCK ? len - i : GELU_BLOCK);
    }
    break;
  }
  case EST_ACT_GELU_EXACT:
#pragma omp parallel for schedule(static)
    for (ptrdiff_t i = 0; i < len; i++) out[i] = 0.5f * inp[i] * (1.0f + erff(inp[i] * INV_SQRT2));
    break;
  case EST_ACT_TANH:
#pragma omp parallel for schedule(static)
    for (ptrdiff_t i = 0; i < len; i++) out[i] = tanhf(inp[i]);
    break;
  }
}

/* The derivatives the libm forms need (the tanh GELU's: est_gelu_grad_row). */
static inline float gelu_exact_grad(float x) {
  float cdf = 0.5f * (1.0f + erff(x * INV_SQRT2));
  return cdf + x * INV_SQRT_2PI * expf(-0.5f * x * x);
}
static inline float tanh_grad(float x) {
  float t = tanhf(x);
  return 1.0f - t * t;
}

/* dinp[i] = G or dinp[i] += G for every i < len, the choice made outside the loop so that
 * WRITE never reads dinp. SIMD for the forms without libm calls (libm's vector variants
 * would not give the scalar calls' bits). */
#define EACH_ELEMENT(PRAGMA, G)                                  \
  do {                                                           \
    if (write) {                                                 \
      _Pragma(PRAGMA) for (ptrdiff_t i = 0; i < len; i++) dinp[i] = (G);  \
    } else {                                                     \
      _Pragma(PRAGMA) for (ptrdiff_t i = 0; i < len; i++) dinp[i] += (G); \
    }                                                            \
  } while (0)
#define VECTOR "omp parallel for simd schedule(static)"
#define SCALAR "omp parallel for schedule(static)"

void est_activation_backward(float *dinp, const float *dout, const float *inp, size_t n, est_activation act) {
  est_activation_backward_mode(dinp, dout, inp, n, act, EST_GRAD_ADD);
}

void est_activation_backward_mode(float *dinp, const float *dout, const float *inp, size_t n, est_activation act,
                                  est_grad_mode mode) {
  const ptrdiff_t len = (ptrdiff_t)n;
  const int write = mode == EST_GRAD_WRITE;
  switch (act) {
  case EST_ACT_LINEAR: EACH_ELEMENT(VECTOR, dout[i]); break;
  case EST_ACT_RELU: EACH_ELEMENT(VECTOR, inp[i] > 0.0f ? dout[i] : 0.0f); break;
  case EST_ACT_GELU: {
    ptrdiff_t blocks = (len + GELU_BLOCK - 1) / GELU_BLOCK;
#pragma omp parallel for schedule(static)
    for (ptrdiff_t b = 0; b < blocks; b++) {
      ptrdiff_t i = b * GELU_BLOCK;
      est_gelu_grad_row(dinp + i, dout + i, inp + i, len - i < GELU_BLOCK ? len - i : GELU_BLOCK, !write);
    }
    break;
  }
  case EST_ACT_GELU_EXACT: EACH_ELEMENT(SCALAR, dout[i] * gelu_exact_grad(inp[i])); break;
  case EST_ACT_TANH: EACH_ELEMENT(SCALAR, dout[i] * tanh_grad(inp[i])); break;
  }
}
