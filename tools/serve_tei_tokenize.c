/* TEI's POST /tokenize and POST /decode (serve_internal.h, docs/serving.md §6) with the served
 * export's tokenizer: its tokenizer.json, or for a vocab.txt the pipeline HF's
 * BertTokenizerFast makes of it (est_tokenizer_attach_bert_pipeline), so the tokens are
 * tokenizers' own.
 *   /tokenize {"inputs": str | [str], "add_special_tokens": true, "prompt_name": null}
 *             -> [[{"id", "text", "special", "start", "stop"}, ...], ...]
 *     as TEI's router: a special token's text is the token and its start / stop null; any
 *     other's start / stop are UTF-8 byte offsets into the input (Rust's offsets) and its
 *     text those bytes.
 *   /decode   {"ids": [int] | [[int]], "skip_special_tokens": true} -> [str, ...] */
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "serve_internal.h"

/* The served version's tokenizer with its tokenizers pipeline (made on first use), with
 * m->tokenizer_lock held: unlock_tokenizer after using it. NULL (lock not held) with *text
 * the error. */
static est_tokenizer *lock_tokenizer(served_model *m, unsigned *status, char **text) {
  pthread_mutex_lock(&m->tokenizer_lock);
  est_status st = EST_OK;
  if (!m->tokenizer) {
    st = est_servable_tokenizer_create(m->servable, &m->tokenizer);
    if (st == EST_OK) st = est_tokenizer_attach_bert_pipeline(m->tokenizer);
    if (st != EST_OK) est_tokenizer_free(m->tokenizer), m->tokenizer = NULL;
    /* TEI tokenizes the whole text, unpadded: the settings the served rows use (the file's
     * padding, max_seq_length's truncation) are this copy's own to drop */
    est_padding *pad = m->tokenizer ? est_tokenizer_padding(m->tokenizer) : NULL;
    est_truncation *cut = m->tokenizer ? est_tokenizer_truncation(m->tokenizer) : NULL;
    if (pad) pad->enabled = false;
    if (cut) cut->enabled = false;
  }
  if (st == EST_OK) return m->tokenizer;
  pthread_mutex_unlock(&m->tokenizer_lock);
  *status = 424;
  *text = serve_tei_error(*status, "the export's tokenizer: %s", est_error_message());
  return NULL;
}

static void unlock_tokenizer(served_model *m) { pthread_mutex_unlock(&m->tokenizer_lock); }

static bool get_bool(const json_t *root, const char *key, bool dflt, bool *out) {
  const json_t *v = json_object_get(root, key);
  *out = dflt;
  if (!v || json_is_null(v)) return true;
  if (!json_is_boolean(v)) return false;
  *out = json_is_true(v);
  return true;
}

/* The byte offset of code point cp of s (len bytes). */
static size_t byte_of(const char *s, size_t len, size_t cp) {
  size_t i = 0;
  for (size_t k = 0; k < cp && i < len; k++) {
    i++;
    while (i < len && ((unsigned char)s[i] & 0xC0) == 0x80) i++;
  }
  return i;
}

char *serve_tei_tokenize(serve_http *h, served_model *m, const json_t *root, unsigned *status) {
  const json_t *in = json_object_get(root, "inputs");
  bool add_special;
  const size_t n = json_is_array(in) ? json_array_size(in) : 1;
  if (!json_is_string(in) && !json_is_array(in))
    return *status = 422, serve_tei_error(*status, "`inputs` must be a string or a list of strings");
  if (!get_bool(root, "add_special_tokens", true, &add_special))
    return *status = 422, serve_tei_error(*status, "`add_special_tokens` must be true or false");
  const json_t *prompt = json_object_get(root, "prompt_name");
  if (prompt && !json_is_null(prompt)) /* TEI: Validation when the model has no such prompt */
    return *status = 413, serve_tei_error(*status, "Prompt name `%s` was not found: the model has no prompts",
                                          json_is_string(prompt) ? json_string_value(prompt) : "?");
  if (n == 0) return *status = 400, serve_tei_error(*status, "`inputs` cannot be empty");
  if (n > (size_t)h->opt->max_client_batch_size)
    return *status = 413, serve_tei_error(*status, "batch size %zu > maximum allowed batch size %d", n,
                                          h->opt->max_client_batch_size);
  for (size_t i = 0; json_is_array(in) && i < n; i++)
    if (!json_is_string(json_array_get(in, i)))
      return *status = 422, serve_tei_error(*status, "`inputs[%zu]` must be a string", i);
  char *text = NULL;
  est_tokenizer *tok = lock_tokenizer(m, status, &text);
  if (!tok) return text;
  json_t *out = json_array();
  est_status st = EST_OK;
  for (size_t i = 0; st == EST_OK && i < n; i++) {
    const json_t *t = json_is_array(in) ? json_array_get(in, i) : in;
    const char *s = json_string_value(t);
    const size_t len = json_string_length(t);
    est_encoding e;
    st = est_tokenizer_encode_pair(tok, s, len, NULL, 0, add_special, &e);
    json_t *tokens = json_array();
    for (size_t k = 0; st == EST_OK && k < e.n; k++) {
      const bool special = e.special_tokens_mask[k] != 0;
      json_t *o;
      if (special) {
        o = json_pack("{s:i,s:s,s:b,s:n,s:n}", "id", (int)e.ids[k], "text", e.tokens[k] ? e.tokens[k] : "",
                      "special", 1, "start", "stop");
      } else {
        const size_t a = byte_of(s, len, (size_t)e.offset_start[k]), b = byte_of(s, len, (size_t)e.offset_end[k]);
        o = json_pack("{s:i,s:s%,s:b,s:I,s:I}", "id", (int)e.ids[k], "text", s + a, b - a, "special", 0, "start",
                      (json_int_t)a, "stop", (json_int_t)b);
      }
      json_array_append_new(tokens, o);
    }
    json_array_append_new(out, tokens);
  }
  unlock_tokenizer(m);
  if (st != EST_OK) {
    json_decref(out);
    return *status = 422, serve_tei_error(*status, "%s", est_error_message());
  }
  *status = 200;
  text = json_dumps(out, 0);
  json_decref(out);
  return text;
}

char *serve_tei_decode(serve_http *h, served_model *m, const json_t *root, unsigned *status) {
  (void)h;
  const json_t *ids = json_object_get(root, "ids");
  bool skip;
  if (!json_is_array(ids)) return *status = 422, serve_tei_error(*status, "`ids` must be a list of ids or of lists");
  if (!get_bool(root, "skip_special_tokens", true, &skip))
    return *status = 422, serve_tei_error(*status, "`skip_special_tokens` must be true or false");
  /* [int, ...] is one sequence; [[int, ...], ...] several */
  const bool nested = json_array_size(ids) > 0 && json_is_array(json_array_get(ids, 0));
  const size_t n = nested ? json_array_size(ids) : 1;
  if (n == 0 || (!nested && json_array_size(ids) == 0))
    return *status = 400, serve_tei_error(*status, "`ids` cannot be empty");
  if (n > (size_t)h->opt->max_client_batch_size)
    return *status = 413, serve_tei_error(*status, "batch size %zu > maximum allowed batch size %d", n,
                                          h->opt->max_client_batch_size);
  char *text = NULL;
  est_tokenizer *tok = lock_tokenizer(m, status, &text);
  if (!tok) return text;
  json_t *out = json_array();
  for (size_t i = 0; i < n && !text; i++) {
    const json_t *seq = nested ? json_array_get(ids, i) : ids;
    const size_t k = json_is_array(seq) ? json_array_size(seq) : 0;
    int32_t *v = malloc((k + 1) * sizeof *v);
    for (size_t j = 0; v && j < k && !text; j++) {
      const json_t *x = json_array_get(seq, j);
      if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > INT32_MAX)
        *status = 422, text = serve_tei_error(*status, "`ids%s[%zu]` must be a token id (an integer >= 0)",
                                              nested ? "[i]" : "", j);
      else v[j] = (int32_t)json_integer_value(x);
    }
    if (!json_is_array(seq)) *status = 422, text = serve_tei_error(*status, "`ids[%zu]` must be a list of ids", i);
    char *s = NULL;
    size_t len = 0;
    if (!text && v && est_tokenizer_decode(tok, v, k, skip, &s, &len) != EST_OK)
      *status = 422, text = serve_tei_error(*status, "%s", est_error_message());
    json_t *decoded = text ? NULL : json_stringn(s ? s : "", len);
    if (!text && !decoded)
      *status = 422, text = serve_tei_error(*status, "`ids[%zu]` decode to bytes that are not UTF-8", i);
    if (decoded) json_array_append_new(out, decoded);
    free(s);
    free(v);
  }
  unlock_tokenizer(m);
  if (!text) {
    *status = 200;
    text = json_dumps(out, 0);
  }
  json_decref(out);
  return text;
}
