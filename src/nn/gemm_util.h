/* Internal: small pieces every hand-written GEMM kernel (gemm_f32.c, gemm_bf16.c,
 * gemm_amx.c) needs, kept once. */
#ifndef EST_NN_GEMM_UTIL_H
#define EST_NN_GEMM_UTIL_H

#include <cblas.h>
#include <immintrin.h>
#include <omp.h>
#include <stddef.h>
#include <stdint.h>

/* The mask of the first n of 16 lanes (n <= 0: none; n >= 16: all): a row's tail. */
static inline __mmask16 est_lanes16(int n) {
  return n >= 16 ? 0xFFFF : n <= 0 ? 0 : (__mmask16)((1u << n) - 1);
}

/* Splits [0, n) evenly over the OpenMP team; the calling thread's share [*from, *to). */
static inline void est_team_share(int n, int *from, int *to) {
  int t = omp_get_thread_num(), nt = omp_get_num_threads();
  *from = (int)((long)n * t / nt);
  *to = (int)((long)n * (t + 1) / nt);
}

/* A weight operand op(B) [K, N] (B row-major, ldb apart), as a kernel names its kept packed
 * form (core/frozen.h): the bytes of B it reads, and the key of one layout of it. */
typedef struct {
  const float *B;
  int ldb, K, N;
  CBLAS_TRANSPOSE tb;
} est_weight_src;
static inline size_t est_weight_extent(const est_weight_src *s) {
  return s->tb == CblasTrans ? ((size_t)(s->N - 1) * s->ldb + s->K) * sizeof(float)
                             : ((size_t)(s->K - 1) * s->ldb + s->N) * sizeof(float);
}
static inline void est_weight_key(const est_weight_src *s, uint64_t layout, uint64_t key[4]) {
  key[0] = layout; /* the kernel's tag, e.g. "F32P" */
  key[1] = (uint64_t)s->ldb, key[2] = (uint64_t)s->tb, key[3] = (uint64_t)s->K << 32 | (uint32_t)s->N;
}

/* The row stride, in 4-byte elements, for a packed copy of rows n elements long whose
 * lines fall on distinct L1 sets: n rounded up to whole 64-byte lines, and an odd number of
 * them. A kernel reads its tile's 12 rows at the same k; with 64 sets of 64-byte lines
 * (Zen 4's 32 KiB 8-way L1, Emerald Rapids' 48 KiB 12-way alike) rows 4 KiB apart, or any
 * multiple (BERT's FFN output product reads rows of 3072 floats; Mini's 1024, Small's
 * 2048), put all 12 lines in one set, which holds 8: they evict each other at every k.
 * An odd line count between rows spreads any 64 consecutive rows over the 64 sets. */
static inline int est_unaliased_stride(int n) { return ((n + 15) / 16 | 1) * 16; }

/* Asks for the two 64-byte lines of 32 floats at each of a 12-row tile's first `rows` rows
 * (ld floats apart). A kernel writes its C tile (and an epilogue's other matrices) only
 * after its k loop: asked for when it starts, their misses overlap the arithmetic instead
 * of stalling the stores (~10% on 768-wide C, fp32; 5-12% on Base's bf16 products). */
static inline __attribute__((always_inline)) void est_prefetch_tile_rows(const float *p, long ld, int rows) {
#pragma GCC unroll 12
  for (int i = 0; i < 12; i++)
    if (i < rows) {
      _mm_prefetch((const char *)(p + (size_t)i * ld), _MM_HINT_T0);
      _mm_prefetch((const char *)(p + (size_t)i * ld + 16), _MM_HINT_T0);
    }
}

/* `call(r); return;` with r the constant 1..12 equal to rows (12 for any larger): a 12-row
 * tile kernel body, always_inline, specialized for each row count, so that a short last
 * tile computes only its rows (the compiler drops the other accumulators). */
#define EST_SWITCH_ROWS_12(rows, call) \
  switch (rows) {                      \
  case 1: call(1); return;             \
  case 2: call(2); return;             \
  case 3: call(3); return;             \
  case 4: call(4); return;             \
  case 5: call(5); return;             \
  case 6: call(6); return;             \
  case 7: call(7); return;             \
  case 8: call(8); return;             \
  case 9: call(9); return;             \
  case 10: call(10); return;           \
  case 11: call(11); return;           \
  default: call(12); return;           \
  }

#endif
