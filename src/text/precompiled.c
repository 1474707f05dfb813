/* SentencePiece's precompiled charsmap (tokenizers' Precompiled normalizer; the format is
 * sentencepiece's normalizer.cc, the reading spm_precompiled's; docs/tokenizer.md §8).
 *
 * The blob, base64 in the JSON: u32 LE trie size in bytes, the trie (a darts-clone double
 * array of u32 units), then the replacement strings, each NUL-terminated. A lookup walks the
 * trie over a chunk's UTF-8 bytes and takes the *first* (shortest) prefix with a value: the
 * replacement starts at that byte offset of the strings. Chunks are extended grapheme
 * clusters shorter than 6 bytes, whole; otherwise (or with no entry) each char alone. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "core/alloc.h"
#include "core/base64.h"
#include "text/hf_internal.h"
#include "text/unicode.h"
#include "text/vocab_internal.h"

struct tok_precompiled {
  uint32_t *unit;
  size_t nunit;
  char *strings;
  size_t nstrings;
};

void precompiled_free(tok_precompiled *p) {
  if (!p) return;
  free(p->unit);
  free(p->strings);
  free(p);
}

est_status precompiled_from_base64(tok_precompiled **out, const char *s, const char *where) {
  *out = NULL;
  size_t len = strlen(s);
  uint8_t *bytes = malloc(len / 4 * 3 + 3);
  if (!bytes) return est_error(EST_ERR_NO_MEMORY, "%s: out of memory", where);
  const long decoded = est_base64_decode(s, bytes);
  if (decoded < 0) {
    free(bytes);
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s.precompiled_charsmap: invalid base64 at character %ld", where,
                     -1 - decoded);
  }
  const size_t n = (size_t)decoded;
  tok_precompiled *p = calloc(1, sizeof *p);
  uint32_t trie = n >= 4 ? (uint32_t)bytes[0] | (uint32_t)bytes[1] << 8 | (uint32_t)bytes[2] << 16 | (uint32_t)bytes[3] << 24 : 0;
  if (!p || n < 4 || trie / 4 == 0 || (size_t)trie / 4 * 4 > n - 4) {
    free(bytes);
    free(p);
    return p ? est_error(EST_ERR_INVALID_ARGUMENT, "%s.precompiled_charsmap: %zu bytes do not hold a trie of %u bytes",
                         where, n, trie)
             : est_error(EST_ERR_NO_MEMORY, "%s: out of memory", where);
  }
  p->nunit = trie / 4;
  p->unit = malloc(p->nunit * sizeof *p->unit);
  p->nstrings = n - 4 - p->nunit * 4;
  p->strings = malloc(p->nstrings + 1);
  if (!p->unit || !p->strings) {
    free(bytes);
    precompiled_free(p);
    return est_error(EST_ERR_NO_MEMORY, "%s: out of memory", where);
  }
  for (size_t k = 0; k < p->nunit; k++) {
    const uint8_t *b = bytes + 4 + 4 * k;
    p->unit[k] = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
  }
  memcpy(p->strings, bytes + 4 + p->nunit * 4, p->nstrings);
  p->strings[p->nstrings] = 0;
  free(bytes);
  if (est_utf8_first_invalid(p->strings, p->nstrings) != SIZE_MAX) {
    precompiled_free(p);
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s.precompiled_charsmap: its strings are not UTF-8", where);
  }
  *out = p;
  return EST_OK;
}

/* darts-clone's unit fields */
static inline bool has_leaf(uint32_t u) { return (u >> 8) & 1; }
static inline uint32_t value(uint32_t u) { return u & 0x7FFFFFFFu; }
static inline uint32_t label(uint32_t u) { return u & (0x80000000u | 0xFF); }
static inline uint32_t offset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }

/* The replacement of key[0, n) (its first prefix with a value), or NULL. */
static const char *lookup(const tok_precompiled *p, const uint8_t *key, size_t n, size_t *len) {
  size_t pos = 0;
  uint32_t u = p->unit[0];
  pos ^= offset(u);
  for (size_t i = 0; i < n && key[i]; i++) {
    pos ^= key[i];
    if (pos >= p->nunit) return NULL;
    u = p->unit[pos];
    if (label(u) != key[i]) return NULL;
    pos ^= offset(u);
    if (pos >= p->nunit) return NULL;
    if (has_leaf(u)) {
      uint32_t at = value(p->unit[pos]);
      if (at >= p->nstrings) return NULL;
      *len = strlen(p->strings + at);
      return p->strings + at;
    }
  }
  return NULL;
}

/* tokenizers' precompiled.rs replace(): the new chars replace the old one for one; extra new
 * chars are insertions; fewer new chars fold the removal into the last change so far. */
typedef struct xf {
  uint32_t *c;
  int *chg;
  size_t n, cap;
} xf;

static bool xf_push(xf *x, uint32_t c, int chg) {
  if (x->n == x->cap) {
    size_t cap = x->cap ? x->cap * 2 : 64;
    if (!EST_RESIZE(x->c, cap) || !EST_RESIZE(x->chg, cap)) return false;
    x->cap = cap;
  }
  x->c[x->n] = c;
  x->chg[x->n++] = chg;
  return true;
}

static bool xf_replace(xf *x, size_t old_count, const char *rep, size_t len) {
  size_t nnew = 0;
  for (size_t i = 0; i < len;) {
    size_t adv;
    uint32_t c = tok_utf8_next((const uint8_t *)rep + i, len - i, &adv);
    if (!xf_push(x, c, 0)) return false;
    nnew++;
    i += adv;
  }
  long diff = (long)nnew - (long)old_count;
  if (diff > 0)
    for (long k = 0; k < diff; k++) x->chg[x->n - 1 - (size_t)k] = 1;
  else if (diff < 0 && x->n)
    x->chg[x->n - 1] += (int)diff;
  return true;
}

bool precompiled_apply(const tok_precompiled *p, tok_nstr *s) {
  xf x = {0};
  bool modified = false, ok = true;
  int32_t state = 0;
  uint8_t buf[64];
  for (size_t i = 0; ok && i < s->n;) {
    /* the extended grapheme cluster s[i, j) */
    size_t j = i + 1;
    state = 0;
    while (j < s->n && !utf8proc_grapheme_break_stateful((utf8proc_int32_t)s->c[j - 1], (utf8proc_int32_t)s->c[j], &state))
      j++;
    size_t nb = 0;
    for (size_t k = i; k < j && nb < 8; k++) nb += tok_utf8_put(s->c[k], (char *)buf + nb);
    size_t len;
    const char *rep;
    if (nb < 6 && (rep = lookup(p, buf, nb, &len))) {
      modified = true;
      ok = xf_replace(&x, j - i, rep, len);
      i = j;
      continue;
    }
    for (size_t k = i; ok && k < j; k++) {
      size_t b = tok_utf8_put(s->c[k], (char *)buf);
      if ((rep = lookup(p, buf, b, &len))) {
        modified = true;
        ok = xf_replace(&x, 1, rep, len);
      } else {
        ok = xf_push(&x, s->c[k], 0);
      }
    }
    i = j;
  }
  if (ok && modified) ok = nstr_transform(s, x.c, x.chg, x.n, 0);
  free(x.c);
  free(x.chg);
  return ok;
}
