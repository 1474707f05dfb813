/* `est squad_eval --data_file=dev.json --pred_file=predictions.json [--na_prob_file=F]
 * [--na_prob_thresh=1.0] [--out_file=F] [--version_2_with_negative] [--python=3.11]`: the
 * official SQuAD evaluation scripts (docs/squad.md §3-§5). Prints what evaluate-v1.1.py or
 * evaluate-v2.0.py prints, on the same streams: the JSON and v2.0's "Missing prediction for"
 * lines on stdout, v1.1's "Unanswered question" and version lines on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "est/file.h"
#include "est/flags.h"
#include "est/squad.h"

static const char *USAGE =
    "usage: est squad_eval --data_file=dev-v2.0.json --pred_file=predictions.json\n"
    "                      [--na_prob_file=null_odds.json] [--na_prob_thresh=1.0] [--out_file=eval.json]\n"
    "                      [--version_2_with_negative=true|false] [--python=3.11]\n\n"
    "Scores predictions as the official SQuAD scripts do and prints what they print:\n"
    "evaluate-v1.1.py ({\"exact_match\": ..., \"f1\": ...}) or evaluate-v2.0.py (exact, f1, total,\n"
    "HasAns_*, NoAns_*, and best_* with --na_prob_file). Which one: --version_2_with_negative\n"
    "when given, else the data file's \"version\" (1.x: v1.1, 2.x / v2.x: v2.0).\n"
    "--python picks the Python whose sum() evaluate-v2.0.py ran under: the last digit of its\n"
    "F1 sums changed in 3.12 and 3.14 (docs/squad.md section 4.4).\n";

static void print_message(void *ctx, bool to_stderr, const char *line) {
  (void)ctx;
  fprintf(to_stderr ? stderr : stdout, "%s\n", line);
}

int est_cmd_squad_eval(int argc, char **argv) {
  const char *data_file = NULL, *pred_file = NULL, *na_prob_file = NULL, *out_file = NULL, *python = "3.11";
  double thresh = 1.0;
  bool v2 = false;
  est_flag flags[] = {
    EST_FLAG_STRING("data_file", &data_file, "The SQuAD JSON the predictions answer (dev-v1.1.json, dev-v2.0.json).", 1),
    EST_FLAG_STRING("pred_file", &pred_file, "The predictions: {\"question id\": \"answer text\", ...}.", 1),
    EST_FLAG_STRING("na_prob_file", &na_prob_file,
                    "SQuAD 2.0: per question id the model's probability of no answer (run_squad.py's null_odds.json).", 0),
    EST_FLAG_FLOAT("na_prob_thresh", &thresh, "SQuAD 2.0: predict \"\" where the na_prob exceeds this.", 0),
    EST_FLAG_STRING("out_file", &out_file, "Write the metrics here (json.dump, no indent) instead of stdout.", 0),
    EST_FLAG_BOOL("version_2_with_negative", &v2,
                  "Score as evaluate-v2.0.py (true) or evaluate-v1.1.py (false); default: by the data's \"version\".", 0),
    EST_FLAG_STRING("python", &python, "The Python version whose sum() to match: 3.11 (and older), 3.12, 3.13, 3.14.", 0),
  };
  int rc = EST_CLI_PARSE_FLAGS("squad_eval", USAGE, flags, argc, argv, 1);
  if (rc >= 0) return rc;

  est_squad_eval_config c = est_squad_eval_config_default();
  c.data_file = data_file;
  c.pred_file = pred_file;
  c.na_prob_file = na_prob_file;
  c.na_prob_thresh = thresh;
  c.message = print_message;
  if (flags[5].is_set) c.version = v2 ? EST_SQUAD_EVAL_V2_0 : EST_SQUAD_EVAL_V1_1;
  if (est_squad_python_sum_parse(python, &c.python_sum) != EST_OK) {
    fprintf(stderr, "est squad_eval: --python: %s\n", est_error_message());
    return 2;
  }
  if (c.version == EST_SQUAD_EVAL_V1_1 && na_prob_file) {
    fprintf(stderr, "est squad_eval: --na_prob_file needs SQuAD 2.0 scoring (evaluate-v2.0.py), not "
                    "--version_2_with_negative=false\n");
    return 2;
  }

  est_squad_eval_result r;
  if (est_squad_evaluate(&c, &r) != EST_OK) {
    fflush(stdout);
    fprintf(stderr, "est squad_eval: %s\n", est_error_message());
    return 1;
  }
  /* stdout: v1.1's line, or v2.0's indent=2 dump; --out_file: json.dump without indent or
   * newline, as evaluate-v2.0.py's --out-file (v1.1 has none; the same form is used). */
  char *text = est_squad_eval_json(&r, out_file == NULL);
  est_squad_eval_result_free(&r);
  if (!text) {
    fprintf(stderr, "est squad_eval: out of memory\n");
    return 1;
  }
  int status = 0;
  if (out_file) {
    size_t n = strlen(text);
    if (n && text[n - 1] == '\n') n--;
    if (est_write_file_atomic(out_file, text, n) != EST_OK) {
      fprintf(stderr, "est squad_eval: %s\n", est_error_message());
      status = 1;
    }
  } else {
    fputs(text, stdout);
  }
  free(text);
  return status;
}
