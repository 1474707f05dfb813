/* Read-only memory and its derived copies (core/frozen.h), and the variable store's
 * read-only switch that uses them (est_vars_set_read_only, est/variables.h): a copy is made
 * once per (source, key) and only for sources wholly inside a read-only range; removing the
 * range, making the store writable, re-initialising it or freeing it drops its copies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "core/frozen.h"
#include "est/est.h"

static int makes; /* make_copy calls */

/* The "packed" form of n floats: each doubled. */
typedef struct {
  const float *src;
  size_t n;
} doubled;

static void make_copy(void *copy, void *ctx) {
  const doubled *d = ctx;
  for (size_t i = 0; i < d->n; i++) ((float *)copy)[i] = 2.0f * d->src[i];
  makes++;
}

static const float *derived(const float *src, size_t n, uint64_t layout) {
  doubled d = {src, n};
  const uint64_t key[4] = {layout, n, 0, 0};
  return est_frozen_derived(src, n * sizeof(float), key, n * sizeof(float), make_copy, &d);
}

static void test_copies_made_once_inside_read_only_ranges(void **state) {
  (void)state;
  float w[64];
  for (int i = 0; i < 64; i++) w[i] = (float)i;
  makes = 0;
  assert_null(derived(w, 16, 1)); /* nothing read-only yet */
  assert_int_equal(makes, 0);
  assert_int_equal(est_frozen_add(w, 32 * sizeof(float)), 0);
  const float *c = derived(w + 8, 16, 1);
  assert_non_null(c);
  assert_true(c[0] == 16.0f && c[15] == 46.0f);
  assert_ptr_equal(derived(w + 8, 16, 1), c); /* kept: not made again */
  assert_int_equal(makes, 1);
  assert_ptr_not_equal(derived(w + 8, 16, 2), c); /* another key, another copy */
  assert_int_equal(makes, 2);
  assert_int_equal(est_frozen_derived_bytes(), 2 * 16 * sizeof(float));
  assert_null(derived(w + 24, 16, 1)); /* runs past the range's end */
  assert_null(derived(w + 40, 4, 1));  /* outside it */
  assert_int_equal(makes, 2);
  est_frozen_remove(w);
  assert_int_equal(est_frozen_derived_bytes(), 0);
  assert_null(derived(w + 8, 16, 1));
  est_frozen_remove(w); /* unknown now: ignored */
}

static void test_read_only_store_drops_copies_when_written_or_freed(void **state) {
  (void)state;
  est_var_store *vs;
  int w;
  assert_int_equal(est_vars_create(&vs), EST_OK);
  assert_int_equal(est_vars_declare(vs, "w", 1, (int64_t[]){32}, est_init_zeros(), &w), EST_OK);
  est_vars_set_read_only(vs, 1); /* before finalize: no buffer yet, no effect */
  assert_false(est_vars_read_only(vs));
  assert_int_equal(est_vars_finalize(vs, 1), EST_OK);
  float *v = est_vars_value(vs, (size_t)w);
  assert_null(derived(v, 32, 1)); /* writable: never a copy */
  est_vars_set_read_only(vs, 1);
  assert_true(est_vars_read_only(vs));
  assert_non_null(derived(v, 32, 1));
  est_vars_set_read_only(vs, 0);
  assert_int_equal(est_frozen_derived_bytes(), 0);
  est_vars_set_read_only(vs, 1);
  assert_non_null(derived(v, 32, 1));
  est_vars_initialize(vs, 7); /* new values: writable again, copies gone */
  assert_false(est_vars_read_only(vs));
  assert_int_equal(est_frozen_derived_bytes(), 0);
  est_vars_set_read_only(vs, 1);
  assert_non_null(derived(v, 32, 1));
  est_vars_free(vs);
  assert_int_equal(est_frozen_derived_bytes(), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_copies_made_once_inside_read_only_ranges),
      cmocka_unit_test(test_read_only_store_drops_copies_when_written_or_freed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
