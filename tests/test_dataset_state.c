/* Exact resume of the input pipeline: the state saved after any batch, restored into a
 * fresh dataset (as after kill -9), gives exactly the batches an uninterrupted run gives,
 * for shuffled/repeated/sharded/compressed/prefetched inputs; bad states are refused
 * without crashing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "est/dataset.h"
#include "est/example.h"
#include "est/rng.h"
#include "est/tfrecord.h"
#include "test_util.h"

static char tmpdir[256];
static char plain[2][512], gz[2][512];

static void write_file(const char *path, int n, int64_t base, est_compression c) {
  est_tfrecord_writer *w;
  assert_int_equal(est_tfrecord_writer_open(&w, path, c), EST_OK);
  for (int i = 0; i < n; i++) {
    est_example ex;
    est_example_init(&ex);
    int64_t id = base + i, vals[5] = {id, id + 1, id + 2, id + 3, id + 4};
    assert_int_equal(est_example_set_int64(&ex, "id", &id, 1), EST_OK);
    assert_int_equal(est_example_set_int64(&ex, "vals", vals, (size_t)(id % 6)), EST_OK);
    uint8_t *buf;
    size_t size;
    assert_int_equal(est_example_serialize(&ex, &buf, &size), EST_OK);
    assert_int_equal(est_tfrecord_writer_write(w, buf, size), EST_OK);
    free(buf);
    est_example_clear(&ex);
  }
  assert_int_equal(est_tfrecord_writer_close(w), EST_OK);
}

static int setup(void **state) {
  (void)state;
  test_make_tmpdir(tmpdir, sizeof tmpdir);
  for (int f = 0; f < 2; f++) {
    snprintf(plain[f], sizeof plain[f], "%s/part%d.tf_record", tmpdir, f);
    snprintf(gz[f], sizeof gz[f], "%s/part%d.tf_record.gz", tmpdir, f);
    write_file(plain[f], f ? 7 : 13, f * 100, EST_COMPRESSION_NONE);
    write_file(gz[f], f ? 7 : 13, f * 100, EST_COMPRESSION_GZIP);
  }
  return 0;
}

static int teardown(void **state) {
  (void)state;
  test_remove_tree(tmpdir);
  return 0;
}

typedef struct config {
  int gzip, repeat, buffer, batch, drop, shards, shard, prefetch;
  uint64_t seed;
} config;

static const est_feature_spec specs[2] = {
  {.key = "id", .dtype = EST_DT_INT64, .rank = 0},
  {.key = "vals", .dtype = EST_DT_INT64, .var_len = EST_VAR_LEN},
};

static est_dataset *open_config(const config *c) {
  const char *paths[2] = {c->gzip ? gz[0] : plain[0], c->gzip ? gz[1] : plain[1]};
  est_dataset *ds;
  assert_int_equal(est_dataset_from_tfrecords(&ds, paths, 2, c->gzip ? EST_COMPRESSION_GZIP : EST_COMPRESSION_NONE),
                   EST_OK);
  assert_int_equal(est_dataset_parse(ds, specs, 2, EST_DATASET_CAST_INT32), EST_OK);
  if (c->shards > 1) assert_int_equal(est_dataset_shard(ds, c->shards, c->shard), EST_OK);
  assert_int_equal(est_dataset_repeat(ds, c->repeat), EST_OK);
  if (c->buffer) assert_int_equal(est_dataset_shuffle(ds, c->buffer, c->seed), EST_OK);
  assert_int_equal(est_dataset_batch(ds, c->batch, c->drop), EST_OK);
  assert_int_equal(est_dataset_prefetch(ds, c->prefetch), EST_OK);
  return ds;
}

/* FNV-1a over a batch's size and every tensor's bytes: equal batches, equal hashes. */
static uint64_t batch_hash(const est_batch *b) {
  uint64_t h = 1469598103934665603ull;
  const uint8_t *p = (const uint8_t *)&b->size;
  for (size_t i = 0; i < sizeof b->size; i++) h = (h ^ p[i]) * 1099511628211ull;
  for (size_t t = 0; t < b->count; t++) {
    const est_tensor *x = &b->tensors[t];
    size_t bytes = (size_t)est_tensor_num_bytes(x);
    for (int d = 0; d < x->rank; d++) h = (h ^ (uint64_t)x->dims[d]) * 1099511628211ull;
    for (size_t i = 0; i < bytes; i++) h = (h ^ ((const uint8_t *)x->data)[i]) * 1099511628211ull;
  }
  return h;
}

/* Reads up to max batches; returns how many, hashes in out. Asserts a clean end. */
static size_t run(est_dataset *ds, uint64_t *out, size_t max) {
  const est_batch *b;
  size_t n = 0;
  est_status st = EST_OK;
  while (n < max && (st = est_dataset_next(ds, &b)) == EST_OK) out[n++] = batch_hash(b);
  if (n < max) assert_int_equal(st, EST_ERR_OUT_OF_RANGE);
  return n;
}

enum { MAX_BATCHES = 128 };

/* For every position p: state after p batches -> new dataset -> the rest is identical. */
static void check_resume_everywhere(const config *c, size_t limit) {
  uint64_t ref[MAX_BATCHES], got[MAX_BATCHES];
  est_dataset *ds = open_config(c);
  size_t total = run(ds, ref, limit);
  const size_t len = est_dataset_state_size(ds);
  est_dataset_free(ds);
  assert_true(total > 3);
  int64_t *saved = malloc(len * sizeof *saved), *again = malloc(len * sizeof *again);
  for (size_t p = 0; p <= total; p++) {
    ds = open_config(c);
    assert_int_equal(run(ds, got, p), p);
    size_t n;
    assert_int_equal(est_dataset_get_state(ds, saved, len, &n), EST_OK);
    assert_int_equal(n, len);
    assert_int_equal(est_dataset_batches_produced(ds), (int64_t)p);
    est_dataset_free(ds);

    config c2 = *c;
    c2.prefetch = (int)(p % 3);  /* prefetch depth is not part of the position */
    ds = open_config(&c2);
    assert_int_equal(est_dataset_set_state(ds, saved, len), EST_OK);
    assert_int_equal(est_dataset_get_state(ds, again, len, &n), EST_OK);
    assert_memory_equal(saved, again, len * sizeof *saved);
    size_t rest = run(ds, got, limit - p);
    assert_int_equal(rest, total - p);
    assert_memory_equal(got, ref + p, rest * sizeof *got);
    est_dataset_free(ds);
  }
  free(saved);
  free(again);
}

static void test_resume_shuffled_repeated(void **state) {
  (void)state;
  config c = {.repeat = 3, .buffer = 6, .batch = 4, .seed = 5, .prefetch = 2};
  check_resume_everywhere(&c, MAX_BATCHES);  /* 60 elements: 15 batches */
  c.drop = 1;
  c.batch = 7;                               /* 8 batches, 4 elements dropped */
  check_resume_everywhere(&c, MAX_BATCHES);
}

static void test_resume_forever_with_big_buffer(void **state) {
  (void)state;
  /* BERT's order: repeat forever, then a buffer larger than an epoch */
  config c = {.repeat = -1, .buffer = 32, .batch = 3, .drop = 1, .seed = 99, .prefetch = 1};
  check_resume_everywhere(&c, 40);
}

static void test_resume_gzip_and_shard(void **state) {
  (void)state;
  config c = {.gzip = 1, .repeat = 2, .buffer = 5, .batch = 2, .shards = 3, .shard = 1, .seed = 1};
  check_resume_everywhere(&c, MAX_BATCHES);
  config plain_c = {.repeat = 2, .batch = 3, .prefetch = 3};  /* no shuffle: state is the header only */
  check_resume_everywhere(&plain_c, MAX_BATCHES);
}

static void test_restore_into_a_running_dataset(void **state) {
  (void)state;
  config c = {.repeat = -1, .buffer = 10, .batch = 4, .seed = 3, .prefetch = 3};
  est_dataset *ds = open_config(&c);
  const size_t len = est_dataset_state_size(ds);
  int64_t *s = malloc(len * sizeof *s);
  uint64_t first[10], second[10];
  size_t n;
  assert_int_equal(run(ds, first, 5), 5);
  assert_int_equal(est_dataset_get_state(ds, s, len, &n), EST_OK);
  assert_int_equal(run(ds, first, 10), 10);       /* prefetch has run ahead */
  assert_int_equal(est_dataset_set_state(ds, s, len), EST_OK);
  assert_int_equal(run(ds, second, 10), 10);
  assert_memory_equal(first, second, sizeof first);
  est_dataset_free(ds);

  /* a finished dataset's state restores to "finished" */
  config f = {.repeat = 1, .batch = 8};
  ds = open_config(&f);
  uint64_t all[8];
  assert_int_equal(run(ds, all, 8), 3);
  const size_t flen = est_dataset_state_size(ds);
  assert_int_equal(est_dataset_get_state(ds, s, len, &n), EST_OK);
  est_dataset_free(ds);
  ds = open_config(&f);
  assert_int_equal(est_dataset_set_state(ds, s, flen), EST_OK);
  const est_batch *b;
  assert_int_equal(est_dataset_next(ds, &b), EST_ERR_OUT_OF_RANGE);
  est_dataset_free(ds);
  free(s);
}

static void test_memory_source_resume(void **state) {
  (void)state;
  est_example ex[9];
  for (int i = 0; i < 9; i++) {
    est_example_init(&ex[i]);
    int64_t id = i;
    assert_int_equal(est_example_set_int64(&ex[i], "id", &id, 1), EST_OK);
  }
  uint64_t ref[32], got[32];
  int64_t s[EST_DATASET_STATE_HEADER + 3 * 4];
  size_t n, total = 0;
  for (int pass = 0; pass < 2; pass++) {
    est_dataset *ds;
    assert_int_equal(est_dataset_from_examples(&ds, ex, 9), EST_OK);
    assert_int_equal(est_dataset_parse(ds, specs, 2, EST_DATASET_CAST_INT32), EST_OK);
    assert_int_equal(est_dataset_repeat(ds, 2), EST_OK);
    assert_int_equal(est_dataset_shuffle(ds, 4, 11), EST_OK);
    assert_int_equal(est_dataset_batch(ds, 2, 0), EST_OK);
    if (pass == 0) {
      total = run(ds, ref, 32);
      assert_int_equal(total, 9);
    } else {
      assert_int_equal(run(ds, got, 4), 4);
      assert_int_equal(est_dataset_get_state(ds, s, sizeof s / sizeof *s, &n), EST_OK);
      est_dataset_free(ds);
      assert_int_equal(est_dataset_from_examples(&ds, ex, 9), EST_OK);
      assert_int_equal(est_dataset_parse(ds, specs, 2, EST_DATASET_CAST_INT32), EST_OK);
      assert_int_equal(est_dataset_repeat(ds, 2), EST_OK);
      assert_int_equal(est_dataset_shuffle(ds, 4, 11), EST_OK);
      assert_int_equal(est_dataset_batch(ds, 2, 0), EST_OK);
      assert_int_equal(est_dataset_set_state(ds, s, n), EST_OK);
      assert_int_equal(run(ds, got + 4, 28), total - 4);
      assert_memory_equal(got, ref, total * sizeof *got);
    }
    est_dataset_free(ds);
  }
  for (int i = 0; i < 9; i++) est_example_clear(&ex[i]);
}

static void test_bad_states_are_refused(void **state) {
  (void)state;
  config c = {.repeat = -1, .buffer = 6, .batch = 4, .seed = 5};
  est_dataset *ds = open_config(&c);
  const size_t len = est_dataset_state_size(ds);
  assert_int_equal(len, EST_DATASET_STATE_HEADER + 18);
  int64_t *good = malloc(len * sizeof *good), *bad = malloc(len * sizeof *bad);
  uint64_t h[8];
  size_t n;
  assert_int_equal(run(ds, h, 3), 3);
  assert_int_equal(est_dataset_get_state(ds, good, len, &n), EST_OK);
  assert_int_equal(est_dataset_get_state(ds, good, len - 1, &n), EST_ERR_INVALID_ARGUMENT);
  est_dataset_free(ds);

  /* another configuration: named in the message */
  config other = c;
  other.batch = 8;
  ds = open_config(&other);
  assert_int_equal(est_dataset_set_state(ds, good, len), EST_ERR_FAILED_PRECONDITION);
  assert_non_null(strstr(est_error_message(), "batch_size 4"));
  est_dataset_free(ds);
  other = c;
  other.seed = 6;
  ds = open_config(&other);
  assert_int_equal(est_dataset_set_state(ds, good, len), EST_ERR_FAILED_PRECONDITION);
  assert_non_null(strstr(est_error_message(), "seed"));
  est_dataset_free(ds);

  ds = open_config(&c);
  assert_int_equal(est_dataset_set_state(ds, good, len - 3), EST_ERR_INVALID_ARGUMENT);
  memcpy(bad, good, len * sizeof *bad);
  bad[0] ^= 1;
  assert_int_equal(est_dataset_set_state(ds, bad, len), EST_ERR_INVALID_ARGUMENT);
  /* a buffered record's offset that is not a record boundary: an error, no garbage */
  memcpy(bad, good, len * sizeof *bad);
  bad[EST_DATASET_STATE_HEADER + 1] += 3;
  assert_int_not_equal(est_dataset_set_state(ds, bad, len), EST_OK);
  const est_batch *b;
  assert_int_not_equal(est_dataset_next(ds, &b), EST_OK);  /* stays failed */
  assert_int_equal(est_dataset_set_state(ds, good, len), EST_OK);  /* a good state heals it */
  assert_int_equal(est_dataset_next(ds, &b), EST_OK);
  est_dataset_free(ds);

  /* random damage to any value: an error or a valid continuation, never a crash */
  est_rng rng;
  est_rng_init(&rng, 2024);
  for (int trial = 0; trial < 300; trial++) {
    memcpy(bad, good, len * sizeof *bad);
    size_t at = (size_t)est_rng_below(&rng, len);
    static const int64_t values[] = {-1, 0, 1, 2, 7, 13, 1000, INT64_MAX, INT64_MIN};
    bad[at] = trial % 2 ? values[est_rng_below(&rng, 9)] : bad[at] + (int64_t)est_rng_below(&rng, 5) - 2;
    ds = open_config(&c);
    if (est_dataset_set_state(ds, bad, len) == EST_OK)
      for (int k = 0; k < 6 && est_dataset_next(ds, &b) == EST_OK; k++)
        assert_true(b->size >= 1 && b->size <= 4);
    est_dataset_free(ds);
  }
  free(good);
  free(bad);
}

/* BERT's training input over the real MRPC eval file: repeat forever, shuffle(100),
 * batch 32 with drop_remainder; resume across the epoch boundary (408 / 32 = 12.75). */
static void test_resume_bert_training_order_on_mrpc(void **state) {
  (void)state;
  const char *paths[] = {EST_TEST_DATA "/mrpc_eval.tf_record"};
  const est_feature_spec bert[5] = {
    {.key = "input_ids", .dtype = EST_DT_INT64, .rank = 1, .shape = {128}},
    {.key = "input_mask", .dtype = EST_DT_INT64, .rank = 1, .shape = {128}},
    {.key = "segment_ids", .dtype = EST_DT_INT64, .rank = 1, .shape = {128}},
    {.key = "label_ids", .dtype = EST_DT_INT64, .rank = 0},
    {.key = "is_real_example", .dtype = EST_DT_INT64, .rank = 0},
  };
  uint64_t ref[30], got[30];
  static const size_t positions[] = {0, 1, 12, 13, 25};
  for (size_t k = 0; k <= sizeof positions / sizeof *positions; k++) {
    est_dataset *ds;
    assert_int_equal(est_dataset_from_tfrecords(&ds, paths, 1, EST_COMPRESSION_NONE), EST_OK);
    assert_int_equal(est_dataset_parse(ds, bert, 5, EST_DATASET_CAST_INT32), EST_OK);
    assert_int_equal(est_dataset_repeat(ds, -1), EST_OK);
    assert_int_equal(est_dataset_shuffle(ds, 100, 12345), EST_OK);
    assert_int_equal(est_dataset_batch(ds, 32, 1), EST_OK);
    assert_int_equal(est_dataset_prefetch(ds, 2), EST_OK);
    if (k == 0) {
      assert_int_equal(run(ds, ref, 30), 30);
      est_dataset_free(ds);
      continue;
    }
    size_t p = positions[k - 1], n, len = est_dataset_state_size(ds);
    int64_t s[EST_DATASET_STATE_HEADER + 300];
    assert_int_equal(len, sizeof s / sizeof *s);
    assert_int_equal(run(ds, got, p), p);
    assert_int_equal(est_dataset_get_state(ds, s, len, &n), EST_OK);
    assert_int_equal(est_dataset_set_state(ds, s, len), EST_OK);
    assert_int_equal(run(ds, got + p, 30 - p), 30 - p);
    assert_memory_equal(got, ref, sizeof ref);
    est_dataset_free(ds);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_resume_shuffled_repeated),
    cmocka_unit_test(test_resume_forever_with_big_buffer),
    cmocka_unit_test(test_resume_gzip_and_shard),
    cmocka_unit_test(test_restore_into_a_running_dataset),
    cmocka_unit_test(test_memory_source_resume),
    cmocka_unit_test(test_bad_states_are_refused),
    cmocka_unit_test(test_resume_bert_training_order_on_mrpc),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
