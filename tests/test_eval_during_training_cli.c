/* `est run_classifier --do_train --do_eval --eval_every_steps=N` with early stopping and
 * --export_best (docs/hooks.md §7), on the mini CoLA fixtures (a model that learns fast at
 * learning rate 1e-2, so its eval_loss falls then rises):
 * - eval/results.txt has an evaluation every 2 steps; training ends at the first evaluated
 *   step where eval_loss has not decreased for --early_stopping_patience_steps steps (TF's
 *   stop_if_no_decrease_hook, computed here from the file itself), and eval_results.txt is
 *   that last evaluation;
 * - export/best holds one version for each evaluation that beat every earlier one, each a
 *   servable est loads, with its evaluation in eval_result.txt;
 * - the flags that need evaluation during training are usage errors (exit 2) without it;
 *   run_squad and run_pretraining refuse the ones they cannot do;
 * - without these flags (or with --eval_every_steps=0) a run writes exactly the same
 *   checkpoint and eval_results.txt, and no eval/results.txt or export/. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "est/est.h"
#include "test_util.h"
#include "preempt_util.h"

#define D EST_TEST_DATA
#define ARGS                                                                                              \
  " run_classifier --task_name=cola --do_train --do_eval --data_dir=" D "/glue_mini/CoLA"                  \
  " --vocab_file=" D "/vocab_uncased.txt --bert_config_file=" D "/run_classifier/bert_config_h32.json"     \
  " --max_seq_length=32 --train_batch_size=4 --eval_batch_size=4 --num_threads=2 --num_train_epochs=4"     \
  " --learning_rate=1e-2 --save_checkpoints_steps=4"
enum { PATIENCE = 2 };

static void expect_usage_error(const char *args, const char *needle) {
  char *out = NULL;
  int rc = test_run(&out, 1, EST_BIN "%s --output_dir=%s", args, test_tmp_path("never"));
  if (rc != 2 || !strstr(out, needle)) fail_msg("exit %d, want 2 with '%s', for: %s\noutput:\n%s", rc, needle, args, out);
  assert_false(est_file_exists(test_tmp_path("never")));
  free(out);
}

static void test_usage_errors(void **state) {
  (void)state;
  expect_usage_error(ARGS " --export_best", "--export_best acts on evaluations during training");
  expect_usage_error(ARGS " --early_stopping_metric=eval_loss --early_stopping_patience_steps=3",
                     "--early_stopping_metric acts on evaluations during training");
  expect_usage_error(ARGS " --eval_every_steps=2 --early_stopping_metric=eval_loss",
                     "--early_stopping_metric and --early_stopping_patience_steps go together");
  expect_usage_error(ARGS " --eval_every_steps=2 --early_stopping_patience_steps=3",
                     "--early_stopping_metric and --early_stopping_patience_steps go together");
  expect_usage_error(ARGS " --eval_every_steps=-1", "--eval_every_steps=-1: must be >= 0");
  expect_usage_error(ARGS " --eval_every_steps=2 --export_best --exports_to_keep=-1", "--exports_to_keep=-1");
  expect_usage_error(" run_classifier --task_name=cola --do_train --data_dir=" D "/glue_mini/CoLA --vocab_file=" D
                     "/vocab_uncased.txt --bert_config_file=" D "/run_classifier/bert_config_h32.json --eval_every_steps=2",
                     "it needs both --do_train and --do_eval");
  expect_usage_error(" run_squad --do_train --eval_every_steps=2 --vocab_file=x --bert_config_file=x",
                     "unknown flag --eval_every_steps");
  expect_usage_error(" run_squad --do_train --export_best --vocab_file=x --bert_config_file=x",
                     "unknown flag --export_best");
  expect_usage_error(" run_pretraining --do_train --do_eval --eval_every_steps=2 --export_best --input_file=x "
                     "--bert_config_file=x", "unknown flag --export_best");
}

/* The (global_step, eval_loss) of each line of eval/results.txt. */
static size_t read_results(const char *dir, int64_t *steps, double *losses, size_t cap) {
  char *text = test_read_in(dir, "eval/results.txt");
  size_t n = 0;
  for (char *line = strtok(text, "\n"); line && n < cap; line = strtok(NULL, "\n")) {
    const char *gs = strstr(line, "global_step = "), *el = strstr(line, "eval_loss = ");
    assert_non_null(gs), assert_non_null(el);
    steps[n] = strtoll(gs + 14, NULL, 10), losses[n++] = strtod(el + 12, NULL);
  }
  free(text);
  return n;
}

static void test_early_stopping_and_best_export(void **state) {
  (void)state;
  const char *dir = test_tmp_path("run");
  char *log = NULL;
  int status = run_est(NULL, &log, ARGS " --eval_every_steps=2 --early_stopping_metric=eval_loss "
                       "--early_stopping_patience_steps=%d --export_best --exports_to_keep=0 --output_dir=%s",
                       PATIENCE, dir);
  if (exit_code(status) != 0) fail_msg("exit %d:\n%s", exit_code(status), log);
  free(log);
  int64_t steps[64];
  double losses[64];
  size_t n = read_results(dir, steps, losses, 64);
  assert_true(n >= 2);
  /* every 2 steps; TF's rule decides where it ended; the improvements were exported */
  size_t best = 0, stop_at = n - 1;
  char want_exports[512] = "", got_exports[512] = "";
  for (size_t i = 0; i < n; i++) {
    assert_int_equal(steps[i], 2 * (int64_t)(i + 1));
    if (i == 0 || losses[i] < losses[best]) {
      best = i;
      size_t len = strlen(want_exports);
      snprintf(want_exports + len, sizeof want_exports - len, "%lld,", (long long)steps[i]);
    }
    if (steps[i] - steps[best] >= PATIENCE && stop_at == n - 1) stop_at = i;
  }
  assert_int_equal(stop_at, n - 1);   /* it stopped at the first step the rule held */
  assert_true(steps[n - 1] - steps[best] >= PATIENCE);   /* and the run ended early because of it */
  char *results = test_read_in(dir, "eval_results.txt");
  char want[64];
  snprintf(want, sizeof want, "global_step = %lld\n", (long long)steps[n - 1]);
  assert_non_null(strstr(results, want));
  free(results);
  char base[1024];
  snprintf(base, sizeof base, "%s/export/best", dir);
  int64_t below = INT64_MAX, version;
  char vdir[4096];
  while (est_export_resolve_below(base, below, vdir, sizeof vdir, &version) == EST_OK) {   /* newest first */
    est_eval_result r;
    assert_int_equal(est_exporter_read_eval_result(vdir, &r), EST_OK);
    char prev[512];
    snprintf(prev, sizeof prev, "%lld,%s", (long long)r.global_step, got_exports);
    snprintf(got_exports, sizeof got_exports, "%s", prev);
    est_eval_result_clear(&r);
    est_servable *s;
    assert_int_equal(est_servable_load(&s, vdir, 1), EST_OK);
    est_servable_free(s);
    below = version;
  }
  assert_string_equal(got_exports, want_exports);
}

static void test_absent_flags_change_nothing(void **state) {
  (void)state;
  const char *dirs[2] = {test_tmp_path("plain"), test_tmp_path("zero")};
  const char *extra[2] = {"", " --eval_every_steps=0 --exports_to_keep=7"};
  uint8_t *tensors[2];
  size_t sizes[2];
  char *results[2];
  for (int i = 0; i < 2; i++) {
    char *log = NULL;
    int status = run_est(NULL, &log, ARGS "%s --output_dir=%s", extra[i], dirs[i]);
    if (exit_code(status) != 0) fail_msg("exit %d:\n%s", exit_code(status), log);
    free(log);
    assert_false(exists_in(dirs[i], "eval/results.txt"));
    assert_false(exists_in(dirs[i], "export"));
    char prefix[1024];
    latest(dirs[i], prefix, sizeof prefix);
    int finite;
    tensors[i] = all_tensors(prefix, &sizes[i], &finite);
    results[i] = test_read_in(dirs[i], "eval_results.txt");
  }
  assert_int_equal(sizes[0], sizes[1]);
  assert_memory_equal(tensors[0], tensors[1], sizes[0]);
  assert_string_equal(results[0], results[1]);
  for (int i = 0; i < 2; i++) free(tensors[i]), free(results[i]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_usage_errors),
      cmocka_unit_test(test_early_stopping_and_best_export),
      cmocka_unit_test(test_absent_flags_change_nothing),
  };
  return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
