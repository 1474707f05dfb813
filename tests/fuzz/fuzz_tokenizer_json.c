/* libFuzzer target: a HuggingFace tokenizer.json (est_tokenizer_from_json,
 * src/text/tokenizer_json.c: a WordPiece model behind a BertNormalizer and a
 * BertPreTokenizer, as --vocab_file=tokenizer.json or a model directory gives it) on
 * arbitrary bytes, written to an in-memory file (fuzz_file.h). Invariants: a file either
 * fails with INVALID_ARGUMENT (NO_MEMORY) and a message, giving no tokenizer, or gives one
 * whose vocab holds exactly model.vocab's ids, each token finding its own id again;
 * tokenizing any text (the input itself) gives ids inside the vocab or
 * EST_TOKEN_UNK_MISSING (a file whose unk_token is not in its vocab), and a second
 * tokenizer made from est_tokenizer_get_options on the same vocab (as each serving thread
 * makes one) gives the same ids. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "est/tokenizer.h"
#include "fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static fuzz_file file;
  est_tokenizer *tok = NULL;
  est_status st = est_tokenizer_from_json(&tok, fuzz_file_put(&file, data, size));
  if (st != EST_OK) {
    if (tok || (st != EST_ERR_INVALID_ARGUMENT && st != EST_ERR_NO_MEMORY) || !est_error_message()[0]) abort();
    return 0;
  }
  const est_vocab *v = est_tokenizer_vocab(tok);
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
  est_tokenizer_free(tok);
  return 0;
}
