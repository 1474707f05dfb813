/* Internal: the int8 GEMM dispatch (gemm_int8.c) for inference: A's rows quantized, B's
 * packed form taken (kept once for a frozen weight, core/frozen.h), blocks of C handed to
 * the int8 kernel the choice allows (nn/gemm_kernels.h). The quantization, its definition
 * and its layouts: nn/quant_int8.h. */
#ifndef EST_NN_GEMM_INT8_H
#define EST_NN_GEMM_INT8_H

#include <cblas.h>
#include <stdint.h>

#include "nn/gemm.h"
#include "nn/quant_int8.h"

/* Makes the packed form of codes/scale THE int8 form of the frozen NoTrans weight B [K,N]
 * (ldb = N) that est_sgemm_int8 will look up (core/frozen.h), so that B's fp32 values are never
 * read. Returns 0, or -1 when B is not inside a read-only range, already has its copy, or
 * memory is short. */
int est_int8_weights_adopt(const float *B, int K, int N, const int8_t *codes, const float *scale);

/* C[M,N] = dequantized int8 product of A [M,K] (NoTrans, lda apart) and op(B), with ep's bias
 * and gelu_out (ep may be NULL; gelu_pre is not supported). Threads as est_sgemm_parallel.
 * Runs the kernel est_kernel_int8() names (nn/kernel_choice.h); a frozen B's packed form is
 * made once (core/frozen.h). Returns 0 when done, non-zero when it did nothing (no int8
 * kernel, M, N or K not positive, no memory): the caller runs fp32. */
int est_sgemm_int8(CBLAS_TRANSPOSE tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb, float *C,
                   int ldc, const est_gemm_epilogue *ep);
/* Several products of one A (BERT's Q, K and V projections of x): A's rows quantized once
 * (a pass over A each, ~6% of an int8 Base step for all of them), and the products' blocks
 * handed out in one parallel region, each row block through every product before the next.
 * The same bits as est_sgemm_int8 per product (C from op(B), nn/gemm_kernels.h's est_gemm_product).
 * count <= EST_GEMM_MAX_SHARED; the weights must be read-only (kept packed) for the shared
 * pass, else they run one by one. Returns as est_sgemm_int8 (non-zero: nothing done). */
int est_sgemm_int8_shared(CBLAS_TRANSPOSE tb, int M, int K, const float *A, int lda, const est_gemm_product *prods,
                          int count);
/* BERT's feed-forward block in int8, both GEMMs NoTrans: in->C = A[M,K] in->B + bias with
 * act = in->ep->gelu_out = GELU(in->C) (F = in->N wide), then out->C = act out->B + bias: the
 * bits of est_sgemm_int8 twice. Where each work item spans whole rows (the batch is long
 * enough), the first GEMM quantizes act's rows for the second as it writes them, from L1,
 * instead of the second reading all of act back (the FFN's 3072-wide input was over half of
 * all quantization in a Base step). Returns non-zero when it did nothing usable (no GELU
 * output, no kernel, no memory): the caller runs both products its own way. */
int est_sgemm_int8_ffn(int M, int K, const float *A, const est_gemm_product *in, const est_gemm_product *out);

#endif
