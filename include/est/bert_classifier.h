/* est/bert_classifier.h — the BERT sequence classifier (modeling.py BertModel + run_classifier.py
 * create_model), trained on a variable store: the encoder of est/bert_encoder.h with the
 * classifier head below on its pooled output, composed behind one API.
 *
 *     est_bert_config cfg;
 *     est_bert_config_from_json_file(&cfg, "bert_config.json");
 *     est_var_store *vs;  est_vars_create(&vs);
 *     est_bert_classifier *m;
 *     est_bert_classifier_create(&m, &cfg, num_labels, vs);   // declares TF-named variables
 *     est_vars_finalize(vs, seed);                            // or restore a checkpoint
 *     est_bert_classifier_reserve(m, 32, 128);                // all activations, once
 *     for (step...) {
 *       est_vars_zero_grads(vs);
 *       est_bert_classifier_forward(m, ids, mask, segs, labels, B, S, 1, seed, step,
 *                                   logits, per_example_loss, &loss);
 *       est_bert_classifier_backward(m);                      // grads += d loss / d theta
 *       est_optimizer_apply(opt, step);
 *     }
 *
 * Variables carry exactly TF's names and shapes (bert/embeddings/word_embeddings [V,H], ...,
 * bert/encoder/layer_N/attention/self/query/kernel [H,H], ..., bert/pooler/dense/kernel,
 * output_weights [C,H], output_bias [C]), so BERT checkpoints load by name.
 * The step loop allocates nothing: reserve() sizes one activation buffer for the largest
 * batch; smaller batches (the last partial eval batch) use a prefix of it.
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

/* ---- the classifier ----------------------------------------------------------------- */

typedef struct est_bert_classifier est_bert_classifier;

/* Declares the model's variables in `vs` (not yet finalized) with BERT's initialisers:
 * truncated normal(initializer_range) for tables and kernels, output_weights truncated
 * normal(0.02) (hard-coded in run_classifier), zeros for biases and beta, ones for gamma. */
est_status est_bert_classifier_create(est_bert_classifier **out, const est_bert_config *cfg, int num_labels,
                                      est_var_store *vs);
void est_bert_classifier_free(est_bert_classifier *m);

/* Allocates every activation and activation gradient for batches of up to max_batch
 * examples of up to seq_len tokens, in one buffer (huge pages). Call again to grow. */
est_status est_bert_classifier_reserve(est_bert_classifier *m, int max_batch, int seq_len);
/* The same for evaluation and prediction only: the encoder keeps each layer's output but
 * shares the rest of its scratch across layers (est_bert_encoder_reserve with_backward 0),
 * far less memory, the same forward numbers; backward, and a training forward with dropout,
 * are then errors. Reserving with backward later upgrades it. */
est_status est_bert_classifier_reserve_forward_only(est_bert_classifier *m, int max_batch, int seq_len);
/* Bytes held by the activation buffers. */
size_t est_bert_classifier_activation_bytes(const est_bert_classifier *m);

/* One forward pass. input_ids, input_mask, segment_ids: [batch, seq_len] int32
 * (input_mask/segment_ids may be NULL: all ones / all zeros). label_ids [batch] may be
 * NULL (predict); then no loss is computed and backward is not possible.
 * training = 1 turns on dropout (hidden, attention and the classifier's hard-coded 0.1)
 * with masks drawn from (dropout_seed, step). Outputs (each may be NULL):
 * logits_out [batch, C], per_example_loss_out [batch], loss_out = mean over the batch
 * (padding examples included, as the reference). The vars store must be finalized.
 * Errors: batch/seq_len beyond the reservation, an id outside the vocabulary, a label
 * outside [0, C). */
est_status est_bert_classifier_forward(est_bert_classifier *m, const int32_t *input_ids,
                                       const int32_t *input_mask, const int32_t *segment_ids,
                                       const int32_t *label_ids, int batch, int seq_len, int training,
                                       uint64_t dropout_seed, uint64_t step, float *logits_out,
                                       float *per_example_loss_out, float *loss_out);

/* Backward of the last forward (which needs labels) with d loss = 1: ADDS every
 * parameter gradient into the store's gradient buffer (zero it first for a fresh step).
 * One backward per forward (a second one is EST_ERR_FAILED_PRECONDITION). */
est_status est_bert_classifier_backward(est_bert_classifier *m);

/* Backward calls fn(ctx, offset, count) as soon as a group of parameter gradients is final
 * for this backward, so that (with data parallelism) its all-reduce can overlap the rest:
 * the classifier head (output_weights, output_bias), the pooler, each encoder layer from
 * the top down, the embeddings last (the reverse of declaration order). offset and count
 * are floats of the store's gradient buffer (est_variable.offset, .count); a group is one
 * range unless padding between its variables splits it (a count not a multiple of 16
 * floats); padding and frozen variables are never reported. The Estimator's model_fn
 * forwards these to est_grads_ready. NULL fn: no calls (the default).
 * (est_bert_grads_ready_fn: est/bert_encoder.h.) */
void est_bert_classifier_set_grads_ready(est_bert_classifier *m, est_bert_grads_ready_fn fn, void *ctx);

/* The rows of every later forward are rows [first_row, first_row + batch) of a larger
 * global batch (data parallelism: est_model_context.first_row): dropout masks are drawn
 * at those rows' places in it, so N ranks drop exactly what one process does. 0 (the
 * default): the batch is the whole batch. */
void est_bert_classifier_set_first_row(est_bert_classifier *m, int64_t first_row);
/* The precision of the encoder and the head (est_bert_encoder_set_precision); returns the one
 * this CPU runs. */
est_precision est_bert_classifier_set_precision(est_bert_classifier *m, est_precision precision);

/* probabilities[batch, C] = softmax(logits), the predict output. */
void est_bert_classifier_probabilities(float *probabilities, const float *logits, int batch, int num_labels);

/* Views of the last forward's activations, [batch*seq_len, H] or [batch, H] row-major;
 * valid until the next forward. */
const float *est_bert_classifier_embedding_output(const est_bert_classifier *m);
const float *est_bert_classifier_sequence_output(const est_bert_classifier *m);
const float *est_bert_classifier_pooled_output(const est_bert_classifier *m);

int est_bert_classifier_num_labels(const est_bert_classifier *m);
const est_bert_config *est_bert_classifier_config(const est_bert_classifier *m);
/* The encoder inside (e.g. for est_bert_encoder_layer_output); owned by the classifier. */
est_bert_encoder *est_bert_classifier_encoder(const est_bert_classifier *m);

/* ---- the classifier head alone ---------------------------------------------------- */

/* run_classifier create_model's head on a pooled output [B,H]: dropout (a hard-coded 0.1,
 * in training, tensor id EST_BERT_DROPOUT_HEAD_FIRST) -> logits [B,C] = pooled_d .
 * output_weights^T + output_bias -> softmax cross-entropy, loss = the batch mean.
 * Owns its activations (one buffer, reserve); reads and writes only its own variables. */
typedef struct est_bert_classifier_head est_bert_classifier_head;

/* Declares output_weights [C,H] (truncated normal 0.02, hard-coded in run_classifier) and
 * output_bias [C] (zeros) in `vs`. */
est_status est_bert_classifier_head_create(est_bert_classifier_head **out, int hidden_size, int num_labels,
                                           est_var_store *vs);
/* The precision of its GEMM (est/precision.h): its encoder's, set before forward (FP32 until
 * then). */
void est_bert_classifier_head_set_precision(est_bert_classifier_head *h, est_precision precision);
void est_bert_classifier_head_free(est_bert_classifier_head *h);
est_status est_bert_classifier_head_reserve(est_bert_classifier_head *h, int max_batch);
size_t est_bert_classifier_head_activation_bytes(const est_bert_classifier_head *h);
/* pooled [batch, H] (read during the call only); the rest as est_bert_classifier_forward.
 * Errors: batch beyond the reservation, a label outside [0, C). */
est_status est_bert_classifier_head_forward(est_bert_classifier_head *h, const float *pooled,
                                            const int32_t *label_ids, int batch, int training,
                                            uint64_t dropout_seed, uint64_t step, float *logits_out,
                                            float *per_example_loss_out, float *loss_out);
/* Backward of the last forward (with labels), d loss = 1: ADDS d loss / d pooled into
 * d_pooled [batch, H] (e.g. est_bert_encoder_pooled_output_grad) and output_weights' and
 * output_bias' gradients into the store, then reports that group as ready. */
est_status est_bert_classifier_head_backward(est_bert_classifier_head *h, float *d_pooled);
void est_bert_classifier_head_set_grads_ready(est_bert_classifier_head *h, est_bert_grads_ready_fn fn, void *ctx);
/* As est_bert_encoder_set_first_row, for the head's dropout on the pooled output. */
void est_bert_classifier_head_set_first_row(est_bert_classifier_head *h, int64_t first_row);

/* The variables BERT trains without weight decay (optimization.py's
 * exclude_from_weight_decay): est_adam_weight_decay_config.exclude_from_weight_decay /
 * num_exclude of a BERT model_fn. */
enum { EST_BERT_NUM_EXCLUDE_FROM_WEIGHT_DECAY = 3 };
extern const char *const est_bert_exclude_from_weight_decay[EST_BERT_NUM_EXCLUDE_FROM_WEIGHT_DECAY];

#ifdef __cplusplus
}
#endif
#endif
