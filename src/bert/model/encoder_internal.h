/* Internal: the BERT encoder's state, shared by encoder.c (variables, reservation,
 * forward) and encoder_backward.c. Public API and the buffer rules: est/bert_encoder.h. */
#ifndef EST_BERT_ENCODER_INTERNAL_H
#define EST_BERT_ENCODER_INTERNAL_H

#include "est/bert_encoder.h"

/* Store indices of one transformer layer's variables. */
typedef struct enc_layer_vars {
  /* -1 where the options declare none: biases under no_bias, q/k/v under qkv_fused (qkv
   * instead), layer 0's ln1 under pre-LN */
  int q_w, q_b, k_w, k_b, v_w, v_b;   /* attention/self/{query,key,value}/{kernel,bias} */
  int qkv_w, qkv_b;                   /* attention/self/qkv/{kernel [H,3H], bias} (qkv_fused) */
  int ao_w, ao_b, ln1_g, ln1_b;       /* attention/output/dense, attention/output/LayerNorm */
  int i_w, i_b, o_w, o_b, ln2_g, ln2_b; /* intermediate/dense ([H,2I] under GLU), output/dense,
                                          output/LayerNorm */
  int first, last;                    /* the layer's first and last variable (report group) */
} enc_layer_vars;

/* What one layer keeps for its backward pass. T = B*S tokens. In a forward-only or a
 * recomputing reservation every layer points at the same scratch, except y. */
typedef struct enc_layer_acts {
  float *q, *k, *v;             /* [T,H] */
  float *probs;                 /* [B,N,S,S] attention probabilities before dropout, */
  uint8_t *pmask;               /* [B,N,S,S] their dropout mask (NULL forward-only): both one
                                   buffer for all layers, drawn again in backward */
  float *ctx;                   /* [T,H] attention context (heads concatenated) */
  float *lse;                   /* [B,N,S] the tiled attention's log-sum-exp per query row,
                                   kept for its backward (enc_tiled; else NULL) */
  uint8_t *amask;               /* [T,H] dropout mask of the attention output dense */
  float *a_pre, *ln1_mean, *ln1_rstd, *a; /* [T,H] residual sum, [T] stats, [T,H] LayerNorm out */
  /* pre-LN reuses the buffers: a_pre = LN1(x) (layer 0: unused), a = x + attention block
   * (the residual stream u), y_pre = LN2(u), y = u + ffn block */
  float *h_pre;                 /* [T,I] ([T,2I] under GLU) intermediate dense out (the activation's output is
                                   recomputed in backward: one [T,I] buffer for all layers) */
  uint8_t *omask;               /* [T,H] dropout mask of the output dense */
  float *y_pre, *ln2_mean, *ln2_rstd, *y; /* [T,H] residual sum, stats, layer output */
} enc_layer_acts;

/* Activation gradients: scratch of the layer at hand, reused from the top layer down.
 * Each name is d(loss)/d(the tensor named), written by the first op into it (EST_GRAD_WRITE)
 * and added into by the rest. */
typedef struct enc_grads {
  float *hidden;      /* [T,H] d layer output on entry to a layer, d layer input on exit;
                         on entry to backward it is the public sequence-output gradient */
  float *pooled;      /* [B,H] the public pooled-output gradient */
  float *pool_pre;    /* [B,H] d(first . Wp + bp), before tanh */
  float *first;       /* [B,H] d first-token rows of the sequence output */
  float *attn_out;    /* [T,H] d A, the attention block's output (LayerNorm 1's output) */
  float *ffn_out;     /* [T,H] d(act(A Wi + bi) Wo + bo), after the output dropout's backward */
  float *inter;       /* [T,I] d act(A Wi + bi); with the tanh GELU, act(A Wi + bi) itself
                         (est_matmul_backward_gelu recomputes it there, d act is not stored) */
  float *inter_pre;   /* [T,I] d(A Wi + bi): the act(h_pre) buffer `h`, free by then (its own
                         [T,2I] under GLU) */
  float *qkv;         /* [T,3H] d(x Wqkv) under qkv_fused: d Q, d K, d V side by side */
  float *seq_out;     /* [T,H] under pre-LN: the public sequence-output gradient (after the
                         final LayerNorm); hidden is then d of the last layer's output */
  float *attn_dense;  /* [T,H] d(ctx Wao + bao), after the attention-output dropout's backward */
  float *ctx;         /* [T,H] d ctx */
  float *q, *k, *v;   /* [T,H] each, consecutive: d Q, d K, d V */
  float *emb_out;     /* [T,E] d embedding output before embeddings_project (NULL without one) */
  float *emb_ln;      /* [T,E] d LayerNorm(embedding sum) = the ffn_out buffer, free by then
                         (its own buffer when E != H) */
  float *emb_sum;     /* [T,E] d embedding sum = the attn_out buffer, free by then (idem) */
} enc_grads;

struct est_bert_encoder {
  est_bert_config cfg;
  est_var_store *vs;
  int word, type, pos, emb_g, emb_b;       /* type -1: no token types; pos -1: no trained table */
  int proj_w, proj_b;                     /* embeddings_project [E,H], [H]; -1 without one */
  int emb_last;                           /* the last embedding variable (report group) */
  int E;                                  /* embedding width: opt.embedding_size or H */
  float *sin_table;                       /* [P,E] EST_POS_SINUSOIDAL's fixed table, else NULL */
  enc_layer_vars *lv;
  int fin_g, fin_b;                       /* pre-LN's final LayerNorm; -1 without */
  float *rope_global, *rope_local;        /* EST_POS_ROTARY's cos/sin tables [2 P Dh/2] */
  int pool_w, pool_b;
  est_precision precision;                /* of every GEMM of the encoder and its heads */

  /* reservation */
  int max_B, max_S, with_backward;
  int recompute;                          /* est_bert_encoder_set_recompute, for the next reserve */
  int rc;                                 /* this reservation recomputes: with_backward, but one
                                             layer's scratch for all, each layer's y kept */
  void *buf;
  size_t buf_bytes;
  int32_t *ids, *types;                   /* copies of the last batch, for backward */
  int32_t *mask;                          /* input_mask copy [T] with backward, for recomputes */
  int32_t *pos_ids;                       /* [T] EST_POS_IDS_AFTER_PADDING's rows, else NULL */
  float *emb_sum, *emb_mean, *emb_rstd, *emb_ln, *emb_out; /* [T,E] ([T] stats) */
  float *x0;                              /* [T,H] layer 0's input: emb_out, or its projection */
  uint8_t *emb_mask;
  enc_layer_acts *la;
  float *first, *pool_pre, *pooled;       /* [B,H] */
  float *att_scratch;
  float *h;                               /* [T,I] act(h_pre) of the layer at hand */
  float *qkv;                             /* [T,3H] x Wqkv (qkv_fused), split into q, k, v */
  float *fin_out, *fin_mean, *fin_rstd;   /* pre-LN: the final LayerNorm's [T,H] and stats */
  enc_grads d;

  /* the last forward */
  int B, S, has_types, valid;
  int seq_grad_zeroed, pooled_grad_zeroed; /* output gradients zeroed since the forward */
  float p_hidden, p_attn;
  int has_mask;
  uint64_t seed, step;                    /* dropout coordinates, for the recompute */
  int64_t row0;

  est_bert_grads_ready_fn ready_fn;
  void *ready_ctx;
  int64_t first_row; /* est_bert_encoder_set_first_row */
};

/* A variable's value or gradient; NULL for -1, a variable the options leave out (a bias
 * under no_bias: every op takes a NULL bias). */
static inline float *enc_value(const est_bert_encoder *e, int idx) {
  return idx < 0 ? NULL : est_vars_value(e->vs, (size_t)idx);
}
static inline float *enc_grad(const est_bert_encoder *e, int idx) {
  return idx < 0 ? NULL : est_vars_grad(e->vs, (size_t)idx);
}

/* Whether a forward of S tokens runs the tiled attention (O(S) memory, no probabilities
 * kept): beyond EST_ATTENTION_FULL_MAX_SEQ tokens, forward-only or without attention
 * dropout (the tiled kernels have none); up to it the kernel that keeps the probabilities,
 * as always. */
static inline int enc_tiled(const est_bert_encoder *e, int S) {
  return S > EST_ATTENTION_FULL_MAX_SEQ && (!e->with_backward || e->cfg.attention_probs_dropout_prob == 0.0);
}

/* Layer l's attention window (-1: global) and, under rotary positions, its cos/sin table. */
int enc_layer_window(const est_bert_encoder *e, int l);
const float *enc_layer_rope(const est_bert_encoder *e, int l);

/* Layers [first, last) forward from x, layer first's input [B*S,H], into e->la (encoder.c). */
void enc_layers_forward(est_bert_encoder *e, int first, int last, const float *x, const int32_t *input_mask, int B,
                        int S, float p_h, float p_a, uint64_t dropout_seed, uint64_t step, int64_t first_row);

/* p[0..n) = 0, split over the OpenMP threads. */
void est_bert_zero(float *p, size_t n);

#endif
