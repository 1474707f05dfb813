/* The BERT sequence classifier of run_classifier.py: the encoder (est/bert_encoder.h,
 * src/bert/encoder*.c) with the classifier head (src/bert/heads/classifier_head.c) on its pooled
 * output. This file only composes the two behind the est_bert_classifier API. */
#include <stdlib.h>

#include "est/bert_classifier.h"

struct est_bert_classifier {
  est_bert_encoder *enc;
  est_bert_classifier_head *head;
  int C;
  int valid, have_labels;  /* the last forward succeeded / had labels */
};

est_status est_bert_classifier_create(est_bert_classifier **out, const est_bert_config *cfg, int num_labels,
                                      est_var_store *vs) {
  *out = NULL;
  est_status st = est_bert_config_validate(cfg, "BertConfig");
  if (st) return st;
  if (num_labels <= 0) return est_error(EST_ERR_INVALID_ARGUMENT, "num_labels must be positive, got %d", num_labels);
  est_bert_classifier *m = calloc(1, sizeof *m);
  if (!m) return est_error(EST_ERR_NO_MEMORY, "out of memory creating the BERT classifier");
  m->C = num_labels;
  st = est_bert_encoder_create(&m->enc, cfg, vs);
  if (st == EST_OK) st = est_bert_classifier_head_create(&m->head, cfg->hidden_size, num_labels, vs);
  if (st != EST_OK) {
    est_bert_classifier_free(m);
    return st;
  }
  *out = m;
  return EST_OK;
}

void est_bert_classifier_free(est_bert_classifier *m) {
  if (!m) return;
  est_bert_classifier_head_free(m->head);
  est_bert_encoder_free(m->enc);
  free(m);
}

void est_bert_classifier_set_first_row(est_bert_classifier *m, int64_t first_row) {
  est_bert_encoder_set_first_row(m->enc, first_row);
  est_bert_classifier_head_set_first_row(m->head, first_row);
}

est_precision est_bert_classifier_set_precision(est_bert_classifier *m, est_precision precision) {
  precision = est_bert_encoder_set_precision(m->enc, precision);
  est_bert_classifier_head_set_precision(m->head, precision);
  return precision;
}

void est_bert_classifier_set_grads_ready(est_bert_classifier *m, est_bert_grads_ready_fn fn, void *ctx) {
  est_bert_classifier_head_set_grads_ready(m->head, fn, ctx);
  est_bert_encoder_set_grads_ready(m->enc, fn, ctx);
}

int est_bert_classifier_num_labels(const est_bert_classifier *m) { return m->C; }
const est_bert_config *est_bert_classifier_config(const est_bert_classifier *m) {
  return est_bert_encoder_config(m->enc);
}
est_bert_encoder *est_bert_classifier_encoder(const est_bert_classifier *m) { return m->enc; }

est_status est_bert_classifier_reserve(est_bert_classifier *m, int max_batch, int seq_len) {
  m->valid = 0;
  est_status st = est_bert_encoder_reserve(m->enc, max_batch, seq_len, 1);
  if (st == EST_OK) st = est_bert_classifier_head_reserve(m->head, max_batch);
  return st;
}

est_status est_bert_classifier_reserve_forward_only(est_bert_classifier *m, int max_batch, int seq_len) {
  m->valid = 0;
  est_status st = est_bert_encoder_reserve(m->enc, max_batch, seq_len, 0);
  if (st == EST_OK) st = est_bert_classifier_head_reserve(m->head, max_batch);
  return st;
}

size_t est_bert_classifier_activation_bytes(const est_bert_classifier *m) {
  return est_bert_encoder_activation_bytes(m->enc) + est_bert_classifier_head_activation_bytes(m->head);
}

est_status est_bert_classifier_forward(est_bert_classifier *m, const int32_t *input_ids,
                                       const int32_t *input_mask, const int32_t *segment_ids,
                                       const int32_t *label_ids, int batch, int seq_len, int training,
                                       uint64_t dropout_seed, uint64_t step, float *logits_out,
                                       float *per_example_loss_out, float *loss_out) {
  m->valid = 0;
  est_status st = est_bert_encoder_forward(m->enc, input_ids, input_mask, segment_ids, batch, seq_len, training,
                                           dropout_seed, step);
  if (st) return st;
  st = est_bert_classifier_head_forward(m->head, est_bert_encoder_pooled_output(m->enc), label_ids, batch, training,
                                        dropout_seed, step, logits_out, per_example_loss_out, loss_out);
  if (st) return st;
  m->have_labels = label_ids != NULL;
  m->valid = 1;
  return EST_OK;
}

est_status est_bert_classifier_backward(est_bert_classifier *m) {
  if (!m->valid || !m->have_labels)
    return est_error(EST_ERR_FAILED_PRECONDITION,
                     "BERT backward needs a successful forward pass with label_ids just before it");
  m->valid = 0;  /* one backward per forward: the encoder consumes its output gradients */
  float *d_pooled = est_bert_encoder_pooled_output_grad(m->enc);
  if (!d_pooled)
    return est_error(EST_ERR_FAILED_PRECONDITION, "BERT backward: the activations were reserved forward-only");
  est_status st = est_bert_classifier_head_backward(m->head, d_pooled);
  if (st == EST_OK) st = est_bert_encoder_backward(m->enc);
  return st;
}

void est_bert_classifier_probabilities(float *probabilities, const float *logits, int batch, int num_labels) {
  est_softmax_forward(probabilities, logits, batch, num_labels);
}

const float *est_bert_classifier_embedding_output(const est_bert_classifier *m) {
  return est_bert_encoder_embedding_output(m->enc);
}

const float *est_bert_classifier_sequence_output(const est_bert_classifier *m) {
  return est_bert_encoder_sequence_output(m->enc);
}

const float *est_bert_classifier_pooled_output(const est_bert_classifier *m) {
  return est_bert_encoder_pooled_output(m->enc);
}
