/* A servable's model: the encoder plus the head est_model.json names ("head"; exports
 * written before heads were named are classifiers), run forward-only through the head
 * interface (est/bert_head.h) with the parameters and outputs its est_served_head gives
 * (est/served_head.h), so a new servable head is a line of the table of served heads. */
#include <stdlib.h>
#include <string.h>

#include "est/ckpt.h"
#include "est/hf_model.h"
#include "serve/int8_weights.h"
#include "serve/servable_model.h"

est_status est_servable_model_create(est_servable_model *m, const est_model_meta *meta, est_var_store *vs) {
  memset(m, 0, sizeof *m);
  m->served = est_model_meta_head(meta);
  m->output_width = m->served->params(m->params.bytes, meta);
  est_status st = est_bert_encoder_create(&m->enc, &meta->bert_config, vs);
  const est_bert_head_context ctx = {.mode = EST_MODE_PREDICT, .max_batch = 1,
                                     .max_seq_length = meta->max_seq_length, .encoder = m->enc, .vars = vs,
                                     .params = m->params.bytes};
  if (st == EST_OK) st = m->served->type->create(&m->head, &ctx);
  if (st == EST_OK && m->output_width <= 0) /* the layer has refused such params already, as a rule */
    st = est_error(EST_ERR_INVALID_ARGUMENT, "the %s head serves no output for this model", m->served->name);
  return st;
}

est_status est_servable_model_reserve(est_servable_model *m, int max_batch, int max_seq_length) {
  free(m->row_ids);
  if (!(m->row_ids = malloc((size_t)max_batch * sizeof *m->row_ids)))
    return est_error(EST_ERR_NO_MEMORY, "servable: %d row ids", max_batch);
  for (int i = 0; i < max_batch; i++) m->row_ids[i] = i;
  /* serving never runs backward: forward-only activations (no per-layer scratch or masks) */
  est_status st = est_bert_encoder_reserve(m->enc, max_batch, max_seq_length, 0);
  const est_bert_head_context ctx = {.mode = EST_MODE_PREDICT, .max_batch = max_batch,
                                     .max_seq_length = max_seq_length, .encoder = m->enc,
                                     .vars = est_bert_encoder_vars(m->enc), .params = m->params.bytes};
  return st == EST_OK ? m->served->type->reserve(m->head, &ctx) : st;
}

est_status est_servable_model_run(est_servable_model *m, const int32_t *input_ids, const int32_t *input_mask,
                                  const int32_t *segment_ids, int batch, int seq_len, float *out) {
  est_status st = est_bert_encoder_forward(m->enc, input_ids, input_mask, segment_ids, batch, seq_len, 0, 0, 0);
  if (st != EST_OK) return st;
  /* the head sees the batch as features, as in the Estimator's PREDICT (unique_ids: the
   * rows' indexes, for heads that pass them through) */
  const char *names[4] = {"input_ids", "input_mask", "segment_ids", "unique_ids"};
  const int32_t *data[4] = {input_ids, input_mask, segment_ids, m->row_ids};
  est_tensor tensors[4];
  const char *present[4];
  size_t n = 0;
  for (int k = 0; k < 4; k++)
    if (data[k]) {
      present[n] = names[k];
      tensors[n++] = (est_tensor){.dtype = EST_DT_INT32, .rank = k == 3 ? 1 : 2, .dims = {batch, seq_len},
                                  .data = (void *)data[k]};
    }
  const est_features f = {.batch_size = batch, .count = n, .names = present, .tensors = tensors};
  const est_bert_head_batch b = {.mode = EST_MODE_PREDICT, .features = &f, .batch = batch, .seq_len = seq_len};
  est_estimator_spec spec = {0};
  const est_bert_head_type *type = m->served->type;
  st = type->forward(m->head, &b, NULL);
  if (st == EST_OK) st = type->predictions(m->head, &b, &spec);
  if (st != EST_OK) return st;
  const char *const *wanted = m->served->outputs;
  const int parts = wanted[1] ? 2 : 1, part_width = m->output_width / parts;
  for (int k = 0; k < parts; k++) {
    const est_tensor *t = NULL;
    for (size_t i = 0; i < spec.num_predictions; i++)
      if (!strcmp(spec.prediction_names[i], wanted[k])) t = &spec.predictions[i];
    if (!t) return est_error(EST_ERR_INTERNAL, "the %s head gave no '%s' prediction", type->name, wanted[k]);
    /* floats per example: [B] one, [B, W] W, [B, S, C] S x C (a prediction per position) */
    int width = 1;
    for (int d = 1; d < t->rank; d++) width *= (int)t->dims[d];
    if (width > part_width)
      return est_error(EST_ERR_INTERNAL, "the %s head's '%s' has %d values per example, above %d", type->name,
                       wanted[k], width, part_width);
    for (int r = 0; r < batch; r++) {
      float *dst = out + (size_t)r * m->output_width + (size_t)k * part_width;
      memcpy(dst, (const float *)t->data + (size_t)r * width, (size_t)width * sizeof(float));
      memset(dst + width, 0, (size_t)(part_width - width) * sizeof(float));
    }
  }
  return EST_OK;
}

void est_servable_model_free(est_servable_model *m) {
  if (m->head) m->served->type->free(m->head);
  est_bert_encoder_free(m->enc);
  free(m->row_ids);
  memset(m, 0, sizeof *m);
}

est_status est_servable_model_restore(est_var_store *vs, const char *prefix, int *int8_stored) {
  if (est_hf_is_checkpoint(prefix)) { /* a HuggingFace model (docs/hf.md) */
    est_status st = est_hf_load_vars(vs, prefix, NULL);
    if (st == EST_OK && est_vars_count(vs)) st = est_hf_require_vars(vs, 0, est_vars_count(vs) - 1, prefix);
    return st;
  }
  est_ckpt_reader *r;
  est_status st = est_ckpt_reader_open(&r, prefix);
  if (st != EST_OK) return st;
  for (size_t i = 0; st == EST_OK && i < est_vars_count(vs); i++) {
    const est_variable *v = est_vars_at(vs, i);
    if (!est_ckpt_reader_has(r, v->name) && int8_stored && est_int8_stored(v) && est_int8_weights_present(r, v)) {
      ++*int8_stored;
      continue;
    }
    if (!est_ckpt_reader_has(r, v->name)) {
      st = est_error(EST_ERR_NOT_FOUND, "%s: no variable %s", prefix, v->name);
      break;
    }
    st = est_ckpt_reader_read_into(r, v->name, EST_DT_FLOAT, est_vars_value(vs, i), v->count * sizeof(float));
    if (st != EST_OK) st = est_error_prefix("%s, variable %s: ", prefix, v->name);
  }
  est_ckpt_reader_close(r);
  return st;
}
