/* Streaming metrics: each one is a fixed array of double sums plus a result formula. */
#include "est/metrics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { T = EST_METRIC_AUC_THRESHOLDS };
enum { TP = 0, FP = 1, TN = 2, FN = 3 };  /* confusion-count layout for the binary metrics */

struct est_metric {
  est_metric_kind kind;
  char name[EST_METRIC_NAME_MAX];
  size_t n;
  double *acc;            /* MEAN/ACCURACY: {total, count}; binary: {tp, fp, tn, fn};
                           * AUC: tp[T], fn[T], tn[T], fp[T] (metrics_impl.py's order) */
  float thresholds[T];    /* AUC only, float32 as the TF graph's constant */
};

static int is_binary(est_metric_kind k) {
  return k == EST_METRIC_PRECISION || k == EST_METRIC_RECALL || k == EST_METRIC_F1 || k == EST_METRIC_MCC;
}

const char *est_metric_kind_name(est_metric_kind kind) {
  switch (kind) {
    case EST_METRIC_MEAN: return "mean";
    case EST_METRIC_ACCURACY: return "accuracy";
    case EST_METRIC_PRECISION: return "precision";
    case EST_METRIC_RECALL: return "recall";
    case EST_METRIC_F1: return "f1";
    case EST_METRIC_MCC: return "mcc";
    case EST_METRIC_AUC: return "auc";
  }
  return "?";
}

est_status est_metric_create(est_metric **out, est_metric_kind kind, const char *name) {
  *out = NULL;
  if ((int)kind < EST_METRIC_MEAN || kind > EST_METRIC_AUC)
    return est_error(EST_ERR_INVALID_ARGUMENT, "metric %s: unknown kind %d", name ? name : "", (int)kind);
  if (!name || strlen(name) >= EST_METRIC_NAME_MAX)
    return est_error(EST_ERR_INVALID_ARGUMENT, "metric name missing or longer than %d bytes", EST_METRIC_NAME_MAX - 1);
  est_metric *m = calloc(1, sizeof *m);
  if (!m) return est_error(EST_ERR_NO_MEMORY, "out of memory creating metric %s", name);
  m->kind = kind;
  strcpy(m->name, name);
  m->n = kind == EST_METRIC_AUC ? 4 * T : is_binary(kind) ? 4 : 2;
  m->acc = calloc(m->n, sizeof *m->acc);
  if (!m->acc) {
    free(m);
    return est_error(EST_ERR_NO_MEMORY, "out of memory creating metric %s", name);
  }
  if (kind == EST_METRIC_AUC) {
    /* [0 - kepsilon] + [(i + 1) / (T - 1) for i < T - 2] + [1 + kepsilon], computed in
     * double (Python) and stored as float32 constants. */
    const double kepsilon = 1e-7;
    m->thresholds[0] = (float)(0.0 - kepsilon);
    for (int i = 0; i < T - 2; i++) m->thresholds[i + 1] = (float)((i + 1) * 1.0 / (T - 1));
    m->thresholds[T - 1] = (float)(1.0 + kepsilon);
  }
  *out = m;
  return EST_OK;
}

void est_metric_free(est_metric *m) {
  if (!m) return;
  free(m->acc);
  free(m);
}

void est_metric_reset(est_metric *m) { memset(m->acc, 0, m->n * sizeof *m->acc); }

static est_status wrong_kind(const est_metric *m, const char *fn) {
  return est_error(EST_ERR_INVALID_ARGUMENT, "metric %s (%s) cannot be updated with %s", m->name,
                   est_metric_kind_name(m->kind), fn);
}

est_status est_metric_update_values(est_metric *m, const float *values, const float *weights, size_t n) {
  if (m->kind != EST_METRIC_MEAN) return wrong_kind(m, "est_metric_update_values");
  double total = 0, count = 0;
  for (size_t i = 0; i < n; i++) {
    double w = weights ? weights[i] : 1.0;
    /* A zero weight must leave the sums alone even for a NaN/inf value (a padding row). */
    if (w == 0) continue;
    total += w * values[i];
    count += w;
  }
  m->acc[0] += total;
  m->acc[1] += count;
  return EST_OK;
}

est_status est_metric_update_classes(est_metric *m, const int32_t *labels, const int32_t *predictions,
                                     const float *weights, size_t n) {
  if (m->kind == EST_METRIC_ACCURACY) {
    double total = 0, count = 0;
    for (size_t i = 0; i < n; i++) {
      double w = weights ? weights[i] : 1.0;
      total += labels[i] == predictions[i] ? w : 0.0;
      count += w;
    }
    m->acc[0] += total;
    m->acc[1] += count;
    return EST_OK;
  }
  if (!is_binary(m->kind)) return wrong_kind(m, "est_metric_update_classes");
  for (size_t i = 0; i < n; i++) {
    double w = weights ? weights[i] : 1.0;
    int label = labels[i] != 0, pred = predictions[i] != 0;
    m->acc[pred ? (label ? TP : FP) : (label ? FN : TN)] += w;
  }
  return EST_OK;
}

est_status est_metric_update_scores(est_metric *m, const int32_t *labels, const float *scores, const float *weights,
                                    size_t n) {
  if (m->kind != EST_METRIC_AUC) return wrong_kind(m, "est_metric_update_scores");
  /* Validate the whole batch first, so a bad batch changes nothing. */
  for (size_t i = 0; i < n; i++)
    if (!(scores[i] >= 0.0f && scores[i] <= 1.0f))
      return est_error(EST_ERR_INVALID_ARGUMENT, "metric %s: predictions must be in [0, 1]; element %zu is %g",
                       m->name, i, (double)scores[i]);
  double *tp = m->acc, *fn = m->acc + T, *tn = m->acc + 2 * T, *fp = m->acc + 3 * T;
  for (size_t i = 0; i < n; i++) {
    double w = weights ? weights[i] : 1.0;
    float s = scores[i];
    if (labels[i] != 0) {
      for (int t = 0; t < T; t++) {
        if (s > m->thresholds[t]) tp[t] += w;
        else fn[t] += w;
      }
    } else {
      for (int t = 0; t < T; t++) {
        if (s > m->thresholds[t]) fp[t] += w;
        else tn[t] += w;
      }
    }
  }
  return EST_OK;
}

static double div_no_nan(double a, double b) { return b == 0 ? 0.0 : a / b; }

double est_metric_result(const est_metric *m) {
  const double *a = m->acc;
  switch (m->kind) {
    case EST_METRIC_MEAN:
    case EST_METRIC_ACCURACY: return div_no_nan(a[0], a[1]);
    case EST_METRIC_PRECISION: return div_no_nan(a[TP], a[TP] + a[FP]);
    case EST_METRIC_RECALL: return div_no_nan(a[TP], a[TP] + a[FN]);
    case EST_METRIC_F1: return div_no_nan(2 * a[TP], 2 * a[TP] + a[FP] + a[FN]);
    case EST_METRIC_MCC: {
      double den = (a[TP] + a[FP]) * (a[TP] + a[FN]) * (a[TN] + a[FP]) * (a[TN] + a[FN]);
      return den > 0 ? (a[TP] * a[TN] - a[FP] * a[FN]) / sqrt(den) : 0.0;
    }
    case EST_METRIC_AUC: {
      const double eps = 1e-6;
      const double *tp = a, *fn = a + T, *tn = a + 2 * T, *fp = a + 3 * T;
      double area = 0, x_prev = 0, y_prev = 0;
      for (int t = 0; t < T; t++) {
        double y = (tp[t] + eps) / (tp[t] + fn[t] + eps);  /* recall */
        double x = fp[t] / (fp[t] + tn[t] + eps);          /* false-positive rate */
        if (t > 0) area += (x_prev - x) * ((y_prev + y) / 2.0);
        x_prev = x;
        y_prev = y;
      }
      return area;
    }
  }
  return 0.0;
}

void est_metric_state(est_metric *m, double **acc, size_t *n) {
  *acc = m->acc;
  *n = m->n;
}

est_status est_metric_merge(est_metric *dst, const est_metric *src) {
  if (dst->kind != src->kind)
    return est_error(EST_ERR_INVALID_ARGUMENT, "cannot merge metric %s (%s) into %s (%s)", src->name,
                     est_metric_kind_name(src->kind), dst->name, est_metric_kind_name(dst->kind));
  for (size_t i = 0; i < dst->n; i++) dst->acc[i] += src->acc[i];
  return EST_OK;
}

const char *est_metric_name(const est_metric *m) { return m->name; }
est_metric_kind est_metric_get_kind(const est_metric *m) { return m->kind; }
