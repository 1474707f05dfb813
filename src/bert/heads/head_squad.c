/* run_squad.py create_model's head as an est_bert_head_type (est/bert_head.h): a span
 * start and end logit for every position of the encoder's sequence output (docs/squad.md §8).
 *
 *   logits[B*S, 2] = sequence_output[B*S, H] . cls/squad/output_weights[2, H]^T + output_bias[2]
 *   start_logits[B, S] = logits[:, :, 0], end_logits[B, S] = logits[:, :, 1]
 *
 *   TRAIN    loss = (start_loss + end_loss) / 2, each the batch mean of
 *            -log_softmax(logits over all S positions)[position]: every position counts,
 *            padding included, as the reference's compute_loss (one_hot over seq_length).
 *            Features start_positions, end_positions [B].
 *   EVAL     the same loss (run_squad.py has no eval mode; est's Estimator can report it).
 *   PREDICT  "unique_ids" [B] (the feature), "start_logits" and "end_logits" [B, S].
 *
 * Served (est/served_head.h, the second half of this file): est_model.json's "squad" holds
 * run_squad's prediction flags; requests and input lines {"question", "context"}, answered
 * {"answer", "start", "end", "score"}. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/json_error.h"
#include "est/bert_head.h"
#include "est/float_format.h"
#include "est/nn.h"
#include "est/served_head.h"
#include "est/squad.h"

typedef struct squad_head {
  est_bert_encoder *enc;
  est_var_store *vs;
  int H, w, b;                    /* cls/squad/output_weights [2, H], output_bias [2] */
  int max_B, max_S;
  /* one batch: [B*S*2] interleaved as the GEMM writes them; [B*S] each; [B] each */
  float *logits, *start, *end, *start_probs, *end_probs, *losses, *dlogits, *dstart, *dend;
  int32_t *positions;             /* [2 * max_B]: start then end positions of the last forward */
  int B, S, valid;                /* the last forward; valid: it had positions */
  est_tensor outputs[3];
  est_bert_grads_ready_fn ready_fn;
  void *ready_ctx;
} squad_head;

static const char *const PREDICTION_NAMES[] = {"unique_ids", "start_logits", "end_logits"};

static void squad_free(void *head) {
  squad_head *h = head;
  if (!h) return;
  free(h->logits);
  free(h->positions);
  free(h);
}

static est_status squad_create(void **out, const est_bert_head_context *ctx) {
  squad_head *h = calloc(1, sizeof *h);
  if (!h) return est_error(EST_ERR_NO_MEMORY, "squad head: out of memory");
  *out = h;
  h->enc = ctx->encoder;
  h->vs = ctx->vars;
  h->H = est_bert_encoder_config(ctx->encoder)->hidden_size;
  /* run_squad.py: truncated_normal_initializer(stddev=0.02) and zeros, whatever
   * initializer_range says */
  int64_t wdims[2] = {2, h->H}, bdims[1] = {2};
  est_status st = est_vars_declare(h->vs, "cls/squad/output_weights", 2, wdims, est_init_truncated_normal(0.02f),
                                   &h->w);
  if (st == EST_OK) st = est_vars_declare(h->vs, "cls/squad/output_bias", 1, bdims, est_init_zeros(), &h->b);
  return st == EST_OK ? EST_OK : est_error_prefix("declaring the squad head's variables: ");
}

static est_status squad_reserve(void *head, const est_bert_head_context *ctx) {
  squad_head *h = head;
  free(h->logits);
  free(h->positions);
  h->max_B = ctx->max_batch;
  h->max_S = ctx->max_seq_length;
  const size_t T = (size_t)h->max_B * (size_t)h->max_S, B = (size_t)h->max_B;
  /* one block: logits and dlogits [T*2], start, end, their probs, dstart, dend [T], losses [2B] */
  h->logits = malloc((4 * T + 6 * T + 2 * B) * sizeof(float));
  h->positions = malloc(2 * B * sizeof(int32_t));
  if (!h->logits || !h->positions) return est_error(EST_ERR_NO_MEMORY, "squad head: out of memory for %zu rows", T);
  h->dlogits = h->logits + 2 * T;
  h->start = h->dlogits + 2 * T;
  h->end = h->start + T;
  h->start_probs = h->end + T;
  h->end_probs = h->start_probs + T;
  h->dstart = h->end_probs + T;
  h->dend = h->dstart + T;
  h->losses = h->dend + T;
  return EST_OK;
}

/* start_positions or end_positions [B] into dst, each a position in [0, S). */
static est_status read_positions(const est_features *f, const char *name, int B, int S, int32_t *dst) {
  const est_tensor *t;
  est_status st = est_features_get(f, name, EST_DT_INT32, 1, &t);
  if (st != EST_OK) return st;
  const int32_t *v = t->data;
  for (int i = 0; i < B; i++) {
    if (v[i] < 0 || v[i] >= S)
      return est_error(EST_ERR_INVALID_ARGUMENT, "%s[%d] = %d is outside the sequence [0, %d)", name, i, (int)v[i], S);
    dst[i] = v[i];
  }
  return EST_OK;
}

/* The batch mean of -log softmax(logits[b, :])[positions[b]] (probs kept for backward). */
static double position_loss(float *losses, float *probs, const float *logits, const int32_t *positions, int B,
                            int S) {
  est_crossentropy_forward(losses, probs, logits, positions, B, S); /* positions checked already */
  double sum = 0.0;
  for (int b = 0; b < B; b++) sum += losses[b];
  return sum / B;
}

static est_status squad_forward(void *head, const est_bert_head_batch *b, float *loss) {
  squad_head *h = head;
  h->valid = 0;
  const int B = b->batch, S = b->seq_len, H = h->H;
  if (B <= 0 || B > h->max_B || S > h->max_S)
    return est_error(EST_ERR_INVALID_ARGUMENT, "squad head: a batch of %d x %d exceeds the reservation %d x %d", B, S,
                     h->max_B, h->max_S);
  const size_t T = (size_t)B * S;
  est_matmul_forward(h->logits, est_bert_encoder_sequence_output(h->enc), est_vars_value(h->vs, (size_t)h->w),
                     est_vars_value(h->vs, (size_t)h->b), (int)T, H, 2, 1,
                     est_precision_of_logits(est_bert_encoder_precision(h->enc)));
  for (size_t t = 0; t < T; t++) h->start[t] = h->logits[2 * t], h->end[t] = h->logits[2 * t + 1];
  h->B = B;
  h->S = S;
  if (b->mode == EST_MODE_PREDICT) return EST_OK;
  int32_t *start_pos = h->positions, *end_pos = h->positions + B;
  est_status st = read_positions(b->features, "start_positions", B, S, start_pos);
  if (st == EST_OK) st = read_positions(b->features, "end_positions", B, S, end_pos);
  if (st != EST_OK) return st;
  const double start_loss = position_loss(h->losses, h->start_probs, h->start, start_pos, B, S);
  const double end_loss = position_loss(h->losses + B, h->end_probs, h->end, end_pos, B, S);
  if (loss) *loss = (float)((start_loss + end_loss) / 2.0);
  h->valid = 1;
  return EST_OK;
}

static est_status squad_backward(void *head) {
  squad_head *h = head;
  if (!h->valid)
    return est_error(EST_ERR_FAILED_PRECONDITION, "squad head backward needs a forward with positions just before it");
  float *dseq = est_bert_encoder_sequence_output_grad(h->enc);
  if (!dseq) return est_error(EST_ERR_FAILED_PRECONDITION, "BERT backward: the activations were reserved forward-only");
  h->valid = 0;
  const int B = h->B, S = h->S;
  const size_t T = (size_t)B * S;
  /* loss = (mean_b start + mean_b end) / 2: each row's d logits is (p - onehot) / (2B) */
  memset(h->dstart, 0, 2 * T * sizeof(float)); /* dstart and dend are adjacent */
  est_crossentropy_backward(h->dstart, h->start_probs, h->positions, 0.5f / (float)B, B, S);
  est_crossentropy_backward(h->dend, h->end_probs, h->positions + B, 0.5f / (float)B, B, S);
  for (size_t t = 0; t < T; t++) h->dlogits[2 * t] = h->dstart[t], h->dlogits[2 * t + 1] = h->dend[t];
  est_matmul_backward(dseq, est_vars_grad(h->vs, (size_t)h->w), est_vars_grad(h->vs, (size_t)h->b), h->dlogits,
                      est_bert_encoder_sequence_output(h->enc), est_vars_value(h->vs, (size_t)h->w), (int)T, h->H, 2,
                      1, est_bert_encoder_precision(h->enc));
  est_bert_report_grads_ready(h->vs, (size_t)h->w, (size_t)h->b, h->ready_fn, h->ready_ctx);
  return EST_OK;
}

static est_status squad_predictions(void *head, const est_bert_head_batch *b, est_estimator_spec *spec) {
  squad_head *h = head;
  const est_tensor *ids;
  est_status st = est_features_get(b->features, "unique_ids", EST_DT_INT32, 1, &ids);
  if (st != EST_OK) return st;
  h->outputs[0] = *ids;
  h->outputs[1] = (est_tensor){.dtype = EST_DT_FLOAT, .rank = 2, .dims = {h->B, h->S}, .data = h->start};
  h->outputs[2] = (est_tensor){.dtype = EST_DT_FLOAT, .rank = 2, .dims = {h->B, h->S}, .data = h->end};
  spec->num_predictions = 3;
  spec->prediction_names = PREDICTION_NAMES;
  spec->predictions = h->outputs;
  return EST_OK;
}

static void squad_set_grads_ready(void *head, est_bert_grads_ready_fn fn, void *ctx) {
  squad_head *h = head;
  h->ready_fn = fn;
  h->ready_ctx = fn ? ctx : NULL;
}

const est_bert_head_type est_bert_squad_head_type = {
  .name = "squad",
  .create = squad_create,
  .reserve = squad_reserve,
  .forward = squad_forward,
  .backward = squad_backward,
  .predictions = squad_predictions,
  .set_grads_ready = squad_set_grads_ready,
  .free = squad_free,
};

/* ---- serving: question answering ------------------------------------------------------------
 *
 * A question and a context in memory -> run_squad.py's features -> one forward pass over every
 * window -> write_predictions' answer (docs/squad.md §11). Nothing here is SQuAD code of its
 * own: the context is split by the reader's rules (est_squad_examples_add_text), cut into
 * windows by est_squad_converter, and answered by est_squad_predictor, the code `est run_squad`
 * predicts with; this part only keeps the windows' rows together and maps the answer's words
 * back to character offsets in the context.
 *
 * Rows: [rows, S] input_ids / input_mask / segment_ids, S = max_seq_length; the servable's
 * output per row is [start_logits S | end_logits S]. A window's logits are handed to the
 * predictor over its real tokens only, so padding (whose length depends on the batch a window
 * ran in) never takes a place in the n-best: the answer is the same whichever batch the window
 * was in. */

/* est_model.json's "squad" object: run_squad's prediction flags. */
static est_status squad_read_config(void *config, const json_t *root, const char *path) {
  est_model_squad *q = config;
  const json_t *o = json_object_get(root, "squad");
  if (!json_is_object(o)) return est_error(EST_ERR_INVALID_ARGUMENT, "%s: \"squad\" must be an object", path);
  const struct {
    const char *name;
    int *dst, lo;
  } ints[] = {{"doc_stride", &q->doc_stride, 1}, {"max_query_length", &q->max_query_length, 0},
              {"n_best_size", &q->n_best_size, 1}, {"max_answer_length", &q->max_answer_length, 1}};
  for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
    const json_t *v = json_object_get(o, ints[i].name);
    if (!json_is_integer(v) || json_integer_value(v) < ints[i].lo || json_integer_value(v) > 1 << 20)
      return est_error(EST_ERR_INVALID_ARGUMENT, "%s: \"squad\".\"%s\" must be an integer >= %d", path, ints[i].name,
                       ints[i].lo);
    *ints[i].dst = (int)json_integer_value(v);
  }
  const json_t *v2 = json_object_get(o, "version_2_with_negative"), *thr = json_object_get(o, "null_score_diff_threshold");
  if (!json_is_boolean(v2))
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: \"squad\".\"version_2_with_negative\" must be true or false", path);
  if (!json_is_number(thr))
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: \"squad\".\"null_score_diff_threshold\" must be a number", path);
  q->version_2_with_negative = json_is_true(v2);
  q->null_score_diff_threshold = json_number_value(thr);
  return EST_OK;
}

static est_status squad_write_config(const void *config, json_t *root) {
  const est_model_squad *q = config;
  json_t *o = json_pack("{s:i, s:i, s:i, s:i, s:b, s:f}", "doc_stride", q->doc_stride, "max_query_length",
                        q->max_query_length, "n_best_size", q->n_best_size, "max_answer_length", q->max_answer_length,
                        "version_2_with_negative", q->version_2_with_negative, "null_score_diff_threshold",
                        q->null_score_diff_threshold);
  return o && !json_object_set_new(root, "squad", o) ? EST_OK : est_error(EST_ERR_NO_MEMORY, "est_model.json");
}

/* A *ForQuestionAnswering directory: run_squad.py's flag defaults (SQuAD 1.1), doc_stride
 * and max_query_length at most a quarter of the model's positions (a small model's windows
 * must still hold the question and some context). */
static est_status squad_hf_config(void *config, const json_t *root, const char *path) {
  (void)path;
  const json_t *pos = json_object_get(root, "max_position_embeddings");
  long long S = json_is_integer(pos) ? json_integer_value(pos) : 512;
  if (S > 512) S = 512;
  const int quarter = S / 4 > 1 ? (int)(S / 4) : 1;
  *(est_model_squad *)config = (est_model_squad){.doc_stride = quarter < 128 ? quarter : 128,
                                                 .max_query_length = quarter < 64 ? quarter : 64,
                                                 .n_best_size = 20, .max_answer_length = 30,
                                                 .version_2_with_negative = false, .null_score_diff_threshold = 0.0};
  return EST_OK;
}

/* [start_logits | end_logits], max_seq_length each; the layer has no parameters. */
static int squad_served_params(void *params, const est_model_meta *meta) {
  (void)params;
  return 2 * meta->max_seq_length;
}

static void squad_signature(const est_model_meta *meta, int width, json_t *outputs, json_t *metadata) {
  (void)meta, (void)width, (void)metadata;
  json_object_set_new(outputs, "answer", est_served_tensor_info("answer", "DT_STRING", -1, 0));
  json_object_set_new(outputs, "start", est_served_tensor_info("start", "DT_INT64", -1, 0));
  json_object_set_new(outputs, "end", est_served_tensor_info("end", "DT_INT64", -1, 0));
  json_object_set_new(outputs, "score", est_served_tensor_info("score", "DT_FLOAT", -1, 0));
}

/* One answer: write_predictions' choice for the question (predictions.json's text), its code
 * point (Python character) offsets in the context, end exclusive (-1, -1 when text is "" or
 * "empty": no span qualified), and its probability among the n-best. */
typedef struct qa_answer {
  char *text;
  int64_t start, end;
  double score;
} qa_answer;

typedef struct qa_batch {
  const est_served_context *ctx;
  int S;
  char **questions, **contexts;   /* [count]: the instances, copied */
  qa_answer *answers;             /* [count] */
  size_t count, cap;
  /* the windows, made by qa_rows */
  int made;
  est_squad_examples *examples;
  const int64_t **word_starts;    /* [count]: per example, each word's first code point */
  est_squad_predictor *predictor;
  int64_t first_unique_id;
  int32_t *ids, *mask, *segs;     /* [rows, S] */
  int *num_tokens;                /* [rows] */
  int rows, rows_cap, longest;
} qa_batch;

static void clear_answers(qa_batch *b) {
  for (size_t i = 0; b->answers && i < b->count; i++) {
    free(b->answers[i].text);
    b->answers[i] = (qa_answer){.start = -1, .end = -1};
  }
}

static void qa_batch_free(void *batch) {
  qa_batch *b = batch;
  if (!b) return;
  clear_answers(b);
  for (size_t i = 0; i < b->count; i++) free(b->questions[i]), free(b->contexts[i]);
  free(b->questions), free(b->contexts), free(b->answers);
  est_squad_predictor_free(b->predictor);
  est_squad_examples_free(b->examples);
  free(b->word_starts);
  free(b->ids), free(b->mask), free(b->segs), free(b->num_tokens);
  free(b);
}

static est_status qa_batch_create(void **batch, const est_served_context *ctx) {
  qa_batch *b = calloc(1, sizeof *b);
  if (!b) return est_error(EST_ERR_NO_MEMORY, "question answering");
  b->ctx = ctx;
  b->S = ctx->meta->max_seq_length;
  *batch = b;
  return EST_OK;
}

/* The next question, copied. */
static est_status add_question(qa_batch *b, const char *question, const char *context) {
  if (b->count == b->cap) {
    const size_t cap = b->cap ? 2 * b->cap : 16;
    if (!EST_RESIZE(b->questions, cap) || !EST_RESIZE(b->contexts, cap) || !EST_RESIZE(b->answers, cap))
      return est_error(EST_ERR_NO_MEMORY, "question answering: %zu questions", cap);
    b->cap = cap;
  }
  b->questions[b->count] = strdup(question);
  b->contexts[b->count] = strdup(context);
  b->answers[b->count] = (qa_answer){.start = -1, .end = -1};
  b->count++;
  if (!b->questions[b->count - 1] || !b->contexts[b->count - 1])
    return est_error(EST_ERR_NO_MEMORY, "question answering: question %zu", b->count - 1);
  return EST_OK;
}

static est_status qa_add_instance(void *batch, const est_instance *in, size_t i) {
  (void)i;
  return add_question(batch, in->texts[0], in->texts[1]);
}

/* A line's string field, or an error naming the line and the field. */
static est_status line_field(const json_t *o, const char *name, const char *src, long lineno, const char **out) {
  const json_t *v = json_object_get(o, name);
  if (!v) return est_error(EST_ERR_INVALID_ARGUMENT, "%s:%ld: missing \"%s\" (a string)", src, lineno, name);
  if (!json_is_string(v)) return est_error(EST_ERR_INVALID_ARGUMENT, "%s:%ld: \"%s\" must be a string", src, lineno, name);
  *out = json_string_value(v);
  return EST_OK;
}

/* est predict: {"question": "...", "context": "..."} per line. */
static est_status qa_add_line(void *batch, char *line, const char *src, long lineno) {
  json_error_t err;
  json_t *o = json_loads(line, JSON_REJECT_DUPLICATES, &err);
  if (!json_is_object(o)) {
    est_status st = est_error(EST_ERR_INVALID_ARGUMENT, "%s:%ld: not a JSON object {\"question\": ..., \"context\": "
                              "...} (%s)", src, lineno, o ? "another JSON value" : est_json_error_text(&err));
    json_decref(o);
    return st;
  }
  const char *question = NULL, *context = NULL;
  est_status st = line_field(o, "question", src, lineno, &question);
  if (st == EST_OK) st = line_field(o, "context", src, lineno, &context);
  if (st == EST_OK) st = add_question(batch, question, context);
  json_decref(o);
  return st;
}

/* The converter's callback: the feature kept for the predictor and its row appended. */
static est_status add_window(void *ctx, const est_squad_feature *f) {
  qa_batch *b = ctx;
  if (b->rows == b->rows_cap) {
    const int cap = b->rows_cap ? 2 * b->rows_cap : 16;
    const size_t n = (size_t)cap * b->S;
    if (!EST_RESIZE(b->ids, n) || !EST_RESIZE(b->mask, n) || !EST_RESIZE(b->segs, n) ||
        !EST_RESIZE(b->num_tokens, cap))
      return est_error(EST_ERR_NO_MEMORY, "question answering: %d windows", cap);
    b->rows_cap = cap;
  }
  const size_t off = (size_t)b->rows * b->S, row = (size_t)b->S * sizeof(int32_t);
  memcpy(b->ids + off, f->input_ids, row);
  memcpy(b->mask + off, f->input_mask, row);
  memcpy(b->segs + off, f->segment_ids, row);
  b->num_tokens[b->rows++] = f->num_tokens;
  if (f->num_tokens > b->longest) b->longest = f->num_tokens;
  return est_squad_predictor_add_feature(b->predictor, f);
}

/* Every question's doc_stride windows, with the settings of est_model.json's "squad". */
static est_status make_windows(qa_batch *b) {
  const est_model_squad *q = est_model_meta_head_config(b->ctx->meta);
  const est_squad_feature_config fc = {.max_seq_length = b->S, .doc_stride = q->doc_stride,
                                       .max_query_length = q->max_query_length, .is_training = false,
                                       .quiet = true};
  const est_squad_prediction_config pc = {.n_best_size = q->n_best_size, .max_answer_length = q->max_answer_length,
                                          .version_2_with_negative = q->version_2_with_negative,
                                          .null_score_diff_threshold = q->null_score_diff_threshold};
  est_tokenizer *tok = b->ctx->tokenizer; /* the export's tokenizer.json rules too */
  est_squad_converter *conv = NULL;
  est_status st = est_squad_examples_create(&b->examples);
  if (st == EST_OK && !(b->word_starts = calloc(b->count ? b->count : 1, sizeof *b->word_starts)))
    st = est_error(EST_ERR_NO_MEMORY, "question answering");
  for (size_t i = 0; st == EST_OK && i < b->count; i++) {
    char id[32];
    snprintf(id, sizeof id, "%zu", i);
    st = est_squad_examples_add_text(b->examples, id, b->questions[i], b->contexts[i], strlen(b->contexts[i]),
                                     &b->word_starts[i]);
    if (st != EST_OK) est_error_prefix("question %zu: ", i);
  }
  if (st == EST_OK) st = est_squad_predictor_create(&b->predictor, b->examples, tok, &pc);
  if (st == EST_OK) st = est_squad_converter_create(&conv, tok, &fc);
  if (st == EST_OK) b->first_unique_id = est_squad_converter_next_unique_id(conv);
  for (size_t i = 0; st == EST_OK && i < b->count; i++)
    if ((st = est_squad_converter_convert(conv, &b->examples->examples[i], i, add_window, b)) != EST_OK)
      est_error_prefix("question %zu: ", i);
  est_squad_converter_free(conv);
  return st;
}

static est_status qa_rows(void *batch, est_served_rows *rows) {
  qa_batch *b = batch;
  if (!b->made) {
    b->made = 1;
    est_status st = make_windows(b);
    if (st != EST_OK) return st;
  }
  *rows = (est_served_rows){.input_ids = b->ids, .input_mask = b->mask, .segment_ids = b->segs, .n = b->rows,
                            .longest = b->longest};
  return EST_OK;
}

/* The answers from the rows' outputs [rows, width]: each question's span is chosen over its
 * real tokens only. */
static est_status qa_batch_answer(void *batch, const float *outputs) {
  qa_batch *b = batch;
  const size_t W = (size_t)b->ctx->output_width;
  clear_answers(b);
  est_status st = EST_OK;
  for (int r = 0; st == EST_OK && r < b->rows; r++) {
    const float *row = outputs + (size_t)r * W;
    st = est_squad_predictor_add_result(b->predictor, b->first_unique_id + r, row, row + b->S, b->num_tokens[r]);
  }
  for (size_t i = 0; st == EST_OK && i < b->count; i++) {
    est_squad_answer a;
    if ((st = est_squad_predictor_best(b->predictor, i, &a)) != EST_OK) break;
    b->answers[i].text = a.text;
    b->answers[i].score = a.probability;
    if (a.start_word >= 0) {
      b->answers[i].start = b->word_starts[i][a.start_word] + a.start_in_word;
      b->answers[i].end = b->word_starts[i][a.end_word] + a.end_in_word + 1;
    }
  }
  if (st != EST_OK) clear_answers(b);
  return st;
}

/* {"answer": "...", "start": S, "end": E, "score": P} (no newline): est predict's line and
 * est serve's prediction. The string is escaped as json.dumps does (ensure_ascii); the score
 * is the shortest text that reads back as the same float32. */
static void qa_write(const void *batch, size_t i, est_served_form form, FILE *out) {
  (void)form;
  const qa_answer *a = &((const qa_batch *)batch)->answers[i];
  char num[48];
  fputs("{\"answer\": ", out);
  est_py_json_string(out, a->text ? a->text : "");
  fprintf(out, ", \"start\": %lld, \"end\": %lld, \"score\": %s}", (long long)a->start, (long long)a->end,
          est_format_float32((float)a->score, num, sizeof num));
}

const est_served_head est_served_squad = {
  .name = "squad",
  .type = &est_bert_squad_head_type,
  .config_size = sizeof(est_model_squad),
  .read_config = squad_read_config,
  .write_config = squad_write_config,
  .params = squad_served_params,
  .outputs = {"start_logits", "end_logits"},
  .inputs = {.texts = {"question", "context"}, .required = 2, .model = "a question-answering model"},
  .signature = squad_signature,
  .no_classify = "the model answers questions: it has no classification signature; use :predict",
  .batch_create = qa_batch_create,
  .add_instance = qa_add_instance,
  .add_line = qa_add_line,
  .rows = qa_rows,
  .answer = qa_batch_answer,
  .write = qa_write,
  .batch_free = qa_batch_free,
  .hf_architecture = "ForQuestionAnswering",
  .hf_config = squad_hf_config,
};
