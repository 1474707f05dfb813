/* Pre-tokenizers (tokenizers' pre_tokenizers/, docs/tokenizer.md §8): each turns every split
 * that is not an added token into smaller splits, with NormalizedString::split's delimiter
 * behaviours. BertPreTokenizer, Whitespace, WhitespaceSplit, Punctuation, Digits, Metaspace,
 * ByteLevel (GPT-2's regex), Split, Sequence. */
#define PCRE2_CODE_UNIT_WIDTH 32
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "text/hf_internal.h"
#include "text/unicode.h"
#include "text/vocab_internal.h"

void splits_free(tok_splits *t) {
  for (size_t i = 0; i < t->n; i++) nstr_free(&t->v[i].s);
  free(t->v);
  memset(t, 0, sizeof *t);
}

bool splits_push(tok_splits *t, tok_nstr *s, int32_t added_id) {
  if (t->n == t->cap) {
    size_t c = t->cap ? t->cap * 2 : 16;
    tok_split *p = realloc(t->v, c * sizeof *p);
    if (!p) return false;
    t->v = p;
    t->cap = c;
  }
  t->v[t->n].s = *s;
  t->v[t->n++].added_id = added_id;
  memset(s, 0, sizeof *s);
  return true;
}

bool nstr_split(tok_splits *t, tok_nstr *s, tok_match *m, size_t nm, int behaviour) {
  /* fold the matches into pieces as NormalizedString::split does, in place */
  size_t k = 0;
  bool prev = false;
  if (behaviour == SPLIT_MERGED_NEXT) {
    /* right to left: a match joins the piece after it */
    size_t w = nm;
    for (size_t i = nm; i-- > 0;) {
      if (m[i].is_match && !prev && w < nm) m[w].s = m[i].s;
      else m[--w] = (tok_match){m[i].s, m[i].e, false};
      prev = m[i].is_match;
    }
    memmove(m, m + w, (nm - w) * sizeof *m);
    k = nm - w;
  } else {
    for (size_t i = 0; i < nm; i++) {
      bool join = behaviour == SPLIT_CONTIGUOUS ? m[i].is_match == prev
                  : behaviour == SPLIT_MERGED_PREV ? m[i].is_match && !prev : false;
      if (join && k) m[k - 1].e = m[i].e;
      else m[k++] = (tok_match){m[i].s, m[i].e, behaviour == SPLIT_REMOVED && m[i].is_match};
      prev = m[i].is_match;
    }
  }
  for (size_t i = 0; i < k; i++) {
    if (m[i].is_match || m[i].e <= m[i].s) continue; /* removed, or empty (dropped) */
    tok_nstr piece;
    if (!nstr_slice(&piece, s, m[i].s, m[i].e) || !splits_push(t, &piece, -1)) return nstr_free(&piece), false;
  }
  nstr_free(s);
  return true;
}

/* Splits s where pred holds, one match per char. */
static bool split_pred(tok_splits *t, tok_nstr *s, bool (*pred)(uint32_t), int behaviour) {
  tok_match *m = malloc((2 * s->n + 1) * sizeof *m);
  if (!m) return false;
  size_t nm = 0, prev = 0;
  for (size_t i = 0; i < s->n; i++) {
    if (!pred(s->c[i])) continue;
    if (prev != i) m[nm++] = (tok_match){prev, i, false};
    m[nm++] = (tok_match){i, i + 1, true};
    prev = i + 1;
  }
  if (prev != s->n || !s->n) m[nm++] = (tok_match){prev, s->n, false};
  bool ok = nstr_split(t, s, m, nm, behaviour);
  free(m);
  return ok;
}

static bool split_pattern(tok_splits *t, tok_nstr *s, const tok_pattern *p, int behaviour, bool invert) {
  tok_match *m;
  size_t nm;
  if (!pattern_find(p, s, &m, &nm)) return false;
  if (invert)
    for (size_t i = 0; i < nm; i++) m[i].is_match = !m[i].is_match;
  bool ok = nstr_split(t, s, m, nm, behaviour);
  free(m);
  return ok;
}

/* ---- character classes ---- */

static bool rust_ws(uint32_t c) {
  return (c >= 9 && c <= 13) || c == ' ' || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
         c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}
static bool bert_punc(uint32_t c) {
  if (c < 0x80) return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
  int g = utf8proc_category((utf8proc_int32_t)c);
  return g >= UTF8PROC_CATEGORY_PC && g <= UTF8PROC_CATEGORY_PO;
}
static bool rust_numeric(uint32_t c) {
  if (c < 0x80) return c - '0' < 10u;
  int g = utf8proc_category((utf8proc_int32_t)c);
  return g == UTF8PROC_CATEGORY_ND || g == UTF8PROC_CATEGORY_NL || g == UTF8PROC_CATEGORY_NO;
}

/* ---- GPT-2's byte <-> char table ---- */

uint32_t bytelevel_char(uint8_t b) {
  /* printable Latin-1 bytes stand for themselves; the other 68 take 256.. in byte order */
  if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE) return b;
  int k = 0;
  for (int x = 0; x < b; x++)
    if (!((x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE)) k++;
  return 256u + (uint32_t)k;
}

int bytelevel_byte(uint32_t c) {
  static int16_t inv[324];
  static int ready;
  if (!ready) {
    for (int i = 0; i < 324; i++) inv[i] = -1;
    for (int b = 0; b < 256; b++) inv[bytelevel_char((uint8_t)b)] = (int16_t)b;
    ready = 1;
  }
  return c < 324 ? inv[c] : -1;
}

static const char GPT2_RE[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
/* `\w+|[^\w\s]+` with Oniguruma's Unicode \w (letters, marks, decimal digits, connector
 * punctuation, Join_Control U+200C/U+200D); PCRE2's \w leaves marks and joiners out. */
#define WORD "\\p{L}\\p{Nl}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}"
static const char WHITESPACE_RE[] = "[" WORD "]+|[^" WORD "\\s]+";

/* ---- the pre-tokenizer tree ---- */

enum { P_SEQ, P_BERT, P_WHITESPACE, P_WHITESPACE_SPLIT, P_PUNCT, P_DIGITS, P_METASPACE, P_BYTELEVEL, P_SPLIT };
enum { SCHEME_ALWAYS, SCHEME_FIRST, SCHEME_NEVER };

struct tok_pretokenizer {
  int kind;
  tok_pretokenizer **seq;
  size_t nseq;
  int behaviour;
  bool invert, individual_digits, split, add_prefix_space, use_regex;
  int scheme;
  uint32_t replacement;
  tok_pattern pat;
};

void pretokenizer_free(tok_pretokenizer *p) {
  if (!p) return;
  for (size_t i = 0; i < p->nseq; i++) pretokenizer_free(p->seq[i]);
  free(p->seq);
  pattern_free(&p->pat);
  free(p);
}

static est_status opt_bool(json_t *o, const char *key, bool *out, const char *where) {
  json_t *v = json_object_get(o, key);
  if (!v || json_is_null(v)) return EST_OK;
  if (!json_is_boolean(v)) return est_error(EST_ERR_INVALID_ARGUMENT, "%s.%s must be a boolean", where, key);
  *out = json_is_true(v);
  return EST_OK;
}

static est_status behaviour_of(json_t *o, int *out, const char *where) {
  json_t *v = json_object_get(o, "behavior");
  if (!v) return EST_OK;
  static const char *names[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"};
  for (int i = 0; i < 5; i++)
    if (json_is_string(v) && !strcmp(json_string_value(v), names[i])) return *out = i, EST_OK;
  return est_error(EST_ERR_INVALID_ARGUMENT, "%s.behavior: expected Removed, Isolated, MergedWithPrevious, "
                   "MergedWithNext or Contiguous", where);
}

static est_status compile_re(tok_pattern *p, const char *re, const char *where) {
  json_t *o = json_pack("{ss}", "Regex", re);
  est_status st = pattern_from_json(p, o, where);
  json_decref(o);
  return st;
}

est_status pretokenizer_from_json(tok_pretokenizer **out, json_t *o, const char *where) {
  *out = NULL;
  json_t *type = json_object_get(o, "type");
  if (!json_is_object(o) || !json_is_string(type))
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: expected an object with a \"type\"", where);
  static const char *names[] = {"Sequence", "BertPreTokenizer", "Whitespace", "WhitespaceSplit", "Punctuation",
                                "Digits", "Metaspace", "ByteLevel", "Split"};
  int kind = -1;
  for (int i = 0; i < (int)(sizeof names / sizeof *names); i++)
    if (!strcmp(json_string_value(type), names[i])) kind = i;
  if (kind < 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s.type \"%s\": est does not implement this pre-tokenizer", where,
                     json_string_value(type));
  tok_pretokenizer *p = calloc(1, sizeof *p);
  if (!p) return est_error(EST_ERR_NO_MEMORY, "%s: out of memory", where);
  p->kind = kind;
  est_status st = EST_OK;
  char sub[512];
  switch (kind) {
  case P_SEQ: {
    json_t *a = json_object_get(o, "pretokenizers");
    if (!json_is_array(a)) {
      st = est_error(EST_ERR_INVALID_ARGUMENT, "%s.pretokenizers must be an array", where);
      break;
    }
    p->seq = calloc(json_array_size(a) + 1, sizeof *p->seq);
    if (!p->seq) st = est_error(EST_ERR_NO_MEMORY, "%s: out of memory", where);
    for (size_t i = 0; p->seq && i < json_array_size(a) && !st; i++, p->nseq++) {
      snprintf(sub, sizeof sub, "%s.pretokenizers[%zu]", where, i);
      st = pretokenizer_from_json(&p->seq[i], json_array_get(a, i), sub);
    }
    break;
  }
  case P_WHITESPACE: st = compile_re(&p->pat, WHITESPACE_RE, where); break;
  case P_PUNCT: p->behaviour = SPLIT_ISOLATED; st = behaviour_of(o, &p->behaviour, where); break;
  case P_DIGITS: st = opt_bool(o, "individual_digits", &p->individual_digits, where); break;
  case P_METASPACE: {
    json_t *r = json_object_get(o, "replacement"), *ps = json_object_get(o, "prepend_scheme");
    size_t n = 0;
    uint32_t *rc = json_is_string(r) ? utf8_to_cps(json_string_value(r), json_string_length(r), &n) : NULL;
    if (!rc || n != 1) {
      free(rc);
      st = est_error(EST_ERR_INVALID_ARGUMENT, "%s.replacement must be one character", where);
      break;
    }
    p->replacement = rc[0];
    free(rc);
    p->split = true;
    p->scheme = SCHEME_ALWAYS;
    bool aps = true;
    json_t *apsj = json_object_get(o, "add_prefix_space");
    if ((st = opt_bool(o, "split", &p->split, where)) || (st = opt_bool(o, "add_prefix_space", &aps, where))) break;
    if (ps && !json_is_null(ps)) {
      const char *v = json_is_string(ps) ? json_string_value(ps) : "";
      if (!strcmp(v, "always")) p->scheme = SCHEME_ALWAYS;
      else if (!strcmp(v, "first")) p->scheme = SCHEME_FIRST;
      else if (!strcmp(v, "never")) p->scheme = SCHEME_NEVER;
      else st = est_error(EST_ERR_INVALID_ARGUMENT, "%s.prepend_scheme: expected always, first or never", where);
    }
    if (!st && apsj && !aps) {
      if (ps && !json_is_null(ps) && p->scheme != SCHEME_NEVER)
        st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: add_prefix_space false does not match prepend_scheme", where);
      p->scheme = SCHEME_NEVER;
    }
    break;
  }
  case P_BYTELEVEL:
    p->add_prefix_space = p->use_regex = true;
    if (!(st = opt_bool(o, "add_prefix_space", &p->add_prefix_space, where)) &&
        !(st = opt_bool(o, "use_regex", &p->use_regex, where)))
      st = compile_re(&p->pat, GPT2_RE, where);
    break;
  case P_SPLIT:
    p->behaviour = SPLIT_REMOVED;
    if (!(st = behaviour_of(o, &p->behaviour, where)) && !(st = opt_bool(o, "invert", &p->invert, where))) {
      if (!json_object_get(o, "behavior")) st = est_error(EST_ERR_INVALID_ARGUMENT, "%s.behavior is missing", where);
      else st = pattern_from_json(&p->pat, json_object_get(o, "pattern"), where);
    }
    break;
  default: break;
  }
  if (st) pretokenizer_free(p);
  else *out = p;
  return st;
}

/* One split -> pieces appended to t. Consumes s. */
static bool pretok_one(const tok_pretokenizer *p, tok_nstr *s, tok_splits *t) {
  switch (p->kind) {
  case P_BERT: {
    tok_splits words = {0};
    bool ok = split_pred(&words, s, rust_ws, SPLIT_REMOVED);
    for (size_t i = 0; ok && i < words.n; i++) ok = split_pred(t, &words.v[i].s, bert_punc, SPLIT_ISOLATED);
    splits_free(&words);
    return ok;
  }
  case P_WHITESPACE: return split_pattern(t, s, &p->pat, SPLIT_REMOVED, true);
  case P_WHITESPACE_SPLIT: return split_pred(t, s, rust_ws, SPLIT_REMOVED);
  case P_PUNCT: return split_pred(t, s, bert_punc, p->behaviour);
  case P_DIGITS: return split_pred(t, s, rust_numeric, p->individual_digits ? SPLIT_ISOLATED : SPLIT_CONTIGUOUS);
  case P_SPLIT: return split_pattern(t, s, &p->pat, p->behaviour, p->invert);
  case P_METASPACE: {
    tok_pattern space = {.lit = (uint32_t[]){' '}, .nlit = 1};
    if (!nstr_replace(s, &space, &p->replacement, 1)) return false;
    bool starts = s->n && s->c[0] == p->replacement;
    if ((p->scheme == SCHEME_ALWAYS && !starts) || (p->scheme == SCHEME_FIRST && !starts && s->base == 0))
      if (!nstr_prepend(s, &p->replacement, 1)) return false;
    if (!p->split) return splits_push(t, s, -1);
    tok_pattern rep = {.lit = (uint32_t *)&p->replacement, .nlit = 1};
    return split_pattern(t, s, &rep, SPLIT_MERGED_NEXT, false);
  }
  case P_BYTELEVEL: {
    if (p->add_prefix_space && !(s->n && s->c[0] == ' ') && !nstr_prepend(s, (uint32_t[]){' '}, 1)) return false;
    size_t first = t->n;
    bool ok = p->use_regex ? split_pattern(t, s, &p->pat, SPLIT_ISOLATED, false) : splits_push(t, s, -1);
    for (size_t i = first; ok && i < t->n; i++) { /* each char -> its UTF-8 bytes' chars */
      tok_nstr *w = &t->v[i].s, b = {0};
      b.base = w->base;
      ok = nstr_reserve(&b, 4 * w->n + 1);
      for (size_t k = 0; ok && k < w->n; k++) {
        char u[4];
        size_t nb = tok_utf8_put(w->c[k], u);
        for (size_t j = 0; j < nb; j++) nstr_push(&b, bytelevel_char((uint8_t)u[j]), w->as[k], w->ae[k]);
      }
      nstr_free(w);
      *w = b;
    }
    return ok;
  }
  }
  return false;
}

bool pretokenizer_apply(const tok_pretokenizer *p, tok_splits *t) {
  if (p->kind == P_SEQ) {
    for (size_t i = 0; i < p->nseq; i++)
      if (!pretokenizer_apply(p->seq[i], t)) return false;
    return true;
  }
  tok_splits out = {0};
  bool ok = true;
  for (size_t i = 0; i < t->n; i++) {
    if (!ok || t->v[i].added_id >= 0) {
      if (ok) ok = splits_push(&out, &t->v[i].s, t->v[i].added_id);
      else nstr_free(&t->v[i].s);
      continue;
    }
    ok = pretok_one(p, &t->v[i].s, &out);
  }
  free(t->v);
  *t = out;
  return ok;
}
