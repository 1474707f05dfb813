/* Asking questions of your own text (docs/squad.md §11): a tiny model trained by
 * `est run_squad` on tests/data/squad/windows_v1.json, exported with --do_export, then
 *   - est_model.json names the squad head and the prediction settings;
 *   - `est predict` answers {"question", "context"} lines as run_squad --do_predict's
 *     predictions.json does, with character offsets that point at the answer in the context;
 *   - `est serve` gives the same answers, whether the questions come in one request or many;
 *   - a 2000-word context is answered in one forward pass over all its windows (the
 *     servable's forward counter, the server's batch metrics);
 *   - a version 2 export whose threshold prefers the null answer answers "" (-1, -1);
 *   - every bad request or input line is an error naming the field (400 / exit 1), 413 for
 *     a body over --max_request_bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/serving.h"
#include "serve_test_client.h"

#define VOCAB EST_TEST_DATA "/vocab_uncased.txt"
#define CONFIG EST_TEST_DATA "/run_classifier/bert_config_h32.json"
#define SQUAD EST_TEST_DATA "/squad/windows_v1.json"
#define SMALL " --max_seq_length=64 --doc_stride=16 --max_query_length=12 --num_threads=2"

enum { MAX_Q = 32 };
static char out_dir[512], export_v2[600], input_path[600];
static json_t *squad;                          /* windows_v1.json */
static const char *ids[MAX_Q], *questions[MAX_Q], *contexts[MAX_Q];
static size_t nq;
static char *long_context;                     /* 2000 words */

/* Runs a command line; fails the test with its output unless it exits 0. */
static char *run_ok(const char *cmd) {
  char *out = NULL;
  int rc = test_run(&out, 1, "%s", cmd);
  if (rc != 0) fail_msg("%s: exit %d:\n%s", cmd, rc, out);
  return out;
}

static void write_text(const char *path, const char *text) {
  assert_int_equal(est_write_file_atomic(path, text, strlen(text)), EST_OK);
}

static int group_setup(void **state) {
  test_tmpdir_setup(state);
  snprintf(out_dir, sizeof out_dir, "%s/run", test_tmpdir);
  snprintf(export_base, sizeof export_base, "%s/export", out_dir);
  snprintf(export_v2, sizeof export_v2, "%s/export_v2", out_dir);
  snprintf(input_path, sizeof input_path, "%s/questions.jsonl", test_tmpdir);
  char cmd[4096];
  /* train, predict (predictions.json) and export in one run; then a version 2 export of the
   * same checkpoint whose threshold always prefers the null answer */
  snprintf(cmd, sizeof cmd, EST_BIN " run_squad --vocab_file=" VOCAB " --bert_config_file=" CONFIG
           " --do_train --do_predict --do_export --train_file=" SQUAD " --predict_file=" SQUAD " --output_dir=%s" SMALL
           " --train_batch_size=4 --num_train_epochs=20 --learning_rate=3e-3", out_dir);
  free(run_ok(cmd));
  snprintf(cmd, sizeof cmd, EST_BIN " run_squad --vocab_file=" VOCAB " --bert_config_file=" CONFIG
           " --do_export --output_dir=%s --export_dir=%s --version_2_with_negative"
           " --null_score_diff_threshold=-1000" SMALL, out_dir, export_v2);
  free(run_ok(cmd));
  /* the questions of windows_v1.json, as est predict's input lines */
  json_error_t err;
  squad = json_load_file(SQUAD, 0, &err);
  assert_non_null(squad);
  char *lines = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&lines, &len);
  size_t di, pi, qi;
  json_t *d, *p, *q;
  json_array_foreach(json_object_get(squad, "data"), di, d) json_array_foreach(json_object_get(d, "paragraphs"), pi, p)
    json_array_foreach(json_object_get(p, "qas"), qi, q) {
    assert_true(nq < MAX_Q);
    ids[nq] = json_string_value(json_object_get(q, "id"));
    questions[nq] = json_string_value(json_object_get(q, "question"));
    contexts[nq] = json_string_value(json_object_get(p, "context"));
    json_t *line = json_pack("{s:s, s:s}", "question", questions[nq], "context", contexts[nq]);
    json_dumpf(line, f, JSON_COMPACT);
    fputc('\n', f);
    json_decref(line);
    nq++;
  }
  fclose(f);
  write_text(input_path, lines);
  free(lines);
  /* 2000 words: the first context's words over and over */
  size_t cap = 40000, n = 0;
  long_context = malloc(cap);
  const char *src = contexts[0], *w = src;
  for (int words = 0; words < 2000; words++) {
    while (*w == ' ') w++;
    if (!*w) w = src;
    size_t wl = strcspn(w, " ");
    assert_true(n + wl + 2 < cap);
    if (words) long_context[n++] = ' ';
    memcpy(long_context + n, w, wl);
    n += wl;
    w += wl;
  }
  long_context[n] = 0;
  return 0;
}

static int group_teardown(void **state) {
  json_decref(squad);
  free(long_context);
  return test_tmpdir_teardown(state);
}

/* ---- answers ---- */

typedef struct answer {
  char *text;
  long long start, end;
  double score;
} answer;

static void parse_answer(const json_t *o, answer *a, const char *where) {
  const json_t *t = json_object_get(o, "answer"), *s = json_object_get(o, "start"), *e = json_object_get(o, "end"),
               *sc = json_object_get(o, "score");
  if (!json_is_string(t) || !json_is_integer(s) || !json_is_integer(e) || !json_is_number(sc) ||
      json_object_size(o) != 4)
    fail_msg("%s: not {answer, start, end, score}", where);
  a->text = strdup(json_string_value(t));
  a->start = json_integer_value(s), a->end = json_integer_value(e);
  a->score = json_number_value(sc);
}

/* est predict's answers for the lines of `input` (n lines expected). */
static void predict(const char *export_dir, const char *input, const char *flags, answer *out, size_t n) {
  char cmd[2048], *text;
  snprintf(cmd, sizeof cmd, EST_BIN " predict --export_dir=%s --input_file=%s %s", export_dir, input, flags);
  int rc = test_run(&text, 0, "%s", cmd);
  if (rc != 0) fail_msg("%s: exit %d", cmd, rc);
  char *line = text;
  for (size_t i = 0; i < n; i++) {
    char *nl = strchr(line, '\n');
    if (!nl) fail_msg("est predict wrote %zu lines, want %zu:\n%s", i, n, text);
    *nl = 0;
    json_error_t err;
    json_t *o = json_loads(line, 0, &err);
    if (!o) fail_msg("line %zu is not JSON: %s", i + 1, line);
    parse_answer(o, &out[i], line);
    json_decref(o);
    line = nl + 1;
  }
  assert_string_equal(line, "");
  free(text);
}

/* The code points [start, end) of a UTF-8 string, with each run of the reader's whitespace
 * (" ", "\t", "\r", "\n", U+202F) made one space. */
static char *substring_cp(const char *s, long long start, long long end) {
  char *out = malloc(strlen(s) + 1), *w = out;
  long long cp = -1;
  for (const char *p = s; *p; p++) {
    if (((unsigned char)*p & 0xC0) != 0x80) cp++;
    if (cp < start || cp >= end) continue;
    const bool nnbsp = !strncmp(p, "\xE2\x80\xAF", 3);
    const bool space = *p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || nnbsp;
    if (nnbsp) p += 2; /* past its continuation bytes: one code point */
    if (space && w > out && w[-1] == ' ') continue;
    *w++ = space ? ' ' : *p;
  }
  *w = 0;
  return out;
}

static void expect_same(const answer *a, const answer *b, const char *what, size_t i) {
  if (strcmp(a->text, b->text) || a->start != b->start || a->end != b->end || fabs(a->score - b->score) > 1e-5)
    fail_msg("%s, question %zu: \"%s\" [%lld, %lld) %g vs \"%s\" [%lld, %lld) %g", what, i, a->text, a->start, a->end,
             a->score, b->text, b->start, b->end, b->score);
}

static void free_answers(answer *a, size_t n) {
  for (size_t i = 0; i < n; i++) free(a[i].text);
}

static void test_export_names_the_squad_head(void **state) {
  (void)state;
  char dir[4096], path[4200];
  assert_int_equal(est_export_resolve(export_base, dir, sizeof dir, NULL), EST_OK);
  snprintf(path, sizeof path, "%s/est_model.json", dir);
  est_model_meta m;
  assert_int_equal(est_model_meta_read(&m, path), EST_OK);
  assert_ptr_equal(m.head, &est_served_squad);
  assert_string_equal(m.head->name, "squad");
  const est_model_squad *q = est_model_meta_head_config(&m);
  assert_int_equal(m.max_seq_length, 64);
  assert_int_equal(q->doc_stride, 16);
  assert_int_equal(q->max_query_length, 12);
  assert_int_equal(q->n_best_size, 20);
  assert_int_equal(q->max_answer_length, 30);
  assert_false(q->version_2_with_negative);
  assert_true(m.do_lower_case);
  est_model_meta_clear(&m);
  snprintf(path, sizeof path, "%s/assets/vocab.txt", dir);
  assert_true(est_file_exists(path));
  assert_int_equal(est_export_resolve(export_v2, dir, sizeof dir, NULL), EST_OK);
  snprintf(path, sizeof path, "%s/est_model.json", dir);
  assert_int_equal(est_model_meta_read(&m, path), EST_OK);
  q = est_model_meta_head_config(&m);
  assert_true(q->version_2_with_negative);
  assert_true(q->null_score_diff_threshold == -1000);
  est_model_meta_clear(&m);
  /* a HuggingFace directory is a classifier's only */
  char *out;
  int rc = test_run(&out, 1, EST_BIN " run_squad --vocab_file=" VOCAB " --bert_config_file=" CONFIG
                    " --do_export --output_dir=%s --export_format=hf" SMALL, out_dir);
  if (rc == 0 || !strstr(out, "--export_format=hf: run_squad exports est servables only"))
    fail_msg("exit %d:\n%s", rc, out);
  free(out);
}

/* est predict answers as run_squad --do_predict did, and start/end point at the answer. */
static void test_predict_answers_as_run_squad(void **state) {
  (void)state;
  answer a[MAX_Q];
  predict(export_base, input_path, "", a, nq);
  char path[700];
  snprintf(path, sizeof path, "%s/predictions.json", out_dir);
  json_error_t err;
  json_t *preds = json_load_file(path, 0, &err);
  assert_non_null(preds);
  for (size_t i = 0; i < nq; i++) {
    const char *want = json_string_value(json_object_get(preds, ids[i]));
    if (strcmp(a[i].text, want)) fail_msg("%s: est predict says \"%s\", predictions.json \"%s\"", ids[i], a[i].text, want);
    assert_true(a[i].start >= 0 && a[i].end > a[i].start);
    char *span = substring_cp(contexts[i], a[i].start, a[i].end);
    if (strcmp(span, a[i].text)) fail_msg("%s: context[%lld:%lld] is \"%s\", the answer \"%s\"", ids[i], a[i].start,
                                          a[i].end, span, a[i].text);
    free(span);
    assert_true(a[i].score > 0 && a[i].score <= 1);
  }
  json_decref(preds);
  /* one question per forward pass gives the same answers as all of them together */
  answer b[MAX_Q];
  predict(export_base, input_path, "--batch_size=1", b, nq);
  for (size_t i = 0; i < nq; i++) expect_same(&a[i], &b[i], "--batch_size=1 vs 32", i);
  free_answers(a, nq), free_answers(b, nq);
}

/* Offsets count code points (not bytes) and survive tabs, double spaces and U+202F between
 * words; a context without a word has no window: version 1's "empty" at -1, -1. */
static void test_predict_offsets_are_code_points(void **state) {
  (void)state;
  const char *context = "Gr\xC3\xBC\xC3\x9F" "e  aus\tK\xC3\xB6ln, sagte J\xC3\xBCrgen \xE2\x80\xAF M\xC3\xBCller. "
                        "The leader was John Smith (1895-1943), born in K\xC3\xB6ln.";
  char path[700];
  snprintf(path, sizeof path, "%s/unicode.jsonl", test_tmpdir);
  json_t *lines[2] = {json_pack("{s:s, s:s}", "question", "Who was the leader?", "context", context),
                      json_pack("{s:s, s:s}", "question", "Who?", "context", " \t ")};
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  for (int i = 0; i < 2; i++) json_dumpf(lines[i], f, JSON_COMPACT), fputc('\n', f), json_decref(lines[i]);
  fclose(f);
  write_text(path, text);
  free(text);
  answer a[2];
  predict(export_base, path, "", a, 2);
  if (a[0].start < 0) fail_msg("no span for the first question: \"%s\"", a[0].text);
  char *span = substring_cp(context, a[0].start, a[0].end);
  if (strcmp(span, a[0].text)) fail_msg("context[%lld:%lld] is \"%s\", the answer \"%s\"", a[0].start, a[0].end, span,
                                        a[0].text);
  free(span);
  assert_string_equal(a[1].text, "empty");
  assert_int_equal(a[1].start, -1);
  assert_int_equal(a[1].end, -1);
  free_answers(a, 2);
}

/* A version 2 export answers "" when the null answer wins. */
static void test_version_2_answers_nothing(void **state) {
  (void)state;
  answer a[MAX_Q];
  predict(export_v2, input_path, "", a, nq);
  for (size_t i = 0; i < nq; i++) {
    assert_string_equal(a[i].text, "");
    assert_int_equal(a[i].start, -1);
    assert_int_equal(a[i].end, -1);
    assert_true(a[i].score > 0 && a[i].score <= 1);
  }
  free_answers(a, nq);
}

static void test_predict_bad_lines(void **state) {
  (void)state;
  const struct {
    const char *line, *message;
  } cases[] = {
    {"{\"question\": \"who?\"}", ":2: missing \"context\""},
    {"{\"context\": \"x\"}", ":2: missing \"question\""},
    {"{\"question\": \"who?\", \"context\": 7}", ":2: \"context\" must be a string"},
    {"[1, 2]", ":2: not a JSON object"},
    {"{\"question\": ", ":2: not a JSON object"},
    {"{\"question\": \"who\\u0000?\", \"context\": \"c\"}",
     ":2: not a JSON object {\"question\": ..., \"context\": ...} (a string holds \\u0000 (the NUL character)"},
  };
  char path[700];
  snprintf(path, sizeof path, "%s/bad.jsonl", test_tmpdir);
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    char text[512], *out;
    snprintf(text, sizeof text, "{\"question\": \"q\", \"context\": \"c\"}\n%s\n", cases[k].line);
    write_text(path, text);
    int rc = test_run(&out, 1, EST_BIN " predict --export_dir=%s --input_file=%s", export_base, path);
    if (rc != 1 || !strstr(out, cases[k].message) || !strstr(out, "bad.jsonl"))
      fail_msg("%s: exit %d, want 1 with '%s':\n%s", cases[k].line, rc, cases[k].message, out);
    free(out);
  }
}

/* ---- est serve ---- */

/* POST instances; the predictions into out[n]. */
static void serve_answers(int port, const char *body, answer *out, size_t n) {
  char *resp;
  int status = http(port, "POST", "/v1/models/jack:predict", body, &resp);
  if (status != 200) fail_msg("status %d: %s", status, resp);
  json_error_t err;
  json_t *o = json_loads(resp, 0, &err);
  const json_t *list = json_object_get(o, "predictions");
  if (!json_is_array(list) || json_array_size(list) != n) fail_msg("want %zu predictions: %s", n, resp);
  for (size_t i = 0; i < n; i++) parse_answer(json_array_get(list, i), &out[i], resp);
  json_decref(o);
  free(resp);
}

static char *instances_body(const char *const *qs, const char *const *cs, size_t n) {
  json_t *list = json_array();
  for (size_t i = 0; i < n; i++) json_array_append_new(list, json_pack("{s:s, s:s}", "question", qs[i], "context", cs[i]));
  json_t *o = json_pack("{s:o}", "instances", list);
  char *s = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  return s;
}

static void test_serve_answers_as_predict(void **state) {
  (void)state;
  answer want[MAX_Q], all[MAX_Q], one[MAX_Q];
  predict(export_base, input_path, "", want, nq);
  server s;
  server_start(&s, "serve", "--enable_batching --max_batch_size=256 --file_system_poll_wait_seconds=0");
  char *body = instances_body(questions, contexts, nq);
  serve_answers(s.port, body, all, nq);
  free(body);
  for (size_t i = 0; i < nq; i++) {
    expect_same(&want[i], &all[i], "serve (one request) vs predict", i);
    body = instances_body(&questions[i], &contexts[i], 1);
    serve_answers(s.port, body, &one[i], 1);
    free(body);
    expect_same(&want[i], &one[i], "serve (a request each) vs predict", i);
  }
  expect(s.port, "GET", "/v1/models/jack/metadata", NULL, 200, "\"question\"");
  assert_int_equal(server_stop(&s), 0);
  free_answers(want, nq), free_answers(all, nq), free_answers(one, nq);
}

static void test_serve_errors(void **state) {
  (void)state;
  server s;
  server_start(&s, "errors", "--max_request_bytes=100000 --file_system_poll_wait_seconds=0");
  const char *path = "/v1/models/jack:predict";
  expect(s.port, "POST", path, "{\"instances\": [{\"context\": \"x\"}]}", 400, "instances[0].question: missing");
  expect(s.port, "POST", path, "{\"instances\": [{\"question\": \"q\", \"context\": \"c\"}, {\"question\": \"q\"}]}", 400,
         "instances[1].context: missing");
  expect(s.port, "POST", path, "{\"instances\": [{\"question\": \"q\", \"context\": [\"c\"]}]}", 400,
         "instances[0].context: must be a string");
  expect(s.port, "POST", path, "{\"instances\": [{\"question\": 1, \"context\": \"c\"}]}", 400,
         "instances[0].question: must be a string");
  expect(s.port, "POST", path, "{\"instances\": [{\"question\": \"q\", \"text_a\": \"c\"}]}", 400,
         "unknown input \\\"text_a\\\"");
  expect(s.port, "POST", path, "{\"instances\": [\"just text\"]}", 400, "instances[0]: must be an object");
  expect(s.port, "POST", path, "{\"inputs\": {\"question\": [\"q\"], \"context\": [\"c\"]}}", 400, "not \\\"inputs\\\"");
  expect(s.port, "POST", path, "{\"instances\": []}", 400, "empty");
  expect(s.port, "POST", path, "{\"instances\": [", 400, "JSON parse error");
  expect(s.port, "POST", "/v1/models/jack:classify", "{\"examples\": [\"x\"]}", 400, "use :predict");
  char *big = malloc(200001);
  memset(big, ' ', 200000);
  big[200000] = 0;
  memcpy(big, "{\"instances\": [", 15);
  expect(s.port, "POST", path, big, 413, "max_request_bytes");
  free(big);
  /* still answering */
  char *body = instances_body(questions, contexts, 1);
  answer a;
  serve_answers(s.port, body, &a, 1);
  free(body);
  free_answers(&a, 1);
  assert_int_equal(server_stop(&s), 0);
}

/* ---- a long context: all its windows in one forward pass ---- */

static void test_long_context_one_pass(void **state) {
  (void)state;
  const char *q = "who was the leader?";
  est_servable *sv;
  assert_int_equal(est_servable_load(&sv, export_base, 256), EST_OK);
  /* the library's path (est/serving.h est_served_batch, as est predict and est serve run it) */
  est_served_batch *b;
  assert_int_equal(est_served_batch_create(&b, sv, NULL, NULL), EST_OK);
  const est_instance instance = {.texts = {q, long_context}};
  assert_int_equal(est_served_batch_add_instance(b, &instance), EST_OK);
  est_served_rows windows;
  assert_int_equal(est_served_batch_rows(b, &windows), EST_OK);
  const int rows = windows.n;
  print_message("the 2000-word context has %d windows\n", rows);
  if (rows < 16 || rows > 256) fail_msg("the 2000-word context has %d windows; the test wants 16 to 256", rows);
  const uint64_t before = est_servable_forward_count(sv);
  assert_int_equal(est_served_batch_run(b, sv), EST_OK);
  assert_int_equal(est_servable_forward_count(sv) - before, 1);
  char *written = NULL;
  size_t written_size = 0;
  FILE *mem = open_memstream(&written, &written_size);
  est_served_batch_write(b, 0, EST_SERVED_LINE, mem);
  fclose(mem);
  est_served_batch_free(b);
  json_error_t err;
  json_t *o = json_loads(written, 0, &err);
  if (!o) fail_msg("not JSON: %s", written);
  answer lib;
  parse_answer(o, &lib, written);
  json_decref(o);
  free(written);
  est_servable_free(sv);

  /* est serve: one batch of `rows` examples for the request */
  server s;
  server_start(&s, "long", "--enable_batching --max_batch_size=256 --file_system_poll_wait_seconds=0");
  const double batches = metric(s.port, "est_serving_batch_size_count{model_name=\"jack\"} ");
  const double examples = metric(s.port, "est_serving_batch_size_sum{model_name=\"jack\"} ");
  char *body = instances_body(&q, (const char *const *)&long_context, 1);
  answer served;
  serve_answers(s.port, body, &served, 1);
  free(body);
  assert_true(metric(s.port, "est_serving_batch_size_count{model_name=\"jack\"} ") == batches + 1);
  assert_true(metric(s.port, "est_serving_batch_size_sum{model_name=\"jack\"} ") == examples + rows);
  assert_int_equal(server_stop(&s), 0);
  expect_same(&lib, &served, "serve vs est_served_batch_run, long context", 0);
  char *span = substring_cp(long_context, lib.start, lib.end);
  assert_string_equal(span, lib.text);
  free(span);
  free(lib.text);
  free(served.text);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_export_names_the_squad_head),
    cmocka_unit_test(test_predict_answers_as_run_squad),
    cmocka_unit_test(test_predict_offsets_are_code_points),
    cmocka_unit_test(test_version_2_answers_nothing),
    cmocka_unit_test(test_predict_bad_lines),
    cmocka_unit_test(test_serve_answers_as_predict),
    cmocka_unit_test(test_serve_errors),
    cmocka_unit_test(test_long_context_one_pass),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
