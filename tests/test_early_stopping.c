/* Early stopping (est/early_stopping.h) on a scripted model whose evaluation loss at each
 * global step is a known number: train_and_evaluate with every_n_steps = 1 evaluates every
 * checkpoint, and stop_if_no_decrease_hook("loss", 3, run_every_steps = 1) stops where
 * tf.estimator.experimental's hook does:
 *
 *   step   1    2    3    4    5    6    7
 *   loss   5.0  4.0  4.5  3.0  3.5  3.2  3.1
 *
 * best 3.0 at step 4; at step 7 no decrease for 7 - 4 = 3 >= 3 steps. TF's hook reads the
 * evaluation of checkpoint 7 in the after_run that saved it (the chief's saver runs before
 * the caller's hooks), so training ends at global step 7. The same run killed with SIGKILL
 * in step 5 and restarted stops at step 7 too (it reads the killed run's evaluations from
 * eval/). Also: eval/results.txt holds a line per evaluation, and the threshold hooks and
 * min_steps decide on the same evaluations as TF's functions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "est/ckpt.h"
#include "est/est.h"
#include "estimator_test_model.h"
#include "test_util.h"

enum { MAX_STEPS = 20 };
static const float SCRIPT[MAX_STEPS + 1] = {9, 5.0f, 4.0f, 4.5f, 3.0f, 3.5f, 3.2f, 3.1f, 2.0f, 1.0f, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};

/* The scripted model: one variable, a constant training loss with zero gradients, and
 * an evaluation loss of SCRIPT[global step of the checkpoint]. kill_at: SIGKILL in the
 * middle of that training step (-1: never). */
typedef struct scripted {
  int w;
  int64_t kill_at;
} scripted;

static est_status sc_build(const est_model_context *ctx, est_var_store *vs, void **out) {
  scripted *m = calloc(1, sizeof *m);
  m->kill_at = *(const int64_t *)ctx->params;
  *out = m;
  return est_vars_declare(vs, "w", 1, (int64_t[]){1}, est_init_zeros(), &m->w);
}

static est_status sc_call(void *model, est_var_store *vs, const est_features *f, est_mode mode, int64_t gs,
                          est_estimator_spec *spec) {
  (void)vs, (void)f;
  const scripted *m = model;
  if (mode == EST_MODE_TRAIN && gs == m->kill_at) raise(SIGKILL);
  spec->loss = mode == EST_MODE_EVAL ? SCRIPT[gs <= MAX_STEPS ? gs : MAX_STEPS] : 1.0f;
  return EST_OK;
}

static est_status sc_optimizer(void *model, est_var_store *vs, est_optimizer **out) {
  (void)model;
  est_adam_weight_decay_config c = bert_awd_config();
  c.init_lr = 0.01;
  c.schedule = est_lr_schedule_bert(MAX_STEPS, 0);
  return est_optimizer_create_adam_weight_decay(out, vs, &c);
}

/* train_and_evaluate to MAX_STEPS with the no-decrease hook; the global step it ended at. */
static est_status run(const char *dir, int64_t kill_at, int64_t *final_step) {
  tm_data data;
  tm_data_make(&data, 40, 3, 1);
  est_model_fn fn = {.name = "scripted", .params = &kill_at, .build = sc_build, .create_optimizer = sc_optimizer,
                     .call = sc_call, .destroy = free};
  est_run_config rc = est_run_config_default();
  rc.model_dir = dir, rc.seed = 3, rc.train_batch_size = 4, rc.eval_batch_size = 40;
  rc.save_checkpoints_steps = 1000, rc.log_step_count_steps = 1000, rc.save_summary_steps = 0;
  est_estimator *e = NULL;
  est_early_stopping es;
  est_session_run_hook hook;
  est_status st = est_estimator_create(&e, &fn, &rc);
  if (st == EST_OK) st = est_stop_if_no_decrease_hook(&es, e, "loss", 3, 0, 1, &hook);
  est_train_spec ts = {.input_fn = {tm_open, &data}, .max_steps = MAX_STEPS, .hooks = &hook, .num_hooks = 1};
  est_eval_spec ev = {.input_fn = {tm_open, &data}, .every_n_steps = 1};
  est_eval_result r = {0};
  if (st == EST_OK) st = est_train_and_evaluate(e, &ts, &ev, &r);
  *final_step = r.global_step;
  est_eval_result_clear(&r);
  est_estimator_free(e);
  tm_data_free(&data);
  return st;
}

static void assert_stopped_at_7(const char *dir) {
  char prefix[1024], expect[64];
  assert_int_equal(est_ckpt_latest(dir, prefix, sizeof prefix), EST_OK);
  assert_non_null(strstr(prefix, "model.ckpt-7"));
  char *results = test_read_in(dir, "eval/results.txt");
  for (int s = 1; s <= 7; s++) {
    snprintf(expect, sizeof expect, "global_step = %d, loss = ", s);
    assert_int_equal(test_count_lines_with(results, expect, ""), 1);
  }
  assert_int_equal(test_count_lines_with(results, "global_step = 8", ""), 0);
  free(results);
}

static void test_stops_at_tf_step(void **state) {
  (void)state;
  const char *dir = test_tmp_path("plain");
  int64_t final_step = -1;
  assert_int_equal(run(dir, -1, &final_step), EST_OK);
  assert_int_equal(final_step, 7);
  assert_stopped_at_7(dir);
}

static void test_same_step_after_kill_and_restart(void **state) {
  (void)state;
  const char *dir = test_tmp_path("killed");
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {   /* a fresh process (OpenMP's threads do not survive a fork) */
    execl("/proc/self/exe", "test_early_stopping", "--killed-child", dir, (char *)NULL);
    _exit(127);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  int64_t final_step = -1;
  assert_int_equal(run(dir, -1, &final_step), EST_OK);
  assert_int_equal(final_step, 7);
  assert_stopped_at_7(dir);
}

/* TF's functions on the evaluations of steps 1..7 above. */
static void test_threshold_hooks_and_min_steps(void **state) {
  (void)state;
  const char *dir = test_tmp_path("thresholds");
  int64_t final_step;
  assert_int_equal(run(dir, -1, &final_step), EST_OK);
  est_model_fn fn = {.name = "scripted", .build = sc_build, .call = sc_call, .destroy = free};
  est_run_config rc = est_run_config_default();
  rc.model_dir = dir;
  est_estimator *e;
  assert_int_equal(est_estimator_create(&e, &fn, &rc), EST_OK);
  struct {
    int kind;
    double arg;
    int64_t min_steps;
    int stop;
  } cases[] = {
      {EST_STOP_IF_LOWER, 3.05, 0, 1},      /* 3.0 at step 4 */
      {EST_STOP_IF_LOWER, 3.0, 0, 0},       /* strictly lower */
      {EST_STOP_IF_HIGHER, 4.9, 0, 1},      /* 5.0 at step 1 */
      {EST_STOP_IF_HIGHER, 4.9, 2, 0},      /* step 1 ignored */
      {EST_STOP_IF_NO_INCREASE, 3, 0, 1},   /* max 5.0 at 1, step 4: 3 steps */
      {EST_STOP_IF_NO_INCREASE, 7, 0, 0},
      {EST_STOP_IF_NO_DECREASE, 3, 5, 0},   /* from step 5: best 3.1 at 7 */
      {EST_STOP_IF_NO_DECREASE, 1, 0, 1},   /* best 4.0 at 2, step 3: 1 step */
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    est_early_stopping es;
    est_session_run_hook h;
    est_status st;
    switch (cases[i].kind) {
      case EST_STOP_IF_LOWER: st = est_stop_if_lower_hook(&es, e, "loss", cases[i].arg, cases[i].min_steps, 1, &h); break;
      case EST_STOP_IF_HIGHER: st = est_stop_if_higher_hook(&es, e, "loss", cases[i].arg, cases[i].min_steps, 1, &h); break;
      case EST_STOP_IF_NO_INCREASE:
        st = est_stop_if_no_increase_hook(&es, e, "loss", (int64_t)cases[i].arg, cases[i].min_steps, 1, &h);
        break;
      default: st = est_stop_if_no_decrease_hook(&es, e, "loss", (int64_t)cases[i].arg, cases[i].min_steps, 1, &h);
    }
    assert_int_equal(st, EST_OK);
    int stop = -1;
    assert_int_equal(est_early_stopping_should_stop(&es, &stop), EST_OK);
    if (stop != cases[i].stop) fail_msg("case %zu: stop %d, want %d", i, stop, cases[i].stop);
  }
  /* A metric the evaluations lack is an error naming it, as TF's KeyError. */
  est_early_stopping es;
  est_session_run_hook h;
  assert_int_equal(est_stop_if_lower_hook(&es, e, "eval_accuracy", 0.5, 0, 1, &h), EST_OK);
  int stop;
  assert_int_equal(est_early_stopping_should_stop(&es, &stop), EST_ERR_NOT_FOUND);
  assert_non_null(strstr(est_error_message(), "has no metric 'eval_accuracy'"));
  assert_int_equal(est_stop_if_no_decrease_hook(&es, e, "loss", 0, 0, 1, &h), EST_ERR_INVALID_ARGUMENT);
  est_estimator_free(e);
}

int main(int argc, char **argv) {
  est_log_set_level(EST_LOG_WARN);
  if (argc == 3 && !strcmp(argv[1], "--killed-child")) {
    int64_t ignored;
    run(argv[2], 5, &ignored);
    return 3;   /* not reached: killed in step 5 */
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stops_at_tf_step),
      cmocka_unit_test(test_same_step_after_kill_and_restart),
      cmocka_unit_test(test_threshold_hooks_and_min_steps),
  };
  return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
