/* Token classification (NER) as an est_bert_head_type (est/bert_head.h): transformers'
 * BertForTokenClassification, and the TF BERT-NER forks' create_model, on every position of
 * the encoder's sequence output (docs/heads.md §1; issue 49).
 *
 *   seq_d[B*S, H]  = dropout(sequence_output, hidden_dropout_prob)        (TRAIN only)
 *   logits[B*S, C] = seq_d . output_weights[C, H]^T + output_bias[C]
 *
 * output_weights / output_bias are run_classifier's names (truncated normal 0.02, zeros), so
 * a HuggingFace directory's classifier.weight / classifier.bias map onto them through the
 * same table line as BertForSequenceClassification (src/hf/hf_names.c).
 *
 *   TRAIN    loss = the mean over the labelled positions of -log softmax(logits)[label]:
 *            torch's CrossEntropyLoss(ignore_index=-100, reduction="mean"), which
 *            BertForTokenClassification uses. A position whose label_ids is -100 (the
 *            sub-tokens after a word's first, [CLS], [SEP], padding) adds nothing; a batch
 *            without labelled positions has loss 0 and zero gradients.
 *            Feature label_ids [B, S] int32.
 *   EVAL     eval_accuracy: token accuracy over the labelled positions; eval_loss: the mean
 *            per-token loss over them. (Entity-level precision / recall / F1 need the label
 *            names and whole words: the task computes them from predictions, src/ner.)
 *   PREDICT  "probabilities" [B, S, C] = softmax(logits) at every position. */
#include <stdlib.h>
#include <string.h>

#include "est/bert_head.h"
#include "est/metrics.h"
#include "est/nn.h"

enum { IGNORE_INDEX = -100 };

typedef struct token_classifier {
  est_bert_encoder *enc;
  est_var_store *vs;
  int H, C, w, b;                /* output_weights [C, H], output_bias [C] */
  int max_B, max_S;
  float dropout;                 /* the config's hidden_dropout_prob */
  /* one batch, T = B * S positions */
  float *seq_d;                  /* [T, H] dropout output (TRAIN with dropout) */
  uint8_t *mask;                 /* [T, H] */
  float *logits, *probs, *dlogits; /* [T, C] */
  float *d_seq_d;                /* [T, H] */
  float *losses, *weights;       /* [T]: per-token loss; 1 labelled, 0 ignored */
  int32_t *labels, *predictions; /* [T]: the label (0 where ignored), argmax */
  int B, S, valid, num_labelled;
  float p;
  int64_t first_row;
  est_tensor prob_tensor;
  est_metric *metric_objs[2];
  size_t num_metrics;
  est_bert_grads_ready_fn ready_fn;
  void *ready_ctx;
} token_classifier;

static const char *const PREDICTION_NAMES[] = {"probabilities"};

static void free_buffers(token_classifier *h) {
  free(h->seq_d), free(h->mask), free(h->logits), free(h->probs), free(h->dlogits), free(h->d_seq_d);
  free(h->losses), free(h->weights), free(h->labels), free(h->predictions);
}

static void tc_free(void *head) {
  token_classifier *h = head;
  if (!h) return;
  free_buffers(h);
  for (size_t i = 0; i < h->num_metrics; i++) est_metric_free(h->metric_objs[i]);
  free(h);
}

static est_status tc_create(void **out, const est_bert_head_context *ctx) {
  const est_bert_token_classifier_head_params *p = ctx->params;
  if (!p || p->num_labels <= 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "token classifier head: num_labels must be positive, got %d",
                     p ? p->num_labels : 0);
  token_classifier *h = calloc(1, sizeof *h);
  if (!h) return est_error(EST_ERR_NO_MEMORY, "token classifier head: out of memory");
  *out = h;
  h->enc = ctx->encoder;
  h->vs = ctx->vars;
  const est_bert_config *cfg = est_bert_encoder_config(ctx->encoder);
  h->H = cfg->hidden_size;
  h->C = p->num_labels;
  /* BertForTokenClassification: classifier_dropout, else hidden_dropout_prob */
  h->dropout = (float)cfg->hidden_dropout_prob;
  int64_t wdims[2] = {h->C, h->H}, bdims[1] = {h->C};
  est_status st = est_vars_declare(h->vs, "output_weights", 2, wdims, est_init_truncated_normal(0.02f), &h->w);
  if (st == EST_OK) st = est_vars_declare(h->vs, "output_bias", 1, bdims, est_init_zeros(), &h->b);
  return st == EST_OK ? EST_OK : est_error_prefix("declaring the token classifier's variables: ");
}

static est_status add_metric(token_classifier *h, est_metric_kind kind, const char *name) {
  est_metric *m;
  est_status st = est_metric_create(&m, kind, name);
  if (st != EST_OK) return st;
  h->metric_objs[h->num_metrics++] = m;
  return EST_OK;
}

static est_status tc_reserve(void *head, const est_bert_head_context *ctx) {
  token_classifier *h = head;
  free_buffers(h);
  h->max_B = ctx->max_batch;
  h->max_S = ctx->max_seq_length;
  const size_t T = (size_t)h->max_B * (size_t)h->max_S, H = (size_t)h->H, C = (size_t)h->C;
  const int train = ctx->mode == EST_MODE_TRAIN;
  h->seq_d = train ? malloc(T * H * sizeof(float)) : NULL;
  h->mask = train ? malloc(T * H) : NULL;
  h->d_seq_d = train ? malloc(T * H * sizeof(float)) : NULL;
  h->dlogits = train ? malloc(T * C * sizeof(float)) : NULL;
  h->logits = malloc(T * C * sizeof(float));
  h->probs = malloc(T * C * sizeof(float));
  h->losses = malloc(T * sizeof(float));
  h->weights = malloc(T * sizeof(float));
  h->labels = malloc(T * sizeof(int32_t));
  h->predictions = malloc(T * sizeof(int32_t));
  if ((train && (!h->seq_d || !h->mask || !h->d_seq_d || !h->dlogits)) || !h->logits || !h->probs || !h->losses ||
      !h->weights || !h->labels || !h->predictions)
    return est_error(EST_ERR_NO_MEMORY, "token classifier head: out of memory for %zu positions", T);
  if (ctx->mode != EST_MODE_EVAL || h->num_metrics) return EST_OK;
  est_status st = add_metric(h, EST_METRIC_ACCURACY, "eval_accuracy");
  return st == EST_OK ? add_metric(h, EST_METRIC_MEAN, "eval_loss") : st;
}

/* label_ids [B, S]: each in [0, C) or -100, into h->labels / h->weights. */
static est_status read_labels(token_classifier *h, const est_features *f, int B, int S) {
  const est_tensor *t;
  est_status st = est_features_get(f, "label_ids", EST_DT_INT32, 2, &t);
  if (st != EST_OK) return st;
  if (t->dims[1] != S)
    return est_error(EST_ERR_INVALID_ARGUMENT, "label_ids has %lld positions per row, the batch has %d",
                     (long long)t->dims[1], S);
  const int32_t *v = t->data;
  h->num_labelled = 0;
  for (size_t i = 0; i < (size_t)B * S; i++) {
    if (v[i] == IGNORE_INDEX) {
      h->labels[i] = 0, h->weights[i] = 0.0f;
      continue;
    }
    if (v[i] < 0 || v[i] >= h->C)
      return est_error(EST_ERR_INVALID_ARGUMENT, "label_ids[%zu][%zu] = %d: expected a label in [0, %d) or -100",
                       i / S, i % S, (int)v[i], h->C);
    h->labels[i] = v[i], h->weights[i] = 1.0f;
    h->num_labelled++;
  }
  return EST_OK;
}

static est_status tc_forward(void *head, const est_bert_head_batch *b, float *loss) {
  token_classifier *h = head;
  h->valid = 0;
  const int B = b->batch, S = b->seq_len, H = h->H, C = h->C;
  if (B <= 0 || B > h->max_B || S > h->max_S)
    return est_error(EST_ERR_INVALID_ARGUMENT, "token classifier head: a batch of %d x %d exceeds the reservation "
                     "%d x %d", B, S, h->max_B, h->max_S);
  const size_t T = (size_t)B * S;
  const float *seq = est_bert_encoder_sequence_output(h->enc);
  h->p = b->training && h->seq_d ? h->dropout : 0.0f;
  if (h->p > 0.0f) {
    est_dropout_forward_at(h->seq_d, h->mask, seq, T * H, (size_t)h->first_row * S * H, h->p, b->seed, b->step,
                           EST_BERT_DROPOUT_HEAD_FIRST);
    seq = h->seq_d;
  }
  est_matmul_forward(h->logits, seq, est_vars_value(h->vs, (size_t)h->w), est_vars_value(h->vs, (size_t)h->b),
                     (int)T, H, C, 1, est_precision_of_logits(est_bert_encoder_precision(h->enc)));
  h->B = B, h->S = S;
  if (b->mode == EST_MODE_PREDICT || !loss) return EST_OK;
  est_status st = read_labels(h, b->features, B, S);
  if (st != EST_OK) return st;
  /* softmax of every position (the probabilities, and argmax for metrics); the loss only
   * at labelled ones */
  double sum = 0.0;
  for (size_t t = 0; t < T; t++) {
    est_crossentropy_forward(h->losses + t, h->probs + t * C, h->logits + t * C, h->labels + t, 1, C);
    if (h->weights[t] != 0.0f) sum += h->losses[t];
  }
  *loss = h->num_labelled ? (float)(sum / h->num_labelled) : 0.0f;
  h->valid = 1;
  return EST_OK;
}

static est_status tc_backward(void *head) {
  token_classifier *h = head;
  if (!h->valid)
    return est_error(EST_ERR_FAILED_PRECONDITION,
                     "token classifier head backward needs a forward with label_ids just before it");
  float *dseq = est_bert_encoder_sequence_output_grad(h->enc);
  if (!dseq || !h->dlogits)
    return est_error(EST_ERR_FAILED_PRECONDITION, "BERT backward: the activations were reserved forward-only");
  h->valid = 0;
  const int H = h->H, C = h->C;
  const size_t T = (size_t)h->B * h->S;
  /* loss = sum over labelled t of losses[t] / n: d logits[t] = (p - onehot) / n there, 0 elsewhere */
  memset(h->dlogits, 0, T * C * sizeof(float));
  if (h->num_labelled) {
    const float scale = 1.0f / (float)h->num_labelled;
    for (size_t t = 0; t < T; t++)
      if (h->weights[t] != 0.0f)
        est_crossentropy_backward(h->dlogits + t * C, h->probs + t * C, h->labels + t, scale, 1, C);
  }
  float *dW = est_vars_grad(h->vs, (size_t)h->w), *db = est_vars_grad(h->vs, (size_t)h->b);
  const float *inp = h->p > 0.0f ? h->seq_d : est_bert_encoder_sequence_output(h->enc);
  /* without dropout the input gradient goes straight into the encoder's (added); with it,
   * into d_seq_d (written), then through the mask into the encoder's (added) */
  float *dinp = h->p > 0.0f ? h->d_seq_d : dseq;
  est_matmul_backward_mode(dinp, dW, db, h->dlogits, inp, est_vars_value(h->vs, (size_t)h->w), (int)T, H, C, 1,
                           h->p > 0.0f ? EST_GRAD_WRITE : EST_GRAD_ADD, est_bert_encoder_precision(h->enc));
  est_bert_report_grads_ready(h->vs, (size_t)h->w, (size_t)h->b, h->ready_fn, h->ready_ctx);
  if (h->p > 0.0f) est_dropout_backward(dseq, h->d_seq_d, h->mask, T * H, h->p);
  return EST_OK;
}

static est_status tc_update_metrics(void *head, const est_bert_head_batch *b) {
  token_classifier *h = head;
  (void)b;
  const int C = h->C;
  const size_t T = (size_t)h->B * h->S;
  for (size_t t = 0; t < T; t++) { /* the first maximum, as tf.argmax / torch.argmax */
    const float *z = h->logits + t * C;
    int best = 0;
    for (int c = 1; c < C; c++)
      if (z[c] > z[best]) best = c;
    h->predictions[t] = best;
  }
  for (size_t k = 0; k < h->num_metrics; k++) {
    est_metric *m = h->metric_objs[k];
    est_status st = est_metric_get_kind(m) == EST_METRIC_MEAN
                        ? est_metric_update_values(m, h->losses, h->weights, T)
                        : est_metric_update_classes(m, h->labels, h->predictions, h->weights, T);
    if (st != EST_OK) return st;
  }
  return EST_OK;
}

static est_status tc_metrics(void *head, est_metric *const **metrics, size_t *n) {
  token_classifier *h = head;
  *metrics = h->metric_objs;
  *n = h->num_metrics;
  return EST_OK;
}

static est_status tc_predictions(void *head, const est_bert_head_batch *b, est_estimator_spec *spec) {
  token_classifier *h = head;
  est_softmax_forward(h->probs, h->logits, b->batch * b->seq_len, h->C);
  h->prob_tensor = (est_tensor){.dtype = EST_DT_FLOAT, .rank = 3, .dims = {b->batch, b->seq_len, h->C},
                                .data = h->probs};
  spec->num_predictions = 1;
  spec->prediction_names = PREDICTION_NAMES;
  spec->predictions = &h->prob_tensor;
  return EST_OK;
}

static void tc_set_grads_ready(void *head, est_bert_grads_ready_fn fn, void *ctx) {
  token_classifier *h = head;
  h->ready_fn = fn;
  h->ready_ctx = fn ? ctx : NULL;
}

static void tc_set_first_row(void *head, int64_t first_row) {
  ((token_classifier *)head)->first_row = first_row > 0 ? first_row : 0;
}

const est_bert_head_type est_bert_token_classifier_head_type = {
  .name = "token_classifier",
  .create = tc_create,
  .reserve = tc_reserve,
  .forward = tc_forward,
  .backward = tc_backward,
  .update_metrics = tc_update_metrics,
  .metrics = tc_metrics,
  .predictions = tc_predictions,
  .set_grads_ready = tc_set_grads_ready,
  .set_first_row = tc_set_first_row,
  .free = tc_free,
};
