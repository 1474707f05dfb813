/* Finding a NaN or Inf among a var store's values (est_first_nonfinite in
 * estimator_internal.h): before every checkpoint training writes and after every
 * restore, so a diverged model is never saved and never evaluated silently.
 *
 * A float is NaN or Inf exactly when its 8 exponent bits are all ones. The scan ORs that
 * test over the raw bits, which compiles to a vectorised integer loop (a float reduction
 * would not vectorise without -ffast-math); only a variable that fails is looked at
 * element by element. It reads each value once: for BERT-base, 440 MB, about as long as
 * a memcpy of it, next to the seconds a checkpoint write takes. */
#include <stdint.h>
#include <string.h>

#include "train/estimator_internal.h"

static int any_nonfinite(const float *x, size_t n) {
  uint32_t bad = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t bits;
    memcpy(&bits, x + i, sizeof bits);
    bad |= (uint32_t)((bits & 0x7f800000u) == 0x7f800000u);
  }
  return bad != 0;
}

int est_first_nonfinite(est_var_store *vs, size_t *var, size_t *elem, float *value) {
  for (size_t i = 0; i < est_vars_count(vs); i++) {
    const est_variable *v = est_vars_at(vs, i);
    const float *x = est_vars_value(vs, i);
    if (!any_nonfinite(x, v->count)) continue;
    size_t k = 0;
    while (k < v->count && !any_nonfinite(x + k, 1)) k++;
    if (var) *var = i;
    if (elem) *elem = k;
    if (value) *value = x[k];
    return 1;
  }
  return 0;
}
