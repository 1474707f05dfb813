/* est/served_head.h — what export, `est predict` and `est serve` need from a head, and the one
 * table of the heads est serves (docs/heads.md §6).
 *
 * A served head is one file in src/bert/heads (its layer, its est_bert_head_type and its
 * est_served_head) plus one line of the table in src/bert/heads/served_heads.c. Export, predict
 * and serve loop over the table and call the head through its descriptor; nothing outside the
 * head's own file compares a head's name (est_served_head_find is the one lookup):
 *
 *     const est_served_head est_served_regression = {
 *       .name = "regression", .type = &regression_head_type,   // its layer (est/bert_head.h)
 *       .params = reg_params, .outputs = {"predictions"},     // what a servable runs
 *       .inputs = EST_SERVED_TEXT_INPUTS,                     // text_a[, text_b] or input_ids
 *       .signature = est_served_text_signature, .no_classify = "...",
 *       EST_SERVED_TEXT_BATCH,                                // rows and answers of the text form
 *       .add_line = est_served_text_add_line, .write = est_served_text_write,   // est predict's lines
 *     };
 *
 * The path of one request (est serve) or one group of --batch_size input lines (est predict):
 *   instances (est_request_parse by head->inputs) or lines (head->add_line)
 *     -> the head's batch (batch_create, add_instance / add_line): rows of max_seq_length tokens
 *     -> rows(): [n, S] input_ids / input_mask / segment_ids, run by the servable (its encoder
 *        and head->type in PREDICT mode, head->outputs laid side by side in each row)
 *     -> answer(outputs [n, width]) -> write(i, form): one answer per instance or line.
 * est_model.json holds the head's name ("head") and its own fields (read_config, write_config)
 * beside the fields every export has (est_model_meta).
 *
 * The layering: this header and the heads stand below src/serve (est/serving.h builds on it);
 * a head reads JSON through jansson and text through est/tokenizer.h, never through a servable.
 */
#ifndef EST_SERVED_HEAD_H
#define EST_SERVED_HEAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "est/bert_encoder.h"
#include "est/bert_head.h"
#include "est/status.h"
#include "est/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

struct json_t; /* jansson's */
typedef struct est_served_head est_served_head;

/* ---- est_model.json ------------------------------------------------------------------- */

/* Bytes a head's own est_model.json settings may take (est_served_head.config_size). */
enum { EST_MODEL_HEAD_CONFIG_SIZE = 128 };

/* What a servable is, as est_model.json says it (read and written by est/serving.h's
 * est_model_meta_*). */
typedef struct est_model_meta {
  est_bert_config bert_config;
  size_t num_labels;
  char **labels;               /* label strings in output order (a head with labels; else none) */
  int max_seq_length;
  bool do_lower_case;
  char task[64];
  /* "head": the head on the encoder (est_served_head_find). NULL stands for the table's first
   * head, the classifier: exports written before heads were named have no "head". */
  const est_served_head *head;
  /* The --precision the model was trained and exported with ("fp32", "bf16" or "int8";
   * exports without it: "fp32"). est predict / est serve run it unless --precision says
   * otherwise. */
  char precision[8];
  /* The head's own fields (e.g. "squad": {...}): a plain struct of head->config_size bytes,
   * no pointers (copied with the meta). est_model_meta_set_head writes it,
   * est_model_meta_head_config reads it. */
  union {
    unsigned char bytes[EST_MODEL_HEAD_CONFIG_SIZE];
    double align_double;
    int64_t align_int64;
    void *align_pointer;
  } head_config;
} est_model_meta;

/* m->head, or the table's first head when NULL. */
const est_served_head *est_model_meta_head(const est_model_meta *m);
/* Sets the head and copies its settings (head->config_size bytes of config; NULL: zeros). */
void est_model_meta_set_head(est_model_meta *m, const est_served_head *head, const void *config);
/* The head's settings (head->config_size bytes), e.g. (const est_model_squad *). */
const void *est_model_meta_head_config(const est_model_meta *m);

/* ---- what a head reads and writes ------------------------------------------------------ */

enum { EST_SERVED_MAX_TEXTS = 4 };

/* The inputs of a head's serving signature (TF Serving's signature_def inputs): how one
 * instance of a :predict request reads (est_request_parse) and what the metadata lists. */
typedef struct est_served_inputs {
  const char *texts[EST_SERVED_MAX_TEXTS]; /* its string inputs by name, in order (NULL after the last) */
  int required;                 /* the first `required` texts must be given */
  bool bare_string;             /* an instance may be a string: texts[0] */
  bool tokens;                  /* input_ids (+ input_mask, segment_ids) may stand for the texts */
  bool columnar;                /* {"inputs": ...} is taken (answered {"outputs": ...}) */
  const char *model;            /* what the model is, in the error for a refused "inputs" */
} est_served_inputs;

/* run_classifier's text inputs: a string or {"text_a", "text_b"} or {"input_ids", ...}, by
 * rows or by columns. */
#define EST_SERVED_TEXT_INPUTS \
  {.texts = {"text_a", "text_b"}, .required = 1, .bare_string = true, .tokens = true, .columnar = true}

/* One instance of a request, as est_request_parse reads it. */
typedef struct est_instance {
  const char *texts[EST_SERVED_MAX_TEXTS]; /* by the head's est_served_inputs.texts; NULL: not given */
  int32_t *input_ids, *input_mask, *segment_ids; /* tokenized form: `length` each, else NULL */
  int length;
} est_instance;

/* Where an answer goes. */
typedef enum est_served_form {
  EST_SERVED_PREDICT,           /* one entry of a :predict response's "predictions" / "outputs" */
  EST_SERVED_CLASSIFY,          /* one entry of a :classify response's "results" */
  EST_SERVED_LINE,              /* one est predict output line (without its '\n') */
} est_served_form;

/* What a head's batch reads instances with. */
typedef struct est_served_context {
  const est_model_meta *meta;
  int output_width;             /* floats per row of the served outputs */
  est_tokenizer *tokenizer;     /* the export's (its tokenizer.json rules too); this batch's own */
  /* run_classifier's convert_single_example of a text pair (text_b NULL or "": one sentence)
   * into one row of max_seq_length int32s each; *length = its real tokens. */
  est_status (*featurize)(void *featurizer, const char *text_a, const char *text_b, int32_t *input_ids,
                          int32_t *input_mask, int32_t *segment_ids, int *length);
  void *featurizer;
  const char *input_format;     /* est predict's --input_format (tsv, jsonl); NULL in est serve */
  const char *output_format;    /* est predict's --output_format (probabilities, label, jsonl) */
} est_served_context;

/* A batch's rows, valid until the batch changes. */
typedef struct est_served_rows {
  const int32_t *input_ids, *input_mask, *segment_ids; /* [n, max_seq_length] */
  int n;
  int longest;                  /* real tokens of the longest row */
} est_served_rows;

/* ---- the descriptor -------------------------------------------------------------------- */

struct est_served_head {
  const char *name;             /* est_model.json's "head" (its layer's name) */
  const est_bert_head_type *type; /* the layer a servable runs, in PREDICT mode */

  /* est_model.json. `labels`: "labels" must name the outputs, one or more (the classifier's);
   * a head without them writes "labels": []. Its own fields: read from the file's root object
   * into config (config_size bytes; errors name `path` and the field), written back into
   * root (keys are sorted on output). NULL: none. */
  bool labels;
  size_t config_size;
  est_status (*read_config)(void *config, const struct json_t *root, const char *path);
  est_status (*write_config)(const void *config, struct json_t *root);

  /* The model a servable runs: fills the layer's params (est_bert_head_context.params, at
   * most EST_SERVED_PARAMS_SIZE bytes) from meta and returns the served floats per example
   * of `outputs` (> 0), the predictions laid side by side in each row (outputs[1] NULL: one;
   * a prediction per position fills the first seq_len floats of its half, zeros after). */
  int (*params)(void *params, const est_model_meta *meta);
  const char *outputs[2];
  /* outputs[1] is served beside outputs[0] for TEI's scores only (the classifier's logits):
   * est_servable_predict, :predict, :classify and est predict answer outputs[0] alone, and
   * est_servable_output_width counts it alone. */
  bool second_output_extra;

  /* est serve: its signature's inputs; its outputs (and metadata keys of its own, e.g.
   * "labels") added to the metadata's JSON; the 400's message for :classify (NULL: it has a
   * classification signature, answered per label). */
  est_served_inputs inputs;
  void (*signature)(const est_model_meta *meta, int width, struct json_t *outputs, struct json_t *metadata);
  const char *no_classify;

  /* A batch: instances or lines in, rows out, answers back.
   *   batch_create  for a request or a group of lines (ctx outlives the batch);
   *   add_instance  instance i of a request (its texts per `inputs`, or tokens); errors are
   *                 INVALID_ARGUMENT (400) naming the instance;
   *   add_line      one est predict input line (no newline; src:lineno name it in errors).
   *                 NULL: est predict refuses the head, saying `no_predict`;
   *   rows          the rows of what was added (made now if the head makes them at once);
   *   answer        outputs [rows, width] of those rows (valid until the answers are written);
   *   write         instance i's answer in `form`;
   *   batch_free. */
  est_status (*batch_create)(void **batch, const est_served_context *ctx);
  est_status (*add_instance)(void *batch, const est_instance *in, size_t i);
  est_status (*add_line)(void *batch, char *line, const char *src, long lineno);
  const char *no_predict;
  est_status (*rows)(void *batch, est_served_rows *rows);
  est_status (*answer)(void *batch, const float *outputs);
  void (*write)(const void *batch, size_t i, est_served_form form, FILE *out);
  void (*batch_free)(void *batch);

  /* An embedding model (est embed, POST /embed, POST /v1/embeddings): whether its vectors are
   * already L2-normalised. NULL: not one. */
  bool (*embedding_normalized)(const est_model_meta *meta);

  /* A cross-encoder (est rerank, POST /rerank; docs/rerank.md): whether this model's served
   * output is one raw score of a (query, passage) pair read as text_a, text_b, which a
   * reranker turns into a probability by sigmoid as sentence-transformers' CrossEncoder does.
   * NULL: never one. */
  bool (*pair_score)(const est_model_meta *meta);

  /* A HuggingFace directory served as it is (est_hf_servable_meta, est/serving.h): the end of
   * the transformers class names this head serves in config.json's "architectures" (e.g.
   * "ForTokenClassification": BertForTokenClassification, RobertaForTokenClassification ...;
   * NULL: none), and its settings from that config.json (root: a jansson object; NULL: zeros). */
  const char *hf_architecture;
  est_status (*hf_config)(void *config, const struct json_t *root, const char *path);

  /* text-embeddings-inference's routes (tools/serve_tei*.c, docs/serving.md §6).
   * tei_model_type: GET /info's "model_type", {"embedding": {"pooling": ...}} or
   * {"classifier" | "reranker": {"id2label", "label2id"}}; its key says which of TEI's routes
   * the model answers (NULL: none of /embed, /predict, /rerank; TEI's 424).
   * tei_scores: POST /predict's and /rerank's per-label scores of one served row, as TEI
   * gives them (raw_scores: the logits; else softmax, or a single logit's sigmoid); returns
   * how many (meta->num_labels). NULL: no scores. */
  struct json_t *(*tei_model_type)(const est_model_meta *meta);
  int (*tei_scores)(const est_model_meta *meta, const float *row, bool raw_scores, float *scores);
};

/* Bytes of a layer's params a servable keeps for est_served_head.params. */
enum { EST_SERVED_PARAMS_SIZE = 128 };

/* ---- the table (src/bert/heads/served_heads.c) ------------------------------------------ */

/* The heads est serves, the table's then any registered: i < est_served_head_count(). */
size_t est_served_head_count(void);
const est_served_head *est_served_head_at(size_t i);
/* The head named `name`; NULL when none is. The one place a head's name is compared. */
const est_served_head *est_served_head_find(const char *name);
/* The names, comma-separated ("classifier, pooling, squad"), for messages. Returns buf. */
char *est_served_head_names(char *buf, size_t size);
/* Adds a head of the program's own after the table's (before any servable is loaded; not
 * thread-safe), so that est_model.json may name it: INVALID_ARGUMENT when its name is taken
 * or a required member is missing (name, type with predictions, params, outputs[0],
 * signature, batch_create, add_instance, rows, answer, write, batch_free). */
est_status est_served_head_register(const est_served_head *h);

/* TF Serving's tensor_info: {"dtype", "tensor_shape": {"dim": [{"size": d0}, {"size": d1}],
 * "unknown_rank": false}, "name": "NAME:0"} (d1 0: one dimension), for signatures. */
struct json_t *est_served_tensor_info(const char *name, const char *dtype, long long d0, long long d1);

/* ---- the text form (src/bert/heads/served_text.c) --------------------------------------- */

/* The batch of a head whose instance is a text pair or tokens (EST_SERVED_TEXT_INPUTS, or two
 * texts of other names) and whose answer is its row of output floats: :predict [f, ...],
 * :classify [["label", f], ...], est predict lines from tsv (first<TAB>second) or jsonl (an
 * object of the head's texts: {"text_a", "text_b"}) as --output_format says (the floats
 * TAB-separated, the most probable label, or {"probabilities": [...], "label": ...}). */
est_status est_served_text_batch_create(void **batch, const est_served_context *ctx);
est_status est_served_text_add_instance(void *batch, const est_instance *in, size_t i);
est_status est_served_text_add_line(void *batch, char *line, const char *src, long lineno);
est_status est_served_text_rows(void *batch, est_served_rows *rows);
est_status est_served_text_answer(void *batch, const float *outputs);
void est_served_text_write(const void *batch, size_t i, est_served_form form, FILE *out);
void est_served_text_batch_free(void *batch);
/* For a head that keeps the text form's batch but writes its own answers (e.g. a label per
 * token): instance i's row (input_ids, input_mask: max_seq_length each) and, after answer,
 * its outputs [width] (each may be NULL); and the context the batch was made with. */
void est_served_text_row(const void *batch, size_t i, const int32_t **input_ids, const int32_t **input_mask,
                         const float **outputs);
const est_served_context *est_served_text_context(const void *batch);
/* outputs[0] as a [-1, width] float tensor, and "labels" (the meta's, [] when none). */
void est_served_text_signature(const est_model_meta *meta, int width, struct json_t *outputs, struct json_t *metadata);

/* The text form's batch members of an est_served_head, in one: requests' instances to rows and
 * answers. A head adds the line form's reader (.add_line = est_served_text_add_line, or none:
 * .no_predict) and its writer (.write = est_served_text_write, or its own). */
#define EST_SERVED_TEXT_BATCH                                                                                     \
  .batch_create = est_served_text_batch_create, .add_instance = est_served_text_add_instance,                   \
  .rows = est_served_text_rows, .answer = est_served_text_answer, .batch_free = est_served_text_batch_free

/* ---- the heads est serves ------------------------------------------------------------------ */

/* "classifier" (src/bert/heads/head_classifier.c): "probabilities" [B, num_labels], one per
 * "labels" entry; the text form; :classify answers per label. Its settings: transformers'
 * problem_type, est_model.json's "problem_type" (written only when not single-label):
 * softmax probabilities (single_label_classification, the default), a sigmoid per label
 * (multi_label_classification; est predict's label form lists every label at >= 0.5), or
 * the raw logits (regression: e.g. a cross-encoder's one score). */
typedef enum est_problem_type {
  EST_PROBLEM_SINGLE_LABEL, EST_PROBLEM_MULTI_LABEL, EST_PROBLEM_REGRESSION
} est_problem_type;
typedef struct est_model_classifier {
  est_problem_type problem_type;
} est_model_classifier;
/* transformers' name of a problem_type ("single_label_classification", ...), and back (-1:
 * none of them). */
const char *est_problem_type_name(est_problem_type t);
int est_problem_type_parse(const char *name);
extern const est_served_head est_served_classifier;

/* "pooling" (src/bert/heads/head_pooling.c): sentence embeddings, "embeddings" [B, W];
 * est_model.json's "pooling": {"modes": "mean", "normalize": true} (its settings an
 * est_pooling_params, est/sentence_embedding.h). :predict, est embed, POST /embed and
 * POST /v1/embeddings. */
extern const est_served_head est_served_pooling;

/* "squad" (src/bert/heads/head_squad.c): question answering. Its settings, est_model.json's
 * "squad" object: run_squad's prediction flags of the same names, as the model was exported
 * with. Instances and input lines {"question", "context"}; answers {"answer", "start", "end",
 * "score"} (docs/squad.md §11). */
typedef struct est_model_squad {
  int doc_stride, max_query_length, n_best_size, max_answer_length;
  bool version_2_with_negative;
  double null_score_diff_threshold;
} est_model_squad;
extern const est_served_head est_served_squad;

/* "token_classifier" (src/bert/heads/head_token_classifier.c): token classification (NER).
 * Served "probabilities" [B, max_seq_length * num_labels], one per "labels" entry at each
 * position; instances a text (a string or {"text_a", "aggregation_strategy"}), answered with
 * transformers' token-classification pipeline's entities (docs/ner.md §6). Its settings,
 * est_model.json's "token_classifier": {"aggregation_strategy": "simple"}: the strategy of an
 * instance that names none. */
typedef enum est_aggregation_strategy {
  EST_AGGREGATION_NONE, EST_AGGREGATION_SIMPLE, EST_AGGREGATION_FIRST, EST_AGGREGATION_AVERAGE, EST_AGGREGATION_MAX
} est_aggregation_strategy;
typedef struct est_model_token_classifier {
  est_aggregation_strategy aggregation_strategy;
} est_model_token_classifier;
extern const est_served_head est_served_token_classifier;

#ifdef __cplusplus
}
#endif
#endif
