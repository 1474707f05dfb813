/* TEI's POST /similarity and POST /embed_all (serve_internal.h, docs/serving.md §6) over an
 * embedding model (est_served_head.embedding_normalized: the pooling head). /similarity:
 *   {"inputs": {"source_sentence": str, "sentences": [str]}, "parameters": {"truncate": false,
 *    "truncation_direction": "Right", "prompt_name": null}} -> [cos(source, sentence_i), ...]
 * The source and the sentences are one job of the shared queue, as sentence-transformers'
 * SentenceSimilarity pipeline which TEI follows: the cosine of the pooled vectors, in double,
 * answered as float32. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "est/float_format.h"
#include "serve_internal.h"

char *serve_tei_similarity(serve_http *h, served_model *m, const json_t *root, bool *queued, unsigned *status) {
  const est_model_meta *meta = est_servable_meta(m->servable);
  const est_served_head *head = est_model_meta_head(meta);
  if (!head->embedding_normalized)
    return *status = 424, serve_tei_error(*status, "`similarity` is only available for embedding models (the "
                                                   "served head is \"%s\")", head->name);
  const json_t *in = json_object_get(root, "inputs"), *params = json_object_get(root, "parameters");
  const json_t *source = json_object_get(in, "source_sentence"), *sentences = json_object_get(in, "sentences");
  if (!json_is_object(in)) return *status = 422, serve_tei_error(*status, "`inputs` must be an object with "
                                                                          "`source_sentence` and `sentences`");
  if (!json_is_string(source))
    return *status = 422, serve_tei_error(*status, "`inputs.source_sentence` must be a string");
  if (!json_is_array(sentences))
    return *status = 422, serve_tei_error(*status, "`inputs.sentences` must be a list of strings");
  if (params && !json_is_null(params) && !json_is_object(params))
    return *status = 422, serve_tei_error(*status, "`parameters` must be an object");
  bool truncate = h->opt->auto_truncate;
  const json_t *t = json_object_get(params, "truncate"), *dir = json_object_get(params, "truncation_direction");
  const json_t *prompt = json_object_get(params, "prompt_name");
  if (t && !json_is_null(t) && !json_is_boolean(t))
    return *status = 422, serve_tei_error(*status, "`parameters.truncate` must be true or false");
  if (json_is_boolean(t)) truncate = json_is_true(t);
  if (dir && !json_is_null(dir) && !(json_is_string(dir) && !strcmp(json_string_value(dir), "Right")))
    return *status = 422, serve_tei_error(*status, "`parameters.truncation_direction`: est truncates on the right "
                                                   "only (\"Right\")");
  if (prompt && !json_is_null(prompt))
    return *status = 413, serve_tei_error(*status, "Prompt name `%s` was not found: the model has no prompts",
                                          json_is_string(prompt) ? json_string_value(prompt) : "?");
  const size_t n = json_array_size(sentences);
  if (n == 0) return *status = 400, serve_tei_error(*status, "`inputs.sentences` cannot be empty");
  if (n + 1 > (size_t)h->opt->max_client_batch_size)
    return *status = 413, serve_tei_error(*status, "batch size %zu > maximum allowed batch size %d", n + 1,
                                          h->opt->max_client_batch_size);
  const char **a = calloc(n + 1, sizeof *a);
  if (!a) return *status = 500, serve_tei_error(*status, "out of memory");
  char *text = NULL;
  a[0] = json_string_value(source);
  for (size_t i = 0; i < n && !text; i++) {
    if (!json_is_string(json_array_get(sentences, i)))
      *status = 422, text = serve_tei_error(*status, "`inputs.sentences[%zu]` must be a string", i);
    else a[i + 1] = json_string_value(json_array_get(sentences, i));
  }
  serve_job job = {0};
  if (!text && serve_tei_run(h, m, a, NULL, n + 1, truncate, false, "inputs", &job, queued, status) != EST_OK)
    text = serve_tei_error(*status, "%s", est_error_message());
  if (!text) {
    const int W = est_servable_output_width(m->servable);
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    const float *s = job.probs;
    double ss = 0;
    for (int k = 0; k < W; k++) ss += (double)s[k] * s[k];
    for (size_t i = 1; f && i <= n; i++) {
      const float *v = job.probs + i * (size_t)W;
      double dot = 0, vv = 0;
      for (int k = 0; k < W; k++) dot += (double)s[k] * v[k], vv += (double)v[k] * v[k];
      /* sentence-transformers' cos_sim: a / max(||a||, 1e-8) . b / max(||b||, 1e-8) */
      const double cos = dot / (fmax(sqrt(ss), 1e-8) * fmax(sqrt(vv), 1e-8));
      char num[48];
      fprintf(f, "%s%s", i > 1 ? ", " : "[", est_format_float32((float)cos, num, sizeof num));
    }
    if (f) fputc(']', f), fclose(f);
    *status = 200;
  }
  free(a);
  serve_tei_job_free(&job);
  return text;
}

/* POST /embed_all {"inputs": str | [str], "truncate": false, "truncation_direction": "Right",
 * "prompt_name": null} -> per input, per token ([CLS] and [SEP] included), the encoder's last
 * layer before pooling: [[[f, ...], ...], ...], raw (TEI's embed_all, no pooling). */
char *serve_tei_embed_all(serve_http *h, served_model *m, const json_t *root, bool *queued, unsigned *status) {
  const est_model_meta *meta = est_servable_meta(m->servable);
  const est_served_head *head = est_model_meta_head(meta);
  if (!head->embedding_normalized)
    return *status = 424, serve_tei_error(*status, "`embed_all` is only available for embedding models (the "
                                                   "served head is \"%s\")", head->name);
  const json_t *in = json_object_get(root, "inputs"), *t = json_object_get(root, "truncate");
  const json_t *dir = json_object_get(root, "truncation_direction"), *prompt = json_object_get(root, "prompt_name");
  if (!json_is_string(in) && !json_is_array(in))
    return *status = 422, serve_tei_error(*status, "`inputs` must be a string or a list of strings");
  if (t && !json_is_null(t) && !json_is_boolean(t))
    return *status = 422, serve_tei_error(*status, "`truncate` must be true or false");
  const bool truncate = json_is_boolean(t) ? json_is_true(t) : h->opt->auto_truncate;
  if (dir && !json_is_null(dir) && !(json_is_string(dir) && !strcmp(json_string_value(dir), "Right")))
    return *status = 422, serve_tei_error(*status, "`truncation_direction`: est truncates on the right only "
                                                   "(\"Right\")");
  if (prompt && !json_is_null(prompt))
    return *status = 413, serve_tei_error(*status, "Prompt name `%s` was not found: the model has no prompts",
                                          json_is_string(prompt) ? json_string_value(prompt) : "?");
  const size_t n = json_is_array(in) ? json_array_size(in) : 1;
  if (n == 0) return *status = 400, serve_tei_error(*status, "`inputs` cannot be empty");
  if (n > (size_t)h->opt->max_client_batch_size)
    return *status = 413, serve_tei_error(*status, "batch size %zu > maximum allowed batch size %d", n,
                                          h->opt->max_client_batch_size);
  const char **a = calloc(n, sizeof *a);
  if (!a) return *status = 500, serve_tei_error(*status, "out of memory");
  char *text = NULL;
  for (size_t i = 0; i < n && !text; i++) {
    const json_t *s = json_is_array(in) ? json_array_get(in, i) : in;
    if (!json_is_string(s))
      *status = 422, text = serve_tei_error(*status, "`inputs[%zu]` must be a string (token ids are not supported)", i);
    else a[i] = json_string_value(s);
  }
  serve_job job = {0};
  if (!text && serve_tei_run(h, m, a, NULL, n, truncate, true, "inputs", &job, queued, status) != EST_OK)
    text = serve_tei_error(*status, "%s", est_error_message());
  if (!text) {
    const size_t S = (size_t)meta->max_seq_length, H = (size_t)meta->bert_config.hidden_size;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    char num[48];
    for (size_t i = 0; f && i < n; i++) {
      fputs(i ? ", [" : "[[", f);
      for (size_t tk = 0; tk < S && job.mask[i * S + tk]; tk++) { /* the real tokens lead each row */
        const float *v = job.token_out + i * S * H + tk * H;
        fputs(tk ? ", [" : "[", f);
        for (size_t k = 0; k < H; k++) fprintf(f, "%s%s", k ? ", " : "", est_format_float32(v[k], num, sizeof num));
        fputc(']', f);
      }
      fputc(']', f);
    }
    if (f) fputc(']', f), fclose(f);
    *status = 200;
  }
  free(a);
  serve_tei_job_free(&job);
  return text;
}
