/* est/nn.h's one backward rule: every op's backward ADDS into its input gradient (and
 * into its parameter gradients), so a buffer shared by two consumers gets both. For each op
 * a backward into a random non-zero buffer must give that buffer plus the gradient the
 * same backward gives into zeros. And its exception: the `_mode` twins with EST_GRAD_WRITE
 * write the input gradient over a buffer of NaNs (never read) and give exactly the numbers
 * the rule gives into zeros. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "est/nn.h"
#include "est/precision.h"
#include "est/rng.h"
#include "est/threads.h"
#include "test_util.h"

static est_rng g_rng;

static float *rand_buf(size_t n, float scale) {
  float *p = malloc(n * sizeof(float) + 64);
  for (size_t i = 0; i < n; i++) p[i] = (2.0f * est_rng_uniform(&g_rng) - 1.0f) * scale;
  return p;
}

static float *zeros(size_t n) { return calloc(n + 16, sizeof(float)); }

/* backward(d) for one op; d is its input gradient (for attention: dq, dk, dv in a row). */
typedef void (*backward_fn)(float *d, void *ctx);

/* est/nn.h: every backward ADDS into its input gradient. Run into zeros (g) and into a
 * random non-zero buffer (base), and check the second is base + g. Elementwise ops give
 * exactly that; GEMM-based ones may round the sum in another order, hence the 1e-6. */
static void expect_accumulates(const char *what, backward_fn fn, void *ctx, size_t n) {
  float *g = zeros(n), *acc = rand_buf(n, 2.0f), *base = malloc(n * sizeof(float));
  memcpy(base, acc, n * sizeof(float));
  fn(g, ctx);
  fn(acc, ctx);
  size_t nonzero = 0;
  for (size_t i = 0; i < n; i++) {
    double want = (double)base[i] + g[i];
    if (!(fabs(acc[i] - want) <= 1e-6 * (1.0 + fabs(want))))
      fail_msg("%s[%zu]: %.9g after a backward into %.9g, want + %.9g", what, i, acc[i], base[i], g[i]);
    nonzero += g[i] != 0.0f;
  }
  if (!nonzero) fail_msg("%s: the gradient is all zero, the check proves nothing", what);
  free(g); free(acc); free(base);
}

enum { AB = 2, AS = 6, AN = 2, ADh = 4, AH = AN * ADh, AT_N = AB * AS * AH, AI = 11 };

/* The backward's input gradient from zeros (g, the rule) and written over NaNs (w) by
 * the same op's `_mode` twin with EST_GRAD_WRITE: equal element for element (== also
 * equates the zero's two signs, which are the one difference 0 + x and x may have). */
static void expect_writes(const char *what, backward_fn add, backward_fn write, void *ctx, size_t n) {
  float *g = zeros(n), *w = malloc(n * sizeof(float));
  for (size_t i = 0; i < n; i++) w[i] = NAN;
  add(g, ctx);
  write(w, ctx);
  size_t nonzero = 0;
  for (size_t i = 0; i < n; i++) {
    if (!(w[i] == g[i])) fail_msg("%s[%zu]: written %.9g, added into zero %.9g", what, i, w[i], g[i]);
    nonzero += g[i] != 0.0f;
  }
  if (!nonzero) fail_msg("%s: the gradient is all zero, the check proves nothing", what);
  free(g); free(w);
}

typedef struct {
  float *x, *w, *dy, *g, *mean, *rstd, *k, *v, *probs, *scratch;
  uint8_t *mask;
  int32_t labels[AB * AS];
  est_activation act;
  float prob;
  int B, S, N, Dh, I; /* the shapes (the small AB.. set, or the larger one) */
  est_precision precision; /* of the GEMM-backed ops */
} acc_ctx;

/* Each op twice: the plain backward (the rule) and its `_mode` twin writing. */
static void acc_matmul(float *d, void *p) {
  acc_ctx *c = p;
  est_matmul_backward(d, NULL, NULL, c->dy, c->x, c->w, c->B * c->S, c->N * c->Dh, c->I, 0, c->precision);
}
static void write_matmul(float *d, void *p) {
  acc_ctx *c = p;
  est_matmul_backward_mode(d, NULL, NULL, c->dy, c->x, c->w, c->B * c->S, c->N * c->Dh, c->I, 0, EST_GRAD_WRITE,
                           c->precision);
}
static void acc_matmul_t(float *d, void *p) {
  acc_ctx *c = p;
  est_matmul_backward(d, NULL, NULL, c->dy, c->x, c->w, c->B * c->S, c->N * c->Dh, c->I, 1, c->precision);
}
static void write_matmul_t(float *d, void *p) {
  acc_ctx *c = p;
  est_matmul_backward_mode(d, NULL, NULL, c->dy, c->x, c->w, c->B * c->S, c->N * c->Dh, c->I, 1, EST_GRAD_WRITE,
                           c->precision);
}
static void acc_layernorm(float *d, void *p) {
  acc_ctx *c = p;
  est_layernorm_backward(d, NULL, NULL, c->dy, c->x, c->g, c->mean, c->rstd, c->B * c->S, c->N * c->Dh);
}
static void write_layernorm(float *d, void *p) {
  acc_ctx *c = p;
  est_layernorm_backward_mode(d, NULL, NULL, c->dy, c->x, c->g, c->mean, c->rstd, c->B * c->S, c->N * c->Dh,
                              EST_GRAD_WRITE);
}
static void acc_activation(float *d, void *p) {
  acc_ctx *c = p;
  est_activation_backward(d, c->dy, c->x, (size_t)c->B * c->S * c->N * c->Dh, c->act);
}
static void write_activation(float *d, void *p) {
  acc_ctx *c = p;
  est_activation_backward_mode(d, c->dy, c->x, (size_t)c->B * c->S * c->N * c->Dh, c->act, EST_GRAD_WRITE);
}
static void acc_dropout(float *d, void *p) {
  acc_ctx *c = p;
  est_dropout_backward(d, c->dy, c->mask, (size_t)c->B * c->S * c->N * c->Dh, c->prob);
}
static void write_dropout(float *d, void *p) {
  acc_ctx *c = p;
  est_dropout_backward_mode(d, c->dy, c->mask, (size_t)c->B * c->S * c->N * c->Dh, c->prob, EST_GRAD_WRITE);
}
static void acc_attention(float *d, void *p) {
  acc_ctx *c = p;
  size_t n = (size_t)c->B * c->S * c->N * c->Dh;
  est_attention_backward(d, d + n, d + 2 * n, c->scratch, c->dy, c->x, c->k, c->v, c->probs, c->mask, c->B, c->S,
                         c->N, c->Dh, c->prob, c->precision);
}
static void write_attention(float *d, void *p) {
  acc_ctx *c = p;
  size_t n = (size_t)c->B * c->S * c->N * c->Dh;
  est_attention_backward_mode(d, d + n, d + 2 * n, c->scratch, c->dy, c->x, c->k, c->v, c->probs, c->mask, c->B,
                              c->S, c->N, c->Dh, c->prob, EST_GRAD_WRITE, c->precision);
}
static void acc_attention_ref(float *d, void *p) {
  acc_ctx *c = p;
  est_attention_backward_ref(d, d + AT_N, d + 2 * AT_N, c->dy, c->x, c->k, c->v, c->probs, c->mask, AB, AS, AN, ADh,
                             c->prob);
}
static void acc_crossentropy(float *d, void *p) {
  acc_ctx *c = p;
  est_crossentropy_backward(d, c->probs, c->labels, 0.5f, AB * AS, AH);
}

static void test_backward_accumulates_into_input_gradient(void **state) {
  (void)state;
  acc_ctx c = {.B = AB, .S = AS, .N = AN, .Dh = ADh, .I = AI};
  c.x = rand_buf(AT_N, 1.0f);
  c.w = rand_buf((size_t)AH * AI, 1.0f);
  c.dy = rand_buf((size_t)AB * AS * AI, 1.0f);  /* >= AT_N: serves every op */
  c.g = rand_buf(AH, 1.0f);
  c.mean = zeros(AB * AS);
  c.rstd = zeros(AB * AS);
  c.k = rand_buf(AT_N, 1.0f);
  c.v = rand_buf(AT_N, 1.0f);
  c.probs = zeros((size_t)AB * AN * AS * AS);
  c.scratch = zeros(est_attention_scratch_floats(AB, AN, AS));
  c.mask = calloc((size_t)AB * AN * AS * AS, 1);
  float *tmp = zeros((size_t)AB * AN * AS * AS);

  expect_accumulates("matmul dinp", acc_matmul, &c, AT_N);
  expect_writes("matmul dinp", acc_matmul, write_matmul, &c, AT_N);
  expect_accumulates("matmul dinp (transposed weight)", acc_matmul_t, &c, AT_N);
  expect_writes("matmul dinp (transposed weight)", acc_matmul_t, write_matmul_t, &c, AT_N);
  est_layernorm_forward(tmp, c.mean, c.rstd, c.x, c.g, c.g, AB * AS, AH);
  expect_accumulates("layernorm dinp", acc_layernorm, &c, AT_N);
  expect_writes("layernorm dinp", acc_layernorm, write_layernorm, &c, AT_N);
  const est_activation acts[] = {EST_ACT_GELU, EST_ACT_GELU_EXACT, EST_ACT_TANH, EST_ACT_RELU, EST_ACT_LINEAR};
  for (size_t a = 0; a < sizeof acts / sizeof acts[0]; a++) {
    c.act = acts[a];
    expect_accumulates(est_activation_name(c.act), acc_activation, &c, AT_N);
    expect_writes(est_activation_name(c.act), acc_activation, write_activation, &c, AT_N);
  }
  for (int pass = 0; pass < 2; pass++) {
    c.prob = pass ? 0.25f : 0.0f;
    est_dropout_forward(tmp, c.mask, c.x, AT_N, c.prob, 5, 6, 7);
    expect_accumulates(pass ? "dropout 0.25" : "dropout 0", acc_dropout, &c, AT_N);
    expect_writes(pass ? "dropout 0.25" : "dropout 0", acc_dropout, write_dropout, &c, AT_N);
  }
  for (int pass = 0; pass < 2; pass++) {
    c.prob = pass ? 0.2f : 0.0f;
    est_attention_forward(tmp, c.probs, c.mask, c.scratch, c.x, c.k, c.v, NULL, AB, AS, AN, ADh, c.prob, 1, 2, 3,
                          EST_PRECISION_FP32);
    expect_accumulates(pass ? "attention dq/dk/dv, dropout" : "attention dq/dk/dv", acc_attention, &c, 3 * AT_N);
    expect_writes(pass ? "attention dq/dk/dv, dropout" : "attention dq/dk/dv", acc_attention, write_attention, &c,
                  3 * AT_N);
    expect_accumulates("reference attention dq/dk/dv", acc_attention_ref, &c, 3 * AT_N);
  }
  for (int b = 0; b < AB * AS; b++) c.labels[b] = b % AH;
  est_softmax_forward(c.probs, c.x, AB * AS, AH);
  expect_accumulates("cross-entropy dlogits", acc_crossentropy, &c, AT_N);
  free(c.x); free(c.w); free(c.dy); free(c.g); free(c.mean); free(c.rstd); free(c.k); free(c.v); free(c.probs);
  free(c.scratch); free(c.mask); free(tmp);
}

/* The GEMM-backed ops again at shapes where est's own fp32 kernel (every side >= 64) and,
 * in bf16 mode on AMX, the tile kernel run rather than OpenBLAS: each has its own beta = 0
 * path, which must not read C. */
static void test_write_mode_on_every_gemm_kernel(void **state) {
  (void)state;
  enum { B = 2, S = 64, N = 2, Dh = 64, H = N * Dh, I = 160, T = B * S }; /* I > H: dy [T, I] serves as dctx [T, H] too */
  acc_ctx c = {.B = B, .S = S, .N = N, .Dh = Dh, .I = I, .prob = 0.1f};
  c.x = rand_buf((size_t)T * H, 1.0f);
  c.w = rand_buf((size_t)H * I, 1.0f);
  c.dy = rand_buf((size_t)T * I, 1.0f);
  c.k = rand_buf((size_t)T * H, 1.0f);
  c.v = rand_buf((size_t)T * H, 1.0f);
  c.probs = zeros((size_t)B * N * S * S);
  c.scratch = zeros(est_attention_scratch_floats(B, N, S));
  c.mask = calloc((size_t)B * N * S * S, 1);
  float *ctx = zeros((size_t)T * H);
  est_attention_forward(ctx, c.probs, c.mask, c.scratch, c.x, c.k, c.v, NULL, B, S, N, Dh, c.prob, 1, 2, 3,
                        EST_PRECISION_FP32);
  const est_precision precisions[] = {EST_PRECISION_FP32, EST_PRECISION_BF16};
  for (int p = 0; p < 2; p++) {
    /* bf16 falls back to fp32 (with a warning) on a CPU without AVX512-BF16 */
    c.precision = est_precision_resolve(precisions[p]);
    expect_writes("matmul dinp, large", acc_matmul, write_matmul, &c, (size_t)T * H);
    expect_writes("matmul dinp (transposed weight), large", acc_matmul_t, write_matmul_t, &c, (size_t)T * H);
    expect_writes("attention dq/dk/dv, large", acc_attention, write_attention, &c, 3 * (size_t)T * H);
  }
  free(c.x); free(c.w); free(c.dy); free(c.k); free(c.v); free(c.probs); free(c.scratch); free(c.mask); free(ctx);
}

int main(void) {
  test_forced_kernel_or_skip(); /* ctest runs it per kernel too (docs/testing.md §3) */
  est_rng_init(&g_rng, 4321);
  est_set_num_threads(2);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_backward_accumulates_into_input_gradient),
      cmocka_unit_test(test_write_mode_on_every_gemm_kernel),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
