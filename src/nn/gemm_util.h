/* Internal: two small pieces every hand-written GEMM kernel (gemm_f32.c, gemm_bf16.c,
 * gemm_amx.c) needs, kept once. */
#ifndef EST_NN_GEMM_UTIL_H
#define EST_NN_GEMM_UTIL_H

#include <immintrin.h>
#include <omp.h>

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

#endif
