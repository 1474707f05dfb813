/* The Estimator end to end on a small logistic regression (tests/estimator_test_model.h):
 * training to an accuracy, checkpoint contents / cadence / keep_max / state file,
 * max_steps skipping, NaN loss, init from checkpoint and warm start, corrupt
 * checkpoints, missing inputs and features, metrics with padding rows, predictions in
 * input order, summaries, and BERT's optimizer trajectory and schedule through train. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "est/est.h"
#include "est/ckpt.h"
#include "est/estimator.h"
#include "est/metrics.h"
#include "est/optimizer.h"
#include "estimator_test_model.h"
#include "train/estimator_internal.h"
#include "test_util.h"

enum { F = 4 };

static FILE *g_log;   /* captured log of the current test */

static void capture_log(void) {
  if (g_log) fclose(g_log);
  g_log = tmpfile();
  est_log_set_stream(g_log);
}

static int log_contains(const char *needle) {
  fflush(g_log);
  long size = ftell(g_log);
  char *buf = calloc((size_t)size + 1, 1);
  rewind(g_log);
  size_t got = fread(buf, 1, (size_t)size, g_log);
  buf[got] = 0;
  fseek(g_log, 0, SEEK_END);
  int found = strstr(buf, needle) != NULL;
  free(buf);
  return found;
}

static est_run_config config_for(const char *dir) {
  est_run_config rc = est_run_config_default();
  rc.model_dir = dir;
  rc.seed = 1234;
  rc.train_batch_size = 16;
  rc.eval_batch_size = 7;     /* 100 examples: a short last batch */
  rc.predict_batch_size = 9;
  rc.save_checkpoints_steps = 50;
  rc.log_step_count_steps = 25;
  rc.save_summary_steps = 10;
  return rc;
}

static int file_exists_in(const char *dir, const char *name) {
  char p[4096];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  return est_file_exists(p);
}

/* Predictions arrive once per example, in input order, and match a forward pass by hand. */
typedef struct pred_check {
  int64_t next;
  const tm_data *d;
  const float *kernel;
  float bias;
  int bad;
} pred_check;

static est_status check_prediction(void *c, const est_prediction *pr) {
  pred_check *pc = c;
  if (pr->index != pc->next++) pc->bad++;
  if (pr->count != 2 || strcmp(pr->names[0], "probabilities") || pr->values[0].rank != 0) pc->bad++;
  float z = pc->bias;
  for (int j = 0; j < F; j++) z += pc->d->x[pr->index * F + j] * pc->kernel[j];
  float logit = *(const float *)pr->values[1].data;
  if (fabsf(logit - z) > 1e-5f) pc->bad++;
  return EST_OK;
}

/* ---- training end to end ------------------------------------------------------------ */

static void test_train_evaluate_predict(void **state) {
  (void)state;
  char dir[256];
  test_make_tmpdir(dir, sizeof dir);
  capture_log();
  tm_data train, eval;
  tm_data_make(&train, 400, F, 1);
  tm_data_make(&eval, 100, F, 2);
  tm_params p = tm_params_default(F);
  est_model_fn fn = tm_model_fn(&p);
  est_run_config rc = config_for(dir);
  est_estimator *e;
  assert_int_equal(est_estimator_create(&e, &fn, &rc), EST_OK);
  est_input_fn tin = {.open = tm_open, .ctx = &train}, ein = {.open = tm_open, .ctx = &eval};

  assert_int_equal(est_estimator_train(e, &tin, 0, 120), EST_OK);
  assert_true(log_contains("Calling model_fn."));
  assert_true(log_contains("Create CheckpointSaverHook."));
  assert_true(log_contains("Saving checkpoints for 0 into"));
  assert_true(log_contains("loss = "));
  assert_true(log_contains(", step = 25 ("));
  assert_true(log_contains("global_step/sec: "));
  assert_true(log_contains("step 51/120 ("));   /* steps done after step 50 ran */
  assert_true(log_contains("ETA "));
  assert_true(log_contains("**** Trainable Variables ****"));
  assert_true(log_contains("  name = dense/kernel:0, shape = (4, 1)"));
  assert_true(log_contains("  name = dense/bias:0, shape = (1,)"));
  assert_true(log_contains("Saving checkpoints for 120 into"));
  assert_true(log_contains("Loss for final step: "));
  /* Cadence by steps: 0, 50, 100, and the end. */
  assert_true(file_exists_in(dir, "model.ckpt-0.index"));
  assert_true(file_exists_in(dir, "model.ckpt-50.index"));
  assert_true(file_exists_in(dir, "model.ckpt-100.index"));
  assert_true(file_exists_in(dir, "model.ckpt-120.index"));
  assert_true(file_exists_in(dir, "model.ckpt-120.data-00000-of-00001"));

  /* What the checkpoint holds, as TF would list it. */
  char latest[4096];
  assert_int_equal(est_estimator_latest_checkpoint(e, latest, sizeof latest), EST_OK);
  assert_non_null(strstr(latest, "model.ckpt-120"));
  est_ckpt_reader *r;
  assert_int_equal(est_ckpt_reader_open(&r, latest), EST_OK);
  const char *expect[] = {"dense/bias", "dense/bias/adam_m", "dense/bias/adam_v", "dense/kernel",
                          "dense/kernel/adam_m", "dense/kernel/adam_v", "est/input_state", "est/seed", "global_step"};
  assert_int_equal(est_ckpt_reader_count(r), 9);
  for (size_t i = 0; i < 9; i++) assert_string_equal(est_ckpt_reader_name(r, i), expect[i]);
  int64_t gs = 0, seed = 0, input_state = 0;
  assert_int_equal(est_ckpt_reader_read_into(r, "global_step", EST_DT_INT64, &gs, 8), EST_OK);
  assert_int_equal(gs, 120);
  assert_int_equal(est_ckpt_reader_read_into(r, "est/seed", EST_DT_INT64, &seed, 8), EST_OK);
  assert_int_equal(seed, 1234);
  assert_int_equal(est_ckpt_reader_read_into(r, "est/input_state", EST_DT_INT64, &input_state, 8), EST_OK);
  assert_int_equal(input_state, 120 * 16);
  est_dtype dt;
  int rank;
  int64_t dims[EST_MAX_RANK];
  assert_int_equal(est_ckpt_reader_info(r, "dense/kernel/adam_v", &dt, &rank, dims), EST_OK);
  assert_int_equal(dt, EST_DT_FLOAT);
  assert_int_equal(rank, 2);
  assert_int_equal(dims[0], F);
  float kernel[F];
  assert_int_equal(est_ckpt_reader_read_into(r, "dense/kernel", EST_DT_FLOAT, kernel, sizeof kernel), EST_OK);
  est_ckpt_reader_close(r);

  /* Evaluate: accuracy of a separable-ish problem, with loss and global_step. */
  capture_log();
  est_eval_result res;
  assert_int_equal(est_estimator_evaluate(e, &ein, 0, NULL, NULL, &res), EST_OK);
  double acc, loss, eloss, step, auc;
  assert_int_equal(est_eval_result_get(&res, "eval_accuracy", &acc), EST_OK);
  assert_int_equal(est_eval_result_get(&res, "loss", &loss), EST_OK);
  assert_int_equal(est_eval_result_get(&res, "eval_loss", &eloss), EST_OK);
  assert_int_equal(est_eval_result_get(&res, "global_step", &step), EST_OK);
  assert_int_equal(est_eval_result_get(&res, "auc", &auc), EST_OK);
  print_message("accuracy %g auc %g loss %g\n", acc, auc, loss);
  assert_true(acc >= 0.9);
  assert_true(auc >= 0.95);
  assert_true(step == 120.0);
  assert_int_equal(res.global_step, 120);
  assert_true(loss > 0 && loss < 0.5);
  /* The last batch (100 = 14*7 + 2) is short: the batch-mean "loss" differs from eval_loss. */
  assert_true(fabs(loss - eloss) > 1e-7);
  for (size_t i = 1; i < res.count; i++) assert_true(strcmp(res.names[i - 1], res.names[i]) < 0);
  assert_true(log_contains("Saving dict for global step 120: auc = "));
  assert_true(file_exists_in(dir, "eval"));
  char results[4096];
  snprintf(results, sizeof results, "%s/eval_results.txt", dir);
  assert_int_equal(est_eval_result_write(&res, results), EST_OK);
  size_t size;
  char *text = test_read_file(results, &size);
  assert_non_null(strstr(text, "\nglobal_step = 120\n"));
  assert_non_null(strstr(text, "auc = "));
  assert_true(strstr(text, "eval_accuracy = ") < strstr(text, "eval_loss = "));
  free(text);
  est_eval_result_clear(&res);

  /* Predict: one call per example, in input order, matching a forward pass by hand. */
  pred_check pc = {0, &eval, kernel, 0, 0};
  est_ckpt_reader_open(&r, latest);
  est_ckpt_reader_read_into(r, "dense/bias", EST_DT_FLOAT, &pc.bias, 4);
  est_ckpt_reader_close(r);
  assert_int_equal(est_estimator_predict(e, &ein, NULL, check_prediction, &pc), EST_OK);
  assert_int_equal(pc.next, 100);
  assert_int_equal(pc.bad, 0);

  est_estimator_free(e);
  tm_data_free(&train);
  tm_data_free(&eval);
  test_remove_tree(dir);
}

/* ---- cadence, keep_max, the state file, skipping ---------------------------------------- */

static void test_keep_max_and_state_file(void **state) {
  (void)state;
  char dir[256];
  test_make_tmpdir(dir, sizeof dir);
  capture_log();
  tm_data train;
  tm_data_make(&train, 64, F, 3);
  tm_params p = tm_params_default(F);
  est_model_fn fn = tm_model_fn(&p);
  est_run_config rc = config_for(dir);
  rc.save_checkpoints_steps = 10;
  rc.keep_checkpoint_max = 2;
  est_estimator *e;
  assert_int_equal(est_estimator_create(&e, &fn, &rc), EST_OK);
  est_input_fn tin = {.open = tm_open, .ctx = &train};
  assert_int_equal(est_estimator_train(e, &tin, 0, 45), EST_OK);
  /* Saved at 0, 10, 20, 30, 40, 45; only the last two remain. */
  for (int s = 0; s <= 40; s += 10) {
    char name[64];
    snprintf(name, sizeof name, "model.ckpt-%d.index", s);
    assert_int_equal(file_exists_in(dir, name), s == 40);
  }
  assert_true(file_exists_in(dir, "model.ckpt-45.index"));
  char path[4096];
  snprintf(path, sizeof path, "%s/checkpoint", dir);
  size_t size;
  char *text = test_read_file(path, &size);
  assert_string_equal(text,
                      "model_checkpoint_path: \"model.ckpt-45\"\n"
                      "all_model_checkpoint_paths: \"model.ckpt-40\"\n"
                      "all_model_checkpoint_paths: \"model.ckpt-45\"\n");
  free(text);

  /* Already at max_steps: nothing runs, nothing is written. */
  capture_log();
  assert_int_equal(est_estimator_train(e, &tin, 0, 45), EST_OK);
  assert_true(log_contains("Skipping training since max_steps has already saved."));
  /* steps: that many more, from the restored global step; the history carries over. */
  assert_int_equal(est_estimator_train(e, &tin, 12, 0), EST_OK);
  assert_true(log_contains("Restoring parameters from"));
  text = test_read_file(path, &size);
  assert_string_equal(text,
                      "model_checkpoint_path: \"model.ckpt-57\"\n"
                      "all_model_checkpoint_paths: \"model.ckpt-55\"\n"
                      "all_model_checkpoint_paths: \"model.ckpt-57\"\n");
  free(text);
  assert_false(file_exists_in(dir, "model.ckpt-45.index"));
  assert_int_equal(est_estimator_train(e, &tin, 5, 100), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "steps and max_steps"));
  est_estimator_free(e);

  /* keep_checkpoint_max = 0 keeps all. */
  char dir2[256];
  test_make_tmpdir(dir2, sizeof dir2);
  rc.model_dir = dir2;
  rc.keep_checkpoint_max = 0;
  assert_int_equal(est_estimator_create(&e, &fn, &rc), EST_OK);
  assert_int_equal(est_estimator_train(e, &tin, 0, 30), EST_OK);
  for (int s = 0; s <= 30; s += 10) {
    char name[64];
    snprintf(name, sizeof name, "model.ckpt-%d.index", s);
    assert_true(file_exists_in(dir2, name));
  }
  est_estimator_free(e);
  tm_data_free(&train);
  test_remove_tree(dir);
  test_remove_tree(dir2);
}

static int count_checkpoints(const char *dir) {
  DIR *d = opendir(dir);
  int n = 0;
  struct dirent *ent;
  while ((ent = readdir(d)))
    if (strstr(ent->d_name, ".index")) n++;
  closedir(d);
  return n;
}

static void test_cadence_by_seconds(void **state) {
  (void)state;
  tm_data train;
  tm_data_make(&train, 64, F, 4);
  tm_params p = tm_params_default(F);
  est_model_fn fn = tm_model_fn(&p);
  est_input_fn tin = {.open = tm_open, .ctx = &train};
  capture_log();
  /* A huge interval: only the start and the end are saved. */
  char dir[256];
  test_make_tmpdir(dir, sizeof dir);
  est_run_config rc = config_for(dir);
  rc.save_checkpoints_steps = 0;
  rc.save_checkpoints_secs = 3600;
  rc.keep_checkpoint_max = 0;
  est_estimator *e;
  assert_int_equal(est_estimator_create(&e, &fn, &rc), EST_OK);
  assert_int_equal(est_estimator_train(e, &tin, 0, 20), EST_OK);
  assert_int_equal(count_checkpoints(dir), 2);
  est_estimator_free(e);
  test_remove_tree(dir);
  /* A tiny interval: every step is due. */
  test_make_tmpdir(dir, sizeof dir);
  rc.model_dir = dir;
  rc.save_checkpoints_secs = 1e-9;
  assert_int_equal(est_estimator_create(&e, &fn, &rc), EST_OK);
  assert_int_equal(est_estimator_train(e, &tin, 0, 6), EST_OK);
  assert_int_equal(count_checkpoints(dir), 7);
  est_estimator_free(e);
  test_remove_tree(dir);
  /* Both set is a config error, as in tf.estimator.RunConfig. */
  rc.save_checkpoints_steps = 10;
  assert_int_equal(est_estimator_create(&e, &fn, &rc), EST_ERR_INVALID_ARGUMENT);
  tm_data_free(&train);
}

/* ---- failures ------------------------------------------------------------------------- */

static void test_nan_loss_keeps_last_checkpoint(void **state) {
  (void)state;
  char dir[256];
  test_make_tmpdir(dir, sizeof dir);
  capture_log();
  tm_data train;
  tm_data_make(&train, 64, F, 5);
  tm_params p = tm_params_default(F);
  p.nan_at_step = 23;
  est_model_fn fn = tm_model_fn(&p);
  est_run_config rc = config_for(dir);
  rc.save_checkpoints_steps = 10;
  est_estimator *e;
  assert_int_equal(est_estimator_create(&e, &fn, &rc), EST_OK);
  est_input_fn tin = {.open = tm_open, .ctx = &train};
  assert_int_equal(est_estimator_train(e, &tin, 0, 50), EST_ERR_ABORTED);
  assert_non_null(strstr(est_error_message(), "NaN loss during training"));
  assert_non_null(strstr(est_error_message(), "global step 23"));
  assert_non_null(strstr(est_error_message(), "model.ckpt-20"));
  char latest[4096];
  assert_int_equal(est_estimator_latest_checkpoint(e, latest, sizeof latest), EST_OK);
  assert_non_null(strstr(latest, "model.ckpt-20"));
  assert_false(file_exists_in(dir, "model.ckpt-23.index"));
  /* The kept checkpoint holds finite values. */
  est_ckpt_reader *r;
  float k[F];
  assert_int_equal(est_ckpt_reader_open(&r, latest), EST_OK);
  assert_int_equal(est_ckpt_reader_read_into(r, "dense/kernel", EST_DT_FLOAT, k, sizeof k), EST_OK);
  est_ckpt_reader_close(r);
  for (int j = 0; j < F; j++) assert_true(isfinite(k[j]));
  est_estimator_free(e);
  tm_data_free(&train);
  test_remove_tree(dir);
}

static void test_missing_input_and_feature(void **state) {
  (void)state;
  char dir[256];
  test_make_tmpdir(dir, sizeof dir);
  capture_log();
  tm_data train;
  tm_data_make(&train, 64, F, 6);
  tm_params p = tm_params_default(F);
  est_model_fn fn = tm_model_fn(&p);
  est_run_config rc = config_for(dir);
  est_estimator *e;
  assert_int_equal(est_estimator_create(&e, &fn, &rc), EST_OK);
  est_input_fn tin = {.open = tm_open, .ctx = &train};
  train.path = "/nonexistent/train.tf_record";
  assert_int_equal(est_estimator_train(e, &tin, 0, 10), EST_ERR_NOT_FOUND);
  assert_non_null(strstr(est_error_message(), "/nonexistent/train.tf_record"));
  assert_non_null(strstr(est_error_message(), "input_fn (train)"));
  train.path = NULL;
  train.drop_label = 1;
  assert_int_equal(est_estimator_train(e, &tin, 0, 10), EST_ERR_NOT_FOUND);
  assert_non_null(strstr(est_error_message(), "feature 'label' not found"));
  assert_non_null(strstr(est_error_message(), "global step 0"));
  /* Evaluate surfaces it the same way. */
  est_eval_result res;
  assert_int_equal(est_estimator_evaluate(e, &tin, 0, NULL, NULL, &res), EST_ERR_NOT_FOUND);
  assert_non_null(strstr(est_error_message(), "feature 'label' not found"));
  /* An explicit checkpoint that does not exist. */
  train.drop_label = 0;
  assert_int_equal(est_estimator_evaluate(e, &tin, 0, "/nonexistent/model.ckpt-5", NULL, &res), EST_ERR_NOT_FOUND);
  assert_non_null(strstr(est_error_message(), "/nonexistent/model.ckpt-5"));
  est_estimator_free(e);
  tm_data_free(&train);
  test_remove_tree(dir);
}

static void corrupt_byte(const char *path, long offset) {
  FILE *f = fopen(path, "r+b");
  assert_non_null(f);
  fseek(f, offset, SEEK_SET);
  int c = fgetc(f);
  fseek(f, offset, SEEK_SET);
  fputc(c ^ 0x5a, f);
  fclose(f);
}

static void test_corrupt_checkpoint(void **state) {
  (void)state;
  char dir[256];
  test_make_tmpdir(dir, sizeof dir);
  capture_log();
  tm_data train;
  tm_data_make(&train, 64, F, 7);
  tm_params p = tm_params_default(F);
  est_model_fn fn = tm_model_fn(&p);
  est_run_config rc = config_for(dir);
  rc.save_checkpoints_steps = 10;
  est_estimator *e;
  assert_int_equal(est_estimator_create(&e, &fn, &rc), EST_OK);
  est_input_fn tin = {.open = tm_open, .ctx = &train};
  assert_int_equal(est_estimator_train(e, &tin, 0, 10), EST_OK);
  char data[4096], state_path[4096];
  snprintf(data, sizeof data, "%s/model.ckpt-10.data-00000-of-00001", dir);
  snprintf(state_path, sizeof state_path, "%s/checkpoint", dir);
  corrupt_byte(data, 3);
  size_t n0, s0;
  char *before = test_read_file(data, &n0), *state_before = test_read_file(state_path, &s0);
  assert_int_equal(est_estimator_train(e, &tin, 0, 20), EST_ERR_DATA_LOSS);
  assert_non_null(strstr(est_error_message(), "model.ckpt-10"));
  size_t n1, s1;
  char *after = test_read_file(data, &n1), *state_after = test_read_file(state_path, &s1);
  assert_true(n0 == n1 && !memcmp(before, after, n0));
  assert_string_equal(state_before, state_after);
  assert_false(file_exists_in(dir, "model.ckpt-20.index"));
  est_eval_result res;
  assert_int_equal(est_estimator_evaluate(e, &tin, 0, NULL, NULL, &res), EST_ERR_DATA_LOSS);
  free(before), free(after), free(state_before), free(state_after);

  /* A state file naming a checkpoint whose files are gone is an error, not a fresh start. */
  char index[4096];
  snprintf(index, sizeof index, "%s/model.ckpt-10.index", dir);
  assert_int_equal(unlink(index), 0);
  assert_int_equal(est_estimator_train(e, &tin, 0, 20), EST_ERR_NOT_FOUND);
  assert_non_null(strstr(est_error_message(), "model.ckpt-10"));
  /* A state file that does not parse. */
  FILE *f = fopen(state_path, "w");
  fputs("model_checkpoint_path: \"unterminated\n", f);
  fclose(f);
  assert_int_equal(est_estimator_train(e, &tin, 0, 20), EST_ERR_INVALID_ARGUMENT);
  est_estimator_free(e);
  tm_data_free(&train);
  test_remove_tree(dir);
}

/* A model with an extra variable: restoring an older model_dir finds it missing. */
static est_status wide_build(const est_model_context *ctx, est_var_store *vs, void **out) {
  est_status st = tm_build(ctx, vs, out);
  if (st == EST_OK) st = est_vars_declare(vs, "extra/kernel", 2, (int64_t[]){3, 2}, est_init_zeros(), NULL);
  return st;
}

static void test_restore_and_init_errors(void **state) {
  (void)state;
  char dir[256], other[256];
  test_make_tmpdir(dir, sizeof dir);
  test_make_tmpdir(other, sizeof other);
  capture_log();
  tm_data train;
  tm_data_make(&train, 64, F, 8);
  tm_params p = tm_params_default(F);
  est_model_fn fn = tm_model_fn(&p);
  est_run_config rc = config_for(dir);
  est_estimator *e;
  assert_int_equal(est_estimator_create(&e, &fn, &rc), EST_OK);
  est_input_fn tin = {.open = tm_open, .ctx = &train};
  assert_int_equal(est_estimator_train(e, &tin, 0, 10), EST_OK);
  est_estimator_free(e);
  char ckpt[4096];
  snprintf(ckpt, sizeof ckpt, "%s/model.ckpt-10", dir);

  /* Missing variable on restore. */
  est_model_fn wide = fn;
  wide.build = wide_build;
  assert_int_equal(est_estimator_create(&e, &wide, &rc), EST_OK);
  assert_int_equal(est_estimator_train(e, &tin, 0, 20), EST_ERR_NOT_FOUND);
  assert_non_null(strstr(est_error_message(), "Key extra/kernel not found in checkpoint"));
  est_estimator_free(e);

  /* Wrong shape on restore: a model with 5 features. */
  tm_params p5 = tm_params_default(F + 1);
  est_model_fn fn5 = tm_model_fn(&p5);
  assert_int_equal(est_estimator_create(&e, &fn5, &rc), EST_OK);
  est_eval_result res;
  assert_int_equal(est_estimator_evaluate(e, &tin, 0, NULL, NULL, &res), EST_ERR_FAILED_PRECONDITION);
  assert_non_null(strstr(est_error_message(), "dense/kernel"));
  assert_non_null(strstr(est_error_message(), "[5,1]"));
  assert_non_null(strstr(est_error_message(), "[4,1]"));
  est_estimator_free(e);

  /* BERT's init_checkpoint on a fresh model_dir: the shape mismatch names both shapes. */
  p5.init_checkpoint = ckpt;
  rc.model_dir = other;
  assert_int_equal(est_estimator_create(&e, &fn5, &rc), EST_OK);
  assert_int_equal(est_estimator_train(e, &tin, 0, 5), EST_ERR_FAILED_PRECONDITION);
  assert_non_null(strstr(est_error_message(), "variable dense/kernel has shape [5,1] in the model"));
  assert_non_null(strstr(est_error_message(), "[4,1]"));
  est_estimator_free(e);

  /* init_checkpoint that loads: the log marks the variables, values equal the file's. */
  capture_log();
  p.init_checkpoint = ckpt;
  p.lr = 0.0;                    /* AdamWeightDecay with lr 0 leaves them unchanged */
  assert_int_equal(est_estimator_create(&e, &fn, &rc), EST_OK);
  assert_int_equal(est_estimator_train(e, &tin, 0, 1), EST_OK);
  assert_true(log_contains("  name = dense/kernel:0, shape = (4, 1), *INIT_FROM_CKPT*"));
  est_ckpt_reader *a, *b;
  float ka[F], kb[F];
  char other_ckpt[4096];
  snprintf(other_ckpt, sizeof other_ckpt, "%s/model.ckpt-1", other);
  assert_int_equal(est_ckpt_reader_open(&a, ckpt), EST_OK);
  assert_int_equal(est_ckpt_reader_open(&b, other_ckpt), EST_OK);
  est_ckpt_reader_read_into(a, "dense/kernel", EST_DT_FLOAT, ka, sizeof ka);
  est_ckpt_reader_read_into(b, "dense/kernel", EST_DT_FLOAT, kb, sizeof kb);
  assert_memory_equal(ka, kb, sizeof ka);
  est_ckpt_reader_close(a);
  est_ckpt_reader_close(b);
  est_estimator_free(e);

  /* The assignment map: variables that exist in both; slots and global_step ignored. */
  est_var_store *vs;
  est_vars_create(&vs);
  est_vars_declare(vs, "dense/kernel", 2, (int64_t[]){F, 1}, est_init_zeros(), NULL);
  est_vars_declare(vs, "output_weights", 2, (int64_t[]){2, F}, est_init_zeros(), NULL);
  est_vars_finalize(vs, 1);
  est_assignment *map;
  size_t n;
  assert_int_equal(est_assignment_map_from_checkpoint(vs, ckpt, &map, &n), EST_OK);
  assert_int_equal(n, 1);
  assert_string_equal(map[0].checkpoint_name, "dense/kernel");
  est_assignment_map_free(map, n);
  /* An explicit map entry for a tensor the checkpoint lacks. */
  est_assignment bad = {"missing/tensor", "dense/kernel"};
  assert_int_equal(est_init_from_checkpoint(vs, ckpt, &bad, 1, NULL), EST_ERR_NOT_FOUND);
  assert_non_null(strstr(est_error_message(), "missing/tensor"));
  /* A scope map 'dense/' -> 'dense/' loads the kernel (slots under the scope are skipped). */
  est_assignment scope = {"dense/", "dense/"};
  size_t loaded = 0;
  assert_int_equal(est_init_from_checkpoint(vs, ckpt, &scope, 1, &loaded), EST_OK);
  assert_int_equal(loaded, 1);
  assert_memory_equal(est_vars_value(vs, 0), ka, sizeof ka);
  est_vars_free(vs);
  tm_data_free(&train);
  test_remove_tree(dir);
  test_remove_tree(other);
}

static void test_warm_start(void **state) {
  (void)state;
  char dir[256], fresh[256];
  test_make_tmpdir(dir, sizeof dir);
  test_make_tmpdir(fresh, sizeof fresh);
  capture_log();
  tm_data train;
  tm_data_make(&train, 64, F, 9);
  tm_params p = tm_params_default(F);
  est_model_fn fn = tm_model_fn(&p);
  est_run_config rc = config_for(dir);
  est_estimator *e;
  est_input_fn tin = {.open = tm_open, .ctx = &train};
  assert_int_equal(est_estimator_create(&e, &fn, &rc), EST_OK);
  assert_int_equal(est_estimator_train(e, &tin, 0, 10), EST_OK);
  est_estimator_free(e);
  char ckpt[4096];
  snprintf(ckpt, sizeof ckpt, "%s/model.ckpt-10", dir);
  /* Only the kernel (regex), into a fresh dir: evaluated without training. */
  rc.model_dir = fresh;
  rc.warm_start_from = ckpt;
  rc.warm_start_vars = "kernel$";
  p.lr = 0.0;
  assert_int_equal(est_estimator_create(&e, &fn, &rc), EST_OK);
  assert_int_equal(est_estimator_train(e, &tin, 0, 1), EST_OK);
  assert_true(log_contains("Warm-started 1 variables"));
  assert_true(log_contains("  name = dense/kernel:0, shape = (4, 1), *INIT_FROM_CKPT*"));
  assert_true(log_contains("  name = dense/bias:0, shape = (1,)\n"));
  est_estimator_free(e);
  tm_data_free(&train);
  test_remove_tree(dir);
  test_remove_tree(fresh);
}

/* ---- metrics with padding rows ------------------------------------------------------------ */

static void test_eval_metrics_ignore_padding(void **state) {
  (void)state;
  char dir[256];
  test_make_tmpdir(dir, sizeof dir);
  capture_log();
  /* Kernel (1, 0, 0, 0), bias 0 (written as a checkpoint): prediction = x0 > 0. */
  tm_data d;
  tm_data_make(&d, 6, F, 10);
  const float x0[6] = {1.0f, 2.0f, -1.0f, -2.0f, 3.0f, 0.5f};
  const int64_t y[6] = {1, 0, 0, 1, 1, 0};
  const float w[6] = {1, 1, 1, 1, 0, 0};   /* the last two are padding */
  for (int i = 0; i < 6; i++) {
    for (int j = 0; j < F; j++) d.x[i * F + j] = j == 0 ? x0[i] : 0.0f;
    d.y[i] = y[i];
    d.w[i] = w[i];
  }
  float kernel[F] = {1, 0, 0, 0}, bias = 0;
  int64_t gs = 7;
  const char *names[3] = {"dense/bias", "dense/kernel", "global_step"};
  est_tensor t[3] = {{.dtype = EST_DT_FLOAT, .rank = 1, .dims = {1}, .data = &bias},
                     {.dtype = EST_DT_FLOAT, .rank = 2, .dims = {F, 1}, .data = kernel},
                     {.dtype = EST_DT_INT64, .rank = 0, .data = &gs}};
  char ckpt[4096];
  snprintf(ckpt, sizeof ckpt, "%s/hand.ckpt", dir);
  assert_int_equal(est_ckpt_save(ckpt, 3, names, t), EST_OK);
  tm_params p = tm_params_default(F);
  est_model_fn fn = tm_model_fn(&p);
  est_run_config rc = config_for(dir);
  rc.eval_batch_size = 4;
  est_estimator *e;
  assert_int_equal(est_estimator_create(&e, &fn, &rc), EST_OK);
  est_input_fn in = {.open = tm_open, .ctx = &d};
  est_eval_result r;
  assert_int_equal(est_estimator_evaluate(e, &in, 0, ckpt, "hand", &r), EST_OK);
  /* Real rows: (pred, label) = (1,1) (1,0) (0,0) (0,1): tp 1, fp 1, tn 1, fn 1. */
  double v;
  est_eval_result_get(&r, "eval_accuracy", &v), assert_true(fabs(v - 0.5) < 1e-12);
  est_eval_result_get(&r, "precision", &v), assert_true(fabs(v - 0.5) < 1e-12);
  est_eval_result_get(&r, "recall", &v), assert_true(fabs(v - 0.5) < 1e-12);
  est_eval_result_get(&r, "f1", &v), assert_true(fabs(v - 0.5) < 1e-12);
  est_eval_result_get(&r, "mcc", &v), assert_true(fabs(v) < 1e-12);
  /* eval_loss: weighted mean of softplus(z) - y z over the four real rows. */
  double want = 0;
  for (int i = 0; i < 4; i++) want += log1p(exp(x0[i])) - (double)y[i] * x0[i];
  est_eval_result_get(&r, "eval_loss", &v), assert_true(fabs(v - want / 4) < 1e-5);
  /* loss: mean of the two batch means (4 rows, then 2 padding rows), padding included. */
  double b1 = 0, b2 = 0;
  for (int i = 0; i < 4; i++) b1 += log1p(exp(x0[i])) - (double)y[i] * x0[i];
  for (int i = 4; i < 6; i++) b2 += log1p(exp(x0[i])) - (double)y[i] * x0[i];
  est_eval_result_get(&r, "loss", &v), assert_true(fabs(v - (b1 / 4 + b2 / 2) / 2) < 1e-5);
  /* AUC over real rows: positives score {s(1), s(-2)}, negatives {s(2), s(-1)}; of the four
   * (positive, negative) pairs only (s(1), s(-1)) is ordered right: 0.25 (up to buckets). */
  est_eval_result_get(&r, "auc", &v);
  assert_true(fabs(v - 0.25) < 0.02);
  est_eval_result_get(&r, "global_step", &v), assert_true(v == 7.0);
  assert_true(file_exists_in(dir, "eval_hand"));
  est_eval_result_clear(&r);
  est_estimator_free(e);
  tm_data_free(&d);
  test_remove_tree(dir);
}

/* ---- summaries ------------------------------------------------------------------------- */

typedef struct scalar_log {
  int has_version;
  int n;
  int64_t steps[512];
  char tags[512][32];
  float values[512];
} scalar_log;

static void read_events_dir(const char *dir, scalar_log *out) {
  memset(out, 0, sizeof *out);
  DIR *d = opendir(dir);
  assert_non_null(d);
  struct dirent *ent;
  while ((ent = readdir(d))) {
    if (strncmp(ent->d_name, "events.out.tfevents.", 20)) continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, ent->d_name);
    est_tfrecord_reader *r;
    assert_int_equal(est_tfrecord_reader_open(&r, path, EST_COMPRESSION_NONE), EST_OK);
    const uint8_t *data;
    size_t size;
    while (est_tfrecord_reader_next(r, &data, &size) == EST_OK) {
      est_event ev;
      assert_int_equal(est_event_parse(&ev, data, size), EST_OK);
      if (ev.file_version && !strcmp(ev.file_version, "brain.Event:2")) out->has_version = 1;
      for (size_t i = 0; i < ev.count && out->n < 512; i++) {
        out->steps[out->n] = ev.step;
        snprintf(out->tags[out->n], 32, "%s", ev.tags[i]);
        out->values[out->n++] = ev.values[i];
      }
      est_event_clear(&ev);
    }
    est_tfrecord_reader_close(r);
  }
  closedir(d);
}

static int find_scalar(const scalar_log *l, const char *tag, int64_t step, float *value) {
  for (int i = 0; i < l->n; i++)
    if (l->steps[i] == step && !strcmp(l->tags[i], tag)) {
      *value = l->values[i];
      return 1;
    }
  return 0;
}

/* BERT's schedule (docs/optimizer.md §1, MRPC: init 2e-5, T = 343, W = 34) as the
 * learning_rate summaries of a real training run record it. */
static void test_summaries_and_bert_schedule(void **state) {
  (void)state;
  char dir[256];
  test_make_tmpdir(dir, sizeof dir);
  capture_log();
  tm_data train;
  tm_data_make(&train, 64, F, 11);
  tm_params p = tm_params_default(F);
  p.lr = 2e-5;
  p.num_train_steps = 343;
  p.num_warmup_steps = 34;
  est_model_fn fn = tm_model_fn(&p);
  est_run_config rc = config_for(dir);
  rc.save_summary_steps = 1;
  rc.log_step_count_steps = 10;
  est_estimator *e;
  assert_int_equal(est_estimator_create(&e, &fn, &rc), EST_OK);
  est_input_fn tin = {.open = tm_open, .ctx = &train};
  assert_int_equal(est_estimator_train(e, &tin, 0, 36), EST_OK);
  est_eval_result res;
  assert_int_equal(est_estimator_evaluate(e, &tin, 0, NULL, NULL, &res), EST_OK);
  est_eval_result_clear(&res);
  est_estimator_free(e);   /* closes the event files */

  scalar_log *l = calloc(1, sizeof *l);
  read_events_dir(dir, l);
  assert_true(l->has_version);
  /* the rate of the step that ran at global step t, stamped t + 1 as tf.estimator stamps
   * its train summaries (the global step after the update) */
  const struct { int64_t step; float lr; } want[] = {
      {1, 0.0f}, {2, 5.882353e-07f}, {18, 1.0e-05f}, {34, 1.941176e-05f}, {35, 1.801749e-05f}, {36, 1.795918e-05f}};
  for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
    float v = -1;
    assert_true(find_scalar(l, "learning_rate", want[i].step, &v));
    assert_true(fabsf(v - want[i].lr) <= 1e-6f * want[i].lr + 1e-12f);
  }
  float v = -1;
  assert_false(find_scalar(l, "loss", 0, &v)); /* nothing is stamped before the first update */
  assert_true(find_scalar(l, "loss", 1, &v));
  assert_true(v > 0.5f && v < 0.9f);   /* ~log 2 at the start */
  assert_true(find_scalar(l, "global_step/sec", 11, &v));
  char evdir[4096];
  snprintf(evdir, sizeof evdir, "%s/eval", dir);
  read_events_dir(evdir, l);
  assert_true(l->has_version);
  assert_true(find_scalar(l, "eval_accuracy", 36, &v));
  assert_true(find_scalar(l, "loss", 36, &v));
  free(l);
  tm_data_free(&train);
  test_remove_tree(dir);
}

/* ---- AdamWeightDecay through the estimator: docs/optimizer.md §5 ------------------------ */

/* loss = mean((x - w)^2), x = [0.4, 0.2, -0.5], w starting at [0.1, -0.2, -0.1] (from
 * init_checkpoint), AdamWeightDecay(lr 0.2, no decay, no clipping). */
typedef struct adam_model {
  int w;
} adam_model;

static est_status adam_build(const est_model_context *ctx, est_var_store *vs, void **out) {
  (void)ctx;
  adam_model *m = calloc(1, sizeof *m);
  *out = m;
  return est_vars_declare(vs, "w", 1, (int64_t[]){3}, est_init_zeros(), &m->w);
}
static est_status adam_init(void *model, est_var_store *vs) {
  (void)model;
  const float w0[3] = {0.1f, -0.2f, -0.1f};
  memcpy(est_vars_value(vs, 0), w0, sizeof w0);
  return EST_OK;
}
static est_status adam_opt(void *model, est_var_store *vs, est_optimizer **out) {
  (void)model;
  est_adam_weight_decay_config c = bert_awd_config();
  c.init_lr = 0.2;
  c.weight_decay_rate = 0.0;
  c.clip_norm = 0.0;
  c.schedule = est_lr_schedule_bert(0, 0);
  return est_optimizer_create_adam_weight_decay(out, vs, &c);
}
static est_status adam_call(void *model, est_var_store *vs, const est_features *f, est_mode mode, int64_t step,
                            est_estimator_spec *spec) {
  (void)model, (void)f, (void)mode, (void)step;
  const float x[3] = {0.4f, 0.2f, -0.5f};
  float *w = est_vars_value(vs, 0), *g = est_vars_grad(vs, 0);
  float loss = 0;
  for (int i = 0; i < 3; i++) {
    loss += (x[i] - w[i]) * (x[i] - w[i]) / 3.0f;
    g[i] += 2.0f * (w[i] - x[i]) / 3.0f;
  }
  spec->loss = loss;
  return EST_OK;
}
static est_status adam_next(void *self, est_features *out) {
  (void)self;
  *out = (est_features){.batch_size = 1};
  return EST_OK;
}
static est_status adam_open(void *ctx, const est_input_params *p, est_input *out) {
  (void)ctx, (void)p;
  *out = (est_input){.next = adam_next};
  return EST_OK;
}

static void test_adam_weight_decay_trajectory(void **state) {
  (void)state;
  char dir[256];
  test_make_tmpdir(dir, sizeof dir);
  capture_log();
  est_model_fn fn = {.name = "adam_test", .build = adam_build, .init = adam_init, .create_optimizer = adam_opt,
                     .call = adam_call, .destroy = free};
  est_run_config rc = config_for(dir);
  est_estimator *e;
  assert_int_equal(est_estimator_create(&e, &fn, &rc), EST_OK);
  est_input_fn in = {.open = adam_open};
  const struct { int64_t step; float w[3]; } want[] = {{1, {0.732360f, 0.432385f, -0.732385f}},
                                                        {2, {0.644261f, 0.606904f, -0.906904f}},
                                                        {3, {0.271594f, 0.306972f, -0.606972f}},
                                                        {10, {0.190685f, 0.123023f, -0.423023f}}};
  for (size_t i = 0; i < 4; i++) {
    /* One train call per row, each resuming from the last: the slots travel through
     * the checkpoint, so this also checks Adam's m and v survive a restore. */
    assert_int_equal(est_estimator_train(e, &in, 0, want[i].step), EST_OK);
    char latest[4096];
    assert_int_equal(est_estimator_latest_checkpoint(e, latest, sizeof latest), EST_OK);
    est_ckpt_reader *r;
    float w[3];
    assert_int_equal(est_ckpt_reader_open(&r, latest), EST_OK);
    assert_int_equal(est_ckpt_reader_read_into(r, "w", EST_DT_FLOAT, w, sizeof w), EST_OK);
    assert_true(est_ckpt_reader_has(r, "w/adam_m"));
    est_ckpt_reader_close(r);
    for (int k = 0; k < 3; k++) assert_true(fabsf(w[k] - want[i].w[k]) < 2e-5f);
  }
  est_estimator_free(e);
  test_remove_tree(dir);
}

/* ---- end of input, inference without a checkpoint, predict callback errors --------------- */

static est_status stop_at_five(void *ctx, const est_prediction *p) {
  int *seen = ctx;
  (*seen)++;
  if (p->index == 5) return est_error(EST_ERR_ABORTED, "enough");
  return EST_OK;
}

static void test_input_end_and_inference_without_checkpoint(void **state) {
  (void)state;
  char dir[256], fresh[256];
  test_make_tmpdir(dir, sizeof dir);
  test_make_tmpdir(fresh, sizeof fresh);
  capture_log();
  tm_data train;
  tm_data_make(&train, 64, F, 12);
  train.train_limit = 100;   /* 6 batches of 16, then the input ends */
  tm_params p = tm_params_default(F);
  est_model_fn fn = tm_model_fn(&p);
  est_run_config rc = config_for(dir);
  est_estimator *e;
  assert_int_equal(est_estimator_create(&e, &fn, &rc), EST_OK);
  est_input_fn tin = {.open = tm_open, .ctx = &train};
  /* Neither steps nor max_steps: until the input ends; the end is saved. */
  assert_int_equal(est_estimator_train(e, &tin, 0, 0), EST_OK);
  assert_true(log_contains("Input ended at global step 6."));
  assert_true(file_exists_in(dir, "model.ckpt-6.index"));
  /* max_steps beyond the input's end stops early too. */
  assert_int_equal(est_estimator_train(e, &tin, 0, 1000), EST_OK);
  char latest[4096];
  assert_int_equal(est_estimator_latest_checkpoint(e, latest, sizeof latest), EST_OK);
  assert_non_null(strstr(latest, "model.ckpt-6"));   /* the input stays at its end */
  est_eval_result ref;
  assert_int_equal(est_estimator_evaluate(e, &tin, 3, NULL, NULL, &ref), EST_OK);
  assert_true(log_contains("Evaluation [3/3]"));
  /* A predict callback's error stops prediction and comes back. */
  int seen = 0;
  assert_int_equal(est_estimator_predict(e, &tin, NULL, stop_at_five, &seen), EST_ERR_ABORTED);
  assert_int_equal(seen, 6);
  est_estimator_free(e);

  /* An empty model_dir: evaluation runs the initialisers and the model's init
   * (BERT's init_checkpoint), so it sees the same weights as the checkpoint itself. */
  capture_log();
  p.init_checkpoint = latest;
  rc.model_dir = fresh;
  assert_int_equal(est_estimator_create(&e, &fn, &rc), EST_OK);
  est_eval_result r;
  assert_int_equal(est_estimator_evaluate(e, &tin, 3, NULL, NULL, &r), EST_OK);
  assert_true(log_contains("Could not find trained model in model_dir"));
  double a, b;
  est_eval_result_get(&ref, "eval_accuracy", &a);
  est_eval_result_get(&r, "eval_accuracy", &b);
  assert_true(a == b);
  est_eval_result_get(&ref, "eval_loss", &a);
  est_eval_result_get(&r, "eval_loss", &b);
  assert_true(a == b);
  assert_int_equal(r.global_step, 0);
  est_eval_result_clear(&r);
  est_eval_result_clear(&ref);
  est_estimator_free(e);
  tm_data_free(&train);
  test_remove_tree(dir);
  test_remove_tree(fresh);
}

/* train_and_evaluate: an evaluation after every saved checkpoint (not the initial one),
 * or fewer with throttle_secs, and always one at the end. */
static void test_train_and_evaluate(void **state) {
  (void)state;
  char dir[256];
  test_make_tmpdir(dir, sizeof dir);
  capture_log();
  tm_data train, eval;
  tm_data_make(&train, 64, F, 13);
  tm_data_make(&eval, 30, F, 14);
  tm_params p = tm_params_default(F);
  est_model_fn fn = tm_model_fn(&p);
  est_run_config rc = config_for(dir);
  rc.save_checkpoints_steps = 20;
  est_estimator *e;
  assert_int_equal(est_estimator_create(&e, &fn, &rc), EST_OK);
  est_train_spec ts = {.input_fn = {.open = tm_open, .ctx = &train}, .max_steps = 60};
  est_eval_spec es = {.input_fn = {.open = tm_open, .ctx = &eval}, .name = "every"};
  est_eval_result r;
  assert_int_equal(est_train_and_evaluate(e, &ts, &es, &r), EST_OK);
  assert_int_equal(r.global_step, 60);
  est_eval_result_clear(&r);
  /* Then 40 more steps, throttled: 80 (the first save) is evaluated, the save at 100
   * falls inside the throttle window and is skipped, but the end is always evaluated. */
  ts.max_steps = 100;
  es.name = "throttled";
  es.throttle_secs = 3600;
  assert_int_equal(est_train_and_evaluate(e, &ts, &es, &r), EST_OK);
  assert_true(log_contains("Skip the current checkpoint eval due to throttle secs (3600 secs)."));
  est_eval_result_clear(&r);
  est_estimator_free(e);
  scalar_log *l = calloc(1, sizeof *l);
  char sub[4096];
  float v;
  snprintf(sub, sizeof sub, "%s/eval_every", dir);
  read_events_dir(sub, l);
  assert_false(find_scalar(l, "eval_accuracy", 0, &v));
  assert_true(find_scalar(l, "eval_accuracy", 20, &v));
  assert_true(find_scalar(l, "eval_accuracy", 40, &v));
  assert_true(find_scalar(l, "eval_accuracy", 60, &v));
  snprintf(sub, sizeof sub, "%s/eval_throttled", dir);
  read_events_dir(sub, l);
  assert_int_equal(l->n / 8, 2);   /* 7 metrics + loss per evaluation */
  assert_true(find_scalar(l, "eval_accuracy", 80, &v));
  assert_true(find_scalar(l, "eval_accuracy", 100, &v));
  free(l);
  tm_data_free(&train);
  tm_data_free(&eval);
  test_remove_tree(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_train_evaluate_predict),
      cmocka_unit_test(test_keep_max_and_state_file),
      cmocka_unit_test(test_cadence_by_seconds),
      cmocka_unit_test(test_nan_loss_keeps_last_checkpoint),
      cmocka_unit_test(test_missing_input_and_feature),
      cmocka_unit_test(test_corrupt_checkpoint),
      cmocka_unit_test(test_restore_and_init_errors),
      cmocka_unit_test(test_warm_start),
      cmocka_unit_test(test_eval_metrics_ignore_padding),
      cmocka_unit_test(test_summaries_and_bert_schedule),
      cmocka_unit_test(test_adam_weight_decay_trajectory),
      cmocka_unit_test(test_input_end_and_inference_without_checkpoint),
      cmocka_unit_test(test_train_and_evaluate),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
