/* est_sgemm_int8 (nn/gemm_int8.h): quantizes A's rows, takes B's packed form (kept once for a
 * frozen weight, core/frozen.h, else packed now), and hands blocks of C to the kernel
 * est_kernel_vnni512 / est_kernel_avxvnni (nn/kernel_choice.h) allow, over the OpenMP team.
 * The integer sums are exact and each element of C is dequantized by the same operations
 * whichever block or thread computes it, so C has the same bits for any kernel and thread
 * count. */
#include <omp.h>

#include "core/alloc.h"
#include "core/frozen.h"
#include "nn/gelu_avx512.h" /* est_gelu_row */
#include "nn/gemm_int8.h"
#include "nn/gemm_util.h"
#include "nn/kernel_choice.h"
#include "nn/thread_buf.h"

/* Rows of C per block (its u8 rows stay in L2 while the block's column tiles pass); blocks
 * per thread, handed out dynamically, as in gemm.c. */
enum { MC = 16 * EST_INT8_MR, BLOCKS_PER_THREAD = 4 };
/* the frozen copy's layout tag (core/frozen.h): "INT8", panel-major words */
#define INT8_LAYOUT 0x494E5438u

static void make_packed(void *copy, void *ctx) {
  const est_weight_src *s = ctx;
  est_int8_weights_pack(copy, s->B, s->ldb, s->tb, s->K, s->N);
}

/* B's packed form: the frozen copy, or packed into the calling thread's scratch; NULL when
 * out of memory. */
static const void *packed_weights(const est_weight_src *s) {
  size_t bytes = est_int8_weights_bytes(s->K, s->N);
  uint64_t key[4];
  est_weight_key(s, INT8_LAYOUT, key);
  const void *kept = est_frozen_derived(s->B, est_weight_extent(s), key, bytes, make_packed, (void *)s);
  if (kept) return kept;
  void *mem = est_thread_buf(EST_TBUF_INT8_B, (bytes + 3) / 4);
  if (mem) make_packed(mem, (void *)s);
  return mem;
}

int est_int8_weights_adopt(const float *B, int K, int N, const int8_t *codes, const float *scale) {
  const est_weight_src src = {B, N, K, N, CblasNoTrans};
  size_t bytes = est_int8_weights_bytes(K, N);
  uint64_t key[4];
  est_weight_key(&src, INT8_LAYOUT, key);
  void *mem = est_alloc(bytes);
  if (!mem) return -1;
  est_int8_weights_pack_codes(mem, codes, scale, K, N);
  if (est_frozen_adopt(B, est_weight_extent(&src), key, mem, bytes) == 0) return 0;
  est_free(mem);
  return -1;
}

int est_sgemm_int8(CBLAS_TRANSPOSE tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb, float *C,
                   int ldc, const est_gemm_epilogue *ep) {
  est_int8_block_fn *block = est_kernel_vnni512() ? est_int8_block_vnni512
                             : est_kernel_avxvnni() ? est_int8_block_avxvnni
                                                    : NULL;
  void (*quantize_rows)(uint8_t *, float *, const float *, int, int, int, int, int, int) =
      block == est_int8_block_vnni512 ? est_int8_quantize_rows_avx512 : est_int8_quantize_rows;
  if (est_kernel_get() == EST_KERNEL_INT8REF && M > 0 && N > 0 && K > 0 && !(ep && ep->gelu_pre)) {
    est_sgemm_int8_ref(tb, M, N, K, A, lda, B, ldb, C, ldc, ep);
    return 0;
  }
  if (!block || M <= 0 || N <= 0 || K <= 0 || (ep && ep->gelu_pre)) return -1;
  const est_weight_src src = {B, ldb, K, N, tb};
  const void *packed = packed_weights(&src);
  int groups = (K + 3) / 4, Mp = (M + EST_INT8_MR - 1) / EST_INT8_MR * EST_INT8_MR;
  /* the u8 rows (Mp rows of 4 groups bytes = groups floats' worth) and their scales */
  float *scratch = packed ? est_thread_buf(EST_TBUF_INT8_A, (size_t)Mp * groups + Mp) : NULL;
  if (!scratch) return -1;
  const est_int8_weights w = est_int8_weights_view(packed);
  uint8_t *qa = (uint8_t *)scratch;
  float *sa = scratch + (size_t)Mp * groups;
  const float *bias = ep ? ep->bias : NULL;
  float *gelu_out = ep ? ep->gelu_out : NULL;

  int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  /* row blocks, and the columns split as well when there are too few of them (a short batch) */
  int row_blocks = (M + MC - 1) / MC, tiles = w.Np / EST_INT8_NR;
  int col_blocks = (BLOCKS_PER_THREAD * threads + row_blocks - 1) / row_blocks;
  if (threads == 1 || col_blocks < 1) col_blocks = 1;
  if (col_blocks > tiles) col_blocks = tiles;
  int tiles_per_block = (tiles + col_blocks - 1) / col_blocks;
  col_blocks = (tiles + tiles_per_block - 1) / tiles_per_block;
#pragma omp parallel num_threads(threads)
  {
#pragma omp for schedule(static)
    for (int m = 0; m < Mp; m++) quantize_rows(qa, sa, A, lda, M, K, groups, m, m + 1);
#pragma omp for schedule(dynamic, 1)
    for (int b = 0; b < row_blocks * col_blocks; b++) {
      int m0 = b / col_blocks * MC, m1 = m0 + MC < M ? m0 + MC : M;
      int n0 = b % col_blocks * tiles_per_block * EST_INT8_NR, n1 = n0 + tiles_per_block * EST_INT8_NR;
      if (n1 > N) n1 = N;
      block(&w, qa, sa, bias, C, ldc, m0, m1, n0, n1);
      if (gelu_out)
        for (int m = m0; m < m1; m++)
          est_gelu_row(gelu_out + (size_t)m * ep->ld_gelu + n0, C + (size_t)m * ldc + n0, n1 - n0);
    }
  }
  return 0;
}
