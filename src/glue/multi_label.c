/* Multi-label metrics (est/multi_label.h): scikit-learn's precision_recall_fscore_support and
 * accuracy_score on multi-label indicator arrays, in the same float64 arithmetic, so that
 * eval_results.txt equals sklearn's numbers to the last bit. */
#include <stdlib.h>
#include <string.h>

#include "est/multi_label.h"

/* numpy's pairwise summation of doubles (np.mean's sum, loops_utils.h.src). */
static double pairwise_sum(const double *a, size_t n) {
  if (n < 8) {
    double res = 0.;
    for (size_t i = 0; i < n; i++) res += a[i];
    return res;
  }
  if (n <= 128) {
    double r[8], res;
    size_t i;
    for (int j = 0; j < 8; j++) r[j] = a[j];
    for (i = 8; i < n - (n % 8); i += 8)
      for (int j = 0; j < 8; j++) r[j] += a[i + (size_t)j];
    res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; i++) res += a[i];
    return res;
  }
  size_t n2 = n / 2;
  n2 -= n2 % 8;
  return pairwise_sum(a, n2) + pairwise_sum(a + n2, n - n2);
}

static double divide(double num, double den) { return den == 0.0 ? 0.0 : num / den; }

est_status est_multi_label_evaluate(est_multi_label_report *r, const int32_t *gold, const float *probabilities,
                                    size_t n, size_t num_labels, double threshold) {
  memset(r, 0, sizeof *r);
  if (!num_labels) return est_error(EST_ERR_INVALID_ARGUMENT, "multi-label metrics: no labels");
  r->num_labels = num_labels;
  r->labels = calloc(num_labels, sizeof *r->labels);
  int64_t *tp = calloc(num_labels, sizeof *tp), *fp = calloc(num_labels, sizeof *fp), *fn = calloc(num_labels, sizeof *fn);
  double *col = malloc(3 * num_labels * sizeof *col);
  if (!r->labels || !tp || !fp || !fn || !col) {
    free(tp), free(fp), free(fn), free(col);
    est_multi_label_report_free(r);
    return est_error(EST_ERR_NO_MEMORY, "multi-label metrics");
  }
  int64_t exact = 0;
  for (size_t i = 0; i < n; i++) {
    int right = 1;
    for (size_t c = 0; c < num_labels; c++) {
      const int y = gold[i * num_labels + c] != 0, p = probabilities[i * num_labels + c] >= threshold;
      tp[c] += y && p, fp[c] += !y && p, fn[c] += y && !p;
      r->labels[c].support += y;
      right &= y == p;
    }
    exact += right;
  }
  int64_t TP = 0, FP = 0, FN = 0;
  for (size_t c = 0; c < num_labels; c++) {
    est_multi_label_score *s = &r->labels[c];
    s->precision = divide((double)tp[c], (double)(tp[c] + fp[c]));
    s->recall = divide((double)tp[c], (double)(tp[c] + fn[c]));
    /* _prf_divide((1 + beta^2) tp, beta^2 true_sum + pred_sum) */
    s->f1 = divide(2.0 * (double)tp[c], (double)(tp[c] + fn[c]) + (double)(tp[c] + fp[c]));
    col[c] = s->precision, col[num_labels + c] = s->recall, col[2 * num_labels + c] = s->f1;
    TP += tp[c], FP += fp[c], FN += fn[c];
  }
  r->micro_precision = divide((double)TP, (double)(TP + FP));
  r->micro_recall = divide((double)TP, (double)(TP + FN));
  r->micro_f1 = divide(2.0 * (double)TP, (double)(TP + FN) + (double)(TP + FP));
  r->macro_precision = pairwise_sum(col, num_labels) / (double)num_labels;
  r->macro_recall = pairwise_sum(col + num_labels, num_labels) / (double)num_labels;
  r->macro_f1 = pairwise_sum(col + 2 * num_labels, num_labels) / (double)num_labels;
  r->exact_match = n ? (double)exact / (double)n : 0.0;
  free(tp), free(fp), free(fn), free(col);
  return EST_OK;
}

void est_multi_label_report_free(est_multi_label_report *r) {
  free(r->labels);
  memset(r, 0, sizeof *r);
}
