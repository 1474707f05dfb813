/* libFuzzer target: `est serve`'s request bodies (JSON -> instances, src/serve/request.c)
 * on arbitrary bytes, as :predict and as :classify, for the inputs of every served head
 * (est/served_head.h: text_a/text_b or tokens; question/context). Invariants: a body either
 * fails with INVALID_ARGUMENT and a message, leaving the request empty, or gives at least
 * one instance, each either texts (every required one set) or, where the head takes them,
 * tokenized rows of 1..max_seq_length values inside the limits; :classify is never
 * columnar, and only a columnar head's body is. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "est/serving.h"

static void check(const est_request *r, est_request_kind kind, const est_served_inputs *inputs,
                  const est_request_limits *lim) {
  if (r->count == 0 || !r->instances || !r->json) abort();
  if ((kind == EST_REQUEST_CLASSIFY || !inputs->columnar) && r->columnar) abort();
  for (size_t i = 0; i < r->count; i++) {
    const est_instance *x = &r->instances[i];
    int texts = 0;
    for (int k = 0; k < EST_SERVED_MAX_TEXTS; k++) texts += x->texts[k] != NULL;
    if (x->input_ids) {
      if (!inputs->tokens || texts || !x->input_mask || !x->segment_ids) abort();
      if (x->length < 1 || x->length > lim->max_seq_length) abort();
      for (int t = 0; t < x->length; t++)
        if (x->input_ids[t] < 0 || x->input_ids[t] >= lim->vocab_size || (x->input_mask[t] != 0 && x->input_mask[t] != 1) ||
            x->segment_ids[t] < 0 || x->segment_ids[t] >= lim->type_vocab_size)
          abort();
    } else {
      for (int k = 0; k < inputs->required; k++)
        if (!x->texts[k]) abort();
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const est_request_limits lim = {.max_seq_length = 16, .vocab_size = 1000, .type_vocab_size = 2, .max_instances = 64};
  for (size_t h = 0; h < est_served_head_count(); h++) {
    const est_served_inputs *inputs = &est_served_head_at(h)->inputs;
    for (int k = 0; k < 2; k++) {
      est_request_kind kind = k ? EST_REQUEST_CLASSIFY : EST_REQUEST_PREDICT;
      est_request r;
      est_status st = est_request_parse(&r, kind, inputs, (const char *)data, size, &lim);
      if (st == EST_OK) {
        check(&r, kind, inputs, &lim);
      } else {
        if (st != EST_ERR_INVALID_ARGUMENT && st != EST_ERR_NO_MEMORY) abort();
        if (r.count || r.instances || r.json || !est_error_message()[0]) abort();
      }
      est_request_clear(&r);
    }
  }
  return 0;
}
