/* SQuAD JSON to examples, as google-research/bert run_squad.py's read_squad_examples does it
 * (docs/squad.md §2). Re-implemented from its behaviour; tests/reference/squad_read_reference.py
 * runs the unchanged function and tests/test_squad_read.c compares against what it wrote.
 *
 * Per paragraph the context is split into words on exactly five characters (" ", "\t",
 * "\r", "\n", U+202F) while recording, for every code point, the index of the word it is in
 * or follows (char_to_word_offset: -1 for leading whitespace). A training answer then maps
 * answer_start and answer_start + len(text) - 1 (code points) through that table, and is
 * kept only when " ".join(whitespace_tokenize(text)) occurs in the words it spans.
 *
 * The JSON tree is dropped when reading ends; what stays is, per paragraph, its words (one
 * byte block, NUL-separated, and a pointer table) and per question its strings, all in a
 * chunked arena, so a 40 MB train-v1.1.json costs about its size again plus the examples. */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json_error.h"
#include "est/log.h"
#include "squad/squad_internal.h"
#include "text/unicode.h"

/* ---- arena: strings and word tables, freed at once ---------------------------------- */

typedef struct chunk {
  struct chunk *next;
  size_t used, cap;
  _Alignas(16) unsigned char data[];
} chunk;

struct est_squad_storage {
  chunk *head;
};

enum { CHUNK_BYTES = 1 << 20 };

static void *arena_alloc(struct est_squad_storage *a, size_t n) {
  n = (n + 15) & ~(size_t)15;
  if (!a->head || a->head->cap - a->head->used < n) {
    size_t cap = n > CHUNK_BYTES ? n : CHUNK_BYTES;
    chunk *c = malloc(sizeof *c + cap);
    if (!c) return NULL;
    c->next = a->head;
    c->used = 0;
    c->cap = cap;
    a->head = c;
  }
  void *p = a->head->data + a->head->used;
  a->head->used += n;
  return p;
}

static const char *arena_strdup(struct est_squad_storage *a, const char *s, size_t n) {
  char *p = arena_alloc(a, n + 1);
  if (!p) return NULL;
  memcpy(p, s, n);
  p[n] = '\0';
  return p;
}

void est_squad_examples_free(est_squad_examples *ex) {
  if (!ex) return;
  if (ex->storage_) {
    for (chunk *c = ex->storage_->head, *next; c; c = next) {
      next = c->next;
      free(c);
    }
    free(ex->storage_);
  }
  free(ex->examples);
  free(ex);
}

/* ---- the reader's state --------------------------------------------------------------- */

typedef struct reader {
  const char *name;              /* the file, for messages */
  bool is_training, v2;
  est_squad_examples *ex;
  size_t cap;                    /* of ex->examples */
  /* The current paragraph. */
  const char *const *words;
  size_t nwords;
  int64_t *c2w;                  /* char_to_word_offset, one per code point */
  size_t ncp, c2w_cap;
  /* Where we are, for messages. */
  size_t di, pi, qi;
  const char *qid;
  squad_buf actual, cleaned;     /* scratch for the answer check */
} reader;

/* Messages: "<file>: data[d].paragraphs[p].qas[q] (id "x"): <what>". */
static est_status fail_at(reader *r, int depth, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static est_status fail_at(reader *r, int depth, const char *fmt, ...) {
  char where[160] = "";
  if (depth == 1) snprintf(where, sizeof where, "data[%zu]: ", r->di);
  if (depth == 2) snprintf(where, sizeof where, "data[%zu].paragraphs[%zu]: ", r->di, r->pi);
  if (depth == 3) snprintf(where, sizeof where, "data[%zu].paragraphs[%zu].qas[%zu]: ", r->di, r->pi, r->qi);
  char what[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  if (depth == 3 && r->qid)
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: %.*s (id \"%s\"): %s", r->name, (int)strlen(where) - 2, where,
                     r->qid, what);
  return est_error(EST_ERR_INVALID_ARGUMENT, "%s: %s%s", r->name, where, what);
}

/* "an object", "a string", ...: how an error names a JSON value's type. */
const char *est_squad_json_type_name(const json_t *v) {
  switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a float";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
  }
}

/* obj[key] of the given jansson type, or an error naming the field ("missing field" is the
 * reference's KeyError, "must be" its TypeError or est's stricter check). */
static est_status get_field_in(reader *r, int depth, const char *in, const json_t *obj, const char *key,
                               json_type want, const char *want_name, json_t **out) {
  json_t *v = json_object_get(obj, key);
  if (!v) return fail_at(r, depth, "%smissing field \"%s\"", in, key);
  bool ok = json_typeof(v) == want || (want == JSON_TRUE && json_is_boolean(v));
  if (!ok) return fail_at(r, depth, "%sfield \"%s\" must be %s, not %s", in, key, want_name, est_squad_json_type_name(v));
  *out = v;
  return EST_OK;
}

static est_status get_field(reader *r, int depth, const json_t *obj, const char *key, json_type want,
                            const char *want_name, json_t **out) {
  return get_field_in(r, depth, "", obj, key, want, want_name, out);
}

/* ---- one paragraph: words and char_to_word_offset --------------------------------------- */

/* run_squad.py's is_whitespace: not Python's isspace (no NBSP, no U+3000, no \v \f). */
static bool squad_is_whitespace(uint32_t c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == 0x202F;
}

static est_status split_context(reader *r, const char *s, size_t n) {
  struct est_squad_storage *a = r->ex->storage_;
  if (r->c2w_cap < n) {                  /* code points <= bytes */
    int64_t *p = realloc(r->c2w, n * sizeof *p);
    if (!p) return est_error(EST_ERR_NO_MEMORY, "%s: out of memory splitting a context", r->name);
    r->c2w = p;
    r->c2w_cap = n;
  }
  /* Words are the context's bytes with each whitespace run turned into one NUL: at most n
   * + 1 bytes. Count the words first for the pointer table. */
  char *bytes = arena_alloc(a, n + 1);
  if (!bytes) return est_error(EST_ERR_NO_MEMORY, "%s: out of memory", r->name);
  const uint8_t *u = (const uint8_t *)s;
  size_t nwords = 0, ncp = 0, w = 0;
  bool prev_ws = true;
  for (size_t i = 0; i < n;) {
    size_t adv;
    uint32_t c = tok_utf8_next(u + i, n - i, &adv);
    if (squad_is_whitespace(c)) {
      if (!prev_ws) bytes[w++] = '\0';
      prev_ws = true;
    } else {
      if (prev_ws) nwords++;
      memcpy(bytes + w, s + i, adv);
      w += adv;
      prev_ws = false;
    }
    r->c2w[ncp++] = (int64_t)nwords - 1;
    i += adv;
  }
  if (!prev_ws) bytes[w++] = '\0';
  const char **words = arena_alloc(a, (nwords ? nwords : 1) * sizeof *words);
  if (!words) return est_error(EST_ERR_NO_MEMORY, "%s: out of memory", r->name);
  for (size_t k = 0, off = 0; k < nwords; k++) {
    words[k] = bytes + off;
    off += strlen(bytes + off) + 1;
  }
  r->words = words;
  r->nwords = nwords;
  r->ncp = ncp;
  return EST_OK;
}

/* Python's list[i] for i >= -len: negative counts from the end. */
static int64_t py_index(const int64_t *list, size_t n, int64_t i) { return list[i < 0 ? (int64_t)n + i : i]; }

/* Python's slice bounds list[a:b] -> [lo, hi), clamped as CPython's PySlice_AdjustIndices. */
static void py_slice(size_t n, int64_t a, int64_t b, size_t *lo, size_t *hi) {
  int64_t len = (int64_t)n;
  if (a < 0) a = a + len < 0 ? 0 : a + len;
  if (a > len) a = len;
  if (b < 0) b = b + len < 0 ? 0 : b + len;
  if (b > len) b = len;
  *lo = (size_t)a;
  *hi = (size_t)(b > a ? b : a);
}

/* ---- one question ----------------------------------------------------------------------- */

static est_status push_example(reader *r, const est_squad_example *e) {
  est_squad_examples *ex = r->ex;
  if (ex->count == r->cap) {
    size_t cap = r->cap ? 2 * r->cap : 256;
    est_squad_example *p = realloc(ex->examples, cap * sizeof *p);
    if (!p) return est_error(EST_ERR_NO_MEMORY, "%s: out of memory", r->name);
    ex->examples = p;
    r->cap = cap;
  }
  ex->examples[ex->count++] = *e;
  return EST_OK;
}

static est_status read_question(reader *r, const json_t *qa) {
  struct est_squad_storage *a = r->ex->storage_;
  est_status st;
  json_t *id, *question;
  r->qid = NULL;
  if (!json_is_object(qa)) return fail_at(r, 3, "must be an object, not %s", est_squad_json_type_name(qa));
  if ((st = get_field(r, 3, qa, "id", JSON_STRING, "a string", &id))) return st;
  r->qid = json_string_value(id);
  if ((st = get_field(r, 3, qa, "question", JSON_STRING, "a string", &question))) return st;

  est_squad_example e = {
    .qas_id = arena_strdup(a, json_string_value(id), json_string_length(id)),
    .question_text = arena_strdup(a, json_string_value(question), json_string_length(question)),
    .doc_tokens = r->words,
    .num_doc_tokens = r->nwords,
    .paragraph_index = r->ex->num_paragraphs - 1,
    .orig_answer_text = NULL,
    .start_position = -1,
    .end_position = -1,
    .is_impossible = false,
  };
  if (!e.qas_id || !e.question_text) return est_error(EST_ERR_NO_MEMORY, "%s: out of memory", r->name);
  r->ex->num_questions++;
  const json_t *answers_seen = json_object_get(qa, "answers");
  if (json_is_array(answers_seen) && json_array_size(answers_seen) > 0) r->ex->num_with_answers++;
  if (!r->is_training) return push_example(r, &e);

  if (r->v2) {
    json_t *imp;
    if ((st = get_field(r, 3, qa, "is_impossible", JSON_TRUE, "true or false", &imp))) return st;
    e.is_impossible = json_is_true(imp);
  }
  /* The reference evaluates len(qa["answers"]) before looking at is_impossible: the field
   * must be there even for an impossible question. */
  json_t *answers;
  if ((st = get_field(r, 3, qa, "answers", JSON_ARRAY, "an array", &answers))) return st;
  if (json_array_size(answers) != 1 && !e.is_impossible)
    return fail_at(r, 3, "For training, each question should have exactly 1 answer. (it has %zu)",
                   json_array_size(answers));
  if (e.is_impossible) {
    e.orig_answer_text = "";
    return push_example(r, &e);
  }

  const json_t *ans = json_array_get(answers, 0);
  json_t *text, *start;
  if (!json_is_object(ans)) return fail_at(r, 3, "answers[0] must be an object, not %s", est_squad_json_type_name(ans));
  if ((st = get_field_in(r, 3, "answers[0]: ", ans, "text", JSON_STRING, "a string", &text))) return st;
  if ((st = get_field_in(r, 3, "answers[0]: ", ans, "answer_start", JSON_INTEGER, "an integer", &start))) return st;
  const char *t = json_string_value(text);
  size_t tlen = json_string_length(text);
  int64_t offset = (int64_t)json_integer_value(start);
  int64_t length = (int64_t)squad_utf8_length(t, tlen);
  /* The reference indexes char_to_word_offset[answer_start] and [answer_start + length - 1]
   * with Python's indexing. Past the end is its IndexError; est also refuses a negative
   * answer_start, which Python would count from the end of the context (§2.4). */
  if (offset < 0 || offset >= (int64_t)r->ncp)
    return fail_at(r, 3, "answers[0].answer_start = %lld is outside the context (%zu characters)",
                   (long long)offset, r->ncp);
  if (offset + length - 1 >= (int64_t)r->ncp)
    return fail_at(r, 3, "answers[0]: the answer (%lld characters from answer_start = %lld) runs past the end of "
                   "the context (%zu characters)", (long long)length, (long long)offset, r->ncp);
  /* offset + length - 1 is -1 only for an empty text at 0: Python's [-1], the last entry. */
  e.start_position = py_index(r->c2w, r->ncp, offset);
  e.end_position = py_index(r->c2w, r->ncp, offset + length - 1);
  e.orig_answer_text = arena_strdup(a, t, tlen);
  if (!e.orig_answer_text) return est_error(EST_ERR_NO_MEMORY, "%s: out of memory", r->name);

  /* actual_text = " ".join(doc_tokens[start_position:(end_position + 1)]): Python's slice,
   * so a start of -1 (leading whitespace) counts from the end. */
  size_t lo, hi;
  py_slice(r->nwords, e.start_position, e.end_position + 1, &lo, &hi);
  r->actual.len = 0;
  if (!squad_buf_reserve(&r->actual, 0)) return est_error(EST_ERR_NO_MEMORY, "%s: out of memory", r->name);
  r->actual.p[0] = '\0';
  for (size_t k = lo; k < hi; k++)
    if ((k > lo && !squad_buf_append(&r->actual, " ", 1)) ||
        !squad_buf_append(&r->actual, r->words[k], strlen(r->words[k])))
      return est_error(EST_ERR_NO_MEMORY, "%s: out of memory", r->name);
  if (!squad_whitespace_join(t, tlen, &r->cleaned)) return est_error(EST_ERR_NO_MEMORY, "%s: out of memory", r->name);
  /* str.find on code points finds what a byte search finds in valid UTF-8. */
  bool found = r->cleaned.len == 0 || memmem(r->actual.p, r->actual.len, r->cleaned.p, r->cleaned.len) != NULL;
  if (!found) {
    EST_LOG_WARN("Could not find answer: '%s' vs. '%s'", r->actual.p, r->cleaned.p);
    r->ex->num_skipped++;
    return EST_OK;
  }
  return push_example(r, &e);
}

/* ---- the file ------------------------------------------------------------------------- */

static est_status read_root(reader *r, const json_t *root) {
  est_status st;
  json_t *data;
  if (!json_is_object(root)) return est_error(EST_ERR_INVALID_ARGUMENT, "%s: the top level must be a JSON object, not %s",
                                              r->name, est_squad_json_type_name(root));
  if ((st = get_field(r, 0, root, "data", JSON_ARRAY, "an array", &data))) return st;
  for (r->di = 0; r->di < json_array_size(data); r->di++) {
    const json_t *entry = json_array_get(data, r->di);
    json_t *paragraphs;
    if (!json_is_object(entry)) return fail_at(r, 1, "must be an object, not %s", est_squad_json_type_name(entry));
    if ((st = get_field(r, 1, entry, "paragraphs", JSON_ARRAY, "an array", &paragraphs))) return st;
    for (r->pi = 0; r->pi < json_array_size(paragraphs); r->pi++) {
      const json_t *p = json_array_get(paragraphs, r->pi);
      json_t *context, *qas;
      if (!json_is_object(p)) return fail_at(r, 2, "must be an object, not %s", est_squad_json_type_name(p));
      if ((st = get_field(r, 2, p, "context", JSON_STRING, "a string", &context))) return st;
      if ((st = split_context(r, json_string_value(context), json_string_length(context)))) return st;
      r->ex->num_paragraphs++;
      if ((st = get_field(r, 2, p, "qas", JSON_ARRAY, "an array", &qas))) return st;
      for (r->qi = 0; r->qi < json_array_size(qas); r->qi++)
        if ((st = read_question(r, json_array_get(qas, r->qi)))) return st;
    }
  }
  return EST_OK;
}

/* Parses the JSON (from memory or a stream) and reads it. */
static est_status read_json(json_t *root, const json_error_t *jerr, const char *name, bool is_training,
                            bool version_2_with_negative, est_squad_examples **out) {
  if (!root)
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s:%d:%d: not valid JSON: %s", name, jerr->line, jerr->column,
                     est_json_error_text(jerr));
  est_squad_examples *ex = calloc(1, sizeof *ex);
  if (ex) ex->storage_ = calloc(1, sizeof *ex->storage_);
  if (!ex || !ex->storage_) {
    json_decref(root);
    est_squad_examples_free(ex);
    return est_error(EST_ERR_NO_MEMORY, "%s: out of memory", name);
  }
  reader r = {.name = name, .is_training = is_training, .v2 = version_2_with_negative, .ex = ex};
  est_status st = read_root(&r, root);
  json_decref(root);
  free(r.c2w);
  squad_buf_free(&r.actual);
  squad_buf_free(&r.cleaned);
  if (st != EST_OK) {
    est_squad_examples_free(ex);
    return st;
  }
  *out = ex;
  return EST_OK;
}

static est_status bom_error(const char *name) {
  return est_error(EST_ERR_INVALID_ARGUMENT, "%s: starts with a UTF-8 byte-order mark, which Python's json.load "
                   "rejects (\"Unexpected UTF-8 BOM\"); remove it", name);
}

/* Duplicate keys: the last one wins, as in Python's json (jansson without
 * JSON_REJECT_DUPLICATES). Any value is accepted at the top level so that a list there gets
 * our message rather than jansson's. */
enum { JSON_FLAGS = JSON_DECODE_ANY };

est_status est_squad_read_examples_buffer(const char *data, size_t size, const char *name, bool is_training,
                                          bool version_2_with_negative, est_squad_examples **out) {
  *out = NULL;
  if (size >= 3 && !memcmp(data, "\xEF\xBB\xBF", 3)) return bom_error(name);
  json_error_t jerr;
  json_t *root = json_loadb(data, size, JSON_FLAGS, &jerr);
  return read_json(root, &jerr, name, is_training, version_2_with_negative, out);
}

est_status est_squad_read_examples(const char *path, bool is_training, bool version_2_with_negative,
                                   est_squad_examples **out) {
  *out = NULL;
  /* Parsed from the stream: the file's bytes are never held beside the JSON tree. */
  FILE *f = fopen(path, "rb");
  if (!f) return est_error(errno == ENOENT ? EST_ERR_NOT_FOUND : EST_ERR_IO, "cannot open %s: %s", path, strerror(errno));
  unsigned char head[3];
  size_t got = fread(head, 1, 3, f);
  if (got == 3 && !memcmp(head, "\xEF\xBB\xBF", 3)) {
    fclose(f);
    return bom_error(path);
  }
  rewind(f);
  json_error_t jerr;
  json_t *root = json_loadf(f, JSON_FLAGS, &jerr);
  bool read_failed = ferror(f);
  fclose(f);
  if (read_failed) {
    json_decref(root);
    return est_error(EST_ERR_IO, "error reading %s", path);
  }
  return read_json(root, &jerr, path, is_training, version_2_with_negative, out);
}

/* ---- one question about a text in memory (est predict / est serve) ----------------------- */

est_status est_squad_examples_create(est_squad_examples **out) {
  *out = calloc(1, sizeof **out);
  if (*out) (*out)->storage_ = calloc(1, sizeof *(*out)->storage_);
  if (!*out || !(*out)->storage_) {
    est_squad_examples_free(*out);
    *out = NULL;
    return est_error(EST_ERR_NO_MEMORY, "squad examples: out of memory");
  }
  return EST_OK;
}

est_status est_squad_examples_add_text(est_squad_examples *ex, const char *qas_id, const char *question,
                                       const char *context, size_t context_size, const int64_t **word_starts) {
  /* the reader's paragraph step, then a prediction question on it */
  reader r = {.name = qas_id, .ex = ex, .cap = ex->count};
  est_status st = split_context(&r, context, context_size);
  int64_t *starts = st == EST_OK ? arena_alloc(ex->storage_, (r.nwords ? r.nwords : 1) * sizeof *starts) : NULL;
  if (st == EST_OK && !starts) st = est_error(EST_ERR_NO_MEMORY, "%s: out of memory", qas_id);
  if (st == EST_OK) {
    /* a word's first code point is the first one char_to_word_offset gives its index */
    for (size_t i = r.ncp; i-- > 0;)
      if (r.c2w[i] >= 0) starts[r.c2w[i]] = (int64_t)i;
    ex->num_paragraphs++;
    ex->num_questions++;
    const est_squad_example e = {.qas_id = arena_strdup(ex->storage_, qas_id, strlen(qas_id)),
                                 .question_text = arena_strdup(ex->storage_, question, strlen(question)),
                                 .doc_tokens = r.words, .num_doc_tokens = r.nwords,
                                 .paragraph_index = ex->num_paragraphs - 1, .start_position = -1, .end_position = -1};
    st = e.qas_id && e.question_text ? push_example(&r, &e) : est_error(EST_ERR_NO_MEMORY, "%s: out of memory", qas_id);
  }
  free(r.c2w);
  if (st == EST_OK && word_starts) *word_starts = starts;
  return st;
}
