/* int8 GEMM (nn/quant_int8.h, nn/gemm_kernels.h, nn/gemm_int8.h): quantization round trips, the packed weights, the reference
 * against exact arithmetic, every int8 kernel this CPU has against the reference bit for bit
 * (ctest runs this test again with EST_KERNEL=vnni512, avxvnni and noavx512; a kernel the CPU
 * lacks skips, docs/testing.md §3), the dispatch by precision and the fallback without VNNI.
 *
 * Reference vs exact: a = sa (qa + ea) and b = sw (qb + eb) with |ea|, |eb| <= 1/2 (rounding
 * to the nearest code), so |a b - sa sw qa qb| <= |a| sw / 2 + |b| sa / 2 + sa sw / 4 (the
 * product of the two errors), summed over k; the int32 sum is exact and the dequantization
 * adds two float roundings (the scale product and the FMA), 2^-23 of |C| at most, plus the
 * bias's. That bound is what the test checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/frozen.h"
#include "est/est.h"
#include "nn/gemm.h"
#include "nn/cpu_features.h"
#include "nn/gemm_int8.h"
#include "nn/kernel_choice.h"
#include "test_util.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static float uniform(void) { /* in [-1, 1) */
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((rng_state >> 40) * (1.0 / (1 << 23)) - 1.0);
}

static float *random_matrix(size_t n, float range) {
  float *m = malloc(n * sizeof(float));
  for (size_t i = 0; i < n; i++) m[i] = uniform() * range;
  return m;
}

/* a kernel, not the reference twin (whose own run would be compared with itself) */
static int have_int8_kernel(void) { return est_kernel_int8() && est_kernel_get() != EST_KERNEL_INT8REF; }
static const char *int8_kernel_name(void) {
  return est_kernel_get() == EST_KERNEL_AMXEMU ? "amxemu"
         : est_kernel_amx_int8()              ? "amxint8"
         : est_kernel_vnni512()               ? "vnni512"
                                              : "avxvnni";
}

static void test_quantize_round_trips_within_half_a_step(void **state) {
  (void)state;
  enum { N = 1000 };
  float x[N];
  int8_t q[N];
  for (int i = 0; i < N; i++) x[i] = uniform() * 3.0f;
  x[17] = -3.5f; /* the largest magnitude: code -127 exactly */
  float scale = est_int8_quantize(x, 1, N, q, 1);
  assert_true(scale == 3.5f / 127.0f);
  assert_int_equal(q[17], -127);
  for (int i = 0; i < N; i++) {
    assert_true(q[i] >= -127 && q[i] <= 127);
    assert_true(fabsf(q[i] * scale - x[i]) <= 0.5f * scale * (1 + 1e-5f));
  }
  /* strided input, and an all-zero one: scale 0, codes 0 */
  float col[3 * 4] = {0};
  int8_t qc[4] = {1, 1, 1, 1};
  assert_true(est_int8_quantize(col, 3, 4, qc, 1) == 0.0f);
  for (int i = 0; i < 4; i++) assert_int_equal(qc[i], 0);
  col[3 * 1] = NAN; /* a NaN: scale NaN, so the outputs it reaches are NaN */
  assert_true(isnan(est_int8_quantize(col, 3, 4, qc, 1)));
  col[3 * 1] = 0.0f;
  col[3 * 2] = 0.25f, col[3 * 3] = -0.125f;
  est_int8_quantize(col, 3, 4, qc, 1);
  assert_int_equal(qc[2], 127);
  assert_int_equal(qc[3], -64); /* -63.5 rounds to the even -64 */
}

/* The packed words hold each column's codes in k order, and colsum their sum. */
static void test_packed_weights_hold_the_codes(void **state) {
  (void)state;
  const int K = 13, N = 37;
  float *B = random_matrix((size_t)K * N, 1.0f);
  void *mem = aligned_alloc(64, (est_int8_weights_bytes(K, N) + 63) / 64 * 64);
  for (int trans = 0; trans < 2; trans++) {
    float *src = B;
    float Bt[13 * 37];
    if (trans)
      for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++) Bt[n * K + k] = B[k * N + n];
    if (trans) src = Bt;
    est_int8_weights w = est_int8_weights_pack(mem, src, trans ? K : N, trans ? CblasTrans : CblasNoTrans, K, N);
    assert_int_equal(w.groups, 4);
    assert_int_equal(w.Np, 64);
    for (int n = 0; n < w.Np; n++) {
      /* panel-major: column n's words in panel n / 32, groups 32 words apart */
      const int8_t *bytes = (const int8_t *)(w.words + (size_t)(n / 32) * w.groups * 32 + n % 32);
      assert_ptr_equal(bytes, est_int8_column(&w, n));
      int8_t q[13];
      float s = n < N ? est_int8_quantize(B + n, N, K, q, 1) : 0.0f;
      int sum = 0;
      for (int k = 0; k < 4 * w.groups; k++) {
        int8_t want = n < N && k < K ? q[k] : 0;
        assert_int_equal(bytes[(size_t)(k / 4) * 32 * 4 + k % 4], want);
        sum += want;
      }
      assert_int_equal(w.colsum[n], sum);
      assert_true(w.scale[n] == s);
    }
  }
  free(mem);
  free(B);
}

static void test_reference_within_the_quantization_bound(void **state) {
  (void)state;
  const int M = 9, N = 21, K = 70;
  float *A = random_matrix((size_t)M * K, 2.0f), *B = random_matrix((size_t)K * N, 0.1f);
  float *bias = random_matrix(N, 1.0f), *C = malloc((size_t)M * N * sizeof(float));
  est_gemm_epilogue ep = {.bias = bias};
  est_sgemm_int8_ref(CblasNoTrans, M, N, K, A, K, B, N, C, N, &ep);
  int8_t q[70];
  for (int m = 0; m < M; m++)
    for (int n = 0; n < N; n++) {
      float sa = est_int8_quantize(A + (size_t)m * K, 1, K, q, 1), sw = est_int8_quantize(B + n, N, K, q, 1);
      double exact = bias[n], bound = 0.0;
      for (int k = 0; k < K; k++) {
        double a = A[(size_t)m * K + k], b = B[(size_t)k * N + n];
        exact += a * b;
        bound += fabs(a) * sw / 2 + fabs(b) * sa / 2 + sa * sw / 4;
      }
      double got = C[(size_t)m * N + n];
      assert_true(fabs(got - exact) <= bound + 0x1p-22 * (fabs(got) + fabs(bias[n])));
      assert_true(fabs(got - exact) > 0.0 || bound == 0.0); /* it did quantize */
    }
  free(A), free(B), free(bias), free(C);
}

/* est_sgemm_int8 == est_sgemm_int8_ref, bit for bit, on one shape in every variant. */
static void check_shape(int M, int N, int K, int threads) {
  float *A = random_matrix((size_t)M * (K + 3), 4.0f), *B = random_matrix((size_t)K * (N + 5), 0.2f);
  float *bias = random_matrix(N, 0.5f);
  size_t cn = (size_t)M * (N + 2);
  float *C = malloc(cn * sizeof(float)), *R = malloc(cn * sizeof(float));
  float *G = malloc(cn * sizeof(float)), *GR = malloc(cn * sizeof(float));
  omp_set_num_threads(threads);
  for (int variant = 0; variant < 8; variant++) {
    int trans = variant & 1, with_bias = variant & 2, gelu = variant & 4;
    /* B stored [K, N+5] (NoTrans) or [N, K+?] (Trans: the same buffer read as [N rows, K+..]) */
    int ldb = trans ? K : N + 5;
    est_gemm_epilogue ep = {.bias = with_bias ? bias : NULL, .gelu_out = gelu ? G : NULL, .ld_gelu = N + 2};
    est_gemm_epilogue er = ep;
    er.gelu_out = gelu ? GR : NULL;
    for (size_t i = 0; i < cn; i++) C[i] = R[i] = G[i] = GR[i] = -7.0f; /* the padding must stay */
    assert_int_equal(est_sgemm_int8(trans ? CblasTrans : CblasNoTrans, M, N, K, A, K + 3, B, ldb, C, N + 2, &ep), 0);
    est_sgemm_int8_ref(trans ? CblasTrans : CblasNoTrans, M, N, K, A, K + 3, B, ldb, R, N + 2, &er);
    if (memcmp(C, R, cn * sizeof(float)) || memcmp(G, GR, cn * sizeof(float)))
      fail_msg("int8 kernel %s != reference at M=%d N=%d K=%d threads=%d variant %d",
               int8_kernel_name(), M, N, K, threads, variant);
  }
  free(A), free(B), free(bias), free(C), free(R), free(G), free(GR);
}

static void test_kernel_equals_reference_bit_for_bit(void **state) {
  (void)state;
  if (!have_int8_kernel()) skip(); /* no VNNI, or EST_KERNEL=noavx512 on a CPU without AVX-VNNI */
  static const int shapes[][3] = {{1, 1, 1},    {1, 33, 5},    {2, 31, 4},    {5, 7, 3},    {13, 33, 17},
                                  {12, 32, 64}, {25, 65, 130}, {16, 768, 96}, {200, 100, 77}, {401, 96, 259}};
  int max_threads = omp_get_max_threads();
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
    for (int threads = 1; threads <= 2; threads++) check_shape(shapes[s][0], shapes[s][1], shapes[s][2], threads);
  omp_set_num_threads(max_threads);
  /* a NaN in a row of A: that row of C is NaN, as in fp32, never finite garbage; the others as the reference */
  enum { M = 5, N = 40, K = 33 };
  float *A = random_matrix((size_t)M * K, 1.0f), *B = random_matrix((size_t)K * N, 1.0f), C[M * N], R[M * N];
  A[2 * K + 7] = NAN;
  assert_int_equal(est_sgemm_int8(CblasNoTrans, M, N, K, A, K, B, N, C, N, NULL), 0);
  est_sgemm_int8_ref(CblasNoTrans, M, N, K, A, K, B, N, R, N, NULL);
  for (int i = 0; i < M * N; i++) {
    assert_true(i / N == 2 ? isnan(C[i]) && isnan(R[i]) : C[i] == R[i]);
  }
  free(A), free(B);
}

/* A block kernel on rows quantized in `layout`, against the reference: the matrix cut into
 * four blocks as the dispatch cuts them (rows at a multiple of the layout's row tile below
 * M / 2, columns at 32), the left-hand blocks with a bias and the right-hand ones without. */
static void check_blocks_against_reference(est_int8_block_fn *block, est_int8_a_layout layout, const char *name,
                                           const int (*shapes)[3], size_t count) {
  const int tile_rows = est_int8_layout_rows(layout);
  for (size_t s = 0; s < count; s++) {
    const int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
    const int groups = (K + 3) / 4, Mp = (M + tile_rows - 1) / tile_rows * tile_rows;
    float *A = random_matrix((size_t)M * K, 3.0f), *B = random_matrix((size_t)K * N, 0.2f), *bias = random_matrix(N, 1);
    void *mem = aligned_alloc(64, (est_int8_weights_bytes(K, N) + 63) / 64 * 64);
    est_int8_weights w = est_int8_weights_pack(mem, B, N, CblasNoTrans, K, N);
    uint8_t *qa = malloc((size_t)Mp * est_int8_padded_groups(groups) * 4); /* either layout's words */
    float *sa = malloc((size_t)Mp * sizeof(float));
    est_int8_quantize_rows(layout, qa, sa, A, K, M, K, groups, 0, Mp);
    float *C = calloc((size_t)M * N, sizeof(float));
    const int m_cut = M / 2 / tile_rows * tile_rows, n_cut = N > 32 ? 32 : N;
    for (int half_m = 0; half_m < 2; half_m++)
      for (int half_n = 0; half_n < 2; half_n++) {
        const int m0 = half_m ? m_cut : 0, m1 = half_m ? M : m_cut, n0 = half_n ? n_cut : 0, n1 = half_n ? N : n_cut;
        if (m0 < m1 && n0 < n1) block(layout, &w, qa, sa, half_n ? NULL : bias, C, N, m0, m1, n0, n1);
      }
    float *R = calloc((size_t)M * N, sizeof(float)), *R0 = calloc((size_t)M * N, sizeof(float));
    est_gemm_epilogue ep = {.bias = bias};
    est_sgemm_int8_ref(CblasNoTrans, M, N, K, A, K, B, N, R, N, &ep);
    est_sgemm_int8_ref(CblasNoTrans, M, N, K, A, K, B, N, R0, N, NULL);
    for (int m = 0; m < M; m++)
      for (int n = 0; n < N; n++) {
        const size_t i = (size_t)m * N + n;
        if (C[i] != (n < n_cut ? R : R0)[i])
          fail_msg("%s != reference at M=%d N=%d K=%d: C[%d][%d] %.9g, reference %.9g", name, M, N, K, m, n, C[i],
                   (n < n_cut ? R : R0)[i]);
      }
    free(A), free(B), free(bias), free(mem), free(qa), free(sa), free(C), free(R), free(R0);
  }
}

/* The 8-lane AVX-VNNI kernel's arithmetic, assembled with EVEX encodings so that a CPU with
 * AVX512-VNNI but no AVX-VNNI checks it too (gemm_int8_ymm_evex.c): blocks equal the
 * reference, tile edges included. */
static void test_ymm_kernel_equals_reference(void **state) {
  (void)state;
  if (!est_cpu_has_avx512_vnni()) skip();
  static const int shapes[][3] = {{1, 1, 1}, {5, 7, 3}, {13, 33, 17}, {25, 65, 130}, {37, 47, 259}};
  /* its 4-row tiles read a row layout's tiles in parts: 12 rows (the one it is given), 8, 4 */
  for (int rows = 4; rows <= EST_INT8_MR; rows += 4)
    check_blocks_against_reference(est_int8_block_ymm_evex, rows, "ymm kernel", shapes, sizeof shapes / sizeof *shapes);
}

/* The AVX512-VNNI kernel on every row layout est_int8_rows_layout can choose (tiles of 1 to 12
 * rows), so a tile of any height reads its rows a layout's height apart; and the layouts
 * chosen: at most 12 rows a tile, the last short by less than the tile count, and all the
 * tiles within est_int8_padded_rows (the buffers' size). */
static void test_row_layouts(void **state) {
  (void)state;
  for (int M = 1; M <= 5000; M++) {
    const int h = est_int8_rows_layout(M), tiles = (M + h - 1) / h;
    assert_true(h >= 1 && h <= EST_INT8_MR);
    assert_int_equal(tiles, (M + EST_INT8_MR - 1) / EST_INT8_MR);
    assert_true(tiles * h < M + tiles && tiles * h <= est_int8_padded_rows(M));
  }
  assert_int_equal(est_int8_rows_layout(16), 8);
  assert_int_equal(est_int8_rows_layout(4096), EST_INT8_MR);
  if (!est_cpu_has_avx512_vnni()) skip();
  static const int shapes[][3] = {{1, 1, 1}, {5, 7, 3}, {13, 33, 17}, {16, 64, 96}, {37, 47, 259}};
  for (int rows = 1; rows <= EST_INT8_MR; rows++)
    check_blocks_against_reference(est_int8_block_vnni512, rows, "vnni512 kernel", shapes,
                                   sizeof shapes / sizeof *shapes);
}

/* The AMX kernel's body on emulated tiles (gemm_int8_amx_emulated.c), so that a CPU without
 * AMX checks it too, on rows quantized in the tiles' layout: blocks from rows at multiples of
 * 16 and columns at multiples of 32 equal the reference. The shapes cover K within one k tile
 * (K <= 64), on a tile's edge (64, 128) and with a last k tile of 1-15 groups (65, 259); one
 * row tile, a pair and a pair plus one (16, 32, 45 rows), a 16-row tile cut short (1, 13, 33);
 * columns short of a panel and over several. */
static void test_amx_emulated_kernel_equals_reference(void **state) {
  (void)state;
  if (!est_cpu_has_avx512_vnni()) skip(); /* its epilogue is AVX-512 code */
  static const int shapes[][3] = {{1, 1, 1},   {13, 33, 17}, {16, 32, 64}, {32, 64, 128},
                                  {33, 70, 65}, {45, 100, 259}, {60, 96, 3}, {200, 40, 130}};
  check_blocks_against_reference(est_int8_block_amx_emulated, EST_INT8_TILES16, "AMX body (emulated)", shapes,
                                 sizeof shapes / sizeof *shapes);
}

/* A read-only weight is packed once and reused; the result is the same bits. */
static void test_frozen_weights_packed_once(void **state) {
  (void)state;
  if (!have_int8_kernel()) skip();
  const int M = 30, N = 70, K = 40;
  float *A = random_matrix((size_t)M * K, 1.0f), *W = random_matrix((size_t)K * N, 1.0f);
  float *C = malloc((size_t)M * N * sizeof(float)), *R = malloc((size_t)M * N * sizeof(float));
  size_t before = est_frozen_derived_bytes();
  assert_int_equal(est_sgemm_int8(CblasNoTrans, M, N, K, A, K, W, N, R, N, NULL), 0);
  assert_int_equal(est_frozen_derived_bytes(), before);
  assert_int_equal(est_frozen_add(W, (size_t)K * N * sizeof(float)), 0);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(est_sgemm_int8(CblasNoTrans, M, N, K, A, K, W, N, C, N, NULL), 0);
    assert_memory_equal(C, R, (size_t)M * N * sizeof(float));
    assert_int_equal(est_frozen_derived_bytes() - before, est_int8_weights_bytes(K, N));
  }
  est_frozen_remove(W);
  assert_int_equal(est_frozen_derived_bytes(), before);
  free(A), free(W), free(C), free(R);
}

/* Products of one A (est_sgemm_int8_shared: the Q, K and V projections): each the same bits
 * as its own est_sgemm_int8, with the weights kept (A quantized once, one parallel region,
 * column counts that cut tiles short) and without (one by one), on 1 and 2 threads, and
 * through est_matmul_forward_shared. */
static void test_shared_input_equals_separate_products(void **state) {
  (void)state;
  if (!have_int8_kernel()) skip();
  enum { M = 61, K = 70, P = 3 };
  const int Ns[P] = {64, 33, 100};
  float *A = random_matrix((size_t)M * K, 2.0f), *W[P], *bias[P], *C[P], *R[P];
  est_gemm_epilogue ep[P];
  est_gemm_product prods[P];
  est_dense_output outs[P];
  for (int j = 0; j < P; j++) {
    W[j] = random_matrix((size_t)K * Ns[j], 0.3f), bias[j] = random_matrix(Ns[j], 1.0f);
    C[j] = malloc((size_t)M * Ns[j] * sizeof(float)), R[j] = malloc((size_t)M * Ns[j] * sizeof(float));
    ep[j] = (est_gemm_epilogue){.bias = bias[j]};
    prods[j] = (est_gemm_product){W[j], Ns[j], Ns[j], C[j], Ns[j], &ep[j]};
    outs[j] = (est_dense_output){C[j], W[j], bias[j], Ns[j]};
    assert_int_equal(est_sgemm_int8(CblasNoTrans, M, Ns[j], K, A, K, W[j], Ns[j], R[j], Ns[j], &ep[j]), 0);
  }
  const int max_threads = omp_get_max_threads();
  for (int kept = 0; kept < 2; kept++)
    for (int threads = 1; threads <= 2; threads++) {
      omp_set_num_threads(threads);
      for (int j = 0; j < P; j++) memset(C[j], 0xff, (size_t)M * Ns[j] * sizeof(float));
      assert_int_equal(est_sgemm_int8_shared(CblasNoTrans, M, K, A, K, prods, P), 0);
      for (int j = 0; j < P; j++) assert_memory_equal(C[j], R[j], (size_t)M * Ns[j] * sizeof(float));
      for (int j = 0; j < P; j++) memset(C[j], 0xff, (size_t)M * Ns[j] * sizeof(float));
      est_matmul_forward_shared(A, M, K, outs, P, EST_PRECISION_INT8);
      for (int j = 0; j < P; j++) assert_memory_equal(C[j], R[j], (size_t)M * Ns[j] * sizeof(float));
      if (!kept && threads == 2)
        for (int j = 0; j < P; j++) assert_int_equal(est_frozen_add(W[j], (size_t)K * Ns[j] * sizeof(float)), 0);
    }
  omp_set_num_threads(max_threads);
  for (int j = 0; j < P; j++) est_frozen_remove(W[j]), free(W[j]), free(bias[j]), free(C[j]), free(R[j]);
  free(A);
}

/* The FFN's two GEMMs in one call (est_sgemm_int8_ffn, the first quantizing the GELU's rows
 * for the second): pre, act and out the same bits as two est_sgemm_int8 calls. With 1 thread
 * every work item spans whole rows, so the hand-over runs at any M; with 2 it runs at 1400
 * rows and not at 30 (columns split). Weights kept, as in inference; odd widths pad tiles. */
static void test_ffn_equals_two_products(void **state) {
  (void)state;
  if (!have_int8_kernel()) skip();
  enum { H = 40, F = 70 };
  float *Wi = random_matrix((size_t)H * F, 0.3f), *Wo = random_matrix((size_t)F * H, 0.3f);
  float *bi = random_matrix(F, 1.0f), *bo = random_matrix(H, 1.0f);
  assert_int_equal(est_frozen_add(Wi, (size_t)H * F * sizeof(float)), 0);
  assert_int_equal(est_frozen_add(Wo, (size_t)F * H * sizeof(float)), 0);
  const int max_threads = omp_get_max_threads();
  for (int rows = 0; rows < 2; rows++) {
    const int M = rows ? 1400 : 30;
    float *A = random_matrix((size_t)M * H, 2.0f);
    float *pre = malloc((size_t)M * F * sizeof(float)), *act = malloc((size_t)M * F * sizeof(float));
    float *out = malloc((size_t)M * H * sizeof(float)), *pre_r = malloc((size_t)M * F * sizeof(float));
    float *act_r = malloc((size_t)M * F * sizeof(float)), *out_r = malloc((size_t)M * H * sizeof(float));
    const est_gemm_epilogue ep_in = {.bias = bi, .gelu_out = act_r, .ld_gelu = F}, ep_out = {.bias = bo};
    assert_int_equal(est_sgemm_int8(CblasNoTrans, M, F, H, A, H, Wi, F, pre_r, F, &ep_in), 0);
    assert_int_equal(est_sgemm_int8(CblasNoTrans, M, H, F, act_r, F, Wo, H, out_r, H, &ep_out), 0);
    for (int threads = 1; threads <= 2; threads++) {
      omp_set_num_threads(threads);
      memset(out, 0xff, (size_t)M * H * sizeof(float));
      const est_gemm_epilogue ep_f = {.bias = bi, .gelu_out = act, .ld_gelu = F};
      const est_gemm_product in = {Wi, F, F, pre, F, &ep_f}, second = {Wo, H, H, out, H, &ep_out};
      assert_int_equal(est_sgemm_int8_ffn(M, H, A, &in, &second), 0);
      assert_memory_equal(pre, pre_r, (size_t)M * F * sizeof(float));
      assert_memory_equal(act, act_r, (size_t)M * F * sizeof(float));
      assert_memory_equal(out, out_r, (size_t)M * H * sizeof(float));
      memset(out, 0xff, (size_t)M * H * sizeof(float));
      est_ffn_forward(out, act, pre, A, Wi, bi, Wo, bo, M, H, F, EST_PRECISION_INT8);
      assert_memory_equal(out, out_r, (size_t)M * H * sizeof(float));
    }
    omp_set_num_threads(max_threads);
    free(A), free(pre), free(act), free(out), free(pre_r), free(act_r), free(out_r);
  }
  est_frozen_remove(Wi), est_frozen_remove(Wo);
  free(Wi), free(Wo), free(bi), free(bo);
}

/* EST_PRECISION_INT8 runs the int8 GEMM for a layer's forward product, fp32 for the others,
 * and resolves to fp32 without a kernel (EST_KERNEL=noavx512 here simulates a CPU without VNNI). */
static void test_precision_int8_dispatch(void **state) {
  (void)state;
  const int M = 20, N = 48, K = 36;
  float *A = random_matrix((size_t)M * K, 1.0f), *B = random_matrix((size_t)K * N, 1.0f), *bias = random_matrix(N, 1.0f);
  float *C = malloc((size_t)M * N * sizeof(float)), *R = malloc((size_t)M * N * sizeof(float));
  est_gemm_epilogue ep = {.bias = bias};
  if (!est_kernel_int8()) {
    assert_int_equal(est_precision_resolve(EST_PRECISION_INT8), EST_PRECISION_FP32);
    assert_int_not_equal(est_sgemm_int8(CblasNoTrans, M, N, K, A, K, B, N, C, N, &ep), 0);
  } else {
    assert_int_equal(est_precision_resolve(EST_PRECISION_INT8), EST_PRECISION_INT8);
    est_sgemm_parallel_ep(CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, A, K, B, N, 0.0f, C, N, &ep, EST_PRECISION_INT8);
    est_sgemm_int8_ref(CblasNoTrans, M, N, K, A, K, B, N, R, N, &ep);
    assert_memory_equal(C, R, (size_t)M * N * sizeof(float));
  }
  /* a backward-shaped product (Trans A, beta 1) of an int8 model: fp32 */
  memset(C, 0, (size_t)M * N * sizeof(float));
  memset(R, 0, (size_t)M * N * sizeof(float));
  est_sgemm_parallel(CblasTrans, CblasNoTrans, M, N, K, 1.0f, A, M, B, N, 1.0f, C, N, EST_PRECISION_INT8);
  est_sgemm_parallel(CblasTrans, CblasNoTrans, M, N, K, 1.0f, A, M, B, N, 1.0f, R, N, EST_PRECISION_FP32);
  assert_memory_equal(C, R, (size_t)M * N * sizeof(float));
  est_precision p;
  assert_int_equal(est_precision_parse("int8", &p), 0);
  assert_int_equal(p, EST_PRECISION_INT8);
  assert_string_equal(est_precision_name(EST_PRECISION_INT8), "int8");
  assert_int_equal(est_precision_check_training("int8", 1), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "--precision=int8 is for inference"));
  assert_int_equal(est_precision_check_training("int8", 0), EST_OK);
  assert_int_equal(est_precision_check_training("bf16", 1), EST_OK);
  free(A), free(B), free(bias), free(C), free(R);
}

int main(void) {
  test_forced_kernel_or_skip();
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_quantize_round_trips_within_half_a_step),
    cmocka_unit_test(test_packed_weights_hold_the_codes),
    cmocka_unit_test(test_reference_within_the_quantization_bound),
    cmocka_unit_test(test_kernel_equals_reference_bit_for_bit),
    cmocka_unit_test(test_ymm_kernel_equals_reference),
    cmocka_unit_test(test_row_layouts),
    cmocka_unit_test(test_amx_emulated_kernel_equals_reference),
    cmocka_unit_test(test_frozen_weights_packed_once),
    cmocka_unit_test(test_shared_input_equals_separate_products),
    cmocka_unit_test(test_ffn_equals_two_products),
    cmocka_unit_test(test_precision_int8_dispatch),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
