/* HuggingFace BertConfig (config.json) <-> est_bert_config (docs/hf.md §3), and the readers
 * of a config file of either kind (est_bert_config_from_json_file / _string, est/bert_encoder.h):
 * a config with "model_type" is HuggingFace's, any other Google's bert_config.json. The
 * fields that share Google's names (vocab_size, hidden_size, ...) are read by
 * src/bert/model/config.c; here what is HuggingFace's own: hidden_act's spelling,
 * layer_norm_eps, pad_token_id, and the fields that ask for a model est does not run. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/file.h"
#include "est/hf_model.h"
#include "bert/model/config_internal.h"
#include "core/json_error.h"

/* transformers' ACT2FN names -> est's activations. HF's "gelu" is the erf form, unlike
 * Google's modeling.py where "gelu" is the tanh approximation. */
static const struct {
  const char *hf;
  est_activation act;
} ACTIVATIONS[] = {
    {"gelu", EST_ACT_GELU_EXACT},         {"gelu_new", EST_ACT_GELU},   {"gelu_pytorch_tanh", EST_ACT_GELU},
    {"relu", EST_ACT_RELU},               {"tanh", EST_ACT_TANH},       {"linear", EST_ACT_LINEAR},
};

static const char *hf_activation_name(est_activation act) {
  for (size_t i = 0; i < sizeof ACTIVATIONS / sizeof *ACTIVATIONS; i++)
    if (ACTIVATIONS[i].act == act) return ACTIVATIONS[i].hf;
  return "gelu_new";
}

/* A field whose value est cannot honour: name, the value est runs (JSON), and why. */
static const struct {
  const char *field, *supported, *why;
} UNSUPPORTED[] = {
    {"position_embedding_type", "\"absolute\"", "est runs absolute position embeddings only"},
    {"is_decoder", "false", "est runs BERT as an encoder"},
    {"add_cross_attention", "false", "est's encoder has no cross-attention"},
    {"chunk_size_feed_forward", "0", "est does not chunk the feed-forward layer"},
    {"tie_word_embeddings", "true", "est's masked-LM output layer is the word embeddings"},
    {"pruned_heads", "{}", "est's layers all have num_attention_heads heads"},
};

est_status est_hf_config_from_json(est_bert_config *cfg, const void *json, const char *src) {
  json_t *root = (json_t *)json;
  json_t *type = json_object_get(root, "model_type");
  if (!json_is_string(type) || strcmp(json_string_value(type), "bert")) {
    char *text = json_dumps(type, JSON_ENCODE_ANY | JSON_COMPACT);
    est_status st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: field \"model_type\" = %s is not supported (est runs "
                              "BERT models; it must be \"bert\")", src, text ? text : "?");
    free(text);
    return st;
  }
  for (size_t i = 0; i < sizeof UNSUPPORTED / sizeof *UNSUPPORTED; i++) {
    json_t *v = json_object_get(root, UNSUPPORTED[i].field);
    if (!v || json_is_null(v)) continue;
    json_t *ok = json_loads(UNSUPPORTED[i].supported, JSON_DECODE_ANY, NULL);
    int same = json_equal(v, ok);
    json_decref(ok);
    if (!same) {
      char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
      est_status st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: field \"%s\" = %s is not supported (%s; it must be %s)",
                                src, UNSUPPORTED[i].field, text ? text : "?", UNSUPPORTED[i].why,
                                UNSUPPORTED[i].supported);
      free(text);
      return st;
    }
  }
  json_t *act = json_object_get(root, "hidden_act");
  if (act && !json_is_null(act)) {
    size_t i = 0, n = sizeof ACTIVATIONS / sizeof *ACTIVATIONS;
    while (i < n && !(json_is_string(act) && !strcmp(json_string_value(act), ACTIVATIONS[i].hf))) i++;
    if (i == n)
      return est_error(EST_ERR_INVALID_ARGUMENT,
                       "%s: field \"hidden_act\" must be one of \"gelu\" (erf), \"gelu_new\", \"gelu_pytorch_tanh\" "
                       "(tanh), \"relu\", \"tanh\", \"linear\"", src);
    cfg->hidden_act = ACTIVATIONS[i].act;
  } else {
    cfg->hidden_act = EST_ACT_GELU_EXACT; /* BertConfig's default "gelu" */
  }
  est_status st;
  if ((st = bert_json_get_real(root, "layer_norm_eps", &cfg->layer_norm_eps, src)) ||
      (st = bert_json_get_int(root, "pad_token_id", &cfg->pad_token_id, src)))
    return st;
  /* est's layer norm kernels run one eps; BERT models all use 1e-12 */
  if (fabs(cfg->layer_norm_eps - EST_LAYERNORM_EPS) > 1e-3 * EST_LAYERNORM_EPS)
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: field \"layer_norm_eps\" = %g is not supported (est's layer "
                     "norm uses %g)", src, cfg->layer_norm_eps, (double)EST_LAYERNORM_EPS);
  return EST_OK;
}

/* Either file's JSON: the shared fields, then hidden_act (and HF's own fields) as the
 * file's kind spells them, then the checks; *cfg changes only on success. */
static est_status config_from_json(est_bert_config *cfg, json_t *root, const char *src) {
  est_bert_config c = est_bert_config_default();
  est_status st;
  if ((st = bert_config_json_fields_read(&c, root, src))) return st;
  if (json_object_get(root, "model_type")) {
    /* HuggingFace's config.json: hidden_act "gelu" is another function there */
    if ((st = est_hf_config_from_json(&c, root, src))) return st;
  } else if ((st = bert_config_json_activation_read(&c, root, src))) {
    return st;
  }
  if ((st = est_bert_config_validate(&c, src))) return st;
  *cfg = c;
  return EST_OK;
}

est_status est_bert_config_from_json_file(est_bert_config *cfg, const char *path) {
  char in_dir[4096];
  if (est_is_directory(path)) { /* a HuggingFace model directory */
    if (est_path_join(in_dir, sizeof in_dir, path, "config.json") != EST_OK) return est_error_code();
    path = in_dir;
  }
  json_error_t err;
  json_t *root = json_load_file(path, 0, &err);
  if (!root) return est_error(EST_ERR_INVALID_ARGUMENT, "%s:%d: %s", path, err.line, est_json_error_text(&err));
  est_status st = config_from_json(cfg, root, path);
  json_decref(root);
  return st;
}

est_status est_bert_config_from_json_string(est_bert_config *cfg, const char *text, const char *source) {
  const char *src = source ? source : "<string>";
  json_error_t err;
  json_t *root = json_loads(text, 0, &err);
  if (!root) return est_error(EST_ERR_INVALID_ARGUMENT, "%s:%d: %s", src, err.line, est_json_error_text(&err));
  est_status st = config_from_json(cfg, root, src);
  json_decref(root);
  return st;
}

char *est_hf_config_to_json_string(const est_bert_config *c, const char *architecture, const char *const *labels,
                                   int num_labels) {
  json_t *o = json_object();
  if (architecture) {
    json_t *a = json_array();
    json_array_append_new(a, json_string(architecture));
    json_object_set_new(o, "architectures", a);
  }
  bert_config_json_fields(o, c); /* then HF's spelling of hidden_act and its own fields */
  json_object_set_new(o, "hidden_act", json_string(hf_activation_name(c->hidden_act)));
  json_object_set_new(o, "layer_norm_eps", json_real(c->layer_norm_eps));
  json_object_set_new(o, "model_type", json_string("bert"));
  json_object_set_new(o, "pad_token_id", json_integer(c->pad_token_id));
  json_object_set_new(o, "position_embedding_type", json_string("absolute"));
  if (labels && num_labels > 0) {
    json_t *id2label = json_object(), *label2id = json_object();
    for (int i = 0; i < num_labels; i++) {
      char key[32];
      snprintf(key, sizeof key, "%d", i);
      json_object_set_new(id2label, key, json_string(labels[i]));
      json_object_set_new(label2id, labels[i], json_integer(i));
    }
    json_object_set_new(o, "id2label", id2label);
    json_object_set_new(o, "label2id", label2id);
  }
  char *text = json_dumps(o, JSON_SORT_KEYS | JSON_INDENT(2) | JSON_REAL_PRECISION(15));
  json_decref(o);
  return text;
}
