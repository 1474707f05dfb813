/* run_squad.py create_model's head as an est_bert_head_type (est/bert_head.h): a span
 * start and end logit for every position of the encoder's sequence output (docs/squad.md §8).
 *
 *   logits[B*S, 2] = sequence_output[B*S, H] . cls/squad/output_weights[2, H]^T + output_bias[2]
 *   start_logits[B, S] = logits[:, :, 0], end_logits[B, S] = logits[:, :, 1]
 *
 *   TRAIN    loss = (start_loss + end_loss) / 2, each the batch mean of
 *            -log_softmax(logits over all S positions)[position]: every position counts,
 *            padding included, as the reference's compute_loss (one_hot over seq_length).
 *            Features start_positions, end_positions [B].
 *   EVAL     the same loss (run_squad.py has no eval mode; est's Estimator can report it).
 *   PREDICT  "unique_ids" [B] (the feature), "start_logits" and "end_logits" [B, S]. */
#include <stdlib.h>
#include <string.h>

#include "est/bert_head.h"
#include "est/nn.h"

typedef struct squad_head {
  est_bert_encoder *enc;
  est_var_store *vs;
  int H, w, b;                    /* cls/squad/output_weights [2, H], output_bias [2] */
  int max_B, max_S;
  /* one batch: [B*S*2] interleaved as the GEMM writes them; [B*S] each; [B] each */
  float *logits, *start, *end, *start_probs, *end_probs, *losses, *dlogits, *dstart, *dend;
  int32_t *positions;             /* [2 * max_B]: start then end positions of the last forward */
  int B, S, valid;                /* the last forward; valid: it had positions */
  est_tensor outputs[3];
  est_bert_grads_ready_fn ready_fn;
  void *ready_ctx;
} squad_head;

static const char *const PREDICTION_NAMES[] = {"unique_ids", "start_logits", "end_logits"};

static void squad_free(void *head) {
  squad_head *h = head;
  if (!h) return;
  free(h->logits);
  free(h->positions);
  free(h);
}

static est_status squad_create(void **out, const est_bert_head_context *ctx) {
  squad_head *h = calloc(1, sizeof *h);
  if (!h) return est_error(EST_ERR_NO_MEMORY, "squad head: out of memory");
  *out = h;
  h->enc = ctx->encoder;
  h->vs = ctx->vars;
  h->H = est_bert_encoder_config(ctx->encoder)->hidden_size;
  /* run_squad.py: truncated_normal_initializer(stddev=0.02) and zeros, whatever
   * initializer_range says */
  int64_t wdims[2] = {2, h->H}, bdims[1] = {2};
  est_status st = est_vars_declare(h->vs, "cls/squad/output_weights", 2, wdims, est_init_truncated_normal(0.02f),
                                   &h->w);
  if (st == EST_OK) st = est_vars_declare(h->vs, "cls/squad/output_bias", 1, bdims, est_init_zeros(), &h->b);
  return st == EST_OK ? EST_OK : est_error_prefix("declaring the squad head's variables: ");
}

static est_status squad_reserve(void *head, const est_bert_head_context *ctx) {
  squad_head *h = head;
  free(h->logits);
  free(h->positions);
  h->max_B = ctx->max_batch;
  h->max_S = ctx->max_seq_length;
  const size_t T = (size_t)h->max_B * (size_t)h->max_S, B = (size_t)h->max_B;
  /* one block: logits and dlogits [T*2], start, end, their probs, dstart, dend [T], losses [2B] */
  h->logits = malloc((4 * T + 6 * T + 2 * B) * sizeof(float));
  h->positions = malloc(2 * B * sizeof(int32_t));
  if (!h->logits || !h->positions) return est_error(EST_ERR_NO_MEMORY, "squad head: out of memory for %zu rows", T);
  h->dlogits = h->logits + 2 * T;
  h->start = h->dlogits + 2 * T;
  h->end = h->start + T;
  h->start_probs = h->end + T;
  h->end_probs = h->start_probs + T;
  h->dstart = h->end_probs + T;
  h->dend = h->dstart + T;
  h->losses = h->dend + T;
  return EST_OK;
}

/* start_positions or end_positions [B] into dst, each a position in [0, S). */
static est_status read_positions(const est_features *f, const char *name, int B, int S, int32_t *dst) {
  const est_tensor *t;
  est_status st = est_features_get(f, name, EST_DT_INT32, 1, &t);
  if (st != EST_OK) return st;
  const int32_t *v = t->data;
  for (int i = 0; i < B; i++) {
    if (v[i] < 0 || v[i] >= S)
      return est_error(EST_ERR_INVALID_ARGUMENT, "%s[%d] = %d is outside the sequence [0, %d)", name, i, (int)v[i], S);
    dst[i] = v[i];
  }
  return EST_OK;
}

/* The batch mean of -log softmax(logits[b, :])[positions[b]] (probs kept for backward). */
static double position_loss(float *losses, float *probs, const float *logits, const int32_t *positions, int B,
                            int S) {
  est_crossentropy_forward(losses, probs, logits, positions, B, S); /* positions checked already */
  double sum = 0.0;
  for (int b = 0; b < B; b++) sum += losses[b];
  return sum / B;
}

static est_status squad_forward(void *head, const est_bert_head_batch *b, float *loss) {
  squad_head *h = head;
  h->valid = 0;
  const int B = b->batch, S = b->seq_len, H = h->H;
  if (B <= 0 || B > h->max_B || S > h->max_S)
    return est_error(EST_ERR_INVALID_ARGUMENT, "squad head: a batch of %d x %d exceeds the reservation %d x %d", B, S,
                     h->max_B, h->max_S);
  const size_t T = (size_t)B * S;
  est_matmul_forward(h->logits, est_bert_encoder_sequence_output(h->enc), est_vars_value(h->vs, (size_t)h->w),
                     est_vars_value(h->vs, (size_t)h->b), (int)T, H, 2, 1,
                     est_precision_of_logits(est_bert_encoder_precision(h->enc)));
  for (size_t t = 0; t < T; t++) h->start[t] = h->logits[2 * t], h->end[t] = h->logits[2 * t + 1];
  h->B = B;
  h->S = S;
  if (b->mode == EST_MODE_PREDICT) return EST_OK;
  int32_t *start_pos = h->positions, *end_pos = h->positions + B;
  est_status st = read_positions(b->features, "start_positions", B, S, start_pos);
  if (st == EST_OK) st = read_positions(b->features, "end_positions", B, S, end_pos);
  if (st != EST_OK) return st;
  const double start_loss = position_loss(h->losses, h->start_probs, h->start, start_pos, B, S);
  const double end_loss = position_loss(h->losses + B, h->end_probs, h->end, end_pos, B, S);
  if (loss) *loss = (float)((start_loss + end_loss) / 2.0);
  h->valid = 1;
  return EST_OK;
}

static est_status squad_backward(void *head) {
  squad_head *h = head;
  if (!h->valid)
    return est_error(EST_ERR_FAILED_PRECONDITION, "squad head backward needs a forward with positions just before it");
  float *dseq = est_bert_encoder_sequence_output_grad(h->enc);
  if (!dseq) return est_error(EST_ERR_FAILED_PRECONDITION, "BERT backward: the activations were reserved forward-only");
  h->valid = 0;
  const int B = h->B, S = h->S;
  const size_t T = (size_t)B * S;
  /* loss = (mean_b start + mean_b end) / 2: each row's d logits is (p - onehot) / (2B) */
  memset(h->dstart, 0, 2 * T * sizeof(float)); /* dstart and dend are adjacent */
  est_crossentropy_backward(h->dstart, h->start_probs, h->positions, 0.5f / (float)B, B, S);
  est_crossentropy_backward(h->dend, h->end_probs, h->positions + B, 0.5f / (float)B, B, S);
  for (size_t t = 0; t < T; t++) h->dlogits[2 * t] = h->dstart[t], h->dlogits[2 * t + 1] = h->dend[t];
  est_matmul_backward(dseq, est_vars_grad(h->vs, (size_t)h->w), est_vars_grad(h->vs, (size_t)h->b), h->dlogits,
                      est_bert_encoder_sequence_output(h->enc), est_vars_value(h->vs, (size_t)h->w), (int)T, h->H, 2,
                      1, est_bert_encoder_precision(h->enc));
  est_bert_report_grads_ready(h->vs, (size_t)h->w, (size_t)h->b, h->ready_fn, h->ready_ctx);
  return EST_OK;
}

static est_status squad_predictions(void *head, const est_bert_head_batch *b, est_estimator_spec *spec) {
  squad_head *h = head;
  const est_tensor *ids;
  est_status st = est_features_get(b->features, "unique_ids", EST_DT_INT32, 1, &ids);
  if (st != EST_OK) return st;
  h->outputs[0] = *ids;
  h->outputs[1] = (est_tensor){.dtype = EST_DT_FLOAT, .rank = 2, .dims = {h->B, h->S}, .data = h->start};
  h->outputs[2] = (est_tensor){.dtype = EST_DT_FLOAT, .rank = 2, .dims = {h->B, h->S}, .data = h->end};
  spec->num_predictions = 3;
  spec->prediction_names = PREDICTION_NAMES;
  spec->predictions = h->outputs;
  return EST_OK;
}

static void squad_set_grads_ready(void *head, est_bert_grads_ready_fn fn, void *ctx) {
  squad_head *h = head;
  h->ready_fn = fn;
  h->ready_ctx = fn ? ctx : NULL;
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
