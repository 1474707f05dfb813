/* Internal: scratch buffers per thread, one per slot, grown to the largest size asked for
 * and kept, so a step loop allocates nothing once its largest shape has run. Held through a
 * pthread key with a destructor, not _Thread_local, so a thread that ends (est serve's
 * request threads, a user's own) hands its buffers back. */
#ifndef EST_NN_THREAD_BUF_H
#define EST_NN_THREAD_BUF_H

#include <stddef.h>

typedef enum {
  EST_TBUF_GEMM_B,       /* gemm_f32.c: packed B of the calling thread */
  EST_TBUF_GEMM_A,       /* gemm_f32.c: each worker's A block (Trans A packed, NoTrans A copied) */
  EST_TBUF_ATT_K,        /* attention.c: a pair's K^T, packed */
  EST_TBUF_ATT_V,        /* attention.c: a pair's V, packed */
  EST_TBUF_ATT_STRIP,    /* attention.c: a strip of dropped-out probabilities */
  EST_TBUF_ATT_TILE,     /* attention_tiled.c: a query block's scores, context sums, max, sum */
  EST_TBUF_BF16_A,       /* gemm_amx.c, gemm_bf16.c: A of the calling thread, packed as bf16 */
  EST_TBUF_BF16_B,       /* gemm_amx.c, gemm_bf16.c: B of the calling thread, packed as bf16 */
  EST_TBUF_INT8_A,       /* gemm_int8.c: A of the calling thread, quantized to u8 */
  EST_TBUF_INT8_B,       /* gemm_int8.c: B of the calling thread, quantized and packed (not frozen) */
  EST_TBUF_INT8_NEXT,    /* gemm_int8.c: the FFN's GELU rows quantized for its second GEMM */
  EST_TBUF_COUNT
} est_thread_buf_slot;

/* The calling thread's buffer for slot, at least floats long, 64-byte aligned (its old
 * contents are lost when it grows); NULL when out of memory. */
float *est_thread_buf(est_thread_buf_slot slot, size_t floats);

#endif
