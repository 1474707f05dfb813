/* Internal: the model a servable runs, built from est_model.json by the head it names
 * (servable_model.c, est/served_head.h). Export declares the same variables to copy them out
 * of a checkpoint, so a servable always finds exactly the weights its head declares. */
#ifndef EST_SERVE_SERVABLE_MODEL_H
#define EST_SERVE_SERVABLE_MODEL_H

#include "est/bert_head.h"
#include "est/serving.h"

typedef struct est_servable_model {
  const est_served_head *served;      /* the head est_model.json names */
  void *head;                         /* its layer (served->type) */
  est_bert_encoder *enc;
  int output_width;                   /* floats per example of served->outputs (each gets half of two) */
  int32_t *row_ids;                   /* [max_batch] 0, 1, ...: the "unique_ids" feature */
  union {
    unsigned char bytes[EST_SERVED_PARAMS_SIZE];
    double align_double;
    void *align_pointer;
  } params;                           /* the layer's parameters, from the metadata (served->params) */
} est_servable_model;

/* Declares the encoder's and meta's head's variables in vs (not finalized). */
est_status est_servable_model_create(est_servable_model *m, const est_model_meta *meta, est_var_store *vs);
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
