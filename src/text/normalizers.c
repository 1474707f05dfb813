/* Normalized strings and the normalizers of tokenizers' normalizers/ (docs/tokenizer.md §8):
 * NormalizedString's transform / replace / prepend with alignments, string and regex
 * patterns (PCRE2, 32-bit code units: matches are code point ranges), and BertNormalizer,
 * NFC/NFD/NFKC/NFKD, Lowercase, StripAccents, Strip, Replace, Prepend, Precompiled, Sequence. */
#define PCRE2_CODE_UNIT_WIDTH 32
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "core/alloc.h"
#include "text/hf_internal.h"
#include "text/unicode.h"
#include "text/vocab_internal.h"

/* ---- the normalized string ------------------------------------------------------------ */

bool nstr_reserve(tok_nstr *s, size_t n) {
  if (n <= s->cap) return true;
  size_t c = s->cap ? s->cap : 16;
  while (c < n) c *= 2;
  if (!EST_RESIZE(s->c, c) || !EST_RESIZE(s->as, c) || !EST_RESIZE(s->ae, c)) return false;
  s->cap = c;
  return true;
}

void nstr_free(tok_nstr *s) {
  free(s->c);
  free(s->as);
  free(s->ae);
  memset(s, 0, sizeof *s);
}

bool nstr_push(tok_nstr *s, uint32_t c, int32_t as, int32_t ae) {
  if (s->n == s->cap && !nstr_reserve(s, s->n + 1)) return false;
  s->c[s->n] = c;
  s->as[s->n] = as;
  s->ae[s->n++] = ae;
  return true;
}

bool nstr_slice(tok_nstr *out, const tok_nstr *s, size_t from, size_t to) {
  memset(out, 0, sizeof *out);
  if (!nstr_reserve(out, to - from + 1)) return false;
  memcpy(out->c, s->c + from, (to - from) * sizeof *s->c);
  memcpy(out->as, s->as + from, (to - from) * sizeof *s->as);
  memcpy(out->ae, s->ae + from, (to - from) * sizeof *s->ae);
  out->n = to - from;
  out->base = to > from ? s->as[from] : s->base;
  return true;
}

bool nstr_transform(tok_nstr *s, const uint32_t *c, const int *chg, size_t m, size_t skip) {
  tok_nstr t = {0};
  t.base = s->base;
  if (!nstr_reserve(&t, m + 1)) return false;
  size_t at = skip; /* the next original character of s */
  for (size_t i = 0; i < m; i++) {
    int32_t as, ae;
    if (chg[i] > 0) { /* inserted: the alignment of the character before */
      as = at ? s->as[at - 1] : s->base;
      ae = at ? s->ae[at - 1] : s->base;
    } else {
      as = at < s->n ? s->as[at] : s->base;
      ae = at < s->n ? s->ae[at] : s->base;
      at += 1 + (size_t)(chg[i] < 0 ? -chg[i] : 0);
    }
    t.c[i] = c[i];
    t.as[i] = as;
    t.ae[i] = ae;
  }
  t.n = m;
  nstr_free(s);
  *s = t;
  return true;
}

uint32_t *utf8_to_cps(const char *s, size_t len, size_t *n) {
  uint32_t *out = malloc((len + 1) * sizeof *out);
  if (!out) return NULL;
  size_t k = 0;
  for (size_t i = 0; i < len;) {
    size_t adv;
    uint32_t c = tok_utf8_next((const uint8_t *)s + i, len - i, &adv);
    if (c != UINT32_MAX) out[k++] = c;
    i += adv;
  }
  *n = k;
  return out;
}

/* ---- patterns ------------------------------------------------------------------------- */

est_status pattern_from_json(tok_pattern *p, json_t *o, const char *where) {
  memset(p, 0, sizeof *p);
  json_t *str = json_object_get(o, "String"), *re = json_object_get(o, "Regex");
  if (json_is_string(str)) {
    p->lit = utf8_to_cps(json_string_value(str), json_string_length(str), &p->nlit);
    return p->lit ? EST_OK : est_error(EST_ERR_NO_MEMORY, "%s: out of memory", where);
  }
  if (!json_is_string(re))
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s.pattern: expected {\"String\": ...} or {\"Regex\": ...}", where);
  size_t n;
  uint32_t *cps = utf8_to_cps(json_string_value(re), json_string_length(re), &n);
  if (!cps) return est_error(EST_ERR_NO_MEMORY, "%s: out of memory", where);
  int err;
  PCRE2_SIZE eoff;
  p->re = pcre2_compile((PCRE2_SPTR)cps, n, PCRE2_UTF | PCRE2_UCP, &err, &eoff, NULL);
  free(cps);
  if (!p->re) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, 256);
    char m8[256];
    size_t k = 0;
    for (size_t i = 0; msg[i] && k < 255; i++) m8[k++] = msg[i] < 128 ? (char)msg[i] : '?';
    m8[k] = 0;
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s.pattern.Regex \"%s\": %s at %zu", where, json_string_value(re), m8,
                     (size_t)eoff);
  }
  pcre2_jit_compile(p->re, PCRE2_JIT_COMPLETE); /* best effort: the interpreter is the same */
  return EST_OK;
}

void pattern_free(tok_pattern *p) {
  free(p->lit);
  if (p->re) pcre2_code_free(p->re);
  memset(p, 0, sizeof *p);
}

static bool match_push(tok_match **m, size_t *n, size_t *cap, size_t s, size_t e, bool is_match) {
  if (*n == *cap) {
    size_t c = *cap ? *cap * 2 : 16;
    tok_match *p = realloc(*m, c * sizeof *p);
    if (!p) return false;
    *m = p;
    *cap = c;
  }
  (*m)[(*n)++] = (tok_match){s, e, is_match};
  return true;
}

/* Pattern::find_matches: an empty input is one non-match (0, 0); an empty literal matches
 * nothing; matches are leftmost, non-overlapping; an empty regex match moves on one char. */
bool pattern_find(const tok_pattern *p, const tok_nstr *s, tok_match **out, size_t *n) {
  size_t cap = 0, prev = 0;
  *out = NULL;
  *n = 0;
  if (!s->n) return match_push(out, n, &cap, 0, 0, false);
  if (p->lit) {
    if (!p->nlit) return match_push(out, n, &cap, 0, s->n, false);
    for (size_t i = 0; i + p->nlit <= s->n;) {
      if (s->c[i] == p->lit[0] && !memcmp(s->c + i, p->lit, p->nlit * sizeof *p->lit)) {
        if (prev != i && !match_push(out, n, &cap, prev, i, false)) return false;
        if (!match_push(out, n, &cap, i, i + p->nlit, true)) return false;
        prev = i += p->nlit;
      } else {
        i++;
      }
    }
  } else {
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(p->re, NULL);
    if (!md) return false;
    size_t at = 0;
    while (at <= s->n) {
      int rc = pcre2_match(p->re, (PCRE2_SPTR)s->c, s->n, at, PCRE2_NO_UTF_CHECK, md, NULL);
      if (rc < 0) break;
      PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
      size_t ms = ov[0], me = ov[1];
      if (prev != ms && !match_push(out, n, &cap, prev, ms, false)) return pcre2_match_data_free(md), false;
      if (!match_push(out, n, &cap, ms, me, true)) return pcre2_match_data_free(md), false;
      prev = me;
      at = me > ms ? me : me + 1;
    }
    pcre2_match_data_free(md);
  }
  if (prev != s->n) return match_push(out, n, &cap, prev, s->n, false);
  return true;
}

/* Each match becomes `content`, every char of it inserted after the removed match: they
 * take the alignment of the match's last char (or (base, base) for an empty match at 0). */
bool nstr_replace(tok_nstr *s, const tok_pattern *p, const uint32_t *content, size_t ncontent) {
  tok_match *m;
  size_t nm;
  if (!pattern_find(p, s, &m, &nm)) return false;
  tok_nstr t = {0};
  t.base = s->base;
  bool ok = nstr_reserve(&t, s->n + 1);
  for (size_t i = 0; ok && i < nm; i++) {
    if (!m[i].is_match) {
      for (size_t k = m[i].s; ok && k < m[i].e; k++) ok = nstr_push(&t, s->c[k], s->as[k], s->ae[k]);
      continue;
    }
    size_t e = m[i].e;
    for (size_t k = 0; ok && k < ncontent; k++)
      ok = nstr_push(&t, content[k], e ? s->as[e - 1] : s->base, e ? s->ae[e - 1] : s->base);
  }
  free(m);
  if (!ok) {
    nstr_free(&t);
    return false;
  }
  nstr_free(s);
  *s = t;
  return true;
}

/* prepend: the new chars and the old first char all take the first char's alignment. */
bool nstr_prepend(tok_nstr *s, const uint32_t *p, size_t np) {
  if (!s->n) return true;
  if (!nstr_reserve(s, s->n + np)) return false;
  int32_t as = s->as[0], ae = s->ae[0];
  memmove(s->c + np, s->c, s->n * sizeof *s->c);
  memmove(s->as + np, s->as, s->n * sizeof *s->as);
  memmove(s->ae + np, s->ae, s->n * sizeof *s->ae);
  for (size_t i = 0; i < np; i++) {
    s->c[i] = p[i];
    s->as[i] = as;
    s->ae[i] = ae;
  }
  s->n += np;
  return true;
}

/* Keeps the chars `keep` says yes to, each with its own alignment (NormalizedString::filter). */
static void nstr_filter(tok_nstr *s, bool (*keep)(uint32_t)) {
  size_t k = 0;
  for (size_t i = 0; i < s->n; i++) {
    if (!keep(s->c[i])) continue;
    s->c[k] = s->c[i];
    s->as[k] = s->as[i];
    s->ae[k++] = s->ae[i];
  }
  s->n = k;
}

/* ---- Unicode normalization forms with alignments --------------------------------------- */

static int ccc(uint32_t c) { return utf8proc_get_property((utf8proc_int32_t)c)->combining_class; }

/* The primary composite of a + b, or 0 (utf8proc composes the pair or leaves it). */
static uint32_t compose_pair(uint32_t a, uint32_t b) {
  utf8proc_int32_t buf[2] = {(utf8proc_int32_t)a, (utf8proc_int32_t)b};
  utf8proc_ssize_t n = utf8proc_normalize_utf32(buf, 2, UTF8PROC_COMPOSE | UTF8PROC_STABLE);
  return n == 1 ? (uint32_t)buf[0] : 0;
}

/* unicode-normalization-alignments' nfd/nfkd/nfc/nfkc (the crate behind NormalizedString's
 * nfd() ... nfkc()), as the (char, change) stream it gives to NormalizedString::transform:
 * - decomposition: each char's pieces, the first with change 0, the others +1 (inserted);
 * - canonical ordering: each run of non-starters sorted by combining class, stably, the
 *   changes moving with their chars (so a reordered mark takes the alignment of the position
 *   it lands on, as in tokenizers, not of its source);
 * - composition (recompose.rs): a char joining the composee gives it change k + change - 1;
 *   blocked non-starters wait in a buffer and follow the composee out.
 * Pure ASCII is its own normal form (every change 0: the transform is the identity). */
static bool nstr_unicode(tok_nstr *s, bool compat, bool compose) {
  bool ascii = true;
  for (size_t i = 0; i < s->n && ascii; i++) ascii = s->c[i] < 0x80;
  if (ascii) return true;
  size_t cap = s->n + s->n / 2 + 32; /* grown below: a char decomposes into up to 18 (U+FDFA) */
  uint32_t *c = malloc(cap * sizeof *c), *oc = NULL;
  int *chg = malloc(cap * sizeof *chg), *ochg = NULL;
  bool ok = c && chg;
  size_t m = 0;
  for (size_t i = 0; ok && i < s->n; i++) {
    if (m + 32 > cap) {
      cap = 2 * cap + 32;
      uint32_t *c2 = realloc(c, cap * sizeof *c);
      if (c2) c = c2;
      int *chg2 = c2 ? realloc(chg, cap * sizeof *chg) : NULL;
      if (chg2) chg = chg2;
      if (!c2 || !chg2) {
        ok = false;
        break;
      }
    }
    utf8proc_int32_t d[32];
    int last = 0;
    utf8proc_ssize_t k = s->c[i] < 0x80 ? (d[0] = (utf8proc_int32_t)s->c[i], 1)
                                        : utf8proc_decompose_char((utf8proc_int32_t)s->c[i], d, 32,
                                                                  UTF8PROC_DECOMPOSE | (compat ? UTF8PROC_COMPAT : 0), &last);
    if (k < 0 || k > 32) k = 1, d[0] = (utf8proc_int32_t)s->c[i];
    for (utf8proc_ssize_t j = 0; j < k; j++) c[m] = (uint32_t)d[j], chg[m++] = j ? 1 : 0;
  }
  for (size_t i = 0; ok && i < m; i++) { /* canonical ordering */
    int ci = ccc(c[i]);
    if (!ci) continue;
    for (size_t j = i; j > 0 && ccc(c[j - 1]) > ci; j--) {
      uint32_t x = c[j]; c[j] = c[j - 1]; c[j - 1] = x;
      int y = chg[j]; chg[j] = chg[j - 1]; chg[j - 1] = y;
    }
  }
  if (ok && compose) { /* composition only shortens: m entries are room enough */
    oc = malloc((m + 1) * sizeof *oc), ochg = malloc((m + 1) * sizeof *ochg);
    ok = oc && ochg;
    size_t o = 0, nb = 0;
    uint32_t *bc = malloc((m + 1) * sizeof *bc); /* the blocked non-starters */
    int *bchg = malloc((m + 1) * sizeof *bchg);
    ok = ok && bc && bchg;
    bool have = false;
    uint32_t kc = 0;
    int kchg = 0, last = -1;      /* last: the buffer's last combining class, -1: none */
#define OUT(ch, d) (oc[o] = (ch), ochg[o++] = (d))
#define FLUSH() do { for (size_t q = 0; q < nb; q++) OUT(bc[q], bchg[q]); nb = 0; } while (0)
    for (size_t i = 0; ok && i < m; i++) {
      uint32_t ch = c[i];
      int d = chg[i], cls = ccc(ch);
      if (!have) {
        if (cls) OUT(ch, d);
        else have = true, kc = ch, kchg = d;
        continue;
      }
      if (last >= 0 && last >= cls) { /* blocked */
        if (cls == 0) {
          OUT(kc, kchg);
          FLUSH();
          kc = ch, kchg = d, last = -1;
        } else {
          bc[nb] = ch, bchg[nb++] = d, last = cls;
        }
        continue;
      }
      uint32_t r = compose_pair(kc, ch);
      if (r) {
        kc = r, kchg += d - 1;
        continue;
      }
      if (last < 0 && cls == 0) {
        OUT(kc, kchg);
        kc = ch, kchg = d;
        continue;
      }
      bc[nb] = ch, bchg[nb++] = d, last = cls;
    }
    if (ok && have) OUT(kc, kchg);
    if (ok) FLUSH();
#undef OUT
#undef FLUSH
    free(bc), free(bchg);
    if (ok) ok = nstr_transform(s, oc, ochg, o, 0);
  } else if (ok) {
    ok = nstr_transform(s, c, chg, m, 0);
  }
  free(c), free(chg), free(oc), free(ochg);
  return ok;
}

/* char::to_lowercase, one char at a time: extra chars inserted after it. */
static bool nstr_lowercase(tok_nstr *s) {
  bool ascii = true;
  for (size_t i = 0; i < s->n; i++) {
    if (s->c[i] >= 0x80) ascii = false;
    else if (s->c[i] - 'A' < 26u) s->c[i] += 32;
  }
  if (ascii) return true;
  tok_nstr t = {0};
  t.base = s->base;
  if (!nstr_reserve(&t, s->n * 3 + 1)) return false;
  for (size_t i = 0; i < s->n; i++) {
    uint32_t low[4];
    size_t k = tok_lower(&s->c[i], 1, low, false);
    for (size_t j = 0; j < k; j++) nstr_push(&t, low[j], s->as[i], s->ae[i]);
  }
  nstr_free(s);
  *s = t;
  return true;
}

static bool is_not_mark(uint32_t c) {
  int g = utf8proc_category((utf8proc_int32_t)c);
  return g != UTF8PROC_CATEGORY_MN && g != UTF8PROC_CATEGORY_MC && g != UTF8PROC_CATEGORY_ME;
}
static bool is_not_mn(uint32_t c) { return utf8proc_category((utf8proc_int32_t)c) != UTF8PROC_CATEGORY_MN; }

/* Rust's char::is_whitespace: the White_Space property. */
static bool rust_whitespace(uint32_t c) {
  return (c >= 9 && c <= 13) || c == ' ' || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
         c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/* ---- BertNormalizer (normalizers/bert.rs) ---------------------------------------------- */

static bool bert_keep(uint32_t c) {
  if (c == 0 || c == 0xFFFD) return false;
  if (c == '\t' || c == '\n' || c == '\r') return true;
  return !tok_hf_is_other(c);
}

typedef struct bert_norm {
  bool clean_text, chinese, lowercase;
  int strip_accents; /* -1: as lowercase */
} bert_norm;

static bool bert_normalize(const bert_norm *b, tok_nstr *s) {
  if (b->clean_text) {
    nstr_filter(s, bert_keep);
    for (size_t i = 0; i < s->n; i++)
      if (est_tok_is_whitespace(s->c[i])) s->c[i] = ' ';
  }
  if (b->chinese) {
    size_t cjk = 0;
    for (size_t i = 0; i < s->n; i++) cjk += est_tok_is_cjk(s->c[i]);
    if (cjk) {
      tok_nstr t = {0};
      t.base = s->base;
      if (!nstr_reserve(&t, s->n + 2 * cjk + 1)) return false;
      for (size_t i = 0; i < s->n; i++) {
        bool c = est_tok_is_cjk(s->c[i]);
        if (c) nstr_push(&t, ' ', s->as[i], s->ae[i]);
        nstr_push(&t, s->c[i], s->as[i], s->ae[i]);
        if (c) nstr_push(&t, ' ', s->as[i], s->ae[i]);
      }
      nstr_free(s);
      *s = t;
    }
  }
  if (b->strip_accents == 1 || (b->strip_accents == -1 && b->lowercase)) {
    if (!nstr_unicode(s, false, false)) return false;
    nstr_filter(s, is_not_mn);
  }
  if (b->lowercase && !nstr_lowercase(s)) return false;
  return true;
}

/* ---- the normalizer tree ---------------------------------------------------------------- */

enum { N_SEQ, N_BERT, N_NFC, N_NFD, N_NFKC, N_NFKD, N_LOWER, N_STRIP_ACCENTS, N_STRIP, N_REPLACE, N_PREPEND,
       N_PRECOMPILED, N_NMT };

/* Nmt (normalizers/unicode.rs do_nmt, sentencepiece's nmt_nfkc rules without the NFKC): ASCII
 * and C1 controls dropped, other whitespace-like code points (tab, LF, FF, CR, U+1680,
 * U+200B..U+200F, U+2028, U+2029, U+2581, BOM, U+FFFD) become ' ' in place. */
static bool nmt_keep(uint32_t c) {
  return !((c >= 0x01 && c <= 0x08) || c == 0x0B || (c >= 0x0E && c <= 0x1F) || c == 0x7F || c == 0x8F || c == 0x9F);
}

static void nmt_map(tok_nstr *s) {
  for (size_t i = 0; i < s->n; i++) {
    uint32_t c = s->c[i];
    if (c == 0x09 || c == 0x0A || c == 0x0C || c == 0x0D || c == 0x1680 || (c >= 0x200B && c <= 0x200F) ||
        c == 0x2028 || c == 0x2029 || c == 0x2581 || c == 0xFEFF || c == 0xFFFD)
      s->c[i] = ' ';
  }
}

struct tok_normalizer {
  int kind;
  tok_normalizer **seq;
  size_t nseq;
  bert_norm bert;
  bool left, right;                 /* Strip */
  tok_pattern pat;                  /* Replace */
  uint32_t *content;                /* Replace's content, Prepend's prepend */
  size_t ncontent;
  tok_precompiled *pre;
};

void normalizer_free(tok_normalizer *n) {
  if (!n) return;
  for (size_t i = 0; i < n->nseq; i++) normalizer_free(n->seq[i]);
  free(n->seq);
  pattern_free(&n->pat);
  free(n->content);
  precompiled_free(n->pre);
  free(n);
}

static est_status opt_bool(json_t *o, const char *key, bool *out, const char *where) {
  json_t *v = json_object_get(o, key);
  if (!v || json_is_null(v)) return EST_OK;
  if (!json_is_boolean(v)) return est_error(EST_ERR_INVALID_ARGUMENT, "%s.%s must be a boolean", where, key);
  *out = json_is_true(v);
  return EST_OK;
}

static est_status get_text(json_t *o, const char *key, uint32_t **out, size_t *n, const char *where) {
  json_t *v = json_object_get(o, key);
  if (!json_is_string(v)) return est_error(EST_ERR_INVALID_ARGUMENT, "%s.%s must be a string", where, key);
  *out = utf8_to_cps(json_string_value(v), json_string_length(v), n);
  return *out ? EST_OK : est_error(EST_ERR_NO_MEMORY, "%s: out of memory", where);
}

est_status normalizer_from_json(tok_normalizer **out, json_t *o, const char *where) {
  *out = NULL;
  json_t *type = json_object_get(o, "type");
  if (!json_is_object(o) || !json_is_string(type))
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: expected an object with a \"type\"", where);
  const char *t = json_string_value(type);
  static const char *names[] = {"Sequence", "BertNormalizer", "NFC", "NFD", "NFKC", "NFKD", "Lowercase",
                                "StripAccents", "Strip", "Replace", "Prepend", "Precompiled", "Nmt"};
  int kind = -1;
  for (int i = 0; i < (int)(sizeof names / sizeof *names); i++)
    if (!strcmp(t, names[i])) kind = i;
  if (kind < 0) return est_error(EST_ERR_INVALID_ARGUMENT, "%s.type \"%s\": est does not implement this normalizer", where, t);
  tok_normalizer *n = calloc(1, sizeof *n);
  if (!n) return est_error(EST_ERR_NO_MEMORY, "%s: out of memory", where);
  n->kind = kind;
  est_status st = EST_OK;
  char sub[512];
  switch (kind) {
  case N_SEQ: {
    json_t *a = json_object_get(o, "normalizers");
    if (!json_is_array(a)) {
      st = est_error(EST_ERR_INVALID_ARGUMENT, "%s.normalizers must be an array", where);
      break;
    }
    n->seq = calloc(json_array_size(a) + 1, sizeof *n->seq);
    for (size_t i = 0; n->seq && i < json_array_size(a) && !st; i++, n->nseq++) {
      snprintf(sub, sizeof sub, "%s.normalizers[%zu]", where, i);
      st = normalizer_from_json(&n->seq[i], json_array_get(a, i), sub);
    }
    if (!n->seq) st = est_error(EST_ERR_NO_MEMORY, "%s: out of memory", where);
    break;
  }
  case N_BERT: {
    n->bert = (bert_norm){true, true, true, -1};
    bool sa = false;
    json_t *v = json_object_get(o, "strip_accents");
    if (!(st = opt_bool(o, "clean_text", &n->bert.clean_text, where)) &&
        !(st = opt_bool(o, "handle_chinese_chars", &n->bert.chinese, where)) &&
        !(st = opt_bool(o, "lowercase", &n->bert.lowercase, where)) && v && !json_is_null(v) &&
        !(st = opt_bool(o, "strip_accents", &sa, where)))
      n->bert.strip_accents = sa;
    break;
  }
  case N_STRIP:
    n->left = n->right = true;
    if (!(st = opt_bool(o, "strip_left", &n->left, where))) st = opt_bool(o, "strip_right", &n->right, where);
    break;
  case N_REPLACE:
    snprintf(sub, sizeof sub, "%s", where);
    if (!(st = pattern_from_json(&n->pat, json_object_get(o, "pattern"), sub)))
      st = get_text(o, "content", &n->content, &n->ncontent, where);
    break;
  case N_PREPEND:
    st = get_text(o, "prepend", &n->content, &n->ncontent, where);
    break;
  case N_PRECOMPILED: {
    json_t *m = json_object_get(o, "precompiled_charsmap");
    if (!json_is_string(m)) st = est_error(EST_ERR_INVALID_ARGUMENT, "%s.precompiled_charsmap must be a string", where);
    else st = precompiled_from_base64(&n->pre, json_string_value(m), where);
    break;
  }
  default:
    break;
  }
  if (st) normalizer_free(n);
  else *out = n;
  return st;
}

bool normalizer_apply(const tok_normalizer *n, tok_nstr *s) {
  switch (n->kind) {
  case N_SEQ:
    for (size_t i = 0; i < n->nseq; i++)
      if (!normalizer_apply(n->seq[i], s)) return false;
    return true;
  case N_BERT: return bert_normalize(&n->bert, s);
  case N_NFC: return nstr_unicode(s, false, true);
  case N_NFD: return nstr_unicode(s, false, false);
  case N_NFKC: return nstr_unicode(s, true, true);
  case N_NFKD: return nstr_unicode(s, true, false);
  case N_LOWER: return nstr_lowercase(s);
  case N_STRIP_ACCENTS: nstr_filter(s, is_not_mark); return true;
  case N_STRIP: {
    size_t a = 0, b = s->n;
    if (n->left) while (a < b && rust_whitespace(s->c[a])) a++;
    if (n->right) while (b > a && rust_whitespace(s->c[b - 1])) b--;
    memmove(s->c, s->c + a, (b - a) * sizeof *s->c);
    memmove(s->as, s->as + a, (b - a) * sizeof *s->as);
    memmove(s->ae, s->ae + a, (b - a) * sizeof *s->ae);
    s->n = b - a;
    return true;
  }
  case N_REPLACE: return nstr_replace(s, &n->pat, n->content, n->ncontent);
  case N_PREPEND: return nstr_prepend(s, n->content, n->ncontent);
  case N_PRECOMPILED: return precompiled_apply(n->pre, s);
  case N_NMT: nstr_filter(s, nmt_keep); nmt_map(s); return true;
  }
  return false;
}

bool normalizer_lowercases(const tok_normalizer *n) {
  if (!n) return false;
  if (n->kind == N_LOWER) return true;
  if (n->kind == N_BERT) return n->bert.lowercase;
  for (size_t i = 0; i < n->nseq; i++)
    if (normalizer_lowercases(n->seq[i])) return true;
  return false;
}
