/* convert_single_example and file_based_convert_examples_to_features (run_classifier.py).
 *
 * Layout of one row (S = max_seq_length):
 *   input_ids    [CLS] a_0 .. a_{na-1} [SEP] b_0 .. b_{nb-1} [SEP] 0 ... 0
 *   segment_ids    0    0  ..   0        0    1  ..   1       1   0 ... 0
 *   input_mask     1    1  ..   1        1    1  ..   1       1   0 ... 0
 * without the b part for single sentences. A tokenizer.json without Google's vocab (Unigram,
 * byte-level BPE, ...; est_tokenizer_open_any) lays a row out as its post-processor does, e.g.
 * RoBERTa's <s> a </s></s> b </s>, with its type ids, cut by the tokenizer's own truncation
 * (LongestFirst to S, transformers' tokenizer(a, b, truncation=True, max_length=S)); the rest
 * of the row is 0 with mask 0, as above. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/example.h"
#include "est/classifier_features.h"
#include "est/log.h"
#include "est/tfrecord.h"

#define EST_MAX_SEQ_LIMIT (1 << 20)

void est_truncate_seq_pair(size_t *len_a, size_t *len_b, size_t max_length) {
  while (*len_a + *len_b > max_length) {
    if (*len_a > *len_b) (*len_a)--;
    else (*len_b)--;
  }
}

est_status est_feature_converter_init(est_feature_converter *c, est_tokenizer *tok, const char *const *labels,
                                      size_t nlabels, int max_seq_length) {
  memset(c, 0, sizeof *c);
  const est_vocab *v = est_tokenizer_vocab(tok);
  if (max_seq_length < 3 || max_seq_length > EST_MAX_SEQ_LIMIT)
    return est_error(EST_ERR_INVALID_ARGUMENT,
                     "max_seq_length %d: must be at least 3 ([CLS] a [SEP] b [SEP] needs room) and at most %d",
                     max_seq_length, EST_MAX_SEQ_LIMIT);
  if (nlabels == 0) return est_error(EST_ERR_INVALID_ARGUMENT, "empty label list");
  c->tok = tok;
  c->labels = labels;
  c->nlabels = nlabels;
  c->max_seq_length = max_seq_length;
  if (!v) { /* the tokenizer adds its own special tokens and truncates */
    est_truncation *t = est_tokenizer_truncation(tok);
    *t = (est_truncation){.enabled = true, .max_length = (size_t)max_seq_length,
                          .strategy = EST_TRUNCATE_LONGEST_FIRST};
    est_tokenizer_padding(tok)->enabled = false; /* the rows are padded here */
    c->cls_id = c->sep_id = -1;
    return EST_OK;
  }
  c->cls_id = est_vocab_find(v, "[CLS]", 5);
  c->sep_id = est_vocab_find(v, "[SEP]", 5);
  if (c->cls_id < 0 || c->sep_id < 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "vocab %s has no %s token (a BERT vocab needs [CLS] and [SEP])",
                     est_vocab_path(v), c->cls_id < 0 ? "[CLS]" : "[SEP]");
  return EST_OK;
}

/* "guid (file:line)" for messages. */
static const char *where(const est_input_example *ex, char *buf, size_t size) {
  if (ex->source) snprintf(buf, size, "example %s (%s:%" PRId64 ")", ex->guid ? ex->guid : "?", ex->source, ex->line);
  else snprintf(buf, size, "example %s", ex->guid ? ex->guid : "?");
  return buf;
}

/* Appends "v0 v1 ..." of n ints to a log line. */
static void join_ints(char *buf, size_t size, const int32_t *v, int n) {
  size_t w = 0;
  buf[0] = 0;
  for (int i = 0; i < n && w + 12 < size; i++) w += (size_t)snprintf(buf + w, size - w, i ? " %d" : "%d", v[i]);
}

static const char *token_of(const est_tokenizer *tok, int32_t id) {
  const est_vocab *v = est_tokenizer_vocab(tok);
  const char *t = v ? est_vocab_token(v, id) : est_tokenizer_id_to_token(tok, id);
  return t ? t : "";
}

static void log_example(const est_feature_converter *c, const est_input_example *ex, const int32_t *ids,
                        const int32_t *mask, const int32_t *seg, int ntok, int32_t label_id) {
  int S = c->max_seq_length;
  size_t size = (size_t)S * 12 + 64;
  for (int i = 0; i < ntok; i++) size += strlen(token_of(c->tok, ids[i])) + 1;
  char *buf = malloc(size);
  if (!buf) return;                    /* logging is best effort */
  EST_LOG_INFO("*** Example ***");
  EST_LOG_INFO("guid: %s", ex->guid);
  size_t w = 0;
  buf[0] = 0;
  for (int i = 0; i < ntok; i++)
    w += (size_t)snprintf(buf + w, size - w, i ? " %s" : "%s", token_of(c->tok, ids[i]));
  EST_LOG_INFO("tokens: %s", buf);
  join_ints(buf, size, ids, S);
  EST_LOG_INFO("input_ids: %s", buf);
  join_ints(buf, size, mask, S);
  EST_LOG_INFO("input_mask: %s", buf);
  join_ints(buf, size, seg, S);
  EST_LOG_INFO("segment_ids: %s", buf);
  if (c->multi_label) EST_LOG_INFO("labels: %s", ex->label ? ex->label : "");
  else EST_LOG_INFO("label: %s (id = %d)", ex->label, label_id);
  free(buf);
}

/* A row from the tokenizer's Encoding (no Google vocab): its ids, type ids and mask. */
static est_status convert_encoding(const est_feature_converter *c, int64_t ex_index, const est_input_example *ex,
                                   int32_t *input_ids, int32_t *input_mask, int32_t *segment_ids, int32_t lid,
                                   int32_t *label_id, int32_t *is_real_example) {
  char at[600];
  const bool pair = ex->text_b && ex->text_b[0];
  est_encoding e;
  est_status st = est_tokenizer_encode_pair(c->tok, ex->text_a ? ex->text_a : "", SIZE_MAX, pair ? ex->text_b : NULL,
                                            SIZE_MAX, true, &e);
  if (st != EST_OK) return est_error_prefix("%s: ", where(ex, at, sizeof at));
  if (e.n > (size_t)c->max_seq_length) /* the truncation above makes this a programmer's error */
    return est_error(EST_ERR_INTERNAL, "%s: %zu tokens after truncation to %d", where(ex, at, sizeof at), e.n,
                     c->max_seq_length);
  for (size_t i = 0; i < e.n; i++) {
    input_ids[i] = e.ids[i];
    segment_ids[i] = e.type_ids[i];
    input_mask[i] = 1;
  }
  *label_id = lid;
  *is_real_example = 1;
  if (ex_index < 5) log_example(c, ex, input_ids, input_mask, segment_ids, (int)e.n, lid);
  return EST_OK;
}

est_status est_convert_single_example(const est_feature_converter *c, int64_t ex_index, const est_input_example *ex,
                                      int32_t *input_ids, int32_t *input_mask, int32_t *segment_ids,
                                      int32_t *label_id, int32_t *is_real_example) {
  int S = c->max_seq_length;
  size_t row = (size_t)S * sizeof(int32_t);
  memset(input_ids, 0, row);
  memset(input_mask, 0, row);
  memset(segment_ids, 0, row);
  *label_id = 0;
  *is_real_example = 0;
  if (ex->is_padding) return EST_OK;

  char at[600];
  int32_t lid = c->multi_label ? 0 : -1;
  for (size_t i = 0; !c->multi_label && ex->label && i < c->nlabels; i++)
    if (!strcmp(ex->label, c->labels[i])) lid = (int32_t)i;
  if (lid < 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: label '%s' is not in the label list",
                     where(ex, at, sizeof at), ex->label ? ex->label : "(none)");

  if (!est_tokenizer_vocab(c->tok)) return convert_encoding(c, ex_index, ex, input_ids, input_mask, segment_ids,
                                                            lid, label_id, is_real_example);
  /* tokens_a go straight to their final place (after [CLS]); only S-2 can ever be kept. */
  const int32_t *ids;
  size_t na, nb = 0;
  est_status st = est_tokenizer_encode(c->tok, ex->text_a ? ex->text_a : "", SIZE_MAX, &ids, &na);
  if (st != EST_OK) return est_error_prefix("%s: ", where(ex, at, sizeof at));
  size_t keep_a = na < (size_t)S - 2 ? na : (size_t)S - 2;
  if (keep_a) memcpy(input_ids + 1, ids, keep_a * sizeof *ids); /* ids may be NULL for "" */
  if (ex->text_b && ex->text_b[0]) {
    st = est_tokenizer_encode(c->tok, ex->text_b, SIZE_MAX, &ids, &nb);
    if (st != EST_OK) return est_error_prefix("%s: ", where(ex, at, sizeof at));
  }
  int n;
  if (nb > 0) {                         /* a pair: [CLS] a [SEP] b [SEP] */
    est_truncate_seq_pair(&na, &nb, (size_t)S - 3);
    input_ids[1 + na] = c->sep_id;
    memcpy(input_ids + 2 + na, ids, nb * sizeof *ids);
    n = (int)(na + nb + 3);
    input_ids[n - 1] = c->sep_id;
    for (int i = (int)na + 2; i < n; i++) segment_ids[i] = 1;
  } else {                              /* single (text_b None, "" or all-deleted chars) */
    na = keep_a;
    input_ids[1 + na] = c->sep_id;
    n = (int)(na + 2);
  }
  input_ids[0] = c->cls_id;
  for (int i = 0; i < n; i++) {
    input_mask[i] = 1;
    if (input_ids[i] == EST_TOKEN_UNK_MISSING)  /* convert_tokens_to_ids' KeyError */
      return est_error(EST_ERR_INVALID_ARGUMENT, "%s: token [UNK] is not in vocab %s",
                       where(ex, at, sizeof at), est_vocab_path(est_tokenizer_vocab(c->tok)));
  }
  *label_id = lid;
  *is_real_example = 1;
  if (ex_index < 5) log_example(c, ex, input_ids, input_mask, segment_ids, n, lid);
  return EST_OK;
}

void est_input_features_free(est_input_features *f) {
  free(f->input_ids);
  free(f->input_mask);
  free(f->segment_ids);
  free(f->label_ids);
  free(f->is_real_example);
  memset(f, 0, sizeof *f);
}

est_status est_convert_examples_to_features(const est_examples *examples, const char *const *labels, size_t nlabels,
                                            int max_seq_length, est_tokenizer *tok, est_input_features *out) {
  memset(out, 0, sizeof *out);
  est_feature_converter c;
  est_status st = est_feature_converter_init(&c, tok, labels, nlabels, max_seq_length);
  if (st != EST_OK) return st;
  size_t n = examples->count, S = (size_t)max_seq_length;
  out->count = n;
  out->max_seq_length = max_seq_length;
  out->input_ids = malloc((n * S + 1) * sizeof(int32_t));
  out->input_mask = malloc((n * S + 1) * sizeof(int32_t));
  out->segment_ids = malloc((n * S + 1) * sizeof(int32_t));
  out->label_ids = malloc((n + 1) * sizeof(int32_t));
  out->is_real_example = malloc((n + 1) * sizeof(int32_t));
  if (!out->input_ids || !out->input_mask || !out->segment_ids || !out->label_ids || !out->is_real_example) {
    est_input_features_free(out);
    return est_error(EST_ERR_NO_MEMORY, "features for %zu examples", n);
  }
  for (size_t i = 0; i < n; i++) {
    st = est_convert_single_example(&c, (int64_t)i, &examples->items[i], out->input_ids + i * S,
                                    out->input_mask + i * S, out->segment_ids + i * S, out->label_ids + i,
                                    out->is_real_example + i);
    if (st != EST_OK) {
      est_input_features_free(out);
      return st;
    }
  }
  return EST_OK;
}

/* The records of both kinds: label_ids one id, or (multi_label) nlabels 0 / 1 values. */
/* The record's label_ids (one id, or a multi-label row of 0/1) and is_real_example after its
 * input_ids / input_mask / segment_ids, serialized into w. */
static est_status write_record(est_tfrecord_writer *w, est_example *rec, const int64_t *label_ids,
                               size_t num_label_ids, int64_t is_real) {
  est_status st = est_example_set_int64(rec, "label_ids", label_ids, num_label_ids);
  if (st == EST_OK) st = est_example_set_int64(rec, "is_real_example", &is_real, 1);
  return st == EST_OK ? est_example_write(w, rec) : st;
}

static est_status convert_to_file(const est_examples *examples, const char *const *labels, size_t nlabels,
                                  int max_seq_length, est_tokenizer *tok, const char *output_file, bool multi_label) {
  est_feature_converter c;
  est_status st = est_feature_converter_init(&c, tok, labels, nlabels, max_seq_length);
  if (st != EST_OK) return st;
  c.multi_label = multi_label;
  size_t S = (size_t)max_seq_length;
  int32_t *row = malloc((3 * S + nlabels) * sizeof *row), *hot = row ? row + 3 * S : NULL;
  int64_t *wide = malloc((S > nlabels ? S : nlabels) * sizeof *wide);
  if (!row || !wide) {
    free(row);
    free(wide);
    return est_error(EST_ERR_NO_MEMORY, "converting to %s", output_file);
  }
  est_tfrecord_writer *w = NULL;
  st = est_tfrecord_writer_open(&w, output_file, EST_COMPRESSION_NONE);
  est_example rec;
  est_example_init(&rec);
  for (size_t i = 0; st == EST_OK && i < examples->count; i++) {
    if (i % 10000 == 0) EST_LOG_INFO("Writing example %zu of %zu", i, examples->count);
    int32_t label_id, is_real;
    st = est_convert_single_example(&c, (int64_t)i, &examples->items[i], row, row + S, row + 2 * S, &label_id,
                                    &is_real);
    /* The reference's create_int_feature: five int64 lists. */
    static const char *const keys[3] = {"input_ids", "input_mask", "segment_ids"};
    for (int k = 0; st == EST_OK && k < 3; k++) st = est_example_set_int32(&rec, keys[k], row + k * S, S);
    int64_t lab = label_id;
    if (st == EST_OK && multi_label) {
      const est_input_example *ex = &examples->items[i];
      st = ex->is_padding ? (memset(hot, 0, nlabels * sizeof *hot), EST_OK)
                          : est_multi_label_ids(ex->label ? ex->label : "", labels, nlabels, hot);
      if (st != EST_OK) est_error_prefix("example %s: ", ex->guid ? ex->guid : "?");
      for (size_t k = 0; st == EST_OK && k < nlabels; k++) wide[k] = hot[k];
    }
    if (st == EST_OK)
      st = write_record(w, &rec, multi_label ? wide : &lab, multi_label ? nlabels : 1, is_real);
  }
  est_example_clear(&rec);
  free(row);
  free(wide);
  return est_tfrecord_writer_finish(w, st, output_file);
}

est_status est_file_based_convert_examples_to_features(const est_examples *examples, const char *const *labels,
                                                       size_t nlabels, int max_seq_length, est_tokenizer *tok,
                                                       const char *output_file) {
  return convert_to_file(examples, labels, nlabels, max_seq_length, tok, output_file, false);
}

est_status est_file_based_convert_multi_label(const est_examples *examples, const char *const *labels, size_t nlabels,
                                              int max_seq_length, est_tokenizer *tok, const char *output_file) {
  return convert_to_file(examples, labels, nlabels, max_seq_length, tok, output_file, true);
}

est_status est_file_based_convert_windows(const est_examples *examples, const char *const *labels, size_t nlabels,
                                          int max_seq_length, est_tokenizer *tok, int doc_stride, bool multi_label,
                                          const char *output_file, int64_t **window_example, size_t *num_windows) {
  *window_example = NULL, *num_windows = 0;
  est_feature_converter c;
  est_status st = est_feature_converter_init(&c, tok, labels, nlabels, max_seq_length);
  if (st != EST_OK) return st;
  if (doc_stride < 1) return est_error(EST_ERR_INVALID_ARGUMENT, "doc_stride %d: must be at least 1", doc_stride);
  const size_t S = (size_t)max_seq_length, L = S - 2;
  int64_t *wide = malloc((S > nlabels ? S : nlabels) * sizeof *wide);
  int32_t *hot = malloc((nlabels + 1) * sizeof *hot), *doc = NULL;
  size_t cap = 0, nw = 0, wcap = 0;
  int64_t *map = NULL;
  est_tfrecord_writer *w = NULL;
  if (!wide || !hot) st = est_error(EST_ERR_NO_MEMORY, "converting to %s", output_file);
  if (st == EST_OK) st = est_tfrecord_writer_open(&w, output_file, EST_COMPRESSION_NONE);
  est_example rec;
  est_example_init(&rec);
  char at[600];
  for (size_t i = 0; st == EST_OK && i < examples->count; i++) {
    const est_input_example *ex = &examples->items[i];
    if (ex->text_b && ex->text_b[0]) {
      st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: a text pair; long documents are single texts (text_a)",
                     where(ex, at, sizeof at));
      break;
    }
    /* the label(s), as the records of est_file_based_convert_examples_to_features hold them */
    int64_t lab = -1;
    if (multi_label) {
      st = est_multi_label_ids(ex->label ? ex->label : "", labels, nlabels, hot);
      if (st != EST_OK) est_error_prefix("%s: ", where(ex, at, sizeof at));
    } else {
      for (size_t k = 0; ex->label && k < nlabels; k++)
        if (!strcmp(ex->label, labels[k])) lab = (int64_t)k;
      if (lab < 0)
        st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: label '%s' is not in the label list", where(ex, at, sizeof at),
                       ex->label ? ex->label : "(none)");
    }
    const int32_t *ids = NULL;
    size_t n = 0;
    if (st == EST_OK) st = est_tokenizer_encode(tok, ex->text_a ? ex->text_a : "", SIZE_MAX, &ids, &n);
    if (st == EST_OK && n > cap) { /* the next encode reuses ids' buffer: keep a copy */
      int32_t *grown = realloc(doc, n * sizeof *doc);
      if (!grown) st = est_error(EST_ERR_NO_MEMORY, "converting to %s", output_file);
      else doc = grown, cap = n;
    }
    if (st == EST_OK && n) memcpy(doc, ids, n * sizeof *doc);
    /* run_squad's doc spans: windows of L tokens, each min(length, doc_stride) after the last,
     * until one reaches the end (an empty text: one window of none) */
    for (size_t start = 0; st == EST_OK;) {
      const size_t len = n - start < L ? n - start : L;
      int64_t *row = wide;
      static const char *const keys[3] = {"input_ids", "input_mask", "segment_ids"};
      for (int k = 0; st == EST_OK && k < 3; k++) {
        for (size_t t = 0; t < S; t++) {
          const int64_t id = t == 0 ? c.cls_id : t <= len ? doc[start + t - 1] : t == len + 1 ? c.sep_id : 0;
          row[t] = k == 0 ? id : k == 1 ? t < len + 2 : 0;
          if (k == 0 && id == EST_TOKEN_UNK_MISSING)
            st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: token [UNK] is not in vocab %s", where(ex, at, sizeof at),
                           est_vocab_path(est_tokenizer_vocab(tok)));
        }
        if (st == EST_OK) st = est_example_set_int64(&rec, keys[k], row, S);
      }
      for (size_t k = 0; st == EST_OK && multi_label && k < nlabels; k++) wide[k] = hot[k];
      if (st == EST_OK) st = write_record(w, &rec, multi_label ? wide : &lab, multi_label ? nlabels : 1, 1);
      if (st == EST_OK && nw == wcap) {
        wcap = wcap ? 2 * wcap : 64;
        int64_t *grown = realloc(map, wcap * sizeof *map);
        if (!grown) st = est_error(EST_ERR_NO_MEMORY, "converting to %s", output_file);
        else map = grown;
      }
      if (st == EST_OK) map[nw++] = (int64_t)i;
      if (start + len >= n) break;
      start += len < (size_t)doc_stride ? len : (size_t)doc_stride;
    }
  }
  est_example_clear(&rec);
  free(wide), free(hot), free(doc);
  if (st != EST_OK) {
    free(map);
    if (w) est_tfrecord_writer_abort(w);
    return est_error_prefix("writing %s: ", output_file);
  }
  st = est_tfrecord_writer_close(w);
  if (st != EST_OK) {
    free(map);
    return st;
  }
  EST_LOG_INFO("%zu examples in %zu windows of at most %zu tokens (doc_stride %d)", examples->count, nw, L, doc_stride);
  *window_example = map, *num_windows = nw;
  return EST_OK;
}

void est_classifier_feature_specs_multi_label(int64_t max_seq_length, int64_t num_labels,
                                              est_feature_spec specs[EST_CLASSIFIER_NUM_FEATURES]) {
  est_classifier_feature_specs(max_seq_length, specs);
  specs[3] = (est_feature_spec){.key = "label_ids", .dtype = EST_DT_INT64, .rank = 1, .shape = {num_labels}};
}

void est_classifier_feature_specs(int64_t max_seq_length, est_feature_spec specs[EST_CLASSIFIER_NUM_FEATURES]) {
  const est_feature_spec s[EST_CLASSIFIER_NUM_FEATURES] = {
    {.key = "input_ids", .dtype = EST_DT_INT64, .rank = 1, .shape = {max_seq_length}},
    {.key = "input_mask", .dtype = EST_DT_INT64, .rank = 1, .shape = {max_seq_length}},
    {.key = "segment_ids", .dtype = EST_DT_INT64, .rank = 1, .shape = {max_seq_length}},
    {.key = "label_ids", .dtype = EST_DT_INT64, .rank = 0},
    {.key = "is_real_example", .dtype = EST_DT_INT64, .rank = 0},
  };
  memcpy(specs, s, sizeof s);
}
