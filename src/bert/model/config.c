/* BertConfig (modeling.BertConfig): its defaults, its checks, Google's bert_config.json
 * fields read and written via jansson. Which file a config comes from, Google's
 * bert_config.json or HuggingFace's config.json, is decided above this layer
 * (src/hf/hf_config.c, est_bert_config_from_json_file), so the encoder's config knows
 * nothing of HuggingFace. */
#include <jansson.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

#include "est/bert_classifier.h"
#include "bert/model/config_internal.h"

/* modeling.BertConfig's defaults: BERT-Base's shape, GELU, dropout 0.1, 512 positions and
 * 16 token types; the encoder options all zero (BERT's, est/bert_encoder.h). */
est_bert_config est_bert_config_default(void) {
  est_bert_config c;
  memset(&c, 0, sizeof c);
  c.hidden_size = 768, c.num_hidden_layers = 12, c.num_attention_heads = 12, c.intermediate_size = 3072;
  c.hidden_act = EST_ACT_GELU;
  c.hidden_dropout_prob = c.attention_probs_dropout_prob = 0.1;
  c.max_position_embeddings = 512, c.type_vocab_size = 16;
  c.initializer_range = 0.02, c.layer_norm_eps = EST_LAYERNORM_EPS;
  return c;
}

const char *est_model_family_name(est_model_family family) {
  switch (family) {
    case EST_FAMILY_BERT: return "bert";
    case EST_FAMILY_ROBERTA: return "roberta";
    case EST_FAMILY_XLM_ROBERTA: return "xlm-roberta";
    case EST_FAMILY_DISTILBERT: return "distilbert";
    case EST_FAMILY_ELECTRA: return "electra";
    case EST_FAMILY_MODERNBERT: return "modernbert";
  }
  return "?";
}

/* The spellings of the options in est's bert_config.json ("encoder_options", written only
 * when an option differs from BERT's, so a BERT's file stays Google's). */
static const char *const FAMILIES[] = {"bert", "roberta", "xlm-roberta", "distilbert", "electra", "modernbert"};
static const char *const POSITIONS[] = {"learned", "sinusoidal", "rotary", "none"};
static const char *const POSITION_IDS[] = {"index", "after_padding"};
static const char *const TOKEN_TYPES[] = {"segments", "zero", "none"};
static const char *const NORMS[] = {"post", "pre"};
static const char *const FFNS[] = {"dense", "glu"};
#define COUNT(a) (int)(sizeof a / sizeof *a)

static int options_default(const est_encoder_options *o) {
  est_encoder_options zero;
  memset(&zero, 0, sizeof zero);
  return !memcmp(o, &zero, sizeof zero);
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

/* The numbers of a config file, one table for reading and writing each: the key, whether
 * it is a real (else an int), and where it sits. BertConfig's in the order they are read (the
 * first bad one is the one reported); the files are written with sorted keys. */
typedef struct config_field {
  const char *key;
  int real;
  size_t offset;
} config_field;
#define INT_FIELD(type, name) {#name, 0, offsetof(type, name)}
#define REAL_FIELD(type, name) {#name, 1, offsetof(type, name)}
static const config_field BERT_FIELDS[] = {
    INT_FIELD(est_bert_config, vocab_size),           INT_FIELD(est_bert_config, hidden_size),
    INT_FIELD(est_bert_config, num_hidden_layers),    INT_FIELD(est_bert_config, num_attention_heads),
    INT_FIELD(est_bert_config, intermediate_size),    INT_FIELD(est_bert_config, max_position_embeddings),
    INT_FIELD(est_bert_config, type_vocab_size),      REAL_FIELD(est_bert_config, hidden_dropout_prob),
    REAL_FIELD(est_bert_config, attention_probs_dropout_prob), REAL_FIELD(est_bert_config, initializer_range),
};
/* encoder_options' numbers (its enums are read by name, get_enum below) */
static const config_field OPTION_FIELDS[] = {
    INT_FIELD(est_encoder_options, embedding_size),   INT_FIELD(est_encoder_options, no_bias),
    INT_FIELD(est_encoder_options, qkv_fused),        INT_FIELD(est_encoder_options, classifier_mean_pooling),
    INT_FIELD(est_encoder_options, classifier_bias),
    INT_FIELD(est_encoder_options, pad_rows_frozen),  INT_FIELD(est_encoder_options, global_attn_every_n_layers),
    INT_FIELD(est_encoder_options, local_attention),  REAL_FIELD(est_encoder_options, rotary_theta),
    REAL_FIELD(est_encoder_options, rotary_theta_local), REAL_FIELD(est_encoder_options, classifier_dropout),
};

static est_status read_fields(void *base, const config_field *f, size_t n, json_t *o, const char *src) {
  for (size_t i = 0; i < n; i++) {
    char *at = (char *)base + f[i].offset;
    est_status st = f[i].real ? bert_json_get_real(o, f[i].key, (double *)at, src)
                              : bert_json_get_int(o, f[i].key, (int *)at, src);
    if (st != EST_OK) return st;
  }
  return EST_OK;
}

static void write_fields(json_t *o, const void *base, const config_field *f, size_t n) {
  for (size_t i = 0; i < n; i++) {
    const char *at = (const char *)base + f[i].offset;
    json_object_set_new(o, f[i].key, f[i].real ? json_real(*(const double *)at) : json_integer(*(const int *)at));
  }
}

est_status bert_config_json_fields_read(est_bert_config *c, json_t *root, const char *src) {
  if (!json_is_object(root)) return est_error(EST_ERR_INVALID_ARGUMENT, "%s: expected a JSON object", src);
  if (!json_object_get(root, "vocab_size") || json_is_null(json_object_get(root, "vocab_size")))
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: field \"vocab_size\" is missing (it has no default)", src);
  return read_fields(c, BERT_FIELDS, COUNT(BERT_FIELDS), root, src);
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

/* One enum option by name: absent leaves *out; an unknown name is an error listing the names. */
static est_status get_enum(json_t *o, const char *key, const char *const *names, int n, int *out, const char *src) {
  json_t *v = json_object_get(o, key);
  if (!v) return EST_OK;
  for (int i = 0; i < n; i++)
    if (json_is_string(v) && !strcmp(json_string_value(v), names[i])) {
      *out = i;
      return EST_OK;
    }
  char list[256] = "";
  for (int i = 0; i < n; i++)
    snprintf(list + strlen(list), sizeof list - strlen(list), "%s\"%s\"", i ? ", " : "", names[i]);
  return est_error(EST_ERR_INVALID_ARGUMENT, "%s: field \"encoder_options.%s\" must be one of %s", src, key, list);
}

est_status bert_config_json_options_read(est_bert_config *c, json_t *root, const char *src) {
  est_status st;
  if ((st = bert_json_get_real(root, "layer_norm_eps", &c->layer_norm_eps, src)) ||
      (st = bert_json_get_int(root, "pad_token_id", &c->pad_token_id, src)))
    return st;
  json_t *o = json_object_get(root, "encoder_options");
  if (!o || json_is_null(o)) return EST_OK;
  if (!json_is_object(o))
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: field \"encoder_options\" must be an object", src);
  est_encoder_options *x = &c->opt;
  int family = (int)x->family, positions = (int)x->positions, ids = (int)x->position_ids;
  int types = (int)x->token_types, norm = (int)x->norm, ffn = (int)x->ffn;
  if ((st = get_enum(o, "family", FAMILIES, COUNT(FAMILIES), &family, src)) ||
      (st = get_enum(o, "positions", POSITIONS, COUNT(POSITIONS), &positions, src)) ||
      (st = get_enum(o, "position_ids", POSITION_IDS, COUNT(POSITION_IDS), &ids, src)) ||
      (st = get_enum(o, "token_types", TOKEN_TYPES, COUNT(TOKEN_TYPES), &types, src)) ||
      (st = get_enum(o, "norm", NORMS, COUNT(NORMS), &norm, src)) ||
      (st = get_enum(o, "ffn", FFNS, COUNT(FFNS), &ffn, src)) ||
      (st = read_fields(x, OPTION_FIELDS, COUNT(OPTION_FIELDS), o, src)))
    return st;
  json_t *act = json_object_get(o, "classifier_act");
  if (act && (!json_is_string(act) || est_activation_from_name(json_string_value(act), &x->classifier_act)))
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: field \"encoder_options.classifier_act\" must be an "
                     "activation's name (\"gelu_exact\", \"gelu\", \"relu\", \"tanh\", \"linear\")", src);
  x->family = (est_model_family)family;
  x->positions = (est_position_encoding)positions;
  x->position_ids = (est_position_ids)ids;
  x->token_types = (est_token_types)types;
  x->norm = (est_norm_position)norm;
  x->ffn = (est_ffn_kind)ffn;
  return EST_OK;
}

/* The options that differ from BERT's, and layer_norm_eps / pad_token_id with them. */
static void options_json(json_t *root, const est_bert_config *c) {
  if ((float)c->layer_norm_eps != EST_LAYERNORM_EPS) json_object_set_new(root, "layer_norm_eps", json_real(c->layer_norm_eps));
  if (options_default(&c->opt)) return;
  const est_encoder_options *x = &c->opt;
  json_t *o = json_object();
  json_object_set_new(o, "family", json_string(FAMILIES[x->family]));
  json_object_set_new(o, "positions", json_string(POSITIONS[x->positions]));
  json_object_set_new(o, "position_ids", json_string(POSITION_IDS[x->position_ids]));
  json_object_set_new(o, "token_types", json_string(TOKEN_TYPES[x->token_types]));
  json_object_set_new(o, "norm", json_string(NORMS[x->norm]));
  json_object_set_new(o, "ffn", json_string(FFNS[x->ffn]));
  write_fields(o, x, OPTION_FIELDS, COUNT(OPTION_FIELDS));
  json_object_set_new(o, "classifier_act", json_string(est_activation_name(x->classifier_act)));
  json_object_set_new(root, "encoder_options", o);
  json_object_set_new(root, "pad_token_id", json_integer(c->pad_token_id));
}

/* The options est runs today; the rest are named and refused (docs/bert.md §11). */
static est_status options_validate(const est_bert_config *c, const char *src) {
  const est_encoder_options *x = &c->opt;
  if ((unsigned)x->family >= (unsigned)COUNT(FAMILIES) || (unsigned)x->positions >= (unsigned)COUNT(POSITIONS) ||
      (unsigned)x->position_ids >= (unsigned)COUNT(POSITION_IDS) ||
      (unsigned)x->token_types >= (unsigned)COUNT(TOKEN_TYPES) || (unsigned)x->norm >= (unsigned)COUNT(NORMS) ||
      (unsigned)x->ffn >= (unsigned)COUNT(FFNS))
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: an encoder option is out of range", src);
  const int Dh = c->num_attention_heads > 0 ? c->hidden_size / c->num_attention_heads : 0;
  if (x->positions == EST_POS_ROTARY) {
    if (!(x->rotary_theta > 0.0) || x->rotary_theta_local < 0.0)
      return est_error(EST_ERR_INVALID_ARGUMENT, "%s: rotary positions need a positive rotary_theta (global_rope_"
                       "theta), got %g (local %g)", src, x->rotary_theta, x->rotary_theta_local);
    if (Dh % 2)
      return est_error(EST_ERR_INVALID_ARGUMENT, "%s: rotary positions need an even head size, got %d (hidden_size "
                       "%d / num_attention_heads %d)", src, Dh, c->hidden_size, c->num_attention_heads);
  } else if (x->rotary_theta || x->rotary_theta_local) {
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: rotary_theta is set but positions are not \"rotary\"", src);
  }
  if (x->global_attn_every_n_layers < 0 || x->local_attention < 0 ||
      (x->global_attn_every_n_layers > 1 && x->local_attention < 2))
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: sliding windows need global_attn_every_n_layers >= 0 and a "
                     "local_attention >= 2 tokens, got %d and %d", src, x->global_attn_every_n_layers,
                     x->local_attention);
  if (x->position_ids == EST_POS_IDS_AFTER_PADDING && x->positions != EST_POS_LEARNED &&
      x->positions != EST_POS_SINUSOIDAL)
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: position_ids \"after_padding\" needs a position table", src);
  if (x->embedding_size < 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: field \"embedding_size\" must be positive, got %d", src,
                     x->embedding_size);
  if (!(c->layer_norm_eps > 0.0))
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: field \"layer_norm_eps\" = %g must be positive", src,
                     c->layer_norm_eps);
  if (x->position_ids == EST_POS_IDS_AFTER_PADDING &&
      (c->pad_token_id < 0 || c->pad_token_id + 1 >= c->max_position_embeddings))
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: field \"pad_token_id\" = %d leaves no positions after it "
                     "(max_position_embeddings %d)", src, c->pad_token_id, c->max_position_embeddings);
  if (!(x->classifier_dropout >= 0.0 && x->classifier_dropout < 1.0))
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: field \"encoder_options.classifier_dropout\" = %g must be in "
                     "[0, 1)", src, x->classifier_dropout);
  return EST_OK;
}

int est_bert_config_max_seq_length(const est_bert_config *c) {
  if (c->opt.position_ids == EST_POS_IDS_AFTER_PADDING) return c->max_position_embeddings - c->pad_token_id - 1;
  return c->max_position_embeddings;
}

est_status est_bert_config_validate(const est_bert_config *c, const char *source) {
  const char *src = source ? source : "BertConfig";
  est_status st = options_validate(c, src);
  if (st) return st;
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
  if (c->opt.token_types != EST_TYPES_NONE) POSITIVE(type_vocab_size)
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
  write_fields(o, c, BERT_FIELDS, COUNT(BERT_FIELDS));
  json_object_set_new(o, "hidden_act", json_string(est_activation_name(c->hidden_act)));
}

char *est_bert_config_to_json_string(const est_bert_config *c) {
  json_t *o = json_object();
  bert_config_json_fields(o, c);
  options_json(o, c);
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
