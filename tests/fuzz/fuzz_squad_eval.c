/* libFuzzer target: the files `est squad_eval` scores that a user or a model makes, the
 * predictions ({"question id": "answer text", ...}) and SQuAD 2.0's no-answer
 * probabilities ({"question id": probability, ...}), on arbitrary bytes
 * (est_squad_evaluate, src/squad/squad_eval.c). Each input is scored three ways against
 * fixed data files (in memory, fuzz_file.h): as the predictions under evaluate-v1.1.py
 * (4 answerable questions), as the predictions under evaluate-v2.0.py (2 answerable, 2
 * impossible), and as the na_prob file beside fixed predictions under evaluate-v2.0.py.
 *
 * Invariants: scoring either fails with INVALID_ARGUMENT (NO_MEMORY) and a message, or gives
 * percentages in [0, 100], the data's question counts, at most 4 missing predictions, and a
 * result that prints (est_squad_eval_json) as JSON. */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "est/squad.h"
#include "fuzz_file.h"

static const char data_v1[] =
    "{\"version\": \"1.1\", \"data\": [{\"title\": \"t\", \"paragraphs\": [{\"context\": \"The quick brown fox "
    "jumps over the lazy dog in 1995.\", \"qas\": ["
    "{\"id\": \"q1\", \"question\": \"Who jumps?\", \"answers\": "
    "[{\"answer_start\": 4, \"text\": \"quick brown fox\"}, "
    "{\"answer_start\": 16, \"text\": \"fox\"}]},"
    "{\"id\": \"q2\", \"question\": \"Over what?\", \"answers\": [{\"answer_start\": 31, \"text\": \"the lazy dog\"}]},"
    "{\"id\": \"q3\", \"question\": \"When?\", \"answers\": [{\"answer_start\": 47, \"text\": \"1995\"}]},"
    "{\"id\": \"q4\", \"question\": \"Which dog?\", \"answers\": [{\"answer_start\": 35, \"text\": \"lazy\"}, "
    "{\"answer_start\": 31, \"text\": \"The Lazy\"}]}]}]}]}";

static const char data_v2[] =
    "{\"version\": \"v2.0\", \"data\": [{\"title\": \"t\", \"paragraphs\": [{\"context\": \"The quick brown fox "
    "jumps over the lazy dog in 1995.\", \"qas\": ["
    "{\"id\": \"q1\", \"question\": \"Who jumps?\", \"answers\": "
    "[{\"answer_start\": 4, \"text\": \"quick brown fox\"}],"
    " \"is_impossible\": false},"
    "{\"id\": \"q2\", \"question\": \"Over what?\", \"answers\": [{\"answer_start\": 31, \"text\": \"the lazy dog\"}, "
    "{\"answer_start\": 35, \"text\": \"lazy dog\"}], \"is_impossible\": false},"
    "{\"id\": \"q3\", \"question\": \"Which cat?\", \"answers\": [], \"is_impossible\": true},"
    "{\"id\": \"q4\", \"question\": \"When did the cat jump?\", \"answers\": [], \"plausible_answers\": "
    "[{\"answer_start\": 47, \"text\": \"1995\"}], \"is_impossible\": true}]}]}]}";

static const char preds_v2[] = "{\"q1\": \"the quick brown fox\", \"q2\": \"lazy\", \"q3\": \"\", \"q4\": \"1995\"}";

static void quiet(void *ctx, bool to_stderr, const char *line) { (void)ctx, (void)to_stderr, (void)line; }

static bool percent(double v) { return v >= 0.0 && v <= 100.0; }

static void check(const est_squad_eval_result *r, est_squad_eval_version v, bool with_na) {
  if (r->version != v || !percent(r->exact) || !percent(r->f1) || r->total != 4 || r->num_missing < 0 ||
      r->num_missing > 4)
    abort();
  if (v == EST_SQUAD_EVAL_V2_0) {
    if (!r->has_has_ans || !r->has_no_ans || r->has_ans_total != 2 || r->no_ans_total != 2 ||
        !percent(r->has_ans_exact) || !percent(r->has_ans_f1) || !percent(r->no_ans_exact) || !percent(r->no_ans_f1))
      abort();
    if (r->has_best != with_na || (with_na && (!percent(r->best_exact) || !percent(r->best_f1))))
      abort();
  }
  for (int indent = 0; indent < 2; indent++) {
    char *text = est_squad_eval_json(r, indent);
    json_t *back = text ? json_loads(text, JSON_DECODE_ANY, NULL) : NULL;
    if (!json_is_object(back)) abort();
    json_decref(back);
    free(text);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static fuzz_file v1_file, v2_file, preds_file, input;
  static const char *v1_path, *v2_path, *preds_path;
  if (!v1_path) {
    v1_path = fuzz_file_put(&v1_file, data_v1, sizeof data_v1 - 1);
    v2_path = fuzz_file_put(&v2_file, data_v2, sizeof data_v2 - 1);
    preds_path = fuzz_file_put(&preds_file, preds_v2, sizeof preds_v2 - 1);
  }
  const char *path = fuzz_file_put(&input, data, size);
  for (int run = 0; run < 3; run++) {
    est_squad_eval_config c = est_squad_eval_config_default();
    c.version = run == 0 ? EST_SQUAD_EVAL_V1_1 : EST_SQUAD_EVAL_V2_0;
    c.data_file = run == 0 ? v1_path : v2_path;
    c.pred_file = run == 2 ? preds_path : path;
    c.na_prob_file = run == 2 ? path : NULL;
    c.python_sum = (est_squad_python_sum)(size % 3);
    c.message = quiet;
    est_squad_eval_result r;
    est_status st = est_squad_evaluate(&c, &r);
    if (st == EST_OK) check(&r, c.version, run == 2);
    else if ((st != EST_ERR_INVALID_ARGUMENT && st != EST_ERR_NO_MEMORY) || !est_error_message()[0]) abort();
    est_squad_eval_result_free(&r);
  }
  return 0;
}
