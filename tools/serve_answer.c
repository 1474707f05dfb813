/* `est serve`'s :predict for a question-answering model (head "squad", docs/squad.md §11):
 * {"instances": [{"question": ..., "context": ...}, ...]} -> each context's doc_stride
 * windows (est_qa_batch, in this connection's thread) -> one job of all the request's
 * windows, so the batcher keeps them together and runs them in one forward pass, beside
 * other requests' rows when they fit -> write_predictions' answers
 * {"predictions": [{"answer": ..., "start": ..., "end": ..., "score": ...}, ...]}. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve_internal.h"

est_status serve_answer(serve_server *s, served_model *m, const char *body, size_t size, bool *preparing,
                        char **text) {
  *text = NULL;
  const est_model_meta *meta = est_servable_meta(m->servable);
  const est_request_limits lim = {meta->max_seq_length, meta->bert_config.vocab_size,
                                  meta->bert_config.type_vocab_size,
                                  (size_t)s->opt.max_enqueued_batches * (size_t)s->opt.max_batch_size};
  est_request req;
  est_status st = est_request_parse(&req, EST_REQUEST_ANSWER, body, size, &lim);
  if (st != EST_OK) return st;
  if (req.signature_name && *req.signature_name && strcmp(req.signature_name, "serving_default")) {
    st = est_error(EST_ERR_INVALID_ARGUMENT, "Serving signature name: \"%s\" not found in signature def",
                   req.signature_name);
    est_request_clear(&req);
    return st;
  }
  const char **questions = malloc(req.count * sizeof *questions), **contexts = malloc(req.count * sizeof *contexts);
  est_qa_answer *answers = calloc(req.count, sizeof *answers);
  est_qa_batch *b = NULL;
  serve_job job = {.model = m};
  if (!questions || !contexts || !answers) st = est_error(EST_ERR_NO_MEMORY, "request");
  for (size_t i = 0; st == EST_OK && i < req.count; i++)
    questions[i] = req.instances[i].question, contexts[i] = req.instances[i].context;
  if (st == EST_OK) st = est_qa_batch_create(&b, m->servable, questions, contexts, req.count);
  if (st == EST_OK) {
    const int32_t *ids, *mask, *segs;
    est_qa_batch_features(b, &ids, &mask, &segs, &job.longest);
    job.n = est_qa_batch_rows(b);
    job.ids = (int32_t *)ids, job.mask = (int32_t *)mask, job.segs = (int32_t *)segs;
    job.probs = malloc(((size_t)job.n + 1) * (size_t)est_servable_output_width(m->servable) * sizeof(float));
    if (!job.probs) st = est_error(EST_ERR_NO_MEMORY, "request of %d windows", job.n);
  }
  if (st == EST_OK && job.n > 0) { /* contexts without a word have no window to run */
    *preparing = false;            /* serve_run_job takes the announcement over */
    st = serve_run_job(s, &job);
  }
  if (st == EST_OK) st = est_qa_batch_answers(b, job.probs, answers);
  if (st == EST_OK) {
    size_t len = 0;
    FILE *f = open_memstream(text, &len);
    if (!f) st = est_error(EST_ERR_NO_MEMORY, "answer");
    for (size_t i = 0; f && i < req.count; i++) {
      fputs(i ? ", " : "{\"predictions\": [", f);
      est_qa_answer_write_json(f, &answers[i]);
    }
    if (f) fputs("]}\n", f), fclose(f);
  }
  for (size_t i = 0; answers && i < req.count; i++) est_qa_answer_clear(&answers[i]);
  free(answers), free(questions), free(contexts), free(job.probs);
  est_qa_batch_free(b);
  est_request_clear(&req);
  return st;
}
