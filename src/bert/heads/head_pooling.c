/* The pooling head (est/sentence_embedding.h) as an est_bert_head_type (est/bert_head.h):
 * sentence-transformers' Pooling (+ Normalize) on the encoder's sequence output, for
 * `est embed` and an embedding servable (docs/embeddings.md).
 *
 *   PREDICT  "embeddings" [B, W] = est_pooling_forward(sequence output [B, S, H], input_mask)
 *
 * It declares no variables and has no loss: a sentence embedding is read off a trained
 * encoder as it is, so TRAIN and EVAL are refused with the head's name. */
#include <stdlib.h>

#include "est/sentence_embedding.h"

typedef struct pooling_head {
  est_bert_encoder *enc;
  est_pooling_params params;
  int width;                    /* W */
  float *embeddings;            /* [max_batch, W] */
  est_tensor out;
} pooling_head;

static const char *const PREDICTION_NAMES[] = {"embeddings"};

static void pooling_free(void *head) {
  pooling_head *m = head;
  if (!m) return;
  free(m->embeddings);
  free(m);
}

static est_status pooling_create(void **out, const est_bert_head_context *ctx) {
  const est_pooling_params *p = ctx->params;
  if (ctx->mode != EST_MODE_PREDICT)
    return est_error(EST_ERR_INVALID_ARGUMENT, "the pooling head only predicts (sentence embeddings); it has no "
                     "loss to train or evaluate");
  if (!p || !p->modes || p->modes >> EST_POOLING_NUM_MODES)
    return est_error(EST_ERR_INVALID_ARGUMENT, "pooling head: no pooling mode (cls, max, mean, mean_sqrt_len)");
  pooling_head *m = calloc(1, sizeof *m);
  if (!m) return est_error(EST_ERR_NO_MEMORY, "pooling head");
  *out = m;
  m->enc = ctx->encoder;
  m->params = *p;
  m->width = est_pooling_width(p, est_bert_encoder_config(ctx->encoder)->hidden_size);
  return EST_OK;
}

static est_status pooling_reserve(void *head, const est_bert_head_context *ctx) {
  pooling_head *m = head;
  free(m->embeddings);
  m->embeddings = malloc((size_t)ctx->max_batch * (size_t)m->width * sizeof(float));
  return m->embeddings ? EST_OK : est_error(EST_ERR_NO_MEMORY, "pooling head: batch of %d", ctx->max_batch);
}

static est_status pooling_forward(void *head, const est_bert_head_batch *b, float *loss) {
  pooling_head *m = head;
  if (loss) return est_error(EST_ERR_INVALID_ARGUMENT, "the pooling head has no loss (PREDICT only)");
  /* input_mask is optional as for the encoder: absent means every position is real */
  const est_tensor *mask = NULL;
  if (est_features_find(b->features, "input_mask")) {
    est_status st = est_features_get(b->features, "input_mask", EST_DT_INT32, 2, &mask);
    if (st != EST_OK) return st;
  }
  const int H = est_bert_encoder_config(m->enc)->hidden_size;
  est_pooling_forward(m->embeddings, est_bert_encoder_sequence_output(m->enc), mask ? mask->data : NULL, b->batch,
                      b->seq_len, H, &m->params);
  return EST_OK;
}

static est_status pooling_predictions(void *head, const est_bert_head_batch *b, est_estimator_spec *spec) {
  pooling_head *m = head;
  m->out = (est_tensor){.dtype = EST_DT_FLOAT, .rank = 2, .dims = {b->batch, m->width}, .data = m->embeddings};
  spec->num_predictions = 1;
  spec->prediction_names = PREDICTION_NAMES;
  spec->predictions = &m->out;
  return EST_OK;
}

const est_bert_head_type est_bert_pooling_head_type = {
  .name = "pooling",
  .create = pooling_create,
  .reserve = pooling_reserve,
  .forward = pooling_forward,
  .predictions = pooling_predictions,
  .free = pooling_free,
};
