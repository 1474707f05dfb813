/* libFuzzer target: the vocab loader and the tokenizer built on it, on arbitrary bytes.
 * Invariants: a vocab that loads maps every id's token (but a duplicate's shadowed one) back
 * to an id with the same token;
 * tokenizing any text (the input itself) gives ids inside the vocab, and EST_TOKEN_UNK_MISSING
 * only when the vocab has no [UNK] (the reference's KeyError, reported by est_features). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "est/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  est_vocab *v;
  if (est_vocab_load_buffer(&v, (const char *)data, size, "fuzz-vocab") != EST_OK) return 0;
  int32_t n = est_vocab_size(v);
  for (int32_t id = 0; id < n; id++) {
    const char *t = est_vocab_token(v, id);
    if (!t) continue; /* redefined by a later duplicate line: absent from the inverse map */
    int32_t back = est_vocab_find(v, t, strlen(t));
    if (back < 0 || back >= n || strcmp(est_vocab_token(v, back), t)) abort();
  }
  for (int lower = 0; lower < 2; lower++) {
    est_tokenizer *tok;
    if (est_tokenizer_create(&tok, v, lower) != EST_OK) continue; /* e.g. no [UNK] */
    const int32_t *ids;
    size_t k;
    if (est_tokenizer_encode(tok, (const char *)data, size, &ids, &k) != EST_OK) abort();
    int has_unk = est_vocab_find(v, "[UNK]", 5) >= 0;
    for (size_t i = 0; i < k; i++)
      if ((ids[i] < 0 || ids[i] >= n) && (has_unk || ids[i] != EST_TOKEN_UNK_MISSING)) abort();
    est_tokenizer_free(tok);
  }
  est_vocab_free(v);
  return 0;
}
