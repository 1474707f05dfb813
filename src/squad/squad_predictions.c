/* run_squad.py write_predictions (docs/squad.md §9): the n-best answer spans of each
 * question from its windows' start and end logits, mapped back to the context's text by
 * get_final_text, written as predictions.json, nbest_predictions.json and null_odds.json
 * exactly as the reference writes them.
 *
 * The reference's arithmetic is Python's on float32 logits widened to double: sums of two
 * logits, sorts by them (stable, descending), a softmax with math.exp, and the JSON written
 * with repr() of those doubles. est does the same in double, in the same order. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <utf8proc.h>

#include "est/file.h"
#include "est/log.h"
#include "squad/squad_internal.h"

est_squad_prediction_config est_squad_prediction_config_default(void) {
  return (est_squad_prediction_config){.n_best_size = 20, .max_answer_length = 30};
}

/* What write_predictions reads of one InputFeatures, and its RawResult. */
typedef struct kept_feature {
  int64_t unique_id;
  size_t example_index;
  int num_tokens;              /* len(feature.tokens) */
  int32_t *ids;                /* [num_tokens]: feature.tokens as vocab ids */
  int doc_offset, doc_length;  /* token_to_orig_map / token_is_max_context cover these positions */
  int32_t *orig;               /* [doc_length] token_to_orig_map */
  uint8_t *max_context;        /* [doc_length] token_is_max_context */
  int seq_len;                 /* of the result; 0: none yet */
  float *start, *end;          /* [seq_len] */
} kept_feature;

struct est_squad_predictor {
  const est_squad_examples *examples;
  est_tokenizer *tok;
  est_squad_prediction_config cfg;
  kept_feature *features;
  size_t count, cap;
};

est_status est_squad_predictor_create(est_squad_predictor **out, const est_squad_examples *examples,
                                      est_tokenizer *tok, const est_squad_prediction_config *cfg) {
  *out = NULL;
  if (cfg->n_best_size < 1 || cfg->max_answer_length < 1)
    return est_error(EST_ERR_INVALID_ARGUMENT, "n_best_size %d and max_answer_length %d must be at least 1",
                     cfg->n_best_size, cfg->max_answer_length);
  est_squad_predictor *p = calloc(1, sizeof *p);
  if (!p) return est_error(EST_ERR_NO_MEMORY, "squad predictions: out of memory");
  p->examples = examples;
  p->tok = tok;
  p->cfg = *cfg;
  *out = p;
  return EST_OK;
}

void est_squad_predictor_free(est_squad_predictor *p) {
  if (!p) return;
  for (size_t i = 0; i < p->count; i++) {
    free(p->features[i].ids);
    free(p->features[i].start);
  }
  free(p->features);
  free(p);
}

int64_t est_squad_predictor_num_features(const est_squad_predictor *p) { return (int64_t)p->count; }

est_status est_squad_predictor_add_feature(void *predictor, const est_squad_feature *f) {
  est_squad_predictor *p = predictor;
  if (p->count && f->unique_id != p->features[p->count - 1].unique_id + 1)
    return est_error(EST_ERR_INVALID_ARGUMENT, "squad predictions: feature unique_id %lld does not follow %lld",
                     (long long)f->unique_id, (long long)p->features[p->count - 1].unique_id);
  if (f->example_index >= p->examples->count)
    return est_error(EST_ERR_INVALID_ARGUMENT, "squad predictions: feature %lld of example %zu, of %zu examples",
                     (long long)f->unique_id, f->example_index, p->examples->count);
  if (p->count == p->cap) {
    size_t cap = p->cap ? 2 * p->cap : 256;
    kept_feature *grown = realloc(p->features, cap * sizeof *grown);
    if (!grown) return est_error(EST_ERR_NO_MEMORY, "squad predictions: out of memory for %zu features", cap);
    p->features = grown;
    p->cap = cap;
  }
  kept_feature k = {.unique_id = f->unique_id, .example_index = f->example_index, .num_tokens = f->num_tokens,
                    .doc_offset = f->doc_offset, .doc_length = f->doc_length};
  /* one block: ids, token_to_orig_map, then the max-context flags */
  size_t bytes = (size_t)f->num_tokens * sizeof(int32_t) + (size_t)f->doc_length * (sizeof(int32_t) + 1);
  if (!(k.ids = malloc(bytes ? bytes : 1))) return est_error(EST_ERR_NO_MEMORY, "squad predictions: out of memory");
  k.orig = k.ids + f->num_tokens;
  k.max_context = (uint8_t *)(k.orig + f->doc_length);
  memcpy(k.ids, f->input_ids, (size_t)f->num_tokens * sizeof(int32_t));
  memcpy(k.orig, f->token_to_orig_map + f->doc_offset, (size_t)f->doc_length * sizeof(int32_t));
  memcpy(k.max_context, f->token_is_max_context + f->doc_offset, (size_t)f->doc_length);
  p->features[p->count++] = k;
  return EST_OK;
}

est_status est_squad_predictor_add_result(est_squad_predictor *p, int64_t unique_id, const float *start_logits,
                                          const float *end_logits, int seq_len) {
  /* unique_ids run on from the first feature's, one per feature */
  const int64_t slot = p->count ? unique_id - p->features[0].unique_id : -1;
  if (slot < 0 || slot >= (int64_t)p->count)
    return est_error(EST_ERR_INVALID_ARGUMENT, "squad predictions: a result for unique_id %lld, which no feature has",
                     (long long)unique_id);
  kept_feature *k = &p->features[slot];
  if (k->seq_len) return est_error(EST_ERR_INVALID_ARGUMENT, "squad predictions: a second result for unique_id %lld",
                                   (long long)unique_id);
  if (seq_len < k->num_tokens)
    return est_error(EST_ERR_INVALID_ARGUMENT, "squad predictions: unique_id %lld has %d logits for %d tokens",
                     (long long)unique_id, seq_len, k->num_tokens);
  if (!(k->start = malloc(2 * (size_t)seq_len * sizeof(float))))
    return est_error(EST_ERR_NO_MEMORY, "squad predictions: out of memory");
  k->end = k->start + seq_len;
  memcpy(k->start, start_logits, (size_t)seq_len * sizeof(float));
  memcpy(k->end, end_logits, (size_t)seq_len * sizeof(float));
  k->seq_len = seq_len;
  return EST_OK;
}

/* ---- _get_best_indexes: sorted(enumerate(logits), key=score, reverse=True)[:n] ---------- */

static int by_logit_desc(const void *a, const void *b, void *ctx) {
  const float *logits = ctx;
  const int i = *(const int *)a, j = *(const int *)b;
  if (logits[i] != logits[j]) return logits[i] > logits[j] ? -1 : 1;
  return (i > j) - (i < j); /* a stable sort keeps equal scores in index order */
}

/* The first min(n, len) indexes of logits by descending value; returns how many. */
static int best_indexes(const float *logits, int len, int n, int *order, int *out) {
  for (int i = 0; i < len; i++) order[i] = i;
  qsort_r(order, (size_t)len, sizeof *order, by_logit_desc, (void *)logits);
  const int m = n < len ? n : len;
  memcpy(out, order, (size_t)m * sizeof *out);
  return m;
}

/* ---- the candidates ------------------------------------------------------------------ */

typedef struct prelim {
  size_t feature;              /* index into the predictor's features */
  int start, end;              /* token positions in the feature */
  double start_logit, end_logit;
  size_t order;                /* insertion order: the stable sort's tie-break */
} prelim;

static int by_score_desc(const void *a, const void *b) {
  const prelim *x = a, *y = b;
  const double sx = x->start_logit + x->end_logit, sy = y->start_logit + y->end_logit;
  if (sx != sy) return sx > sy ? -1 : 1;
  return (x->order > y->order) - (x->order < y->order);
}

/* Where a candidate's text is in the example's words: words [word_a, word_b], and code
 * points [char_a, char_b] of " ".join(those words); all -1 for the null answer. */
typedef struct text_span {
  int64_t word_a, word_b, char_a, char_b;
} text_span;

static const text_span NO_SPAN = {-1, -1, -1, -1};

typedef struct nbest_entry {
  char *text;
  double start_logit, end_logit;
  bool int_logits;             /* the reference's int 0 (an example without windows) */
  text_span span;
} nbest_entry;

/* One example's answer as the reference's loop body computes it. */
typedef struct answer {
  const char *qid;
  nbest_entry *nbest;
  size_t n;
  double *probs;
  const char *prediction;      /* points into nbest or a literal */
  bool has_null_odds;
  double score_diff;
} answer;

static void answer_free(answer *a) {
  for (size_t i = 0; i < a->n; i++) free(a->nbest[i].text);
  free(a->nbest);
  free(a->probs);
  memset(a, 0, sizeof *a);
}

/* ---- get_final_text ----------------------------------------------------------------- */

static size_t decode(const char *s, uint32_t **cps) {
  size_t n = strlen(s);
  *cps = malloc((n + 1) * sizeof(uint32_t));
  return *cps ? est_utf8_decode_lossy(s, n, *cps) : 0;
}

/* _strip_spaces: the characters other than " " and, for each, its index in text. */
static size_t strip_spaces(const uint32_t *text, size_t n, uint32_t *ns, size_t *ns_to_s) {
  size_t m = 0;
  for (size_t i = 0; i < n; i++)
    if (text[i] != ' ') ns[m] = text[i], ns_to_s[m++] = i;
  return m;
}

static char *encode(const uint32_t *cps, size_t n) {
  char *out = malloc(4 * n + 1), *w = out;
  if (!out) return NULL;
  for (size_t i = 0; i < n; i++) w += utf8proc_encode_char((utf8proc_int32_t)cps[i], (utf8proc_uint8_t *)w);
  *w = '\0';
  return out;
}

/* The projection of pred_text (tokenized, normalized) back onto orig_text; orig_text itself
 * where the alignment heuristic fails, as the reference. Returns malloc'ed UTF-8 or NULL;
 * *a, *b: the code points of orig_text it spans (b < a: empty). */
static char *get_final_text(est_tokenizer *tok, const char *pred_text, const char *orig_text, bool verbose,
                            int64_t *span_a, int64_t *span_b) {
  const char *tok_joined = est_tokenizer_basic(tok, orig_text, strlen(orig_text), NULL);
  if (!tok_joined) return NULL;
  uint32_t *pred = NULL, *orig = NULL, *tokt = NULL, *orig_ns = NULL, *tok_ns = NULL;
  size_t *orig_map = NULL, *tok_map = NULL;
  long *tok_s_to_ns = NULL;
  char *result = NULL;
  const size_t np = decode(pred_text, &pred), no = decode(orig_text, &orig), nt = decode(tok_joined, &tokt);
  *span_a = 0, *span_b = (int64_t)no - 1; /* the fallbacks: orig_text whole */
  orig_ns = malloc((no + 1) * sizeof *orig_ns), tok_ns = malloc((nt + 1) * sizeof *tok_ns);
  orig_map = malloc((no + 1) * sizeof *orig_map), tok_map = malloc((nt + 1) * sizeof *tok_map);
  tok_s_to_ns = malloc((nt + 1) * sizeof *tok_s_to_ns);
  if (!pred || !orig || !tokt || !orig_ns || !tok_ns || !orig_map || !tok_map || !tok_s_to_ns) goto done;
  /* start_position = tok_text.find(pred_text) */
  long start = -1;
  for (size_t i = 0; i + np <= nt && start < 0; i++)
    if (!memcmp(tokt + i, pred, np * sizeof *pred)) start = (long)i;
  if (start < 0) {
    if (verbose) EST_LOG_INFO("Unable to find text: '%s' in '%s'", pred_text, orig_text);
    result = strdup(orig_text);
    goto done;
  }
  const long end = start + (long)np - 1;
  const size_t nons = strip_spaces(orig, no, orig_ns, orig_map), ntns = strip_spaces(tokt, nt, tok_ns, tok_map);
  if (nons != ntns) {
    if (verbose) {
      char *a = encode(orig_ns, nons), *b = encode(tok_ns, ntns);
      EST_LOG_INFO("Length not equal after stripping spaces: '%s' vs '%s'", a ? a : "", b ? b : "");
      free(a), free(b);
    }
    result = strdup(orig_text);
    goto done;
  }
  for (size_t i = 0; i < nt; i++) tok_s_to_ns[i] = -1;
  for (size_t i = 0; i < ntns; i++) tok_s_to_ns[tok_map[i]] = (long)i;
  /* start and end in tok_text -> no-space index -> orig_text (both maps are total on the
   * no-space indexes, which have equal counts here) */
  const long ns_start = start < (long)nt ? tok_s_to_ns[start] : -1;
  if (ns_start < 0) {
    if (verbose) EST_LOG_INFO("Couldn't map start position");
    result = strdup(orig_text);
    goto done;
  }
  const long ns_end = end >= 0 && end < (long)nt ? tok_s_to_ns[end] : -1;
  if (ns_end < 0) {
    if (verbose) EST_LOG_INFO("Couldn't map end position");
    result = strdup(orig_text);
    goto done;
  }
  const size_t a = orig_map[ns_start], b = orig_map[ns_end];
  /* orig_text[a:b + 1]: empty when b < a, as Python's slice */
  result = b >= a ? encode(orig + a, b - a + 1) : strdup("");
  *span_a = (int64_t)a, *span_b = (int64_t)b;
done:
  free(pred), free(orig), free(tokt), free(orig_ns), free(tok_ns), free(orig_map), free(tok_map), free(tok_s_to_ns);
  return result;
}

/* The text of a non-null candidate: its WordPieces joined and de-tokenized, then
 * get_final_text against the words it came from (where: *span). */
static char *candidate_text(est_squad_predictor *p, const kept_feature *k, const est_squad_example *ex, int start,
                            int end, text_span *span) {
  const est_vocab *vocab = est_tokenizer_vocab(p->tok);
  squad_buf tok_text = {0}, clean = {0}, orig_text = {0};
  char *out = NULL;
  bool ok = true;
  for (int i = start; ok && i <= end; i++) {
    const char *t = est_vocab_token(vocab, k->ids[i]);
    ok = (i == start || squad_buf_append(&tok_text, " ", 1)) && squad_buf_append(&tok_text, t, strlen(t));
  }
  /* tok_text.replace(" ##", "").replace("##", ""), in place: both only shorten it */
  for (int pass = 0; ok && tok_text.p && pass < 2; pass++) {
    const char *needle = pass ? "##" : " ##";
    const size_t nl = strlen(needle);
    char *r = tok_text.p, *w = r;
    while (*r)
      if (!strncmp(r, needle, nl)) r += nl;
      else *w++ = *r++;
    *w = '\0';
    tok_text.len = (size_t)(w - tok_text.p);
  }
  /* strip() and " ".join(split()) */
  ok = ok && squad_whitespace_join(tok_text.p ? tok_text.p : "", tok_text.len, &clean);
  const int32_t a = k->orig[start - k->doc_offset], b = k->orig[end - k->doc_offset];
  for (int32_t w = a; ok && w <= b; w++)
    ok = (w == a || squad_buf_append(&orig_text, " ", 1)) &&
         squad_buf_append(&orig_text, ex->doc_tokens[w], strlen(ex->doc_tokens[w]));
  *span = (text_span){.word_a = a, .word_b = b};
  if (ok)
    out = get_final_text(p->tok, clean.p ? clean.p : "", orig_text.p ? orig_text.p : "", p->cfg.verbose_logging,
                         &span->char_a, &span->char_b);
  squad_buf_free(&tok_text), squad_buf_free(&clean), squad_buf_free(&orig_text);
  return out;
}

/* The loop body of write_predictions for example `ei`, whose features are [f0, f1). */
static est_status answer_example(est_squad_predictor *p, size_t ei, size_t f0, size_t f1, answer *out) {
  const est_squad_prediction_config *c = &p->cfg;
  const est_squad_example *ex = &p->examples->examples[ei];
  const int nb = c->n_best_size;
  prelim *cands = NULL;
  size_t ncand = 0, capcand = 0;
  int *order = NULL, *starts = malloc((size_t)nb * sizeof(int)), *ends = malloc((size_t)nb * sizeof(int));
  est_status st = starts && ends ? EST_OK : est_error(EST_ERR_NO_MEMORY, "squad predictions: out of memory");
  double score_null = 1000000;    /* large and positive */
  size_t min_null_feature = f0;
  double null_start = 0, null_end = 0;
  for (size_t fi = f0; st == EST_OK && fi < f1; fi++) {
    const kept_feature *k = &p->features[fi];
    if (!k->seq_len) {
      st = est_error(EST_ERR_INVALID_ARGUMENT, "squad predictions: no result for unique_id %lld",
                     (long long)k->unique_id);
      break;
    }
    int *grown = realloc(order, (size_t)k->seq_len * sizeof(int));
    if (!grown) {
      st = est_error(EST_ERR_NO_MEMORY, "squad predictions: out of memory");
      break;
    }
    order = grown;
    const int ns = best_indexes(k->start, k->seq_len, nb, order, starts);
    const int ne = best_indexes(k->end, k->seq_len, nb, order, ends);
    if (c->version_2_with_negative) {
      const double feature_null = (double)k->start[0] + (double)k->end[0];
      if (feature_null < score_null) {
        score_null = feature_null;
        min_null_feature = fi;
        null_start = k->start[0];
        null_end = k->end[0];
      }
    }
    for (int si = 0; si < ns; si++)
      for (int ej = 0; ej < ne; ej++) {
        const int s = starts[si], e = ends[ej];
        /* in the window (token_to_orig_map), start with its most context, a span within
         * max_answer_length: the reference's filters, in its order */
        if (s >= k->num_tokens || e >= k->num_tokens) continue;
        if (s < k->doc_offset || s >= k->doc_offset + k->doc_length) continue;
        if (e < k->doc_offset || e >= k->doc_offset + k->doc_length) continue;
        if (!k->max_context[s - k->doc_offset]) continue;
        if (e < s || e - s + 1 > c->max_answer_length) continue;
        if (ncand == capcand) {
          capcand = capcand ? 2 * capcand : 64;
          prelim *g = realloc(cands, capcand * sizeof *g);
          if (!g) {
            st = est_error(EST_ERR_NO_MEMORY, "squad predictions: out of memory");
            goto done;
          }
          cands = g;
        }
        cands[ncand] = (prelim){.feature = fi, .start = s, .end = e, .start_logit = k->start[s],
                                .end_logit = k->end[e], .order = ncand};
        ncand++;
      }
  }
  if (st != EST_OK) goto done;
  const bool no_windows = f0 == f1;
  if (c->version_2_with_negative && !no_windows) {
    prelim *g = realloc(cands, (ncand + 1) * sizeof *g);
    if (!g) {
      st = est_error(EST_ERR_NO_MEMORY, "squad predictions: out of memory");
      goto done;
    }
    cands = g;
    cands[ncand] = (prelim){.feature = min_null_feature, .start = 0, .end = 0, .start_logit = null_start,
                            .end_logit = null_end, .order = ncand};
    ncand++;
  }
  if (ncand) qsort(cands, ncand, sizeof *cands, by_score_desc); /* qsort(NULL, 0) is undefined */

  out->nbest = calloc((size_t)nb + 2, sizeof *out->nbest);
  if (!out->nbest) {
    st = est_error(EST_ERR_NO_MEMORY, "squad predictions: out of memory");
    goto done;
  }
  bool seen_empty = false;
  for (size_t i = 0; i < ncand && out->n < (size_t)nb; i++) {
    const prelim *c1 = &cands[i];
    char *text;
    text_span span = NO_SPAN;
    if (c1->start > 0) { /* a non-null prediction */
      text = candidate_text(p, &p->features[c1->feature], ex, c1->start, c1->end, &span);
      if (!text) {
        st = est_error(EST_ERR_NO_MEMORY, "squad predictions: out of memory");
        goto done;
      }
      bool seen = !*text && seen_empty;
      for (size_t j = 0; !seen && j < out->n; j++) seen = !strcmp(out->nbest[j].text, text);
      if (seen) {
        free(text);
        continue;
      }
      if (!*text) seen_empty = true;
    } else {
      /* the null answer; seen_predictions[""] = True even when "" is already there */
      text = strdup("");
      seen_empty = true;
    }
    if (!text) {
      st = est_error(EST_ERR_NO_MEMORY, "squad predictions: out of memory");
      goto done;
    }
    out->nbest[out->n++] =
        (nbest_entry){.text = text, .start_logit = c1->start_logit, .end_logit = c1->end_logit, .span = span};
  }
  if (c->version_2_with_negative && !seen_empty)
    out->nbest[out->n++] = (nbest_entry){.text = strdup(""), .start_logit = null_start, .end_logit = null_end,
                                         .int_logits = no_windows, .span = NO_SPAN};
  if (!out->n) /* "In very rare edge cases we could have no valid predictions." */
    out->nbest[out->n++] = (nbest_entry){.text = strdup("empty"), .span = NO_SPAN};
  for (size_t i = 0; i < out->n; i++)
    if (!out->nbest[i].text) {
      st = est_error(EST_ERR_NO_MEMORY, "squad predictions: out of memory");
      goto done;
    }

  /* _compute_softmax of the entries' scores */
  out->probs = malloc(out->n * sizeof *out->probs);
  if (!out->probs) {
    st = est_error(EST_ERR_NO_MEMORY, "squad predictions: out of memory");
    goto done;
  }
  double max_score = 0, total = 0.0;
  const nbest_entry *best_non_null = NULL;
  for (size_t i = 0; i < out->n; i++) {
    const double score = out->nbest[i].start_logit + out->nbest[i].end_logit;
    if (i == 0 || score > max_score) max_score = score;
    if (!best_non_null && *out->nbest[i].text) best_non_null = &out->nbest[i];
  }
  for (size_t i = 0; i < out->n; i++) {
    out->probs[i] = exp(out->nbest[i].start_logit + out->nbest[i].end_logit - max_score);
    total += out->probs[i];
  }
  for (size_t i = 0; i < out->n; i++) out->probs[i] /= total;

  if (!c->version_2_with_negative) {
    out->prediction = out->nbest[0].text;
  } else {
    out->has_null_odds = true;
    if (!best_non_null) {
      /* every entry is the null answer: the reference fails here (best_non_null_entry is
       * None); est predicts "" and writes score_null as if the best non-null scored 0 */
      out->score_diff = score_null;
      out->prediction = "";
    } else {
      out->score_diff = score_null - best_non_null->start_logit - best_non_null->end_logit;
      out->prediction = out->score_diff > c->null_score_diff_threshold ? "" : best_non_null->text;
    }
  }
done:
  free(cands), free(order), free(starts), free(ends);
  return st;
}

/* ---- json.dumps(..., indent=4) -------------------------------------------------------- */

/* A JSON string as Python's json.dumps writes it (ensure_ascii: every character outside
 * ' '..'~' escaped, lowercase hex, surrogate pairs beyond the BMP). */
static void put_string(FILE *f, const char *s) {
  fputc('"', f);
  const size_t n = strlen(s);
  size_t i = 0;
  while (i < n) {
    utf8proc_int32_t cp;
    utf8proc_ssize_t len = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &cp);
    if (len <= 0) cp = 0xFFFD, len = 1; /* the inputs were valid UTF-8 JSON; never expected */
    i += (size_t)len;
    switch (cp) {
    case '"': fputs("\\\"", f); continue;
    case '\\': fputs("\\\\", f); continue;
    case '\n': fputs("\\n", f); continue;
    case '\r': fputs("\\r", f); continue;
    case '\t': fputs("\\t", f); continue;
    case '\b': fputs("\\b", f); continue;
    case '\f': fputs("\\f", f); continue;
    default: break;
    }
    if (cp >= ' ' && cp <= '~') fputc(cp, f);
    else if (cp < 0x10000) fprintf(f, "\\u%04x", (unsigned)cp);
    else {
      const unsigned v = (unsigned)cp - 0x10000;
      fprintf(f, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
    }
  }
  fputc('"', f);
}

static void put_float(FILE *f, double v) {
  char buf[40];
  fputs(est_squad_format_pyfloat(v, buf, sizeof buf), f);
}

typedef enum { OUT_PREDICTIONS, OUT_NBEST, OUT_NULL_ODDS } output_kind;

static void put_value(FILE *f, output_kind kind, const answer *a) {
  if (kind == OUT_PREDICTIONS) {
    put_string(f, a->prediction);
  } else if (kind == OUT_NULL_ODDS) {
    put_float(f, a->score_diff);
  } else {
    fputs("[\n", f);
    for (size_t i = 0; i < a->n; i++) {
      const nbest_entry *e = &a->nbest[i];
      fputs("        {\n            \"text\": ", f);
      put_string(f, e->text);
      fputs(",\n            \"probability\": ", f);
      put_float(f, a->probs[i]);
      fputs(",\n            \"start_logit\": ", f);
      if (e->int_logits) fputs("0", f);
      else put_float(f, e->start_logit);
      fputs(",\n            \"end_logit\": ", f);
      if (e->int_logits) fputs("0", f);
      else put_float(f, e->end_logit);
      fputs(i + 1 < a->n ? "\n        },\n" : "\n        }\n", f);
    }
    fputs("    ]", f);
  }
}

/* The three dicts share their keys: the questions' ids in first-seen order (an OrderedDict
 * keeps a repeated id at its first place with its last value). */
typedef struct outputs {
  answer *answers;             /* per example */
  size_t *slot_example;        /* per distinct id: the example whose answer it holds */
  size_t nslots;
} outputs;

static est_status write_dict(const char *path, output_kind kind, const outputs *o) {
  est_atomic_file *af;
  est_status st = est_atomic_open(&af, path);
  if (st != EST_OK) return st;
  FILE *f = est_atomic_stream(af);
  /* json.dumps(OrderedDict(), indent=4) is "{}" */
  fputs(o->nslots ? "{\n" : "{}", f);
  for (size_t s = 0; s < o->nslots; s++) {
    const size_t ei = o->slot_example[s];
    fputs("    ", f);
    put_string(f, o->answers[ei].qid);
    fputs(": ", f);
    put_value(f, kind, &o->answers[ei]);
    fputs(s + 1 < o->nslots ? ",\n" : "\n}", f);
  }
  fputc('\n', f);
  return est_atomic_commit(af);
}

est_status est_squad_predictor_write(est_squad_predictor *p, const char *prediction_file, const char *nbest_file,
                                     const char *null_odds_file) {
  EST_LOG_INFO("Writing predictions to: %s", prediction_file);
  EST_LOG_INFO("Writing nbest to: %s", nbest_file);
  const size_t ne = p->examples->count;
  outputs o = {.answers = calloc(ne ? ne : 1, sizeof *o.answers),
               .slot_example = malloc((ne ? ne : 1) * sizeof *o.slot_example)};
  json_t *slots = json_object(); /* question id -> its slot */
  est_status st = o.answers && o.slot_example && slots ? EST_OK
                                                       : est_error(EST_ERR_NO_MEMORY, "squad predictions: out of memory");
  size_t f0 = 0;
  for (size_t ei = 0; st == EST_OK && ei < ne; ei++) {
    size_t f1 = f0;
    while (f1 < p->count && p->features[f1].example_index == ei) f1++;
    o.answers[ei].qid = p->examples->examples[ei].qas_id;
    st = answer_example(p, ei, f0, f1, &o.answers[ei]);
    f0 = f1;
    if (st != EST_OK) break;
    json_t *slot = json_object_get(slots, o.answers[ei].qid);
    if (slot) {
      o.slot_example[json_integer_value(slot)] = ei;
    } else if (json_object_set_new(slots, o.answers[ei].qid, json_integer((json_int_t)o.nslots)) != 0) {
      st = est_error(EST_ERR_NO_MEMORY, "squad predictions: out of memory");
    } else {
      o.slot_example[o.nslots++] = ei;
    }
  }
  if (st == EST_OK && f0 != p->count)
    st = est_error(EST_ERR_INVALID_ARGUMENT, "squad predictions: feature %lld belongs to no example in order",
                   (long long)p->features[f0].unique_id);
  if (st == EST_OK) st = write_dict(prediction_file, OUT_PREDICTIONS, &o);
  if (st == EST_OK) st = write_dict(nbest_file, OUT_NBEST, &o);
  if (st == EST_OK && p->cfg.version_2_with_negative) st = write_dict(null_odds_file, OUT_NULL_ODDS, &o);
  for (size_t ei = 0; o.answers && ei < ne; ei++) answer_free(&o.answers[ei]);
  free(o.answers);
  free(o.slot_example);
  json_decref(slots);
  return st;
}

/* ---- one example's answer, for est predict / est serve ------------------------------------ */

void est_squad_answer_clear(est_squad_answer *a) {
  free(a->text);
  memset(a, 0, sizeof *a);
}

/* Code point `pos` of " ".join(words[w..]) as (word, code point in it). */
static void word_position(const est_squad_example *ex, int64_t w, int64_t pos, int64_t *word, int64_t *in_word) {
  for (; w < (int64_t)ex->num_doc_tokens; w++) {
    const int64_t len = (int64_t)squad_utf8_length(ex->doc_tokens[w], strlen(ex->doc_tokens[w]));
    if (pos < len) break;
    pos -= len + 1;
  }
  *word = w, *in_word = pos;
}

est_status est_squad_predictor_best(est_squad_predictor *p, size_t example_index, est_squad_answer *out) {
  memset(out, 0, sizeof *out);
  out->start_word = out->start_in_word = out->end_word = out->end_in_word = -1;
  if (example_index >= p->examples->count)
    return est_error(EST_ERR_INVALID_ARGUMENT, "squad predictions: example %zu of %zu", example_index,
                     p->examples->count);
  size_t f0 = 0;
  while (f0 < p->count && p->features[f0].example_index < example_index) f0++;
  size_t f1 = f0;
  while (f1 < p->count && p->features[f1].example_index == example_index) f1++;
  answer a = {.qid = p->examples->examples[example_index].qas_id};
  est_status st = answer_example(p, example_index, f0, f1, &a);
  /* the entry whose text is the prediction (the null answer: the first "") */
  size_t chosen = 0;
  while (st == EST_OK && chosen + 1 < a.n && strcmp(a.nbest[chosen].text, a.prediction)) chosen++;
  if (st == EST_OK && !(out->text = strdup(a.prediction))) st = est_error(EST_ERR_NO_MEMORY, "squad answer");
  if (st == EST_OK) {
    const text_span *sp = &a.nbest[chosen].span;
    out->probability = a.probs[chosen];
    if (*out->text && sp->word_a >= 0 && sp->char_b >= sp->char_a) {
      const est_squad_example *ex = &p->examples->examples[example_index];
      word_position(ex, sp->word_a, sp->char_a, &out->start_word, &out->start_in_word);
      word_position(ex, sp->word_a, sp->char_b, &out->end_word, &out->end_in_word);
    }
  }
  answer_free(&a);
  return st;
}
