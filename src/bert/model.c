/* BERT sequence classifier: embeddings -> L post-LN transformer layers -> tanh pooler on
 * the first token -> dropout -> output_weights / output_bias -> softmax cross-entropy.
 * modeling.py BertModel + run_classifier.py create_model, forward and backward.
 *
 * Variables live in the caller's est_var_store under TF's names; activations live in one
 * buffer sized by est_bert_classifier_reserve (carved into named regions below), so the
 * step loop allocates nothing. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "est/bert_model.h"

/* Dropout tensor ids (part of the mask's Philox counter, est/nn.h). */
enum {
  DROP_EMBEDDINGS = 1,
  DROP_CLASSIFIER = 2,
  DROP_LAYER_BASE = 100,  /* + 3*layer + {0 attention probs, 1 attention output, 2 ffn output} */
};

/* run_classifier's dropout on the pooled output: keep_prob 0.9, not from the config. */
static const float CLASSIFIER_DROPOUT = 0.1f;

typedef struct layer_vars {
  int q_w, q_b, k_w, k_b, v_w, v_b;   /* attention/self/{query,key,value}/{kernel,bias} */
  int ao_w, ao_b, ln1_g, ln1_b;       /* attention/output/dense, attention/output/LayerNorm */
  int i_w, i_b, o_w, o_b, ln2_g, ln2_b; /* intermediate/dense, output/dense, output/LayerNorm */
} layer_vars;

/* What one layer keeps for its backward pass. T = B*S tokens. */
typedef struct layer_acts {
  float *q, *k, *v;             /* [T,H] */
  float *probs;                 /* [B,N,S,S] attention probabilities before dropout */
  uint8_t *pmask;               /* [B,N,S,S] attention dropout mask */
  float *ctx;                   /* [T,H] attention context (heads concatenated) */
  uint8_t *amask;               /* [T,H] dropout mask of the attention output dense */
  float *a_pre, *ln1_mean, *ln1_rstd, *a; /* [T,H] residual sum, [T] stats, [T,H] LayerNorm out */
  float *h_pre;                 /* [T,I] intermediate dense out (the activation's output is
                                   recomputed in backward: one [T,I] buffer for all layers) */
  uint8_t *omask;               /* [T,H] dropout mask of the output dense */
  float *y_pre, *ln2_mean, *ln2_rstd, *y; /* [T,H] residual sum, stats, layer output */
} layer_acts;

struct est_bert_classifier {
  est_bert_config cfg;
  int C;
  est_var_store *vs;
  int word, type, pos, emb_g, emb_b;
  layer_vars *lv;
  int pool_w, pool_b, out_w, out_b;

  /* reservation */
  int max_B, max_S;
  void *buf;
  size_t buf_bytes;
  int32_t *ids, *types, *labels;          /* copies of the last batch, for backward */
  float *emb_sum, *emb_mean, *emb_rstd, *emb_ln, *emb_out;
  uint8_t *emb_mask;
  layer_acts *la;
  float *first, *pool_pre, *pooled, *pooled_d, *logits, *probs, *losses;
  uint8_t *pool_mask;
  float *att_scratch;
  float *h;                               /* [T,I] act(h_pre) of the layer at hand */
  float *g[8], *gh, *g_first, *g_pooled, *g_logits; /* activation-gradient scratch */

  /* the last forward */
  int B, S, has_types, have_labels, valid;
  float p_hidden, p_attn, p_cls;

  /* est_bert_classifier_set_grads_ready */
  est_bert_grads_ready_fn ready_fn;
  void *ready_ctx;
  int64_t first_row;            /* est_bert_classifier_set_first_row */
};

/* ---- variables ---------------------------------------------------------------------- */

static est_status declare(est_var_store *vs, int *idx, est_initializer init, int rank, int64_t d0, int64_t d1,
                          const char *fmt, ...) __attribute__((format(printf, 7, 8)));

static est_status declare(est_var_store *vs, int *idx, est_initializer init, int rank, int64_t d0, int64_t d1,
                          const char *fmt, ...) {
  char name[EST_VAR_NAME_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(name, sizeof name, fmt, ap);
  va_end(ap);
  int64_t dims[2] = {d0, d1};
  return est_vars_declare(vs, name, rank, dims, init, idx);
}

est_status est_bert_classifier_create(est_bert_classifier **out, const est_bert_config *cfg, int num_labels,
                                      est_var_store *vs) {
  *out = NULL;
  est_status st = est_bert_config_validate(cfg, "BertConfig");
  if (st) return st;
  if (num_labels <= 0) return est_error(EST_ERR_INVALID_ARGUMENT, "num_labels must be positive, got %d", num_labels);
  est_bert_classifier *m = calloc(1, sizeof *m);
  if (!m) return est_error(EST_ERR_NO_MEMORY, "out of memory creating the BERT classifier");
  m->cfg = *cfg;
  m->C = num_labels;
  m->vs = vs;
  m->lv = calloc((size_t)cfg->num_hidden_layers, sizeof *m->lv);
  if (!m->lv) {
    free(m);
    return est_error(EST_ERR_NO_MEMORY, "out of memory creating the BERT classifier");
  }
  const int64_t H = cfg->hidden_size, I = cfg->intermediate_size;
  const est_initializer W = est_init_truncated_normal((float)cfg->initializer_range);
  const est_initializer Z = est_init_zeros(), O = est_init_ones();
#define D(...) \
  if ((st = declare(vs, __VA_ARGS__))) goto fail
  D(&m->word, W, 2, cfg->vocab_size, H, "bert/embeddings/word_embeddings");
  D(&m->type, W, 2, cfg->type_vocab_size, H, "bert/embeddings/token_type_embeddings");
  D(&m->pos, W, 2, cfg->max_position_embeddings, H, "bert/embeddings/position_embeddings");
  D(&m->emb_b, Z, 1, H, 0, "bert/embeddings/LayerNorm/beta");
  D(&m->emb_g, O, 1, H, 0, "bert/embeddings/LayerNorm/gamma");
  for (int l = 0; l < cfg->num_hidden_layers; l++) {
    layer_vars *v = &m->lv[l];
    const char *p = "bert/encoder/layer_";
    D(&v->q_w, W, 2, H, H, "%s%d/attention/self/query/kernel", p, l);
    D(&v->q_b, Z, 1, H, 0, "%s%d/attention/self/query/bias", p, l);
    D(&v->k_w, W, 2, H, H, "%s%d/attention/self/key/kernel", p, l);
    D(&v->k_b, Z, 1, H, 0, "%s%d/attention/self/key/bias", p, l);
    D(&v->v_w, W, 2, H, H, "%s%d/attention/self/value/kernel", p, l);
    D(&v->v_b, Z, 1, H, 0, "%s%d/attention/self/value/bias", p, l);
    D(&v->ao_w, W, 2, H, H, "%s%d/attention/output/dense/kernel", p, l);
    D(&v->ao_b, Z, 1, H, 0, "%s%d/attention/output/dense/bias", p, l);
    D(&v->ln1_b, Z, 1, H, 0, "%s%d/attention/output/LayerNorm/beta", p, l);
    D(&v->ln1_g, O, 1, H, 0, "%s%d/attention/output/LayerNorm/gamma", p, l);
    D(&v->i_w, W, 2, H, I, "%s%d/intermediate/dense/kernel", p, l);
    D(&v->i_b, Z, 1, I, 0, "%s%d/intermediate/dense/bias", p, l);
    D(&v->o_w, W, 2, I, H, "%s%d/output/dense/kernel", p, l);
    D(&v->o_b, Z, 1, H, 0, "%s%d/output/dense/bias", p, l);
    D(&v->ln2_b, Z, 1, H, 0, "%s%d/output/LayerNorm/beta", p, l);
    D(&v->ln2_g, O, 1, H, 0, "%s%d/output/LayerNorm/gamma", p, l);
  }
  D(&m->pool_w, W, 2, H, H, "bert/pooler/dense/kernel");
  D(&m->pool_b, Z, 1, H, 0, "bert/pooler/dense/bias");
  /* run_classifier hard-codes stddev 0.02 here, whatever initializer_range says. */
  D(&m->out_w, est_init_truncated_normal(0.02f), 2, num_labels, H, "output_weights");
  D(&m->out_b, Z, 1, num_labels, 0, "output_bias");
#undef D
  *out = m;
  return EST_OK;
fail:
  free(m->lv);
  free(m);
  return est_error_prefix("declaring BERT variables: ");
}

void est_bert_classifier_free(est_bert_classifier *m) {
  if (!m) return;
  est_free(m->buf);
  free(m->la);
  free(m->lv);
  free(m);
}

void est_bert_classifier_set_first_row(est_bert_classifier *m, int64_t first_row) {
  m->first_row = first_row > 0 ? first_row : 0;
}

void est_bert_classifier_set_grads_ready(est_bert_classifier *m, est_bert_grads_ready_fn fn, void *ctx) {
  m->ready_fn = fn;
  m->ready_ctx = fn ? ctx : NULL;
}

/* Backward has finished the gradients of variables first..last (consecutive indices: one
 * group declared in a row by create()). The store pads every variable to a cache line and
 * the padding belongs to no variable, so adjacent variables are merged into maximal runs
 * with no padding between them: one range per group when every count is a multiple of 16
 * floats (any hidden size that is), more otherwise. Frozen variables have no gradient. */
static void report_ready(const est_bert_classifier *m, int first, int last) {
  if (!m->ready_fn) return;
  size_t off = 0, count = 0;
  for (int i = first; i <= last; i++) {
    const est_variable *v = est_vars_at(m->vs, (size_t)i);
    if (v->trainable && count && v->offset == off + count) {
      count += v->count;
      continue;
    }
    if (count) m->ready_fn(m->ready_ctx, off, count);
    off = v->offset;
    count = v->trainable ? v->count : 0;
  }
  if (count) m->ready_fn(m->ready_ctx, off, count);
}

int est_bert_classifier_num_labels(const est_bert_classifier *m) { return m->C; }
const est_bert_config *est_bert_classifier_config(const est_bert_classifier *m) { return &m->cfg; }

/* ---- activation buffer -------------------------------------------------------------- */

/* Bump allocator over the activation buffer: a sizing pass with base == NULL, then the
 * real pass. Every region starts on a cache line. */
typedef struct carver {
  char *base;
  size_t off;
} carver;

static void *carve(carver *c, size_t bytes) {
  size_t at = (c->off + 63) & ~(size_t)63;
  c->off = at + bytes;
  return c->base ? c->base + at : NULL;
}

#define CARVE_F(c, n) ((float *)carve(c, (size_t)(n) * sizeof(float)))
#define CARVE_U8(c, n) ((uint8_t *)carve(c, (size_t)(n)))

static void layout(est_bert_classifier *m, carver *c) {
  const size_t B = (size_t)m->max_B, S = (size_t)m->max_S, T = B * S;
  const size_t H = (size_t)m->cfg.hidden_size, I = (size_t)m->cfg.intermediate_size;
  const size_t N = (size_t)m->cfg.num_attention_heads, C = (size_t)m->C;
  m->ids = (int32_t *)carve(c, T * sizeof(int32_t));
  m->types = (int32_t *)carve(c, T * sizeof(int32_t));
  m->labels = (int32_t *)carve(c, B * sizeof(int32_t));
  m->emb_sum = CARVE_F(c, T * H);
  m->emb_mean = CARVE_F(c, T);
  m->emb_rstd = CARVE_F(c, T);
  m->emb_ln = CARVE_F(c, T * H);
  m->emb_out = CARVE_F(c, T * H);
  m->emb_mask = CARVE_U8(c, T * H);
  for (int l = 0; l < m->cfg.num_hidden_layers; l++) {
    layer_acts *a = &m->la[l];
    a->q = CARVE_F(c, T * H);
    a->k = CARVE_F(c, T * H);
    a->v = CARVE_F(c, T * H);
    a->probs = CARVE_F(c, B * N * S * S);
    a->pmask = CARVE_U8(c, B * N * S * S);
    a->ctx = CARVE_F(c, T * H);
    a->amask = CARVE_U8(c, T * H);
    a->a_pre = CARVE_F(c, T * H);
    a->ln1_mean = CARVE_F(c, T);
    a->ln1_rstd = CARVE_F(c, T);
    a->a = CARVE_F(c, T * H);
    a->h_pre = CARVE_F(c, T * I);
    a->omask = CARVE_U8(c, T * H);
    a->y_pre = CARVE_F(c, T * H);
    a->ln2_mean = CARVE_F(c, T);
    a->ln2_rstd = CARVE_F(c, T);
    a->y = CARVE_F(c, T * H);
  }
  m->first = CARVE_F(c, B * H);
  m->pool_pre = CARVE_F(c, B * H);
  m->pooled = CARVE_F(c, B * H);
  m->pooled_d = CARVE_F(c, B * H);
  m->pool_mask = CARVE_U8(c, B * H);
  m->logits = CARVE_F(c, B * C);
  m->probs = CARVE_F(c, B * C);
  m->losses = CARVE_F(c, B);
  m->att_scratch = CARVE_F(c, est_attention_scratch_floats((int)B, (int)N, (int)S));
  m->h = CARVE_F(c, T * I);
  for (int i = 0; i < 8; i++) m->g[i] = CARVE_F(c, T * H);
  m->gh = CARVE_F(c, T * I);
  m->g_first = CARVE_F(c, B * H);
  m->g_pooled = CARVE_F(c, B * H);
  m->g_logits = CARVE_F(c, B * C);
}

est_status est_bert_classifier_reserve(est_bert_classifier *m, int max_batch, int seq_len) {
  if (max_batch <= 0 || seq_len <= 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "reserve: batch %d and sequence length %d must be positive",
                     max_batch, seq_len);
  if (seq_len > m->cfg.max_position_embeddings)
    return est_error(EST_ERR_INVALID_ARGUMENT,
                     "Cannot use sequence length %d because the BERT model was only trained up to sequence "
                     "length %d", seq_len, m->cfg.max_position_embeddings);
  if (m->buf && max_batch <= m->max_B && seq_len <= m->max_S) return EST_OK;
  if (!m->la) {
    m->la = calloc((size_t)m->cfg.num_hidden_layers, sizeof *m->la);
    if (!m->la) return est_error(EST_ERR_NO_MEMORY, "out of memory reserving activations");
  }
  est_free(m->buf);
  m->buf = NULL;
  m->valid = 0;
  m->max_B = max_batch > m->max_B ? max_batch : m->max_B;
  m->max_S = seq_len > m->max_S ? seq_len : m->max_S;
  carver c = {NULL, 0};
  layout(m, &c);
  m->buf = est_alloc(c.off);
  if (!m->buf)
    return est_error(EST_ERR_NO_MEMORY, "cannot allocate %.1f MiB of activations for batch %d x %d tokens",
                     (double)c.off / 1048576.0, m->max_B, m->max_S);
  m->buf_bytes = c.off;
  c = (carver){m->buf, 0};
  layout(m, &c);
  return EST_OK;
}

size_t est_bert_classifier_activation_bytes(const est_bert_classifier *m) { return m->buf_bytes; }

/* ---- forward ------------------------------------------------------------------------ */

static inline float *V(est_bert_classifier *m, int idx) { return est_vars_value(m->vs, (size_t)idx); }
static inline float *G(est_bert_classifier *m, int idx) { return est_vars_grad(m->vs, (size_t)idx); }

/* y[n] += x[n] (residual connections) */
static void add_inplace(float *y, const float *x, size_t n) {
  ptrdiff_t len = (ptrdiff_t)n;
#pragma omp parallel for simd schedule(static)
  for (ptrdiff_t i = 0; i < len; i++) y[i] += x[i];
}

est_status est_bert_classifier_forward(est_bert_classifier *m, const int32_t *input_ids,
                                       const int32_t *input_mask, const int32_t *segment_ids,
                                       const int32_t *label_ids, int batch, int seq_len, int training,
                                       uint64_t dropout_seed, uint64_t step, float *logits_out,
                                       float *per_example_loss_out, float *loss_out) {
  m->valid = 0;
  if (!est_vars_finalized(m->vs))
    return est_error(EST_ERR_FAILED_PRECONDITION, "BERT forward: the variable store is not finalized");
  if (!input_ids) return est_error(EST_ERR_INVALID_ARGUMENT, "BERT forward: input_ids is NULL");
  if (!m->buf || batch <= 0 || seq_len <= 0 || batch > m->max_B || seq_len > m->max_S)
    return est_error(EST_ERR_INVALID_ARGUMENT,
                     "BERT forward: batch %d x sequence length %d exceeds the reservation %d x %d", batch, seq_len,
                     m->max_B, m->max_S);
  const est_bert_config *cfg = &m->cfg;
  const int B = batch, S = seq_len, T = B * S, H = cfg->hidden_size, I = cfg->intermediate_size;
  const int N = cfg->num_attention_heads, Dh = H / N, C = m->C;
  const float p_h = training ? (float)cfg->hidden_dropout_prob : 0.0f;
  const float p_a = training ? (float)cfg->attention_probs_dropout_prob : 0.0f;
  const float p_c = training ? CLASSIFIER_DROPOUT : 0.0f;
  /* dropout masks at the rows' places in the global batch (est_bert_classifier_set_first_row) */
  const size_t row0 = (size_t)m->first_row, row0_th = row0 * (size_t)S * (size_t)H;
  est_status st;

  /* embeddings -> LayerNorm -> dropout */
  st = est_embeddings_forward(m->emb_sum, input_ids, segment_ids, V(m, m->word), V(m, m->type), V(m, m->pos), B,
                              S, H, cfg->vocab_size, cfg->type_vocab_size);
  if (st) return est_error_prefix("BERT embeddings: ");
  memcpy(m->ids, input_ids, (size_t)T * sizeof(int32_t));
  m->has_types = segment_ids != NULL;
  if (segment_ids) memcpy(m->types, segment_ids, (size_t)T * sizeof(int32_t));
  est_layernorm_forward(m->emb_ln, m->emb_mean, m->emb_rstd, m->emb_sum, V(m, m->emb_g), V(m, m->emb_b), T, H);
  est_dropout_forward_at(m->emb_out, m->emb_mask, m->emb_ln, (size_t)T * H, row0_th, p_h, dropout_seed, step,
                         DROP_EMBEDDINGS);

  const float *x = m->emb_out;
  for (int l = 0; l < cfg->num_hidden_layers; l++) {
    const layer_vars *w = &m->lv[l];
    layer_acts *a = &m->la[l];
    uint32_t drop_id = DROP_LAYER_BASE + 3u * (uint32_t)l;
    /* self-attention: Q, K, V projections [T,H] -> per-head attention -> ctx [T,H] */
    est_matmul_forward(a->q, x, V(m, w->q_w), V(m, w->q_b), T, H, H, 0);
    est_matmul_forward(a->k, x, V(m, w->k_w), V(m, w->k_b), T, H, H, 0);
    est_matmul_forward(a->v, x, V(m, w->v_w), V(m, w->v_b), T, H, H, 0);
    est_attention_forward_at(a->ctx, a->probs, a->pmask, m->att_scratch, a->q, a->k, a->v, input_mask, B, S, N, Dh,
                             p_a, dropout_seed, step, drop_id, (int64_t)row0);
    /* A = LayerNorm(dropout(ctx Wao + bao) + x) */
    est_matmul_forward(a->a_pre, a->ctx, V(m, w->ao_w), V(m, w->ao_b), T, H, H, 0);
    est_dropout_forward_at(a->a_pre, a->amask, a->a_pre, (size_t)T * H, row0_th, p_h, dropout_seed, step, drop_id + 1);
    add_inplace(a->a_pre, x, (size_t)T * H);
    est_layernorm_forward(a->a, a->ln1_mean, a->ln1_rstd, a->a_pre, V(m, w->ln1_g), V(m, w->ln1_b), T, H);
    /* Y = LayerNorm(dropout(act(A Wi + bi) Wo + bo) + A) */
    est_matmul_forward(a->h_pre, a->a, V(m, w->i_w), V(m, w->i_b), T, H, I, 0);
    est_activation_forward(m->h, a->h_pre, (size_t)T * I, cfg->hidden_act);
    est_matmul_forward(a->y_pre, m->h, V(m, w->o_w), V(m, w->o_b), T, I, H, 0);
    est_dropout_forward_at(a->y_pre, a->omask, a->y_pre, (size_t)T * H, row0_th, p_h, dropout_seed, step, drop_id + 2);
    add_inplace(a->y_pre, a->a, (size_t)T * H);
    est_layernorm_forward(a->y, a->ln2_mean, a->ln2_rstd, a->y_pre, V(m, w->ln2_g), V(m, w->ln2_b), T, H);
    x = a->y;
  }

  /* pooler: tanh(first token . Wp + bp) [B,H]; classifier dropout; logits [B,C] */
  for (int b = 0; b < B; b++) memcpy(m->first + (size_t)b * H, x + (size_t)b * S * H, (size_t)H * sizeof(float));
  est_matmul_forward(m->pool_pre, m->first, V(m, m->pool_w), V(m, m->pool_b), B, H, H, 0);
  est_activation_forward(m->pooled, m->pool_pre, (size_t)B * H, EST_ACT_TANH);
  est_dropout_forward_at(m->pooled_d, m->pool_mask, m->pooled, (size_t)B * H, row0 * (size_t)H, p_c, dropout_seed,
                         step, DROP_CLASSIFIER);
  est_matmul_forward(m->logits, m->pooled_d, V(m, m->out_w), V(m, m->out_b), B, H, C, 1);
  if (logits_out) memcpy(logits_out, m->logits, (size_t)B * C * sizeof(float));

  m->B = B;
  m->S = S;
  m->p_hidden = p_h;
  m->p_attn = p_a;
  m->p_cls = p_c;
  m->have_labels = label_ids != NULL;
  if (label_ids) {
    st = est_crossentropy_forward(m->losses, m->probs, m->logits, label_ids, B, C);
    if (st) return est_error_prefix("BERT classifier loss: ");
    memcpy(m->labels, label_ids, (size_t)B * sizeof(int32_t));
    double sum = 0.0;
    for (int b = 0; b < B; b++) sum += m->losses[b];
    if (per_example_loss_out) memcpy(per_example_loss_out, m->losses, (size_t)B * sizeof(float));
    if (loss_out) *loss_out = (float)(sum / B);
  }
  m->valid = 1;
  return EST_OK;
}

/* ---- backward ----------------------------------------------------------------------- */

est_status est_bert_classifier_backward(est_bert_classifier *m) {
  if (!m->valid || !m->have_labels)
    return est_error(EST_ERR_FAILED_PRECONDITION,
                     "BERT backward needs a successful forward pass with label_ids just before it");
  const est_bert_config *cfg = &m->cfg;
  const int B = m->B, S = m->S, T = B * S, H = cfg->hidden_size, I = cfg->intermediate_size;
  const int N = cfg->num_attention_heads, Dh = H / N, C = m->C;
  const size_t TH = (size_t)T * H;
  float **g = m->g;

  /* loss = mean_b losses[b] -> dlogits = (probs - onehot) / B */
  est_crossentropy_backward(m->g_logits, m->probs, m->labels, 1.0f / (float)B, B, C);
  memset(m->g_pooled, 0, (size_t)B * H * sizeof(float));
  est_matmul_backward(m->g_pooled, G(m, m->out_w), G(m, m->out_b), m->g_logits, m->pooled_d, V(m, m->out_w), B, H,
                      C, 1);
  report_ready(m, m->out_w, m->out_b);
  est_dropout_backward(m->g_pooled, m->g_pooled, m->pool_mask, (size_t)B * H, m->p_cls);
  est_activation_backward(m->g_pooled, m->g_pooled, m->pool_pre, (size_t)B * H, EST_ACT_TANH);
  memset(m->g_first, 0, (size_t)B * H * sizeof(float));
  est_matmul_backward(m->g_first, G(m, m->pool_w), G(m, m->pool_b), m->g_pooled, m->first, V(m, m->pool_w), B, H,
                      H, 0);
  report_ready(m, m->pool_w, m->pool_b);
  /* only the first token of each example feeds the pooler */
  memset(g[0], 0, TH * sizeof(float));
  for (int b = 0; b < B; b++)
    memcpy(g[0] + (size_t)b * S * H, m->g_first + (size_t)b * H, (size_t)H * sizeof(float));

  /* g[0] holds d(layer output) on entry to each layer and d(layer input) on exit */
  for (int l = cfg->num_hidden_layers - 1; l >= 0; l--) {
    const layer_vars *w = &m->lv[l];
    layer_acts *a = &m->la[l];
    const float *x = l ? m->la[l - 1].y : m->emb_out;
    /* output LayerNorm -> d y_pre (g1); residual branch to A (g2) */
    est_layernorm_backward(g[1], G(m, w->ln2_g), G(m, w->ln2_b), g[0], a->y_pre, V(m, w->ln2_g), a->ln2_mean,
                           a->ln2_rstd, T, H);
    memcpy(g[2], g[1], TH * sizeof(float));
    est_dropout_backward(g[1], g[1], a->omask, TH, m->p_hidden);
    /* output dense -> d h [T,I]; activation -> d h_pre; intermediate dense adds into d A.
     * act(h_pre) is recomputed (a vectorised pass) rather than kept for every layer. */
    est_activation_forward(m->h, a->h_pre, (size_t)T * I, cfg->hidden_act);
    memset(m->gh, 0, (size_t)T * I * sizeof(float));
    est_matmul_backward(m->gh, G(m, w->o_w), G(m, w->o_b), g[1], m->h, V(m, w->o_w), T, I, H, 0);
    est_activation_backward(m->gh, m->gh, a->h_pre, (size_t)T * I, cfg->hidden_act);
    est_matmul_backward(g[2], G(m, w->i_w), G(m, w->i_b), m->gh, a->a, V(m, w->i_w), T, H, I, 0);
    /* attention LayerNorm -> d a_pre (g3); residual branch to x (g0) */
    est_layernorm_backward(g[3], G(m, w->ln1_g), G(m, w->ln1_b), g[2], a->a_pre, V(m, w->ln1_g), a->ln1_mean,
                           a->ln1_rstd, T, H);
    memcpy(g[0], g[3], TH * sizeof(float));
    est_dropout_backward(g[3], g[3], a->amask, TH, m->p_hidden);
    memset(g[4], 0, TH * sizeof(float));
    est_matmul_backward(g[4], G(m, w->ao_w), G(m, w->ao_b), g[3], a->ctx, V(m, w->ao_w), T, H, H, 0);
    /* attention core -> dq, dk, dv; the three projections add into d x */
    est_attention_backward(g[5], g[6], g[7], m->att_scratch, g[4], a->q, a->k, a->v, a->probs, a->pmask, B, S, N,
                           Dh, m->p_attn);
    est_matmul_backward(g[0], G(m, w->q_w), G(m, w->q_b), g[5], x, V(m, w->q_w), T, H, H, 0);
    est_matmul_backward(g[0], G(m, w->k_w), G(m, w->k_b), g[6], x, V(m, w->k_w), T, H, H, 0);
    est_matmul_backward(g[0], G(m, w->v_w), G(m, w->v_b), g[7], x, V(m, w->v_w), T, H, H, 0);
    report_ready(m, w->q_w, w->ln2_g);
  }

  /* embeddings: dropout -> LayerNorm -> scatter-add into the three tables */
  est_dropout_backward(g[0], g[0], m->emb_mask, TH, m->p_hidden);
  est_layernorm_backward(g[1], G(m, m->emb_g), G(m, m->emb_b), g[0], m->emb_sum, V(m, m->emb_g), m->emb_mean,
                         m->emb_rstd, T, H);
  est_embeddings_backward(G(m, m->word), G(m, m->type), G(m, m->pos), g[1], m->ids, m->has_types ? m->types : NULL,
                          B, S, H, cfg->vocab_size, cfg->type_vocab_size);
  report_ready(m, m->word, m->emb_g);
  return EST_OK;
}

void est_bert_classifier_probabilities(float *probabilities, const float *logits, int batch, int num_labels) {
  est_softmax_forward(probabilities, logits, batch, num_labels);
}

const float *est_bert_classifier_embedding_output(const est_bert_classifier *m) { return m->emb_out; }

const float *est_bert_classifier_sequence_output(const est_bert_classifier *m) {
  return m->cfg.num_hidden_layers ? m->la[m->cfg.num_hidden_layers - 1].y : m->emb_out;
}

const float *est_bert_classifier_pooled_output(const est_bert_classifier *m) { return m->pooled; }
