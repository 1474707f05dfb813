/* `est run_squad` end to end (src/bert/run_squad.c, tools/cmd_run_squad.c) on the tiny BERT
 * of tests/data/run_classifier (L1 H32) and the SQuAD fixtures of tests/data/squad:
 *   - a short training run lowers the loss and logs run_squad.py's lines;
 *   - train.tf_record equals run_squad.py main()'s (shuffled with random.Random(12345));
 *   - --do_predict from its checkpoint writes predictions.json / nbest_predictions.json
 *     (one entry per question, n-best of at most --n_best_size) and eval_results.txt with
 *     the v1.1 metrics; with --version_2_with_negative also null_odds.json and the 2.0 keys;
 *   - every bad flag and input gives a clear error: exit 2 for usage errors (before any
 *     output), 1 for a malformed SQuAD file (before any output too). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "est/file.h"
#include "test_util.h"

#define UNCASED EST_TEST_DATA "/vocab_uncased.txt"
#define SMALL_CONFIG EST_TEST_DATA "/run_classifier/bert_config_h32.json"
#define SQUAD EST_TEST_DATA "/squad/"
#define BASE EST_BIN " run_squad --vocab_file=" UNCASED " --bert_config_file=" SMALL_CONFIG \
                     " --max_seq_length=64 --doc_stride=16 --max_query_length=12 --num_threads=2"

/* The "loss = X, step = N" lines of a training log, in order. */
static size_t logged_losses(const char *log, double *losses, size_t cap) {
  size_t n = 0;
  for (const char *p = log; n < cap && (p = strstr(p, "loss = ")); p++) {
    double v;
    long step;
    if (sscanf(p, "loss = %lf, step = %ld", &v, &step) == 2) losses[n++] = v;
  }
  return n;
}

static void test_train_then_predict(void **state) {
  (void)state;
  char out[512];
  snprintf(out, sizeof out, "%s/v1", test_tmpdir);
  /* windows_v1.json: 12 training questions; 20 epochs of batch 4 = 60 steps */
  char *log = test_run_ok(BASE " --output_dir=%s --do_train --train_file=" SQUAD "windows_v1.json"
                               " --train_batch_size=4 --num_train_epochs=20 --learning_rate=1e-3"
                               " --log_step_count_steps=5", out);
  assert_non_null(strstr(log, "***** Running training *****"));
  assert_non_null(strstr(log, "  Num orig examples = 12"));
  assert_non_null(strstr(log, "  Num steps = 60"));
  double losses[32];
  const size_t n = logged_losses(log, losses, 32);
  assert_true(n >= 10);
  double late = 0;
  for (size_t i = n / 2; i < n; i++) late += losses[i];
  late /= (double)(n - n / 2);
  if (!(late < 0.75 * losses[0])) fail_msg("loss %g at step 0, %g on average in the second half", losses[0], late);
  free(log);
  char *text = test_read_in(out, "checkpoint");
  assert_non_null(strstr(text, "model.ckpt-60"));
  free(text);

  /* predict from that checkpoint on a dev file with answers (eval_v1.json: 19 questions) */
  log = test_run_ok(BASE " --output_dir=%s --do_predict --predict_file=" SQUAD "eval_v1.json --n_best_size=3", out);
  assert_non_null(strstr(log, "***** Running predictions *****"));
  assert_non_null(strstr(log, "Restoring parameters from"));
  free(log);
  json_t *pred = json_load_file(test_tmp_path("v1/predictions.json"), 0, NULL);
  json_t *nbest = json_load_file(test_tmp_path("v1/nbest_predictions.json"), 0, NULL);
  assert_non_null(pred);
  assert_non_null(nbest);
  assert_int_equal(json_object_size(pred), json_object_size(nbest));
  assert_true(json_object_size(pred) >= 15);
  const char *id;
  json_t *list;
  json_object_foreach(nbest, id, list) {
    assert_true(json_array_size(list) >= 1 && json_array_size(list) <= 3);
    /* predictions.json holds the first n-best text (1.1) */
    assert_string_equal(json_string_value(json_object_get(pred, id)),
                        json_string_value(json_object_get(json_array_get(list, 0), "text")));
  }
  json_decref(pred);
  json_decref(nbest);
  text = test_read_in(out, "eval_results.txt");
  assert_non_null(strstr(text, "exact_match = "));
  assert_non_null(strstr(text, "\nf1 = "));
  free(text);
  struct stat st;
  assert_int_not_equal(stat(test_tmp_path("v1/null_odds.json"), &st), 0);

  /* 2.0 from the same checkpoint: null_odds.json and the 2.0 metrics */
  log = test_run_ok(BASE " --output_dir=%s --do_predict --predict_file=" SQUAD "eval_v2.json"
                         " --version_2_with_negative --null_score_diff_threshold=1.5", out);
  free(log);
  json_t *odds = json_load_file(test_tmp_path("v1/null_odds.json"), 0, NULL);
  assert_non_null(odds);
  assert_true(json_object_size(odds) >= 20);
  json_decref(odds);
  text = test_read_in(out, "eval_results.txt");
  assert_non_null(strstr(text, "exact = "));
  assert_non_null(strstr(text, "HasAns_total = "));
  assert_non_null(strstr(text, "best_f1_thresh = "));
  free(text);
}

/* train.tf_record equals run_squad.py main()'s for the same file and flags: the examples
 * shuffled with random.Random(12345), then converted (tests/reference/
 * squad_train_records_reference.py made the expected file). */
static void test_train_records_are_the_scripts(void **state) {
  (void)state;
  char out[512];
  snprintf(out, sizeof out, "%s/v2", test_tmpdir);
  char *log = test_run_ok(BASE " --output_dir=%s --do_train --train_file=" SQUAD "windows_v2.json"
                               " --version_2_with_negative --train_batch_size=4 --num_train_epochs=1", out);
  assert_non_null(strstr(log, "  Num orig examples = 14"));
  assert_non_null(strstr(log, "  Num split examples = 38"));
  free(log);
  size_t got_size, want_size;
  char *got = test_read_file(test_tmp_path("v2/train.tf_record"), &got_size);
  char *want = test_read_file(SQUAD "windows_v2_train_64_16_12.tf_record", &want_size);
  assert_non_null(got);
  assert_non_null(want);
  assert_int_equal(got_size, want_size);
  assert_memory_equal(got, want, want_size);
  free(got);
  free(want);
}

/* Usage errors exit 2 with the reference's message (or est's, naming the flag) and write
 * nothing; a malformed SQuAD file exits 1 naming the file, the question and the field. */
static void test_bad_flags_and_inputs(void **state) {
  (void)state;
  const struct {
    const char *args, *message;
    int rc;
  } cases[] = {
    {" --do_train", "If `do_train` is True, then `train_file` must be specified.", 2},
    {" --do_predict", "If `do_predict` is True, then `predict_file` must be specified.", 2},
    {"", "At least one of `do_train` or `do_predict` must be True.", 2},
    {" --do_eval", "do_eval", 2},
    {" --do_predict --predict_file=" SQUAD "eval_v1.json --max_query_length=61",
     "The max_seq_length (64) must be greater than max_query_length (61) + 3", 2},
    {" --do_predict --predict_file=" SQUAD "eval_v1.json --doc_stride=0", "--doc_stride=0: must be at least 1", 2},
    {" --do_predict --predict_file=" SQUAD "eval_v1.json --n_best_size=-1", "--n_best_size=-1", 2},
    {" --do_predict --predict_file=" SQUAD "nope.json", "--predict_file=", 2},
    {" --do_train --train_file=" SQUAD "windows_v1.json --num_train_epochs=0", "--num_train_epochs=0", 2},
    {" --do_predict --predict_file=" SQUAD "eval_v1.json --max_seq_length=129 --max_query_length=12",
     "max_position_embeddings", 2},
    {" --do_train --train_file=" SQUAD "err_two_answers.json",
     "err_two_answers.json: data[0].paragraphs[0].qas[0]", 1},
    {" --do_train --train_file=" SQUAD "allennlp_squad.json",
     "For training, each question should have exactly 1 answer.", 1},
    {" --do_train --train_file=" SQUAD "windows_v1.json --train_batch_size=64",
     "gives 0 training steps; need at least 1", 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char out[512], *log = NULL;
    snprintf(out, sizeof out, "%s/bad%zu", test_tmpdir, i);
    const int rc = test_run(&log, 1, BASE " --output_dir=%s%s", out, cases[i].args);
    if (rc != cases[i].rc || !strstr(log, cases[i].message))
      fail_msg("case %zu (%s): exit %d, expected %d with \"%s\":\n%s", i, cases[i].args, rc, cases[i].rc,
               cases[i].message, log);
    free(log);
    struct stat st;
    char path[1024];
    snprintf(path, sizeof path, "%s/train.tf_record", out);
    assert_int_not_equal(stat(path, &st), 0);
  }
  /* --vocab_file is required */
  char *log = NULL;
  assert_int_equal(test_run(&log, 1, EST_BIN " run_squad --bert_config_file=" SMALL_CONFIG " --output_dir=%s/x"
                                     " --do_predict --predict_file=" SQUAD "eval_v1.json", test_tmpdir), 2);
  assert_non_null(strstr(log, "vocab_file"));
  free(log);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_train_then_predict),
    cmocka_unit_test(test_train_records_are_the_scripts),
    cmocka_unit_test(test_bad_flags_and_inputs),
  };
  return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
