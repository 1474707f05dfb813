/* run_classifier.py create_model's head as an est_bert_head_type (est/bert_head.h): the
 * classifier head of classifier_head.c on the encoder's pooled output, its features, its
 * metrics and its prediction (docs/run_classifier.md §7, §8).
 *
 *   TRAIN    loss = mean over the batch of -log softmax(logits)[label] (padding rows
 *            included, as the reference).
 *   EVAL     eval_accuracy and eval_loss weighted by is_real_example; eval_f1 (MRPC) or
 *            eval_mcc (CoLA) as extra metrics.
 *   PREDICT  "probabilities" [B, C] = softmax(logits). */
#include <stdlib.h>

#include "est/bert_head.h"
#include "est/bert_classifier.h"
#include "est/metrics.h"
#include "est/processors.h"

typedef struct classifier {
  est_bert_classifier_head *head;
  est_bert_encoder *enc;
  int num_labels, extra_metric;
  /* one batch, [max_batch, C] / [max_batch] */
  float *logits, *per_example_loss, *probabilities, *weights;
  int32_t *predictions;
  const int32_t *labels;   /* the last forward's label_ids, or NULL */
  est_tensor prob_tensor;
  est_metric *metric_objs[3];
  size_t num_metrics;
} classifier;

static const char *const PREDICTION_NAMES[] = {"probabilities"};

static void classifier_free(void *head) {
  classifier *m = head;
  if (!m) return;
  est_bert_classifier_head_free(m->head);
  for (size_t i = 0; i < m->num_metrics; i++) est_metric_free(m->metric_objs[i]);
  free(m->logits);
  free(m->per_example_loss);
  free(m->probabilities);
  free(m->weights);
  free(m->predictions);
  free(m);
}

static est_status classifier_create(void **out, const est_bert_head_context *ctx) {
  const est_bert_classifier_head_params *p = ctx->params;
  classifier *m = calloc(1, sizeof *m);
  if (!m) return est_error(EST_ERR_NO_MEMORY, "classifier head: out of memory");
  *out = m;
  m->enc = ctx->encoder;
  m->num_labels = p->num_labels;
  m->extra_metric = p->extra_metric;
  return est_bert_classifier_head_create(&m->head, est_bert_encoder_config(ctx->encoder)->hidden_size, p->num_labels,
                                         ctx->vars);
}

static est_status add_metric(classifier *m, est_metric_kind kind, const char *name) {
  est_metric *metric;
  est_status st = est_metric_create(&metric, kind, name);
  if (st != EST_OK) return st;
  m->metric_objs[m->num_metrics++] = metric;
  return EST_OK;
}

static est_status classifier_reserve(void *head, const est_bert_head_context *ctx) {
  classifier *m = head;
  est_status st = est_bert_classifier_head_reserve(m->head, ctx->max_batch);
  if (st != EST_OK) return st;
  size_t B = (size_t)ctx->max_batch, C = (size_t)m->num_labels;
  m->logits = malloc(B * C * sizeof(float));
  m->probabilities = malloc(B * C * sizeof(float));
  m->per_example_loss = malloc(B * sizeof(float));
  m->weights = malloc(B * sizeof(float));
  m->predictions = malloc(B * sizeof(int32_t));
  if (!m->logits || !m->probabilities || !m->per_example_loss || !m->weights || !m->predictions)
    return est_error(EST_ERR_NO_MEMORY, "classifier head: out of memory for batch %zu", B);
  if (ctx->mode != EST_MODE_EVAL) return EST_OK;
  /* metric_fn: accuracy and mean loss, both weighted by is_real_example. */
  st = add_metric(m, EST_METRIC_ACCURACY, "eval_accuracy");
  if (st == EST_OK) st = add_metric(m, EST_METRIC_MEAN, "eval_loss");
  if (st == EST_OK && m->extra_metric == EST_TASK_METRIC_F1) st = add_metric(m, EST_METRIC_F1, "eval_f1");
  if (st == EST_OK && m->extra_metric == EST_TASK_METRIC_MCC) st = add_metric(m, EST_METRIC_MCC, "eval_mcc");
  return st;
}

static est_status classifier_forward(void *head, const est_bert_head_batch *b, float *loss) {
  classifier *m = head;
  const est_features *f = b->features;
  const est_tensor *labels = NULL, *real = NULL;
  est_status st = EST_OK;
  if (b->mode != EST_MODE_PREDICT && (st = est_features_get(f, "label_ids", EST_DT_INT32, 1, &labels)) != EST_OK)
    return st;
  /* is_real_example: the feature when present, else all ones (the reference's fallback). */
  if (est_features_find(f, "is_real_example") &&
      (st = est_features_get(f, "is_real_example", EST_DT_INT32, 1, &real)) != EST_OK)
    return st;
  for (int i = 0; i < b->batch; i++) m->weights[i] = real ? (float)((const int32_t *)real->data)[i] : 1.0f;
  m->labels = labels ? labels->data : NULL;
  est_bert_classifier_head_set_precision(m->head, est_bert_encoder_precision(m->enc));
  return est_bert_classifier_head_forward(m->head, est_bert_encoder_pooled_output(m->enc), m->labels, b->batch,
                                          b->training, b->seed, b->step, m->logits,
                                          m->labels ? m->per_example_loss : NULL, m->labels ? loss : NULL);
}

static est_status classifier_backward(void *head) {
  classifier *m = head;
  float *d_pooled = est_bert_encoder_pooled_output_grad(m->enc);
  if (!d_pooled)
    return est_error(EST_ERR_FAILED_PRECONDITION, "BERT backward: the activations were reserved forward-only");
  return est_bert_classifier_head_backward(m->head, d_pooled);
}

static est_status classifier_update_metrics(void *head, const est_bert_head_batch *b) {
  classifier *m = head;
  const int B = b->batch, C = m->num_labels;
  /* argmax(logits), the first maximum on ties (tf.argmax). */
  for (int i = 0; i < B; i++) {
    const float *z = m->logits + (size_t)i * C;
    int best = 0;
    for (int c = 1; c < C; c++)
      if (z[c] > z[best]) best = c;
    m->predictions[i] = best;
  }
  for (size_t k = 0; k < m->num_metrics; k++) {
    est_metric *metric = m->metric_objs[k];
    est_status st = est_metric_get_kind(metric) == EST_METRIC_MEAN
                        ? est_metric_update_values(metric, m->per_example_loss, m->weights, (size_t)B)
                        : est_metric_update_classes(metric, m->labels, m->predictions, m->weights, (size_t)B);
    if (st != EST_OK) return st;
  }
  return EST_OK;
}

static est_status classifier_metrics(void *head, est_metric *const **metrics, size_t *n) {
  classifier *m = head;
  *metrics = m->metric_objs;
  *n = m->num_metrics;
  return EST_OK;
}

static est_status classifier_predictions(void *head, const est_bert_head_batch *b, est_estimator_spec *spec) {
  classifier *m = head;
  est_bert_classifier_probabilities(m->probabilities, m->logits, b->batch, m->num_labels);
  m->prob_tensor = (est_tensor){.dtype = EST_DT_FLOAT, .rank = 2, .dims = {b->batch, m->num_labels},
                                .data = m->probabilities};
  spec->num_predictions = 1;
  spec->prediction_names = PREDICTION_NAMES;
  spec->predictions = &m->prob_tensor;
  return EST_OK;
}

static void classifier_set_grads_ready(void *head, est_bert_grads_ready_fn fn, void *ctx) {
  est_bert_classifier_head_set_grads_ready(((classifier *)head)->head, fn, ctx);
}

static void classifier_set_first_row(void *head, int64_t first_row) {
  est_bert_classifier_head_set_first_row(((classifier *)head)->head, first_row);
}

const est_bert_head_type est_bert_classifier_head_type = {
  .name = "classifier",
  .create = classifier_create,
  .reserve = classifier_reserve,
  .forward = classifier_forward,
  .backward = classifier_backward,
  .update_metrics = classifier_update_metrics,
  .metrics = classifier_metrics,
  .predictions = classifier_predictions,
  .set_grads_ready = classifier_set_grads_ready,
  .set_first_row = classifier_set_first_row,
  .free = classifier_free,
};
