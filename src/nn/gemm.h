/* Internal: the GEMM dispatch (gemm.c): a product in the precision asked, on the kernel
 * (nn/gemm_kernels.h) the choice and the shape pick, split across OpenMP threads, OpenBLAS
 * itself kept single-threaded.
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
#include "nn/gemm_kernels.h"

/* Makes OpenBLAS single-threaded if it is not (cheap check; called before every GEMM). */
void est_blas_use_one_thread(void);

/* Row-major C[M,N] = alpha op(A) op(B) + beta C, blocks of C computed by OpenMP threads.
 * With precision EST_PRECISION_BF16 (on a CPU with AVX512-BF16; elsewhere it runs fp32)
 * it runs est_sgemm_bf16 instead; in fp32 it runs est_sgemm_f32 or OpenBLAS, chosen per
 * shape (gemm.c says which and why) unless a kernel is forced (nn/kernel_choice.h). */
void est_sgemm_parallel(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha, const float *A,
                        int lda, const float *B, int ldb, float beta, float *C, int ldc, est_precision precision);

/* Fusions of several forward products (NoTrans A and B, alpha 1, beta 0), where a precision
 * has them; non-zero when it has none (or it did nothing usable), and the caller then runs
 * each product through est_sgemm_parallel_ep. Like est_sgemm_parallel_ep, the one place a
 * precision picks them (gemm.c; a switch without default).
 *   shared: count <= EST_GEMM_MAX_SHARED products of one A [M,K] (BERT's Q, K, V) in one
 *           team: int8 quantizes A once (est_sgemm_int8_shared), VDPBF16PS converts it once
 *           (est_sgemm_bf16_shared), fp32 hands out every product's items together
 *           (est_sgemm_f32_shared); the last two for inference weights only
 *   ffn:    in = A [M,K] Wi with a GELU (in.ep->gelu_out, F = in.N wide), then out = that
 *           GELU times Wo; int8 quantizes the GELU's rows for the second as it writes them
 *           (est_sgemm_int8_ffn) */
int est_sgemm_forward_shared(int M, int K, const float *A, const est_gemm_product *prods, int count,
                             est_precision precision);
int est_sgemm_forward_ffn(int M, int K, const float *A, const est_gemm_product *in, const est_gemm_product *out,
                          est_precision precision);

/* est_sgemm_parallel with an epilogue (ep may be NULL). */
void est_sgemm_parallel_ep(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha,
                           const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc,
                           const est_gemm_epilogue *ep, est_precision precision);

#endif
