/* The variable store: layout, initialisers, determinism, errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "est/est.h"

static void test_layout_and_init(void **state) {
  (void)state;
  est_var_store *vs;
  int k, b, g;
  assert_int_equal(est_vars_create(&vs), EST_OK);
  assert_int_equal(est_vars_declare(vs, "dense/kernel", 2, (int64_t[]){5, 3}, est_init_truncated_normal(0.02f), &k), EST_OK);
  assert_int_equal(est_vars_declare(vs, "dense/bias", 1, (int64_t[]){3}, est_init_zeros(), &b), EST_OK);
  assert_int_equal(est_vars_declare(vs, "LayerNorm/gamma", 1, (int64_t[]){3}, est_init_ones(), &g), EST_OK);
  assert_int_equal(est_vars_declare(vs, "dense/bias", 1, (int64_t[]){3}, est_init_zeros(), NULL), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "dense/bias"));
  assert_int_equal(est_vars_declare(vs, "bad", 1, (int64_t[]){0}, est_init_zeros(), NULL), EST_ERR_INVALID_ARGUMENT);
  assert_int_equal(est_vars_finalize(vs, 7), EST_OK);
  assert_int_equal(est_vars_count(vs), 3);
  assert_int_equal(est_vars_num_parameters(vs), 21);
  /* Each variable starts on a 64-byte line. */
  for (size_t i = 0; i < 3; i++) assert_int_equal(((uintptr_t)est_vars_value(vs, i)) % 64, 0);
  assert_int_equal(est_vars_find(vs, "dense/bias"), b);
  assert_int_equal(est_vars_find(vs, "missing"), -1);
  float *kernel = est_vars_value(vs, (size_t)k);
  int nonzero = 0;
  for (int i = 0; i < 15; i++) {
    assert_true(fabsf(kernel[i]) <= 0.04f);
    nonzero += kernel[i] != 0.0f;
  }
  assert_int_equal(nonzero, 15);
  for (int i = 0; i < 3; i++) {
    assert_true(est_vars_value(vs, (size_t)b)[i] == 0.0f);
    assert_true(est_vars_value(vs, (size_t)g)[i] == 1.0f);
  }
  assert_int_equal(est_vars_declare(vs, "late", 1, (int64_t[]){1}, est_init_zeros(), NULL), EST_ERR_FAILED_PRECONDITION);

  /* Values depend on (seed, name), not on declaration order. */
  est_var_store *other;
  assert_int_equal(est_vars_create(&other), EST_OK);
  assert_int_equal(est_vars_declare(other, "x", 1, (int64_t[]){4}, est_init_normal(1.0f), NULL), EST_OK);
  assert_int_equal(est_vars_declare(other, "dense/kernel", 2, (int64_t[]){5, 3}, est_init_truncated_normal(0.02f), NULL), EST_OK);
  assert_int_equal(est_vars_finalize(other, 7), EST_OK);
  assert_memory_equal(est_vars_value(other, 1), kernel, 15 * sizeof(float));
  est_vars_initialize(other, 8);
  assert_memory_not_equal(est_vars_value(other, 1), kernel, 15 * sizeof(float));

  est_tensor t = est_vars_grad_tensor(vs, (size_t)k);
  assert_int_equal(t.rank, 2);
  assert_int_equal(t.dims[0], 5);
  est_vars_grad(vs, (size_t)k)[3] = 1.5f;
  est_vars_zero_grads(vs);
  assert_true(est_vars_grad(vs, (size_t)k)[3] == 0.0f);
  est_vars_free(vs);
  est_vars_free(other);
}

/* est_vars_finalize_zero: the same layout, no initializer run (a servable restores every value). */
static void test_finalize_zero(void **state) {
  (void)state;
  est_var_store *vs;
  assert_int_equal(est_vars_create(&vs), EST_OK);
  assert_int_equal(est_vars_declare(vs, "gamma", 1, (int64_t[]){3}, est_init_ones(), NULL), EST_OK);
  assert_int_equal(est_vars_finalize_zero(vs), EST_OK);
  assert_true(est_vars_finalized(vs));
  for (int i = 0; i < 3; i++) assert_true(est_vars_value(vs, 0)[i] == 0.0f); /* not the ones */
  assert_int_equal(est_vars_finalize(vs, 1), EST_ERR_FAILED_PRECONDITION);
  est_vars_free(vs);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_layout_and_init), cmocka_unit_test(test_finalize_zero)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
