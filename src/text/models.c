/* The model's vocabulary (id <-> token), the model dispatch, and the two simplest models of
 * tokenizers' models/ (docs/tokenizer.md §8): WordLevel (a split is one token or unk) and
 * WordPiece (greedy longest match first, continuing_subword_prefix, unk for a word longer
 * than max_input_chars_per_word or with no cover). Unigram and BPE are unigram.c and bpe.c. */
#include <stdlib.h>
#include <string.h>

#include "text/hf_internal.h"
#include "text/models_internal.h"
#include "text/unicode.h"
#include "text/vocab_internal.h"

/* ---- vocabulary ---- */

static uint64_t hash(const char *s, size_t n) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 0x100000001b3ULL;
  return h;
}

bool vocab_init(tok_vocab *v, int32_t n) {
  memset(v, 0, sizeof *v);
  v->n = n;
  v->tok = calloc((size_t)n + 1, sizeof *v->tok);
  v->len = calloc((size_t)n + 1, sizeof *v->len);
  return v->tok && v->len;
}

void vocab_set(tok_vocab *v, int32_t id, const char *s, size_t len) {
  char *c = malloc(len + 1);
  if (!c) return;
  memcpy(c, s, len);
  c[len] = 0;
  free(v->tok[id]);
  v->tok[id] = c;
  v->len[id] = (uint32_t)len;
}

/* Later ids win a duplicate token, as a HashMap filled in id order. */
bool vocab_index(tok_vocab *v) {
  size_t cap = 16;
  while (cap < 2 * (size_t)v->n + 2) cap *= 2;
  free(v->slot);
  v->slot = malloc(cap * sizeof *v->slot);
  if (!v->slot) return false;
  memset(v->slot, 0xFF, cap * sizeof *v->slot);
  v->mask = cap - 1;
  for (int32_t id = 0; id < v->n; id++) {
    if (!v->tok[id]) continue;
    size_t h = hash(v->tok[id], v->len[id]) & v->mask;
    while (v->slot[h] >= 0 && !(v->len[v->slot[h]] == v->len[id] && !memcmp(v->tok[v->slot[h]], v->tok[id], v->len[id])))
      h = (h + 1) & v->mask;
    v->slot[h] = id;
  }
  return true;
}

uint64_t vocab_hash_step(uint64_t h, const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 0x100000001b3ULL;
  return h;
}

int32_t vocab_get_hashed(const tok_vocab *v, const char *s, size_t len, uint64_t full) {
  if (!v->slot) return -1;
  size_t h = full & v->mask;
  for (int32_t id; (id = v->slot[h]) >= 0; h = (h + 1) & v->mask)
    if (v->len[id] == len && !memcmp(v->tok[id], s, len)) return id;
  return -1;
}

int32_t vocab_get(const tok_vocab *v, const char *s, size_t len) {
  if (!v->slot) return -1;
  size_t h = hash(s, len) & v->mask;
  for (int32_t id; (id = v->slot[h]) >= 0; h = (h + 1) & v->mask)
    if (v->len[id] == len && !memcmp(v->tok[id], s, len)) return id;
  return -1;
}

void vocab_fini(tok_vocab *v) {
  for (int32_t i = 0; v->tok && i < v->n; i++) free(v->tok[i]);
  free(v->tok);
  free(v->len);
  free(v->slot);
  memset(v, 0, sizeof *v);
}

/* {"token": id, ...} -> v; ids must be 0..max, and any gap is an id without a token. */
est_status vocab_from_object(tok_vocab *v, json_t *o, const char *where) {
  if (!json_is_object(o)) return est_error(EST_ERR_INVALID_ARGUMENT, "%s.vocab must be an object", where);
  json_int_t max = -1;
  const char *k;
  json_t *id;
  json_object_foreach(o, k, id) {
    if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= (1 << 30))
      return est_error(EST_ERR_INVALID_ARGUMENT, "%s.vocab[\"%s\"] must be an id (a non-negative integer)", where, k);
    if (json_integer_value(id) > max) max = json_integer_value(id);
  }
  if (!vocab_init(v, (int32_t)(max + 1))) return est_error(EST_ERR_NO_MEMORY, "%s: out of memory", where);
  /* jansson keeps keys in file order; a token's id is its value (the last one wins) */
  void *it = json_object_iter(o);
  for (; it; it = json_object_iter_next(o, it)) {
    size_t len;
    const char *key = json_object_iter_key(it);
    len = json_object_iter_key_len(it);
    vocab_set(v, (int32_t)json_integer_value(json_object_iter_value(it)), key, len);
  }
  return vocab_index(v) ? EST_OK : est_error(EST_ERR_NO_MEMORY, "%s: out of memory", where);
}

bool tokens_push(tok_tokens *t, int32_t id, uint32_t s, uint32_t e) {
  if (t->n == t->cap) {
    size_t c = t->cap ? t->cap * 2 : 32;
    tok_token *p = realloc(t->v, c * sizeof *p);
    if (!p) return false;
    t->v = p;
    t->cap = c;
  }
  t->v[t->n++] = (tok_token){id, s, e};
  return true;
}

size_t cps_to_utf8(const uint32_t *c, size_t n, char *out) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) k += tok_utf8_put(c[i], out + k);
  return k;
}

/* ---- WordLevel ---- */

typedef struct wordlevel {
  tok_vocab v;
  int32_t unk;    /* -1: the unk token is not in the vocab */
  char *unk_token;
} wordlevel;

static est_status wordlevel_tokenize(const wordlevel *w, const uint32_t *c, size_t n, tok_tokens *t) {
  char *buf = malloc(4 * n + 1);
  if (!buf) return est_error(EST_ERR_NO_MEMORY, "WordLevel: out of memory");
  int32_t id = vocab_get(&w->v, buf, cps_to_utf8(c, n, buf));
  free(buf);
  if (id < 0) id = w->unk;
  if (id < 0) return est_error(EST_ERR_INVALID_ARGUMENT, "WordLevel error: Missing %s token from the vocabulary", w->unk_token);
  return tokens_push(t, id, 0, (uint32_t)n) ? EST_OK : est_error(EST_ERR_NO_MEMORY, "WordLevel: out of memory");
}

/* ---- WordPiece ---- */

typedef struct wordpiece {
  tok_vocab v;
  int32_t unk;
  char *unk_token;
  char *prefix;
  size_t nprefix;
  size_t max_chars;
} wordpiece;

static est_status wordpiece_tokenize(const wordpiece *w, const uint32_t *c, size_t n, tok_tokens *t) {
  size_t first = t->n;
  bool bad = n > w->max_chars;
  char *word = bad ? NULL : malloc(4 * n + 1), *cand = bad ? NULL : malloc(4 * n + w->nprefix + 1);
  uint32_t *off = bad ? NULL : malloc((n + 1) * sizeof *off);
  if (!bad && (!word || !cand || !off)) {
    free(word), free(cand), free(off);
    return est_error(EST_ERR_NO_MEMORY, "WordPiece: out of memory");
  }
  size_t nb = 0;
  for (size_t i = 0; !bad && i < n; i++) off[i] = (uint32_t)nb, nb += tok_utf8_put(c[i], word + nb);
  if (!bad) off[n] = (uint32_t)nb;
  memcpy(cand ? cand : "", w->prefix, cand ? w->nprefix : 0);
  for (size_t s = 0; s < n && !bad;) {
    int32_t id = -1;
    size_t e = n;
    for (; e > s && id < 0; e--) {
      if (s == 0) {
        id = vocab_get(&w->v, word, off[e]);
      } else {
        memcpy(cand + w->nprefix, word + off[s], off[e] - off[s]);
        id = vocab_get(&w->v, cand, off[e] - off[s] + w->nprefix);
      }
      if (id >= 0) break;
    }
    if (id < 0) bad = true;
    else if (!tokens_push(t, id, (uint32_t)s, (uint32_t)e)) {
      free(word), free(cand), free(off);
      return est_error(EST_ERR_NO_MEMORY, "WordPiece: out of memory");
    }
    s = e;
  }
  free(word), free(cand), free(off);
  if (!bad) return EST_OK;
  t->n = first;
  if (w->unk < 0) return est_error(EST_ERR_INVALID_ARGUMENT, "WordPiece error: Missing %s token from the vocabulary", w->unk_token);
  return tokens_push(t, w->unk, 0, (uint32_t)n) ? EST_OK : est_error(EST_ERR_NO_MEMORY, "WordPiece: out of memory");
}

/* ---- dispatch ---- */

enum { M_WORDLEVEL, M_WORDPIECE, M_UNIGRAM, M_BPE };

struct tok_model {
  int kind;
  wordlevel wl;
  wordpiece wp;
  tok_unigram *ug;
  tok_bpe *bpe;
};

static est_status get_string(json_t *o, const char *key, const char *dflt, char **out, const char *where) {
  json_t *v = json_object_get(o, key);
  if (v && !json_is_null(v) && !json_is_string(v))
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s.%s must be a string", where, key);
  const char *s = v && json_is_string(v) ? json_string_value(v) : dflt;
  *out = s ? strdup(s) : NULL;
  return (!s || *out) ? EST_OK : est_error(EST_ERR_NO_MEMORY, "%s: out of memory", where);
}

est_status model_from_json(tok_model **out, json_t *o, const char *where) {
  *out = NULL;
  json_t *type = json_object_get(o, "type");
  if (!json_is_object(o)) return est_error(EST_ERR_INVALID_ARGUMENT, "%s must be an object", where);
  tok_model *m = calloc(1, sizeof *m);
  if (!m) return est_error(EST_ERR_NO_MEMORY, "%s: out of memory", where);
  const char *t = json_is_string(type) ? json_string_value(type) : NULL;
  est_status st = EST_OK;
  /* tokenizers guesses an untyped model from its fields; est asks for the type */
  if (!t) st = est_error(EST_ERR_INVALID_ARGUMENT, "%s.type is missing (est needs WordPiece, WordLevel, Unigram or BPE)", where);
  else if (!strcmp(t, "WordLevel")) {
    m->kind = M_WORDLEVEL;
    if (!(st = vocab_from_object(&m->wl.v, json_object_get(o, "vocab"), where)) &&
        !(st = get_string(o, "unk_token", "<unk>", &m->wl.unk_token, where)))
      m->wl.unk = vocab_get(&m->wl.v, m->wl.unk_token, strlen(m->wl.unk_token));
  } else if (!strcmp(t, "WordPiece")) {
    m->kind = M_WORDPIECE;
    json_t *max = json_object_get(o, "max_input_chars_per_word");
    m->wp.max_chars = 100;
    if (max && !(json_is_integer(max) && json_integer_value(max) >= 0))
      st = est_error(EST_ERR_INVALID_ARGUMENT, "%s.max_input_chars_per_word must be a non-negative integer", where);
    else if (max) m->wp.max_chars = (size_t)json_integer_value(max);
    if (!st && !(st = vocab_from_object(&m->wp.v, json_object_get(o, "vocab"), where)) &&
        !(st = get_string(o, "unk_token", "[UNK]", &m->wp.unk_token, where)) &&
        !(st = get_string(o, "continuing_subword_prefix", "##", &m->wp.prefix, where))) {
      m->wp.unk = vocab_get(&m->wp.v, m->wp.unk_token, strlen(m->wp.unk_token));
      m->wp.nprefix = strlen(m->wp.prefix);
    }
  } else if (!strcmp(t, "Unigram")) {
    m->kind = M_UNIGRAM;
    st = unigram_from_json(&m->ug, o, where);
  } else if (!strcmp(t, "BPE")) {
    m->kind = M_BPE;
    st = bpe_from_json(&m->bpe, o, where);
  } else {
    st = est_error(EST_ERR_INVALID_ARGUMENT, "%s.type \"%s\": est does not implement this model", where, t);
  }
  if (st) model_free(m);
  else *out = m;
  return st;
}

void model_free(tok_model *m) {
  if (!m) return;
  vocab_fini(&m->wl.v);
  free(m->wl.unk_token);
  vocab_fini(&m->wp.v);
  free(m->wp.unk_token);
  free(m->wp.prefix);
  unigram_free(m->ug);
  bpe_free(m->bpe);
  free(m);
}

const tok_vocab *model_vocab(const tok_model *m) {
  switch (m->kind) {
  case M_WORDLEVEL: return &m->wl.v;
  case M_WORDPIECE: return &m->wp.v;
  case M_UNIGRAM: return unigram_vocab(m->ug);
  default: return bpe_vocab(m->bpe);
  }
}

const char *model_type(const tok_model *m) {
  static const char *names[] = {"WordLevel", "WordPiece", "Unigram", "BPE"};
  return names[m->kind];
}

est_status model_tokenize(const tok_model *m, const uint32_t *c, size_t n, tok_tokens *t) {
  if (!n) return EST_OK;
  switch (m->kind) {
  case M_WORDLEVEL: return wordlevel_tokenize(&m->wl, c, n, t);
  case M_WORDPIECE: return wordpiece_tokenize(&m->wp, c, n, t);
  case M_UNIGRAM: return unigram_tokenize(m->ug, c, n, t);
  default: return bpe_tokenize(m->bpe, c, n, t);
  }
}
