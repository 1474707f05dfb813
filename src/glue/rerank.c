/* Cross-encoder reranking's (query, passage, label) files and its ranking metrics, MRR@k and
 * NDCG@k grouped by query (est/rerank.h, docs/rerank.md). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/file.h"
#include "est/rerank.h"
#include "est/tokenizer.h"

void est_rerank_data_free(est_rerank_data *d) {
  if (!d) return;
  for (size_t i = 0; i < d->count; i++) free(d->items[i].query), free(d->items[i].passage);
  free(d->items);
  memset(d, 0, sizeof *d);
}

/* A label field: a finite number, all of it. */
static int parse_label(const char *s, size_t n, float *out) {
  char buf[64];
  if (n == 0 || n >= sizeof buf) return 0;
  memcpy(buf, s, n);
  buf[n] = 0;
  char *end;
  const double v = strtod(buf, &end);
  if (end != buf + n || !isfinite(v) || !isfinite((float)v)) return 0;
  *out = (float)v;
  return 1;
}

static char *dup_n(const char *s, size_t n) {
  char *p = malloc(n + 1);
  if (p) memcpy(p, s, n), p[n] = 0;
  return p;
}

static est_status add_pair(est_rerank_data *d, size_t *cap, const char *q, size_t qn, const char *p, size_t pn,
                           float label) {
  if (d->count == *cap) {
    const size_t grown_cap = *cap ? 2 * *cap : 256;
    est_rerank_pair *grown = realloc(d->items, grown_cap * sizeof *grown);
    if (!grown) return est_error(EST_ERR_NO_MEMORY, "out of memory reading pairs");
    d->items = grown, *cap = grown_cap;
  }
  est_rerank_pair *x = &d->items[d->count];
  x->query = dup_n(q, qn), x->passage = dup_n(p, pn), x->label = label, x->query_index = -1;
  if (!x->query || !x->passage) {
    free(x->query), free(x->passage);
    return est_error(EST_ERR_NO_MEMORY, "out of memory reading pairs");
  }
  d->count++;
  return EST_OK;
}

static int has_suffix(const char *s, const char *suffix) {
  const size_t n = strlen(s), m = strlen(suffix);
  return n >= m && !strcmp(s + n - m, suffix);
}

/* One line of a JSON lines file. */
static est_status json_line(est_rerank_data *d, size_t *cap, const char *path, size_t line_no, const char *s,
                            size_t n) {
  json_error_t jerr;
  json_t *root = json_loadb(s, n, 0, &jerr);
  if (!root) return est_error(EST_ERR_INVALID_ARGUMENT, "%s:%zu: not JSON: %s", path, line_no, jerr.text);
  const json_t *q = json_object_get(root, "query"), *p = json_object_get(root, "passage");
  if (!p) p = json_object_get(root, "text");
  const json_t *l = json_object_get(root, "label");
  if (!l) l = json_object_get(root, "score");
  est_status st = EST_OK;
  if (!json_is_object(root) || !json_is_string(q) || !json_is_string(p))
    st = est_error(EST_ERR_INVALID_ARGUMENT, "%s:%zu: expected an object with string \"query\" and \"passage\"",
                   path, line_no);
  else if (l && (!json_is_number(l) || !isfinite(json_number_value(l)) || !isfinite((float)json_number_value(l))))
    st = est_error(EST_ERR_INVALID_ARGUMENT, "%s:%zu: \"label\" must be a finite number", path, line_no);
  if (st == EST_OK)
    st = add_pair(d, cap, json_string_value(q), json_string_length(q), json_string_value(p), json_string_length(p),
                  l ? (float)json_number_value(l) : 0.0f);
  json_decref(root);
  return st;
}

/* One line of a TSV: query TAB passage [TAB label]. */
static est_status tsv_line(est_rerank_data *d, size_t *cap, const char *path, size_t line_no, const char *s,
                           size_t n) {
  const char *t1 = memchr(s, '\t', n);
  if (!t1)
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s:%zu: expected query<TAB>passage<TAB>label, found no TAB", path,
                     line_no);
  const char *p = t1 + 1, *end = s + n;
  const char *t2 = memchr(p, '\t', (size_t)(end - p));
  float label = 0.0f;
  if (t2) {
    const char *l = t2 + 1;
    if (memchr(l, '\t', (size_t)(end - l)))
      return est_error(EST_ERR_INVALID_ARGUMENT, "%s:%zu: more than 3 fields (query, passage, label)", path, line_no);
    if (!parse_label(l, (size_t)(end - l), &label)) {
      if (d->count == 0 && line_no == 1) return EST_OK; /* a header */
      return est_error(EST_ERR_INVALID_ARGUMENT, "%s:%zu: label \"%.*s\" is not a finite number", path, line_no,
                       (int)((end - l) > 40 ? 40 : (end - l)), l);
    }
  }
  return add_pair(d, cap, s, (size_t)(t1 - s), p, (size_t)((t2 ? t2 : end) - p), label);
}

/* Numbers the distinct queries in order of first appearance (a hash table over the texts). */
static est_status number_queries(est_rerank_data *d) {
  size_t slots = 16;
  while (slots < 2 * d->count) slots *= 2;
  size_t *table = malloc(slots * sizeof *table);
  if (!table) return est_error(EST_ERR_NO_MEMORY, "out of memory grouping queries");
  for (size_t i = 0; i < slots; i++) table[i] = SIZE_MAX;
  d->num_queries = 0;
  for (size_t i = 0; i < d->count; i++) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (const unsigned char *c = (const unsigned char *)d->items[i].query; *c; c++) h = (h ^ *c) * 1099511628211ull;
    size_t at = (size_t)h & (slots - 1);
    while (table[at] != SIZE_MAX && strcmp(d->items[table[at]].query, d->items[i].query)) at = (at + 1) & (slots - 1);
    if (table[at] == SIZE_MAX) {
      table[at] = i;
      d->items[i].query_index = (int64_t)d->num_queries++;
    } else {
      d->items[i].query_index = d->items[table[at]].query_index;
    }
  }
  free(table);
  return EST_OK;
}

est_status est_rerank_read_file(est_rerank_data *out, const char *path) {
  memset(out, 0, sizeof *out);
  uint8_t *data = NULL;
  size_t size = 0, cap = 0;
  est_status st = est_read_file(path, &data, &size);
  if (st != EST_OK) return st;
  const size_t bad = est_utf8_first_invalid((const char *)data, size);
  if (bad != SIZE_MAX) {
    size_t line = 1;
    for (size_t i = 0; i < bad; i++) line += data[i] == '\n';
    free(data);
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s:%zu: invalid UTF-8", path, line);
  }
  const int json = has_suffix(path, ".jsonl") || has_suffix(path, ".json");
  const char *s = (const char *)data, *end = s + size;
  for (size_t line_no = 1; st == EST_OK && s < end; line_no++) {
    const char *nl = memchr(s, '\n', (size_t)(end - s));
    size_t n = (size_t)((nl ? nl : end) - s);
    if (n && s[n - 1] == '\r') n--;
    if (memchr(s, 0, n)) st = est_error(EST_ERR_INVALID_ARGUMENT, "%s:%zu: a NUL byte", path, line_no);
    else if (json && n == 0) { /* blank lines between JSON lines */
    } else if (json) st = json_line(out, &cap, path, line_no, s, n);
    else if (n == 0) st = est_error(EST_ERR_INVALID_ARGUMENT, "%s:%zu: an empty line; expected query<TAB>passage<TAB>label",
                                    path, line_no);
    else st = tsv_line(out, &cap, path, line_no, s, n);
    s = nl ? nl + 1 : end;
  }
  free(data);
  if (st == EST_OK) st = number_queries(out);
  if (st != EST_OK) est_rerank_data_free(out);
  return st;
}

/* ---- metrics ------------------------------------------------------------------------- */

typedef struct ranked {
  float score;
  size_t at;  /* input position: the tie-break */
} ranked;

static int by_score(const void *a, const void *b) {
  const ranked *x = a, *y = b;
  if (x->score != y->score) return x->score > y->score ? -1 : 1;
  return x->at < y->at ? -1 : x->at > y->at;
}

static int by_gain(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x > y ? -1 : x < y;
}

est_status est_rerank_evaluate(est_rerank_report *r, const int64_t *query_index, const float *labels,
                               const float *scores, size_t n, int k) {
  memset(r, 0, sizeof *r);
  if (k < 1) return est_error(EST_ERR_INVALID_ARGUMENT, "rerank metrics: k = %d; must be >= 1", k);
  int64_t nq = 0;
  for (size_t i = 0; i < n; i++) {
    if (query_index[i] < 0) return est_error(EST_ERR_INVALID_ARGUMENT, "rerank metrics: pair %zu has no query", i);
    if (!isfinite(scores[i])) return est_error(EST_ERR_INVALID_ARGUMENT, "rerank metrics: pair %zu's score is %g", i,
                                               (double)scores[i]);
    nq = query_index[i] + 1 > nq ? query_index[i] + 1 : nq;
  }
  /* the pairs of each query, in input order: a counting sort */
  size_t *start = calloc((size_t)nq + 1, sizeof *start), *order = malloc((n + 1) * sizeof *order);
  ranked *rows = malloc((n + 1) * sizeof *rows);
  double *gains = malloc((n + 1) * sizeof *gains);
  if (!start || !order || !rows || !gains) {
    free(start), free(order), free(rows), free(gains);
    return est_error(EST_ERR_NO_MEMORY, "rerank metrics: out of memory");
  }
  for (size_t i = 0; i < n; i++) start[query_index[i] + 1]++;
  for (int64_t q = 0; q < nq; q++) start[q + 1] += start[q];
  for (size_t i = 0; i < n; i++) order[start[query_index[i]]++] = i;
  for (int64_t q = nq; q > 0; q--) start[q] = start[q - 1]; /* each start[q] had moved to its end */
  start[0] = 0;
  double mrr = 0.0, ndcg = 0.0;
  for (int64_t q = 0; q < nq; q++) {
    const size_t m = start[q + 1] - start[q];
    int relevant = 0;
    for (size_t j = 0; j < m; j++) {
      const size_t i = order[start[q] + j];
      rows[j] = (ranked){scores[i], i};
      gains[j] = labels[i] > 0 ? labels[i] : 0.0;
      relevant |= labels[i] >= 0.5f;
    }
    if (!m) continue;
    if (!relevant) {
      r->num_skipped++;
      continue;
    }
    qsort(rows, m, sizeof *rows, by_score);
    qsort(gains, m, sizeof *gains, by_gain);
    double dcg = 0.0, ideal = 0.0, rr = 0.0;
    for (size_t j = 0; j < m && j < (size_t)k; j++) {
      const double g = labels[rows[j].at] > 0 ? labels[rows[j].at] : 0.0;
      dcg += g / log2((double)j + 2.0);
      ideal += gains[j] / log2((double)j + 2.0);
      if (rr == 0.0 && labels[rows[j].at] >= 0.5f) rr = 1.0 / (double)(j + 1);
    }
    mrr += rr;
    ndcg += ideal > 0 ? dcg / ideal : 0.0;
    r->num_queries++;
  }
  if (r->num_queries) r->mrr = mrr / (double)r->num_queries, r->ndcg = ndcg / (double)r->num_queries;
  free(start), free(order), free(rows), free(gains);
  return EST_OK;
}
