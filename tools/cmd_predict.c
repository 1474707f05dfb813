/* `est predict`: class probabilities of new text with an exported classifier (est/serving.h),
 * or answers to questions with an exported question-answering model (predict_answers.c).
 * Streams: reads --batch_size lines, predicts them at the batch's own length (its longest
 * example rounded up to 8), writes them, and reads on, so memory does not grow with the
 * input. Output lines are in input order. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "core/json_error.h"
#include "est/float_format.h"
#include "est/flags.h"
#include "est/log.h"
#include "est/precision.h"
#include "est/run_classifier.h"
#include "est/serving.h"
#include "est/threads.h"

static const char usage[] =
    "usage: est predict --export_dir=DIR [--input_file=FILE] [--input_format=tsv|jsonl]\n"
    "                   [--output_format=probabilities|label|jsonl] [--batch_size=32]\n\n"
    "Predicts with a model exported by `est run_classifier --do_export` (DIR: a version directory,\n"
    "or the export base: its highest version). One example per input line (stdin by default):\n"
    "  tsv    text_a, or text_a<TAB>text_b\n"
    "  jsonl  {\"text_a\": \"...\", \"text_b\": \"...\"}\n"
    "One output line per example, in input order: the class probabilities TAB-separated in label\n"
    "order, as run_classifier's test_results.tsv (label: the most probable label; jsonl: both).\n\n"
    "With a model exported by `est run_squad --do_export`, each input line is\n"
    "  {\"question\": \"...\", \"context\": \"...\"}\n"
    "and each output line {\"answer\": \"...\", \"start\": S, \"end\": E, \"score\": P}: the answer, its\n"
    "character offsets in the context (end exclusive) and its n-best probability; --input_format\n"
    "and --output_format do not apply, --batch_size counts windows per forward pass.";

typedef struct predict_ctx {
  est_servable *s;
  est_featurizer *f;
  int S, C, cap;
  const char *output_format;
  int32_t *ids, *mask, *segs;
  float *probs;
  int n, longest;
  json_t **held;               /* jsonl input: parsed lines kept until their batch ran */
} predict_ctx;

static est_status flush_batch(predict_ctx *p, FILE *out) {
  if (p->n == 0) return EST_OK;
  const est_model_meta *m = est_servable_meta(p->s);
  int L = est_serving_bucket_length(p->longest, p->S);
  est_status st = est_servable_predict_strided(p->s, p->ids, p->mask, p->segs, p->n, p->S, L, p->probs);
  if (st != EST_OK) return st;
  char num[48];
  for (int i = 0; i < p->n; i++) {
    const float *pr = p->probs + (size_t)i * p->C;
    int best = 0;
    for (int c = 1; c < p->C; c++)
      if (pr[c] > pr[best]) best = c;
    if (!strcmp(p->output_format, "label")) {
      fprintf(out, "%s\n", m->labels[best]);
      continue;
    }
    int json = !strcmp(p->output_format, "jsonl");
    if (json) fputs("{\"probabilities\": [", out);
    for (int c = 0; c < p->C; c++) {
      if (c) fputs(json ? ", " : "\t", out);
      fputs(est_format_float32(pr[c], num, sizeof num), out);
    }
    if (json) {
      json_t *l = json_string(m->labels[best]);
      char *enc = json_dumps(l, JSON_ENCODE_ANY);
      fprintf(out, "], \"label\": %s}", enc ? enc : "null");
      free(enc);
      json_decref(l);
    }
    fputc('\n', out);
  }
  for (int i = 0; i < p->n; i++) json_decref(p->held[i]), p->held[i] = NULL;
  p->n = 0;
  p->longest = 0;
  /* errno is the failed write's: the calls since then succeeded, and success leaves errno. */
  return ferror(out) ? est_error(EST_ERR_IO, "writing the predictions to stdout: %s", strerror(errno)) : EST_OK;
}

/* One input line -> the batch's next row. */
static est_status add_line(predict_ctx *p, char *line, const char *input_format, const char *src, long lineno) {
  const char *a = line, *b = NULL;
  if (!strcmp(input_format, "jsonl")) {
    json_error_t err;
    json_t *o = json_loads(line, 0, &err);
    if (!json_is_object(o)) {
      json_decref(o);
      return est_error(EST_ERR_INVALID_ARGUMENT, "%s:%ld: not a JSON object (%s)", src, lineno,
                       o ? "another JSON value" : est_json_error_text(&err));
    }
    json_t *ja = json_object_get(o, "text_a"), *jb = json_object_get(o, "text_b");
    if (!json_is_string(ja) || (jb && !json_is_null(jb) && !json_is_string(jb))) {
      json_decref(o);
      return est_error(EST_ERR_INVALID_ARGUMENT, "%s:%ld: needs a string \"text_a\" (and optionally \"text_b\")", src,
                       lineno);
    }
    a = json_string_value(ja);
    b = json_is_string(jb) ? json_string_value(jb) : NULL;
    p->held[p->n] = o;
  } else {
    char *tab = strchr(line, '\t');
    if (tab) *tab = 0, b = tab + 1;
  }
  size_t off = (size_t)p->n * p->S;
  int len;
  est_status st = est_featurizer_run(p->f, a, b, p->ids + off, p->mask + off, p->segs + off, &len);
  if (st != EST_OK) return est_error_prefix("%s:%ld: ", src, lineno);
  if (len > p->longest) p->longest = len;
  p->n++;
  return EST_OK;
}

int est_cmd_predict(int argc, char **argv) {
  const char *export_dir = NULL, *input_file = NULL, *input_format = "tsv", *output_format = "probabilities";
  const char *precision = NULL; /* the export's (est_model.json) unless given */
  int64_t batch_size = 32, num_threads = 0;
  est_flag flags[] = {
    EST_FLAG_STRING("export_dir", &export_dir, "An export base directory or one version directory.", 1),
    EST_FLAG_STRING("input_file", &input_file, "Input lines; default stdin.", 0),
    EST_FLAG_STRING("input_format", &input_format, "tsv (text_a[<TAB>text_b]) or jsonl.", 0),
    EST_FLAG_STRING("output_format", &output_format, "probabilities, label or jsonl.", 0),
    EST_FLAG_INT("batch_size", &batch_size, "Examples per forward pass.", 0),
    EST_FLAG_INT("num_threads", &num_threads, "Threads for the math kernels; 0 = OpenMP's default.", 0),
    EST_FLAG_STRING("precision", &precision, EST_PRECISION_FLAG_HELP, 0),
  };
  const int nflags = (int)(sizeof flags / sizeof flags[0]);
  int rc = est_cli_parse("predict", usage, flags, nflags, argc, argv, NULL, NULL, 0, 0);
  if (rc >= 0) return rc;
  est_flags_result r = EST_FLAGS_OK; /* the checks below turn it into an error */
  if (r == EST_FLAGS_OK && strcmp(input_format, "tsv") && strcmp(input_format, "jsonl"))
    r = EST_FLAGS_ERROR, est_error(EST_ERR_INVALID_ARGUMENT, "--input_format=%s: must be tsv or jsonl", input_format);
  if (r == EST_FLAGS_OK && strcmp(output_format, "probabilities") && strcmp(output_format, "label") &&
      strcmp(output_format, "jsonl"))
    r = EST_FLAGS_ERROR,
    est_error(EST_ERR_INVALID_ARGUMENT, "--output_format=%s: must be probabilities, label or jsonl", output_format);
  if (r == EST_FLAGS_OK && (batch_size < 1 || batch_size > 65536))
    r = EST_FLAGS_ERROR, est_error(EST_ERR_INVALID_ARGUMENT, "--batch_size=%lld: must be in [1, 65536]",
                                   (long long)batch_size);
  if ((rc = est_cli_apply_runtime_flags("predict", r == EST_FLAGS_OK, precision, num_threads)) >= 0) return rc;

  predict_ctx p = {.output_format = output_format, .cap = (int)batch_size};
  FILE *in = input_file ? fopen(input_file, "rb") : stdin;
  const char *src = input_file ? input_file : "<stdin>";
  est_status st = in ? EST_OK : est_error(EST_ERR_NOT_FOUND, "--input_file=%s: cannot open", input_file);
  if (st == EST_OK) st = est_servable_load(&p.s, export_dir, p.cap);
  if (st == EST_OK) /* as est serve logs the version it serves (stderr; stdout is the predictions) */
    EST_LOG_INFO("predicting with version %lld from %s", (long long)est_servable_version(p.s), est_servable_dir(p.s));
  /* probabilities per label, or answers to questions (squad): an export of another head
   * (sentence embeddings) has neither */
  if (st == EST_OK && strcmp(est_servable_meta(p.s)->head, est_bert_classifier_head_type.name) &&
      strcmp(est_servable_meta(p.s)->head, est_bert_squad_head_type.name))
    st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: the export's head is \"%s\"; est predict answers a classifier's "
                   "probabilities or a squad model's answers (an embedding export: est embed --model_dir)",
                   est_servable_dir(p.s), est_servable_meta(p.s)->head);
  if (st == EST_OK) st = est_cli_apply_model_precision(precision, p.s);
  const bool answers = st == EST_OK && !strcmp(est_servable_meta(p.s)->head, "squad");
  if (answers) st = est_cli_predict_answers(p.s, in, src, p.cap, stdout);
  if (st == EST_OK && !answers) st = est_featurizer_create(&p.f, p.s);
  if (st == EST_OK && !answers) {
    p.S = est_servable_meta(p.s)->max_seq_length;
    p.C = (int)est_servable_meta(p.s)->num_labels;
    size_t rows = (size_t)p.cap * p.S;
    p.ids = malloc(rows * sizeof(int32_t));
    p.mask = malloc(rows * sizeof(int32_t));
    p.segs = malloc(rows * sizeof(int32_t));
    p.probs = malloc((size_t)p.cap * p.C * sizeof(float));
    p.held = calloc((size_t)p.cap, sizeof *p.held);
    if (!p.ids || !p.mask || !p.segs || !p.probs || !p.held) st = est_error(EST_ERR_NO_MEMORY, "predict buffers");
  }
  char *line = NULL;
  size_t linecap = 0;
  long lineno = 0;
  ssize_t got;
  while (st == EST_OK && !answers && (got = getline(&line, &linecap, in)) >= 0) {
    lineno++;
    while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r')) line[--got] = 0;
    st = add_line(&p, line, input_format, src, lineno);
    if (st == EST_OK && p.n == p.cap) st = flush_batch(&p, stdout);
  }
  if (st == EST_OK && in && ferror(in)) st = est_error(EST_ERR_IO, "reading %s failed", src);
  if (st == EST_OK && !answers) st = flush_batch(&p, stdout);
  if (st == EST_OK && fflush(stdout) != 0)
    st = est_error(EST_ERR_IO, "writing the predictions to stdout: %s", strerror(errno));
  for (int i = 0; p.held && i < p.cap; i++) json_decref(p.held[i]);
  free(line);
  free(p.ids), free(p.mask), free(p.segs), free(p.probs), free(p.held);
  est_featurizer_free(p.f);
  est_servable_free(p.s);
  if (in && in != stdin) fclose(in);
  if (st != EST_OK) {
    fprintf(stderr, "est predict: error: %s\n", est_error_message());
    return 1;
  }
  return 0;
}
