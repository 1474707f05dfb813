/* Preemption and numbers going wrong, through `est run_classifier` (docs/estimator.md §7):
 *
 *   - SIGTERM (and SIGINT) in the middle of a training step: the step finishes, a
 *     checkpoint of it is written, the log says "Received SIGTERM at step N; saved
 *     checkpoint ...; exiting", the exit code is 128 + signo, and the same command run
 *     again resumes and ends with a final checkpoint bit-identical to an uninterrupted run;
 *   - a second signal ends the process at once (killed by the signal, nothing saved);
 *   - an absurd learning rate (1e30): training stops at the NaN loss naming the step, and
 *     the newest checkpoint is the last good one (it loads, every value finite);
 *   - --do_eval on a checkpoint holding a NaN: an error naming the checkpoint and the
 *     variable, no eval_results.txt.
 * The signals come from EST_FAULT_SIGNAL_AT_STEP, acted on by the LD_PRELOAD shim
 * tests/fault/fault_hooks.c through libest's fault seam (est/fault_hooks.h): a real signal
 * raised inside a chosen step, caught by the command line's own handlers, so the point
 * does not depend on timing. Model: the 1-layer hidden-32 BERT of tests/data on 10
 * CoLA sentences, batch 4, 4 epochs = 10 steps. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "est/ckpt.h"
#include "est/est.h"
#include "test_util.h"
#include "preempt_util.h"

#define SMALL_CONFIG EST_TEST_DATA "/run_classifier/bert_config_h32.json"
#define UNCASED EST_TEST_DATA "/vocab_uncased.txt"
#define RUN_ARGS                                                                                          \
  " run_classifier --task_name=cola --do_train --data_dir=" EST_TEST_DATA "/glue_mini/CoLA"                \
  " --vocab_file=" UNCASED " --bert_config_file=" SMALL_CONFIG " --max_seq_length=32 --train_batch_size=4" \
  " --eval_batch_size=4 --save_checkpoints_steps=3 --num_threads=2 --log_step_count_steps=1"              \
  " --num_train_epochs=4"
enum { MAX_STEPS = 10 };

static uint8_t *g_ref;
static size_t g_ref_size;
static char g_ref_dir[600];

static int setup(void **state) {
  test_tmpdir_setup(state);
  snprintf(g_ref_dir, sizeof g_ref_dir, "%s/reference", test_tmpdir);
  char *log;
  int status = run_est(NULL, &log, RUN_ARGS " --learning_rate=1e-3 --output_dir=%s", g_ref_dir);
  if (exit_code(status) != 0) {
    fprintf(stderr, "reference run failed:\n%s\n", log);
    return -1;
  }
  free(log);
  char prefix[1024];
  latest(g_ref_dir, prefix, sizeof prefix);
  if (!strstr(prefix, "model.ckpt-10")) return -1;
  int finite;
  g_ref = all_tensors(prefix, &g_ref_size, &finite);
  return finite ? 0 : -1;
}

static int teardown(void **state) {
  free(g_ref);
  return test_tmpdir_teardown(state);
}

/* One signal at `step`: exit 128 + signo after saving step + 1; the rerun ends equal. */
static void preempt_then_resume(int signo, int step, const char *signame) {
  char dir[600], fault[64], want[2048], prefix[1024];
  snprintf(dir, sizeof dir, "%s/%s-%d", test_tmpdir, signame, step);
  snprintf(fault, sizeof fault, "EST_FAULT_SIGNAL_AT_STEP=%d:%d", step, signo);
  char *log;
  int status = run_est(fault, &log, RUN_ARGS " --do_eval --learning_rate=1e-3 --output_dir=%s", dir);
  if (exit_code(status) != 128 + signo) fail_msg("want exit %d, got status %#x:\n%s", 128 + signo, status, log);
  snprintf(want, sizeof want, "Received %s at step %d; saved checkpoint %s/model.ckpt-%d; exiting", signame, step + 1,
           dir, step + 1);
  if (!strstr(log, want)) fail_msg("no '%s' in:\n%s", want, log);
  assert_null(strstr(log, "error:"));
  free(log);
  latest(dir, prefix, sizeof prefix);
  snprintf(want, sizeof want, "model.ckpt-%d", step + 1);
  assert_non_null(strstr(prefix, want));
  assert_false(exists_in(dir, "eval_results.txt"));   /* stopped: evaluation did not run */

  status = run_est(NULL, &log, RUN_ARGS " --do_eval --learning_rate=1e-3 --output_dir=%s", dir);
  if (exit_code(status) != 0) fail_msg("rerun: status %#x:\n%s", status, log);
  snprintf(want, sizeof want, "Restoring parameters from %s/model.ckpt-%d", dir, step + 1);
  if (!strstr(log, want)) fail_msg("the rerun did not resume ('%s'):\n%s", want, log);
  free(log);
  assert_true(exists_in(dir, "eval_results.txt"));
  latest(dir, prefix, sizeof prefix);
  size_t size;
  int finite;
  uint8_t *got = all_tensors(prefix, &size, &finite);
  assert_int_equal(size, g_ref_size);
  assert_memory_equal(got, g_ref, size);
  free(got);
}

static void test_sigterm_then_resume_is_exact(void **state) {
  (void)state;
  preempt_then_resume(SIGTERM, 4, "SIGTERM");   /* between saves (3, 6): a save of its own */
  preempt_then_resume(SIGTERM, 5, "SIGTERM");   /* the step the cadence saves anyway */
}

static void test_sigint_then_resume_is_exact(void **state) {
  (void)state;
  preempt_then_resume(SIGINT, 1, "SIGINT");
  preempt_then_resume(SIGINT, MAX_STEPS - 1, "SIGINT");   /* the last step */
}

/* Two signals inside one step: the second one is not caught and ends the process. */
static void test_second_signal_ends_at_once(void **state) {
  (void)state;
  char dir[600], prefix[1024];
  snprintf(dir, sizeof dir, "%s/twice", test_tmpdir);
  char *log;
  int status = run_est("EST_FAULT_SIGNAL_AT_STEP=4:15:2", &log, RUN_ARGS " --learning_rate=1e-3 --output_dir=%s", dir);
  if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGTERM) fail_msg("want death by SIGTERM, status %#x:\n%s", status, log);
  assert_null(strstr(log, "Received SIGTERM"));
  free(log);
  latest(dir, prefix, sizeof prefix);
  assert_non_null(strstr(prefix, "model.ckpt-3"));   /* the cadence's last save, nothing after */
  status = run_est(NULL, &log, RUN_ARGS " --learning_rate=1e-3 --output_dir=%s", dir);
  assert_int_equal(exit_code(status), 0);
  free(log);
  latest(dir, prefix, sizeof prefix);
  size_t size;
  int finite;
  uint8_t *got = all_tensors(prefix, &size, &finite);
  assert_int_equal(size, g_ref_size);
  assert_memory_equal(got, g_ref, size);
  free(got);
}

/* lr 1e30: the first update leaves weights near 1e30, whose next loss is NaN. */
static void test_nan_loss_keeps_last_good_checkpoint(void **state) {
  (void)state;
  char dir[600], prefix[1024];
  snprintf(dir, sizeof dir, "%s/nan", test_tmpdir);
  char *log;
  int status = run_est(NULL, &log,
                       RUN_ARGS " --do_eval --learning_rate=1e30 --save_checkpoints_steps=1 --output_dir=%s", dir);
  if (exit_code(status) != 1) fail_msg("want exit 1, status %#x:\n%s", status, log);
  const char *m = strstr(log, "NaN loss during training: loss = ");
  if (!m) fail_msg("no NaN message:\n%s", log);
  const char *at = strstr(m, "at global step ");
  assert_non_null(at);
  int step = atoi(at + strlen("at global step "));
  assert_true(step >= 1 && step < MAX_STEPS);
  char want[2048];
  snprintf(want, sizeof want, "last good checkpoint: %s/model.ckpt-%d", dir, step);
  if (!strstr(log, want)) fail_msg("no '%s' in:\n%s", want, log);
  free(log);
  latest(dir, prefix, sizeof prefix);
  snprintf(want, sizeof want, "model.ckpt-%d", step);
  assert_non_null(strstr(prefix, want));
  snprintf(want, sizeof want, "model.ckpt-%d.index", step + 1);
  assert_false(exists_in(dir, want));
  assert_false(exists_in(dir, "eval_results.txt"));
  size_t size;
  int finite;
  free(all_tensors(prefix, &size, &finite));   /* it loads */
  assert_true(finite);
}

/* The reference's final checkpoint with one NaN in the word embeddings, as the only
 * checkpoint of a fresh output_dir: --do_eval names it and the variable. */
static void test_eval_on_nan_weights_reports(void **state) {
  (void)state;
  char dir[600], src[1024], prefix[1024];
  snprintf(dir, sizeof dir, "%s/nanweights", test_tmpdir);
  assert_int_equal(est_mkdirs(dir), EST_OK);
  latest(g_ref_dir, src, sizeof src);
  est_ckpt_reader *r;
  assert_int_equal(est_ckpt_reader_open(&r, src), EST_OK);
  size_t n = est_ckpt_reader_count(r);
  est_tensor *t = calloc(n, sizeof *t);
  const char **names = calloc(n, sizeof *names);
  int poisoned = 0;
  for (size_t i = 0; i < n; i++) {
    names[i] = est_ckpt_reader_name(r, i);
    assert_int_equal(est_ckpt_reader_read(r, names[i], &t[i]), EST_OK);
    if (!strcmp(names[i], "bert/embeddings/word_embeddings")) ((float *)t[i].data)[7] = NAN, poisoned = 1;
  }
  assert_true(poisoned);
  snprintf(prefix, sizeof prefix, "%s/model.ckpt-10", dir);
  assert_int_equal(est_ckpt_save(prefix, n, names, t), EST_OK);
  for (size_t i = 0; i < n; i++) est_tensor_free(&t[i]);
  free(t);
  free(names);
  est_ckpt_reader_close(r);
  char *path = prefix;
  est_ckpt_state cs = {.model_checkpoint_path = path, .count = 1, .all_model_checkpoint_paths = &path};
  assert_int_equal(est_ckpt_state_write(dir, &cs), EST_OK);

  char *log;
  int status = run_est(NULL, &log,
                       " run_classifier --task_name=cola --do_eval --data_dir=" EST_TEST_DATA "/glue_mini/CoLA"
                       " --vocab_file=" UNCASED " --bert_config_file=" SMALL_CONFIG
                       " --max_seq_length=32 --eval_batch_size=4 --num_threads=2 --output_dir=%s", dir);
  if (exit_code(status) != 1) fail_msg("want exit 1, status %#x:\n%s", status, log);
  char want[2048];
  snprintf(want, sizeof want, "%s holds non-finite values: variable 'bert/embeddings/word_embeddings' element 7 is nan",
           prefix);
  if (!strstr(log, want)) fail_msg("no '%s' in:\n%s", want, log);
  free(log);
  assert_false(exists_in(dir, "eval_results.txt"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sigterm_then_resume_is_exact),
      cmocka_unit_test(test_sigint_then_resume_is_exact),
      cmocka_unit_test(test_second_signal_ends_at_once),
      cmocka_unit_test(test_nan_loss_keeps_last_good_checkpoint),
      cmocka_unit_test(test_eval_on_nan_weights_reports),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
