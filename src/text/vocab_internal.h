/* Internal: what the WordPiece tokenizer (tokenizer.c) asks of the vocabulary (vocab.c)
 * beyond est/tokenizer.h. The vocabulary sits below the tokenizer and includes nothing of
 * it: text's order is unicode.c -> vocab.c -> tokenizer.c -> tokenizer_json.c. */
#ifndef EST_TEXT_VOCAB_INTERNAL_H
#define EST_TEXT_VOCAB_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "est/tokenizer.h"

/* The id of the token ("##" if continuation) + s[0..n), or -1. No copy is made. */
int32_t vocab_find_piece(const est_vocab *v, bool continuation, const char *s, size_t n);
/* Longest token in bytes: candidates longer than this cannot match. */
size_t vocab_max_token_bytes(const est_vocab *v);

#endif
