/* est's threads: the default count follows the CPUs the process may use, and commands
 * that do no math run on one thread.
 *
 * Commands that do no math run on one thread: `est tokenize`, `convert`, `tfrecord` and
 * `ckpt` start neither OpenBLAS's pool (Debian's pthread OpenBLAS starts one in its library
 * constructor) nor OpenMP's.
 *
 * Each command gets one of its input files as a FIFO. Opening the FIFO for writing blocks
 * until the command opens it for reading, i.e. until est is past main()'s start-up and
 * inside the command; the test then counts the entries of /proc/PID/task, writes the real
 * file through the FIFO, and checks that the command succeeded on it. Before the fix the
 * count was 2 for as long as the process lived (OpenBLAS's worker sleeps, but exists). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <signal.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>

#include <sched.h>

#include "core/threads_internal.h"
#include "est/est.h"
#include "test_util.h"

static int count_threads(pid_t pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
  DIR *d = opendir(path);
  if (!d) return -1;
  int n = 0;
  for (struct dirent *e; (e = readdir(d));)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

/* Starts EST_BIN with args (NULL-terminated, without the program name; extra_env, if not
 * NULL, is put into its environment) and returns once it has opened the FIFO `fifo` that
 * args name (ENXIO until then), i.e. once est is past main()'s start-up and inside the
 * command; *fd is the FIFO's writing end. */
static pid_t start_reading(const char *fifo, const char *const *args, const char *extra_env, int *fd) {
  assert_int_equal(mkfifo(fifo, 0600), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int null = open("/dev/null", O_RDWR);
    dup2(null, 0), dup2(null, 1), dup2(null, 2);
    unsetenv("OMP_WAIT_POLICY"), unsetenv("GOMP_SPINCOUNT"); /* whatever ran the test set */
    if (extra_env) putenv((char *)extra_env);
    char *argv[16] = {(char *)EST_BIN};
    for (int i = 0; args[i] && i < 14; i++) argv[i + 1] = (char *)args[i];
    execv(EST_BIN, argv);
    _exit(127);
  }
  int status;
  while ((*fd = open(fifo, O_WRONLY | O_NONBLOCK)) < 0) {
    assert_int_equal(errno, ENXIO);
    assert_int_equal(waitpid(pid, &status, WNOHANG), 0); /* est must not exit before reading */
    nanosleep(&(struct timespec){0, 1000 * 1000}, NULL);
  }
  assert_int_equal(fcntl(*fd, F_SETFL, 0), 0); /* blocking writes from here on */
  return pid;
}

/* Runs the command with `source` fed through `fifo`; returns the thread count seen while
 * the command waited on it, and checks the exit status is 0. */
static int threads_while_reading(const char *fifo, const char *source, const char *const *args) {
  int fd, status;
  pid_t pid = start_reading(fifo, args, NULL, &fd);
  /* A thread that was joined may linger in /proc for a moment: poll (up to 1 s) for the
   * count to reach 1; a pool that exists stays, so the loop cannot hide one. */
  int threads = count_threads(pid);
  for (int i = 0; i < 100 && threads != 1; i++) {
    nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    threads = count_threads(pid);
  }
  size_t size;
  char *data = test_read_file(source, &size);
  assert_non_null(data);
  assert_int_equal(write(fd, data, size), (ssize_t)size);
  free(data);
  close(fd);
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  unlink(fifo);
  return threads;
}

/* Whether the running process `pid` has `entry` ("NAME=value") in its environment. */
static int has_env(pid_t pid, const char *entry) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  for (size_t i = 0; i < n; i += strlen(buf + i) + 1)
    if (!strcmp(buf + i, entry)) return 1;
  return 0;
}

/* A math command runs with a short OpenMP spin (GOMP_SPINCOUNT, which libgomp reads only
 * at load time, so est executes itself again with it); a wait policy or spin count the
 * user set is left alone. */
static void spin_count_of(const char *extra_env, const char *expect, int present) {
  const char *vocab = test_tmp_path("vocab.txt");
  char flag[1100], out[1100];
  snprintf(flag, sizeof flag, "--vocab_file=%s", vocab);
  snprintf(out, sizeof out, "--output_dir=%s", test_tmp_path("out"));
  const char *args[] = {"run_classifier", "--task_name=MRPC", "--do_eval", "--data_dir=" EST_TEST_DATA "/glue_mini/MRPC",
                        flag, "--bert_config_file=" EST_TEST_DATA "/run_classifier/bert_config_h32.json", out, NULL};
  int fd, status;
  pid_t pid = start_reading(vocab, args, extra_env, &fd);
  assert_int_equal(has_env(pid, expect), present);
  kill(pid, SIGKILL);
  close(fd);
  assert_int_equal(waitpid(pid, &status, 0), pid);
  unlink(vocab);
}

static void test_math_commands_spin_briefly(void **state) {
  (void)state;
  spin_count_of(NULL, "GOMP_SPINCOUNT=1000", 1);
  spin_count_of("OMP_WAIT_POLICY=PASSIVE", "GOMP_SPINCOUNT=1000", 0);
  spin_count_of("GOMP_SPINCOUNT=77", "GOMP_SPINCOUNT=77", 1);
}

static void test_tokenize_runs_on_one_thread(void **state) {
  (void)state;
  const char *vocab = test_tmp_path("vocab.txt");
  char flag[1100];
  snprintf(flag, sizeof flag, "--vocab_file=%s", vocab);
  const char *args[] = {"tokenize", flag, NULL};
  assert_int_equal(threads_while_reading(vocab, EST_TEST_DATA "/vocab_uncased.txt", args), 1);
}

static void test_convert_runs_on_one_thread(void **state) {
  (void)state;
  const char *vocab = test_tmp_path("vocab.txt");
  char vflag[1100], oflag[1100];
  snprintf(vflag, sizeof vflag, "--vocab_file=%s", vocab);
  snprintf(oflag, sizeof oflag, "--output_dir=%s", test_tmp_path("out"));
  const char *args[] = {"convert", "--task_name=MRPC", "--data_dir=" EST_TEST_DATA "/glue_mini/MRPC", vflag,
                        "--max_seq_length=32", "--splits=dev", oflag, NULL};
  assert_int_equal(threads_while_reading(vocab, EST_TEST_DATA "/vocab_uncased.txt", args), 1);
  assert_true(est_file_exists(test_tmp_path("out/eval.tf_record")));
}

static void test_tfrecord_runs_on_one_thread(void **state) {
  (void)state;
  const char *file = test_tmp_path("eval.tf_record");
  const char *args[] = {"tfrecord", "count", file, NULL};
  assert_int_equal(threads_while_reading(file, EST_TEST_DATA "/mrpc_eval.tf_record", args), 1);
}

static void test_ckpt_runs_on_one_thread(void **state) {
  (void)state;
  const char *index = test_tmp_path("model.ckpt.index");
  const char *args[] = {"ckpt", "ls", test_tmp_path("model.ckpt"), NULL};
  assert_int_equal(threads_while_reading(index, EST_TEST_DATA "/keras_bert_tiny/bert_model.ckpt.index", args), 1);
}

static void test_cpu_max_quota(void **state) {
  (void)state;
  assert_int_equal(est_threads_from_cpu_max("max 100000\n"), 0);     /* no limit */
  assert_int_equal(est_threads_from_cpu_max("100000 100000\n"), 1);
  assert_int_equal(est_threads_from_cpu_max("150000 100000\n"), 2); /* --cpus=1.5: round up */
  assert_int_equal(est_threads_from_cpu_max("50000 100000"), 1);
  assert_int_equal(est_threads_from_cpu_max("800000 100000"), 8);
  assert_int_equal(est_threads_from_cpu_max(""), 0);
  assert_int_equal(est_threads_from_cpu_max("-1 100000"), 0);
  assert_int_equal(est_threads_from_cpu_max(NULL), 0);
}

/* With OMP_NUM_THREADS unset, the default follows the affinity mask: pinned to one CPU,
 * one thread; OMP_NUM_THREADS, when set, wins. */
static void test_default_follows_affinity(void **state) {
  (void)state;
  char *saved = getenv("OMP_NUM_THREADS") ? strdup(getenv("OMP_NUM_THREADS")) : NULL;
  cpu_set_t all, one;
  assert_int_equal(sched_getaffinity(0, sizeof all, &all), 0);
  int first = 0;
  while (!CPU_ISSET(first, &all)) first++;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  unsetenv("OMP_NUM_THREADS");
  assert_true(est_default_num_threads() <= CPU_COUNT(&all));
  assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
  assert_int_equal(est_default_num_threads(), 1);
  setenv("OMP_NUM_THREADS", "3", 1);
  assert_int_equal(est_default_num_threads(), 3);
  est_set_num_threads(0);
  assert_int_equal(est_get_num_threads(), 3);
  assert_int_equal(sched_setaffinity(0, sizeof all, &all), 0);
  if (saved) setenv("OMP_NUM_THREADS", saved, 1);
  else unsetenv("OMP_NUM_THREADS");
  free(saved);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_cpu_max_quota),
    cmocka_unit_test(test_default_follows_affinity),
    cmocka_unit_test_setup_teardown(test_tokenize_runs_on_one_thread, test_tmpdir_setup, test_tmpdir_teardown),
    cmocka_unit_test_setup_teardown(test_convert_runs_on_one_thread, test_tmpdir_setup, test_tmpdir_teardown),
    cmocka_unit_test_setup_teardown(test_tfrecord_runs_on_one_thread, test_tmpdir_setup, test_tmpdir_teardown),
    cmocka_unit_test_setup_teardown(test_ckpt_runs_on_one_thread, test_tmpdir_setup, test_tmpdir_teardown),
    cmocka_unit_test_setup_teardown(test_math_commands_spin_briefly, test_tmpdir_setup, test_tmpdir_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
