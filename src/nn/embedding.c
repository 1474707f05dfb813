/* BERT's embedding sum (modeling.embedding_lookup + embedding_postprocessor, before the
 * layer norm): word gather + one-hot token type + position rows. */
#include "est/nn.h"

est_status est_embeddings_forward(float *out, const int32_t *input_ids, const int32_t *token_type_ids,
                                  const float *word, const float *type, const float *pos, int B, int S,
                                  int H, int V, int T) {
  /* Validate every id first, so a bad batch leaves `out` untouched and names the culprit. */
  for (int b = 0; b < B; b++)
    for (int s = 0; s < S; s++) {
      int32_t id = input_ids[(size_t)b * S + s];
      if (id < 0 || id >= V)
        return est_error(EST_ERR_INVALID_ARGUMENT,
                         "input_ids[%d][%d] = %d is outside the vocabulary [0, %d)", b, s, (int)id, V);
    }
#pragma omp parallel for schedule(static)
  for (int bs = 0; bs < B * S; bs++) {
    int s = bs % S;
    const float *w = word + (size_t)input_ids[bs] * H, *p = pos + (size_t)s * H;
    int32_t t = token_type_ids ? token_type_ids[bs] : 0;
    /* one_hot(t, T) . type is a zero row when t is outside [0, T) */
    const float *ty = (t >= 0 && t < T) ? type + (size_t)t * H : NULL;
    float *o = out + (size_t)bs * H;
    if (ty)
#pragma omp simd
      for (int c = 0; c < H; c++) o[c] = w[c] + ty[c] + p[c];
    else
#pragma omp simd
      for (int c = 0; c < H; c++) o[c] = w[c] + p[c];
  }
  return EST_OK;
}

void est_embeddings_backward(float *dword, float *dtype, float *dpos, const float *dout,
                             const int32_t *input_ids, const int32_t *token_type_ids, int B, int S, int H,
                             int V, int T) {
  /* Scatter-add: the same id may appear many times in a batch, so threads split the
   * hidden dimension (each owns a column block of every table) rather than the tokens.
   * No two threads touch one element, and every element sums tokens in order b, s. */
  enum { BLOCK = 64 };
  int nblocks = (H + BLOCK - 1) / BLOCK;
#pragma omp parallel for schedule(static)
  for (int blk = 0; blk < nblocks; blk++) {
    int c0 = blk * BLOCK, c1 = c0 + BLOCK < H ? c0 + BLOCK : H;
    for (int bs = 0; bs < B * S; bs++) {
      const float *d = dout + (size_t)bs * H;
      int32_t id = input_ids[bs];
      if (dword && id >= 0 && id < V) {
        float *g = dword + (size_t)id * H;
#pragma omp simd
        for (int c = c0; c < c1; c++) g[c] += d[c];
      }
      int32_t t = token_type_ids ? token_type_ids[bs] : 0;
      if (dtype && t >= 0 && t < T) {
        float *g = dtype + (size_t)t * H;
#pragma omp simd
        for (int c = c0; c < c1; c++) g[c] += d[c];
      }
      if (dpos) {
        float *g = dpos + (size_t)(bs % S) * H;
#pragma omp simd
        for (int c = c0; c < c1; c++) g[c] += d[c];
      }
    }
  }
  (void)V;
}
