/* BERT encoder backward: from d sequence output [T,H] and d pooled output [B,H] (what the
 * heads added) down to every parameter gradient.
 *
 * Every op's backward adds into its input gradient (est/nn.h), and a tensor read twice
 * gets both gradients by handing both backwards the same buffer: a residual sum
 * r = f(u) + u lets LayerNorm's backward add d r straight into d u, then f's backward adds
 * its part on top. The first op into each named gradient buffer (enc_grads) writes it
 * instead (its `_mode` twin with EST_GRAD_WRITE), so no buffer is zeroed first. A dropout
 * that dropped nothing (prob 0) is the identity, and its gradient is its output's gradient
 * buffer itself. */
#include <stddef.h>
#include <string.h>

#include "bert/model/encoder_internal.h"

/* d input of a dropout from d output: dout itself when prob is 0, else scratch (written). */
static const float *dropout_grad(float *scratch, const float *dout, const uint8_t *mask, size_t n, float prob) {
  if (prob <= 0.0f) return dout;
  est_dropout_backward_mode(scratch, dout, mask, n, prob, EST_GRAD_WRITE);
  return scratch;
}

/* The feed-forward block's backward, from d_ffn (d of its output) to d of its input `in`
 * into dinp as `mode` says; parameter gradients +=. */
static void ffn_backward(est_bert_encoder *e, const enc_layer_vars *w, const enc_layer_acts *a, float *dinp,
                         est_grad_mode mode, const float *d_ffn, const float *in, int T) {
  const est_bert_config *cfg = &e->cfg;
  const int H = cfg->hidden_size, I = cfg->intermediate_size;
  const size_t TI = (size_t)T * I;
  enc_grads *d = &e->d;
#define V(idx) enc_value(e, idx)
#define G(idx) enc_grad(e, idx)
  if (cfg->opt.ffn == EST_FFN_GLU) {
    /* ffn = glu(h_pre) Wo + bo, h_pre = in Wi + bi [T,2I]: glu(h_pre) recomputed into e->h */
    est_glu_forward(e->h, a->h_pre, T, I, cfg->hidden_act);
    est_matmul_backward_mode(d->inter, G(w->o_w), G(w->o_b), d_ffn, e->h, V(w->o_w), T, I, H, 0, EST_GRAD_WRITE,
                             e->precision);
    est_glu_backward_mode(d->inter_pre, d->inter, a->h_pre, T, I, cfg->hidden_act, EST_GRAD_WRITE);
    est_matmul_backward_mode(dinp, G(w->i_w), G(w->i_b), d->inter_pre, in, V(w->i_w), T, H, 2 * I, 0, mode,
                             e->precision);
    return;
  }
  /* ffn = act(h_pre) Wo + bo, h_pre = in Wi + bi. act(h_pre) is recomputed rather than
   * kept for every layer. With the tanh GELU, d h_pre comes out of d act's GEMM, whose
   * epilogue recomputes act(h_pre) into d->inter (d act is never stored). Other
   * activations take the passes: act(h_pre) into e->h, d act into d->inter, then d h_pre
   * into e->h again (d->inter_pre is e->h). */
  if (cfg->hidden_act == EST_ACT_GELU) {
    est_matmul_backward_gelu(d->inter_pre, d->inter, G(w->o_w), G(w->o_b), d_ffn, a->h_pre, V(w->o_w), T, I, H, 0,
                             e->precision);
  } else {
    est_activation_forward(e->h, a->h_pre, TI, cfg->hidden_act);
    est_matmul_backward_mode(d->inter, G(w->o_w), G(w->o_b), d_ffn, e->h, V(w->o_w), T, I, H, 0, EST_GRAD_WRITE,
                             e->precision);
    est_activation_backward_mode(d->inter_pre, d->inter, a->h_pre, TI, cfg->hidden_act, EST_GRAD_WRITE);
  }
  est_matmul_backward_mode(dinp, G(w->i_w), G(w->i_b), d->inter_pre, in, V(w->i_w), T, H, I, 0, mode, e->precision);
#undef V
#undef G
}

/* The attention core's backward and the Q, K, V projections': from d->ctx to d of the
 * attention input xn into dinp as `mode` says. */
static void attention_backward(est_bert_encoder *e, int l, float *dinp, est_grad_mode mode, const float *xn, int B,
                               int S) {
  const est_bert_config *cfg = &e->cfg;
  const int T = B * S, H = cfg->hidden_size, N = cfg->num_attention_heads, Dh = H / N;
  const enc_layer_vars *w = &e->lv[l];
  const enc_layer_acts *a = &e->la[l];
  enc_grads *d = &e->d;
#define V(idx) enc_value(e, idx)
#define G(idx) enc_grad(e, idx)
  /* attention core -> d Q, d K, d V (written) */
  const int32_t *mask = e->has_mask ? e->mask : NULL;
  if (enc_tiled(e, S)) { /* O(S): the probabilities computed again per tile from the kept lse */
    est_attention_backward_tiled(d->q, d->k, d->v, d->ctx, a->q, a->k, a->v, a->ctx, a->lse, mask, B, S, N, Dh,
                                 enc_layer_window(e, l), EST_GRAD_WRITE);
  } else {
    /* The probabilities and their mask are one buffer for all layers, last written by the
     * top layer's forward (or this layer's recompute): below the top, draw them again from
     * the kept Q, K, V, mask and dropout coordinates (the same numbers; ctx rewritten
     * unchanged) */
    if (!e->rc && l < cfg->num_hidden_layers - 1)
      est_attention_forward_window_at(a->ctx, a->probs, a->pmask, e->att_scratch, a->q, a->k, a->v, mask, B, S, N,
                                      Dh, enc_layer_window(e, l), e->p_attn, e->seed, e->step,
                                      EST_BERT_DROPOUT_LAYER_BASE + 3u * (uint32_t)l, e->row0, e->precision);
    est_attention_backward_mode(d->q, d->k, d->v, e->att_scratch, d->ctx, a->q, a->k, a->v, a->probs, a->pmask, B,
                                S, N, Dh, e->p_attn, EST_GRAD_WRITE, e->precision);
  }
  if (cfg->opt.positions == EST_POS_ROTARY) { /* d of Q, K before their rotation */
    const float *rope = enc_layer_rope(e, l);
    est_rotary_backward(d->q, rope, B, S, N, Dh, cfg->max_position_embeddings);
    est_rotary_backward(d->k, rope, B, S, N, Dh, cfg->max_position_embeddings);
  }
  if (cfg->opt.qkv_fused) {
    /* d(xn Wqkv) [T,3H] = d Q, d K, d V side by side, then one GEMM's backward */
#pragma omp parallel for schedule(static)
    for (int t = 0; t < T; t++) {
      float *r = d->qkv + (size_t)t * 3 * H;
      memcpy(r, d->q + (size_t)t * H, (size_t)H * sizeof(float));
      memcpy(r + H, d->k + (size_t)t * H, (size_t)H * sizeof(float));
      memcpy(r + 2 * H, d->v + (size_t)t * H, (size_t)H * sizeof(float));
    }
    est_matmul_backward_mode(dinp, G(w->qkv_w), G(w->qkv_b), d->qkv, xn, V(w->qkv_w), T, H, 3 * H, 0, mode,
                             e->precision);
  } else {
    est_matmul_backward_mode(dinp, G(w->q_w), G(w->q_b), d->q, xn, V(w->q_w), T, H, H, 0, mode, e->precision);
    est_matmul_backward(dinp, G(w->k_w), G(w->k_b), d->k, xn, V(w->k_w), T, H, H, 0, e->precision);
    est_matmul_backward(dinp, G(w->v_w), G(w->v_b), d->v, xn, V(w->v_w), T, H, H, 0, e->precision);
  }
#undef V
#undef G
}

/* A pre-LN layer (ModernBERT), top down: y = u + dropout(ffn(LN2(u))), u = x +
 * dropout(attention(LN1(x)) Wao + bao). On entry d->hidden = d y; on exit d x. d u starts as
 * d y itself (the residual), in place. */
static void pre_layer_backward(est_bert_encoder *e, int l, int B, int S, const enc_layer_vars *w,
                               const enc_layer_acts *a, const float *x) {
  const int T = B * S, H = e->cfg.hidden_size;
  const size_t TH = (size_t)T * H;
  enc_grads *d = &e->d;
#define V(idx) enc_value(e, idx)
#define G(idx) enc_grad(e, idx)
  const float *d_ffn = dropout_grad(d->ffn_out, d->hidden, a->omask, TH, e->p_hidden);
  ffn_backward(e, w, a, d->attn_out, EST_GRAD_WRITE, d_ffn, a->y_pre, T); /* d LN2(u) */
  est_layernorm_backward_mode(d->hidden, G(w->ln2_g), G(w->ln2_b), d->attn_out, a->a, V(w->ln2_g), a->ln2_mean,
                              a->ln2_rstd, T, H, EST_GRAD_ADD); /* d->hidden: d u */
  const float *d_dense = dropout_grad(d->attn_dense, d->hidden, a->amask, TH, e->p_hidden);
  est_matmul_backward_mode(d->ctx, G(w->ao_w), G(w->ao_b), d_dense, a->ctx, V(w->ao_w), T, H, H, 0,
                           EST_GRAD_WRITE, e->precision);
  if (w->ln1_g < 0) { /* layer 0: the attention's input is x itself */
    attention_backward(e, l, d->hidden, EST_GRAD_ADD, x, B, S);
  } else {
    attention_backward(e, l, d->attn_out, EST_GRAD_WRITE, a->a_pre, B, S);
    est_layernorm_backward_mode(d->hidden, G(w->ln1_g), G(w->ln1_b), d->attn_out, x, V(w->ln1_g), a->ln1_mean,
                                a->ln1_rstd, T, H, EST_GRAD_ADD);
  }
#undef V
#undef G
}

/* One post-LN transformer layer, top down. On entry d->hidden = d layer output; on exit d
 * layer input x. */
static void layer_backward(est_bert_encoder *e, int l, int B, int S) {
  const enc_layer_vars *w = &e->lv[l];
  const enc_layer_acts *a = &e->la[l];
  const float *x = l ? e->la[l - 1].y : e->x0;
  if (e->cfg.opt.norm == EST_NORM_PRE) {
    pre_layer_backward(e, l, B, S, w, a, x);
    return;
  }
  const est_bert_config *cfg = &e->cfg;
  const int T = B * S, H = cfg->hidden_size;
  const size_t TH = (size_t)T * H;
  enc_grads *d = &e->d;
#define V(idx) enc_value(e, idx)
#define G(idx) enc_grad(e, idx)

  /* Y = LayerNorm(y_pre), y_pre = dropout(ffn) + A: LayerNorm's backward starts d A */
  est_layernorm_backward_mode(d->attn_out, G(w->ln2_g), G(w->ln2_b), d->hidden, a->y_pre, V(w->ln2_g),
                              a->ln2_mean, a->ln2_rstd, T, H, EST_GRAD_WRITE);
  const float *d_ffn = dropout_grad(d->ffn_out, d->attn_out, a->omask, TH, e->p_hidden);
  ffn_backward(e, w, a, d->attn_out, EST_GRAD_ADD, d_ffn, a->a, T);

  /* A = LayerNorm(a_pre), a_pre = dropout(ctx Wao + bao) + x: LayerNorm's backward starts d x */
  est_layernorm_backward_mode(d->hidden, G(w->ln1_g), G(w->ln1_b), d->attn_out, a->a_pre, V(w->ln1_g),
                              a->ln1_mean, a->ln1_rstd, T, H, EST_GRAD_WRITE);
  const float *d_dense = dropout_grad(d->attn_dense, d->hidden, a->amask, TH, e->p_hidden);
  est_matmul_backward_mode(d->ctx, G(w->ao_w), G(w->ao_b), d_dense, a->ctx, V(w->ao_w), T, H, H, 0,
                           EST_GRAD_WRITE, e->precision);
  /* the three projections of x add into d x */
  attention_backward(e, l, d->hidden, EST_GRAD_ADD, x, B, S);
#undef V
#undef G
}

est_status est_bert_encoder_backward(est_bert_encoder *e) {
  if (!e->valid || !e->with_backward)
    return est_error(EST_ERR_FAILED_PRECONDITION,
                     "BERT encoder backward needs a successful forward pass just before it, on a reservation "
                     "with backward");
  const est_bert_config *cfg = &e->cfg;
  const int B = e->B, S = e->S, H = cfg->hidden_size;
  const size_t BH = (size_t)B * H;
  enc_grads *d = &e->d;
  /* zeroed here when no head added into them */
  float *d_seq = est_bert_encoder_sequence_output_grad(e);
  const float *d_pooled = est_bert_encoder_pooled_output_grad(e);
#define V(idx) enc_value(e, idx)
#define G(idx) enc_grad(e, idx)

  /* pooled = tanh(first . Wp + bp), first = row 0 of each example's sequence output */
  est_activation_backward_mode(d->pool_pre, d_pooled, e->pool_pre, BH, EST_ACT_TANH, EST_GRAD_WRITE);
  est_matmul_backward_mode(d->first, G(e->pool_w), G(e->pool_b), d->pool_pre, e->first, V(e->pool_w), B, H, H, 0,
                           EST_GRAD_WRITE, e->precision);
  est_bert_report_grads_ready(e->vs, (size_t)e->pool_w, (size_t)e->pool_b, e->ready_fn, e->ready_ctx);
  for (int b = 0; b < B; b++) {
    float *row = d_seq + (size_t)b * S * H;
    const float *g = d->first + (size_t)b * H;
#pragma omp simd
    for (int c = 0; c < H; c++) row[c] += g[c];
  }
  if (e->fin_g >= 0) { /* pre-LN: d_seq is after the final LayerNorm; d->hidden gets d of its input */
    const int L = cfg->num_hidden_layers;
    est_layernorm_backward_mode(d->hidden, G(e->fin_g), G(e->fin_b), d_seq, L ? e->la[L - 1].y : e->x0,
                                V(e->fin_g), e->fin_mean, e->fin_rstd, B * S, H, EST_GRAD_WRITE);
    est_bert_report_grads_ready(e->vs, (size_t)(e->fin_b >= 0 ? e->fin_b : e->fin_g), (size_t)e->fin_g, e->ready_fn,
                                e->ready_ctx);
  }

  /* d->hidden (= d_seq) holds d(layer output) on entry to each layer, d(layer input) on exit */
  for (int l = cfg->num_hidden_layers - 1; l >= 0; l--) {
    /* recompute: the shared scratch still holds the top layer's activations; every layer
     * below runs its forward again from its kept input, the same masks, the same numbers */
    if (e->rc && l < cfg->num_hidden_layers - 1)
      enc_layers_forward(e, l, l + 1, l ? e->la[l - 1].y : e->x0, e->has_mask ? e->mask : NULL, B, S,
                         e->p_hidden, e->p_attn, e->seed, e->step, e->row0);
    layer_backward(e, l, B, S);
    est_bert_report_grads_ready(e->vs, (size_t)e->lv[l].first, (size_t)e->lv[l].last, e->ready_fn, e->ready_ctx);
  }

  /* embeddings: (projection ->) dropout -> LayerNorm -> scatter-add into the tables */
  const int E = e->E;
  const size_t TE = (size_t)B * S * E;
  const float *d_emb = d->hidden;
  if (e->proj_w >= 0) {
    est_matmul_backward_mode(d->emb_out, G(e->proj_w), G(e->proj_b), d->hidden, e->emb_out, V(e->proj_w), B * S, E,
                             H, 0, EST_GRAD_WRITE, e->precision);
    d_emb = d->emb_out;
  }
  const float *d_ln = dropout_grad(d->emb_ln, d_emb, e->emb_mask, TE, e->p_hidden);
  est_layernorm_backward_mode(d->emb_sum, G(e->emb_g), G(e->emb_b), d_ln, e->emb_sum, V(e->emb_g), e->emb_mean,
                              e->emb_rstd, B * S, E, EST_GRAD_WRITE);
  /* the sinusoidal table is no variable: no gradient */
  est_embeddings_backward_ex(G(e->word), e->type >= 0 ? G(e->type) : NULL, e->pos >= 0 ? G(e->pos) : NULL,
                             d->emb_sum, e->ids, e->has_types ? e->types : NULL, e->pos_ids, B, S, E,
                             cfg->vocab_size, cfg->type_vocab_size, cfg->opt.pad_rows_frozen ? cfg->pad_token_id : -1,
                             cfg->opt.pad_rows_frozen && e->pos_ids ? cfg->pad_token_id : -1);
  est_bert_report_grads_ready(e->vs, (size_t)e->word, (size_t)e->emb_last, e->ready_fn, e->ready_ctx);
#undef V
#undef G
  /* the output gradients are consumed: one backward per forward */
  e->valid = 0;
  return EST_OK;
}
