/* est_squad_predictor (est/squad.h) against run_squad.py's write_predictions.
 *
 * tests/data/squad/predictions_golden.json was written by
 * tests/reference/squad_predictions_reference.py (tests/reference/README.md): for 16 runs it
 * converted a fixture's questions to features, fed write_predictions, unchanged, fixed
 * float32 logits (kept as IEEE bits; ties on a 0.25 grid, any float32, null-favouring), and
 * kept the three files it wrote and its verbose INFO lines. This test converts the same
 * questions, feeds the same logits and compares the files byte for byte and the lines one by
 * one. Where the reference raises (version 2, every n-best entry null), the golden holds what
 * est writes instead (the reference with that branch answered, docs/squad.md §9). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/log.h"
#include "est/squad.h"
#include "est/tokenizer.h"
#include "test_util.h"

static json_t *g_golden;

static int setup(void **state) {
  char path[1024];
  json_error_t err;
  snprintf(path, sizeof path, "%s/squad/predictions_golden.json", EST_TEST_DATA);
  g_golden = json_load_file(path, 0, &err);
  if (!g_golden) {
    fprintf(stderr, "%s: %s\n", path, err.text);
    return -1;
  }
  return test_tmpdir_setup(state);
}

static int teardown(void **state) {
  json_decref(g_golden);
  return test_tmpdir_teardown(state);
}

static int64_t num(const json_t *run, const char *key) { return json_integer_value(json_object_get(run, key)); }

static float from_bits(const json_t *v) {
  uint32_t u = (uint32_t)json_integer_value(v);
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* est's INFO messages (after "I<mmdd> <time> ") other than the two "Writing ..." lines. */
static void check_log(const char *log, const json_t *want, const char *where) {
  const json_t *w;
  size_t i;
  size_t n = 0;
  for (const char *p = log; p && *p;) {
    const char *end = strchr(p, '\n');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    const char *msg = memchr(p, ' ', len);
    msg = msg ? memchr(msg + 1, ' ', len - (size_t)(msg + 1 - p)) : NULL;
    assert_non_null(msg);
    msg++;
    const size_t mlen = len - (size_t)(msg - p);
    if (strncmp(msg, "Writing ", 8)) {
      const char *expect = NULL;
      size_t seen = 0;
      json_array_foreach(want, i, w) {
        const char *line = json_string_value(w);
        if (strncmp(line, "Writing ", 8) && seen++ == n) expect = line;
      }
      if (!expect) fail_msg("%s: est logged '%.*s' past the reference's lines", where, (int)mlen, msg);
      if (strlen(expect) != mlen || memcmp(expect, msg, mlen))
        fail_msg("%s: line %zu is '%.*s', the reference logged '%s'", where, n, (int)mlen, msg, expect);
      n++;
    }
    p = end ? end + 1 : NULL;
  }
  size_t total = 0;
  json_array_foreach(want, i, w) total += strncmp(json_string_value(w), "Writing ", 8) != 0;
  if (n != total) fail_msg("%s: %zu lines, the reference logged %zu", where, n, total);
}

static void compare_file(const char *path, const json_t *want, const char *where) {
  if (json_is_null(want)) {
    FILE *f = fopen(path, "rb");
    if (f) {
      fclose(f);
      fail_msg("%s: %s written without version 2", where, path);
    }
    return;
  }
  size_t size = 0;
  char *got = test_read_file(path, &size);
  const char *w = json_string_value(want);
  if (size != strlen(w) || memcmp(got, w, size)) {
    size_t at = 0;
    while (at < size && w[at] && got[at] == w[at]) at++;
    fail_msg("%s: %s differs from the reference's at byte %zu: est '%.60s' reference '%.60s'", where, path, at,
             got + at, w + at);
  }
  free(got);
}

static void test_predictions_equal_write_predictions(void **state) {
  (void)state;
  const json_t *runs = json_object_get(g_golden, "predictions"), *run;
  size_t r;
  assert_true(json_array_size(runs) >= 16);
  json_array_foreach(runs, r, run) {
    char where[256], path[1024];
    const bool v2 = json_is_true(json_object_get(run, "version_2_with_negative"));
    snprintf(where, sizeof where, "run %zu (%s, %s logits)", r, json_string_value(json_object_get(run, "fixture")),
             json_string_value(json_object_get(run, "logits_kind")));
    snprintf(path, sizeof path, "%s/squad/%s", EST_TEST_DATA, json_string_value(json_object_get(run, "fixture")));
    est_squad_examples *ex;
    assert_int_equal(est_squad_read_examples(path, false, v2, &ex), EST_OK);
    snprintf(path, sizeof path, "%s/%s", EST_TEST_DATA, json_string_value(json_object_get(run, "vocab")));
    est_tokenizer *tok;
    assert_int_equal(est_tokenizer_open(&tok, path, json_is_true(json_object_get(run, "do_lower_case"))), EST_OK);
    const est_squad_feature_config fc = {.max_seq_length = (int)num(run, "max_seq_length"),
                                         .doc_stride = (int)num(run, "doc_stride"),
                                         .max_query_length = (int)num(run, "max_query_length")};
    const est_squad_prediction_config pc = {
        .n_best_size = (int)num(run, "n_best_size"), .max_answer_length = (int)num(run, "max_answer_length"),
        .version_2_with_negative = v2,
        .null_score_diff_threshold = json_real_value(json_object_get(run, "null_score_diff_threshold")),
        .verbose_logging = true};
    est_squad_predictor *p;
    assert_int_equal(est_squad_predictor_create(&p, ex, tok, &pc), EST_OK);
    assert_int_equal(est_squad_convert_examples(ex, tok, &fc, est_squad_predictor_add_feature, p), EST_OK);
    const json_t *logits = json_object_get(run, "logits");
    assert_int_equal(est_squad_predictor_num_features(p), (int64_t)json_array_size(logits));
    const int S = fc.max_seq_length;
    float *start = malloc((size_t)S * sizeof(float)), *end = malloc((size_t)S * sizeof(float));
    const json_t *l;
    size_t k;
    json_array_foreach(logits, k, l) {
      for (int i = 0; i < S; i++) {
        start[i] = from_bits(json_array_get(json_object_get(l, "start"), (size_t)i));
        end[i] = from_bits(json_array_get(json_object_get(l, "end"), (size_t)i));
      }
      assert_int_equal(est_squad_predictor_add_result(p, 1000000000 + (int64_t)k, start, end, S), EST_OK);
    }
    /* a result no feature has, and a second one, are refused */
    assert_int_not_equal(est_squad_predictor_add_result(p, 999999999, start, end, S), EST_OK);
    assert_int_not_equal(est_squad_predictor_add_result(p, 1000000000, start, end, S), EST_OK);
    free(start), free(end);

    const char *files[3] = {test_tmp_path("predictions.json"), test_tmp_path("nbest_predictions.json"),
                            test_tmp_path("null_odds.json")};
    remove(files[2]);
    char *log = NULL;
    size_t log_size = 0;
    FILE *stream = open_memstream(&log, &log_size);
    est_log_set_stream(stream);
    est_log_set_level(EST_LOG_INFO);
    est_status st = est_squad_predictor_write(p, files[0], files[1], files[2]);
    est_log_set_stream(stderr);
    fclose(stream);
    if (st != EST_OK) fail_msg("%s: %s", where, est_error_message());
    compare_file(files[0], json_object_get(run, "predictions"), where);
    compare_file(files[1], json_object_get(run, "nbest"), where);
    compare_file(files[2], json_object_get(run, "null_odds"), where);
    /* the reference's verbose lines (where it ran to the end: its failed runs logged twice) */
    if (!json_object_get(run, "error")) check_log(log, json_object_get(run, "log"), where);
    free(log);
    est_squad_predictor_free(p);
    est_tokenizer_free(tok);
    est_squad_examples_free(ex);
  }
}

/* A feature without a result is an error naming its unique_id, not a crash or a guess. */
static void test_missing_result_is_an_error(void **state) {
  (void)state;
  char path[1024];
  snprintf(path, sizeof path, "%s/squad/windows_v1.json", EST_TEST_DATA);
  est_squad_examples *ex;
  assert_int_equal(est_squad_read_examples(path, false, false, &ex), EST_OK);
  snprintf(path, sizeof path, "%s/vocab_uncased.txt", EST_TEST_DATA);
  est_tokenizer *tok;
  assert_int_equal(est_tokenizer_open(&tok, path, true), EST_OK);
  const est_squad_feature_config fc = {.max_seq_length = 64, .doc_stride = 16, .max_query_length = 12};
  const est_squad_prediction_config pc = est_squad_prediction_config_default();
  est_squad_predictor *p;
  assert_int_equal(est_squad_predictor_create(&p, ex, tok, &pc), EST_OK);
  assert_int_equal(est_squad_convert_examples(ex, tok, &fc, est_squad_predictor_add_feature, p), EST_OK);
  float logits[64] = {0};
  assert_int_equal(est_squad_predictor_add_result(p, 1000000000, logits, logits, 64), EST_OK);
  assert_int_not_equal(est_squad_predictor_write(p, test_tmp_path("p.json"), test_tmp_path("n.json"), test_tmp_path("o.json")),
                       EST_OK);
  assert_non_null(strstr(est_error_message(), "no result for unique_id 1000000001"));
  FILE *f = fopen(test_tmp_path("p.json"), "rb");
  assert_null(f); /* nothing half-written */
  est_squad_predictor_free(p);
  est_tokenizer_free(tok);
  est_squad_examples_free(ex);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_predictions_equal_write_predictions),
    cmocka_unit_test(test_missing_result_is_an_error),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
