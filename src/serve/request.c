/* TF Serving REST request bodies -> est_instance lists (est/serving.h). The row format
 * ({"instances": [...]}, {"examples": [...]}) and the columnar one ({"inputs": ...}) follow
 * TF Serving's REST API (tensorflow_serving/g3doc/api_rest.md); an instance holds what the
 * served head's signature takes (est_served_inputs, est/served_head.h): its named texts, or
 * the three int lists of run_classifier's features. Every failure says where
 * ("instances[2].input_ids[5]: ...") so a client can fix its request. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/json_error.h"
#include "est/serving.h"
#include "serve/request_internal.h"

void est_request_clear(est_request *r) {
  for (size_t i = 0; r->instances && i < r->count; i++) {
    free(r->instances[i].input_ids);
    free(r->instances[i].input_mask);
    free(r->instances[i].segment_ids);
  }
  free(r->instances);
  free(r->signature_name);
  if (r->json) json_decref((json_t *)r->json);
  memset(r, 0, sizeof *r);
}

/* A list of integers in [lo, hi) into a fresh int32 array; `where` names it. */
static est_status int_list(const json_t *a, int32_t lo, int32_t hi, const char *where, int32_t **out, int *len) {
  if (!json_is_array(a)) return est_error(EST_ERR_INVALID_ARGUMENT, "%s: must be a list of integers", where);
  size_t n = json_array_size(a);
  *out = malloc((n ? n : 1) * sizeof(int32_t));
  if (!*out) return est_error(EST_ERR_NO_MEMORY, "%s", where);
  for (size_t i = 0; i < n; i++) {
    const json_t *v = json_array_get(a, i);
    if (!json_is_integer(v))
      return est_error(EST_ERR_INVALID_ARGUMENT, "%s[%zu]: must be an integer", where, i);
    json_int_t x = json_integer_value(v);
    if (x < lo || x >= hi)
      return est_error(EST_ERR_INVALID_ARGUMENT, "%s[%zu]: %lld is outside [%d, %d)", where, i, (long long)x, lo, hi);
    (*out)[i] = (int32_t)x;
  }
  *len = (int)n;
  return EST_OK;
}

/* Fills a tokenized instance from its three lists (mask/segs may be NULL). */
static est_status tokenized(est_instance *in, const json_t *ids, const json_t *mask, const json_t *segs,
                            const char *where, const est_request_limits *lim) {
  char w[160];
  int n = 0, m;
  snprintf(w, sizeof w, "%s.input_ids", where);
  est_status st = int_list(ids, 0, lim->vocab_size, w, &in->input_ids, &n);
  if (st != EST_OK) return st;
  if (n < 1 || n > lim->max_seq_length)
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: %d tokens; must be 1 to max_seq_length %d", w, n,
                     lim->max_seq_length);
  in->length = n;
  const struct {
    const json_t *list;
    const char *name;
    int32_t hi, fill;
    int32_t **dst;
  } more[2] = {{mask, "input_mask", 2, 1, &in->input_mask}, {segs, "segment_ids", lim->type_vocab_size, 0, &in->segment_ids}};
  for (int k = 0; k < 2; k++) {
    snprintf(w, sizeof w, "%s.%s", where, more[k].name);
    if (more[k].list && !json_is_null(more[k].list)) {
      if ((st = int_list(more[k].list, 0, more[k].hi, w, more[k].dst, &m)) != EST_OK) return st;
      if (m != n)
        return est_error(EST_ERR_INVALID_ARGUMENT, "%s: %d values, but input_ids has %d", w, m, n);
    } else {
      if (!(*more[k].dst = malloc((size_t)n * sizeof(int32_t)))) return est_error(EST_ERR_NO_MEMORY, "%s", w);
      for (int i = 0; i < n; i++) (*more[k].dst)[i] = more[k].fill;
    }
  }
  return EST_OK;
}

static est_status text_field(const json_t *v, const char *where, int required, const char **out) {
  *out = NULL;
  if (!v || json_is_null(v)) {
    if (required) return est_error(EST_ERR_INVALID_ARGUMENT, "%s: missing (a string)", where);
    return EST_OK;
  }
  if (!json_is_string(v)) return est_error(EST_ERR_INVALID_ARGUMENT, "%s: must be a string", where);
  *out = json_string_value(v);
  return EST_OK;
}

/* The head's string inputs (inputs->texts up to the first NULL). */
static int num_texts(const est_served_inputs *inputs) {
  int n = 0;
  while (n < EST_SERVED_MAX_TEXTS && inputs->texts[n]) n++;
  return n;
}

static const char *const TOKEN_INPUTS[3] = {"input_ids", "input_mask", "segment_ids"};

/* Names joined: `"a" and "b"` (quoted, with `sep`) or `a, b` (plain), into buf. */
static const char *join_names(char *buf, size_t size, const char *const *names, int n, const char *sep, int quoted) {
  size_t len = 0;
  buf[0] = 0;
  for (int k = 0; k < n && len < size; k++)
    len += (size_t)snprintf(buf + len, size - len, quoted ? "%s\"%s\"" : "%s%s", k ? sep : "", names[k]);
  return buf;
}

/* "text_a, text_b, input_ids, input_mask, segment_ids": what the signature takes. */
static const char *signature_inputs(char *buf, size_t size, const est_served_inputs *inputs) {
  const char *names[EST_SERVED_MAX_TEXTS + 3];
  int n = num_texts(inputs);
  memcpy(names, inputs->texts, (size_t)n * sizeof *names);
  if (inputs->tokens) memcpy(names + n, TOKEN_INPUTS, sizeof TOKEN_INPUTS), n += 3;
  return join_names(buf, size, names, n, ", ", 0);
}

/* One row-format instance: an object of the head's inputs (or a string, its first text). */
static est_status row_instance(est_instance *in, const json_t *v, const char *where, const est_request_limits *lim,
                               const est_served_inputs *inputs) {
  const int nt = num_texts(inputs);
  char names[256];
  if (json_is_string(v) && inputs->bare_string) {
    in->texts[0] = json_string_value(v);
    return EST_OK;
  }
  if (!json_is_object(v)) /* "must be a string or an object with "text_a" or "input_ids"" */
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: must be %san object with %s%s", where,
                     inputs->bare_string ? "a string or " : "",
                     join_names(names, sizeof names, inputs->texts, inputs->required ? inputs->required : nt, " and ", 1),
                     inputs->tokens ? " or \"input_ids\"" : "");
  const char *key;
  json_t *val;
  json_object_foreach((json_t *)v, key, val) {
    int known = 0;
    for (int k = 0; k < nt; k++) known |= !strcmp(key, inputs->texts[k]);
    for (int k = 0; inputs->tokens && k < 3; k++) known |= !strcmp(key, TOKEN_INPUTS[k]);
    if (!known)
      return est_error(EST_ERR_INVALID_ARGUMENT, "%s: unknown input \"%s\" (the signature's inputs: %s)", where, key,
                       signature_inputs(names, sizeof names, inputs));
  }
  int any_text = 0;
  for (int k = 0; k < nt; k++) any_text |= json_object_get(v, inputs->texts[k]) != NULL;
  if (inputs->tokens) {
    const json_t *ids = json_object_get(v, "input_ids");
    if (ids) {
      if (any_text) return est_error(EST_ERR_INVALID_ARGUMENT, "%s: give either texts or input_ids, not both", where);
      return tokenized(in, ids, json_object_get(v, "input_mask"), json_object_get(v, "segment_ids"), where, lim);
    }
    if (json_object_get(v, "input_mask") || json_object_get(v, "segment_ids"))
      return est_error(EST_ERR_INVALID_ARGUMENT, "%s: input_mask/segment_ids without input_ids", where);
  }
  est_status st = EST_OK;
  for (int k = 0; st == EST_OK && k < nt; k++) {
    char w[160];
    snprintf(w, sizeof w, "%s.%s", where, inputs->texts[k]);
    st = text_field(json_object_get(v, inputs->texts[k]), w, k < inputs->required, &in->texts[k]);
  }
  return st;
}

static est_status alloc_instances(est_request *r, size_t n, const char *what, const est_request_limits *lim) {
  if (n == 0) return est_error(EST_ERR_INVALID_ARGUMENT, "\"%s\": empty; give at least one", what);
  if (lim->max_instances && n > lim->max_instances)
    return est_error(EST_ERR_INVALID_ARGUMENT, "\"%s\": %zu instances; at most %zu per request", what, n,
                     lim->max_instances);
  r->instances = calloc(n, sizeof *r->instances);
  if (!r->instances) return est_error(EST_ERR_NO_MEMORY, "%s", what);
  r->count = n;
  return EST_OK;
}

static est_status rows(est_request *r, const json_t *list, const char *what, const est_request_limits *lim,
                       const est_served_inputs *inputs) {
  if (!json_is_array(list)) return est_error(EST_ERR_INVALID_ARGUMENT, "\"%s\": must be a list", what);
  est_status st = alloc_instances(r, json_array_size(list), what, lim);
  for (size_t i = 0; st == EST_OK && i < r->count; i++) {
    char w[64];
    snprintf(w, sizeof w, "%s[%zu]", what, i);
    const json_t *v = json_array_get(list, i);
    st = row_instance(&r->instances[i], v, w, lim, inputs);
  }
  return st;
}

/* {"inputs": ["text", ...]} or {"inputs": {"text_a": [...], "text_b": [...]}} or
 * {"inputs": {"input_ids": [[...], ...], "input_mask": ..., "segment_ids": ...}}: the head's
 * inputs by columns. */
static est_status columns(est_request *r, const json_t *in, const est_request_limits *lim,
                          const est_served_inputs *inputs) {
  if (json_is_array(in)) return rows(r, in, "inputs", lim, inputs);
  if (json_is_string(in) && inputs->bare_string) {
    est_status st = alloc_instances(r, 1, "inputs", lim);
    if (st == EST_OK) r->instances[0].texts[0] = json_string_value(in);
    return st;
  }
  if (!json_is_object(in)) return est_error(EST_ERR_INVALID_ARGUMENT, "\"inputs\": must be a list or an object");
  /* the texts, then input_ids, input_mask, segment_ids */
  const int nt = num_texts(inputs), ncol = nt + (inputs->tokens ? 3 : 0), ids = nt;
  const char *names[EST_SERVED_MAX_TEXTS + 3];
  memcpy(names, inputs->texts, (size_t)nt * sizeof *names);
  if (inputs->tokens) memcpy(names + nt, TOKEN_INPUTS, sizeof TOKEN_INPUTS);
  const json_t *col[EST_SERVED_MAX_TEXTS + 3] = {0};
  size_t n = 0;
  int have = 0;
  const char *key;
  json_t *val;
  json_object_foreach((json_t *)in, key, val) {
    int k = 0;
    while (k < ncol && strcmp(key, names[k])) k++;
    if (k == ncol) return est_error(EST_ERR_INVALID_ARGUMENT, "inputs: unknown input \"%s\"", key);
  }
  int any_text = 0;
  for (int k = 0; k < ncol; k++) {
    col[k] = json_object_get(in, names[k]);
    if (!col[k]) continue;
    if (!json_is_array(col[k])) return est_error(EST_ERR_INVALID_ARGUMENT, "inputs.%s: must be a list", names[k]);
    if (have && json_array_size(col[k]) != n)
      return est_error(EST_ERR_INVALID_ARGUMENT, "inputs.%s: %zu entries, but the other inputs have %zu", names[k],
                       json_array_size(col[k]), n);
    n = json_array_size(col[k]);
    have = 1;
    any_text |= k < nt;
  }
  const int tokens = inputs->tokens && col[ids];
  if (tokens && any_text) return est_error(EST_ERR_INVALID_ARGUMENT, "inputs: give either texts or input_ids, not both");
  for (int k = 0; !tokens && k < (inputs->required ? inputs->required : 1); k++)
    if (!col[k])
      return est_error(EST_ERR_INVALID_ARGUMENT, "inputs: needs \"%s\"%s", names[k],
                       k == 0 && inputs->tokens ? " or \"input_ids\"" : "");
  est_status st = alloc_instances(r, n, "inputs", lim);
  for (size_t i = 0; st == EST_OK && i < n; i++) {
    char w[64];
    snprintf(w, sizeof w, "inputs[%zu]", i);
    est_instance *x = &r->instances[i];
    if (tokens) {
      st = tokenized(x, json_array_get(col[ids], i), col[ids + 1] ? json_array_get(col[ids + 1], i) : NULL,
                     col[ids + 2] ? json_array_get(col[ids + 2], i) : NULL, w, lim);
      continue;
    }
    for (int k = 0; st == EST_OK && k < nt; k++) {
      if (!col[k]) continue;
      char wk[80];
      snprintf(wk, sizeof wk, "inputs.%s[%zu]", names[k], i);
      st = text_field(json_array_get(col[k], i), wk, k < inputs->required, &x->texts[k]);
    }
  }
  return st;
}

/* A cheap pass over the bytes before jansson builds a tree: refuses nesting deeper than
 * EST_REQUEST_MAX_DEPTH (jansson's parser and json_decref recurse once per level) and any
 * list or object of more than max_entries entries (its tree would cost ~20x its bytes in
 * memory before the instance count could be checked). Entries are counted by commas at
 * their level, outside strings; what is not valid JSON is left to jansson to report. */
static est_status prescan(const char *body, size_t size, size_t max_entries, const est_request_limits *lim) {
  size_t commas[EST_REQUEST_MAX_DEPTH + 1] = {0};
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < size; i++) {
    const char ch = body[i];
    if (in_string) {
      if (ch == '\\') i++;
      else if (ch == '"') in_string = false;
      continue;
    }
    if (ch == '"') {
      in_string = true;
    } else if (ch == '[' || ch == '{') {
      if (depth == EST_REQUEST_MAX_DEPTH)
        return est_error(EST_ERR_INVALID_ARGUMENT, "byte %zu: JSON nested deeper than %d levels (a request needs 4)", i,
                         EST_REQUEST_MAX_DEPTH);
      commas[++depth] = 0;
    } else if ((ch == ']' || ch == '}') && depth > 0) {
      depth--;
    } else if (ch == ',' && depth > 0 && ++commas[depth] >= max_entries) {
      return est_error(EST_ERR_INVALID_ARGUMENT, "byte %zu: a JSON list or object of more than %zu entries; a request "
                       "holds at most %zu instances of at most %d tokens", i, max_entries, lim->max_instances,
                       lim->max_seq_length);
    }
  }
  return EST_OK;
}

est_status est_request_prescan(const char *body, size_t size, const est_request_limits *limits) {
  /* No list may be longer than the instances allowed or a row's tokens (nor shorter than a
   * handful: an object has up to 5 keys). */
  size_t max_entries = limits->max_instances > (size_t)limits->max_seq_length ? limits->max_instances
                                                                              : (size_t)limits->max_seq_length;
  if (max_entries < 16) max_entries = 16;
  if (limits->max_instances == 0) max_entries = SIZE_MAX;
  return prescan(body, size, max_entries, limits);
}

est_status est_request_load(json_t **root, const char *body, size_t size, const est_request_limits *limits) {
  *root = NULL;
  est_status st = est_request_prescan(body, size, limits);
  if (st != EST_OK) return st;
  json_error_t err;
  *root = json_loadb(body, size, JSON_REJECT_DUPLICATES, &err);
  if (!*root)
    return est_error(EST_ERR_INVALID_ARGUMENT, "JSON parse error at line %d, column %d: %s", err.line, err.column,
                     est_json_error_text(&err));
  if (!json_is_object(*root)) return est_error(EST_ERR_INVALID_ARGUMENT, "the request body must be a JSON object");
  return EST_OK;
}

est_status est_request_parse(est_request *out, est_request_kind kind, const est_served_inputs *inputs,
                             const char *body, size_t size, const est_request_limits *limits) {
  memset(out, 0, sizeof *out);
  json_t *root;
  est_status st = est_request_load(&root, body, size, limits);
  out->json = root;
  const json_t *sig = st == EST_OK ? json_object_get(root, "signature_name") : NULL;
  if (sig && !json_is_string(sig)) st = est_error(EST_ERR_INVALID_ARGUMENT, "\"signature_name\": must be a string");
  if (st == EST_OK && sig && !(out->signature_name = strdup(json_string_value(sig))))
    st = est_error(EST_ERR_NO_MEMORY, "signature_name");
  /* an instance as an example body shows it: {"question": ..., "context": ...} */
  char shape[256];
  size_t len = (size_t)snprintf(shape, sizeof shape, "{");
  for (int k = 0; k < num_texts(inputs) && len < sizeof shape; k++)
    len += (size_t)snprintf(shape + len, sizeof shape - len, "%s\"%s\": ...", k ? ", " : "", inputs->texts[k]);
  if (len < sizeof shape) snprintf(shape + len, sizeof shape - len, "}");
  if (st == EST_OK && kind == EST_REQUEST_CLASSIFY) {
    const json_t *ex = json_object_get(root, "examples");
    if (!ex) st = est_error(EST_ERR_INVALID_ARGUMENT, "a classify request needs \"examples\": [...]");
    else st = rows(out, ex, "examples", limits, inputs);
  } else if (st == EST_OK) {
    const json_t *inst = json_object_get(root, "instances"), *in = json_object_get(root, "inputs");
    if (inst && in) st = est_error(EST_ERR_INVALID_ARGUMENT, "give either \"instances\" or \"inputs\", not both");
    else if (inst) st = rows(out, inst, "instances", limits, inputs);
    else if (in && !inputs->columnar)
      st = est_error(EST_ERR_INVALID_ARGUMENT, "%s takes \"instances\": [%s, ...], not \"inputs\"",
                     inputs->model ? inputs->model : "the model", shape);
    else if (in) {
      out->columnar = true;
      st = columns(out, in, limits, inputs);
    } else if (inputs->columnar)
      st = est_error(EST_ERR_INVALID_ARGUMENT, "a predict request needs \"instances\": [...] or \"inputs\"");
    else
      st = est_error(EST_ERR_INVALID_ARGUMENT, "a predict request needs \"instances\": [%s, ...]", shape);
  }
  if (st != EST_OK) {
    est_request_clear(out);
    return st;
  }
  return EST_OK;
}
