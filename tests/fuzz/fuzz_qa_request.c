/* libFuzzer target: a question-answering request of `est serve` / `est predict` on a squad
 * model ({"instances": [{"question": ..., "context": ...}, ...]}, est_request_parse with
 * EST_REQUEST_ANSWER), and what src/serve/qa.c does with it before and after the model:
 * each context split as the SQuAD reader splits one (est_squad_examples_add_text), the
 * windows cut by est_squad_converter with a small vocab, logits made from the input's bytes
 * in the model's place, and the answer picked by est_squad_predictor_best (SQuAD 1.1 and
 * 2.0 rules), mapped back to code point offsets as qa.c maps it.
 *
 * Invariants: a body fails with INVALID_ARGUMENT and a message, leaving the request empty,
 * or gives 1..max_instances instances with a question and a context and nothing else; every
 * window has 1..max_seq_length real tokens; every answer has a text, and one with a place
 * has its words inside the context's words and 0 <= start < end <= the context's code
 * points. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/log.h"
#include "est/serving.h"
#include "est/squad.h"

static const char vocab_text[] =
    "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\nquick\nbrown\nfox\njump\n##s\n##ed\n##ing\nover\nlazy\ndog\n"
    "who\nwhat\nwhere\nis\na\nb\nc\n##a\n##b\n1\n##9\n.\n,\n!\n?\n'\"\n-\n(\n)\n\xe4\xb8\xad\n\xe6\x96\x87\n"
    "caf\xc3\xa9\nna\xc3\xafve\nun\n##want\n";

enum { SEQ = 24, STRIDE = 8, QUERY = 6 };

typedef struct {
  est_squad_predictor *p;
  int rows, cap;
  int64_t first_id;
  int *num_tokens;
} windows;

static est_status add_window(void *ctx, const est_squad_feature *f) {
  windows *w = ctx;
  if (f->num_tokens < 1 || f->num_tokens > SEQ) abort();
  if (w->rows == w->cap) {
    w->cap = w->cap ? 2 * w->cap : 64;
    if (!(w->num_tokens = realloc(w->num_tokens, (size_t)w->cap * sizeof *w->num_tokens))) abort();
  }
  w->num_tokens[w->rows++] = f->num_tokens;
  return est_squad_predictor_add_feature(w->p, f);
}

/* The context's length in code points (it is valid UTF-8). */
static int64_t code_points(const char *s) {
  int64_t n = 0;
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) n += (*c & 0xC0) != 0x80;
  return n;
}

/* qa.c's est_qa_batch_create + est_qa_batch_answers, with made-up logits. The request's
 * strings are valid UTF-8 and the vocab has [UNK], [CLS] and [SEP]: no step may refuse. */
static void answer(const est_request *r, est_tokenizer *tok, bool v2, const uint8_t *data, size_t size) {
  est_squad_examples *ex;
  const int64_t **starts = calloc(r->count, sizeof *starts);
  if (!starts || est_squad_examples_create(&ex) != EST_OK) abort();
  for (size_t i = 0; i < r->count; i++) {
    char id[32];
    snprintf(id, sizeof id, "%zu", i);
    if (est_squad_examples_add_text(ex, id, r->instances[i].question, r->instances[i].context,
                                    strlen(r->instances[i].context), &starts[i]) != EST_OK)
      abort();
  }
  const est_squad_feature_config fc = {.max_seq_length = SEQ, .doc_stride = STRIDE, .max_query_length = QUERY,
                                       .quiet = true};
  const est_squad_prediction_config pc = {.n_best_size = 5, .max_answer_length = 8, .version_2_with_negative = v2};
  windows w = {0};
  est_squad_converter *conv;
  if (est_squad_predictor_create(&w.p, ex, tok, &pc) != EST_OK || est_squad_converter_create(&conv, tok, &fc) != EST_OK)
    abort();
  w.first_id = est_squad_converter_next_unique_id(conv);
  for (size_t i = 0; i < r->count; i++)
    if (est_squad_converter_convert(conv, &ex->examples[i], i, add_window, &w) != EST_OK) abort();
  est_squad_converter_free(conv);
  float logits[2 * SEQ];
  for (int row = 0; row < w.rows; row++) {
    for (int t = 0; t < 2 * SEQ; t++) logits[t] = (float)(data[((size_t)row * 31 + (size_t)t * 7) % size] % 17) - 8.0f;
    if (est_squad_predictor_add_result(w.p, w.first_id + row, logits, logits + SEQ, w.num_tokens[row]) != EST_OK)
      abort();
  }
  for (size_t i = 0; i < r->count; i++) {
    est_squad_answer a;
    if (est_squad_predictor_best(w.p, i, &a) != EST_OK || !a.text) abort();
    if (a.start_word >= 0) {
      const size_t words = ex->examples[i].num_doc_tokens;
      if ((size_t)a.start_word >= words || a.end_word < 0 || (size_t)a.end_word >= words || a.start_in_word < 0 ||
          a.end_in_word < 0)
        abort();
      const int64_t start = starts[i][a.start_word] + a.start_in_word, end = starts[i][a.end_word] + a.end_in_word + 1;
      if (start < 0 || start >= end || end > code_points(r->instances[i].context)) abort();
    }
    est_squad_answer_clear(&a);
  }
  free(w.num_tokens);
  est_squad_predictor_free(w.p);
  est_squad_examples_free(ex);
  free(starts);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static est_vocab *vocab;
  static est_tokenizer *tok;
  if (!tok) {
    est_log_set_level(EST_LOG_OFF);
    if (est_vocab_load_buffer(&vocab, vocab_text, sizeof vocab_text - 1, "fuzz-vocab") != EST_OK ||
        est_tokenizer_create(&tok, vocab, true) != EST_OK)
      abort();
  }
  const est_request_limits lim = {.max_seq_length = SEQ, .vocab_size = 1000, .type_vocab_size = 2, .max_instances = 16};
  est_request r;
  est_status st = est_request_parse(&r, EST_REQUEST_ANSWER, (const char *)data, size, &lim);
  if (st != EST_OK) {
    if (st != EST_ERR_INVALID_ARGUMENT && st != EST_ERR_NO_MEMORY) abort();
    if (r.count || r.instances || r.json || !est_error_message()[0]) abort();
    return 0;
  }
  if (r.count == 0 || r.count > lim.max_instances || r.columnar) abort();
  for (size_t i = 0; i < r.count; i++) {
    const est_instance *x = &r.instances[i];
    if (!x->question || !x->context || x->text_a || x->text_b || x->input_ids) abort();
  }
  answer(&r, tok, false, data, size);
  answer(&r, tok, true, data, size);
  est_request_clear(&r);
  return 0;
}
