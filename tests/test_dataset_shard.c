/* Global sharding (est_dataset_shard_global_batches): N shards of a repeated, shuffled
 * stream hold, batch by batch, exactly the rows of one unsharded dataset's batches of
 * N * b, each shard its contiguous slice; the position resumes exactly; a state of the
 * other sharding is refused; est_input_shard_dataset picks the order the params say. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "est/dataset.h"
#include "est/estimator.h"

enum { ROWS = 23, SHUFFLE = 7 };

/* ROWS rows with value 100 + row, repeated forever, shuffled with seed 5; sharded per
 * `mode`: 0 none, 1 global (per_shard b), 2 shard first. */
static est_dataset *make(int mode, int shards, int index, int batch) {
  static int64_t v[ROWS];
  for (int i = 0; i < ROWS; i++) v[i] = 100 + i;
  const char *names[] = {"v"};
  est_tensor t = {.dtype = EST_DT_INT64, .rank = 1, .dims = {ROWS}, .data = v};
  est_dataset *ds;
  assert_int_equal(est_dataset_from_tensors(&ds, names, &t, 1), EST_OK);
  if (mode == 1) assert_int_equal(est_dataset_shard_global_batches(ds, shards, index, batch), EST_OK);
  if (mode == 2) assert_int_equal(est_dataset_shard(ds, shards, index), EST_OK);
  assert_int_equal(est_dataset_repeat(ds, -1), EST_OK);
  assert_int_equal(est_dataset_shuffle(ds, SHUFFLE, 5), EST_OK);
  assert_int_equal(est_dataset_batch(ds, batch, 1), EST_OK);
  return ds;
}

static void next_rows(est_dataset *ds, int64_t *out, int n) {
  const est_batch *b;
  assert_int_equal(est_dataset_next(ds, &b), EST_OK);
  assert_int_equal(b->size, n);
  memcpy(out, b->tensors[0].data, (size_t)n * sizeof *out);
}

static void test_shards_hold_slices_of_the_single_batches(void **state) {
  (void)state;
  for (int N = 1; N <= 3; N++) {
    const int b = 2, B = N * b, steps = 40; /* many epochs of 23 rows */
    est_dataset *one = make(0, 1, 0, B), *shard[3];
    for (int r = 0; r < N; r++) shard[r] = make(1, N, r, b);
    int64_t want[6], got[2];
    for (int k = 0; k < steps; k++) {
      next_rows(one, want, B);
      for (int r = 0; r < N; r++) {
        next_rows(shard[r], got, b);
        assert_memory_equal(got, want + r * b, (size_t)b * sizeof *got);
      }
    }
    est_dataset_free(one);
    for (int r = 0; r < N; r++) est_dataset_free(shard[r]);
  }
  /* TF's order is another one: rank 0's first batch is not the single run's first rows */
  est_dataset *one = make(0, 1, 0, 4), *first = make(2, 2, 0, 2);
  int64_t want[4], got[2];
  int same = 1;
  for (int k = 0; k < 5; k++) {
    next_rows(one, want, 4);
    next_rows(first, got, 2);
    same = same && !memcmp(got, want, sizeof got);
  }
  assert_false(same);
  est_dataset_free(one);
  est_dataset_free(first);
}

static void test_global_position_resumes_and_is_checked(void **state) {
  (void)state;
  est_dataset *a = make(1, 3, 1, 2);
  int64_t rows[2], s[EST_DATASET_STATE_HEADER + 3 * SHUFFLE];
  size_t n;
  for (int k = 0; k < 9; k++) next_rows(a, rows, 2);
  assert_int_equal(est_dataset_get_state(a, s, sizeof s / sizeof s[0], &n), EST_OK);
  est_dataset *b = make(1, 3, 1, 2);
  assert_int_equal(est_dataset_set_state(b, s, n), EST_OK);
  for (int k = 0; k < 30; k++) {
    int64_t ra[2], rb[2];
    next_rows(a, ra, 2);
    next_rows(b, rb, 2);
    assert_memory_equal(ra, rb, sizeof ra);
  }
  /* the same shard under TF's order reads another stream: refused, naming the setting */
  est_dataset *c = make(2, 3, 1, 2);
  assert_int_equal(est_dataset_set_state(c, s, n), EST_ERR_FAILED_PRECONDITION);
  assert_non_null(strstr(est_error_message(), "global sharding"));
  assert_int_equal(est_dataset_shard_global_batches(c, 3, 3, 2), EST_ERR_FAILED_PRECONDITION); /* started */
  est_dataset_free(a);
  est_dataset_free(b);
  est_dataset_free(c);
  est_dataset *d = make(0, 1, 0, 2);
  assert_int_equal(est_dataset_shard_global_batches(d, 3, 3, 2), EST_ERR_INVALID_ARGUMENT);
  assert_int_equal(est_dataset_shard_global_batches(d, 3, 0, 0), EST_ERR_INVALID_ARGUMENT);
  est_dataset_free(d);
}

/* est_input_shard_dataset: GLOBAL for TRAIN by default, the records' i % N otherwise. */
static void test_input_params_choose_the_order(void **state) {
  (void)state;
  int64_t want[4], got[2];
  /* TRAIN, GLOBAL: rank 1 holds rows 2..3 of the single run's batches of 4 */
  est_dataset *one = make(0, 1, 0, 4), *ds;
  const char *names[] = {"v"};
  static int64_t v[ROWS];
  for (int i = 0; i < ROWS; i++) v[i] = 100 + i;
  est_tensor t = {.dtype = EST_DT_INT64, .rank = 1, .dims = {ROWS}, .data = v};
  est_input_params p = {.mode = EST_MODE_TRAIN, .batch_size = 2, .seed = 5, .num_shards = 2, .shard_index = 1};
  assert_int_equal(est_dataset_from_tensors(&ds, names, &t, 1), EST_OK);
  assert_int_equal(est_input_shard_dataset(ds, &p), EST_OK);
  assert_int_equal(est_dataset_repeat(ds, -1), EST_OK);
  assert_int_equal(est_dataset_shuffle(ds, SHUFFLE, 5), EST_OK);
  assert_int_equal(est_dataset_batch(ds, 2, 1), EST_OK);
  for (int k = 0; k < 12; k++) {
    next_rows(one, want, 4);
    next_rows(ds, got, 2);
    assert_memory_equal(got, want + 2, sizeof got);
  }
  est_dataset_free(ds);
  est_dataset_free(one);
  /* EVAL (and TRAIN with SHARD_FIRST): element i to rank i % N, in order */
  for (int mode = 0; mode < 2; mode++) {
    p = (est_input_params){.mode = mode ? EST_MODE_EVAL : EST_MODE_TRAIN, .batch_size = 2, .num_shards = 2,
                           .shard_index = 1, .sharding = mode ? EST_INPUT_SHARDING_GLOBAL : EST_INPUT_SHARDING_SHARD_FIRST};
    assert_int_equal(est_dataset_from_tensors(&ds, names, &t, 1), EST_OK);
    assert_int_equal(est_input_shard_dataset(ds, &p), EST_OK);
    assert_int_equal(est_dataset_batch(ds, 2, 0), EST_OK);
    next_rows(ds, got, 2);
    assert_int_equal(got[0], 101);
    assert_int_equal(got[1], 103);
    est_dataset_free(ds);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_shards_hold_slices_of_the_single_batches),
    cmocka_unit_test(test_global_position_resumes_and_is_checked),
    cmocka_unit_test(test_input_params_choose_the_order),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
