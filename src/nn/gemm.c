/* sgemm over OpenMP blocks; see gemm.h for why OpenBLAS stays single-threaded. */
#include "nn/gemm.h"

#include <omp.h>

#include "est/threads.h"

void est_blas_use_one_thread(void) {
  if (est_blas_get_num_threads() != 1) est_blas_set_num_threads(1);
}

/* Below this many multiply-adds a GEMM is not worth a parallel region. */
enum { PARALLEL_MIN_FLOPS = 1 << 20, ALIGN = 16 };

void est_sgemm_parallel(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha, const float *A,
                        int lda, const float *B, int ldb, float beta, float *C, int ldc) {
  est_blas_use_one_thread();
  int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  if (threads <= 1 || (double)M * N * K < PARALLEL_MIN_FLOPS) {
    cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  /* Split the longer side of C into one block per thread (multiples of 16 = one zmm). */
  int split_m = M >= N;
  int len = split_m ? M : N;
  int chunk = (len + threads - 1) / threads;
  chunk = (chunk + ALIGN - 1) / ALIGN * ALIGN;
  int nblocks = (len + chunk - 1) / chunk;
#pragma omp parallel for schedule(static) num_threads(nblocks < threads ? nblocks : threads)
  for (int blk = 0; blk < nblocks; blk++) {
    int lo = blk * chunk, n = len - lo < chunk ? len - lo : chunk;
    if (split_m) {
      /* rows lo.. of C: rows of A (NoTrans) or columns of A (Trans, A stored [K,M]) */
      const float *a = ta == CblasNoTrans ? A + (size_t)lo * lda : A + lo;
      cblas_sgemm(CblasRowMajor, ta, tb, n, N, K, alpha, a, lda, B, ldb, beta, C + (size_t)lo * ldc, ldc);
    } else {
      /* columns lo.. of C: columns of B (NoTrans) or rows of B (Trans, B stored [N,K]) */
      const float *b = tb == CblasNoTrans ? B + lo : B + (size_t)lo * ldb;
      cblas_sgemm(CblasRowMajor, ta, tb, M, n, K, alpha, A, lda, b, ldb, beta, C + lo, ldc);
    }
  }
}
