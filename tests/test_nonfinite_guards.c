/* The two non-finite guards of training that a NaN loss does not reach (docs/estimator.md
 * §2), through the public Estimator API with the logistic regression of
 * tests/estimator_test_model.h and a model_fn wrapped around it:
 *
 *   - a finite loss with an Inf or NaN gradient: clipping by that global norm turns every
 *     parameter into NaN (as tf.clip_by_global_norm does), so training stops at that step,
 *     naming it and the norm, and the newest checkpoint stays the last good one (without
 *     the guard the next step's loss is NaN and the message names the wrong step);
 *   - a parameter that became Inf with finite loss and gradients: the chief refuses to
 *     write the checkpoint, naming the variable, the element and the step, both at a
 *     cadence save and at the final one (without the guard the checkpoint would be written
 *     and be the newest).
 * 64 examples x 4 features, batch 16, checkpoints every 10 steps: each case is ~30 steps. */
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
#include "est/estimator.h"
#include "estimator_test_model.h"
#include "test_util.h"

enum { F = 4 };

/* tm_params first, so tm_build and tm_call read it through ctx->params as their own. */
typedef struct poison_params {
  tm_params tm;
  int64_t grad_step;     /* -1: never; else dense/kernel's gradient element 1 is grad_value */
  float grad_value;
  int64_t value_step;    /* -1: never; else dense/bias becomes +Inf after that step's forward */
} poison_params;

static est_status poison_call(void *model, est_var_store *vs, const est_features *f, est_mode mode,
                              int64_t global_step, est_estimator_spec *spec) {
  tm_model *m = model;
  const poison_params *p = (const poison_params *)m->p;
  est_status st = tm_call(model, vs, f, mode, global_step, spec);
  if (st != EST_OK || mode != EST_MODE_TRAIN) return st;
  /* After the forward and backward: the loss stays finite either way. */
  if (global_step == p->grad_step) est_vars_grad(vs, (size_t)m->w)[1] = p->grad_value;
  if (global_step == p->value_step) est_vars_value(vs, (size_t)m->b)[0] = INFINITY;
  return EST_OK;
}

static poison_params poison_default(void) {
  return (poison_params){.tm = tm_params_default(F), .grad_step = -1, .value_step = -1};
}

/* Trains `p` for up to max_steps into a fresh directory `dir`; returns the status. */
static est_status train(poison_params *p, const char *dir, int64_t save_every, int64_t max_steps) {
  tm_data data;
  tm_data_make(&data, 64, F, 5);
  est_model_fn fn = tm_model_fn(&p->tm);
  fn.name = "poisoned_logreg";
  fn.call = poison_call;
  est_run_config rc = est_run_config_default();
  rc.model_dir = dir;
  rc.seed = 1234;
  rc.train_batch_size = 16;
  rc.save_checkpoints_steps = save_every;
  rc.log_step_count_steps = 0;
  rc.save_summary_steps = 0;
  est_estimator *e;
  assert_int_equal(est_estimator_create(&e, &fn, &rc), EST_OK);
  est_input_fn in = {.open = tm_open, .ctx = &data};
  est_status st = est_estimator_train(e, &in, 0, max_steps);
  est_estimator_free(e);
  tm_data_free(&data);
  return st;
}

static int ckpt_exists(const char *dir, int64_t step) {
  char p[4096];
  snprintf(p, sizeof p, "%s/model.ckpt-%lld.index", dir, (long long)step);
  return est_file_exists(p);
}

/* The newest checkpoint of dir is model.ckpt-<step>, and every float in it is finite. */
static void assert_latest_is_good(const char *dir, int64_t step) {
  char latest[4096], want[64];
  assert_int_equal(est_ckpt_latest(dir, latest, sizeof latest), EST_OK);
  snprintf(want, sizeof want, "/model.ckpt-%lld", (long long)step);
  if (strlen(latest) < strlen(want) || strcmp(latest + strlen(latest) - strlen(want), want))
    fail_msg("latest checkpoint %s, want ...%s", latest, want);
  est_ckpt_reader *r;
  assert_int_equal(est_ckpt_reader_open(&r, latest), EST_OK);
  for (size_t i = 0; i < est_ckpt_reader_count(r); i++) {
    est_tensor t;
    assert_int_equal(est_ckpt_reader_read(r, est_ckpt_reader_name(r, i), &t), EST_OK);
    if (t.dtype == EST_DT_FLOAT)
      for (size_t k = 0; k < est_tensor_num_bytes(&t) / sizeof(float); k++)
        assert_true(isfinite(((const float *)t.data)[k]));
    est_tensor_free(&t);
  }
  est_ckpt_reader_close(r);
}

static void assert_message_has(const char *needle) {
  if (!strstr(est_error_message(), needle)) fail_msg("no '%s' in: %s", needle, est_error_message());
}

/* An Inf, then a NaN, gradient element at step 13 of 30, checkpoints at 10 and 20. */
static void test_nonfinite_gradient_stops_at_its_step(void **state) {
  (void)state;
  const float values[2] = {INFINITY, NAN};
  const char *shown[2] = {"global norm = inf at global step 13", "global norm = nan at global step 13"};
  for (int k = 0; k < 2; k++) {
    char dir[256], want[512];
    test_make_tmpdir(dir, sizeof dir);
    poison_params p = poison_default();
    p.grad_step = 13;
    p.grad_value = values[k];
    assert_int_equal(train(&p, dir, 10, 30), EST_ERR_ABORTED);
    assert_message_has("non-finite gradients during training: ");
    assert_message_has(shown[k]);
    assert_null(strstr(est_error_message(), "(loss = nan"));   /* the loss was finite */
    snprintf(want, sizeof want, "last good checkpoint: %s/model.ckpt-10", dir);
    assert_message_has(want);
    assert_latest_is_good(dir, 10);
    assert_false(ckpt_exists(dir, 13));
    assert_false(ckpt_exists(dir, 14));
    assert_false(ckpt_exists(dir, 20));
    test_remove_tree(dir);
  }
}

/* -Inf at step 3, before the first cadence save: the last good one is model.ckpt-0, the
 * checkpoint training writes at its start (as TF's CheckpointSaverHook does). */
static void test_nonfinite_gradient_before_the_first_cadence_save(void **state) {
  (void)state;
  char dir[256], want[512];
  test_make_tmpdir(dir, sizeof dir);
  poison_params p = poison_default();
  p.grad_step = 3;
  p.grad_value = -INFINITY;
  assert_int_equal(train(&p, dir, 10, 30), EST_ERR_ABORTED);
  assert_message_has("global norm = inf at global step 3");
  snprintf(want, sizeof want, "last good checkpoint: %s/model.ckpt-0", dir);
  assert_message_has(want);
  assert_latest_is_good(dir, 0);
  for (int64_t s = 1; s <= 10; s++) assert_false(ckpt_exists(dir, s));
  test_remove_tree(dir);
}

/* dense/bias = +Inf after step 19's forward: the cadence save of step 20 is refused. */
static void test_nonfinite_parameter_is_not_saved(void **state) {
  (void)state;
  char dir[256], want[512];
  test_make_tmpdir(dir, sizeof dir);
  poison_params p = poison_default();
  p.value_step = 19;
  assert_int_equal(train(&p, dir, 10, 30), EST_ERR_ABORTED);
  assert_message_has("non-finite parameters at global step 20: variable 'dense/bias' element 0 is inf; "
                     "not saving model.ckpt-20; ");
  snprintf(want, sizeof want, "last good checkpoint: %s/model.ckpt-10", dir);
  assert_message_has(want);
  assert_latest_is_good(dir, 10);
  assert_false(ckpt_exists(dir, 20));
  test_remove_tree(dir);
}

/* The final save, at max_steps 25 with no cadence save due (every 50): refused the same. */
static void test_nonfinite_parameter_final_save(void **state) {
  (void)state;
  char dir[256], want[512];
  test_make_tmpdir(dir, sizeof dir);
  poison_params p = poison_default();
  assert_int_equal(train(&p, dir, 50, 20), EST_OK);   /* a good model.ckpt-20 first */
  assert_latest_is_good(dir, 20);
  p.value_step = 24;
  assert_int_equal(train(&p, dir, 50, 25), EST_ERR_ABORTED);
  assert_message_has("non-finite parameters at global step 25: variable 'dense/bias' element 0 is inf; "
                     "not saving model.ckpt-25; ");
  snprintf(want, sizeof want, "last good checkpoint: %s/model.ckpt-20", dir);
  assert_message_has(want);
  assert_latest_is_good(dir, 20);
  assert_false(ckpt_exists(dir, 25));
  test_remove_tree(dir);
}

int main(void) {
  est_log_set_level(EST_LOG_WARN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_nonfinite_gradient_stops_at_its_step),
      cmocka_unit_test(test_nonfinite_gradient_before_the_first_cadence_save),
      cmocka_unit_test(test_nonfinite_parameter_is_not_saved),
      cmocka_unit_test(test_nonfinite_parameter_final_save),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
