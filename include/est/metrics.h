/* est/metrics.h — streaming, weighted, mergeable evaluation metrics (tf.metrics).
 *
 *     est_metric *acc, *loss, *auc;
 *     est_metric_create(&acc, EST_METRIC_ACCURACY, "eval_accuracy");
 *     est_metric_create(&loss, EST_METRIC_MEAN, "eval_loss");
 *     est_metric_create(&auc, EST_METRIC_AUC, "auc");
 *     for each eval batch:                                   // weights = is_real_example
 *       est_metric_update_classes(acc, label_ids, argmax, is_real, B);
 *       est_metric_update_values(loss, per_example_loss, is_real, B);
 *       est_metric_update_scores(auc, label_ids, prob_of_class_1, is_real, B);
 *     // data parallel: sum every rank's accumulators, e.g. MPI_Allreduce in place
 *     double *a; size_t n; est_metric_state(acc, &a, &n);
 *     printf("%s = %g\n", est_metric_name(acc), est_metric_result(acc));
 *
 * Every metric is a small array of double sums (the whole state), so reducing across
 * ranks or merging two evaluations is an element-wise sum, and the result is a pure
 * function of the sums. A weight of 0 (a padding example, is_real_example = 0) leaves the
 * sums unchanged; weights may be NULL (all ones).
 *
 * Semantics (TF 1.x metrics_impl.py; F1 and MCC from the same confusion counts):
 *   MEAN       sum(w*x) / sum(w)                                    state {total, count}
 *   ACCURACY   sum(w*(label == pred)) / sum(w)                      state {total, count}
 *   PRECISION  tp / (tp + fp)       labels and predictions cast to bool (nonzero = positive)
 *   RECALL     tp / (tp + fn)       state for these four: {tp, fp, tn, fn}, weighted
 *   F1         2tp / (2tp + fp + fn)
 *   MCC        (tp*tn - fp*fn) / sqrt((tp+fp)(tp+fn)(tn+fp)(tn+fn))
 *   AUC        tf.metrics.auc, ROC, trapezoidal, num_thresholds 200: thresholds
 *              {-1e-7, 1/199, ..., 198/199, 1+1e-7} in float32, a score is positive at a
 *              threshold when score > threshold; tpr = (tp+1e-6)/(tp+fn+1e-6),
 *              fpr = fp/(fp+tn+1e-6), area = sum (fpr[i]-fpr[i+1])*(tpr[i]+tpr[i+1])/2.
 *              State: tp[200], fn[200], tn[200], fp[200].
 * Any 0/0 gives 0, as TF's div_no_nan (and sklearn's MCC convention).
 */
#ifndef EST_METRICS_H
#define EST_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "est/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum est_metric_kind {
  EST_METRIC_MEAN = 0,
  EST_METRIC_ACCURACY,
  EST_METRIC_PRECISION,
  EST_METRIC_RECALL,
  EST_METRIC_F1,
  EST_METRIC_MCC,
  EST_METRIC_AUC,
} est_metric_kind;

enum { EST_METRIC_AUC_THRESHOLDS = 200, EST_METRIC_NAME_MAX = 128 };

typedef struct est_metric est_metric;

/* name: the key it is reported under ("eval_accuracy"); copied. */
est_status est_metric_create(est_metric **out, est_metric_kind kind, const char *name);
void est_metric_free(est_metric *m); /* NULL is fine */
void est_metric_reset(est_metric *m);

/* MEAN only: n values with optional weights. */
est_status est_metric_update_values(est_metric *m, const float *values, const float *weights, size_t n);

/* ACCURACY, PRECISION, RECALL, F1, MCC: integer labels and predicted classes. */
est_status est_metric_update_classes(est_metric *m, const int32_t *labels, const int32_t *predictions,
                                     const float *weights, size_t n);

/* AUC: labels (nonzero = positive) and scores in [0, 1] (the positive class's probability).
 * A score outside [0, 1] or NaN is INVALID_ARGUMENT naming its index (TF asserts). */
est_status est_metric_update_scores(est_metric *m, const int32_t *labels, const float *scores,
                                    const float *weights, size_t n);

/* The metric's value from the current sums. */
double est_metric_result(const est_metric *m);

/* The raw accumulators: *acc points at *n doubles owned by m (writable, so a reduction
 * can write summed values back in place). */
void est_metric_state(est_metric *m, double **acc, size_t *n);

/* dst += src element-wise (same kind required). */
est_status est_metric_merge(est_metric *dst, const est_metric *src);

const char *est_metric_name(const est_metric *m);
est_metric_kind est_metric_get_kind(const est_metric *m);
/* "mean", "accuracy", "precision", "recall", "f1", "mcc", "auc". */
const char *est_metric_kind_name(est_metric_kind kind);

#ifdef __cplusplus
}
#endif
#endif
