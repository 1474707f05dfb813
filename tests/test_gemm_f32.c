/* est's fp32 AVX-512 GEMM (src/nn/gemm_f32.c) against its reference twin (gemm_f32_ref.c),
 * the epilogue (bias, tanh-GELU), thread-count independence, the dispatch's BLAS path, and
 * the dispatch as the process's kernel choice has it (ctest runs this test again with
 * EST_KERNEL=blas, own and noavx512, docs/testing.md §3).
 *
 * Tolerance: the reference sums in double and rounds once, so its error is at most
 * 2^-24 |ref|. The kernel sums the K products in fp32 in k order, block by block (every
 * k block's partial sum is added into C), so by the usual bound on recursive summation its
 * gap to the exact value is at most K * 2^-24 * 1.01 * sum_k |a b| (K u < 0.01 here), plus
 * one rounding each for the beta C and bias terms and the result: 2^-23 (|beta C| + |bias|
 * + |ref|) covers them. GELU of the same C value is est_fast_gelu in both. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/frozen.h"
#include "est/est.h"
#include "nn/fastmath.h"
#include "nn/gemm.h"
#include "nn/kernel_choice.h"
#include "shared_products_check.h"
#include "test_util.h"

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static float uniform(void) { /* in [-1, 1) */
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((rng_state >> 40) * (1.0 / (1 << 23)) - 1.0);
}

static float *random_matrix(size_t n) {
  float *m = malloc(n * sizeof(float));
  for (size_t i = 0; i < n; i++) m[i] = uniform() * 2.0f;
  return m;
}

/* gelu: 0 none, 1 the forward's epilogue (gelu_out = GELU(C)), 2 the backward's (C *=
 * GELU'(pre), gelu_act = GELU(pre)) */
typedef struct {
  CBLAS_TRANSPOSE ta, tb;
  int M, N, K;
  float alpha, beta;
  int bias, gelu;
  int lda; /* A's leading dimension; 0: its columns + 3 */
} shape;

/* Sizes cross every edge of the kernel: row tiles of at most 12 (NoTrans A's split evenly,
 * 37 rows as 10 + 9 + 9 + 9, 29 as 10 + 10 + 9; Trans A's with a short last one), 32-column tiles
 * (masked), 192-row blocks, 768-long k blocks (K = 1025, 1100), column groups (few row blocks, 2 threads),
 * blocks of A with and without a short last tile (M = 200, 385). */
static const shape shapes[] = {
  {CblasNoTrans, CblasNoTrans, 1, 1, 1, 1.0f, 0.0f, 0, 0, 0},
  {CblasNoTrans, CblasNoTrans, 37, 45, 67, 1.0f, 1.0f, 1, 0, 0},
  {CblasNoTrans, CblasTrans, 37, 45, 67, 0.5f, 1.0f, 0, 1, 0},
  {CblasTrans, CblasNoTrans, 37, 45, 67, 1.0f, 2.0f, 1, 1, 0},
  {CblasTrans, CblasTrans, 13, 33, 5, -1.0f, 0.0f, 0, 0, 0},
  {CblasNoTrans, CblasNoTrans, 200, 70, 1100, 1.0f, 0.0f, 1, 1, 0},
  {CblasTrans, CblasNoTrans, 64, 128, 1025, 1.0f, 1.0f, 0, 0, 0},
  {CblasNoTrans, CblasTrans, 385, 96, 128, 1.0f, 0.0f, 1, 0, 0},
  {CblasNoTrans, CblasNoTrans, 24, 300, 257, 1.0f, 0.0f, 1, 1, 0},
  {CblasTrans, CblasTrans, 130, 64, 300, 1.0f, 1.0f, 0, 0, 0},
  /* Trans B packs by gathers of 16 columns: a last tile with 18 columns (a full and a
   * partial gather) */
  {CblasNoTrans, CblasTrans, 29, 50, 70, 1.0f, 0.0f, 0, 0, 0},
  /* the backward through a GELU: the FFN's d act GEMM (NT, beta 0), and with two k blocks,
   * beta 1 and a masked last tile */
  {CblasNoTrans, CblasTrans, 200, 96, 130, 1.0f, 0.0f, 0, 2, 0},
  {CblasNoTrans, CblasNoTrans, 37, 45, 1100, 1.0f, 1.0f, 0, 2, 0},
  /* A's rows sharing L1 sets, so copied apart per k block (gemm_f32.c, copy_rows_apart):
   * 8 KiB apart (all 12 in one set) over two k blocks and two row blocks; 4 KiB; 3 KiB
   * (3 rows a set, the least that copies) */
  {CblasNoTrans, CblasNoTrans, 200, 70, 1100, 1.0f, 0.0f, 1, 1, 2048},
  {CblasNoTrans, CblasTrans, 37, 45, 67, 0.5f, 1.0f, 0, 0, 1024},
  {CblasNoTrans, CblasNoTrans, 24, 300, 257, 1.0f, 0.0f, 1, 1, 768},
};

typedef struct {
  float *A, *B, *C0, *bias, *pre; /* pre [M, N + 1]: the GELU backward's input */
  int lda, ldb, ldc;
} operands;

/* Operands with leading dimensions wider than the matrices (so strides are exercised). */
static operands make_operands(const shape *s) {
  operands o;
  int arows = s->ta == CblasNoTrans ? s->M : s->K, acols = s->ta == CblasNoTrans ? s->K : s->M;
  int brows = s->tb == CblasNoTrans ? s->K : s->N, bcols = s->tb == CblasNoTrans ? s->N : s->K;
  o.lda = s->lda ? s->lda : acols + 3, o.ldb = bcols + 5, o.ldc = s->N + 7;
  o.A = random_matrix((size_t)arows * o.lda);
  o.B = random_matrix((size_t)brows * o.ldb);
  o.C0 = random_matrix((size_t)s->M * o.ldc);
  o.bias = random_matrix((size_t)s->N);
  o.pre = random_matrix((size_t)s->M * (s->N + 1));
  return o;
}

static void free_operands(operands *o) { free(o->A), free(o->B), free(o->C0), free(o->bias), free(o->pre); }

/* The shape's epilogue; G [M, ldg] receives GELU(C) or GELU(pre) (ldg = N + 1, pre's too). */
static est_gemm_epilogue make_epilogue(const shape *s, const operands *o, float *G, int ldg) {
  est_gemm_epilogue ep = {.bias = s->bias ? o->bias : NULL};
  if (s->gelu == 1) ep.gelu_out = G, ep.ld_gelu = ldg;
  if (s->gelu == 2) ep.gelu_pre = o->pre, ep.gelu_act = G, ep.ld_pre = ldg;
  return ep;
}

static double abs_sum(const shape *s, const operands *o, int m, int n) {
  double sum = 0.0;
  for (int k = 0; k < s->K; k++) {
    float a = s->ta == CblasNoTrans ? o->A[(size_t)m * o->lda + k] : o->A[(size_t)k * o->lda + m];
    float b = s->tb == CblasNoTrans ? o->B[(size_t)k * o->ldb + n] : o->B[(size_t)n * o->ldb + k];
    sum += fabs((double)a * b);
  }
  return sum;
}

typedef void gemm_fn(const shape *s, const operands *o, float *C, float *G, int ldg);

static void run_fast(const shape *s, const operands *o, float *C, float *G, int ldg) {
  est_gemm_epilogue ep = make_epilogue(s, o, G, ldg);
  assert_int_equal(est_sgemm_f32(s->ta, s->tb, s->M, s->N, s->K, s->alpha, o->A, o->lda, o->B, o->ldb, s->beta, C,
                                 o->ldc, &ep), 0);
}

/* est_sgemm_parallel_ep under the process's kernel choice (EST_KERNEL, or auto) */
static void run_dispatch(const shape *s, const operands *o, float *C, float *G, int ldg) {
  est_gemm_epilogue ep = make_epilogue(s, o, G, ldg);
  est_sgemm_parallel_ep(s->ta, s->tb, s->M, s->N, s->K, s->alpha, o->A, o->lda, o->B, o->ldb, s->beta, C, o->ldc, &ep,
                        EST_PRECISION_FP32);
}

static void run_blas_path(const shape *s, const operands *o, float *C, float *G, int ldg) {
  est_gemm_epilogue ep = make_epilogue(s, o, G, ldg);
  est_kernel before = est_kernel_get();
  assert_int_equal(est_kernel_set(EST_KERNEL_BLAS), EST_OK);
  est_sgemm_parallel_ep(s->ta, s->tb, s->M, s->N, s->K, s->alpha, o->A, o->lda, o->B, o->ldb, s->beta, C, o->ldc, &ep,
                        EST_PRECISION_FP32);
  assert_int_equal(est_kernel_set(before), EST_OK);
}

/* Every shape, with 1 and 2 threads: C within the tolerance of the reference, GELU equal to
 * est_fast_gelu of C up to the vectorised polynomial's contraction (a few ulp), columns
 * beyond N untouched. With same_bits, 1 and 2 threads also give the same bits: only for a
 * path whose arithmetic does not depend on the thread count on any CPU (est's own kernel,
 * gemm_f32.c: every element summed in the same k order whoever computes it). The BLAS path
 * is not one: blas_parallel (gemm.c) cuts C into row or column blocks whose size depends on
 * the thread count, each one sgemm call, and OpenBLAS does not give a block of rows the bits
 * it gives them inside the whole matrix (its kernels pick their register blocking and k
 * splitting by the call's shape: NT 385x96x128 in blocks of 128 rows differs from the whole
 * in tens to thousands of elements with the Cooperlake, SkylakeX and Haswell kernels alike).
 * So there each thread count's result is held to the bound the arithmetic allows, the fp32
 * summation bound against the double-precision reference above, and to nothing closer to
 * the other's (docs/testing.md §2). */
static void check_against_reference(gemm_fn *fn, int same_bits) {
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    const shape *s = &shapes[i];
    operands o = make_operands(s);
    size_t csize = (size_t)s->M * o.ldc;
    int ldg = s->N + 1;
    float *ref = malloc(csize * sizeof(float)), *gref = calloc((size_t)s->M * ldg, sizeof(float));
    memcpy(ref, o.C0, csize * sizeof(float));
    est_gemm_epilogue ep = make_epilogue(s, &o, gref, ldg);
    est_sgemm_f32_ref(s->ta, s->tb, s->M, s->N, s->K, s->alpha, o.A, o.lda, o.B, o.ldb, s->beta, ref, o.ldc, &ep);
    float *first = NULL, *gfirst = NULL;
    for (int threads = 1; threads <= 2; threads++) {
      est_set_num_threads(threads);
      float *fast = malloc(csize * sizeof(float)), *g = calloc((size_t)s->M * ldg, sizeof(float));
      memcpy(fast, o.C0, csize * sizeof(float));
      fn(s, &o, fast, g, ldg);
      for (int m = 0; m < s->M; m++) {
        for (int n = 0; n < s->N; n++) {
          double r = ref[(size_t)m * o.ldc + n], c0 = o.C0[(size_t)m * o.ldc + n];
          double extra = fabs(s->beta * c0) + (s->bias ? fabs(o.bias[n]) : 0.0) + fabs(r);
          double tol = s->K * 0x1p-24 * 1.01 * fabs(s->alpha) * abs_sum(s, &o, m, n) + 0x1p-23 * extra;
          float c = fast[(size_t)m * o.ldc + n];
          if (s->gelu == 2) { /* both sides times the same GELU'(pre), each product rounded once */
            float pre = o.pre[(size_t)m * ldg + n];
            tol = tol * fabs(est_fast_gelu_grad(pre)) + 0x1p-23 * fabs(r);
            assert_true(g[(size_t)m * ldg + n] == est_fast_gelu(pre)); /* gelu_avx512.h: the scalar's bits */
          }
          assert_true(fabs(c - r) <= tol);
          if (s->gelu == 1) {
            float want = est_fast_gelu(c), got = g[(size_t)m * ldg + n];
            assert_true(fabsf(got - want) <= 4 * 0x1p-24f * fabsf(want) + 1e-30f);
          }
        }
        for (int n = s->N; n < o.ldc; n++) assert_true(fast[(size_t)m * o.ldc + n] == o.C0[(size_t)m * o.ldc + n]);
        if (s->gelu) assert_true(g[(size_t)m * ldg + s->N] == 0.0f);
      }
      if (!first) first = fast, gfirst = g;
      else if (!same_bits) free(fast), free(g);
      else {
        assert_memory_equal(fast, first, csize * sizeof(float));
        assert_memory_equal(g, gfirst, (size_t)s->M * ldg * sizeof(float));
        free(fast), free(g);
      }
    }
    est_set_num_threads(1);
    free(first), free(gfirst), free(ref), free(gref);
    free_operands(&o);
  }
}

static void test_kernel_matches_reference(void **state) {
  (void)state;
  if (!est_kernel_avx512f()) skip(); /* no AVX-512F, or EST_KERNEL=noavx512 */
  check_against_reference(run_fast, 1);
}

/* The BLAS path of the dispatch (any CPU) applies the same epilogue as passes over C; its
 * bits may depend on the thread count (check_against_reference says why). */
static void test_blas_path_applies_the_epilogue(void **state) {
  (void)state;
  check_against_reference(run_blas_path, 0);
}

/* The dispatch with the kernel choice in effect: auto picks the own kernel or OpenBLAS per
 * shape, so only its bound holds; with EST_KERNEL=own every shape here runs the own kernel
 * (each has K > 0 and alpha != 0), whose bits do not depend on the thread count. */
static void test_dispatch_matches_reference(void **state) {
  (void)state;
  print_message("kernel choice: %s\n", est_kernel_name(est_kernel_get()));
  check_against_reference(run_dispatch, est_kernel_get() == EST_KERNEL_OWN);
}

/* The reference itself: small integers are exact in fp32, so C is exact. */
static void test_reference_on_exact_values(void **state) {
  (void)state;
  float a[6] = {1, 2, 3, -4, 0.5f, 8}, b[6] = {3, -1, 0.25f, 2, 6, 1}, c[4] = {1, 1, 1, 1}, bias[2] = {10, 20};
  float g[4];
  est_gemm_epilogue ep = {.bias = bias, .gelu_out = g, .ld_gelu = 2};
  est_sgemm_f32_ref(CblasNoTrans, CblasNoTrans, 2, 2, 3, 1.0f, a, 3, b, 2, 2.0f, c, 2, &ep);
  assert_true(c[0] == 1 * 3 + 2 * 0.25f + 3 * 6 + 2 + 10);
  assert_true(c[3] == -4 * -1 + 0.5f * 2 + 8 * 1 + 2 + 20);
  assert_true(g[0] == est_fast_gelu(c[0]) && g[3] == est_fast_gelu(c[3]));
}

/* An inference weight (B in a read-only range, core/frozen.h): the kernel keeps B's packed
 * form instead of packing it per call, with the same bits as the unfrozen call (the same
 * packing, made once); the dispatch then runs the own kernel for the NoTrans-A shapes here,
 * short ones included (a 16-token request) where unfrozen B goes to OpenBLAS. (gemm.c
 * leaves one kind to OpenBLAS even so, a product over 1024 wide or deep of 64 rows or more
 * without a GELU; no shape here is one.) */
static void test_frozen_weights_packed_once(void **state) {
  (void)state;
  if (!est_kernel_avx512f()) skip();
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    const shape *s = &shapes[i];
    if (s->gelu == 2) continue; /* a backward product: never of a frozen weight */
    operands o = make_operands(s);
    size_t csize = (size_t)s->M * o.ldc;
    int ldg = s->N + 1, brows = s->tb == CblasNoTrans ? s->K : s->N;
    float *want = malloc(csize * sizeof(float)), *got = malloc(csize * sizeof(float));
    float *gwant = calloc((size_t)s->M * ldg, sizeof(float)), *ggot = calloc((size_t)s->M * ldg, sizeof(float));
    memcpy(want, o.C0, csize * sizeof(float));
    run_fast(s, &o, want, gwant, ldg);
    assert_int_equal(est_frozen_add(o.B, (size_t)brows * o.ldb * sizeof(float)), 0);
    for (int pass = 0; pass < 2; pass++) { /* the first makes the copy, the second reuses it */
      memcpy(got, o.C0, csize * sizeof(float));
      if (s->ta == CblasNoTrans && est_kernel_get() == EST_KERNEL_AUTO) run_dispatch(s, &o, got, ggot, ldg);
      else run_fast(s, &o, got, ggot, ldg);
      assert_memory_equal(got, want, csize * sizeof(float));
      assert_memory_equal(ggot, gwant, (size_t)s->M * ldg * sizeof(float));
      assert_int_equal(est_frozen_derived_bytes(), est_f32_packed_floats(s->K, s->N) * sizeof(float));
    }
    est_frozen_remove(o.B);
    assert_int_equal(est_frozen_derived_bytes(), 0);
    free(want), free(got), free(gwant), free(ggot);
    free_operands(&o);
  }
}

/* Products of one A with inference weights in one team (est_sgemm_f32_shared: the Q, K and
 * V projections), each the bits of its own est_sgemm_f32 (tests/shared_products_check.h). */
static void test_shared_input_equals_separate_products(void **state) {
  (void)state;
  if (!est_kernel_avx512f()) skip();
  check_shared_products(est_sgemm_f32, est_sgemm_f32_shared, EST_PRECISION_FP32);
}

/* K = 0 or alpha = 0: the kernel declines and the dispatch's BLAS path scales C by beta. */
static void test_degenerate_shapes_fall_back(void **state) {
  (void)state;
  float a[4] = {1, 2, 3, 4}, c[4] = {1, 2, 3, 4};
  assert_int_not_equal(est_sgemm_f32(CblasNoTrans, CblasNoTrans, 2, 2, 0, 1.0f, a, 2, a, 2, 0.5f, c, 2, NULL), 0);
  est_sgemm_parallel(CblasNoTrans, CblasNoTrans, 2, 2, 2, 0.0f, a, 2, a, 2, 0.5f, c, 2, EST_PRECISION_FP32);
  assert_true(c[0] == 0.5f && c[3] == 2.0f);
}

int main(void) {
  test_forced_kernel_or_skip();
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_reference_on_exact_values),
    cmocka_unit_test(test_kernel_matches_reference),
    cmocka_unit_test(test_blas_path_applies_the_epilogue),
    cmocka_unit_test(test_dispatch_matches_reference),
    cmocka_unit_test(test_degenerate_shapes_fall_back),
    cmocka_unit_test(test_frozen_weights_packed_once),
    cmocka_unit_test(test_shared_input_equals_separate_products),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
