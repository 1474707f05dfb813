/* SQuAD examples to features, as google-research/bert run_squad.py's
 * convert_examples_to_features, _improve_answer_span, _check_is_max_context and FeatureWriter
 * do it (docs/squad.md §7). Re-implemented from their behaviour;
 * tests/reference/squad_features_reference.py runs the unchanged functions and
 * tests/test_squad_features.c compares against what it wrote.
 *
 * Per example: the question's WordPiece ids (the first max_query_length kept); each word of
 * the context tokenized on its own, giving all_doc_tokens with tok_to_orig (token -> word)
 * and orig_to_tok (word -> its first token); training, the answer's token span, narrowed to
 * the tokenized answer text when it occurs inside. Then windows ("doc spans") of at most
 * max_tokens_for_doc = max_seq_length - len(query) - 3 tokens, starting every doc_stride
 * tokens, the last one ending at the last token. Each window is one feature:
 *
 *   position   0      1 .. q      q+1    q+2 .. q+1+len   q+2+len   .. S-1
 *   token      [CLS]  query       [SEP]  window           [SEP]     0 (padding)
 *   segment    0      0           0      1                1         0
 *
 * Tokens are compared as vocab ids: distinct token strings have distinct ids, and no token
 * holds a space, so comparing id runs is comparing the reference's " ".join()ed strings. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/example.h"
#include "est/log.h"
#include "est/squad.h"
#include "est/tfrecord.h"

#define EST_SQUAD_MAX_SEQ_LIMIT (1 << 20)
#define EST_SQUAD_FIRST_UNIQUE_ID 1000000000

/* A growable int32 array. */
typedef struct ivec {
  int32_t *v;
  size_t n, cap;
} ivec;

static est_status ivec_reserve(ivec *a, size_t need) {
  if (need <= a->cap) return EST_OK;
  size_t cap = a->cap ? a->cap : 256;
  while (cap < need) cap *= 2;
  int32_t *v = realloc(a->v, cap * sizeof *v);
  if (!v) return est_error(EST_ERR_NO_MEMORY, "SQuAD features: %zu tokens", need);
  a->v = v;
  a->cap = cap;
  return EST_OK;
}

static est_status ivec_append(ivec *a, const int32_t *v, size_t n) {
  if (n == 0) return EST_OK; /* a->v may still be NULL, and NULL + 0 is undefined in C */
  est_status st = ivec_reserve(a, a->n + n);
  if (st != EST_OK) return st;
  memcpy(a->v + a->n, v, n * sizeof *v);
  a->n += n;
  return EST_OK;
}

struct est_squad_converter {
  est_tokenizer *tok;
  est_squad_feature_config cfg;
  int32_t cls_id, sep_id;
  int64_t next_unique_id;
  ivec query, answer;              /* ids */
  ivec doc_tokens, tok_to_orig;    /* all_doc_tokens, tok_to_orig_index */
  ivec orig_to_tok;                /* orig_to_tok_index */
  ivec span_start, span_length;    /* doc_spans */
  /* One feature's rows, max_seq_length each. */
  int32_t *input_ids, *input_mask, *segment_ids, *token_to_orig;
  uint8_t *is_max_context;
};

est_squad_feature_config est_squad_feature_config_default(void) {
  return (est_squad_feature_config){.max_seq_length = 384, .doc_stride = 128, .max_query_length = 64,
                                    .is_training = false};
}

est_status est_squad_converter_create(est_squad_converter **out, est_tokenizer *tok,
                                      const est_squad_feature_config *cfg) {
  *out = NULL;
  if (cfg->max_seq_length > EST_SQUAD_MAX_SEQ_LIMIT)
    return est_error(EST_ERR_INVALID_ARGUMENT, "max_seq_length %d: at most %d", cfg->max_seq_length,
                     EST_SQUAD_MAX_SEQ_LIMIT);
  if (cfg->max_query_length < 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "max_query_length %d: must not be negative", cfg->max_query_length);
  /* validate_flags_or_throw's check; it also keeps every window at least one token long. */
  if (cfg->max_seq_length <= cfg->max_query_length + 3)
    return est_error(EST_ERR_INVALID_ARGUMENT,
                     "The max_seq_length (%d) must be greater than max_query_length (%d) + 3",
                     cfg->max_seq_length, cfg->max_query_length);
  if (cfg->doc_stride < 1)
    return est_error(EST_ERR_INVALID_ARGUMENT, "doc_stride %d: must be at least 1 (the windows would not advance)",
                     cfg->doc_stride);
  const est_vocab *v = est_tokenizer_vocab(tok);
  if (!v) /* a Unigram / BPE tokenizer.json (est_tokenizer_open_any) */
    return est_error(EST_ERR_UNIMPLEMENTED, "SQuAD features read documents through a WordPiece vocab only so far; "
                     "this tokenizer.json's model is not one with BertNormalizer + BertPreTokenizer");
  int32_t cls = est_vocab_find(v, "[CLS]", 5), sep = est_vocab_find(v, "[SEP]", 5);
  if (cls < 0 || sep < 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "vocab %s has no %s token (SQuAD features need [CLS] and [SEP])",
                     est_vocab_path(v), cls < 0 ? "[CLS]" : "[SEP]");
  est_squad_converter *c = calloc(1, sizeof *c);
  size_t S = (size_t)cfg->max_seq_length;
  if (c) {
    c->input_ids = malloc(4 * S * sizeof(int32_t));
    c->is_max_context = malloc(S);
  }
  if (!c || !c->input_ids || !c->is_max_context) {
    if (c) free(c->input_ids);
    free(c);
    return est_error(EST_ERR_NO_MEMORY, "SQuAD feature converter for max_seq_length %d", cfg->max_seq_length);
  }
  c->input_mask = c->input_ids + S;
  c->segment_ids = c->input_ids + 2 * S;
  c->token_to_orig = c->input_ids + 3 * S;
  c->tok = tok;
  c->cfg = *cfg;
  c->cls_id = cls;
  c->sep_id = sep;
  c->next_unique_id = EST_SQUAD_FIRST_UNIQUE_ID;
  *out = c;
  return EST_OK;
}

void est_squad_converter_free(est_squad_converter *c) {
  if (!c) return;
  ivec *vecs[] = {&c->query, &c->answer, &c->doc_tokens, &c->tok_to_orig, &c->orig_to_tok,
                  &c->span_start, &c->span_length};
  for (size_t i = 0; i < sizeof vecs / sizeof *vecs; i++) free(vecs[i]->v);
  free(c->input_ids);
  free(c->is_max_context);
  free(c);
}

int64_t est_squad_converter_next_unique_id(const est_squad_converter *c) { return c->next_unique_id; }

/* Python's list[i] for a list of n: negative i counts from the end; false for an IndexError. */
static bool py_index(int64_t i, size_t n, size_t *out) {
  if (i < 0) i += (int64_t)n;
  if (i < 0 || (uint64_t)i >= n) return false;
  *out = (size_t)i;
  return true;
}

/* _improve_answer_span: the first (smallest start, then largest end) sub-span of
 * [*start, *end] whose tokens are the tokenized answer text; unchanged when none is. */
static void improve_answer_span(const est_squad_converter *c, int64_t *start, int64_t *end) {
  const int32_t *doc = c->doc_tokens.v, *ans = c->answer.v;
  size_t na = c->answer.n;
  for (int64_t s = *start; s <= *end; s++)
    for (int64_t e = *end; e >= s; e--) {
      if ((size_t)(e - s + 1) != na) continue;  /* a non-empty span never joins to "" */
      if (!memcmp(doc + s, ans, na * sizeof *ans)) {
        *start = s;
        *end = e;
        return;
      }
    }
}

/* _check_is_max_context: whether span `cur` is, among the spans holding token `pos`, the
 * first with the highest min(left, right) + 0.01 * length. The score is computed as Python
 * computes it (int + float, in doubles), so ties break the same way. */
static bool is_max_context(const est_squad_converter *c, size_t cur, int64_t pos) {
  bool have = false;
  double best = 0;
  size_t best_index = 0;
  for (size_t i = 0; i < c->span_start.n; i++) {
    int64_t start = c->span_start.v[i], length = c->span_length.v[i], end = start + length - 1;
    if (pos < start || pos > end) continue;
    int64_t left = pos - start, right = end - pos;
    double score = (double)(left < right ? left : right) + 0.01 * (double)length;
    if (!have || score > best) {
      have = true;
      best = score;
      best_index = i;
    }
  }
  return have && best_index == cur;
}

/* ---- the reference's log of the first 20 examples' features ------------------------ */

/* A growable line for one log message; logging is best effort (out of memory: no line). */
typedef struct line {
  char *s;
  size_t n, cap;
  bool failed;
} line;

static void line_add(line *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line_add(line *l, const char *fmt, ...) {
  if (l->failed) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(l->s ? l->s + l->n : NULL, l->s ? l->cap - l->n : 0, fmt, ap);
    va_end(ap);
    if (k < 0) {
      l->failed = true;
      return;
    }
    if (l->s && l->n + (size_t)k < l->cap) {
      l->n += (size_t)k;
      return;
    }
    size_t cap = l->cap ? l->cap : 256;
    while (cap <= l->n + (size_t)k) cap *= 2;
    char *p = realloc(l->s, cap);
    if (!p) {
      l->failed = true;
      return;
    }
    l->s = p;
    l->cap = cap;
  }
}

static void log_line(line *l) {
  if (!l->failed && l->s) EST_LOG_INFO("%s", l->s);
  l->n = 0;
  if (l->s) l->s[0] = 0;
}

/* The token strings of positions [from, to) joined by spaces. */
static void line_tokens(line *l, const est_vocab *v, const int32_t *ids, int64_t from, int64_t to) {
  for (int64_t i = from; i < to; i++) line_add(l, i > from ? " %s" : "%s", est_vocab_token(v, ids[i]));
}

static void line_ints(line *l, const char *name, const int32_t *v, size_t n) {
  line_add(l, "%s: ", name);
  for (size_t i = 0; i < n; i++) line_add(l, i ? " %d" : "%d", v[i]);
  log_line(l);
}

/* What convert_examples_to_features logs (tf.logging.info) for each feature of the first
 * 20 examples, line for line. */
static void log_feature(const est_squad_converter *c, const est_squad_feature *f, bool training) {
  const est_vocab *v = est_tokenizer_vocab(c->tok);
  const size_t S = (size_t)c->cfg.max_seq_length;
  line l = {0};
  EST_LOG_INFO("*** Example ***");
  EST_LOG_INFO("unique_id: %lld", (long long)f->unique_id);
  EST_LOG_INFO("example_index: %zu", f->example_index);
  EST_LOG_INFO("doc_span_index: %d", f->doc_span_index);
  line_add(&l, "tokens: ");
  line_tokens(&l, v, f->input_ids, 0, f->num_tokens);
  log_line(&l);
  line_add(&l, "token_to_orig_map: ");
  for (int i = 0; i < f->doc_length; i++)
    line_add(&l, i ? " %d:%d" : "%d:%d", f->doc_offset + i, f->token_to_orig_map[f->doc_offset + i]);
  log_line(&l);
  line_add(&l, "token_is_max_context: ");
  for (int i = 0; i < f->doc_length; i++)
    line_add(&l, i ? " %d:%s" : "%d:%s", f->doc_offset + i,
             f->token_is_max_context[f->doc_offset + i] ? "True" : "False");
  log_line(&l);
  line_ints(&l, "input_ids", f->input_ids, S);
  line_ints(&l, "input_mask", f->input_mask, S);
  line_ints(&l, "segment_ids", f->segment_ids, S);
  if (training && f->is_impossible) EST_LOG_INFO("impossible example");
  if (training && !f->is_impossible) {
    EST_LOG_INFO("start_position: %lld", (long long)f->start_position);
    EST_LOG_INFO("end_position: %lld", (long long)f->end_position);
    line_add(&l, "answer: ");  /* tokens[start:end + 1]: empty when end < start */
    line_tokens(&l, v, f->input_ids, f->start_position, f->end_position + 1);
    log_line(&l);
  }
  free(l.s);
}

est_status est_squad_converter_convert(est_squad_converter *c, const est_squad_example *ex,
                                       size_t example_index, est_squad_feature_fn fn, void *ctx) {
  const est_squad_feature_config *cfg = &c->cfg;
  const size_t S = (size_t)cfg->max_seq_length;
  const int32_t *ids;
  size_t n;
  est_status st;

  /* The question, cut at max_query_length. */
  c->query.n = 0;
  if ((st = est_tokenizer_encode(c->tok, ex->question_text, SIZE_MAX, &ids, &n)) != EST_OK) goto fail;
  if (n > (size_t)cfg->max_query_length) n = (size_t)cfg->max_query_length;
  if ((st = ivec_append(&c->query, ids, n)) != EST_OK) goto fail;

  /* The context, word by word. */
  c->doc_tokens.n = c->tok_to_orig.n = c->orig_to_tok.n = 0;
  if ((st = ivec_reserve(&c->orig_to_tok, ex->num_doc_tokens)) != EST_OK) goto fail;
  for (size_t i = 0; i < ex->num_doc_tokens; i++) {
    c->orig_to_tok.v[c->orig_to_tok.n++] = (int32_t)c->doc_tokens.n;
    if ((st = est_tokenizer_encode(c->tok, ex->doc_tokens[i], SIZE_MAX, &ids, &n)) != EST_OK) goto fail;
    if ((st = ivec_append(&c->doc_tokens, ids, n)) != EST_OK) goto fail;
    if ((st = ivec_reserve(&c->tok_to_orig, c->tok_to_orig.n + n)) != EST_OK) goto fail;
    for (size_t k = 0; k < n; k++) c->tok_to_orig.v[c->tok_to_orig.n++] = (int32_t)i;
  }
  const size_t ndoc = c->doc_tokens.n, nwords = ex->num_doc_tokens;

  /* Training: the answer in tokens. */
  int64_t tok_start = -1, tok_end = -1;
  const bool has_answer = cfg->is_training && !ex->is_impossible;
  if (has_answer) {
    size_t i;
    if (!py_index(ex->start_position, nwords, &i)) {
      st = est_error(EST_ERR_INVALID_ARGUMENT, "start_position %lld is outside the %zu words (IndexError)",
                     (long long)ex->start_position, nwords);
      goto fail;
    }
    tok_start = c->orig_to_tok.v[i];
    if (ex->end_position < (int64_t)nwords - 1) {
      if (!py_index(ex->end_position + 1, nwords, &i)) {
        st = est_error(EST_ERR_INVALID_ARGUMENT, "end_position %lld is outside the %zu words (IndexError)",
                       (long long)ex->end_position, nwords);
        goto fail;
      }
      tok_end = (int64_t)c->orig_to_tok.v[i] - 1;
    } else {
      tok_end = (int64_t)ndoc - 1;
    }
    c->answer.n = 0;
    const char *text = ex->orig_answer_text ? ex->orig_answer_text : "";
    if ((st = est_tokenizer_encode(c->tok, text, SIZE_MAX, &ids, &n)) != EST_OK) goto fail;
    if ((st = ivec_append(&c->answer, ids, n)) != EST_OK) goto fail;
    improve_answer_span(c, &tok_start, &tok_end);
  }

  /* The windows. */
  const size_t nq = c->query.n;
  const int64_t max_tokens_for_doc = (int64_t)S - (int64_t)nq - 3;  /* >= 1: see create */
  c->span_start.n = c->span_length.n = 0;
  for (int64_t start = 0; start < (int64_t)ndoc;) {
    int64_t length = (int64_t)ndoc - start;
    if (length > max_tokens_for_doc) length = max_tokens_for_doc;
    int32_t s32 = (int32_t)start, l32 = (int32_t)length;
    if ((st = ivec_append(&c->span_start, &s32, 1)) != EST_OK) goto fail;
    if ((st = ivec_append(&c->span_length, &l32, 1)) != EST_OK) goto fail;
    if (start + length == (int64_t)ndoc) break;
    start += length < cfg->doc_stride ? length : cfg->doc_stride;
  }

  const int doc_offset = (int)nq + 2;
  for (size_t span = 0; span < c->span_start.n; span++) {
    const int64_t dstart = c->span_start.v[span], dlen = c->span_length.v[span];
    memset(c->input_ids, 0, 4 * S * sizeof(int32_t));
    memset(c->is_max_context, 0, S);
    for (size_t i = 0; i < S; i++) c->token_to_orig[i] = -1;
    size_t p = 0;
    c->input_ids[p++] = c->cls_id;
    if (nq) memcpy(c->input_ids + p, c->query.v, nq * sizeof(int32_t)); /* v may be NULL when empty */
    p += nq;
    c->input_ids[p++] = c->sep_id;
    for (int64_t i = 0; i < dlen; i++, p++) {
      int64_t t = dstart + i;
      c->token_to_orig[p] = c->tok_to_orig.v[t];
      c->is_max_context[p] = is_max_context(c, span, t);
      c->input_ids[p] = c->doc_tokens.v[t];
      c->segment_ids[p] = 1;
    }
    c->input_ids[p] = c->sep_id;
    c->segment_ids[p++] = 1;
    for (size_t i = 0; i < p; i++) {
      c->input_mask[i] = 1;
      if (c->input_ids[i] == EST_TOKEN_UNK_MISSING) {  /* convert_tokens_to_ids' KeyError */
        st = est_error(EST_ERR_INVALID_ARGUMENT, "token [UNK] is not in vocab %s",
                       est_vocab_path(est_tokenizer_vocab(c->tok)));
        goto fail;
      }
    }

    est_squad_feature f = {
      .unique_id = c->next_unique_id, .example_index = example_index, .doc_span_index = (int)span,
      .num_tokens = (int)p, .input_ids = c->input_ids, .input_mask = c->input_mask,
      .segment_ids = c->segment_ids, .doc_offset = doc_offset, .doc_length = (int)dlen,
      .token_to_orig_map = c->token_to_orig, .token_is_max_context = c->is_max_context,
      .start_position = -1, .end_position = -1, .is_impossible = ex->is_impossible,
    };
    if (cfg->is_training) {
      f.start_position = f.end_position = 0;  /* impossible, or the answer is not all inside */
      if (has_answer && tok_start >= dstart && tok_end <= dstart + dlen - 1) {
        f.start_position = tok_start - dstart + doc_offset;
        f.end_position = tok_end - dstart + doc_offset;
      }
    }
    if (example_index < 20 && !cfg->quiet) log_feature(c, &f, cfg->is_training);
    if ((st = fn(ctx, &f)) != EST_OK) return st;
    c->next_unique_id++;
  }
  return EST_OK;

fail:
  return est_error_prefix("question %s: ", ex->qas_id);
}

est_status est_squad_convert_examples(const est_squad_examples *examples, est_tokenizer *tok,
                                      const est_squad_feature_config *cfg, est_squad_feature_fn fn,
                                      void *ctx) {
  est_squad_converter *c;
  est_status st = est_squad_converter_create(&c, tok, cfg);
  for (size_t i = 0; st == EST_OK && i < examples->count; i++)
    st = est_squad_converter_convert(c, &examples->examples[i], i, fn, ctx);
  est_squad_converter_free(c);
  return st;
}

/* ---- FeatureWriter ----------------------------------------------------------------- */

est_status est_squad_feature_serialize(const est_squad_feature *f, int max_seq_length, bool is_training,
                                       uint8_t **out, size_t *size) {
  *out = NULL;
  *size = 0;
  const size_t S = (size_t)max_seq_length;
  int64_t *wide = malloc((S + 1) * sizeof *wide);
  if (!wide) return est_error(EST_ERR_NO_MEMORY, "serializing SQuAD feature %lld", (long long)f->unique_id);
  est_example ex;
  est_example_init(&ex);
  est_status st = est_example_set_int64(&ex, "unique_ids", &f->unique_id, 1);
  static const char *const keys[3] = {"input_ids", "input_mask", "segment_ids"};
  const int32_t *rows[3] = {f->input_ids, f->input_mask, f->segment_ids};
  for (int k = 0; st == EST_OK && k < 3; k++) {
    for (size_t i = 0; i < S; i++) wide[i] = rows[k][i];
    st = est_example_set_int64(&ex, keys[k], wide, S);
  }
  if (is_training) {
    int64_t impossible = f->is_impossible ? 1 : 0;
    if (st == EST_OK) st = est_example_set_int64(&ex, "start_positions", &f->start_position, 1);
    if (st == EST_OK) st = est_example_set_int64(&ex, "end_positions", &f->end_position, 1);
    if (st == EST_OK) st = est_example_set_int64(&ex, "is_impossible", &impossible, 1);
  }
  if (st == EST_OK) st = est_example_serialize(&ex, out, size);
  est_example_clear(&ex);
  free(wide);
  return st;
}

struct est_squad_feature_writer {
  est_tfrecord_writer *w;
  int max_seq_length;
  bool is_training;
  int64_t count;
};

est_status est_squad_feature_writer_open(est_squad_feature_writer **out, const char *path,
                                         int max_seq_length, bool is_training) {
  *out = NULL;
  if (max_seq_length < 1 || max_seq_length > EST_SQUAD_MAX_SEQ_LIMIT)
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: max_seq_length %d: must be 1 to %d", path, max_seq_length,
                     EST_SQUAD_MAX_SEQ_LIMIT);
  est_squad_feature_writer *w = calloc(1, sizeof *w);
  if (!w) return est_error(EST_ERR_NO_MEMORY, "feature writer for %s", path);
  est_status st = est_tfrecord_writer_open(&w->w, path, EST_COMPRESSION_NONE);
  if (st != EST_OK) {
    free(w);
    return st;
  }
  w->max_seq_length = max_seq_length;
  w->is_training = is_training;
  *out = w;
  return EST_OK;
}

est_status est_squad_feature_writer_write(void *writer, const est_squad_feature *f) {
  est_squad_feature_writer *w = writer;
  uint8_t *bytes;
  size_t n;
  est_status st = est_squad_feature_serialize(f, w->max_seq_length, w->is_training, &bytes, &n);
  if (st == EST_OK) st = est_tfrecord_writer_write(w->w, bytes, n);
  free(bytes);
  if (st == EST_OK) w->count++;
  return st;
}

int64_t est_squad_feature_writer_count(const est_squad_feature_writer *w) { return w->count; }

est_status est_squad_feature_writer_close(est_squad_feature_writer *w) {
  est_status st = est_tfrecord_writer_close(w->w);
  free(w);
  return st;
}

void est_squad_feature_writer_abort(est_squad_feature_writer *w) {
  if (!w) return;
  est_tfrecord_writer_abort(w->w);
  free(w);
}
