/* Internal: the Unicode pieces of the text layer (unicode.c), made to agree with CPython 3:
 * the UTF-8 decoder, str.isspace(), str.lower(), NFD. The lowest file of src/text: the
 * vocabulary (vocab.c) and the tokenizers (tokenizer.c) read text through it, and so do
 * the tasks' text readers (glue, squad, pretraining_data); it includes nothing of them. */
#ifndef EST_TEXT_UNICODE_H
#define EST_TEXT_UNICODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Python's str.isspace(): bidi class WS/B/S or category Zs (what split()/strip() use). */
bool tok_py_isspace(uint32_t c);

/* Strict decode of one UTF-8 sequence at s[0..len) (len >= 1). Returns the code point and
 * sets *adv to its length, or returns UINT32_MAX and sets *adv to the length of the maximal
 * invalid subpart (>= 1) that Python's decoder would reject as one unit. */
uint32_t tok_utf8_next(const uint8_t *s, size_t len, size_t *adv);

/* "UTF-16LE" or "UTF-16BE" when a text file starts with that byte-order mark, else NULL:
 * such a file is not UTF-8, and saying so beats "invalid UTF-8" or "NUL byte" at byte 1. */
static inline const char *tok_utf16_bom(const uint8_t *s, size_t n) {
  if (n >= 2 && s[0] == 0xFF && s[1] == 0xFE) return "UTF-16LE";
  if (n >= 2 && s[0] == 0xFE && s[1] == 0xFF) return "UTF-16BE";
  return NULL;
}

/* Encodes cp (<= 0x10FFFF) into out[0..4); returns the byte count. */
size_t tok_utf8_put(uint32_t cp, char *out);

/* Python str.lower() of one token: writes at most 2*n code points; returns the count.
 * final_sigma false: each code point alone (Rust's char::to_lowercase, HF tokenizers'),
 * capital sigma always to U+03C3. */
size_t tok_lower(const uint32_t *in, size_t n, uint32_t *out, bool final_sigma);

/* What HF's BertNormalizer clean_text drops (besides NUL and U+FFFD): `char::is_other()` of the
 * unicode_categories crate 0.1.1, whose tables are Unicode 8.0's UnicodeData.txt: Cc, Cf (as of
 * 8.0), Co and Cs, except \t \n \r. Unassigned code points (Cn) stay: that file lists none.
 * Google's tokenizer drops Cc and Cf only (est_tok_is_control). */
bool tok_hf_is_other(uint32_t c);

/* unicodedata.normalize("NFD", s) then drop category Mn. `out` needs room for 4*n code
 * points (the longest canonical decomposition is 4). Returns the count. */
size_t tok_nfd_strip_mn(const uint32_t *in, size_t n, uint32_t *out);

/* Python's Cased and Case_Ignorable properties (used for the final-sigma rule). */
bool tok_is_cased(uint32_t c);
bool tok_is_case_ignorable(uint32_t c);

#endif
