/* The models' own entry points (unigram.c, bpe.c), behind model_* of hf_internal.h. */
#ifndef EST_TEXT_MODELS_INTERNAL_H
#define EST_TEXT_MODELS_INTERNAL_H

#include "text/hf_internal.h"

est_status vocab_from_object(tok_vocab *v, json_t *o, const char *where);
/* UTF-8 of c[0, n) into out (room for 4n bytes); returns the byte count. */
size_t cps_to_utf8(const uint32_t *c, size_t n, char *out);

typedef struct tok_unigram tok_unigram;
est_status unigram_from_json(tok_unigram **out, json_t *o, const char *where);
void unigram_free(tok_unigram *u);
const tok_vocab *unigram_vocab(const tok_unigram *u);
est_status unigram_tokenize(const tok_unigram *u, const uint32_t *c, size_t n, tok_tokens *t);

typedef struct tok_bpe tok_bpe;
est_status bpe_from_json(tok_bpe **out, json_t *o, const char *where);
void bpe_free(tok_bpe *b);
const tok_vocab *bpe_vocab(const tok_bpe *b);
est_status bpe_tokenize(const tok_bpe *b, const uint32_t *c, size_t n, tok_tokens *t);

#endif
