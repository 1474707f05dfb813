/* `est run_squad` end to end (est/run_squad.h, docs/squad.md §8):
 *   - train.tf_record holds, record for record and byte for byte, what run_squad.py's main()
 *     writes (read_squad_examples, random.Random(12345).shuffle, convert_examples_to_features,
 *     FeatureWriter; tests/data/squad/predictions_golden.json "train_records");
 *   - a short training run lowers the loss, and --do_predict from its checkpoint writes
 *     predictions.json / nbest_predictions.json and eval_results.txt with the official
 *     script's metrics (the same numbers `est squad_eval` prints for those files); with
 *     --version_2_with_negative also null_odds.json;
 *   - --raw_results_file holds one RawResult per eval.tf_record feature, in its order
 *     (make interop feeds them to run_squad.py's write_predictions: test_squad_oracle.py);
 *   - every bad flag or input is a clear error (usage errors exit 2). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/ckpt.h"
#include "est/example.h"
#include "est/tfrecord.h"
#include "test_util.h"

#define VOCAB EST_TEST_DATA "/vocab_uncased.txt"
#define CONFIG EST_TEST_DATA "/run_classifier/bert_config_h32.json"
#define SQUAD EST_TEST_DATA "/squad/"
#define SMALL " --max_seq_length=64 --doc_stride=16 --max_query_length=12 --num_threads=2"

static char *run_ok(const char *fmt, const char *a, const char *b) {
  char *out = NULL;
  int rc = test_run(&out, 1, fmt, a, b);
  if (rc != 0) fail_msg("exit %d:\n%s", rc, out);
  return out;
}

/* The records of `path`, hex-encoded, against the golden's list. */
static void expect_records(const char *path, const json_t *want) {
  est_tfrecord_reader *r;
  assert_int_equal(est_tfrecord_reader_open(&r, path, EST_COMPRESSION_NONE), EST_OK);
  const uint8_t *rec;
  size_t n, k = 0;
  est_status st;
  while ((st = est_tfrecord_reader_next(r, &rec, &n)) == EST_OK) {
    if (k >= json_array_size(want)) fail_msg("%s: more than the reference's %zu records", path, json_array_size(want));
    const char *hex = json_string_value(json_array_get(want, k));
    char *mine = malloc(2 * n + 1);
    for (size_t i = 0; i < n; i++) sprintf(mine + 2 * i, "%02x", rec[i]);
    if (strcmp(mine, hex)) fail_msg("%s: record %zu differs from run_squad.py's", path, k);
    free(mine);
    k++;
  }
  assert_int_equal(st, EST_ERR_OUT_OF_RANGE);
  est_tfrecord_reader_close(r);
  assert_int_equal(k, json_array_size(want));
}

static void test_train_records_equal_the_reference(void **state) {
  (void)state;
  json_error_t err;
  json_t *golden = json_load_file(SQUAD "predictions_golden.json", 0, &err);
  assert_non_null(golden);
  const json_t *runs = json_object_get(golden, "train_records"), *run;
  size_t i;
  assert_true(json_array_size(runs) >= 3);
  json_array_foreach(runs, i, run) {
    char dir[512], flags[512], cmd[2048];
    snprintf(dir, sizeof dir, "%s/train_records_%zu", test_tmpdir, i);
    const long long examples = json_integer_value(json_object_get(run, "num_examples"));
    /* one step is enough: the records are written before training */
    snprintf(flags, sizeof flags,
             " --max_seq_length=%lld --doc_stride=%lld --max_query_length=%lld --train_batch_size=%lld"
             " --num_train_epochs=1 --num_threads=1%s",
             (long long)json_integer_value(json_object_get(run, "max_seq_length")),
             (long long)json_integer_value(json_object_get(run, "doc_stride")),
             (long long)json_integer_value(json_object_get(run, "max_query_length")), examples,
             json_is_true(json_object_get(run, "version_2_with_negative")) ? " --version_2_with_negative" : "");
    snprintf(cmd, sizeof cmd,
             EST_BIN " run_squad --vocab_file=" VOCAB " --bert_config_file=" CONFIG " --do_train --train_file=" SQUAD
                     "%%s --output_dir=%%s%s",
             flags);
    char *out = run_ok(cmd, json_string_value(json_object_get(run, "fixture")), dir);
    char want_line[128];
    snprintf(want_line, sizeof want_line, "Num split examples = %zu", json_array_size(json_object_get(run, "records")));
    assert_non_null(strstr(out, want_line));
    free(out);
    char path[700];
    snprintf(path, sizeof path, "%s/train.tf_record", dir);
    expect_records(path, json_object_get(run, "records"));
  }
  json_decref(golden);
}

/* The loss logged at `step` ("loss = X, step = N"), or NAN. */
/* (not inlined: gcc 12 then misreads the caller's buffer as dangling) */
__attribute__((noinline)) static double logged_loss(const char *text, int step) {
  char key[64];
  snprintf(key, sizeof key, ", step = %d", step);
  const char *at = strstr(text, key);
  if (!at) return NAN;
  size_t back = (size_t)(at - text);
  while (back > 0 && strncmp(text + back, "loss = ", 7)) back--;
  return strtod(text + back + 7, NULL);
}

/* The integer logged after `key`, or -1. (not inlined: as logged_loss) */
__attribute__((noinline)) static long long logged_number(const char *text, const char *key) {
  const char *at = strstr(text, key);
  return at ? strtoll(at + strlen(key), NULL, 10) : -1;
}

/* --do_predict on SQUAD/file from the checkpoint in dir; the log. */
static char *predict_ok(const char *file, const char *dir) {
  return run_ok(EST_BIN " run_squad --vocab_file=" VOCAB " --bert_config_file=" CONFIG
                        " --do_predict --predict_file=" SQUAD "%s --output_dir=%s" SMALL,
                file, dir);
}

static void test_train_then_predict(void **state) {
  (void)state;
  char *dir = strdup(test_tmp_path("v1"));
  char *out = run_ok(EST_BIN " run_squad --vocab_file=" VOCAB " --bert_config_file=" CONFIG
                             " --do_train --train_file=" SQUAD "%s --output_dir=%s" SMALL
                             " --train_batch_size=4 --num_train_epochs=20 --learning_rate=3e-3"
                             " --log_step_count_steps=20",
                     "windows_v1.json", dir);
  const double first = logged_loss(out, 0), later = logged_loss(out, 40);
  if (!(later < 0.7 * first)) fail_msg("the loss went from %g to %g:\n%s", first, later, out);
  assert_non_null(strstr(out, "***** Running training *****"));
  free(out);
  /* predict from the checkpoint just written, in a second command */
  out = predict_ok("windows_v1.json", dir);
  assert_non_null(strstr(out, "Restoring parameters from"));
  /* prediction's progress: a line after the first batch (predict_batch_size 8) and one at
   * the end, each with the rate and an ETA (more in between on a slow machine) */
  const long long features = logged_number(out, "Num split examples = ");
  assert_true(features > 8);
  char want[160];
  snprintf(want, sizeof want, "Predicting feature 8/%lld (%.1f%%), ", features, 800.0 / (double)features);
  if (!strstr(out, want) || test_count_lines_with(out, want, " features/sec, ETA ") != 1)
    fail_msg("wanted one '%s... features/sec, ETA' in:\n%s", want, out);
  snprintf(want, sizeof want, "Predicting feature %lld/%lld (100.0%%), ", features, features);
  if (test_count_lines_with(out, want, " features/sec, ETA 0s") != 1) fail_msg("wanted '%s' in:\n%s", want, out);
  free(out);
  json_error_t err;
  char path[700];
  snprintf(path, sizeof path, "%s/predictions.json", dir);
  json_t *pred = json_load_file(path, 0, &err);
  assert_non_null(pred);
  assert_int_equal(json_object_size(pred), 12); /* every question of windows_v1.json */
  json_decref(pred);
  snprintf(path, sizeof path, "%s/null_odds.json", dir);
  FILE *f = fopen(path, "rb");
  assert_null(f); /* version 1: none */
  /* eval_results.txt holds the metrics est squad_eval gives for the same files */
  snprintf(path, sizeof path, "%s/eval_results.txt", dir);
  char *results = test_read_file(path, NULL);
  char *eval = NULL;
  assert_int_equal(test_run(&eval, 0, EST_BIN " squad_eval --data_file=" SQUAD "windows_v1.json --pred_file=%s/predictions.json",
                            dir), 0);
  json_t *metrics = json_loads(eval, 0, &err);
  assert_non_null(metrics);
  /* the values as numbers: repr() round-trips, so they are the same doubles */
  double em = NAN, f1 = NAN;
  for (char *line = strtok(results, "\n"); line; line = strtok(NULL, "\n")) {
    sscanf(line, "exact_match = %lf", &em);
    sscanf(line, "f1 = %lf", &f1);
  }
  assert_true(em == json_real_value(json_object_get(metrics, "exact_match")));
  assert_true(f1 == json_real_value(json_object_get(metrics, "f1")));
  json_decref(metrics);
  free(eval), free(results);
  /* a 1.1 file with answers but no "version" (evaluate-v1.1.py's KeyError): the predictions
   * are written and the run succeeds, without eval_results.txt */
  snprintf(path, sizeof path, "%s/eval_results.txt", dir);
  remove(path);
  out = predict_ok("allennlp_squad.json", dir);
  assert_non_null(strstr(out, "has no \"version\", which evaluate-v1.1.py reads: no eval_results.txt"));
  free(out);
  assert_null(fopen(path, "rb"));
  snprintf(path, sizeof path, "%s/predictions.json", dir);
  pred = json_load_file(path, 0, &err);
  assert_int_equal(json_object_size(pred), 5); /* allennlp_squad.json's questions */
  json_decref(pred);
  free(dir);
}

/* The unique_ids of a file's records, in file order; their count in *n. With logits, each
 * record must also hold a RawResult's two logit rows (max_seq_length 64 floats, finite). */
static int64_t *record_ids(const char *path, bool logits, size_t *n) {
  est_tfrecord_reader *r;
  if (est_tfrecord_reader_open(&r, path, EST_COMPRESSION_NONE) != EST_OK) fail_msg("%s: cannot open", path);
  int64_t *ids = NULL;
  const uint8_t *rec;
  size_t size;
  est_status st;
  for (*n = 0; (st = est_tfrecord_reader_next(r, &rec, &size)) == EST_OK; ++*n) {
    est_example ex;
    est_example_init(&ex);
    assert_int_equal(est_example_parse(&ex, rec, size), EST_OK);
    const est_feature *id = est_example_find(&ex, "unique_ids");
    if (!id || id->kind != EST_FEATURE_INT64 || id->count != 1) fail_msg("%s: record %zu has no unique_ids", path, *n);
    ids = realloc(ids, (*n + 1) * sizeof *ids);
    ids[*n] = id->int64s[0];
    if (logits) {
      for (int k = 0; k < 2; k++) {
        const est_feature *l = est_example_find(&ex, k ? "end_logits" : "start_logits");
        if (!l || l->kind != EST_FEATURE_FLOAT || l->count != 64) fail_msg("%s: record %zu: bad logits", path, *n);
        for (size_t i = 0; i < l->count; i++) assert_true(isfinite(l->floats[i]));
      }
    }
    est_example_clear(&ex);
  }
  assert_int_equal(st, EST_ERR_OUT_OF_RANGE);
  est_tfrecord_reader_close(r);
  return ids;
}

static void test_version_2_predicts_null_odds(void **state) {
  (void)state;
  char *dir = strdup(test_tmp_path("v2"));
  char raw[700];
  snprintf(raw, sizeof raw, "%s/raw_results.tf_record", test_tmp_path(""));
  char *out = run_ok(EST_BIN " run_squad --vocab_file=" VOCAB " --bert_config_file=" CONFIG
                             " --version_2_with_negative --do_train --do_predict --train_file=" SQUAD
                             "windows_v2.json --predict_file=" SQUAD "windows_v2.json --output_dir=%s" SMALL
                             " --train_batch_size=4 --num_train_epochs=2 --null_score_diff_threshold=-0.5"
                             " --raw_results_file=%s",
                     dir, raw);
  free(out);
  /* one raw result per feature of eval.tf_record, in its order */
  char records[700];
  snprintf(records, sizeof records, "%s/eval.tf_record", dir);
  size_t num_features, num_raw;
  int64_t *feature_ids = record_ids(records, false, &num_features);
  int64_t *raw_ids = record_ids(raw, true, &num_raw);
  assert_true(num_features > 12); /* windows: more features than questions */
  assert_int_equal(num_raw, num_features);
  for (size_t i = 0; i < num_raw; i++) assert_int_equal(raw_ids[i], feature_ids[i]);
  assert_int_equal(feature_ids[0], 1000000000);
  free(feature_ids), free(raw_ids);
  json_error_t err;
  char path[700];
  const char *files[] = {"predictions.json", "nbest_predictions.json", "null_odds.json", "eval_results.txt"};
  for (size_t i = 0; i < 3; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, files[i]);
    json_t *j = json_load_file(path, 0, &err);
    if (!j) fail_msg("%s: %s", path, err.text);
    json_decref(j);
  }
  snprintf(path, sizeof path, "%s/eval_results.txt", dir);
  char *results = test_read_file(path, NULL);
  assert_non_null(strstr(results, "HasAns_exact = "));
  assert_non_null(strstr(results, "NoAns_total = "));
  assert_non_null(strstr(results, "best_f1_thresh = "));
  free(results), free(dir);
}

/* Usage errors exit 2 before any work, with the reference's words where it has them. */
static void test_bad_flags(void **state) {
  (void)state;
  const struct {
    const char *flags, *message;
  } cases[] = {
    {"", "At least one of `do_train` or `do_predict` must be True."},
    {" --do_train", "If `do_train` is True, then `train_file` must be specified."},
    {" --do_predict", "If `do_predict` is True, then `predict_file` must be specified."},
    {" --do_predict --predict_file=" SQUAD "windows_v1.json --max_seq_length=40 --max_query_length=37",
     "The max_seq_length (40) must be greater than max_query_length (37) + 3"},
    {" --do_predict --predict_file=" SQUAD "windows_v1.json --max_seq_length=1000",
     "Cannot use sequence length 1000"},
    {" --do_predict --predict_file=" SQUAD "no_such.json", "no_such.json"},
    {" --do_predict --predict_file=" SQUAD "windows_v1.json --doc_stride=0", "--doc_stride=0"},
    {" --do_predict --predict_file=" SQUAD "windows_v1.json --n_best_size=0", "--n_best_size=0"},
    {" --do_eval", "unknown flag"},
    {" --do_train --train_file=" SQUAD "windows_v1.json --raw_results_file=raw.tf_record",
     "--raw_results_file=raw.tf_record: the raw results are do_predict's; add --do_predict"},
    {" --do_train --train_file=" SQUAD "windows_v1.json --num_train_epochs=0", "--num_train_epochs=0"},
    {" --do_train --train_file=" SQUAD "windows_v1.json --num_train_steps=-1", "--num_train_steps=-1: must be > 0"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char *out = NULL;
    int rc = test_run(&out, 1, EST_BIN " run_squad --vocab_file=" VOCAB " --bert_config_file=" CONFIG
                                       " --output_dir=%s%s",
                      test_tmp_path("bad"), cases[i].flags);
    if (rc != 2 || !strstr(out, cases[i].message))
      fail_msg("case %zu (%s): exit %d, expected 2 and '%s':\n%s", i, cases[i].flags, rc, cases[i].message, out);
    free(out);
  }
}

/* --num_train_steps (est's own): that many steps, whatever --num_train_epochs would give (12
 * questions / batch 4 * 1 epoch = 3 steps; with it 5, past an epoch of the repeated input),
 * the warmup a proportion of it; --help says so. */
static void test_num_train_steps(void **state) {
  (void)state;
  char *help = NULL;
  assert_int_equal(test_run(&help, 0, EST_BIN " run_squad --help"), 0);
  assert_non_null(strstr(help, "  --num_train_steps: [est] Train this many steps instead of the count "
                               "--num_train_epochs gives"));
  free(help);
  const char *const runs[][2] = {{"epochs", ""}, {"steps", " --num_train_steps=5 --num_train_epochs=0"}};
  const char *const want[] = {"  Num steps = 3\n", "  Num steps = 5\n"};
  const char *const last[] = {"model.ckpt-3", "model.ckpt-5"};
  for (int i = 0; i < 2; i++) {
    char *dir = strdup(test_tmp_path(runs[i][0]));
    char *out = run_ok(EST_BIN " run_squad --vocab_file=" VOCAB " --bert_config_file=" CONFIG
                               " --do_train --train_file=" SQUAD "windows_v1.json --output_dir=%s" SMALL
                               " --train_batch_size=4 --num_train_epochs=1%s",
                       dir, runs[i][1]);
    if (!strstr(out, want[i])) fail_msg("wanted '%s' in:\n%s", want[i], out);
    free(out);
    char prefix[1024];
    assert_int_equal(est_ckpt_latest(dir, prefix, sizeof prefix), EST_OK);
    if (!strstr(prefix, last[i])) fail_msg("%s: the last checkpoint is %s, not %s", runs[i][0], prefix, last[i]);
    free(dir);
  }
}

/* Bad data fails before training with the file and the question named; nothing trained. */
static void test_bad_input_files(void **state) {
  (void)state;
  const struct {
    const char *file, *message;
  } cases[] = {
    {"err_two_answers.json", "For training, each question should have exactly 1 answer."},
    {"err_offset_past_end.json", "answer_start"},
    {"eval_v1_preds.json", "eval_v1_preds.json"}, /* JSON, but not SQuAD's */
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char *out = NULL;
    char *dir = strdup(test_tmp_path("badinput"));
    int rc = test_run(&out, 1, EST_BIN " run_squad --vocab_file=" VOCAB " --bert_config_file=" CONFIG
                                       " --do_train --train_file=" SQUAD "%s --output_dir=%s" SMALL,
                      cases[i].file, dir);
    if (rc == 0 || !strstr(out, cases[i].message))
      fail_msg("%s: exit %d, expected an error with '%s':\n%s", cases[i].file, rc, cases[i].message, out);
    char path[700];
    snprintf(path, sizeof path, "%s/model.ckpt-0.index", dir);
    FILE *f = fopen(path, "rb");
    assert_null(f);
    free(out), free(dir);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_train_records_equal_the_reference),
    cmocka_unit_test(test_train_then_predict),
    cmocka_unit_test(test_version_2_predicts_null_odds),
    cmocka_unit_test(test_bad_flags),
    cmocka_unit_test(test_num_train_steps),
    cmocka_unit_test(test_bad_input_files),
  };
  return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
