/* HuggingFace tokenizer.json -> est's FullTokenizer (docs/hf.md §5). The BERT tokenizers that
 * `tokenizers` writes (BertWordPieceTokenizer, every BertTokenizerFast) are a WordPiece model
 * behind a BertNormalizer and a BertPreTokenizer: the same pipeline as Google's FullTokenizer,
 * with its switches in the file. Anything else is refused by name, never approximated. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json_error.h"
#include "est/file.h"
#include "est/log.h"
#include "est/tokenizer.h"
#include "text/hf_tokenizer.h"

static est_status bad(const char *path, const char *what) {
  return est_error(EST_ERR_INVALID_ARGUMENT, "%s: %s", path, what);
}

/* `"type": want` in object `o` (the field named `field`), or an error naming it. */
static est_status need_type(const char *path, json_t *o, const char *field, const char *want) {
  json_t *type = json_object_get(o, "type");
  if (json_is_string(type) && !strcmp(json_string_value(type), want)) return EST_OK;
  return est_error(EST_ERR_INVALID_ARGUMENT, "%s: %s.type is %s%s%s; est reads %s only", path, field,
                   json_is_string(type) ? "\"" : "", json_is_string(type) ? json_string_value(type) : "missing",
                   json_is_string(type) ? "\"" : "", want);
}

static est_status get_bool(const char *path, json_t *o, const char *key, bool *out) {
  json_t *v = json_object_get(o, key);
  if (!v) return EST_OK;
  if (!json_is_boolean(v)) return est_error(EST_ERR_INVALID_ARGUMENT, "%s: normalizer.%s must be a boolean", path, key);
  *out = json_is_true(v);
  return EST_OK;
}

/* model.vocab {"token": id} -> vocab.txt's text (one token a line, line = id). */
static est_status vocab_text(const char *path, json_t *vocab, char **text, size_t *size) {
  size_t n = json_object_size(vocab);
  if (!json_is_object(vocab) || !n) return bad(path, "model.vocab must be a non-empty object");
  const char **by_id = calloc(n, sizeof *by_id);
  if (!by_id) return est_error(EST_ERR_NO_MEMORY, "%s: out of memory", path);
  const char *token;
  json_t *id;
  size_t bytes = 0;
  est_status st = EST_OK;
  json_object_foreach(vocab, token, id) {
    json_int_t i = json_is_integer(id) ? json_integer_value(id) : -1;
    size_t len = strlen(token);
    if (i < 0 || (size_t)i >= n || by_id[i]) {
      st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: model.vocab[\"%s\"]: ids must be 0..%zu, each once", path, token,
                     n - 1);
      break;
    }
    /* vocab.txt's lines are stripped of whitespace: such a token would not survive */
    if (!len || strpbrk(token, "\n\r") || strchr(" \t\v\f", token[0]) || strchr(" \t\v\f", token[len - 1])) {
      st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: model.vocab token %lld is empty or has edge whitespace or a "
                     "line break, which est's vocab cannot hold", path, (long long)i);
      break;
    }
    by_id[i] = token;
    bytes += len + 1;
  }
  char *buf = st == EST_OK ? malloc(bytes + 1) : NULL;
  if (st == EST_OK && !buf) st = est_error(EST_ERR_NO_MEMORY, "%s: out of memory", path);
  if (st == EST_OK) {
    size_t at = 0;
    for (size_t i = 0; i < n; i++) at += (size_t)sprintf(buf + at, "%s\n", by_id[i]);
    *text = buf;
    *size = at;
  }
  free(by_id);
  return st;
}

/* The options and vocab text of a parsed tokenizer.json. */
static est_status read_json(const char *path, json_t *root, est_tokenizer_options *o, char **text, size_t *size) {
  if (!json_is_object(root)) return bad(path, "expected a JSON object");
  json_t *model = json_object_get(root, "model"), *norm = json_object_get(root, "normalizer"),
         *pre = json_object_get(root, "pre_tokenizer");
  est_status st;
  if (!json_is_object(model)) return bad(path, "\"model\" must be an object");
  if ((st = need_type(path, model, "model", "WordPiece"))) return st;
  json_t *prefix = json_object_get(model, "continuing_subword_prefix");
  if (prefix && !(json_is_string(prefix) && !strcmp(json_string_value(prefix), "##")))
    return bad(path, "model.continuing_subword_prefix must be \"##\" (est's WordPiece)");
  json_t *unk = json_object_get(model, "unk_token");
  if (unk && !json_is_string(unk)) return bad(path, "model.unk_token must be a string");
  if (unk) o->unk_token = json_string_value(unk);
  json_t *max = json_object_get(model, "max_input_chars_per_word");
  if (max && !(json_is_integer(max) && json_integer_value(max) >= 0 && json_integer_value(max) < 1 << 30))
    return bad(path, "model.max_input_chars_per_word must be a non-negative integer");
  if (max) o->max_input_chars_per_word = (int)json_integer_value(max);
  if (!json_is_object(pre) || (st = need_type(path, pre, "pre_tokenizer", "BertPreTokenizer")))
    return json_is_object(pre) ? st : bad(path, "\"pre_tokenizer\" must be a BertPreTokenizer");
  if (!json_is_object(norm) || (st = need_type(path, norm, "normalizer", "BertNormalizer")))
    return json_is_object(norm) ? st : bad(path, "\"normalizer\" must be a BertNormalizer");
  /* BertNormalizer's defaults: all true, strip_accents null (= lowercase) */
  o->lowercase = o->clean_text = o->handle_chinese_chars = true;
  o->strip_accents = -1;
  o->hf_rules = true;
  bool strip = false;
  json_t *sa = json_object_get(norm, "strip_accents");
  if ((st = get_bool(path, norm, "lowercase", &o->lowercase)) || (st = get_bool(path, norm, "clean_text", &o->clean_text)) ||
      (st = get_bool(path, norm, "handle_chinese_chars", &o->handle_chinese_chars)))
    return st;
  if (sa && !json_is_null(sa)) {
    if ((st = get_bool(path, norm, "strip_accents", &strip))) return st;
    o->strip_accents = strip;
  }
  return vocab_text(path, json_object_get(model, "vocab"), text, size);
}

/* Whether root is the FullTokenizer's shape: WordPiece behind BertNormalizer + BertPreTokenizer. */
static bool is_bert_shape(json_t *root) {
  json_t *m = json_object_get(root, "model"), *n = json_object_get(root, "normalizer"), *p = json_object_get(root, "pre_tokenizer");
  const char *mt = json_string_value(json_object_get(m, "type")), *nt = json_string_value(json_object_get(n, "type")),
             *pt = json_string_value(json_object_get(p, "type"));
  return mt && nt && pt && !strcmp(mt, "WordPiece") && !strcmp(nt, "BertNormalizer") && !strcmp(pt, "BertPreTokenizer");
}

est_status est_tokenizer_from_json(est_tokenizer **out, const char *path) {
  *out = NULL;
  json_error_t err;
  json_t *root = json_load_file(path, 0, &err);
  if (!root) return est_error(EST_ERR_INVALID_ARGUMENT, "%s:%d: %s", path, err.line, est_json_error_text(&err));
  if (!json_is_object(root)) {
    json_decref(root);
    return bad(path, "expected a JSON object");
  }
  tok_pipeline *pipe = NULL;
  est_status st = tok_pipeline_from_json(&pipe, root, path);
  if (st == EST_OK && !is_bert_shape(root)) {
    json_decref(root);
    return tokenizer_from_pipeline(out, pipe);
  }
  est_tokenizer_options o = est_tokenizer_options_default(true);
  char *text = NULL;
  size_t size = 0;
  est_vocab *v = NULL;
  if (st == EST_OK) st = read_json(path, root, &o, &text, &size);
  if (st == EST_OK) st = est_vocab_load_buffer(&v, text, size, path);
  if (st == EST_OK) st = est_tokenizer_create_with(out, v, &o); /* o.unk_token points into root */
  if (st == EST_OK) {
    est_tokenizer_own_vocab(*out, v);
    tokenizer_attach_pipeline(*out, pipe);
  } else {
    est_vocab_free(v);
    tok_pipeline_free(pipe);
  }
  free(text);
  json_decref(root);
  return st;
}

static int ends_with(const char *s, const char *tail) {
  size_t a = strlen(s), b = strlen(tail);
  return a >= b && !strcmp(s + a - b, tail);
}

est_status est_tokenizer_open_any(est_tokenizer **out, const char *vocab_file, bool do_lower_case) {
  char path[4096];
  if (est_is_directory(vocab_file)) { /* a HuggingFace model directory */
    est_status st = est_path_join(path, sizeof path, vocab_file, "tokenizer.json");
    if (st == EST_OK && !est_file_exists(path)) st = est_path_join(path, sizeof path, vocab_file, "vocab.txt");
    if (st != EST_OK) return st;
    vocab_file = path;
  }
  if (!ends_with(vocab_file, ".json")) return est_tokenizer_open(out, vocab_file, do_lower_case);
  est_status st = est_tokenizer_from_json(out, vocab_file);
  if (st == EST_OK && est_tokenizer_vocab(*out) && est_tokenizer_do_lower_case(*out) != do_lower_case)
    EST_LOG_INFO("%s lower-cases: %s; it is followed, not --do_lower_case=%s", vocab_file,
                 est_tokenizer_do_lower_case(*out) ? "true" : "false", do_lower_case ? "true" : "false");
  return st;
}

est_status est_vocab_file_write(const char *path, const char *vocab_file, bool do_lower_case) {
  uint8_t *bytes = NULL;
  size_t size = 0;
  est_status st;
  if (!est_is_directory(vocab_file) && !ends_with(vocab_file, ".json")) { /* a vocab.txt: its bytes */
    st = est_read_file(vocab_file, &bytes, &size);
    if (st == EST_OK) st = est_write_file_atomic(path, bytes, size);
    free(bytes);
    return st;
  }
  est_tokenizer *tok;
  if ((st = est_tokenizer_open_any(&tok, vocab_file, do_lower_case)) != EST_OK) return st;
  const est_vocab *v = est_tokenizer_vocab(tok);
  if (!v) { /* no Google vocab: the tokenizer.json is the model's tokenizer (est_tokenizer_json_of) */
    est_tokenizer_free(tok);
    return EST_OK;
  }
  for (int32_t i = 0; i < est_vocab_size(v); i++) size += strlen(est_vocab_token(v, i)) + 1;
  char *text = malloc(size + 1), *at = text;
  if (!text) st = est_error(EST_ERR_NO_MEMORY, "%s: out of memory", path);
  for (int32_t i = 0; text && i < est_vocab_size(v); i++) at += sprintf(at, "%s\n", est_vocab_token(v, i));
  if (st == EST_OK) st = est_write_file_atomic(path, text, size);
  free(text);
  est_tokenizer_free(tok);
  return st;
}

est_status est_tokenizer_json_of(const char *vocab_file, char *path, size_t size) {
  path[0] = 0;
  if (est_is_directory(vocab_file)) {
    est_status st = est_path_join(path, size, vocab_file, "tokenizer.json");
    if (st != EST_OK || !est_file_exists(path)) path[0] = 0;
    return st;
  }
  if (ends_with(vocab_file, ".json")) snprintf(path, size, "%s", vocab_file);
  return EST_OK;
}

/* HF's BertTokenizerFast of a vocab.txt is convert_slow_tokenizer.py's BertConverter: a
 * BertNormalizer (clean_text, handle_chinese_chars, strip_accents, lowercase as the slow
 * tokenizer's), a BertPreTokenizer, WordPiece ("[UNK]", "##", 100 chars a word), the
 * template "[CLS] $A [SEP]" / "[CLS] $A [SEP] $B:1 [SEP]:1", the WordPiece decoder, and the
 * five special tokens as added tokens. That file, made here in memory from tok's own vocab
 * and options, is attached as its pipeline: est_tokenizer_encode stays Google's. */
est_status est_tokenizer_attach_bert_pipeline(est_tokenizer *tok) {
  if (est_tokenizer_truncation(tok)) return EST_OK; /* it has one: its tokenizer.json's */
  const est_vocab *v = est_tokenizer_vocab(tok);
  if (!v) return est_error(EST_ERR_FAILED_PRECONDITION, "the tokenizer has neither a vocab nor a tokenizer.json");
  const est_tokenizer_options o = est_tokenizer_get_options(tok);
  const char *unk = o.unk_token ? o.unk_token : "[UNK]";
  if (est_vocab_find(v, "[CLS]", 5) < 0 || est_vocab_find(v, "[SEP]", 5) < 0)
    return est_error(EST_ERR_FAILED_PRECONDITION, "%s: no [CLS] or [SEP] token: BertTokenizerFast's template "
                     "needs both", est_vocab_path(v) ? est_vocab_path(v) : "the vocab");
  json_t *vocab = json_object(), *added = json_array();
  for (int32_t i = 0; i < est_vocab_size(v); i++) json_object_set_new(vocab, est_vocab_token(v, i), json_integer(i));
  static const char *const SPECIAL[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  for (size_t k = 0; k < sizeof SPECIAL / sizeof *SPECIAL; k++) {
    const int32_t id = est_vocab_find(v, SPECIAL[k], strlen(SPECIAL[k]));
    if (id >= 0)
      json_array_append_new(added, json_pack("{s:i,s:s,s:b,s:b,s:b,s:b,s:b}", "id", id, "content", SPECIAL[k],
                                             "single_word", 0, "lstrip", 0, "rstrip", 0, "normalized", 0,
                                             "special", 1));
  }
  const int32_t cls = est_vocab_find(v, "[CLS]", 5), sep = est_vocab_find(v, "[SEP]", 5);
  json_t *strip = o.strip_accents < 0 ? json_null() : json_boolean(o.strip_accents);
  json_t *root = json_pack(
    "{s:n,s:n,s:n,s:o,s:{s:s,s:b,s:b,s:o,s:b},s:{s:s},"
    "s:{s:s,s:[{s:{s:s,s:i}},{s:{s:s,s:i}},{s:{s:s,s:i}}],"
    "s:[{s:{s:s,s:i}},{s:{s:s,s:i}},{s:{s:s,s:i}},{s:{s:s,s:i}},{s:{s:s,s:i}}],"
    "s:{s:{s:s,s:[i],s:[s]},s:{s:s,s:[i],s:[s]}}},"
    "s:{s:s,s:s,s:b},s:{s:s,s:s,s:s,s:i,s:o}}",
    "version", "truncation", "padding", "added_tokens", added,
    "normalizer", "type", "BertNormalizer", "clean_text", o.clean_text, "handle_chinese_chars", o.handle_chinese_chars,
    "strip_accents", strip, "lowercase", o.lowercase,
    "pre_tokenizer", "type", "BertPreTokenizer",
    "post_processor", "type", "TemplateProcessing",
    "single", "SpecialToken", "id", "[CLS]", "type_id", 0, "Sequence", "id", "A", "type_id", 0, "SpecialToken", "id",
    "[SEP]", "type_id", 0,
    "pair", "SpecialToken", "id", "[CLS]", "type_id", 0, "Sequence", "id", "A", "type_id", 0, "SpecialToken", "id",
    "[SEP]", "type_id", 0, "Sequence", "id", "B", "type_id", 1, "SpecialToken", "id", "[SEP]", "type_id", 1,
    "special_tokens", "[CLS]", "id", "[CLS]", "ids", cls, "tokens", "[CLS]", "[SEP]", "id", "[SEP]", "ids", sep,
    "tokens", "[SEP]",
    "decoder", "type", "WordPiece", "prefix", "##", "cleanup", 1,
    "model", "type", "WordPiece", "unk_token", unk, "continuing_subword_prefix", "##", "max_input_chars_per_word",
    100, "vocab", vocab);
  if (!root) return est_error(EST_ERR_NO_MEMORY, "BertTokenizerFast's pipeline");
  json_object_set_new(root, "version", json_string("1.0"));
  tok_pipeline *pipe = NULL;
  est_status st = tok_pipeline_from_json(&pipe, root, est_vocab_path(v) ? est_vocab_path(v) : "vocab.txt");
  json_decref(root);
  if (st == EST_OK) tokenizer_attach_pipeline(tok, pipe);
  return st;
}
