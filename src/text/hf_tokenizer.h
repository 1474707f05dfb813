/* The tokenizer.json pipeline behind est_tokenizer (hf_tokenizer.c). */
#ifndef EST_TEXT_HF_TOKENIZER_H
#define EST_TEXT_HF_TOKENIZER_H

#include <jansson.h>

#include "est/tokenizer.h"

typedef struct tok_pipeline tok_pipeline;

/* Every field of a parsed tokenizer.json; an unknown type is an error naming it. */
est_status tok_pipeline_from_json(tok_pipeline **out, json_t *root, const char *path);
void tok_pipeline_free(tok_pipeline *p);
/* A pipeline sharing p's read-only parts (p must outlive it) with its own encoding and its own
 * copy of p's truncation and padding: one per thread. */
est_status tok_pipeline_twin(tok_pipeline **out, const tok_pipeline *p);
/* tokenizers' Tokenizer.encode(text, pair, add_special_tokens) with char offsets; *out
 * points into p until its next call. */
est_status tok_pipeline_encode(tok_pipeline *p, const char *text, size_t len, const char *pair, size_t pair_len,
                               bool add_special, est_encoding *out);
/* The last encode's Encoding.overflowing: how many, and the i-th (false past the end). */
size_t tok_pipeline_num_overflowing(const tok_pipeline *p);
bool tok_pipeline_overflowing(const tok_pipeline *p, size_t i, est_encoding *out);
/* Tokenizer.decode(ids, skip_special_tokens): a malloc'd UTF-8 string in *out, *out_len bytes. */
est_status tok_pipeline_decode(const tok_pipeline *p, const int32_t *ids, size_t n, bool skip_special, char **out,
                               size_t *out_len);
est_truncation *tok_pipeline_truncation(tok_pipeline *p);
est_padding *tok_pipeline_padding(tok_pipeline *p);
const char *tok_pipeline_model_type(const tok_pipeline *p);
bool tok_pipeline_lowercases(const tok_pipeline *p);
int32_t tok_pipeline_size(const tok_pipeline *p);
const char *tok_pipeline_token(const tok_pipeline *p, int32_t id);

/* tokenizer.c: a tokenizer whose encode is p's (it owns p), and p attached to a FullTokenizer
 * made from the same file (est_tokenizer_encode stays the FullTokenizer's). */
est_status tokenizer_from_pipeline(est_tokenizer **out, tok_pipeline *p);
void tokenizer_attach_pipeline(est_tokenizer *t, tok_pipeline *p);

#endif
