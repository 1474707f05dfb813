/* `est rerank`: a query and passages -> each passage's score and its rank, with a
 * cross-encoder (est/serving.h est_servable_rerank; docs/rerank.md): an est run_rerank export
 * or a HuggingFace *ForSequenceClassification directory of one label, served as it is. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "est/flags.h"
#include "est/float_format.h"
#include "est/log.h"
#include "est/serving.h"

static const char usage[] =
    "usage: est rerank --model_dir=DIR --query=TEXT [--input_file=FILE] [--raw_scores]\n"
    "                  [--return_text] [--output_format=tsv|json] [--batch_size=32]\n\n"
    "Scores each passage (one an input line, stdin by default) against the query with a\n"
    "cross-encoder: DIR an export of `est run_rerank --do_export` (a version or base directory) or\n"
    "a HuggingFace cross-encoder directory (*ForSequenceClassification with one label). The\n"
    "score is sigmoid(logit), as sentence-transformers' CrossEncoder, or the logit with\n"
    "--raw_scores. Output, best first (equal scores in input order):\n"
    "  tsv   one line a passage: its 0-based input index<TAB>score (<TAB>text with --return_text)\n"
    "  json  text-embeddings-inference's /rerank response: [{\"index\": i, \"score\": s}, ...]\n"
    "        (\"text\" too with --return_text)";

int est_cmd_rerank(int argc, char **argv) {
  const char *model_dir = NULL, *query = NULL, *input_file = NULL, *output_format = "tsv", *precision = NULL;
  bool raw_scores = false, return_text = false;
  int64_t batch_size = 32, num_threads = 0;
  est_flag flags[] = {
    EST_FLAG_STRING("model_dir", &model_dir, "A cross-encoder: an est run_rerank export or a HuggingFace directory.", 1),
    EST_FLAG_STRING("query", &query, "The query the passages are scored against.", 1),
    EST_FLAG_STRING("input_file", &input_file, "The passages, one a line; default stdin.", 0),
    EST_FLAG_BOOL("raw_scores", &raw_scores, "The logits, not their sigmoid.", 0),
    EST_FLAG_BOOL("return_text", &return_text, "Each passage's text beside its score.", 0),
    EST_FLAG_STRING("output_format", &output_format, "tsv or json.", 0),
    EST_FLAG_INT("batch_size", &batch_size, "Pairs per forward pass.", 0),
    EST_CLI_RUNTIME_FLAGS(&num_threads, &precision),
  };
  int rc = EST_CLI_PARSE_FLAGS("rerank", usage, flags, argc, argv, 0);
  if (rc >= 0) return rc;
  est_flags_result r = EST_FLAGS_OK;
  if (strcmp(output_format, "tsv") && strcmp(output_format, "json"))
    r = EST_FLAGS_ERROR, est_error(EST_ERR_INVALID_ARGUMENT, "--output_format=%s: must be tsv or json", output_format);
  if (r == EST_FLAGS_OK && (batch_size < 1 || batch_size > 65536))
    r = EST_FLAGS_ERROR, est_error(EST_ERR_INVALID_ARGUMENT, "--batch_size=%lld: must be in [1, 65536]",
                                   (long long)batch_size);
  if ((rc = est_cli_apply_runtime_flags("rerank", r == EST_FLAGS_OK, precision, num_threads)) >= 0) return rc;

  FILE *in = input_file ? fopen(input_file, "rb") : stdin;
  est_status st = in ? EST_OK : est_error(EST_ERR_NOT_FOUND, "--input_file=%s: cannot open", input_file);
  char **texts = NULL, *line = NULL;
  size_t n = 0, cap = 0, linecap = 0;
  ssize_t got;
  while (st == EST_OK && (got = getline(&line, &linecap, in)) >= 0) {
    while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r')) line[--got] = 0;
    if (n == cap) {
      char **grown = realloc(texts, (cap = cap ? 2 * cap : 64) * sizeof *texts);
      if (!grown) st = est_error(EST_ERR_NO_MEMORY, "out of memory reading the passages");
      else texts = grown;
    }
    if (st == EST_OK && !(texts[n++] = strdup(line))) st = est_error(EST_ERR_NO_MEMORY, "out of memory");
  }
  free(line);
  if (st == EST_OK && in && ferror(in)) st = est_error(EST_ERR_IO, "reading %s failed", input_file ? input_file : "<stdin>");
  if (in && in != stdin) fclose(in);
  est_servable *s = NULL;
  est_featurizer *f = NULL;
  float *scores = NULL;
  size_t *order = NULL;
  if (st == EST_OK) st = est_servable_load(&s, model_dir, (int)batch_size);
  if (st == EST_OK) EST_LOG_INFO("reranking with version %lld from %s", (long long)est_servable_version(s),
                                 est_servable_dir(s));
  if (st == EST_OK) st = est_cli_apply_model_precision(precision, s);
  if (st == EST_OK) st = est_featurizer_create(&f, s);
  if (st == EST_OK && (!(scores = malloc((n + 1) * sizeof *scores)) || !(order = malloc((n + 1) * sizeof *order))))
    st = est_error(EST_ERR_NO_MEMORY, "out of memory for %zu scores", n);
  if (st == EST_OK) st = est_servable_rerank(s, f, query, (const char *const *)texts, n, raw_scores, scores);
  if (st == EST_OK) {
    est_rerank_order(scores, n, order);
    const int json = !strcmp(output_format, "json");
    if (json) fputc('[', stdout);
    for (size_t k = 0; k < n; k++) {
      char num[64];
      est_format_float32(scores[order[k]], num, sizeof num);
      if (json) {
        printf("%s{\"index\": %zu, \"score\": %s", k ? ", " : "", order[k], num);
        if (return_text) fputs(", \"text\": ", stdout), est_py_json_string(stdout, texts[order[k]]);
        fputc('}', stdout);
      } else {
        printf("%zu\t%s%s%s\n", order[k], num, return_text ? "\t" : "", return_text ? texts[order[k]] : "");
      }
    }
    if (json) fputs("]\n", stdout);
    if (fflush(stdout) != 0 || ferror(stdout))
      st = est_error(EST_ERR_IO, "writing the scores to stdout: %s", strerror(errno));
  }
  for (size_t i = 0; i < n; i++) free(texts[i]);
  free(texts), free(scores), free(order);
  est_featurizer_free(f);
  est_servable_free(s);
  if (st != EST_OK) {
    fprintf(stderr, "est rerank: error: %s\n", est_error_message());
    return 1;
  }
  return 0;
}
