/* libFuzzer target: a question-answering request to a "squad" model, as `est serve` takes it
 * ({"instances": [{"question": ..., "context": ...}, ...]}, est_request_parse with the squad
 * head's inputs) and as `est predict` takes an input line ({"question": ..., "context": ...}),
 * run through the squad head's own batch (est_served_squad, src/bert/heads/head_squad.c)
 * without a servable: each context split as the SQuAD reader splits one, cut into windows
 * with a small vocab (max_seq_length 24, doc_stride 8), logits made from the input's bytes in
 * the model's place, the answer picked under SQuAD 1.1 and 2.0 rules and written as est serve
 * writes it.
 *
 * Invariants: a body fails with INVALID_ARGUMENT and a message, leaving the request empty,
 * or gives 1..max_instances instances with a question and a context; the request's strings
 * are valid UTF-8 and the vocab has [UNK], [CLS] and [SEP], so no later step may refuse them;
 * every window has 1..max_seq_length real tokens; every
 * answer is a JSON object whose "start" and "end" are -1 and -1 or code point offsets with
 * 0 <= start < end <= the context's length. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/log.h"
#include "est/served_head.h"
#include "est/serving.h"

static const char vocab_text[] =
    "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\nquick\nbrown\nfox\njump\n##s\n##ed\n##ing\nover\nlazy\ndog\n"
    "who\nwhat\nwhere\nis\na\nb\nc\n##a\n##b\n1\n##9\n.\n,\n!\n?\n'\"\n-\n(\n)\n\xe4\xb8\xad\n\xe6\x96\x87\n"
    "caf\xc3\xa9\nna\xc3\xafve\nun\n##want\n";

enum { SEQ = 24 };

/* The context's length in code points (it is valid UTF-8). */
static int64_t code_points(const char *s) {
  int64_t n = 0;
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) n += (*c & 0xC0) != 0x80;
  return n;
}

/* A request's instances (in, count of them), or one est predict input line, through a fresh
 * squad batch, as est serve / est predict run one. */
static void answer(const est_served_head *h, est_tokenizer *tok, bool v2, const est_instance *in, size_t count,
                   char *line, const uint8_t *data, size_t size) {
  const est_model_squad q = {.doc_stride = 8, .max_query_length = 6, .n_best_size = 5, .max_answer_length = 8,
                             .version_2_with_negative = v2};
  est_model_meta meta = {.max_seq_length = SEQ};
  est_model_meta_set_head(&meta, h, &q);
  const est_served_context ctx = {.meta = &meta, .output_width = h->params(NULL, &meta), .tokenizer = tok};
  if (ctx.output_width != 2 * SEQ) abort();
  void *b;
  if (h->batch_create(&b, &ctx) != EST_OK) abort();
  const char *context = NULL;
  if (line) {
    est_status st = h->add_line(b, line, "fuzz.jsonl", 1);
    if (st != EST_OK) {
      if (st != EST_ERR_INVALID_ARGUMENT || !est_error_message()[0]) abort();
      h->batch_free(b);
      return;
    }
    json_t *o = json_loads(line, 0, NULL);
    if (!o || !(context = json_string_value(json_object_get(o, "context")))) abort();
    context = strdup(context);
    json_decref(o);
    count = 1;
  } else {
    for (size_t i = 0; i < count; i++)
      if (h->add_instance(b, &in[i], i) != EST_OK) abort();
  }
  est_served_rows rows;
  if (h->rows(b, &rows) != EST_OK || rows.n < 0 || rows.longest > SEQ) abort();
  for (int r = 0; r < rows.n; r++) {
    int real = 0;
    for (int t = 0; t < SEQ; t++) real += rows.input_mask[(size_t)r * SEQ + t];
    if (real < 1 || real > rows.longest) abort();
  }
  float *out = malloc(((size_t)rows.n + 1) * 2 * SEQ * sizeof *out);
  if (!out) abort();
  for (size_t k = 0; k < (size_t)rows.n * 2 * SEQ; k++) out[k] = (float)(data[(k * 7) % size] % 17) - 8.0f;
  if (h->answer(b, out) != EST_OK) abort();
  for (size_t i = 0; i < count; i++) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) abort();
    h->write(b, i, EST_SERVED_PREDICT, f);
    fclose(f);
    json_t *a = json_loads(text, 0, NULL);
    const json_t *start = json_object_get(a, "start"), *end = json_object_get(a, "end");
    if (!json_is_string(json_object_get(a, "answer")) || !json_is_integer(start) || !json_is_integer(end)) abort();
    const json_int_t s = json_integer_value(start), e = json_integer_value(end);
    const int64_t n = code_points(line ? context : in[i].texts[1]);
    if (!(s == -1 && e == -1) && !(s >= 0 && s < e && e <= n)) abort();
    json_decref(a);
    free(text);
  }
  free(out);
  free((char *)(line ? context : NULL));
  h->batch_free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static est_vocab *vocab;
  static est_tokenizer *tok;
  const est_served_head *h = est_served_head_find("squad");
  if (!h) abort();
  if (!tok) {
    est_log_set_level(EST_LOG_OFF);
    if (est_vocab_load_buffer(&vocab, vocab_text, sizeof vocab_text - 1, "fuzz-vocab") != EST_OK ||
        est_tokenizer_create(&tok, vocab, true) != EST_OK)
      abort();
  }
  const est_request_limits lim = {.max_seq_length = SEQ, .vocab_size = 1000, .type_vocab_size = 2, .max_instances = 16};
  est_request r;
  est_status st = est_request_parse(&r, EST_REQUEST_PREDICT, &h->inputs, (const char *)data, size, &lim);
  if (st != EST_OK) {
    if (st != EST_ERR_INVALID_ARGUMENT && st != EST_ERR_NO_MEMORY) abort();
    if (r.count || r.instances || r.json || !est_error_message()[0]) abort();
  } else {
    if (r.count == 0 || r.count > lim.max_instances || r.columnar) abort();
    for (size_t i = 0; i < r.count; i++)
      if (!r.instances[i].texts[0] || !r.instances[i].texts[1] || r.instances[i].texts[2] || r.instances[i].input_ids)
        abort();
    answer(h, tok, false, r.instances, r.count, NULL, data, size);
    answer(h, tok, true, r.instances, r.count, NULL, data, size);
  }
  est_request_clear(&r);
  /* est predict: the body as one input line (a line has no NUL and no newline) */
  if (size && !memchr(data, 0, size) && !memchr(data, '\n', size)) {
    char *line = malloc(size + 1);
    if (!line) abort();
    memcpy(line, data, size);
    line[size] = 0;
    answer(h, tok, size % 2, NULL, 0, line, data, size);
    free(line);
  }
  return 0;
}
