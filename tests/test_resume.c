/* Exact resume: a training process killed with SIGKILL at any moment and restarted with
 * the same command ends with parameters (and optimizer slots, global_step, input
 * position) bit-identical to an uninterrupted run.
 *
 * The test re-executes itself as the training child (`test_resume --child DIR KILL_AT
 * SAVE_STEPS [STEP:PHASE]`). Kills come three ways: the model raises SIGKILL in the middle
 * of step KILL_AT (deterministic points: right after the first step, mid-run, the last
 * step); a checkpoint_phase hook of libest's fault seam (est/fault_hooks.h, installed by
 * the child) raises it inside the save of STEP at PHASE; and the parent kills the child
 * after pseudo-random delays while it checkpoints every step, so some kills land inside
 * checkpoint writes. The model uses input dropout drawn from (seed, global_step) and the
 * input crosses epoch boundaries inside batches, so the RNG and the input position must
 * both come back exactly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "est/est.h"
#include "est/ckpt.h"
#include "est/estimator.h"
#include "est/fault_hooks.h"
#include "estimator_test_model.h"
#include "test_util.h"

enum { F = 5, N_EXAMPLES = 50, MAX_STEPS = 40 };

/* ---- the child: one training run ---------------------------------------------------------- */

/* The kill inside a save (the fault seam, est/fault_hooks.h, installed in this process):
 * SIGKILL at phase kill_phase ("bundle" or "state") of the save of step kill_save_step. */
static long kill_save_step = -1;
static char kill_phase[16];

static void kill_in_save(void *ctx, int64_t step, const char *phase) {
  (void)ctx;
  if (step == kill_save_step && !strcmp(phase, kill_phase)) raise(SIGKILL);
}

/* `fault`: NULL, or "<step>:<phase>", the save to die in. */
static int child_main(const char *dir, long kill_at, long save_steps, const char *fault) {
  est_log_set_level(EST_LOG_WARN);
  if (fault) {
    char *end;
    kill_save_step = strtol(fault, &end, 10);
    if (*end != ':' || (strcmp(end + 1, "bundle") && strcmp(end + 1, "state"))) {
      fprintf(stderr, "child: bad fault %s\n", fault);
      return 2;
    }
    snprintf(kill_phase, sizeof kill_phase, "%s", end + 1);
    est_set_fault_hooks(&(est_fault_hooks){.checkpoint_phase = kill_in_save});
  }
  tm_data data;
  tm_data_make(&data, N_EXAMPLES, F, 21);   /* 50 examples, batch 16: batches straddle epochs */
  tm_params p = tm_params_default(F);
  p.kill_at_step = kill_at;
  p.lr = 0.05;
  p.num_train_steps = MAX_STEPS;
  p.num_warmup_steps = 4;
  est_model_fn fn = tm_model_fn(&p);
  est_run_config rc = est_run_config_default();
  rc.model_dir = dir;
  rc.seed = 777;
  rc.train_batch_size = 16;
  rc.save_checkpoints_steps = save_steps;
  rc.keep_checkpoint_max = 3;
  rc.log_step_count_steps = 10;
  rc.save_summary_steps = 5;
  est_estimator *e;
  est_input_fn in = {.open = tm_open, .ctx = &data};
  est_status st = est_estimator_create(&e, &fn, &rc);
  if (st == EST_OK) st = est_estimator_train(e, &in, 0, MAX_STEPS);
  if (st != EST_OK) fprintf(stderr, "child: %s\n", est_error_message());
  est_estimator_free(e);
  tm_data_free(&data);
  return st == EST_OK ? 0 : 1;
}

/* ---- the parent ---------------------------------------------------------------------------- */

static char g_self[4096];

/* Killing a process does not need fsync to be durable (only power loss does), so the
 * runs go to tmpfs when there is one: checkpoint writes there cost microseconds, not the
 * tens of milliseconds of a disk fsync, and the test stays fast. */
static void make_dir(char *buf, size_t size) {
  if (access("/dev/shm", W_OK) == 0) {
    snprintf(buf, size, "/dev/shm/est-resume-XXXXXX");
    if (mkdtemp(buf)) return;
  }
  test_make_tmpdir(buf, size);
}

/* Temporary files of an atomic write (est_atomic_*: "<path>.tmp.<pid>.<n>") left behind
 * show that a kill landed in the middle of a checkpoint write. */
static int has_temp_files(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  struct dirent *ent;
  int found = 0;
  while ((ent = readdir(d))) found |= strstr(ent->d_name, ".tmp.") != NULL;
  closedir(d);
  return found;
}

static pid_t spawn_fault(const char *dir, long kill_at, long save_steps, const char *fault) {
  pid_t pid = fork();
  if (pid == 0) {
    char k[32], s[32];
    snprintf(k, sizeof k, "%ld", kill_at);
    snprintf(s, sizeof s, "%ld", save_steps);
    /* Idle OpenMP threads sleep instead of spinning: same numbers, much faster start-up. */
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    execl(g_self, g_self, "--child", dir, k, s, fault, (char *)NULL);   /* fault NULL: 4 args */
    _exit(127);
  }
  return pid;
}

/* 0: exited 0; 1: killed by SIGKILL; -1: anything else. */
static int wait_child(pid_t pid) {
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  if (WIFEXITED(status)) return WEXITSTATUS(status) == 0 ? 0 : -1;
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) return 1;
  return -1;
}

static pid_t spawn(const char *dir, long kill_at, long save_steps) {
  return spawn_fault(dir, kill_at, save_steps, NULL);
}

static int run_child(const char *dir, long kill_at, long save_steps) {
  return wait_child(spawn(dir, kill_at, save_steps));
}

/* Every tensor of the final checkpoint, concatenated with its name: the bytes to compare. */
static uint8_t *final_state(const char *dir, size_t *size) {
  char prefix[4096];
  assert_int_equal(est_ckpt_latest(dir, prefix, sizeof prefix), EST_OK);
  char want[64];
  snprintf(want, sizeof want, "model.ckpt-%d", MAX_STEPS);
  assert_non_null(strstr(prefix, want));
  est_ckpt_reader *r;
  assert_int_equal(est_ckpt_reader_open(&r, prefix), EST_OK);
  size_t cap = 1 << 16, len = 0;
  uint8_t *buf = malloc(cap);
  for (size_t i = 0; i < est_ckpt_reader_count(r); i++) {
    est_tensor t;
    assert_int_equal(est_ckpt_reader_read(r, est_ckpt_reader_name(r, i), &t), EST_OK);
    const char *name = est_ckpt_reader_name(r, i);
    size_t nb = est_tensor_num_bytes(&t), nl = strlen(name) + 1;
    assert_true(len + nl + nb <= cap);
    memcpy(buf + len, name, nl), len += nl;
    memcpy(buf + len, t.data, nb), len += nb;
    est_tensor_free(&t);
  }
  /* What the test compares must include the parameters and the Adam slots. */
  assert_true(est_ckpt_reader_has(r, "dense/kernel"));
  assert_true(est_ckpt_reader_has(r, "dense/kernel/adam_v"));
  est_ckpt_reader_close(r);
  *size = len;
  return buf;
}

static uint8_t *g_ref;
static size_t g_ref_size;

static int setup_reference(void **state) {
  (void)state;
  char dir[256];
  make_dir(dir, sizeof dir);
  if (run_child(dir, -1, 7) != 0) return -1;
  g_ref = final_state(dir, &g_ref_size);
  test_remove_tree(dir);
  return 0;
}

static int teardown_reference(void **state) {
  (void)state;
  free(g_ref);
  return 0;
}

static void assert_same_as_reference(const char *dir) {
  size_t size;
  uint8_t *got = final_state(dir, &size);
  assert_int_equal(size, g_ref_size);
  assert_memory_equal(got, g_ref, size);
  free(got);
}

/* Killed in the middle of chosen steps, restarted each time with the same command. */
static void test_kill_at_chosen_steps(void **state) {
  (void)state;
  const long points[][3] = {{1, 20, -1}, {7, 8, -1}, {39, -1, -1}, {13, 27, 34}};
  for (size_t i = 0; i < sizeof points / sizeof *points; i++) {
    char dir[256];
    make_dir(dir, sizeof dir);
    for (int k = 0; k < 3 && points[i][k] >= 0; k++) assert_int_equal(run_child(dir, points[i][k], 7), 1);
    assert_int_equal(run_child(dir, -1, 7), 0);
    assert_same_as_reference(dir);
    test_remove_tree(dir);
  }
}

/* Killed at the worst moments of a save: checkpoint complete but not yet in the state
 * file, and state file updated but old checkpoints not yet deleted (keep max 3). */
static void test_kill_inside_checkpoint_saves(void **state) {
  (void)state;
  const char *faults[][3] = {{"0:bundle", "14:state", NULL}, {"7:bundle", "21:bundle", "40:bundle"},
                             {"7:state", "28:state", "40:state"}};
  for (size_t i = 0; i < sizeof faults / sizeof *faults; i++) {
    char dir[256];
    make_dir(dir, sizeof dir);
    for (int k = 0; k < 3 && faults[i][k]; k++) assert_int_equal(wait_child(spawn_fault(dir, -1, 7, faults[i][k])), 1);
    assert_int_equal(run_child(dir, -1, 7), 0);
    assert_same_as_reference(dir);
    test_remove_tree(dir);
  }
}

/* Killed after pseudo-random delays while saving a checkpoint every 4 steps. */
static void test_kill_at_random_moments(void **state) {
  (void)state;
  char dir[256];
  /* On the real disk (TMPDIR): an fsync'ed write there takes long enough that some kills
   * land inside one, leaving its temporary file behind. */
  test_make_tmpdir(dir, sizeof dir);
  /* How long an uninterrupted run takes here, to spread the kills over it. */
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  assert_int_equal(run_child(dir, -1, 4), 0);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  assert_same_as_reference(dir);   /* the save cadence does not change the result */
  test_remove_tree(dir);
  long run_us = (long)((t1.tv_sec - t0.tv_sec) * 1000000L + (t1.tv_nsec - t0.tv_nsec) / 1000);
  if (run_us < 1000) run_us = 1000;

  test_make_tmpdir(dir, sizeof dir);
  est_rng rng;
  est_rng_init(&rng, 4242);
  /* Delays within the first half of a full run's time. A resumed run has less left to
   * do and may finish before its kill: when that happens before three kills, the bound
   * halves and the sequence starts over in a fresh directory, so the test never depends
   * on how fast this machine is. */
  long bound = run_us / 2;
  int kills = 0, mid_write = 0, finished = 0;
  for (int attempt = 0; attempt < 40 && !finished; attempt++) {
    pid_t pid = spawn(dir, -1, 4);
    long delay = (long)est_rng_below(&rng, (uint64_t)bound + 1);
    struct timespec ts = {delay / 1000000L, (delay % 1000000L) * 1000L};
    nanosleep(&ts, NULL);
    kill(pid, SIGKILL);
    int r = wait_child(pid);
    assert_true(r == 0 || r == 1);
    if (r == 1) {
      kills++;
      mid_write += has_temp_files(dir);
    } else if (kills >= 3) {
      finished = 1;
    } else {
      assert_same_as_reference(dir);
      test_remove_tree(dir);
      test_make_tmpdir(dir, sizeof dir);
      kills = mid_write = 0;
      bound = bound / 2 > 100 ? bound / 2 : 100;
    }
  }
  if (!finished) assert_int_equal(run_child(dir, -1, 4), 0);
  print_message("random kills: %d (%d left a checkpoint write unfinished)\n", kills, mid_write);
  assert_true(kills >= 3);
  assert_same_as_reference(dir);
  test_remove_tree(dir);
}

int main(int argc, char **argv) {
  if ((argc == 5 || argc == 6) && !strcmp(argv[1], "--child"))
    return child_main(argv[2], atol(argv[3]), atol(argv[4]), argc == 6 ? argv[5] : NULL);
  ssize_t n = readlink("/proc/self/exe", g_self, sizeof g_self - 1);
  if (n <= 0) return 1;
  g_self[n] = 0;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_kill_at_chosen_steps),
      cmocka_unit_test(test_kill_inside_checkpoint_saves),
      cmocka_unit_test(test_kill_at_random_moments),
  };
  return cmocka_run_group_tests(tests, setup_reference, teardown_reference);
}
