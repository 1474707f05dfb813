/* Softmax and softmax cross-entropy over the class axis (run_classifier create_model:
 * log_probs = log_softmax(logits); per_example_loss = -sum one_hot * log_probs). Class
 * counts are tiny, so these are plain loops over rows; libm exp/log are fine here. */
#include <math.h>

#include "est/nn.h"

/* probs row = softmax(x); returns log(sum exp(x - max)) + max, the log-normaliser. */
static float softmax_row(float *probs, const float *x, int C) {
  float mx = -INFINITY;
  for (int c = 0; c < C; c++) mx = x[c] > mx ? x[c] : mx;
  double sum = 0.0;
  for (int c = 0; c < C; c++) sum += exp((double)x[c] - mx);
  if (probs)
    for (int c = 0; c < C; c++) probs[c] = (float)(exp((double)x[c] - mx) / sum);
  return (float)(log(sum) + mx);
}

void est_softmax_forward(float *out, const float *inp, int B, int C) {
  for (int b = 0; b < B; b++) softmax_row(out + (size_t)b * C, inp + (size_t)b * C, C);
}

est_status est_crossentropy_forward(float *losses, float *probs, const float *logits, const int32_t *labels,
                                    int B, int C) {
  for (int b = 0; b < B; b++)
    if (labels[b] < 0 || labels[b] >= C)
      return est_error(EST_ERR_INVALID_ARGUMENT, "label_ids[%d] = %d is outside [0, %d)", b, (int)labels[b], C);
  for (int b = 0; b < B; b++) {
    const float *x = logits + (size_t)b * C;
    float lse = softmax_row(probs ? probs + (size_t)b * C : NULL, x, C);
    losses[b] = lse - x[labels[b]];
  }
  return EST_OK;
}

void est_crossentropy_backward(float *dlogits, const float *probs, const int32_t *labels, float dloss, int B,
                               int C) {
  for (int b = 0; b < B; b++)
    for (int c = 0; c < C; c++)
      dlogits[(size_t)b * C + c] += dloss * (probs[(size_t)b * C + c] - (c == labels[b] ? 1.0f : 0.0f));
}
