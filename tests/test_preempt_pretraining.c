/* Preemption of `est run_pretraining` (docs/estimator.md §7), as test_preempt.c does for
 * run_classifier: SIGTERM (or SIGINT) in the middle of a training step finishes the step,
 * writes a checkpoint of it (input position included: interleave, shuffle buffer), logs
 * "Received SIGTERM at step N; saved checkpoint ...; exiting" and exits 128 + signo
 * without evaluating; the same command run again resumes from that checkpoint and ends with
 * a final checkpoint byte for byte an uninterrupted run's (.data and .index files, and
 * every tensor); a second signal ends the process at once. The signals come from
 * EST_FAULT_SIGNAL_AT_STEP, acted on by the LD_PRELOAD shim tests/fault/fault_hooks.c at a
 * chosen step, caught by the command line's own handlers.
 * Model: the TF-written keras_bert_tiny config from scratch, records that
 * `est create_pretraining_data` writes from tests/data/pretraining/jack_docs.txt into two
 * files (so the input interleaves), seq 16, batch 8, 8 steps, a checkpoint every 3. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <string.h>

#include "test_util.h"
#include "preempt_util.h"

#define TINY EST_TEST_DATA "/keras_bert_tiny"
enum { STEPS = 8 };

static char g_records[1100], g_ref_dir[600];

static const char *run_args(void) {
  static char args[4096];
  snprintf(args, sizeof args,
           " run_pretraining --bert_config_file=" TINY "/bert_config.json --input_file=%s"
           " --max_seq_length=16 --max_predictions_per_seq=3 --do_train --do_eval --train_batch_size=8"
           " --eval_batch_size=8 --max_eval_steps=2 --num_train_steps=%d --num_warmup_steps=2"
           " --learning_rate=1e-2 --save_checkpoints_steps=3 --log_step_count_steps=1 --seed=7 --num_threads=1",
           g_records, STEPS);
  return args;
}

static char *read_in(const char *dir, const char *name, size_t *size) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  char *d = test_read_file(path, size);
  if (!d) fail_msg("cannot read %s", path);
  return d;
}

static int setup(void **state) {
  test_tmpdir_setup(state);
  char files[2][512];
  for (int i = 0; i < 2; i++) {
    snprintf(files[i], sizeof files[i], "%s/jack%d.tfrecord", test_tmpdir, i);
    free(test_run_ok(EST_BIN " create_pretraining_data --input_file=" EST_TEST_DATA "/pretraining/jack_docs.txt"
                        " --output_file=%s --vocab_file=" TINY "/vocab.txt --max_seq_length=16"
                        " --max_predictions_per_seq=3 --dupe_factor=2 --random_seed=%d", files[i], 20 + i));
  }
  snprintf(g_records, sizeof g_records, "%s,%s", files[0], files[1]);
  snprintf(g_ref_dir, sizeof g_ref_dir, "%s/reference", test_tmpdir);
  char *log;
  int status = run_est(NULL, &log, "%s --output_dir=%s", run_args(), g_ref_dir);
  if (exit_code(status) != 0) {
    fprintf(stderr, "reference run failed:\n%s\n", log);
    free(log);
    return -1;
  }
  free(log);
  return exists_in(g_ref_dir, "model.ckpt-8.index") && exists_in(g_ref_dir, "eval_results.txt") ? 0 : -1;
}

/* One signal at `step`: exit 128 + signo after saving step + 1; the rerun ends equal. */
static void preempt_then_resume(int signo, int step, const char *signame) {
  char dir[600], fault[64], want[2048], prefix[1024];
  snprintf(dir, sizeof dir, "%s/%s-%d", test_tmpdir, signame, step);
  snprintf(fault, sizeof fault, "EST_FAULT_SIGNAL_AT_STEP=%d:%d", step, signo);
  char *log;
  int status = run_est(fault, &log, "%s --output_dir=%s", run_args(), dir);
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

  status = run_est(NULL, &log, "%s --output_dir=%s", run_args(), dir);
  if (exit_code(status) != 0) fail_msg("rerun: status %#x:\n%s", status, log);
  snprintf(want, sizeof want, "Restoring parameters from %s/model.ckpt-%d", dir, step + 1);
  if (!strstr(log, want)) fail_msg("the rerun did not resume ('%s'):\n%s", want, log);
  free(log);
  assert_true(exists_in(dir, "eval_results.txt"));
  latest(dir, prefix, sizeof prefix);
  assert_non_null(strstr(prefix, "model.ckpt-8"));
  /* the files byte for byte, then every tensor by name (what a reader sees) */
  const char *names[2] = {"model.ckpt-8.data-00000-of-00001", "model.ckpt-8.index"};
  for (int i = 0; i < 2; i++) {
    size_t na = 0, nb = 0;
    char *a = read_in(g_ref_dir, names[i], &na), *b = read_in(dir, names[i], &nb);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, na);
    free(a), free(b);
  }
  char ref[1024];
  latest(g_ref_dir, ref, sizeof ref);
  size_t size_ref, size;
  int finite_ref, finite;
  uint8_t *want_t = all_tensors(ref, &size_ref, &finite_ref), *got = all_tensors(prefix, &size, &finite);
  assert_true(finite_ref && finite);
  assert_int_equal(size, size_ref);
  assert_memory_equal(got, want_t, size);
  free(want_t), free(got);
}

static void test_sigterm_then_resume_is_exact(void **state) {
  (void)state;
  preempt_then_resume(SIGTERM, 4, "SIGTERM");   /* between saves (3, 6): a save of its own */
}

static void test_sigint_then_resume_is_exact(void **state) {
  (void)state;
  preempt_then_resume(SIGINT, 2, "SIGINT");     /* the step the cadence saves anyway */
}

/* Two signals inside one step: the second is not caught and ends the process at once;
 * the rerun resumes from the cadence's last save (3) and still ends equal. */
static void test_second_signal_ends_at_once(void **state) {
  (void)state;
  char dir[600], prefix[1024], *log;
  snprintf(dir, sizeof dir, "%s/twice", test_tmpdir);
  int status = run_est("EST_FAULT_SIGNAL_AT_STEP=4:15:2", &log, "%s --output_dir=%s", run_args(), dir);
  if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGTERM) fail_msg("want death by SIGTERM, status %#x:\n%s", status, log);
  assert_null(strstr(log, "Received SIGTERM"));
  free(log);
  latest(dir, prefix, sizeof prefix);
  assert_non_null(strstr(prefix, "model.ckpt-3"));
  status = run_est(NULL, &log, "%s --output_dir=%s", run_args(), dir);
  if (exit_code(status) != 0) fail_msg("rerun: status %#x:\n%s", status, log);
  free(log);
  size_t na = 0, nb = 0;
  char *a = read_in(g_ref_dir, "model.ckpt-8.data-00000-of-00001", &na);
  char *b = read_in(dir, "model.ckpt-8.data-00000-of-00001", &nb);
  assert_int_equal(na, nb);
  assert_memory_equal(a, b, na);
  free(a), free(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sigterm_then_resume_is_exact),
      cmocka_unit_test(test_sigint_then_resume_is_exact),
      cmocka_unit_test(test_second_signal_ends_at_once),
  };
  return cmocka_run_group_tests(tests, setup, test_tmpdir_teardown);
}
