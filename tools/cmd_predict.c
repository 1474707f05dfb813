/* `est predict`: the answers of an exported model to input lines, as its head reads and writes
 * them (est/served_head.h): class probabilities of new text with a classifier, answers to
 * questions with a question-answering model. Streams: reads --batch_size lines, runs them as
 * one batch of the head (est_served_batch: at the batch's own length, its longest row rounded
 * up to 8), writes their answers, and reads on, so memory does not grow with the input.
 * Output lines are in input order. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "est/flags.h"
#include "est/log.h"
#include "est/precision.h"
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
    "and --output_format do not apply, --batch_size counts windows per forward pass.\n\n"
    "With a token classifier (`est run_ner --do_export`), each input line is the text (tsv) or\n"
    "{\"text_a\": \"...\", \"aggregation_strategy\": \"none|simple|first|average|max\"} (jsonl), and each\n"
    "output line the JSON list of its entities, as transformers' token-classification pipeline.\n\n"
    "DIR may also be a HuggingFace model directory (*ForSequenceClassification,\n"
    "*ForTokenClassification, *ForQuestionAnswering), served as it is (docs/serving.md).";

/* Runs the lines read so far and writes their answers, one line each. */
static est_status flush_batch(est_served_batch **b, est_servable *s, FILE *out) {
  if (!*b) return EST_OK;
  est_status st = est_served_batch_run(*b, s);
  for (size_t i = 0; st == EST_OK && i < est_served_batch_count(*b); i++) {
    est_served_batch_write(*b, i, EST_SERVED_LINE, out);
    fputc('\n', out);
  }
  est_served_batch_free(*b);
  *b = NULL;
  /* errno is the failed write's: the calls since then succeeded, and success leaves errno. */
  if (st == EST_OK && ferror(out)) st = est_error(EST_ERR_IO, "writing the predictions to stdout: %s", strerror(errno));
  return st;
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
    EST_CLI_RUNTIME_FLAGS(&num_threads, &precision),
  };
  int rc = EST_CLI_PARSE_FLAGS("predict", usage, flags, argc, argv, 0);
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

  FILE *in = input_file ? fopen(input_file, "rb") : stdin;
  const char *src = input_file ? input_file : "<stdin>";
  est_servable *s = NULL;
  est_served_batch *b = NULL;
  est_status st = in ? EST_OK : est_error(EST_ERR_NOT_FOUND, "--input_file=%s: cannot open", input_file);
  if (st == EST_OK) st = est_servable_load(&s, export_dir, (int)batch_size);
  if (st == EST_OK) /* as est serve logs the version it serves (stderr; stdout is the predictions) */
    EST_LOG_INFO("predicting with version %lld from %s", (long long)est_servable_version(s), est_servable_dir(s));
  /* a head that answers input lines (a classifier's probabilities, a squad model's answers);
   * one that does not (sentence embeddings) says where to go instead */
  const est_served_head *head = st == EST_OK ? est_model_meta_head(est_servable_meta(s)) : NULL;
  if (st == EST_OK && !head->add_line)
    st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: the export's head is \"%s\"; %s", est_servable_dir(s), head->name,
                   head->no_predict ? head->no_predict : "est predict has no input lines for it");
  if (st == EST_OK) st = est_cli_apply_model_precision(precision, s);
  char *line = NULL;
  size_t linecap = 0;
  long lineno = 0;
  ssize_t got;
  while (st == EST_OK && (got = getline(&line, &linecap, in)) >= 0) {
    lineno++;
    while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r')) line[--got] = 0;
    if (!b) st = est_served_batch_create(&b, s, input_format, output_format);
    if (st == EST_OK) st = est_served_batch_add_line(b, line, src, lineno);
    if (st == EST_OK && est_served_batch_count(b) == (size_t)batch_size) st = flush_batch(&b, s, stdout);
  }
  if (st == EST_OK && in && ferror(in)) st = est_error(EST_ERR_IO, "reading %s failed", src);
  if (st == EST_OK) st = flush_batch(&b, s, stdout);
  if (st == EST_OK && fflush(stdout) != 0)
    st = est_error(EST_ERR_IO, "writing the predictions to stdout: %s", strerror(errno));
  free(line);
  est_served_batch_free(b);
  est_servable_free(s);
  if (in && in != stdin) fclose(in);
  if (st != EST_OK) {
    fprintf(stderr, "est predict: error: %s\n", est_error_message());
    return 1;
  }
  return 0;
}
