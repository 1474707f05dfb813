/* Internal: the model a servable runs, built from est_model.json by the head it names
 * (servable_model.c). Export declares the same variables to copy them out of a checkpoint,
 * so a servable always finds exactly the weights its head declares. */
#ifndef EST_SERVE_SERVABLE_MODEL_H
#define EST_SERVE_SERVABLE_MODEL_H

#include "est/bert_head.h"
#include "est/serving.h"

typedef struct est_servable_model {
  const est_bert_head_type *head_type;
  void *head;
  est_bert_encoder *enc;
  const char *output;                 /* the head's prediction that is served */
  const char *output2;                /* NULL, or a second one laid after it in each row */
  int output_width;                   /* floats per example of them (each gets half with output2) */
  int32_t *row_ids;                   /* [max_batch] 0, 1, ...: the "unique_ids" feature */
  union {
    est_bert_classifier_head_params classifier;
    est_pooling_params pooling;
  } params;                           /* the head's parameters, from the metadata */
} est_servable_model;

/* Declares the encoder's and meta->head's variables in vs (not finalized). Errors name the
 * "head" field of est_model.json (`source`) when est cannot serve that head. */
est_status est_servable_model_create(est_servable_model *m, const est_model_meta *meta, est_var_store *vs,
                                     const char *source);
/* Forward-only activations for batches of up to max_batch rows of max_seq_length tokens. */
est_status est_servable_model_reserve(est_servable_model *m, int max_batch, int max_seq_length);
/* out [batch, output_width] = the served prediction for rows of seq_len tokens
 * (input_mask / segment_ids may be NULL: all ones / all zeros). A prediction per position
 * ([batch, seq_len], e.g. squad's start_logits) fills the first seq_len floats of its part
 * of a row and zeros the rest. */
est_status est_servable_model_run(est_servable_model *m, const int32_t *input_ids, const int32_t *input_mask,
                                  const int32_t *segment_ids, int batch, int seq_len, float *out);
void est_servable_model_free(est_servable_model *m);

/* Restores every variable of vs (finalized) from the bundle at prefix: a TF checkpoint (each
 * variable must be there; extra ones, e.g. Adam slots or a pre-training head, are ignored) or
 * a HuggingFace model (est_hf_is_checkpoint; docs/hf.md). With int8_stored non-NULL, a
 * variable the bundle holds as int8 codes + scales (an int8 export, serve/int8_weights.h) is
 * left for est_int8_weights_restore and counted in *int8_stored. */
est_status est_servable_model_restore(est_var_store *vs, const char *prefix, int *int8_stored);

#endif
