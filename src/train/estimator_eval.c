/* Estimator.evaluate, Estimator.predict and train_and_evaluate. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "est/file.h"
#include "est/log.h"
#include "est/metrics.h"
#include "train/estimator_internal.h"

/* ---- results ---------------------------------------------------------------------------- */

void est_eval_result_clear(est_eval_result *r) {
  if (!r) return;
  for (size_t i = 0; i < r->count; i++) free(r->names[i]);
  free(r->names);
  free(r->values);
  free(r->checkpoint_path);
  memset(r, 0, sizeof *r);
}

est_status est_eval_result_get(const est_eval_result *r, const char *name, double *value) {
  for (size_t i = 0; i < r->count; i++)
    if (!strcmp(r->names[i], name)) {
      *value = r->values[i];
      return EST_OK;
    }
  return est_error(EST_ERR_NOT_FOUND, "no '%s' in the evaluation results", name);
}

static void format_value(const char *name, double v, char *buf, size_t size) {
  if (!strcmp(name, "global_step")) snprintf(buf, size, "%lld", (long long)v);
  else est_format_f32((float)v, buf, size);
}

est_status est_eval_result_write(const est_eval_result *r, const char *path) {
  est_atomic_file *f;
  if (est_atomic_open(&f, path) != EST_OK) return est_error_code();
  for (size_t i = 0; i < r->count; i++) {
    char v[64];
    format_value(r->names[i], r->values[i], v, sizeof v);
    fprintf(est_atomic_stream(f), "%s = %s\n", r->names[i], v);
  }
  return est_atomic_commit(f);
}

static int cmp_index_by_name(const void *a, const void *b, void *names) {
  char **n = names;
  return strcmp(n[*(const size_t *)a], n[*(const size_t *)b]);
}

static est_status result_add(est_eval_result *r, const char *name, double value) {
  for (size_t i = 0; i < r->count; i++)
    if (!strcmp(r->names[i], name))
      return est_error(EST_ERR_INVALID_ARGUMENT, "two evaluation results are called '%s'", name);
  char **names = realloc(r->names, (r->count + 1) * sizeof *names);
  if (names) r->names = names;
  double *values = realloc(r->values, (r->count + 1) * sizeof *values);
  if (values) r->values = values;
  char *copy = strdup(name);
  if (!names || !values || !copy) {
    free(copy);
    return est_error(EST_ERR_NO_MEMORY, "out of memory");
  }
  r->names[r->count] = copy;
  r->values[r->count++] = value;
  return EST_OK;
}

static est_status result_sort(est_eval_result *r) {
  size_t *idx = malloc((r->count ? r->count : 1) * sizeof *idx);
  char **names = malloc((r->count ? r->count : 1) * sizeof *names);
  double *values = malloc((r->count ? r->count : 1) * sizeof *values);
  if (!idx || !names || !values) {
    free(idx), free(names), free(values);
    return est_error(EST_ERR_NO_MEMORY, "out of memory");
  }
  for (size_t i = 0; i < r->count; i++) idx[i] = i;
  qsort_r(idx, r->count, sizeof *idx, cmp_index_by_name, r->names);
  for (size_t i = 0; i < r->count; i++) names[i] = r->names[idx[i]], values[i] = r->values[idx[i]];
  free(r->names), free(r->values), free(idx);
  r->names = names;
  r->values = values;
  return EST_OK;
}

/* ---- shared set-up for evaluate and predict ----------------------------------------------- */

static est_status open_for_inference(est_estimator *e, est_mode mode, const char *checkpoint_path,
                                     est_session *s, char *prefix, size_t size) {
  est_status st = est_find_checkpoint(e, checkpoint_path, prefix, size);
  if (st != EST_OK) return st;
  est_restored rs = {0};
  if (prefix[0] && est_read_train_state(prefix, &rs) != EST_OK) return est_error_prefix("restoring %s: ", prefix);
  uint64_t seed = e->config.seed ? e->config.seed : rs.has_seed ? rs.seed : 1;
  est_restored_clear(&rs);
  st = est_session_create(e, mode, seed, s);
  if (st != EST_OK) return st;
  if (prefix[0]) {
    st = est_session_restore(e, s, prefix, 0);
  } else {
    /* TF 1.x Estimator: no checkpoint means the initialisers (and the Scaffold, e.g.
     * BERT's init_checkpoint) give the values. */
    EST_LOG_INFO("Could not find trained model in model_dir: %s, running initialization to %s.", e->model_dir,
                 mode == EST_MODE_EVAL ? "evaluate" : "predict");
    st = est_session_initialize(e, s);
  }
  if (st != EST_OK) est_session_free(e, s);
  return st;
}

static void wall_clock(char *buf, size_t size) {
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(buf, size, "%Y-%m-%d-%H:%M:%S", &tm);
}

/* ---- evaluate ----------------------------------------------------------------------------- */

est_status est_estimator_evaluate(est_estimator *e, const est_input_fn *input_fn, int64_t steps,
                                  const char *checkpoint_path, const char *name, est_eval_result *out) {
  memset(out, 0, sizeof *out);
  if (steps < 0) return est_error(EST_ERR_INVALID_ARGUMENT, "evaluate: steps is %lld, must be >= 0", (long long)steps);
  char prefix[4096];
  est_session s;
  est_status st = open_for_inference(e, EST_MODE_EVAL, checkpoint_path, &s, prefix, sizeof prefix);
  if (st != EST_OK) return st;

  est_metric *const *metrics = NULL;
  size_t nmetrics = 0;
  if (e->fn.metrics) {
    st = e->fn.metrics(s.model, &metrics, &nmetrics);
    if (st != EST_OK) est_error_prefix("model_fn %s metrics: ", e->fn.name ? e->fn.name : "");
  }
  for (size_t i = 0; st == EST_OK && i < nmetrics; i++) est_metric_reset(metrics[i]);

  est_input in = {0};
  if (st == EST_OK) st = est_open_input(e, input_fn, EST_MODE_EVAL, s.ctx.seed, &in);
  char when[64];
  wall_clock(when, sizeof when);
  if (st == EST_OK) EST_LOG_INFO("Starting evaluation at %s", when);
  double loss_sum = 0.0, batches = 0.0;
  int64_t i = 0;
  while (st == EST_OK && (steps == 0 || i < steps)) {
    est_features features = {0};
    st = in.next(in.self, &features);
    if (st == EST_ERR_OUT_OF_RANGE) {
      est_error_clear();
      st = EST_OK;
      break;
    }
    if (st != EST_OK) {
      est_error_prefix("input_fn (eval) at batch %lld: ", (long long)i);
      break;
    }
    est_estimator_spec spec = {0};
    st = e->fn.call(s.model, s.vars, &features, EST_MODE_EVAL, s.global_step, &spec);
    if (st != EST_OK) {
      est_error_prefix("model_fn %s (eval) at batch %lld: ", e->fn.name ? e->fn.name : "", (long long)i);
      break;
    }
    loss_sum += spec.loss;
    batches += 1.0;
    i++;
    if (steps > 0 && (i % (steps / 10 > 0 ? steps / 10 : 1) == 0 || i == steps))
      EST_LOG_INFO("Evaluation [%lld/%lld]", (long long)i, (long long)steps);
  }
  est_close_input(&in);

  if (st == EST_OK && est_world_size(e) > 1) {
    /* One sum over [loss_sum, batches, every metric's accumulators]. */
    size_t total = 2;
    for (size_t k = 0; k < nmetrics; k++) {
      double *acc;
      size_t n;
      est_metric_state(metrics[k], &acc, &n);
      total += n;
    }
    double *buf = malloc(total * sizeof *buf);
    if (!buf) st = est_error(EST_ERR_NO_MEMORY, "out of memory");
    if (st == EST_OK) {
      size_t off = 2;
      buf[0] = loss_sum, buf[1] = batches;
      for (size_t k = 0; k < nmetrics; k++) {
        double *acc;
        size_t n;
        est_metric_state(metrics[k], &acc, &n);
        memcpy(buf + off, acc, n * sizeof *acc), off += n;
      }
      const est_distribution *d = e->config.distribution;
      st = d->allreduce_sum(d->ctx, buf, total);
      loss_sum = buf[0], batches = buf[1], off = 2;
      for (size_t k = 0; st == EST_OK && k < nmetrics; k++) {
        double *acc;
        size_t n;
        est_metric_state(metrics[k], &acc, &n);
        memcpy(acc, buf + off, n * sizeof *acc), off += n;
      }
    }
    free(buf);
  }

  if (st == EST_OK) {
    for (size_t k = 0; st == EST_OK && k < nmetrics; k++)
      st = result_add(out, est_metric_name(metrics[k]), est_metric_result(metrics[k]));
    /* "loss": the unweighted mean of the batch losses (tf.estimator's own loss metric). */
    if (st == EST_OK) st = result_add(out, "loss", batches > 0 ? (double)(float)(loss_sum / batches) : 0.0);
    if (st == EST_OK) st = result_add(out, "global_step", (double)s.global_step);
    if (st == EST_OK) st = result_sort(out);
    out->global_step = s.global_step;
    out->checkpoint_path = prefix[0] ? strdup(prefix) : NULL;
  }
  if (st == EST_OK) {
    wall_clock(when, sizeof when);
    EST_LOG_INFO("Finished evaluation at %s", when);
    char line[4096];
    size_t len = 0;
    line[0] = 0;
    for (size_t k = 0; k < out->count && len < sizeof line; k++) {
      char v[64];
      format_value(out->names[k], out->values[k], v, sizeof v);
      len += (size_t)snprintf(line + len, sizeof line - len, "%s%s = %s", k ? ", " : "", out->names[k], v);
    }
    EST_LOG_INFO("Saving dict for global step %lld: %s", (long long)s.global_step, line);
    est_summaries *sum = est_eval_summaries(e, name);
    const char *tags[64];
    float values[64];
    size_t nt = 0;
    for (size_t k = 0; k < out->count && nt < 64; k++) {
      if (!strcmp(out->names[k], "global_step")) continue;
      tags[nt] = out->names[k];
      values[nt++] = (float)out->values[k];
    }
    est_summaries_scalars(sum, s.global_step, nt, tags, values);
    est_summaries_flush(sum);
  }
  if (st != EST_OK) est_eval_result_clear(out);
  est_session_free(e, &s);
  return st;
}

/* ---- predict ------------------------------------------------------------------------------ */

est_status est_estimator_predict(est_estimator *e, const est_input_fn *input_fn, const char *checkpoint_path,
                                 est_prediction_fn on_prediction, void *ctx) {
  if (!on_prediction) return est_error(EST_ERR_INVALID_ARGUMENT, "predict: on_prediction is NULL");
  char prefix[4096];
  est_session s;
  est_status st = open_for_inference(e, EST_MODE_PREDICT, checkpoint_path, &s, prefix, sizeof prefix);
  if (st != EST_OK) return st;
  est_input in = {0};
  st = est_open_input(e, input_fn, EST_MODE_PREDICT, s.ctx.seed, &in);
  est_tensor *rows = NULL;
  size_t rows_cap = 0;
  int64_t index = 0;
  while (st == EST_OK) {
    est_features features = {0};
    st = in.next(in.self, &features);
    if (st == EST_ERR_OUT_OF_RANGE) {
      est_error_clear();
      st = EST_OK;
      break;
    }
    if (st != EST_OK) {
      est_error_prefix("input_fn (predict) at example %lld: ", (long long)index);
      break;
    }
    est_estimator_spec spec = {0};
    st = e->fn.call(s.model, s.vars, &features, EST_MODE_PREDICT, s.global_step, &spec);
    if (st != EST_OK) {
      est_error_prefix("model_fn %s (predict) at example %lld: ", e->fn.name ? e->fn.name : "", (long long)index);
      break;
    }
    if (spec.num_predictions == 0 || !spec.predictions || !spec.prediction_names) {
      st = est_error(EST_ERR_INVALID_ARGUMENT, "model_fn %s returned no predictions", e->fn.name ? e->fn.name : "");
      break;
    }
    for (size_t k = 0; k < spec.num_predictions && st == EST_OK; k++) {
      const est_tensor *t = &spec.predictions[k];
      if (t->rank < 1 || t->dims[0] != features.batch_size || est_dtype_size(t->dtype) == 0)
        st = est_error(EST_ERR_INVALID_ARGUMENT, "prediction '%s' must be a numeric [batch=%d, ...] tensor",
                       spec.prediction_names[k], features.batch_size);
    }
    if (st != EST_OK) break;
    if (rows_cap < spec.num_predictions) {
      est_tensor *grown = realloc(rows, spec.num_predictions * sizeof *grown);
      if (!grown) {
        st = est_error(EST_ERR_NO_MEMORY, "out of memory");
        break;
      }
      rows = grown;
      rows_cap = spec.num_predictions;
    }
    for (int b = 0; b < features.batch_size && st == EST_OK; b++) {
      for (size_t k = 0; k < spec.num_predictions; k++) {
        const est_tensor *t = &spec.predictions[k];
        est_tensor *r = &rows[k];
        memset(r, 0, sizeof *r);
        r->dtype = t->dtype;
        r->rank = t->rank - 1;
        for (int d = 1; d < t->rank; d++) r->dims[d - 1] = t->dims[d];
        size_t row_bytes = est_tensor_num_bytes(r);
        r->data = (char *)t->data + (size_t)b * row_bytes;
      }
      est_prediction p = {.index = index++, .count = spec.num_predictions, .names = spec.prediction_names,
                          .values = rows};
      st = on_prediction(ctx, &p);
    }
  }
  free(rows);
  est_close_input(&in);
  est_session_free(e, &s);
  return st;
}

/* ---- train_and_evaluate ------------------------------------------------------------------- */

typedef struct tae_ctx {
  est_estimator *e;
  const est_eval_spec *eval;
  est_eval_result result;
  int64_t evaluated_step;
  double last_eval_time;       /* < 0: none yet */
} tae_ctx;

static est_status evaluate_after_save(void *p, const char *prefix, int64_t global_step) {
  tae_ctx *c = p;
  double now = est_now_seconds();
  if (c->eval->throttle_secs > 0 && c->last_eval_time >= 0 && now - c->last_eval_time < c->eval->throttle_secs) {
    EST_LOG_INFO("Skip the current checkpoint eval due to throttle secs (%g secs).", c->eval->throttle_secs);
    return EST_OK;
  }
  c->last_eval_time = now;
  est_eval_result_clear(&c->result);
  est_status st = est_estimator_evaluate(c->e, &c->eval->input_fn, c->eval->steps, prefix, c->eval->name, &c->result);
  if (st == EST_OK) c->evaluated_step = global_step;
  return st;
}

est_status est_train_and_evaluate(est_estimator *e, const est_train_spec *train, const est_eval_spec *eval,
                                  est_eval_result *last) {
  if (last) memset(last, 0, sizeof *last);
  tae_ctx c = {.e = e, .eval = eval, .evaluated_step = -1, .last_eval_time = -1.0};
  int64_t final_step = 0;
  char saved[4096] = "";
  est_status st = est_train_impl(e, &train->input_fn, 0, train->max_steps, evaluate_after_save, &c, &final_step,
                                 saved, sizeof saved);
  /* Training was skipped (already at max_steps) or its end was not evaluated yet. */
  if (st == EST_OK && c.evaluated_step != final_step) {
    est_eval_result_clear(&c.result);
    st = est_estimator_evaluate(e, &eval->input_fn, eval->steps, saved[0] ? saved : NULL, eval->name, &c.result);
  }
  if (st == EST_OK && last) *last = c.result;
  else est_eval_result_clear(&c.result);
  return st;
}
