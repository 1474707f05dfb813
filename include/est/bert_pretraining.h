/* est/bert_pretraining.h — run_pretraining.py's two heads on the BERT encoder
 * (est/bert_encoder.h), docs/bert.md §9. The task that trains them, `est run_pretraining`,
 * is est/run_pretraining.h.
 *
 *     est_bert_pretraining_heads *h;
 *     est_bert_pretraining_heads_create(&h, enc, vs);     // after the encoder, before finalize
 *     est_bert_pretraining_heads_reserve(h, B, P);
 *     est_bert_encoder_forward(enc, ids, mask, segs, B, S, training, seed, step);
 *     est_bert_pretraining_heads_forward(h, positions, lm_ids, lm_weights, ns_labels, B, S, P, &out);
 *     est_bert_pretraining_heads_backward(h);             // adds into the encoder's output grads
 *     est_bert_encoder_backward(enc);                     //   and the tied table's gradient
 *
 * Masked LM (get_masked_lm_output): gather the P masked positions of each example from the
 * sequence output [B,S,H] -> x [N=B*P, H]; cls/predictions/transform/dense kernel [H,H] +
 * bias [H], the config's hidden_act; cls/predictions/transform/LayerNorm gamma/beta [H];
 * logits [N,V] = x . word_embeddings^T + cls/predictions/output_bias [V] (the table is the
 * encoder's bert/embeddings/word_embeddings: its gradient gets this path and the embedding
 * lookup's). loss = sum_n w_n (-log p_n[id_n]) / (sum_n w_n + 1e-5).
 * Next sentence (get_next_sentence_output): logits [B,2] = pooled . output_weights^T [2,H] +
 * output_bias [2] (cls/seq_relationship/...), loss = mean cross-entropy. total = the sum. */
#ifndef EST_BERT_PRETRAINING_H
#define EST_BERT_PRETRAINING_H

#include <stdbool.h>
#include <stdint.h>

#include "est/bert_encoder.h"
#include "est/status.h"
#include "est/variables.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct est_bert_pretraining_heads est_bert_pretraining_heads;

/* The forward's results; the arrays point into the heads and stay valid until the next
 * forward or reserve. */
typedef struct est_bert_pretraining_output {
  float loss;                        /* masked_lm_loss + next_sentence_loss */
  float masked_lm_loss, next_sentence_loss;
  const float *masked_lm_example_loss;   /* [B*P] -log p of each masked label (unweighted) */
  const int32_t *masked_lm_predictions;  /* [B*P] argmax of the logits (first maximum) */
  const float *next_sentence_example_loss; /* [B] */
  const int32_t *next_sentence_predictions; /* [B] */
} est_bert_pretraining_output;

/* Declares the cls/... variables (names and shapes of Google's checkpoints) in vs, which the
 * encoder's variables are already in. */
est_status est_bert_pretraining_heads_create(est_bert_pretraining_heads **out, est_bert_encoder *enc,
                                             est_var_store *vs);
void est_bert_pretraining_heads_free(est_bert_pretraining_heads *h);
/* Buffers for batches of up to max_batch examples with max_predictions positions each. */
est_status est_bert_pretraining_heads_reserve(est_bert_pretraining_heads *h, int max_batch, int max_predictions);
/* First and last store index of the heads' variables (consecutive). */
size_t est_bert_pretraining_heads_first_variable(const est_bert_pretraining_heads *h);
size_t est_bert_pretraining_heads_last_variable(const est_bert_pretraining_heads *h);
void est_bert_pretraining_heads_set_grads_ready(est_bert_pretraining_heads *h, est_bert_grads_ready_fn fn,
                                                void *ctx);

/* After the encoder's forward over [B,S]: positions, lm_ids [B,P] int32, lm_weights [B,P]
 * float, ns_labels [B] int32. Errors name the example and slot of a position outside
 * [0,S) or an id outside [0,V). */
est_status est_bert_pretraining_heads_forward(est_bert_pretraining_heads *h, const int32_t *positions,
                                              const int32_t *lm_ids, const float *lm_weights,
                                              const int32_t *ns_labels, int batch, int seq_len, int max_predictions,
                                              est_bert_pretraining_output *out);
/* d total / d: ADDS into the encoder's sequence and pooled output gradients, the tied
 * word-embedding table's gradient and the heads' own gradients. */
est_status est_bert_pretraining_heads_backward(est_bert_pretraining_heads *h);

#ifdef __cplusplus
}
#endif
#endif
