/* FullTokenizer = BasicTokenizer + WordpieceTokenizer (tokenization.py), one pass per text:
 *
 *   bytes --decode(ignore)--> code points --clean + CJK spacing--> cps (separators = ' ')
 *         --split on Python whitespace--> words --lower, NFD, drop Mn (do_lower_case)-->
 *         --split punctuation--> basic tokens --greedy WordPiece--> ids
 *
 * All buffers live in the tokenizer and only grow, so steady-state tokenizing allocates
 * nothing. ASCII takes table lookups; anything else asks utf8proc. */
#include <stdlib.h>
#include <string.h>

#include "est/tokenizer.h"
#include "text/hf_tokenizer.h"
#include "text/unicode.h"
#include "text/vocab_internal.h"

struct est_tokenizer {
  const est_vocab *vocab;
  est_vocab *owned_vocab;
  bool lower, strip_accents, clean_text, chinese_chars;
  bool hf_rules;                        /* est_tokenizer_options.hf_rules */
  size_t max_chars;                     /* max_input_chars_per_word */
  int32_t unk_id;                       /* "[UNK]"'s id or EST_TOKEN_UNK_MISSING */
  char *unk_token;                      /* the options' unk_token, for est_tokenizer_get_options */
  uint32_t *cps;                        /* cleaned text, capacity 3 * input bytes + 1 */
  size_t cps_cap;
  uint32_t *low, *nfd;                  /* one word lower-cased (2n) and decomposed (8n) */
  size_t low_cap, nfd_cap;
  char *bytes;                          /* one basic token in UTF-8 */
  uint32_t *bound;                      /* byte offset of each of its code points, + end */
  size_t bytes_cap, bound_cap;
  int32_t *ids;
  size_t nids, ids_cap;
  char *text;                           /* est_tokenizer_basic's output */
  size_t ntext, text_cap, ntokens;
  int mode;                             /* what emit() does with a basic token */
  tok_pipeline *pipe;                   /* a tokenizer.json's pipeline (hf_tokenizer.c) or NULL */
  bool pipe_only;                       /* no FullTokenizer: encode is the pipeline's */
};

enum { MODE_IDS = 0, MODE_TEXT = 1 };

/* ASCII classes of tokenization.py: C = _is_control (deleted), W = _is_whitespace (becomes a
 * space), P = _is_punctuation. Python's isspace() is W plus VT, FF and 0x1C..0x1F, which are
 * controls and never survive cleaning. */
enum { C_ = 1, W_ = 2, P_ = 4 };
static const uint8_t ascii_class[128] = {
  C_, C_, C_, C_, C_, C_, C_, C_, C_, W_, W_, C_, C_, W_, C_, C_,   /* 00-0F */
  C_, C_, C_, C_, C_, C_, C_, C_, C_, C_, C_, C_, C_, C_, C_, C_,   /* 10-1F */
  W_, P_, P_, P_, P_, P_, P_, P_, P_, P_, P_, P_, P_, P_, P_, P_,   /* 20-2F */
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, P_, P_, P_, P_, P_, P_,             /* 30-3F */
  P_, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,                  /* 40-4F */
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, P_, P_, P_, P_, P_,              /* 50-5F */
  P_, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,                  /* 60-6F */
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, P_, P_, P_, P_, C_,              /* 70-7F */
};

static inline bool is_sep(uint32_t c) { return c < 0x80 ? c == ' ' : tok_py_isspace(c); }
static inline bool is_punct(uint32_t c) {
  return c < 0x80 ? (ascii_class[c] & P_) != 0 : est_tok_is_punctuation(c);
}

/* Grows *buf to hold at least `need` elements of `elem` bytes (doubling). */
static bool grow(void **buf, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return true;
  size_t c = *cap ? *cap : 64;
  while (c < need) c *= 2;
  void *p = realloc(*buf, c * elem);
  if (!p) return false;
  *buf = p;
  *cap = c;
  return true;
}

est_tokenizer_options est_tokenizer_options_default(bool do_lower_case) {
  est_tokenizer_options o = {.lowercase = do_lower_case, .strip_accents = -1, .clean_text = true,
                             .handle_chinese_chars = true, .unk_token = "[UNK]",
                             .max_input_chars_per_word = EST_WORDPIECE_MAX_CHARS};
  return o;
}

est_status est_tokenizer_create_with(est_tokenizer **out, const est_vocab *vocab, const est_tokenizer_options *o) {
  *out = NULL;
  if (o->max_input_chars_per_word < 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "max_input_chars_per_word %d must be >= 0",
                     o->max_input_chars_per_word);
  est_tokenizer *t = calloc(1, sizeof *t);
  if (!t) return est_error(EST_ERR_NO_MEMORY, "creating tokenizer");
  t->vocab = vocab;
  t->lower = o->lowercase;
  t->strip_accents = o->strip_accents < 0 ? o->lowercase : o->strip_accents != 0;
  t->clean_text = o->clean_text;
  t->chinese_chars = o->handle_chinese_chars;
  t->hf_rules = o->hf_rules;
  t->max_chars = (size_t)o->max_input_chars_per_word;
  const char *unk = o->unk_token ? o->unk_token : "[UNK]";
  t->unk_id = est_vocab_find(vocab, unk, strlen(unk));
  if (t->unk_id < 0) t->unk_id = EST_TOKEN_UNK_MISSING;
  /* kept even when the vocab lacks it: a twin made from est_tokenizer_get_options must miss
   * it too, not find a "[UNK]" the vocab has (est_vocab_token's name for a missing one) */
  if (!(t->unk_token = strdup(unk))) {
    free(t);
    return est_error(EST_ERR_NO_MEMORY, "creating tokenizer");
  }
  *out = t;
  return EST_OK;
}

est_status est_tokenizer_create(est_tokenizer **out, const est_vocab *vocab, bool do_lower_case) {
  est_tokenizer_options o = est_tokenizer_options_default(do_lower_case);
  return est_tokenizer_create_with(out, vocab, &o);
}

void est_tokenizer_own_vocab(est_tokenizer *t, est_vocab *v) { t->owned_vocab = v; }

est_status est_tokenizer_open(est_tokenizer **out, const char *vocab_file, bool do_lower_case) {
  est_vocab *v;
  *out = NULL;
  est_status st = est_vocab_load(&v, vocab_file);
  if (st != EST_OK) return st;
  st = est_tokenizer_create(out, v, do_lower_case);
  if (st != EST_OK) {
    est_vocab_free(v);
    return st;
  }
  (*out)->owned_vocab = v;
  return EST_OK;
}

void est_tokenizer_free(est_tokenizer *t) {
  if (!t) return;
  tok_pipeline_free(t->pipe);
  est_vocab_free(t->owned_vocab);
  free(t->unk_token);
  free(t->cps);
  free(t->low);
  free(t->nfd);
  free(t->bytes);
  free(t->bound);
  free(t->ids);
  free(t->text);
  free(t);
}

const est_vocab *est_tokenizer_vocab(const est_tokenizer *t) { return t->vocab; }
bool est_tokenizer_do_lower_case(const est_tokenizer *t) { return t->lower; }

est_tokenizer_options est_tokenizer_get_options(const est_tokenizer *t) {
  est_tokenizer_options o = {.lowercase = t->lower, .strip_accents = t->strip_accents, .clean_text = t->clean_text,
                             .handle_chinese_chars = t->chinese_chars, .unk_token = t->unk_token,
                             .max_input_chars_per_word = (int)t->max_chars, .hf_rules = t->hf_rules};
  return o;
}

static inline bool push_id(est_tokenizer *t, int32_t id) {
  if (t->nids == t->ids_cap && !grow((void **)&t->ids, &t->ids_cap, t->nids + 1, sizeof *t->ids))
    return false;
  t->ids[t->nids++] = id;
  return true;
}

/* WordpieceTokenizer on one whitespace-free token of n code points. */
static bool wordpiece(est_tokenizer *t, const uint32_t *w, size_t n) {
  if (n > t->max_chars) return push_id(t, t->unk_id);
  if (!grow((void **)&t->bytes, &t->bytes_cap, 4 * n + 4, 1) ||
      !grow((void **)&t->bound, &t->bound_cap, n + 1, sizeof *t->bound))
    return false;
  size_t nb = 0;
  for (size_t i = 0; i < n; i++) {
    t->bound[i] = (uint32_t)nb;
    nb += w[i] < 0x80 ? (t->bytes[nb] = (char)w[i], 1) : tok_utf8_put(w[i], t->bytes + nb);
  }
  t->bound[n] = (uint32_t)nb;

  /* Greedy longest-match-first. Candidates longer (in bytes) than the longest vocab entry are
   * skipped without a lookup. A word with any uncoverable position is a single [UNK]. */
  size_t maxb = vocab_max_token_bytes(t->vocab), first = t->nids, start = 0;
  while (start < n) {
    int32_t id = -1;
    size_t end = n;
    for (; end > start; end--) {
      size_t len = t->bound[end] - t->bound[start];
      if (len + (start ? 2 : 0) > maxb) continue;
      id = vocab_find_piece(t->vocab, start > 0, t->bytes + t->bound[start], len);
      if (id >= 0) break;
    }
    if (id < 0) {
      t->nids = first;
      return push_id(t, t->unk_id);
    }
    if (!push_id(t, id)) return false;
    start = end;
  }
  return true;
}

/* One basic token, to ids or to text. */
static bool emit(est_tokenizer *t, const uint32_t *w, size_t n) {
  if (n == 0) return true;
  if (t->mode == MODE_IDS) return wordpiece(t, w, n);
  if (!grow((void **)&t->text, &t->text_cap, t->ntext + 4 * n + 2, 1)) return false;
  if (t->ntokens++) t->text[t->ntext++] = ' ';
  for (size_t i = 0; i < n; i++) t->ntext += tok_utf8_put(w[i], t->text + t->ntext);
  t->text[t->ntext] = 0;
  return true;
}

/* _run_split_on_punc, plus the final whitespace_tokenize(" ".join(...)) which would also split
 * at any whitespace the lower-casing or NFD produced. */
static bool split_punct(est_tokenizer *t, const uint32_t *w, size_t n) {
  size_t run = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t c = w[i];
    if (is_punct(c)) {
      if (!emit(t, w + run, i - run) || !emit(t, w + i, 1)) return false;
      run = i + 1;
    } else if (c >= 0x80 && tok_py_isspace(c)) {
      if (!emit(t, w + run, i - run)) return false;
      run = i + 1;
    }
  }
  return emit(t, w + run, n - run);
}

/* One whitespace-separated word of the cleaned text. */
static bool basic_word(est_tokenizer *t, const uint32_t *w, size_t n) {
  if (!t->lower && !t->strip_accents) return split_punct(t, w, n);
  bool ascii = true;
  for (size_t i = 0; i < n; i++) ascii &= w[i] < 0x80;
  if (ascii && !t->lower) return split_punct(t, w, n); /* no accents to strip */
  if (!grow((void **)&t->low, &t->low_cap, 2 * n, sizeof *t->low)) return false;
  if (ascii) {
    for (size_t i = 0; i < n; i++) t->low[i] = (w[i] >= 'A' && w[i] <= 'Z') ? w[i] + 32 : w[i];
    return split_punct(t, t->low, n);
  }
  /* lower() at most doubles the length, NFD at most quadruples it. Google's tokenizer
   * strips accents exactly when it lower-cases; tokenizer.json may ask for either alone. */
  size_t m = n;
  if (t->lower) m = tok_lower(w, n, t->low, !t->hf_rules);
  else memcpy(t->low, w, n * sizeof *w);
  if (!t->strip_accents) return split_punct(t, t->low, m);
  if (!grow((void **)&t->nfd, &t->nfd_cap, 4 * m, sizeof *t->nfd)) return false;
  m = tok_nfd_strip_mn(t->low, m, t->nfd);
  return split_punct(t, t->nfd, m);
}

/* Steps 1-7 of BasicTokenizer.tokenize; each basic token goes to emit(). */
static bool run_basic(est_tokenizer *t, const char *text, size_t len) {
  if (len == SIZE_MAX) len = strlen(text);
  if (!grow((void **)&t->cps, &t->cps_cap, 3 * len + 1, sizeof *t->cps)) return false;
  const uint8_t *p = (const uint8_t *)text;
  uint32_t *c = t->cps;
  size_t n = 0;
  for (size_t i = 0; i < len;) {
    uint32_t cp = p[i];
    if (cp < 0x80) {
      i++;
      uint8_t k = ascii_class[cp];
      if ((k & C_) && t->clean_text) continue;       /* _clean_text: drop controls */
      c[n++] = (k & W_) ? ' ' : cp;
      continue;
    }
    size_t adv;
    cp = tok_utf8_next(p + i, len - i, &adv);
    i += adv;
    if (cp == UINT32_MAX) continue;
    if (t->clean_text && (cp == 0xFFFD || (t->hf_rules ? tok_hf_is_other(cp) : est_tok_is_control(cp))))
      continue;
    if (est_tok_is_whitespace(cp)) {
      c[n++] = ' ';
    } else if (t->chinese_chars && est_tok_is_cjk(cp)) {                 /* _tokenize_chinese_chars */
      c[n++] = ' ';
      c[n++] = cp;
      c[n++] = ' ';
    } else {
      c[n++] = cp;
    }
  }
  /* whitespace_tokenize: after cleaning only ' ' and U+2028/U+2029 separate. */
  size_t i = 0;
  while (i < n) {
    while (i < n && is_sep(c[i])) i++;
    size_t s = i;
    while (i < n && !is_sep(c[i])) i++;
    if (i > s && !basic_word(t, c + s, i - s)) return false;
  }
  return true;
}

est_status est_tokenizer_encode(est_tokenizer *t, const char *text, size_t len, const int32_t **ids,
                                size_t *n) {
  if (t->pipe_only) {
    est_encoding e;
    if (len == SIZE_MAX) len = strlen(text);
    est_status st = tok_pipeline_encode(t->pipe, text, len, NULL, 0, false, &e);
    if (st) return st;
    *ids = e.ids;
    *n = e.n;
    return EST_OK;
  }
  t->nids = 0;
  t->mode = MODE_IDS;
  if (!run_basic(t, text, len)) return est_error(EST_ERR_NO_MEMORY, "tokenizing %zu bytes", len);
  *ids = t->ids;
  *n = t->nids;
  return EST_OK;
}

const char *est_tokenizer_basic(est_tokenizer *t, const char *text, size_t len, size_t *ntokens) {
  if (t->pipe_only) {
    est_error(EST_ERR_FAILED_PRECONDITION, "a %s tokenizer.json has no BasicTokenizer", tok_pipeline_model_type(t->pipe));
    return NULL;
  }
  t->ntext = 0;
  t->ntokens = 0;
  t->mode = MODE_TEXT;
  if (!grow((void **)&t->text, &t->text_cap, 1, 1)) return NULL;
  t->text[0] = 0;
  if (!run_basic(t, text, len)) return NULL;
  if (ntokens) *ntokens = t->ntokens;
  return t->text;
}

est_status est_tokenizer_wordpiece(est_tokenizer *t, const char *text, size_t len, const int32_t **ids,
                                   size_t *n) {
  if (t->pipe_only)
    return est_error(EST_ERR_FAILED_PRECONDITION, "a %s tokenizer.json is not Google's WordPiece",
                     tok_pipeline_model_type(t->pipe));
  if (len == SIZE_MAX) len = strlen(text);
  t->nids = 0;
  if (!grow((void **)&t->cps, &t->cps_cap, len + 1, sizeof *t->cps))
    return est_error(EST_ERR_NO_MEMORY, "tokenizing %zu bytes", len);
  size_t m = est_utf8_decode_lossy(text, len, t->cps);
  for (size_t i = 0; i < m;) {
    while (i < m && tok_py_isspace(t->cps[i])) i++;
    size_t s = i;
    while (i < m && !tok_py_isspace(t->cps[i])) i++;
    if (i > s && !wordpiece(t, t->cps + s, i - s))
      return est_error(EST_ERR_NO_MEMORY, "tokenizing %zu bytes", len);
  }
  *ids = t->ids;
  *n = t->nids;
  return EST_OK;
}

/* ---- tokenizer.json pipelines (hf_tokenizer.c) ---- */

est_status tokenizer_from_pipeline(est_tokenizer **out, tok_pipeline *p) {
  est_tokenizer *t = calloc(1, sizeof *t);
  if (!t) {
    tok_pipeline_free(p);
    return est_error(EST_ERR_NO_MEMORY, "creating a tokenizer");
  }
  t->pipe = p;
  t->pipe_only = true;
  t->lower = tok_pipeline_lowercases(p);
  *out = t;
  return EST_OK;
}

void tokenizer_attach_pipeline(est_tokenizer *t, tok_pipeline *p) { t->pipe = p; }

est_status est_tokenizer_twin(est_tokenizer **out, const est_tokenizer *t) {
  *out = NULL;
  tok_pipeline *pipe = NULL;
  est_status st = t->pipe ? tok_pipeline_twin(&pipe, t->pipe) : EST_OK;
  if (st != EST_OK) return st;
  if (t->pipe_only) return tokenizer_from_pipeline(out, pipe);
  const est_tokenizer_options o = est_tokenizer_get_options(t);
  if ((st = est_tokenizer_create_with(out, t->vocab, &o)) != EST_OK) {
    tok_pipeline_free(pipe);
    return st;
  }
  (*out)->pipe = pipe;
  return EST_OK;
}

int32_t est_tokenizer_size(const est_tokenizer *t) {
  return t->vocab ? est_vocab_size(t->vocab) : tok_pipeline_size(t->pipe);
}

est_status est_tokenizer_encode_pair(est_tokenizer *t, const char *text, size_t len, const char *pair, size_t pair_len,
                                     bool add_special_tokens, est_encoding *out) {
  if (!t->pipe)
    return est_error(EST_ERR_FAILED_PRECONDITION, "this tokenizer comes from a vocab.txt: encodings with offsets and "
                     "special tokens need a tokenizer.json");
  if (len == SIZE_MAX) len = strlen(text);
  if (pair && pair_len == SIZE_MAX) pair_len = strlen(pair);
  return tok_pipeline_encode(t->pipe, text, len, pair, pair_len, add_special_tokens, out);
}

size_t est_tokenizer_num_overflowing(const est_tokenizer *t) { return t->pipe ? tok_pipeline_num_overflowing(t->pipe) : 0; }

bool est_tokenizer_overflowing(const est_tokenizer *t, size_t i, est_encoding *out) {
  return t->pipe && tok_pipeline_overflowing(t->pipe, i, out);
}

est_status est_tokenizer_decode(const est_tokenizer *t, const int32_t *ids, size_t n, bool skip_special_tokens,
                                char **out, size_t *out_len) {
  *out = NULL;
  *out_len = 0;
  if (!t->pipe)
    return est_error(EST_ERR_FAILED_PRECONDITION, "this tokenizer comes from a vocab.txt: decoding needs a tokenizer.json");
  return tok_pipeline_decode(t->pipe, ids, n, skip_special_tokens, out, out_len);
}

est_truncation *est_tokenizer_truncation(est_tokenizer *t) { return t->pipe ? tok_pipeline_truncation(t->pipe) : NULL; }
est_padding *est_tokenizer_padding(est_tokenizer *t) { return t->pipe ? tok_pipeline_padding(t->pipe) : NULL; }

const char *est_tokenizer_id_to_token(const est_tokenizer *t, int32_t id) {
  if (t->pipe) return tok_pipeline_token(t->pipe, id);
  return est_vocab_token(t->vocab, id);
}
