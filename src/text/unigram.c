/* Unigram (tokenizers' models/unigram/model.rs encode_optimized; sentencepiece's
 * unigram_model.cc): Viterbi over the pieces' log-probabilities. At each char position every
 * piece that starts there is a candidate (shorter first, ties keep the first); a position no
 * one-char piece covers gets an unk node scored min_score - 10. Consecutive unk nodes fuse
 * into one token; a token not in the vocab is its <0xXX> bytes (byte_fallback) or unk_id. */
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/models_internal.h"
#include "text/unicode.h"
#include "text/vocab_internal.h"

struct tok_unigram {
  tok_vocab v;
  double *score;
  double min_score;
  int32_t unk_id;     /* -1: none */
  bool byte_fallback;
  size_t max_chars;   /* the longest piece, in chars */
  /* The hashes (vocab_hash_step) of every proper prefix of every piece, cut at a char
   * boundary (tokenizers walks a trie instead): the Viterbi stops extending a candidate no
   * piece continues. A hash collision only lets it look further, never changes a result. */
  uint64_t *prefix;
  size_t prefix_mask;
};

static void prefix_add(tok_unigram *u, uint64_t h) {
  size_t k = (size_t)(h ^ h >> 29) & u->prefix_mask;
  while (u->prefix[k] && u->prefix[k] != h) k = (k + 1) & u->prefix_mask;
  u->prefix[k] = h;
}

static bool prefix_has(const tok_unigram *u, uint64_t h) {
  size_t k = (size_t)(h ^ h >> 29) & u->prefix_mask;
  for (; u->prefix[k]; k = (k + 1) & u->prefix_mask)
    if (u->prefix[k] == h) return true;
  return false;
}

/* The prefix set of the vocab's pieces. 0 marks an empty slot, so a prefix whose hash is 0 is
 * not stored and the Viterbi never stops at a hash 0. */
static bool prefix_build(tok_unigram *u) {
  size_t total = 0;
  for (int32_t i = 0; i < u->v.n; i++) total += u->v.tok[i] ? u->v.len[i] : 0;
  size_t cap = 16;
  while (cap < 2 * total + 2) cap *= 2;
  if (!(u->prefix = calloc(cap, sizeof *u->prefix))) return false;
  u->prefix_mask = cap - 1;
  for (int32_t i = 0; i < u->v.n; i++) {
    const char *t = u->v.tok[i];
    uint64_t h = VOCAB_HASH0;
    for (size_t k = 0; t && k + 1 < u->v.len[i]; k++) {
      h = vocab_hash_step(h, t + k, 1);
      if (((uint8_t)t[k + 1] & 0xC0) != 0x80 && h) prefix_add(u, h); /* t[0, k] ends a char */
    }
  }
  return true;
}

const tok_vocab *unigram_vocab(const tok_unigram *u) { return &u->v; }

void unigram_free(tok_unigram *u) {
  if (!u) return;
  vocab_fini(&u->v);
  free(u->score);
  free(u->prefix);
  free(u);
}

/* A piece's score as `tokenizers` reads it: serde_json without float_roundtrip parses a
 * number's digits as an integer significand and one multiplication or division by a power of
 * ten (de.rs f64_from_parts), which is not always the correctly rounded value jansson's strtod
 * gives (423 of a trained 3000-piece file's scores differ by an ulp), and the Viterbi's ties
 * follow those ulps. The digits are taken as the shortest that give x back, which is what
 * tokenizers (ryu) and Python's json write. */
static double serde_score(double x) {
  if (!(x == x) || x == 0 || x > 1e300 || x < -1e300) return x;
  char buf[40];
  int p = 0;
  for (; p < 17; p++) {
    snprintf(buf, sizeof buf, "%.*e", p, x);
    if (strtod(buf, NULL) == x) break;
  }
  const char *c = buf;
  const bool neg = *c == '-';
  if (neg) c++;
  uint64_t sig = 0;
  for (; *c && *c != 'e'; c++)
    if (*c >= '0' && *c <= '9') sig = sig * 10 + (uint64_t)(*c - '0');
  int exp = (*c == 'e' ? atoi(c + 1) : 0) - p;
  double f = (double)sig;
  for (;;) {
    int a = exp < 0 ? -exp : exp;
    if (a <= 308) {
      double pow10 = strtod((snprintf(buf, sizeof buf, "1e%d", a), buf), NULL);
      f = exp >= 0 ? f * pow10 : f / pow10;
      break;
    }
    if (exp >= 0) return x; /* out of range: keep the value */
    f /= 1e308;
    exp += 308;
  }
  return neg ? -f : f;
}

est_status unigram_from_json(tok_unigram **out, json_t *o, const char *where) {
  *out = NULL;
  json_t *vocab = json_object_get(o, "vocab"), *unk = json_object_get(o, "unk_id"),
         *bf = json_object_get(o, "byte_fallback");
  if (!json_is_array(vocab)) return est_error(EST_ERR_INVALID_ARGUMENT, "%s.vocab must be an array of [piece, score]", where);
  size_t n = json_array_size(vocab);
  tok_unigram *u = calloc(1, sizeof *u);
  if (!u || !vocab_init(&u->v, (int32_t)n) || !(u->score = malloc((n + 1) * sizeof *u->score))) {
    unigram_free(u);
    return est_error(EST_ERR_NO_MEMORY, "%s: out of memory", where);
  }
  u->min_score = DBL_MAX;
  u->unk_id = -1;
  for (size_t i = 0; i < n; i++) {
    json_t *e = json_array_get(vocab, i), *p = json_array_get(e, 0), *s = json_array_get(e, 1);
    if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_string(p) || !json_is_number(s)) {
      unigram_free(u);
      return est_error(EST_ERR_INVALID_ARGUMENT, "%s.vocab[%zu] must be [piece, score]", where, i);
    }
    vocab_set(&u->v, (int32_t)i, json_string_value(p), json_string_length(p));
    u->score[i] = serde_score(json_number_value(s));
    if (u->score[i] < u->min_score) u->min_score = u->score[i];
    size_t chars = 0;
    for (size_t k = 0; k < json_string_length(p); k++) chars += (json_string_value(p)[k] & 0xC0) != 0x80;
    if (chars > u->max_chars) u->max_chars = chars;
  }
  est_status st = EST_OK;
  if (unk && !json_is_null(unk)) {
    if (!json_is_integer(unk) || json_integer_value(unk) < 0 || (size_t)json_integer_value(unk) >= n)
      st = est_error(EST_ERR_INVALID_ARGUMENT, "%s.unk_id must be an id of the vocab (0..%zu)", where, n ? n - 1 : 0);
    else u->unk_id = (int32_t)json_integer_value(unk);
  }
  if (!st && bf && !json_is_null(bf)) {
    if (!json_is_boolean(bf)) st = est_error(EST_ERR_INVALID_ARGUMENT, "%s.byte_fallback must be a boolean", where);
    else u->byte_fallback = json_is_true(bf);
  }
  if (!st && (!vocab_index(&u->v) || !prefix_build(u))) st = est_error(EST_ERR_NO_MEMORY, "%s: out of memory", where);
  if (st) unigram_free(u);
  else *out = u;
  return st;
}

typedef struct node {
  double score;
  int32_t id;
  int32_t from; /* start char, -1: unreached */
} node;

/* Pushes the token of bytes [bs, be) = chars [s, e): its id, its bytes, or unk. */
static est_status emit(const tok_unigram *u, const char *b, size_t bs, size_t be, uint32_t s, uint32_t e, tok_tokens *t) {
  int32_t id = vocab_get(&u->v, b + bs, be - bs);
  if (id < 0 && u->byte_fallback) {
    size_t first = t->n;
    bool all = true;
    for (size_t k = bs; k < be && all; k++) {
      char name[8];
      snprintf(name, sizeof name, "<0x%02X>", (uint8_t)b[k]);
      int32_t bid = vocab_get(&u->v, name, 6);
      if (bid < 0) all = false;
      else if (!tokens_push(t, bid, s, e)) return est_error(EST_ERR_NO_MEMORY, "Unigram: out of memory");
    }
    if (all) return EST_OK;
    t->n = first;
  }
  if (id < 0) id = u->unk_id;
  if (id < 0) return est_error(EST_ERR_INVALID_ARGUMENT, "Unigram error: Encountered an unknown token but `unk_id` is missing");
  return tokens_push(t, id, s, e) ? EST_OK : est_error(EST_ERR_NO_MEMORY, "Unigram: out of memory");
}

est_status unigram_tokenize(const tok_unigram *u, const uint32_t *c, size_t n, tok_tokens *t) {
  char *b = malloc(4 * n + 1);
  uint32_t *off = malloc((n + 1) * sizeof *off);
  node *best = malloc((n + 1) * sizeof *best);
  uint32_t *path = malloc((n + 1) * sizeof *path);
  est_status st = EST_OK;
  if (!b || !off || !best || !path) {
    st = est_error(EST_ERR_NO_MEMORY, "Unigram: out of memory");
    goto done;
  }
  size_t nb = 0;
  for (size_t i = 0; i < n; i++) off[i] = (uint32_t)nb, nb += tok_utf8_put(c[i], b + nb);
  off[n] = (uint32_t)nb;
  for (size_t i = 0; i <= n; i++) best[i] = (node){0, 0, -1};
  double unk_score = u->min_score - 10.0;
  for (size_t s = 0; s < n; s++) {
    double here = best[s].score;
    bool single = false;
    size_t lim = s + u->max_chars < n ? s + u->max_chars : n;
    uint64_t h = VOCAB_HASH0;
    for (size_t e = s + 1; e <= lim; e++) {
      h = vocab_hash_step(h, b + off[e - 1], off[e] - off[e - 1]);
      int32_t id = vocab_get_hashed(&u->v, b + off[s], off[e] - off[s], h);
      if (e < lim && h && !prefix_has(u, h)) lim = e; /* no piece goes on past e */
      if (id < 0) continue;
      double cand = u->score[id] + here;
      if (best[e].from < 0 || cand > best[e].score) best[e] = (node){cand, id, (int32_t)s};
      if (e == s + 1) single = true;
    }
    if (!single) {
      if (u->unk_id < 0) {
        st = est_error(EST_ERR_INVALID_ARGUMENT, "Unigram error: Encountered an unknown token but `unk_id` is missing");
        goto done;
      }
      double cand = unk_score + here;
      if (best[s + 1].from < 0 || cand > best[s + 1].score) best[s + 1] = (node){cand, u->unk_id, (int32_t)s};
    }
  }
  /* back-track: path[k] = the start of the k-th node from the end */
  size_t np = 0;
  for (size_t e = n; e > 0; e = (size_t)best[e].from) path[np++] = (uint32_t)e;
  /* forward, fusing runs of unk nodes */
  size_t run = SIZE_MAX; /* start char of the pending unk run */
  for (size_t k = np; k-- > 0 && !st;) {
    size_t e = path[k], s = (size_t)best[e].from;
    if (best[e].id == u->unk_id) {
      if (run == SIZE_MAX) run = s;
      continue;
    }
    if (run != SIZE_MAX) st = emit(u, b, off[run], off[s], (uint32_t)run, (uint32_t)s, t), run = SIZE_MAX;
    if (!st) st = emit(u, b, off[s], off[e], (uint32_t)s, (uint32_t)e, t);
  }
  if (!st && run != SIZE_MAX) st = emit(u, b, off[run], off[n], (uint32_t)run, (uint32_t)n, t);
done:
  free(b);
  free(off);
  free(best);
  free(path);
  return st;
}
