/* The tokenizer.json pipeline (docs/tokenizer.md §8): HuggingFace `tokenizers`' Tokenizer
 * rebuilt in C, one file per component family.
 *
 *   text --added tokens (normalized:false)--> segments --normalizer--> --added tokens
 *        (normalized:true)--> --pre-tokenizer--> splits --model--> tokens
 *        --truncation, post-processor, padding--> est_encoding
 *
 * Text is held as code points, each with its alignment: the original code points [as, ae)
 * it came from, as tokenizers' NormalizedString keeps one (start, end) per byte. Every
 * transformation follows NormalizedString::transform's rule: a replaced character takes the
 * alignment of the character it replaces, an inserted one that of the character before it
 * (or (base, base) at the start of a segment, whose original start is `base`). */
#ifndef EST_TEXT_HF_INTERNAL_H
#define EST_TEXT_HF_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "est/status.h"
#include "est/tokenizer.h"

/* ---- normalized string (normalizers.c) ---------------------------------------------- */

typedef struct tok_nstr {
  uint32_t *c;      /* code points */
  int32_t *as, *ae; /* alignment of each: original code points [as, ae) */
  size_t n, cap;
  int32_t base;     /* original offset of the segment's start (tokenizers' original_shift) */
} tok_nstr;

bool nstr_reserve(tok_nstr *s, size_t n);
void nstr_free(tok_nstr *s);
bool nstr_push(tok_nstr *s, uint32_t c, int32_t as, int32_t ae);
/* A copy of s[from, to) (alignments kept; base = the original start of the range). */
bool nstr_slice(tok_nstr *out, const tok_nstr *s, size_t from, size_t to);

/* NormalizedString::transform over the whole string: out chars `c` with `chg` (0 replace,
 * >0 insert, <0 replace and remove -chg following). `skip` originals are removed first. */
bool nstr_transform(tok_nstr *s, const uint32_t *c, const int *chg, size_t m, size_t skip);

/* A match list over s: [start, end) ranges in code points, with whether each is a match,
 * covering s (tokenizers' Pattern::find_matches). */
typedef struct tok_match {
  size_t s, e;
  bool is_match;
} tok_match;

/* A string or regex pattern (Replace, Split) ---------------------------------------- */
typedef struct tok_pattern {
  uint32_t *lit;    /* literal pattern (code points) or NULL */
  size_t nlit;
  void *re;         /* pcre2_code * */
} tok_pattern;

est_status pattern_from_json(tok_pattern *p, json_t *o, const char *where);
void pattern_free(tok_pattern *p);
/* The matches of p in s as tokenizers lists them; *out is malloc'd. */
bool pattern_find(const tok_pattern *p, const tok_nstr *s, tok_match **out, size_t *n);

/* NormalizedString::replace(pattern, content). */
bool nstr_replace(tok_nstr *s, const tok_pattern *p, const uint32_t *content, size_t ncontent);
/* NormalizedString::prepend(str). */
bool nstr_prepend(tok_nstr *s, const uint32_t *p, size_t np);

/* UTF-8 <-> code points (strict; a JSON string is valid UTF-8). Returns a malloc'd array. */
uint32_t *utf8_to_cps(const char *s, size_t len, size_t *n);

/* ---- normalizers (normalizers.c, precompiled.c) ---------------------------------------- */

typedef struct tok_normalizer tok_normalizer;
est_status normalizer_from_json(tok_normalizer **out, json_t *o, const char *where);
void normalizer_free(tok_normalizer *n);
bool normalizer_apply(const tok_normalizer *n, tok_nstr *s);
/* Whether n lower-cases (for est_tokenizer_do_lower_case). */
bool normalizer_lowercases(const tok_normalizer *n);

typedef struct tok_precompiled tok_precompiled;
est_status precompiled_from_base64(tok_precompiled **out, const char *b64, const char *where);
void precompiled_free(tok_precompiled *p);
bool precompiled_apply(const tok_precompiled *p, tok_nstr *s);

/* ---- pre-tokenized string (pretokenizers.c) -------------------------------------------- */

typedef struct tok_split {
  tok_nstr s;
  int32_t added_id;   /* an added token's id (the split is that token), or -1 */
} tok_split;

typedef struct tok_splits {
  tok_split *v;
  size_t n, cap;
} tok_splits;

void splits_free(tok_splits *t);
bool splits_push(tok_splits *t, tok_nstr *s, int32_t added_id); /* takes s (moved) */
/* NormalizedString::split(matches, behaviour) into t (empty pieces dropped). Consumes s. */
enum { SPLIT_REMOVED, SPLIT_ISOLATED, SPLIT_MERGED_PREV, SPLIT_MERGED_NEXT, SPLIT_CONTIGUOUS };
bool nstr_split(tok_splits *t, tok_nstr *s, tok_match *m, size_t nm, int behaviour);

typedef struct tok_pretokenizer tok_pretokenizer;
est_status pretokenizer_from_json(tok_pretokenizer **out, json_t *o, const char *where);
void pretokenizer_free(tok_pretokenizer *p);
/* Replaces *t by its pre-tokenization (splits with added_id >= 0 are kept as they are). */
bool pretokenizer_apply(const tok_pretokenizer *p, tok_splits *t);

/* GPT-2's byte -> char table (bytes_to_unicode). */
uint32_t bytelevel_char(uint8_t b);
/* Its inverse, -1 when c is no byte's char. */
int bytelevel_byte(uint32_t c);

/* ---- models (unigram.c, bpe.c, wordlevel.c) -------------------------------------------- */

/* A model token: id and the code point range [s, e) of the split it covers. */
typedef struct tok_token {
  int32_t id;
  uint32_t s, e;
} tok_token;

typedef struct tok_tokens {
  tok_token *v;
  size_t n, cap;
} tok_tokens;
bool tokens_push(tok_tokens *t, int32_t id, uint32_t s, uint32_t e);

/* The vocabulary every model has: id -> token, token -> id (last duplicate wins). */
typedef struct tok_vocab {
  char **tok;       /* [n] UTF-8, NUL-terminated (NULL for an id no token has) */
  uint32_t *len;
  int32_t n;
  int32_t *slot;    /* open addressing, ids; -1 empty */
  size_t mask;
} tok_vocab;
bool vocab_init(tok_vocab *v, int32_t n);
void vocab_set(tok_vocab *v, int32_t id, const char *s, size_t len); /* copies */
bool vocab_index(tok_vocab *v);
int32_t vocab_get(const tok_vocab *v, const char *s, size_t len);
/* The hash vocab_get takes of a string, fed n more bytes: VOCAB_HASH0 then each piece in turn
 * (FNV-1a 64), so a caller extending a candidate hashes each byte once. */
#define VOCAB_HASH0 0xcbf29ce484222325ULL
uint64_t vocab_hash_step(uint64_t h, const char *s, size_t n);
/* vocab_get of s[0, len) whose vocab_hash_step hash is `full`. */
int32_t vocab_get_hashed(const tok_vocab *v, const char *s, size_t len, uint64_t full);
void vocab_fini(tok_vocab *v);

typedef struct tok_model tok_model;
est_status model_from_json(tok_model **out, json_t *o, const char *where);
void model_free(tok_model *m);
const tok_vocab *model_vocab(const tok_model *m);
/* Tokenizes one split's text (code points) into t (appending). Fails only for memory or
 * for a model error (message set). */
est_status model_tokenize(const tok_model *m, const uint32_t *c, size_t n, tok_tokens *t);
const char *model_type(const tok_model *m);

/* ---- post-processors (post_processors.c) ----------------------------------------------- */

typedef struct tok_enc {
  int32_t *ids, *type_ids, *special, *attention;
  int32_t *os, *oe;
  char **tokens;    /* borrowed strings (vocab or the processor's), never freed */
  size_t n, cap;
} tok_enc;
bool enc_push(tok_enc *e, int32_t id, int32_t type_id, const char *token, int32_t os, int32_t oe, int special);
void enc_free(tok_enc *e);

typedef struct tok_postproc tok_postproc;
est_status postproc_from_json(tok_postproc **out, json_t *o, const tok_vocab *v, const char *where);
void postproc_free(tok_postproc *p);
size_t postproc_added(const tok_postproc *p, bool pair);
/* Joins a (and b when not NULL) into out with the special tokens. keep & 1 (a), & 2 (b): the
 * sequence is an overflowing window, whose type ids a TemplateProcessing leaves as they are. */
bool postproc_apply(const tok_postproc *p, const tok_enc *a, const tok_enc *b, bool add_special, unsigned keep,
                    tok_enc *out);

/* ---- decoders (decoders.c) -------------------------------------------------------------- */

/* A list of malloc'd UTF-8 strings, each also NUL-terminated (a decoded byte may be NUL). */
typedef struct tok_strs {
  char **v;
  size_t *len;
  size_t n, cap;
} tok_strs;
bool strs_push(tok_strs *l, const char *s, size_t n);
void strs_free(tok_strs *l);

typedef struct tok_decoder tok_decoder;
est_status decoder_from_json(tok_decoder **out, json_t *o, const char *where);
void decoder_free(tok_decoder *d);
/* Decoder::decode_chain: replaces the tokens of l by the decoded pieces (false: memory). */
bool decoder_chain(const tok_decoder *d, tok_strs *l);

#endif
