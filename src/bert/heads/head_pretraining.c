/* run_pretraining.py's two heads, in one file: masked LM tied to the word embeddings +
 * next sentence on the encoder's outputs, forward and backward (est/bert_pretraining.h has the
 * maths and shapes), and the est_bert_head_type around them (est/bert_head.h): their
 * features and their metric_fn (docs/bert.md §9).
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
#include "est/nn.h"

/* ---- the layers ---------------------------------------------------------------------- */

/* run_pretraining's denominator guard: sum(label_weights) + 1e-5. */
static const double MLM_DENOMINATOR_EPS = 1e-5;

struct est_bert_pretraining_heads {
  est_bert_encoder *enc;
  est_var_store *vs;
  int H, V;
  est_activation act;
  size_t word;                        /* the tied table bert/embeddings/word_embeddings [V,H] */
  int dense_w, dense_b, ln_beta, ln_gamma, out_b, ns_w, ns_b;
  int max_B, max_P;
  /* masked LM, N = B*P rows; logits [N,V] become dlogits in backward (est_vocab_xent_*) */
  float *x, *z, *a, *y, *mean, *rstd, *logits, *row_max, *row_inv, *losses, *scale, *dy, *da, *dz, *dx;
  int32_t *rows, *ids, *preds;
  float *w;
  /* next sentence, [B, 2] / [B] */
  float *ns_logits, *ns_probs, *ns_losses, *ns_dlogits;
  int32_t *ns_labels, *ns_preds;
  /* the last forward */
  int B, S, P, valid;
  double denom;
  est_bert_grads_ready_fn ready_fn;
  void *ready_ctx;
};

est_status est_bert_pretraining_heads_create(est_bert_pretraining_heads **out, est_bert_encoder *enc,
                                             est_var_store *vs) {
  *out = NULL;
  const est_bert_config *cfg = est_bert_encoder_config(enc);
  est_bert_pretraining_heads *h = calloc(1, sizeof *h);
  if (!h) return est_error(EST_ERR_NO_MEMORY, "out of memory creating the pretraining heads");
  h->enc = enc;
  h->vs = vs;
  h->H = cfg->hidden_size;
  h->V = cfg->vocab_size;
  h->act = cfg->hidden_act;
  h->word = est_bert_encoder_word_embeddings_index(enc);
  const float range = (float)cfg->initializer_range;
  const int64_t hh[2] = {h->H, h->H}, hv[1] = {h->H}, vv[1] = {h->V}, nsw[2] = {2, h->H}, nsb[1] = {2};
  est_status st = est_vars_declare(vs, "cls/predictions/transform/dense/kernel", 2, hh,
                                   est_init_truncated_normal(range), &h->dense_w);
  if (!st) st = est_vars_declare(vs, "cls/predictions/transform/dense/bias", 1, hv, est_init_zeros(), &h->dense_b);
  if (!st) st = est_vars_declare(vs, "cls/predictions/transform/LayerNorm/beta", 1, hv, est_init_zeros(), &h->ln_beta);
  if (!st)
    st = est_vars_declare(vs, "cls/predictions/transform/LayerNorm/gamma", 1, hv, est_init_ones(), &h->ln_gamma);
  if (!st) st = est_vars_declare(vs, "cls/predictions/output_bias", 1, vv, est_init_zeros(), &h->out_b);
  if (!st)
    st = est_vars_declare(vs, "cls/seq_relationship/output_weights", 2, nsw, est_init_truncated_normal(range),
                          &h->ns_w);
  if (!st) st = est_vars_declare(vs, "cls/seq_relationship/output_bias", 1, nsb, est_init_zeros(), &h->ns_b);
  if (st) {
    free(h);
    return est_error_prefix("declaring the pretraining heads' variables: ");
  }
  *out = h;
  return EST_OK;
}

static void free_buffers(est_bert_pretraining_heads *h) {
  void *bufs[] = {h->x, h->z, h->a, h->y, h->mean, h->rstd, h->logits, h->row_max, h->row_inv, h->losses, h->scale,
                  h->dy, h->da,
                  h->dz, h->dx, h->rows, h->ids, h->preds, h->w, h->ns_logits, h->ns_probs, h->ns_losses,
                  h->ns_dlogits, h->ns_labels, h->ns_preds};
  for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) free(bufs[i]);
}

void est_bert_pretraining_heads_free(est_bert_pretraining_heads *h) {
  if (!h) return;
  free_buffers(h);
  free(h);
}

est_status est_bert_pretraining_heads_reserve(est_bert_pretraining_heads *h, int max_batch, int max_predictions) {
  if (max_batch <= 0 || max_predictions <= 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "pretraining heads: batch %d and max_predictions_per_seq %d must "
                     "be positive", max_batch, max_predictions);
  if (h->x && max_batch <= h->max_B && max_predictions <= h->max_P) return EST_OK;
  free_buffers(h);
  const size_t N = (size_t)max_batch * (size_t)max_predictions, H = (size_t)h->H, V = (size_t)h->V;
  const size_t B = (size_t)max_batch;
  float **nh[] = {&h->x, &h->z, &h->a, &h->y, &h->dy, &h->da, &h->dz, &h->dx};
  int ok = 1;
  for (size_t i = 0; i < sizeof nh / sizeof *nh; i++) ok &= (*nh[i] = malloc(N * H * sizeof(float))) != NULL;
  ok &= (h->logits = malloc(N * V * sizeof(float))) != NULL;
  ok &= (h->row_max = malloc(N * sizeof(float))) && (h->row_inv = malloc(N * sizeof(float)));
  ok &= (h->scale = malloc(N * sizeof(float))) != NULL;
  ok &= (h->mean = malloc(N * sizeof(float))) && (h->rstd = malloc(N * sizeof(float)));
  ok &= (h->losses = malloc(N * sizeof(float))) && (h->w = malloc(N * sizeof(float)));
  ok &= (h->rows = malloc(N * sizeof(int32_t))) && (h->ids = malloc(N * sizeof(int32_t)));
  ok &= (h->preds = malloc(N * sizeof(int32_t))) != NULL;
  ok &= (h->ns_logits = malloc(B * 2 * sizeof(float))) && (h->ns_probs = malloc(B * 2 * sizeof(float)));
  ok &= (h->ns_dlogits = malloc(B * 2 * sizeof(float))) && (h->ns_losses = malloc(B * sizeof(float)));
  ok &= (h->ns_labels = malloc(B * sizeof(int32_t))) && (h->ns_preds = malloc(B * sizeof(int32_t)));
  h->max_B = max_batch;
  h->max_P = max_predictions;
  h->valid = 0;
  if (!ok) {
    free_buffers(h);
    memset(&h->x, 0, (size_t)((char *)&h->B - (char *)&h->x));
    h->max_B = h->max_P = 0;
    return est_error(EST_ERR_NO_MEMORY, "cannot allocate the pretraining heads for batch %d x %d predictions (%zu "
                     "MB of logits)", max_batch, max_predictions, N * V * 4 >> 20);
  }
  return EST_OK;
}

size_t est_bert_pretraining_heads_first_variable(const est_bert_pretraining_heads *h) { return (size_t)h->dense_w; }
size_t est_bert_pretraining_heads_last_variable(const est_bert_pretraining_heads *h) { return (size_t)h->ns_b; }

void est_bert_pretraining_heads_set_grads_ready(est_bert_pretraining_heads *h, est_bert_grads_ready_fn fn,
                                                void *ctx) {
  h->ready_fn = fn;
  h->ready_ctx = fn ? ctx : NULL;
}

static int32_t argmax(const float *z, int n) {
  int best = 0;
  for (int c = 1; c < n; c++)
    if (z[c] > z[best]) best = c;
  return best;
}

est_status est_bert_pretraining_heads_forward(est_bert_pretraining_heads *h, const int32_t *positions,
                                              const int32_t *lm_ids, const float *lm_weights,
                                              const int32_t *ns_labels, int batch, int seq_len, int max_predictions,
                                              est_bert_pretraining_output *out) {
  h->valid = 0;
  if (batch <= 0 || batch > h->max_B || max_predictions <= 0 || max_predictions > h->max_P)
    return est_error(EST_ERR_INVALID_ARGUMENT, "pretraining heads: batch %d x %d predictions exceeds the "
                     "reservation %d x %d", batch, max_predictions, h->max_B, h->max_P);
  if (est_bert_encoder_batch(h->enc) != batch || est_bert_encoder_seq_len(h->enc) != seq_len)
    return est_error(EST_ERR_FAILED_PRECONDITION, "pretraining heads: the encoder's last forward was %d x %d, "
                     "not %d x %d", est_bert_encoder_batch(h->enc), est_bert_encoder_seq_len(h->enc), batch, seq_len);
  const int B = batch, P = max_predictions, N = B * P, H = h->H, V = h->V;
  for (int b = 0; b < B; b++)
    for (int p = 0; p < P; p++) {
      const int32_t pos = positions[b * P + p], id = lm_ids[b * P + p];
      if (pos < 0 || pos >= seq_len)
        return est_error(EST_ERR_INVALID_ARGUMENT, "masked_lm_positions[%d][%d] = %d is outside [0, %d)", b, p,
                         (int)pos, seq_len);
      if (id < 0 || id >= V)
        return est_error(EST_ERR_INVALID_ARGUMENT, "masked_lm_ids[%d][%d] = %d is outside the vocabulary [0, %d)",
                         b, p, (int)id, V);
      h->rows[b * P + p] = b * seq_len + pos; /* gather_indexes: flat offsets into [B*S, H] */
    }
  for (int b = 0; b < B; b++)
    if (ns_labels[b] < 0 || ns_labels[b] > 1)
      return est_error(EST_ERR_INVALID_ARGUMENT, "next_sentence_labels[%d] = %d is not 0 or 1", b, (int)ns_labels[b]);

  /* masked LM */
  const est_precision prec = est_bert_encoder_precision(h->enc);
  const float *seq = est_bert_encoder_sequence_output(h->enc);
  for (int n = 0; n < N; n++) memcpy(h->x + (size_t)n * H, seq + (size_t)h->rows[n] * H, (size_t)H * sizeof(float));
  est_matmul_forward(h->z, h->x, est_vars_value(h->vs, (size_t)h->dense_w), est_vars_value(h->vs, (size_t)h->dense_b),
                     N, H, H, 0, prec);
  est_activation_forward(h->a, h->z, (size_t)N * H, h->act);
  est_layernorm_forward(h->y, h->mean, h->rstd, h->a, est_vars_value(h->vs, (size_t)h->ln_gamma),
                        est_vars_value(h->vs, (size_t)h->ln_beta), N, H);
  est_matmul_forward(h->logits, h->y, est_vars_value(h->vs, h->word), est_vars_value(h->vs, (size_t)h->out_b), N, H,
                     V, 1, est_precision_of_logits(prec));
  est_status st = est_vocab_xent_forward(h->losses, h->preds, h->row_max, h->row_inv, h->logits, lm_ids, N, V);
  if (st) return est_error_prefix("masked LM loss: ");
  double num = 0.0, den = 0.0;
  for (int n = 0; n < N; n++) {
    h->w[n] = lm_weights[n];
    h->ids[n] = lm_ids[n];
    num += (double)lm_weights[n] * h->losses[n];
    den += lm_weights[n];
  }
  h->denom = den + MLM_DENOMINATOR_EPS;

  /* next sentence */
  est_matmul_forward(h->ns_logits, est_bert_encoder_pooled_output(h->enc), est_vars_value(h->vs, (size_t)h->ns_w),
                     est_vars_value(h->vs, (size_t)h->ns_b), B, H, 2, 1, est_precision_of_logits(prec));
  for (int b = 0; b < B; b++) h->ns_preds[b] = argmax(h->ns_logits + 2 * b, 2);
  st = est_crossentropy_forward(h->ns_losses, h->ns_probs, h->ns_logits, ns_labels, B, 2);
  if (st) return est_error_prefix("next-sentence loss: ");
  double ns = 0.0;
  for (int b = 0; b < B; b++) ns += h->ns_losses[b];
  memcpy(h->ns_labels, ns_labels, (size_t)B * sizeof(int32_t));

  h->B = B;
  h->S = seq_len;
  h->P = P;
  h->valid = 1;
  out->masked_lm_loss = (float)(num / h->denom);
  out->next_sentence_loss = (float)(ns / B);
  out->loss = out->masked_lm_loss + out->next_sentence_loss;
  out->masked_lm_example_loss = h->losses;
  out->masked_lm_predictions = h->preds;
  out->next_sentence_example_loss = h->ns_losses;
  out->next_sentence_predictions = h->ns_preds;
  return EST_OK;
}

est_status est_bert_pretraining_heads_backward(est_bert_pretraining_heads *h) {
  if (!h->valid) return est_error(EST_ERR_FAILED_PRECONDITION, "pretraining heads backward needs a forward first");
  float *dseq = est_bert_encoder_sequence_output_grad(h->enc), *dpooled = est_bert_encoder_pooled_output_grad(h->enc);
  if (!dseq || !dpooled)
    return est_error(EST_ERR_FAILED_PRECONDITION, "pretraining heads backward: the encoder has no gradient buffers "
                     "(reserved without backward?)");
  h->valid = 0;
  const int B = h->B, N = h->B * h->P, H = h->H, V = h->V;
  const est_precision prec = est_bert_encoder_precision(h->enc);
  est_var_store *vs = h->vs;
  /* d loss / d logits[n] = w_n / denom * (p_n - onehot(id_n)), written over the logits
   * (rows split over the threads: [N,V] is ~78 MB at 640 rows, memory-bound work) */
  for (int n = 0; n < N; n++) h->scale[n] = h->w[n] != 0.0f ? (float)(h->w[n] / h->denom) : 0.0f;
  float *dlogits = h->logits;
  est_vocab_xent_backward_inplace(dlogits, h->row_max, h->row_inv, h->ids, h->scale, N, V);
  /* each input gradient below is read by one op only: written, not added (est/nn.h) */
  /* logits = y . E^T + b: the tied table's gradient gets this path (the encoder adds the lookup's) */
  est_matmul_backward_mode(h->dy, est_vars_grad(vs, h->word), est_vars_grad(vs, (size_t)h->out_b), dlogits, h->y,
                           est_vars_value(vs, h->word), N, H, V, 1, EST_GRAD_WRITE, prec);
  est_layernorm_backward_mode(h->da, est_vars_grad(vs, (size_t)h->ln_gamma), est_vars_grad(vs, (size_t)h->ln_beta),
                              h->dy, h->a, est_vars_value(vs, (size_t)h->ln_gamma), h->mean, h->rstd, N, H,
                              EST_GRAD_WRITE);
  est_activation_backward_mode(h->dz, h->da, h->z, (size_t)N * H, h->act, EST_GRAD_WRITE);
  est_matmul_backward_mode(h->dx, est_vars_grad(vs, (size_t)h->dense_w), est_vars_grad(vs, (size_t)h->dense_b),
                           h->dz, h->x, est_vars_value(vs, (size_t)h->dense_w), N, H, H, 0, EST_GRAD_WRITE, prec);
  /* scatter back: a position masked twice gets both rows */
  for (int n = 0; n < N; n++) {
    float *d = dseq + (size_t)h->rows[n] * H;
    const float *s = h->dx + (size_t)n * H;
    for (int k = 0; k < H; k++) d[k] += s[k];
  }
  /* next sentence: mean over the batch */
  memset(h->ns_dlogits, 0, (size_t)B * 2 * sizeof(float));
  est_crossentropy_backward(h->ns_dlogits, h->ns_probs, h->ns_labels, 1.0f / (float)B, B, 2);
  est_matmul_backward(dpooled, est_vars_grad(vs, (size_t)h->ns_w), est_vars_grad(vs, (size_t)h->ns_b), h->ns_dlogits,
                      est_bert_encoder_pooled_output(h->enc), est_vars_value(vs, (size_t)h->ns_w), B, H, 2, 1, prec);
  /* The table's gradient is final only after the encoder's embedding backward, which reports it. */
  est_bert_report_grads_ready(vs, (size_t)h->dense_w, (size_t)h->ns_b, h->ready_fn, h->ready_ctx);
  return EST_OK;
}

/* ---- the head ------------------------------------------------------------------------ */

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
