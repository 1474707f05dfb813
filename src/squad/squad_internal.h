/* Internals shared by squad_read.c, squad_eval.c and squad_text.c (docs/squad.md). */
#ifndef EST_BERT_SQUAD_INTERNAL_H
#define EST_BERT_SQUAD_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "est/squad.h"

/* "an object", "a string", ...: how an error names a JSON value's type (squad_read.c). */
const char *est_squad_json_type_name(const json_t *v);

/* A growable byte string. */
typedef struct squad_buf {
  char *p;
  size_t len, cap;
} squad_buf;

bool squad_buf_reserve(squad_buf *b, size_t extra);
bool squad_buf_append(squad_buf *b, const char *s, size_t n);
void squad_buf_free(squad_buf *b);

/* tokenization.whitespace_tokenize(text) joined by single spaces: the maximal runs of
 * characters that are not Python whitespace (str.isspace), so strip() + split(). Replaces
 * out's contents; NUL-terminated. false only for lack of memory. */
bool squad_whitespace_join(const char *s, size_t n, squad_buf *out);

/* The scripts' normalize_answer(s): lower() (Python's full str.lower), remove
 * string.punctuation (ASCII), replace the words a / an / the (re \b(a|an|the)\b over
 * Unicode word characters) by a space, then ' '.join(split()). Replaces out's contents;
 * the result's tokens are separated by single spaces. false only for lack of memory. */
bool squad_normalize_answer(const char *s, size_t n, squad_buf *out);

/* Number of code points of valid UTF-8. */
size_t squad_utf8_length(const char *s, size_t n);

#endif
