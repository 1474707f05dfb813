/* run_classifier.py create_model's head on the pooled output [B,H]:
 * dropout(0.1, hard-coded) -> logits = pooled_d . output_weights^T + output_bias [B,C] ->
 * per-example softmax cross-entropy, loss = their mean. Backward adds d loss / d pooled
 * into the encoder's pooled-output gradient (est/bert_encoder.h). */
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "est/bert_classifier.h"

/* run_classifier's dropout on the pooled output: keep_prob 0.9, not from the config. */
static const float CLASSIFIER_DROPOUT = 0.1f;

struct est_bert_classifier_head {
  est_var_store *vs;
  int H, C;
  int out_w, out_b;                  /* output_weights [C,H], output_bias [C] */
  int max_B;
  void *buf;
  size_t buf_bytes;
  /* [max_B, H] / [max_B, C] / [max_B] regions of buf */
  float *pooled_d, *logits, *probs, *losses;
  uint8_t *mask;
  int32_t *labels;
  float *d_logits, *d_pooled_d;      /* activation-gradient scratch */
  /* the last forward */
  int B, valid;
  float p;
  est_bert_grads_ready_fn ready_fn;
  void *ready_ctx;
  int64_t first_row; /* est_bert_classifier_head_set_first_row */
  est_precision precision; /* est_bert_classifier_head_set_precision: the encoder's */
};

est_status est_bert_classifier_head_create(est_bert_classifier_head **out, int hidden_size, int num_labels,
                                           est_var_store *vs) {
  *out = NULL;
  if (num_labels <= 0) return est_error(EST_ERR_INVALID_ARGUMENT, "num_labels must be positive, got %d", num_labels);
  est_bert_classifier_head *h = calloc(1, sizeof *h);
  if (!h) return est_error(EST_ERR_NO_MEMORY, "out of memory creating the classifier head");
  h->vs = vs;
  h->H = hidden_size;
  h->C = num_labels;
  /* run_classifier hard-codes stddev 0.02 here, whatever initializer_range says. */
  int64_t wdims[2] = {num_labels, hidden_size}, bdims[1] = {num_labels};
  est_status st = est_vars_declare(vs, "output_weights", 2, wdims, est_init_truncated_normal(0.02f), &h->out_w);
  if (st == EST_OK) st = est_vars_declare(vs, "output_bias", 1, bdims, est_init_zeros(), &h->out_b);
  if (st != EST_OK) {
    free(h);
    return est_error_prefix("declaring BERT variables: ");
  }
  *out = h;
  return EST_OK;
}

void est_bert_classifier_head_free(est_bert_classifier_head *h) {
  if (!h) return;
  est_free(h->buf);
  free(h);
}

est_status est_bert_classifier_head_reserve(est_bert_classifier_head *h, int max_batch) {
  if (max_batch <= 0) return est_error(EST_ERR_INVALID_ARGUMENT, "reserve: batch %d must be positive", max_batch);
  if (h->buf && max_batch <= h->max_B) return EST_OK;
  const size_t B = (size_t)max_batch, H = (size_t)h->H, C = (size_t)h->C;
  /* one buffer, each region on a cache line */
  const size_t sizes[] = {B * H * 4, B * C * 4, B * C * 4, B * 4, B * H, B * 4, B * C * 4, B * H * 4};
  size_t bytes = 0;
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) bytes += (sizes[i] + 63) & ~(size_t)63;
  void *buf = est_alloc(bytes);
  if (!buf) return est_error(EST_ERR_NO_MEMORY, "cannot allocate the classifier head for batch %d", max_batch);
  est_free(h->buf);
  h->buf = buf;
  h->buf_bytes = bytes;
  h->max_B = max_batch;
  h->valid = 0;
  char *p = buf;
  void *regions[8];
  for (size_t i = 0; i < 8; i++) {
    regions[i] = p;
    p += (sizes[i] + 63) & ~(size_t)63;
  }
  h->pooled_d = regions[0];
  h->logits = regions[1];
  h->probs = regions[2];
  h->losses = regions[3];
  h->mask = regions[4];
  h->labels = regions[5];
  h->d_logits = regions[6];
  h->d_pooled_d = regions[7];
  return EST_OK;
}

size_t est_bert_classifier_head_activation_bytes(const est_bert_classifier_head *h) { return h->buf_bytes; }

void est_bert_classifier_head_set_first_row(est_bert_classifier_head *h, int64_t first_row) {
  h->first_row = first_row > 0 ? first_row : 0;
}

void est_bert_classifier_head_set_precision(est_bert_classifier_head *h, est_precision precision) {
  h->precision = precision;
}

void est_bert_classifier_head_set_grads_ready(est_bert_classifier_head *h, est_bert_grads_ready_fn fn, void *ctx) {
  h->ready_fn = fn;
  h->ready_ctx = fn ? ctx : NULL;
}

est_status est_bert_classifier_head_forward(est_bert_classifier_head *h, const float *pooled,
                                            const int32_t *label_ids, int batch, int training,
                                            uint64_t dropout_seed, uint64_t step, float *logits_out,
                                            float *per_example_loss_out, float *loss_out) {
  h->valid = 0;
  if (!h->buf || batch <= 0 || batch > h->max_B)
    return est_error(EST_ERR_INVALID_ARGUMENT, "classifier head: batch %d exceeds the reservation %d", batch,
                     h->max_B);
  const int B = batch, H = h->H, C = h->C;
  const float p = training ? CLASSIFIER_DROPOUT : 0.0f;
  est_dropout_forward_at(h->pooled_d, h->mask, pooled, (size_t)B * H, (size_t)h->first_row * (size_t)H, p,
                         dropout_seed, step, EST_BERT_DROPOUT_HEAD_FIRST);
  est_matmul_forward(h->logits, h->pooled_d, est_vars_value(h->vs, (size_t)h->out_w),
                     est_vars_value(h->vs, (size_t)h->out_b), B, H, C, 1,
                     est_precision_of_logits(h->precision));
  if (logits_out) memcpy(logits_out, h->logits, (size_t)B * C * sizeof(float));
  h->B = B;
  h->p = p;
  if (!label_ids) return EST_OK;
  est_status st = est_crossentropy_forward(h->losses, h->probs, h->logits, label_ids, B, C);
  if (st) return est_error_prefix("BERT classifier loss: ");
  memcpy(h->labels, label_ids, (size_t)B * sizeof(int32_t));
  double sum = 0.0;
  for (int b = 0; b < B; b++) sum += h->losses[b];
  if (per_example_loss_out) memcpy(per_example_loss_out, h->losses, (size_t)B * sizeof(float));
  if (loss_out) *loss_out = (float)(sum / B);
  h->valid = 1;
  return EST_OK;
}

est_status est_bert_classifier_head_backward(est_bert_classifier_head *h, float *d_pooled) {
  if (!h->valid)
    return est_error(EST_ERR_FAILED_PRECONDITION,
                     "classifier head backward needs a successful forward pass with label_ids just before it");
  const int B = h->B, H = h->H, C = h->C;
  float *dW = est_vars_grad(h->vs, (size_t)h->out_w), *db = est_vars_grad(h->vs, (size_t)h->out_b);
  /* loss = mean_b losses[b] -> d logits = (probs - onehot) / B */
  memset(h->d_logits, 0, (size_t)B * C * sizeof(float));
  est_crossentropy_backward(h->d_logits, h->probs, h->labels, 1.0f / (float)B, B, C);
  /* logits = pooled_d W^T + b; pooled_d = dropout(pooled), the identity when p is 0 */
  float *d_pd = h->p > 0.0f ? h->d_pooled_d : d_pooled;
  /* its own buffer is written; d_pooled (what the encoder reads) is added into */
  est_matmul_backward_mode(d_pd, dW, db, h->d_logits, h->pooled_d, est_vars_value(h->vs, (size_t)h->out_w), B, H, C,
                           1, d_pd != d_pooled ? EST_GRAD_WRITE : EST_GRAD_ADD, h->precision);
  est_bert_report_grads_ready(h->vs, (size_t)h->out_w, (size_t)h->out_b, h->ready_fn, h->ready_ctx);
  if (d_pd != d_pooled) est_dropout_backward(d_pooled, d_pd, h->mask, (size_t)B * H, h->p);
  return EST_OK;
}
