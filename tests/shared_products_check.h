/* One check for every precision's fusion of several products of one A (gemm.h's
 * est_sgemm_forward_shared: BERT's Q, K and V): each C, and a GELU's output, the same bits as
 * the product run alone, on 1 and 2 threads; over one row block (a 16-token request) and
 * several with a short last one, K in one and in two k blocks, column counts that end in a
 * short tile, with a bias, a GELU or neither. Weights that are not read-only are declined
 * with C untouched; and the dispatch (est_matmul_forward_shared, bias only) gives what the
 * separate est_matmul_forward calls give, whatever kernel the process's choice runs.
 * Header-only; include after cmocka.h. */
#ifndef EST_SHARED_PRODUCTS_CHECK_H
#define EST_SHARED_PRODUCTS_CHECK_H

#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/frozen.h"
#include "est/nn.h"
#include "nn/gemm.h"

/* A product run alone (est_sgemm_f32's arguments) and the fusion under test. */
typedef int shared_check_single_fn(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha,
                                   const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc,
                                   const est_gemm_epilogue *ep);
typedef int shared_check_fused_fn(int M, int K, const float *A, int lda, const est_gemm_product *prods, int count);

static inline float *shared_check_matrix(size_t n, uint64_t *rng) { /* values in [-2, 2) */
  float *m = malloc(n * sizeof(float));
  for (size_t i = 0; i < n; i++) {
    *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
    m[i] = (float)((*rng >> 40) * (1.0 / (1 << 22)) - 2.0);
  }
  return m;
}

static inline void check_shared_products(shared_check_single_fn *single, shared_check_fused_fn *fused,
                                         est_precision precision) {
  enum { P = 3 };
  const int Ms[] = {16, 200}, Ks[] = {70, 1100}, Ns[P] = {64, 33, 300};
  const int max_threads = omp_get_max_threads();
  uint64_t rng = 0x243F6A8885A308D3ull;
  for (int mi = 0; mi < 2; mi++)
    for (int ki = 0; ki < 2; ki++) {
      const int M = Ms[mi], K = Ks[ki];
      float *A = shared_check_matrix((size_t)M * K, &rng), *W[P], *bias[P], *C[P], *R[P];
      float *G = malloc((size_t)M * Ns[2] * sizeof(float)), *GR = malloc((size_t)M * Ns[2] * sizeof(float));
      est_gemm_epilogue ep[P];
      est_gemm_product prods[P];
      est_dense_output outs[P];
      for (int j = 0; j < P; j++) {
        W[j] = shared_check_matrix((size_t)K * Ns[j], &rng), bias[j] = shared_check_matrix(Ns[j], &rng);
        C[j] = malloc((size_t)M * Ns[j] * sizeof(float)), R[j] = malloc((size_t)M * Ns[j] * sizeof(float));
        /* product 0: a bias; 1: none; 2: a bias and a GELU */
        ep[j] = (est_gemm_epilogue){.bias = j == 1 ? NULL : bias[j]};
        if (j == 2) ep[j].gelu_out = GR, ep[j].ld_gelu = Ns[j];
        assert_int_equal(single(CblasNoTrans, CblasNoTrans, M, Ns[j], K, 1.0f, A, K, W[j], Ns[j], 0.0f, R[j], Ns[j],
                                &ep[j]),
                         0);
        if (j == 2) ep[j].gelu_out = G;
        prods[j] = (est_gemm_product){W[j], Ns[j], Ns[j], C[j], Ns[j], &ep[j]};
        outs[j] = (est_dense_output){C[j], W[j], bias[j], Ns[j]};
        memset(C[j], 0xff, (size_t)M * Ns[j] * sizeof(float));
      }
      assert_int_not_equal(fused(M, K, A, K, prods, P), 0); /* no weight read-only yet */
      for (int j = 0; j < P; j++)
        for (size_t i = 0; i < (size_t)M * Ns[j]; i++) assert_true(isnan(C[j][i]));
      for (int j = 0; j < P; j++) assert_int_equal(est_frozen_add(W[j], (size_t)K * Ns[j] * sizeof(float)), 0);
      for (int threads = 1; threads <= 2; threads++) {
        omp_set_num_threads(threads);
        for (int j = 0; j < P; j++) memset(C[j], 0xff, (size_t)M * Ns[j] * sizeof(float));
        memset(G, 0xff, (size_t)M * Ns[2] * sizeof(float));
        assert_int_equal(fused(M, K, A, K, prods, P), 0);
        for (int j = 0; j < P; j++) assert_memory_equal(C[j], R[j], (size_t)M * Ns[j] * sizeof(float));
        assert_memory_equal(G, GR, (size_t)M * Ns[2] * sizeof(float));
      }
      omp_set_num_threads(max_threads);
      for (int j = 0; j < P; j++) {
        est_matmul_forward(R[j], A, W[j], bias[j], M, K, Ns[j], 0, precision);
        memset(C[j], 0xff, (size_t)M * Ns[j] * sizeof(float));
      }
      est_matmul_forward_shared(A, M, K, outs, P, precision);
      for (int j = 0; j < P; j++) assert_memory_equal(C[j], R[j], (size_t)M * Ns[j] * sizeof(float));
      for (int j = 0; j < P; j++) est_frozen_remove(W[j]), free(W[j]), free(bias[j]), free(C[j]), free(R[j]);
      assert_int_equal(est_frozen_derived_bytes(), 0);
      free(A), free(G), free(GR);
    }
}

#endif
