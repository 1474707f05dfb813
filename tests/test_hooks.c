/* Training hooks (est/estimator.h, "hooks"; docs/hooks.md): a caller's hook sees begin,
 * after_create_session, before_run / after_run around every step with its record, and end,
 * in that order; a stop it requests ends training after that step with the final
 * checkpoint saved and end called; an error it returns ends training naming it; and a
 * hook that only watches leaves every checkpoint byte-identical to a run without it.
 * Model: tests/estimator_test_model.h's logistic regression, batch 16. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "est/ckpt.h"
#include "est/est.h"
#include "estimator_test_model.h"
#include "test_util.h"

enum { F = 5, N_EXAMPLES = 50, MAX_STEPS = 7, MAX_CALLS = 64 };

/* A hook that writes down every call; stop_after / fail_after: the global step after whose
 * after_run it requests a stop / returns an error (-1: never). */
typedef struct recorder {
  char calls[MAX_CALLS];       /* 'b' begin, 'c' after_create_session, '<' before_run, '>' after_run, 'e' end */
  int n;
  int64_t before_steps[MAX_CALLS], after_steps[MAX_CALLS], step_after_update[MAX_CALLS];
  est_step_record records[MAX_CALLS];
  int nb, na;
  char checkpoint_at_create[1024], checkpoint_at_end[1024];
  int64_t stop_after, fail_after;
} recorder;

static void note(recorder *r, char c) {
  if (r->n < MAX_CALLS) r->calls[r->n++] = c;
}

static est_status rec_begin(void *self, est_hook_run *run) {
  (void)run;
  note(self, 'b');
  return EST_OK;
}

static est_status rec_after_create_session(void *self, est_hook_run *run) {
  recorder *r = self;
  note(r, 'c');
  snprintf(r->checkpoint_at_create, sizeof r->checkpoint_at_create, "%s", est_hook_last_checkpoint(run));
  return EST_OK;
}

static est_status rec_before_run(void *self, est_hook_run *run, int64_t global_step) {
  recorder *r = self;
  (void)run;
  note(r, '<');
  if (r->nb < MAX_CALLS) r->before_steps[r->nb++] = global_step;
  return EST_OK;
}

static est_status rec_after_run(void *self, est_hook_run *run, const est_step_record *step) {
  recorder *r = self;
  note(r, '>');
  if (r->na < MAX_CALLS) {
    r->records[r->na] = *step;
    r->step_after_update[r->na++] = est_hook_global_step(run);
  }
  if (step->global_step == r->fail_after) return est_error(EST_ERR_INTERNAL, "the recorder fails on purpose");
  if (step->global_step == r->stop_after) est_hook_request_stop(run);
  return EST_OK;
}

static est_status rec_end(void *self, est_hook_run *run) {
  recorder *r = self;
  note(r, 'e');
  snprintf(r->checkpoint_at_end, sizeof r->checkpoint_at_end, "%s", est_hook_last_checkpoint(run));
  return EST_OK;
}

static est_session_run_hook recorder_hook(recorder *r) {
  return (est_session_run_hook){.name = "recorder", .self = r, .begin = rec_begin,
                                .after_create_session = rec_after_create_session, .before_run = rec_before_run,
                                .after_run = rec_after_run, .end = rec_end};
}

/* Trains MAX_STEPS steps in `dir` with the hooks given (none: plain est_estimator_train). */
static est_status train(const char *dir, const est_session_run_hook *hooks, size_t n) {
  tm_data data;
  tm_data_make(&data, N_EXAMPLES, F, 21);
  tm_params p = tm_params_default(F);
  p.lr = 0.05, p.num_train_steps = MAX_STEPS, p.num_warmup_steps = 2;
  est_model_fn fn = tm_model_fn(&p);
  est_run_config rc = est_run_config_default();
  rc.model_dir = dir, rc.seed = 777, rc.train_batch_size = 16;
  rc.save_checkpoints_steps = 3, rc.log_step_count_steps = 2, rc.save_summary_steps = 2;
  est_estimator *e;
  est_input_fn in = {.open = tm_open, .ctx = &data};
  est_status st = est_estimator_create(&e, &fn, &rc);
  if (st == EST_OK)
    st = hooks ? est_estimator_train_with_hooks(e, &in, 0, MAX_STEPS, hooks, n) : est_estimator_train(e, &in, 0, MAX_STEPS);
  est_estimator_free(e);
  tm_data_free(&data);
  return st;
}

static void test_calls_in_order_with_step_records(void **state) {
  (void)state;
  recorder r = {.stop_after = -1, .fail_after = -1};
  est_session_run_hook h = recorder_hook(&r);
  const char *dir = test_tmp_path("order");
  assert_int_equal(train(dir, &h, 1), EST_OK);
  r.calls[r.n] = 0;
  assert_string_equal(r.calls, "bc<><><><><><><>e");
  assert_non_null(strstr(r.checkpoint_at_create, "model.ckpt-0"));   /* the fresh start, saved */
  assert_non_null(strstr(r.checkpoint_at_end, "model.ckpt-7"));      /* end sees the final save */
  assert_int_equal(r.na, MAX_STEPS);
  for (int i = 0; i < MAX_STEPS; i++) {
    const est_step_record *s = &r.records[i];
    assert_int_equal(r.before_steps[i], i);
    assert_int_equal(s->global_step, i);
    assert_int_equal(r.step_after_update[i], i + 1);
    assert_int_equal(s->has_batch, 1);
    assert_int_equal(s->examples, 16);
    assert_true(isfinite(s->loss) && s->loss > 0);
    assert_true(s->learning_rate >= 0);
    assert_int_equal(s->stop_signal_ranks, 0);
    if (i) assert_true(s->time >= r.records[i - 1].time);
  }
  /* BERT's warmup over 2 steps: 0, then half the peak 0.05. */
  assert_float_equal(r.records[0].learning_rate, 0.0f, 0);
  assert_float_equal(r.records[1].learning_rate, 0.025f, 1e-7);
}

static void test_stop_request_ends_after_that_step(void **state) {
  (void)state;
  recorder r = {.stop_after = 4, .fail_after = -1};
  est_session_run_hook h = recorder_hook(&r);
  const char *dir = test_tmp_path("stop");
  assert_int_equal(train(dir, &h, 1), EST_OK);
  r.calls[r.n] = 0;
  assert_string_equal(r.calls, "bc<><><><><>e");
  char prefix[1024];
  assert_int_equal(est_ckpt_latest(dir, prefix, sizeof prefix), EST_OK);
  assert_non_null(strstr(prefix, "model.ckpt-5"));
  assert_non_null(strstr(r.checkpoint_at_end, "model.ckpt-5"));
  /* Training again goes on from step 5 to MAX_STEPS. */
  recorder again = {.stop_after = -1, .fail_after = -1};
  h = recorder_hook(&again);
  assert_int_equal(train(dir, &h, 1), EST_OK);
  assert_int_equal(again.na, MAX_STEPS - 5);
  assert_int_equal(again.records[0].global_step, 5);
}

static void test_hook_error_ends_training(void **state) {
  (void)state;
  recorder r = {.stop_after = -1, .fail_after = 2};
  est_session_run_hook h = recorder_hook(&r);
  assert_int_equal(train(test_tmp_path("fail"), &h, 1), EST_ERR_INTERNAL);
  assert_non_null(strstr(est_error_message(), "hook 'recorder' after_run at global step 3: the recorder fails"));
  r.calls[r.n] = 0;
  assert_string_equal(r.calls, "bc<><><>");   /* no end after an error */
}

static void test_watching_hook_changes_no_byte(void **state) {
  (void)state;
  recorder r = {.stop_after = -1, .fail_after = -1};
  est_session_run_hook h = recorder_hook(&r);
  const char *plain = test_tmp_path("plain"), *hooked = test_tmp_path("hooked");
  assert_int_equal(train(plain, NULL, 0), EST_OK);
  assert_int_equal(train(hooked, &h, 1), EST_OK);
  const char *files[] = {"model.ckpt-3.data-00000-of-00001", "model.ckpt-7.data-00000-of-00001",
                         "model.ckpt-7.index"};
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) test_assert_same_file(plain, hooked, files[i]);
}

int main(void) {
  est_log_set_level(EST_LOG_WARN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_calls_in_order_with_step_records),
      cmocka_unit_test(test_stop_request_ends_after_that_step),
      cmocka_unit_test(test_hook_error_ends_training),
      cmocka_unit_test(test_watching_hook_changes_no_byte),
  };
  return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
