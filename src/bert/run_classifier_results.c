/* run_classifier's two result files, written exactly as the reference writes them:
 *   eval_results.txt  "key = value\n" per metric, keys sorted, floats as str(np.float32)
 *   test_results.tsv  one line per real example, class probabilities as str(np.float32),
 *                     TAB-separated, in label-list order
 * plus the float formatter both use. Both files are written atomically. */
#include "est/run_classifier.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/file.h"

/* str(np.float32(v)) with NumPy >= 1.14: the shortest decimal that round-trips through
 * float32 (Dragon4 "unique" mode), positional when 1e-4 <= |v| < 1e16 (compared in double,
 * so float32(1e-4) = 9.99999975e-05 is scientific), else d[.ddd]e+XX with a 2-digit minimum
 * exponent. Positional always shows a fraction ("1.0", "123456790.0"). */
char *est_format_float32(float v, char *buf, size_t size) {
  if (isnan(v)) {
    snprintf(buf, size, "nan");
    return buf;
  }
  if (isinf(v)) {
    snprintf(buf, size, v < 0 ? "-inf" : "inf");
    return buf;
  }
  const char *sign = signbit(v) ? "-" : "";
  double a = fabs((double)v);
  if (a == 0.0) {
    snprintf(buf, size, "%s0.0", sign);
    return buf;
  }
  /* Shortest significant-digit count p (1..9; 9 always round-trips a float32). */
  char sci[48];
  for (int p = 1; p <= 9; p++) {
    snprintf(sci, sizeof sci, "%.*e", p - 1, a);
    if ((float)strtod(sci, NULL) == (float)a) break;
  }
  /* sci is "d.ddde[+-]XX": collect the digits and the decimal exponent. */
  char digits[16];
  int nd = 0;
  const char *s = sci;
  for (; *s && *s != 'e'; s++)
    if (*s >= '0' && *s <= '9') digits[nd++] = *s;
  int exp10 = atoi(s + 1);
  while (nd > 1 && digits[nd - 1] == '0') nd--; /* "%.*e" may leave trailing zeros */
  digits[nd] = 0;

  char out[64];
  size_t o = 0;
  if (a >= 1e-4 && a < 1e16) {
    if (exp10 >= 0) {
      /* integer part: digits[0..exp10], zero-padded; fraction: the rest or "0". */
      for (int i = 0; i <= exp10; i++) out[o++] = i < nd ? digits[i] : '0';
      out[o++] = '.';
      if (nd > exp10 + 1)
        for (int i = exp10 + 1; i < nd; i++) out[o++] = digits[i];
      else out[o++] = '0';
    } else {
      out[o++] = '0';
      out[o++] = '.';
      for (int i = 0; i < -exp10 - 1; i++) out[o++] = '0';
      for (int i = 0; i < nd; i++) out[o++] = digits[i];
    }
    out[o] = 0;
  } else {
    out[o++] = digits[0];
    if (nd > 1) {
      out[o++] = '.';
      for (int i = 1; i < nd; i++) out[o++] = digits[i];
    }
    snprintf(out + o, sizeof out - o, "e%c%02d", exp10 < 0 ? '-' : '+', abs(exp10));
  }
  snprintf(buf, size, "%s%s", sign, out);
  return buf;
}

static int cmp_metric(const void *a, const void *b) {
  return strcmp(((const est_metric_value *)a)->name, ((const est_metric_value *)b)->name);
}

est_status est_run_classifier_write_eval_results(const char *path, const est_metric_value *metrics,
                                                 size_t n) {
  est_metric_value *sorted = malloc((n ? n : 1) * sizeof *sorted);
  if (!sorted) return est_error(EST_ERR_NO_MEMORY, "%s: out of memory", path);
  memcpy(sorted, metrics, n * sizeof *sorted);
  /* The reference iterates sorted(result.keys()): plain byte order of the key names. */
  qsort(sorted, n, sizeof *sorted, cmp_metric);
  est_atomic_file *f;
  est_status st = est_atomic_open(&f, path);
  if (st != EST_OK) {
    free(sorted);
    return st;
  }
  FILE *out = est_atomic_stream(f);
  for (size_t i = 0; i < n; i++) {
    char num[48];
    if (sorted[i].is_integer) snprintf(num, sizeof num, "%lld", (long long)sorted[i].int_value);
    else est_format_float32(sorted[i].value, num, sizeof num);
    fprintf(out, "%s = %s\n", sorted[i].name, num);
  }
  free(sorted);
  return est_atomic_commit(f);
}

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
