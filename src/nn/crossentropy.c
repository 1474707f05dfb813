/* Softmax and softmax cross-entropy over the class axis (run_classifier create_model:
 * log_probs = log_softmax(logits); per_example_loss = -sum one_hot * log_probs).
 *
 * Two row kernels. Classifier rows (a few classes) take the reference: libm exp in double,
 * the exact path the golden tests were made with. Vocabulary-sized rows (the masked LM's
 * 30522 classes, >= FAST_MIN_CLASSES) take the fast one: one vectorised est_fast_expf pass
 * (~1 ulp) writing probs, its sum accumulated in double (so 30522 terms add no error beyond
 * the terms' own), then one scaling pass; with libm exp twice per class this was ~17% of a
 * BERT-Tiny pretraining step. Rows are independent, so the row loop is split over the
 * OpenMP threads with results that do not depend on the thread count.
 * est_crossentropy_row_ref exposes the reference for tests/test_nn_fast.c. */
#include <math.h>

#include "est/nn.h"
#include "nn/fastmath.h"

enum { FAST_MIN_CLASSES = 256, PARALLEL_MIN_ELEMS = 1 << 16 };

/* probs row = softmax(x); returns log(sum exp(x - max)) + max, the log-normaliser. */
static float softmax_row_ref(float *probs, const float *x, int C) {
  float mx = -INFINITY;
  for (int c = 0; c < C; c++) mx = x[c] > mx ? x[c] : mx;
  double sum = 0.0;
  for (int c = 0; c < C; c++) sum += exp((double)x[c] - mx);
  if (probs)
    for (int c = 0; c < C; c++) probs[c] = (float)(exp((double)x[c] - mx) / sum);
  return (float)(log(sum) + mx);
}

/* The same for vocabulary-sized rows; probs must be non-NULL (it holds exp(x - max)). */
static float softmax_row_fast(float *probs, const float *x, int C) {
  float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
  for (int c = 0; c < C; c++) mx = x[c] > mx ? x[c] : mx;
  double sum = 0.0;
#pragma omp simd reduction(+ : sum)
  for (int c = 0; c < C; c++) {
    float e = est_fast_expf(x[c] - mx);
    probs[c] = e;
    sum += (double)e;
  }
  const float inv = (float)(1.0 / sum);
#pragma omp simd
  for (int c = 0; c < C; c++) probs[c] *= inv;
  return (float)(log(sum) + mx);
}

static float softmax_row(float *probs, const float *x, int C) {
  return probs && C >= FAST_MIN_CLASSES ? softmax_row_fast(probs, x, C) : softmax_row_ref(probs, x, C);
}

float est_crossentropy_row_ref(float *probs, const float *x, int C) { return softmax_row_ref(probs, x, C); }
float est_crossentropy_row(float *probs, const float *x, int C) { return softmax_row(probs, x, C); }

void est_softmax_forward(float *out, const float *inp, int B, int C) {
#pragma omp parallel for schedule(static) if ((size_t)B * C >= PARALLEL_MIN_ELEMS)
  for (int b = 0; b < B; b++) softmax_row(out + (size_t)b * C, inp + (size_t)b * C, C);
}

est_status est_crossentropy_forward(float *losses, float *probs, const float *logits, const int32_t *labels,
                                    int B, int C) {
  for (int b = 0; b < B; b++)
    if (labels[b] < 0 || labels[b] >= C)
      return est_error(EST_ERR_INVALID_ARGUMENT, "label_ids[%d] = %d is outside [0, %d)", b, (int)labels[b], C);
#pragma omp parallel for schedule(static) if ((size_t)B * C >= PARALLEL_MIN_ELEMS)
  for (int b = 0; b < B; b++) {
    const float *x = logits + (size_t)b * C;
    float lse = softmax_row(probs ? probs + (size_t)b * C : NULL, x, C);
    losses[b] = lse - x[labels[b]];
  }
  return EST_OK;
}

void est_crossentropy_backward(float *dlogits, const float *probs, const int32_t *labels, float dloss, int B,
                               int C) {
#pragma omp parallel for schedule(static) if ((size_t)B * C >= PARALLEL_MIN_ELEMS)
  for (int b = 0; b < B; b++) {
    float *d = dlogits + (size_t)b * C;
    const float *p = probs + (size_t)b * C;
#pragma omp simd
    for (int c = 0; c < C; c++) d[c] += dloss * (p[c] - (c == labels[b] ? 1.0f : 0.0f));
  }
}
