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

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "est/ckpt.h"
#include "est/est.h"
#include "estimator_test_model.h"
#include "test_util.h"

#include "scripted_eval_model.h"

/* train_and_evaluate to MAX_STEPS with the no-decrease hook; the global step it ended at. */
static est_status run(const char *dir, int64_t kill_at, int64_t *final_step) {
  tm_data data;
  tm_data_make(&data, 40, 3, 1);
  est_estimator *e;
  est_early_stopping es;
  est_session_run_hook hook;
  est_status st = scripted_estimator_create(&e, dir, &kill_at);
  if (st == EST_OK) st = est_stop_if_no_decrease_hook(&es, e, "loss", 3, 0, 1, &hook);
  est_train_spec ts = {.input_fn = {.open = tm_open, .ctx = &data}, .max_steps = MAX_STEPS, .hooks = &hook, .num_hooks = 1};
  est_eval_spec ev = {.input_fn = {.open = tm_open, .ctx = &data}, .every_n_steps = 1};
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

/* ... and its log names step 7, where training stops. (TF's hook logs the global step it
 * fetched with the train op, before that op's update: "at global step 6", then stops at 7.) */
static void test_stops_at_tf_step(void **state) {
  (void)state;
  const char *dir = test_tmp_path("plain");
  char log_path[1024];
  snprintf(log_path, sizeof log_path, "%s", test_tmp_path("plain.log"));
  FILE *log = fopen(log_path, "w");
  assert_non_null(log);
  est_log_set_stream(log);
  est_log_set_level(EST_LOG_INFO);
  int64_t final_step = -1;
  est_status st = run(dir, -1, &final_step);
  est_log_set_level(EST_LOG_WARN);
  est_log_set_stream(stderr);
  assert_int_equal(st, EST_OK);
  assert_int_equal(final_step, 7);
  assert_stopped_at_7(dir);
  fclose(log);
  char *text = test_read_file(log_path, NULL);
  assert_int_equal(test_count_lines_with(text, "Requesting early stopping at global step", ""), 1);
  if (!strstr(text, "Requesting early stopping at global step 7\n")) fail_msg("%s", text);
  free(text);
}

static void test_same_step_after_kill_and_restart(void **state) {
  (void)state;
  const char *dir = test_tmp_path("killed");
  run_killed_child("test_early_stopping", dir);
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

/* read_eval_metrics as TF's (early_stopping.py, checked against its source): the scalars
 * of a step are merged over its events (dict.update), a step lacking the metric fails only
 * where the hook looks (step >= min_steps; TF's KeyError), and a corrupted record skips the
 * rest of its file (TF's _summaries on DataLossError) instead of failing. */
static void test_reads_eval_events_as_tf(void **state) {
  (void)state;
  const char *dir = test_tmp_path("events");
  est_events_writer *w;
  assert_int_equal(est_events_writer_open(&w, dir), EST_OK);
  assert_int_equal(est_events_writer_add_scalar(w, 0, "other", 1.0f), EST_OK);   /* step 0: no loss */
  assert_int_equal(est_events_writer_add_scalar(w, 1, "loss", 5.0f), EST_OK);
  assert_int_equal(est_events_writer_add_scalar(w, 2, "loss", 3.0f), EST_OK);
  assert_int_equal(est_events_writer_add_scalar(w, 2, "other", 2.0f), EST_OK);   /* merged, loss kept */
  assert_int_equal(est_events_writer_add_scalar(w, 3, "loss", 4.0f), EST_OK);
  assert_int_equal(est_events_writer_add_scalar(w, 4, "loss", 4.5f), EST_OK);
  assert_int_equal(est_events_writer_close(w), EST_OK);
  est_early_stopping es = {.kind = EST_STOP_IF_NO_DECREASE, .max_steps_without_improvement = 2, .min_steps = 1,
                           .run_every_steps = 1, .last_checked_step = -1};
  snprintf(es.eval_dir, sizeof es.eval_dir, "%s", dir);
  snprintf(es.metric_name, sizeof es.metric_name, "loss");
  int stop = -1;
  assert_int_equal(est_early_stopping_should_stop(&es, &stop), EST_OK);
  assert_int_equal(stop, 1);   /* best 3.0 at step 2, step 4: 2 steps */
  es.min_steps = 0;            /* now step 0 is looked at: it has no loss */
  assert_int_equal(est_early_stopping_should_stop(&es, &stop), EST_ERR_NOT_FOUND);
  assert_non_null(strstr(est_error_message(), "step 0 has no metric 'loss'"));
  /* Corrupt the CRC of the record of step 3's event: steps 3 and 4 are skipped, no error. */
  DIR *d = opendir(dir);
  struct dirent *ent;
  char path[2048] = "";
  while ((ent = readdir(d)))
    if (!strncmp(ent->d_name, "events.out.tfevents.", 20)) snprintf(path, sizeof path, "%s/%s", dir, ent->d_name);
  closedir(d);
  size_t size;
  uint8_t *bytes = (uint8_t *)test_read_file(path, &size);
  size_t off = 0, record = 0;   /* records: file_version, then one per scalar event */
  while (record < 5) {          /* skip to the 6th record: step 3's loss */
    uint64_t len;
    memcpy(&len, bytes + off, 8);
    off += 8 + 4 + len + 4, record++;
  }
  bytes[off + 8] ^= 0xff;       /* its length's CRC */
  FILE *f = fopen(path, "wb");
  fwrite(bytes, 1, size, f);
  fclose(f);
  free(bytes);
  int64_t *steps;
  double *values;
  size_t n;
  assert_int_equal(est_read_eval_metric(dir, "loss", &steps, &values, &n), EST_ERR_NOT_FOUND);   /* step 0 */
  es.min_steps = 1;
  assert_int_equal(est_early_stopping_should_stop(&es, &stop), EST_OK);
  assert_int_equal(stop, 0);   /* only steps 1, 2 left */
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
      cmocka_unit_test(test_reads_eval_events_as_tf),
  };
  return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
