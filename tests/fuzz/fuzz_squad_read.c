/* libFuzzer target: SQuAD JSON (train-v1.1.json, dev-v2.0.json, ...) as run_squad reads it
 * (est_squad_read_examples_buffer, src/squad/squad_read.c), in its four modes (training or
 * prediction, SQuAD 1.1 or 2.0), then the examples of each mode cut into features with a
 * small vocab (est_squad_convert_examples, src/squad/squad_features.c), as run_squad does
 * before training or prediction.
 *
 * Invariants: a file either fails with INVALID_ARGUMENT and a message, giving no examples,
 * or gives examples whose strings and words are there and whose positions lie inside their
 * words (-1 where the reference has -1: a prediction, an impossible question, an answer
 * starting in the context's leading whitespace), counted as the header says; converting
 * them fails only with INVALID_ARGUMENT (a position the reference's IndexError stops at)
 * and gives windows of 1..max_seq_length real tokens whose training positions lie inside
 * the window (0, 0 when it does not hold the answer). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "est/log.h"
#include "est/squad.h"

static const char vocab_text[] =
    "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\nquick\nbrown\nfox\njump\n##s\n##ed\n##ing\nover\nlazy\ndog\n"
    "who\nwhat\nwhere\nis\na\nb\nc\n##a\n##b\n1\n##9\n.\n,\n!\n?\n'\"\n-\n(\n)\n\xe4\xb8\xad\n\xe6\x96\x87\n"
    "caf\xc3\xa9\nna\xc3\xafve\nun\n##want\n";

enum { SEQ = 24, STRIDE = 8, QUERY = 6 };

typedef struct {
  const est_squad_examples *ex;
  bool training;
} check_ctx;

static est_status check_feature(void *ctx, const est_squad_feature *f) {
  const check_ctx *c = ctx;
  if (f->example_index >= c->ex->count || f->num_tokens < 1 || f->num_tokens > SEQ) abort();
  if (f->doc_offset < 2 || f->doc_length < 0 || f->doc_offset + f->doc_length + 1 > f->num_tokens) abort();
  for (int t = 0; t < SEQ; t++)
    if (f->input_mask[t] != (t < f->num_tokens) || f->segment_ids[t] < 0 || f->segment_ids[t] > 1) abort();
  const size_t words = c->ex->examples[f->example_index].num_doc_tokens;
  for (int t = f->doc_offset; t < f->doc_offset + f->doc_length; t++)
    if (f->token_to_orig_map[t] < 0 || (size_t)f->token_to_orig_map[t] >= words) abort();
  if (c->training) {
    /* end is start - 1 where the answer's words tokenize to nothing (U+200B), as in the reference */
    if (f->start_position < 0 || f->start_position >= f->num_tokens || f->end_position < f->start_position - 1 ||
        f->end_position >= f->num_tokens)
      abort();
  } else if (f->start_position != -1 || f->end_position != -1) {
    abort();
  }
  return EST_OK;
}

static void check_examples(const est_squad_examples *ex, bool training, bool v2) {
  if (ex->count + ex->num_skipped != ex->num_questions || ex->num_with_answers > ex->num_questions) abort();
  if (!training && ex->num_skipped) abort();
  for (size_t i = 0; i < ex->count; i++) {
    const est_squad_example *e = &ex->examples[i];
    if (!e->qas_id || !e->question_text || e->paragraph_index >= ex->num_paragraphs) abort();
    if (e->num_doc_tokens && !e->doc_tokens) abort();
    for (size_t w = 0; w < e->num_doc_tokens; w++)
      if (!e->doc_tokens[w] || !e->doc_tokens[w][0]) abort();
    const int64_t n = (int64_t)e->num_doc_tokens;
    if (e->start_position < -1 || e->start_position >= n || e->end_position < -1 || e->end_position >= n) abort();
    if (!training) {
      if (e->orig_answer_text || e->start_position != -1 || e->end_position != -1 || e->is_impossible) abort();
    } else {
      if (!e->orig_answer_text || (e->is_impossible && !v2)) abort();
      if (e->is_impossible && (e->start_position != -1 || e->end_position != -1 || e->orig_answer_text[0])) abort();
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static est_vocab *vocab;
  static est_tokenizer *tok;
  if (!tok) {
    est_log_set_level(EST_LOG_OFF); /* "Could not find answer" per skipped question */
    if (est_vocab_load_buffer(&vocab, vocab_text, sizeof vocab_text - 1, "fuzz-vocab") != EST_OK ||
        est_tokenizer_create(&tok, vocab, true) != EST_OK)
      abort();
  }
  for (int mode = 0; mode < 4; mode++) {
    const bool training = mode & 1, v2 = mode & 2;
    est_squad_examples *ex = NULL;
    est_status st = est_squad_read_examples_buffer((const char *)data, size, "fuzz-squad.json", training, v2, &ex);
    if (st != EST_OK) {
      if (ex || (st != EST_ERR_INVALID_ARGUMENT && st != EST_ERR_NO_MEMORY) || !est_error_message()[0]) abort();
      continue;
    }
    check_examples(ex, training, v2);
    est_squad_feature_config fc = {.max_seq_length = SEQ, .doc_stride = STRIDE, .max_query_length = QUERY,
                                   .is_training = training, .quiet = true};
    check_ctx c = {.ex = ex, .training = training};
    st = est_squad_convert_examples(ex, tok, &fc, check_feature, &c);
    if (st != EST_OK && (st != EST_ERR_INVALID_ARGUMENT || !est_error_message()[0])) abort();
    est_squad_examples_free(ex);
  }
  return 0;
}
