/* Estimator.evaluate, Estimator.predict and train_and_evaluate. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "est/float_format.h"
#include "est/file.h"
#include "est/log.h"
#include "est/metrics.h"
#include "core/alloc.h"
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
  else est_format_float32((float)v, buf, size);
}

static int cmp_index_by_name(const void *a, const void *b, void *names) {
  char **n = names;
  return strcmp(n[*(const size_t *)a], n[*(const size_t *)b]);
}

/* The entries' indices in bytewise name order (evaluate's results already are; a result
 * built by hand need not be). NULL when out of memory. */
static size_t *sorted_order(const est_eval_result *r) {
  size_t *idx = malloc((r->count ? r->count : 1) * sizeof *idx);
  if (!idx) return NULL;
  for (size_t i = 0; i < r->count; i++) idx[i] = i;
  qsort_r(idx, r->count, sizeof *idx, cmp_index_by_name, r->names);
  return idx;
}

est_status est_eval_result_write(const est_eval_result *r, const char *path) {
  size_t *idx = sorted_order(r);
  if (!idx) return est_error(EST_ERR_NO_MEMORY, "%s: out of memory", path);
  est_atomic_file *f;
  if (est_atomic_open(&f, path) != EST_OK) {
    free(idx);
    return est_error_code();
  }
  for (size_t k = 0; k < r->count; k++) {
    const size_t i = idx[k];
    char v[64];
    format_value(r->names[i], r->values[i], v, sizeof v);
    fprintf(est_atomic_stream(f), "%s = %s\n", r->names[i], v);
  }
  free(idx);
  return est_atomic_commit(f);
}

void est_eval_result_format_line(const est_eval_result *r, char *line, size_t size) {
  size_t *idx = sorted_order(r);
  size_t len = 0;
  line[0] = 0;
  for (size_t k = 0; k < r->count && len < size; k++) {
    const size_t i = idx ? idx[k] : k;
    char v[64];
    format_value(r->names[i], r->values[i], v, sizeof v);
    len += (size_t)snprintf(line + len, size - len, "%s%s = %s", k ? ", " : "", r->names[i], v);
  }
  free(idx);
}

void est_eval_result_log(const est_eval_result *r) {
  size_t *idx = sorted_order(r);
  EST_LOG_INFO("***** Eval results *****");
  for (size_t k = 0; k < r->count; k++) {
    const size_t i = idx ? idx[k] : k;
    char v[64];
    format_value(r->names[i], r->values[i], v, sizeof v);
    EST_LOG_INFO("  %s = %s", r->names[i], v);
  }
  free(idx);
}

static est_status result_add(est_eval_result *r, const char *name, double value) {
  for (size_t i = 0; i < r->count; i++)
    if (!strcmp(r->names[i], name))
      return est_error(EST_ERR_INVALID_ARGUMENT, "two evaluation results are called '%s'", name);
  char *copy = strdup(name);
  if (!copy || !EST_RESIZE(r->names, r->count + 1) || !EST_RESIZE(r->values, r->count + 1)) {
    free(copy);
    return est_error(EST_ERR_NO_MEMORY, "out of memory");
  }
  r->names[r->count] = copy;
  r->values[r->count++] = value;
  return EST_OK;
}

est_status est_eval_result_set(est_eval_result *r, const char *name, double value) {
  for (size_t i = 0; i < r->count; i++)
    if (!strcmp(r->names[i], name)) {
      r->values[i] = value;
      return EST_OK;
    }
  return result_add(r, name, value);
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
  /* evaluate and predict never write the variables: the GEMMs may keep packed weights */
  if (st == EST_OK) est_vars_set_read_only(s->vars, 1);
  if (st != EST_OK) est_session_free(e, s);
  return st;
}

/* open_for_inference on every rank, then one allgather of (status, global_step, has a
 * checkpoint): all ranks must restore the same checkpoint, or their metrics would be
 * summed over different models. On failure (local or elsewhere) no session is left. */
static est_status open_everywhere(est_estimator *e, est_mode mode, const char *checkpoint_path, est_session *s,
                                  char *prefix, size_t size) {
  est_status st = open_for_inference(e, mode, checkpoint_path, s, prefix, size);
  const int world = est_world_size(e);
  if (world <= 1) return st;
  const int opened = st == EST_OK;
  char why[1024] = "";
  if (!opened) snprintf(why, sizeof why, "%s", est_error_message());
  int64_t mine[3] = {(int64_t)st, opened ? s->global_step : -1, opened && prefix[0]};
  int64_t *all = calloc((size_t)world * 3, sizeof *all);
  est_status cst = all ? EST_OK : est_error(EST_ERR_NO_MEMORY, "out of memory");
  const est_distribution *d = e->config.distribution;
  if (cst == EST_OK) cst = d->allgather_i64(d->ctx, mine, 3, all);
  if (cst == EST_OK && !opened) cst = est_error(st, "%s", why);
  for (int r = 0; cst == EST_OK && r < world; r++) {
    if (all[3 * r] != EST_OK)
      cst = est_error(EST_ERR_ABORTED, "%s: restoring the model failed on rank %d of %d (its log says why)",
                      est_mode_name(mode), r, world);
    else if (all[3 * r + 1] != all[1] || all[3 * r + 2] != all[2])
      cst = est_error(EST_ERR_FAILED_PRECONDITION,
                      "%s: rank %d restored %s at global step %lld but the chief %s at global step %lld: the ranks "
                      "must use the same checkpoint",
                      est_mode_name(mode), r, all[3 * r + 2] ? "a checkpoint" : "no checkpoint",
                      (long long)all[3 * r + 1], all[2] ? "a checkpoint" : "no checkpoint", (long long)all[1]);
  }
  free(all);
  if (cst != EST_OK && opened) est_session_free(e, s);
  return cst;
}

/* Per-batch (sum of row losses, rows) of one evaluation, for the global-batch "loss". */
typedef struct batch_losses {
  double *v;         /* [n, 2] */
  size_t n, cap;
} batch_losses;

static est_status batch_losses_add(batch_losses *b, double loss, int rows) {
  if (b->n == b->cap) {
    size_t cap = b->cap ? 2 * b->cap : 64;
    double *grown = realloc(b->v, cap * 2 * sizeof *grown);
    if (!grown) return est_error(EST_ERR_NO_MEMORY, "out of memory");
    b->v = grown;
    b->cap = cap;
  }
  b->v[2 * b->n] = loss * rows;
  b->v[2 * b->n + 1] = rows;
  b->n++;
  return EST_OK;
}

/* Combines every rank's evaluation: the metric accumulators are summed, and the k-th
 * batches of all ranks form the k-th global batch, whose loss is their row-weighted
 * mean (see est_estimator_evaluate). `local` is this rank's status so far: every rank
 * joins, so a rank that failed makes all fail instead of leaving them waiting.
 * *loss receives the mean over global batches of their losses. */
static est_status combine_eval(est_estimator *e, est_status local, batch_losses *bl, est_metric *const *metrics,
                               size_t nmetrics, double *loss) {
  const int world = est_world_size(e);
  const est_distribution *d = e->config.distribution;
  *loss = 0.0;
  /* 1: agree on failure and on the number of global batches (the most any rank ran). */
  int64_t mine[2] = {(int64_t)local, (int64_t)bl->n}, *all = NULL;
  char why[1024] = "";
  if (local != EST_OK) snprintf(why, sizeof why, "%s", est_error_message());
  size_t nbatches = bl->n;
  if (world > 1) {
    all = calloc((size_t)world * 2, sizeof *all);
    if (!all) return local != EST_OK ? local : est_error(EST_ERR_NO_MEMORY, "out of memory");
    est_status st = d->allgather_i64(d->ctx, mine, 2, all);
    if (st != EST_OK) {
      free(all);
      return st;
    }
    if (local != EST_OK) {
      free(all);
      return est_error(local, "%s", why);
    }
    for (int r = 0; r < world; r++) {
      if (all[2 * r] != EST_OK) {
        free(all);
        return est_error(EST_ERR_ABORTED, "evaluation failed on rank %d of %d (its log says why)", r, world);
      }
      if ((size_t)all[2 * r + 1] > nbatches) nbatches = (size_t)all[2 * r + 1];
    }
    free(all);
  } else if (local != EST_OK) {
    return local;
  }
  /* 2: one sum over [per-batch (loss x rows, rows) ..., every metric's accumulators]. */
  size_t total = 2 * nbatches;
  for (size_t k = 0; k < nmetrics; k++) {
    double *acc;
    size_t n;
    est_metric_state(metrics[k], &acc, &n);
    total += n;
  }
  double *buf = calloc(total ? total : 1, sizeof *buf);
  if (!buf) return est_error(EST_ERR_NO_MEMORY, "out of memory");
  if (bl->n) memcpy(buf, bl->v, bl->n * 2 * sizeof *buf);
  size_t off = 2 * nbatches;
  for (size_t k = 0; k < nmetrics; k++) {
    double *acc;
    size_t n;
    est_metric_state(metrics[k], &acc, &n);
    memcpy(buf + off, acc, n * sizeof *acc), off += n;
  }
  est_status st = world > 1 ? d->allreduce_sum(d->ctx, buf, total) : EST_OK;
  if (st == EST_OK) {
    off = 2 * nbatches;
    for (size_t k = 0; k < nmetrics; k++) {
      double *acc;
      size_t n;
      est_metric_state(metrics[k], &acc, &n);
      memcpy(acc, buf + off, n * sizeof *acc), off += n;
    }
    double sum = 0.0;
    size_t counted = 0;
    for (size_t b = 0; b < nbatches; b++) {
      if (buf[2 * b + 1] <= 0) continue;
      sum += buf[2 * b] / buf[2 * b + 1];
      counted++;
    }
    *loss = counted ? sum / (double)counted : 0.0;
  }
  free(buf);
  return st;
}

static void wall_clock(char *buf, size_t size) {
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(buf, size, "%Y-%m-%d-%H:%M:%S", &tm);
}

/* ---- evaluate ----------------------------------------------------------------------------- */

/* A stop request (est_request_stop) ends evaluation and prediction at the next batch:
 * they have nothing to save, and the caller is waiting to exit. */
static est_status cancelled_if_requested(const char *what, const char *unit, int64_t at) {
  int signo;
  if (!est_stop_requested(&signo)) return EST_OK;
  char name[32];
  est_stop_signal_name(signo, name, sizeof name);
  EST_LOG_WARN("Received %s during %s at %s %lld; no results written; exiting", name, what, unit, (long long)at);
  return est_error(EST_ERR_CANCELLED, "Received %s during %s at %s %lld; no results written; exiting", name, what,
                   unit, (long long)at);
}

est_status est_estimator_evaluate(est_estimator *e, const est_input_fn *input_fn, int64_t steps,
                                  const char *checkpoint_path, const char *name, est_eval_result *out) {
  memset(out, 0, sizeof *out);
  if (steps < 0) return est_error(EST_ERR_INVALID_ARGUMENT, "evaluate: steps is %lld, must be >= 0", (long long)steps);
  char prefix[4096];
  est_session s;
  est_status st = open_everywhere(e, EST_MODE_EVAL, checkpoint_path, &s, prefix, sizeof prefix);
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
  batch_losses bl = {0};
  int64_t i = 0;
  while (st == EST_OK && (steps == 0 || i < steps)) {
    if ((st = cancelled_if_requested("evaluation", "batch", i)) != EST_OK) break;
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
    st = batch_losses_add(&bl, spec.loss, features.batch_size);
    i++;
    if (steps > 0 && (i % (steps / 10 > 0 ? steps / 10 : 1) == 0 || i == steps))
      EST_LOG_INFO("Evaluation [%lld/%lld]", (long long)i, (long long)steps);
  }
  est_close_input(&in);
  double loss = 0.0;
  st = combine_eval(e, st, &bl, metrics, nmetrics, &loss);
  free(bl.v);

  if (st == EST_OK) {
    for (size_t k = 0; st == EST_OK && k < nmetrics; k++)
      st = result_add(out, est_metric_name(metrics[k]), est_metric_result(metrics[k]));
    /* "loss": the unweighted mean of the batch losses (tf.estimator's own loss metric). */
    if (st == EST_OK) st = result_add(out, "loss", (double)(float)loss);
    if (st == EST_OK) st = result_add(out, "global_step", (double)s.global_step);
    if (st == EST_OK) st = result_sort(out);
    out->global_step = s.global_step;
    out->checkpoint_path = prefix[0] ? strdup(prefix) : NULL;
    /* NaN metrics would go into eval_results.txt and TensorBoard looking like numbers. */
    for (size_t k = 0; st == EST_OK && k < out->count; k++) {
      if (isfinite(out->values[k])) continue;
      char v[32];
      format_value(out->names[k], out->values[k], v, sizeof v);
      st = est_error(EST_ERR_ABORTED, "evaluation of %s: %s = %s is not finite (the model gives NaN or Inf on "
                     "this data); no results written", prefix[0] ? prefix : "the initial values", out->names[k], v);
    }
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

/* Checks the model's predictions for a batch of `batch` rows; *row_bytes receives the
 * bytes of one example's outputs, all of them end to end. */
static est_status check_predictions(const est_estimator *e, const est_estimator_spec *spec, int batch,
                                    size_t *row_bytes) {
  *row_bytes = 0;
  if (spec->num_predictions == 0 || !spec->predictions || !spec->prediction_names)
    return est_error(EST_ERR_INVALID_ARGUMENT, "model_fn %s returned no predictions", e->fn.name ? e->fn.name : "");
  for (size_t k = 0; k < spec->num_predictions; k++) {
    const est_tensor *t = &spec->predictions[k];
    if (t->rank < 1 || t->dims[0] != batch || est_dtype_size(t->dtype) == 0)
      return est_error(EST_ERR_INVALID_ARGUMENT, "prediction '%s' must be a numeric [batch=%d, ...] tensor",
                       spec->prediction_names[k], batch);
    *row_bytes += batch ? est_tensor_num_bytes(t) / (size_t)batch : 0;
  }
  return EST_OK;
}

/* Views of example b's outputs: rows[k] is row b of prediction k, read from the model's
 * tensors (packed NULL) or from one packed row (the outputs end to end). */
static void row_views(const est_estimator_spec *spec, const char *packed, int b, est_tensor *rows) {
  size_t off = 0;
  for (size_t k = 0; k < spec->num_predictions; k++) {
    const est_tensor *t = &spec->predictions[k];
    est_tensor *r = &rows[k];
    memset(r, 0, sizeof *r);
    r->dtype = t->dtype;
    r->rank = t->rank - 1;
    for (int d = 1; d < t->rank; d++) r->dims[d - 1] = t->dims[d];
    size_t rb = est_tensor_num_bytes(r);
    r->data = packed ? (void *)(packed + off) : (void *)((char *)t->data + (size_t)b * rb);
    off += rb;
  }
}

est_status est_estimator_predict(est_estimator *e, const est_input_fn *input_fn, const char *checkpoint_path,
                                 est_prediction_fn on_prediction, void *ctx) {
  if (!on_prediction) return est_error(EST_ERR_INVALID_ARGUMENT, "predict: on_prediction is NULL");
  const int world = est_world_size(e);
  const est_distribution *d = e->config.distribution;
  if (world > 1 && !d->gather_rows)
    return est_error(EST_ERR_INVALID_ARGUMENT, "predict on %d ranks needs the distribution's gather_rows", world);
  char prefix[4096];
  est_session s;
  est_status st = open_everywhere(e, EST_MODE_PREDICT, checkpoint_path, &s, prefix, sizeof prefix);
  if (st != EST_OK) return st;
  est_input in = {0};
  /* `local`: this rank's first failure. With N ranks it is shared at the next batch's
   * flag sum, so every rank stops at the same batch. */
  est_status local = est_open_input(e, input_fn, EST_MODE_PREDICT, s.ctx.seed, &in);
  est_tensor *rows = NULL;
  size_t rows_cap = 0, packed_cap = 0;
  char *packed = NULL;
  int64_t index = 0;
  int ended = 0;
  for (;;) {
    est_features features = {0};
    est_estimator_spec spec = {0};
    int n = 0;
    size_t row_bytes = 0;
    if (local == EST_OK && !ended) local = cancelled_if_requested("prediction", "example", index);
    if (local == EST_OK && !ended) {
      local = in.next(in.self, &features);
      if (local == EST_ERR_OUT_OF_RANGE) {
        est_error_clear();
        local = EST_OK;
        ended = 1;
      } else if (local != EST_OK) {
        est_error_prefix("input_fn (predict) at example %lld: ", (long long)index);
      } else {
        local = e->fn.call(s.model, s.vars, &features, EST_MODE_PREDICT, s.global_step, &spec);
        if (local != EST_OK)
          est_error_prefix("model_fn %s (predict) at example %lld: ", e->fn.name ? e->fn.name : "", (long long)index);
        else local = check_predictions(e, &spec, features.batch_size, &row_bytes);
        if (local == EST_OK) n = features.batch_size;
      }
    }
    if (local == EST_OK && n > 0 && rows_cap < spec.num_predictions) {
      est_tensor *grown = realloc(rows, spec.num_predictions * sizeof *grown);
      if (grown) rows = grown, rows_cap = spec.num_predictions;
      else local = est_error(EST_ERR_NO_MEMORY, "out of memory"), n = 0;
    }

    if (world <= 1) {
      if (local != EST_OK || n == 0) break;
      for (int b = 0; b < n && local == EST_OK; b++) {
        row_views(&spec, NULL, b, rows);
        est_prediction p = {.index = index++, .count = spec.num_predictions, .names = spec.prediction_names,
                            .values = rows};
        local = on_prediction(ctx, &p);
      }
      continue;
    }

    /* N ranks: pack this batch's rows, agree on (rows, failure, row size), gather. */
    if (local == EST_OK && n > 0) {
      size_t need = (size_t)n * row_bytes;
      if (need > packed_cap) {
        char *grown = realloc(packed, need);
        if (grown) packed = grown, packed_cap = need;
        else local = est_error(EST_ERR_NO_MEMORY, "out of memory packing %d predictions", n), n = 0;
      }
      for (int b = 0; b < n && local == EST_OK; b++) {
        row_views(&spec, NULL, b, rows);
        size_t off = 0;
        for (size_t k = 0; k < spec.num_predictions; k++) {
          size_t rb = est_tensor_num_bytes(&rows[k]);
          memcpy(packed + (size_t)b * row_bytes + off, rows[k].data, rb);
          off += rb;
        }
      }
    }
    if (local != EST_OK) n = 0;
    char why[1024] = "";
    if (local != EST_OK) snprintf(why, sizeof why, "%s", est_error_message());
    /* sum(size) and sum(size^2) over the ranks with rows: equal sizes iff
     * k * sum(size^2) == sum(size)^2 (the models must agree on the outputs' shapes). */
    const double rb = n > 0 ? (double)row_bytes : 0.0;
    double f[5] = {(double)n, local != EST_OK, rb, rb * rb, n > 0};
    st = d->allreduce_sum(d->ctx, f, 5);
    if (st != EST_OK) break;
    if (f[1] > 0) {
      st = local != EST_OK ? est_error(local, "%s", why)
                           : est_error(EST_ERR_ABORTED, "predict stopped at example %lld: %g rank(s) failed (their "
                                       "logs say why)", (long long)index, f[1]);
      break;
    }
    if (f[0] == 0) break;
    if (f[4] * f[3] != f[2] * f[2]) {
      st = est_error(EST_ERR_FAILED_PRECONDITION, "predict: the ranks' models give predictions of different sizes "
                     "(%zu bytes per example here)", row_bytes);
      break;
    }
    const size_t agreed = (size_t)(f[2] / f[4]);
    void *all = NULL;
    size_t total = 0;
    local = d->gather_rows(d->ctx, packed, (size_t)n, agreed, &all, &total);
    /* A failure here (rows that no shard() of one input gives: it is found on the chief
     * only) is shared at the next flag sum. */
    for (size_t g = 0; local == EST_OK && all && g < total; g++) {
      row_views(&spec, (const char *)all + g * agreed, 0, rows);
      est_prediction p = {.index = index++, .count = spec.num_predictions, .names = spec.prediction_names,
                          .values = rows};
      local = on_prediction(ctx, &p);
    }
    if (!all) index += (int64_t)total;
    free(all);
  }
  if (st == EST_OK) st = local;
  free(rows);
  free(packed);
  est_close_input(&in);
  est_session_free(e, &s);
  return st;
}
