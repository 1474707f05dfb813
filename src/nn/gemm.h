/* Internal: sgemm split across OpenMP threads, OpenBLAS itself kept single-threaded.
 *
 * Two thread pools (OpenBLAS's pthreads + OpenMP) on the same cores spin-wait against each
 * other: each pool's idle threads busy-poll for work while the other pool computes, which
 * on a loaded 2-core machine tripled the CPU time of a BERT step. So est runs OpenBLAS with
 * one thread and parallelises every GEMM itself, by blocks of output rows or columns (each
 * block one single-threaded sgemm); large BERT GEMMs split this way scale as well as
 * OpenBLAS's own threading, and only the OpenMP pool exists. */
#ifndef EST_NN_GEMM_H
#define EST_NN_GEMM_H

#include <cblas.h>

/* Makes OpenBLAS single-threaded if it is not (cheap check; called before every GEMM). */
void est_blas_use_one_thread(void);

/* Row-major C[M,N] = alpha op(A) op(B) + beta C, blocks of C computed by OpenMP threads. */
void est_sgemm_parallel(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha, const float *A,
                        int lda, const float *B, int ldb, float beta, float *C, int ldc);

#endif
