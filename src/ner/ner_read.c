/* CoNLL and JSON lines token classification files (est/ner.h), and the label list. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "est/file.h"
#include "est/ner.h"

/* a growing sentence and the data it goes into */
typedef struct builder {
  est_ner_data *d;
  size_t cap;
  est_ner_sentence cur;
  size_t cur_cap;
} builder;

static char *dup_n(const char *s, size_t n) {
  char *p = malloc(n + 1);
  if (p) memcpy(p, s, n), p[n] = 0;
  return p;
}

static void sentence_free(est_ner_sentence *s) {
  for (size_t i = 0; i < s->num_words; i++) free(s->words[i]), free(s->tags[i]);
  free(s->words), free(s->tags);
  memset(s, 0, sizeof *s);
}

void est_ner_data_free(est_ner_data *d) {
  if (!d) return;
  for (size_t i = 0; i < d->count; i++) sentence_free(&d->sentences[i]);
  free(d->sentences);
  memset(d, 0, sizeof *d);
}

static est_status oom(void) { return est_error(EST_ERR_NO_MEMORY, "out of memory reading token classification data"); }

/* Takes word and tag (either may be freed on failure). */
static est_status add_word(builder *b, char *word, char *tag) {
  if (!word) return free(tag), oom();
  if (b->cur.num_words == b->cur_cap) {
    size_t cap = b->cur_cap ? 2 * b->cur_cap : 16;
    char **w = realloc(b->cur.words, cap * sizeof *w);
    if (w) b->cur.words = w;
    char **t = w ? realloc(b->cur.tags, cap * sizeof *t) : NULL;
    if (!t) return free(word), free(tag), oom();
    b->cur.tags = t;
    b->cur_cap = cap;
  }
  b->cur.words[b->cur.num_words] = word;
  b->cur.tags[b->cur.num_words++] = tag;
  return EST_OK;
}

/* The current sentence, when it has words, becomes the data's next. */
static est_status end_sentence(builder *b) {
  if (!b->cur.num_words) return EST_OK;
  if (b->d->count == b->cap) {
    size_t cap = b->cap ? 2 * b->cap : 64;
    est_ner_sentence *s = realloc(b->d->sentences, cap * sizeof *s);
    if (!s) return oom();
    b->d->sentences = s;
    b->cap = cap;
  }
  b->d->sentences[b->d->count++] = b->cur;
  memset(&b->cur, 0, sizeof b->cur);
  b->cur_cap = 0;
  return EST_OK;
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

static est_status conll_line(builder *b, const char *p, const char *end) {
  while (p < end && is_space(*p)) p++;
  while (end > p && is_space(end[-1])) end--;
  if (p == end) return end_sentence(b);
  if ((size_t)(end - p) >= 10 && !memcmp(p, "-DOCSTART-", 10)) return end_sentence(b);
  const char *w_end = p;
  while (w_end < end && !is_space(*w_end)) w_end++;
  const char *t = end;
  while (t > w_end && !is_space(t[-1])) t--;
  char *tag = t > w_end ? dup_n(t, (size_t)(end - t)) : NULL;
  if (t > w_end && !tag) return oom();
  return add_word(b, dup_n(p, (size_t)(w_end - p)), tag);
}

/* {"tokens": [...], "tags" | "ner_tags": [...]} */
static est_status jsonl_line(builder *b, const char *p, const char *end, const char *name, size_t line) {
  while (p < end && (is_space(*p))) p++;
  if (p == end) return EST_OK;
  json_error_t jerr;
  json_t *o = json_loadb(p, (size_t)(end - p), 0, &jerr);
  if (!o) return est_error(EST_ERR_INVALID_ARGUMENT, "%s:%zu: not JSON: %s", name, line, jerr.text);
  est_status st = EST_OK;
  json_t *tokens = json_object_get(o, "tokens"), *tags = json_object_get(o, "tags");
  if (!tags) tags = json_object_get(o, "ner_tags");
  if (!json_is_object(o) || !json_is_array(tokens) || (tags && !json_is_array(tags)))
    st = est_error(EST_ERR_INVALID_ARGUMENT, "%s:%zu: expected {\"tokens\": [strings], \"tags\": [strings]}", name,
                   line);
  else if (tags && json_array_size(tags) != json_array_size(tokens))
    st = est_error(EST_ERR_INVALID_ARGUMENT, "%s:%zu: %zu tokens but %zu tags", name, line, json_array_size(tokens),
                   json_array_size(tags));
  for (size_t i = 0; st == EST_OK && i < json_array_size(tokens); i++) {
    json_t *w = json_array_get(tokens, i), *t = tags ? json_array_get(tags, i) : NULL;
    if (!json_is_string(w) || (t && !json_is_string(t))) {
      st = est_error(EST_ERR_INVALID_ARGUMENT, "%s:%zu: token %zu: expected strings in \"tokens\" and \"tags\"", name,
                     line, i);
      break;
    }
    char *tag = t ? dup_n(json_string_value(t), json_string_length(t)) : NULL;
    if (t && !tag) st = oom();
    else st = add_word(b, dup_n(json_string_value(w), json_string_length(w)), tag);
  }
  json_decref(o);
  return st == EST_OK ? end_sentence(b) : st;
}

est_status est_ner_read_buffer(est_ner_data *out, const char *text, size_t len, const char *name) {
  memset(out, 0, sizeof *out);
  builder b = {.d = out};
  const char *p = text, *end = text + len;
  while (p < end && (is_space(*p) || *p == '\n')) p++;
  const int jsonl = p < end && *p == '{';
  if (memchr(text, 0, len))
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: a NUL byte: expected a CoNLL or JSON lines text file", name);
  est_status st = EST_OK;
  size_t line = 0;
  for (p = text; p < end && st == EST_OK;) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *e = nl ? nl : end;
    line++;
    st = jsonl ? jsonl_line(&b, p, e, name, line) : conll_line(&b, p, e);
    p = nl ? nl + 1 : end;
  }
  if (st == EST_OK) st = end_sentence(&b);
  sentence_free(&b.cur);
  if (st != EST_OK) est_ner_data_free(out);
  return st;
}

est_status est_ner_read_file(est_ner_data *out, const char *path) {
  memset(out, 0, sizeof *out);
  uint8_t *data;
  size_t size;
  est_status st = est_read_file(path, &data, &size);
  if (st != EST_OK) return st;
  st = est_ner_read_buffer(out, (const char *)data, size, path);
  free(data);
  return st;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

void est_ner_labels_free(char **labels, size_t n) {
  for (size_t i = 0; labels && i < n; i++) free(labels[i]);
  free(labels);
}

est_status est_ner_labels_from(const est_ner_data *d, char ***labels, size_t *n) {
  *labels = NULL;
  *n = 0;
  size_t total = 0;
  for (size_t i = 0; i < d->count; i++) total += d->sentences[i].num_words;
  const char **all = malloc((total ? total : 1) * sizeof *all);
  if (!all) return oom();
  size_t k = 0;
  for (size_t i = 0; i < d->count; i++)
    for (size_t w = 0; w < d->sentences[i].num_words; w++)
      if (d->sentences[i].tags[w]) all[k++] = d->sentences[i].tags[w];
  if (!k) {
    free(all);
    return est_error(EST_ERR_INVALID_ARGUMENT, "no tags in the training data: expected a tag after each token");
  }
  qsort(all, k, sizeof *all, cmp_str);
  size_t u = 0;
  for (size_t i = 0; i < k; i++)
    if (!u || strcmp(all[u - 1], all[i])) all[u++] = all[i];
  char **out = calloc(u, sizeof *out);
  if (!out) return free(all), oom();
  size_t j = 0;
  for (size_t i = 0; i < u; i++) /* "O" first */
    if (!strcmp(all[i], "O")) out[j++] = strdup("O");
  for (size_t i = 0; i < u; i++)
    if (strcmp(all[i], "O")) out[j++] = strdup(all[i]);
  free(all);
  for (size_t i = 0; i < u; i++)
    if (!out[i]) return est_ner_labels_free(out, u), oom();
  *labels = out;
  *n = u;
  return EST_OK;
}

int est_ner_label_index(const char *const *labels, size_t n, const char *tag) {
  if (!tag) return -1;
  for (size_t i = 0; i < n; i++)
    if (!strcmp(labels[i], tag)) return (int)i;
  return -1;
}
