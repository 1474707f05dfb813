/* BPE (tokenizers' models/bpe/model.rs merge_word and word.rs merge_all): a word starts as
 * its chars (continuing_subword_prefix before every char but the first, end_of_word_suffix
 * after the last; a char not in the vocab is its <0xXX> bytes with byte_fallback, else unk,
 * consecutive unks fused with fuse_unk, dropped when there is no unk_token); then the pair of
 * lowest merge rank (leftmost on ties) merges until none is left, through a heap with the
 * same order and the same stale-entry test as merge_all. Merges are "a b" or ["a", "b"]. */
#include <stdlib.h>
#include <string.h>

#include "text/models_internal.h"
#include "text/unicode.h"
#include "text/vocab_internal.h"

typedef struct merge_slot {
  uint64_t key;       /* (a << 32 | b) + 1; 0 empty */
  uint32_t rank;
  int32_t new_id;
} merge_slot;

struct tok_bpe {
  tok_vocab v;
  merge_slot *m;
  size_t mask;
  char *unk_token, *prefix, *suffix;
  int32_t unk_id;     /* -1: no unk_token (unknown chars vanish) */
  bool fuse_unk, byte_fallback, ignore_merges;
};

const tok_vocab *bpe_vocab(const tok_bpe *b) { return &b->v; }

void bpe_free(tok_bpe *b) {
  if (!b) return;
  vocab_fini(&b->v);
  free(b->m);
  free(b->unk_token);
  free(b->prefix);
  free(b->suffix);
  free(b);
}

static size_t mhash(uint64_t k) { return (size_t)((k * 0x9E3779B97F4A7C15ULL) >> 20); }

static const merge_slot *merge_get(const tok_bpe *b, int32_t x, int32_t y) {
  uint64_t key = ((uint64_t)(uint32_t)x << 32 | (uint32_t)y) + 1;
  for (size_t h = mhash(key) & b->mask;; h = (h + 1) & b->mask) {
    if (!b->m[h].key) return NULL;
    if (b->m[h].key == key) return &b->m[h];
  }
}

static est_status opt_string(json_t *o, const char *key, char **out, const char *where) {
  json_t *v = json_object_get(o, key);
  *out = NULL;
  if (!v || json_is_null(v)) return EST_OK;
  if (!json_is_string(v)) return est_error(EST_ERR_INVALID_ARGUMENT, "%s.%s must be a string or null", where, key);
  *out = strdup(json_string_value(v));
  return *out ? EST_OK : est_error(EST_ERR_NO_MEMORY, "%s: out of memory", where);
}

static est_status opt_bool(json_t *o, const char *key, bool *out, const char *where) {
  json_t *v = json_object_get(o, key);
  if (!v || json_is_null(v)) return EST_OK;
  if (!json_is_boolean(v)) return est_error(EST_ERR_INVALID_ARGUMENT, "%s.%s must be a boolean", where, key);
  *out = json_is_true(v);
  return EST_OK;
}

est_status bpe_from_json(tok_bpe **out, json_t *o, const char *where) {
  *out = NULL;
  tok_bpe *b = calloc(1, sizeof *b);
  if (!b) return est_error(EST_ERR_NO_MEMORY, "%s: out of memory", where);
  est_status st;
  json_t *dropout = json_object_get(o, "dropout"), *merges = json_object_get(o, "merges");
  if ((st = vocab_from_object(&b->v, json_object_get(o, "vocab"), where)) ||
      (st = opt_string(o, "unk_token", &b->unk_token, where)) ||
      (st = opt_string(o, "continuing_subword_prefix", &b->prefix, where)) ||
      (st = opt_string(o, "end_of_word_suffix", &b->suffix, where)) || (st = opt_bool(o, "fuse_unk", &b->fuse_unk, where)) ||
      (st = opt_bool(o, "byte_fallback", &b->byte_fallback, where)) ||
      (st = opt_bool(o, "ignore_merges", &b->ignore_merges, where)))
    goto fail;
  if (dropout && !json_is_null(dropout) && !(json_is_number(dropout) && json_number_value(dropout) == 0)) {
    st = est_error(EST_ERR_INVALID_ARGUMENT, "%s.dropout: est implements BPE without dropout (null) only", where);
    goto fail;
  }
  b->unk_id = b->unk_token ? vocab_get(&b->v, b->unk_token, strlen(b->unk_token)) : -1;
  if (!json_is_array(merges)) {
    st = est_error(EST_ERR_INVALID_ARGUMENT, "%s.merges must be an array", where);
    goto fail;
  }
  size_t n = json_array_size(merges), cap = 16;
  while (cap < 2 * n + 2) cap *= 2;
  b->m = calloc(cap, sizeof *b->m);
  b->mask = cap - 1;
  size_t plen = b->prefix ? strlen(b->prefix) : 0;
  char *buf = NULL;
  size_t bufcap = 0;
  for (size_t i = 0; b->m && i < n; i++) {
    json_t *e = json_array_get(merges, i);
    const char *x, *y;
    size_t nx, ny;
    if (json_is_string(e)) { /* "a b": split at the first space */
      x = json_string_value(e);
      const char *sp = strchr(x, ' ');
      if (!sp) {
        st = est_error(EST_ERR_INVALID_ARGUMENT, "%s.merges[%zu] \"%s\" is not two tokens joined by a space", where, i, x);
        break;
      }
      nx = (size_t)(sp - x);
      y = sp + 1;
      ny = strlen(y);
    } else if (json_is_array(e) && json_array_size(e) == 2 && json_is_string(json_array_get(e, 0)) &&
               json_is_string(json_array_get(e, 1))) {
      x = json_string_value(json_array_get(e, 0));
      nx = json_string_length(json_array_get(e, 0));
      y = json_string_value(json_array_get(e, 1));
      ny = json_string_length(json_array_get(e, 1));
    } else {
      st = est_error(EST_ERR_INVALID_ARGUMENT, "%s.merges[%zu] must be \"a b\" or [\"a\", \"b\"]", where, i);
      break;
    }
    int32_t ix = vocab_get(&b->v, x, nx), iy = vocab_get(&b->v, y, ny);
    if (ix < 0 || iy < 0) {
      st = est_error(EST_ERR_INVALID_ARGUMENT, "%s.merges[%zu]: token \"%.*s\" is not in the vocab", where, i,
                     (int)(ix < 0 ? nx : ny), ix < 0 ? x : y);
      break;
    }
    /* the merged token: a + b without b's continuing_subword_prefix */
    size_t skip = plen && ny >= plen && !memcmp(y, b->prefix, plen) ? plen : 0;
    if (nx + ny + 1 > bufcap && !(buf = realloc(buf, bufcap = 2 * (nx + ny + 1)))) break;
    memcpy(buf, x, nx);
    memcpy(buf + nx, y + skip, ny - skip);
    int32_t id = vocab_get(&b->v, buf, nx + ny - skip);
    if (id < 0) {
      st = est_error(EST_ERR_INVALID_ARGUMENT, "%s.merges[%zu]: the merged token \"%.*s\" is not in the vocab", where, i,
                     (int)(nx + ny - skip), buf);
      break;
    }
    uint64_t key = ((uint64_t)(uint32_t)ix << 32 | (uint32_t)iy) + 1;
    size_t h = mhash(key) & b->mask;
    while (b->m[h].key && b->m[h].key != key) h = (h + 1) & b->mask;
    b->m[h] = (merge_slot){key, (uint32_t)i, id}; /* a repeated pair: the later rank, as a HashMap */
  }
  free(buf);
  if (!st && !b->m) st = est_error(EST_ERR_NO_MEMORY, "%s: out of memory", where);
  if (!st) {
    *out = b;
    return EST_OK;
  }
fail:
  bpe_free(b);
  return st;
}

typedef struct sym {
  int32_t id, prev, next;
  uint32_t len; /* chars; 0: merged away */
} sym;

typedef struct hent {
  uint32_t rank, pos;
  int32_t new_id;
} hent;

static bool hless(hent a, hent b) { return a.rank != b.rank ? a.rank < b.rank : a.pos < b.pos; }

static void hpush(hent *h, size_t *n, hent e) {
  size_t i = (*n)++;
  while (i && hless(e, h[(i - 1) / 2])) h[i] = h[(i - 1) / 2], i = (i - 1) / 2;
  h[i] = e;
}

static hent hpop(hent *h, size_t *n) {
  hent top = h[0], last = h[--*n];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= *n) break;
    if (c + 1 < *n && hless(h[c + 1], h[c])) c++;
    if (!hless(h[c], last)) break;
    h[i] = h[c];
    i = c;
  }
  if (*n) h[i] = last;
  return top;
}

est_status bpe_tokenize(const tok_bpe *b, const uint32_t *c, size_t n, tok_tokens *t) {
  size_t plen = b->prefix ? strlen(b->prefix) : 0, slen = b->suffix ? strlen(b->suffix) : 0;
  char *buf = malloc(4 * n + plen + slen + 8);
  size_t maxsym = n * (4 + plen + slen) + 1;
  sym *s = malloc(maxsym * sizeof *s);
  hent *h = malloc((3 * maxsym + 8) * sizeof *h);
  est_status st = EST_OK;
  if (!buf || !s || !h) {
    st = est_error(EST_ERR_NO_MEMORY, "BPE: out of memory");
    goto done;
  }
  if (b->ignore_merges) {
    size_t nb = cps_to_utf8(c, n, buf);
    int32_t id = vocab_get(&b->v, buf, nb);
    if (id >= 0) {
      if (!tokens_push(t, id, 0, (uint32_t)n)) st = est_error(EST_ERR_NO_MEMORY, "BPE: out of memory");
      goto done;
    }
  }
  size_t ns = 0;
  int32_t unk = -1;
  uint32_t unk_len = 0;
  for (size_t i = 0; i < n; i++) {
    size_t k = 0;
    if (i && plen) memcpy(buf, b->prefix, plen), k = plen;
    size_t cb = tok_utf8_put(c[i], buf + k);
    k += cb;
    if (i == n - 1 && slen) memcpy(buf + k, b->suffix, slen), k += slen;
    int32_t id = vocab_get(&b->v, buf, k);
    if (id >= 0) {
      if (unk >= 0) s[ns++] = (sym){unk, 0, 0, unk_len}, unk = -1;
      s[ns++] = (sym){id, 0, 0, 1};
      continue;
    }
    if (b->byte_fallback) {
      int32_t ids[16];
      bool all = k <= 16;
      for (size_t j = 0; j < k && all; j++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", (uint8_t)buf[j]);
        all = (ids[j] = vocab_get(&b->v, name, 6)) >= 0;
      }
      if (all) {
        /* each byte a symbol of one byte: in chars, the char's bytes share it (first gets 1) */
        for (size_t j = 0; j < k; j++) s[ns++] = (sym){ids[j], 0, 0, j == 0 ? 1u : 0u};
        continue;
      }
    }
    if (b->unk_token) {
      if (b->unk_id < 0) {
        st = est_error(EST_ERR_INVALID_ARGUMENT, "BPE: unk token %s is not in the vocabulary", b->unk_token);
        goto done;
      }
      if (unk >= 0 && b->fuse_unk) unk_len++;
      else {
        if (unk >= 0) s[ns++] = (sym){unk, 0, 0, unk_len};
        unk = b->unk_id, unk_len = 1;
      }
    }
  }
  if (unk >= 0) s[ns++] = (sym){unk, 0, 0, unk_len};
  for (size_t i = 0; i < ns; i++) s[i].prev = (int32_t)i - 1, s[i].next = i + 1 < ns ? (int32_t)i + 1 : -1;
  /* byte_fallback symbols have len 0 past a char's first byte: mark them alive separately */
  uint8_t *dead = calloc(ns + 1, 1);
  if (!dead) {
    st = est_error(EST_ERR_NO_MEMORY, "BPE: out of memory");
    goto done;
  }
  size_t nh = 0;
  for (size_t i = 0; i + 1 < ns; i++) {
    const merge_slot *m = merge_get(b, s[i].id, s[i + 1].id);
    if (m) hpush(h, &nh, (hent){m->rank, (uint32_t)i, m->new_id});
  }
  while (nh) {
    hent top = hpop(h, &nh);
    if (dead[top.pos] || s[top.pos].next < 0) continue;
    size_t nx = (size_t)s[top.pos].next;
    const merge_slot *m = merge_get(b, s[top.pos].id, s[nx].id);
    if (!m || m->new_id != top.new_id) continue;
    s[top.pos].id = top.new_id;
    s[top.pos].len += s[nx].len;
    s[top.pos].next = s[nx].next;
    dead[nx] = 1;
    if (s[nx].next >= 0) s[s[nx].next].prev = (int32_t)top.pos;
    if (s[top.pos].prev >= 0 && (m = merge_get(b, s[s[top.pos].prev].id, s[top.pos].id)))
      hpush(h, &nh, (hent){m->rank, (uint32_t)s[top.pos].prev, m->new_id});
    if (s[top.pos].next >= 0 && (m = merge_get(b, s[top.pos].id, s[s[top.pos].next].id)))
      hpush(h, &nh, (hent){m->rank, top.pos, m->new_id});
  }
  /* offsets: a symbol covers its chars; a byte symbol inside a char covers that whole char */
  uint32_t at = 0;
  for (size_t i = 0; i < ns && !st; i++) {
    if (dead[i]) continue;
    uint32_t from = s[i].len ? at : (at ? at - 1 : 0), to = s[i].len ? at + s[i].len : at;
    if (!tokens_push(t, s[i].id, from, to)) st = est_error(EST_ERR_NO_MEMORY, "BPE: out of memory");
    at += s[i].len;
  }
  free(dead);
done:
  free(buf);
  free(s);
  free(h);
  return st;
}
