/* write_predictions (src/bert/squad_predictions.c) against run_squad.py's own, unchanged, on
 * fixed logits: tests/data/squad/predictions_golden.json (tests/reference/
 * squad_predictions_reference.py) holds, per run (fixture, 1.1 or 2.0, vocab and case,
 * window settings, n_best_size, max_answer_length, threshold), the three files the script
 * wrote; est must write the same bytes. The run where the script fails (2.0, every n-best
 * entry null) gets "" and null odds 1000000.0 from est. Bad calls give errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/squad.h"
#include "test_util.h"

/* tests/reference/squad_predictions_reference.py's logit_of: k / 128 - 8, exact in float32. */
static float logit_of(int64_t unique_id, int position, int which) {
  const int64_t h = (unique_id * 1000003 + (int64_t)position * 7919 + which * 104729 + 12345) % 8191;
  return (float)(h % 2048) / 128.0f - 8.0f;
}

typedef struct run_files {
  char pred[512], nbest[512], odds[512];
} run_files;

/* Reads, converts and predicts one golden run's input into tmp files. */
static est_status predict_run(json_t *run, run_files *out) {
  const char *fixture = json_string_value(json_object_get(run, "fixture"));
  const char *vocab = json_string_value(json_object_get(run, "vocab"));
  const bool v2 = json_is_true(json_object_get(run, "version_2_with_negative"));
  const bool lower = json_is_true(json_object_get(run, "do_lower_case"));
  est_squad_feature_config fc = est_squad_feature_config_default();
  fc.max_seq_length = (int)json_integer_value(json_object_get(run, "max_seq_length"));
  fc.doc_stride = (int)json_integer_value(json_object_get(run, "doc_stride"));
  fc.max_query_length = (int)json_integer_value(json_object_get(run, "max_query_length"));
  est_squad_prediction_config pc = est_squad_prediction_config_default();
  pc.n_best_size = (int)json_integer_value(json_object_get(run, "n_best_size"));
  pc.max_answer_length = (int)json_integer_value(json_object_get(run, "max_answer_length"));
  pc.version_2_with_negative = v2;
  pc.null_score_diff_threshold = json_number_value(json_object_get(run, "null_score_diff_threshold"));
  char path[512];
  snprintf(path, sizeof path, "%s/squad/%s", EST_TEST_DATA, fixture);
  est_squad_examples *ex;
  assert_int_equal(est_squad_read_examples(path, false, v2, &ex), EST_OK);
  snprintf(path, sizeof path, "%s/%s", EST_TEST_DATA, vocab);
  est_tokenizer *tok;
  assert_int_equal(est_tokenizer_open(&tok, path, lower), EST_OK);
  est_squad_predictions *p;
  assert_int_equal(est_squad_predictions_create(&p, ex, tok, fc.max_seq_length, &pc), EST_OK);
  assert_int_equal(est_squad_convert_examples(ex, tok, &fc, est_squad_predictions_add_feature, p), EST_OK);
  float *start = malloc((size_t)fc.max_seq_length * sizeof(float)), *end = malloc((size_t)fc.max_seq_length * sizeof(float));
  for (size_t i = 0; i < est_squad_predictions_num_features(p); i++) {
    const int64_t uid = 1000000000 + (int64_t)i;
    for (int s = 0; s < fc.max_seq_length; s++) start[s] = logit_of(uid, s, 0), end[s] = logit_of(uid, s, 1);
    assert_int_equal(est_squad_predictions_add_result(p, uid, start, end), EST_OK);
  }
  free(start);
  free(end);
  snprintf(out->pred, sizeof out->pred, "%s", test_tmp_path("predictions.json"));
  snprintf(out->nbest, sizeof out->nbest, "%s", test_tmp_path("nbest_predictions.json"));
  snprintf(out->odds, sizeof out->odds, "%s", test_tmp_path("null_odds.json"));
  remove(out->odds);
  est_status st = est_squad_predictions_write(p, out->pred, out->nbest, out->odds);
  est_squad_predictions_free(p);
  est_tokenizer_free(tok);
  est_squad_examples_free(ex);
  return st;
}

static void expect_file(const char *path, const char *want, const char *what, size_t run) {
  char *got = test_read_file(path, NULL);
  assert_non_null(got);
  if (strcmp(got, want)) {
    size_t at = 0;
    while (got[at] && got[at] == want[at]) at++;
    fail_msg("run %zu %s differs at byte %zu: est \"%.80s\", script \"%.80s\"", run, what, at, got + at, want + at);
  }
  free(got);
}

static void test_equal_to_write_predictions(void **state) {
  (void)state;
  char path[512];
  snprintf(path, sizeof path, "%s/squad/predictions_golden.json", EST_TEST_DATA);
  json_error_t jerr;
  json_t *runs = json_load_file(path, 0, &jerr);
  assert_non_null(runs);
  size_t compared = 0, crashed = 0;
  for (size_t r = 0; r < json_array_size(runs); r++) {
    json_t *run = json_array_get(runs, r);
    run_files f;
    if (predict_run(run, &f) != EST_OK) fail_msg("run %zu: %s", r, est_error_message());
    if (json_object_get(run, "error")) {
      /* the script's AttributeError: some question has only null entries; est answers "" */
      char *odds = test_read_file(f.odds, NULL);
      assert_non_null(strstr(odds, ": 1000000.0"));
      free(odds);
      crashed++;
      continue;
    }
    expect_file(f.pred, json_string_value(json_object_get(run, "predictions")), "predictions.json", r);
    expect_file(f.nbest, json_string_value(json_object_get(run, "nbest")), "nbest_predictions.json", r);
    if (json_object_get(run, "null_odds")) expect_file(f.odds, json_string_value(json_object_get(run, "null_odds")),
                                                       "null_odds.json", r);
    compared++;
  }
  json_decref(runs);
  assert_int_equal(compared, 20);
  assert_int_equal(crashed, 1);
}

static void test_bad_calls(void **state) {
  (void)state;
  char path[512];
  snprintf(path, sizeof path, "%s/squad/allennlp_squad.json", EST_TEST_DATA);
  est_squad_examples *ex;
  assert_int_equal(est_squad_read_examples(path, false, false, &ex), EST_OK);
  snprintf(path, sizeof path, "%s/vocab_uncased.txt", EST_TEST_DATA);
  est_tokenizer *tok;
  assert_int_equal(est_tokenizer_open(&tok, path, true), EST_OK);
  est_squad_prediction_config pc = est_squad_prediction_config_default();
  est_squad_predictions *p;
  pc.n_best_size = -1;
  assert_int_equal(est_squad_predictions_create(&p, ex, tok, 64, &pc), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "--n_best_size=-1"));
  pc.n_best_size = 20;
  assert_int_equal(est_squad_predictions_create(&p, ex, tok, 64, &pc), EST_OK);
  est_squad_feature_config fc = est_squad_feature_config_default();
  fc.max_seq_length = 64, fc.doc_stride = 16, fc.max_query_length = 12;
  assert_int_equal(est_squad_convert_examples(ex, tok, &fc, est_squad_predictions_add_feature, p), EST_OK);
  float logits[64] = {0};
  assert_int_equal(est_squad_predictions_add_result(p, 999, logits, logits), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "unique_id 999"));
  /* no result for any feature: the first one is named with its question */
  assert_int_equal(est_squad_predictions_write(p, test_tmp_path("p.json"), test_tmp_path("n.json"), NULL),
                   EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "no result for feature unique_id 1000000000 (question"));
  est_squad_predictions_free(p);
  est_tokenizer_free(tok);
  est_squad_examples_free(ex);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_equal_to_write_predictions),
    cmocka_unit_test(test_bad_calls),
  };
  return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
