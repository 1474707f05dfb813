/* est/squad.h — SQuAD files read as Google BERT's run_squad.py reads them (docs/squad.md).
 *
 *     est_squad_examples *ex;
 *     if (est_squad_read_examples("train-v1.1.json", true, false, &ex) != EST_OK)
 *       die(est_error_message());
 *     for (size_t i = 0; i < ex->count; i++) {
 *       const est_squad_example *e = &ex->examples[i];
 *       printf("%s: words %lld..%lld of %zu\n", e->qas_id, (long long)e->start_position,
 *              (long long)e->end_position, e->num_doc_tokens);
 *     }
 *     est_squad_examples_free(ex);
 *
 * Reading (docs/squad.md §2) is google-research/bert run_squad.py's read_squad_examples: the
 * context split on " ", "\t", "\r", "\n" and U+202F only; answer_start counted in code
 * points (Python characters); a training answer whose text cannot be found again in its
 * words logged ("Could not find answer: ...") and skipped.
 */
#ifndef EST_SQUAD_H
#define EST_SQUAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "est/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- reading: run_squad.py read_squad_examples ------------------------------------- */

/* One question (run_squad.py's SquadExample). Strings are UTF-8, NUL-terminated, owned by
 * the est_squad_examples they came from. */
typedef struct est_squad_example {
  const char *qas_id;
  const char *question_text;
  /* The paragraph's context split into words (shared by all its questions). */
  const char *const *doc_tokens;
  size_t num_doc_tokens;
  size_t paragraph_index;        /* 0-based over the whole file, in file order */
  /* Training: the answer's text as the file has it ("" for an impossible question).
   * Prediction: NULL (the reference's None), and both positions are -1. */
  const char *orig_answer_text;
  /* Word indices of the answer's first and last character. -1 for an impossible question;
   * also -1 (start) when answer_start falls on the context's leading whitespace, as in
   * the reference (docs/squad.md §2.3). */
  int64_t start_position, end_position;
  bool is_impossible;            /* read only when training with version_2_with_negative */
} est_squad_example;

typedef struct est_squad_examples {
  est_squad_example *examples;   /* file order, skipped questions left out */
  size_t count;
  size_t num_paragraphs;
  size_t num_questions;          /* questions in the file */
  size_t num_skipped;            /* training: logged "Could not find answer" and left out */
  struct est_squad_storage *storage_; /* private */
} est_squad_examples;

/* read_squad_examples(path, is_training) with FLAGS.version_2_with_negative. Errors
 * (INVALID_ARGUMENT; NOT_FOUND / IO for the file) name the file, the JSON path
 * ("data[0].paragraphs[3].qas[1]"), the question id once known, and the field: not JSON,
 * a missing field or one of the wrong type, an answer_start outside the context, a training
 * question without exactly one answer ("For training, each question should have exactly 1
 * answer."). Warnings go to est_log. */
est_status est_squad_read_examples(const char *path, bool is_training, bool version_2_with_negative,
                                   est_squad_examples **out);
/* The same from memory; `name` stands for the file in messages. */
est_status est_squad_read_examples_buffer(const char *data, size_t size, const char *name, bool is_training,
                                          bool version_2_with_negative, est_squad_examples **out);
void est_squad_examples_free(est_squad_examples *ex);

#ifdef __cplusplus
}
#endif
#endif
