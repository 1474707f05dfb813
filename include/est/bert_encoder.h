/* est/bert_encoder.h — BertConfig and the BERT encoder (modeling.py BertModel): embeddings,
 * L post-LN transformer layers and the tanh pooler, forward and backward over named
 * buffers. Task heads (the classifier in est/bert_classifier.h, a masked-LM + next-sentence
 * head, a span head, serving) sit on top and never reach inside.
 *
 *     est_bert_encoder *enc;
 *     est_bert_encoder_create(&enc, &cfg, vs);           // declares bert/... variables
 *     my_head_create(&head, vs);                         // the head's own variables after them
 *     est_vars_finalize(vs, seed);                       // or restore a checkpoint
 *     est_bert_encoder_reserve(enc, 32, 128, 1);         // 1 = keep what backward needs
 *     for (step...) {
 *       est_vars_zero_grads(vs);
 *       est_bert_encoder_forward(enc, ids, mask, segs, B, S, 1, seed, step);
 *       const float *seq = est_bert_encoder_sequence_output(enc);    // [B,S,H]
 *       const float *pooled = est_bert_encoder_pooled_output(enc);   // [B,H]
 *       my_head_forward(head, seq, pooled, ..., &loss);
 *       // the head's backward ADDS d loss/d output into the encoder's gradient buffers
 *       my_head_backward(head, est_bert_encoder_sequence_output_grad(enc),
 *                        est_bert_encoder_pooled_output_grad(enc));
 *       est_bert_encoder_backward(enc);                  // parameter grads +=
 *       est_optimizer_apply(opt, step);
 *     }
 *
 * Shapes (T = B*S tokens, row-major, rows packed at the forward's B and S, whatever the
 * reservation): sequence output and every layer output [B,S,H] = [T,H], pooled output [B,H],
 * word embeddings [V,H].
 *
 * Buffers and ownership. The encoder owns one activation buffer (reserve) holding every
 * activation, the two output gradients and the backward scratch; the views returned below
 * point into it and stay valid until the next forward or reserve. Variables live in the
 * caller's est_var_store; heads reach the encoder's through indices (e.g. a masked-LM head
 * reads the tied word-embedding table with est_vars_value(vs, word_idx) and ADDS its part of
 * the table's gradient with est_vars_grad(vs, word_idx), before the encoder's backward).
 *
 * What accumulates (the one rule of est/nn.h, kept here):
 *   - est_bert_encoder_sequence_output_grad / _pooled_output_grad return d loss / d output
 *     buffers that are zero after each forward (zeroed lazily, on the first request or in
 *     backward) and into which any number of heads ADD (+=). A head that does not use an
 *     output leaves its gradient alone, and it counts as zero.
 *   - est_bert_encoder_backward ADDS every encoder parameter gradient into the store's
 *     gradient buffer (zero it first for a fresh step; micro-batches accumulate for free).
 *     It consumes the two output gradients (their contents are undefined afterwards).
 *
 * Writing a head (e.g. run_pretraining.py's): declare its variables after the encoder's;
 * reserve its own activations; forward reads the views (a masked-LM head gathers the rows
 * b*S + masked_lm_positions[b][k] of the sequence output, runs cls/predictions/transform,
 * and multiplies by the word-embedding table read through est_bert_encoder_word_embeddings_
 * index; a next-sentence head reads the pooled output); backward adds into the gathered
 * rows of the sequence-output gradient, into the pooled-output gradient, into the word-
 * embedding gradient and into its own variables, reports its own group with
 * est_bert_report_grads_ready, and then the caller runs est_bert_encoder_backward once.
 *
 * Shorter batches. Forward runs any batch <= max_batch and any seq_len <= max_seq_len of the
 * reservation (serving runs each batch at the length of its longest example); the results
 * equal those of a reservation of exactly that size.
 *
 * Dropout. With training = 1 the hidden and attention dropouts of the config are on, masks
 * drawn from (dropout_seed, step, tensor id) (est/nn.h). The encoder uses tensor ids
 * EST_BERT_DROPOUT_EMBEDDINGS and EST_BERT_DROPOUT_LAYER_BASE + 3*layer + {0,1,2}; heads pick
 * theirs in [EST_BERT_DROPOUT_HEAD_FIRST, EST_BERT_DROPOUT_HEAD_LAST].
 *
 * Variables carry exactly TF's names and shapes, declared in this order (so a BERT checkpoint
 * loads by name): bert/embeddings/{word_embeddings [V,H], token_type_embeddings [T,H],
 * position_embeddings [P,H], LayerNorm/beta, LayerNorm/gamma}, then per layer N
 * bert/encoder/layer_N/attention/self/{query,key,value}/{kernel [H,H],bias},
 * attention/output/dense, attention/output/LayerNorm, intermediate/dense [H,I],
 * output/dense [I,H], output/LayerNorm, then bert/pooler/dense/{kernel,bias}. The options
 * (docs/bert.md §11) drop or reshape some: no token type or position table, no biases or
 * betas (no_bias), one attention/self/qkv/kernel [H,3H] for the three (qkv_fused),
 * intermediate/dense [H,2I] (GLU), no attention/output/LayerNorm on layer 0 and a
 * bert/encoder/final/LayerNorm before the pooler (pre-LN).
 */
#ifndef EST_BERT_ENCODER_H
#define EST_BERT_ENCODER_H

#include <stddef.h>
#include <stdint.h>

#include "est/nn.h"
#include "est/precision.h"
#include "est/status.h"
#include "est/variables.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the encoder's options (docs/bert.md §11) ---------------------------------------- */

/* One encoder with options, not one copy per architecture. Zeroed options are Google's
 * BERT: est_bert_config_default() and every reader of bert_config.json leave them so, and
 * then the encoder is the one it always was, bit for bit. A HuggingFace config.json sets them
 * from its model_type (src/hf/hf_config.c). */

/* Which family of names and heads (HF's model_type): only names and exports read it; the
 * maths is the options below. */
typedef enum est_model_family {
  EST_FAMILY_BERT = 0,
  EST_FAMILY_ROBERTA,      /* "roberta" (also CamemBERT's shape) */
  EST_FAMILY_XLM_ROBERTA,  /* "xlm-roberta": RoBERTa's maths and names */
  EST_FAMILY_DISTILBERT,   /* "distilbert" */
  EST_FAMILY_ELECTRA,      /* "electra" (the discriminator's encoder) */
  EST_FAMILY_MODERNBERT,   /* "modernbert" */
} est_model_family;

/* Where a layer's LayerNorms sit. Post: x = LN(x + f(x)) after each block. Pre (ModernBERT):
 * x = x + f(LN(x)) for both blocks, layer 0's attention block without its LN (the embedding
 * LayerNorm is its norm: transformers' ModernBERT has an Identity there), and a final LN
 * (bert/encoder/final/LayerNorm) on the last layer's output: the sequence output. */
typedef enum est_norm_position { EST_NORM_POST = 0, EST_NORM_PRE } est_norm_position;

/* How positions enter the model. */
typedef enum est_position_encoding {
  EST_POS_LEARNED = 0, /* a trained table [max_position_embeddings, E] added to the embeddings */
  EST_POS_SINUSOIDAL,  /* a fixed table of sin/cos (DistilBERT's sinusoidal_pos_embds), not trained */
  EST_POS_ROTARY,      /* rotary on Q and K (est_rotary_forward), rotary_theta on global layers,
                          rotary_theta_local on sliding-window ones (ModernBERT); no table */
  EST_POS_NONE,        /* no positions at all */
} est_position_encoding;

/* The row of the position table a token reads. */
typedef enum est_position_ids {
  EST_POS_IDS_INDEX = 0,     /* token s reads row s (BERT, DistilBERT, ELECTRA) */
  EST_POS_IDS_AFTER_PADDING, /* RoBERTa, XLM-R (transformers' create_position_ids_from_input_ids):
                                a token whose id is pad_token_id reads row pad_token_id, any other
                                reads pad_token_id + (the non-padding tokens up to it, itself included) */
} est_position_ids;

/* What token types (segment ids) do. */
typedef enum est_token_types {
  EST_TYPES_SEGMENTS = 0, /* segment_ids pick a row of [type_vocab_size, E] (BERT, ELECTRA) */
  EST_TYPES_ZERO,         /* every token adds row 0 whatever its segment id (RoBERTa, XLM-R:
                             type_vocab_size 1; their tokenizers give type 0 to all) */
  EST_TYPES_NONE,         /* no table (DistilBERT); type_vocab_size unused */
} est_token_types;

/* The feed-forward block. */
typedef enum est_ffn_kind {
  EST_FFN_DENSE = 0, /* act(x Wi + bi) Wo + bo, act = hidden_act */
  EST_FFN_GLU,       /* act(x Wi[:, :I]) * (x Wi[:, I:]), then Wo: Wi is one [H, 2I] kernel
                        (ModernBERT's mlp.Wi); GeGLU with hidden_act GELU (est_glu_forward) */
} est_ffn_kind;

typedef struct est_encoder_options {
  est_model_family family;
  est_norm_position norm;          /* EST_NORM_POST */
  est_position_encoding positions; /* EST_POS_LEARNED */
  est_position_ids position_ids;   /* EST_POS_IDS_INDEX */
  est_token_types token_types;     /* EST_TYPES_SEGMENTS */
  est_ffn_kind ffn;                /* EST_FFN_DENSE */
  int embedding_size;              /* 0: hidden_size. Else the embedding tables and their
                                      LayerNorm are this wide and a dense [E,H] + bias
                                      (ELECTRA's embeddings_project) maps them to hidden_size */
  int pad_rows_frozen;             /* 1: the word table's row pad_token_id (and the position
                                      table's, under EST_POS_IDS_AFTER_PADDING) gets no gradient,
                                      as nn.Embedding(padding_idx) in transformers' models; 0:
                                      every row trains, as in Google's TF BERT */
  int no_bias;                     /* 1: no bias in the encoder's dense layers and LayerNorms
                                      (ModernBERT); the pooler, est's own, keeps its bias */
  int qkv_fused;                   /* 1: Q, K and V are one kernel [H, 3H] (+ bias [3H]),
                                      attention/self/qkv/kernel: ModernBERT's attn.Wqkv, columns
                                      [0,H) Q, [H,2H) K, [2H,3H) V */
  /* Sliding windows (ModernBERT): with global_attn_every_n_layers = n > 0, layer l is global
   * when l % n == 0, else its queries attend to the keys within local_attention / 2 tokens on
   * each side (est_attention_forward_window_at). 0: every layer global. */
  int global_attn_every_n_layers;
  int local_attention;
  /* EST_POS_ROTARY's bases: rotary_theta on global layers, rotary_theta_local on windowed
   * ones (0: rotary_theta). */
  double rotary_theta, rotary_theta_local;
  /* The dropout of the family's *ForSequenceClassification head (est/bert_classifier.h):
   * config.json's classifier_dropout, else hidden_dropout_prob (RoBERTa, XLM-R, ELECTRA);
   * DistilBERT's seq_classif_dropout (0.2). BERT's head ignores it (run_classifier's 0.1). */
  double classifier_dropout;
  /* ModernBertForSequenceClassification's head (est/bert_classifier.h): classifier_pooling
   * "mean" (1: the mean of the unpadded tokens' rows) or "cls" (0: the first token's), its
   * dense's activation (classifier_activation) and bias (classifier_bias); its LayerNorm has a
   * beta unless no_bias. Read by nothing else. */
  int classifier_mean_pooling;
  est_activation classifier_act;
  int classifier_bias;
} est_encoder_options;

/* "bert", "roberta", "xlm-roberta", "distilbert", "electra", "modernbert" (HF's model_type
 * spellings). */
const char *est_model_family_name(est_model_family family);

/* ---- BertConfig ------------------------------------------------------------------- */

typedef struct est_bert_config {
  int vocab_size;                    /* required; 0 = unset */
  int hidden_size;                   /* 768 */
  int num_hidden_layers;             /* 12 */
  int num_attention_heads;           /* 12 */
  int intermediate_size;             /* 3072 */
  est_activation hidden_act;         /* "gelu" (tanh form); see est/nn.h for the spellings */
  double hidden_dropout_prob;        /* 0.1 */
  double attention_probs_dropout_prob; /* 0.1 */
  int max_position_embeddings;       /* 512 */
  int type_vocab_size;               /* 16 (the constructor default; released models use 2) */
  double initializer_range;          /* 0.02 */
  /* HuggingFace config.json's (est/hf_model.h); Google's bert_config.json has neither */
  double layer_norm_eps;             /* 1e-12 (BERT); every LayerNorm of the encoder uses it */
  int pad_token_id;                  /* 0; counts positions under EST_POS_IDS_AFTER_PADDING */
  est_encoder_options opt;           /* zero: Google's BERT */
} est_bert_config;

/* modeling.BertConfig's constructor defaults, with vocab_size unset (0). */
est_bert_config est_bert_config_default(void);

/* Reads bert_config.json: every known key overrides its default; unknown keys (e.g.
 * "directionality", "pooler_fc_size") are ignored. A HuggingFace config.json (it has
 * "model_type") is read with HF's meanings (est_hf_config_from_json); `path` may be a
 * directory: its config.json. Errors name the file and the field:
 * a missing vocab_size, a value of the wrong type or range, an "Unsupported activation",
 * "The hidden size (%d) is not a multiple of the number of attention heads (%d)".
 * Both readers live with the HuggingFace code that knows the two kinds of file
 * (src/hf/hf_config.c); the encoder's own config code knows only Google's fields. */
est_status est_bert_config_from_json_file(est_bert_config *cfg, const char *path);
/* The same from a JSON text; `source` names it in messages. */
est_status est_bert_config_from_json_string(est_bert_config *cfg, const char *json, const char *source);
/* Checks ranges and the head divisibility; `source` prefixes messages (may be NULL). */
est_status est_bert_config_validate(const est_bert_config *cfg, const char *source);
/* The longest sequence the position table allows: max_position_embeddings, less
 * pad_token_id + 1 under EST_POS_IDS_AFTER_PADDING (RoBERTa's 514 rows give 512 tokens). */
int est_bert_config_max_seq_length(const est_bert_config *cfg);
/* to_json_string: all fields, keys sorted, indent 2, trailing newline. Free with free(). */
char *est_bert_config_to_json_string(const est_bert_config *cfg);

/* ---- gradient-ready reports ------------------------------------------------------- */

/* Called by a backward as soon as a group of parameter gradients is final, so that (with
 * data parallelism) its all-reduce can overlap the rest of backward. offset and count are
 * floats of the store's gradient buffer (est_variable.offset, .count). */
typedef void (*est_bert_grads_ready_fn)(void *ctx, size_t offset, size_t count);

/* Reports variables first..last of `vs` (consecutive indices, e.g. one head's group) to fn:
 * adjacent variables merge into maximal runs with no padding between them (one call per
 * group when every count is a multiple of 16 floats), frozen variables and padding are never
 * reported. fn NULL: nothing. For heads reporting their own groups the encoder's way. */
void est_bert_report_grads_ready(const est_var_store *vs, size_t first, size_t last, est_bert_grads_ready_fn fn,
                                 void *ctx);

/* ---- dropout tensor ids ----------------------------------------------------------- */

enum {
  EST_BERT_DROPOUT_EMBEDDINGS = 1,
  EST_BERT_DROPOUT_HEAD_FIRST = 2,    /* 2 is run_classifier's dropout on the pooled output */
  EST_BERT_DROPOUT_HEAD_LAST = 99,
  EST_BERT_DROPOUT_LAYER_BASE = 100,  /* + 3*layer + {0 attention probs, 1 attention output, 2 ffn output} */
};

/* ---- the encoder -------------------------------------------------------------------- */

typedef struct est_bert_encoder est_bert_encoder;

/* Validates cfg and declares the encoder's variables in `vs` (not yet finalized), with
 * BERT's initialisers: truncated normal(initializer_range) for tables and kernels, zeros
 * for biases and beta, ones for gamma. */
est_status est_bert_encoder_create(est_bert_encoder **out, const est_bert_config *cfg, est_var_store *vs);
void est_bert_encoder_free(est_bert_encoder *e);

/* Allocates the activation buffer for batches of up to max_batch examples of up to
 * max_seq_len tokens (huge pages, one allocation). with_backward = 1 keeps every layer's
 * activations, dropout masks and the gradient scratch, as training needs; 0 is forward only
 * (evaluation, serving): layers share their scratch and only the layer outputs are kept,
 * far less memory; backward, and forward with training = 1 under a non-zero dropout, are
 * then errors. Call again to grow
 * (sizes are the maxima of all calls; with_backward once 1 stays 1). Errors: a size <= 0, a
 * max_seq_len beyond max_position_embeddings ("Cannot use sequence length ..."). */
est_status est_bert_encoder_reserve(est_bert_encoder *e, int max_batch, int max_seq_len, int with_backward);
/* on = 1: later reservations with backward keep only each layer's output (its next layer's
 * input) and one layer's scratch, and backward runs each layer's forward again, just before
 * that layer's backward, from its kept input with the same dropout masks: the same numbers
 * bit for bit, about a third of the activation memory of a Base step at 32x128, one more
 * forward pass of the layers below the top one per step (docs/bert.md §10). Takes effect at the
 * next reserve (which then reallocates). 0, the default: every layer's activations are kept. */
void est_bert_encoder_set_recompute(est_bert_encoder *e, int on);
/* The precision of the encoder's GEMMs and of its heads' (est/precision.h), FP32 until set:
 * resolved against the CPU (bf16 without AVX512-BF16 runs fp32, with est_precision_resolve's
 * warning); returns the precision it will run. Heads read it with est_bert_encoder_precision,
 * so an encoder and its heads always agree; two encoders in one process may differ. */
est_precision est_bert_encoder_set_precision(est_bert_encoder *e, est_precision precision);
est_precision est_bert_encoder_precision(const est_bert_encoder *e);
/* Bytes held by the activation buffer. */
size_t est_bert_encoder_activation_bytes(const est_bert_encoder *e);
/* Logs (INFO) "<what> activations: X MiB for B x S tokens", and whether layers are
 * recomputed: what a user weighs --recompute by. */
void est_bert_encoder_log_activations(const est_bert_encoder *e, const char *what, int batch, int seq_len);

/* One forward pass. input_ids, input_mask, segment_ids: [batch, seq_len] int32, row-major
 * and packed at seq_len (input_mask/segment_ids may be NULL: all ones / all zeros).
 * training = 1 turns the config's dropouts on. The store must be finalized. Errors: batch
 * or seq_len beyond the reservation, an id outside the vocabulary ("input_ids[b][s] = id").
 * A failed forward leaves nothing to run backward on. */
est_status est_bert_encoder_forward(est_bert_encoder *e, const int32_t *input_ids, const int32_t *input_mask,
                                    const int32_t *segment_ids, int batch, int seq_len, int training,
                                    uint64_t dropout_seed, uint64_t step);

/* Views of the last forward's outputs (valid until the next forward or reserve):
 * embedding output (after LayerNorm and dropout) [T,H]; layer_output(l), l in
 * [0, num_hidden_layers), [T,H] (extract_features' layers; -1 is the sequence output);
 * sequence output = the last layer's output [T,H] (after the final LayerNorm under pre-LN:
 * layer_output(L-1) is then before it, as transformers' last hidden_states entry); pooled
 * output tanh(first token . Wp + bp)
 * [B,H]. batch()/seq_len() give the last forward's B and S (0 before any). */
const float *est_bert_encoder_embedding_output(const est_bert_encoder *e);
const float *est_bert_encoder_layer_output(const est_bert_encoder *e, int layer);
const float *est_bert_encoder_sequence_output(const est_bert_encoder *e);
const float *est_bert_encoder_pooled_output(const est_bert_encoder *e);
int est_bert_encoder_batch(const est_bert_encoder *e);
int est_bert_encoder_seq_len(const est_bert_encoder *e);

/* d loss / d sequence output [T,H] and d loss / d pooled output [B,H] of the last forward:
 * zero after each forward, heads ADD into them, backward consumes them. NULL when the
 * reservation has no backward or no forward succeeded since it. */
float *est_bert_encoder_sequence_output_grad(est_bert_encoder *e);
float *est_bert_encoder_pooled_output_grad(est_bert_encoder *e);

/* Backward of the last forward from the two output gradients: ADDS every encoder parameter
 * gradient into the store's gradient buffer and reports the groups as they are final (the
 * pooler, each layer from the top down, the embeddings last). One backward per forward.
 * Errors (EST_ERR_FAILED_PRECONDITION): no successful forward since the last reserve or
 * backward, a reservation without backward. */
est_status est_bert_encoder_backward(est_bert_encoder *e);

/* The rows of every later forward are rows [first_row, first_row + batch) of a larger
 * global batch (data parallelism: est_model_context.first_row): dropout masks are drawn
 * at those rows' places in it, so N ranks drop exactly what one process does. 0 (the
 * default): the batch is the whole batch. A head with dropout takes the same row. */
void est_bert_encoder_set_first_row(est_bert_encoder *e, int64_t first_row);

/* Sets the gradient-ready callback of backward (NULL fn: none, the default). */
void est_bert_encoder_set_grads_ready(est_bert_encoder *e, est_bert_grads_ready_fn fn, void *ctx);

/* Store indices of the variables a head may share or report around: the word-embedding
 * table [V,H] (tied to a masked-LM head's output layer), and the first and last index of
 * the encoder's variables (all of them consecutive, in the order above). */
size_t est_bert_encoder_word_embeddings_index(const est_bert_encoder *e);
size_t est_bert_encoder_first_variable(const est_bert_encoder *e);
size_t est_bert_encoder_last_variable(const est_bert_encoder *e);

const est_bert_config *est_bert_encoder_config(const est_bert_encoder *e);
est_var_store *est_bert_encoder_vars(const est_bert_encoder *e);

#ifdef __cplusplus
}
#endif
#endif
