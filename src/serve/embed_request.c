/* Embedding request bodies (est/serving.h): HuggingFace text-embeddings-inference's
 * POST /embed and the OpenAI-style POST /v1/embeddings, into a list of texts. The fields
 * and defaults are TEI's router/src/http/types.rs (EmbedRequest: inputs, truncate = false,
 * normalize = true; OpenAICompatRequest: input, model, user) and OpenAI's embeddings API
 * (input, model, encoding_format, dimensions, user); "dimensions" keeps the first so many
 * floats of each vector (Matryoshka), as TEI does. Unknown keys are ignored as serde and
 * OpenAI ignore them; a known field est cannot honour is refused by name rather than
 * silently giving a different vector. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "est/serving.h"
#include "serve/request_internal.h"

void est_embed_request_clear(est_embed_request *r) {
  free(r->texts);
  if (r->json) json_decref((json_t *)r->json);
  memset(r, 0, sizeof *r);
}

/* A string or a list of strings, under `field`. */
static est_status texts(est_embed_request *r, const json_t *v, const char *field, const est_request_limits *lim) {
  if (!v) return est_error(EST_ERR_INVALID_ARGUMENT, "\"%s\": missing (a string or a list of strings)", field);
  const size_t n = json_is_array(v) ? json_array_size(v) : 1;
  if (!json_is_array(v) && !json_is_string(v))
    return est_error(EST_ERR_INVALID_ARGUMENT, "\"%s\": must be a string or a list of strings", field);
  if (n == 0) return est_error(EST_ERR_INVALID_ARGUMENT, "\"%s\": empty; give at least one text", field);
  if (lim->max_instances && n > lim->max_instances)
    return est_error(EST_ERR_INVALID_ARGUMENT, "\"%s\": %zu texts; at most %zu per request", field, n,
                     lim->max_instances);
  if (!(r->texts = calloc(n, sizeof *r->texts))) return est_error(EST_ERR_NO_MEMORY, "%s", field);
  r->count = n;
  for (size_t i = 0; i < n; i++) {
    const json_t *t = json_is_array(v) ? json_array_get(v, i) : v;
    if (json_is_integer(t) || json_is_array(t))
      return est_error(EST_ERR_INVALID_ARGUMENT, "%s[%zu]: token ids are not supported (they would be another "
                       "tokenizer's); send the text", field, i);
    if (!json_is_string(t)) return est_error(EST_ERR_INVALID_ARGUMENT, "%s[%zu]: must be a string", field, i);
    r->texts[i] = json_string_value(t);
  }
  return EST_OK;
}

static est_status boolean(const json_t *root, const char *key, int *out) {
  const json_t *v = json_object_get(root, key);
  if (!v || json_is_null(v)) return EST_OK;
  if (!json_is_boolean(v)) return est_error(EST_ERR_INVALID_ARGUMENT, "\"%s\": must be true or false", key);
  *out = json_is_true(v);
  return EST_OK;
}

/* "dimensions": a positive integer (TEI and OpenAI: the first so many of the vector). */
static est_status dimensions(est_embed_request *r, const json_t *root) {
  const json_t *v = json_object_get(root, "dimensions");
  if (!v || json_is_null(v)) return EST_OK;
  if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > INT32_MAX)
    return est_error(EST_ERR_INVALID_ARGUMENT, "\"dimensions\": must be a positive integer");
  r->dimensions = (int)json_integer_value(v);
  return EST_OK;
}

static est_status tei_fields(est_embed_request *r, const json_t *root, const est_request_limits *lim) {
  est_status st = texts(r, json_object_get(root, "inputs"), "inputs", lim);
  if (st == EST_OK) st = boolean(root, "normalize", &r->normalize);
  if (st == EST_OK) st = boolean(root, "truncate", &r->truncate);
  if (st == EST_OK) st = dimensions(r, root);
  const json_t *dir = json_object_get(root, "truncation_direction"), *prompt = json_object_get(root, "prompt_name");
  if (st == EST_OK && dir && !json_is_null(dir) &&
      !(json_is_string(dir) && !strcmp(json_string_value(dir), "Right")))
    st = est_error(EST_ERR_INVALID_ARGUMENT, "\"truncation_direction\": est truncates on the right only (\"Right\")");
  if (st == EST_OK && prompt && !json_is_null(prompt))
    st = est_error(EST_ERR_INVALID_ARGUMENT, "\"prompt_name\": prompts are not supported; prepend the text yourself");
  return st;
}

static est_status openai_fields(est_embed_request *r, const json_t *root, const est_request_limits *lim) {
  est_status st = texts(r, json_object_get(root, "input"), "input", lim);
  const json_t *model = json_object_get(root, "model"), *fmt = json_object_get(root, "encoding_format");
  if (st == EST_OK && model && !json_is_null(model)) {
    if (!json_is_string(model)) st = est_error(EST_ERR_INVALID_ARGUMENT, "\"model\": must be a string");
    else r->model = json_string_value(model);
  }
  if (st == EST_OK && fmt && !json_is_null(fmt) && !(json_is_string(fmt) && !strcmp(json_string_value(fmt), "float")))
    st = est_error(EST_ERR_INVALID_ARGUMENT, "\"encoding_format\": est answers \"float\" only");
  if (st == EST_OK) st = dimensions(r, root);
  return st;
}

est_status est_embed_request_parse(est_embed_request *out, est_embed_api api, const char *body, size_t size,
                                   const est_request_limits *limits) {
  memset(out, 0, sizeof *out);
  out->normalize = -1;
  out->truncate = api == EST_EMBED_API_TEI ? -1 : 0;
  json_t *root;
  est_status st = est_request_load(&root, body, size, limits);
  out->json = root;
  if (st == EST_OK) st = api == EST_EMBED_API_TEI ? tei_fields(out, root, limits) : openai_fields(out, root, limits);
  if (st != EST_OK) est_embed_request_clear(out);
  return st;
}
