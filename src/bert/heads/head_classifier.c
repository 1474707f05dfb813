/* run_classifier.py create_model's head, in one file: the layer on the encoder's pooled
 * output and the est_bert_head_type around it (est/bert_head.h; docs/run_classifier.md §7, §8).
 *
 * The layer (est_bert_classifier_head_*, est/bert_classifier.h), on the pooled output [B,H]:
 * dropout(0.1, hard-coded) -> logits = pooled_d . output_weights^T + output_bias [B,C] ->
 * per-example softmax cross-entropy, loss = their mean. Backward adds d loss / d pooled into
 * the encoder's pooled-output gradient (est/bert_encoder.h).
 *
 * The other families' kinds (est_classifier_kind, docs/heads.md §7; ModernBERT's dense -> act ->
 * LayerNorm -> dropout -> classifier on the first token or the mean of the tokens): RoBERTa's, XLM-R's and
 * ELECTRA's heads (dropout -> dense -> tanh / GELU -> dropout -> out_proj) and DistilBERT's
 * (pre_classifier -> ReLU -> dropout -> classifier) on the first token of the sequence output,
 * at the config's classifier dropout; backward adds into that token's rows of the encoder's
 * sequence-output gradient.
 *
 * The head type, its features, metrics and prediction:
 *   TRAIN    loss = mean over the batch of -log softmax(logits)[label] (padding rows
 *            included, as the reference).
 *   EVAL     eval_accuracy and eval_loss weighted by is_real_example; eval_f1 (MRPC) or
 *            eval_mcc (CoLA) as extra metrics.
 *   PREDICT  "probabilities" [B, C] = softmax(logits), and "logits" [B, C].
 *
 * Served (est/served_head.h): est_model.json's "labels" name the probabilities; requests and
 * input lines of the text form (a text pair or tokens); :classify answers per label. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "est/bert_classifier.h"
#include "est/bert_head.h"
#include "est/metrics.h"
#include "est/processors.h"
#include "est/served_head.h"

/* ---- the layer ----------------------------------------------------------------------- */

/* run_classifier's dropout on the pooled output: keep_prob 0.9, not from the config. */
static const float CLASSIFIER_DROPOUT = 0.1f;

struct est_bert_classifier_head {
  est_var_store *vs;
  int H, C;
  est_classifier_kind kind;
  float dropout;                     /* the kind's; EST_CLASSIFIER_BERT: CLASSIFIER_DROPOUT */
  int dense_w, dense_b;              /* classifier/dense [H,H], [H]; -1 under EST_CLASSIFIER_BERT
                                        (dense_b -1 too: ModernBERT's head without classifier_bias) */
  int norm_g, norm_b;                /* classifier/LayerNorm (EST_CLASSIFIER_MODERNBERT), else -1 */
  est_activation act_fn;             /* the dense kinds' activation */
  float norm_eps;
  int out_w, out_b;                  /* output_weights [C,H], output_bias [C] */
  int max_B;
  void *buf;
  size_t buf_bytes;
  /* [max_B, H] / [max_B, C] / [max_B] regions of buf */
  float *pooled_d, *logits, *probs, *losses;
  uint8_t *mask;
  int32_t *labels;
  float *d_logits, *d_pooled_d;      /* activation-gradient scratch */
  /* the dense kinds: input_d = dropout(input), pre = input_d . Wd + bd, act = f(pre), then
   * pooled_d = dropout(act) is the output layer's input */
  float *input_d, *pre, *act, *d_act, *d_input_d;
  uint8_t *in_mask;
  /* EST_CLASSIFIER_MODERNBERT: normed = LayerNorm(act) [B,H] (then dropout), its stats [B] */
  float *normed, *ln_mean, *ln_rstd;
  /* the last forward: valid with labels (its loss), ran with or without */
  int B, valid, ran;
  float p, p_in;
  est_bert_grads_ready_fn ready_fn;
  void *ready_ctx;
  int64_t first_row; /* est_bert_classifier_head_set_first_row */
  est_precision precision; /* est_bert_classifier_head_set_precision: the encoder's */
};

est_classifier_kind est_classifier_kind_of(est_model_family family) {
  switch (family) {
  case EST_FAMILY_ROBERTA:
  case EST_FAMILY_XLM_ROBERTA: return EST_CLASSIFIER_DENSE_TANH;
  case EST_FAMILY_ELECTRA: return EST_CLASSIFIER_DENSE_GELU;
  case EST_FAMILY_DISTILBERT: return EST_CLASSIFIER_DENSE_RELU;
  case EST_FAMILY_MODERNBERT: return EST_CLASSIFIER_MODERNBERT;
  default: return EST_CLASSIFIER_BERT;
  }
}

/* A variable's value or gradient; NULL for -1 (a bias the options leave out). */
static float *head_value(const est_bert_classifier_head *h, int idx) {
  return idx < 0 ? NULL : est_vars_value(h->vs, (size_t)idx);
}
static float *head_grad(const est_bert_classifier_head *h, int idx) {
  return idx < 0 ? NULL : est_vars_grad(h->vs, (size_t)idx);
}

static est_activation kind_activation(est_classifier_kind kind) {
  return kind == EST_CLASSIFIER_DENSE_TANH   ? EST_ACT_TANH
         : kind == EST_CLASSIFIER_DENSE_GELU || kind == EST_CLASSIFIER_MODERNBERT ? EST_ACT_GELU_EXACT
                                             : EST_ACT_RELU;
}

est_status est_bert_classifier_head_create(est_bert_classifier_head **out, int hidden_size, int num_labels,
                                           est_var_store *vs) {
  return est_bert_classifier_head_create_kind(out, hidden_size, num_labels, EST_CLASSIFIER_BERT, 0.0, vs);
}

est_status est_bert_classifier_head_create_kind(est_bert_classifier_head **out, int hidden_size, int num_labels,
                                                est_classifier_kind kind, double dropout, est_var_store *vs) {
  const est_classifier_head_options o = {.kind = kind, .dropout = dropout, .act = kind_activation(kind),
                                         .dense_bias = 1, .norm_bias = 1, .norm_eps = EST_LAYERNORM_EPS};
  return est_bert_classifier_head_create_opts(out, hidden_size, num_labels, &o, vs);
}

est_classifier_head_options est_classifier_head_options_of(const est_bert_config *cfg) {
  const est_classifier_kind kind = est_classifier_kind_of(cfg->opt.family);
  est_classifier_head_options o = {.kind = kind, .dropout = cfg->opt.classifier_dropout,
                                   .act = kind_activation(kind), .dense_bias = 1, .norm_bias = 1,
                                   .norm_eps = cfg->layer_norm_eps};
  if (kind == EST_CLASSIFIER_MODERNBERT) {
    o.act = cfg->opt.classifier_act;
    o.dense_bias = cfg->opt.classifier_bias;
    o.norm_bias = !cfg->opt.no_bias;
    o.mean_pooling = cfg->opt.classifier_mean_pooling;
  }
  return o;
}

est_status est_bert_classifier_head_create_opts(est_bert_classifier_head **out, int hidden_size, int num_labels,
                                                const est_classifier_head_options *o, est_var_store *vs) {
  *out = NULL;
  const est_classifier_kind kind = o->kind;
  const double dropout = o->dropout;
  if (num_labels <= 0) return est_error(EST_ERR_INVALID_ARGUMENT, "num_labels must be positive, got %d", num_labels);
  if ((unsigned)kind > (unsigned)EST_CLASSIFIER_MODERNBERT)
    return est_error(EST_ERR_INVALID_ARGUMENT, "classifier head: unknown kind %d", (int)kind);
  if (!(dropout >= 0 && dropout < 1))
    return est_error(EST_ERR_INVALID_ARGUMENT, "classifier head: dropout %g is not in [0, 1)", dropout);
  est_bert_classifier_head *h = calloc(1, sizeof *h);
  if (!h) return est_error(EST_ERR_NO_MEMORY, "out of memory creating the classifier head");
  h->vs = vs;
  h->H = hidden_size;
  h->C = num_labels;
  h->kind = kind;
  h->dropout = kind == EST_CLASSIFIER_BERT ? CLASSIFIER_DROPOUT : (float)dropout;
  h->dense_w = h->dense_b = h->norm_g = h->norm_b = -1;
  h->act_fn = o->act;
  h->norm_eps = (float)o->norm_eps;
  est_status st = EST_OK;
  if (kind != EST_CLASSIFIER_BERT) {
    int64_t ddims[2] = {hidden_size, hidden_size}, dbdims[1] = {hidden_size};
    st = est_vars_declare(vs, "classifier/dense/kernel", 2, ddims, est_init_truncated_normal(0.02f), &h->dense_w);
    if (st == EST_OK && o->dense_bias)
      st = est_vars_declare(vs, "classifier/dense/bias", 1, dbdims, est_init_zeros(), &h->dense_b);
    if (st == EST_OK && kind == EST_CLASSIFIER_MODERNBERT) { /* ModernBertPredictionHead's norm */
      if (o->norm_bias) st = est_vars_declare(vs, "classifier/LayerNorm/beta", 1, dbdims, est_init_zeros(), &h->norm_b);
      if (st == EST_OK)
        st = est_vars_declare(vs, "classifier/LayerNorm/gamma", 1, dbdims, est_init_ones(), &h->norm_g);
    }
  }
  /* run_classifier hard-codes stddev 0.02 here, whatever initializer_range says. */
  int64_t wdims[2] = {num_labels, hidden_size}, bdims[1] = {num_labels};
  if (st == EST_OK)
    st = est_vars_declare(vs, "output_weights", 2, wdims, est_init_truncated_normal(0.02f), &h->out_w);
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
  const int dense = h->kind != EST_CLASSIFIER_BERT;
  const size_t DH = dense ? B * H : 0; /* the dense kinds' regions */
  const size_t NH = h->kind == EST_CLASSIFIER_MODERNBERT ? B * H : 0, NB = NH ? B : 0;
  const size_t sizes[] = {B * H * 4, B * C * 4, B * C * 4, B * 4,  B * H,  B * 4,  B * C * 4, B * H * 4,
                          DH * 4,    DH * 4,    DH * 4,    DH * 4, DH * 4, DH,     NH * 4,    NB * 4, NB * 4};
  enum { NREG = sizeof sizes / sizeof *sizes };
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
  void *regions[NREG];
  for (size_t i = 0; i < NREG; i++) {
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
  h->input_d = dense ? regions[8] : NULL;
  h->pre = dense ? regions[9] : NULL;
  h->act = dense ? regions[10] : NULL;
  h->d_act = dense ? regions[11] : NULL;
  h->d_input_d = dense ? regions[12] : NULL;
  h->in_mask = dense ? regions[13] : NULL;
  h->normed = NH ? regions[14] : NULL;
  h->ln_mean = NH ? regions[15] : NULL;
  h->ln_rstd = NH ? regions[16] : NULL;
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
  h->valid = h->ran = 0;
  if (!h->buf || batch <= 0 || batch > h->max_B)
    return est_error(EST_ERR_INVALID_ARGUMENT, "classifier head: batch %d exceeds the reservation %d", batch,
                     h->max_B);
  const int B = batch, H = h->H, C = h->C;
  const float p = training ? h->dropout : 0.0f;
  const size_t first = (size_t)h->first_row * (size_t)H;
  float p_in = 0.0f;
  if (h->kind != EST_CLASSIFIER_BERT) {
    /* [dropout ->] dense -> act [-> LayerNorm]; DistilBERT and ModernBERT have no dropout
     * before the dense */
    p_in = h->kind == EST_CLASSIFIER_DENSE_RELU || h->kind == EST_CLASSIFIER_MODERNBERT ? 0.0f : p;
    est_dropout_forward_at(h->input_d, h->in_mask, pooled, (size_t)B * H, first, p_in, dropout_seed, step,
                           EST_BERT_DROPOUT_HEAD_FIRST + 1);
    est_matmul_forward(h->pre, h->input_d, est_vars_value(h->vs, (size_t)h->dense_w), head_value(h, h->dense_b), B,
                       H, H, 0, h->precision);
    est_activation_forward(h->act, h->pre, (size_t)B * H, h->act_fn);
    pooled = h->act;
    if (h->kind == EST_CLASSIFIER_MODERNBERT) {
      est_layernorm_forward_eps(h->normed, h->ln_mean, h->ln_rstd, h->act, head_value(h, h->norm_g),
                                head_value(h, h->norm_b), B, H, h->norm_eps);
      pooled = h->normed;
    }
  }
  est_dropout_forward_at(h->pooled_d, h->mask, pooled, (size_t)B * H, first, p, dropout_seed, step,
                         EST_BERT_DROPOUT_HEAD_FIRST);
  est_matmul_forward(h->logits, h->pooled_d, est_vars_value(h->vs, (size_t)h->out_w),
                     est_vars_value(h->vs, (size_t)h->out_b), B, H, C, 1,
                     est_precision_of_logits(h->precision));
  if (logits_out) memcpy(logits_out, h->logits, (size_t)B * C * sizeof(float));
  h->B = B;
  h->p = p;
  h->p_in = p_in;
  h->ran = 1;
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

static est_status backward_from_d_logits(est_bert_classifier_head *h, float *d_pooled);

est_status est_bert_classifier_head_backward(est_bert_classifier_head *h, float *d_pooled) {
  if (!h->valid)
    return est_error(EST_ERR_FAILED_PRECONDITION,
                     "classifier head backward needs a successful forward pass with label_ids just before it");
  const int B = h->B, C = h->C;
  /* loss = mean_b losses[b] -> d logits = (probs - onehot) / B */
  memset(h->d_logits, 0, (size_t)B * C * sizeof(float));
  est_crossentropy_backward(h->d_logits, h->probs, h->labels, 1.0f / (float)B, B, C);
  return backward_from_d_logits(h, d_pooled);
}

est_status est_bert_classifier_head_backward_logits(est_bert_classifier_head *h, const float *d_logits,
                                                    float *d_pooled) {
  if (!h->ran)
    return est_error(EST_ERR_FAILED_PRECONDITION, "classifier head backward needs a successful forward pass just "
                     "before it");
  memcpy(h->d_logits, d_logits, (size_t)h->B * h->C * sizeof(float));
  return backward_from_d_logits(h, d_pooled);
}

/* h->d_logits [B, C] -> the parameters' gradients (added) and d_pooled (added). */
static est_status backward_from_d_logits(est_bert_classifier_head *h, float *d_pooled) {
  const int B = h->B, H = h->H, C = h->C;
  float *dW = est_vars_grad(h->vs, (size_t)h->out_w), *db = est_vars_grad(h->vs, (size_t)h->out_b);
  if (h->kind != EST_CLASSIFIER_BERT) {
    /* logits = dropout(act) W^T + b: d act written */
    est_matmul_backward_mode(h->d_pooled_d, dW, db, h->d_logits, h->pooled_d,
                             est_vars_value(h->vs, (size_t)h->out_w), B, H, C, 1, EST_GRAD_WRITE, h->precision);
    est_dropout_backward_mode(h->d_act, h->d_pooled_d, h->mask, (size_t)B * H, h->p, EST_GRAD_WRITE);
    const float *d_act = h->d_act;
    if (h->kind == EST_CLASSIFIER_MODERNBERT) { /* normed = LayerNorm(act): d act into d_input_d (free: p_in 0) */
      est_layernorm_backward_mode(h->d_input_d, head_grad(h, h->norm_g), head_grad(h, h->norm_b), h->d_act, h->act,
                                  head_value(h, h->norm_g), h->ln_mean, h->ln_rstd, B, H, EST_GRAD_WRITE);
      d_act = h->d_input_d;
    }
    /* act = f(pre): d pre written over d_pooled_d */
    est_activation_backward_mode(h->d_pooled_d, d_act, h->pre, (size_t)B * H, h->act_fn, EST_GRAD_WRITE);
    /* pre = input_d Wd + bd; input_d = dropout(input): d input added into d_pooled */
    float *d_in = h->p_in > 0.0f ? h->d_input_d : d_pooled;
    est_matmul_backward_mode(d_in, est_vars_grad(h->vs, (size_t)h->dense_w), head_grad(h, h->dense_b),
                             h->d_pooled_d, h->input_d, est_vars_value(h->vs, (size_t)h->dense_w), B, H, H, 0,
                             d_in != d_pooled ? EST_GRAD_WRITE : EST_GRAD_ADD, h->precision);
    est_bert_report_grads_ready(h->vs, (size_t)h->dense_w, (size_t)h->out_b, h->ready_fn, h->ready_ctx);
    if (d_in != d_pooled) est_dropout_backward(d_pooled, d_in, h->in_mask, (size_t)B * H, h->p_in);
    return EST_OK;
  }
  /* logits = pooled_d W^T + b; pooled_d = dropout(pooled), the identity when p is 0 */
  float *d_pd = h->p > 0.0f ? h->d_pooled_d : d_pooled;
  /* its own buffer is written; d_pooled (what the encoder reads) is added into */
  est_matmul_backward_mode(d_pd, dW, db, h->d_logits, h->pooled_d, est_vars_value(h->vs, (size_t)h->out_w), B, H, C,
                           1, d_pd != d_pooled ? EST_GRAD_WRITE : EST_GRAD_ADD, h->precision);
  est_bert_report_grads_ready(h->vs, (size_t)h->out_w, (size_t)h->out_b, h->ready_fn, h->ready_ctx);
  if (d_pd != d_pooled) est_dropout_backward(d_pooled, d_pd, h->mask, (size_t)B * H, h->p);
  return EST_OK;
}

void est_bert_classifier_probabilities(float *probabilities, const float *logits, int batch, int num_labels) {
  est_softmax_forward(probabilities, logits, batch, num_labels);
}

/* ---- the head ------------------------------------------------------------------------ */

typedef struct classifier {
  est_bert_classifier_head *head;
  est_bert_encoder *enc;
  int num_labels, extra_metric;
  int multi_label;         /* sigmoid + BCE over label_ids [B, C] (est_bert_classifier_head_params) */
  int regression;          /* PREDICT: the raw logits */
  int pair_loss;           /* an est_pair_loss: BCE or MSE over label_values [B] (one logit) */
  const float *values;     /* pair loss: the last forward's label_values [B], or NULL */
  const int32_t *hot;      /* multi-label: the last forward's label_ids [B, C], or NULL */
  float *d_logits;         /* multi-label: [max_batch, C] */
  int32_t *ones;           /* multi-label: [max_batch] of 1, exact match's "labels" */
  int first_token;         /* 1: the input is the first token's row (the dense kinds) */
  int mean_pooling;        /* 1: ... or the mean of the unpadded tokens' rows (ModernBERT's "mean") */
  float *first, *d_first;  /* [max_batch, H] then */
  const int32_t *mask;     /* mean pooling: the last forward's input_mask [B,S] */
  /* one batch, [max_batch, C] / [max_batch] */
  float *logits, *per_example_loss, *probabilities, *weights;
  int32_t *predictions;
  const int32_t *labels;   /* the last forward's label_ids, or NULL */
  est_tensor prob_tensor[2];   /* probabilities, logits */
  est_metric *metric_objs[3];
  size_t num_metrics;
} classifier;

/* "logits" too, for run_classifier's long documents (the windows' logits pooled). */
static const char *const PREDICTION_NAMES[] = {"probabilities", "logits"};

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
  free(m->first);
  free(m->d_first);
  free(m->d_logits);
  free(m->ones);
  free(m);
}

static est_status classifier_create(void **out, const est_bert_head_context *ctx) {
  const est_bert_classifier_head_params *p = ctx->params;
  classifier *m = calloc(1, sizeof *m);
  if (!m) return est_error(EST_ERR_NO_MEMORY, "classifier head: out of memory");
  *out = m;
  m->enc = ctx->encoder;
  m->num_labels = p->num_labels;
  m->extra_metric = p->multi_label ? EST_TASK_METRIC_NONE : p->extra_metric;
  m->multi_label = p->multi_label;
  m->regression = p->regression;
  m->pair_loss = p->pair_loss;
  if (p->pair_loss && (p->pair_loss != EST_PAIR_LOSS_BCE && p->pair_loss != EST_PAIR_LOSS_MSE))
    return est_error(EST_ERR_INVALID_ARGUMENT, "classifier head: unknown pair loss %d", p->pair_loss);
  if (p->pair_loss && (p->num_labels != 1 || p->multi_label))
    return est_error(EST_ERR_INVALID_ARGUMENT, "classifier head: a pair loss scores with one output, not %d%s",
                     p->num_labels, p->multi_label ? " multi-label ones" : "");
  /* the family's *ForSequenceClassification head (docs/heads.md §7) */
  const est_bert_config *cfg = est_bert_encoder_config(ctx->encoder);
  const est_classifier_head_options o = est_classifier_head_options_of(cfg);
  m->first_token = o.kind != EST_CLASSIFIER_BERT;
  m->mean_pooling = o.mean_pooling;
  return est_bert_classifier_head_create_opts(&m->head, cfg->hidden_size, p->num_labels, &o, ctx->vars);
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
  if (m->first_token) {
    const size_t H = (size_t)est_bert_encoder_config(m->enc)->hidden_size;
    m->first = malloc(B * H * sizeof(float));
    m->d_first = malloc(B * H * sizeof(float));
    if (!m->first || !m->d_first)
      return est_error(EST_ERR_NO_MEMORY, "classifier head: out of memory for batch %zu", B);
  }
  if (!m->logits || !m->probabilities || !m->per_example_loss || !m->weights || !m->predictions)
    return est_error(EST_ERR_NO_MEMORY, "classifier head: out of memory for batch %zu", B);
  if (m->multi_label || m->pair_loss) {
    free(m->d_logits), free(m->ones);
    m->d_logits = malloc(B * C * sizeof(float));
    m->ones = malloc(B * sizeof(int32_t));
    if (!m->d_logits || !m->ones) return est_error(EST_ERR_NO_MEMORY, "classifier head: out of memory for batch %zu", B);
    for (size_t i = 0; i < B; i++) m->ones[i] = 1;
  }
  if (ctx->mode != EST_MODE_EVAL) return EST_OK;
  if (m->pair_loss) return add_metric(m, EST_METRIC_MEAN, "eval_loss"); /* the ranking metrics: the task's */
  /* metric_fn: accuracy and mean loss, both weighted by is_real_example. */
  st = add_metric(m, EST_METRIC_ACCURACY, "eval_accuracy");
  if (st == EST_OK) st = add_metric(m, EST_METRIC_MEAN, "eval_loss");
  if (st == EST_OK && m->extra_metric == EST_TASK_METRIC_F1) st = add_metric(m, EST_METRIC_F1, "eval_f1");
  if (st == EST_OK && m->extra_metric == EST_TASK_METRIC_MCC) st = add_metric(m, EST_METRIC_MCC, "eval_mcc");
  return st;
}

/* Multi-label: BCEWithLogitsLoss over the last forward's logits and m->hot [B, C]; each
 * example's loss (its mean over the labels) into per_example_loss; returns the mean over all
 * B x C terms. Each term max(z, 0) - z y + log1p(exp(-|z|)), torch's stable form. */
static float multi_label_loss(classifier *m, int B) {
  const int C = m->num_labels;
  double total = 0.0;
  for (int i = 0; i < B; i++) {
    double sum = 0.0;
    for (int c = 0; c < C; c++) {
      const double z = m->logits[(size_t)i * C + c], y = m->hot[(size_t)i * C + c];
      sum += (z > 0 ? z : 0.0) - z * y + log1p(exp(-fabs(z)));
    }
    m->per_example_loss[i] = (float)(sum / C);
    total += sum;
  }
  return (float)(total / ((double)B * C));
}

static float sigmoid(float z) { return z >= 0 ? 1.0f / (1.0f + expf(-z)) : expf(z) / (1.0f + expf(z)); }

/* Pair loss over the last forward's logits [B, 1] and m->values [B], each example's into
 * per_example_loss; returns their mean. BCE: torch's stable BCEWithLogitsLoss term
 * max(z, 0) - z y + log1p(exp(-|z|)); MSE: (z - y)^2. */
static float pair_loss(classifier *m, int B) {
  double total = 0.0;
  for (int i = 0; i < B; i++) {
    const double z = m->logits[i], y = m->values[i];
    const double l = m->pair_loss == EST_PAIR_LOSS_BCE ? (z > 0 ? z : 0.0) - z * y + log1p(exp(-fabs(z)))
                                                       : (z - y) * (z - y);
    m->per_example_loss[i] = (float)l;
    total += l;
  }
  return (float)(total / B);
}

static est_status classifier_forward(void *head, const est_bert_head_batch *b, float *loss) {
  classifier *m = head;
  const est_features *f = b->features;
  const est_tensor *labels = NULL, *real = NULL;
  est_status st = EST_OK;
  if (m->pair_loss) { /* label_values, not label_ids */
    const est_tensor *values = NULL;
    if (b->mode != EST_MODE_PREDICT && (st = est_features_get(f, "label_values", EST_DT_FLOAT, 1, &values)) != EST_OK)
      return st;
    m->values = values ? values->data : NULL;
    for (int i = 0; m->values && i < b->batch; i++)
      if (!isfinite(m->values[i]) || (m->pair_loss == EST_PAIR_LOSS_BCE && (m->values[i] < 0 || m->values[i] > 1)))
        return est_error(EST_ERR_INVALID_ARGUMENT, "label_values[%d] = %g: %s", i, (double)m->values[i],
                         m->pair_loss == EST_PAIR_LOSS_BCE ? "binary cross-entropy needs a label in [0, 1]"
                                                           : "not a finite number");
  } else if (b->mode != EST_MODE_PREDICT &&
             (st = est_features_get(f, "label_ids", EST_DT_INT32, m->multi_label ? 2 : 1, &labels)) != EST_OK) {
    return st;
  }
  if (labels && m->regression)
    return est_error(EST_ERR_UNIMPLEMENTED, "classifier head: a regression head (problem_type regression) is "
                     "served only here; est run_rerank --loss=mse trains a one-output score");
  if (labels && m->multi_label && labels->dims[1] != m->num_labels)
    return est_error(EST_ERR_INVALID_ARGUMENT, "label_ids has %lld labels per example, the classifier %d",
                     (long long)labels->dims[1], m->num_labels);
  /* is_real_example: the feature when present, else all ones (the reference's fallback). */
  if (est_features_find(f, "is_real_example") &&
      (st = est_features_get(f, "is_real_example", EST_DT_INT32, 1, &real)) != EST_OK)
    return st;
  for (int i = 0; i < b->batch; i++) m->weights[i] = real ? (float)((const int32_t *)real->data)[i] : 1.0f;
  m->labels = labels ? labels->data : NULL;
  est_bert_classifier_head_set_precision(m->head, est_bert_encoder_precision(m->enc));
  const float *input = est_bert_encoder_pooled_output(m->enc);
  if (m->mean_pooling) { /* sum_s mask[b,s] seq[b,s,:] / sum_s mask[b,s] (ModernBertForSequenceClassification) */
    const est_tensor *mask;
    if ((st = est_features_get(f, "input_mask", EST_DT_INT32, 2, &mask)) != EST_OK) return st;
    m->mask = mask->data;
    const size_t H = (size_t)est_bert_encoder_config(m->enc)->hidden_size, S = (size_t)b->seq_len;
    const float *seq = est_bert_encoder_sequence_output(m->enc);
    for (size_t i = 0; i < (size_t)b->batch; i++) {
      float *out = m->first + i * H;
      double count = 0;
      memset(out, 0, H * sizeof(float));
      for (size_t t = 0; t < S; t++) {
        if (!m->mask[i * S + t]) continue;
        count += m->mask[i * S + t];
        for (size_t j = 0; j < H; j++) out[j] += (float)m->mask[i * S + t] * seq[(i * S + t) * H + j];
      }
      /* a row without tokens pools to zeros (transformers divides 0 by 0) */
      const float inv = count > 0 ? (float)(1.0 / count) : 0.0f;
      for (size_t j = 0; j < H; j++) out[j] *= inv;
    }
    input = m->first;
  } else if (m->first_token) { /* features[:, 0, :] of the sequence output */
    const size_t H = (size_t)est_bert_encoder_config(m->enc)->hidden_size, S = (size_t)b->seq_len;
    const float *seq = est_bert_encoder_sequence_output(m->enc);
    for (size_t i = 0; i < (size_t)b->batch; i++) memcpy(m->first + i * H, seq + i * S * H, H * sizeof(float));
    input = m->first;
  }
  if (m->pair_loss) { /* the layer's logits; the loss here */
    st = est_bert_classifier_head_forward(m->head, input, NULL, b->batch, b->training, b->seed, b->step, m->logits,
                                          NULL, NULL);
    if (st != EST_OK || !m->values) return st;
    const float l = pair_loss(m, b->batch);
    if (loss) *loss = l;
    return EST_OK;
  }
  if (m->multi_label) { /* the layer's logits; the loss here */
    m->hot = m->labels, m->labels = NULL;
    st = est_bert_classifier_head_forward(m->head, input, NULL, b->batch, b->training, b->seed, b->step, m->logits,
                                          NULL, NULL);
    if (st != EST_OK || !m->hot) return st;
    for (size_t i = 0; i < (size_t)b->batch * m->num_labels; i++)
      if (m->hot[i] != 0 && m->hot[i] != 1)
        return est_error(EST_ERR_INVALID_ARGUMENT, "label_ids[%zu][%zu] = %d: a multi-label example's labels are 0 "
                         "or 1", i / m->num_labels, i % m->num_labels, (int)m->hot[i]);
    const float l = multi_label_loss(m, b->batch);
    if (loss) *loss = l;
    return EST_OK;
  }
  return est_bert_classifier_head_forward(m->head, input, m->labels, b->batch,
                                          b->training, b->seed, b->step, m->logits,
                                          m->labels ? m->per_example_loss : NULL, m->labels ? loss : NULL);
}

/* d loss / d logits of the mean BCE: (sigmoid(z) - y) / (B C). */
static const float *multi_label_d_logits(classifier *m, int B) {
  const size_t n = (size_t)B * m->num_labels;
  const float scale = 1.0f / (float)n;
  for (size_t i = 0; i < n; i++) m->d_logits[i] = (sigmoid(m->logits[i]) - (float)m->hot[i]) * scale;
  return m->d_logits;
}

/* d loss / d logit of the mean pair loss: BCE (sigmoid(z) - y) / B, MSE 2 (z - y) / B. */
static const float *pair_d_logits(classifier *m, int B) {
  for (int i = 0; i < B; i++)
    m->d_logits[i] = (m->pair_loss == EST_PAIR_LOSS_BCE ? sigmoid(m->logits[i]) - m->values[i]
                                                        : 2.0f * (m->logits[i] - m->values[i])) / (float)B;
  return m->d_logits;
}

/* The loss's d logits when the head computes the loss itself (multi-label, pair), else NULL. */
static const float *own_d_logits(classifier *m, int B) {
  return m->pair_loss ? pair_d_logits(m, B) : m->multi_label ? multi_label_d_logits(m, B) : NULL;
}

static est_status classifier_backward(void *head) {
  classifier *m = head;
  if ((m->multi_label && !m->hot) || (m->pair_loss && !m->values))
    return est_error(EST_ERR_FAILED_PRECONDITION, "classifier head backward needs %s in its forward",
                     m->pair_loss ? "label_values" : "label_ids");
  if (m->first_token) { /* d first token, added into its rows of d sequence output */
    float *d_seq = est_bert_encoder_sequence_output_grad(m->enc);
    if (!d_seq)
      return est_error(EST_ERR_FAILED_PRECONDITION, "BERT backward: the activations were reserved forward-only");
    const int B = est_bert_encoder_batch(m->enc);
    const size_t H = (size_t)est_bert_encoder_config(m->enc)->hidden_size, S = (size_t)est_bert_encoder_seq_len(m->enc);
    memset(m->d_first, 0, (size_t)B * H * sizeof(float));
    const float *d_logits = own_d_logits(m, B);
    est_status st = d_logits ? est_bert_classifier_head_backward_logits(m->head, d_logits, m->d_first)
                             : est_bert_classifier_head_backward(m->head, m->d_first);
    if (st != EST_OK) return st;
    if (m->mean_pooling) { /* each unpadded token's row gets mask / count of d pooled */
      for (size_t i = 0; i < (size_t)B; i++) {
        double count = 0;
        for (size_t t = 0; t < S; t++) count += m->mask[i * S + t];
        for (size_t t = 0; t < S && count > 0; t++) {
          const float w = (float)(m->mask[i * S + t] / count);
          for (size_t j = 0; w != 0.0f && j < H; j++) d_seq[(i * S + t) * H + j] += w * m->d_first[i * H + j];
        }
      }
      return EST_OK;
    }
    for (size_t i = 0; i < (size_t)B; i++)
      for (size_t j = 0; j < H; j++) d_seq[i * S * H + j] += m->d_first[i * H + j];
    return EST_OK;
  }
  float *d_pooled = est_bert_encoder_pooled_output_grad(m->enc);
  if (!d_pooled)
    return est_error(EST_ERR_FAILED_PRECONDITION, "BERT backward: the activations were reserved forward-only");
  const float *d_logits = own_d_logits(m, est_bert_encoder_batch(m->enc));
  if (d_logits) return est_bert_classifier_head_backward_logits(m->head, d_logits, d_pooled);
  return est_bert_classifier_head_backward(m->head, d_pooled);
}

static est_status classifier_update_metrics(void *head, const est_bert_head_batch *b) {
  classifier *m = head;
  const int B = b->batch, C = m->num_labels;
  if (m->pair_loss) /* eval_loss only */
    return m->num_metrics ? est_metric_update_values(m->metric_objs[0], m->per_example_loss, m->weights, (size_t)B)
                          : EST_OK;
  if (m->multi_label) { /* exact match at 0.5: predictions[i] = every label right */
    for (int i = 0; i < B; i++) {
      int right = 1;
      for (int c = 0; c < C; c++)
        right &= (sigmoid(m->logits[(size_t)i * C + c]) >= 0.5f) == (m->hot[(size_t)i * C + c] != 0);
      m->predictions[i] = right;
    }
    for (size_t k = 0; k < m->num_metrics; k++) {
      est_metric *metric = m->metric_objs[k];
      est_status st = est_metric_get_kind(metric) == EST_METRIC_MEAN
                          ? est_metric_update_values(metric, m->per_example_loss, m->weights, (size_t)B)
                          : est_metric_update_classes(metric, m->ones, m->predictions, m->weights, (size_t)B);
      if (st != EST_OK) return st;
    }
    return EST_OK;
  }
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
  if (m->regression || m->pair_loss == EST_PAIR_LOSS_MSE)
    memcpy(m->probabilities, m->logits, (size_t)b->batch * m->num_labels * sizeof(float));
  else if (m->multi_label || m->pair_loss == EST_PAIR_LOSS_BCE)
    for (size_t i = 0; i < (size_t)b->batch * m->num_labels; i++) m->probabilities[i] = sigmoid(m->logits[i]);
  else
    est_bert_classifier_probabilities(m->probabilities, m->logits, b->batch, m->num_labels);
  m->prob_tensor[0] = (est_tensor){.dtype = EST_DT_FLOAT, .rank = 2, .dims = {b->batch, m->num_labels},
                                   .data = m->probabilities};
  m->prob_tensor[1] = (est_tensor){.dtype = EST_DT_FLOAT, .rank = 2, .dims = {b->batch, m->num_labels},
                                   .data = m->logits};
  spec->num_predictions = 2;
  spec->prediction_names = PREDICTION_NAMES;
  spec->predictions = m->prob_tensor;
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

/* ---- serving ----------------------------------------------------------------------------- */

/* est_model.json's "problem_type" (root level, as in a transformers config.json), written
 * only when not single-label so that earlier exports keep their bytes. */
static const char *const PROBLEM_TYPES[] = {"single_label_classification", "multi_label_classification", "regression"};

const char *est_problem_type_name(est_problem_type t) {
  return (unsigned)t < 3 ? PROBLEM_TYPES[t] : PROBLEM_TYPES[0];
}

int est_problem_type_parse(const char *name) {
  for (int i = 0; name && i < 3; i++)
    if (!strcmp(name, PROBLEM_TYPES[i])) return i;
  return -1;
}

static est_status classifier_read_config(void *config, const json_t *root, const char *path) {
  est_model_classifier *c = config;
  c->problem_type = EST_PROBLEM_SINGLE_LABEL;
  const json_t *v = json_object_get(root, "problem_type");
  if (!v) return EST_OK;
  const int t = json_is_string(v) ? est_problem_type_parse(json_string_value(v)) : -1;
  if (t < 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: \"problem_type\" must be \"single_label_classification\", "
                     "\"multi_label_classification\" or \"regression\"", path);
  c->problem_type = (est_problem_type)t;
  return EST_OK;
}

static est_status classifier_write_config(const void *config, json_t *root) {
  const est_model_classifier *c = config;
  if (c->problem_type == EST_PROBLEM_SINGLE_LABEL) return EST_OK;
  return json_object_set_new(root, "problem_type", json_string(est_problem_type_name(c->problem_type)))
             ? est_error(EST_ERR_NO_MEMORY, "est_model.json")
             : EST_OK;
}

/* A transformers *ForSequenceClassification's config.json: its problem_type, else what
 * transformers infers at the first loss: one label is regression (a cross-encoder's score:
 * the raw logit), more are single-label. */
static est_status classifier_hf_config(void *config, const json_t *root, const char *path) {
  est_model_classifier *c = config;
  const json_t *v = json_object_get(root, "problem_type");
  if (v && !json_is_null(v)) return classifier_read_config(config, root, path);
  const json_t *id2label = json_object_get(root, "id2label"), *num = json_object_get(root, "num_labels");
  const long long n = json_is_object(id2label) ? (long long)json_object_size(id2label)
                      : json_is_integer(num)   ? (long long)json_integer_value(num)
                                               : 2;
  c->problem_type = n == 1 ? EST_PROBLEM_REGRESSION : EST_PROBLEM_SINGLE_LABEL;
  return EST_OK;
}

/* est_model.json's "labels" are its outputs: one probability (or score) per label, then the
 * logits (the text form answers the probabilities; TEI's /predict and /rerank read both). */
static int classifier_served_params(void *params, const est_model_meta *meta) {
  const est_problem_type t = ((const est_model_classifier *)est_model_meta_head_config(meta))->problem_type;
  *(est_bert_classifier_head_params *)params = (est_bert_classifier_head_params){
    .num_labels = (int)meta->num_labels, .multi_label = t == EST_PROBLEM_MULTI_LABEL,
    .regression = t == EST_PROBLEM_REGRESSION};
  return 2 * (int)meta->num_labels;
}

/* TEI: one label is a cross-encoder, a "reranker" (TEI's router: id2label of one entry);
 * more are a "classifier". id2label / label2id are the export's labels. */
static json_t *classifier_tei_model_type(const est_model_meta *meta) {
  json_t *id2label = json_object(), *label2id = json_object();
  for (size_t i = 0; i < meta->num_labels; i++) {
    char id[24];
    snprintf(id, sizeof id, "%zu", i);
    json_object_set_new(id2label, id, json_string(meta->labels[i]));
    json_object_set_new(label2id, meta->labels[i], json_integer((json_int_t)i));
  }
  return json_pack("{s:{s:o,s:o}}", meta->num_labels == 1 ? "reranker" : "classifier", "id2label", id2label,
                   "label2id", label2id);
}

/* TEI's scores of a row [probabilities C, logits C]: raw, the logits; else softmax over the
 * labels (the probabilities, est's softmax of the same logits) or, for one label, its sigmoid
 * (core/src/infer.rs predict). */
static int classifier_tei_scores(const est_model_meta *meta, const float *row, bool raw_scores, float *scores) {
  const int C = (int)meta->num_labels;
  const float *logits = row + C;
  for (int c = 0; c < C; c++)
    scores[c] = raw_scores ? logits[c] : C == 1 ? 1.0f / (1.0f + expf(-logits[c])) : row[c];
  return C;
}

/* The text form's answers, except est predict's label form of a multi-label model: every label
 * at >= 0.5, comma-separated (run_classifier --multi_label's label field; "" for none). */
static void classifier_write(const void *batch, size_t i, est_served_form form, FILE *out) {
  const est_served_context *ctx = est_served_text_context(batch);
  const est_model_meta *meta = ctx->meta;
  const int multi = ((const est_model_classifier *)est_model_meta_head_config(meta))->problem_type ==
                    EST_PROBLEM_MULTI_LABEL;
  if (!multi || form != EST_SERVED_LINE || !ctx->output_format || strcmp(ctx->output_format, "label")) {
    est_served_text_write(batch, i, form, out);
    return;
  }
  const float *row = NULL;
  est_served_text_row(batch, i, NULL, NULL, &row);
  int first = 1;
  for (size_t c = 0; row && c < meta->num_labels; c++)
    if (row[c] >= 0.5f) {
      fprintf(out, "%s%s", first ? "" : ",", meta->labels[c]);
      first = 0;
    }
}

/* One label read as a raw score (problem_type regression): a cross-encoder's, an HF one's
 * (num_labels 1) or est run_rerank's export. */
static bool classifier_pair_score(const est_model_meta *meta) {
  return meta->num_labels == 1 &&
         ((const est_model_classifier *)est_model_meta_head_config(meta))->problem_type == EST_PROBLEM_REGRESSION;
}

const est_served_head est_served_classifier = {
  .name = "classifier",
  .type = &est_bert_classifier_head_type,
  .labels = true,
  .config_size = sizeof(est_model_classifier),
  .read_config = classifier_read_config,
  .write_config = classifier_write_config,
  .params = classifier_served_params,
  .outputs = {"probabilities", "logits"},
  .second_output_extra = true,
  .inputs = EST_SERVED_TEXT_INPUTS,
  .signature = est_served_text_signature,
  EST_SERVED_TEXT_BATCH,
  .add_line = est_served_text_add_line,
  .write = classifier_write,
  .pair_score = classifier_pair_score,
  .hf_architecture = "ForSequenceClassification",
  .hf_config = classifier_hf_config,
  .tei_model_type = classifier_tei_model_type,
  .tei_scores = classifier_tei_scores,
};
