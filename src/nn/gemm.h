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
#include <stdint.h>

#include "est/precision.h"

/* Makes OpenBLAS single-threaded if it is not (cheap check; called before every GEMM). */
void est_blas_use_one_thread(void);

/* Row-major C[M,N] = alpha op(A) op(B) + beta C, blocks of C computed by OpenMP threads.
 * With est_get_precision() == EST_PRECISION_BF16 (set only where the CPU has AVX512-BF16)
 * it runs est_sgemm_bf16 instead. */
void est_sgemm_parallel(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha, const float *A,
                        int lda, const float *B, int ldb, float beta, float *C, int ldc);

/* bf16 mixed precision: op(A) and op(B) rounded to bfloat16 (8 bits of precision),
 * products summed in fp32, C stays fp32 — what AVX512-BF16's VDPBF16PS computes, at twice
 * the FLOP rate of fp32 FMAs. Same arguments as cblas_sgemm (row-major). The fast one needs
 * est_cpu_has_avx512_bf16(); the reference runs anywhere and sums in double, so the only
 * error it has is the inputs' rounding: |ref - exact| <= 2 * 2^-8 * sum_k |a_mk| |b_kn|. */
void est_sgemm_bf16(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha, const float *A, int lda,
                    const float *B, int ldb, float beta, float *C, int ldc);
void est_sgemm_bf16_ref(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha, const float *A,
                        int lda, const float *B, int ldb, float beta, float *C, int ldc);
int est_cpu_has_avx512_bf16(void);

/* float <-> bfloat16 bits, round to nearest even (NaN stays NaN). */
uint16_t est_bf16_from_float(float x);
float est_bf16_to_float(uint16_t h);
float est_bf16_round(float x); /* to bf16 and back */

#endif
