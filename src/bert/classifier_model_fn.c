/* run_classifier.py's model_fn_builder + create_model as an est_model_fn: the BERT
 * classifier (est/bert_model.h) plugged into the Estimator (docs/run_classifier.md §7, §8).
 *
 *   TRAIN    loss = mean over the batch of -log softmax(logits)[label] (padding rows included,
 *            as the reference); gradients accumulated into the store; AdamWeightDecay with
 *            BERT's warmup + linear decay and global-norm clipping at 1.0.
 *   EVAL     eval_accuracy and eval_loss weighted by is_real_example; eval_f1 (MRPC) or
 *            eval_mcc (CoLA) as extra metrics; the Estimator adds loss and global_step.
 *   PREDICT  "probabilities" [B, C] = softmax(logits).
 * init_checkpoint is loaded on a fresh start only (the Estimator restores model_dir's own
 * checkpoint otherwise), with BERT's assignment map: every checkpoint tensor named like a
 * model variable. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/bert_model.h"
#include "est/estimator.h"
#include "est/log.h"
#include "est/metrics.h"
#include "est/optimizer.h"
#include "run_classifier_internal.h"

typedef struct classifier {
  const est_rc_model_params *p;
  est_bert_classifier *bert;
  est_mode mode;
  int max_batch, seq_len, num_labels;
  uint64_t seed;
  int logged;                          /* "*** Features ***" once per build */
  /* activations of one batch, [max_batch, C] / [max_batch] */
  float *logits, *per_example_loss, *probabilities, *weights;
  int32_t *predictions;
  est_tensor prob_tensor;
  est_metric *metric_objs[3];
  size_t num_metrics;
} classifier;

static const char *const PREDICTION_NAMES[] = {"probabilities"};

est_status est_rc_read_bert_config(const char *path, int64_t *max_position_embeddings, int64_t *vocab_size) {
  est_bert_config cfg;
  est_status st = est_bert_config_from_json_file(&cfg, path);
  if (st != EST_OK) return st;
  *max_position_embeddings = cfg.max_position_embeddings;
  *vocab_size = cfg.vocab_size;
  return EST_OK;
}

static void classifier_destroy(void *model) {
  classifier *m = model;
  if (!m) return;
  est_bert_classifier_free(m->bert);
  for (size_t i = 0; i < m->num_metrics; i++) est_metric_free(m->metric_objs[i]);
  free(m->logits);
  free(m->per_example_loss);
  free(m->probabilities);
  free(m->weights);
  free(m->predictions);
  free(m);
}

static est_status add_metric(classifier *m, est_metric_kind kind, const char *name) {
  est_metric *metric;
  est_status st = est_metric_create(&metric, kind, name);
  if (st != EST_OK) return st;
  m->metric_objs[m->num_metrics++] = metric;
  return EST_OK;
}

/* The BERT model's per-group "gradients final" calls, passed on to the Estimator, which
 * starts that part's all-reduce while backward goes on (a no-op in one process). */
static void forward_grads_ready(void *grads, size_t offset, size_t count) {
  (void)est_grads_ready(grads, offset, count); /* a failure is kept by the notifier and fails the step */
}

static est_status classifier_build(const est_model_context *ctx, est_var_store *vars, void **out) {
  const est_rc_model_params *p = ctx->params;
  classifier *m = calloc(1, sizeof *m);
  if (!m) return est_error(EST_ERR_NO_MEMORY, "classifier model_fn: out of memory");
  m->p = p;
  m->mode = ctx->mode;
  m->max_batch = ctx->batch_size;
  m->seq_len = p->max_seq_length;
  m->num_labels = p->num_labels;
  m->seed = ctx->seed;
  est_status st = est_bert_classifier_create(&m->bert, &p->bert_config, p->num_labels, vars);
  if (st == EST_OK && ctx->mode == EST_MODE_TRAIN)
    est_bert_encoder_set_recompute(est_bert_classifier_encoder(m->bert), p->recompute);
  /* EVAL and PREDICT never run backward: their activations need far less memory. */
  if (st == EST_OK)
    st = ctx->mode == EST_MODE_TRAIN ? est_bert_classifier_reserve(m->bert, m->max_batch, m->seq_len)
                                     : est_bert_classifier_reserve_forward_only(m->bert, m->max_batch, m->seq_len);
  if (st == EST_OK && ctx->mode == EST_MODE_TRAIN)
    est_bert_encoder_log_activations(est_bert_classifier_encoder(m->bert), "training", m->max_batch, m->seq_len);
  if (st == EST_OK && ctx->mode == EST_MODE_TRAIN && ctx->grads)
    est_bert_classifier_set_grads_ready(m->bert, forward_grads_ready, ctx->grads);
  if (st == EST_OK) est_bert_classifier_set_first_row(m->bert, ctx->first_row);
  size_t B = (size_t)m->max_batch, C = (size_t)m->num_labels;
  if (st == EST_OK) {
    m->logits = malloc(B * C * sizeof(float));
    m->probabilities = malloc(B * C * sizeof(float));
    m->per_example_loss = malloc(B * sizeof(float));
    m->weights = malloc(B * sizeof(float));
    m->predictions = malloc(B * sizeof(int32_t));
    if (!m->logits || !m->probabilities || !m->per_example_loss || !m->weights || !m->predictions)
      st = est_error(EST_ERR_NO_MEMORY, "classifier model_fn: out of memory for batch %zu", B);
  }
  if (st == EST_OK && ctx->mode == EST_MODE_EVAL) {
    /* metric_fn: accuracy and mean loss, both weighted by is_real_example. */
    st = add_metric(m, EST_METRIC_ACCURACY, "eval_accuracy");
    if (st == EST_OK) st = add_metric(m, EST_METRIC_MEAN, "eval_loss");
    if (st == EST_OK && p->extra_metric == EST_RC_METRIC_F1) st = add_metric(m, EST_METRIC_F1, "eval_f1");
    if (st == EST_OK && p->extra_metric == EST_RC_METRIC_MCC) st = add_metric(m, EST_METRIC_MCC, "eval_mcc");
  }
  if (st != EST_OK) {
    classifier_destroy(m);
    return st;
  }
  *out = m;
  return EST_OK;
}

/* The reference's Scaffold: init_from_checkpoint with get_assignment_map_from_checkpoint. */
static est_status classifier_init(void *model, est_var_store *vars) {
  classifier *m = model;
  if (!m->p->init_checkpoint || !*m->p->init_checkpoint) return EST_OK;
  size_t loaded = 0;
  est_status st = est_init_from_checkpoint(vars, m->p->init_checkpoint, NULL, 0, &loaded);
  if (st != EST_OK) return est_error_prefix("--init_checkpoint=%s: ", m->p->init_checkpoint);
  EST_LOG_INFO("Initialized %zu of %zu variables from %s", loaded, est_vars_count(vars), m->p->init_checkpoint);
  return EST_OK;
}

static est_status classifier_create_optimizer(void *model, est_var_store *vars, est_optimizer **out) {
  classifier *m = model;
  /* optimization.create_optimizer: AdamWeightDecay(weight_decay_rate 0.01, b1 0.9, b2 0.999,
   * eps 1e-6, exclude LayerNorm/layer_norm/bias), clip_by_global_norm(1.0). */
  est_adam_weight_decay_config c = est_adam_weight_decay_config_default();
  c.init_lr = m->p->learning_rate;
  c.schedule = est_lr_schedule_bert(m->p->num_train_steps, m->p->num_warmup_steps);
  c.exclude_from_weight_decay = est_bert_exclude_from_weight_decay;
  c.num_exclude = EST_BERT_NUM_EXCLUDE_FROM_WEIGHT_DECAY;
  return est_optimizer_create_adam_weight_decay(out, vars, &c);
}

static void log_features(const est_features *f) {
  /* model_fn's "*** Features ***", sorted by name as the reference iterates sorted keys.
   * (The estimator logs the variable table with its *INIT_FROM_CKPT* marks.) */
  EST_LOG_INFO("*** Features ***");
  size_t order[16];
  size_t n = f->count < 16 ? f->count : 16;
  for (size_t i = 0; i < n; i++) order[i] = i;
  for (size_t i = 1; i < n; i++)
    for (size_t j = i; j > 0 && strcmp(f->names[order[j - 1]], f->names[order[j]]) > 0; j--) {
      size_t t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  for (size_t i = 0; i < n; i++) {
    const est_tensor *t = &f->tensors[order[i]];
    char shape[64] = "(";
    size_t len = 1;
    for (int d = 0; d < t->rank; d++)
      len += (size_t)snprintf(shape + len, sizeof shape - len, "%s%lld", d ? ", " : "", (long long)t->dims[d]);
    snprintf(shape + len, sizeof shape - len, t->rank == 1 ? ",)" : ")");
    EST_LOG_INFO("  name = %s, shape = %s", f->names[order[i]], shape);
  }
}

static est_status classifier_call(void *model, est_var_store *vars, const est_features *f, est_mode mode,
                                  int64_t global_step, est_estimator_spec *spec) {
  classifier *m = model;
  const int B = f->batch_size, S = m->seq_len, C = m->num_labels;
  if (!m->logged) {
    log_features(f);
    /* The reference's model_fn logs the variable table in every mode; the estimator does
     * it for training only. */
    if (mode != EST_MODE_TRAIN) est_log_variables(vars);
    m->logged = 1;
  }
  const est_tensor *ids, *mask, *segs, *labels = NULL, *real = NULL;
  est_status st = est_features_get(f, "input_ids", EST_DT_INT32, 2, &ids);
  if (st == EST_OK) st = est_features_get(f, "input_mask", EST_DT_INT32, 2, &mask);
  if (st == EST_OK) st = est_features_get(f, "segment_ids", EST_DT_INT32, 2, &segs);
  if (st != EST_OK) return st;
  if (ids->dims[1] != S || mask->dims[1] != S || segs->dims[1] != S)
    return est_error(EST_ERR_INVALID_ARGUMENT,
                     "input_ids/input_mask/segment_ids have length %lld/%lld/%lld, expected max_seq_length %d "
                     "(records written with another --max_seq_length?)",
                     (long long)ids->dims[1], (long long)mask->dims[1], (long long)segs->dims[1], S);
  if (mode != EST_MODE_PREDICT) {
    st = est_features_get(f, "label_ids", EST_DT_INT32, 1, &labels);
    if (st != EST_OK) return st;
  }
  /* is_real_example: the feature when present, else all ones (the reference's fallback). */
  if (est_features_find(f, "is_real_example")) {
    st = est_features_get(f, "is_real_example", EST_DT_INT32, 1, &real);
    if (st != EST_OK) return st;
  }
  for (int i = 0; i < B; i++) m->weights[i] = real ? (float)((const int32_t *)real->data)[i] : 1.0f;

  st = est_bert_classifier_forward(m->bert, ids->data, mask->data, segs->data, labels ? labels->data : NULL, B, S,
                                   mode == EST_MODE_TRAIN, m->seed, (uint64_t)global_step, m->logits,
                                   labels ? m->per_example_loss : NULL, labels ? &spec->loss : NULL);
  if (st != EST_OK) return st;

  if (mode == EST_MODE_TRAIN) return est_bert_classifier_backward(m->bert);

  if (mode == EST_MODE_EVAL) {
    /* argmax(logits), the first maximum on ties (tf.argmax). */
    for (int i = 0; i < B; i++) {
      const float *z = m->logits + (size_t)i * C;
      int best = 0;
      for (int c = 1; c < C; c++)
        if (z[c] > z[best]) best = c;
      m->predictions[i] = best;
    }
    const int32_t *y = labels->data;
    for (size_t k = 0; k < m->num_metrics; k++) {
      est_metric *metric = m->metric_objs[k];
      st = est_metric_get_kind(metric) == EST_METRIC_MEAN
               ? est_metric_update_values(metric, m->per_example_loss, m->weights, (size_t)B)
               : est_metric_update_classes(metric, y, m->predictions, m->weights, (size_t)B);
      if (st != EST_OK) return st;
    }
    return EST_OK;
  }

  est_bert_classifier_probabilities(m->probabilities, m->logits, B, C);
  m->prob_tensor = (est_tensor){.dtype = EST_DT_FLOAT, .rank = 2, .dims = {B, C}, .data = m->probabilities};
  spec->num_predictions = 1;
  spec->prediction_names = PREDICTION_NAMES;
  spec->predictions = &m->prob_tensor;
  return EST_OK;
}

static est_status classifier_metrics(void *model, est_metric *const **metrics, size_t *n) {
  classifier *m = model;
  *metrics = m->metric_objs;
  *n = m->num_metrics;
  return EST_OK;
}

est_model_fn est_rc_classifier_model_fn(const est_rc_model_params *params) {
  est_model_fn fn = {
    .name = "bert_classifier",
    .params = (void *)params,
    .build = classifier_build,
    .init = classifier_init,
    .create_optimizer = classifier_create_optimizer,
    .call = classifier_call,
    .metrics = classifier_metrics,
    .destroy = classifier_destroy,
  };
  return fn;
}
