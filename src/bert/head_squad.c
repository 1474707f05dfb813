/* run_squad.py's create_model and model_fn loss as an est_bert_head_type (est/bert_head.h,
 * docs/squad.md §8): a linear layer over every position of the encoder's sequence output
 * giving a start and an end logit, trained with the mean of the two position
 * cross-entropies.
 *
 *   seq [B*S, H] -> logits [B*S, 2] = seq . W^T + b   (W = cls/squad/output_weights [2, H])
 *   start_logits[b, s] = logits[b*S + s, 0], end_logits[b, s] = logits[b*S + s, 1]
 *   loss = (mean_b -log softmax_S(start_logits[b])[start_positions[b]]
 *           + mean_b -log softmax_S(end_logits[b])[end_positions[b]]) / 2
 *
 * As the reference: no dropout on the sequence output, and the softmax runs over all S
 * positions, padding included (the model learns to give padding low logits). */
#include <stdlib.h>
#include <string.h>

#include "est/bert_head.h"
#include "est/nn.h"

void est_squad_logits_forward(float *start_logits, float *end_logits, float *logits, const float *seq,
                              const float *weights, const float *bias, int B, int S, int H,
                              est_precision precision) {
  const size_t N = (size_t)B * (size_t)S;
  est_matmul_forward(logits, seq, weights, bias, (int)N, H, 2, 1, precision);
  /* tf.transpose(tf.reshape(logits, [B, S, 2]), [2, 0, 1]) then unstack */
  for (size_t i = 0; i < N; i++) {
    start_logits[i] = logits[2 * i];
    end_logits[i] = logits[2 * i + 1];
  }
}

est_status est_squad_loss_forward(float *loss, float *losses, float *probs, const float *start_logits,
                                  const float *end_logits, const int32_t *start_positions,
                                  const int32_t *end_positions, int B, int S) {
  const size_t BS = (size_t)B * (size_t)S;
  const float *logits[2] = {start_logits, end_logits};
  const int32_t *positions[2] = {start_positions, end_positions};
  static const char *const names[2] = {"start_positions", "end_positions"};
  double total = 0;
  for (int k = 0; k < 2; k++) {
    for (int b = 0; b < B; b++)
      if (positions[k][b] < 0 || positions[k][b] >= S)
        return est_error(EST_ERR_INVALID_ARGUMENT, "feature %s: row %d has position %d, expected 0..%d "
                         "(--max_seq_length=%d)", names[k], b, (int)positions[k][b], S - 1, S);
    float *row_losses = losses + (size_t)k * (size_t)B;
    est_status st = est_crossentropy_forward(row_losses, probs ? probs + (size_t)k * BS : NULL, logits[k],
                                             positions[k], B, S);
    if (st != EST_OK) return st;
    /* tf.reduce_mean over the batch */
    float sum = 0;
    for (int b = 0; b < B; b++) sum += row_losses[b];
    total += (double)(sum / (float)B);
  }
  *loss = (float)(total / 2.0);
  return EST_OK;
}

void est_squad_loss_backward(float *d_seq, float *d_weights, float *d_bias, float *d_logits, const float *probs,
                             const int32_t *start_positions, const int32_t *end_positions, const float *seq,
                             const float *weights, int B, int S, int H, est_precision precision) {
  const size_t BS = (size_t)B * (size_t)S;
  /* d loss / d logits[b*S + s, k] = (softmax - onehot(position_k[b]))[s] / (2B): each of
   * the two batch means is halved. */
  const int32_t *positions[2] = {start_positions, end_positions};
  const float dloss = 0.5f / (float)B;
  for (int k = 0; k < 2; k++)
    for (int b = 0; b < B; b++)
      for (int s = 0; s < S; s++) {
        const size_t i = (size_t)b * (size_t)S + (size_t)s;
        d_logits[2 * i + (size_t)k] = (probs[(size_t)k * BS + i] - (s == positions[k][b] ? 1.0f : 0.0f)) * dloss;
      }
  est_matmul_backward(d_seq, d_weights, d_bias, d_logits, seq, weights, (int)BS, H, 2, 1, precision);
}

/* ---- the head on the BERT model_fn ---------------------------------------------------- */

typedef struct squad_head {
  est_bert_encoder *enc;
  est_var_store *vars;
  int out_w, out_b;            /* cls/squad/output_weights [2, H], cls/squad/output_bias [2] */
  int H, S, last_B;
  /* one batch, for ctx->max_batch rows: logits / d_logits [B*S, 2], start / end [B, S],
   * probs [2, B, S], losses [2, B] */
  float *logits, *d_logits, *start_logits, *end_logits, *probs, *losses;
  const int32_t *start_positions, *end_positions;
  est_tensor outputs[3];
  est_bert_grads_ready_fn ready_fn;
  void *ready_ctx;
} squad_head;

static const char *const PREDICTION_NAMES[] = {"unique_ids", "start_logits", "end_logits"};

static void squad_free(void *head) {
  squad_head *h = head;
  if (!h) return;
  free(h->logits);
  free(h->d_logits);
  free(h->start_logits);
  free(h->end_logits);
  free(h->probs);
  free(h->losses);
  free(h);
}

static est_status squad_create(void **out, const est_bert_head_context *ctx) {
  squad_head *h = calloc(1, sizeof *h);
  if (!h) return est_error(EST_ERR_NO_MEMORY, "squad head: out of memory");
  *out = h;
  h->enc = ctx->encoder;
  h->vars = ctx->vars;
  h->H = est_bert_encoder_config(ctx->encoder)->hidden_size;
  est_status st = est_vars_declare(ctx->vars, "cls/squad/output_weights", 2, (int64_t[]){2, h->H},
                                   est_init_truncated_normal(0.02f), &h->out_w);
  if (st == EST_OK) st = est_vars_declare(ctx->vars, "cls/squad/output_bias", 1, (int64_t[]){2}, est_init_zeros(),
                                          &h->out_b);
  return st;
}

static est_status squad_reserve(void *head, const est_bert_head_context *ctx) {
  squad_head *h = head;
  h->S = ctx->max_seq_length;
  const size_t BS = (size_t)ctx->max_batch * (size_t)h->S;
  h->logits = malloc(2 * BS * sizeof(float));
  h->start_logits = malloc(BS * sizeof(float));
  h->end_logits = malloc(BS * sizeof(float));
  h->losses = malloc(2 * (size_t)ctx->max_batch * sizeof(float));
  if (ctx->mode != EST_MODE_PREDICT) h->probs = malloc(2 * BS * sizeof(float));
  if (ctx->mode == EST_MODE_TRAIN) h->d_logits = malloc(2 * BS * sizeof(float));
  if (!h->logits || !h->start_logits || !h->end_logits || !h->losses ||
      (ctx->mode != EST_MODE_PREDICT && !h->probs) || (ctx->mode == EST_MODE_TRAIN && !h->d_logits))
    return est_error(EST_ERR_NO_MEMORY, "squad head: out of memory for a batch of %d x %d", ctx->max_batch, h->S);
  return EST_OK;
}

static est_status squad_forward(void *head, const est_bert_head_batch *b, float *loss) {
  squad_head *h = head;
  const est_precision precision = est_bert_encoder_precision(h->enc);
  est_squad_logits_forward(h->start_logits, h->end_logits, h->logits, est_bert_encoder_sequence_output(h->enc),
                           est_vars_value(h->vars, (size_t)h->out_w), est_vars_value(h->vars, (size_t)h->out_b),
                           b->batch, b->seq_len, h->H, precision);
  h->last_B = b->batch;
  if (b->mode == EST_MODE_PREDICT) return EST_OK;
  const est_tensor *start = NULL, *end = NULL;
  est_status st = est_features_get(b->features, "start_positions", EST_DT_INT32, 1, &start);
  if (st == EST_OK) st = est_features_get(b->features, "end_positions", EST_DT_INT32, 1, &end);
  if (st != EST_OK) return st;
  h->start_positions = start->data;
  h->end_positions = end->data;
  float value;
  st = est_squad_loss_forward(&value, h->losses, h->probs, h->start_logits, h->end_logits, h->start_positions,
                              h->end_positions, b->batch, b->seq_len);
  if (st == EST_OK && loss) *loss = value;
  return st;
}

static est_status squad_backward(void *head) {
  squad_head *h = head;
  float *d_seq = est_bert_encoder_sequence_output_grad(h->enc);
  if (!d_seq) return est_error(EST_ERR_FAILED_PRECONDITION, "BERT backward: the activations were reserved forward-only");
  est_squad_loss_backward(d_seq, est_vars_grad(h->vars, (size_t)h->out_w), est_vars_grad(h->vars, (size_t)h->out_b),
                          h->d_logits, h->probs, h->start_positions, h->end_positions,
                          est_bert_encoder_sequence_output(h->enc), est_vars_value(h->vars, (size_t)h->out_w),
                          h->last_B, h->S, h->H, est_bert_encoder_precision(h->enc));
  est_bert_report_grads_ready(h->vars, (size_t)h->out_w, (size_t)h->out_b, h->ready_fn, h->ready_ctx);
  return EST_OK;
}

/* model_fn's PREDICT spec: unique_ids, start_logits, end_logits (run_squad.py's names). */
static est_status squad_predictions(void *head, const est_bert_head_batch *b, est_estimator_spec *spec) {
  squad_head *h = head;
  const est_tensor *ids = NULL;
  est_status st = est_features_get(b->features, "unique_ids", EST_DT_INT32, 1, &ids);
  if (st != EST_OK) return st;
  h->outputs[0] = *ids;
  h->outputs[1] = (est_tensor){.dtype = EST_DT_FLOAT, .rank = 2, .dims = {b->batch, b->seq_len},
                               .data = h->start_logits};
  h->outputs[2] = h->outputs[1];
  h->outputs[2].data = h->end_logits;
  spec->num_predictions = 3;
  spec->prediction_names = PREDICTION_NAMES;
  spec->predictions = h->outputs;
  return EST_OK;
}

static void squad_set_grads_ready(void *head, est_bert_grads_ready_fn fn, void *ctx) {
  squad_head *h = head;
  h->ready_fn = fn;
  h->ready_ctx = ctx;
}

const est_bert_head_type est_bert_squad_head_type = {
  .name = "squad",
  .create = squad_create,
  .reserve = squad_reserve,
  .forward = squad_forward,
  .backward = squad_backward,
  .predictions = squad_predictions,
  .set_grads_ready = squad_set_grads_ready,
  .free = squad_free,
};
