/* BertConfig's JSON pieces that config.c owns and the readers above it (src/hf/hf_config.c:
 * Google's bert_config.json and HuggingFace's config.json) put together. root is a JSON
 * object. */
#ifndef EST_BERT_CONFIG_INTERNAL_H
#define EST_BERT_CONFIG_INTERNAL_H

#include <jansson.h>

#include "est/bert_encoder.h"
#include "est/status.h"

/* An absent key leaves *out as it is; a wrong type or an int out of range is an error
 * naming src and the key. */
est_status bert_json_get_int(json_t *root, const char *key, int *out, const char *src);
est_status bert_json_get_real(json_t *root, const char *key, double *out, const char *src);

/* The fields both files share (vocab_size, which must be there, hidden_size, ...,
 * initializer_range) over *c (est_bert_config_default's values, as a rule); not hidden_act,
 * whose names differ. Errors: root not an object, vocab_size missing, a wrong type. */
est_status bert_config_json_fields_read(est_bert_config *c, json_t *root, const char *src);
/* hidden_act in Google's spelling (est_activation_from_name: "gelu" is the tanh form),
 * when present and not null. */
est_status bert_config_json_activation_read(est_bert_config *c, json_t *root, const char *src);

/* est's own keys of its bert_config.json, written by est_bert_config_to_json_string only
 * when they differ from BERT's: layer_norm_eps, pad_token_id and "encoder_options" (the
 * est_encoder_options by name). Absent keys leave *c as it is. */
est_status bert_config_json_options_read(est_bert_config *c, json_t *root, const char *src);

/* BertConfig's fields (Google's bert_config.json, hidden_act in est's spelling) into o. */
void bert_config_json_fields(json_t *o, const est_bert_config *c);

#endif
