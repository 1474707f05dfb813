/* `est predict` on a question-answering export (head "squad"): JSON lines
 * {"question": "...", "context": "..."} in, {"answer": ..., "start": ..., "end": ...,
 * "score": ...} out, one per line in input order (est/serving.h est_qa_*). Streams by groups
 * of batch_lines questions: their windows run together, so a group costs one forward pass
 * when its windows fit in the servable's max_batch (else one per max_batch windows). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "core/json_error.h"
#include "est/serving.h"

typedef struct qa_group {
  json_t **lines;              /* the parsed lines whose strings the group points into */
  const char **questions, **contexts;
  est_qa_answer *answers;
  int n, cap;
} qa_group;

static est_status run_group(est_servable *s, qa_group *g, FILE *out) {
  if (!g->n) return EST_OK;
  est_status st = est_qa_answer_questions(s, g->questions, g->contexts, (size_t)g->n, g->answers);
  for (int i = 0; i < g->n; i++) {
    if (st == EST_OK) {
      est_qa_answer_write_json(out, &g->answers[i]);
      fputc('\n', out);
      est_qa_answer_clear(&g->answers[i]);
    }
    json_decref(g->lines[i]);
    g->lines[i] = NULL;
  }
  g->n = 0;
  if (st == EST_OK && ferror(out)) st = est_error(EST_ERR_IO, "writing the answers to stdout: %s", strerror(errno));
  return st;
}

/* A line's string field, or an error naming the line and the field. */
static est_status field(const json_t *o, const char *name, const char *src, long lineno, const char **out) {
  const json_t *v = json_object_get(o, name);
  if (!v) return est_error(EST_ERR_INVALID_ARGUMENT, "%s:%ld: missing \"%s\" (a string)", src, lineno, name);
  if (!json_is_string(v)) return est_error(EST_ERR_INVALID_ARGUMENT, "%s:%ld: \"%s\" must be a string", src, lineno, name);
  *out = json_string_value(v);
  return EST_OK;
}

est_status est_cli_predict_answers(est_servable *s, FILE *in, const char *src, int batch_lines, FILE *out) {
  qa_group g = {.cap = batch_lines};
  g.lines = calloc((size_t)g.cap, sizeof *g.lines);
  g.questions = malloc((size_t)g.cap * sizeof *g.questions);
  g.contexts = malloc((size_t)g.cap * sizeof *g.contexts);
  g.answers = calloc((size_t)g.cap, sizeof *g.answers);
  est_status st = g.lines && g.questions && g.contexts && g.answers ? EST_OK : est_error(EST_ERR_NO_MEMORY, "predict");
  char *line = NULL;
  size_t linecap = 0;
  long lineno = 0;
  while (st == EST_OK && getline(&line, &linecap, in) >= 0) {
    lineno++;
    json_error_t err;
    json_t *o = json_loads(line, JSON_REJECT_DUPLICATES, &err);
    if (!json_is_object(o)) {
      st = est_error(EST_ERR_INVALID_ARGUMENT, "%s:%ld: not a JSON object {\"question\": ..., \"context\": ...} (%s)",
                     src, lineno, o ? "another JSON value" : est_json_error_text(&err));
      json_decref(o);
      break;
    }
    g.lines[g.n] = o;
    st = field(o, "question", src, lineno, &g.questions[g.n]);
    if (st == EST_OK) st = field(o, "context", src, lineno, &g.contexts[g.n]);
    g.n++;
    if (st == EST_OK && g.n == g.cap) st = run_group(s, &g, out);
  }
  if (st == EST_OK && ferror(in)) st = est_error(EST_ERR_IO, "reading %s failed", src);
  if (st == EST_OK) st = run_group(s, &g, out);
  for (int i = 0; g.lines && i < g.n; i++) json_decref(g.lines[i]);
  free(line);
  free(g.lines), free(g.questions), free(g.contexts), free(g.answers);
  return st;
}
