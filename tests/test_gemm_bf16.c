/* bf16 GEMM: conversions, the reference against exact arithmetic, the AVX512-BF16 and the
 * AMX kernels against the reference (each skipped on CPUs without it, or where EST_KERNEL
 * rules it out: ctest runs this test again with bf16dp, amx and noavx512, docs/testing.md
 * §3), and the precision setting.
 *
 * Tolerances, from bf16's 8 bits of precision (unit roundoff u16 = 2^-8) and fp32's 24
 * (u32 = 2^-24):
 *   reference vs exact:  each product a*b of rounded inputs is off by at most
 *                        (1+u16)^2 - 1 < 2.01 u16 relative, so |ref - exact| <=
 *                        2.01 * 2^-8 * sum_k |a_mk b_kn| (the reference sums in double).
 *   kernel vs reference: both multiply the same bf16 values exactly; the kernel sums K
 *                        products in fp32 (in another order), so the gap is at most the
 *                        fp32 summation error, K * u32 * sum_k |a b|, plus a rounding of
 *                        the beta*C term and of the result (2 u32 each). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "est/est.h"
#include "core/frozen.h"
#include "est/precision.h"
#include "nn/fastmath.h"
#include "nn/gemm.h"
#include "nn/kernel_choice.h"
#include "shared_products_check.h"
#include "test_util.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static float uniform(void) { /* in [-1, 1) */
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((rng_state >> 40) * (1.0 / (1 << 23)) - 1.0);
}

static float *random_matrix(size_t n) {
  float *m = malloc(n * sizeof(float));
  for (size_t i = 0; i < n; i++) m[i] = uniform() * 2.0f;
  return m;
}

static void test_conversion_rounds_to_nearest_even(void **state) {
  (void)state;
  assert_int_equal(est_bf16_from_float(1.0f), 0x3F80);
  assert_int_equal(est_bf16_from_float(-2.0f), 0xC000);
  assert_true(est_bf16_to_float(0x3F80) == 1.0f);
  /* 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1.0);
   * 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 and 1 + 2^-6: to 1 + 2^-6 (even). */
  assert_int_equal(est_bf16_from_float(1.0f + 0x1p-8f), 0x3F80);
  assert_int_equal(est_bf16_from_float(1.0f + 3 * 0x1p-8f), 0x3F82);
  assert_int_equal(est_bf16_from_float(1.0f + 0x1p-8f + 0x1p-20f), 0x3F81); /* above half: up */
  assert_int_equal(est_bf16_from_float(INFINITY), 0x7F80);
  assert_int_equal(est_bf16_from_float(3.4028235e38f), 0x7F80); /* FLT_MAX rounds to infinity */
  assert_true(isnan(est_bf16_round(NAN)));
  assert_true(isnan(est_bf16_to_float(est_bf16_from_float(-NAN))));
  /* relative error at most 2^-8 over many values */
  for (int i = 0; i < 10000; i++) {
    float x = uniform() * 1000.0f;
    assert_true(fabsf(est_bf16_round(x) - x) <= 0x1p-8f * fabsf(x));
  }
}

static float op_a(const float *A, int lda, CBLAS_TRANSPOSE t, int m, int k) {
  return t == CblasNoTrans ? A[(size_t)m * lda + k] : A[(size_t)k * lda + m];
}
static float op_b(const float *B, int ldb, CBLAS_TRANSPOSE t, int k, int n) {
  return t == CblasNoTrans ? B[(size_t)k * ldb + n] : B[(size_t)n * ldb + k];
}

typedef struct {
  CBLAS_TRANSPOSE ta, tb;
  int M, N, K;
  float alpha, beta;
} shape;

/* Sizes cross every edge of both kernels: VDPBF16PS tiles of 12 rows x 32 columns, row
 * blocks of 192, k blocks of 512; AMX tiles of 16 x 16 in blocks of 32 x 32 and work items
 * of 256 x 256, k tiles of 32; odd K (a zero-padded pair). */
static const shape shapes[] = {
  {CblasNoTrans, CblasNoTrans, 1, 1, 1, 1.0f, 0.0f},      {CblasNoTrans, CblasNoTrans, 37, 45, 67, 1.0f, 1.0f},
  {CblasNoTrans, CblasTrans, 37, 45, 67, 0.5f, 1.0f},     {CblasTrans, CblasNoTrans, 37, 45, 67, 1.0f, 2.0f},
  {CblasTrans, CblasTrans, 13, 33, 5, -1.0f, 0.0f},       {CblasNoTrans, CblasNoTrans, 200, 70, 1100, 1.0f, 1.0f},
  {CblasTrans, CblasNoTrans, 64, 128, 1025, 1.0f, 1.0f},  {CblasNoTrans, CblasTrans, 385, 96, 128, 1.0f, 0.0f},
  {CblasNoTrans, CblasNoTrans, 300, 270, 96, 1.0f, 0.0f}, {CblasTrans, CblasTrans, 33, 17, 31, 2.0f, 0.5f},
  {CblasNoTrans, CblasTrans, 16, 16, 32, 1.0f, 1.0f},
};

typedef struct {
  float *A, *B, *C0;
  int lda, ldb, ldc;
} operands;

/* Operands with leading dimensions wider than the matrices (so strides are exercised). */
static operands make_operands(const shape *s) {
  operands o;
  int arows = s->ta == CblasNoTrans ? s->M : s->K, acols = s->ta == CblasNoTrans ? s->K : s->M;
  int brows = s->tb == CblasNoTrans ? s->K : s->N, bcols = s->tb == CblasNoTrans ? s->N : s->K;
  o.lda = acols + 3, o.ldb = bcols + 5, o.ldc = s->N + 7;
  o.A = random_matrix((size_t)arows * o.lda);
  o.B = random_matrix((size_t)brows * o.ldb);
  o.C0 = random_matrix((size_t)s->M * o.ldc);
  return o;
}

static void free_operands(operands *o) {
  free(o->A), free(o->B), free(o->C0);
}

/* sum_k |op(A)_mk op(B)_kn|, and the exact (double) alpha op(A) op(B) + beta C0. */
static double abs_sum(const shape *s, const operands *o, int m, int n, double *exact) {
  double sum = 0.0, dot = 0.0;
  for (int k = 0; k < s->K; k++) {
    double p = (double)op_a(o->A, o->lda, s->ta, m, k) * op_b(o->B, o->ldb, s->tb, k, n);
    dot += p, sum += fabs(p);
  }
  *exact = s->alpha * dot + (s->beta == 0.0f ? 0.0 : (double)s->beta * o->C0[(size_t)m * o->ldc + n]);
  return sum;
}

static void test_reference_is_exact_but_for_input_rounding(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    const shape *s = &shapes[i];
    if ((double)s->M * s->N * s->K > 2e6) continue; /* the reference is a triple loop */
    operands o = make_operands(s);
    float *C = malloc((size_t)s->M * o.ldc * sizeof(float));
    memcpy(C, o.C0, (size_t)s->M * o.ldc * sizeof(float));
    est_sgemm_bf16_ref(s->ta, s->tb, s->M, s->N, s->K, s->alpha, o.A, o.lda, o.B, o.ldb, s->beta, C, o.ldc);
    double worst = 0.0;
    for (int m = 0; m < s->M; m++)
      for (int n = 0; n < s->N; n++) {
        double exact, sum = abs_sum(s, &o, m, n, &exact);
        double err = fabs(C[(size_t)m * o.ldc + n] - exact);
        double tol = 2.01 * 0x1p-8 * fabs(s->alpha) * sum + 0x1p-23 * fabs(exact);
        assert_true(err <= tol);
        if (err > worst) worst = err;
      }
    if (s->K > 1) assert_true(worst > 0.0); /* it did round: random floats are not bf16 */
    free(C);
    free_operands(&o);
  }
  /* Inputs that bf16 holds exactly give exact results. */
  float a[6] = {1, 2, 3, -4, 0.5f, 8}, b[6] = {3, -1, 0.25f, 2, 6, 1}, c[4] = {0};
  est_sgemm_bf16_ref(CblasNoTrans, CblasNoTrans, 2, 2, 3, 1.0f, a, 3, b, 2, 0.0f, c, 2);
  assert_true(c[0] == 1 * 3 + 2 * 0.25f + 3 * 6 && c[3] == -4 * -1 + 0.5f * 2 + 8 * 1);
}

typedef void (*bf16_kernel)(CBLAS_TRANSPOSE, CBLAS_TRANSPOSE, int, int, int, float, const float *, int, const float *,
                            int, float, float *, int);

/* est_sgemm_amx with the dispatcher's signature; a refusal fails the test (the caller
 * checked that AMX is there, so the kernel must run every shape given). */
static void amx_or_fail(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha, const float *A,
                        int lda, const float *B, int ldb, float beta, float *C, int ldc) {
  assert_int_equal(est_sgemm_amx(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, NULL), 0);
}

static void check_kernel_against_reference(bf16_kernel kernel) {
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    const shape *s = &shapes[i];
    operands o = make_operands(s);
    size_t csize = (size_t)s->M * o.ldc;
    float *fast = malloc(csize * sizeof(float)), *ref = malloc(csize * sizeof(float));
    memcpy(fast, o.C0, csize * sizeof(float));
    memcpy(ref, o.C0, csize * sizeof(float));
    kernel(s->ta, s->tb, s->M, s->N, s->K, s->alpha, o.A, o.lda, o.B, o.ldb, s->beta, fast, o.ldc);
    est_sgemm_bf16_ref(s->ta, s->tb, s->M, s->N, s->K, s->alpha, o.A, o.lda, o.B, o.ldb, s->beta, ref, o.ldc);
    for (int m = 0; m < s->M; m++) {
      for (int n = 0; n < s->N; n++) {
        double exact, sum = abs_sum(s, &o, m, n, &exact);
        double r = ref[(size_t)m * o.ldc + n], c0 = o.C0[(size_t)m * o.ldc + n];
        double tol = s->K * 0x1p-24 * 1.02 * fabs(s->alpha) * sum + 0x1p-23 * (fabs(s->beta * c0) + fabs(r));
        assert_true(fabs(fast[(size_t)m * o.ldc + n] - r) <= tol);
      }
      for (int n = s->N; n < o.ldc; n++) /* the padding beyond N is not touched */
        assert_true(fast[(size_t)m * o.ldc + n] == o.C0[(size_t)m * o.ldc + n]);
    }
    free(fast), free(ref);
    free_operands(&o);
  }
}

static void test_dpbf16_kernel_matches_reference(void **state) {
  (void)state;
  if (!est_kernel_avx512_bf16()) skip(); /* no AVX512-BF16, or EST_KERNEL=noavx512 */
  check_kernel_against_reference(est_sgemm_bf16_dp);
}

/* The tile kernel: the same bound (TDPBF16PS adds each exact bf16 product into an fp32
 * accumulator, K additions per result, in another order than VDPBF16PS). */
static void test_amx_kernel_matches_reference(void **state) {
  (void)state;
  if (!est_kernel_amx()) skip(); /* no AMX, or EST_KERNEL=bf16dp or noavx512 */
  check_kernel_against_reference(amx_or_fail);
  /* with 1 and 2 threads, bit for bit: each 32 x 32 block of C sums its k tiles in order */
  const shape s = {CblasTrans, CblasTrans, 530, 300, 100, 1.0f, 0.0f};
  operands o = make_operands(&s);
  size_t csize = (size_t)s.M * o.ldc;
  float *one = calloc(csize, sizeof(float)), *two = calloc(csize, sizeof(float));
  est_set_num_threads(1);
  amx_or_fail(s.ta, s.tb, s.M, s.N, s.K, 1.0f, o.A, o.lda, o.B, o.ldb, 0.0f, one, o.ldc);
  est_set_num_threads(2);
  amx_or_fail(s.ta, s.tb, s.M, s.N, s.K, 1.0f, o.A, o.lda, o.B, o.ldb, 0.0f, two, o.ldc);
  assert_memory_equal(one, two, csize * sizeof(float));
  free(one), free(two);
  free_operands(&o);
  /* nothing to multiply: it leaves C to the caller */
  float c = 1.0f;
  assert_int_not_equal(est_sgemm_amx(CblasNoTrans, CblasNoTrans, 1, 1, 0, 1.0f, &c, 1, &c, 1, 0.0f, &c, 1, NULL), 0);
}

/* A B inside a read-only range (inference's weights) is packed once and the kept tiles are
 * used from then on: the same results bit for bit as packing per call, one copy per layout
 * of B, none for a B outside the range, all dropped with the range; and new values after
 * it are seen (no stale copy). One example of 128 tokens against a 768-wide weight: the
 * work items shrink so that two threads share it (1 vs 2 threads bit for bit). */
static void check_keeps_read_only_weights_packed(bf16_kernel kernel) {
  const int M = 128, N = 768, K = 96;
  float *A = random_matrix((size_t)M * K), *W = random_matrix((size_t)K * N);
  size_t csize = (size_t)M * N;
  float *per_call = calloc(csize, sizeof(float)), *kept = calloc(csize, sizeof(float));
  float *again = calloc(csize, sizeof(float));
  size_t before = est_frozen_derived_bytes();
  kernel(CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, A, K, W, N, 0.0f, per_call, N);
  assert_int_equal(est_frozen_derived_bytes(), before); /* not read-only: nothing kept */
  assert_int_equal(est_frozen_add(W, (size_t)K * N * sizeof(float)), 0);
  est_set_num_threads(1);
  kernel(CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, A, K, W, N, 0.0f, kept, N);
  size_t one_copy = est_frozen_derived_bytes() - before;
  assert_true(one_copy >= (size_t)K * N * 2); /* N x K bf16 at least */
  est_set_num_threads(2);
  kernel(CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, A, K, W, N, 0.0f, again, N);
  assert_int_equal(est_frozen_derived_bytes() - before, one_copy); /* the same copy reused */
  assert_memory_equal(per_call, kept, csize * sizeof(float));
  assert_memory_equal(per_call, again, csize * sizeof(float));
  /* W read as a [64, 96] B^T: another layout, another copy */
  float *t_per_call = calloc((size_t)M * 64, sizeof(float)), *t_kept = calloc((size_t)M * 64, sizeof(float));
  kernel(CblasNoTrans, CblasTrans, M, 64, K, 1.0f, A, K, W, K, 0.0f, t_kept, 64);
  assert_true(est_frozen_derived_bytes() - before > one_copy);
  est_frozen_remove(W);
  assert_int_equal(est_frozen_derived_bytes(), before);
  kernel(CblasNoTrans, CblasTrans, M, 64, K, 1.0f, A, K, W, K, 0.0f, t_per_call, 64);
  assert_memory_equal(t_per_call, t_kept, (size_t)M * 64 * sizeof(float));
  /* a B that runs past the read-only range's end (its last row is writable) gets no copy */
  assert_int_equal(est_frozen_add(W, (size_t)(K - 1) * N * sizeof(float)), 0);
  kernel(CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, A, K, W, N, 0.0f, again, N);
  assert_int_equal(est_frozen_derived_bytes(), before);
  est_frozen_remove(W);
  /* writable again, changed, read-only again: the new values are used */
  for (size_t i = 0; i < (size_t)K * N; i++) W[i] = -W[i];
  assert_int_equal(est_frozen_add(W, (size_t)K * N * sizeof(float)), 0);
  kernel(CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, A, K, W, N, 0.0f, kept, N);
  est_frozen_remove(W);
  for (size_t i = 0; i < csize; i++) assert_true(kept[i] == -per_call[i]); /* bf16(-x) = -bf16(x) */
  free(A), free(W), free(per_call), free(kept), free(again), free(t_per_call), free(t_kept);
}

static void test_amx_keeps_read_only_weights_packed(void **state) {
  (void)state;
  if (!est_kernel_amx()) skip(); /* no AMX, or EST_KERNEL=bf16dp or noavx512 */
  check_keeps_read_only_weights_packed(amx_or_fail);
}

/* The VDPBF16PS kernel keeps a read-only B's panels the same way (panel-major words). */
static void test_dpbf16_keeps_read_only_weights_packed(void **state) {
  (void)state;
  if (!est_kernel_avx512_bf16()) skip();
  check_keeps_read_only_weights_packed(est_sgemm_bf16_dp);
}

/* Products of one A with inference weights on the VDPBF16PS kernel, A converted once
 * (est_sgemm_bf16_shared: the Q, K and V projections), each the bits of its own
 * est_sgemm_bf16_dp_ep (tests/shared_products_check.h). */
static void test_dpbf16_shared_input_equals_separate_products(void **state) {
  (void)state;
  if (!est_kernel_avx512_bf16()) skip();
  check_shared_products(est_sgemm_bf16_dp_ep, est_sgemm_bf16_shared, EST_PRECISION_BF16);
}

/* The tile kernel's epilogue (bias, then tanh-GELU into a second output, on each block of C
 * while it is hot) gives, bit for bit, what the layer computed before it was fused: C = bias
 * then a beta = 1 GEMM (beta = 0 with a bias), or the GEMM then C += bias (beta != 0), and
 * GELU as a pass over C. Shapes with edge blocks (the buffered store) and alpha != 1. */
typedef int (*bf16_ep_kernel)(CBLAS_TRANSPOSE, CBLAS_TRANSPOSE, int, int, int, float, const float *, int,
                              const float *, int, float, float *, int, const est_gemm_epilogue *);

static void check_epilogue_equals_separate_passes(bf16_ep_kernel kernel, int beta0_only) {
  const shape cases[] = {{CblasNoTrans, CblasNoTrans, 300, 270, 96, 1.0f, 0.0f},
                         {CblasNoTrans, CblasTrans, 77, 70, 130, 1.0f, 1.0f},
                         {CblasTrans, CblasNoTrans, 64, 96, 200, 0.5f, 2.0f},
                         /* two k blocks of 256 pairs (the VDPBF16PS kernel's), a short last tile */
                         {CblasNoTrans, CblasNoTrans, 16, 100, 1100, 1.0f, 0.0f},
                         {CblasNoTrans, CblasTrans, 29, 45, 600, 0.5f, 0.0f}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const shape *s = &cases[i];
    if (beta0_only && s->beta != 0.0f) continue;
    operands o = make_operands(s);
    size_t csize = (size_t)s->M * o.ldc, gsize = (size_t)s->M * (s->N + 1);
    float *fused = malloc(csize * sizeof(float)), *apart = malloc(csize * sizeof(float));
    float *g_fused = calloc(gsize, sizeof(float)), *g_apart = calloc(gsize, sizeof(float));
    float *bias = random_matrix((size_t)s->N);
    memcpy(fused, o.C0, csize * sizeof(float));
    memcpy(apart, o.C0, csize * sizeof(float));
    est_gemm_epilogue ep = {.bias = bias, .gelu_out = g_fused, .ld_gelu = s->N + 1};
    assert_int_equal(kernel(s->ta, s->tb, s->M, s->N, s->K, s->alpha, o.A, o.lda, o.B, o.ldb, s->beta, fused, o.ldc, &ep),
                     0);
    float beta = s->beta;
    if (beta == 0.0f) { /* gemm.c's route: C = bias, then accumulate */
      for (int m = 0; m < s->M; m++) memcpy(apart + (size_t)m * o.ldc, bias, (size_t)s->N * sizeof(float));
      beta = 1.0f;
    }
    assert_int_equal(kernel(s->ta, s->tb, s->M, s->N, s->K, s->alpha, o.A, o.lda, o.B, o.ldb, beta, apart, o.ldc, NULL),
                     0);
    for (int m = 0; m < s->M; m++)
      for (int n = 0; n < s->N; n++) {
        float *c = apart + (size_t)m * o.ldc + n;
        if (s->beta != 0.0f) *c += bias[n];
        g_apart[(size_t)m * (s->N + 1) + n] = est_fast_gelu(*c);
      }
    assert_memory_equal(fused, apart, csize * sizeof(float));
    assert_memory_equal(g_fused, g_apart, gsize * sizeof(float));
    free(fused), free(apart), free(g_fused), free(g_apart), free(bias);
    free_operands(&o);
  }
}

static void test_amx_epilogue_equals_separate_passes(void **state) {
  (void)state;
  if (!est_kernel_amx()) skip(); /* no AMX, or EST_KERNEL=bf16dp or noavx512 */
  check_epilogue_equals_separate_passes(est_sgemm_amx, 0);
}

/* The VDPBF16PS kernel fuses the same epilogue where inference needs it (beta 0), and
 * declines the rest, leaving C untouched, so that gemm.c takes the separate route. */
static void test_dpbf16_epilogue_equals_separate_passes(void **state) {
  (void)state;
  if (!est_kernel_avx512_bf16()) skip();
  check_epilogue_equals_separate_passes(est_sgemm_bf16_dp_ep, 1);
  float a[4] = {1, 2, 3, 4}, c[4] = {5, 6, 7, 8}, bias[2] = {1, 1};
  est_gemm_epilogue ep = {.bias = bias};
  assert_int_equal(est_sgemm_bf16_dp_ep(CblasNoTrans, CblasNoTrans, 2, 2, 2, 1.0f, a, 2, a, 2, 1.0f, c, 2, &ep), -1);
  assert_true(c[0] == 5 && c[3] == 8);
}

/* The GEMM layer runs the precision it is given: bf16 results (where the CPU has it and
 * EST_KERNEL is not noavx512) equal the bf16 kernel's bit for bit for 1 and 2 threads (the
 * layer and est_sgemm_bf16 ask the same kernel choice, AMX or VDPBF16PS, and neither
 * kernel's k order depends on the split), fp32 calls in between stay fp32 (nothing
 * process-wide is left behind), and bf16 asked for on a CPU without it runs fp32. */
static void test_precision_argument_switches_the_gemm(void **state) {
  (void)state;
  est_precision p;
  assert_int_equal(est_precision_parse("bf16", &p), 0);
  assert_int_equal(p, EST_PRECISION_BF16);
  assert_int_equal(est_precision_parse("fp16", &p), -1);
  assert_string_equal(est_precision_name(EST_PRECISION_BF16), "bf16");
  const shape s = {CblasNoTrans, CblasTrans, 300, 96, 200, 1.0f, 1.0f};
  operands o = make_operands(&s);
  size_t csize = (size_t)s.M * o.ldc;
  float *fp32 = malloc(csize * sizeof(float)), *layer = malloc(csize * sizeof(float));
  float *bf16 = malloc(csize * sizeof(float));
  memcpy(fp32, o.C0, csize * sizeof(float));
  cblas_sgemm(CblasRowMajor, s.ta, s.tb, s.M, s.N, s.K, 1.0f, o.A, o.lda, o.B, o.ldb, 1.0f, fp32, o.ldc);
  int has = est_kernel_avx512_bf16();
  assert_int_equal(est_precision_resolve(EST_PRECISION_BF16), has ? EST_PRECISION_BF16 : EST_PRECISION_FP32);
  memcpy(bf16, o.C0, csize * sizeof(float));
  if (has) est_sgemm_bf16(s.ta, s.tb, s.M, s.N, s.K, 1.0f, o.A, o.lda, o.B, o.ldb, 1.0f, bf16, o.ldc);
  else memcpy(bf16, fp32, csize * sizeof(float));
  for (int threads = 1; threads <= 2; threads++) {
    est_set_num_threads(threads);
    memcpy(layer, o.C0, csize * sizeof(float));
    est_sgemm_parallel(s.ta, s.tb, s.M, s.N, s.K, 1.0f, o.A, o.lda, o.B, o.ldb, 1.0f, layer, o.ldc,
                       EST_PRECISION_BF16);
    if (has) assert_memory_equal(layer, bf16, csize * sizeof(float));
    else for (size_t i = 0; i < csize; i++) assert_float_equal(layer[i], fp32[i], 1e-4f);
  }
  if (has) assert_memory_not_equal(bf16, fp32, csize * sizeof(float)); /* it really ran in bf16 */
  memcpy(layer, o.C0, csize * sizeof(float));
  est_sgemm_parallel(s.ta, s.tb, s.M, s.N, s.K, 1.0f, o.A, o.lda, o.B, o.ldb, 1.0f, layer, o.ldc, EST_PRECISION_FP32);
  for (size_t i = 0; i < csize; i++) assert_float_equal(layer[i], fp32[i], 1e-4f);
  free(fp32), free(layer), free(bf16);
  free_operands(&o);
}

/* run_classifier's --precision: fp32/bf16 accepted (bf16 even without AVX512-BF16: it
 * falls back), anything else is bad usage naming the flag. */
static void test_precision_flag(void **state) {
  (void)state;
  char dir[256], *out;
  test_make_tmpdir(dir, sizeof dir);
  const char *fmt = "%s run_classifier --task_name=MRPC --do_eval --data_dir=%s/glue_mini/MRPC "
                    "--vocab_file=%s/vocab_uncased.txt --bert_config_file=%s/run_classifier/bert_config_h32.json "
                    "--max_seq_length=32 --output_dir=%s/%s --precision=%s";
  assert_int_equal(test_run(&out, 1, fmt, EST_BIN, EST_TEST_DATA, EST_TEST_DATA, EST_TEST_DATA, dir, "a", "fp16"), 2);
  assert_non_null(strstr(out, "--precision=fp16"));
  free(out);
  assert_int_equal(test_run(&out, 1, fmt, EST_BIN, EST_TEST_DATA, EST_TEST_DATA, EST_TEST_DATA, dir, "b", "bf16"), 0);
  free(out);
  test_remove_tree(dir);
}

int main(void) {
  test_forced_kernel_or_skip();
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_conversion_rounds_to_nearest_even),
    cmocka_unit_test(test_reference_is_exact_but_for_input_rounding),
    cmocka_unit_test(test_dpbf16_kernel_matches_reference),
    cmocka_unit_test(test_amx_kernel_matches_reference),
    cmocka_unit_test(test_amx_keeps_read_only_weights_packed),
    cmocka_unit_test(test_dpbf16_keeps_read_only_weights_packed),
    cmocka_unit_test(test_dpbf16_shared_input_equals_separate_products),
    cmocka_unit_test(test_amx_epilogue_equals_separate_passes),
    cmocka_unit_test(test_dpbf16_epilogue_equals_separate_passes),
    cmocka_unit_test(test_precision_argument_switches_the_gemm),
    cmocka_unit_test(test_precision_flag),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
