/* BERT's embedding sum (modeling.embedding_lookup + embedding_postprocessor, before the
 * layer norm): word gather + one-hot token type + position rows; and the options of the
 * other encoders (est/bert_encoder.h): position ids after the padding (RoBERTa), no token
 * types (DistilBERT), a fixed sinusoidal position table (DistilBERT). */
#include <math.h>

#include "est/nn.h"

est_status est_embeddings_forward_ex(float *out, const int32_t *input_ids, const int32_t *token_type_ids,
                                     const int32_t *position_ids, const float *word, const float *type,
                                     const float *pos, int B, int S, int H, int V, int T, int P) {
  /* Validate every id first, so a bad batch leaves `out` untouched and names the culprit. */
  for (int b = 0; b < B; b++)
    for (int s = 0; s < S; s++) {
      int32_t id = input_ids[(size_t)b * S + s];
      if (id < 0 || id >= V)
        return est_error(EST_ERR_INVALID_ARGUMENT,
                         "input_ids[%d][%d] = %d is outside the vocabulary [0, %d)", b, s, (int)id, V);
      int32_t p = position_ids ? position_ids[(size_t)b * S + s] : s;
      if (pos && (p < 0 || p >= P))
        return est_error(EST_ERR_INVALID_ARGUMENT,
                         "position_ids[%d][%d] = %d is outside the position table [0, %d) "
                         "(max_position_embeddings)", b, s, (int)p, P);
    }
#pragma omp parallel for schedule(static)
  for (int bs = 0; bs < B * S; bs++) {
    int s = bs % S;
    const float *w = word + (size_t)input_ids[bs] * H;
    const float *p = pos ? pos + (size_t)(position_ids ? position_ids[bs] : s) * H : NULL;
    int32_t t = token_type_ids ? token_type_ids[bs] : 0;
    /* one_hot(t, T) . type is a zero row when t is outside [0, T) */
    const float *ty = (type && t >= 0 && t < T) ? type + (size_t)t * H : NULL;
    float *o = out + (size_t)bs * H;
    if (ty && p)
#pragma omp simd
      for (int c = 0; c < H; c++) o[c] = w[c] + ty[c] + p[c];
    else if (p)
#pragma omp simd
      for (int c = 0; c < H; c++) o[c] = w[c] + p[c];
    else if (ty)
#pragma omp simd
      for (int c = 0; c < H; c++) o[c] = w[c] + ty[c];
    else
#pragma omp simd
      for (int c = 0; c < H; c++) o[c] = w[c];
  }
  return EST_OK;
}

est_status est_embeddings_forward(float *out, const int32_t *input_ids, const int32_t *token_type_ids,
                                  const float *word, const float *type, const float *pos, int B, int S,
                                  int H, int V, int T) {
  /* BERT's rows 0..S-1 of the table, always inside it (the reservation checks S) */
  return est_embeddings_forward_ex(out, input_ids, token_type_ids, NULL, word, type, pos, B, S, H, V, T, S);
}

void est_embeddings_backward_ex(float *dword, float *dtype, float *dpos, const float *dout,
                                const int32_t *input_ids, const int32_t *token_type_ids,
                                const int32_t *position_ids, int B, int S, int H, int V, int T,
                                int32_t word_pad, int32_t pos_pad) {
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
      if (dword && id >= 0 && id < V && id != word_pad) {
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
      int32_t p = position_ids ? position_ids[bs] : bs % S;
      if (dpos && p != pos_pad) {
        float *g = dpos + (size_t)p * H;
#pragma omp simd
        for (int c = c0; c < c1; c++) g[c] += d[c];
      }
    }
  }
  (void)V;
}

void est_embeddings_backward(float *dword, float *dtype, float *dpos, const float *dout,
                             const int32_t *input_ids, const int32_t *token_type_ids, int B, int S, int H,
                             int V, int T) {
  est_embeddings_backward_ex(dword, dtype, dpos, dout, input_ids, token_type_ids, NULL, B, S, H, V, T, -1, -1);
}

void est_position_ids_after_padding(int32_t *out, const int32_t *input_ids, int B, int S, int32_t pad) {
  for (int b = 0; b < B; b++) {
    int32_t count = 0;
    for (int s = 0; s < S; s++) {
      size_t i = (size_t)b * S + s;
      if (input_ids[i] == pad) {
        out[i] = pad;
      } else {
        count++;
        out[i] = pad + count;
      }
    }
  }
}

void est_sinusoidal_positions(float *table, int P, int H) {
  for (int p = 0; p < P; p++)
    for (int j = 0; j < H; j++) {
      /* numpy's pos / np.power(10000, 2 * (j // 2) / dim), in double */
      double angle = (double)p / pow(10000.0, 2.0 * (double)(j / 2) / (double)H);
      table[(size_t)p * H + j] = (float)((j % 2 == 0) ? sin(angle) : cos(angle));
    }
}
