/* est/serving.h — using a trained model: export it as TF's export_saved_model lays a servable
 * out, load that export, and predict with it. What a servable predicts and how it reads and
 * answers a request is its head's (est/served_head.h: probabilities of a classifier, answers
 * of a question-answering model, sentence embeddings); est_served_batch runs any of them.
 *
 *     // after run_classifier trained into out/: write out/export/<version>/
 *     char dir[4096];
 *     est_export_classifier(&rc_config, NULL, dir, sizeof dir);   // est/run_classifier.h
 *
 *     est_servable *s;
 *     est_servable_load(&s, "out/export", 32);          // a base dir: its highest version
 *     est_featurizer *f;
 *     est_featurizer_create(&f, s);                     // one per thread
 *     int32_t ids[128], mask[128], segs[128]; int len;
 *     est_featurizer_run(f, "a good film", NULL, ids, mask, segs, &len);
 *     float probs[2];
 *     est_servable_predict(s, ids, mask, segs, 1, 128, probs);   // rows of 128, run at 128
 *
 * An export version directory (docs/serving.md):
 *     <base>/<version>/variables/variables.index                 the model's weights as a
 *     <base>/<version>/variables/variables.data-00000-of-00001   TF tensor bundle (no Adam
 *                                                                slots, no est/ tensors)
 *     <base>/<version>/assets/vocab.txt
 *     <base>/<version>/est_model.json   {"bert_config": {...}, "labels": [...],
 *                                        "max_seq_length": N, "do_lower_case": b, "task": "..."}
 * <version> is decimal seconds since the epoch. A version is built under a hidden
 * "<base>/.tmp-*" directory and renamed into place, so a reader never sees half of one;
 * readers ignore every entry that is not all digits.
 */
#ifndef EST_SERVING_H
#define EST_SERVING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "est/bert_encoder.h"
#include "est/float_format.h"
#include "est/precision.h"
#include "est/sentence_embedding.h"
#include "est/served_head.h"
#include "est/status.h"
#include "est/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- export ------------------------------------------------------------------------ */

/* est_model.json's fields: est_model_meta (est/served_head.h), the head's own fields read and
 * written by its est_served_head (read_config, write_config). "head" names a head of the
 * table (est_served_head_find); one est cannot serve is an error naming the file and the
 * served heads. */
void est_model_meta_clear(est_model_meta *m);
/* A HuggingFace model directory's est_model_meta, as if an export's (docs/serving.md, "HuggingFace directories"):
 * the head whose hf_architecture ends config.json's "architectures"[0], "labels" from
 * id2label (else LABEL_0 ... of num_labels), the head's settings from the config
 * (hf_config), max_seq_length the model's positions (at most 512) or tokenizer_config.json's
 * model_max_length when smaller, fp32. Errors name the file and what it lacks. */
est_status est_hf_servable_meta(est_model_meta *m, const char *dir);
/* Reads est_model.json (errors name the file and the field). */
est_status est_model_meta_read(est_model_meta *m, const char *path);
/* The same from `size` bytes of JSON text in memory; `name` stands for the file in errors. */
est_status est_model_meta_parse(est_model_meta *m, const char *text, size_t size, const char *name);
/* The JSON text (keys sorted, indent 2, trailing newline); free() it. NULL: no memory. */
char *est_model_meta_to_json(const est_model_meta *m);

/* Writes a new version under export_base from checkpoint `ckpt_prefix`: the variables the
 * model of meta's shape declares (the encoder and its head; each must be in the checkpoint
 * with its shape), vocab_file as assets/vocab.txt, and est_model.json. The version is the
 * current time in seconds, or the next free number after the newest existing one. The
 * version directory path goes to version_dir (may be NULL). */
est_status est_export_write(const char *export_base, const char *ckpt_prefix, const est_model_meta *meta,
                            const char *vocab_file, char *version_dir, size_t size);

/* The highest complete version under export_base (a directory named by digits holding
 * est_model.json and variables/variables.index): its path and number. NOT_FOUND when none.
 * A path that is itself a version directory (it holds est_model.json) is returned as is,
 * its version parsed from its name (0 when not digits). */
est_status est_export_resolve(const char *path, char *version_dir, size_t size, int64_t *version);
/* The same among the versions below `below` (for falling back past a broken one). */
est_status est_export_resolve_below(const char *path, int64_t below, char *version_dir, size_t size,
                                    int64_t *version);

/* ---- a loaded servable --------------------------------------------------------------- */

typedef struct est_servable est_servable;

/* Loads a version directory (or a base directory's highest version) with room for batches
 * of up to max_batch examples at max_seq_length. Every weight is checked against its shape. */
est_status est_servable_load(est_servable **out, const char *path, int max_batch);
void est_servable_free(est_servable *s);

const est_model_meta *est_servable_meta(const est_servable *s);
int64_t est_servable_version(const est_servable *s);
const char *est_servable_dir(const est_servable *s);
int est_servable_max_batch(const est_servable *s);
int est_servable_vocab_size(const est_servable *s);
/* Its assets/vocab.txt; NULL when its tokenizer.json has no WordPiece vocab. */
const est_vocab *est_servable_vocab(const est_servable *s);
/* A new tokenizer with the servable's vocabulary and settings (those of its tokenizer.json
 * when the export has one, else do_lower_case): one per thread, freed by the caller. */
est_status est_servable_tokenizer_create(const est_servable *s, est_tokenizer **out);
/* Forward passes run so far (each est_servable_predict runs one per max_batch rows). */
uint64_t est_servable_forward_count(const est_servable *s);
/* The precision its model runs (est/precision.h), FP32 until set; each servable has its own,
 * so one process serves versions of different precisions side by side. Returns the one
 * this CPU runs (bf16 without AVX512-BF16: fp32, with a warning). */
est_precision est_servable_set_precision(est_servable *s, est_precision precision);
est_precision est_servable_precision(const est_servable *s);
/* Whether s is an int8 export: its dense layers stored as int8 codes + scales, without their
 * fp32 weights (docs/int8.md §4). Such a servable runs only int8 on a VNNI kernel:
 * est_servable_check_precision says FAILED_PRECONDITION, and why, when its precision is
 * another (est_servable_predict refuses then too); EST_OK otherwise and for every other export. */
int est_servable_int8_weights(const est_servable *s);
est_status est_servable_check_precision(const est_servable *s);
/* Floats per example of what it predicts (its head's est_served_head.params): num_labels
 * probabilities (classifier), the embedding's width (pooling), 2 x max_seq_length for squad
 * (start logits, then end logits, zero past the run length). */
int est_servable_output_width(const est_servable *s);
/* Floats per example of all it serves: the output width, plus a head's extra second output
 * (est_served_head.second_output_extra: the classifier's num_labels logits). */
int est_servable_row_width(const est_servable *s);

/* A servable straight from a checkpoint, without an export: meta says what the model is
 * (bert_config, head and its parameters, max_seq_length, do_lower_case); the variables the
 * head declares are read from the TF checkpoint ckpt_prefix, the vocab from vocab_file.
 * `est embed` opens its model this way (est_servable_version is 0, est_servable_dir ""). */
est_status est_servable_open(est_servable **out, const est_model_meta *meta, const char *ckpt_prefix,
                             const char *vocab_file, int max_batch);

/* probabilities [batch, num_labels] for rows of seq_len tokens (input_ids, input_mask,
 * segment_ids [batch, seq_len]); seq_len <= max_seq_length, any batch (run in pieces of
 * max_batch). Not thread-safe: one caller at a time per servable. Ids are checked. */
est_status est_servable_predict(est_servable *s, const int32_t *input_ids, const int32_t *input_mask,
                                const int32_t *segment_ids, int batch, int seq_len, float *probabilities);

/* The same for rows of `stride` int32s (e.g. max_seq_length) run at seq_len <= stride: only
 * each row's first seq_len tokens are used (copied into the servable's scratch). */
est_status est_servable_predict_strided(est_servable *s, const int32_t *input_ids, const int32_t *input_mask,
                                        const int32_t *segment_ids, int batch, int stride, int seq_len,
                                        float *probabilities);

/* est_servable_predict_strided's run giving the full rows [batch, est_servable_row_width]
 * (what a head's batch answers from, est_served_batch, and est serve's TEI routes), and when
 * `tokens` is not NULL each row's encoder output too (the last layer per token, before the
 * head: TEI's /embed_all): [batch, stride x hidden_size], seq_len x hidden_size floats a row,
 * zeros after. */
est_status est_servable_predict_rows(est_servable *s, const int32_t *input_ids, const int32_t *input_mask,
                                     const int32_t *segment_ids, int batch, int stride, int seq_len, float *rows,
                                     float *tokens);

/* The length a batch runs at: its longest row rounded up to a multiple of 8, at most
 * max_seq_length (and at least 1). Padding past a row's end is masked, so the result
 * equals a full-length run (to float reassociation). */
int est_serving_bucket_length(int longest, int max_seq_length);

/* ---- a sentence-embedding model (est embed, docs/embeddings.md) ----------------------- */

/* Where an embedding model comes from: an export whose est_model.json says "head": "pooling"
 * (model_dir), or a BERT checkpoint with its bert_config and vocab plus the pooling. */
typedef struct est_embed_model_options {
  const char *model_dir;        /* an export base or version directory; NULL: the checkpoint */
  const char *init_checkpoint, *bert_config_file, *vocab_file;
  bool do_lower_case;
  /* NULL: sentence-transformers' modules.json / 1_Pooling/config.json beside bert_config_file
   * when there, else "mean"; else a list for est_pooling_params_parse. */
  const char *pooling;
  int normalize;                /* 1 / 0; -1: as those files say (Normalize module), else 0 */
  int max_seq_length;           /* 0: sentence_bert_config.json's beside the config, else 128 */
  int max_batch;                /* rows per forward pass */
  /* The flag that named the model's config, for errors: NULL = --bert_config_file; set by
   * est_embed_model_resolve to "model_dir" / "init_checkpoint" when it takes a directory's
   * config.json (so a bad one is not blamed on a flag the user never gave). */
  const char *config_flag;
} est_embed_model_options;

/* o with a HuggingFace model directory (docs/hf.md) as --model_dir or --init_checkpoint
 * taken as the whole model: init_checkpoint = DIR, and bert_config_file / vocab_file = DIR
 * (its config.json, tokenizer.json or vocab.txt) when unset. Other options as they are. The
 * two calls below apply it themselves. */
est_embed_model_options est_embed_model_resolve(const est_embed_model_options *o);

/* The est_model.json of the checkpoint route (head "pooling", no labels, precision fp32).
 * Errors name the flag (--bert_config_file, --pooling, --max_seq_length). */
est_status est_embed_model_meta(est_model_meta *meta, const est_embed_model_options *o);
/* The one way est opens an embedding model: the export at o->model_dir (its head must be an
 * embedding model's, est_served_head.embedding_normalized: "pooling"; the checkpoint's flags
 * must then be unset), else est_servable_open on the checkpoint with est_embed_model_meta. */
est_status est_embed_model_open(est_servable **out, const est_embed_model_options *o);

/* ---- text -> features ----------------------------------------------------------------- */

/* run_classifier's convert_single_example with the servable's vocab, case and
 * max_seq_length. Holds a tokenizer: one per thread. Must not outlive its servable. */
typedef struct est_featurizer est_featurizer;

est_status est_featurizer_create(est_featurizer **out, const est_servable *s);
void est_featurizer_free(est_featurizer *f);
/* Rows of max_seq_length int32s; *length (may be NULL) = number of real tokens. text_b
 * NULL or "": single sentence. */
est_status est_featurizer_run(est_featurizer *f, const char *text_a, const char *text_b, int32_t *input_ids,
                              int32_t *input_mask, int32_t *segment_ids, int *length);

/* How many tokens text_a (and text_b) take as one row ([CLS] a [SEP] (b [SEP])) before
 * truncation to max_seq_length: above max_seq_length means est_featurizer_run cuts it. */
est_status est_featurizer_count_tokens(est_featurizer *f, const char *text_a, const char *text_b, int *tokens);

/* ---- a cross-encoder: reranking (est rerank, POST /rerank; docs/rerank.md) -------------- */

/* Whether s scores (query, passage) pairs: its head's pair_score (est/served_head.h), e.g. an
 * est run_rerank export or a HuggingFace *ForSequenceClassification directory of one label. */
bool est_servable_is_cross_encoder(const est_servable *s);
/* scores[n] of the pairs (query, texts[i]), each [CLS] query [SEP] text [SEP] as
 * run_classifier truncates a pair to the model's max_seq_length; sigmoid(logit) as
 * sentence-transformers' CrossEncoder, or the logit when raw_scores. Run in batches of the
 * servable's max_batch at each batch's bucket length. f: a featurizer of s (one per thread).
 * INVALID_ARGUMENT when s is no cross-encoder (naming its head). */
est_status est_servable_rerank(est_servable *s, est_featurizer *f, const char *query, const char *const *texts,
                               size_t n, bool raw_scores, float *scores);
/* order[n]: the indices of scores[n] from highest to lowest, equal scores in index order
 * (est run_rerank's ranks, TEI's /rerank order). */
void est_rerank_order(const float *scores, size_t n, size_t *order);

/* ---- a head's batch: instances or input lines -> rows -> answers (est/served_head.h) ----- */

/* What est predict and est serve run for a servable, whatever its head: a request's instances
 * (est_request_parse by the head's inputs) or a group of input lines, as the head reads them
 * into rows, run, and answered as the head writes them. Holds a tokenizer: one per thread. */
typedef struct est_served_batch est_served_batch;

/* input_format / output_format: est predict's flags (NULL in est serve). */
est_status est_served_batch_create(est_served_batch **out, const est_servable *s, const char *input_format,
                                   const char *output_format);
void est_served_batch_free(est_served_batch *b);
/* Instance i of a request / one input line (no newline; src and lineno name it in errors).
 * est_served_batch_add_line is FAILED_PRECONDITION for a head without input lines. */
est_status est_served_batch_add_instance(est_served_batch *b, const est_instance *in);
est_status est_served_batch_add_line(est_served_batch *b, char *line, const char *src, long lineno);
/* Instances or lines added so far. */
size_t est_served_batch_count(const est_served_batch *b);
/* The rows of what was added (made now if the head makes them at once, e.g. squad's windows). */
est_status est_served_batch_rows(est_served_batch *b, est_served_rows *rows);
/* The answers from the rows' outputs [rows, est_servable_output_width], which must stay
 * valid until the answers are written. */
est_status est_served_batch_answer(est_served_batch *b, const float *outputs);
/* Rows, one run of the servable over them (est_servable_predict_strided at the batch's bucket
 * length; one forward pass when they fit in max_batch) and the answers. */
est_status est_served_batch_run(est_served_batch *b, est_servable *s);
/* Answer i (the i-th instance or line) in `form`. */
void est_served_batch_write(const est_served_batch *b, size_t i, est_served_form form, FILE *out);

/* ---- encoder layers (extract_features) -------------------------------------------------- */

/* All-layer encoder outputs of a BERT checkpoint, for extract_features: layer l (0-based,
 * 0 = the first encoder layer's output) of a batch, [batch, seq_len, H]. */
typedef struct est_encoder_layers est_encoder_layers;

/* Loads the bert/ variables of `ckpt_prefix` (the encoder cut after the deepest layer listed;
 * layers 0-based, distinct). Each run is one forward pass, whatever the number of layers. */
est_status est_encoder_layers_open(est_encoder_layers **out, const est_bert_config *cfg, const char *ckpt_prefix,
                                   const int *layers, int num_layers, int max_batch, int seq_len,
                                   est_precision precision);
void est_encoder_layers_free(est_encoder_layers *e);
/* Runs the batch; out[k] receives layers[k]'s output [batch, seq_len, H]. */
est_status est_encoder_layers_run(est_encoder_layers *e, const int32_t *input_ids, const int32_t *input_mask,
                                  const int32_t *segment_ids, int batch, int seq_len, float *const *out);

/* ---- extract_features' output, as Python's json.dumps writes it ------------------------ */

/* One extract_features.py output line (with its '\n'):
 * {"linex_index": I, "features": [{"token": T, "layers": [{"index": L, "values": [...]}, ...]}, ...]}
 * for the first num_tokens tokens; layer k's values come from values[k] + t * hidden,
 * rounded to 6 places. */
void est_extract_features_write(FILE *out, int64_t linex_index, const char *const *tokens, int num_tokens,
                                const int *layer_indexes, int num_layers, const float *const *values, int hidden);

/* ---- TF Serving REST request bodies ------------------------------------------------------ */

/* A request's instances are est_instance (est/served_head.h): the texts the head's
 * est_served_inputs names, or already-tokenized rows. */
typedef enum est_request_kind { EST_REQUEST_PREDICT, EST_REQUEST_CLASSIFY } est_request_kind;

typedef struct est_request {
  est_instance *instances;
  size_t count;
  bool columnar;                    /* {"inputs": ...}: answer {"outputs": ...} */
  char *signature_name;             /* NULL: serving_default */
  void *json;                       /* the parsed body (owns the strings) */
} est_request;

/* What a tokenized instance must respect (from the servable's est_model.json). */
typedef struct est_request_limits {
  int max_seq_length;
  int vocab_size;
  int type_vocab_size;
  size_t max_instances;             /* 0: no limit */
} est_request_limits;

/* The deepest nesting of lists/objects a request body may have (a valid one needs 4). */
#define EST_REQUEST_MAX_DEPTH 64

/* Parses a :predict ({"instances": [...]} or {"inputs": ...}) or :classify
 * ({"examples": [...]}) body for a head whose signature takes `inputs` (est/served_head.h).
 * Instances: an object of the head's texts (each a string; the first `required` must be
 * there), a string (the first text) when inputs->bare_string, or, when inputs->tokens,
 * {"input_ids", "input_mask", "segment_ids"} (lists of integers of equal length, 1 to
 * max_seq_length; ids below vocab_size, mask 0/1, segments below type_vocab_size; mask and
 * segments may be left out: all ones / zeros). Columnar "inputs" (inputs->columnar): a list
 * of strings, or an object of equally long lists named by the texts or
 * input_ids/input_mask/segment_ids. The classifier's inputs are text_a and text_b
 * (EST_SERVED_TEXT_INPUTS); squad's {"question", "context"}, by rows only.
 * INVALID_ARGUMENT with a message saying what is wrong and where
 * ("instances[3].input_ids[7]: ...", "instances[1].context: missing (a string)"). Before
 * parsing, a body nested deeper than EST_REQUEST_MAX_DEPTH, or holding a list or object of
 * more than max(max_instances, max_seq_length, 16) entries (when max_instances is set), is
 * refused with the byte offset. On failure *out is empty. */
est_status est_request_parse(est_request *out, est_request_kind kind, const est_served_inputs *inputs,
                             const char *body, size_t size, const est_request_limits *limits);
void est_request_clear(est_request *r);

/* ---- embedding request bodies (docs/embeddings.md §4) ------------------------------------- */

typedef enum est_embed_api {
  EST_EMBED_API_TEI,      /* text-embeddings-inference POST /embed: {"inputs": str | [str],
                           * "normalize": bool (default true), "truncate": bool (default false)} */
  EST_EMBED_API_OPENAI,   /* POST /v1/embeddings: {"input": str | [str], "model": str,
                           * "encoding_format": "float", "user": str} */
} est_embed_api;

typedef struct est_embed_request {
  const char **texts;               /* [count], owned by json */
  size_t count;
  int normalize;                    /* TEI's "normalize": 1 / 0, -1 when absent */
  int truncate;                     /* TEI's "truncate": 1 / 0, -1 when absent; OpenAI: 0 */
  int dimensions;                   /* "dimensions" (Matryoshka: the first so many), 0 when absent */
  const char *model;                /* OpenAI's "model"; NULL when absent */
  void *json;
} est_embed_request;

/* Parses a body of `api`'s form. INVALID_ARGUMENT naming the field ("input[2]: must be a
 * string"); the limits' instance count and est_request_parse's pre-scan apply. Fields the API
 * defines that est cannot honour (TEI's "truncation_direction": "Left" or a "prompt_name";
 * OpenAI's token-id inputs, "encoding_format": "base64") are errors naming them;
 * other keys are ignored, as both servers do. On failure *out is empty. */
est_status est_embed_request_parse(est_embed_request *out, est_embed_api api, const char *body, size_t size,
                                   const est_request_limits *limits);
void est_embed_request_clear(est_embed_request *r);

#ifdef __cplusplus
}
#endif
#endif
