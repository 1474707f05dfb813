/* libFuzzer target: a HuggingFace tokenizer.json (est_tokenizer_from_json,
 * src/text/tokenizer_json.c and the pipeline behind it, src/text/hf_tokenizer.c: WordPiece,
 * WordLevel, Unigram, BPE with their normalizers, pre-tokenizers, post-processors, added
 * tokens, truncation, padding and decoders) on arbitrary bytes, written to an in-memory file
 * (fuzz_file.h); the input is also the text it tokenizes, alone and as a pair.
 *
 * Invariants: a file either fails with INVALID_ARGUMENT (NO_MEMORY) and a message, giving no
 * tokenizer, or gives one that tokenizes any text. Google's shape (WordPiece behind
 * BertNormalizer + BertPreTokenizer) has a vocab holding exactly model.vocab's ids, each
 * token finding its own id again; its ids lie inside it or are EST_TOKEN_UNK_MISSING (an
 * unk_token the vocab lacks); and a twin made from est_tokenizer_get_options on the same
 * vocab (as est serve makes one per request) gives the same ids. Every file's encodings
 * (est_tokenizer_encode_pair, of the input and of its two halves as a pair) fail with a
 * message or give tokens with a name and an id the tokenizer knows (padding and special
 * tokens aside), masks of 0 and 1, and offsets start <= end inside the code points of their
 * text, and decode (est_tokenizer_decode, through the file's decoder) to a string. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "est/tokenizer.h"
#include "fuzz_file.h"

/* Google's FullTokenizer, read from the file: its vocab and its twin. */
static void check_full_tokenizer(est_tokenizer *tok, const est_vocab *v, const uint8_t *data, size_t size) {
  const int32_t n = est_vocab_size(v);
  if (n < 1) abort();
  for (int32_t id = 0; id < n; id++) {
    const char *t = est_vocab_token(v, id);
    if (!t || est_vocab_find(v, t, strlen(t)) != id) abort(); /* ids 0..n-1, each once */
  }
  const est_tokenizer_options o = est_tokenizer_get_options(tok);
  if (!o.unk_token || o.max_input_chars_per_word < 0 || o.strip_accents < -1 || o.strip_accents > 1) abort();
  est_tokenizer *twin;
  if (est_tokenizer_create_with(&twin, v, &o) != EST_OK) abort();
  const int32_t *ids, *twin_ids;
  size_t k, twin_k;
  if (est_tokenizer_encode(tok, (const char *)data, size, &ids, &k) != EST_OK ||
      est_tokenizer_encode(twin, (const char *)data, size, &twin_ids, &twin_k) != EST_OK)
    abort();
  if (k != twin_k || (k && memcmp(ids, twin_ids, k * sizeof *ids))) abort();
  for (size_t i = 0; i < k; i++)
    if ((ids[i] < 0 || ids[i] >= n) && ids[i] != EST_TOKEN_UNK_MISSING) abort();
  est_tokenizer_free(twin);
}

/* The code points the pipeline reads of s[0, n) (invalid UTF-8 dropped). */
static int32_t code_points(const char *s, size_t n) {
  uint32_t *cps = malloc((n + 1) * sizeof *cps);
  if (!cps) abort();
  const int32_t count = (int32_t)est_utf8_decode_lossy(s, n, cps);
  free(cps);
  return count;
}

/* tokenizers' Encoding of the input, alone and as a pair of its halves, with and without
 * special tokens: offsets inside their text (a pair's: inside the longer half). */
static void check_encodings(est_tokenizer *tok, const uint8_t *data, size_t size) {
  const size_t half = size / 2;
  const char *a = (const char *)data, *b = (const char *)data + half;
  const int32_t whole = code_points(a, size), first = code_points(a, half), second = code_points(b, size - half);
  for (int run = 0; run < 4; run++) {
    const bool pair = run & 1, special = run & 2;
    const int32_t bound = !pair ? whole : first > second ? first : second;
    est_encoding e;
    est_status st = pair ? est_tokenizer_encode_pair(tok, a, half, b, size - half, special, &e)
                         : est_tokenizer_encode_pair(tok, a, size, NULL, 0, special, &e);
    if (st != EST_OK) {
      if (st != EST_ERR_INVALID_ARGUMENT || !est_error_message()[0]) abort();
      continue;
    }
    for (size_t i = 0; i < e.n; i++) {
      if ((e.attention_mask[i] != 0 && e.attention_mask[i] != 1) ||
          (e.special_tokens_mask[i] != 0 && e.special_tokens_mask[i] != 1) || e.type_ids[i] < 0)
        abort();
      const int32_t s = e.offset_start[i], end = e.offset_end[i];
      if (s < 0 || s > end || end > bound) abort();
      /* a model's or an added token has a name and an id the tokenizer knows; a pad or a
       * post-processor's special token carries the id its file gives it, as in tokenizers */
      const bool model_token = e.attention_mask[i] && !e.special_tokens_mask[i];
      if (model_token && (!e.tokens[i] || !est_tokenizer_id_to_token(tok, e.ids[i]))) abort();
    }
    /* and back through the file's decoder */
    char *text;
    size_t text_len;
    if (est_tokenizer_decode(tok, e.ids, e.n, special, &text, &text_len) != EST_OK || !text || text[text_len]) abort();
    free(text);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static fuzz_file file;
  est_tokenizer *tok = NULL;
  est_status st = est_tokenizer_from_json(&tok, fuzz_file_put(&file, data, size));
  if (st != EST_OK) {
    if (tok || (st != EST_ERR_INVALID_ARGUMENT && st != EST_ERR_NO_MEMORY) || !est_error_message()[0]) abort();
    return 0;
  }
  const est_vocab *v = est_tokenizer_vocab(tok);
  if (v) {
    check_full_tokenizer(tok, v, data, size);
  } else {
    const int32_t *ids;
    size_t k;
    st = est_tokenizer_encode(tok, (const char *)data, size, &ids, &k);
    if (st != EST_OK && (st != EST_ERR_INVALID_ARGUMENT || !est_error_message()[0])) abort();
    for (size_t i = 0; st == EST_OK && i < k; i++)
      if (!est_tokenizer_id_to_token(tok, ids[i])) abort();
  }
  check_encodings(tok, data, size);
  est_tokenizer_free(tok);
  return 0;
}
