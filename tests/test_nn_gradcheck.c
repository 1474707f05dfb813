/* nn ops: finite-difference gradient checks, fast-vs-reference kernels, accumulation
 * semantics (the rule for every op: test_nn_accumulate.c), dropout determinism and thread-count independence. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/nn.h"
#include "est/precision.h"
#include "est/rng.h"
#include "est/threads.h"
#include "nn/fastmath.h"
#include "nn/gelu_avx512.h"
#include "nn/gemm.h"
#include "nn/kernel_choice.h"
#include "test_util.h"

/* ---- helpers ------------------------------------------------------------------------ */

static est_rng g_rng;

static float *rand_buf(size_t n, float scale) {
  float *p = malloc(n * sizeof(float) + 64);
  for (size_t i = 0; i < n; i++) p[i] = (2.0f * est_rng_uniform(&g_rng) - 1.0f) * scale;
  return p;
}

static float *zeros(size_t n) { return calloc(n + 16, sizeof(float)); }

static double dot(const float *a, const float *w, size_t n) {
  double s = 0.0;
  for (size_t i = 0; i < n; i++) s += (double)a[i] * w[i];
  return s;
}

/* A scalar loss L(x) = sum(out(x) * w) recomputed by `loss` for the current inputs. */
typedef double (*loss_fn)(void *ctx);

/* Compares analytic[i] with the central difference of `loss` wrt x[i], for every i (or a
 * stride of them when n is large). Passes when |num - an| <= atol + rtol * max(|num|,|an|). */
static void gradcheck(const char *what, float *x, size_t n, const float *analytic, loss_fn loss, void *ctx,
                      float eps, double rtol, double atol) {
  size_t stride = n > 400 ? n / 200 : 1;
  int checked = 0;
  for (size_t i = 0; i < n; i += stride) {
    float saved = x[i];
    x[i] = saved + eps;
    double lp = loss(ctx);
    x[i] = saved - eps;
    double lm = loss(ctx);
    x[i] = saved;
    /* the step actually taken in float */
    double h = (double)(saved + eps) - (double)(saved - eps);
    double num = (lp - lm) / h, an = analytic[i];
    double tol = atol + rtol * fmax(fabs(num), fabs(an));
    if (fabs(num - an) > tol) {
      fail_msg("%s: element %zu analytic %.7g numeric %.7g (tol %.3g)", what, i, an, num, tol);
    }
    checked++;
  }
  assert_true(checked > 0);
}

static void assert_close(const char *what, const float *a, const float *b, size_t n, double rtol, double atol) {
  for (size_t i = 0; i < n; i++) {
    double tol = atol + rtol * fmax(fabs(a[i]), fabs(b[i]));
    if (!(fabs((double)a[i] - b[i]) <= tol)) fail_msg("%s[%zu]: %.9g vs %.9g", what, i, a[i], b[i]);
  }
}

static int setup(void **state) {
  (void)state;
  est_rng_init(&g_rng, 1234);
  est_set_num_threads(2);
  return 0;
}

/* ---- dense -------------------------------------------------------------------------- */

typedef struct {
  float *x, *w, *b, *out, *dw;
  int N, IC, OC, tr;
} dense_ctx;

static double dense_loss(void *p) {
  dense_ctx *c = p;
  est_matmul_forward(c->out, c->x, c->w, c->b, c->N, c->IC, c->OC, c->tr, EST_PRECISION_FP32);
  return dot(c->out, c->dw, (size_t)c->N * c->OC);
}

static void test_dense_fast_matches_reference_and_gradcheck(void **state) {
  (void)state;
  for (int tr = 0; tr <= 1; tr++) {
    int N = 7, IC = 13, OC = 5;
    float *x = rand_buf((size_t)N * IC, 1.0f), *w = rand_buf((size_t)IC * OC, 0.5f), *b = rand_buf(OC, 0.5f);
    float *dy = rand_buf((size_t)N * OC, 1.0f);
    float *y = zeros((size_t)N * OC), *yr = zeros((size_t)N * OC);
    est_matmul_forward(y, x, w, b, N, IC, OC, tr, EST_PRECISION_FP32);
    est_matmul_forward_ref(yr, x, w, b, N, IC, OC, tr);
    assert_close("dense forward", y, yr, (size_t)N * OC, 1e-5, 1e-6);

    float *dx = zeros((size_t)N * IC), *dw = zeros((size_t)IC * OC), *db = zeros(OC);
    float *dxr = zeros((size_t)N * IC), *dwr = zeros((size_t)IC * OC), *dbr = zeros(OC);
    est_matmul_backward(dx, dw, db, dy, x, w, N, IC, OC, tr, EST_PRECISION_FP32);
    est_matmul_backward_ref(dxr, dwr, dbr, dy, x, w, N, IC, OC, tr);
    assert_close("dense dinp", dx, dxr, (size_t)N * IC, 1e-5, 1e-6);
    assert_close("dense dweight", dw, dwr, (size_t)IC * OC, 1e-5, 1e-6);
    assert_close("dense dbias", db, dbr, OC, 1e-5, 1e-6);

    dense_ctx c = {x, w, b, zeros((size_t)N * OC), dy, N, IC, OC, tr};
    gradcheck("dense dx", x, (size_t)N * IC, dx, dense_loss, &c, 1e-2f, 1e-3, 1e-4);
    gradcheck("dense dw", w, (size_t)IC * OC, dw, dense_loss, &c, 1e-2f, 1e-3, 1e-4);
    gradcheck("dense db", b, OC, db, dense_loss, &c, 1e-2f, 1e-3, 1e-4);

    /* Every gradient accumulates: a second backward doubles all three. */
    float *dx2 = malloc((size_t)N * IC * sizeof(float));
    memcpy(dx2, dx, (size_t)N * IC * sizeof(float));
    est_matmul_backward(dx, dw, db, dy, x, w, N, IC, OC, tr, EST_PRECISION_FP32);
    for (int i = 0; i < N * IC; i++) assert_float_equal(dx[i], 2.0f * dx2[i], 1e-5f);
    for (int i = 0; i < OC; i++) assert_float_equal(db[i], 2.0f * dbr[i], 1e-5f);
    for (int i = 0; i < IC * OC; i++) assert_float_equal(dw[i], 2.0f * dwr[i], 1e-5f);
    free(x); free(w); free(b); free(dy); free(y); free(yr); free(dx); free(dw); free(db);
    free(dxr); free(dwr); free(dbr); free(c.out); free(dx2);
  }
}

static void test_dense_bert_sized_blas_vs_reference(void **state) {
  (void)state;
  /* Large enough for est_sgemm_parallel to split C across threads: by columns (more
   * outputs than rows) and by rows (many tokens, few outputs), both weight layouts. */
  static const int shapes[][3] = {{96, 130, 200}, {600, 64, 40}};
  for (int sh = 0; sh < 2; sh++)
    for (int tr = 0; tr <= 1; tr++) {
      int N = shapes[sh][0], IC = shapes[sh][1], OC = shapes[sh][2];
      float *x = rand_buf((size_t)N * IC, 1.0f), *w = rand_buf((size_t)IC * OC, 0.1f), *b = rand_buf(OC, 0.1f);
      float *y = zeros((size_t)N * OC), *yr = zeros((size_t)N * OC);
      est_matmul_forward(y, x, w, b, N, IC, OC, tr, EST_PRECISION_FP32);
      est_matmul_forward_ref(yr, x, w, b, N, IC, OC, tr);
      assert_close("big dense forward", y, yr, (size_t)N * OC, 1e-4, 1e-5);
      float *dy = rand_buf((size_t)N * OC, 1.0f);
      float *dx = zeros((size_t)N * IC), *dxr = zeros((size_t)N * IC);
      float *dw = zeros((size_t)IC * OC), *dwr = zeros((size_t)IC * OC);
      est_matmul_backward(dx, dw, NULL, dy, x, w, N, IC, OC, tr, EST_PRECISION_FP32);
      est_matmul_backward_ref(dxr, dwr, NULL, dy, x, w, N, IC, OC, tr);
      assert_close("big dense dinp", dx, dxr, (size_t)N * IC, 1e-4, 1e-5);
      assert_close("big dense dweight", dw, dwr, (size_t)IC * OC, 1e-4, 1e-5);
      free(x); free(w); free(b); free(y); free(yr); free(dy); free(dx); free(dxr); free(dw); free(dwr);
    }
}

/* est_matmul_backward_gelu against what it fuses, the three ops in a row (GELU's forward
 * recomputed, d act written by the dinp GEMM, GELU's backward written from it). The dinp
 * GEMM runs the same kernel both ways (the epilogue does not change the kernel choice), and
 * the epilogue and the passes run the same GELU code (gelu_avx512.h), so every output is
 * equal (==). The shapes cover est's own kernel (every side >= 64, N and K <= 1024),
 * OpenBLAS with the epilogue as passes (below 64 rows, and N = 1100), the tile kernel in
 * bf16, and both weight layouts; the weight gradient's and the bias's += included. */
static void test_dense_backward_through_gelu_fused(void **state) {
  (void)state;
  static const int shapes[][3] = {{200, 96, 130}, {40, 37, 50}, {256, 512, 128}, {96, 1100, 64}};
  for (int prec = 0; prec < 2; prec++) {
    /* fp32 again without AVX512-BF16 */
    const est_precision precision = est_precision_resolve(prec ? EST_PRECISION_BF16 : EST_PRECISION_FP32);
    for (int sh = 0; sh < 4; sh++)
      for (int tr = 0; tr <= 1; tr++) {
        int N = shapes[sh][0], IC = shapes[sh][1], OC = shapes[sh][2];
        size_t NI = (size_t)N * IC, W = (size_t)IC * OC;
        float *pre = rand_buf(NI, 2.0f), *w = rand_buf(W, 0.1f), *dy = rand_buf((size_t)N * OC, 1.0f);
        float *dw0 = rand_buf(W, 1.0f), *db0 = rand_buf(OC, 1.0f);
        float *act = zeros(NI), *dact = zeros(NI), *dpre = zeros(NI), *dw = zeros(W), *db = zeros(OC);
        memcpy(dw, dw0, W * sizeof(float));
        memcpy(db, db0, OC * sizeof(float));
        est_activation_forward(act, pre, NI, EST_ACT_GELU);
        est_matmul_backward_mode(dact, dw, db, dy, act, w, N, IC, OC, tr, EST_GRAD_WRITE, precision);
        est_activation_backward_mode(dpre, dact, pre, NI, EST_ACT_GELU, EST_GRAD_WRITE);
        float *act_f = malloc(NI * sizeof(float)), *dpre_f = malloc(NI * sizeof(float));
        for (size_t i = 0; i < NI; i++) act_f[i] = dpre_f[i] = NAN; /* written, never read */
        float *dw_f = malloc(W * sizeof(float)), *db_f = malloc(OC * sizeof(float));
        memcpy(dw_f, dw0, W * sizeof(float));
        memcpy(db_f, db0, OC * sizeof(float));
        est_matmul_backward_gelu(dpre_f, act_f, dw_f, db_f, dy, pre, w, N, IC, OC, tr, precision);
        for (size_t i = 0; i < NI; i++)
          if (!(dpre_f[i] == dpre[i] && act_f[i] == act[i]))
            fail_msg("%s [%d,%d,%d] tr %d, element %zu: fused d pre %.9g act %.9g, in a row %.9g %.9g",
                     prec ? "bf16" : "fp32", N, IC, OC, tr, i, dpre_f[i], act_f[i], dpre[i], act[i]);
        for (size_t i = 0; i < W; i++) assert_true(dw_f[i] == dw[i]);
        for (int i = 0; i < OC; i++) assert_true(db_f[i] == db[i]);
        free(pre); free(w); free(dy); free(dw0); free(db0); free(act); free(dact); free(dpre); free(dw); free(db);
        free(act_f); free(dpre_f); free(dw_f); free(db_f);
      }
  }
}

/* ---- layer norm --------------------------------------------------------------------- */

typedef struct {
  float *x, *g, *b, *out, *mean, *rstd, *w;
  int N, C;
} ln_ctx;

static double ln_loss(void *p) {
  ln_ctx *c = p;
  est_layernorm_forward(c->out, c->mean, c->rstd, c->x, c->g, c->b, c->N, c->C);
  return dot(c->out, c->w, (size_t)c->N * c->C);
}

static void test_layernorm_gradcheck(void **state) {
  (void)state;
  int N = 5, C = 37;
  ln_ctx c = {rand_buf((size_t)N * C, 2.0f), rand_buf(C, 1.0f), rand_buf(C, 1.0f), zeros((size_t)N * C),
              zeros(N), zeros(N), rand_buf((size_t)N * C, 1.0f), N, C};
  for (int i = 0; i < C; i++) c.x[i] += 3.0f;  /* a row with a large mean */
  ln_loss(&c);
  /* Forward against a double-precision recomputation. */
  for (int n = 0; n < N; n++) {
    double m = 0, v = 0;
    for (int i = 0; i < C; i++) m += c.x[n * C + i];
    m /= C;
    for (int i = 0; i < C; i++) v += (c.x[n * C + i] - m) * (c.x[n * C + i] - m);
    v /= C;
    for (int i = 0; i < C; i++) {
      double y = (c.x[n * C + i] - m) / sqrt(v + 1e-12) * c.g[i] + c.b[i];
      assert_true(fabs(y - c.out[n * C + i]) <= 1e-5 * (1 + fabs(y)));
    }
  }
  float *dx = zeros((size_t)N * C), *dg = zeros(C), *db = zeros(C);
  est_layernorm_backward(dx, dg, db, c.w, c.x, c.g, c.mean, c.rstd, N, C);
  gradcheck("layernorm dx", c.x, (size_t)N * C, dx, ln_loss, &c, 1e-2f, 2e-3, 2e-4);
  gradcheck("layernorm dgamma", c.g, C, dg, ln_loss, &c, 1e-2f, 1e-3, 1e-4);
  gradcheck("layernorm dbeta", c.b, C, db, ln_loss, &c, 1e-2f, 1e-3, 1e-4);
  /* dgamma/dbeta and dinp all accumulate: a second backward doubles them. */
  float *dg1 = malloc(C * sizeof(float)), *dx1 = malloc((size_t)N * C * sizeof(float));
  memcpy(dg1, dg, C * sizeof(float));
  memcpy(dx1, dx, (size_t)N * C * sizeof(float));
  est_layernorm_backward(dx, dg, db, c.w, c.x, c.g, c.mean, c.rstd, N, C);
  for (int i = 0; i < C; i++) assert_float_equal(dg[i], 2.0f * dg1[i], 1e-5f);
  for (int i = 0; i < N * C; i++) assert_true(dx[i] == 2.0f * dx1[i]);
  free(c.x); free(c.g); free(c.b); free(c.out); free(c.mean); free(c.rstd); free(c.w);
  free(dx); free(dg); free(db); free(dg1); free(dx1);
}

/* ---- activations -------------------------------------------------------------------- */

static void test_gelu_values_and_fast_vs_libm(void **state) {
  (void)state;
  /* The spec's reference table (tanh form and erf form). */
  const float xs[] = {-3, -1, -0.5f, 0, 0.5f, 1, 2, 3};
  const float tanh_form[] = {-0.0036374f, -0.1588080f, -0.1542860f, 0, 0.3457140f, 0.8411920f, 1.9545977f, 2.9963626f};
  const float erf_form[] = {-0.0040497f, -0.1586553f, -0.1542688f, 0, 0.3457312f, 0.8413447f, 1.9544997f, 2.9959503f};
  float y[8], ye[8];
  est_activation_forward(y, xs, 8, EST_ACT_GELU);
  est_activation_forward(ye, xs, 8, EST_ACT_GELU_EXACT);
  for (int i = 0; i < 8; i++) {
    assert_float_equal(y[i], tanh_form[i], 2e-7f + 1e-6f * fabsf(tanh_form[i]));
    assert_float_equal(ye[i], erf_form[i], 2e-7f + 1e-6f * fabsf(erf_form[i]));
  }
  /* Vectorised tanh-GELU against libm over a dense grid: ~1e-7 relative. */
  enum { M = 20001 };
  float *x = malloc(M * sizeof(float)), *f = malloc(M * sizeof(float)), *g = zeros(M);
  float *ones = malloc(M * sizeof(float));
  for (int i = 0; i < M; i++) {
    x[i] = -12.0f + 24.0f * (float)i / (M - 1);
    ones[i] = 1.0f;
  }
  est_activation_forward(f, x, M, EST_ACT_GELU);
  est_activation_backward(g, ones, x, M, EST_ACT_GELU);
  double worst = 0, worst_g = 0, worst_x = 0;
  for (int i = 0; i < M; i++) {
    double r = est_gelu_tanh_ref(x[i]), rg = est_gelu_tanh_grad_ref(x[i]);
    /* relative error; the derivative crosses zero near x = -0.75, so it gets an absolute floor */
    double e = fabs(f[i] - r) / fmax(fabs(r), 1e-30), eg = fabs(g[i] - rg) / fmax(fabs(rg), 1e-2);
    /* Past |x| = 5 the value is below 1e-6 |x| and float's own rounding of the argument
     * -2u (condition number |2u|) dominates: only the absolute error matters there. */
    if (fabsf(x[i]) > 5.0f) {
      assert_true(fabs(f[i] - r) < 1e-9);
      e = 0;
    }
    /* float rounds the argument -2u to 2^-24 |2u|, which exp turns into that much
     * relative error: measure in units of that inherent error (1 + |2u|) ulp. */
    double xd = x[i], u2 = 2 * 0.7978845608028654 * (xd + 0.044715 * xd * xd * xd);
    e /= 1.0 + fabs(u2);
    eg /= 1.0 + fabs(u2);
    if (fabs(r) > 1e-30 && e > worst) {
      worst = e;
      worst_x = x[i];
    }
    if (eg > worst_g) worst_g = eg;
  }
  printf("fast tanh-gelu: max rel error / (1+|2u|) %.3g (value, at x = %g), %.3g (derivative)\n", worst,
         worst_x, worst_g);
  assert_true(worst < 2.5e-7);
  assert_true(worst_g < 5e-6);  /* s + x s (1-s) 2u' cancels near x = -2 */
  free(x); free(f); free(g); free(ones);
}

GELU_AVX512_TARGET static void gelu_avx512_rows(float *f, float *g, const float *x, const float *ones, long n) {
  est_gelu_rows16(f, x, n);
  est_gelu_grad_rows16(g, ones, x, n, 0);
}

/* gelu_avx512.h's 16-lane GELU and derivative (every vectorised GELU of est: the GEMM
 * epilogues and the passes) against their readable scalar twins in fastmath.h, bit for bit:
 * every 4099th float bit pattern (a million, all exponents, both signs), the edges of the
 * exp clamps (-2u = -87 and 88 reached near x = 5.6 and -5.8), 0, infinities and NaN. */
static void test_gelu_avx512_equals_scalar_form(void **state) {
  (void)state;
  if (!est_kernel_avx512f()) skip(); /* no AVX-512F, or EST_KERNEL=noavx512 */
  enum { SWEEP = 1048000, EDGES = 4001, N = SWEEP + EDGES + 5 };
  float *x = malloc(N * sizeof(float)), *f = malloc(N * sizeof(float)), *g = malloc(N * sizeof(float));
  float *ones = malloc(N * sizeof(float));
  long n = 0;
  for (long i = 0; i < SWEEP; i++) {
    uint32_t bits = (uint32_t)(i * 4099u);
    memcpy(&x[n++], &bits, sizeof(float));
  }
  for (int i = 0; i < EDGES; i++) x[n++] = -8.0f + 16.0f * (float)i / (EDGES - 1);
  const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN};
  for (int i = 0; i < 5; i++) x[n++] = special[i];
  for (long i = 0; i < n; i++) ones[i] = 1.0f;
  gelu_avx512_rows(f, g, x, ones, n - 3); /* n - 3: a masked tail too, then the rest */
  gelu_avx512_rows(f + n - 3, g + n - 3, x + n - 3, ones, 3);
  for (long i = 0; i < n; i++) {
    float want = est_fast_gelu(x[i]), want_g = 1.0f * est_fast_gelu_grad(x[i]);
    int same = (isnan(want) ? isnan(f[i]) : f[i] == want && signbit(f[i]) == signbit(want)) &&
               (isnan(want_g) ? isnan(g[i]) : g[i] == want_g);
    if (!same)
      fail_msg("x = %.9g: gelu %.9g vs scalar %.9g, derivative %.9g vs scalar %.9g", x[i], f[i], want, g[i], want_g);
  }
  free(x); free(f); free(g); free(ones);
}

typedef struct {
  float *x, *out, *w;
  size_t n;
  est_activation act;
} act_ctx;

static double act_loss(void *p) {
  act_ctx *c = p;
  est_activation_forward(c->out, c->x, c->n, c->act);
  return dot(c->out, c->w, c->n);
}

static void test_activation_gradcheck(void **state) {
  (void)state;
  const est_activation acts[] = {EST_ACT_GELU, EST_ACT_GELU_EXACT, EST_ACT_TANH, EST_ACT_RELU, EST_ACT_LINEAR};
  for (size_t a = 0; a < sizeof acts / sizeof acts[0]; a++) {
    size_t n = 64;
    act_ctx c = {rand_buf(n, 4.0f), zeros(n), rand_buf(n, 1.0f), n, acts[a]};
    /* keep relu's kink away from the difference step */
    for (size_t i = 0; i < n; i++)
      if (fabsf(c.x[i]) < 0.05f) c.x[i] = 0.3f;
    float *dx = zeros(n);
    est_activation_backward(dx, c.w, c.x, n, c.act);
    gradcheck(est_activation_name(c.act), c.x, n, dx, act_loss, &c, 1e-2f, 2e-3, 1e-4);
    free(c.x); free(c.out); free(c.w); free(dx);
  }
}

static void test_activation_names(void **state) {
  (void)state;
  est_activation a;
  assert_int_equal(est_activation_from_name("GeLU", &a), EST_OK);
  assert_int_equal(a, EST_ACT_GELU);
  assert_int_equal(est_activation_from_name("gelu_exact", &a), EST_OK);
  assert_int_equal(a, EST_ACT_GELU_EXACT);
  assert_int_equal(est_activation_from_name("", &a), EST_OK);
  assert_int_equal(a, EST_ACT_LINEAR);
  assert_int_equal(est_activation_from_name("swish", &a), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "Unsupported activation"));
}

/* ---- attention ---------------------------------------------------------------------- */

typedef struct {
  float *q, *k, *v, *ctx, *probs, *scratch, *w;
  uint8_t *mask;
  const int32_t *input_mask;
  int B, S, N, Dh;
  float prob;
  int window;
} att_ctx;

static double att_loss(void *p) {
  att_ctx *c = p;
  est_attention_forward_window_at(c->ctx, c->probs, c->mask, c->scratch, c->q, c->k, c->v, c->input_mask, c->B,
                                  c->S, c->N, c->Dh, c->window, c->prob, 77, 5, 3, 0, EST_PRECISION_FP32);
  return dot(c->ctx, c->w, (size_t)c->B * c->S * c->N * c->Dh);
}

static void attention_case(float prob) {
  enum { B = 2, S = 5, N = 2, Dh = 3 };
  size_t n = (size_t)B * S * N * Dh;
  /* example 0: last two keys padded; example 1: padding in the middle. (A fully masked
   * example is not differentiable in float32 by finite differences: its scores sit near
   * -10000 where one ulp is 1e-3. test_attention_fully_masked_row covers it.) */
  static const int32_t input_mask[B * S] = {1, 1, 1, 0, 0, 0, 1, 0, 1, 1};
  att_ctx c = {rand_buf(n, 1.0f), rand_buf(n, 1.0f), rand_buf(n, 1.0f), zeros(n),
               zeros((size_t)B * N * S * S), zeros(est_attention_scratch_floats(B, N, S)), rand_buf(n, 1.0f),
               calloc((size_t)B * N * S * S, 1), input_mask, B, S, N, Dh, prob, -1};
  att_loss(&c);
  /* probabilities: rows sum to 1, masked keys get ~e^-10000 = 0, a fully masked row is uniform */
  for (int h = 0; h < N; h++)
    for (int i = 0; i < S; i++) {
      const float *row0 = c.probs + ((size_t)(0 * N + h) * S + i) * S;
      const float *row1 = c.probs + ((size_t)(1 * N + h) * S + i) * S;
      double s0 = 0;
      for (int j = 0; j < S; j++) s0 += row0[j];
      assert_float_equal(s0, 1.0, 1e-6);
      assert_true(row0[3] == 0.0f && row0[4] == 0.0f);
      assert_true(row1[0] == 0.0f && row1[2] == 0.0f && row1[1] > 0.0f);
    }
  float *dq = zeros(n), *dk = zeros(n), *dv = zeros(n);
  est_attention_backward(dq, dk, dv, c.scratch, c.w, c.q, c.k, c.v, c.probs, c.mask, B, S, N, Dh, prob,
                         EST_PRECISION_FP32);
  gradcheck("attention dq", c.q, n, dq, att_loss, &c, 1e-2f, 2e-3, 2e-4);
  gradcheck("attention dk", c.k, n, dk, att_loss, &c, 1e-2f, 2e-3, 2e-4);
  gradcheck("attention dv", c.v, n, dv, att_loss, &c, 1e-2f, 2e-3, 2e-4);
  /* dk of the padded keys of example 0 is exactly zero (their probabilities underflow). */
  for (int s = 3; s < S; s++)
    for (int j = 0; j < N * Dh; j++) assert_true(fabsf(dk[(size_t)s * N * Dh + j]) < 1e-30f);
  free(c.q); free(c.k); free(c.v); free(c.ctx); free(c.probs); free(c.scratch); free(c.w); free(c.mask);
  free(dq); free(dk); free(dv);
}

/* A sliding window of 1 (query i sees keys i-1..i+1) over padded keys: gradients by finite
 * differences, the probabilities 0 outside the window. */
static void test_attention_window_gradcheck(void **state) {
  (void)state;
  enum { B = 2, S = 6, N = 2, Dh = 4 };
  size_t n = (size_t)B * S * N * Dh;
  /* one padded key: every query keeps a real key in its window (a query with only padded
   * keys in reach has its scores near -10000, where finite differences see float steps) */
  static const int32_t input_mask[B * S] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0};
  for (int pass = 0; pass < 2; pass++) {
    const float prob = pass ? 0.3f : 0.0f;
    att_ctx c = {rand_buf(n, 1.0f), rand_buf(n, 1.0f), rand_buf(n, 1.0f), zeros(n),
                 zeros((size_t)B * N * S * S), zeros(est_attention_scratch_floats(B, N, S)), rand_buf(n, 1.0f),
                 calloc((size_t)B * N * S * S, 1), input_mask, B, S, N, Dh, prob, 1};
    att_loss(&c);
    for (int bh = 0; bh < B * N; bh++)
      for (int i = 0; i < S; i++)
        for (int j = 0; j < S; j++)
          if (abs(i - j) > 1) assert_true(c.probs[((size_t)bh * S + i) * S + j] == 0.0f);
    float *dq = zeros(n), *dk = zeros(n), *dv = zeros(n);
    est_attention_backward(dq, dk, dv, c.scratch, c.w, c.q, c.k, c.v, c.probs, c.mask, B, S, N, Dh, prob,
                           EST_PRECISION_FP32);
    gradcheck("window attention dq", c.q, n, dq, att_loss, &c, 1e-2f, 2e-3, 2e-4);
    gradcheck("window attention dk", c.k, n, dk, att_loss, &c, 1e-2f, 2e-3, 2e-4);
    gradcheck("window attention dv", c.v, n, dv, att_loss, &c, 1e-2f, 2e-3, 2e-4);
    free(c.q); free(c.k); free(c.v); free(c.ctx); free(c.probs); free(c.scratch); free(c.w); free(c.mask);
    free(dq); free(dk); free(dv);
  }
}

/* ---- rotary positions and GLU ------------------------------------------------------- */

typedef struct {
  float *x, *out, *w, *table;
  int B, S, N, Dh, P;
} rot_ctx;

static double rot_loss(void *p) {
  rot_ctx *c = p;
  size_t n = (size_t)c->B * c->S * c->N * c->Dh;
  memcpy(c->out, c->x, n * sizeof(float));
  est_rotary_forward(c->out, c->table, c->B, c->S, c->N, c->Dh, c->P);
  return dot(c->out, c->w, n);
}

/* The table-driven rotation against the reference (angles in double from theta), at two
 * thetas (ModernBERT's global 160000 and local 10000) and positions past 1000, where the
 * float32 angle of the table (transformers' own) differs from the double one; its backward
 * by finite differences and as the exact inverse. */
static void test_rotary_matches_reference_and_gradcheck(void **state) {
  (void)state;
  const double thetas[2] = {160000.0, 10000.0};
  for (int t = 0; t < 2; t++) {
    enum { B = 2, S = 9, N = 3, Dh = 8, P = 16 };
    size_t n = (size_t)B * S * N * Dh;
    float *table = zeros(2 * (size_t)P * (Dh / 2));
    est_rotary_table(table, P, Dh, thetas[t]);
    rot_ctx c = {rand_buf(n, 1.0f), zeros(n), rand_buf(n, 1.0f), table, B, S, N, Dh, P};
    float *ref = zeros(n);
    rot_loss(&c);
    est_rotary_forward_ref(ref, c.x, B, S, N, Dh, thetas[t]);
    assert_close("rotary", c.out, ref, n, 1e-6, 1e-6);
    /* position 0 is not turned; the norm of every pair is kept */
    for (int i = 0; i < N * Dh; i++) assert_true(c.out[i] == c.x[i]);
    float *dx = malloc(n * sizeof(float));
    memcpy(dx, c.w, n * sizeof(float));
    est_rotary_backward(dx, table, B, S, N, Dh, P);
    gradcheck("rotary dx", c.x, n, dx, rot_loss, &c, 1e-2f, 1e-3, 1e-4);
    /* backward(forward(x)) = x */
    float *y = malloc(n * sizeof(float));
    rot_loss(&c); /* c.out of the unperturbed x again */
    memcpy(y, c.out, n * sizeof(float));
    est_rotary_backward(y, table, B, S, N, Dh, P);
    assert_close("rotary inverse", y, c.x, n, 1e-6, 1e-6);
    free(c.x); free(c.out); free(c.w); free(table); free(ref); free(dx); free(y);
  }
  /* far positions: the table (float32 angles, as transformers) against double angles */
  enum { P = 8192, Dh = 64 };
  float *table = zeros(2 * (size_t)P * (Dh / 2)), *x = rand_buf((size_t)P * Dh, 1.0f), *ref = zeros((size_t)P * Dh);
  est_rotary_table(table, P, Dh, 160000.0);
  est_rotary_forward_ref(ref, x, 1, P, 1, Dh, 160000.0);
  est_rotary_forward(x, table, 1, P, 1, Dh, P);
  assert_close("rotary at 8192 positions", x, ref, (size_t)P * Dh, 0.0, 2e-3);
  free(table); free(x); free(ref);
}

typedef struct {
  float *x, *out, *w;
  int N, IM;
  est_activation act;
} glu_ctx;

static double glu_loss(void *p) {
  glu_ctx *c = p;
  est_glu_forward(c->out, c->x, c->N, c->IM, c->act);
  return dot(c->out, c->w, (size_t)c->N * c->IM);
}

/* GeGLU (erf GELU, ModernBERT's) and the tanh-GELU and ReLU gates: forward against a double
 * reference, backward by finite differences, WRITE then ADD. */
static void test_glu_values_and_gradcheck(void **state) {
  (void)state;
  const est_activation acts[3] = {EST_ACT_GELU_EXACT, EST_ACT_GELU, EST_ACT_TANH};
  for (int a = 0; a < 3; a++) {
    enum { N = 4, IM = 7 };
    glu_ctx c = {rand_buf((size_t)N * 2 * IM, 2.0f), zeros((size_t)N * IM), rand_buf((size_t)N * IM, 1.0f), N, IM,
                 acts[a]};
    glu_loss(&c);
    for (int n = 0; n < N; n++)
      for (int i = 0; i < IM; i++) {
        double x = c.x[n * 2 * IM + i], g = c.x[n * 2 * IM + IM + i], act;
        if (acts[a] == EST_ACT_GELU_EXACT) act = 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
        else if (acts[a] == EST_ACT_GELU) act = est_gelu_tanh_ref((float)x);
        else act = tanh(x);
        assert_float_equal(c.out[n * IM + i], act * g, 1e-5 * (1 + fabs(act * g)));
      }
    float *d = rand_buf((size_t)N * 2 * IM, 1.0f), *d2 = zeros((size_t)N * 2 * IM);
    est_glu_backward_mode(d, c.w, c.x, N, IM, c.act, EST_GRAD_WRITE);
    gradcheck("glu dinp", c.x, (size_t)N * 2 * IM, d, glu_loss, &c, 1e-2f, 2e-3, 2e-4);
    est_glu_backward_mode(d2, c.w, c.x, N, IM, c.act, EST_GRAD_ADD);
    est_glu_backward_mode(d2, c.w, c.x, N, IM, c.act, EST_GRAD_ADD);
    for (int i = 0; i < N * 2 * IM; i++) assert_float_equal(d2[i], 2.0f * d[i], 1e-6);
    free(c.x); free(c.out); free(c.w); free(d); free(d2);
  }
}

/* No LayerNorm bias (beta NULL) is beta = 0, bit for bit; dbeta NULL is skipped. */
static void test_layernorm_without_bias(void **state) {
  (void)state;
  enum { N = 3, C = 19 };
  float *x = rand_buf(N * C, 2.0f), *g = rand_buf(C, 1.0f), *z = zeros(C), *a = zeros(N * C), *b = zeros(N * C);
  float *m = zeros(N), *r = zeros(N), *dy = rand_buf(N * C, 1.0f), *dx1 = zeros(N * C), *dx2 = zeros(N * C);
  float *dg1 = zeros(C), *dg2 = zeros(C), *db = zeros(C);
  est_layernorm_forward_eps(a, m, r, x, g, z, N, C, 1e-5f);
  est_layernorm_forward_eps(b, m, r, x, g, NULL, N, C, 1e-5f);
  assert_memory_equal(a, b, sizeof(float) * N * C);
  est_layernorm_backward(dx1, dg1, db, dy, x, g, m, r, N, C);
  est_layernorm_backward(dx2, dg2, NULL, dy, x, g, m, r, N, C);
  assert_memory_equal(dx1, dx2, sizeof(float) * N * C);
  assert_memory_equal(dg1, dg2, sizeof(float) * C);
  free(x); free(g); free(z); free(a); free(b); free(m); free(r); free(dy); free(dx1); free(dx2); free(dg1);
  free(dg2); free(db);
}

static void test_attention_gradcheck_masked_keys(void **state) {
  (void)state;
  attention_case(0.0f);
}

/* ctx[b, i, h, d] = sum_j pd_ij v_jd (pd: the probabilities after dropout) against the
 * reference: within rtol of its size (the probabilities' relative error, carried by every
 * term alike) plus atol, plus the fp32 bound of an S-term sum, (S + 2) 2^-24 sum_j |pd v|,
 * which covers the rounding where the terms cancel (ctx near 0 with sum_j |pd v| ~ 0.5). */
static void assert_ctx_close(const float *ctx, const float *ref, const float *probs, const uint8_t *mask,
                             const float *v, int B, int S, int N, int Dh, float prob, double rtol, double atol) {
  const int HD = N * Dh;
  const double keep = prob > 0 ? 1.0 / (1.0 - prob) : 1.0;
  for (int b = 0; b < B; b++)
    for (int h = 0; h < N; h++)
      for (int i = 0; i < S; i++) {
        const size_t row = (((size_t)b * N + h) * S + i) * S;
        for (int d = 0; d < Dh; d++) {
          double terms = 0;
          for (int j = 0; j < S; j++)
            if (prob <= 0 || mask[row + j])
              terms += probs[row + j] * keep * fabs(v[((size_t)b * S + j) * HD + h * Dh + d]);
          size_t e = ((size_t)b * S + i) * HD + (size_t)h * Dh + d;
          double tol = atol + rtol * fmax(fabs(ctx[e]), fabs(ref[e])) + (S + 2) * 0x1p-24 * terms;
          if (!(fabs((double)ctx[e] - ref[e]) <= tol))
            fail_msg("attention ctx[%zu]: %.9g vs %.9g (tol %.3g)", e, ctx[e], ref[e], tol);
        }
      }
}

/* The fast attention (own kernel, fused per (example, head) in strips of query rows, or
 * OpenBLAS per pair) against the plain-loop reference, forward and backward, with padded
 * keys and with dropout. Tolerances: the reference sums in double, so the gap is the fast
 * path's fp32 rounding. A score sums Dh products: error <= (Dh + 2) 2^-24 sum|q k| / sqrt(Dh)
 * (~1.6e-5 absolute at Dh = 64 with entries up to 1.5), which moves a probability by that
 * relative amount; est_fast_expf adds ~2 ulp: p_rtol, and p_atol for the smallest. ctx sums
 * S terms pd v: the same relative error on each term, plus the sum's own rounding
 * (assert_ctx_close). The backward's gradients chain two such products (rtol 1e-4 as the
 * dense layers' backward). */
static void attention_fast_vs_reference(int B, int S, int N, int Dh, int window, est_kernel choice,
                                        double p_rtol, double p_atol) {
  size_t n = (size_t)B * S * N * Dh, pp = (size_t)B * N * S * S;
  int32_t *input_mask = malloc((size_t)B * S * sizeof(int32_t));
  /* padded tails; with a window, no longer than it: a query whose window holds only padded
   * keys has scores near -10000, where fp32 keeps 3 digits (test_attention_fully_masked_row) */
  const int tail = window >= 0 ? window : S - S / 2 - 1;
  for (int i = 0; i < B * S; i++) input_mask[i] = (i % S) < (i < S ? S - 3 : S - tail);
  est_kernel before = est_kernel_get();
  assert_int_equal(est_kernel_set(choice), EST_OK);
  for (int pass = 0; pass < 2; pass++) {
    float prob = pass ? 0.2f : 0.0f;
    float *q = rand_buf(n, 1.5f), *k = rand_buf(n, 1.5f), *v = rand_buf(n, 1.0f), *dctx = rand_buf(n, 1.0f);
    float *ctx = zeros(n), *ctxr = zeros(n), *probs = zeros(pp), *probsr = zeros(pp);
    float *scratch = zeros(est_attention_scratch_floats(B, N, S));
    uint8_t *mask = calloc(pp, 1);
    est_attention_forward_window_at(ctx, probs, mask, scratch, q, k, v, input_mask, B, S, N, Dh, window, prob, 11,
                                    12, 13, 0, EST_PRECISION_FP32);
    est_attention_forward_window_ref(ctxr, probsr, mask, q, k, v, input_mask, B, S, N, Dh, window, prob);
    char what[96];
    snprintf(what, sizeof what, "attention probs (S %d, Dh %d, window %d, kernel %d, dropout %g)", S, Dh, window,
             (int)choice, prob);
    assert_close(what, probs, probsr, pp, p_rtol, p_atol);
    /* outside the window: probability 0 exactly */
    for (size_t e = 0; window >= 0 && e < pp; e++) {
      const int i = (int)(e / S % S), j = (int)(e % S);
      if (abs(i - j) > window) assert_true(probs[e] == 0.0f);
    }
    assert_ctx_close(ctx, ctxr, probsr, mask, v, B, S, N, Dh, prob, p_rtol, p_atol);
    float *dq = zeros(n), *dk = zeros(n), *dv = zeros(n), *dqr = zeros(n), *dkr = zeros(n), *dvr = zeros(n);
    est_attention_backward(dq, dk, dv, scratch, dctx, q, k, v, probs, mask, B, S, N, Dh, prob, EST_PRECISION_FP32);
    est_attention_backward_ref(dqr, dkr, dvr, dctx, q, k, v, probs, mask, B, S, N, Dh, prob);
    assert_close("attention dq", dq, dqr, n, 1e-4, 1e-6 * S);
    assert_close("attention dk", dk, dkr, n, 1e-4, 1e-6 * S);
    assert_close("attention dv", dv, dvr, n, 1e-4, 1e-6 * S);
    free(q); free(k); free(v); free(dctx); free(ctx); free(ctxr); free(probs); free(probsr); free(scratch);
    free(mask); free(dq); free(dk); free(dv); free(dqr); free(dkr); free(dvr);
  }
  assert_int_equal(est_kernel_set(before), EST_OK);
  free(input_mask);
}

/* The tiled attention (online softmax, no S x S tensor), forward and backward, against the
 * reference twin, with padded keys, without and with windows (narrower than a key tile, and
 * wider), over several ragged query and key tiles. */
static void test_attention_tiled_matches_reference(void **state) {
  (void)state;
  enum { B = 2, S = 301, N = 2, Dh = 16 };
  const size_t n = (size_t)B * S * N * Dh, pp = (size_t)B * N * S * S;
  const int windows[] = {-1, 5, 150};
  int32_t *input_mask = malloc((size_t)B * S * sizeof(int32_t));
  for (int i = 0; i < B * S; i++) input_mask[i] = i < S || i % S < S - 4; /* a short padded tail */
  for (size_t w = 0; w < sizeof windows / sizeof *windows; w++) {
    float *q = rand_buf(n, 1.5f), *k = rand_buf(n, 1.5f), *v = rand_buf(n, 1.0f);
    float *ctx = zeros(n), *ctxr = zeros(n), *probsr = zeros(pp);
    float *lse = zeros((size_t)B * N * S), *ctx2 = zeros(n);
    est_attention_forward_tiled(ctx, q, k, v, input_mask, B, S, N, Dh, windows[w]);
    est_attention_forward_window_ref(ctxr, probsr, NULL, q, k, v, input_mask, B, S, N, Dh, windows[w], 0.0f);
    assert_ctx_close(ctx, ctxr, probsr, NULL, v, B, S, N, Dh, 0.0f, 1e-5, 1e-6);
    /* with the log-sum-exp saved: the same context, and its backward against the reference's
     * (WRITE over garbage, then ADD doubles it) */
    est_attention_forward_tiled_lse(ctx2, lse, q, k, v, input_mask, B, S, N, Dh, windows[w]);
    assert_memory_equal(ctx, ctx2, n * sizeof(float));
    float *dctx = rand_buf(n, 1.0f), *dq = rand_buf(n, 9.0f), *dk = rand_buf(n, 9.0f), *dv = rand_buf(n, 9.0f);
    float *dqr = zeros(n), *dkr = zeros(n), *dvr = zeros(n);
    est_attention_backward_tiled(dq, dk, dv, dctx, q, k, v, ctx, lse, input_mask, B, S, N, Dh, windows[w],
                                 EST_GRAD_WRITE);
    est_attention_backward_ref(dqr, dkr, dvr, dctx, q, k, v, probsr, NULL, B, S, N, Dh, 0.0f);
    assert_close("tiled attention dq", dq, dqr, n, 1e-4, 1e-6 * S);
    assert_close("tiled attention dk", dk, dkr, n, 1e-4, 1e-6 * S);
    assert_close("tiled attention dv", dv, dvr, n, 1e-4, 1e-6 * S);
    for (size_t e = 0; e < n; e++) dqr[e] = 2.0f * dq[e];
    est_attention_backward_tiled(dq, dk, dv, dctx, q, k, v, ctx, lse, input_mask, B, S, N, Dh, windows[w],
                                 EST_GRAD_ADD);
    assert_close("tiled attention dq added", dq, dqr, n, 1e-6, 1e-7);
    free(q); free(k); free(v); free(ctx); free(ctxr); free(probsr); free(lse); free(ctx2); free(dctx); free(dq);
    free(dk); free(dv); free(dqr); free(dkr); free(dvr);
  }
  free(input_mask);
}

static void test_attention_fast_matches_reference(void **state) {
  (void)state;
  /* the process's kernel choice (auto, or EST_KERNEL's), then OpenBLAS */
  const est_kernel mine = est_kernel_get();
  /* small odd shapes: one strip, tiles cut short in every direction */
  attention_fast_vs_reference(2, 33, 3, 8, -1, mine, 1e-5, 1e-7);
  attention_fast_vs_reference(2, 33, 3, 8, -1, EST_KERNEL_BLAS, 1e-5, 1e-7);
  /* BERT's head size; S = 130: three strips of query rows (48, 48, 34), the last with a
   * short row tile, and a key count that is not a multiple of the kernel's 32 columns */
  attention_fast_vs_reference(2, 130, 2, 64, -1, mine, 5e-5, 1e-7);
  attention_fast_vs_reference(2, 130, 2, 64, -1, EST_KERNEL_BLAS, 5e-5, 1e-7);
  /* sliding windows (ModernBERT's local layers): one narrower than a strip, one wider, the
   * second strip's rows offset from its keys */
  attention_fast_vs_reference(2, 33, 3, 8, 4, mine, 1e-5, 1e-7);
  attention_fast_vs_reference(2, 33, 3, 8, 4, EST_KERNEL_BLAS, 1e-5, 1e-7);
  attention_fast_vs_reference(2, 130, 2, 64, 50, mine, 5e-5, 1e-7);
  attention_fast_vs_reference(2, 130, 2, 64, 50, EST_KERNEL_BLAS, 5e-5, 1e-7);
}

/* bf16 mode: the scores and context products take bf16 inputs with fp32 sums (attention.c,
 * pair_forward_bf16: on the AMX tiles, or VDPBF16PS under EST_KERNEL=bf16dp or without AMX),
 * and so do the backward's on AMX (on VDPBF16PS they stay fp32: below, the same bound holds
 * with room). int8 mode runs the same bf16 products: the same bits as bf16 mode's. Against
 * the reference run on the inputs rounded to bf16
 * (q, k, v; the reference sums in double): the probabilities differ only by the fp32 sums
 * of Dh exact products, as in the fp32 test (5e-5); the context also rounds each
 * probability to bf16 before P V, |p - bf16(p)| <= 2^-8 p, so with sum p = 1 and |v| <= 1
 * it is off by at most 2^-8 plus the fp32 terms. And it did round: the context differs from
 * the fp32 path's by more than fp32 error somewhere. Skipped without AVX512-BF16 (or under
 * EST_KERNEL=noavx512), where both modes run these products in fp32. */
static void test_attention_bf16_matches_rounded_reference(void **state) {
  (void)state;
  if (!est_kernel_avx512_bf16()) skip();
  enum { B = 2, S = 130, N = 2, Dh = 64 };
  size_t n = (size_t)B * S * N * Dh, pp = (size_t)B * N * S * S;
  int32_t *input_mask = malloc((size_t)B * S * sizeof(int32_t));
  for (int i = 0; i < B * S; i++) input_mask[i] = (i % S) < (i < S ? S - 3 : S / 2 + 1);
  for (int pass = 0; pass < 2; pass++) {
    float prob = pass ? 0.2f : 0.0f;
    float *q = rand_buf(n, 1.5f), *k = rand_buf(n, 1.5f), *v = rand_buf(n, 1.0f);
    float *qr = zeros(n), *kr = zeros(n), *vr = zeros(n);
    for (size_t i = 0; i < n; i++) qr[i] = est_bf16_round(q[i]), kr[i] = est_bf16_round(k[i]), vr[i] = est_bf16_round(v[i]);
    float *ctx = zeros(n), *ctx32 = zeros(n), *ctxr = zeros(n), *probs = zeros(pp), *probsr = zeros(pp);
    float *scratch = zeros(est_attention_scratch_floats(B, N, S));
    uint8_t *mask = calloc(pp, 1);
    est_attention_forward(ctx32, probs, mask, scratch, q, k, v, input_mask, B, S, N, Dh, prob, 11, 12, 13,
                          EST_PRECISION_FP32);
    assert_int_equal(est_precision_resolve(EST_PRECISION_BF16), EST_PRECISION_BF16);
    float *ctx8 = zeros(n), *probs8 = zeros(pp);
    est_attention_forward(ctx8, probs8, mask, scratch, q, k, v, input_mask, B, S, N, Dh, prob, 11, 12, 13,
                          EST_PRECISION_INT8);
    est_attention_forward(ctx, probs, mask, scratch, q, k, v, input_mask, B, S, N, Dh, prob, 11, 12, 13,
                          EST_PRECISION_BF16);
    assert_memory_equal(ctx8, ctx, n * sizeof(float));
    assert_memory_equal(probs8, probs, pp * sizeof(float));
    free(ctx8), free(probs8);
    est_attention_forward_ref(ctxr, probsr, mask, qr, kr, vr, input_mask, B, S, N, Dh, prob);
    assert_close("bf16 attention probs", probs, probsr, pp, 5e-5, 1e-7);
    assert_close("bf16 attention ctx", ctx, ctxr, n, 5e-5, 0x1p-8 * (pass ? 1.25 : 1.0) + 1e-6);
    double worst = 0;
    for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)ctx[i] - ctx32[i]));
    assert_true(worst > 1e-4); /* rounded to bf16, not fp32 */
    /* The backward's four products on the tiles too. A gradient is at most three bf16
     * products deep (scores, dP = dctx V^T, dS K): as the bf16 golden test derives it, 6
     * sigma of that chain is 6 sqrt(2/3) 2^-8 sqrt(3) = 3.3% of the tensor's scale (its
     * largest |value|), against the fp32 reference on the unrounded inputs. */
    float *dctx = rand_buf(n, 1.0f), *g[3], *gr[3];
    for (int t = 0; t < 3; t++) g[t] = zeros(n), gr[t] = zeros(n);
    est_attention_forward(ctx, probs, mask, scratch, q, k, v, input_mask, B, S, N, Dh, prob, 11, 12, 13,
                          EST_PRECISION_BF16);
    est_attention_backward(g[0], g[1], g[2], scratch, dctx, q, k, v, probs, mask, B, S, N, Dh, prob,
                           EST_PRECISION_BF16);
    est_attention_forward_ref(ctxr, probsr, mask, q, k, v, input_mask, B, S, N, Dh, prob);
    est_attention_backward_ref(gr[0], gr[1], gr[2], dctx, q, k, v, probsr, mask, B, S, N, Dh, prob);
    const double tol = 6.0 * sqrt(2.0 / 3.0) * 0x1p-8 * sqrt(3.0);
    for (int t = 0; t < 3; t++) {
      double scale = 0, err = 0;
      for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(gr[t][i]));
      for (size_t i = 0; i < n; i++) err = fmax(err, fabs((double)g[t][i] - gr[t][i]));
      if (!(err <= tol * scale)) fail_msg("bf16 attention gradient %d: off by %.3g of its scale %.3g", t, err / scale, scale);
      assert_true(err > 1e-4 * scale); /* rounded to bf16 */
      free(g[t]), free(gr[t]);
    }
    free(dctx);
    free(q); free(k); free(v); free(qr); free(kr); free(vr); free(ctx); free(ctx32); free(ctxr); free(probs);
    free(probsr); free(scratch); free(mask);
  }
  free(input_mask);
}

static void test_attention_fully_masked_row(void **state) {
  (void)state;
  /* input_mask all zero: every score is q.k/sqrt(Dh) - 10000, finite, so each row is a
   * proper softmax (near uniform), never NaN; gradients stay finite too. */
  enum { B = 1, S = 6, N = 1, Dh = 4 };
  size_t n = (size_t)B * S * N * Dh;
  const int32_t input_mask[B * S] = {0};
  float *q = rand_buf(n, 1.0f), *k = rand_buf(n, 1.0f), *v = rand_buf(n, 1.0f), *ctx = zeros(n);
  float probs[S * S], *scratch = zeros(est_attention_scratch_floats(B, N, S));
  est_attention_forward(ctx, probs, NULL, scratch, q, k, v, input_mask, B, S, N, Dh, 0.0f, 0, 0, 0, EST_PRECISION_FP32);
  for (int i = 0; i < S; i++) {
    double sum = 0;
    for (int j = 0; j < S; j++) {
      assert_true(isfinite(probs[i * S + j]) && probs[i * S + j] > 0.0f);
      sum += probs[i * S + j];
    }
    assert_float_equal(sum, 1.0, 1e-5);
  }
  float *dq = zeros(n), *dk = zeros(n), *dv = zeros(n);
  est_attention_backward(dq, dk, dv, scratch, ctx, q, k, v, probs, NULL, B, S, N, Dh, 0.0f, EST_PRECISION_FP32);
  for (size_t i = 0; i < n; i++) assert_true(isfinite(ctx[i]) && isfinite(dq[i]) && isfinite(dk[i]) && isfinite(dv[i]));
  free(q); free(k); free(v); free(ctx); free(scratch); free(dq); free(dk); free(dv);
}

static void test_attention_gradcheck_with_dropout(void **state) {
  (void)state;
  /* The mask is a function of (seed, step, tensor, index), so every re-evaluation of the
   * loss uses the same mask and finite differences apply. */
  attention_case(0.3f);
}

/* ---- embeddings --------------------------------------------------------------------- */

static void test_embeddings_scatter_add_and_errors(void **state) {
  (void)state;
  enum { B = 2, S = 4, H = 70, V = 6, T = 3 };
  float *word = rand_buf(V * H, 1.0f), *type = rand_buf(T * H, 1.0f), *pos = rand_buf(8 * H, 1.0f);
  /* id 2 repeated four times; token types 0..2 plus 5 and -1 (outside [0,T): zero row) */
  const int32_t ids[B * S] = {2, 2, 5, 0, 2, 1, 2, 3};
  const int32_t types[B * S] = {0, 1, 2, 5, -1, 0, 1, 1};
  float *out = zeros(B * S * H);
  assert_int_equal(est_embeddings_forward(out, ids, types, word, type, pos, B, S, H, V, T), EST_OK);
  for (int bs = 0; bs < B * S; bs++)
    for (int c = 0; c < H; c++) {
      float want = word[ids[bs] * H + c] + pos[(bs % S) * H + c];
      if (types[bs] >= 0 && types[bs] < T) want += type[types[bs] * H + c];
      assert_float_equal(out[bs * H + c], want, 1e-6f);
    }
  float *dout = rand_buf(B * S * H, 1.0f);
  float *dw = zeros(V * H), *dt = zeros(T * H), *dp = zeros(8 * H);
  est_embeddings_backward(dw, dt, dp, dout, ids, types, B, S, H, V, T);
  for (int c = 0; c < H; c++) {
    /* row 2 collects the four tokens with id 2 */
    float want = dout[0 * H + c] + dout[1 * H + c] + dout[4 * H + c] + dout[6 * H + c];
    assert_float_equal(dw[2 * H + c], want, 1e-5f);
    assert_float_equal(dw[4 * H + c], 0.0f, 0.0f);
    assert_float_equal(dt[1 * H + c], dout[1 * H + c] + dout[6 * H + c] + dout[7 * H + c], 1e-5f);
    assert_float_equal(dp[0 * H + c], dout[0 * H + c] + dout[4 * H + c], 1e-5f);
    assert_float_equal(dp[5 * H + c], 0.0f, 0.0f);
  }
  /* accumulation: a second call doubles */
  float before = dw[2 * H];
  est_embeddings_backward(dw, dt, dp, dout, ids, types, B, S, H, V, T);
  assert_float_equal(dw[2 * H], 2 * before, 1e-5f);

  /* An out-of-range word id is an error naming the position, and out is untouched. */
  const int32_t bad[B * S] = {2, 2, 5, 0, 2, 6, 2, 3};
  memset(out, 0, B * S * H * sizeof(float));
  assert_int_equal(est_embeddings_forward(out, bad, types, word, type, pos, B, S, H, V, T),
                   EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "input_ids[1][1] = 6"));
  for (int i = 0; i < B * S * H; i++) assert_true(out[i] == 0.0f);
  const int32_t neg[B * S] = {-3, 2, 5, 0, 2, 1, 2, 3};
  assert_int_equal(est_embeddings_forward(out, neg, NULL, word, type, pos, B, S, H, V, T),
                   EST_ERR_INVALID_ARGUMENT);
  free(word); free(type); free(pos); free(out); free(dout); free(dw); free(dt); free(dp);
}

/* The encoder options' form (est/bert_encoder.h): rows picked by position ids, no token
 * types, the pad rows left untrained, a position past the table an error. */
static void test_embeddings_position_ids_no_types_pad_rows(void **state) {
  (void)state;
  enum { B = 2, S = 3, H = 67, V = 5, P = 6 };
  float *word = rand_buf(V * H, 1.0f), *pos = rand_buf(P * H, 1.0f);
  const int32_t ids[B * S] = {3, 1, 4, 4, 1, 1}; /* 1 is the pad id */
  int32_t pids[B * S];
  est_position_ids_after_padding(pids, ids, B, S, 1);
  const int32_t want_pids[B * S] = {2, 1, 3, 2, 1, 1};
  assert_memory_equal(pids, want_pids, sizeof pids);
  float *out = zeros(B * S * H);
  assert_int_equal(est_embeddings_forward_ex(out, ids, NULL, pids, word, NULL, pos, B, S, H, V, 0, P), EST_OK);
  for (int bs = 0; bs < B * S; bs++)
    for (int c = 0; c < H; c++) assert_true(out[bs * H + c] == word[ids[bs] * H + c] + pos[pids[bs] * H + c]);
  float *dout = rand_buf(B * S * H, 1.0f), *dw = zeros(V * H), *dp = zeros(P * H);
  est_embeddings_backward_ex(dw, NULL, dp, dout, ids, NULL, pids, B, S, H, V, 0, 1, 1);
  for (int c = 0; c < H; c++) {
    assert_float_equal(dw[4 * H + c], dout[2 * H + c] + dout[3 * H + c], 1e-6f);
    assert_float_equal(dp[2 * H + c], dout[0 * H + c] + dout[3 * H + c], 1e-6f);
    assert_true(dw[1 * H + c] == 0.0f && dp[1 * H + c] == 0.0f); /* the pad rows: nn.Embedding(padding_idx) */
  }
  /* without pad rows, the pad row trains like any other */
  est_embeddings_backward_ex(dw, NULL, NULL, dout, ids, NULL, pids, B, S, H, V, 0, -1, -1);
  assert_float_equal(dw[1 * H], dout[1 * H] + dout[4 * H] + dout[5 * H], 1e-6f);
  const int32_t far[B * S] = {2, 1, 6, 2, 1, 1};
  assert_int_equal(est_embeddings_forward_ex(out, ids, NULL, far, word, NULL, pos, B, S, H, V, 0, P),
                   EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "position_ids[0][2] = 6"));
  free(word); free(pos); free(out); free(dout); free(dw); free(dp);
}

/* ---- cross-entropy ------------------------------------------------------------------ */

typedef struct {
  float *logits, *losses, *w;
  const int32_t *labels;
  int B, C;
} ce_ctx;

static double ce_loss(void *p) {
  ce_ctx *c = p;
  assert_int_equal(est_crossentropy_forward(c->losses, NULL, c->logits, c->labels, c->B, c->C), EST_OK);
  return dot(c->losses, c->w, c->B);
}

static void test_crossentropy_gradcheck(void **state) {
  (void)state;
  enum { B = 4, C = 3 };
  const int32_t labels[B] = {0, 2, 1, 2};
  ce_ctx c = {rand_buf(B * C, 3.0f), zeros(B), NULL, labels, B, C};
  float w[B] = {0.25f, 0.25f, 0.25f, 0.25f};  /* a batch mean */
  c.w = w;
  float probs[B * C], dlogits[B * C] = {0};
  assert_int_equal(est_crossentropy_forward(c.losses, probs, c.logits, labels, B, C), EST_OK);
  for (int b = 0; b < B; b++) {
    double lse = 0;
    for (int k = 0; k < C; k++) lse += exp(c.logits[b * C + k]);
    assert_float_equal(c.losses[b], log(lse) - c.logits[b * C + labels[b]], 1e-5);
  }
  est_crossentropy_backward(dlogits, probs, labels, 0.25f, B, C);
  gradcheck("cross-entropy dlogits", c.logits, B * C, dlogits, ce_loss, &c, 1e-2f, 1e-3, 1e-5);
  const int32_t bad[B] = {0, 3, 1, 2};
  assert_int_equal(est_crossentropy_forward(c.losses, probs, c.logits, bad, B, C), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "label_ids[1] = 3"));
  /* softmax helper agrees with the saved probabilities */
  float sm[B * C];
  est_softmax_forward(sm, c.logits, B, C);
  assert_memory_equal(sm, probs, sizeof sm);
  free(c.logits); free(c.losses);
}

/* ---- dropout ------------------------------------------------------------------------ */

static void test_dropout_mask_is_counter_based(void **state) {
  (void)state;
  enum { M = 100003 };
  uint8_t *m = malloc(M), *m2 = malloc(M);
  est_dropout_mask(m, 0, M, 0.1f, 42, 7, 9);
  size_t kept = 0;
  for (int i = 0; i < M; i++) kept += m[i];
  double frac = (double)kept / M;
  assert_true(frac > 0.895 && frac < 0.905);
  /* Any slice computed on its own equals the same slice of the whole mask. */
  est_dropout_mask(m2, 5, 1001, 0.1f, 42, 7, 9);
  assert_memory_equal(m2, m + 5, 1001);
  /* Element e uses word e%4 of Philox(seed, {e/4, tensor, step lo, step hi}). */
  for (uint32_t e = 0; e < 40; e++) {
    uint32_t w[4];
    est_philox4x32(42, (est_philox_counter){{e / 4, 9, 7, 0}}, w);
    assert_int_equal(m[e], (w[e % 4] >> 8) >= (uint32_t)ceil(0.1 * 16777216.0));
  }
  /* Another step or tensor id gives another mask. */
  est_dropout_mask(m2, 0, 1000, 0.1f, 42, 8, 9);
  assert_true(memcmp(m, m2, 1000) != 0);
  est_dropout_mask(m2, 0, 1000, 0.1f, 42, 7, 10);
  assert_true(memcmp(m, m2, 1000) != 0);

  float *x = rand_buf(M, 1.0f), *y = zeros(M), *dx = zeros(M);
  est_dropout_forward(y, m2, x, M, 0.1f, 42, 7, 9);
  assert_memory_equal(m2, m, M);
  for (int i = 0; i < M; i++) assert_true(y[i] == (m[i] ? x[i] * (1.0f / 0.9f) : 0.0f));
  est_dropout_backward(dx, x, m, M, 0.1f);
  assert_memory_equal(dx, y, M * sizeof(float));
  est_dropout_forward(y, NULL, x, M, 0.0f, 42, 7, 9);
  assert_memory_equal(y, x, M * sizeof(float));
  free(m); free(m2); free(x); free(y); free(dx);
}

/* ---- thread-count independence ------------------------------------------------------ */

static void run_non_gemm_ops(int threads, float **outs) {
  est_set_num_threads(threads);
  est_rng_init(&g_rng, 99);
  enum { B = 3, S = 16, N = 2, Dh = 8, H = N * Dh, FF = 40, V = 11 };
  size_t n = (size_t)B * S * H;
  float *x = rand_buf(n, 1.0f), *g = rand_buf(H, 1.0f), *b = rand_buf(H, 1.0f), *dy = rand_buf(n, 1.0f);
  float *k = rand_buf(n, 1.0f), *v = rand_buf(n, 1.0f), *h = rand_buf((size_t)B * S * FF, 3.0f);
  int32_t ids[B * S], mask[B * S];
  for (int i = 0; i < B * S; i++) {
    ids[i] = i % 5;
    mask[i] = i % 7 != 0;
  }
  float *o = outs[0], *mean = zeros(B * S), *rstd = zeros(B * S);
  est_layernorm_forward(o, mean, rstd, x, g, b, B * S, H);
  est_layernorm_backward(outs[1], outs[2], outs[2] + H, dy, x, g, mean, rstd, B * S, H);
  est_activation_forward(outs[3], h, (size_t)B * S * FF, EST_ACT_GELU);
  est_activation_backward(outs[4], h, h, (size_t)B * S * FF, EST_ACT_GELU);
  uint8_t *pm = calloc((size_t)B * N * S * S, 1);
  float *probs = zeros((size_t)B * N * S * S), *scratch = zeros(est_attention_scratch_floats(B, N, S));
  est_attention_forward(outs[5], probs, pm, scratch, x, k, v, mask, B, S, N, Dh, 0.1f, 1, 2, 3, EST_PRECISION_FP32);
  est_attention_backward(outs[6], outs[6] + n, outs[6] + 2 * n, scratch, dy, x, k, v, probs, pm, B, S, N, Dh, 0.1f,
                         EST_PRECISION_FP32);
  est_embeddings_backward(outs[7], NULL, NULL, dy, ids, NULL, B, S, H, V, 2);
  uint8_t *hm = calloc((size_t)B * S * FF, 1);
  est_dropout_forward(outs[8], hm, h, (size_t)B * S * FF, 0.1f, 3, 4, 5);
  free(hm);
  est_matmul_backward(NULL, NULL, outs[9], dy, x, NULL, B * S, H, H, 0, EST_PRECISION_FP32);
  /* the encoder options' ops: tiled attention with a window, forward and backward; rotary; GLU */
  float *lse = zeros((size_t)B * N * S);
  est_attention_forward_tiled_lse(outs[10], lse, x, k, v, mask, B, S, N, Dh, 3);
  est_attention_backward_tiled(outs[11], outs[11] + n, outs[11] + 2 * n, dy, x, k, v, outs[10], lse, mask, B, S, N,
                               Dh, 3, EST_GRAD_WRITE);
  float *table = zeros((size_t)S * Dh);
  est_rotary_table(table, S, Dh, 10000.0);
  memcpy(outs[12], x, n * sizeof(float));
  est_rotary_forward(outs[12], table, B, S, N, Dh, S);
  est_glu_forward(outs[13], h, B * S, FF / 2, EST_ACT_GELU_EXACT);
  est_glu_backward_mode(outs[13] + (size_t)B * S * FF, h, h, B * S, FF / 2, EST_ACT_GELU_EXACT, EST_GRAD_WRITE);
  free(lse); free(table);
  free(x); free(g); free(b); free(dy); free(k); free(v); free(h); free(mean); free(rstd); free(pm);
  free(probs); free(scratch);
}

static void test_results_independent_of_thread_count(void **state) {
  (void)state;
  enum { NOUT = 14, CAP = 3 * 16 * 16 * 40 };
  float *a[NOUT], *b[NOUT];
  for (int i = 0; i < NOUT; i++) {
    a[i] = zeros(CAP);
    b[i] = zeros(CAP);
  }
  run_non_gemm_ops(1, a);
  run_non_gemm_ops(2, b);
  if (test_threads_that_ran() != 2) fail_msg("the second run did not get 2 OpenMP threads");
  est_set_num_threads(2);
  for (int i = 0; i < NOUT; i++) {
    if (memcmp(a[i], b[i], CAP * sizeof(float)) != 0) fail_msg("output %d differs between 1 and 2 threads", i);
    free(a[i]);
    free(b[i]);
  }
}

int main(void) {
  test_forced_kernel_or_skip(); /* ctest runs it per kernel too (docs/testing.md §3) */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_dense_fast_matches_reference_and_gradcheck, setup),
      cmocka_unit_test_setup(test_dense_bert_sized_blas_vs_reference, setup),
      cmocka_unit_test_setup(test_dense_backward_through_gelu_fused, setup),
      cmocka_unit_test_setup(test_layernorm_gradcheck, setup),
      cmocka_unit_test_setup(test_gelu_values_and_fast_vs_libm, setup),
      cmocka_unit_test_setup(test_gelu_avx512_equals_scalar_form, setup),
      cmocka_unit_test_setup(test_activation_gradcheck, setup),
      cmocka_unit_test_setup(test_activation_names, setup),
      cmocka_unit_test_setup(test_attention_gradcheck_masked_keys, setup),
      cmocka_unit_test_setup(test_attention_window_gradcheck, setup),
      cmocka_unit_test_setup(test_attention_tiled_matches_reference, setup),
      cmocka_unit_test_setup(test_rotary_matches_reference_and_gradcheck, setup),
      cmocka_unit_test_setup(test_glu_values_and_gradcheck, setup),
      cmocka_unit_test_setup(test_layernorm_without_bias, setup),
      cmocka_unit_test_setup(test_attention_fast_matches_reference, setup),
      cmocka_unit_test_setup(test_attention_bf16_matches_rounded_reference, setup),
      cmocka_unit_test_setup(test_attention_fully_masked_row, setup),
      cmocka_unit_test_setup(test_attention_gradcheck_with_dropout, setup),
      cmocka_unit_test_setup(test_embeddings_scatter_add_and_errors, setup),
      cmocka_unit_test_setup(test_embeddings_position_ids_no_types_pad_rows, setup),
      cmocka_unit_test_setup(test_crossentropy_gradcheck, setup),
      cmocka_unit_test_setup(test_dropout_mask_is_counter_based, setup),
      cmocka_unit_test_setup(test_results_independent_of_thread_count, setup),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
