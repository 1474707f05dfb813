/* est_sgemm_int8 (nn/gemm_int8.h): quantizes A's rows, takes B's packed form (kept once for a
 * frozen weight, core/frozen.h, else packed now), and hands blocks of C to the kernel
 * est_kernel_amx_int8 / est_kernel_vnni512 / est_kernel_avxvnni (nn/kernel_choice.h) allow,
 * in that order, over the OpenMP team.
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

/* Rows of C per block at most (its u8 rows stay in L2 while the block's column tiles pass):
 * 16 VNNI row tiles, 12 AMX ones; blocks per thread, handed out dynamically, as in gemm.c. */
enum { MC = 16 * EST_INT8_MR, BLOCKS_PER_THREAD = 4 };
/* the frozen copy's layout tag (core/frozen.h): "INT8", panel-major words */
#define INT8_LAYOUT 0x494E5438u

static void make_packed(void *copy, void *ctx) {
  const est_weight_src *s = ctx;
  est_int8_weights_pack(copy, s->B, s->ldb, s->tb, s->K, s->N);
}

/* B's kept packed form when B is read-only (core/frozen.h: made on first use), else NULL. */
static const void *kept_weights(const est_weight_src *s) {
  size_t bytes = est_int8_weights_bytes(s->K, s->N);
  uint64_t key[4];
  est_weight_key(s, INT8_LAYOUT, key);
  return est_frozen_derived(s->B, est_weight_extent(s), key, bytes, make_packed, (void *)s);
}

/* B's packed form: the frozen copy, or packed into the calling thread's scratch; NULL when
 * out of memory. */
static const void *packed_weights(const est_weight_src *s) {
  size_t bytes = est_int8_weights_bytes(s->K, s->N);
  const void *kept = kept_weights(s);
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
  const est_gemm_product p = {B, ldb, N, C, ldc, ep};
  return est_sgemm_int8_shared(tb, M, K, A, lda, &p, 1);
}

/* How one product's columns are cut into blocks (the same for every row block). */
typedef struct {
  est_int8_weights w;
  int col_blocks, tiles_per_block;
} product_plan;

/* A's rows quantized (u8 words in the layout of the kernel that reads them, est_int8_a_word,
 * then the Mp scales): by the GEMM itself, or handed over by the one that wrote A
 * (est_sgemm_int8_ffn, whose two GEMMs run the same kernel). */
typedef struct {
  uint8_t *qa;
  float *sa;
} quantized_rows;

static int run_products(CBLAS_TRANSPOSE tb, int M, int K, const float *A, int lda, const est_gemm_product *prods,
                        int count, const quantized_rows *given, const quantized_rows *ahead, int *ahead_done);

int est_sgemm_int8_shared(CBLAS_TRANSPOSE tb, int M, int K, const float *A, int lda, const est_gemm_product *prods,
                          int count) {
  return run_products(tb, M, K, A, lda, prods, count, NULL, NULL, NULL);
}

/* Words of M rows of K quantized, in either layout (rows and groups padded for both). */
static size_t quantized_words(int M, int K) {
  return (size_t)est_int8_padded_rows(M) * (size_t)est_int8_padded_groups((K + 3) / 4);
}

/* Bytes (as floats) of M rows of K quantized: the u8 words, then the scales. */
static size_t quantized_floats(int M, int K) { return quantized_words(M, K) + (size_t)est_int8_padded_rows(M); }

static quantized_rows quantized_view(float *scratch, int M, int K) {
  return (quantized_rows){(uint8_t *)scratch, scratch + quantized_words(M, K)};
}

int est_sgemm_int8_ffn(int M, int K, const float *A, const est_gemm_product *in, const est_gemm_product *out) {
  const int F = in->N;
  if (!in->ep || !in->ep->gelu_out) return -1;
  float *scratch = M > 0 && F > 0 ? est_thread_buf(EST_TBUF_INT8_NEXT, quantized_floats(M, F)) : NULL;
  const quantized_rows ahead = scratch ? quantized_view(scratch, M, F) : (quantized_rows){0};
  int done = 0;
  if (run_products(CblasNoTrans, M, K, A, K, in, 1, NULL, scratch ? &ahead : NULL, &done) != 0) return -1;
  return run_products(CblasNoTrans, M, F, in->ep->gelu_out, in->ep->ld_gelu, out, 1, done ? &ahead : NULL, NULL,
                      NULL);
}

/* The block kernel the choice names (nn/kernel_choice.h), first the one it prefers, and the
 * layout of the M rows of activations it reads (the same for every product of M rows, so
 * that est_sgemm_int8_ffn's hand-over matches); NULL when none may run. The AVX-VNNI tile,
 * 4 rows, reads 12-row tiles in thirds. */
static est_int8_block_fn *chosen_block(int M, est_int8_a_layout *layout) {
  *layout = EST_INT8_TILES16;
  if (est_kernel_get() == EST_KERNEL_AMXEMU) return est_int8_block_amx_emulated;
  if (est_kernel_amx_int8()) return est_int8_block_amx;
  *layout = est_int8_rows_layout(M);
  if (est_kernel_vnni512()) return est_int8_block_vnni512;
  *layout = EST_INT8_MR;
  if (est_kernel_avxvnni()) return est_int8_block_avxvnni;
  return NULL;
}

/* The products of one A (count of them): A's rows quantized by the team, or taken from given;
 * with ahead (one product with a GELU, each of whose items spans whole rows), the GELU's rows
 * also quantized into ahead right after each is written, and *ahead_done set. */
static int run_products(CBLAS_TRANSPOSE tb, int M, int K, const float *A, int lda, const est_gemm_product *prods,
                        int count, const quantized_rows *given, const quantized_rows *ahead, int *ahead_done) {
  est_int8_a_layout layout;
  est_int8_block_fn *block = chosen_block(M, &layout);
  /* the AVX-512 quantization wherever AVX512-VNNI may run (with the tiles too), same bits */
  void (*quantize_rows)(est_int8_a_layout, uint8_t *, float *, const float *, int, int, int, int, int, int) =
      est_kernel_vnni512() ? est_int8_quantize_rows_avx512 : est_int8_quantize_rows;
  const int tile_rows = est_int8_layout_rows(layout);
  if (count <= 0 || count > EST_GEMM_MAX_SHARED) return -1;
  int bad = M <= 0 || K <= 0;
  for (int j = 0; j < count; j++) bad |= prods[j].N <= 0 || (prods[j].ep && prods[j].ep->gelu_pre);
  if (bad) return -1;
  if (est_kernel_get() == EST_KERNEL_INT8REF) {
    for (int j = 0; j < count; j++)
      est_sgemm_int8_ref(tb, M, prods[j].N, K, A, lda, prods[j].B, prods[j].ldb, prods[j].C, prods[j].ldc,
                         prods[j].ep);
    return 0;
  }
  if (!block) return -1;
  product_plan plan[EST_GEMM_MAX_SHARED];
  for (int j = 0; j < count; j++) {
    const est_weight_src src = {prods[j].B, prods[j].ldb, K, prods[j].N, tb};
    /* several weights need their kept copies (the per-call scratch holds one); without
     * them the products run one by one (on failure the caller runs every one again) */
    const void *packed = count > 1 ? kept_weights(&src) : packed_weights(&src);
    if (!packed && count == 1) return -1;
    if (!packed) {
      for (int i = 0; i < count; i++)
        if (est_sgemm_int8_shared(tb, M, K, A, lda, prods + i, 1) != 0) return -1;
      return 0;
    }
    plan[j].w = est_int8_weights_view(packed);
  }
  /* rows quantized up to the kernel's whole row tiles (the buffers hold est_int8_padded_rows) */
  int groups = (K + 3) / 4, Mp = (M + tile_rows - 1) / tile_rows * tile_rows;
  quantized_rows mine = {0};
  if (!given) {
    float *scratch = est_thread_buf(EST_TBUF_INT8_A, quantized_floats(M, K));
    if (!scratch) return -1;
    mine = quantized_view(scratch, M, K);
  }
  const uint8_t *qa = given ? given->qa : mine.qa;
  const float *sa = given ? given->sa : mine.sa;

  int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  /* Row blocks of whole row tiles (the layout's: up to 12 rows, or 16), as many as a multiple of the
   * team and as even as the tiles allow: blocks of 16 tiles and a short last one (4096 rows:
   * 21 of 192 and one of 64) left one thread a block behind the other at every GEMM's end.
   * The columns are split as well when there are too few row blocks (a short batch). */
  const int row_tiles = Mp / tile_rows;
  int row_blocks = (M + MC - 1) / MC;
  if (threads > 1 && row_blocks > 1) row_blocks = (row_blocks + threads - 1) / threads * threads;
  if (row_blocks > row_tiles) row_blocks = row_tiles;
  int items_per_row_block = 0;
  for (int j = 0; j < count; j++) {
    int tiles = plan[j].w.Np / EST_INT8_NR;
    int col_blocks = (BLOCKS_PER_THREAD * threads + row_blocks * count - 1) / (row_blocks * count);
    if (threads == 1 || col_blocks < 1) col_blocks = 1;
    if (col_blocks > tiles) col_blocks = tiles;
    plan[j].tiles_per_block = (tiles + col_blocks - 1) / col_blocks;
    plan[j].col_blocks = (tiles + plan[j].tiles_per_block - 1) / plan[j].tiles_per_block;
    items_per_row_block += plan[j].col_blocks;
  }
  /* the next GEMM's input quantized here: one product, a GELU, each item whole rows */
  const est_gemm_epilogue *ep0 = prods[0].ep;
  if (ahead && !(count == 1 && ep0 && ep0->gelu_out && plan[0].col_blocks == 1)) ahead = NULL;
  const int next_groups = (prods[0].N + 3) / 4;
  if (ahead_done) *ahead_done = ahead != NULL;
#pragma omp parallel num_threads(threads)
  {
    if (!given) {
#pragma omp for schedule(static)
      for (int m = 0; m < Mp; m++) quantize_rows(layout, mine.qa, mine.sa, A, lda, M, K, groups, m, m + 1);
    }
    /* items: row block outer, so its u8 rows stay in L2 through every product's columns */
#pragma omp for schedule(dynamic, 1)
    for (int b = 0; b < row_blocks * items_per_row_block; b++) {
      const int rb = b / items_per_row_block;
      int item = b % items_per_row_block, j = 0;
      while (item >= plan[j].col_blocks) item -= plan[j].col_blocks, j++;
      const est_gemm_product *p = prods + j;
      int m0 = (int)((long)row_tiles * rb / row_blocks) * tile_rows;
      int m1 = (int)((long)row_tiles * (rb + 1) / row_blocks) * tile_rows;
      if (m1 > M) m1 = M;
      int n0 = item * plan[j].tiles_per_block * EST_INT8_NR, n1 = n0 + plan[j].tiles_per_block * EST_INT8_NR;
      if (n1 > p->N) n1 = p->N;
      block(layout, &plan[j].w, qa, sa, p->ep ? p->ep->bias : NULL, p->C, p->ldc, m0, m1, n0, n1);
      if (p->ep && p->ep->gelu_out)
        for (int m = m0; m < m1; m++) {
          est_gelu_row(p->ep->gelu_out + (size_t)m * p->ep->ld_gelu + n0, p->C + (size_t)m * p->ldc + n0, n1 - n0);
          /* the row just written, from L1, rather than the next GEMM reading all of it back;
           * the last block also pads the tile rows up to Mp */
          if (ahead) {
            const int pad_to = m + 1 == M ? Mp : m + 1;
            quantize_rows(layout, ahead->qa, ahead->sa, p->ep->gelu_out, p->ep->ld_gelu, M, p->N, next_groups, m,
                          pad_to);
          }
        }
    }
  }
  return 0;
}
