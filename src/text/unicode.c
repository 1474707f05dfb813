/* Unicode pieces of BERT's BasicTokenizer, made to agree with CPython 3 exactly:
 * the UTF-8 decoder (errors="ignore"), str.isspace(), str.lower() (full mapping + final
 * sigma), NFD, and tokenization.py's character classes. Tables come from utf8proc; ASCII
 * is answered from small tables first because it is nearly all of real text. */
#include <string.h>
#include <utf8proc.h>

#include "est/tokenizer.h"
#include "text/unicode.h"

/* ---- UTF-8 ----------------------------------------------------------------------- */

/* Table 3-7 of the Unicode standard (well-formed UTF-8): the lead byte fixes the length and
 * the allowed range of the second byte; later bytes are 80..BF. Python's decoder drops the
 * maximal prefix of a would-be sequence that is still valid ("maximal subpart"), then goes
 * on with the byte that broke it. */
uint32_t tok_utf8_next(const uint8_t *s, size_t len, size_t *adv) {
  uint8_t b0 = s[0];
  if (b0 < 0x80) {
    *adv = 1;
    return b0;
  }
  size_t need;
  uint8_t lo = 0x80, hi = 0xBF;
  uint32_t cp;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
    cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    cp = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;          /* no overlongs */
    else if (b0 == 0xED) hi = 0x9F;     /* no surrogates */
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    cp = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;
    else if (b0 == 0xF4) hi = 0x8F;     /* <= U+10FFFF */
  } else {
    *adv = 1;                           /* 80..C1, F5..FF never start a sequence */
    return UINT32_MAX;
  }
  for (size_t k = 1; k <= need; k++) {
    if (k >= len) {
      *adv = k;
      return UINT32_MAX;
    }
    uint8_t b = s[k];
    if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) {
      *adv = k;
      return UINT32_MAX;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  *adv = need + 1;
  return cp;
}

size_t est_utf8_decode_lossy(const char *s, size_t len, uint32_t *cps) {
  const uint8_t *p = (const uint8_t *)s;
  size_t i = 0, n = 0;
  while (i < len) {
    if (p[i] < 0x80) {
      cps[n++] = p[i++];
      continue;
    }
    size_t adv;
    uint32_t cp = tok_utf8_next(p + i, len - i, &adv);
    if (cp != UINT32_MAX) cps[n++] = cp;
    i += adv;
  }
  return n;
}

size_t est_utf8_first_invalid(const char *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    size_t adv;
    if (tok_utf8_next((const uint8_t *)s + i, n - i, &adv) == UINT32_MAX) return i;
    i += adv;
  }
  return SIZE_MAX;
}

size_t tok_utf8_put(uint32_t cp, char *out) {
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xE0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | (cp >> 18));
  out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  out[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* ---- character classes ------------------------------------------------------------ */

static inline int category(uint32_t c) { return utf8proc_category((utf8proc_int32_t)c); }

bool tok_py_isspace(uint32_t c) {
  if (c < 0x80) return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20);
  /* CPython generates its table from exactly this rule (makeunicodedata.py). */
  const utf8proc_property_t *p = utf8proc_get_property((utf8proc_int32_t)c);
  return p->category == UTF8PROC_CATEGORY_ZS || p->bidi_class == UTF8PROC_BIDI_CLASS_WS ||
         p->bidi_class == UTF8PROC_BIDI_CLASS_B || p->bidi_class == UTF8PROC_BIDI_CLASS_S;
}

/* _is_whitespace: ' ', \t, \n, \r or Zs (so U+2028/2029, VT, FF, U+0085 are not). */
bool est_tok_is_whitespace(uint32_t c) {
  if (c == ' ' || c == '\t' || c == '\n' || c == '\r') return true;
  if (c < 0x80) return false;
  return category(c) == UTF8PROC_CATEGORY_ZS;
}

/* _is_control: Cc or Cf, except \t \n \r (which count as whitespace). */
bool est_tok_is_control(uint32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  if (c < 0x80) return c < 0x20 || c == 0x7F;
  int cat = category(c);
  return cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF;
}

bool tok_hf_is_other(uint32_t c) {
  if (c < 0x80) return est_tok_is_control(c);
  int cat = category(c);
  if (cat == UTF8PROC_CATEGORY_CO) return true;
  if (cat != UTF8PROC_CATEGORY_CC && cat != UTF8PROC_CATEGORY_CF) return false;
  /* The Cf chars assigned after Unicode 8.0, which the crate's tables do not know. */
  return !(c == 0x08E2 || c == 0x0890 || c == 0x0891 || c == 0x110CD || (c >= 0x13430 && c <= 0x1343F));
}

/* _is_punctuation: every non-alphanumeric printable ASCII char, or any P* category. */
bool est_tok_is_punctuation(uint32_t c) {
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126))
    return true;
  if (c < 0x80) return false;
  int cat = category(c);
  return cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO;
}

/* _is_chinese_char: the CJK Unified Ideographs blocks only (not Hangul, kana). */
bool est_tok_is_cjk(uint32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* ---- lower-casing ----------------------------------------------------------------- */

/* Case_Ignorable (DerivedCoreProperties.txt): Mn, Me, Cf, Lm, Sk, or Word_Break
 * MidLetter / MidNumLet / Single_Quote (the short list below). */
bool tok_is_case_ignorable(uint32_t c) {
  switch (c) {
    case 0x0027: case 0x002E: case 0x003A: case 0x00B7: case 0x0387: case 0x055F:
    case 0x05F4: case 0x2018: case 0x2019: case 0x2024: case 0x2027: case 0xFE13:
    case 0xFE52: case 0xFE55: case 0xFF07: case 0xFF0E: case 0xFF1A:
      return true;
    default:
      break;
  }
  if (c < 0x80) return c == '^' || c == '`';     /* the two ASCII Sk */
  int cat = category(c);
  return cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_ME || cat == UTF8PROC_CATEGORY_CF ||
         cat == UTF8PROC_CATEGORY_LM || cat == UTF8PROC_CATEGORY_SK;
}

/* Cased = Lu + Ll + Lt + Other_Lowercase + Other_Uppercase. The Other_* code points that
 * are not also Case_Ignorable (the only ones the sigma rule can see) are letters with case
 * mappings (Roman numerals, circled letters), the ordinal indicators, and the squared /
 * negative-circled Latin capitals of the Enclosed Alphanumeric Supplement. */
bool tok_is_cased(uint32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
  int cat = category(c);
  if (cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT) return true;
  if (c == 0xAA || c == 0xBA) return true;
  if ((c >= 0x1F130 && c <= 0x1F149) || (c >= 0x1F150 && c <= 0x1F169) || (c >= 0x1F170 && c <= 0x1F189))
    return true;
  utf8proc_int32_t i = (utf8proc_int32_t)c;
  return utf8proc_tolower(i) != i || utf8proc_toupper(i) != i;
}

/* CPython's handle_capital_sigma: U+03A3 lowers to final sigma U+03C2 when preceded by a
 * cased letter and not followed by one, skipping case-ignorable code points both ways. */
static uint32_t lower_sigma(const uint32_t *s, size_t n, size_t i) {
  size_t j = i;
  uint32_t c = 0;
  while (j > 0) {
    c = s[--j];
    if (!tok_is_case_ignorable(c)) goto found_before;
  }
  return 0x3C3;
found_before:
  if (!tok_is_cased(c)) return 0x3C3;
  for (j = i + 1; j < n; j++) {
    c = s[j];
    if (!tok_is_case_ignorable(c)) return tok_is_cased(c) ? 0x3C3 : 0x3C2;
  }
  return 0x3C2;
}

size_t tok_lower(const uint32_t *in, size_t n, uint32_t *out, bool final_sigma) {
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t c = in[i];
    if (c < 0x80) {
      out[m++] = (c >= 'A' && c <= 'Z') ? c + 32 : c;
    } else if (c == 0x130) {
      /* SpecialCasing.txt's only unconditional multi-character lower mapping. */
      out[m++] = 'i';
      out[m++] = 0x307;
    } else if (c == 0x3A3 && final_sigma) {
      out[m++] = lower_sigma(in, n, i);
    } else {
      out[m++] = (uint32_t)utf8proc_tolower((utf8proc_int32_t)c);
    }
  }
  return m;
}

/* ---- NFD + strip Mn ---------------------------------------------------------------- */

static inline int ccc(uint32_t c) {
  return utf8proc_get_property((utf8proc_int32_t)c)->combining_class;
}

size_t tok_nfd_strip_mn(const uint32_t *in, size_t n, uint32_t *out) {
  size_t m = 0;
  bool marks = false;
  for (size_t i = 0; i < n; i++) {
    uint32_t c = in[i];
    if (c < 0xC0) {                     /* nothing below U+00C0 decomposes */
      out[m++] = c;
      continue;
    }
    utf8proc_int32_t buf[8];
    utf8proc_ssize_t k = utf8proc_decompose_char((utf8proc_int32_t)c, buf, 8, UTF8PROC_DECOMPOSE, NULL);
    if (k <= 0 || k > 8) {              /* not a valid scalar: keep it as is */
      out[m++] = c;
      continue;
    }
    for (utf8proc_ssize_t t = 0; t < k; t++) {
      out[m++] = (uint32_t)buf[t];
      if (buf[t] >= 0x300) marks = true;
    }
  }
  if (!marks) return m;
  /* Canonical ordering: stable sort of each run of non-zero combining classes. */
  for (size_t i = 1; i < m; i++) {
    int ci = ccc(out[i]);
    if (ci == 0) continue;
    size_t j = i;
    uint32_t c = out[i];
    while (j > 0) {
      int cp = ccc(out[j - 1]);
      if (cp <= ci || cp == 0) break;
      out[j] = out[j - 1];
      j--;
    }
    out[j] = c;
  }
  size_t w = 0;
  for (size_t i = 0; i < m; i++)
    if (out[i] < 0x300 || category(out[i]) != UTF8PROC_CATEGORY_MN) out[w++] = out[i];
  return w;
}
