/* The fault seam (est/fault_hooks.h) and the shim that drives it in `est`
 * (tests/fault/fault_hooks.c):
 *
 *   - in process, a train call calls before_step once per step, in order, with rank 0 and
 *     the hooks' ctx; every checkpoint save calls checkpoint_phase at "bundle" (the files
 *     are complete, the state file does not name them) and then at "state" (it does, and
 *     the checkpoint that fell off keep_checkpoint_max is not deleted yet); with the hooks
 *     removed nothing is called;
 *   - the shim accepts the `est` binary (it exports est_set_fault_hooks), and fails loudly,
 *     never silently, on a program that does not export it and on a value it cannot parse.
 * The tests that use the seam to crash and preempt runs are test_resume.c (in process),
 * test_run_pretraining.c, test_preempt.c, test_preempt_pretraining.c and
 * test_mpi_preempt.c (through the shim). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "est/ckpt.h"
#include "est/est.h"
#include "est/fault_hooks.h"
#include "estimator_test_model.h"
#include "test_util.h"

enum { F = 3, STEPS = 6, MAX_EVENTS = 64 };

typedef struct recorder {
  const char *dir;
  int n;
  char events[MAX_EVENTS][64];   /* "step 3 rank 0", "save 2 bundle" */
} recorder;

static void add(recorder *r, const char *fmt, long long a, const char *b) {
  if (r->n < MAX_EVENTS) snprintf(r->events[r->n++], sizeof r->events[0], fmt, a, b);
}

static int exists(const char *dir, long long step, const char *suffix) {
  char path[1024];
  snprintf(path, sizeof path, "%s/model.ckpt-%lld%s", dir, step, suffix);
  return access(path, F_OK) == 0;
}

static void record_step(void *ctx, int rank, int64_t global_step) {
  char r[16];
  snprintf(r, sizeof r, "%d", rank);
  add(ctx, "step %lld rank %s", (long long)global_step, r);
}

/* Records the phase and checks what it promises about the files. */
static void record_phase(void *ctx, int64_t step, const char *phase) {
  recorder *r = ctx;
  add(r, "save %lld %s", (long long)step, phase);
  assert_true(exists(r->dir, step, ".index") && exists(r->dir, step, ".data-00000-of-00001"));
  char latest[1024] = "", want[64];
  est_status s = est_ckpt_latest(r->dir, latest, sizeof latest);
  if (s != EST_OK) est_error_clear();
  snprintf(want, sizeof want, "/model.ckpt-%lld", (long long)step);
  size_t nl = strlen(latest), nw = strlen(want);
  int named = s == EST_OK && nl >= nw && !strcmp(latest + nl - nw, want);
  if (!strcmp(phase, "bundle")) assert_false(named);
  else assert_true(named);
  /* keep_checkpoint_max 2: the save of step 4 drops step 0, whose files stay until after "state" */
  if (step == 4 && !strcmp(phase, "state")) assert_true(exists(r->dir, 0, ".index"));
}

static est_status train(const char *dir, tm_data *data, int64_t steps) {
  tm_params p = tm_params_default(F);
  p.num_train_steps = 2 * STEPS;
  est_model_fn fn = tm_model_fn(&p);
  est_run_config rc = est_run_config_default();
  rc.model_dir = dir;
  rc.train_batch_size = 4;
  rc.save_checkpoints_steps = 2;
  rc.keep_checkpoint_max = 2;
  est_estimator *e;
  est_input_fn in = {.open = tm_open, .ctx = data};
  est_status st = est_estimator_create(&e, &fn, &rc);
  if (st == EST_OK) st = est_estimator_train(e, &in, steps, 0);
  est_estimator_free(e);
  return st;
}

static void test_hooks_see_every_step_and_both_phases_of_every_save(void **state) {
  (void)state;
  est_log_set_level(EST_LOG_WARN);
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/seam", test_tmpdir);
  tm_data data;
  tm_data_make(&data, 20, F, 5);
  recorder r = {.dir = dir};
  assert_null(est_get_fault_hooks());
  est_set_fault_hooks(&(est_fault_hooks){.before_step = record_step, .checkpoint_phase = record_phase, .ctx = &r});
  assert_non_null(est_get_fault_hooks());
  assert_int_equal(train(dir, &data, STEPS), EST_OK);

  /* The steps in order; each save's "bundle" right before its "state"; the final save. */
  int64_t next_step = 0, saves = 0, last_save = -1;
  for (int i = 0; i < r.n; i++) {
    long long a;
    char word[16];
    if (sscanf(r.events[i], "step %lld rank %15s", &a, word) == 2) {
      assert_int_equal(a, next_step++);
      assert_string_equal(word, "0");
    } else {
      assert_int_equal(sscanf(r.events[i], "save %lld %15s", &a, word), 2);
      assert_string_equal(word, "bundle");
      assert_true(i + 1 < r.n);
      char want[64];
      snprintf(want, sizeof want, "save %lld state", a);
      assert_string_equal(r.events[++i], want);
      saves++, last_save = a;
    }
  }
  assert_int_equal(next_step, STEPS);
  assert_true(saves >= 3);              /* 2, 4, 6 at least (and 0 where the first step saves) */
  assert_int_equal(last_save, STEPS);

  /* Removed: a further train call calls nothing. */
  est_set_fault_hooks(NULL);
  assert_null(est_get_fault_hooks());
  int before = r.n;
  assert_int_equal(train(dir, &data, 2), EST_OK);
  assert_int_equal(r.n, before);
  tm_data_free(&data);
}

#define SHIM "LD_PRELOAD='" EST_FAULT_HOOKS_SHIM "' ASAN_OPTIONS=\"$ASAN_OPTIONS:verify_asan_link_order=0\" "

static void test_shim_finds_the_seam_in_est(void **state) {
  (void)state;
  free(test_run_ok(SHIM "EST_FAULT_KILL_SAVE=3:state EST_FAULT_SIGNAL_AT_STEP=2:15:1:1 " EST_BIN " --version"));
  free(test_run_ok(SHIM "EST_FAULT_SIGNAL_AT_STEP= " EST_BIN " --version"));   /* empty: nothing to do */
}

/* A drill that cannot happen is a broken test: abort with a message, never a silent pass. */
static void test_shim_fails_loudly(void **state) {
  (void)state;
  char *log = NULL;
  int rc = test_run(&log, 1, SHIM "EST_FAULT_KILL_SAVE=3:state /bin/true");
  if (rc == 0 || !strstr(log, "exports no est_set_fault_hooks")) fail_msg("exit %d:\n%s", rc, log);
  free(log);
  const char *bad[] = {"EST_FAULT_KILL_SAVE=3:saving", "EST_FAULT_KILL_SAVE=state", "EST_FAULT_SIGNAL_AT_STEP=4",
                       "EST_FAULT_SIGNAL_AT_STEP=4:15:9", "EST_FAULT_SIGNAL_AT_STEP=4:15:1:x"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    rc = test_run(&log, 1, SHIM "%s " EST_BIN " --version", bad[i]);
    if (rc == 0 || !strstr(log, "fault_hooks: ") || !strstr(log, "want <step>")) fail_msg("%s: exit %d:\n%s", bad[i], rc, log);
    free(log);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hooks_see_every_step_and_both_phases_of_every_save),
      cmocka_unit_test(test_shim_finds_the_seam_in_est),
      cmocka_unit_test(test_shim_fails_loudly),
  };
  return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
