/* A servable's head at work (est/serving.h est_served_batch, est/served_head.h): the head's
 * batch with what it reads text with (the servable's tokenizer, and run_classifier's
 * featurizer made when a text pair first needs it), then one run of the servable over its
 * rows. est predict and est serve go through here for every head; neither knows which head
 * it runs. */
#include <stdlib.h>
#include <string.h>

#include "est/serving.h"

struct est_served_batch {
  const est_served_head *head;
  void *state;                  /* the head's batch */
  est_served_context ctx;
  est_tokenizer *tok;
  const est_servable *s;
  est_featurizer *featurizer;   /* made at the first text pair */
  size_t count;                 /* instances or lines added */
  float *outputs;               /* est_served_batch_run's, kept for the answers' writing */
};

/* est_served_context.featurize: the servable's est_featurizer, made on first use. */
static est_status featurize(void *self, const char *text_a, const char *text_b, int32_t *input_ids,
                            int32_t *input_mask, int32_t *segment_ids, int *length) {
  est_served_batch *b = self;
  if (!b->featurizer) {
    est_status st = est_featurizer_create(&b->featurizer, b->s);
    if (st != EST_OK) return st;
  }
  return est_featurizer_run(b->featurizer, text_a, text_b, input_ids, input_mask, segment_ids, length);
}

est_status est_served_batch_create(est_served_batch **out, const est_servable *s, const char *input_format,
                                   const char *output_format) {
  *out = NULL;
  est_served_batch *b = calloc(1, sizeof *b);
  if (!b) return est_error(EST_ERR_NO_MEMORY, "request");
  const est_model_meta *meta = est_servable_meta(s);
  b->head = est_model_meta_head(meta);
  b->s = s;
  est_status st = est_servable_tokenizer_create(s, &b->tok);
  b->ctx = (est_served_context){.meta = meta, .output_width = est_servable_row_width(s), .tokenizer = b->tok,
                                .featurize = featurize, .featurizer = b, .input_format = input_format,
                                .output_format = output_format};
  if (st == EST_OK) st = b->head->batch_create(&b->state, &b->ctx);
  if (st != EST_OK) {
    est_served_batch_free(b);
    return st;
  }
  *out = b;
  return EST_OK;
}

void est_served_batch_free(est_served_batch *b) {
  if (!b) return;
  if (b->state) b->head->batch_free(b->state);
  est_featurizer_free(b->featurizer);
  est_tokenizer_free(b->tok);
  free(b->outputs);
  free(b);
}

est_status est_served_batch_add_instance(est_served_batch *b, const est_instance *in) {
  est_status st = b->head->add_instance(b->state, in, b->count);
  if (st == EST_OK) b->count++;
  return st;
}

est_status est_served_batch_add_line(est_served_batch *b, char *line, const char *src, long lineno) {
  if (!b->head->add_line)
    return est_error(EST_ERR_FAILED_PRECONDITION, "%s:%ld: the %s head reads no input lines", src, lineno,
                     b->head->name);
  est_status st = b->head->add_line(b->state, line, src, lineno);
  if (st == EST_OK) b->count++;
  return st;
}

size_t est_served_batch_count(const est_served_batch *b) { return b->count; }

est_status est_served_batch_rows(est_served_batch *b, est_served_rows *rows) {
  return b->head->rows(b->state, rows);
}

est_status est_served_batch_answer(est_served_batch *b, const float *outputs) {
  return b->head->answer(b->state, outputs);
}

est_status est_served_batch_run(est_served_batch *b, est_servable *s) {
  est_served_rows r;
  est_status st = est_served_batch_rows(b, &r);
  if (st != EST_OK) return st;
  const int S = est_servable_meta(s)->max_seq_length;
  free(b->outputs);
  b->outputs = malloc(((size_t)r.n + 1) * (size_t)est_servable_row_width(s) * sizeof(float));
  if (!b->outputs) return est_error(EST_ERR_NO_MEMORY, "outputs of %d rows", r.n);
  if (r.n)
    st = est_servable_predict_rows(s, r.input_ids, r.input_mask, r.segment_ids, r.n, S,
                                   est_serving_bucket_length(r.longest, S), b->outputs, NULL);
  return st == EST_OK ? est_served_batch_answer(b, b->outputs) : st;
}

void est_served_batch_write(const est_served_batch *b, size_t i, est_served_form form, FILE *out) {
  b->head->write(b->state, i, form, out);
}
