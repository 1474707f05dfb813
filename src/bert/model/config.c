/* BertConfig (modeling.BertConfig): its defaults, its checks, Google's bert_config.json
 * fields read and written via jansson. Which file a config comes from, Google's
 * bert_config.json or HuggingFace's config.json, is decided above this layer
 * (src/hf/hf_config.c, est_bert_config_from_json_file), so the encoder's config knows
 * nothing of HuggingFace. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "est/bert_classifier.h"
#include "bert/model/config_internal.h"

est_bert_config est_bert_config_default(void) {
  est_bert_config c;
  memset(&c, 0, sizeof c);
  c.vocab_size = 0;
  c.hidden_size = 768;
  c.num_hidden_layers = 12;
  c.num_attention_heads = 12;
  c.intermediate_size = 3072;
  c.hidden_act = EST_ACT_GELU;
  c.hidden_dropout_prob = 0.1;
  c.attention_probs_dropout_prob = 0.1;
  c.max_position_embeddings = 512;
  c.type_vocab_size = 16;
  c.initializer_range = 0.02;
  c.layer_norm_eps = EST_LAYERNORM_EPS;
  return c;
}

est_status bert_json_get_int(json_t *root, const char *key, int *out, const char *src) {
  json_t *v = json_object_get(root, key);
  if (!v) return EST_OK;
  /* Python would carry 768.0 along as a float and fail later in a reshape; be strict. */
  if (!json_is_integer(v))
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: field \"%s\" must be an integer", src, key);
  json_int_t x = json_integer_value(v);
  if (x < -2147483647 || x > 2147483647)
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: field \"%s\" = %lld is out of range", src, key, (long long)x);
  *out = (int)x;
  return EST_OK;
}

est_status bert_json_get_real(json_t *root, const char *key, double *out, const char *src) {
  json_t *v = json_object_get(root, key);
  if (!v) return EST_OK;
  if (!json_is_number(v))
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: field \"%s\" must be a number", src, key);
  *out = json_number_value(v);
  return EST_OK;
}

est_status bert_config_json_fields_read(est_bert_config *c, json_t *root, const char *src) {
  if (!json_is_object(root)) return est_error(EST_ERR_INVALID_ARGUMENT, "%s: expected a JSON object", src);
  est_status st;
  if (!json_object_get(root, "vocab_size") || json_is_null(json_object_get(root, "vocab_size")))
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: field \"vocab_size\" is missing (it has no default)", src);
  if ((st = bert_json_get_int(root, "vocab_size", &c->vocab_size, src)) ||
      (st = bert_json_get_int(root, "hidden_size", &c->hidden_size, src)) ||
      (st = bert_json_get_int(root, "num_hidden_layers", &c->num_hidden_layers, src)) ||
      (st = bert_json_get_int(root, "num_attention_heads", &c->num_attention_heads, src)) ||
      (st = bert_json_get_int(root, "intermediate_size", &c->intermediate_size, src)) ||
      (st = bert_json_get_int(root, "max_position_embeddings", &c->max_position_embeddings, src)) ||
      (st = bert_json_get_int(root, "type_vocab_size", &c->type_vocab_size, src)) ||
      (st = bert_json_get_real(root, "hidden_dropout_prob", &c->hidden_dropout_prob, src)) ||
      (st = bert_json_get_real(root, "attention_probs_dropout_prob", &c->attention_probs_dropout_prob, src)) ||
      (st = bert_json_get_real(root, "initializer_range", &c->initializer_range, src)))
    return st;
  return EST_OK;
}

est_status bert_config_json_activation_read(est_bert_config *c, json_t *root, const char *src) {
  json_t *act = json_object_get(root, "hidden_act");
  if (!act || json_is_null(act)) return EST_OK;
  if (!json_is_string(act))
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: field \"hidden_act\" must be a string", src);
  if (est_activation_from_name(json_string_value(act), &c->hidden_act) != EST_OK)
    return est_error_prefix("%s: field \"hidden_act\": ", src);
  return EST_OK;
}

est_status est_bert_config_validate(const est_bert_config *c, const char *source) {
  const char *src = source ? source : "BertConfig";
#define POSITIVE(field)                                                                              \
  if (c->field <= 0)                                                                                 \
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: field \"" #field "\" must be positive, got %d", src, \
                     c->field);
  POSITIVE(vocab_size)
  POSITIVE(hidden_size)
  POSITIVE(num_hidden_layers)
  POSITIVE(num_attention_heads)
  POSITIVE(intermediate_size)
  POSITIVE(max_position_embeddings)
  POSITIVE(type_vocab_size)
#undef POSITIVE
  if (c->hidden_size % c->num_attention_heads != 0)
    return est_error(EST_ERR_INVALID_ARGUMENT,
                     "%s: The hidden size (%d) is not a multiple of the number of attention heads (%d)", src,
                     c->hidden_size, c->num_attention_heads);
  if (!(c->hidden_dropout_prob >= 0.0 && c->hidden_dropout_prob < 1.0))
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: field \"hidden_dropout_prob\" = %g is outside [0, 1)", src,
                     c->hidden_dropout_prob);
  if (!(c->attention_probs_dropout_prob >= 0.0 && c->attention_probs_dropout_prob < 1.0))
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: field \"attention_probs_dropout_prob\" = %g is outside [0, 1)",
                     src, c->attention_probs_dropout_prob);
  if (!(c->initializer_range >= 0.0))
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: field \"initializer_range\" = %g is negative", src,
                     c->initializer_range);
  return EST_OK;
}

void bert_config_json_fields(json_t *o, const est_bert_config *c) {
  json_object_set_new(o, "attention_probs_dropout_prob", json_real(c->attention_probs_dropout_prob));
  json_object_set_new(o, "hidden_act", json_string(est_activation_name(c->hidden_act)));
  json_object_set_new(o, "hidden_dropout_prob", json_real(c->hidden_dropout_prob));
  json_object_set_new(o, "hidden_size", json_integer(c->hidden_size));
  json_object_set_new(o, "initializer_range", json_real(c->initializer_range));
  json_object_set_new(o, "intermediate_size", json_integer(c->intermediate_size));
  json_object_set_new(o, "max_position_embeddings", json_integer(c->max_position_embeddings));
  json_object_set_new(o, "num_attention_heads", json_integer(c->num_attention_heads));
  json_object_set_new(o, "num_hidden_layers", json_integer(c->num_hidden_layers));
  json_object_set_new(o, "type_vocab_size", json_integer(c->type_vocab_size));
  json_object_set_new(o, "vocab_size", json_integer(c->vocab_size));
}

char *est_bert_config_to_json_string(const est_bert_config *c) {
  json_t *o = json_object();
  bert_config_json_fields(o, c);
  char *text = json_dumps(o, JSON_SORT_KEYS | JSON_INDENT(2) | JSON_REAL_PRECISION(15));
  json_decref(o);
  if (!text) return NULL;
  size_t n = strlen(text);
  char *out = malloc(n + 2);
  if (out) {
    memcpy(out, text, n);
    out[n] = '\n';
    out[n + 1] = 0;
  }
  free(text);
  return out;
}

/* optimization.py's AdamWeightDecayOptimizer(exclude_from_weight_decay=...) in
 * create_optimizer: fixed by BERT, not by bert_config.json. */
const char *const est_bert_exclude_from_weight_decay[EST_BERT_NUM_EXCLUDE_FROM_WEIGHT_DECAY] = {"LayerNorm",
                                                                                               "layer_norm", "bias"};
