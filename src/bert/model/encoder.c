/* BERT encoder (modeling.py BertModel): embeddings -> L post-LN transformer layers -> tanh
 * pooler on the first token. Variables, the activation buffer and forward here; backward in
 * encoder_backward.c.
 *
 * Variables live in the caller's est_var_store under TF's names; activations live in one
 * buffer sized by est_bert_encoder_reserve (carved into named regions below), so the step
 * loop allocates nothing. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bert/model/encoder_internal.h"
#include "core/alloc.h"
#include "est/log.h"

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

est_status est_bert_encoder_create(est_bert_encoder **out, const est_bert_config *cfg, est_var_store *vs) {
  *out = NULL;
  est_status st = est_bert_config_validate(cfg, "BertConfig");
  if (st) return st;
  est_bert_encoder *e = calloc(1, sizeof *e);
  if (!e) return est_error(EST_ERR_NO_MEMORY, "out of memory creating the BERT encoder");
  e->cfg = *cfg;
  e->vs = vs;
  e->lv = calloc((size_t)cfg->num_hidden_layers, sizeof *e->lv);
  e->la = calloc((size_t)cfg->num_hidden_layers, sizeof *e->la);
  if (!e->lv || !e->la) {
    est_bert_encoder_free(e);
    return est_error(EST_ERR_NO_MEMORY, "out of memory creating the BERT encoder");
  }
  const int64_t H = cfg->hidden_size, I = cfg->intermediate_size;
  const int64_t E = cfg->opt.embedding_size ? cfg->opt.embedding_size : H;
  e->E = (int)E;
  e->type = e->pos = e->proj_w = e->proj_b = -1;
  const est_initializer W = est_init_truncated_normal((float)cfg->initializer_range);
  const est_initializer Z = est_init_zeros(), O = est_init_ones();
  if (cfg->opt.positions == EST_POS_SINUSOIDAL) {
    /* DistilBERT's table is fixed: computed once here, never a variable, never trained */
    e->sin_table = malloc((size_t)cfg->max_position_embeddings * (size_t)E * sizeof(float));
    if (!e->sin_table) {
      est_bert_encoder_free(e);
      return est_error(EST_ERR_NO_MEMORY, "out of memory creating the BERT encoder");
    }
    est_sinusoidal_positions(e->sin_table, cfg->max_position_embeddings, (int)E);
  }
  if (cfg->opt.positions == EST_POS_ROTARY) {
    /* the cos/sin tables of the two thetas, for every position the config allows */
    const int P = cfg->max_position_embeddings, Dh = (int)H / cfg->num_attention_heads;
    const size_t n = 2 * (size_t)P * (size_t)(Dh / 2);
    const double local = cfg->opt.rotary_theta_local > 0 ? cfg->opt.rotary_theta_local : cfg->opt.rotary_theta;
    e->rope_global = malloc(n * sizeof(float));
    e->rope_local = malloc(n * sizeof(float));
    if (!e->rope_global || !e->rope_local) {
      est_bert_encoder_free(e);
      return est_error(EST_ERR_NO_MEMORY, "out of memory creating the BERT encoder");
    }
    est_rotary_table(e->rope_global, P, Dh, cfg->opt.rotary_theta);
    est_rotary_table(e->rope_local, P, Dh, local);
  }
#define D(...) \
  if ((st = declare(vs, __VA_ARGS__))) goto fail
/* a bias or LayerNorm beta: none under no_bias (index -1) */
#define DB(idx, ...)                 \
  if (cfg->opt.no_bias) *(idx) = -1; \
  else D(idx, __VA_ARGS__)
  const int pre = cfg->opt.norm == EST_NORM_PRE, glu = cfg->opt.ffn == EST_FFN_GLU;
  /* the options drop or narrow these (est/bert_encoder.h); BERT declares them all, H wide */
  D(&e->word, W, 2, cfg->vocab_size, E, "bert/embeddings/word_embeddings");
  if (cfg->opt.token_types != EST_TYPES_NONE)
    D(&e->type, W, 2, cfg->type_vocab_size, E, "bert/embeddings/token_type_embeddings");
  if (cfg->opt.positions == EST_POS_LEARNED)
    D(&e->pos, W, 2, cfg->max_position_embeddings, E, "bert/embeddings/position_embeddings");
  DB(&e->emb_b, Z, 1, E, 0, "bert/embeddings/LayerNorm/beta");
  D(&e->emb_g, O, 1, E, 0, "bert/embeddings/LayerNorm/gamma");
  e->emb_last = e->emb_g;
  if (E != H) { /* ELECTRA's embeddings_project: a dense E -> H after the embeddings' dropout */
    D(&e->proj_w, W, 2, E, H, "bert/embeddings_project/kernel");
    D(&e->proj_b, Z, 1, H, 0, "bert/embeddings_project/bias");
    e->emb_last = e->proj_b;
  }
  for (int l = 0; l < cfg->num_hidden_layers; l++) {
    enc_layer_vars *v = &e->lv[l];
    memset(v, 0xff, sizeof *v); /* every index -1 until declared */
    const char *p = "bert/encoder/layer_";
    if (cfg->opt.qkv_fused) { /* ModernBERT's Wqkv: one [H, 3H] kernel */
      D(&v->qkv_w, W, 2, H, 3 * H, "%s%d/attention/self/qkv/kernel", p, l);
      DB(&v->qkv_b, Z, 1, 3 * H, 0, "%s%d/attention/self/qkv/bias", p, l);
      v->first = v->qkv_w;
    } else {
      D(&v->q_w, W, 2, H, H, "%s%d/attention/self/query/kernel", p, l);
      DB(&v->q_b, Z, 1, H, 0, "%s%d/attention/self/query/bias", p, l);
      D(&v->k_w, W, 2, H, H, "%s%d/attention/self/key/kernel", p, l);
      DB(&v->k_b, Z, 1, H, 0, "%s%d/attention/self/key/bias", p, l);
      D(&v->v_w, W, 2, H, H, "%s%d/attention/self/value/kernel", p, l);
      DB(&v->v_b, Z, 1, H, 0, "%s%d/attention/self/value/bias", p, l);
      v->first = v->q_w;
    }
    D(&v->ao_w, W, 2, H, H, "%s%d/attention/output/dense/kernel", p, l);
    DB(&v->ao_b, Z, 1, H, 0, "%s%d/attention/output/dense/bias", p, l);
    if (!(pre && l == 0)) { /* pre-LN: layer 0's attention norm is the embeddings' */
      DB(&v->ln1_b, Z, 1, H, 0, "%s%d/attention/output/LayerNorm/beta", p, l);
      D(&v->ln1_g, O, 1, H, 0, "%s%d/attention/output/LayerNorm/gamma", p, l);
    }
    D(&v->i_w, W, 2, H, glu ? 2 * I : I, "%s%d/intermediate/dense/kernel", p, l);
    DB(&v->i_b, Z, 1, glu ? 2 * I : I, 0, "%s%d/intermediate/dense/bias", p, l);
    D(&v->o_w, W, 2, I, H, "%s%d/output/dense/kernel", p, l);
    DB(&v->o_b, Z, 1, H, 0, "%s%d/output/dense/bias", p, l);
    DB(&v->ln2_b, Z, 1, H, 0, "%s%d/output/LayerNorm/beta", p, l);
    D(&v->ln2_g, O, 1, H, 0, "%s%d/output/LayerNorm/gamma", p, l);
    v->last = v->ln2_g;
  }
  e->fin_g = e->fin_b = -1;
  if (pre) { /* ModernBERT's final_norm */
    DB(&e->fin_b, Z, 1, H, 0, "bert/encoder/final/LayerNorm/beta");
    D(&e->fin_g, O, 1, H, 0, "bert/encoder/final/LayerNorm/gamma");
  }
  D(&e->pool_w, W, 2, H, H, "bert/pooler/dense/kernel");
  D(&e->pool_b, Z, 1, H, 0, "bert/pooler/dense/bias");
#undef DB
#undef D
  *out = e;
  return EST_OK;
fail:
  est_bert_encoder_free(e);
  return est_error_prefix("declaring BERT variables: ");
}

void est_bert_encoder_free(est_bert_encoder *e) {
  if (!e) return;
  est_free(e->buf);
  free(e->sin_table);
  free(e->rope_global);
  free(e->rope_local);
  free(e->la);
  free(e->lv);
  free(e);
}

void est_bert_encoder_set_first_row(est_bert_encoder *e, int64_t first_row) {
  e->first_row = first_row > 0 ? first_row : 0;
}

void est_bert_encoder_set_recompute(est_bert_encoder *e, int on) { e->recompute = on != 0; }

est_precision est_bert_encoder_set_precision(est_bert_encoder *e, est_precision precision) {
  return e->precision = est_precision_resolve(precision);
}

est_precision est_bert_encoder_precision(const est_bert_encoder *e) { return e->precision; }

void est_bert_encoder_set_grads_ready(est_bert_encoder *e, est_bert_grads_ready_fn fn, void *ctx) {
  e->ready_fn = fn;
  e->ready_ctx = fn ? ctx : NULL;
}

/* The store pads every variable to a cache line and the padding belongs to no variable, so
 * adjacent variables merge into maximal runs with no padding between them. */
void est_bert_report_grads_ready(const est_var_store *vs, size_t first, size_t last, est_bert_grads_ready_fn fn,
                                 void *ctx) {
  if (!fn) return;
  size_t off = 0, count = 0;
  for (size_t i = first; i <= last; i++) {
    const est_variable *v = est_vars_at(vs, i);
    if (v->trainable && count && v->offset == off + count) {
      count += v->count;
      continue;
    }
    if (count) fn(ctx, off, count);
    off = v->offset;
    count = v->trainable ? v->count : 0;
  }
  if (count) fn(ctx, off, count);
}

size_t est_bert_encoder_word_embeddings_index(const est_bert_encoder *e) { return (size_t)e->word; }
size_t est_bert_encoder_first_variable(const est_bert_encoder *e) { return (size_t)e->word; }
size_t est_bert_encoder_last_variable(const est_bert_encoder *e) { return (size_t)e->pool_b; }
const est_bert_config *est_bert_encoder_config(const est_bert_encoder *e) { return &e->cfg; }
est_var_store *est_bert_encoder_vars(const est_bert_encoder *e) { return e->vs; }

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

/* One layer's activations; y is always the layer's own. masks: dropout masks wanted.
 * probs, pmask: the attention probabilities and their dropout mask, one layer's for all
 * (backward draws a lower layer's again from its kept Q, K, V: est_bert_encoder_backward). */
static void layout_layer(enc_layer_acts *a, carver *c, size_t B, size_t S, size_t H, size_t I, int masks,
                         float *probs, uint8_t *pmask, size_t lse) { /* I: h_pre's width (2 intermediate_size
                                                                        under GLU); lse: its floats or 0 */
  const size_t T = B * S;
  a->lse = lse ? CARVE_F(c, lse) : NULL;
  a->q = CARVE_F(c, T * H);
  a->k = CARVE_F(c, T * H);
  a->v = CARVE_F(c, T * H);
  a->probs = probs;
  a->pmask = pmask;
  a->ctx = CARVE_F(c, T * H);
  a->amask = masks ? CARVE_U8(c, T * H) : NULL;
  a->a_pre = CARVE_F(c, T * H);
  a->ln1_mean = CARVE_F(c, T);
  a->ln1_rstd = CARVE_F(c, T);
  a->a = CARVE_F(c, T * H);
  a->h_pre = CARVE_F(c, T * I);
  a->omask = masks ? CARVE_U8(c, T * H) : NULL;
  a->y_pre = CARVE_F(c, T * H);
  a->ln2_mean = CARVE_F(c, T);
  a->ln2_rstd = CARVE_F(c, T);
}

static void layout(est_bert_encoder *e, carver *c) {
  const size_t B = (size_t)e->max_B, S = (size_t)e->max_S, T = B * S;
  const size_t H = (size_t)e->cfg.hidden_size, I = (size_t)e->cfg.intermediate_size;
  const size_t N = (size_t)e->cfg.num_attention_heads, E = (size_t)e->E;
  const int bw = e->with_backward, proj = e->proj_w >= 0;
  const int glu = e->cfg.opt.ffn == EST_FFN_GLU, fused = e->cfg.opt.qkv_fused, pre = e->fin_g >= 0;
  e->ids = (int32_t *)carve(c, T * sizeof(int32_t));
  e->types = (int32_t *)carve(c, T * sizeof(int32_t));
  e->pos_ids = e->cfg.opt.position_ids == EST_POS_IDS_AFTER_PADDING ? (int32_t *)carve(c, T * sizeof(int32_t)) : NULL;
  e->emb_sum = CARVE_F(c, T * E);
  e->emb_mean = CARVE_F(c, T);
  e->emb_rstd = CARVE_F(c, T);
  e->emb_ln = CARVE_F(c, T * E);
  e->emb_out = CARVE_F(c, T * E);
  e->x0 = proj ? CARVE_F(c, T * H) : e->emb_out;
  e->emb_mask = bw ? CARVE_U8(c, T * E) : NULL;
  e->mask = bw ? (int32_t *)carve(c, T * sizeof(int32_t)) : NULL;
  /* sequences beyond EST_ATTENTION_FULL_MAX_SEQ run the tiled attention (enc_tiled), which
   * keeps no [S, S] probabilities: they and their scratch are sized for the longest that
   * still keeps them; a backward then keeps each layer's log-sum-exp rows instead */
  const int tiled = enc_tiled(e, (int)S);
  const size_t SP = tiled ? EST_ATTENTION_FULL_MAX_SEQ : S, lse = tiled && bw ? B * N * S : 0;
  float *probs = CARVE_F(c, B * N * SP * SP);
  uint8_t *pmask = bw ? CARVE_U8(c, B * N * SP * SP) : NULL;
  for (int l = 0; l < e->cfg.num_hidden_layers; l++) {
    enc_layer_acts *a = &e->la[l];
    if (l == 0 || (bw && !e->rc)) layout_layer(a, c, B, S, H, glu ? 2 * I : I, bw, probs, pmask, lse);
    else *a = e->la[0];  /* forward only or recompute: one layer's scratch serves all */
    a->y = CARVE_F(c, T * H);
  }
  e->first = CARVE_F(c, B * H);
  e->pool_pre = CARVE_F(c, B * H);
  e->pooled = CARVE_F(c, B * H);
  e->att_scratch = bw ? CARVE_F(c, est_attention_scratch_floats((int)B, (int)N, (int)SP)) : NULL;
  e->h = CARVE_F(c, T * I);
  e->qkv = fused ? CARVE_F(c, T * 3 * H) : NULL;
  e->fin_out = pre ? CARVE_F(c, T * H) : NULL;
  e->fin_mean = pre ? CARVE_F(c, T) : NULL;
  e->fin_rstd = pre ? CARVE_F(c, T) : NULL;
  enc_grads *d = &e->d;
  memset(d, 0, sizeof *d);
  if (!bw) return;
  d->qkv = fused ? CARVE_F(c, T * 3 * H) : NULL;
  d->seq_out = pre ? CARVE_F(c, T * H) : NULL;
  d->hidden = CARVE_F(c, T * H);
  d->pooled = CARVE_F(c, B * H);
  d->pool_pre = CARVE_F(c, B * H);
  d->first = CARVE_F(c, B * H);
  d->attn_out = CARVE_F(c, T * H);
  d->ffn_out = CARVE_F(c, T * H);
  d->inter = CARVE_F(c, T * I);
  d->inter_pre = glu ? CARVE_F(c, T * 2 * I) : e->h;
  d->attn_dense = CARVE_F(c, T * H);
  d->ctx = CARVE_F(c, T * H);
  d->q = CARVE_F(c, 3 * T * H);
  d->k = d->q ? d->q + T * H : NULL;
  d->v = d->q ? d->q + 2 * T * H : NULL;
  d->emb_out = proj ? CARVE_F(c, T * E) : NULL;
  d->emb_ln = E == H ? d->ffn_out : CARVE_F(c, T * E);
  d->emb_sum = E == H ? d->attn_out : CARVE_F(c, T * E);
}

est_status est_bert_encoder_reserve(est_bert_encoder *e, int max_batch, int max_seq_len, int with_backward) {
  if (max_batch <= 0 || max_seq_len <= 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "reserve: batch %d and sequence length %d must be positive",
                     max_batch, max_seq_len);
  if (max_seq_len > est_bert_config_max_seq_length(&e->cfg))
    return est_error(EST_ERR_INVALID_ARGUMENT,
                     "Cannot use sequence length %d because the BERT model was only trained up to sequence "
                     "length %d", max_seq_len, est_bert_config_max_seq_length(&e->cfg));
  with_backward = with_backward || e->with_backward;
  const int rc = with_backward && e->recompute;
  if (e->buf && max_batch <= e->max_B && max_seq_len <= e->max_S && with_backward == e->with_backward &&
      rc == e->rc)
    return EST_OK;
  est_free(e->buf);
  e->buf = NULL;
  e->buf_bytes = 0;
  e->valid = 0;
  e->B = e->S = 0;
  e->max_B = max_batch > e->max_B ? max_batch : e->max_B;
  e->max_S = max_seq_len > e->max_S ? max_seq_len : e->max_S;
  e->with_backward = with_backward;
  e->rc = rc;
  carver c = {NULL, 0};
  layout(e, &c);
  e->buf = est_alloc(c.off);
  if (!e->buf)
    return est_error(EST_ERR_NO_MEMORY, "cannot allocate %.1f MiB of activations for batch %d x %d tokens",
                     (double)c.off / 1048576.0, e->max_B, e->max_S);
  e->buf_bytes = c.off;
  c = (carver){e->buf, 0};
  layout(e, &c);
  return EST_OK;
}

size_t est_bert_encoder_activation_bytes(const est_bert_encoder *e) { return e->buf_bytes; }

void est_bert_encoder_log_activations(const est_bert_encoder *e, const char *what, int batch, int seq_len) {
  EST_LOG_INFO("%s activations: %.1f MiB for %d x %d tokens%s", what, (double)e->buf_bytes / 1048576.0, batch,
               seq_len, e->rc ? " (recompute: each layer's forward runs again in its backward)" : "");
}

void est_bert_zero(float *p, size_t n) {
  enum { CHUNK = 1 << 15 };  /* floats per work item */
  ptrdiff_t nchunks = (ptrdiff_t)((n + CHUNK - 1) / CHUNK);
#pragma omp parallel for schedule(static)
  for (ptrdiff_t c = 0; c < nchunks; c++) {
    size_t off = (size_t)c * CHUNK, len = n - off < CHUNK ? n - off : CHUNK;
    memset(p + off, 0, len * sizeof(float));
  }
}

/* ---- forward ------------------------------------------------------------------------ */


est_status est_bert_encoder_forward(est_bert_encoder *e, const int32_t *input_ids, const int32_t *input_mask,
                                    const int32_t *segment_ids, int batch, int seq_len, int training,
                                    uint64_t dropout_seed, uint64_t step) {
  e->valid = 0;
  if (!est_vars_finalized(e->vs))
    return est_error(EST_ERR_FAILED_PRECONDITION, "BERT forward: the variable store is not finalized");
  if (!input_ids) return est_error(EST_ERR_INVALID_ARGUMENT, "BERT forward: input_ids is NULL");
  if (!e->buf || batch <= 0 || seq_len <= 0 || batch > e->max_B || seq_len > e->max_S)
    return est_error(EST_ERR_INVALID_ARGUMENT,
                     "BERT forward: batch %d x sequence length %d exceeds the reservation %d x %d", batch, seq_len,
                     e->max_B, e->max_S);
  const est_bert_config *cfg = &e->cfg;
  if (training && !e->with_backward && (cfg->hidden_dropout_prob > 0 || cfg->attention_probs_dropout_prob > 0))
    return est_error(EST_ERR_FAILED_PRECONDITION,
                     "BERT forward: training (dropout) needs a reservation with backward");
  const int B = batch, S = seq_len, T = B * S, H = cfg->hidden_size;
  const float p_h = training ? (float)cfg->hidden_dropout_prob : 0.0f;
  const float p_a = training ? (float)cfg->attention_probs_dropout_prob : 0.0f;
  /* dropout masks at the rows' places in the global batch (est_bert_encoder_set_first_row) */
  const size_t row0 = (size_t)e->first_row;
#define V(idx) enc_value(e, idx)

  /* embeddings [T,E] (word + token type + position, as the options say) -> LayerNorm ->
   * dropout -> ELECTRA's projection to [T,H] */
  const int E = e->E;
  const float eps = (float)cfg->layer_norm_eps;
  if (cfg->opt.token_types != EST_TYPES_SEGMENTS) segment_ids = NULL; /* ZERO: row 0 for all; NONE: no table */
  if (e->pos_ids) est_position_ids_after_padding(e->pos_ids, input_ids, B, S, (int32_t)cfg->pad_token_id);
  const float *pos_table = e->sin_table ? e->sin_table : e->pos >= 0 ? V(e->pos) : NULL;
  est_status st = est_embeddings_forward_ex(e->emb_sum, input_ids, segment_ids, e->pos_ids, V(e->word),
                                            e->type >= 0 ? V(e->type) : NULL, pos_table, B, S, E, cfg->vocab_size,
                                            cfg->type_vocab_size, cfg->max_position_embeddings);
  if (st) return est_error_prefix("BERT embeddings: ");
  memcpy(e->ids, input_ids, (size_t)T * sizeof(int32_t));
  e->has_types = segment_ids != NULL;
  if (segment_ids) memcpy(e->types, segment_ids, (size_t)T * sizeof(int32_t));
  est_layernorm_forward_eps(e->emb_ln, e->emb_mean, e->emb_rstd, e->emb_sum, V(e->emb_g), V(e->emb_b), T, E, eps);
  est_dropout_forward_at(e->emb_out, e->emb_mask, e->emb_ln, (size_t)T * E, row0 * (size_t)S * (size_t)E, p_h,
                         dropout_seed, step, EST_BERT_DROPOUT_EMBEDDINGS);
  if (e->proj_w >= 0)
    est_matmul_forward(e->x0, e->emb_out, V(e->proj_w), V(e->proj_b), T, E, H, 0, e->precision);

  /* what backward needs to run a layer's attention or whole forward again */
  e->seed = dropout_seed;
  e->step = step;
  e->row0 = (int64_t)row0;
  e->has_mask = input_mask != NULL;
  if (input_mask && e->mask) memcpy(e->mask, input_mask, (size_t)T * sizeof(int32_t));
  enc_layers_forward(e, 0, cfg->num_hidden_layers, e->x0, input_mask, B, S, p_h, p_a, dropout_seed, step,
                     (int64_t)row0);
  if (e->fin_g >= 0) /* pre-LN's final LayerNorm: the sequence output */
    est_layernorm_forward_eps(e->fin_out, e->fin_mean, e->fin_rstd,
                              cfg->num_hidden_layers ? e->la[cfg->num_hidden_layers - 1].y : e->x0, V(e->fin_g),
                              V(e->fin_b), T, H, eps);

  /* pooler: tanh(first token . Wp + bp) [B,H] */
  const float *x = est_bert_encoder_sequence_output(e);
  for (int b = 0; b < B; b++) memcpy(e->first + (size_t)b * H, x + (size_t)b * S * H, (size_t)H * sizeof(float));
  est_matmul_forward(e->pool_pre, e->first, V(e->pool_w), V(e->pool_b), B, H, H, 0, e->precision);
  est_activation_forward(e->pooled, e->pool_pre, (size_t)B * H, EST_ACT_TANH);
#undef V

  e->B = B;
  e->S = S;
  e->p_hidden = p_h;
  e->p_attn = p_a;
  e->seq_grad_zeroed = e->pooled_grad_zeroed = 0;
  e->valid = 1;
  return EST_OK;
}

int enc_layer_window(const est_bert_encoder *e, int l) {
  const int n = e->cfg.opt.global_attn_every_n_layers;
  return n > 0 && l % n != 0 ? e->cfg.opt.local_attention / 2 : -1;
}

const float *enc_layer_rope(const est_bert_encoder *e, int l) {
  return enc_layer_window(e, l) >= 0 ? e->rope_local : e->rope_global;
}

/* The attention core of layer l: the tiled O(S) kernel where enc_tiled says (beyond
 * EST_ATTENTION_FULL_MAX_SEQ tokens without attention dropout; its log-sum-exp rows kept
 * for a backward), else the one that keeps the probabilities (every result of up to 512
 * tokens as it always was). */
static void attention_forward(est_bert_encoder *e, int l, enc_layer_acts *a, const int32_t *input_mask, int B, int S,
                              float p_a, uint64_t dropout_seed, uint64_t step, int64_t row0) {
  const int N = e->cfg.num_attention_heads, Dh = e->cfg.hidden_size / N;
  if (enc_tiled(e, S)) {
    est_attention_forward_tiled_lse(a->ctx, a->lse, a->q, a->k, a->v, input_mask, B, S, N, Dh,
                                    enc_layer_window(e, l));
    return;
  }
  est_attention_forward_window_at(a->ctx, a->probs, a->pmask, e->att_scratch, a->q, a->k, a->v, input_mask, B, S, N,
                                  Dh, enc_layer_window(e, l), p_a, dropout_seed, step,
                                  EST_BERT_DROPOUT_LAYER_BASE + 3u * (uint32_t)l, row0, e->precision);
}

/* Q, K, V [T,H] of layer l from its attention input x: three projections, or the fused one
 * split into them; then the rotary positions on Q and K. */
static void qkv_forward(est_bert_encoder *e, int l, enc_layer_acts *a, const float *x, int B, int S) {
  const est_bert_config *cfg = &e->cfg;
  const enc_layer_vars *w = &e->lv[l];
  const int T = B * S, H = cfg->hidden_size, N = cfg->num_attention_heads, Dh = H / N;
  if (cfg->opt.qkv_fused) {
    est_matmul_forward(e->qkv, x, enc_value(e, w->qkv_w), enc_value(e, w->qkv_b), T, H, 3 * H, 0, e->precision);
#pragma omp parallel for schedule(static)
    for (int t = 0; t < T; t++) {
      const float *r = e->qkv + (size_t)t * 3 * H;
      memcpy(a->q + (size_t)t * H, r, (size_t)H * sizeof(float));
      memcpy(a->k + (size_t)t * H, r + H, (size_t)H * sizeof(float));
      memcpy(a->v + (size_t)t * H, r + 2 * H, (size_t)H * sizeof(float));
    }
  } else {
    const est_dense_output qkv[3] = {{a->q, enc_value(e, w->q_w), enc_value(e, w->q_b), H},
                                     {a->k, enc_value(e, w->k_w), enc_value(e, w->k_b), H},
                                     {a->v, enc_value(e, w->v_w), enc_value(e, w->v_b), H}};
    est_matmul_forward_shared(x, T, H, qkv, 3, e->precision);
  }
  if (cfg->opt.positions == EST_POS_ROTARY) {
    const float *rope = enc_layer_rope(e, l);
    est_rotary_forward(a->q, rope, B, S, N, Dh, cfg->max_position_embeddings);
    est_rotary_forward(a->k, rope, B, S, N, Dh, cfg->max_position_embeddings);
  }
}

/* out [T,H] = the feed-forward block of in [T,H]: act(in Wi + bi) Wo + bo, or under GLU
 * (act(x) * g)(Wo) + bo with x, g the halves of in Wi + bi [T,2I] (a->h_pre). */
static void ffn_forward(est_bert_encoder *e, const enc_layer_vars *w, enc_layer_acts *a, float *out, const float *in,
                        int T) {
  const est_bert_config *cfg = &e->cfg;
  const int H = cfg->hidden_size, I = cfg->intermediate_size;
#define V(idx) enc_value(e, idx)
  if (cfg->opt.ffn == EST_FFN_GLU) {
    est_matmul_forward(a->h_pre, in, V(w->i_w), V(w->i_b), T, H, 2 * I, 0, e->precision);
    est_glu_forward(e->h, a->h_pre, T, I, cfg->hidden_act);
    est_matmul_forward(out, e->h, V(w->o_w), V(w->o_b), T, I, H, 0, e->precision);
  } else if (cfg->hidden_act == EST_ACT_GELU) { /* GELU fused into the first GEMM's epilogue */
    est_ffn_forward(out, e->h, a->h_pre, in, V(w->i_w), V(w->i_b), V(w->o_w), V(w->o_b), T, H, I, e->precision);
  } else {
    est_matmul_forward(a->h_pre, in, V(w->i_w), V(w->i_b), T, H, I, 0, e->precision);
    est_activation_forward(e->h, a->h_pre, (size_t)T * I, cfg->hidden_act);
    est_matmul_forward(out, e->h, V(w->o_w), V(w->o_b), T, I, H, 0, e->precision);
  }
#undef V
}

/* Layers [first, last) from x, the input of layer `first` [T,H], into e->la[first..last),
 * with the dropout coordinates of the forward (backward's recompute passes the last
 * forward's again, so it draws the same masks and computes the same numbers). */
void enc_layers_forward(est_bert_encoder *e, int first, int last, const float *x, const int32_t *input_mask, int B,
                        int S, float p_h, float p_a, uint64_t dropout_seed, uint64_t step, int64_t first_row) {
  const est_bert_config *cfg = &e->cfg;
  const int T = B * S, H = cfg->hidden_size;
  const float eps = (float)cfg->layer_norm_eps;
  const size_t row0 = (size_t)first_row, row0_th = row0 * (size_t)S * (size_t)H;
#define V(idx) enc_value(e, idx)
  for (int l = first; l < last; l++) {
    const enc_layer_vars *w = &e->lv[l];
    enc_layer_acts *a = &e->la[l];
    uint32_t drop_id = EST_BERT_DROPOUT_LAYER_BASE + 3u * (uint32_t)l;
    if (cfg->opt.norm == EST_NORM_PRE) {
      /* u = x + dropout(attention(LN1(x)) Wao + bao)   (layer 0: no LN1) */
      const float *xn = x;
      if (w->ln1_g >= 0) {
        est_layernorm_forward_eps(a->a_pre, a->ln1_mean, a->ln1_rstd, x, V(w->ln1_g), V(w->ln1_b), T, H, eps);
        xn = a->a_pre;
      }
      qkv_forward(e, l, a, xn, B, S);
      attention_forward(e, l, a, input_mask, B, S, p_a, dropout_seed, step, (int64_t)row0);
      est_matmul_forward(a->a, a->ctx, V(w->ao_w), V(w->ao_b), T, H, H, 0, e->precision);
      est_dropout_forward_at(a->a, a->amask, a->a, (size_t)T * H, row0_th, p_h, dropout_seed, step, drop_id + 1);
      /* a->a += x (u, kept: LN2's input), y_pre = LN2(u) */
      est_layernorm_forward_residual_eps(a->y_pre, a->ln2_mean, a->ln2_rstd, a->a, x, V(w->ln2_g), V(w->ln2_b), T,
                                         H, eps);
      /* y = u + dropout(ffn(LN2(u))) */
      ffn_forward(e, w, a, a->y, a->y_pre, T);
      est_dropout_forward_at(a->y, a->omask, a->y, (size_t)T * H, row0_th, p_h, dropout_seed, step, drop_id + 2);
      const size_t TH = (size_t)T * H;
      float *y = a->y;
      const float *u = a->a;
#pragma omp parallel for simd schedule(static)
      for (size_t i = 0; i < TH; i++) y[i] += u[i];
      x = a->y;
      continue;
    }
    /* self-attention: Q, K, V projections [T,H] -> per-head attention -> ctx [T,H] */
    qkv_forward(e, l, a, x, B, S);
    attention_forward(e, l, a, input_mask, B, S, p_a, dropout_seed, step, (int64_t)row0);
    /* A = LayerNorm(dropout(ctx Wao + bao) + x) */
    est_matmul_forward(a->a_pre, a->ctx, V(w->ao_w), V(w->ao_b), T, H, H, 0, e->precision);
    est_dropout_forward_at(a->a_pre, a->amask, a->a_pre, (size_t)T * H, row0_th, p_h, dropout_seed, step, drop_id + 1);
    est_layernorm_forward_residual_eps(a->a, a->ln1_mean, a->ln1_rstd, a->a_pre, x, V(w->ln1_g), V(w->ln1_b), T, H,
                                       eps);
    /* Y = LayerNorm(dropout(act(A Wi + bi) Wo + bo) + A) */
    ffn_forward(e, w, a, a->y_pre, a->a, T);
    est_dropout_forward_at(a->y_pre, a->omask, a->y_pre, (size_t)T * H, row0_th, p_h, dropout_seed, step, drop_id + 2);
    est_layernorm_forward_residual_eps(a->y, a->ln2_mean, a->ln2_rstd, a->y_pre, a->a, V(w->ln2_g), V(w->ln2_b), T,
                                       H, eps);
    x = a->y;
  }
#undef V
}

/* ---- views -------------------------------------------------------------------------- */

const float *est_bert_encoder_embedding_output(const est_bert_encoder *e) { return e->x0; }

const float *est_bert_encoder_layer_output(const est_bert_encoder *e, int layer) {
  if (layer < 0 || layer >= e->cfg.num_hidden_layers || !e->la) return NULL;
  return e->la[layer].y;
}

const float *est_bert_encoder_sequence_output(const est_bert_encoder *e) {
  if (e->fin_out) return e->fin_out; /* pre-LN: after the final LayerNorm */
  return e->cfg.num_hidden_layers ? e->la[e->cfg.num_hidden_layers - 1].y : e->x0;
}

const float *est_bert_encoder_pooled_output(const est_bert_encoder *e) { return e->pooled; }
int est_bert_encoder_batch(const est_bert_encoder *e) { return e->B; }
int est_bert_encoder_seq_len(const est_bert_encoder *e) { return e->S; }

float *est_bert_encoder_sequence_output_grad(est_bert_encoder *e) {
  if (!e->valid || !e->with_backward) return NULL;
  float *d = e->d.seq_out ? e->d.seq_out : e->d.hidden;
  if (!e->seq_grad_zeroed) est_bert_zero(d, (size_t)e->B * e->S * e->cfg.hidden_size);
  e->seq_grad_zeroed = 1;
  return d;
}

float *est_bert_encoder_pooled_output_grad(est_bert_encoder *e) {
  if (!e->valid || !e->with_backward) return NULL;
  if (!e->pooled_grad_zeroed) est_bert_zero(e->d.pooled, (size_t)e->B * e->cfg.hidden_size);
  e->pooled_grad_zeroed = 1;
  return e->d.pooled;
}
