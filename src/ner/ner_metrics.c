/* seqeval's entity-level metrics in its default mode (seqeval 1.2.2,
 * seqeval/metrics/sequence_labeling.py: get_entities, end_of_chunk, start_of_chunk,
 * precision_recall_fscore_support, accuracy_score), for est/ner.h.
 *
 * A tag's first character is its chunk tag (B, I, E, S, O, or any other byte, which only
 * the type rules below see) and its type is what follows the first '-' after that character
 * ("B-PER" -> PER, "O" -> "_", "BPER" -> PER). Entities are (type, begin, end) over the
 * sentences concatenated with an "O" after each, and one more "O" at the end. BILOU's L and
 * U, and IOB1's I-after-O, chunk as these rules make them (that is seqeval's default mode:
 * its strict mode with a scheme is another function). */
#include <stdlib.h>
#include <string.h>

#include "est/ner.h"

typedef struct chunk_tag {
  char tag;
  const char *type;             /* into the tag string, or "_" */
  size_t type_len;
} chunk_tag;

static chunk_tag split(const char *s) {
  if (!s || !*s) s = "O";
  chunk_tag c = {.tag = s[0], .type = s + 1};
  const char *dash = strchr(s + 1, '-');
  if (dash) c.type = dash + 1;
  c.type_len = strlen(c.type);
  if (!c.type_len) c.type = "_", c.type_len = 1;
  return c;
}

static int same_type(chunk_tag a, chunk_tag b) {
  return a.type_len == b.type_len && !memcmp(a.type, b.type, a.type_len);
}

/* end_of_chunk(prev_tag, tag, prev_type, type_) */
static int end_of_chunk(chunk_tag p, chunk_tag t) {
  if (p.tag == 'E' || p.tag == 'S') return 1;
  if ((p.tag == 'B' || p.tag == 'I') && (t.tag == 'B' || t.tag == 'S' || t.tag == 'O')) return 1;
  return p.tag != 'O' && p.tag != '.' && !same_type(p, t);
}

/* start_of_chunk(prev_tag, tag, prev_type, type_) */
static int start_of_chunk(chunk_tag p, chunk_tag t) {
  if (t.tag == 'B' || t.tag == 'S') return 1;
  if ((p.tag == 'E' || p.tag == 'S' || p.tag == 'O') && (t.tag == 'E' || t.tag == 'I')) return 1;
  return t.tag != 'O' && t.tag != '.' && !same_type(p, t);
}

void est_ner_entities_free(est_ner_entity *e, size_t n) {
  for (size_t i = 0; e && i < n; i++) free(e[i].type);
  free(e);
}

est_status est_ner_get_entities(est_ner_entity **out, size_t *n, const char *const *const *sentences,
                                const size_t *lengths, size_t num_sentences) {
  *out = NULL;
  *n = 0;
  size_t cap = 0, count = 0, i = 0, begin = 0;
  est_ner_entity *e = NULL;
  /* prev starts as tag 'O', type "" (which no real type equals) */
  chunk_tag prev = {.tag = 'O', .type = "", .type_len = 0};
  const chunk_tag O = split("O");
  for (size_t k = 0; k <= num_sentences; k++) {
    const size_t len = k < num_sentences ? lengths[k] + 1 : 0; /* + the "O" after it */
    for (size_t w = 0; w < len; w++, i++) {
      const chunk_tag t = w < lengths[k] ? split(sentences[k][w]) : O;
      if (end_of_chunk(prev, t)) {
        if (count == cap) {
          cap = cap ? 2 * cap : 64;
          est_ner_entity *g = realloc(e, cap * sizeof *g);
          if (!g) return est_ner_entities_free(e, count), est_error(EST_ERR_NO_MEMORY, "out of memory in get_entities");
          e = g;
        }
        char *type = malloc(prev.type_len + 1);
        if (!type) return est_ner_entities_free(e, count), est_error(EST_ERR_NO_MEMORY, "out of memory in get_entities");
        memcpy(type, prev.type, prev.type_len), type[prev.type_len] = 0;
        e[count++] = (est_ner_entity){type, begin, i - 1};
      }
      if (start_of_chunk(prev, t)) begin = i;
      prev = t;
    }
  }
  /* seq + ['O']: the "O" after the last sentence already closes what is open; the one more
   * "O" seqeval appends ends nothing (prev is 'O' there) */
  *out = e;
  *n = count;
  return EST_OK;
}

void est_ner_report_free(est_ner_report *r) {
  if (!r) return;
  for (size_t i = 0; i < r->num_types; i++) free(r->types[i].type);
  free(r->types);
  memset(r, 0, sizeof *r);
}

static int cmp_entity(const void *a, const void *b) {
  const est_ner_entity *x = a, *y = b;
  int c = strcmp(x->type, y->type);
  if (c) return c;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  return x->end < y->end ? -1 : x->end > y->end;
}

static double ratio(int64_t a, int64_t b) { return b ? (double)a / (double)b : 0.0; }
static double fscore(double p, double r) { return p + r > 0 ? 2 * p * r / (p + r) : 0.0; }

est_status est_ner_evaluate(est_ner_report *r, const char *const *const *gold, const char *const *const *pred,
                            const size_t *lengths, size_t num_sentences) {
  memset(r, 0, sizeof *r);
  est_ner_entity *t = NULL, *p = NULL;
  size_t nt = 0, np = 0;
  est_status st = est_ner_get_entities(&t, &nt, gold, lengths, num_sentences);
  if (st == EST_OK) st = est_ner_get_entities(&p, &np, pred, lengths, num_sentences);
  if (st != EST_OK) return est_ner_entities_free(t, nt), st;
  /* sets per type: sorted (type, begin, end), duplicates impossible (entities are disjoint) */
  if (nt) qsort(t, nt, sizeof *t, cmp_entity); /* no entities: t may be NULL, which qsort may not take */
  if (np) qsort(p, np, sizeof *p, cmp_entity);
  r->types = calloc(nt + np + 1, sizeof *r->types);
  if (!r->types) {
    est_ner_entities_free(t, nt), est_ner_entities_free(p, np);
    return est_error(EST_ERR_NO_MEMORY, "out of memory in the NER report");
  }
  /* merge the two sorted lists type by type: true_sum, pred_sum, tp_sum */
  size_t i = 0, j = 0;
  while (i < nt || j < np) {
    const char *type = i < nt && (j >= np || strcmp(t[i].type, p[j].type) <= 0) ? t[i].type : p[j].type;
    int64_t ts = 0, ps = 0, tp = 0;
    size_t i0 = i, j0 = j;
    while (i < nt && !strcmp(t[i].type, type)) i++, ts++;
    while (j < np && !strcmp(p[j].type, type)) j++, ps++;
    for (size_t a = i0, b = j0; a < i && b < j;) {
      const int c = cmp_entity(&t[a], &p[b]);
      if (!c) tp++, a++, b++;
      else if (c < 0) a++;
      else b++;
    }
    est_ner_type_score *s = &r->types[r->num_types++];
    s->type = strdup(type);
    if (!s->type) {
      est_ner_entities_free(t, nt), est_ner_entities_free(p, np), est_ner_report_free(r);
      return est_error(EST_ERR_NO_MEMORY, "out of memory in the NER report");
    }
    s->precision = ratio(tp, ps);
    s->recall = ratio(tp, ts);
    s->f1 = fscore(s->precision, s->recall);
    s->support = ts;
    r->num_true += ts, r->num_pred += ps, r->num_correct += tp;
  }
  r->precision = ratio(r->num_correct, r->num_pred);
  r->recall = ratio(r->num_correct, r->num_true);
  r->f1 = fscore(r->precision, r->recall);
  /* accuracy_score: tokens equal over all tokens (a NULL tag reads as "O") */
  int64_t right = 0, all = 0;
  for (size_t k = 0; k < num_sentences; k++)
    for (size_t w = 0; w < lengths[k]; w++, all++) {
      const char *a = gold[k][w] ? gold[k][w] : "O", *b = pred[k][w] ? pred[k][w] : "O";
      right += !strcmp(a, b);
    }
  r->accuracy = ratio(right, all);
  est_ner_entities_free(t, nt), est_ner_entities_free(p, np);
  return EST_OK;
}
