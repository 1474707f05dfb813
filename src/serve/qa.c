/* Question answering with a "squad" servable (est/serving.h, docs/squad.md §11): a question
 * and a context in memory -> run_squad.py's features -> one forward pass over every window
 * -> write_predictions' answer. Nothing here is SQuAD-specific code of its own: the context
 * is split by the reader's rules (est_squad_examples_add_text), cut into windows by
 * est_squad_converter, and answered by est_squad_predictor, the code `est run_squad`
 * predicts with; this file only keeps the windows' rows together and maps the answer's
 * words back to character offsets in the context.
 *
 * Rows: [rows, S] input_ids / input_mask / segment_ids, S = max_seq_length; the servable's
 * output per row is [start_logits S | end_logits S]. A window's logits are handed to the
 * predictor over its real tokens only, so padding (whose length depends on the batch a
 * window ran in) never takes a place in the n-best: the answer is the same whichever
 * batch the window was in. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/float_format.h"
#include "est/serving.h"
#include "est/squad.h"

struct est_qa_batch {
  const est_servable *s;
  int S;
  est_tokenizer *tok;
  est_squad_examples *examples;
  const int64_t **word_starts;    /* [count]: per example, each word's first code point */
  est_squad_predictor *predictor;
  int64_t first_unique_id;
  int32_t *ids, *mask, *segs;     /* [rows, S] */
  int *num_tokens;                /* [rows] */
  int rows, cap, longest;
};

void est_qa_answer_clear(est_qa_answer *a) {
  free(a->text);
  memset(a, 0, sizeof *a);
}

void est_qa_answer_write_json(FILE *out, const est_qa_answer *a) {
  char num[48];
  fputs("{\"answer\": ", out);
  est_py_json_string(out, a->text ? a->text : "");
  fprintf(out, ", \"start\": %lld, \"end\": %lld, \"score\": %s}", (long long)a->start, (long long)a->end,
          est_format_float32((float)a->score, num, sizeof num));
}

void est_qa_batch_free(est_qa_batch *b) {
  if (!b) return;
  est_squad_predictor_free(b->predictor);
  est_squad_examples_free(b->examples);
  est_tokenizer_free(b->tok);
  free(b->word_starts);
  free(b->ids), free(b->mask), free(b->segs), free(b->num_tokens);
  free(b);
}

/* The converter's callback: the feature kept for the predictor and its row appended. */
static est_status add_window(void *ctx, const est_squad_feature *f) {
  est_qa_batch *b = ctx;
  if (b->rows == b->cap) {
    const int cap = b->cap ? 2 * b->cap : 16;
    const size_t n = (size_t)cap * b->S;
    int32_t *ids = realloc(b->ids, n * sizeof *ids);
    if (ids) b->ids = ids;
    int32_t *mask = realloc(b->mask, n * sizeof *mask);
    if (mask) b->mask = mask;
    int32_t *segs = realloc(b->segs, n * sizeof *segs);
    if (segs) b->segs = segs;
    int *lens = realloc(b->num_tokens, (size_t)cap * sizeof *lens);
    if (lens) b->num_tokens = lens;
    if (!ids || !mask || !segs || !lens) return est_error(EST_ERR_NO_MEMORY, "question answering: %d windows", cap);
    b->cap = cap;
  }
  const size_t off = (size_t)b->rows * b->S, row = (size_t)b->S * sizeof(int32_t);
  memcpy(b->ids + off, f->input_ids, row);
  memcpy(b->mask + off, f->input_mask, row);
  memcpy(b->segs + off, f->segment_ids, row);
  b->num_tokens[b->rows++] = f->num_tokens;
  if (f->num_tokens > b->longest) b->longest = f->num_tokens;
  return est_squad_predictor_add_feature(b->predictor, f);
}

est_status est_qa_batch_create(est_qa_batch **out, const est_servable *s, const char *const *questions,
                               const char *const *contexts, size_t count) {
  *out = NULL;
  const est_model_meta *meta = est_servable_meta(s);
  if (strcmp(meta->head, "squad"))
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: a \"%s\" model does not answer questions (it needs the squad "
                     "head: est run_squad --do_export)", est_servable_dir(s), meta->head);
  est_qa_batch *b = calloc(1, sizeof *b);
  if (!b) return est_error(EST_ERR_NO_MEMORY, "question answering");
  b->s = s;
  b->S = meta->max_seq_length;
  const est_model_squad *q = &meta->squad;
  const est_squad_feature_config fc = {.max_seq_length = b->S, .doc_stride = q->doc_stride,
                                       .max_query_length = q->max_query_length, .is_training = false,
                                       .quiet = true};
  const est_squad_prediction_config pc = {.n_best_size = q->n_best_size, .max_answer_length = q->max_answer_length,
                                          .version_2_with_negative = q->version_2_with_negative,
                                          .null_score_diff_threshold = q->null_score_diff_threshold};
  est_squad_converter *conv = NULL;
  est_status st = est_servable_tokenizer_create(s, &b->tok); /* the export's tokenizer.json rules too */
  if (st == EST_OK) st = est_squad_examples_create(&b->examples);
  if (st == EST_OK && !(b->word_starts = calloc(count ? count : 1, sizeof *b->word_starts)))
    st = est_error(EST_ERR_NO_MEMORY, "question answering");
  for (size_t i = 0; st == EST_OK && i < count; i++) {
    char id[32];
    snprintf(id, sizeof id, "%zu", i);
    st = est_squad_examples_add_text(b->examples, id, questions[i], contexts[i], strlen(contexts[i]),
                                     &b->word_starts[i]);
    if (st != EST_OK) est_error_prefix("question %zu: ", i);
  }
  if (st == EST_OK) st = est_squad_predictor_create(&b->predictor, b->examples, b->tok, &pc);
  if (st == EST_OK) st = est_squad_converter_create(&conv, b->tok, &fc);
  if (st == EST_OK) b->first_unique_id = est_squad_converter_next_unique_id(conv);
  for (size_t i = 0; st == EST_OK && i < count; i++)
    if ((st = est_squad_converter_convert(conv, &b->examples->examples[i], i, add_window, b)) != EST_OK)
      est_error_prefix("question %zu: ", i);
  est_squad_converter_free(conv);
  if (st != EST_OK) {
    est_qa_batch_free(b);
    return st;
  }
  *out = b;
  return EST_OK;
}

int est_qa_batch_rows(const est_qa_batch *b) { return b->rows; }

void est_qa_batch_features(const est_qa_batch *b, const int32_t **input_ids, const int32_t **input_mask,
                           const int32_t **segment_ids, int *longest) {
  *input_ids = b->ids, *input_mask = b->mask, *segment_ids = b->segs;
  *longest = b->longest;
}

est_status est_qa_batch_answers(est_qa_batch *b, const float *outputs, est_qa_answer *answers) {
  const size_t W = (size_t)est_servable_output_width(b->s), count = b->examples->count;
  for (size_t i = 0; i < count; i++) answers[i] = (est_qa_answer){.start = -1, .end = -1};
  est_status st = EST_OK;
  for (int r = 0; st == EST_OK && r < b->rows; r++) {
    const float *row = outputs + (size_t)r * W;
    st = est_squad_predictor_add_result(b->predictor, b->first_unique_id + r, row, row + b->S, b->num_tokens[r]);
  }
  for (size_t i = 0; st == EST_OK && i < count; i++) {
    est_squad_answer a;
    if ((st = est_squad_predictor_best(b->predictor, i, &a)) != EST_OK) break;
    answers[i].text = a.text;
    answers[i].score = a.probability;
    if (a.start_word >= 0) {
      answers[i].start = b->word_starts[i][a.start_word] + a.start_in_word;
      answers[i].end = b->word_starts[i][a.end_word] + a.end_in_word + 1;
    }
  }
  if (st != EST_OK)
    for (size_t i = 0; i < count; i++) est_qa_answer_clear(&answers[i]);
  return st;
}

est_status est_qa_answer_questions(est_servable *s, const char *const *questions, const char *const *contexts,
                                   size_t count, est_qa_answer *answers) {
  est_qa_batch *b;
  est_status st = est_qa_batch_create(&b, s, questions, contexts, count);
  if (st != EST_OK) return st;
  const int32_t *ids, *mask, *segs;
  int longest;
  est_qa_batch_features(b, &ids, &mask, &segs, &longest);
  const int S = est_servable_meta(s)->max_seq_length;
  float *outputs = malloc(((size_t)b->rows + 1) * (size_t)est_servable_output_width(s) * sizeof(float));
  if (!outputs) st = est_error(EST_ERR_NO_MEMORY, "question answering: outputs of %d windows", b->rows);
  if (st == EST_OK && b->rows)
    st = est_servable_predict_strided(s, ids, mask, segs, b->rows, S, est_serving_bucket_length(longest, S), outputs);
  if (st == EST_OK) st = est_qa_batch_answers(b, outputs, answers);
  free(outputs);
  est_qa_batch_free(b);
  return st;
}
