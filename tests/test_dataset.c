/* Input pipeline semantics: batch / drop_remainder, repeat, shuffle, shard, prefetch,
 * VarLen padding, int32 casting, in-memory sources, errors, and the real MRPC eval file.
 * Resume (get/set_state) has its own file, test_dataset_state.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "est/dataset.h"
#include "est/example.h"
#include "est/tfrecord.h"
#include "test_util.h"

/* Record i of a test file: id = base + i; x = {id/2, -id/2}; vals = id%4 copies of id. */
static void make_example(est_example *ex, int64_t id) {
  est_example_init(ex);
  float x[2] = {(float)id * 0.5f, -(float)id * 0.5f};
  int64_t vals[3] = {id, id, id};
  assert_int_equal(est_example_set_int64(ex, "id", &id, 1), EST_OK);
  assert_int_equal(est_example_set_float(ex, "x", x, 2), EST_OK);
  if (id % 4) assert_int_equal(est_example_set_int64(ex, "vals", vals, (size_t)(id % 4)), EST_OK);
}

static void write_file(const char *path, int n, int64_t base, est_compression c) {
  est_tfrecord_writer *w;
  assert_int_equal(est_tfrecord_writer_open(&w, path, c), EST_OK);
  for (int i = 0; i < n; i++) {
    est_example ex;
    make_example(&ex, base + i);
    uint8_t *buf;
    size_t size;
    assert_int_equal(est_example_serialize(&ex, &buf, &size), EST_OK);
    assert_int_equal(est_tfrecord_writer_write(w, buf, size), EST_OK);
    free(buf);
    est_example_clear(&ex);
  }
  assert_int_equal(est_tfrecord_writer_close(w), EST_OK);
}

static const est_feature_spec specs[3] = {
  {.key = "id", .dtype = EST_DT_INT64, .rank = 0},
  {.key = "x", .dtype = EST_DT_FLOAT, .rank = 1, .shape = {2}},
  {.key = "vals", .dtype = EST_DT_INT64, .var_len = EST_VAR_LEN},
};

static est_dataset *open_files(const char *const *paths, size_t n) {
  est_dataset *ds;
  assert_int_equal(est_dataset_from_tfrecords(&ds, paths, n, EST_COMPRESSION_NONE), EST_OK);
  assert_int_equal(est_dataset_parse(ds, specs, 3, EST_DATASET_CAST_INT32), EST_OK);
  return ds;
}

/* Checks every feature of a batch against its ids and appends the ids to out. */
static size_t take_batch(const est_batch *b, int64_t *out) {
  const est_tensor *id = est_batch_feature(b, "id"), *x = est_batch_feature(b, "x"), *v = est_batch_feature(b, "vals");
  const int64_t *len = est_batch_lengths(b, "vals");
  assert_non_null(id);
  assert_int_equal(id->dtype, EST_DT_INT32);
  assert_int_equal(id->rank, 1);
  assert_int_equal(id->dims[0], b->size);
  assert_int_equal(x->dtype, EST_DT_FLOAT);
  assert_int_equal(x->rank, 2);
  assert_int_equal(x->dims[1], 2);
  assert_int_equal(v->dtype, EST_DT_INT32);
  assert_null(est_batch_lengths(b, "id"));
  int64_t max_len = 0;
  for (int r = 0; r < b->size; r++) max_len = len[r] > max_len ? len[r] : max_len;
  assert_int_equal(v->dims[0], b->size);
  assert_int_equal(v->dims[1], max_len);
  for (int r = 0; r < b->size; r++) {
    int32_t i = ((const int32_t *)id->data)[r];
    assert_true(((const float *)x->data)[2 * r] == (float)i * 0.5f);
    assert_true(((const float *)x->data)[2 * r + 1] == -(float)i * 0.5f);
    assert_int_equal(len[r], i % 4);
    for (int64_t k = 0; k < max_len; k++)
      assert_int_equal(((const int32_t *)v->data)[r * max_len + k], k < len[r] ? i : 0);
    out[r] = i;
  }
  return (size_t)b->size;
}

/* Reads up to max_batches (or to the end); returns the ids, batch sizes in sizes. */
static size_t drain(est_dataset *ds, int64_t *ids, int *sizes, size_t max_batches, size_t *nbatches) {
  const est_batch *b;
  size_t n = 0, k = 0;
  est_status st = EST_OK;
  while (k < max_batches && (st = est_dataset_next(ds, &b)) == EST_OK) {
    sizes[k++] = b->size;
    n += take_batch(b, ids + n);
  }
  if (k < max_batches) assert_int_equal(st, EST_ERR_OUT_OF_RANGE);
  *nbatches = k;
  return n;
}

static void path_of(char *buf, size_t cap, const char *name) {
  snprintf(buf, cap, "%s/%s", test_tmpdir, name);
}

static void test_batch_and_drop_remainder(void **state) {
  (void)state;
  char p[512];
  path_of(p, sizeof p, "ten.tf_record");
  write_file(p, 10, 0, EST_COMPRESSION_NONE);
  const char *paths[] = {p};
  for (int drop = 0; drop <= 1; drop++) {
    est_dataset *ds = open_files(paths, 1);
    assert_int_equal(est_dataset_batch(ds, 4, drop), EST_OK);
    int64_t ids[64];
    int sizes[16];
    size_t nb, n = drain(ds, ids, sizes, 16, &nb);
    assert_int_equal(nb, drop ? 2 : 3);
    assert_int_equal(n, drop ? 8 : 10);
    assert_int_equal(sizes[0], 4);
    if (!drop) assert_int_equal(sizes[2], 2);
    for (size_t i = 0; i < n; i++) assert_int_equal(ids[i], (int64_t)i);
    /* the end repeats */
    const est_batch *b;
    assert_int_equal(est_dataset_next(ds, &b), EST_ERR_OUT_OF_RANGE);
    assert_null(b);
    /* configuration is frozen once reading started */
    assert_int_equal(est_dataset_batch(ds, 2, 0), EST_ERR_FAILED_PRECONDITION);
    est_dataset_free(ds);
  }
}

static void test_repeat_and_files_in_order(void **state) {
  (void)state;
  char a[512], b[512];
  path_of(a, sizeof a, "a.tf_record");
  path_of(b, sizeof b, "b.tf_record");
  write_file(a, 3, 100, EST_COMPRESSION_NONE);
  write_file(b, 2, 200, EST_COMPRESSION_NONE);
  const char *paths[] = {a, b};
  const int64_t epoch[5] = {100, 101, 102, 200, 201};
  est_dataset *ds = open_files(paths, 2);
  assert_int_equal(est_dataset_repeat(ds, 3), EST_OK);
  assert_int_equal(est_dataset_batch(ds, 2, 0), EST_OK);
  int64_t ids[64];
  int sizes[32];
  size_t nb, n = drain(ds, ids, sizes, 32, &nb);
  assert_int_equal(n, 15);
  assert_int_equal(nb, 8); /* 7 full + 1; batches span epoch boundaries */
  for (size_t i = 0; i < n; i++) assert_int_equal(ids[i], epoch[i % 5]);
  est_dataset_free(ds);

  /* forever: keeps cycling */
  ds = open_files(paths, 2);
  assert_int_equal(est_dataset_repeat(ds, -1), EST_OK);
  assert_int_equal(est_dataset_batch(ds, 3, 1), EST_OK);
  n = drain(ds, ids, sizes, 20, &nb);
  assert_int_equal(nb, 20);
  for (size_t i = 0; i < n; i++) assert_int_equal(ids[i], epoch[i % 5]);
  est_dataset_free(ds);

  /* repeat(0): nothing; repeat forever over an empty file ends instead of spinning */
  ds = open_files(paths, 2);
  assert_int_equal(est_dataset_repeat(ds, 0), EST_OK);
  assert_int_equal(drain(ds, ids, sizes, 4, &nb), 0);
  est_dataset_free(ds);
  char e[512];
  path_of(e, sizeof e, "empty.tf_record");
  write_file(e, 0, 0, EST_COMPRESSION_NONE);
  const char *empty[] = {e};
  ds = open_files(empty, 1);
  assert_int_equal(est_dataset_repeat(ds, -1), EST_OK);
  assert_int_equal(drain(ds, ids, sizes, 4, &nb), 0);
  est_dataset_free(ds);
}

static size_t shuffled(const char *const *paths, int64_t buffer, uint64_t seed, int64_t repeat, int prefetch,
                       int64_t *ids) {
  est_dataset *ds = open_files(paths, 1);
  assert_int_equal(est_dataset_repeat(ds, repeat), EST_OK);
  if (buffer) assert_int_equal(est_dataset_shuffle(ds, buffer, seed), EST_OK);
  assert_int_equal(est_dataset_batch(ds, 3, 0), EST_OK);
  assert_int_equal(est_dataset_prefetch(ds, prefetch), EST_OK);
  int sizes[128];
  size_t nb, n = drain(ds, ids, sizes, 128, &nb);
  est_dataset_free(ds);
  return n;
}

static void test_shuffle(void **state) {
  (void)state;
  char p[512];
  path_of(p, sizeof p, "forty.tf_record");
  write_file(p, 40, 0, EST_COMPRESSION_NONE);
  const char *paths[] = {p};
  int64_t a[128], b[128], c[128];
  assert_int_equal(shuffled(paths, 8, 42, 1, 0, a), 40);
  assert_int_equal(shuffled(paths, 8, 42, 1, 0, b), 40);
  assert_int_equal(shuffled(paths, 8, 43, 1, 0, c), 40);
  assert_memory_equal(a, b, sizeof(int64_t) * 40);     /* deterministic per seed */
  assert_memory_not_equal(a, c, sizeof(int64_t) * 40); /* and depends on it */
  int seen[40] = {0}, moved = 0;
  for (int i = 0; i < 40; i++) {
    seen[a[i]]++;
    moved += a[i] != i;
    /* a buffer of 8 has read at most elements 0 .. i+7 when output i is picked */
    assert_true(a[i] <= i + 7);
  }
  for (int i = 0; i < 40; i++) assert_int_equal(seen[i], 1); /* a permutation */
  assert_true(moved > 20);
  /* buffer 1 is the identity */
  assert_int_equal(shuffled(paths, 1, 42, 1, 0, a), 40);
  for (int i = 0; i < 40; i++) assert_int_equal(a[i], i);
  /* every buffered element can come first: over seeds, output 0 covers ids 0..7 */
  int first[8] = {0};
  for (uint64_t seed = 0; seed < 64; seed++) {
    shuffled(paths, 8, seed, 1, 0, a);
    assert_true(a[0] < 8);
    first[a[0]]++;
  }
  for (int i = 0; i < 8; i++) assert_true(first[i] > 0);
  /* repeat before shuffle: epochs blur, yet each epoch's 40 ids all come out over 80 */
  assert_int_equal(shuffled(paths, 8, 42, 2, 0, a), 80);
  int twice[40] = {0};
  for (int i = 0; i < 80; i++) twice[a[i]]++;
  for (int i = 0; i < 40; i++) assert_int_equal(twice[i], 2);
}

static void test_prefetch_gives_the_same_sequence(void **state) {
  (void)state;
  char p[512];
  path_of(p, sizeof p, "pf.tf_record");
  write_file(p, 23, 0, EST_COMPRESSION_NONE);
  const char *paths[] = {p};
  int64_t a[200], b[200], c[200];
  size_t na = shuffled(paths, 5, 7, 4, 0, a), nb = shuffled(paths, 5, 7, 4, 1, b), nc = shuffled(paths, 5, 7, 4, 6, c);
  assert_int_equal(na, 92);
  assert_int_equal(nb, 92);
  assert_int_equal(nc, 92);
  assert_memory_equal(a, b, na * sizeof *a);
  assert_memory_equal(a, c, na * sizeof *a);
  /* stopping early with batches queued, then freeing, is clean */
  est_dataset *ds = open_files(paths, 1);
  assert_int_equal(est_dataset_repeat(ds, -1), EST_OK);
  assert_int_equal(est_dataset_prefetch(ds, 4), EST_OK);
  const est_batch *bt;
  assert_int_equal(est_dataset_next(ds, &bt), EST_OK);
  est_dataset_free(ds);
}

static void test_shard(void **state) {
  (void)state;
  char p[512];
  path_of(p, sizeof p, "nine.tf_record");
  write_file(p, 9, 0, EST_COMPRESSION_NONE);
  const char *paths[] = {p};
  int64_t ids[2][64];
  size_t n[2];
  for (int s = 0; s < 2; s++) {
    est_dataset *ds = open_files(paths, 1);
    assert_int_equal(est_dataset_shard(ds, 2, s), EST_OK);
    assert_int_equal(est_dataset_repeat(ds, 2), EST_OK);
    assert_int_equal(est_dataset_batch(ds, 4, 0), EST_OK);
    int sizes[16];
    size_t nb;
    n[s] = drain(ds, ids[s], sizes, 16, &nb);
    est_dataset_free(ds);
  }
  /* element i of each epoch goes to shard i % 2; the count restarts every epoch */
  static const int64_t even[10] = {0, 2, 4, 6, 8, 0, 2, 4, 6, 8}, odd[8] = {1, 3, 5, 7, 1, 3, 5, 7};
  assert_int_equal(n[0], 10);
  assert_int_equal(n[1], 8);
  assert_memory_equal(ids[0], even, sizeof even);
  assert_memory_equal(ids[1], odd, sizeof odd);
  est_dataset *ds = open_files(paths, 1);
  assert_int_equal(est_dataset_shard(ds, 2, 2), EST_ERR_INVALID_ARGUMENT);
  est_dataset_free(ds);
}

static void test_memory_source_and_defaults(void **state) {
  (void)state;
  est_example ex[3];
  for (int i = 0; i < 3; i++) make_example(&ex[i], 10 + i);
  est_dataset *ds;
  assert_int_equal(est_dataset_from_examples(&ds, ex, 3), EST_OK);
  assert_int_equal(est_dataset_parse(ds, specs, 3, EST_DATASET_CAST_INT32), EST_OK);
  assert_int_equal(est_dataset_batch(ds, 2, 0), EST_OK);
  int64_t ids[8];
  int sizes[8];
  size_t nb;
  assert_int_equal(drain(ds, ids, sizes, 8, &nb), 3);
  assert_int_equal(nb, 2);
  assert_int_equal(sizes[1], 1);
  assert_int_equal(ids[2], 12);
  est_dataset_free(ds);

  /* a FixedLen default fills a missing feature; int64 without the cast stays int64 */
  int64_t dflt = -7;
  est_feature_spec with_default[2] = {
    {.key = "id", .dtype = EST_DT_INT64, .rank = 0},
    {.key = "weight", .dtype = EST_DT_INT64, .rank = 0, .default_value = &dflt, .default_count = 1},
  };
  assert_int_equal(est_dataset_from_examples(&ds, ex, 3), EST_OK);
  assert_int_equal(est_dataset_parse(ds, with_default, 2, EST_DATASET_CAST_NONE), EST_OK);
  dflt = 99; /* the spec was copied */
  assert_int_equal(est_dataset_batch(ds, 3, 0), EST_OK);
  const est_batch *b;
  assert_int_equal(est_dataset_next(ds, &b), EST_OK);
  const est_tensor *w = est_batch_feature(b, "weight");
  assert_int_equal(w->dtype, EST_DT_INT64);
  for (int r = 0; r < 3; r++) assert_int_equal(((const int64_t *)w->data)[r], -7);
  assert_int_equal(((const int64_t *)est_batch_feature(b, "id")->data)[1], 11);
  assert_null(est_batch_feature(b, "nope"));
  est_dataset_free(ds);

  /* casting only the named int64 features */
  assert_int_equal(est_dataset_from_examples(&ds, ex, 3), EST_OK);
  assert_int_equal(est_dataset_parse(ds, specs, 3, EST_DATASET_CAST_NONE), EST_OK);
  assert_int_equal(est_dataset_cast_int32(ds, (const char *[]){"x"}, 1), EST_ERR_INVALID_ARGUMENT);
  assert_int_equal(est_dataset_cast_int32(ds, (const char *[]){"nope"}, 1), EST_ERR_NOT_FOUND);
  assert_int_equal(est_dataset_cast_int32(ds, (const char *[]){"vals"}, 1), EST_OK);
  assert_int_equal(est_dataset_batch(ds, 3, 0), EST_OK);
  assert_int_equal(est_dataset_next(ds, &b), EST_OK);
  assert_int_equal(est_batch_feature(b, "id")->dtype, EST_DT_INT64);
  const est_tensor *vals = est_batch_feature(b, "vals");
  assert_int_equal(vals->dtype, EST_DT_INT32);
  assert_int_equal(vals->dims[1], 3); /* ids 10, 11, 12: lengths 2, 3, 0 */
  assert_int_equal(((const int32_t *)vals->data)[3 + 2], 11);
  assert_int_equal(est_dataset_cast_int32(ds, (const char *[]){"id"}, 1), EST_ERR_FAILED_PRECONDITION);
  est_dataset_free(ds);

  /* errors name the in-memory record */
  est_feature_spec missing[1] = {{.key = "label_ids", .dtype = EST_DT_INT64, .rank = 0}};
  assert_int_equal(est_dataset_from_examples(&ds, ex, 3), EST_OK);
  assert_int_equal(est_dataset_parse(ds, missing, 1, EST_DATASET_CAST_INT32), EST_OK);
  assert_int_equal(est_dataset_next(ds, &b), EST_ERR_INVALID_ARGUMENT);
  assert_string_equal(est_error_message(),
                      "<memory> record 0: Feature: label_ids (data type: int64) is required but could not be found.");
  est_dataset_free(ds);
  for (int i = 0; i < 3; i++) est_example_clear(&ex[i]);
}

static void test_errors(void **state) {
  (void)state;
  char p[512], q[512];
  path_of(p, sizeof p, "does_not_exist.tf_record");
  const char *paths[] = {p};
  est_dataset *ds;
  assert_int_equal(est_dataset_from_tfrecords(&ds, paths, 1, EST_COMPRESSION_NONE), EST_ERR_NOT_FOUND);
  assert_non_null(strstr(est_error_message(), "does_not_exist.tf_record"));
  assert_null(ds);

  /* record 17 lacks label_ids: the error names file, record and feature; it sticks */
  path_of(q, sizeof q, "labels.tf_record");
  est_tfrecord_writer *w;
  assert_int_equal(est_tfrecord_writer_open(&w, q, EST_COMPRESSION_NONE), EST_OK);
  for (int64_t i = 0; i < 30; i++) {
    est_example ex;
    est_example_init(&ex);
    int64_t big = i == 25 ? INT64_C(5000000000) : i;
    if (i != 17) assert_int_equal(est_example_set_int64(&ex, "label_ids", &big, 1), EST_OK);
    uint8_t *buf;
    size_t size;
    assert_int_equal(est_example_serialize(&ex, &buf, &size), EST_OK);
    assert_int_equal(est_tfrecord_writer_write(w, buf, size), EST_OK);
    free(buf);
    est_example_clear(&ex);
  }
  assert_int_equal(est_tfrecord_writer_close(w), EST_OK);
  const char *qp[] = {q};
  est_feature_spec label[1] = {{.key = "label_ids", .dtype = EST_DT_INT64, .rank = 0}};
  for (int prefetch = 0; prefetch <= 2; prefetch += 2) {
    assert_int_equal(est_dataset_from_tfrecords(&ds, qp, 1, EST_COMPRESSION_NONE), EST_OK);
    assert_int_equal(est_dataset_parse(ds, label, 1, EST_DATASET_CAST_INT32), EST_OK);
    assert_int_equal(est_dataset_batch(ds, 8, 0), EST_OK);
    assert_int_equal(est_dataset_prefetch(ds, prefetch), EST_OK);
    const est_batch *b;
    assert_int_equal(est_dataset_next(ds, &b), EST_OK);
    assert_int_equal(est_dataset_next(ds, &b), EST_OK);
    char expect[700];
    snprintf(expect, sizeof expect,
             "%s record 17: Feature: label_ids (data type: int64) is required but could not be found.", q);
    assert_int_equal(est_dataset_next(ds, &b), EST_ERR_INVALID_ARGUMENT);
    assert_string_equal(est_error_message(), expect);
    assert_int_equal(est_dataset_next(ds, &b), EST_ERR_INVALID_ARGUMENT);
    assert_string_equal(est_error_message(), expect);
    est_dataset_free(ds);
  }
  /* an int64 that does not fit int32 is refused, not wrapped (record 25) */
  est_feature_spec dflt_label[1] = {
    {.key = "label_ids", .dtype = EST_DT_INT64, .rank = 0, .default_value = (int64_t[]){0}, .default_count = 1}};
  assert_int_equal(est_dataset_from_tfrecords(&ds, qp, 1, EST_COMPRESSION_NONE), EST_OK);
  assert_int_equal(est_dataset_parse(ds, dflt_label, 1, EST_DATASET_CAST_INT32), EST_OK);
  assert_int_equal(est_dataset_batch(ds, 30, 0), EST_OK);
  const est_batch *b;
  assert_int_equal(est_dataset_next(ds, &b), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "record 25: feature label_ids value 5000000000 does not fit int32"));
  est_dataset_free(ds);

  /* a truncated file: DATA_LOSS naming the file */
  char t[512], cmd[1200];
  path_of(t, sizeof t, "cut.tf_record");
  snprintf(cmd, sizeof cmd, "head -c 100 '%s' > '%s'", q, t);
  assert_int_equal(system(cmd), 0);
  const char *tp[] = {t};
  assert_int_equal(est_dataset_from_tfrecords(&ds, tp, 1, EST_COMPRESSION_NONE), EST_OK);
  assert_int_equal(est_dataset_parse(ds, dflt_label, 1, EST_DATASET_CAST_INT32), EST_OK);
  assert_int_equal(est_dataset_batch(ds, 30, 0), EST_OK);
  assert_int_equal(est_dataset_next(ds, &b), EST_ERR_DATA_LOSS);
  assert_non_null(strstr(est_error_message(), "cut.tf_record"));
  est_dataset_free(ds);

  /* configuration errors */
  assert_int_equal(est_dataset_from_tfrecords(&ds, qp, 1, EST_COMPRESSION_NONE), EST_OK);
  assert_int_equal(est_dataset_next(ds, &b), EST_ERR_FAILED_PRECONDITION); /* no parse */
  int64_t two[2] = {0, 0};
  est_feature_spec pad2[1] = {
    {.key = "s", .dtype = EST_DT_INT64, .var_len = EST_FIXED_LEN_SEQUENCE, .rank = 0, .default_value = two, .default_count = 2}};
  assert_int_equal(est_dataset_parse(ds, pad2, 1, 0), EST_ERR_INVALID_ARGUMENT);
  assert_string_equal(est_error_message(), "Cannot reshape a tensor with 2 elements to shape [] (1 elements) for feature s.");
  est_feature_spec deep[1] = {
    {.key = "s", .dtype = EST_DT_FLOAT, .var_len = EST_FIXED_LEN_SEQUENCE, .rank = 7, .shape = {1, 1, 1, 1, 1, 1, 1}}};
  assert_int_equal(est_dataset_parse(ds, deep, 1, 0), EST_ERR_INVALID_ARGUMENT);
  assert_string_equal(est_error_message(),
                      "dataset parse: feature s: shape of rank 7 gives batches of rank 9, more than 8");
  est_feature_spec noshape[1] = {{.key = "s", .dtype = EST_DT_INT64, .rank = -1}};
  assert_int_equal(est_dataset_parse(ds, noshape, 1, 0), EST_ERR_INVALID_ARGUMENT);
  assert_string_equal(est_error_message(), "Missing shape for feature s.");
  assert_int_equal(est_dataset_batch(ds, 0, 0), EST_ERR_INVALID_ARGUMENT);
  assert_int_equal(est_dataset_shuffle(ds, 0, 1), EST_ERR_INVALID_ARGUMENT);
  assert_int_equal(est_dataset_repeat(ds, -2), EST_ERR_INVALID_ARGUMENT);
  est_dataset_free(ds);
}

/* from_tensor_slices: rows of user tensors, batched (and shuffled, resumable) as records. */
static void test_from_tensors(void **state) {
  (void)state;
  int32_t ids[5][4];
  int64_t labels[5];
  float x[5][2][3];
  for (int r = 0; r < 5; r++) {
    for (int k = 0; k < 4; k++) ids[r][k] = r * 10 + k;
    labels[r] = r % 2;
    for (int k = 0; k < 6; k++) x[r][k / 3][k % 3] = (float)r + 0.125f * (float)k;
  }
  const char *names[3] = {"input_ids", "label_ids", "x"};
  est_tensor t[3] = {
    {.dtype = EST_DT_INT32, .rank = 2, .dims = {5, 4}, .data = ids},
    {.dtype = EST_DT_INT64, .rank = 1, .dims = {5}, .data = labels},
    {.dtype = EST_DT_FLOAT, .rank = 3, .dims = {5, 2, 3}, .data = x},
  };
  est_dataset *ds;
  assert_int_equal(est_dataset_from_tensors(&ds, names, t, 3), EST_OK);
  assert_int_equal(est_dataset_parse(ds, specs, 3, 0), EST_ERR_FAILED_PRECONDITION);
  assert_int_equal(est_dataset_batch(ds, 2, 0), EST_OK);
  ids[0][0] = -1; /* copied at creation */
  const est_batch *b;
  for (int k = 0; k < 3; k++) {
    assert_int_equal(est_dataset_next(ds, &b), EST_OK);
    assert_int_equal(b->size, k < 2 ? 2 : 1);
    const est_tensor *ti = est_batch_feature(b, "input_ids"), *tl = est_batch_feature(b, "label_ids"),
                     *tx = est_batch_feature(b, "x");
    assert_int_equal(ti->dtype, EST_DT_INT32);
    assert_int_equal(ti->rank, 2);
    assert_int_equal(ti->dims[1], 4);
    assert_int_equal(tl->dtype, EST_DT_INT64);
    assert_int_equal(tl->rank, 1);
    assert_int_equal(tx->rank, 3);
    assert_int_equal(tx->dims[2], 3);
    for (int r = 0; r < b->size; r++) {
      int row = 2 * k + r;
      assert_int_equal(((const int32_t *)ti->data)[r * 4], row * 10);
      assert_int_equal(((const int32_t *)ti->data)[r * 4 + 3], row * 10 + 3);
      assert_int_equal(((const int64_t *)tl->data)[r], row % 2);
      assert_true(((const float *)tx->data)[r * 6 + 5] == (float)row + 0.625f);
    }
  }
  assert_int_equal(est_dataset_next(ds, &b), EST_ERR_OUT_OF_RANGE);
  est_dataset_free(ds);

  /* shuffled over repeats, then resumed from the middle */
  int32_t seq[2][40];
  int64_t st[EST_DATASET_STATE_HEADER + 3 * 3];
  size_t n;
  for (int pass = 0; pass < 2; pass++) {
    assert_int_equal(est_dataset_from_tensors(&ds, names, t, 3), EST_OK);
    assert_int_equal(est_dataset_repeat(ds, 4), EST_OK);
    assert_int_equal(est_dataset_shuffle(ds, 3, 77), EST_OK);
    assert_int_equal(est_dataset_batch(ds, 2, 0), EST_OK);
    int got = 0;
    if (pass == 1) {
      assert_int_equal(est_dataset_set_state(ds, st, n), EST_OK);
      got = 6;
    }
    while (est_dataset_next(ds, &b) == EST_OK) {
      for (int r = 0; r < b->size; r++) seq[pass][got++] = ((const int32_t *)est_batch_feature(b, "input_ids")->data)[r * 4];
      if (pass == 0 && got == 6) assert_int_equal(est_dataset_get_state(ds, st, sizeof st / sizeof *st, &n), EST_OK);
    }
    assert_int_equal(got, 20);
    est_dataset_free(ds);
  }
  assert_memory_equal(seq[0] + 6, seq[1] + 6, 14 * sizeof(int32_t));

  /* rows must agree; only numeric dtypes */
  t[1].dims[0] = 4;
  assert_int_equal(est_dataset_from_tensors(&ds, names, t, 3), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "label_ids has 4 rows but input_ids has 5"));
  t[1].dims[0] = 5;
  t[2].dtype = EST_DT_STRING;
  assert_int_equal(est_dataset_from_tensors(&ds, names, t, 3), EST_ERR_INVALID_ARGUMENT);
  assert_null(ds);
}

/* The real eval.tf_record of TF's run_classifier on MRPC dev, read with BERT's spec. */
static void test_mrpc_eval_file(void **state) {
  (void)state;
  const char *paths[] = {EST_TEST_DATA "/mrpc_eval.tf_record"};
  const est_feature_spec bert[5] = {
    {.key = "input_ids", .dtype = EST_DT_INT64, .rank = 1, .shape = {128}},
    {.key = "input_mask", .dtype = EST_DT_INT64, .rank = 1, .shape = {128}},
    {.key = "segment_ids", .dtype = EST_DT_INT64, .rank = 1, .shape = {128}},
    {.key = "label_ids", .dtype = EST_DT_INT64, .rank = 0},
    {.key = "is_real_example", .dtype = EST_DT_INT64, .rank = 0},
  };
  for (int prefetch = 0; prefetch <= 2; prefetch += 2) {
    est_dataset *ds;
    assert_int_equal(est_dataset_from_tfrecords(&ds, paths, 1, EST_COMPRESSION_NONE), EST_OK);
    assert_int_equal(est_dataset_parse(ds, bert, 5, EST_DATASET_CAST_INT32), EST_OK);
    assert_int_equal(est_dataset_batch(ds, 8, 0), EST_OK);
    assert_int_equal(est_dataset_prefetch(ds, prefetch), EST_OK);
    const est_batch *b;
    est_status st;
    int batches = 0, examples = 0, positives = 0;
    while ((st = est_dataset_next(ds, &b)) == EST_OK) {
      batches++;
      examples += b->size;
      assert_int_equal(b->size, 8);
      const est_tensor *ids = est_batch_feature(b, "input_ids"), *mask = est_batch_feature(b, "input_mask");
      const est_tensor *label = est_batch_feature(b, "label_ids"), *real = est_batch_feature(b, "is_real_example");
      assert_int_equal(ids->dtype, EST_DT_INT32);
      assert_int_equal(ids->rank, 2);
      assert_int_equal(ids->dims[0], 8);
      assert_int_equal(ids->dims[1], 128);
      assert_int_equal(label->rank, 1);
      for (int r = 0; r < 8; r++) {
        const int32_t *row = (const int32_t *)ids->data + r * 128, *m = (const int32_t *)mask->data + r * 128;
        assert_int_equal(row[0], 101); /* [CLS] */
        int len = 0;
        while (len < 128 && m[len] == 1) len++;
        assert_true(len >= 3);
        assert_int_equal(row[len - 1], 102); /* [SEP] closes the real tokens */
        for (int k = len; k < 128; k++) assert_true(m[k] == 0 && row[k] == 0);
        int32_t l = ((const int32_t *)label->data)[r];
        assert_true(l == 0 || l == 1);
        positives += l;
        assert_int_equal(((const int32_t *)real->data)[r], 1);
      }
    }
    assert_int_equal(st, EST_ERR_OUT_OF_RANGE);
    assert_int_equal(batches, 51);
    assert_int_equal(examples, 408);
    assert_int_equal(positives, 279); /* MRPC dev: 279 paraphrases of 408 */
    assert_int_equal(est_dataset_batches_produced(ds), 51);
    est_dataset_free(ds);
  }
  /* BERT's missing-feature message with the real file */
  const est_feature_spec wrong[1] = {{.key = "label", .dtype = EST_DT_INT64, .rank = 0}};
  est_dataset *ds;
  assert_int_equal(est_dataset_from_tfrecords(&ds, paths, 1, EST_COMPRESSION_NONE), EST_OK);
  assert_int_equal(est_dataset_parse(ds, wrong, 1, EST_DATASET_CAST_INT32), EST_OK);
  const est_batch *b;
  assert_int_equal(est_dataset_next(ds, &b), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(),
                         "mrpc_eval.tf_record record 0: Feature: label (data type: int64) is required but could not be found."));
  est_dataset_free(ds);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_batch_and_drop_remainder),
    cmocka_unit_test(test_repeat_and_files_in_order),
    cmocka_unit_test(test_shuffle),
    cmocka_unit_test(test_prefetch_gives_the_same_sequence),
    cmocka_unit_test(test_shard),
    cmocka_unit_test(test_memory_source_and_defaults),
    cmocka_unit_test(test_errors),
    cmocka_unit_test(test_from_tensors),
    cmocka_unit_test(test_mrpc_eval_file),
  };
  return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
