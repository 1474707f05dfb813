/* est_squad_read_examples (est/squad.h) against run_squad.py's read_squad_examples.
 *
 * tests/data/squad/read_golden.json was written by tests/reference/squad_read_reference.py,
 * which runs the unchanged reference function on every fixture of tests/data/squad/ as SQuAD
 * 1.1 training, 2.0 training and prediction (tests/reference/README.md). For each run this
 * test reads the same fixture the same way and compares every example field by field, the
 * warnings logged ("Could not find answer: ..."), and, where the reference raised, that est
 * fails too with a message naming the file, the question and the field. Then every bad input
 * of docs/squad.md §2.5, one by one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/file.h"
#include "est/log.h"
#include "est/squad.h"
#include "test_util.h"

/* ---- the log, captured --------------------------------------------------------------- */

static char *g_log;
static size_t g_log_size;
static FILE *g_log_stream;

static void capture_log(void) {
  g_log_stream = open_memstream(&g_log, &g_log_size);
  assert_non_null(g_log_stream);
  est_log_set_stream(g_log_stream);
}

/* The messages of the warnings logged since capture_log(), as a JSON array of strings
 * (each line "W<mmdd> <hh:mm:ss.mmm> message"). */
static json_t *captured_warnings(void) {
  est_log_set_stream(stderr);
  fclose(g_log_stream);
  json_t *list = json_array();
  for (char *line = g_log; line && *line;) {
    char *end = strchr(line, '\n');
    if (end) *end = '\0';
    if (line[0] == 'W') {
      const char *msg = strchr(line, ' ');
      msg = msg ? strchr(msg + 1, ' ') : NULL;
      assert_non_null(msg);
      json_array_append_new(list, json_string(msg + 1));
    }
    line = end ? end + 1 : NULL;
  }
  free(g_log);
  g_log = NULL;
  return list;
}

/* ---- the goldens ------------------------------------------------------------------------ */

static void fixture_path(char *buf, size_t size, const char *name) {
  snprintf(buf, size, "%s/squad/%s", EST_TEST_DATA, name);
}

static void check_example(const est_squad_example *e, const json_t *g, bool is_training, const char *where) {
  const char *id = json_string_value(json_object_get(g, "qas_id"));
  if (strcmp(e->qas_id, id)) fail_msg("%s: qas_id %s, golden %s", where, e->qas_id, id);
  assert_string_equal(e->question_text, json_string_value(json_object_get(g, "question_text")));
  const json_t *tokens = json_object_get(g, "doc_tokens");
  if (e->num_doc_tokens != json_array_size(tokens))
    fail_msg("%s %s: %zu doc tokens, golden %zu", where, id, e->num_doc_tokens, json_array_size(tokens));
  for (size_t k = 0; k < e->num_doc_tokens; k++)
    if (strcmp(e->doc_tokens[k], json_string_value(json_array_get(tokens, k))))
      fail_msg("%s %s: doc token %zu is '%s', golden '%s'", where, id, k, e->doc_tokens[k],
               json_string_value(json_array_get(tokens, k)));
  const json_t *ans = json_object_get(g, "orig_answer_text");
  const json_t *start = json_object_get(g, "start_position"), *end = json_object_get(g, "end_position");
  if (json_is_null(ans)) {                /* prediction: None */
    assert_false(is_training);
    assert_null(e->orig_answer_text);
    assert_true(json_is_null(start) && json_is_null(end));
    assert_int_equal(e->start_position, -1);
    assert_int_equal(e->end_position, -1);
  } else {
    assert_non_null(e->orig_answer_text);
    assert_string_equal(e->orig_answer_text, json_string_value(ans));
    if (e->start_position != json_integer_value(start) || e->end_position != json_integer_value(end))
      fail_msg("%s %s: positions %lld..%lld, golden %lld..%lld", where, id, (long long)e->start_position,
               (long long)e->end_position, (long long)json_integer_value(start), (long long)json_integer_value(end));
  }
  assert_int_equal(e->is_impossible, json_is_true(json_object_get(g, "is_impossible")));
}

/* What est's message must say for the reference's exception. */
static void check_error(const char *golden_error, const char *msg, const char *file, const char *where) {
  if (!strstr(msg, file)) fail_msg("%s: message does not name the file: %s", where, msg);
  char want[256];
  if (!strncmp(golden_error, "KeyError: '", 11)) {         /* a missing field */
    snprintf(want, sizeof want, "missing field \"%.*s\"", (int)(strlen(golden_error) - 12), golden_error + 11);
  } else if (!strncmp(golden_error, "ValueError: ", 12)) {  /* the reference's own words */
    snprintf(want, sizeof want, "%s", golden_error + 12);
  } else if (!strncmp(golden_error, "IndexError: ", 12)) {  /* past the context */
    snprintf(want, sizeof want, "context");
  } else {
    fail_msg("%s: unexpected golden error %s", where, golden_error);
  }
  if (!strstr(msg, want)) fail_msg("%s: reference raised %s; est's message lacks \"%s\": %s", where, golden_error, want, msg);
  if (!strstr(msg, "qas[")) fail_msg("%s: message does not name the question: %s", where, msg);
}

static void test_matches_reference(void **state) {
  (void)state;
  char path[4096];
  fixture_path(path, sizeof path, "read_golden.json");
  json_error_t jerr;
  json_t *golden = json_load_file(path, 0, &jerr);
  if (!golden) fail_msg("%s: %s", path, jerr.text);
  const json_t *runs = json_object_get(golden, "runs");
  assert_true(json_array_size(runs) >= 30);
  size_t n_examples = 0, n_errors = 0, n_warnings = 0;
  for (size_t i = 0; i < json_array_size(runs); i++) {
    const json_t *run = json_array_get(runs, i);
    const char *fixture = json_string_value(json_object_get(run, "fixture"));
    const char *mode = json_string_value(json_object_get(run, "mode"));
    bool is_training = strcmp(mode, "predict") != 0, v2 = !strcmp(mode, "train_v2");
    char where[256];
    snprintf(where, sizeof where, "%s %s", fixture, mode);
    fixture_path(path, sizeof path, fixture);

    capture_log();
    est_squad_examples *ex = NULL;
    est_status st = est_squad_read_examples(path, is_training, v2, &ex);
    json_t *warnings = captured_warnings();
    const json_t *err = json_object_get(run, "error");
    if (err) {
      if (st == EST_OK) fail_msg("%s: the reference raised %s, est read %zu examples", where, json_string_value(err), ex->count);
      assert_int_equal(st, EST_ERR_INVALID_ARGUMENT);
      check_error(json_string_value(err), est_error_message(), fixture, where);
      n_errors++;
    } else {
      if (st != EST_OK) fail_msg("%s: %s", where, est_error_message());
      const json_t *examples = json_object_get(run, "examples");
      if (ex->count != json_array_size(examples))
        fail_msg("%s: %zu examples, golden %zu", where, ex->count, json_array_size(examples));
      for (size_t k = 0; k < ex->count; k++) check_example(&ex->examples[k], json_array_get(examples, k), is_training, where);
      assert_int_equal(ex->num_skipped, json_array_size(json_object_get(run, "warnings")));
      assert_int_equal(ex->num_questions, ex->count + ex->num_skipped);
      /* Questions of one paragraph share its words. */
      for (size_t k = 1; k < ex->count; k++)
        if (ex->examples[k].paragraph_index == ex->examples[k - 1].paragraph_index)
          assert_ptr_equal(ex->examples[k].doc_tokens, ex->examples[k - 1].doc_tokens);
      n_examples += ex->count;
      /* The warnings, word for word and in order. */
      if (!json_equal(warnings, json_object_get(run, "warnings"))) {
        char *got = json_dumps(warnings, 0), *want = json_dumps(json_object_get(run, "warnings"), 0);
        fail_msg("%s: warnings %s, golden %s", where, got, want);
      }
      n_warnings += json_array_size(warnings);
    }
    json_decref(warnings);
    est_squad_examples_free(ex);
  }
  /* The goldens exercise what they are meant to. */
  assert_true(n_examples >= 60);
  assert_true(n_errors >= 15);
  assert_true(n_warnings >= 8);
  json_decref(golden);
}

/* The escaped fixture (\u00e9, surrogate pairs) reads as the raw UTF-8 one. */
static void test_escapes_read_as_utf8(void **state) {
  (void)state;
  char a[4096], b[4096];
  fixture_path(a, sizeof a, "edge_v1.json");
  fixture_path(b, sizeof b, "edge_v1_escaped.json");
  est_squad_examples *x, *y;
  est_log_set_level(EST_LOG_ERROR);
  assert_int_equal(est_squad_read_examples(a, true, false, &x), EST_OK);
  assert_int_equal(est_squad_read_examples(b, true, false, &y), EST_OK);
  est_log_set_level(EST_LOG_INFO);
  assert_int_equal(x->count, y->count);
  for (size_t i = 0; i < x->count; i++) {
    assert_string_equal(x->examples[i].orig_answer_text, y->examples[i].orig_answer_text);
    assert_int_equal(x->examples[i].start_position, y->examples[i].start_position);
  }
  /* U+1F600 is one character: "Grand" is word 8 after it, as the golden says. */
  assert_string_equal(x->examples[3].qas_id, "e4-after-emoji");
  assert_string_equal(x->examples[3].doc_tokens[7], "\xF0\x9F\x98\x80");
  est_squad_examples_free(x);
  est_squad_examples_free(y);
}

/* ---- bad input ------------------------------------------------------------------------- */

/* Reads `json` as a training (v2: 2.0) file named "bad.json"; expects INVALID_ARGUMENT with
 * every one of the NULL-terminated substrings in the message. */
static void expect_bad(const char *json, bool is_training, bool v2, ...) {
  est_squad_examples *ex = (est_squad_examples *)1;
  est_status st = est_squad_read_examples_buffer(json, strlen(json), "bad.json", is_training, v2, &ex);
  if (st == EST_OK) fail_msg("accepted: %s", json);
  assert_null(ex);
  assert_int_equal(st, EST_ERR_INVALID_ARGUMENT);
  const char *msg = est_error_message();
  if (!strstr(msg, "bad.json")) fail_msg("no file name in: %s", msg);
  va_list ap;
  va_start(ap, v2);
  for (const char *want; (want = va_arg(ap, const char *));)
    if (!strstr(msg, want)) fail_msg("\"%s\" not in: %s\n(input %s)", want, msg, json);
  va_end(ap);
}

#define P(ctx, qas) "{\"data\": [{\"paragraphs\": [{\"context\": \"" ctx "\", \"qas\": [" qas "]}]}]}"
#define Q(rest) "{\"id\": \"q1\", \"question\": \"Why?\"" rest "}"

static void test_bad_structure(void **state) {
  (void)state;
  expect_bad("{\"data\": [", false, false, "not valid JSON", NULL);
  expect_bad("", false, false, "not valid JSON", NULL);
  expect_bad("\xEF\xBB\xBF{\"data\": []}", false, false, "byte-order mark", NULL);
  expect_bad("[1, 2]", false, false, "top level must be a JSON object", NULL);
  expect_bad("{}", false, false, "missing field \"data\"", NULL);
  expect_bad("{\"data\": {}}", false, false, "field \"data\" must be an array", NULL);
  expect_bad("{\"data\": [3]}", false, false, "data[0]", "must be an object", NULL);
  expect_bad("{\"data\": [{}]}", false, false, "data[0]", "missing field \"paragraphs\"", NULL);
  expect_bad("{\"data\": [{\"paragraphs\": [{}]}]}", false, false, "data[0].paragraphs[0]", "missing field \"context\"", NULL);
  expect_bad("{\"data\": [{\"paragraphs\": [{\"context\": 5, \"qas\": []}]}]}", false, false,
             "field \"context\" must be a string, not an integer", NULL);
  expect_bad("{\"data\": [{\"paragraphs\": [{\"context\": \"x\"}]}]}", false, false, "missing field \"qas\"", NULL);
  expect_bad(P("x", "{\"question\": \"Why?\"}"), false, false, "qas[0]", "missing field \"id\"", NULL);
  expect_bad(P("x", "{\"id\": 7, \"question\": \"Why?\"}"), false, false, "field \"id\" must be a string", NULL);
  expect_bad(P("x", "{\"id\": \"q1\"}"), false, false, "(id \"q1\")", "missing field \"question\"", NULL);
  expect_bad(P("x", "{\"id\": \"q1\", \"question\": null}"), false, false, "field \"question\" must be a string, not null", NULL);
}

static void test_bad_answers(void **state) {
  (void)state;
  expect_bad(P("One two.", Q("")), true, false, "(id \"q1\")", "missing field \"answers\"", NULL);
  expect_bad(P("One two.", Q(", \"answers\": {}")), true, false, "field \"answers\" must be an array", NULL);
  expect_bad(P("One two.", Q(", \"answers\": []")), true, false,
             "For training, each question should have exactly 1 answer.", "(id \"q1\")", NULL);
  expect_bad(P("One two.", Q(", \"answers\": [1]")), true, false, "answers[0] must be an object", NULL);
  expect_bad(P("One two.", Q(", \"answers\": [{\"answer_start\": 0}]")), true, false,
             "(id \"q1\")", "answers[0]: missing field \"text\"", NULL);
  expect_bad(P("One two.", Q(", \"answers\": [{\"text\": \"One\"}]")), true, false,
             "answers[0]: missing field \"answer_start\"", NULL);
  expect_bad(P("One two.", Q(", \"answers\": [{\"text\": \"One\", \"answer_start\": 0.0}]")), true, false,
             "field \"answer_start\" must be an integer, not a float", NULL);
  expect_bad(P("One two.", Q(", \"answers\": [{\"text\": \"One\", \"answer_start\": \"0\"}]")), true, false,
             "field \"answer_start\" must be an integer, not a string", NULL);
  expect_bad(P("One two.", Q(", \"answers\": [{\"text\": 1, \"answer_start\": 0}]")), true, false,
             "field \"text\" must be a string", NULL);
  /* Outside the context: past the end, negative, and running past the end. */
  expect_bad(P("One two.", Q(", \"answers\": [{\"text\": \"x\", \"answer_start\": 8}]")), true, false,
             "answer_start = 8 is outside the context (8 characters)", "(id \"q1\")", NULL);
  expect_bad(P("One two.", Q(", \"answers\": [{\"text\": \"x\", \"answer_start\": -1}]")), true, false,
             "answer_start = -1 is outside the context", NULL);
  expect_bad(P("One two.", Q(", \"answers\": [{\"text\": \"two..\", \"answer_start\": 4}]")), true, false,
             "runs past the end of the context", NULL);
  /* Characters, not bytes: 7 characters, 9 bytes. */
  expect_bad(P("\\u00e9\\u00e9 two.", Q(", \"answers\": [{\"text\": \"x\", \"answer_start\": 7}]")), true, false,
             "answer_start = 7 is outside the context (7 characters)", NULL);
  expect_bad(P("", Q(", \"answers\": [{\"text\": \"\", \"answer_start\": 0}]")), true, false,
             "outside the context (0 characters)", NULL);
  /* 2.0 training: is_impossible is required and must be a boolean. */
  expect_bad(P("One two.", Q(", \"answers\": []")), true, true, "missing field \"is_impossible\"", NULL);
  expect_bad(P("One two.", Q(", \"answers\": [], \"is_impossible\": 1")), true, true,
             "field \"is_impossible\" must be true or false, not an integer", NULL);
  expect_bad(P("One two.", Q(", \"is_impossible\": true")), true, true, "missing field \"answers\"", NULL);
}

/* What is not an error: prediction needs no answers; U+00E9 at answer_start counts as one. */
static void test_good_edges(void **state) {
  (void)state;
  const char *json = P("\\u00e9t\\u00e9 two.", Q(", \"answers\": [{\"text\": \"two.\", \"answer_start\": 4}]"));
  est_squad_examples *ex;
  assert_int_equal(est_squad_read_examples_buffer(json, strlen(json), "ok.json", true, false, &ex), EST_OK);
  assert_int_equal(ex->count, 1);
  assert_int_equal(ex->examples[0].start_position, 1);
  assert_int_equal(ex->examples[0].end_position, 1);
  est_squad_examples_free(ex);
  json = P("x", Q(""));
  assert_int_equal(est_squad_read_examples_buffer(json, strlen(json), "ok.json", false, true, &ex), EST_OK);
  assert_int_equal(ex->count, 1);
  assert_null(ex->examples[0].orig_answer_text);
  est_squad_examples_free(ex);
  /* An empty file list of articles is an empty set of examples. */
  json = "{\"data\": []}";
  assert_int_equal(est_squad_read_examples_buffer(json, strlen(json), "ok.json", true, true, &ex), EST_OK);
  assert_int_equal(ex->count, 0);
  est_squad_examples_free(ex);
}

static void test_missing_file(void **state) {
  (void)state;
  est_squad_examples *ex;
  assert_int_equal(est_squad_read_examples("/nonexistent/train.json", true, false, &ex), EST_ERR_NOT_FOUND);
  assert_non_null(strstr(est_error_message(), "/nonexistent/train.json"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_matches_reference),
    cmocka_unit_test(test_escapes_read_as_utf8),
    cmocka_unit_test(test_bad_structure),
    cmocka_unit_test(test_bad_answers),
    cmocka_unit_test(test_good_edges),
    cmocka_unit_test(test_missing_file),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
