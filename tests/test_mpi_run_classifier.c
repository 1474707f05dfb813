/* `mpirun -np 2 est run_classifier` end to end on a small MRPC slice (10 train, 13 dev, 7
 * test examples; the 32-unit config of tests/test_run_classifier.c):
 *
 *   - train + eval + predict over 2 ranks: the global batch is split (2 + 2 per step, the
 *     step count is the single process's), every step's gradient all-reduce starts during
 *     backward (the BERT model reports its layers), exactly one set of output files is
 *     written (by the chief), test_results.tsv has one line per test example;
 *   - the chief's eval_results.txt and test_results.tsv equal a single process's
 *     evaluation and prediction of the same checkpoint with the same global batches (to
 *     1e-5; the rows are distinct, so an order mix-up shows);
 *   - a train_batch_size that does not divide over the ranks stops every rank with a
 *     message naming the flag, without a hang.
 * Training itself is compared with one process in test_mpi_train_equivalence.c (dropout
 * on, the default global input order); test_mpi_bert.c checks the model step for step.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/est.h"
#include "test_util.h"

#define SMALL_CONFIG EST_TEST_DATA "/run_classifier/bert_config_h32.json"
#define UNCASED EST_TEST_DATA "/vocab_uncased.txt"
#define MRPC EST_TEST_DATA "/glue_mini/MRPC"

enum { NTEST = 7, NDEV = 13 };

/* Loopback only, as root if need be, more ranks than cores allowed (as test_mpi_estimator.c);
 * a collective mismatch fails within 30 s instead of hanging. */
#define MPIRUN                                                                                    \
  "EST_DIST_TIMEOUT=30 timeout 120 env ASAN_OPTIONS=\"$ASAN_OPTIONS:detect_leaks=0\" " EST_MPIEXEC \
  " --allow-run-as-root --oversubscribe --mca btl self,tcp --mca btl_tcp_if_include lo"            \
  " --mca oob_tcp_if_include lo -x OMP_NUM_THREADS=1 -x ASAN_OPTIONS -x EST_DIST_TIMEOUT -np 2 "

/* Flags shared by every run: global batches 4 (2 per rank), 10 examples x 10 epochs = 25 steps. */
#define COMMON                                                                                     \
  " run_classifier --task_name=MRPC --vocab_file=" UNCASED " --bert_config_file=" SMALL_CONFIG      \
  " --max_seq_length=32 --train_batch_size=4 --eval_batch_size=4 --predict_batch_size=4"           \
  " --learning_rate=5e-3 --num_train_epochs=10 --num_threads=1 --seed=5"

static char tmp[256], data[512];

/* The first `lines` lines of `from` into `to`. */
static void head_file(const char *from, const char *to, int lines) {
  uint8_t *text;
  size_t size, at = 0;
  assert_int_equal(est_read_file(from, &text, &size), EST_OK);
  for (int n = 0; n < lines && at < size; at++)
    if (text[at] == '\n') n++;
  assert_int_equal(est_write_file_atomic(to, text, at), EST_OK);
  free(text);
}

static int setup(void **state) {
  (void)state;
  test_make_tmpdir(tmp, sizeof tmp);
  char path[1024];
  snprintf(data, sizeof data, "%s/mrpc", tmp);
  assert_int_equal(est_mkdirs(data), EST_OK);
  est_path_join(path, sizeof path, data, "train.tsv");
  head_file(MRPC "/train.tsv", path, 11);
  est_path_join(path, sizeof path, data, "dev.tsv");
  head_file(MRPC "/dev.tsv", path, NDEV + 1);
  est_path_join(path, sizeof path, data, "test.tsv");
  head_file(MRPC "/test.tsv", path, NTEST + 1);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  test_remove_tree(tmp);
  return 0;
}

static char *run(int want_rc, const char *fmt, ...) {
  char cmd[8192];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  char *log = NULL;
  int rc = test_run(&log, 1, "%s", cmd);
  if ((want_rc == 0) != (rc == 0)) fail_msg("exit %d (want %s) for: %s\n%s", rc, want_rc ? "failure" : "0", cmd, log);
  return log;
}

/* All numbers of a text file in order (keys, '=', TABs and newlines skipped); *lines gets
 * its line count. */
static int read_numbers(const char *dir, const char *name, double *out, int cap, int *lines) {
  char path[1024];
  est_path_join(path, sizeof path, dir, name);
  uint8_t *text;
  size_t size;
  if (est_read_file(path, &text, &size) != EST_OK) fail_msg("cannot read %s: %s", path, est_error_message());
  int n = 0;
  *lines = 0;
  for (const char *p = (const char *)text; *p;) {
    const char *eq = strstr(p, " = ");
    const char *nl = strchr(p, '\n');
    if (!nl) fail_msg("%s: last line lacks a newline", path);
    (*lines)++;
    const char *q = eq && eq < nl ? eq + 3 : p;
    while (q < nl) {
      char *end;
      double v = strtod(q, &end);
      if (end == q) fail_msg("%s line %d: not a number at '%.20s'", path, *lines, q);
      if (n == cap) fail_msg("%s: more than %d numbers", path, cap);
      out[n++] = v;
      q = *end == '\t' ? end + 1 : end;
    }
    p = nl + 1;
  }
  free(text);
  return n;
}

static void copy_file(const char *from_dir, const char *to_dir, const char *name) {
  char from[1024], to[1024];
  est_path_join(from, sizeof from, from_dir, name);
  est_path_join(to, sizeof to, to_dir, name);
  uint8_t *bytes;
  size_t size;
  if (est_read_file(from, &bytes, &size) != EST_OK) fail_msg("cannot read %s: %s", from, est_error_message());
  assert_int_equal(est_write_file_atomic(to, bytes, size), EST_OK);
  free(bytes);
}

/* output_dir holds exactly what one process writes: no per-rank copies, no leftovers. */
static void check_one_set_of_files(const char *dir) {
  static const char *const want[] = {"checkpoint",          "eval",           "eval.tf_record",
                                     "eval_results.txt",    "predict.tf_record", "test_results.tsv",
                                     "train.tf_record",     "model.ckpt-0.index", "model.ckpt-0.data-00000-of-00001",
                                     "model.ckpt-25.index", "model.ckpt-25.data-00000-of-00001"};
  const size_t nwant = sizeof want / sizeof want[0];
  int seen[sizeof want / sizeof want[0]] = {0}, events = 0;
  DIR *d = opendir(dir);
  assert_non_null(d);
  struct dirent *ent;
  while ((ent = readdir(d))) {
    const char *name = ent->d_name;
    if (!strcmp(name, ".") || !strcmp(name, "..")) continue;
    if (!strncmp(name, "events.out.tfevents.", 20)) {
      events++;
      continue;
    }
    size_t i = 0;
    while (i < nwant && strcmp(name, want[i])) i++;
    if (i == nwant) fail_msg("%s: unexpected file %s", dir, name);
    seen[i]++;
  }
  closedir(d);
  for (size_t i = 0; i < nwant; i++)
    if (!seen[i]) fail_msg("%s: %s missing", dir, want[i]);
  assert_int_equal(events, 1);
}

static void test_two_ranks_train_eval_predict(void **state) {
  (void)state;
  char out2[512], out1[512];
  snprintf(out2, sizeof out2, "%s/ranks2", tmp);
  snprintf(out1, sizeof out1, "%s/ranks1", tmp);
  char *log = run(0, MPIRUN EST_BIN COMMON " --do_train --do_eval --do_predict --data_dir=%s --output_dir=%s", data,
                  out2);
  /* Both ranks ran; the batch flags are global; the step count is one process's. */
  assert_true(test_count_lines_with(log, "[rank 1]", "Num steps = 25") == 1);
  assert_true(test_count_lines_with(log, "[rank 0]", "data parallel: 2 ranks x train batch 2 (global 4)") == 1);
  /* The model's per-layer reports start the (one, 16 MiB) bucket inside every backward. */
  if (test_count_lines_with(log, "gradient all-reduce: 25 steps x 1 buckets, 25 of them started during backward", NULL) != 1)
    fail_msg("no overlapped gradient all-reduce in the log:\n%s", log);
  /* Only the chief reports results. */
  assert_int_equal(test_count_lines_with(log, "[rank 0]", "***** Eval results *****"), 1);
  assert_int_equal(test_count_lines_with(log, "[rank 1]", "***** Eval results *****"), 0);
  assert_int_equal(test_count_lines_with(log, "[rank 1]", "***** Predict results *****"), 0);
  free(log);
  check_one_set_of_files(out2);

  double v2[16], v1[16], p2[64], p1[64];
  int lines2, lines1;
  /* eval_accuracy, eval_f1, eval_loss, global_step, loss */
  assert_int_equal(read_numbers(out2, "eval_results.txt", v2, 16, &lines2), 5);
  assert_int_equal((int)v2[3], 25);
  assert_int_equal(read_numbers(out2, "test_results.tsv", p2, 64, &lines2), 2 * NTEST);
  assert_int_equal(lines2, NTEST);

  /* One process evaluates and predicts the chief's final checkpoint with the same global
   * batches: the same metrics (sharded eval reduces sums; "loss" is a mean of batch means
   * over the same global batches) and the same rows in the same order. */
  assert_int_equal(est_mkdirs(out1), EST_OK);
  copy_file(out2, out1, "checkpoint");
  copy_file(out2, out1, "model.ckpt-25.index");
  copy_file(out2, out1, "model.ckpt-25.data-00000-of-00001");
  log = run(0, EST_BIN COMMON " --do_eval --do_predict --data_dir=%s --output_dir=%s", data, out1);
  free(log);
  assert_int_equal(read_numbers(out1, "eval_results.txt", v1, 16, &lines1), 5);
  for (int i = 0; i < 5; i++)
    if (fabs(v1[i] - v2[i]) > 1e-5) fail_msg("eval_results.txt value %d: 2 ranks %.8g, 1 process %.8g", i + 1, v2[i], v1[i]);
  assert_int_equal(read_numbers(out1, "test_results.tsv", p1, 64, &lines1), 2 * NTEST);
  for (int i = 0; i < 2 * NTEST; i++)
    if (fabs(p1[i] - p2[i]) > 1e-5)
      fail_msg("test_results.tsv line %d: 2 ranks %.8g, 1 process %.8g", i / 2 + 1, p2[i], p1[i]);
  /* Sensitivity: the trained model tells the test examples apart by more than twice the
   * tolerance, so rows out of order could not pass the comparison above. */
  for (int a = 0; a < NTEST; a++)
    for (int b = a + 1; b < NTEST; b++)
      if (fabs(p1[2 * a] - p1[2 * b]) < 2e-5)
        fail_msg("test rows %d and %d (%.8g, %.8g) are too alike to check order", a + 1, b + 1, p1[2 * a], p1[2 * b]);
}

static void test_indivisible_global_batch_stops_all_ranks(void **state) {
  (void)state;
  char out[512];
  snprintf(out, sizeof out, "%s/bad_batch", tmp);
  char *log = run(1, MPIRUN EST_BIN COMMON " --do_train --train_batch_size=3 --data_dir=%s --output_dir=%s", data, out);
  if (!strstr(log, "--train_batch_size=3 is the global batch and must be a multiple of the 2 ranks"))
    fail_msg("no clear message:\n%s", log);
  assert_null(strstr(log, "Collective timed out"));
  free(log);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_two_ranks_train_eval_predict),
    cmocka_unit_test(test_indivisible_global_batch_stops_all_ranks),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
