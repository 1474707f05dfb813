/* libFuzzer target: the embedding request bodies of `est serve` (src/serve/embed_request.c),
 * text-embeddings-inference's POST /embed and the OpenAI-style POST /v1/embeddings, on
 * arbitrary bytes: each input is parsed as both. Invariants: a body either fails with
 * INVALID_ARGUMENT (NO_MEMORY) and a message, leaving the request empty, or gives 1 to
 * max_instances texts, each a NUL-terminated string; TEI's "normalize" is -1, 0 or 1 and it
 * has no model; OpenAI's request never truncates nor names a normalization. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "est/serving.h"

static void check(const est_embed_request *r, est_embed_api api, const est_request_limits *lim) {
  if (r->count == 0 || r->count > lim->max_instances || !r->texts || !r->json) abort();
  for (size_t i = 0; i < r->count; i++)
    if (!r->texts[i]) abort();
  if (api == EST_EMBED_API_TEI) {
    if (r->normalize < -1 || r->normalize > 1 || r->model) abort();
  } else {
    if (r->normalize != -1 || r->truncate) abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const est_request_limits lim = {.max_seq_length = 16, .vocab_size = 1000, .type_vocab_size = 2, .max_instances = 64};
  for (int k = 0; k < 2; k++) {
    const est_embed_api api = k ? EST_EMBED_API_OPENAI : EST_EMBED_API_TEI;
    est_embed_request r;
    est_status st = est_embed_request_parse(&r, api, (const char *)data, size, &lim);
    if (st == EST_OK) {
      check(&r, api, &lim);
      /* the texts live as long as the request: touch every byte (ASan sees a dangling one) */
      size_t bytes = 0;
      for (size_t i = 0; i < r.count; i++) bytes += strlen(r.texts[i]);
      if (bytes > size) abort();
    } else {
      if (st != EST_ERR_INVALID_ARGUMENT && st != EST_ERR_NO_MEMORY) abort();
      if (r.count || r.texts || r.json || r.model || !est_error_message()[0]) abort();
    }
    est_embed_request_clear(&r);
  }
  return 0;
}
