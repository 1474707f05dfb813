/* run_pretraining.py's model_fn_builder as an est_model_fn: the BERT encoder with the
 * masked-LM and next-sentence heads (est/bert_pretraining.h), plugged into the Estimator
 * (docs/bert.md §9).
 *
 *   TRAIN  total_loss = masked_lm_loss + next_sentence_loss; gradients accumulated into the
 *          store; AdamWeightDecay with BERT's warmup + linear decay, clip_by_global_norm(1.0).
 *   EVAL   metric_fn: masked_lm_accuracy and masked_lm_loss weighted by masked_lm_weights,
 *          next_sentence_accuracy and next_sentence_loss unweighted; the Estimator adds loss
 *          (the total) and global_step.
 * init_checkpoint loads on a fresh start only, with BERT's assignment map. */
#include <stdlib.h>
#include <string.h>

#include "est/bert_model.h"
#include "est/bert_pretraining.h"
#include "est/estimator.h"
#include "est/log.h"
#include "est/metrics.h"
#include "est/optimizer.h"

typedef struct pretrainer {
  const est_pretraining_model_params *p;
  est_bert_encoder *enc;
  est_bert_pretraining_heads *heads;
  uint64_t seed;
  float *lm_weights, *ones;           /* [B*P], [B] */
  int32_t *ns_labels;                 /* [B] */
  est_metric *metric_objs[4];
  size_t num_metrics;
} pretrainer;

/* optimization.create_optimizer's exclusions, chosen here as the model's business. */

static void pretrainer_destroy(void *model) {
  pretrainer *m = model;
  if (!m) return;
  est_bert_pretraining_heads_free(m->heads);
  est_bert_encoder_free(m->enc);
  for (size_t i = 0; i < m->num_metrics; i++) est_metric_free(m->metric_objs[i]);
  free(m->lm_weights);
  free(m->ones);
  free(m->ns_labels);
  free(m);
}

static void forward_grads_ready(void *grads, size_t offset, size_t count) {
  (void)est_grads_ready(grads, offset, count); /* a failure is kept by the notifier and fails the step */
}

static est_status pretrainer_build(const est_model_context *ctx, est_var_store *vars, void **out) {
  const est_pretraining_model_params *p = ctx->params;
  pretrainer *m = calloc(1, sizeof *m);
  if (!m) return est_error(EST_ERR_NO_MEMORY, "pretraining model_fn: out of memory");
  *out = m;
  m->p = p;
  m->seed = ctx->seed;
  const int B = ctx->batch_size, P = p->max_predictions_per_seq, train = ctx->mode == EST_MODE_TRAIN;
  est_status st = est_bert_encoder_create(&m->enc, &p->bert_config, vars);
  if (!st) st = est_bert_pretraining_heads_create(&m->heads, m->enc, vars);
  if (!st && train) est_bert_encoder_set_recompute(m->enc, p->recompute);
  if (!st) st = est_bert_encoder_reserve(m->enc, B, p->max_seq_length, train);
  if (!st && train)
    est_bert_encoder_log_activations(m->enc, "training", B, p->max_seq_length);
  if (!st) st = est_bert_pretraining_heads_reserve(m->heads, B, P);
  /* dropout at this rank's rows of the global batch: N ranks train what one process does */
  if (!st) est_bert_encoder_set_first_row(m->enc, ctx->first_row);
  if (!st && train && ctx->grads) {
    est_bert_encoder_set_grads_ready(m->enc, forward_grads_ready, ctx->grads);
    est_bert_pretraining_heads_set_grads_ready(m->heads, forward_grads_ready, ctx->grads);
  }
  if (!st) {
    m->lm_weights = malloc((size_t)B * (size_t)P * sizeof(float));
    m->ones = malloc((size_t)B * sizeof(float));
    m->ns_labels = malloc((size_t)B * sizeof(int32_t));
    if (!m->lm_weights || !m->ones || !m->ns_labels) st = est_error(EST_ERR_NO_MEMORY, "pretraining model_fn: out of memory");
    else
      for (int i = 0; i < B; i++) m->ones[i] = 1.0f;
  }
  if (!st && ctx->mode == EST_MODE_EVAL) {
    const struct {
      est_metric_kind kind;
      const char *name;
    } ms[4] = {{EST_METRIC_ACCURACY, "masked_lm_accuracy"}, {EST_METRIC_MEAN, "masked_lm_loss"},
               {EST_METRIC_ACCURACY, "next_sentence_accuracy"}, {EST_METRIC_MEAN, "next_sentence_loss"}};
    for (size_t i = 0; i < 4 && !st; i++)
      if (!(st = est_metric_create(&m->metric_objs[i], ms[i].kind, ms[i].name))) m->num_metrics++;
  }
  return st;
}

static est_status pretrainer_init(void *model, est_var_store *vars) {
  pretrainer *m = model;
  if (!m->p->init_checkpoint || !*m->p->init_checkpoint) return EST_OK;
  size_t loaded = 0;
  est_status st = est_init_from_checkpoint(vars, m->p->init_checkpoint, NULL, 0, &loaded);
  if (st != EST_OK) return est_error_prefix("--init_checkpoint=%s: ", m->p->init_checkpoint);
  EST_LOG_INFO("Initialized %zu of %zu variables from %s", loaded, est_vars_count(vars), m->p->init_checkpoint);
  return EST_OK;
}

static est_status pretrainer_create_optimizer(void *model, est_var_store *vars, est_optimizer **out) {
  pretrainer *m = model;
  est_adam_weight_decay_config c = est_adam_weight_decay_config_default();
  c.init_lr = m->p->learning_rate;
  c.schedule = est_lr_schedule_bert(m->p->num_train_steps, m->p->num_warmup_steps);
  c.exclude_from_weight_decay = est_bert_exclude_from_weight_decay;
  c.num_exclude = EST_BERT_NUM_EXCLUDE_FROM_WEIGHT_DECAY;
  return est_optimizer_create_adam_weight_decay(out, vars, &c);
}

/* A [B, len] int32 feature (int64 in the records, cast by the input) of the flag's length. */
static est_status get_feature(const est_features *f, const char *name, est_dtype dt, int64_t len, const char *flag,
                              const est_tensor **t) {
  est_status st = est_features_get(f, name, dt, 2, t);
  if (st != EST_OK) return st;
  if ((*t)->dims[1] != len)
    return est_error(EST_ERR_INVALID_ARGUMENT, "feature %s has length %lld, expected --%s=%lld", name,
                     (long long)(*t)->dims[1], flag, (long long)len);
  return EST_OK;
}

static est_status pretrainer_call(void *model, est_var_store *vars, const est_features *f, est_mode mode,
                                  int64_t global_step, est_estimator_spec *spec) {
  (void)vars;
  pretrainer *m = model;
  const int B = f->batch_size, S = m->p->max_seq_length, P = m->p->max_predictions_per_seq;
  const est_tensor *ids, *mask, *segs, *pos, *lm_ids, *lm_w, *ns;
  est_status st = get_feature(f, "input_ids", EST_DT_INT32, S, "max_seq_length", &ids);
  if (!st) st = get_feature(f, "input_mask", EST_DT_INT32, S, "max_seq_length", &mask);
  if (!st) st = get_feature(f, "segment_ids", EST_DT_INT32, S, "max_seq_length", &segs);
  if (!st) st = get_feature(f, "masked_lm_positions", EST_DT_INT32, P, "max_predictions_per_seq", &pos);
  if (!st) st = get_feature(f, "masked_lm_ids", EST_DT_INT32, P, "max_predictions_per_seq", &lm_ids);
  if (!st) st = get_feature(f, "masked_lm_weights", EST_DT_FLOAT, P, "max_predictions_per_seq", &lm_w);
  if (!st) st = get_feature(f, "next_sentence_labels", EST_DT_INT32, 1, "next_sentence_labels' length 1", &ns);
  if (st != EST_OK) return st;
  memcpy(m->ns_labels, ns->data, (size_t)B * sizeof(int32_t));
  memcpy(m->lm_weights, lm_w->data, (size_t)B * (size_t)P * sizeof(float));

  const int train = mode == EST_MODE_TRAIN;
  st = est_bert_encoder_forward(m->enc, ids->data, mask->data, segs->data, B, S, train, m->seed, (uint64_t)global_step);
  if (st != EST_OK) return st;
  est_bert_pretraining_output o;
  st = est_bert_pretraining_heads_forward(m->heads, pos->data, lm_ids->data, m->lm_weights, m->ns_labels, B, S, P, &o);
  if (st != EST_OK) return st;
  spec->loss = o.loss;
  if (train) {
    st = est_bert_pretraining_heads_backward(m->heads);
    return st ? st : est_bert_encoder_backward(m->enc);
  }
  if (mode != EST_MODE_EVAL)
    return est_error(EST_ERR_UNIMPLEMENTED, "run_pretraining's model_fn supports only TRAIN and EVAL");
  const size_t N = (size_t)B * (size_t)P;
  st = est_metric_update_classes(m->metric_objs[0], lm_ids->data, o.masked_lm_predictions, m->lm_weights, N);
  if (!st) st = est_metric_update_values(m->metric_objs[1], o.masked_lm_example_loss, m->lm_weights, N);
  if (!st) st = est_metric_update_classes(m->metric_objs[2], m->ns_labels, o.next_sentence_predictions, m->ones, (size_t)B);
  if (!st) st = est_metric_update_values(m->metric_objs[3], o.next_sentence_example_loss, m->ones, (size_t)B);
  return st;
}

static est_status pretrainer_metrics(void *model, est_metric *const **metrics, size_t *n) {
  pretrainer *m = model;
  *metrics = m->metric_objs;
  *n = m->num_metrics;
  return EST_OK;
}

est_model_fn est_pretraining_model_fn(const est_pretraining_model_params *params) {
  est_model_fn fn = {
    .name = "bert_pretraining",
    .params = (void *)params,
    .build = pretrainer_build,
    .init = pretrainer_init,
    .create_optimizer = pretrainer_create_optimizer,
    .call = pretrainer_call,
    .metrics = pretrainer_metrics,
    .destroy = pretrainer_destroy,
  };
  return fn;
}
