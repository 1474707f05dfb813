/* est/c_api.h — what a foreign-function binding needs beyond est's other headers: whole
 * batches in one call (so a binding releases its interpreter's lock once per batch, not per
 * sentence), the per-thread setup every model call makes, and log lines handed to a callback.
 * The Python package (python/est, docs/python.md) calls these through ctypes from libest.so
 * (`make python`); est's other public functions it calls directly (TFRecords, Examples,
 * checkpoints, safetensors).
 *
 *     est_servable *s;
 *     if (est_capi_embed_open(&s, "all-MiniLM-L6-v2", NULL, 32) != EST_OK) die(est_error_message());
 *     const char *texts[2] = {"a sentence", "another"};
 *     float emb[2 * 384];                                   // est_servable_output_width(s)
 *     est_capi_embed(s, 2, texts, NULL, 32, 0, emb);        // `est embed --batch_size=32` bit for bit
 *
 * Every call that runs a model takes `threads`: the OpenMP threads of the calling thread's
 * parallel regions (> 0), or est's default (0: OMP_NUM_THREADS, else the CPUs this process may
 * use). OpenMP keeps that setting per calling thread, so two threads of one process may each
 * run a model on their own number of threads. A servable is used by one thread at a time;
 * an est_capi_tokenizer serialises its callers itself. Errors are est_status codes with
 * est_error_message()'s text, on the calling thread.
 */
#ifndef EST_C_API_H
#define EST_C_API_H

#include <stddef.h>
#include <stdint.h>

#include "est/serving.h"
#include "est/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this header's functions and structs; a binding checks it at load time. */
#define EST_CAPI_VERSION 1
int est_capi_version(void);

/* ---- logging ------------------------------------------------------------------------------ */

/* Each est log line (est/log.h), without its '\n', goes to fn with its level (EST_LOG_DEBUG ..
 * EST_LOG_ERROR) instead of stderr; fn may be called from any thread, one line at a time.
 * NULL: back to stderr. */
typedef void (*est_capi_log_fn)(int level, const char *line);
est_status est_capi_log_to(est_capi_log_fn fn);

/* ---- tokenizers (HuggingFace tokenizer.json, docs/tokenizer.md §8) ------------------------- */

typedef struct est_capi_tokenizer est_capi_tokenizer;

/* A tokenizer.json file (est_tokenizer_from_json). Errors name the file and the field. */
est_status est_capi_tokenizer_open(est_capi_tokenizer **out, const char *path);
void est_capi_tokenizer_free(est_capi_tokenizer *t);

/* tokenizers.Encoding's for a batch, laid end to end: encoding i is entries
 * start[i] .. start[i + 1] of each array. Offsets are in code points of its text (of the
 * pair's for the pair's tokens). One malloc'd block: free with est_capi_encodings_free. */
typedef struct est_capi_encodings {
  size_t count;
  size_t *start;                                    /* [count + 1] */
  int32_t *ids, *type_ids, *special_tokens_mask, *attention_mask, *offset_start, *offset_end;
  const char **tokens;                              /* NUL-terminated, inside the block */
} est_capi_encodings;
void est_capi_encodings_free(est_capi_encodings *e);

/* Tokenizer.encode_batch(inputs, add_special_tokens): texts[i] (lens[i] bytes, or
 * NUL-terminated when lens is NULL) with pairs[i] (pairs NULL, or pairs[i] NULL: none).
 * The file's truncation and padding apply; padding "BatchLongest" pads every encoding to the
 * batch's longest, as tokenizers does. Spread over `threads` threads (one tokenizer each);
 * the encodings are those of one thread. An error names the input ("inputs[3]: ..."). */
est_status est_capi_tokenizer_encode_batch(est_capi_tokenizer *t, size_t n, const char *const *texts,
                                           const size_t *lens, const char *const *pairs, const size_t *pair_lens,
                                           int add_special_tokens, int threads, est_capi_encodings **out);
/* Tokenizer.decode(ids, skip_special_tokens): *text malloc'd, NUL-terminated (free it). */
est_status est_capi_tokenizer_decode(est_capi_tokenizer *t, const int32_t *ids, size_t n, int skip_special_tokens,
                                     char **text, size_t *len);
/* The token of an id (added tokens included), or NULL. */
const char *est_capi_tokenizer_id_to_token(est_capi_tokenizer *t, int32_t id);

/* ---- models -------------------------------------------------------------------------------- */

/* The precision a model runs, as `est predict` / `est embed` choose it: `precision` ("fp32",
 * "bf16", "int8") when not NULL, else the one its est_model.json records (a checkpoint or a
 * HuggingFace directory: fp32); then est_servable_check_precision (an int8 export runs only
 * int8). */
est_status est_capi_set_precision(est_servable *s, const char *precision);

/* `est embed --model_dir=path`: an embedding export, a HuggingFace model directory or a
 * sentence-transformers one (est_embed_model_open, its pooling and normalisation from the
 * directory's files), batches of up to max_batch rows, at `precision` (NULL: as above). */
est_status est_capi_embed_open(est_servable **out, const char *path, const char *precision, int max_batch);
/* out [n, est_servable_output_width(s)]: what `est embed --batch_size=batch_size` writes for
 * these n lines: windows of 1024 texts, each sorted by length and run in batches of
 * batch_size (<= the servable's max_batch) at the batch's own length. A text with a NUL
 * byte or invalid UTF-8 is INVALID_ARGUMENT naming it ("sentences[4]: ..."). */
est_status est_capi_embed(est_servable *s, size_t n, const char *const *texts, const size_t *lens, int batch_size,
                          int threads, float *out);

/* An export (est_servable_load) of any served head, at `precision` (NULL: as above). */
est_status est_capi_served_open(est_servable **out, const char *path, const char *precision, int max_batch);
/* The head's name ("classifier", "squad", "pooling", ...) and the names of its text inputs
 * (names[k] for k < the returned count; NULL past it). */
const char *est_capi_served_head(const est_servable *s);
int est_capi_served_inputs(const est_servable *s, const char **names, int max);
/* `est serve`'s answers to n instances: texts[i * k + j] is instance i's input j of the
 * head's k = est_capi_served_inputs (NULL: not given). Run in batches of the servable's
 * max_batch; *json (malloc'd, free it) holds one answer a line, each as a :predict response's
 * "predictions" entry (a classifier: its probabilities in label order; squad: {"answer",
 * "start", "end", "score"}). */
est_status est_capi_served_run(est_servable *s, size_t n, const char *const *texts, int threads, char **json,
                               size_t *size);

/* ---- tasks (libest.so only) ------------------------------------------------------------------ */

/* `est TASK argv[1..]` for TASK run_classifier, run_squad, run_ner or run_pretraining (argv[0]
 * is TASK): the command's exit code (0 done, 1 failed, 2 bad flags; est_error_message() says
 * why), its log lines through est_capi_log_to. Its SIGINT/SIGTERM handlers (stop at the end of
 * the step, save, CANCELLED) last for the run; the caller's are put back after. */
int est_capi_run_task(const char *task, int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif
