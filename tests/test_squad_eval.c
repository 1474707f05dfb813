/* `est squad_eval` and est_squad_evaluate (est/squad.h) against the official SQuAD evaluation
 * scripts, evaluate-v1.1.py and evaluate-v2.0.py.
 *
 * tests/data/squad/eval_golden_py3{11,12,13}.json were written by
 * tests/reference/squad_eval_reference.py, running the unchanged scripts under Python 3.11.7,
 * 3.12.1 and 3.13.0 (tests/reference/README.md). For every run of every golden this test runs
 * `est squad_eval` with the same files and --python=<that version> and compares what it
 * prints, byte for byte: stdout (the JSON, v2.0's "Missing prediction" lines), the script's
 * stderr lines, the --out_file; where the script failed, est must fail after printing the
 * same lines. Then the library's struct, Python's float repr on 3243 doubles,
 * normalize_answer on 2000 random strings, the version choice, and every bad input of
 * docs/squad.md §5. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "squad/squad_internal.h"
#include "est/file.h"
#include "est/squad.h"
#include "test_util.h"

#define SQUAD EST_TEST_DATA "/squad/"

/* The scripts' own lines, dropped where a test does not look at them. */
static void quiet(void *ctx, bool to_stderr, const char *line) {
  (void)ctx;
  (void)to_stderr;
  (void)line;
}

static char *read_or_empty(const char *path) {
  char *t = test_read_file(path, NULL);
  return t ? t : strdup("");
}

/* The lines of text (without '\n'), as a JSON array. */
static json_t *lines_of(const char *text) {
  json_t *a = json_array();
  for (const char *p = text; *p;) {
    const char *end = strchr(p, '\n');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    json_array_append_new(a, json_stringn(p, n));
    p = end ? end + 1 : p + n;
  }
  return a;
}

/* One golden run through the command line. */
static void check_cli_run(const json_t *run, const char *python) {
  const char *name = json_string_value(json_object_get(run, "name"));
  const char *script = json_string_value(json_object_get(run, "script"));
  char args[2048];
  int n = snprintf(args, sizeof args, "--data_file=%s%s --pred_file=%s%s --version_2_with_negative=%s --python=%s",
                   SQUAD, json_string_value(json_object_get(run, "data")), SQUAD,
                   json_string_value(json_object_get(run, "pred")), strcmp(script, "v2.0") ? "false" : "true", python);
  const json_t *extra = json_object_get(run, "extra");
  const char *out_path = test_tmp_path("eval_out.json");
  remove(out_path);
  for (size_t i = 0; i + 1 < json_array_size(extra); i += 2) {
    const char *flag = json_string_value(json_array_get(extra, i)), *val = json_string_value(json_array_get(extra, i + 1));
    if (!strcmp(flag, "--na-prob-file")) n += snprintf(args + n, sizeof args - n, " --na_prob_file=%s%s", SQUAD, val);
    else if (!strcmp(flag, "--na-prob-thresh")) n += snprintf(args + n, sizeof args - n, " --na_prob_thresh=%s", val);
    else if (!strcmp(flag, "--out-file")) n += snprintf(args + n, sizeof args - n, " --out_file=%s", out_path);
    else fail_msg("%s: unknown flag %s", name, flag);
  }
  const char *so = test_tmp_path("stdout"), *se = test_tmp_path("stderr");
  int rc = test_run(NULL, 0, "%s squad_eval %s > %s 2> %s", EST_BIN, args, so, se);
  char *out = read_or_empty(so), *err = read_or_empty(se);
  json_t *err_lines = lines_of(err);
  const char *want_out = json_string_value(json_object_get(run, "stdout"));
  const json_t *want_err = json_object_get(run, "stderr");
  bool want_ok = json_integer_value(json_object_get(run, "rc")) == 0;
  if (want_ok) {
    if (rc != 0) fail_msg("py%s %s: est failed (%d): %s", python, name, rc, err);
    if (strcmp(out, want_out)) fail_msg("py%s %s: stdout\n%s\ngolden\n%s", python, name, out, want_out);
    if (!json_equal(err_lines, want_err)) fail_msg("py%s %s: stderr\n%s", python, name, err);
    const json_t *want_file = json_object_get(run, "out_file");
    if (json_is_string(want_file)) {
      char *file = read_or_empty(out_path);
      if (strcmp(file, json_string_value(want_file)))
        fail_msg("py%s %s: out_file\n%s\ngolden\n%s", python, name, file, json_string_value(want_file));
      free(file);
    }
  } else {
    /* The script printed these lines, then raised: est prints them and fails with a message
     * that names the file and, for a KeyError, the question id. */
    const char *exc = json_string_value(json_object_get(run, "exception"));
    if (rc != 1) fail_msg("py%s %s: the script raised %s; est exited %d:\n%s", python, name, exc, rc, out);
    if (strcmp(out, want_out)) fail_msg("py%s %s: stdout\n%s\ngolden\n%s", python, name, out, want_out);
    size_t nw = json_array_size(want_err);
    assert_int_equal(json_array_size(err_lines), nw + 1);
    for (size_t i = 0; i < nw; i++)
      assert_string_equal(json_string_value(json_array_get(err_lines, i)), json_string_value(json_array_get(want_err, i)));
    const char *msg = json_string_value(json_array_get(err_lines, nw));
    if (strncmp(msg, "est squad_eval: --", 18)) fail_msg("py%s %s: message %s", python, name, msg);
    if (!strncmp(exc, "KeyError: '", 11)) {
      char id[128];
      snprintf(id, sizeof id, "\"%.*s\"", (int)(strlen(exc) - 12), exc + 11);
      if (!strstr(msg, id) && !strstr(msg, "missing field")) fail_msg("py%s %s: %s lacks %s", python, name, msg, id);
    }
  }
  json_decref(err_lines);
  free(out);
  free(err);
}

static void check_golden(const char *file, const char *python, size_t *ok_runs, size_t *failed_runs) {
  char path[4096];
  snprintf(path, sizeof path, "%s%s", SQUAD, file);
  json_error_t jerr;
  json_t *g = json_load_file(path, 0, &jerr);
  if (!g) fail_msg("%s: %s", path, jerr.text);
  const json_t *runs = json_object_get(g, "runs");
  assert_true(json_array_size(runs) >= 17);
  for (size_t i = 0; i < json_array_size(runs); i++) {
    const json_t *run = json_array_get(runs, i);
    check_cli_run(run, python);
    if (json_integer_value(json_object_get(run, "rc")) == 0) (*ok_runs)++;
    else (*failed_runs)++;
  }
  json_decref(g);
}

static void test_cli_matches_python311(void **state) {
  (void)state;
  size_t ok = 0, failed = 0;
  check_golden("eval_golden_py311.json", "3.11", &ok, &failed);
  assert_true(ok >= 9 && failed >= 8);
}

static void test_cli_matches_python312_and_313(void **state) {
  (void)state;
  size_t ok = 0, failed = 0;
  check_golden("eval_golden_py312.json", "3.12", &ok, &failed);
  check_golden("eval_golden_py313.json", "3.13", &ok, &failed);
  assert_true(ok >= 18);
}

/* The goldens differ where they should: 3.11's sum() and 3.12's give another last digit. */
static void test_python_versions_differ(void **state) {
  (void)state;
  est_squad_eval_config c = est_squad_eval_config_default();
  c.data_file = SQUAD "eval_v2.json";
  c.pred_file = SQUAD "eval_v2_preds.json";
  c.na_prob_file = SQUAD "eval_v2_na.json";
  c.na_prob_thresh = 0.5;
  c.message = quiet;
  est_squad_eval_result a, b;
  assert_int_equal(est_squad_evaluate(&c, &a), EST_OK);
  c.python_sum = EST_SQUAD_SUM_PY312;
  assert_int_equal(est_squad_evaluate(&c, &b), EST_OK);
  char x[40], y[40];
  assert_string_equal(est_squad_format_pyfloat(a.f1, x, sizeof x), "42.49258677830106");
  assert_string_equal(est_squad_format_pyfloat(b.f1, y, sizeof y), "42.49258677830107");
  assert_true(a.exact == b.exact);
  /* The struct: v2.0 with every group. */
  assert_int_equal(a.version, EST_SQUAD_EVAL_V2_0);
  assert_int_equal(a.total, 28);
  assert_int_equal(a.has_ans_total, 23);
  assert_int_equal(a.no_ans_total, 5);
  assert_true(a.has_has_ans && a.has_no_ans && a.has_best);
  assert_false(a.best_f1_thresh.is_int);
  assert_true(a.best_f1_thresh.f == 0.95);
  /* Versions by name. */
  est_squad_python_sum m;
  assert_int_equal(est_squad_python_sum_parse("2.7", &m), EST_OK);
  assert_int_equal(m, EST_SQUAD_SUM_PY311);
  assert_int_equal(est_squad_python_sum_parse("3.13", &m), EST_OK);
  assert_int_equal(m, EST_SQUAD_SUM_PY312);
  assert_int_equal(est_squad_python_sum_parse("3.14", &m), EST_OK);
  assert_int_equal(m, EST_SQUAD_SUM_PY314);
  assert_int_equal(est_squad_python_sum_parse("3", &m), EST_ERR_INVALID_ARGUMENT);
  assert_int_equal(est_squad_python_sum_parse("3.12x", &m), EST_ERR_INVALID_ARGUMENT);
}

/* Python's repr on 3243 doubles (tests/reference/squad_pyfloat_reference.py). */
static void test_pyfloat_repr(void **state) {
  (void)state;
  FILE *f = fopen(SQUAD "pyfloat_golden.txt", "r");
  assert_non_null(f);
  char line[256];
  size_t n = 0;
  while (fgets(line, sizeof line, f)) {
    uint64_t bits;
    char want[128];
    assert_int_equal(sscanf(line, "%" SCNx64 " %127s", &bits, want), 2);
    double v;
    memcpy(&v, &bits, sizeof v);
    char got[40];
    est_squad_format_pyfloat(v, got, sizeof got);
    if (strcmp(got, want)) fail_msg("%016" PRIx64 ": %s, Python %s", bits, got, want);
    n++;
  }
  fclose(f);
  assert_true(n >= 3000);
}

/* normalize_answer on 2000 random strings of articles, punctuation, special-case letters,
 * marks and every kind of Python whitespace (tests/reference/squad_normalize_reference.py
 * called the script's own function). */
static void test_normalize_answer(void **state) {
  (void)state;
  FILE *f = fopen(SQUAD "normalize_golden.jsonl", "r");
  assert_non_null(f);
  char line[4096];
  size_t n = 0;
  squad_buf out = {0};
  while (fgets(line, sizeof line, f)) {
    json_error_t jerr;
    json_t *pair = json_loads(line, 0, &jerr);
    if (!pair) fail_msg("normalize_golden.jsonl line %zu: %s", n + 1, jerr.text);
    const json_t *in = json_array_get(pair, 0), *want = json_array_get(pair, 1);
    assert_true(squad_normalize_answer(json_string_value(in), json_string_length(in), &out));
    if (strcmp(out.p, json_string_value(want))) {
      char *shown = json_dumps(pair, JSON_ENCODE_ANY);
      fail_msg("line %zu %s: est gives \"%s\"", n + 1, shown, out.p);
    }
    json_decref(pair);
    n++;
  }
  fclose(f);
  squad_buf_free(&out);
  assert_true(n >= 2000);
}

/* Which script: the data's "version", or the flag. */
static void test_version_choice(void **state) {
  (void)state;
  est_squad_eval_config c = est_squad_eval_config_default();
  est_squad_eval_result r;
  c.data_file = SQUAD "eval_v1.json";   /* "1.1" */
  c.pred_file = SQUAD "eval_v1_preds.json";
  c.message = quiet;
  assert_int_equal(est_squad_evaluate(&c, &r), EST_OK);
  assert_int_equal(r.version, EST_SQUAD_EVAL_V1_1);
  assert_int_equal(r.num_missing, 1);
  char *json = est_squad_eval_json(&r, true);
  assert_string_equal(json, "{\"exact_match\": 47.36842105263158, \"f1\": 54.76190476190476}\n");
  free(json);
  c.data_file = SQUAD "eval_v1_version_1_0.json";   /* "1.0": still v1.1's script */
  assert_int_equal(est_squad_evaluate(&c, &r), EST_OK);
  assert_int_equal(r.version, EST_SQUAD_EVAL_V1_1);
  c.data_file = SQUAD "eval_v2.json";               /* "v2.0" */
  c.pred_file = SQUAD "eval_v2_preds.json";
  assert_int_equal(est_squad_evaluate(&c, &r), EST_OK);
  assert_int_equal(r.version, EST_SQUAD_EVAL_V2_0);
  json = est_squad_eval_json(&r, false);
  assert_non_null(strstr(json, "{\"exact\": 17.857142857142858, \"f1\": 59.57592011163439, \"total\": 28, "));
  assert_int_equal(json[strlen(json) - 1], '}');
  free(json);
  /* No "version": ask for the flag. na_prob with 1.x data: ask for the flag too. */
  c.data_file = SQUAD "allennlp_squad2.json";
  assert_int_equal(est_squad_evaluate(&c, &r), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "--version_2_with_negative"));
  c.data_file = SQUAD "eval_v1.json";
  c.pred_file = SQUAD "eval_v1_preds.json";
  c.na_prob_file = SQUAD "eval_v2_na.json";
  assert_int_equal(est_squad_evaluate(&c, &r), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "pass --version_2_with_negative"));
}

/* ---- bad input ---------------------------------------------------------------------------- */

static void expect_eval_error(est_squad_eval_version v, const char *data, const char *pred, const char *na,
                              est_status code, const char *want1, const char *want2) {
  est_squad_eval_config c = est_squad_eval_config_default();
  c.version = v;
  c.data_file = data;
  c.pred_file = pred;
  c.na_prob_file = na;
  c.message = quiet;
  est_squad_eval_result r;
  est_status st = est_squad_evaluate(&c, &r);
  if (st != code) fail_msg("%s / %s: status %d, want %d (%s)", data, pred, st, code, est_error_message());
  const char *msg = est_error_message();
  if (!strstr(msg, want1) || (want2 && !strstr(msg, want2))) fail_msg("message: %s\nwant: %s, %s", msg, want1, want2);
}

static const char *write_tmp(const char *name, const char *text) {
  const char *p = test_tmp_path(name);
  test_write_bytes(p, text, strlen(text));
  return p;
}

static void test_bad_inputs(void **state) {
  (void)state;
  const est_squad_eval_version V1 = EST_SQUAD_EVAL_V1_1, V2 = EST_SQUAD_EVAL_V2_0;
  /* Missing files. */
  expect_eval_error(V2, "/nonexistent/dev.json", SQUAD "eval_v2_preds.json", NULL, EST_ERR_NOT_FOUND,
                    "--data_file=/nonexistent/dev.json", "cannot open");
  expect_eval_error(V2, SQUAD "eval_v2.json", "/nonexistent/p.json", NULL, EST_ERR_NOT_FOUND, "--pred_file=/nonexistent/p.json", NULL);
  expect_eval_error(V2, SQUAD "eval_v2.json", SQUAD "eval_v2_preds.json", "/nonexistent/na.json", EST_ERR_NOT_FOUND,
                    "--na_prob_file=/nonexistent/na.json", NULL);
  /* Bad JSON, with line and column. */
  const char *bad = write_tmp("bad.json", "{\"h01\": \"x\",\n \"h02\" 1}");
  expect_eval_error(V2, SQUAD "eval_v2.json", bad, NULL, EST_ERR_INVALID_ARGUMENT, "bad.json:2:", "not valid JSON");
  expect_eval_error(V2, bad, SQUAD "eval_v2_preds.json", NULL, EST_ERR_INVALID_ARGUMENT, "--data_file=", "not valid JSON");
  /* Predictions that are not an object or not strings. */
  expect_eval_error(V2, SQUAD "eval_v2.json", write_tmp("list.json", "[\"x\"]"), NULL, EST_ERR_INVALID_ARGUMENT,
                    "--pred_file=", "must be a JSON object");
  expect_eval_error(V2, SQUAD "eval_v2.json", SQUAD "eval_v2_preds_not_string.json", NULL, EST_ERR_INVALID_ARGUMENT,
                    "the prediction for \"h03\" must be a string, not an integer", NULL);
  expect_eval_error(V1, SQUAD "eval_v1.json", SQUAD "eval_v1_preds_not_string.json", NULL, EST_ERR_INVALID_ARGUMENT,
                    "the prediction for \"v1-norm\" must be a string, not an array", NULL);
  /* na_probs: not numbers (a string, a boolean), missing, not an object. */
  expect_eval_error(V2, SQUAD "eval_v2.json", SQUAD "eval_v2_preds.json", SQUAD "eval_v2_na_not_number.json",
                    EST_ERR_INVALID_ARGUMENT, "eval_v2_na_not_number.json", "\"h08\" must be a number, not a string");
  expect_eval_error(V2, SQUAD "eval_v2.json", SQUAD "eval_v2_preds.json", write_tmp("na_bool.json", "{\"h01\": true}"),
                    EST_ERR_INVALID_ARGUMENT, "\"h01\" must be a number, not a boolean", NULL);
  expect_eval_error(V2, SQUAD "eval_v2.json", SQUAD "eval_v2_preds.json", SQUAD "eval_v2_na_missing.json",
                    EST_ERR_INVALID_ARGUMENT, "no probability for question \"h08\"", NULL);
  expect_eval_error(V2, SQUAD "eval_v2.json", SQUAD "eval_v2_preds.json", write_tmp("na_list.json", "[0.5]"),
                    EST_ERR_INVALID_ARGUMENT, "--na_prob_file=", "must be a JSON object");
  /* Missing predictions in v2.0 (the script's KeyError), no answers under v1.1, no "version"
   * under v1.1, no predictions at all. */
  expect_eval_error(V2, SQUAD "eval_v2.json", SQUAD "eval_v2_preds_missing.json", NULL, EST_ERR_INVALID_ARGUMENT,
                    "no prediction for question \"h03\"", NULL);
  expect_eval_error(V1, SQUAD "eval_v2.json", SQUAD "eval_v2_preds.json", NULL, EST_ERR_INVALID_ARGUMENT,
                    "question \"n01\" has no answers", "--version_2_with_negative");
  expect_eval_error(V1, SQUAD "allennlp_squad.json", SQUAD "eval_v1_preds.json", NULL, EST_ERR_INVALID_ARGUMENT,
                    "missing field \"version\"", NULL);
  expect_eval_error(V2, SQUAD "eval_v2.json", write_tmp("empty.json", "{}"), NULL, EST_ERR_INVALID_ARGUMENT,
                    "no question of", NULL);
  /* The data file's structure: missing fields and wrong types, with where and which id. */
  expect_eval_error(V2, write_tmp("d1.json", "{\"version\": \"v2.0\"}"), SQUAD "eval_v2_preds.json", NULL,
                    EST_ERR_INVALID_ARGUMENT, "missing field \"data\"", NULL);
  expect_eval_error(V2, write_tmp("d2.json", "{\"data\": [{}]}"), SQUAD "eval_v2_preds.json", NULL,
                    EST_ERR_INVALID_ARGUMENT, "data[0]: missing field \"paragraphs\"", NULL);
  expect_eval_error(V2, write_tmp("d3.json", "{\"data\": [{\"paragraphs\": [{}]}]}"), SQUAD "eval_v2_preds.json", NULL,
                    EST_ERR_INVALID_ARGUMENT, "data[0].paragraphs[0]: missing field \"qas\"", NULL);
  expect_eval_error(V2, write_tmp("d4.json", "{\"data\": [{\"paragraphs\": [{\"qas\": [{\"answers\": []}]}]}]}"),
                    SQUAD "eval_v2_preds.json", NULL, EST_ERR_INVALID_ARGUMENT, "qas[0]: missing field \"id\"", NULL);
  expect_eval_error(V2, write_tmp("d5.json", "{\"data\": [{\"paragraphs\": [{\"qas\": [{\"id\": \"h01\"}]}]}]}"),
                    SQUAD "eval_v2_preds.json", NULL, EST_ERR_INVALID_ARGUMENT, "(id \"h01\")", "missing field \"answers\"");
  expect_eval_error(V2,
                    write_tmp("d6.json", "{\"data\": [{\"paragraphs\": [{\"qas\": [{\"id\": \"h01\", \"answers\": [{}]}]}]}]}"),
                    SQUAD "eval_v2_preds.json", NULL, EST_ERR_INVALID_ARGUMENT, "answers[0]: missing field \"text\"", NULL);
  expect_eval_error(V2, write_tmp("d7.json", "{\"data\": [{\"paragraphs\": [{\"qas\": [{\"id\": 5, \"answers\": []}]}]}]}"),
                    SQUAD "eval_v2_preds.json", NULL, EST_ERR_INVALID_ARGUMENT, "field \"id\" must be a string", NULL);
}

/* The command line's own usage errors exit 2 before reading anything. */
static void test_cli_usage(void **state) {
  (void)state;
  char *out = NULL;
  assert_int_equal(test_run(&out, 1, "%s squad_eval --data_file=x.json", EST_BIN), 2);
  assert_non_null(strstr(out, "pred_file"));
  free(out);
  assert_int_equal(test_run(&out, 1, "%s squad_eval --data_file=x --pred_file=y --python=py3", EST_BIN), 2);
  assert_non_null(strstr(out, "--python"));
  free(out);
  assert_int_equal(test_run(&out, 1, "%s squad_eval --data_file=x --pred_file=y --na_prob_file=z "
                                     "--version_2_with_negative=false", EST_BIN), 2);
  assert_non_null(strstr(out, "--na_prob_file"));
  free(out);
  assert_int_equal(test_run(&out, 1, "%s squad_eval --data_file=/nonexistent.json --pred_file=y", EST_BIN), 1);
  assert_non_null(strstr(out, "est squad_eval: --data_file=/nonexistent.json: cannot open"));
  free(out);
  /* --out_file replaces stdout. */
  const char *o = test_tmp_path("o.json");
  assert_int_equal(test_run(&out, 0, "%s squad_eval --data_file=%seval_v1.json --pred_file=%seval_v1_preds.json "
                                     "--out_file=%s 2>/dev/null", EST_BIN, SQUAD, SQUAD, o), 0);
  assert_string_equal(out, "");
  free(out);
  char *file = test_read_file(o, NULL);
  assert_string_equal(file, "{\"exact_match\": 47.36842105263158, \"f1\": 54.76190476190476}");
  free(file);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_cli_matches_python311),
    cmocka_unit_test(test_cli_matches_python312_and_313),
    cmocka_unit_test(test_python_versions_differ),
    cmocka_unit_test(test_pyfloat_repr),
    cmocka_unit_test(test_normalize_answer),
    cmocka_unit_test(test_version_choice),
    cmocka_unit_test(test_bad_inputs),
    cmocka_unit_test(test_cli_usage),
  };
  return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
