/* est/squad.h — SQuAD files read as Google BERT's run_squad.py reads them, and scored as the
 * official SQuAD evaluation scripts score them (docs/squad.md).
 *
 *     est_squad_examples *ex;
 *     if (est_squad_read_examples("train-v1.1.json", true, false, &ex) != EST_OK)
 *       die(est_error_message());
 *     for (size_t i = 0; i < ex->count; i++) {
 *       const est_squad_example *e = &ex->examples[i];
 *       printf("%s: words %lld..%lld of %zu\n", e->qas_id, (long long)e->start_position,
 *              (long long)e->end_position, e->num_doc_tokens);
 *     }
 *
 *     est_tokenizer *tok;                              // features (docs/squad.md §7)
 *     est_tokenizer_open(&tok, "vocab.txt", true);
 *     est_squad_feature_config fc = est_squad_feature_config_default();
 *     fc.is_training = true;                           // 384 / 128 / 64
 *     est_squad_feature_writer *w;
 *     est_squad_feature_writer_open(&w, "train.tf_record", fc.max_seq_length, true);
 *     if (est_squad_convert_examples(ex, tok, &fc, est_squad_feature_writer_write, w) != EST_OK)
 *       die(est_error_message());
 *     est_squad_feature_writer_close(w); est_tokenizer_free(tok);
 *     est_squad_examples_free(ex);
 *
 *     est_squad_eval_config c = est_squad_eval_config_default();
 *     c.data_file = "dev-v2.0.json"; c.pred_file = "predictions.json";
 *     c.na_prob_file = "null_odds.json";
 *     est_squad_eval_result r;
 *     if (est_squad_evaluate(&c, &r) != EST_OK) die(est_error_message());
 *     char *json = est_squad_eval_json(&r, true);   // what evaluate-v2.0.py prints
 *     fputs(json, stdout);
 *     free(json); est_squad_eval_result_free(&r);
 *
 * Reading (docs/squad.md §2) is google-research/bert run_squad.py's read_squad_examples: the
 * context split on " ", "\t", "\r", "\n" and U+202F only; answer_start counted in code
 * points (Python characters); a training answer whose text cannot be found again in its
 * words logged ("Could not find answer: ...") and skipped. Scoring (§3, §4) is
 * evaluate-v1.1.py or evaluate-v2.0.py, to the last digit they print. Features (§7) are
 * convert_examples_to_features and FeatureWriter: windows of the tokenized context, every
 * field and record as the reference's, one example at a time through a callback, with its
 * INFO log of the first 20 examples.
 */
#ifndef EST_SQUAD_H
#define EST_SQUAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "est/status.h"
#include "est/tokenizer.h"

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
  size_t num_with_answers;       /* questions whose "answers" is a non-empty array (any mode) */
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

/* Examples from texts in memory (a question about your own text): an empty set, then one
 * prediction question per call, its context split as the reader splits a file's
 * (whitespace " ", "\t", "\r", "\n", U+202F; context_size bytes of valid UTF-8).
 * *word_starts (may be NULL; owned by ex) receives, for each of the example's words, the
 * code point offset in the context where it begins. */
est_status est_squad_examples_create(est_squad_examples **out);
est_status est_squad_examples_add_text(est_squad_examples *ex, const char *qas_id, const char *question,
                                       const char *context, size_t context_size, const int64_t **word_starts);

/* ---- features: run_squad.py convert_examples_to_features + FeatureWriter ------------ */

/* The window settings (run_squad.py's flags of the same names). */
typedef struct est_squad_feature_config {
  int max_seq_length;            /* 384: [CLS] query [SEP] window [SEP] + zero padding */
  int doc_stride;                /* 128: tokens between the starts of two windows (at most) */
  int max_query_length;          /* 64: question tokens kept (the first ones) */
  bool is_training;              /* positions and is_impossible are filled and written */
  bool quiet;                    /* no INFO log of the first 20 examples' features (serving) */
} est_squad_feature_config;

est_squad_feature_config est_squad_feature_config_default(void);

/* One window of one example (run_squad.py's InputFeatures). Every array has max_seq_length
 * elements and belongs to the converter: valid during the callback only; copy what the
 * prediction step will need (docs/squad.md §7.5). */
typedef struct est_squad_feature {
  int64_t unique_id;             /* 1000000000, 1000000001, ... over the whole conversion */
  size_t example_index;          /* the example's index in est_squad_examples */
  int doc_span_index;            /* 0-based window number within the example */
  int num_tokens;                /* real tokens; input_mask is 1 exactly on [0, num_tokens) */
  const int32_t *input_ids;      /* vocab ids of tokens (est_vocab_token gives the tokens) */
  const int32_t *input_mask;
  const int32_t *segment_ids;    /* 0 for [CLS] query [SEP], 1 for window [SEP], 0 padding */
  /* The window: positions doc_offset .. doc_offset + doc_length - 1 of the feature are
   * document tokens (doc_offset = len(query) + 2). token_to_orig_map and
   * token_is_max_context are the reference's dicts over those positions: the word index
   * (into est_squad_example.doc_tokens) a token came from, and whether this window gives
   * the token its most context (_check_is_max_context). Outside the window: -1 and 0. */
  int doc_offset, doc_length;
  const int32_t *token_to_orig_map;
  const uint8_t *token_is_max_context;
  /* Training: the answer's first and last position in this feature, or 0, 0 when the
   * window does not hold the whole answer or the question is impossible. Prediction: -1
   * (the reference's None). */
  int64_t start_position, end_position;
  bool is_impossible;
} est_squad_feature;

/* Called once per feature, in the reference's order; anything but EST_OK stops the
 * conversion and is returned (with its message). */
typedef est_status (*est_squad_feature_fn)(void *ctx, const est_squad_feature *f);

/* The state of one conversion: the tokenizer, the settings, the next unique_id and scratch
 * rows. Converting one example at a time keeps memory at one example's tokens and one
 * feature, whatever the file's size. The tokenizer is borrowed (and used: not thread-safe). */
typedef struct est_squad_converter est_squad_converter;

/* INVALID_ARGUMENT for settings the reference cannot run with: max_seq_length <=
 * max_query_length + 3 (validate_flags_or_throw), doc_stride < 1 or max_query_length < 0
 * (its window loop would not end), a vocab without [CLS] or [SEP]. */
est_status est_squad_converter_create(est_squad_converter **out, est_tokenizer *tok,
                                      const est_squad_feature_config *cfg);
/* The features of one example, handed to fn. example_index is what the features carry
 * (the example's place in the sequence being converted). Errors name the question id:
 * a token "[UNK]" the vocab lacks (the reference's KeyError), a training example whose
 * positions fall outside its words (IndexError). */
est_status est_squad_converter_convert(est_squad_converter *c, const est_squad_example *ex,
                                       size_t example_index, est_squad_feature_fn fn, void *ctx);
/* The unique_id the next feature will get. */
int64_t est_squad_converter_next_unique_id(const est_squad_converter *c);
void est_squad_converter_free(est_squad_converter *c);

/* convert_examples_to_features(examples, tokenizer, ...) with output_fn = fn: every example
 * in order, example_index = its index. */
est_status est_squad_convert_examples(const est_squad_examples *examples, est_tokenizer *tok,
                                      const est_squad_feature_config *cfg, est_squad_feature_fn fn,
                                      void *ctx);

/* FeatureWriter.process_feature's tf.train.Example: int64 lists unique_ids [1], input_ids,
 * input_mask, segment_ids [max_seq_length] and, training, start_positions, end_positions,
 * is_impossible [1], serialized deterministically (map keys sorted, docs/squad.md §7.4).
 * *out is malloc'ed. */
est_status est_squad_feature_serialize(const est_squad_feature *f, int max_seq_length, bool is_training,
                                       uint8_t **out, size_t *size);

/* FeatureWriter: one TFRecord file of those Examples, written atomically on close. */
typedef struct est_squad_feature_writer est_squad_feature_writer;

est_status est_squad_feature_writer_open(est_squad_feature_writer **out, const char *path,
                                         int max_seq_length, bool is_training);
/* process_feature. Also usable directly as an est_squad_feature_fn with ctx = the writer. */
est_status est_squad_feature_writer_write(void *writer, const est_squad_feature *f);
/* Features written so far (num_features). */
int64_t est_squad_feature_writer_count(const est_squad_feature_writer *w);
/* Flush, fsync, rename; frees w whatever the result. */
est_status est_squad_feature_writer_close(est_squad_feature_writer *w);
/* Discards the file; frees w. NULL is fine. */
void est_squad_feature_writer_abort(est_squad_feature_writer *w);

/* ---- predictions: run_squad.py write_predictions ------------------------------------ */

/* write_predictions' flags (run_squad.py's names and defaults). */
typedef struct est_squad_prediction_config {
  int n_best_size;               /* 20 */
  int max_answer_length;         /* 30: tokens */
  bool version_2_with_negative;  /* false */
  double null_score_diff_threshold; /* 0.0 */
  bool verbose_logging;          /* get_final_text's INFO lines */
} est_squad_prediction_config;

est_squad_prediction_config est_squad_prediction_config_default(void);

/* What write_predictions needs of the features (their tokens, maps, unique_id) and the
 * model's results, kept compactly: feed it every feature of the predict file as the
 * converter hands them out (est_squad_predictor_add_feature is an est_squad_feature_fn),
 * then one result per feature (any order), then write. Examples and tokenizer are borrowed;
 * the tokenizer's do_lower_case is get_final_text's. */
typedef struct est_squad_predictor est_squad_predictor;

est_status est_squad_predictor_create(est_squad_predictor **out, const est_squad_examples *examples,
                                      est_tokenizer *tok, const est_squad_prediction_config *cfg);
est_status est_squad_predictor_add_feature(void *predictor, const est_squad_feature *f);
/* RawResult: the feature's logits over its max_seq_length positions (seq_len of them).
 * INVALID_ARGUMENT for a unique_id no feature has, or a second result for one. */
est_status est_squad_predictor_add_result(est_squad_predictor *p, int64_t unique_id, const float *start_logits,
                                          const float *end_logits, int seq_len);
int64_t est_squad_predictor_num_features(const est_squad_predictor *p);
/* write_predictions: predictions.json, nbest_predictions.json and (version 2) null_odds.json,
 * byte for byte as the reference writes them (json.dumps(..., indent=4) + "\n", floats as
 * Python's repr, ensure_ascii), each atomically; null_odds_file is ignored without version 2.
 * Where the reference fails, est answers (docs/squad.md §9): an example whose every n-best
 * entry is the null answer (version 2: AttributeError there) predicts "" with null odds
 * score_null; an example without a window (an empty context) predicts "" (version 2) or
 * "empty" (version 1). A feature without a result is an error naming its unique_id. */
est_status est_squad_predictor_write(est_squad_predictor *p, const char *prediction_file, const char *nbest_file,
                                     const char *null_odds_file);
void est_squad_predictor_free(est_squad_predictor *p);

/* What write_predictions would put in predictions.json for one example, with where it is. */
typedef struct est_squad_answer {
  char *text;                    /* malloc'ed; "" for version 2's null answer */
  double probability;            /* its entry's probability in the n-best (the softmax) */
  /* Its first and last code point as (word index, code point in that word), the last
   * inclusive; all -1 when text is "" or the reference's "empty" (no valid span). */
  int64_t start_word, start_in_word, end_word, end_in_word;
} est_squad_answer;

/* The answer of examples[example_index], exactly as est_squad_predictor_write picks it
 * (same n-best, get_final_text, null threshold); needs a result for each of its features.
 * Clear it with est_squad_answer_clear. */
est_status est_squad_predictor_best(est_squad_predictor *p, size_t example_index, est_squad_answer *out);
void est_squad_answer_clear(est_squad_answer *a);

/* ---- scoring: evaluate-v1.1.py and evaluate-v2.0.py ------------------------------- */

/* Which script to be. */
typedef enum est_squad_eval_version {
  EST_SQUAD_EVAL_AUTO = 0,       /* by the data's "version": "1.x" -> v1.1, "2.x"/"v2.x" -> v2.0 */
  EST_SQUAD_EVAL_V1_1 = 1,
  EST_SQUAD_EVAL_V2_0 = 2,
} est_squad_eval_version;

/* evaluate-v2.0.py adds its F1 scores up with Python's sum(), which changed: plain
 * left-to-right addition up to Python 3.11, Neumaier's compensated sum for floats from
 * 3.12 (ints added plainly), and for ints too from 3.14. The last printed digit of "f1"
 * and "HasAns_f1" can differ between them (docs/squad.md §4.4). */
typedef enum est_squad_python_sum {
  EST_SQUAD_SUM_PY311 = 0,       /* Python <= 3.11 (Debian 12's python3): the default */
  EST_SQUAD_SUM_PY312 = 1,       /* Python 3.12, 3.13 */
  EST_SQUAD_SUM_PY314 = 2,       /* Python 3.14 and later */
} est_squad_python_sum;

/* "3.11" -> PY311 (and any 2.x or 3.0-3.11), "3.12"/"3.13" -> PY312, "3.14" and later ->
 * PY314. INVALID_ARGUMENT for anything else. */
est_status est_squad_python_sum_parse(const char *version, est_squad_python_sum *out);

/* The scripts' own messages, in the order they print them, with the stream they use:
 * v1.1 "Unanswered question ID will receive score 0." and the version mismatch on stderr,
 * v2.0 "Missing prediction for ID" on stdout. */
typedef void (*est_squad_message_fn)(void *ctx, bool to_stderr, const char *line);

typedef struct est_squad_eval_config {
  const char *data_file;         /* required: the SQuAD JSON the predictions answer */
  const char *pred_file;         /* required: {"question id": "answer text", ...} */
  const char *na_prob_file;      /* v2.0 only, optional: {"question id": probability, ...} */
  double na_prob_thresh;         /* v2.0: predict "" when the na_prob exceeds it (1.0) */
  est_squad_eval_version version;
  est_squad_python_sum python_sum;
  est_squad_message_fn message;  /* NULL: est_log warnings */
  void *message_ctx;
} est_squad_eval_config;

est_squad_eval_config est_squad_eval_config_default(void);

/* A number as the scripts print it: an int (from a JSON integer) or a float. */
typedef struct est_squad_number {
  bool is_int;
  int64_t i;
  double f;
} est_squad_number;

typedef struct est_squad_eval_result {
  est_squad_eval_version version;  /* V1_1 or V2_0: the script that was run */
  /* v1.1: exact_match and f1. v2.0: exact, f1 and total; the HasAns_* / NoAns_* triples
   * when the data has such questions; best_* when na_prob_file was given. Percentages. */
  double exact, f1;
  int64_t total;
  bool has_has_ans, has_no_ans, has_best;
  double has_ans_exact, has_ans_f1, no_ans_exact, no_ans_f1;
  int64_t has_ans_total, no_ans_total;
  double best_exact, best_f1;
  est_squad_number best_exact_thresh, best_f1_thresh;
  int64_t num_missing;           /* questions without a prediction (v1.1: scored 0) */
} est_squad_eval_result;

/* Runs the script est_squad_eval_config.version names on the files. Errors name the file,
 * the question id and the field: a missing or unreadable file, bad JSON, a missing field, a
 * prediction that is not a string, a na_prob that is not a number, a question without a
 * prediction in v2.0 (where the script stops with a KeyError after its "Missing prediction"
 * lines), a v1.1 question without answers (where the script's max() fails). */
est_status est_squad_evaluate(const est_squad_eval_config *cfg, est_squad_eval_result *out);

/* The result as the script prints it, malloc'ed (NULL only for lack of memory).
 * v1.1: json.dumps(dict) + "\n". v2.0: indent=true: json.dumps(indent=2) + "\n" (stdout);
 * indent=false: json.dump without indent and without a newline (its --out-file). */
char *est_squad_eval_json(const est_squad_eval_result *r, bool indent);

/* Nothing to free today; kept so callers stay correct if the result grows. */
void est_squad_eval_result_free(est_squad_eval_result *r);

/* Python's repr() of a float (shortest round-trip digits, "1e-05", "50.0", "1e+16"), as
 * json.dumps writes it ("NaN", "Infinity", "-Infinity"). Returns buf. size >= 32. */
char *est_squad_format_pyfloat(double v, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif
