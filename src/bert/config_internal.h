/* The typed field readers config.c and hf_config.c share (root is a JSON object). */
#ifndef EST_BERT_CONFIG_INTERNAL_H
#define EST_BERT_CONFIG_INTERNAL_H

#include <jansson.h>

#include "est/status.h"

/* An absent key leaves *out as it is; a wrong type or an int out of range is an error
 * naming src and the key. */
est_status bert_json_get_int(json_t *root, const char *key, int *out, const char *src);
est_status bert_json_get_real(json_t *root, const char *key, double *out, const char *src);

#endif
