/* TEI's POST /predict and POST /rerank (serve_internal.h, docs/serving.md §6) over a head with
 * scores (est_served_head.tei_scores: the classifier's; one label makes a cross-encoder, TEI's
 * "reranker"):
 *   /predict {"inputs": str | [str, str] | [[str] | [str, str], ...], "raw_scores": false,
 *            "truncate": false} -> [{"score", "label"}, ...] per input, highest score first
 *            (a list of them for a batch); a two-string list is one pair, as TEI reads it.
 *   /rerank  {"query": str, "texts": [str], "raw_scores": false, "return_text": false,
 *            "truncate": false} -> [{"index", "score"[, "text"]}, ...], highest first; each
 *            text is scored as the pair (query, text) and its score is the model's first.
 * A model without scores answers 424 Backend as TEI's router does for the wrong model type. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "est/float_format.h"
#include "serve_internal.h"

static bool get_bool(const json_t *root, const char *key, bool dflt, bool *out) {
  const json_t *v = json_object_get(root, key);
  *out = dflt;
  if (!v || json_is_null(v)) return true;
  if (!json_is_boolean(v)) return false;
  *out = json_is_true(v);
  return true;
}

/* "raw_scores", "truncate" (default --auto_truncate) and "truncation_direction" (Right only). */
static char *options(serve_http *h, const json_t *root, bool *raw, bool *truncate, unsigned *status) {
  if (!get_bool(root, "raw_scores", false, raw))
    return *status = 422, serve_tei_error(*status, "`raw_scores` must be true or false");
  if (!get_bool(root, "truncate", h->opt->auto_truncate, truncate))
    return *status = 422, serve_tei_error(*status, "`truncate` must be true or false");
  const json_t *dir = json_object_get(root, "truncation_direction");
  if (dir && !json_is_null(dir) && !(json_is_string(dir) && !strcmp(json_string_value(dir), "Right")))
    return *status = 422, serve_tei_error(*status, "`truncation_direction`: est truncates on the right only "
                                                   "(\"Right\")");
  return NULL;
}

/* The served model's scores, or a 424 in *text. */
static const est_served_head *scoring_head(served_model *m, const char *route, bool rerank, unsigned *status,
                                           char **text) {
  const est_model_meta *meta = est_servable_meta(m->servable);
  const est_served_head *head = est_model_meta_head(meta);
  json_t *type = head->tei_scores && head->tei_model_type ? head->tei_model_type(meta) : NULL;
  const bool ok = type && (rerank ? json_object_get(type, "reranker") != NULL : true);
  json_decref(type);
  if (ok) return head;
  *status = 424;
  *text = serve_tei_error(*status, rerank ? "model is not a re-ranker model (%s on a \"%s\" head%s)"
                                          : "model is not a classifier model (%s on a \"%s\" head%s)",
                          route, head->name, head->tei_scores ? " with more than one label" : "");
  return NULL;
}

static void write_score(FILE *f, float v) {
  char num[48];
  fputs(est_format_float32(v, num, sizeof num), f);
}

/* Indexes 0..n-1 sorted by score, highest first (ties: the lower index first). */
typedef struct ranked {
  float score;
  int index;
} ranked;

static int by_score(const void *a, const void *b) {
  const ranked *x = a, *y = b;
  if (x->score != y->score) return x->score > y->score ? -1 : 1;
  return x->index - y->index;
}

static bool sort_desc(int *order, const float *scores, int n) {
  ranked *r = malloc((size_t)(n > 0 ? n : 1) * sizeof *r);
  if (!r) return false;
  for (int i = 0; i < n; i++) r[i] = (ranked){scores[i], i};
  qsort(r, (size_t)n, sizeof *r, by_score);
  for (int i = 0; i < n; i++) order[i] = r[i].index;
  free(r);
  return true;
}

/* One input of /predict: a string, or a list of one or two strings. */
static bool predict_input(const json_t *v, const char **a, const char **b) {
  if (json_is_string(v)) return *a = json_string_value(v), *b = NULL, true;
  const size_t k = json_is_array(v) ? json_array_size(v) : 0;
  if (k < 1 || k > 2 || !json_is_string(json_array_get(v, 0)) || (k == 2 && !json_is_string(json_array_get(v, 1))))
    return false;
  *a = json_string_value(json_array_get(v, 0));
  *b = k == 2 ? json_string_value(json_array_get(v, 1)) : NULL;
  return true;
}

char *serve_tei_predict(serve_http *h, served_model *m, const json_t *root, bool *queued, unsigned *status) {
  char *text = NULL;
  const est_served_head *head = scoring_head(m, "/predict", false, status, &text);
  if (!head) return text;
  bool raw, truncate;
  if ((text = options(h, root, &raw, &truncate, status))) return text;
  const json_t *in = json_object_get(root, "inputs");
  /* TEI's PredictInput: a string or a pair is one input; a list of lists a batch */
  const bool batch = json_is_array(in) && json_array_size(in) > 0 && json_is_array(json_array_get(in, 0));
  const bool pair = json_is_array(in) && !batch;
  if (!in || (!json_is_string(in) && !json_is_array(in)))
    return *status = 422, serve_tei_error(*status, "`inputs` must be a string, a pair of strings or a list of them");
  if (pair && json_array_size(in) == 0) return *status = 400, serve_tei_error(*status, "`inputs` cannot be empty");
  if (pair && json_array_size(in) != 2)
    return *status = 422, serve_tei_error(*status, "`inputs`: a list of strings must be a pair (two); a batch is "
                                                   "a list of lists");
  const size_t n = batch ? json_array_size(in) : 1;
  if (n > (size_t)h->opt->max_client_batch_size)
    return *status = 413, serve_tei_error(*status, "batch size %zu > maximum allowed batch size %d", n,
                                          h->opt->max_client_batch_size);
  const char **a = calloc(n, sizeof *a), **b = calloc(n, sizeof *b);
  if (!a || !b) return free(a), free(b), *status = 500, serve_tei_error(*status, "out of memory");
  for (size_t i = 0; i < n && !text; i++)
    if (!predict_input(batch ? json_array_get(in, i) : in, &a[i], &b[i]))
      *status = 422, text = serve_tei_error(*status, "`inputs[%zu]` must be a list of one or two strings", i);
  serve_job job = {0};
  if (!text && serve_tei_run(h, m, a, b, n, truncate, false, "inputs", &job, queued, status) != EST_OK)
    text = serve_tei_error(*status, "%s", est_error_message());
  const est_model_meta *meta = est_servable_meta(m->servable);
  const int W = est_servable_row_width(m->servable), C = (int)meta->num_labels;
  float *scores = malloc((size_t)(C > 0 ? C : 1) * sizeof *scores);
  int *order = malloc((size_t)(C > 0 ? C : 1) * sizeof *order);
  if (!text && scores && order) {
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f && batch) fputc('[', f);
    for (size_t i = 0; f && i < n; i++) {
      const int k = head->tei_scores(meta, job.probs + i * (size_t)W, raw, scores);
      if (!sort_desc(order, scores, k)) break;
      fputs(i ? ", [" : "[", f);
      for (int c = 0; c < k; c++) {
        json_t *label = json_string(meta->labels[order[c]]);
        char *enc = label ? json_dumps(label, JSON_ENCODE_ANY) : NULL;
        fprintf(f, "%s{\"score\": ", c ? ", " : "");
        write_score(f, scores[order[c]]);
        fprintf(f, ", \"label\": %s}", enc ? enc : "\"\"");
        free(enc);
        json_decref(label);
      }
      fputc(']', f);
    }
    if (f && batch) fputc(']', f);
    if (f) fclose(f);
    *status = 200;
  }
  free(scores), free(order), free(a), free(b);
  serve_tei_job_free(&job);
  return text;
}

char *serve_tei_rerank(serve_http *h, served_model *m, const json_t *root, bool *queued, unsigned *status) {
  char *text = NULL;
  const est_served_head *head = scoring_head(m, "/rerank", true, status, &text);
  if (!head) return text;
  bool raw, truncate, return_text;
  if ((text = options(h, root, &raw, &truncate, status))) return text;
  if (!get_bool(root, "return_text", false, &return_text))
    return *status = 422, serve_tei_error(*status, "`return_text` must be true or false");
  const json_t *query = json_object_get(root, "query"), *texts = json_object_get(root, "texts");
  if (!json_is_string(query)) return *status = 422, serve_tei_error(*status, "`query` must be a string");
  if (!json_is_array(texts)) return *status = 422, serve_tei_error(*status, "`texts` must be a list of strings");
  const size_t n = json_array_size(texts);
  if (n == 0) return *status = 400, serve_tei_error(*status, "`texts` cannot be empty");
  if (n > (size_t)h->opt->max_client_batch_size)
    return *status = 413, serve_tei_error(*status, "batch size %zu > maximum allowed batch size %d", n,
                                          h->opt->max_client_batch_size);
  const char **a = calloc(n, sizeof *a), **b = calloc(n, sizeof *b);
  if (!a || !b) return free(a), free(b), *status = 500, serve_tei_error(*status, "out of memory");
  for (size_t i = 0; i < n && !text; i++) {
    a[i] = json_string_value(query);
    if (!json_is_string(json_array_get(texts, i)))
      *status = 422, text = serve_tei_error(*status, "`texts[%zu]` must be a string", i);
    else b[i] = json_string_value(json_array_get(texts, i));
  }
  serve_job job = {0};
  if (!text && serve_tei_run(h, m, a, b, n, truncate, false, "inputs", &job, queued, status) != EST_OK)
    text = serve_tei_error(*status, "%s", est_error_message());
  const est_model_meta *meta = est_servable_meta(m->servable);
  const int W = est_servable_row_width(m->servable);
  float *scores = malloc(n * sizeof *scores), *row = malloc(((size_t)meta->num_labels + 1) * sizeof *row);
  int *order = malloc(n * sizeof *order);
  if (!text && scores && row && order) {
    for (size_t i = 0; i < n; i++) {
      head->tei_scores(meta, job.probs + i * (size_t)W, raw, row);
      scores[i] = row[0];
    }
    size_t len = 0;
    FILE *f = sort_desc(order, scores, (int)n) ? open_memstream(&text, &len) : NULL; /* NULL: a 500 */
    for (size_t k = 0; f && k < n; k++) {
      fprintf(f, "%s{\"index\": %d, \"score\": ", k ? ", " : "[", order[k]);
      write_score(f, scores[order[k]]);
      if (return_text) {
        char *enc = json_dumps(json_array_get(texts, (size_t)order[k]), JSON_ENCODE_ANY);
        fprintf(f, ", \"text\": %s", enc ? enc : "\"\"");
        free(enc);
      }
      fputc('}', f);
    }
    if (f) fputs("]", f), fclose(f);
    *status = 200;
  }
  free(scores), free(row), free(order), free(a), free(b);
  serve_tei_job_free(&job);
  return text;
}
