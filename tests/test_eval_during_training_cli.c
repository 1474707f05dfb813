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
 *   checkpoint and eval_results.txt, and no eval/results.txt or export/;
 * - evaluating during training changes nothing training does (an EVAL input once repointed
 *   the open TRAIN input to the dev records): for each task that takes --eval_every_steps
 *   (run_classifier, run_pretraining) every checkpoint both runs wrote is the same file with
 *   and without it, and its last evaluation is what a separate --do_eval of its final
 *   checkpoint writes;
 * - issue 46's recipe (160 SST-2 training sentences, 300 dev sentences, BERT-Tiny from
 *   scratch): early stopping on eval_loss stops where TF's rule says, after the dev loss
 *   bottomed out in the first 30 steps, and dev accuracy never reaches what training on the
 *   dev set gave (0.96 at step 40). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "est/est.h"
#include "test_util.h"
#include "preempt_util.h"

#define D EST_TEST_DATA
#define COLA                                                                                              \
  " run_classifier --task_name=cola --data_dir=" D "/glue_mini/CoLA"                                      \
  " --vocab_file=" D "/vocab_uncased.txt --bert_config_file=" D "/run_classifier/bert_config_h32.json"     \
  " --max_seq_length=32 --train_batch_size=4 --eval_batch_size=4 --num_threads=2 --num_train_epochs=4"     \
  " --learning_rate=1e-2 --save_checkpoints_steps=4"
#define ARGS COLA " --do_train --do_eval"
#define TINY D "/keras_bert_tiny"
#define PRETRAIN                                                                                          \
  " run_pretraining --bert_config_file=" TINY "/bert_config.json --max_seq_length=16"                     \
  " --max_predictions_per_seq=3 --train_batch_size=8 --eval_batch_size=8 --num_train_steps=12"            \
  " --num_warmup_steps=2 --learning_rate=1e-3 --save_checkpoints_steps=4 --max_eval_steps=3 --seed=5"      \
  " --num_threads=2"
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

/* The eval_accuracy of each line of eval/results.txt. */
static size_t read_accuracies(const char *dir, double *accuracies, size_t cap) {
  char *text = test_read_in(dir, "eval/results.txt");
  size_t n = 0;
  for (char *line = strtok(text, "\n"); line && n < cap; line = strtok(NULL, "\n")) {
    const char *acc = strstr(line, "eval_accuracy = ");
    assert_non_null(acc);
    accuracies[n++] = strtod(acc + 16, NULL);
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

/* The model.ckpt-* files of dir, sorted by name. */
static int is_ckpt_file(const struct dirent *d) { return !strncmp(d->d_name, "model.ckpt-", 11); }

/* Every checkpoint file that dirs a and b both hold is the same bytes; they share at least
 * `min_shared` files, the newest checkpoint's among them. */
static void expect_same_checkpoints(const char *a, const char *b, int min_shared) {
  struct dirent **na = NULL, **nb = NULL;
  const int ca = scandir(a, &na, is_ckpt_file, alphasort), cb = scandir(b, &nb, is_ckpt_file, alphasort);
  assert_true(ca > 0 && cb > 0);
  int shared = 0;
  for (int i = 0; i < ca; i++)
    for (int j = 0; j < cb; j++) {
      if (strcmp(na[i]->d_name, nb[j]->d_name)) continue;
      size_t sa = 0, sb = 0;
      char pa[4096], pb[4096];
      snprintf(pa, sizeof pa, "%s/%s", a, na[i]->d_name);
      snprintf(pb, sizeof pb, "%s/%s", b, nb[j]->d_name);
      char *fa = test_read_file(pa, &sa), *fb = test_read_file(pb, &sb);
      if (sa != sb || memcmp(fa, fb, sa)) fail_msg("%s differs from %s", pb, pa);
      free(fa), free(fb);
      shared++;
    }
  for (int i = 0; i < ca; i++) free(na[i]);
  for (int j = 0; j < cb; j++) free(nb[j]);
  free(na), free(nb);
  if (shared < min_shared) fail_msg("%s and %s share %d checkpoint files, want >= %d", a, b, shared, min_shared);
  char la[1024], lb[1024];
  latest(a, la, sizeof la), latest(b, lb, sizeof lb);
  assert_string_equal(strrchr(la, '/'), strrchr(lb, '/'));
}

/* `train` (a task's --do_train --do_eval flags without --output_dir) run plain into one
 * directory and with `during` (its --eval_every_steps) into another: the same checkpoints;
 * then `eval_only` (the same flags with --do_eval alone) on the second directory writes the
 * eval_results.txt its evaluation during training wrote. */
static void expect_evaluating_changes_nothing(const char *train, const char *during, const char *eval_only,
                                              const char *name) {
  char plain[512], evald[512];
  snprintf(plain, sizeof plain, "%s/%s_plain", test_tmpdir, name);
  snprintf(evald, sizeof evald, "%s/%s_during", test_tmpdir, name);
  char *log = NULL;
  int status = run_est(NULL, &log, "%s --output_dir=%s", train, plain);
  if (exit_code(status) != 0) fail_msg("exit %d:\n%s", exit_code(status), log);
  free(log);
  status = run_est(NULL, &log, "%s %s --output_dir=%s", train, during, evald);
  if (exit_code(status) != 0) fail_msg("exit %d:\n%s", exit_code(status), log);
  free(log);
  assert_true(exists_in(evald, "eval/results.txt"));   /* it did evaluate during training */
  expect_same_checkpoints(plain, evald, 4);            /* two checkpoints: .index and .data each */
  char *during_results = test_read_in(evald, "eval_results.txt");
  status = run_est(NULL, &log, "%s --output_dir=%s", eval_only, evald);
  if (exit_code(status) != 0) fail_msg("exit %d:\n%s", exit_code(status), log);
  free(log);
  char *separate = test_read_in(evald, "eval_results.txt");
  assert_string_equal(during_results, separate);
  free(during_results), free(separate);
}

static void test_classifier_evaluating_changes_no_training(void **state) {
  (void)state;
  expect_evaluating_changes_nothing(ARGS, "--eval_every_steps=2", COLA " --do_eval", "classifier");
}

static void test_pretraining_evaluating_changes_no_training(void **state) {
  (void)state;
  char records[512], train[2048], eval_only[2048];
  snprintf(records, sizeof records, "%s/jack.tfrecord", test_tmpdir);
  free(test_run_ok(EST_BIN " create_pretraining_data --input_file=" D "/pretraining/jack_docs.txt"
                   " --output_file=%s --vocab_file=" TINY "/vocab.txt --max_seq_length=16"
                   " --max_predictions_per_seq=3 --dupe_factor=4 --random_seed=1", records));
  snprintf(train, sizeof train, PRETRAIN " --input_file=%s --do_train --do_eval", records);
  snprintf(eval_only, sizeof eval_only, PRETRAIN " --input_file=%s --do_eval", records);
  expect_evaluating_changes_nothing(train, "--eval_every_steps=3", eval_only, "pretraining");
}

/* The first `n` lines after the header of `from`, with the header, written to `to`. */
static void head_of_tsv(const char *from, const char *to, int n) {
  char *text = test_read_file(from, NULL);
  char *p = text;
  for (int line = 0; line <= n && p; line++) {
    p = strchr(p, '\n');
    if (p) p++;
  }
  assert_non_null(p);
  test_write_bytes(to, text, (size_t)(p - text));
  free(text);
}

/* Issue 46's recipe, as a new user ran it: SST-2's first 160 training sentences, its first
 * 300 dev sentences, the shipped BERT-Tiny config from scratch, seq 64, batch 32, lr 3e-4,
 * 30 epochs (150 steps), --seed=3, evaluated every 10 steps with patience 30 on eval_loss.
 * Trained on its 160 sentences the model overfits: the dev loss is lowest in the first 30
 * steps and early stopping ends the run there + 30 steps, where TF's
 * stop_if_no_decrease_hook, applied to the run's own eval/results.txt, says. Trained on the
 * dev set (the bug) the dev accuracy climbed to 0.96 by step 40 and nothing stopped. */
static void test_sst2_recipe_stops_where_tf_says(void **state) {
  (void)state;
  enum { EVERY = 10, RECIPE_PATIENCE = 30, STEPS = 150 };
  char data[512], path[1024], out[512];
  snprintf(data, sizeof data, "%s/sst2_small", test_tmpdir);
  snprintf(out, sizeof out, "%s/sst2_run", test_tmpdir);
  assert_int_equal(est_mkdirs(data), EST_OK);
  snprintf(path, sizeof path, "%s/train.tsv", data);
  head_of_tsv(EST_SOURCE_DIR "/data/SST-2/train.tsv", path, 160);
  snprintf(path, sizeof path, "%s/dev.tsv", data);
  head_of_tsv(EST_SOURCE_DIR "/data/SST-2/dev.tsv", path, 300);
  char *log = NULL;
  int status = run_est(NULL, &log,
                       " run_classifier --task_name=sst-2 --do_train --do_eval --data_dir=%s"
                       " --vocab_file=" EST_SOURCE_DIR "/data/vocab.txt --bert_config_file=" EST_SOURCE_DIR
                       "/data/bert_config.json --max_seq_length=64 --train_batch_size=32 --eval_batch_size=32"
                       " --learning_rate=3e-4 --num_train_epochs=30 --seed=3 --num_threads=2"
                       " --eval_every_steps=%d --early_stopping_metric=eval_loss --early_stopping_patience_steps=%d"
                       " --export_best --output_dir=%s",
                       data, EVERY, RECIPE_PATIENCE, out);
  if (exit_code(status) != 0) fail_msg("exit %d:\n%s", exit_code(status), log);
  free(log);
  int64_t steps[64];
  double losses[64];
  size_t n = read_results(out, steps, losses, 64);
  assert_true(n >= 2);
  /* TF's stop_if_no_decrease_hook over the history: the first evaluation at least
   * `patience` steps after the lowest loss so far */
  size_t best = 0, stop_at = n;
  for (size_t i = 0; i < n && stop_at == n; i++) {
    assert_int_equal(steps[i], EVERY * (int64_t)(i + 1));
    if (losses[i] < losses[best]) best = i;
    if (steps[i] - steps[best] >= RECIPE_PATIENCE) stop_at = i;
  }
  if (stop_at != n - 1 || steps[n - 1] >= STEPS)
    fail_msg("%zu evaluations, the last at step %lld; TF's rule stops after evaluation %zu (best at step %lld)", n,
             (long long)steps[n - 1], stop_at + 1, (long long)steps[best]);
  assert_true(steps[best] <= 30);
  /* every evaluation's accuracy is that of a model that never saw the dev set */
  double accuracies[64];
  assert_int_equal(read_accuracies(out, accuracies, 64), n);
  for (size_t i = 0; i < n; i++)
    if (accuracies[i] > 0.8)
      fail_msg("dev accuracy %.4f at step %lld: trained on the dev set?", accuracies[i], (long long)steps[i]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_usage_errors),
      cmocka_unit_test(test_early_stopping_and_best_export),
      cmocka_unit_test(test_absent_flags_change_nothing),
      cmocka_unit_test(test_classifier_evaluating_changes_no_training),
      cmocka_unit_test(test_pretraining_evaluating_changes_no_training),
      cmocka_unit_test(test_sst2_recipe_stops_where_tf_says),
  };
  return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
