/* The text rules of run_squad.py and the SQuAD evaluation scripts, on UTF-8 (docs/squad.md
 * §2.2 and §3.1): whitespace_tokenize, normalize_answer. Both work in code points through
 * the tokenizer's Python-exact helpers: str.isspace (tok_py_isspace) and str.lower
 * (tok_lower, with SpecialCasing's U+0130 and the final-sigma rule). */
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "squad/squad_internal.h"
#include "text/unicode.h"

bool squad_buf_reserve(squad_buf *b, size_t extra) {
  if (b->len + extra + 1 <= b->cap) return true;
  size_t cap = b->cap ? b->cap : 64;
  while (cap < b->len + extra + 1) cap *= 2;
  char *p = realloc(b->p, cap);
  if (!p) return false;
  b->p = p;
  b->cap = cap;
  return true;
}

bool squad_buf_append(squad_buf *b, const char *s, size_t n) {
  if (!squad_buf_reserve(b, n)) return false;
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = '\0';
  return true;
}

void squad_buf_free(squad_buf *b) {
  free(b->p);
  memset(b, 0, sizeof *b);
}

size_t squad_utf8_length(const char *s, size_t n) {
  size_t count = 0;
  for (size_t i = 0; i < n; i++) count += ((unsigned char)s[i] & 0xC0) != 0x80;
  return count;
}

bool squad_whitespace_join(const char *s, size_t n, squad_buf *out) {
  out->len = 0;
  if (!squad_buf_reserve(out, n)) return false;
  const uint8_t *u = (const uint8_t *)s;
  bool in_word = false;
  for (size_t i = 0; i < n;) {
    size_t adv;
    uint32_t c = tok_utf8_next(u + i, n - i, &adv);
    if (c != UINT32_MAX && tok_py_isspace(c)) {
      in_word = false;
    } else {
      if (!in_word && out->len) out->p[out->len++] = ' ';
      memcpy(out->p + out->len, s + i, adv);
      out->len += adv;
      in_word = true;
    }
    i += adv;
  }
  out->p[out->len] = '\0';
  return true;
}

/* string.punctuation: !"#$%&'()*+,-./:;<=>?@[\]^_`{|}~ (ASCII only). */
static bool is_ascii_punct(uint32_t c) {
  return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
}

/* Python re's \w on str patterns: str.isalnum() or '_'. isalnum() is exactly "category L*
 * or N*" (checked over every code point under Python 3.11); '_' never reaches here, it is
 * punctuation and removed first. */
static bool is_word(uint32_t c) {
  if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  int cat = utf8proc_category((utf8proc_int32_t)c);
  return (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||   /* Lu Ll Lt Lm Lo */
         (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO);     /* Nd Nl No */
}

bool squad_normalize_answer(const char *s, size_t n, squad_buf *out) {
  out->len = 0;
  /* Decode (jansson hands us valid UTF-8; an invalid byte would be kept as U+FFFD). */
  uint32_t *cps = malloc((n + 1) * sizeof *cps), *low = malloc((2 * n + 1) * sizeof *low);
  if (!cps || !low) {
    free(cps);
    free(low);
    return false;
  }
  size_t m = 0;
  const uint8_t *u = (const uint8_t *)s;
  for (size_t i = 0; i < n;) {
    size_t adv;
    uint32_t c = tok_utf8_next(u + i, n - i, &adv);
    cps[m++] = c == UINT32_MAX ? 0xFFFD : c;
    i += adv;
  }
  /* lower(), then remove_punc(). */
  size_t k = tok_lower(cps, m, low, true), w = 0;
  for (size_t i = 0; i < k; i++)
    if (!is_ascii_punct(low[i])) low[w++] = low[i];
  k = w;
  /* remove_articles(): re.sub(r'\b(a|an|the)\b', ' ', text). \b sits between a word and a
   * non-word character, so a match is a whole maximal run of word characters spelling a,
   * an or the (the alternation backtracks from "a" to "an" when "n" follows). Compacted in
   * place: the write index never passes the read index. */
  w = 0;
  for (size_t i = 0; i < k;) {
    if (!is_word(low[i])) {
      low[w++] = low[i++];
      continue;
    }
    size_t j = i;
    while (j < k && is_word(low[j])) j++;
    size_t len = j - i;
    bool article = (len == 1 && low[i] == 'a') || (len == 2 && low[i] == 'a' && low[i + 1] == 'n') ||
                   (len == 3 && low[i] == 't' && low[i + 1] == 'h' && low[i + 2] == 'e');
    if (article) {
      low[w++] = ' ';
    } else {
      memmove(low + w, low + i, len * sizeof *low);
      w += len;
    }
    i = j;
  }
  k = w;
  /* white_space_fix(): ' '.join(text.split()). */
  bool ok = squad_buf_reserve(out, 4 * k);
  if (ok) {
    bool in_word = false;
    for (size_t i = 0; i < k; i++) {
      if (tok_py_isspace(low[i])) {
        in_word = false;
        continue;
      }
      if (!in_word && out->len) out->p[out->len++] = ' ';
      out->len += tok_utf8_put(low[i], out->p + out->len);
      in_word = true;
    }
    out->p[out->len] = '\0';
  }
  free(cps);
  free(low);
  return ok;
}
