/* tokenizer.json decoders (tokenizers' decoders/, docs/tokenizer.md §8.2): ids -> text.
 * Each decoder maps the list of token strings to a new list (decode_chain); Tokenizer.decode
 * joins the last list with "". ByteLevel, Metaspace, WordPiece, BPEDecoder, ByteFallback,
 * Fuse, Strip, Replace, Sequence. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/hf_internal.h"
#include "text/unicode.h"

enum { D_SEQ, D_BYTELEVEL, D_METASPACE, D_WORDPIECE, D_BPE, D_BYTEFALLBACK, D_FUSE, D_STRIP, D_REPLACE };

struct tok_decoder {
  int kind;
  tok_decoder **seq;
  size_t nseq;
  char *text;            /* WordPiece prefix, BPEDecoder suffix, Replace content */
  uint32_t ch;           /* Metaspace replacement, Strip content */
  bool first_too;        /* Metaspace: prepend_scheme != never (drop the first token's replacements) */
  bool cleanup;          /* WordPiece */
  size_t start, stop;    /* Strip */
  tok_pattern pat;       /* Replace */
};

void decoder_free(tok_decoder *d) {
  if (!d) return;
  for (size_t i = 0; i < d->nseq; i++) decoder_free(d->seq[i]);
  free(d->seq);
  free(d->text);
  pattern_free(&d->pat);
  free(d);
}

/* ---- string lists ---- */

void strs_free(tok_strs *l) {
  for (size_t i = 0; i < l->n; i++) free(l->v[i]);
  free(l->v);
  free(l->len);
  memset(l, 0, sizeof *l);
}

/* Appends s[0, n) (copied). */
bool strs_push(tok_strs *l, const char *s, size_t n) {
  if (l->n == l->cap) {
    size_t c = l->cap ? 2 * l->cap : 16;
    char **v = realloc(l->v, c * sizeof *v);
    if (!v) return false;
    l->v = v;
    size_t *len = realloc(l->len, c * sizeof *len);
    if (!len) return false;
    l->len = len;
    l->cap = c;
  }
  char *x = malloc(n + 1);
  if (!x) return false;
  memcpy(x, s, n);
  x[n] = 0;
  l->len[l->n] = n;
  l->v[l->n++] = x;
  return true;
}

/* A growing byte buffer. */
typedef struct buf {
  char *p;
  size_t n, cap;
} buf;

static bool buf_add(buf *b, const void *s, size_t n) {
  if (b->n + n + 1 > b->cap) {
    size_t c = b->cap ? b->cap : 64;
    while (c < b->n + n + 1) c *= 2;
    char *p = realloc(b->p, c);
    if (!p) return false;
    b->p = p;
    b->cap = c;
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = 0;
  return true;
}

static bool buf_cp(buf *b, uint32_t c) {
  char u[4];
  return buf_add(b, u, tok_utf8_put(c, u));
}

/* The next code point of valid UTF-8 s (every token string is). */
static uint32_t next_cp(const char *s, size_t n, size_t *i) {
  size_t adv;
  uint32_t c = tok_utf8_next((const uint8_t *)s + *i, n - *i, &adv);
  *i += adv;
  return c;
}

/* Rust's String::from_utf8_lossy: each maximal invalid subpart becomes U+FFFD. */
static bool buf_lossy(buf *out, const uint8_t *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    uint8_t c = s[i];
    size_t need = c < 0x80 ? 1 : (c >= 0xC2 && c <= 0xDF) ? 2 : (c >= 0xE0 && c <= 0xEF) ? 3 : (c >= 0xF0 && c <= 0xF4) ? 4 : 0;
    size_t k = 1;
    if (need > 1) {
      for (; k < need && i + k < n; k++) {
        uint8_t d = s[i + k];
        uint8_t lo = 0x80, hi = 0xBF;
        if (k == 1 && c == 0xE0) lo = 0xA0;
        if (k == 1 && c == 0xED) hi = 0x9F;
        if (k == 1 && c == 0xF0) lo = 0x90;
        if (k == 1 && c == 0xF4) hi = 0x8F;
        if (d < lo || d > hi) break;
      }
    }
    if (need && k == need) {
      if (!buf_add(out, s + i, need)) return false;
      i += need;
    } else {
      if (!buf_add(out, "\xEF\xBF\xBD", 3)) return false;
      i += need ? k : 1;
    }
  }
  return true;
}

/* ---- the decoders ---- */

/* ByteLevel: each token's chars as GPT-2's bytes (a token with a char that is no byte's
 * stays its UTF-8), all joined, then decoded lossily: one string. */
static bool dec_bytelevel(tok_strs *l) {
  buf b = {0}, t = {0};
  bool ok = true;
  for (size_t k = 0; k < l->n && ok; k++) {
    const char *s = l->v[k];
    size_t n = l->len[k], i = 0, start = b.n;
    bool all = true;
    while (i < n && all && ok) {
      int x = bytelevel_byte(next_cp(s, n, &i));
      if (x < 0) all = false;
      else ok = buf_add(&b, (uint8_t[]){(uint8_t)x}, 1);
    }
    if (!all) {
      b.n = start;
      ok = buf_add(&b, s, n);
    }
  }
  ok = ok && buf_lossy(&t, (const uint8_t *)(b.p ? b.p : ""), b.n);
  free(b.p);
  strs_free(l);
  ok = ok && strs_push(l, t.p ? t.p : "", t.n);
  free(t.p);
  return ok;
}

/* Maps every token through f into a new list. */
typedef bool (*tok_map)(const tok_decoder *d, size_t i, size_t n, const char *s, size_t len, buf *out);

static bool map_tokens(const tok_decoder *d, tok_strs *l, tok_map f) {
  tok_strs r = {0};
  bool ok = true;
  for (size_t i = 0; i < l->n && ok; i++) {
    buf b = {0};
    ok = f(d, i, l->n, l->v[i], l->len[i], &b) && strs_push(&r, b.p ? b.p : "", b.n);
    free(b.p);
  }
  strs_free(l);
  *l = r;
  return ok;
}

/* Metaspace: the replacement becomes ' ', except in the first token (every one of its
 * replacements goes) unless prepend_scheme is never. */
static bool f_metaspace(const tok_decoder *d, size_t i, size_t n, const char *s, size_t len, buf *out) {
  (void)n;
  size_t k = 0;
  while (k < len) {
    size_t from = k;
    uint32_t c = next_cp(s, len, &k);
    if (c != d->ch) {
      if (!buf_add(out, s + from, k - from)) return false;
    } else if (!(i == 0 && d->first_too) && !buf_add(out, " ", 1)) {
      return false;
    }
  }
  return true;
}

/* Every occurrence of `from` in s replaced by `to`, into out (str::replace). */
static bool replace_all(buf *out, const char *s, size_t n, const char *from, const char *to) {
  size_t fl = strlen(from), tl = strlen(to), i = 0;
  if (!fl) return buf_add(out, s, n);
  while (i < n) {
    const char *hit = i + fl <= n ? memmem(s + i, n - i, from, fl) : NULL;
    if (!hit) return buf_add(out, s + i, n - i);
    if (!buf_add(out, s + i, (size_t)(hit - s) - i) || !buf_add(out, to, tl)) return false;
    i = (size_t)(hit - s) + fl;
  }
  return true;
}

/* WordPiece: later tokens lose the prefix (once) or get a leading ' '; cleanup per token. */
static bool f_wordpiece(const tok_decoder *d, size_t i, size_t n, const char *s, size_t len, buf *out) {
  (void)n;
  buf t = {0};
  size_t pl = strlen(d->text);
  bool ok;
  if (i == 0) ok = buf_add(&t, s, len);
  else if (len >= pl && !memcmp(s, d->text, pl)) ok = buf_add(&t, s + pl, len - pl);
  else ok = buf_add(&t, " ", 1) && buf_add(&t, s, len);
  if (ok && d->cleanup) {
    static const char *rules[][2] = {{" .", "."},   {" ?", "?"},    {" !", "!"},    {" ,", ","},
                                     {" ' ", "'"},  {" n't", "n't"}, {" 'm", "'m"}, {" do not", " don't"},
                                     {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
    for (size_t r = 0; r < sizeof rules / sizeof *rules && ok; r++) {
      buf u = {0};
      ok = replace_all(&u, t.p ? t.p : "", t.n, rules[r][0], rules[r][1]);
      free(t.p);
      t = u;
    }
  }
  ok = ok && (!t.n || buf_add(out, t.p, t.n));
  free(t.p);
  return ok;
}

/* BPEDecoder: the suffix becomes ' ', or "" in the last token. */
static bool f_bpe(const tok_decoder *d, size_t i, size_t n, const char *s, size_t len, buf *out) {
  return replace_all(out, s, len, d->text, i + 1 == n ? "" : " ");
}

/* Strip: up to `start` leading and `stop` trailing `content` chars. */
static bool f_strip(const tok_decoder *d, size_t i, size_t n, const char *s, size_t len, buf *out) {
  (void)i, (void)n;
  size_t m = 0;
  uint32_t *c = utf8_to_cps(s, len, &m);
  if (!c) return false;
  size_t a = 0, b = m;
  while (a < d->start && a < m && c[a] == d->ch) a++;
  while (m - b < d->stop && b > 0 && c[b - 1] == d->ch) b--;
  bool ok = true;
  /* tokenizers panics when the cuts cross (a token of only `content`); est gives "". */
  for (size_t k = a; k < b && ok; k++) ok = buf_cp(out, c[k]);
  free(c);
  return ok;
}

/* Replace: each match of the pattern becomes the content. */
static bool f_replace(const tok_decoder *d, size_t i, size_t n, const char *s, size_t len, buf *out) {
  (void)i, (void)n;
  size_t m = 0;
  uint32_t *c = utf8_to_cps(s, len, &m);
  tok_nstr t = {0};
  bool ok = c && nstr_reserve(&t, m + 1);
  for (size_t k = 0; ok && k < m; k++) nstr_push(&t, c[k], (int32_t)k, (int32_t)k + 1);
  free(c);
  tok_match *mt = NULL;
  size_t nm = 0;
  ok = ok && pattern_find(&d->pat, &t, &mt, &nm);
  for (size_t k = 0; ok && k < nm; k++) {
    if (mt[k].is_match) ok = buf_add(out, d->text, strlen(d->text));
    else
      for (size_t j = mt[k].s; j < mt[k].e && ok; j++) ok = buf_cp(out, t.c[j]);
  }
  free(mt);
  nstr_free(&t);
  return ok;
}

/* "<0xXX>" as Rust's u8::from_str_radix(XX, 16) reads it (an optional '+', hex digits). */
static int byte_token(const char *s, size_t len) {
  if (len != 6 || strncmp(s, "<0x", 3) || s[5] != '>') return -1;
  const char *h = s + 3;
  size_t nd = 2;
  if (h[0] == '+') h++, nd = 1;
  int v = 0;
  for (size_t k = 0; k < nd; k++) {
    char c = h[k];
    int x = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (x < 0) return -1;
    v = v * 16 + x;
  }
  return v;
}

/* ByteFallback: runs of <0xXX> tokens become their UTF-8 text, or one U+FFFD per byte when
 * the run is not valid UTF-8. */
static bool dec_bytefallback(tok_strs *l) {
  tok_strs r = {0};
  buf run = {0};
  bool ok = true;
  for (size_t i = 0; i <= l->n && ok; i++) {
    int x = i < l->n ? byte_token(l->v[i], l->len[i]) : -1;
    if (x >= 0) {
      ok = buf_add(&run, (uint8_t[]){(uint8_t)x}, 1);
      continue;
    }
    if (run.n) {
      if (est_utf8_first_invalid(run.p, run.n) == SIZE_MAX) ok = strs_push(&r, run.p, run.n);
      else
        for (size_t k = 0; k < run.n && ok; k++) ok = strs_push(&r, "\xEF\xBF\xBD", 3);
      run.n = 0;
    }
    if (ok && i < l->n) ok = strs_push(&r, l->v[i], l->len[i]);
  }
  free(run.p);
  strs_free(l);
  *l = r;
  return ok;
}

static bool dec_fuse(tok_strs *l) {
  buf b = {0};
  bool ok = buf_add(&b, "", 0);
  for (size_t i = 0; i < l->n && ok; i++) ok = buf_add(&b, l->v[i], l->len[i]);
  strs_free(l);
  ok = ok && strs_push(l, b.p, b.n);
  free(b.p);
  return ok;
}

bool decoder_chain(const tok_decoder *d, tok_strs *l) {
  switch (d->kind) {
  case D_SEQ:
    for (size_t i = 0; i < d->nseq; i++)
      if (!decoder_chain(d->seq[i], l)) return false;
    return true;
  case D_BYTELEVEL: return dec_bytelevel(l);
  case D_METASPACE: return map_tokens(d, l, f_metaspace);
  case D_WORDPIECE: return map_tokens(d, l, f_wordpiece);
  case D_BPE: return map_tokens(d, l, f_bpe);
  case D_BYTEFALLBACK: return dec_bytefallback(l);
  case D_FUSE: return dec_fuse(l);
  case D_STRIP: return map_tokens(d, l, f_strip);
  default: return map_tokens(d, l, f_replace);
  }
}

/* ---- from JSON ---- */

static est_status get_str(json_t *o, const char *key, const char *dflt, char **out, const char *where) {
  json_t *v = json_object_get(o, key);
  if (v && !json_is_null(v) && !json_is_string(v))
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s.%s must be a string", where, key);
  *out = strdup(v && json_is_string(v) ? json_string_value(v) : dflt);
  return *out ? EST_OK : est_error(EST_ERR_NO_MEMORY, "%s: out of memory", where);
}

static est_status get_char(json_t *o, const char *key, uint32_t *out, const char *where) {
  json_t *v = json_object_get(o, key);
  size_t n = 0;
  uint32_t *c = json_is_string(v) ? utf8_to_cps(json_string_value(v), json_string_length(v), &n) : NULL;
  if (!c || n != 1) {
    free(c);
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s.%s must be one character", where, key);
  }
  *out = c[0];
  free(c);
  return EST_OK;
}

static est_status get_count(json_t *o, const char *key, size_t *out, const char *where) {
  json_t *v = json_object_get(o, key);
  if (!json_is_integer(v) || json_integer_value(v) < 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s.%s must be a non-negative integer", where, key);
  *out = (size_t)json_integer_value(v);
  return EST_OK;
}

est_status decoder_from_json(tok_decoder **out, json_t *o, const char *where) {
  *out = NULL;
  json_t *type = json_object_get(o, "type");
  if (!json_is_object(o) || !json_is_string(type))
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: expected an object with a \"type\"", where);
  static const char *names[] = {"Sequence", "ByteLevel", "Metaspace", "WordPiece", "BPEDecoder",
                                "ByteFallback", "Fuse", "Strip", "Replace"};
  int kind = -1;
  for (int i = 0; i < (int)(sizeof names / sizeof *names); i++)
    if (!strcmp(json_string_value(type), names[i])) kind = i;
  if (kind < 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s.type \"%s\": est does not implement this decoder", where,
                     json_string_value(type));
  tok_decoder *d = calloc(1, sizeof *d);
  if (!d) return est_error(EST_ERR_NO_MEMORY, "%s: out of memory", where);
  d->kind = kind;
  est_status st = EST_OK;
  char sub[512];
  switch (kind) {
  case D_SEQ: {
    json_t *a = json_object_get(o, "decoders");
    if (!json_is_array(a)) {
      st = est_error(EST_ERR_INVALID_ARGUMENT, "%s.decoders must be an array", where);
      break;
    }
    d->seq = calloc(json_array_size(a) + 1, sizeof *d->seq);
    if (!d->seq) st = est_error(EST_ERR_NO_MEMORY, "%s: out of memory", where);
    for (size_t i = 0; d->seq && i < json_array_size(a) && !st; i++, d->nseq++) {
      snprintf(sub, sizeof sub, "%s.decoders[%zu]", where, i);
      st = decoder_from_json(&d->seq[i], json_array_get(a, i), sub);
    }
    break;
  }
  case D_METASPACE: {
    if ((st = get_char(o, "replacement", &d->ch, where))) break;
    json_t *ps = json_object_get(o, "prepend_scheme"), *aps = json_object_get(o, "add_prefix_space");
    d->first_too = true;
    if (ps && !json_is_null(ps)) {
      const char *v = json_is_string(ps) ? json_string_value(ps) : "";
      if (!strcmp(v, "never")) d->first_too = false;
      else if (strcmp(v, "always") && strcmp(v, "first"))
        st = est_error(EST_ERR_INVALID_ARGUMENT, "%s.prepend_scheme: expected always, first or never", where);
    } else if (aps && !json_is_null(aps)) {
      if (!json_is_boolean(aps)) st = est_error(EST_ERR_INVALID_ARGUMENT, "%s.add_prefix_space must be a boolean", where);
      else d->first_too = json_is_true(aps);
    }
    break;
  }
  case D_WORDPIECE: {
    json_t *c = json_object_get(o, "cleanup");
    d->cleanup = true;
    if (c && !json_is_null(c)) {
      if (!json_is_boolean(c)) st = est_error(EST_ERR_INVALID_ARGUMENT, "%s.cleanup must be a boolean", where);
      else d->cleanup = json_is_true(c);
    }
    if (!st) st = get_str(o, "prefix", "##", &d->text, where);
    break;
  }
  case D_BPE: st = get_str(o, "suffix", "</w>", &d->text, where); break;
  case D_STRIP:
    if (!(st = get_char(o, "content", &d->ch, where)) && !(st = get_count(o, "start", &d->start, where)))
      st = get_count(o, "stop", &d->stop, where);
    break;
  case D_REPLACE:
    snprintf(sub, sizeof sub, "%s", where);
    if (!(st = pattern_from_json(&d->pat, json_object_get(o, "pattern"), sub)))
      st = json_is_string(json_object_get(o, "content")) ? get_str(o, "content", "", &d->text, where)
                                                         : est_error(EST_ERR_INVALID_ARGUMENT, "%s.content must be a string", where);
    break;
  default:
    break;
  }
  if (st) decoder_free(d);
  else *out = d;
  return st;
}
