/* run_squad.py's write_predictions (docs/squad.md §9): for every example, the n-best answer
 * spans over its windows' start and end logits, each mapped back to the original text by
 * get_final_text, their softmax, and predictions.json / nbest_predictions.json /
 * null_odds.json as json.dumps(indent=4) writes them.
 *
 * Numbers as the script has them: a logit is Python's float() of the model's float32, a
 * score start_logit + end_logit is a double sum, probabilities come from _compute_softmax
 * (libm exp, left-to-right sum) and every float is printed as repr(). Strings are indexed by
 * code points (Python str), so get_final_text decodes to code points.
 *
 * One departure: with --version_2_with_negative, when no candidate of an example has text
 * (every n-best entry is the null answer), the script fails on best_non_null_entry = None;
 * est predicts "" and writes the script's "large and positive" null score, 1000000.0, as its
 * null odds. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/file.h"
#include "est/log.h"
#include "est/serving.h"
#include "est/squad.h"
#include "squad_internal.h"

est_squad_prediction_config est_squad_prediction_config_default(void) {
  return (est_squad_prediction_config){.n_best_size = 20, .max_answer_length = 30};
}

/* What write_predictions reads of one InputFeatures: its tokens and its window. */
typedef struct kept_feature {
  int64_t unique_id;
  size_t example_index;
  int num_tokens, doc_offset, doc_length;
  int32_t *ids;                 /* [num_tokens] */
  int32_t *token_to_orig;       /* [doc_length]: word index of position doc_offset + i */
  uint8_t *max_context;         /* [doc_length] */
  float *start_logits, *end_logits; /* [max_seq_length] each once its result arrived; else NULL */
} kept_feature;

struct est_squad_predictions {
  const est_squad_examples *examples;
  est_tokenizer *tok;
  int max_seq_length;
  est_squad_prediction_config cfg;
  kept_feature *features;
  size_t count, cap;
};

est_status est_squad_predictions_create(est_squad_predictions **out, const est_squad_examples *examples,
                                        est_tokenizer *tok, int max_seq_length,
                                        const est_squad_prediction_config *cfg) {
  *out = NULL;
  if (cfg->n_best_size < 0 || cfg->max_answer_length < 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "--n_best_size=%d, --max_answer_length=%d: must be >= 0",
                     cfg->n_best_size, cfg->max_answer_length);
  est_squad_predictions *p = calloc(1, sizeof *p);
  if (!p) return est_error(EST_ERR_NO_MEMORY, "write_predictions: out of memory");
  p->examples = examples;
  p->tok = tok;
  p->max_seq_length = max_seq_length;
  p->cfg = *cfg;
  *out = p;
  return EST_OK;
}

void est_squad_predictions_free(est_squad_predictions *p) {
  if (!p) return;
  for (size_t i = 0; i < p->count; i++) {
    kept_feature *f = &p->features[i];
    free(f->ids);
    free(f->token_to_orig);
    free(f->max_context);
    free(f->start_logits);
    free(f->end_logits);
  }
  free(p->features);
  free(p);
}

est_status est_squad_predictions_add_feature(void *ctx, const est_squad_feature *f) {
  est_squad_predictions *p = ctx;
  if (p->count && f->unique_id != p->features[p->count - 1].unique_id + 1)
    return est_error(EST_ERR_INVALID_ARGUMENT, "write_predictions: feature %lld does not follow %lld",
                     (long long)f->unique_id, (long long)p->features[p->count - 1].unique_id);
  if (p->count == p->cap) {
    size_t cap = p->cap ? 2 * p->cap : 256;
    kept_feature *grown = realloc(p->features, cap * sizeof *grown);
    if (!grown) return est_error(EST_ERR_NO_MEMORY, "write_predictions: out of memory for %zu features", cap);
    p->features = grown;
    p->cap = cap;
  }
  kept_feature *k = &p->features[p->count];
  *k = (kept_feature){.unique_id = f->unique_id, .example_index = f->example_index, .num_tokens = f->num_tokens,
                      .doc_offset = f->doc_offset, .doc_length = f->doc_length};
  k->ids = malloc((size_t)f->num_tokens * sizeof *k->ids + 1);
  k->token_to_orig = malloc((size_t)f->doc_length * sizeof *k->token_to_orig + 1);
  k->max_context = malloc((size_t)f->doc_length + 1);
  p->count++; /* owned from now on, freed with p */
  if (!k->ids || !k->token_to_orig || !k->max_context)
    return est_error(EST_ERR_NO_MEMORY, "write_predictions: out of memory for feature %lld", (long long)f->unique_id);
  memcpy(k->ids, f->input_ids, (size_t)f->num_tokens * sizeof *k->ids);
  memcpy(k->token_to_orig, f->token_to_orig_map + f->doc_offset, (size_t)f->doc_length * sizeof *k->token_to_orig);
  memcpy(k->max_context, f->token_is_max_context + f->doc_offset, (size_t)f->doc_length);
  return EST_OK;
}

size_t est_squad_predictions_num_features(const est_squad_predictions *p) { return p->count; }

est_status est_squad_predictions_add_result(est_squad_predictions *p, int64_t unique_id, const float *start_logits,
                                            const float *end_logits) {
  const int64_t first = p->count ? p->features[0].unique_id : 0;
  if (!p->count || unique_id < first || unique_id - first >= (int64_t)p->count)
    return est_error(EST_ERR_INVALID_ARGUMENT, "write_predictions: a result for unique_id %lld, which no feature has",
                     (long long)unique_id);
  kept_feature *f = &p->features[unique_id - first];
  const size_t S = (size_t)p->max_seq_length;
  if (!f->start_logits) {
    f->start_logits = malloc(S * sizeof(float));
    f->end_logits = malloc(S * sizeof(float));
    if (!f->start_logits || !f->end_logits)
      return est_error(EST_ERR_NO_MEMORY, "write_predictions: out of memory for result %lld", (long long)unique_id);
  }
  memcpy(f->start_logits, start_logits, S * sizeof(float));
  memcpy(f->end_logits, end_logits, S * sizeof(float));
  return EST_OK;
}

/* ---- _get_best_indexes, the candidates' order ----------------------------------------- */

/* sorted(..., reverse=True) is stable: equal keys keep their first-come order. */
typedef struct ranked {
  double key;
  size_t order;
} ranked;

static int by_key_desc(const void *a, const void *b) {
  const ranked *x = a, *y = b;
  if (x->key != y->key) return x->key > y->key ? -1 : 1;
  return x->order < y->order ? -1 : x->order > y->order;
}

/* The first min(n, S) indices of logits in descending order (ties: lower index first). */
static size_t best_indexes(const float *logits, int S, int n, ranked *scratch, int *out) {
  for (int i = 0; i < S; i++) scratch[i] = (ranked){logits[i], (size_t)i};
  qsort(scratch, (size_t)S, sizeof *scratch, by_key_desc);
  const int k = n < S ? n : S;
  for (int i = 0; i < k; i++) out[i] = (int)scratch[i].order;
  return (size_t)k;
}

/* ---- get_final_text -------------------------------------------------------------------- */

/* Code points of valid UTF-8 with each one's byte offset (offsets[n] = the length). */
typedef struct cps {
  uint32_t *cp;
  size_t *offset;
  size_t n;
} cps;

static bool decode(const char *s, cps *out) {
  const size_t len = strlen(s);
  out->cp = malloc((len + 1) * sizeof *out->cp);
  out->offset = malloc((len + 1) * sizeof *out->offset);
  out->n = 0;
  if (!out->cp || !out->offset) return false;
  for (size_t i = 0; i < len;) {
    size_t adv = 1;
    const unsigned char c = (unsigned char)s[i];
    if (c >= 0xF0) adv = 4;
    else if (c >= 0xE0) adv = 3;
    else if (c >= 0xC0) adv = 2;
    if (adv > len - i) adv = len - i;
    uint32_t one;
    est_utf8_decode_lossy(s + i, adv, &one);
    out->offset[out->n] = i;
    out->cp[out->n++] = one;
    i += adv;
  }
  out->offset[out->n] = len;
  return true;
}

static void cps_free(cps *c) {
  free(c->cp);
  free(c->offset);
}

/* _strip_spaces: ns_to_s[j] = the index in text of the j-th character that is not ' '. */
static size_t strip_spaces(const cps *text, size_t *ns_to_s) {
  size_t n = 0;
  for (size_t i = 0; i < text->n; i++)
    if (text->cp[i] != ' ') ns_to_s[n++] = i;
  return n;
}

/* get_final_text(pred_text, orig_text, do_lower_case) into out: the span of orig_text whose
 * characters align with pred_text inside BasicTokenizer(orig_text), or orig_text itself
 * when the alignment fails (the script's fallbacks, logged under --verbose_logging). */
static est_status final_text(est_squad_predictions *p, const char *pred_text, const char *orig_text, squad_buf *out) {
  out->len = 0;
  const char *tok_text = est_tokenizer_basic(p->tok, orig_text, strlen(orig_text), NULL);
  if (!tok_text) return est_error(EST_ERR_NO_MEMORY, "get_final_text: out of memory");
  const char *found = strstr(tok_text, pred_text);
  const char *fallback = NULL;
  cps orig = {0}, tok = {0};
  size_t *orig_ns = NULL, *tok_ns = NULL, *tok_s_to_ns = NULL;
  est_status st = EST_OK;
  if (!found) {
    fallback = "Unable to find text";
    goto done;
  }
  if (!decode(orig_text, &orig) || !decode(tok_text, &tok)) goto oom;
  orig_ns = malloc((orig.n + 1) * sizeof *orig_ns);
  tok_ns = malloc((tok.n + 1) * sizeof *tok_ns);
  tok_s_to_ns = malloc((tok.n + 1) * sizeof *tok_s_to_ns);
  if (!orig_ns || !tok_ns || !tok_s_to_ns) goto oom;
  /* str.find's index counts characters: the byte offset's code point */
  size_t start = 0;
  while (tok.offset[start] < (size_t)(found - tok_text)) start++;
  const size_t pred_len = squad_utf8_length(pred_text, strlen(pred_text));
  const long long end = (long long)start + (long long)pred_len - 1;
  const size_t orig_n = strip_spaces(&orig, orig_ns), tok_n = strip_spaces(&tok, tok_ns);
  if (orig_n != tok_n) {
    fallback = "Length not equal after stripping spaces";
    goto done;
  }
  for (size_t i = 0; i < tok.n; i++) tok_s_to_ns[i] = SIZE_MAX;
  for (size_t j = 0; j < tok_n; j++) tok_s_to_ns[tok_ns[j]] = j;
  /* start_position / end_position must be non-space characters of tok_text */
  if (start >= tok.n || tok_s_to_ns[start] == SIZE_MAX || tok_s_to_ns[start] >= orig_n) {
    fallback = "Couldn't map start position";
    goto done;
  }
  if (end < 0 || (size_t)end >= tok.n || tok_s_to_ns[end] == SIZE_MAX || tok_s_to_ns[end] >= orig_n) {
    fallback = "Couldn't map end position";
    goto done;
  }
  const size_t orig_start = orig_ns[tok_s_to_ns[start]], orig_end = orig_ns[tok_s_to_ns[end]];
  /* orig_text[orig_start:orig_end + 1]: empty when the end comes first */
  const size_t from = orig.offset[orig_start], to = orig_end >= orig_start ? orig.offset[orig_end + 1] : from;
  if (!squad_buf_append(out, orig_text + from, to - from)) goto oom;
  goto cleanup;
oom:
  st = est_error(EST_ERR_NO_MEMORY, "get_final_text: out of memory");
  goto cleanup;
done:
  if (p->cfg.verbose_logging) EST_LOG_INFO("%s: '%s' in '%s'", fallback, pred_text, orig_text);
  out->len = 0;
  if (!squad_buf_append(out, orig_text, strlen(orig_text))) st = est_error(EST_ERR_NO_MEMORY, "out of memory");
cleanup:
  cps_free(&orig);
  cps_free(&tok);
  free(orig_ns);
  free(tok_ns);
  free(tok_s_to_ns);
  return st;
}

/* ---- one example's n-best --------------------------------------------------------------- */

typedef struct prelim {
  size_t feature;               /* index into p->features */
  int start, end;               /* positions in the feature */
  double start_logit, end_logit;
} prelim;

typedef struct nbest_entry {
  char *text;
  double start_logit, end_logit;
  bool logits_are_int;          /* the script's int 0 null logits of an example without windows */
} nbest_entry;

/* The scratch of one example, grown as needed. */
typedef struct work {
  prelim *prelims;
  ranked *order, *scratch;
  int *starts, *ends;
  size_t prelim_cap;
  nbest_entry *nbest;
  double *probs;
  squad_buf tok_text, orig_text, joined, final;
} work;

static bool push_prelim(work *w, size_t *n, prelim pr) {
  if (*n == w->prelim_cap) {
    size_t cap = w->prelim_cap ? 2 * w->prelim_cap : 512;
    prelim *grown = realloc(w->prelims, cap * sizeof *grown);
    ranked *order = realloc(w->order, cap * sizeof *order);
    if (grown) w->prelims = grown;
    if (order) w->order = order;
    if (!grown || !order) return false;
    w->prelim_cap = cap;
  }
  w->prelims[(*n)++] = pr;
  return true;
}

/* tok_text of a candidate: its WordPiece tokens joined, "##" pieces glued, whitespace
 * collapsed; orig_text: its words joined by spaces. Then get_final_text. */
static est_status candidate_text(est_squad_predictions *p, work *w, const kept_feature *f,
                                 const est_squad_example *ex, const prelim *pr) {
  const est_vocab *vocab = est_tokenizer_vocab(p->tok);
  w->tok_text.len = 0;
  for (int i = pr->start; i <= pr->end; i++) {
    const char *t = est_vocab_token(vocab, f->ids[i]);
    if ((i > pr->start && !squad_buf_append(&w->tok_text, " ", 1)) || !squad_buf_append(&w->tok_text, t, strlen(t)))
      return est_error(EST_ERR_NO_MEMORY, "write_predictions: out of memory");
  }
  /* replace(" ##", "") then replace("##", "") */
  const char *pats[2] = {" ##", "##"};
  for (int k = 0; k < 2; k++) {
    const size_t plen = strlen(pats[k]);
    size_t o = 0;
    for (size_t i = 0; i < w->tok_text.len;) {
      if (i + plen <= w->tok_text.len && !memcmp(w->tok_text.p + i, pats[k], plen)) {
        i += plen;
        continue;
      }
      w->tok_text.p[o++] = w->tok_text.p[i++];
    }
    w->tok_text.len = o;
    w->tok_text.p[o] = '\0';
  }
  /* strip() and " ".join(split()) */
  if (!squad_whitespace_join(w->tok_text.p, w->tok_text.len, &w->joined))
    return est_error(EST_ERR_NO_MEMORY, "write_predictions: out of memory");
  w->orig_text.len = 0;
  const int32_t first = f->token_to_orig[pr->start - f->doc_offset], last = f->token_to_orig[pr->end - f->doc_offset];
  for (int32_t i = first; i <= last; i++) {
    const char *word = ex->doc_tokens[i];
    if ((i > first && !squad_buf_append(&w->orig_text, " ", 1)) ||
        !squad_buf_append(&w->orig_text, word, strlen(word)))
      return est_error(EST_ERR_NO_MEMORY, "write_predictions: out of memory");
  }
  if (!squad_buf_append(&w->orig_text, "", 0)) return est_error(EST_ERR_NO_MEMORY, "write_predictions: out of memory");
  return final_text(p, w->joined.p, w->orig_text.p, &w->final);
}

/* The features of one example: p->features[first, last). Fills w->nbest (*n entries) and
 * returns the null score, the best non-null entry (NULL: none) through the pointers. */
static est_status example_nbest(est_squad_predictions *p, work *w, const est_squad_example *ex, size_t first,
                                size_t last, size_t *n_out, double *score_null_out, bool *null_is_int) {
  const est_squad_prediction_config *cfg = &p->cfg;
  const int S = p->max_seq_length;
  size_t n = 0;
  double score_null = 1000000; /* large and positive */
  size_t min_null_feature = first;
  double null_start = 0, null_end = 0;
  *null_is_int = true;
  for (size_t fi = first; fi < last; fi++) {
    const kept_feature *f = &p->features[fi];
    if (!f->start_logits)
      return est_error(EST_ERR_INVALID_ARGUMENT, "write_predictions: no result for feature unique_id %lld (question %s)",
                       (long long)f->unique_id, ex->qas_id);
    const size_t ns = best_indexes(f->start_logits, S, cfg->n_best_size, w->scratch, w->starts);
    const size_t ne = best_indexes(f->end_logits, S, cfg->n_best_size, w->scratch, w->ends);
    if (cfg->version_2_with_negative) {
      const double feature_null = (double)f->start_logits[0] + (double)f->end_logits[0];
      if (feature_null < score_null) {
        score_null = feature_null;
        min_null_feature = fi;
        null_start = f->start_logits[0];
        null_end = f->end_logits[0];
        *null_is_int = false;
      }
    }
    for (size_t a = 0; a < ns; a++)
      for (size_t b = 0; b < ne; b++) {
        const int s = w->starts[a], e = w->ends[b];
        if (s >= f->num_tokens || e >= f->num_tokens) continue;
        if (s < f->doc_offset || s >= f->doc_offset + f->doc_length) continue; /* not in token_to_orig_map */
        if (e < f->doc_offset || e >= f->doc_offset + f->doc_length) continue;
        if (!f->max_context[s - f->doc_offset]) continue;
        if (e < s || e - s + 1 > cfg->max_answer_length) continue;
        if (!push_prelim(w, &n, (prelim){fi, s, e, f->start_logits[s], f->end_logits[e]}))
          return est_error(EST_ERR_NO_MEMORY, "write_predictions: out of memory");
      }
  }
  if (cfg->version_2_with_negative &&
      !push_prelim(w, &n, (prelim){min_null_feature, 0, 0, null_start, null_end}))
    return est_error(EST_ERR_NO_MEMORY, "write_predictions: out of memory");
  for (size_t i = 0; i < n; i++) w->order[i] = (ranked){w->prelims[i].start_logit + w->prelims[i].end_logit, i};
  qsort(w->order, n, sizeof *w->order, by_key_desc);

  size_t kept = 0;
  bool null_seen = false;
  for (size_t r = 0; r < n && kept < (size_t)cfg->n_best_size; r++) {
    const prelim *pr = &w->prelims[w->order[r].order];
    char *text;
    if (pr->start > 0) { /* a non-null prediction */
      est_status st = candidate_text(p, w, &p->features[pr->feature], ex, pr);
      if (st != EST_OK) return st;
      bool seen = w->final.len == 0 && null_seen;
      for (size_t k = 0; k < kept && !seen; k++) seen = !strcmp(w->nbest[k].text, w->final.p ? w->final.p : "");
      if (seen) continue;
      text = strdup(w->final.p ? w->final.p : "");
      if (!w->final.len) null_seen = true;
    } else {
      text = strdup("");
      null_seen = true;
    }
    if (!text) return est_error(EST_ERR_NO_MEMORY, "write_predictions: out of memory");
    w->nbest[kept++] = (nbest_entry){text, pr->start_logit, pr->end_logit, pr->start == 0 && *null_is_int};
  }
  /* the empty option when it is not in the n-best; a nonce "empty" when nothing is */
  if (cfg->version_2_with_negative && !null_seen) {
    char *text = strdup("");
    if (!text) return est_error(EST_ERR_NO_MEMORY, "write_predictions: out of memory");
    w->nbest[kept++] = (nbest_entry){text, null_start, null_end, *null_is_int};
  }
  if (!kept) {
    char *text = strdup("empty");
    if (!text) return est_error(EST_ERR_NO_MEMORY, "write_predictions: out of memory");
    w->nbest[kept++] = (nbest_entry){text, 0.0, 0.0, false};
  }
  *n_out = kept;
  *score_null_out = score_null;
  return EST_OK;
}

/* _compute_softmax over start_logit + end_logit of each entry. */
static void compute_softmax(const nbest_entry *nbest, size_t n, double *probs) {
  double max_score = 0, total = 0;
  for (size_t i = 0; i < n; i++) {
    const double s = nbest[i].start_logit + nbest[i].end_logit;
    if (i == 0 || s > max_score) max_score = s;
  }
  for (size_t i = 0; i < n; i++) {
    probs[i] = exp(nbest[i].start_logit + nbest[i].end_logit - max_score);
    total += probs[i];
  }
  for (size_t i = 0; i < n; i++) probs[i] /= total;
}

/* ---- the three files ------------------------------------------------------------------ */

static void put_number(FILE *out, double v, bool is_int) {
  char buf[40];
  if (is_int) fprintf(out, "%lld", (long long)v);
  else fputs(est_squad_format_pyfloat(v, buf, sizeof buf), out);
}

/* json.dumps(indent=4)'s "key": of an OrderedDict entry, opening the dict on the first. */
static void put_key(FILE *out, bool first, const char *key) {
  fputs(first ? "{\n    " : ",\n    ", out);
  est_py_json_string(out, key);
  fputs(": ", out);
}

static void put_nbest(FILE *out, const nbest_entry *nbest, const double *probs, size_t n) {
  fputs("[\n", out);
  for (size_t i = 0; i < n; i++) {
    fputs(i ? ",\n        {\n            \"text\": " : "        {\n            \"text\": ", out);
    est_py_json_string(out, nbest[i].text);
    fputs(",\n            \"probability\": ", out);
    put_number(out, probs[i], false);
    fputs(",\n            \"start_logit\": ", out);
    put_number(out, nbest[i].start_logit, nbest[i].logits_are_int);
    fputs(",\n            \"end_logit\": ", out);
    put_number(out, nbest[i].end_logit, nbest[i].logits_are_int);
    fputs("\n        }", out);
  }
  fputs("\n    ]", out);
}

static void close_dict(FILE *out, bool empty) { fputs(empty ? "{}\n" : "\n}\n", out); }

/* The dicts' order: source[slot] = the example whose answers fill the slot-th key, or
 * SIZE_MAX. Python's OrderedDict keeps a repeated key at its first place with the value
 * assigned last, so the first occurrence's slot gets the last occurrence's example and the
 * later occurrences' slots none. */
typedef struct id_at {
  const char *id;
  size_t index;
} id_at;

static int by_id_then_index(const void *a, const void *b) {
  const id_at *x = a, *y = b;
  const int c = strcmp(x->id, y->id);
  return c ? c : (x->index > y->index) - (x->index < y->index);
}

static est_status duplicate_ids(const est_squad_examples *examples, size_t **out) {
  const size_t n = examples->count;
  id_at *sorted = malloc((n + 1) * sizeof *sorted);
  size_t *source = malloc((n + 1) * sizeof *source);
  if (!sorted || !source) {
    free(sorted);
    free(source);
    return est_error(EST_ERR_NO_MEMORY, "write_predictions: out of memory");
  }
  for (size_t i = 0; i < n; i++) sorted[i] = (id_at){examples->examples[i].qas_id, i};
  qsort(sorted, n, sizeof *sorted, by_id_then_index);
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j + 1 < n && !strcmp(sorted[j + 1].id, sorted[i].id)) source[sorted[++j].index] = SIZE_MAX;
    source[sorted[i].index] = sorted[j].index;
    i = j + 1;
  }
  free(sorted);
  *out = source;
  return EST_OK;
}

est_status est_squad_predictions_write(est_squad_predictions *p, const char *prediction_file, const char *nbest_file,
                                       const char *null_odds_file) {
  const est_squad_prediction_config *cfg = &p->cfg;
  EST_LOG_INFO("Writing predictions to: %s", prediction_file);
  EST_LOG_INFO("Writing nbest to: %s", nbest_file);
  const int S = p->max_seq_length;
  const size_t nbest_cap = (size_t)cfg->n_best_size + 2;
  work w = {.scratch = malloc((size_t)S * sizeof(ranked)), .starts = malloc((size_t)S * sizeof(int)),
            .ends = malloc((size_t)S * sizeof(int)), .nbest = calloc(nbest_cap, sizeof(nbest_entry)),
            .probs = malloc(nbest_cap * sizeof(double))};
  est_atomic_file *files[3] = {NULL, NULL, NULL};
  const char *paths[3] = {prediction_file, nbest_file, cfg->version_2_with_negative ? null_odds_file : NULL};
  est_status st = EST_OK;
  if (!w.scratch || !w.starts || !w.ends || !w.nbest || !w.probs)
    st = est_error(EST_ERR_NO_MEMORY, "write_predictions: out of memory");
  for (int k = 0; k < 3 && st == EST_OK; k++)
    if (paths[k]) st = est_atomic_open(&files[k], paths[k]);
  FILE *pred = files[0] ? est_atomic_stream(files[0]) : NULL, *nb = files[1] ? est_atomic_stream(files[1]) : NULL;
  FILE *odds = files[2] ? est_atomic_stream(files[2]) : NULL;
  /* Features of example e: [feature_first[e], feature_first[e + 1]). */
  const size_t num_examples = p->examples->count;
  size_t *feature_first = malloc((num_examples + 1) * sizeof *feature_first);
  size_t *source = NULL;
  if (st == EST_OK && !feature_first) st = est_error(EST_ERR_NO_MEMORY, "write_predictions: out of memory");
  size_t next_feature = 0;
  for (size_t e = 0; st == EST_OK && e <= num_examples; e++) {
    feature_first[e] = next_feature;
    while (e < num_examples && next_feature < p->count && p->features[next_feature].example_index == e) next_feature++;
  }
  if (st == EST_OK && next_feature != p->count)
    st = est_error(EST_ERR_INVALID_ARGUMENT, "write_predictions: feature %lld belongs to no example in order",
                   (long long)p->features[next_feature].unique_id);
  if (st == EST_OK) st = duplicate_ids(p->examples, &source);
  for (size_t slot = 0; slot < num_examples && st == EST_OK; slot++) {
    /* A repeated question id keeps its first place in the dicts and its last value. */
    if (source[slot] == SIZE_MAX) continue;
    const size_t e = source[slot];
    const est_squad_example *ex = &p->examples->examples[e];
    const bool first_key = slot == 0;
    size_t n = 0;
    double score_null;
    bool null_is_int;
    st = example_nbest(p, &w, ex, feature_first[e], feature_first[e + 1], &n, &score_null, &null_is_int);
    if (st != EST_OK) break;
    compute_softmax(w.nbest, n, w.probs);
    const nbest_entry *best_non_null = NULL;
    for (size_t i = 0; i < n && !best_non_null; i++)
      if (w.nbest[i].text[0]) best_non_null = &w.nbest[i];
    put_key(pred, first_key, ex->qas_id);
    if (!cfg->version_2_with_negative) {
      est_py_json_string(pred, w.nbest[0].text);
    } else {
      /* predict "" iff the null score - the best non-null score > threshold; with no
       * non-null entry (the script's crash) "" with the null score itself */
      const double diff = best_non_null ? score_null - best_non_null->start_logit - best_non_null->end_logit : 1000000.0;
      put_key(odds, first_key, ex->qas_id);
      put_number(odds, diff, false);
      est_py_json_string(pred, !best_non_null || diff > cfg->null_score_diff_threshold ? "" : best_non_null->text);
    }
    put_key(nb, first_key, ex->qas_id);
    put_nbest(nb, w.nbest, w.probs, n);
    for (size_t i = 0; i < n; i++) free(w.nbest[i].text);
  }
  free(feature_first);
  free(source);
  for (int k = 0; k < 3 && st == EST_OK; k++)
    if (files[k]) {
      close_dict(est_atomic_stream(files[k]), num_examples == 0);
      st = est_atomic_commit(files[k]);
      files[k] = NULL;
    }
  for (int k = 0; k < 3; k++) est_atomic_abort(files[k]);
  free(w.prelims);
  free(w.order);
  free(w.scratch);
  free(w.starts);
  free(w.ends);
  free(w.nbest);
  free(w.probs);
  squad_buf_free(&w.tok_text);
  squad_buf_free(&w.orig_text);
  squad_buf_free(&w.joined);
  squad_buf_free(&w.final);
  return st;
}
