/* test_results.tsv as the reference writes it: one line per real example, the class
 * probabilities as str(np.float32), TAB-separated, in label-list order; atomically.
 * (eval_results.txt is the Estimator's est_eval_result_write, shared with every model.) */
#include "est/run_classifier.h"

#include <stdio.h>

#include "est/file.h"
#include "est/float_format.h"

est_status est_run_classifier_write_test_results(const char *path, const float *probabilities,
                                                 size_t num_examples, int num_classes) {
  if (num_classes < 1) return est_error(EST_ERR_INVALID_ARGUMENT, "%s: num_classes %d < 1", path, num_classes);
  est_atomic_file *f;
  est_status st = est_atomic_open(&f, path);
  if (st != EST_OK) return st;
  FILE *out = est_atomic_stream(f);
  char num[48];
  for (size_t i = 0; i < num_examples; i++) {
    const float *p = probabilities + i * (size_t)num_classes;
    for (int c = 0; c < num_classes; c++) {
      if (c) fputc('\t', out);
      fputs(est_format_float32(p[c], num, sizeof num), out);
    }
    fputc('\n', out);
  }
  return est_atomic_commit(f);
}
