/* est/tokenizer.h — BERT's FullTokenizer (google-research/bert tokenization.py), byte for
 * byte: BasicTokenizer (clean, CJK spacing, Python lower() + NFD + drop Mn, punctuation
 * split) followed by greedy longest-match-first WordPiece.
 *
 *     est_vocab *v;
 *     if (est_vocab_load(&v, "vocab.txt") != EST_OK) die(est_error_message());
 *     est_tokenizer *tok;
 *     est_tokenizer_create(&tok, v, true);             // do_lower_case
 *     const int32_t *ids; size_t n;
 *     est_tokenizer_encode(tok, "UNwant\xC3\xA9d,running", SIZE_MAX, &ids, &n);
 *     for (size_t i = 0; i < n; i++) printf("%s ", est_vocab_token(v, ids[i]));
 *     est_tokenizer_free(tok); est_vocab_free(v);
 *
 * Behaviour (docs/tokenizer.md §1-§3):
 * - Input bytes are UTF-8; invalid bytes are dropped (Python decode(errors="ignore")).
 * - Cc/Cf, U+0000 and U+FFFD are removed; \t \n \r and Zs become spaces; U+2028/U+2029
 *   split tokens like spaces (Python's str.split()).
 * - Lower-casing is Python's str.lower(): U+0130 -> "i" U+0307, capital sigma -> final
 *   sigma in Final_Sigma context. Accents are stripped (NFD, drop Mn) only when lower-casing.
 * - Words longer than 200 code points, or with no WordPiece cover, become one [UNK].
 * Unicode data comes from utf8proc (Unicode 15.0); the reference vectors were made under
 * Python 3.11 (Unicode 14.0) and differ only on code points assigned in 15.0.
 *
 * Tokens are returned as vocab ids. A token is always a vocab entry, except "[UNK]" when the
 * vocab lacks it: that is id EST_TOKEN_UNK_MISSING, and converting it to an id is the
 * reference's KeyError, which est_features reports. A tokenizer keeps scratch buffers and is
 * not thread-safe: make one per thread (they can share one est_vocab, which is read-only).
 */
#ifndef EST_TOKENIZER_H
#define EST_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "est/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* "[UNK]" produced while the vocab has no "[UNK]" entry. */
#define EST_TOKEN_UNK_MISSING (-1)

/* WordpieceTokenizer's max_input_chars_per_word (the reference's default, not HF's 100). */
#define EST_WORDPIECE_MAX_CHARS 200

/* ---- vocabulary ------------------------------------------------------------------- */

typedef struct est_vocab est_vocab;

/* load_vocab: one token per line ('\n' separated), each stripped of Python whitespace, id =
 * 0-based line number. A blank line is the token "" with its own id; a duplicated token keeps
 * its last line's id; a last line without '\n' counts. Invalid UTF-8 is an error naming the
 * line (TF's GFile decodes strictly), and so are a NUL byte and a UTF-16 byte-order mark. */
est_status est_vocab_load(est_vocab **out, const char *path);
/* The same from memory (`name` is used in messages). */
est_status est_vocab_load_buffer(est_vocab **out, const char *data, size_t size, const char *name);
void est_vocab_free(est_vocab *v);

/* Number of lines = one past the largest id. */
int32_t est_vocab_size(const est_vocab *v);
/* The id of a token, or -1 when absent (no [UNK] fallback, as the reference). */
int32_t est_vocab_find(const est_vocab *v, const char *token, size_t len);
/* The token of an id; "[UNK]" for EST_TOKEN_UNK_MISSING; NULL for an id out of range or one
 * whose token was redefined by a later duplicate line (absent from the inverse map). */
const char *est_vocab_token(const est_vocab *v, int32_t id);
/* The file or name it was loaded from. */
const char *est_vocab_path(const est_vocab *v);

/* ---- tokenizer -------------------------------------------------------------------- */

typedef struct est_tokenizer est_tokenizer;

/* FullTokenizer(vocab, do_lower_case). The vocab is borrowed: it must outlive tok. */
est_status est_tokenizer_create(est_tokenizer **out, const est_vocab *vocab, bool do_lower_case);
/* The FullTokenizer's behaviour as options (HF tokenizers' BertNormalizer + WordPiece
 * fields): est_tokenizer_options_default(do_lower_case) is Google's FullTokenizer. */
typedef struct est_tokenizer_options {
  bool lowercase;
  int strip_accents;              /* -1: as lowercase (Google's; HF's null), 0 no, 1 yes */
  bool clean_text;                /* drop controls and U+FFFD, whitespace -> ' ' (true) */
  bool handle_chinese_chars;      /* CJK ideographs become single tokens (true) */
  const char *unk_token;          /* "[UNK]" */
  int max_input_chars_per_word;   /* EST_WORDPIECE_MAX_CHARS; longer words are unk_token */
  /* HF tokenizers' BertNormalizer where it differs from Python's: lower-casing one code
   * point at a time (no final sigma), and clean_text also dropping unassigned (Cn) and
   * private-use (Co) code points. false: Google's. */
  bool hf_rules;
} est_tokenizer_options;
est_tokenizer_options est_tokenizer_options_default(bool do_lower_case);
est_status est_tokenizer_create_with(est_tokenizer **out, const est_vocab *vocab, const est_tokenizer_options *opt);
/* Hands v to tok, which frees it with itself. */
void est_tokenizer_own_vocab(est_tokenizer *tok, est_vocab *v);

/* A HuggingFace tokenizer.json (docs/tokenizer.md §8): models WordPiece, WordLevel,
 * Unigram, BPE; its normalizer, pre-tokenizer, post-processor, added_tokens, truncation and
 * padding, as HuggingFace `tokenizers` runs them. A type or field value est does not
 * implement is INVALID_ARGUMENT naming the file and the field (the decoder included, for
 * est_tokenizer_decode).
 * - A WordPiece file with a BertNormalizer and a BertPreTokenizer is also Google's
 *   FullTokenizer (src/text/tokenizer_json.c, docs/hf.md §5): est_tokenizer_encode and the
 *   vocab are that, bit for bit as before; est_tokenizer_encode_pair is `tokenizers`'.
 * - Any other file: est_tokenizer_encode gives encode(text, add_special_tokens=False).ids,
 *   est_tokenizer_vocab is NULL and est_tokenizer_basic / _wordpiece fail. */
est_status est_tokenizer_from_json(est_tokenizer **out, const char *path);

/* ---- tokenizers' Encoding (tokenizer.json files) ----------------------------------- */

typedef enum {
  EST_TRUNCATE_LONGEST_FIRST = 0,
  EST_TRUNCATE_ONLY_FIRST,
  EST_TRUNCATE_ONLY_SECOND
} est_truncation_strategy;

/* TruncationParams; max_length counts the special tokens the post-processor adds. The
 * stride is how many tokens each overflowing window repeats from the one before
 * (est_tokenizer_overflowing). */
typedef struct est_truncation {
  bool enabled;
  size_t max_length;
  est_truncation_strategy strategy;
  size_t stride;
  bool left;                      /* direction Left: keep the end */
} est_truncation;

/* PaddingParams of one encode: pad to `fixed` (0: BatchLongest, i.e. the encoding's own
 * length) rounded up to multiple_of. */
typedef struct est_padding {
  bool enabled;
  size_t fixed, multiple_of;
  bool left;
  int32_t pad_id, pad_type_id;
  const char *pad_token;
} est_padding;

/* One tokenizers.Encoding: n tokens, offsets in code points of the input (of text_b for
 * the pair's tokens), [0, 0) for special and pad tokens. Owned by the tokenizer until its
 * next call. */
typedef struct est_encoding {
  size_t n;
  const int32_t *ids, *type_ids, *special_tokens_mask, *attention_mask;
  const int32_t *offset_start, *offset_end;
  const char *const *tokens;
} est_encoding;

/* Tokenizer.encode(text, pair, add_special_tokens) of a tokenizer.json tokenizer; pair NULL
 * for a single text. FAILED_PRECONDITION for a tokenizer made from a vocab.txt. */
est_status est_tokenizer_encode_pair(est_tokenizer *tok, const char *text, size_t len, const char *pair,
                                     size_t pair_len, bool add_special_tokens, est_encoding *out);
/* The overflowing encodings of the last est_tokenizer_encode_pair (tokenizers'
 * Encoding.overflowing; transformers' return_overflowing_tokens=True gives the encoding, then
 * these): when truncation cut a sequence, the windows it left out, each max_length - stride
 * tokens past the one before (a window ends at the sequence's end), post-processed and padded
 * like the encoding. For a pair, in tokenizers' merge order: each overflowing window of the
 * first text with the second's kept window and then with each of its overflowing ones, then the
 * first's kept window with each of the second's overflowing ones. 0 / false for a vocab.txt
 * tokenizer or past the end; *out is owned by tok until its next call, like the encoding. */
size_t est_tokenizer_num_overflowing(const est_tokenizer *tok);
bool est_tokenizer_overflowing(const est_tokenizer *tok, size_t i, est_encoding *out);
/* Tokenizer.decode(ids, skip_special_tokens) of a tokenizer.json tokenizer, through its
 * decoder (docs/tokenizer.md §8.2): *out is a malloc'd UTF-8 string of *out_len bytes plus a
 * NUL (free it; a decoded <0x00> byte is a NUL inside it). An id with no token is left out,
 * as tokenizers does. FAILED_PRECONDITION for a vocab.txt tokenizer. */
est_status est_tokenizer_decode(const est_tokenizer *tok, const int32_t *ids, size_t n, bool skip_special_tokens,
                                char **out, size_t *out_len);
/* The file's truncation / padding, to read or change (NULL for a vocab.txt tokenizer). */
est_truncation *est_tokenizer_truncation(est_tokenizer *tok);
est_padding *est_tokenizer_padding(est_tokenizer *tok);
/* The token of an id for any tokenizer (added tokens included), or NULL. */
const char *est_tokenizer_id_to_token(const est_tokenizer *tok, int32_t id);
/* Gives a vocab.txt tokenizer the pipeline HF's BertTokenizerFast makes of the same vocab.txt
 * (convert_slow_tokenizer's BertConverter: its normalizer options, "[CLS] $A [SEP]", the
 * WordPiece decoder), so that est_tokenizer_encode_pair and est_tokenizer_decode work on it;
 * est_tokenizer_encode stays Google's. A tokenizer.json tokenizer is left as it is.
 * FAILED_PRECONDITION when the vocab has no [CLS] or [SEP]. */
est_status est_tokenizer_attach_bert_pipeline(est_tokenizer *tok);

/* --vocab_file as est's programs take it (docs/tokenizer.md §9), the one opener of run_classifier,
 * run_squad, run_ner, extract_features, embed, export, predict and serve:
 * - a vocab.txt: Google's FullTokenizer with do_lower_case;
 * - a tokenizer.json of any model est_tokenizer_from_json reads; its own settings win over
 *   do_lower_case (logged when a WordPiece file's lower-casing differs);
 * - a HuggingFace model directory: its tokenizer.json when it has one, else its vocab.txt (as
 *   transformers' AutoTokenizer prefers the fast tokenizer's file).
 * est_tokenizer_vocab(tok) != NULL says the programs' Google path applies: [CLS] a [SEP] b [SEP]
 * from est_tokenizer_encode, byte for byte as with a vocab.txt. NULL (Unigram, BPE, WordLevel,
 * or a WordPiece file without BertNormalizer + BertPreTokenizer): the programs take
 * est_tokenizer_encode_pair's ids, type ids, special tokens and offsets, truncated by the
 * tokenizer as transformers' tokenizer(a, b, truncation=True, max_length=S) does. run_squad and
 * run_ner read words through the Google path only so far (UNIMPLEMENTED for the others). A
 * server makes one est_tokenizer_twin per thread and calls est_tokenizer_encode_pair /
 * est_tokenizer_decode on it (e.g. TEI's /tokenize and /decode). */
est_status est_tokenizer_open_any(est_tokenizer **out, const char *vocab_file, bool do_lower_case);

/* A tokenizer that tokenizes as tok does, for another thread: it shares tok's read-only parts
 * (vocab, tokenizer.json pipeline) and has its own scratch, encoding and copy of the truncation
 * and padding settings. tok must outlive it; free it with est_tokenizer_free. */
est_status est_tokenizer_twin(est_tokenizer **out, const est_tokenizer *tok);

/* One past the largest id tok can give: the vocab.txt's lines, or a tokenizer.json's model
 * vocab and added tokens (what a model's vocab_size must cover). */
int32_t est_tokenizer_size(const est_tokenizer *tok);

/* Writes a vocab.txt at path (atomically) from --vocab_file as est_tokenizer_open_any takes
 * it: a vocab.txt's bytes as they are; a tokenizer.json's (or a model directory's) WordPiece
 * vocab, one token a line in id order. A tokenizer.json with no Google vocab (est_tokenizer_vocab
 * NULL) writes nothing: that file itself is the tokenizer (exports carry it). */
est_status est_vocab_file_write(const char *path, const char *vocab_file, bool do_lower_case);
/* The tokenizer.json that est_tokenizer_open_any would read for vocab_file into path[size],
 * or "" when it reads a vocab.txt. */
est_status est_tokenizer_json_of(const char *vocab_file, char *path, size_t size);

/* Loads vocab_file and creates a tokenizer that owns it. */
est_status est_tokenizer_open(est_tokenizer **out, const char *vocab_file, bool do_lower_case);
void est_tokenizer_free(est_tokenizer *tok);

const est_vocab *est_tokenizer_vocab(const est_tokenizer *tok);
bool est_tokenizer_do_lower_case(const est_tokenizer *tok);
/* The options tok was made with (unk_token is tok's copy, valid while tok lives): another
 * tokenizer on the same vocab with these tokenizes alike, e.g. one per thread from a
 * tokenizer.json. */
est_tokenizer_options est_tokenizer_get_options(const est_tokenizer *tok);

/* FullTokenizer.tokenize + convert_tokens_to_ids: the WordPiece ids of `text` (len bytes, or
 * SIZE_MAX for a NUL-terminated string). *ids is owned by tok and valid until its next call.
 * Fails only for lack of memory. No allocation once the scratch buffers have grown. */
est_status est_tokenizer_encode(est_tokenizer *tok, const char *text, size_t len,
                                const int32_t **ids, size_t *n);

/* BasicTokenizer.tokenize: the tokens joined by single spaces (no token contains Python
 * whitespace, so the join is unambiguous), NUL-terminated, owned by tok until its next
 * call. *ntokens gets the token count when not NULL. NULL only for lack of memory. */
const char *est_tokenizer_basic(est_tokenizer *tok, const char *text, size_t len, size_t *ntokens);

/* WordpieceTokenizer.tokenize alone (whitespace_tokenize, then WordPiece each word; no
 * cleaning or lower-casing). Same ownership as est_tokenizer_encode. */
est_status est_tokenizer_wordpiece(est_tokenizer *tok, const char *text, size_t len,
                                   const int32_t **ids, size_t *n);

/* ---- character classes (tokenization.py's _is_whitespace/_is_control/_is_punctuation) -- */

bool est_tok_is_whitespace(uint32_t cp);
bool est_tok_is_control(uint32_t cp);
bool est_tok_is_punctuation(uint32_t cp);
bool est_tok_is_cjk(uint32_t cp);

/* Decodes UTF-8 like Python's bytes.decode("utf-8", errors="ignore"): each maximal invalid
 * subpart is dropped. Writes at most `len` code points to cps (len is always enough);
 * returns how many. */
size_t est_utf8_decode_lossy(const char *s, size_t len, uint32_t *cps);

/* The byte offset of the first invalid UTF-8 sequence in s[0, n) (strict, as Python's
 * decode("utf-8")), or SIZE_MAX when it is all valid. */
size_t est_utf8_first_invalid(const char *s, size_t n);

/* ---- checkpoint/case check -------------------------------------------------------- */

/* validate_case_matches_checkpoint: when init_checkpoint names one of Google's released
 * models (".../<name>/bert_model.ckpt..."), checks that do_lower_case matches how it was
 * trained. INVALID_ARGUMENT with the reference's explanation otherwise; EST_OK for an
 * empty/NULL path or any other model name. */
est_status est_validate_case_matches_checkpoint(bool do_lower_case, const char *init_checkpoint);

#ifdef __cplusplus
}
#endif
#endif
