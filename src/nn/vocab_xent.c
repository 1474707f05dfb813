/* The masked LM's softmax cross-entropy over the 30522-class vocabulary, fused.
 *
 * The reference path (est_crossentropy_forward writing probs [N,V], an argmax pass, then
 * est_crossentropy_backward into a zeroed dlogits [N,V]) makes ~8 passes over [N,V] floats
 * (78 MB at BERT-Tiny's batch 32 x 20 predictions) and holds three such arrays. This form
 * makes four: forward reads a row twice (max with its first index, then the sum of exp) and
 * keeps two floats per row; backward rewrites the logits in place as dlogits. Each value is
 * the reference's, operation for operation: p = est_fast_expf(x - max) * (float)(1 / sum),
 * the sum of the exps in double, loss = (float)(log(sum) + max) - x[label], d = scale * (p -
 * onehot); so only the order of the vectorised sums may differ (tests/test_nn_vocab_softmax.c
 * compares the two). Rows are independent and each goes to one thread whole, so results do
 * not depend on the thread count.
 *
 * argmax: the first index of the maximum, as the reference's `z[c] > z[best]` scan; a row
 * with a NaN can differ (its loss is NaN, which stops training anyway). */
#include <math.h>
#include <string.h>

#include "est/nn.h"
#include "nn/fastmath.h"

enum { PARALLEL_MIN_ELEMS = 1 << 16 };

/* Max of x[0..C) and the first index holding it (0 when no element equals it: all NaN). */
static float row_max_first(const float *x, int C, int32_t *at) {
  float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
  for (int c = 0; c < C; c++) mx = x[c] > mx ? x[c] : mx;
  /* the first block of 64 that holds mx (a vectorised test), then the scalar scan in it */
  enum { BLOCK = 64 };
  *at = 0;
  for (int c0 = 0; c0 < C; c0 += BLOCK) {
    const int n = C - c0 < BLOCK ? C - c0 : BLOCK;
    int hit = 0;
#pragma omp simd reduction(| : hit)
    for (int i = 0; i < n; i++) hit |= x[c0 + i] == mx;
    if (!hit) continue;
    for (int i = 0; i < n; i++)
      if (x[c0 + i] == mx) {
        *at = c0 + i;
        return mx;
      }
  }
  return mx;
}

/* sum of exp(x - mx) in double, by chunks: the exps in a float simd loop, then their sum in
 * double. Written as one loop (sum += (double)est_fast_expf(...)), GCC 12 turned the clamps
 * into branches and left it scalar (perf: ~18% of a Tiny step in that form). */
static double sum_exp(const float *x, int C, float mx) {
  enum { CHUNK = 256 };
  float e[CHUNK];
  double sum = 0.0;
  for (int c0 = 0; c0 < C; c0 += CHUNK) {
    const int n = C - c0 < CHUNK ? C - c0 : CHUNK;
#pragma omp simd
    for (int i = 0; i < n; i++) e[i] = est_fast_expf(x[c0 + i] - mx);
#pragma omp simd reduction(+ : sum)
    for (int i = 0; i < n; i++) sum += (double)e[i];
  }
  return sum;
}

est_status est_vocab_xent_forward(float *losses, int32_t *preds, float *row_max, float *row_inv,
                                  const float *logits, const int32_t *labels, int N, int C) {
  for (int n = 0; n < N; n++)
    if (labels[n] < 0 || labels[n] >= C)
      return est_error(EST_ERR_INVALID_ARGUMENT, "label_ids[%d] = %d is outside [0, %d)", n, (int)labels[n], C);
#pragma omp parallel for schedule(static) if ((size_t)N * C >= PARALLEL_MIN_ELEMS)
  for (int n = 0; n < N; n++) {
    const float *x = logits + (size_t)n * C;
    const float mx = row_max_first(x, C, &preds[n]);
    const double sum = sum_exp(x, C, mx);
    row_max[n] = mx;
    row_inv[n] = (float)(1.0 / sum);
    losses[n] = (float)(log(sum) + mx) - x[labels[n]];
  }
  return EST_OK;
}

void est_vocab_xent_backward_inplace(float *logits, const float *row_max, const float *row_inv,
                                     const int32_t *labels, const float *scale, int N, int C) {
#pragma omp parallel for schedule(static) if ((size_t)N * C >= PARALLEL_MIN_ELEMS)
  for (int n = 0; n < N; n++) {
    float *d = logits + (size_t)n * C;
    const float s = scale[n];
    if (s == 0.0f) {
      memset(d, 0, (size_t)C * sizeof(float));
      continue;
    }
    const float mx = row_max[n], inv = row_inv[n], x_label = d[labels[n]];
#pragma omp simd
    for (int c = 0; c < C; c++) d[c] = s * (est_fast_expf(d[c] - mx) * inv);
    d[labels[n]] = s * (est_fast_expf(x_label - mx) * inv - 1.0f);
  }
}
