/* est/bert_classifier.h — run_classifier.py create_model's head on the BERT encoder's pooled
 * output (src/bert/heads/head_classifier.c), and BERT's weight-decay exclusions.
 *
 * The classifier model is the encoder (est/bert_encoder.h) with this head, run by the one
 * BERT model_fn (est/bert_head.h) with est_bert_classifier_head_type:
 *
 *     est_bert_classifier_head_params hp = {.num_labels = 2};
 *     est_bert_model_params p = {.bert_config = cfg, .head = &est_bert_classifier_head_type,
 *                                .head_params = &hp, .max_seq_length = 128, ...};
 *     est_model_fn fn = est_bert_model_fn(&p);    // then est_estimator_create(&e, &fn, &rc)
 *
 * Variables carry exactly TF's names and shapes (bert/embeddings/word_embeddings [V,H], ...,
 * bert/encoder/layer_N/attention/self/query/kernel [H,H], ..., bert/pooler/dense/kernel,
 * output_weights [C,H], output_bias [C]), so BERT checkpoints load by name.
 *
 * The head alone (est_bert_classifier_head_*) is the same computation on any [B,H] input,
 * e.g. an encoder reserved forward-only for serving.
 */
#ifndef EST_BERT_CLASSIFIER_H
#define EST_BERT_CLASSIFIER_H

#include <stddef.h>
#include <stdint.h>

#include "est/bert_encoder.h"
#include "est/nn.h"
#include "est/status.h"
#include "est/variables.h"

#ifdef __cplusplus
extern "C" {
#endif

/* run_classifier create_model's head on a pooled output [B,H]: dropout (a hard-coded 0.1,
 * in training, tensor id EST_BERT_DROPOUT_HEAD_FIRST) -> logits [B,C] = pooled_d .
 * output_weights^T + output_bias -> softmax cross-entropy, loss = the batch mean.
 * Owns its activations (one buffer, reserve); reads and writes only its own variables. */
typedef struct est_bert_classifier_head est_bert_classifier_head;

/* Declares output_weights [C,H] (truncated normal 0.02, hard-coded in run_classifier) and
 * output_bias [C] (zeros) in `vs`. */
est_status est_bert_classifier_head_create(est_bert_classifier_head **out, int hidden_size, int num_labels,
                                           est_var_store *vs);

/* What sits between the head's input [B,H] and its output layer (docs/heads.md §7). The
 * other families' *ForSequenceClassification heads read the encoder's first token, not
 * BERT's pooler, and transform it themselves; the input is then that token's row.
 *   EST_CLASSIFIER_BERT        dropout(0.1) -> out                    (run_classifier's)
 *   EST_CLASSIFIER_DENSE_TANH  dropout -> dense -> tanh -> dropout -> out
 *                              (RobertaClassificationHead, XLM-R's)
 *   EST_CLASSIFIER_DENSE_GELU  dropout -> dense -> GELU (erf) -> dropout -> out
 *                              (ElectraClassificationHead)
 *   EST_CLASSIFIER_DENSE_RELU  dense -> ReLU -> dropout -> out
 *                              (DistilBertForSequenceClassification's pre_classifier)
 *   EST_CLASSIFIER_MODERNBERT  dense -> act -> LayerNorm -> dropout -> out
 *                              (ModernBertPredictionHead + classifier; dense's bias and the
 *                              norm's beta as the config says: classifier/LayerNorm/{beta,gamma})
 * dense is classifier/dense/{kernel [H,H], bias [H]} (truncated normal 0.02, zeros), declared
 * before output_weights; its dropouts use tensor ids EST_BERT_DROPOUT_HEAD_FIRST + 1 (before
 * dense) and EST_BERT_DROPOUT_HEAD_FIRST (before out). */
typedef enum est_classifier_kind {
  EST_CLASSIFIER_BERT = 0,
  EST_CLASSIFIER_DENSE_TANH,
  EST_CLASSIFIER_DENSE_GELU,
  EST_CLASSIFIER_DENSE_RELU,
  EST_CLASSIFIER_MODERNBERT,
} est_classifier_kind;

/* Everything a kind's head takes (est_classifier_head_options_of gives a config's). */
typedef struct est_classifier_head_options {
  est_classifier_kind kind;
  double dropout;       /* before the output layer (EST_CLASSIFIER_BERT: 0.1 whatever this says) */
  est_activation act;   /* the dense kinds' activation */
  int dense_bias;       /* 1: classifier/dense has a bias (ModernBERT: classifier_bias) */
  int norm_bias;        /* EST_CLASSIFIER_MODERNBERT: classifier/LayerNorm has a beta */
  double norm_eps;      /* EST_CLASSIFIER_MODERNBERT: its eps */
  int mean_pooling;     /* read by the model_fn's head: the input is the mean of the unpadded
                           tokens' rows rather than the first token's (ModernBERT's "mean") */
} est_classifier_head_options;

/* The kind a model family's *ForSequenceClassification uses. EST_CLASSIFIER_BERT reads the
 * encoder's pooled output; every other kind the first token of its sequence output (or, for
 * ModernBERT with classifier_pooling "mean", the mean of its unpadded tokens). */
est_classifier_kind est_classifier_kind_of(est_model_family family);
/* The head a config's family runs: its kind, dropout (opt.classifier_dropout) and ModernBERT's
 * classifier_act / classifier_bias / no_bias / layer_norm_eps / classifier_mean_pooling. */
est_classifier_head_options est_classifier_head_options_of(const est_bert_config *cfg);
/* The same as est_bert_classifier_head_create_kind with every option given. */
est_status est_bert_classifier_head_create_opts(est_bert_classifier_head **out, int hidden_size, int num_labels,
                                                const est_classifier_head_options *o, est_var_store *vs);

/* The same as est_bert_classifier_head_create for `kind`, with dropout `dropout` (the
 * config's classifier dropout; EST_CLASSIFIER_BERT ignores it: 0.1). */
est_status est_bert_classifier_head_create_kind(est_bert_classifier_head **out, int hidden_size, int num_labels,
                                                est_classifier_kind kind, double dropout, est_var_store *vs);
/* The precision of its GEMM (est/precision.h): its encoder's, set before forward (FP32 until
 * then). */
void est_bert_classifier_head_set_precision(est_bert_classifier_head *h, est_precision precision);
void est_bert_classifier_head_free(est_bert_classifier_head *h);
est_status est_bert_classifier_head_reserve(est_bert_classifier_head *h, int max_batch);
size_t est_bert_classifier_head_activation_bytes(const est_bert_classifier_head *h);
/* pooled [batch, H] (read during the call only). label_ids [batch] may be NULL (predict);
 * then no loss is computed and backward is not possible. training = 1 turns on the
 * hard-coded 0.1 dropout with masks drawn from (dropout_seed, step). Outputs (each may be
 * NULL): logits_out [batch, C], per_example_loss_out [batch], loss_out = mean over the batch
 * (padding examples included, as the reference). Errors: batch beyond the reservation, a
 * label outside [0, C). */
est_status est_bert_classifier_head_forward(est_bert_classifier_head *h, const float *pooled,
                                            const int32_t *label_ids, int batch, int training,
                                            uint64_t dropout_seed, uint64_t step, float *logits_out,
                                            float *per_example_loss_out, float *loss_out);
/* Backward of the last forward (with labels), d loss = 1: ADDS d loss / d pooled into
 * d_pooled [batch, H] (e.g. est_bert_encoder_pooled_output_grad) and output_weights' and
 * output_bias' gradients into the store, then reports that group as ready. */
est_status est_bert_classifier_head_backward(est_bert_classifier_head *h, float *d_pooled);
/* The same from a loss of the caller's own over the last forward's logits (with or without
 * labels; training as it ran): d_logits [batch, C] = d loss / d logits. */
est_status est_bert_classifier_head_backward_logits(est_bert_classifier_head *h, const float *d_logits,
                                                    float *d_pooled);
/* Backward then calls fn(ctx, offset, count) once for [classifier/dense +] output_weights +
 * output_bias, as soon as their gradients are final (est_bert_grads_ready_fn:
 * est/bert_encoder.h). */
void est_bert_classifier_head_set_grads_ready(est_bert_classifier_head *h, est_bert_grads_ready_fn fn, void *ctx);
/* As est_bert_encoder_set_first_row, for the head's dropout on the pooled output. */
void est_bert_classifier_head_set_first_row(est_bert_classifier_head *h, int64_t first_row);

/* probabilities[batch, C] = softmax(logits), the predict output. */
void est_bert_classifier_probabilities(float *probabilities, const float *logits, int batch, int num_labels);

/* The variables BERT trains without weight decay (optimization.py's
 * exclude_from_weight_decay): est_adam_weight_decay_config.exclude_from_weight_decay /
 * num_exclude of a BERT model_fn. */
enum { EST_BERT_NUM_EXCLUDE_FROM_WEIGHT_DECAY = 3 };
extern const char *const est_bert_exclude_from_weight_decay[EST_BERT_NUM_EXCLUDE_FROM_WEIGHT_DECAY];

#ifdef __cplusplus
}
#endif
#endif
