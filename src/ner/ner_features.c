/* Token classification features in windows, and predictions merged back word by word
 * (est/ner.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/ner.h"

typedef struct window {
  int64_t sentence;
  size_t first, end;            /* words [first, end) */
} window;

void est_ner_features_free(est_ner_features *f) {
  if (!f) return;
  free(f->items);
  free(f->block_);
  memset(f, 0, sizeof *f);
}

static int32_t special(const est_tokenizer *tok, const char *token, est_status *st) {
  if (!est_tokenizer_vocab(tok)) { /* a Unigram / BPE tokenizer.json (est_tokenizer_open_any) */
    if (*st == EST_OK)
      *st = est_error(EST_ERR_UNIMPLEMENTED, "token classification reads words through a WordPiece vocab only so "
                      "far; this tokenizer.json's model is not one with BertNormalizer + BertPreTokenizer");
    return -1;
  }
  const int32_t id = est_vocab_find(est_tokenizer_vocab(tok), token, strlen(token));
  if (id < 0 && *st == EST_OK)
    *st = est_error(EST_ERR_INVALID_ARGUMENT, "vocabulary %s has no %s token", est_vocab_path(est_tokenizer_vocab(tok)),
                    token);
  return id;
}

/* The words' sub-tokens of one sentence: ids (all words, in order) and per word its offset
 * and count (at least 1: [UNK] for a word the tokenizer drops). */
typedef struct tokenized {
  int32_t *ids;
  size_t *offset, *count;
  size_t n, cap;
} tokenized;

static est_status tokenize_sentence(tokenized *t, const est_ner_sentence *s, est_tokenizer *tok, int32_t unk) {
  free(t->offset);
  t->offset = malloc(2 * (s->num_words + 1) * sizeof(size_t));
  if (!t->offset) return est_error(EST_ERR_NO_MEMORY, "out of memory tokenizing");
  t->count = t->offset + s->num_words + 1;
  t->n = 0;
  for (size_t w = 0; w < s->num_words; w++) {
    const int32_t *ids;
    size_t n;
    est_status st = est_tokenizer_encode(tok, s->words[w], strlen(s->words[w]), &ids, &n);
    if (st != EST_OK) return st;
    if (!n) ids = &unk, n = 1;
    if (t->n + n > t->cap) {
      size_t cap = 2 * (t->n + n) + 64;
      int32_t *g = realloc(t->ids, cap * sizeof *g);
      if (!g) return est_error(EST_ERR_NO_MEMORY, "out of memory tokenizing");
      t->ids = g, t->cap = cap;
    }
    t->offset[w] = t->n;
    t->count[w] = n;
    memcpy(t->ids + t->n, ids, n * sizeof *ids);
    t->n += n;
  }
  t->offset[s->num_words] = t->n;
  return EST_OK;
}

/* A window's sub-tokens of word w: its count, cut to what is left of L after the window's
 * earlier words (a word longer than a window keeps its first L sub-tokens). */
static size_t take(const tokenized *t, size_t w, size_t used, size_t L) {
  size_t n = t->count[w];
  return used + n > L ? L - used : n;
}

/* Windows of whole words of at most L sub-tokens, each starting `stride` sub-tokens (or the
 * next word boundary after) past the previous one, the last ending at the sentence's end. */
static est_status sentence_windows(window **ws, size_t *nw, size_t *cap, int64_t sentence, const tokenized *t,
                                   size_t num_words, size_t L, size_t stride) {
  size_t start = 0;
  for (;;) {
    size_t end = start, used = 0;
    while (end < num_words && (end == start || used + t->count[end] <= L)) used += take(t, end, used, L), end++;
    if (*nw == *cap) {
      size_t c = *cap ? 2 * *cap : 256;
      window *g = realloc(*ws, c * sizeof *g);
      if (!g) return est_error(EST_ERR_NO_MEMORY, "out of memory building windows");
      *ws = g, *cap = c;
    }
    (*ws)[(*nw)++] = (window){sentence, start, end};
    if (end >= num_words) return EST_OK;
    size_t next = start + 1;
    while (next < end && t->offset[next] - t->offset[start] < stride) next++;
    start = next;
  }
}

/* run_squad's _check_is_max_context per word: the window where min(sub-tokens before the
 * word, after it) is largest; the first on ties. */
static size_t owner(const window *ws, size_t first_window, size_t nw, const tokenized *t, size_t w) {
  size_t best = first_window;
  long best_score = -1;
  for (size_t k = first_window; k < nw; k++) {
    if (w < ws[k].first || w >= ws[k].end) continue;
    const long before = (long)(t->offset[w] - t->offset[ws[k].first]);
    const long after = (long)(t->offset[ws[k].end] - t->offset[w] - t->count[w]);
    const long score = before < after ? before : after;
    if (score > best_score) best_score = score, best = k;
  }
  return best;
}

/* run_ner's b_to_i_label: the label of a word's later sub-tokens with label_all_tokens. */
static int32_t later_label(const char *const *labels, size_t n, int32_t label) {
  const char *l = labels[label];
  if (strncmp(l, "B-", 2)) return label;
  char buf[512];
  snprintf(buf, sizeof buf, "I-%s", l + 2);
  const int i = est_ner_label_index(labels, n, buf);
  return i >= 0 ? i : label;
}

est_status est_ner_features_build(est_ner_features *out, const est_ner_data *d, const char *const *labels,
                                  size_t num_labels, est_tokenizer *tok, const est_ner_feature_options *o) {
  memset(out, 0, sizeof *out);
  const int S = o->max_seq_length;
  if (S < 3) return est_error(EST_ERR_INVALID_ARGUMENT, "max_seq_length %d: need at least 3 ([CLS] word [SEP])", S);
  if (o->doc_stride < 0) return est_error(EST_ERR_INVALID_ARGUMENT, "doc_stride %d: must be >= 0", o->doc_stride);
  const size_t L = (size_t)S - 2, stride = o->doc_stride ? (size_t)o->doc_stride : (L + 1) / 2;
  est_status st = EST_OK;
  const int32_t cls = special(tok, "[CLS]", &st), sep = special(tok, "[SEP]", &st), unk = special(tok, "[UNK]", &st);
  if (st != EST_OK) return st;
  tokenized t = {0};
  window *ws = NULL;
  size_t nw = 0, cap = 0;
  /* pass 1: the windows (tokenizing every sentence) */
  for (size_t i = 0; i < d->count && st == EST_OK; i++) {
    st = tokenize_sentence(&t, &d->sentences[i], tok, unk);
    if (st == EST_OK) st = sentence_windows(&ws, &nw, &cap, (int64_t)i, &t, d->sentences[i].num_words, L, stride);
  }
  const size_t per = (size_t)S * 5;
  if (st == EST_OK && nw) {
    out->items = calloc(nw, sizeof *out->items);
    out->block_ = malloc(nw * per * sizeof(int32_t));
    if (!out->items || !out->block_) st = est_error(EST_ERR_NO_MEMORY, "out of memory for %zu windows", nw);
  }
  out->seq_length = S;
  /* pass 2: each window's arrays */
  for (size_t k = 0; k < nw && st == EST_OK;) {
    const est_ner_sentence *s = &d->sentences[ws[k].sentence];
    if ((st = tokenize_sentence(&t, s, tok, unk)) != EST_OK) break;
    size_t k_end = k;
    while (k_end < nw && ws[k_end].sentence == ws[k].sentence) k_end++;
    for (size_t j = k; j < k_end; j++) {
      est_ner_feature *f = &out->items[j];
      int32_t *a = (int32_t *)out->block_ + j * per;
      *f = (est_ner_feature){.sentence = ws[j].sentence, .input_ids = a, .input_mask = a + S,
                             .segment_ids = a + 2 * S, .label_ids = a + 3 * S, .word_index = a + 4 * S};
      memset(a, 0, per * sizeof(int32_t));
      for (int p = 0; p < S; p++) f->label_ids[p] = EST_NER_IGNORE, f->word_index[p] = -1;
      size_t pos = 0, used = 0;
      f->input_ids[pos++] = cls;
      for (size_t w = ws[j].first; w < ws[j].end; w++) {
        const size_t n = take(&t, w, used, L);
        used += n;
        const int owned = owner(ws, k, k_end, &t, w) == j;
        const int label = est_ner_label_index(labels, num_labels, s->tags[w]);
        for (size_t q = 0; q < n; q++, pos++) {
          f->input_ids[pos] = t.ids[t.offset[w] + q];
          if (!owned || label < 0) continue;
          if (q == 0) f->label_ids[pos] = label, f->word_index[pos] = (int32_t)w;
          else if (o->label_all_tokens) f->label_ids[pos] = later_label(labels, num_labels, label);
        }
        if (owned && label < 0 && n) f->word_index[pos - n] = (int32_t)w;
      }
      f->input_ids[pos++] = sep;
      for (size_t p = 0; p < pos; p++) f->input_mask[p] = 1;
    }
    k = k_end;
  }
  out->count = st == EST_OK ? nw : 0;
  free(t.ids), free(t.offset), free(ws);
  if (st != EST_OK) est_ner_features_free(out);
  return st;
}

est_status est_ner_merge_predictions(int32_t *const *tags_out, const est_ner_data *d, const est_ner_features *f,
                                     const float *const *probs, int num_labels) {
  for (size_t i = 0; i < d->count; i++)
    for (size_t w = 0; w < d->sentences[i].num_words; w++) tags_out[i][w] = -1;
  const int S = f->seq_length;
  for (size_t j = 0; j < f->count; j++) {
    const est_ner_feature *x = &f->items[j];
    if (x->sentence < 0 || (size_t)x->sentence >= d->count)
      return est_error(EST_ERR_INVALID_ARGUMENT, "window %zu: sentence %lld outside the data", j,
                       (long long)x->sentence);
    for (int p = 0; p < S; p++) {
      const int32_t w = x->word_index[p];
      if (w < 0) continue;
      const float *z = probs[j] + (size_t)p * num_labels;
      int best = 0;
      for (int c = 1; c < num_labels; c++)
        if (z[c] > z[best]) best = c;
      tags_out[x->sentence][w] = best;
    }
  }
  return EST_OK;
}
