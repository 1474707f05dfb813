/* est/multi_label.h — the metrics of multi-label classification (run_classifier --multi_label,
 * docs/run_classifier.md §12), as scikit-learn 1.6 computes them from 0 / 1 predictions:
 *
 *     est_multi_label_report r;
 *     est_multi_label_evaluate(&r, gold, probabilities, n, C, 0.5);   // gold [n, C] of 0 / 1
 *     r.micro_f1, r.macro_f1, r.exact_match, r.labels[c].f1 ...
 *     est_multi_label_report_free(&r);
 *
 * A label is predicted when its probability is >= threshold. Per label c: precision
 * tp / (tp + fp), recall tp / (tp + fn), F1 2 tp / (2 tp + fp + fn) (f1_score(average=None));
 * micro: the same over every (example, label) pair (average="micro"); macro: the labels' mean
 * (average="macro", summed as numpy sums); exact_match: the examples whose every label is
 * right (accuracy_score on multi-label input). A zero denominator gives 0 (zero_division's
 * default). */
#ifndef EST_MULTI_LABEL_H
#define EST_MULTI_LABEL_H

#include <stddef.h>
#include <stdint.h>

#include "est/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct est_multi_label_score {
  double precision, recall, f1;
  int64_t support;              /* examples with the label */
} est_multi_label_score;

typedef struct est_multi_label_report {
  double exact_match;
  double micro_precision, micro_recall, micro_f1;
  double macro_precision, macro_recall, macro_f1;
  size_t num_labels;
  est_multi_label_score *labels; /* [num_labels] */
} est_multi_label_report;

est_status est_multi_label_evaluate(est_multi_label_report *r, const int32_t *gold, const float *probabilities,
                                    size_t n, size_t num_labels, double threshold);
void est_multi_label_report_free(est_multi_label_report *r);

#ifdef __cplusplus
}
#endif
#endif
