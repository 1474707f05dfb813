/* run_pretraining.py's two heads as an est_bert_head_type (est/bert_head.h): masked LM tied
 * to the word embeddings + next sentence (pretraining_heads.c), their features and their
 * metric_fn (docs/bert.md §9).
 *
 *   TRAIN  total_loss = masked_lm_loss + next_sentence_loss.
 *   EVAL   masked_lm_accuracy and masked_lm_loss weighted by masked_lm_weights,
 *          next_sentence_accuracy and next_sentence_loss unweighted.
 *   No PREDICT: run_pretraining.py's model_fn has none either. */
#include <stdlib.h>
#include <string.h>

#include "est/bert_head.h"
#include "est/bert_pretraining.h"
#include "est/metrics.h"

typedef struct pretraining {
  est_bert_pretraining_heads *heads;
  int P;
  float *lm_weights, *ones; /* [B*P], [B] */
  int32_t *ns_labels;       /* [B] */
  const int32_t *lm_ids;    /* the last forward's masked_lm_ids */
  est_bert_pretraining_output out;
  est_metric *metric_objs[4];
  size_t num_metrics;
} pretraining;

static void pretraining_free(void *head) {
  pretraining *m = head;
  if (!m) return;
  est_bert_pretraining_heads_free(m->heads);
  for (size_t i = 0; i < m->num_metrics; i++) est_metric_free(m->metric_objs[i]);
  free(m->lm_weights);
  free(m->ones);
  free(m->ns_labels);
  free(m);
}

static est_status pretraining_create(void **out, const est_bert_head_context *ctx) {
  const est_bert_pretraining_head_params *p = ctx->params;
  pretraining *m = calloc(1, sizeof *m);
  if (!m) return est_error(EST_ERR_NO_MEMORY, "pretraining heads: out of memory");
  *out = m;
  m->P = p->max_predictions_per_seq;
  return est_bert_pretraining_heads_create(&m->heads, ctx->encoder, ctx->vars);
}

static est_status pretraining_reserve(void *head, const est_bert_head_context *ctx) {
  pretraining *m = head;
  const int B = ctx->max_batch;
  est_status st = est_bert_pretraining_heads_reserve(m->heads, B, m->P);
  if (st != EST_OK) return st;
  m->lm_weights = malloc((size_t)B * (size_t)m->P * sizeof(float));
  m->ones = malloc((size_t)B * sizeof(float));
  m->ns_labels = malloc((size_t)B * sizeof(int32_t));
  if (!m->lm_weights || !m->ones || !m->ns_labels) return est_error(EST_ERR_NO_MEMORY, "pretraining heads: out of memory");
  for (int i = 0; i < B; i++) m->ones[i] = 1.0f;
  if (ctx->mode != EST_MODE_EVAL) return EST_OK;
  const struct {
    est_metric_kind kind;
    const char *name;
  } ms[4] = {{EST_METRIC_ACCURACY, "masked_lm_accuracy"}, {EST_METRIC_MEAN, "masked_lm_loss"},
             {EST_METRIC_ACCURACY, "next_sentence_accuracy"}, {EST_METRIC_MEAN, "next_sentence_loss"}};
  for (size_t i = 0; i < 4 && !st; i++)
    if (!(st = est_metric_create(&m->metric_objs[i], ms[i].kind, ms[i].name))) m->num_metrics++;
  return st;
}

/* A [B, len] feature (int64 in the records, cast to int32 by the input) of the flag's length. */
static est_status get_feature(const est_features *f, const char *name, est_dtype dt, int64_t len, const char *flag,
                              const est_tensor **t) {
  est_status st = est_features_get(f, name, dt, 2, t);
  if (st != EST_OK) return st;
  if ((*t)->dims[1] != len)
    return est_error(EST_ERR_INVALID_ARGUMENT, "feature %s has length %lld, expected --%s=%lld", name,
                     (long long)(*t)->dims[1], flag, (long long)len);
  return EST_OK;
}

static est_status pretraining_forward(void *head, const est_bert_head_batch *b, float *loss) {
  pretraining *m = head;
  const est_features *f = b->features;
  const int B = b->batch, P = m->P;
  const est_tensor *pos, *lm_ids, *lm_w, *ns;
  est_status st = get_feature(f, "masked_lm_positions", EST_DT_INT32, P, "max_predictions_per_seq", &pos);
  if (!st) st = get_feature(f, "masked_lm_ids", EST_DT_INT32, P, "max_predictions_per_seq", &lm_ids);
  if (!st) st = get_feature(f, "masked_lm_weights", EST_DT_FLOAT, P, "max_predictions_per_seq", &lm_w);
  if (!st) st = get_feature(f, "next_sentence_labels", EST_DT_INT32, 1, "next_sentence_labels' length 1", &ns);
  if (st != EST_OK) return st;
  memcpy(m->ns_labels, ns->data, (size_t)B * sizeof(int32_t));
  memcpy(m->lm_weights, lm_w->data, (size_t)B * (size_t)P * sizeof(float));
  m->lm_ids = lm_ids->data;
  st = est_bert_pretraining_heads_forward(m->heads, pos->data, lm_ids->data, m->lm_weights, m->ns_labels, B, b->seq_len,
                                          P, &m->out);
  if (st == EST_OK && loss) *loss = m->out.loss;
  return st;
}

static est_status pretraining_backward(void *head) {
  return est_bert_pretraining_heads_backward(((pretraining *)head)->heads);
}

static est_status pretraining_update_metrics(void *head, const est_bert_head_batch *b) {
  pretraining *m = head;
  const est_bert_pretraining_output *o = &m->out;
  const size_t N = (size_t)b->batch * (size_t)m->P;
  est_status st = est_metric_update_classes(m->metric_objs[0], m->lm_ids, o->masked_lm_predictions, m->lm_weights, N);
  if (!st) st = est_metric_update_values(m->metric_objs[1], o->masked_lm_example_loss, m->lm_weights, N);
  if (!st)
    st = est_metric_update_classes(m->metric_objs[2], m->ns_labels, o->next_sentence_predictions, m->ones,
                                   (size_t)b->batch);
  if (!st) st = est_metric_update_values(m->metric_objs[3], o->next_sentence_example_loss, m->ones, (size_t)b->batch);
  return st;
}

static est_status pretraining_metrics(void *head, est_metric *const **metrics, size_t *n) {
  pretraining *m = head;
  *metrics = m->metric_objs;
  *n = m->num_metrics;
  return EST_OK;
}

static void pretraining_set_grads_ready(void *head, est_bert_grads_ready_fn fn, void *ctx) {
  est_bert_pretraining_heads_set_grads_ready(((pretraining *)head)->heads, fn, ctx);
}

const est_bert_head_type est_bert_pretraining_head_type = {
  .name = "pretraining",
  .create = pretraining_create,
  .reserve = pretraining_reserve,
  .forward = pretraining_forward,
  .backward = pretraining_backward,
  .update_metrics = pretraining_update_metrics,
  .metrics = pretraining_metrics,
  .set_grads_ready = pretraining_set_grads_ready,
  .free = pretraining_free,
};
