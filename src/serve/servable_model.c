/* A servable's model: the encoder plus the head est_model.json names ("head"; exports
 * written before heads were named are classifiers), run forward-only through the head
 * interface (est/bert_head.h), so a new servable head is one row of the table below. */
#include <string.h>

#include "serve/servable_model.h"

/* est_model.json's "head" -> the head type, the prediction served and its parameters. */
typedef struct servable_head {
  const char *name;
  const est_bert_head_type *type;
  const char *output;
  /* fills m->params from meta; returns the output's floats per example */
  int (*params)(est_servable_model *m, const est_model_meta *meta);
} servable_head;

static int classifier_params(est_servable_model *m, const est_model_meta *meta) {
  m->params.classifier = (est_bert_classifier_head_params){.num_labels = (int)meta->num_labels};
  return (int)meta->num_labels;
}

/* est_model.json's "pooling" (sentence embeddings): the embedding's width. */
static int pooling_params(est_servable_model *m, const est_model_meta *meta) {
  m->params.pooling = meta->pooling;
  return est_pooling_width(&meta->pooling, meta->bert_config.hidden_size);
}

static const servable_head SERVABLE_HEADS[] = {
  {"classifier", &est_bert_classifier_head_type, "probabilities", classifier_params},
  {"pooling", &est_bert_pooling_head_type, "embeddings", pooling_params},
};
enum { NUM_SERVABLE_HEADS = sizeof SERVABLE_HEADS / sizeof *SERVABLE_HEADS };

est_status est_servable_model_create(est_servable_model *m, const est_model_meta *meta, est_var_store *vs,
                                     const char *source) {
  memset(m, 0, sizeof *m);
  const servable_head *h = NULL;
  for (int i = 0; i < NUM_SERVABLE_HEADS; i++)
    if (!strcmp(SERVABLE_HEADS[i].name, meta->head)) h = &SERVABLE_HEADS[i];
  if (!h)
    return est_error(EST_ERR_INVALID_ARGUMENT,
                     "%s: \"head\": \"%s\" cannot be served (servable heads: classifier, pooling)", source, meta->head);
  m->head_type = h->type;
  m->output = h->output;
  m->output_width = h->params(m, meta);
  est_status st = est_bert_encoder_create(&m->enc, &meta->bert_config, vs);
  const est_bert_head_context ctx = {.mode = EST_MODE_PREDICT, .max_batch = 1,
                                     .max_seq_length = meta->max_seq_length, .encoder = m->enc, .vars = vs,
                                     .params = &m->params};
  if (st == EST_OK) st = h->type->create(&m->head, &ctx);
  return st;
}

est_status est_servable_model_reserve(est_servable_model *m, int max_batch, int max_seq_length) {
  /* serving never runs backward: forward-only activations (no per-layer scratch or masks) */
  est_status st = est_bert_encoder_reserve(m->enc, max_batch, max_seq_length, 0);
  const est_bert_head_context ctx = {.mode = EST_MODE_PREDICT, .max_batch = max_batch,
                                     .max_seq_length = max_seq_length, .encoder = m->enc,
                                     .vars = est_bert_encoder_vars(m->enc), .params = &m->params};
  return st == EST_OK ? m->head_type->reserve(m->head, &ctx) : st;
}

est_status est_servable_model_run(est_servable_model *m, const int32_t *input_ids, const int32_t *input_mask,
                                  const int32_t *segment_ids, int batch, int seq_len, float *out) {
  est_status st = est_bert_encoder_forward(m->enc, input_ids, input_mask, segment_ids, batch, seq_len, 0, 0, 0);
  if (st != EST_OK) return st;
  /* the head sees the batch as features, as in the Estimator's PREDICT */
  const char *names[3] = {"input_ids", "input_mask", "segment_ids"};
  const int32_t *data[3] = {input_ids, input_mask, segment_ids};
  est_tensor tensors[3];
  const char *present[3];
  size_t n = 0;
  for (int k = 0; k < 3; k++)
    if (data[k]) {
      present[n] = names[k];
      tensors[n++] = (est_tensor){.dtype = EST_DT_INT32, .rank = 2, .dims = {batch, seq_len}, .data = (void *)data[k]};
    }
  const est_features f = {.batch_size = batch, .count = n, .names = present, .tensors = tensors};
  const est_bert_head_batch b = {.mode = EST_MODE_PREDICT, .features = &f, .batch = batch, .seq_len = seq_len};
  est_estimator_spec spec = {0};
  st = m->head_type->forward(m->head, &b, NULL);
  if (st == EST_OK) st = m->head_type->predictions(m->head, &b, &spec);
  if (st != EST_OK) return st;
  for (size_t i = 0; i < spec.num_predictions; i++)
    if (!strcmp(spec.prediction_names[i], m->output)) {
      memcpy(out, spec.predictions[i].data, (size_t)batch * (size_t)m->output_width * sizeof(float));
      return EST_OK;
    }
  return est_error(EST_ERR_INTERNAL, "the %s head gave no '%s' prediction", m->head_type->name, m->output);
}

void est_servable_model_free(est_servable_model *m) {
  if (m->head) m->head_type->free(m->head);
  est_bert_encoder_free(m->enc);
  memset(m, 0, sizeof *m);
}
