/* The text form of a served head (est/served_head.h): one row per instance or input line,
 * run_classifier's features of a text pair (or the request's own tokens), answered with the
 * row's output floats. The classifier and the pooling head serve this way; a new head whose
 * instance is a text pair points its descriptor here (EST_SERVED_TEXT_BATCH) and keeps only
 * its layer.
 *
 *   est serve :predict   {"predictions": [[f, ...], ...]} (columns: {"outputs": ...})
 *   est serve :classify  {"results": [[["label", f], ...], ...]}
 *   est predict          probabilities TAB-separated in label order (test_results.tsv's form),
 *                        the most probable label, or {"probabilities": [...], "label": "..."} */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/json_error.h"
#include "est/float_format.h"
#include "est/served_head.h"

typedef struct text_batch {
  const est_served_context *ctx;
  int S, W;                     /* max_seq_length, floats answered per row */
  int row_width;                /* floats per served row (W, or 2W with a second output) */
  int32_t *ids, *mask, *segs;   /* [cap, S] */
  int n, cap, longest;
  const float *outputs;         /* [n, W] after answer */
} text_batch;

est_status est_served_text_batch_create(void **batch, const est_served_context *ctx) {
  text_batch *b = calloc(1, sizeof *b);
  if (!b) return est_error(EST_ERR_NO_MEMORY, "request");
  b->ctx = ctx;
  b->S = ctx->meta->max_seq_length;
  b->W = ctx->output_width;
  /* the text form answers the head's first output (e.g. the classifier's probabilities,
   * not the logits beside them) */
  if (est_model_meta_head(ctx->meta)->second_output_extra) b->W /= 2;
  b->row_width = ctx->output_width;
  *batch = b;
  return EST_OK;
}

void est_served_text_batch_free(void *batch) {
  text_batch *b = batch;
  if (!b) return;
  free(b->ids), free(b->mask), free(b->segs);
  free(b);
}

/* The next row, zeroed. */
static est_status next_row(text_batch *b, int32_t **ids, int32_t **mask, int32_t **segs) {
  if (b->n == b->cap) {
    const int cap = b->cap ? 2 * b->cap : 8;
    const size_t n = (size_t)cap * (size_t)b->S;
    if (!EST_RESIZE(b->ids, n) || !EST_RESIZE(b->mask, n) || !EST_RESIZE(b->segs, n))
      return est_error(EST_ERR_NO_MEMORY, "request of %d rows", cap);
    b->cap = cap;
  }
  const size_t off = (size_t)b->n * b->S;
  *ids = b->ids + off, *mask = b->mask + off, *segs = b->segs + off;
  memset(*ids, 0, (size_t)b->S * sizeof(int32_t));
  memset(*mask, 0, (size_t)b->S * sizeof(int32_t));
  memset(*segs, 0, (size_t)b->S * sizeof(int32_t));
  return EST_OK;
}

/* A text pair as the next row. */
static est_status add_text(text_batch *b, const char *a, const char *second) {
  int32_t *ids = NULL, *mask = NULL, *segs = NULL;
  int len = 0;
  est_status st = next_row(b, &ids, &mask, &segs);
  if (st == EST_OK) st = b->ctx->featurize(b->ctx->featurizer, a, second, ids, mask, segs, &len);
  if (st != EST_OK) return st;
  if (len > b->longest) b->longest = len;
  b->n++;
  return EST_OK;
}

est_status est_served_text_add_instance(void *batch, const est_instance *in, size_t i) {
  text_batch *b = batch;
  if (!in->input_ids) {
    est_status st = add_text(b, in->texts[0], in->texts[1]);
    return st == EST_OK ? st : est_error_prefix("instance %zu: ", i);
  }
  int32_t *ids = NULL, *mask = NULL, *segs = NULL;
  est_status st = next_row(b, &ids, &mask, &segs);
  if (st != EST_OK) return st;
  const size_t bytes = (size_t)in->length * sizeof(int32_t);
  memcpy(ids, in->input_ids, bytes);
  memcpy(mask, in->input_mask, bytes);
  memcpy(segs, in->segment_ids, bytes);
  if (in->length > b->longest) b->longest = in->length;
  b->n++;
  return EST_OK;
}

/* "needs a string "text_a" (and optionally "text_b")": what a jsonl line must hold. */
static const char *line_needs(char *buf, size_t size, const est_served_inputs *in) {
  if (in->required >= 2)
    snprintf(buf, size, "strings \"%s\" and \"%s\"", in->texts[0], in->texts[1]);
  else if (in->texts[1])
    snprintf(buf, size, "a string \"%s\" (and optionally \"%s\")", in->texts[0], in->texts[1]);
  else
    snprintf(buf, size, "a string \"%s\"", in->texts[0]);
  return buf;
}

est_status est_served_text_add_line(void *batch, char *line, const char *src, long lineno) {
  text_batch *b = batch;
  const char *a = line, *second = NULL;
  json_t *o = NULL;
  if (b->ctx->input_format && !strcmp(b->ctx->input_format, "jsonl")) {
    /* {"text_a": "...", "text_b": "..."}: the head's two texts by name */
    const est_served_inputs *in = &est_model_meta_head(b->ctx->meta)->inputs;
    json_error_t err;
    o = json_loads(line, 0, &err);
    if (!json_is_object(o)) {
      json_decref(o);
      return est_error(EST_ERR_INVALID_ARGUMENT, "%s:%ld: not a JSON object (%s)", src, lineno,
                       o ? "another JSON value" : est_json_error_text(&err));
    }
    json_t *ja = json_object_get(o, in->texts[0]), *jb = in->texts[1] ? json_object_get(o, in->texts[1]) : NULL;
    if (!json_is_string(ja) || (jb && !json_is_null(jb) && !json_is_string(jb)) ||
        (in->required >= 2 && !json_is_string(jb))) {
      char needs[200];
      json_decref(o);
      return est_error(EST_ERR_INVALID_ARGUMENT, "%s:%ld: needs %s", src, lineno, line_needs(needs, sizeof needs, in));
    }
    a = json_string_value(ja);
    second = json_is_string(jb) ? json_string_value(jb) : NULL;
  } else {
    char *tab = strchr(line, '\t');
    if (tab) *tab = 0, second = tab + 1;
  }
  est_status st = add_text(b, a, second);
  json_decref(o);
  return st == EST_OK ? st : est_error_prefix("%s:%ld: ", src, lineno);
}

est_status est_served_text_rows(void *batch, est_served_rows *rows) {
  const text_batch *b = batch;
  *rows = (est_served_rows){.input_ids = b->ids, .input_mask = b->mask, .segment_ids = b->segs, .n = b->n,
                            .longest = b->longest};
  return EST_OK;
}

est_status est_served_text_answer(void *batch, const float *outputs) {
  ((text_batch *)batch)->outputs = outputs;
  return EST_OK;
}

void est_served_text_row(const void *batch, size_t i, const int32_t **input_ids, const int32_t **input_mask,
                         const float **outputs) {
  const text_batch *b = batch;
  const size_t off = i * (size_t)b->S;
  if (input_ids) *input_ids = b->ids + off;
  if (input_mask) *input_mask = b->mask + off;
  if (outputs) *outputs = b->outputs ? b->outputs + i * (size_t)b->row_width : NULL;
}

const est_served_context *est_served_text_context(const void *batch) { return ((const text_batch *)batch)->ctx; }

/* A label as a JSON string (json.dumps' escapes); `fallback` when it cannot be encoded. */
static void write_label(FILE *out, const est_model_meta *meta, int c, const char *fallback) {
  if ((size_t)c >= meta->num_labels) { /* a head without labels: the output's index */
    fprintf(out, "\"%d\"", c);
    return;
  }
  json_t *l = json_string(meta->labels[c]);
  char *enc = json_dumps(l, JSON_ENCODE_ANY);
  fputs(enc ? enc : fallback, out);
  free(enc);
  json_decref(l);
}

void est_served_text_write(const void *batch, size_t i, est_served_form form, FILE *out) {
  const text_batch *b = batch;
  const est_model_meta *meta = b->ctx->meta;
  const float *row = b->outputs + i * (size_t)b->row_width;
  char num[48];
  if (form != EST_SERVED_LINE) {
    fputc('[', out);
    for (int c = 0; c < b->W; c++) {
      const char *v = est_format_float32(row[c], num, sizeof num);
      if (form == EST_SERVED_CLASSIFY) {
        fputs(c ? ", [" : "[", out);
        write_label(out, meta, c, "\"\"");
        fprintf(out, ", %s]", v);
      } else {
        fprintf(out, "%s%s", c ? ", " : "", v);
      }
    }
    fputc(']', out);
    return;
  }
  /* est predict: the most probable (the first on ties, as argmax) */
  int best = 0;
  for (int c = 1; c < b->W; c++)
    if (row[c] > row[best]) best = c;
  const char *format = b->ctx->output_format ? b->ctx->output_format : "probabilities";
  if (!strcmp(format, "label")) {
    if ((size_t)best < meta->num_labels) fputs(meta->labels[best], out);
    else fprintf(out, "%d", best);
    return;
  }
  const int json = !strcmp(format, "jsonl");
  if (json) fputs("{\"probabilities\": [", out);
  for (int c = 0; c < b->W; c++) {
    if (c) fputs(json ? ", " : "\t", out);
    fputs(est_format_float32(row[c], num, sizeof num), out);
  }
  if (json) {
    fputs("], \"label\": ", out);
    write_label(out, meta, best, "null");
    fputc('}', out);
  }
}

void est_served_text_signature(const est_model_meta *meta, int width, json_t *outputs, json_t *metadata) {
  const char *output = est_model_meta_head(meta)->outputs[0];
  if (est_model_meta_head(meta)->second_output_extra) width /= 2; /* the first output's, as answered */
  json_object_set_new(outputs, output, est_served_tensor_info(output, "DT_FLOAT", -1, width));
  json_t *labels = json_array();
  for (size_t i = 0; i < meta->num_labels; i++) json_array_append_new(labels, json_string(meta->labels[i]));
  json_object_set_new(metadata, "labels", labels);
}
