/* HuggingFace BertConfig (config.json) <-> est_bert_config (docs/hf.md §3), and the readers
 * of a config file of either kind (est_bert_config_from_json_file / _string, est/bert_encoder.h):
 * a config with "model_type" is HuggingFace's, any other Google's bert_config.json. The
 * fields that share Google's names (vocab_size, hidden_size, ...) are read by
 * src/bert/model/config.c; here what is HuggingFace's own: model_type (bert, roberta,
 * xlm-roberta, distilbert, electra: the encoder's options), hidden_act's spelling,
 * layer_norm_eps, pad_token_id, DistilBERT's own names, ELECTRA's embedding_size, and the
 * fields that ask for a model est does not run. */
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

/* The model_types est runs (HF's spellings) and their options over BERT's zeros. */
static const struct {
  const char *model_type;
  est_model_family family;
} FAMILIES[] = {
    {"bert", EST_FAMILY_BERT},
    {"roberta", EST_FAMILY_ROBERTA},
    {"xlm-roberta", EST_FAMILY_XLM_ROBERTA},
    {"distilbert", EST_FAMILY_DISTILBERT},
    {"electra", EST_FAMILY_ELECTRA},
    {"modernbert", EST_FAMILY_MODERNBERT},
};

est_model_family est_hf_family_of(const char *path) {
  char p[4096];
  if (est_is_directory(path)) {
    if (est_path_join(p, sizeof p, path, "config.json") != EST_OK) return EST_FAMILY_BERT;
  } else {
    snprintf(p, sizeof p, "%s", path);
    char *slash = strrchr(p, '/');
    if (slash) snprintf(slash + 1, sizeof p - (size_t)(slash + 1 - p), "config.json");
    else snprintf(p, sizeof p, "config.json");
  }
  json_t *root = est_file_exists(p) ? json_load_file(p, 0, NULL) : NULL;
  est_model_family family = EST_FAMILY_BERT;
  json_t *type = root ? json_object_get(root, "model_type") : NULL;
  for (size_t f = 0; json_is_string(type) && f < sizeof FAMILIES / sizeof *FAMILIES; f++)
    if (!strcmp(json_string_value(type), FAMILIES[f].model_type)) family = FAMILIES[f].family;
  json_decref(root);
  return family;
}

/* DistilBertConfig's own names for BertConfig's fields (its attribute_map), read over the
 * shared reader's defaults: a DistilBERT config.json has none of BERT's names. */
static est_status distilbert_fields(est_bert_config *c, json_t *root, const char *src) {
  int sinusoidal = 0;
  json_t *sin = json_object_get(root, "sinusoidal_pos_embds");
  if (sin && !json_is_null(sin)) {
    if (!json_is_boolean(sin))
      return est_error(EST_ERR_INVALID_ARGUMENT, "%s: field \"sinusoidal_pos_embds\" must be true or false", src);
    sinusoidal = json_is_true(sin);
  }
  /* DistilBertConfig's defaults where the file is silent */
  c->hidden_size = 768, c->num_hidden_layers = 6, c->num_attention_heads = 12, c->intermediate_size = 3072;
  c->hidden_dropout_prob = 0.1, c->attention_probs_dropout_prob = 0.1;
  est_status st;
  if ((st = bert_json_get_int(root, "dim", &c->hidden_size, src)) ||
      (st = bert_json_get_int(root, "n_layers", &c->num_hidden_layers, src)) ||
      (st = bert_json_get_int(root, "n_heads", &c->num_attention_heads, src)) ||
      (st = bert_json_get_int(root, "hidden_dim", &c->intermediate_size, src)) ||
      (st = bert_json_get_real(root, "dropout", &c->hidden_dropout_prob, src)) ||
      (st = bert_json_get_real(root, "attention_dropout", &c->attention_probs_dropout_prob, src)))
    return st;
  c->opt.token_types = EST_TYPES_NONE;
  c->type_vocab_size = 1; /* no table; requests may still carry segment id 0 */
  c->opt.positions = sinusoidal ? EST_POS_SINUSOIDAL : EST_POS_LEARNED;
  return EST_OK;
}

/* A boolean field: absent or null leaves *out. */
static est_status get_bool(json_t *root, const char *key, int *out, const char *src) {
  json_t *v = json_object_get(root, key);
  if (!v || json_is_null(v)) return EST_OK;
  if (!json_is_boolean(v)) return est_error(EST_ERR_INVALID_ARGUMENT, "%s: field \"%s\" must be true or false", src, key);
  *out = json_is_true(v);
  return EST_OK;
}

/* ModernBertConfig (transformers >= 4.48): its own names and defaults, and the encoder's
 * options it asks for: pre-LN, rotary positions (global_rope_theta, local_rope_theta),
 * GeGLU, the fused Wqkv, sliding windows (global_attn_every_n_layers, local_attention), no
 * positions table and no token types. Dropouts other than 0 are refused: transformers drops
 * out in places est's encoder does not (inside the MLP, on the attention output). */
static est_status modernbert_fields(est_bert_config *c, json_t *root, const char *src) {
  est_encoder_options *o = &c->opt;
  /* ModernBertConfig's defaults where the file is silent */
  c->hidden_size = 768, c->num_hidden_layers = 22, c->num_attention_heads = 12, c->intermediate_size = 1152;
  c->max_position_embeddings = 8192, c->initializer_range = 0.02, c->vocab_size = 50368;
  c->layer_norm_eps = 1e-5, c->pad_token_id = 50283;
  o->rotary_theta = 160000.0, o->rotary_theta_local = 10000.0;
  o->global_attn_every_n_layers = 3, o->local_attention = 128;
  int norm_bias = 0, attention_bias = 0, mlp_bias = 0;
  double theta_local = o->rotary_theta_local;
  est_status st;
  if ((st = bert_config_json_fields_read(c, root, src)) ||
      (st = bert_json_get_real(root, "norm_eps", &c->layer_norm_eps, src)) ||
      (st = bert_json_get_real(root, "global_rope_theta", &o->rotary_theta, src)) ||
      (!json_is_null(json_object_get(root, "local_rope_theta")) &&
       (st = bert_json_get_real(root, "local_rope_theta", &theta_local, src))) ||
      (st = bert_json_get_int(root, "global_attn_every_n_layers", &o->global_attn_every_n_layers, src)) ||
      (st = bert_json_get_int(root, "local_attention", &o->local_attention, src)) ||
      (st = get_bool(root, "norm_bias", &norm_bias, src)) || (st = get_bool(root, "attention_bias", &attention_bias, src)) ||
      (st = get_bool(root, "mlp_bias", &mlp_bias, src)))
    return st;
  /* local_rope_theta null: the local layers use global_rope_theta */
  o->rotary_theta_local = json_is_null(json_object_get(root, "local_rope_theta")) ? o->rotary_theta : theta_local;
  if (norm_bias != attention_bias || mlp_bias != attention_bias)
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: fields \"attention_bias\" (%s), \"mlp_bias\" (%s) and "
                     "\"norm_bias\" (%s) must be equal: est's encoder has biases everywhere or nowhere", src,
                     attention_bias ? "true" : "false", mlp_bias ? "true" : "false", norm_bias ? "true" : "false");
  o->no_bias = !attention_bias;
  static const char *const DROPOUTS[] = {"attention_dropout", "embedding_dropout", "mlp_dropout"};
  for (size_t i = 0; i < sizeof DROPOUTS / sizeof *DROPOUTS; i++) {
    double p = 0.0;
    if ((st = bert_json_get_real(root, DROPOUTS[i], &p, src))) return st;
    if (p != 0.0)
      return est_error(EST_ERR_INVALID_ARGUMENT, "%s: field \"%s\" = %g is not supported (est runs ModernBERT "
                       "without dropout in its encoder; it must be 0.0)", src, DROPOUTS[i], p);
  }
  c->hidden_dropout_prob = c->attention_probs_dropout_prob = 0.0;
  /* ModernBertForSequenceClassification's head */
  json_t *pooling = json_object_get(root, "classifier_pooling");
  if (pooling && !json_is_null(pooling)) {
    if (!json_is_string(pooling) ||
        (strcmp(json_string_value(pooling), "cls") && strcmp(json_string_value(pooling), "mean")))
      return est_error(EST_ERR_INVALID_ARGUMENT, "%s: field \"classifier_pooling\" must be \"cls\" or \"mean\"", src);
    o->classifier_mean_pooling = !strcmp(json_string_value(pooling), "mean");
  }
  o->classifier_act = EST_ACT_GELU_EXACT;
  json_t *cact = json_object_get(root, "classifier_activation");
  if (cact && !json_is_null(cact)) {
    size_t i = 0, n = sizeof ACTIVATIONS / sizeof *ACTIVATIONS;
    while (i < n && !(json_is_string(cact) && !strcmp(json_string_value(cact), ACTIVATIONS[i].hf))) i++;
    if (i == n)
      return est_error(EST_ERR_INVALID_ARGUMENT, "%s: field \"classifier_activation\" must be one of \"gelu\" (erf), "
                       "\"gelu_new\", \"gelu_pytorch_tanh\" (tanh), \"relu\", \"tanh\", \"linear\"", src);
    o->classifier_act = ACTIVATIONS[i].act;
  }
  if ((st = get_bool(root, "classifier_bias", &o->classifier_bias, src))) return st;
  c->type_vocab_size = 1; /* no table; requests may still carry segment id 0 */
  o->norm = EST_NORM_PRE;
  o->positions = EST_POS_ROTARY;
  o->ffn = EST_FFN_GLU;
  o->qkv_fused = 1;
  o->token_types = EST_TYPES_NONE;
  return EST_OK;
}

est_status est_hf_config_from_json(est_bert_config *cfg, const void *json, const char *src) {
  json_t *root = (json_t *)json;
  json_t *type = json_object_get(root, "model_type");
  size_t f = 0, nf = sizeof FAMILIES / sizeof *FAMILIES;
  while (f < nf && !(json_is_string(type) && !strcmp(json_string_value(type), FAMILIES[f].model_type))) f++;
  if (f == nf) {
    char *text = json_dumps(type, JSON_ENCODE_ANY | JSON_COMPACT);
    est_status st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: field \"model_type\" = %s is not supported (est runs "
                              "\"bert\", \"roberta\", \"xlm-roberta\", \"distilbert\", \"electra\" and "
                              "\"modernbert\")", src,
                              text ? text : "?");
    free(text);
    return st;
  }
  const est_model_family family = FAMILIES[f].family;
  cfg->opt.family = family;
  /* their embeddings are nn.Embedding(padding_idx=pad_token_id); BERT's keep Google's TF
   * training (every row), as est always ran them */
  cfg->opt.pad_rows_frozen = family != EST_FAMILY_BERT;
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
  est_status st;
  if (family == EST_FAMILY_DISTILBERT && (st = distilbert_fields(cfg, root, src))) return st;
  if (family == EST_FAMILY_MODERNBERT && (st = modernbert_fields(cfg, root, src))) return st;
  /* DistilBERT spells it "activation", ModernBERT "hidden_activation" */
  const char *act_key = family == EST_FAMILY_DISTILBERT    ? "activation"
                        : family == EST_FAMILY_MODERNBERT ? "hidden_activation"
                                                          : "hidden_act";
  json_t *act = json_object_get(root, act_key);
  if (act && !json_is_null(act)) {
    size_t i = 0, n = sizeof ACTIVATIONS / sizeof *ACTIVATIONS;
    while (i < n && !(json_is_string(act) && !strcmp(json_string_value(act), ACTIVATIONS[i].hf))) i++;
    if (i == n)
      return est_error(EST_ERR_INVALID_ARGUMENT,
                       "%s: field \"%s\" must be one of \"gelu\" (erf), \"gelu_new\", \"gelu_pytorch_tanh\" "
                       "(tanh), \"relu\", \"tanh\", \"linear\"", src, act_key);
    cfg->hidden_act = ACTIVATIONS[i].act;
  } else {
    cfg->hidden_act = EST_ACT_GELU_EXACT; /* BertConfig's default "gelu" */
  }
  /* DistilBERT's LayerNorms are nn.LayerNorm(eps=1e-12) whatever its config says; ModernBERT's
   * is norm_eps (above) */
  if (family != EST_FAMILY_DISTILBERT && family != EST_FAMILY_MODERNBERT &&
      (st = bert_json_get_real(root, "layer_norm_eps", &cfg->layer_norm_eps, src)))
    return st;
  if ((st = bert_json_get_int(root, "pad_token_id", &cfg->pad_token_id, src))) return st;
  if (family == EST_FAMILY_ROBERTA || family == EST_FAMILY_XLM_ROBERTA) {
    /* RobertaEmbeddings: positions after padding_idx = pad_token_id; one token type */
    cfg->opt.position_ids = EST_POS_IDS_AFTER_PADDING;
    if (cfg->type_vocab_size == 1) cfg->opt.token_types = EST_TYPES_ZERO;
  }
  /* the *ForSequenceClassification head's dropout: classifier_dropout when set, else
   * hidden_dropout_prob; DistilBERT's seq_classif_dropout */
  cfg->opt.classifier_dropout = family == EST_FAMILY_DISTILBERT ? 0.2 : cfg->hidden_dropout_prob;
  const char *cd = family == EST_FAMILY_DISTILBERT ? "seq_classif_dropout" : "classifier_dropout";
  if (!json_is_null(json_object_get(root, cd)) &&
      (st = bert_json_get_real(root, cd, &cfg->opt.classifier_dropout, src)))
    return st;
  if (cfg->opt.classifier_dropout < 0 || cfg->opt.classifier_dropout >= 1)
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: the classifier dropout must be in [0, 1), got %g", src,
                     cfg->opt.classifier_dropout);
  if (family == EST_FAMILY_ELECTRA) {
    int e = cfg->hidden_size;
    if ((st = bert_json_get_int(root, "embedding_size", &e, src))) return st;
    if (e <= 0)
      return est_error(EST_ERR_INVALID_ARGUMENT, "%s: field \"embedding_size\" must be positive, got %d", src, e);
    if (e != cfg->hidden_size) cfg->opt.embedding_size = e; /* ElectraModel's embeddings_project */
  }
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
  } else if ((st = bert_config_json_activation_read(&c, root, src)) ||
             (st = bert_config_json_options_read(&c, root, src))) {
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

/* DistilBertConfig's own names for the fields its reader above takes. */
static void distilbert_config_json(json_t *o, const est_bert_config *c) {
  json_object_set_new(o, "activation", json_string(hf_activation_name(c->hidden_act)));
  json_object_set_new(o, "attention_dropout", json_real(c->attention_probs_dropout_prob));
  json_object_set_new(o, "dim", json_integer(c->hidden_size));
  json_object_set_new(o, "dropout", json_real(c->hidden_dropout_prob));
  json_object_set_new(o, "hidden_dim", json_integer(c->intermediate_size));
  json_object_set_new(o, "initializer_range", json_real(c->initializer_range));
  json_object_set_new(o, "max_position_embeddings", json_integer(c->max_position_embeddings));
  json_object_set_new(o, "n_heads", json_integer(c->num_attention_heads));
  json_object_set_new(o, "n_layers", json_integer(c->num_hidden_layers));
  json_object_set_new(o, "pad_token_id", json_integer(c->pad_token_id));
  json_object_set_new(o, "seq_classif_dropout", json_real(c->opt.classifier_dropout));
  json_object_set_new(o, "sinusoidal_pos_embds", json_boolean(c->opt.positions == EST_POS_SINUSOIDAL));
  json_object_set_new(o, "vocab_size", json_integer(c->vocab_size));
}

/* ModernBertConfig's names for the fields modernbert_fields reads. */
static void modernbert_config_json(json_t *o, const est_bert_config *c) {
  const est_encoder_options *x = &c->opt;
  json_object_set_new(o, "vocab_size", json_integer(c->vocab_size));
  json_object_set_new(o, "hidden_size", json_integer(c->hidden_size));
  json_object_set_new(o, "intermediate_size", json_integer(c->intermediate_size));
  json_object_set_new(o, "num_hidden_layers", json_integer(c->num_hidden_layers));
  json_object_set_new(o, "num_attention_heads", json_integer(c->num_attention_heads));
  json_object_set_new(o, "hidden_activation", json_string(hf_activation_name(c->hidden_act)));
  json_object_set_new(o, "max_position_embeddings", json_integer(c->max_position_embeddings));
  json_object_set_new(o, "initializer_range", json_real(c->initializer_range));
  json_object_set_new(o, "norm_eps", json_real(c->layer_norm_eps));
  json_object_set_new(o, "norm_bias", json_boolean(!x->no_bias));
  json_object_set_new(o, "attention_bias", json_boolean(!x->no_bias));
  json_object_set_new(o, "mlp_bias", json_boolean(!x->no_bias));
  json_object_set_new(o, "pad_token_id", json_integer(c->pad_token_id));
  json_object_set_new(o, "global_rope_theta", json_real(x->rotary_theta));
  json_object_set_new(o, "local_rope_theta", json_real(x->rotary_theta_local > 0 ? x->rotary_theta_local
                                                                                 : x->rotary_theta));
  json_object_set_new(o, "global_attn_every_n_layers", json_integer(x->global_attn_every_n_layers));
  json_object_set_new(o, "local_attention", json_integer(x->local_attention));
  json_object_set_new(o, "attention_dropout", json_real(0.0));
  json_object_set_new(o, "embedding_dropout", json_real(0.0));
  json_object_set_new(o, "mlp_dropout", json_real(0.0));
  json_object_set_new(o, "classifier_pooling", json_string(x->classifier_mean_pooling ? "mean" : "cls"));
  json_object_set_new(o, "classifier_activation", json_string(hf_activation_name(x->classifier_act)));
  json_object_set_new(o, "classifier_bias", json_boolean(x->classifier_bias));
  json_object_set_new(o, "classifier_dropout", json_real(x->classifier_dropout));
}

char *est_hf_config_to_json_string(const est_bert_config *c, const char *architecture, const char *const *labels,
                                   int num_labels) {
  json_t *o = json_object();
  if (architecture) {
    json_t *a = json_array();
    json_array_append_new(a, json_string(architecture));
    json_object_set_new(o, "architectures", a);
  }
  const est_model_family family = c->opt.family;
  if (family == EST_FAMILY_DISTILBERT) {
    distilbert_config_json(o, c);
  } else if (family == EST_FAMILY_MODERNBERT) {
    modernbert_config_json(o, c);
  } else {
    bert_config_json_fields(o, c); /* then HF's spelling of hidden_act and its own fields */
    json_object_set_new(o, "hidden_act", json_string(hf_activation_name(c->hidden_act)));
    json_object_set_new(o, "layer_norm_eps", json_real(c->layer_norm_eps));
    json_object_set_new(o, "pad_token_id", json_integer(c->pad_token_id));
    json_object_set_new(o, "position_embedding_type", json_string("absolute"));
  }
  json_object_set_new(o, "model_type", json_string(est_model_family_name(family)));
  if (family == EST_FAMILY_ROBERTA || family == EST_FAMILY_XLM_ROBERTA || family == EST_FAMILY_ELECTRA)
    json_object_set_new(o, "classifier_dropout", json_real(c->opt.classifier_dropout));
  if (family == EST_FAMILY_ELECTRA)
    json_object_set_new(o, "embedding_size",
                        json_integer(c->opt.embedding_size ? c->opt.embedding_size : c->hidden_size));
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
