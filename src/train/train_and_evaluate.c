/* tf.estimator.train_and_evaluate, local mode (tensorflow_estimator: training.py,
 * _TrainingExecutor.run_local and _NewCheckpointListenerForEvaluate): training with a
 * listener on the checkpoint saver that evaluates each checkpoint just saved unless
 * throttled, and the end evaluated when it was not yet. est adds every_n_steps (a save,
 * and so an evaluation, every n steps), start_delay_secs, and a results line per
 * evaluation in the eval directory (est/estimator.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/exporter.h"
#include "est/file.h"
#include "est/log.h"
#include "train/estimator_internal.h"

typedef struct tae_ctx {
  est_estimator *e;
  const est_eval_spec *eval;
  int64_t max_steps;
  est_eval_result result;
  int64_t evaluated_step;
  double started;              /* est_now_seconds() when training began */
  double last_eval_time;       /* < 0: none yet */
} tae_ctx;

/* Appends "<the results line>\n" to <eval dir>/results.txt (chief only), rewriting the
 * file atomically so a reader never sees half a line. */
static est_status append_results_line(tae_ctx *c) {
  if (!est_is_chief(c->e)) return EST_OK;
  char path[4200], line[4096];
  snprintf(path, sizeof path, "%s/results.txt", est_eval_summaries(c->e, c->eval->name)->dir);
  est_eval_result_format_line(&c->result, line, sizeof line);
  uint8_t *old = NULL;
  size_t n = 0;
  if (est_file_exists(path) && est_read_file(path, &old, &n) != EST_OK) return est_error_prefix("results: ");
  est_atomic_file *f;
  est_status st = est_atomic_open(&f, path);
  if (st == EST_OK) {
    if (n) fwrite(old, 1, n, est_atomic_stream(f));
    fprintf(est_atomic_stream(f), "%s\n", line);
    st = est_atomic_commit(f);
  }
  free(old);
  return st;
}

/* TF's _export_eval_result: each exporter into model_dir/export/<name>, from the chief;
 * with N ranks the chief's outcome is broadcast so a failed export stops every rank. */
static est_status run_exporters(tae_ctx *c) {
  est_status st = EST_OK;
  const int final = c->result.global_step >= c->max_steps;
  for (size_t i = 0; est_is_chief(c->e) && st == EST_OK && i < c->eval->num_exporters; i++) {
    const est_exporter *x = &c->eval->exporters[i];
    char export_dir[4096], base[4096];
    st = est_path_join(export_dir, sizeof export_dir, c->e->config.model_dir, "export");
    if (st == EST_OK) st = est_path_join(base, sizeof base, export_dir, x->name);
    if (st == EST_OK) st = est_exporter_export(x, base, &c->result, final, NULL, 0);
  }
  if (est_world_size(c->e) > 1 && c->eval->num_exporters) {
    const est_distribution *d = c->e->config.distribution;
    float failed = st != EST_OK;
    if (d->broadcast(d->ctx, &failed, 1) != EST_OK)
      return est_error_prefix("train_and_evaluate, exporters at global step %lld: ", (long long)c->result.global_step);
    if (failed != 0.0f && st == EST_OK)
      st = est_error(EST_ERR_ABORTED, "an exporter failed on the chief at global step %lld",
                     (long long)c->result.global_step);
  }
  return st;
}

static est_status evaluate(tae_ctx *c, const char *prefix, int64_t global_step) {
  c->last_eval_time = est_now_seconds();
  est_eval_result_clear(&c->result);
  est_status st = est_estimator_evaluate(c->e, &c->eval->input_fn, c->eval->steps, prefix, c->eval->name, &c->result);
  if (st == EST_OK) c->evaluated_step = global_step;
  if (st == EST_OK) st = append_results_line(c);
  return st == EST_OK ? run_exporters(c) : st;
}

static est_status evaluate_after_save(void *p, const char *prefix, int64_t global_step) {
  tae_ctx *c = p;
  const est_eval_spec *ev = c->eval;
  double now = est_now_seconds();
  int throttled = ev->throttle_secs > 0 && c->last_eval_time >= 0 && now - c->last_eval_time < ev->throttle_secs;
  int delayed = ev->start_delay_secs > 0 && now - c->started < ev->start_delay_secs;
  int skip = throttled || delayed;
  if (est_world_size(c->e) > 1) {
    /* Evaluation is collective: the chief's clock decides for every rank. */
    const est_distribution *d = c->e->config.distribution;
    float flag = (float)(throttled + 2 * delayed);
    est_status st = d->broadcast(d->ctx, &flag, 1);
    if (st != EST_OK) return est_error_prefix("train_and_evaluate after the checkpoint of step %lld: ", (long long)global_step);
    skip = flag != 0.0f;
    throttled = flag == 1.0f || flag == 3.0f;
  }
  if (skip && throttled) {
    EST_LOG_INFO("Skip the current checkpoint eval due to throttle secs (%g secs).", ev->throttle_secs);
    return EST_OK;
  }
  if (skip) {
    EST_LOG_INFO("Skip the current checkpoint eval due to start delay secs (%g secs).", ev->start_delay_secs);
    return EST_OK;
  }
  return evaluate(c, prefix, global_step);
}

est_status est_train_and_evaluate(est_estimator *e, const est_train_spec *train, const est_eval_spec *eval,
                                  est_eval_result *last) {
  if (last) memset(last, 0, sizeof *last);
  if (eval->every_n_steps < 0 || eval->throttle_secs < 0 || eval->start_delay_secs < 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "eval_spec: every_n_steps (%lld), throttle_secs (%g) and "
                     "start_delay_secs (%g) must be >= 0", (long long)eval->every_n_steps, eval->throttle_secs,
                     eval->start_delay_secs);
  tae_ctx c = {.e = e, .eval = eval, .max_steps = train->max_steps, .evaluated_step = -1, .last_eval_time = -1.0, .started = est_now_seconds()};
  int64_t final_step = 0;
  char saved[4096] = "";
  /* every_n_steps: the saver's cadence for this call only. */
  const int64_t config_save_steps = e->config.save_checkpoints_steps;
  if (eval->every_n_steps > 0) e->config.save_checkpoints_steps = eval->every_n_steps;
  est_status st = est_train_impl(e, &train->input_fn, 0, train->max_steps, train->hooks, train->num_hooks,
                                 evaluate_after_save, &c, &final_step, saved, sizeof saved);
  e->config.save_checkpoints_steps = config_save_steps;
  /* Training was skipped (already at max_steps) or its end was not evaluated yet. */
  if (st == EST_OK && c.evaluated_step != final_step) st = evaluate(&c, saved[0] ? saved : NULL, final_step);
  if (st == EST_OK && last) *last = c.result;
  else est_eval_result_clear(&c.result);
  return st;
}
