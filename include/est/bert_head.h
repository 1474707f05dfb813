/* est/bert_head.h — a task head on the BERT encoder, and the one BERT model_fn that runs
 * any head through the Estimator (docs/heads.md §1).
 *
 * A BERT task is the encoder (est/bert_encoder.h) plus a head that reads the encoder's
 * outputs: the classifier reads the pooled output, the pretraining heads read the sequence
 * output at the masked positions and the pooled output. Everything around the head is the
 * same for every task and lives once, in est_bert_model_fn: building the encoder, reserving
 * activations for the mode, init_checkpoint with BERT's assignment map, the optimizer
 * (AdamWeightDecay with BERT's schedule), the gradient-ready reports, the row offset of data
 * parallelism, recomputation, and the "*** Features ***" and variable logs. A head supplies
 * only what is its own:
 *
 *     static const est_bert_head_type my_head = {
 *       .name = "regression",
 *       .create = reg_create,          // declare its variables after the encoder's
 *       .reserve = reg_reserve,        // its activations for ctx->max_batch; EVAL: metrics
 *       .forward = reg_forward,        // read features + encoder outputs -> loss
 *       .backward = reg_backward,      // ADD into the encoder's output gradients
 *       .update_metrics = reg_update,  // EVAL
 *       .metrics = reg_metrics,        // EVAL
 *       .predictions = reg_predict,    // PREDICT: named outputs
 *       .free = reg_free,
 *     };
 *     est_bert_model_params p = {.bert_config = cfg, .head = &my_head, .head_params = &hp,
 *                                .max_seq_length = 128, .learning_rate = 2e-5, ...};
 *     est_model_fn fn = est_bert_model_fn(&p);    // then est_estimator_create(&e, &fn, &rc)
 *
 * examples/regression_head.c is a whole head in ~150 lines.
 *
 * Order inside one step (the model_fn's call):
 *   encoder forward (input_ids, input_mask, segment_ids: [B, S] int32, S = max_seq_length)
 *   -> head forward (its own features, the encoder's views) -> spec.loss
 *   TRAIN:   head backward (adds into est_bert_encoder_sequence_output_grad / _pooled_output_grad
 *            and its own parameter gradients, reports its group ready) -> encoder backward
 *   EVAL:    head update_metrics
 *   PREDICT: head predictions
 */
#ifndef EST_BERT_HEAD_H
#define EST_BERT_HEAD_H

#include <stddef.h>
#include <stdint.h>

#include "est/bert_encoder.h"
#include "est/estimator.h"
#include "est/status.h"
#include "est/variables.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a head is built for. The encoder's variables are declared (not yet finalized). */
typedef struct est_bert_head_context {
  est_mode mode;
  int max_batch;                /* the largest batch forward will see */
  int max_seq_length;           /* S of every batch's [B, S] features */
  est_bert_encoder *encoder;    /* whose outputs the head reads; owned by the model_fn */
  est_var_store *vars;          /* where the head declares its variables */
  const void *params;           /* est_bert_model_params.head_params: the head's own */
} est_bert_head_context;

/* One batch, after the encoder's forward over it. */
typedef struct est_bert_head_batch {
  est_mode mode;
  const est_features *features; /* the whole batch: the head reads its own features here */
  int batch, seq_len;           /* B, S */
  int training;                 /* TRAIN: dropout on, masks drawn from (seed, step, row) */
  uint64_t seed, step;
} est_bert_head_batch;

typedef struct est_bert_head_type {
  const char *name;  /* e.g. "classifier": est_model.json's "head" and the model_fn's log name */
  /* Declares the head's variables in ctx->vars (after the encoder's, so a checkpoint's order
   * and the gradient-ready groups stay the encoder's then the head's). */
  est_status (*create)(void **head, const est_bert_head_context *ctx);
  /* Allocates the head's activations for ctx->max_batch and, in EVAL, creates its metrics. */
  est_status (*reserve)(void *head, const est_bert_head_context *ctx);
  /* Reads its features from b->features and the encoder's outputs; sets *loss (TRAIN, EVAL;
   * loss is NULL in PREDICT, where label features may be absent). Errors name the feature. */
  est_status (*forward)(void *head, const est_bert_head_batch *b, float *loss);
  /* TRAIN, after forward: d loss = 1. ADDS d loss / d output into the encoder's output
   * gradients and its own parameters' gradients into the store, then reports its own
   * variables with est_bert_report_grads_ready. NULL: a head that cannot train. */
  est_status (*backward)(void *head);
  /* EVAL, after forward: updates the streaming metrics of the last batch. */
  est_status (*update_metrics)(void *head, const est_bert_head_batch *b);
  /* EVAL: the metrics (owned by the head), reported under their names next to "loss". */
  est_status (*metrics)(void *head, est_metric *const **metrics, size_t *n);
  /* PREDICT, after forward: spec->predictions, each [B, ...], valid until the next forward.
   * NULL: the head has no predict mode (an error names the head). */
  est_status (*predictions)(void *head, const est_bert_head_batch *b, est_estimator_spec *spec);
  /* Optional: backward's gradient-ready callback, and the rank's first row of the global
   * batch for per-row randomness (dropout), as the encoder's setters. */
  void (*set_grads_ready)(void *head, est_bert_grads_ready_fn fn, void *ctx);
  void (*set_first_row)(void *head, int64_t first_row);
  void (*free)(void *head);
} est_bert_head_type;

/* What the BERT model_fn closes over (run_classifier.py's / run_pretraining.py's
 * model_fn_builder arguments). Must outlive the estimator. */
typedef struct est_bert_model_params {
  est_bert_config bert_config;
  const est_bert_head_type *head;
  const void *head_params;      /* passed to the head as est_bert_head_context.params */
  int max_seq_length;
  /* A TF checkpoint prefix loaded on a fresh start with BERT's assignment map (every
   * checkpoint tensor named like a trainable variable); NULL or "": none. Every encoder
   * variable must be found there unless init_checkpoint_partial is set: a checkpoint of
   * other names (a HuggingFace file converted as it is) would otherwise leave the encoder
   * random after one log line. The head's variables may be missing (fine-tuning). A
   * HuggingFace model (a directory, .safetensors or sharded index) is read through
   * est/hf_model.h's name table (docs/hf.md §1). */
  const char *init_checkpoint;
  int init_checkpoint_partial;
  double learning_rate;
  int64_t num_train_steps, num_warmup_steps;
  int recompute;                /* 1: TRAIN reserves with per-layer recomputation */
  est_precision precision;      /* the encoder's and its head's GEMMs (est/precision.h) */
  /* 1: TRAIN without dropout (the encoder's and the head's): the gradients of the
   * deterministic model, as golden references and finite differences compute them. 0 (the
   * default): BERT's dropout. */
  int no_dropout;
} est_bert_model_params;

/* The encoder + params->head as an Estimator model_fn: TRAIN loss and gradients
 * (AdamWeightDecay, weight decay 0.01 except LayerNorm and biases, BERT's warmup + linear
 * decay, clip_by_global_norm 1.0), EVAL the head's metrics, PREDICT the head's outputs. */
est_model_fn est_bert_model_fn(const est_bert_model_params *params);

/* The encoder inside a model that est_bert_model_fn's build made (the `model` its build
 * returned): its activations after a call (est_bert_encoder_embedding_output,
 * _pooled_output, ...), for tests and tools that look inside. */
est_bert_encoder *est_bert_model_encoder(void *model);

/* ---- the heads est ships ------------------------------------------------------------- */

/* run_classifier.py create_model: dropout 0.1 on the pooled output, output_weights [C, H],
 * output_bias [C], softmax cross-entropy. Features: label_ids [B] (TRAIN, EVAL), optional
 * is_real_example [B] (eval weights). EVAL: eval_accuracy, eval_loss, plus eval_f1 or
 * eval_mcc. PREDICT: "probabilities" [B, C], "logits" [B, C]. */
typedef struct est_bert_classifier_head_params {
  int num_labels;
  int extra_metric;             /* an est_task_metric (est/processors.h): none, F1 or MCC */
  /* Multi-label (transformers' problem_type "multi_label_classification"): label_ids
   * [B, num_labels] of 0 / 1, loss = BCEWithLogitsLoss (the mean over B x num_labels of
   * max(z, 0) - z y + log(1 + exp(-|z|))), EVAL eval_loss (per example: its mean over the
   * labels) and eval_accuracy (every label right at 0.5: exact match), PREDICT
   * "probabilities" = sigmoid(logits). extra_metric is ignored. */
  int multi_label;
  /* Regression (transformers' problem_type "regression", e.g. a cross-encoder of one label):
   * PREDICT's "probabilities" are the raw logits. Serving only, unless pair_loss is set. */
  int regression;
  /* A cross-encoder's training loss (est run_rerank, docs/rerank.md): num_labels 1, the float
   * feature label_values [B] (TRAIN, EVAL) instead of label_ids; an est_pair_loss. BCE:
   * BCEWithLogitsLoss over the one logit (sentence-transformers' CrossEncoder default for
   * num_labels 1; labels in [0, 1]), PREDICT "probabilities" = sigmoid(logit). MSE: the mean of
   * (logit - value)^2 (CrossEncoder with MSELoss, whose training activation is the identity),
   * PREDICT "probabilities" = the logit. EVAL: eval_loss only. */
  int pair_loss;
} est_bert_classifier_head_params;
typedef enum est_pair_loss { EST_PAIR_LOSS_NONE = 0, EST_PAIR_LOSS_BCE = 1, EST_PAIR_LOSS_MSE = 2 } est_pair_loss;
extern const est_bert_head_type est_bert_classifier_head_type;

/* run_pretraining.py's get_masked_lm_output + get_next_sentence_output (est/bert_pretraining.h).
 * Features: masked_lm_positions, masked_lm_ids [B, P] int32, masked_lm_weights [B, P] float,
 * next_sentence_labels [B, 1]. EVAL: masked_lm_accuracy, masked_lm_loss,
 * next_sentence_accuracy, next_sentence_loss. No PREDICT. */
typedef struct est_bert_pretraining_head_params {
  int max_predictions_per_seq;  /* P */
} est_bert_pretraining_head_params;
extern const est_bert_head_type est_bert_pretraining_head_type;

/* run_squad.py create_model: cls/squad/output_weights [2, H] (truncated normal 0.02) and
 * cls/squad/output_bias [2] on every position of the sequence output; loss = mean of the
 * start and end positions' softmax cross-entropy over all S positions. Features:
 * start_positions, end_positions [B] (TRAIN, EVAL), unique_ids [B] (PREDICT). PREDICT:
 * "unique_ids" [B], "start_logits", "end_logits" [B, S]. No metrics. No parameters. */
extern const est_bert_head_type est_bert_squad_head_type;

/* Token classification (transformers' BertForTokenClassification, src/bert/heads/
 * head_token_classifier.c): dropout (hidden_dropout_prob) on the sequence output,
 * output_weights [C, H], output_bias [C] at every position, softmax cross-entropy averaged
 * over the labelled positions. Features: label_ids [B, S] (TRAIN, EVAL), -100 where a
 * position is ignored (later sub-tokens, specials, padding). EVAL: eval_accuracy (tokens),
 * eval_loss. PREDICT: "probabilities" [B, S, C]. */
typedef struct est_bert_token_classifier_head_params {
  int num_labels;
} est_bert_token_classifier_head_params;
extern const est_bert_head_type est_bert_token_classifier_head_type;

#ifdef __cplusplus
}
#endif
#endif
