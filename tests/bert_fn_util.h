/* The BERT classifier for the model tests: the one BERT model_fn (est_bert_model_fn,
 * est/bert_head.h) with the classifier head, driven as the Estimator drives it: build for one
 * mode on its own variable store, initialise, call per batch (zero the gradients first in
 * TRAIN), the optimizer it creates. Include after cmocka.h.
 *
 *     bert_fn m;
 *     bert_fn_init(&m, &cfg, num_labels, seq_len);
 *     m.params.no_dropout = 1;                          // any params, before build
 *     bert_fn_build(&m, EST_MODE_TRAIN, batch, seed);
 *     bert_fn_call(&m, ids, mask, segs, labels, batch, step);   // m.spec.loss, gradients
 *     bert_fn_free(&m);
 *
 * PREDICT's m.spec holds "probabilities" [batch, C] (bert_fn_probabilities). */
#ifndef EST_TESTS_BERT_FN_UTIL_H
#define EST_TESTS_BERT_FN_UTIL_H

#include <stdint.h>
#include <string.h>

#include "est/bert_classifier.h"
#include "est/bert_head.h"
#include "est/estimator.h"
#include "est/optimizer.h"

typedef struct bert_fn {
  est_bert_model_params params;          /* the model_fn keeps a pointer: the struct must not move */
  est_bert_classifier_head_params head;
  est_model_fn fn;
  est_mode mode;
  est_grads_notifier *grads;             /* TRAIN: ctx.grads (NULL: none) */
  int64_t first_row;                     /* TRAIN: ctx.first_row */
  est_var_store *vs;
  void *model;
  est_estimator_spec spec;
  est_tensor tensors[4];
  const char *names[4];
  est_features features;
} bert_fn;

/* The classifier's params: cfg, C labels, max_seq_length seq_len; fp32, dropout on, no
 * recomputation, BERT's optimizer at learning rate 1e-3 over 10 steps without warm-up. */
static inline void bert_fn_init(bert_fn *m, const est_bert_config *cfg, int num_labels, int seq_len) {
  memset(m, 0, sizeof *m);
  m->head = (est_bert_classifier_head_params){.num_labels = num_labels};
  m->params = (est_bert_model_params){.bert_config = *cfg, .head = &est_bert_classifier_head_type,
                                      .head_params = &m->head, .max_seq_length = seq_len, .learning_rate = 1e-3,
                                      .num_train_steps = 10, .precision = EST_PRECISION_FP32};
}

/* Builds the model for `mode` with room for `batch` rows and initialises its variables from
 * `seed` (also the dropout seed). */
static inline est_status bert_fn_build(bert_fn *m, est_mode mode, int batch, uint64_t seed) {
  m->fn = est_bert_model_fn(&m->params);
  m->mode = mode;
  est_status st = est_vars_create(&m->vs);
  const est_model_context ctx = {.mode = mode, .batch_size = batch, .seed = seed, .params = &m->params,
                                 .grads = m->grads, .first_row = m->first_row};
  if (st == EST_OK) st = m->fn.build(&ctx, m->vs, &m->model);
  if (st == EST_OK) st = est_vars_finalize(m->vs, seed);
  return st;
}

/* One batch of `batch` rows of max_seq_length tokens (labels NULL: no label_ids feature) at
 * global step `step`; its results in m->spec. */
static inline est_status bert_fn_call(bert_fn *m, const int32_t *ids, const int32_t *mask, const int32_t *segs,
                                      const int32_t *labels, int batch, int64_t step) {
  const int S = m->params.max_seq_length;
  const char *names[4] = {"input_ids", "input_mask", "segment_ids", "label_ids"};
  const int32_t *data[4] = {ids, mask, segs, labels};
  size_t n = 0;
  for (int k = 0; k < 4; k++) {
    if (!data[k]) continue;
    m->names[n] = names[k];
    m->tensors[n++] = k < 3 ? (est_tensor){.dtype = EST_DT_INT32, .rank = 2, .dims = {batch, S}, .data = (void *)data[k]}
                            : (est_tensor){.dtype = EST_DT_INT32, .rank = 1, .dims = {batch}, .data = (void *)data[k]};
  }
  m->features = (est_features){.batch_size = batch, .count = n, .names = m->names, .tensors = m->tensors};
  memset(&m->spec, 0, sizeof m->spec);
  return m->fn.call(m->model, m->vs, &m->features, m->mode, step, &m->spec);
}

/* PREDICT's probabilities [batch, C]. */
static inline const float *bert_fn_probabilities(const bert_fn *m) {
  for (size_t i = 0; i < m->spec.num_predictions; i++)
    if (!strcmp(m->spec.prediction_names[i], "probabilities")) return m->spec.predictions[i].data;
  return NULL;
}

/* The encoder inside: its activations after a call. */
static inline est_bert_encoder *bert_fn_encoder(const bert_fn *m) { return est_bert_model_encoder(m->model); }

static inline void bert_fn_free(bert_fn *m) {
  if (m->model) m->fn.destroy(m->model);
  est_vars_free(m->vs);
  m->model = NULL, m->vs = NULL;
}

#endif
