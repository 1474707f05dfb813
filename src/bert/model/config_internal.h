/* The typed field readers config.c and hf_config.c share (root is a JSON object). */
#ifndef EST_BERT_CONFIG_INTERNAL_H
#define EST_BERT_CONFIG_INTERNAL_H

#include <jansson.h>

#include "est/bert_encoder.h"
#include "est/status.h"

/* An absent key leaves *out as it is; a wrong type or an int out of range is an error
 * naming src and the key. */
est_status bert_json_get_int(json_t *root, const char *key, int *out, const char *src);
est_status bert_json_get_real(json_t *root, const char *key, double *out, const char *src);

/* BertConfig's fields (Google's bert_config.json, hidden_act in est's spelling) into o. */
void bert_config_json_fields(json_t *o, const est_bert_config *c);

#endif
