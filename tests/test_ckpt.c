/* TF checkpoints (tensor bundle): the spec's byte-exact vectors (formats.md 3.9), real
 * TF-written files, round trips of every dtype, and the error cases of formats.md 5
 * (tensor_bundle_test.cc). Corruption sweeps live in test_ckpt_corrupt.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "ckpt_vectors.h"
#include "est/ckpt.h"
#include "est/crc32c.h"
#include "est/file.h"
#include "io/bundle.h"
#include "test_util.h"

static uint8_t *hex(const char *h, size_t *n) {
  size_t len = strlen(h) / 2;
  uint8_t *b = malloc(len ? len : 1);
  for (size_t i = 0; i < len; i++) sscanf(h + 2 * i, "%2hhx", &b[i]);
  *n = len;
  return b;
}

/* Asserts that file `path` holds exactly the bytes of hex string `h`. */
static void assert_file_hex(const char *path, const char *h) {
  size_t n, m;
  uint8_t *want = hex(h, &n), *got;
  assert_int_equal(est_read_file(path, &got, &m), EST_OK);
  assert_int_equal(m, n);
  for (size_t i = 0; i < n; i++)
    if (got[i] != want[i]) fail_msg("%s differs at byte %zu: %02x vs %02x", path, i, got[i], want[i]);
  free(want);
  free(got);
}

static void write_hex(const char *path, const char *h) {
  size_t n;
  uint8_t *b = hex(h, &n);
  assert_int_equal(est_write_file_atomic(path, b, n), EST_OK);
  free(b);
}

static est_tensor make(est_dtype dt, int rank, const int64_t *dims, void *data) {
  est_tensor t = {.dtype = dt, .rank = rank, .data = data};
  for (int i = 0; i < rank; i++) t.dims[i] = dims[i];
  return t;
}

static void path_of(char *buf, size_t n, const char *dir, const char *name) { est_path_join(buf, n, dir, name); }

/* (a): b=[0.0], w=[0xbf5b9cdc] float [1] -> TF1 file byte for byte. */
static void test_vector_a_write(void **state) {
  (void)state;
  char dir[256], prefix[300], p[400];
  test_make_tmpdir(dir, sizeof dir);
  path_of(prefix, sizeof prefix, dir, "variables");
  float b = 0.0f, w;
  uint32_t wbits = 0xbf5b9cdc;
  memcpy(&w, &wbits, 4);
  int64_t d1[1] = {1};
  est_ckpt_writer *wr;
  assert_int_equal(est_ckpt_writer_open(&wr, prefix), EST_OK);
  est_tensor tw = make(EST_DT_FLOAT, 1, d1, &w), tb = make(EST_DT_FLOAT, 1, d1, &b);
  assert_int_equal(est_ckpt_writer_add(wr, "w", &tw), EST_OK); /* out of order on purpose */
  assert_int_equal(est_ckpt_writer_add(wr, "b", &tb), EST_OK);
  assert_int_equal(est_ckpt_writer_finish(wr), EST_OK);
  snprintf(p, sizeof p, "%s.index", prefix);
  assert_file_hex(p, VEC_A_INDEX);
  snprintf(p, sizeof p, "%s.data-00000-of-00001", prefix);
  assert_file_hex(p, VEC_A_DATA);

  est_ckpt_reader *r;
  assert_int_equal(est_ckpt_reader_open(&r, prefix), EST_OK);
  assert_int_equal(est_ckpt_reader_count(r), 2);
  assert_string_equal(est_ckpt_reader_name(r, 0), "b");
  assert_string_equal(est_ckpt_reader_name(r, 1), "w");
  float got;
  assert_int_equal(est_ckpt_reader_read_into(r, "w", EST_DT_FLOAT, &got, 4), EST_OK);
  assert_memory_equal(&got, &wbits, 4);
  est_ckpt_reader_close(r);
  test_remove_tree(dir);
}

/* (b): the real TF2 file reads back (unsorted data, int64, string), and the SSTable
 * builder given its key/value pairs reproduces the index byte for byte. */
static void test_vector_b_read_and_rebuild(void **state) {
  (void)state;
  char dir[256], prefix[300], p[400];
  test_make_tmpdir(dir, sizeof dir);
  path_of(prefix, sizeof prefix, dir, "variables");
  snprintf(p, sizeof p, "%s.index", prefix);
  write_hex(p, VEC_B_INDEX);
  snprintf(p, sizeof p, "%s.data-00000-of-00001", prefix);
  write_hex(p, VEC_B_DATA);

  est_ckpt_reader *r;
  assert_int_equal(est_ckpt_reader_open(&r, prefix), EST_OK);
  assert_int_equal(est_ckpt_reader_count(r), 7);
  assert_string_equal(est_ckpt_reader_name(r, 0), "_CHECKPOINTABLE_OBJECT_GRAPH");
  assert_string_equal(est_ckpt_reader_name(r, 6), "w/.ATTRIBUTES/VARIABLE_VALUE");
  float lr;
  assert_int_equal(est_ckpt_reader_read_into(r, "optimizer/learning_rate/.ATTRIBUTES/VARIABLE_VALUE",
                                             EST_DT_FLOAT, &lr, 4), EST_OK);
  assert_true(lr == 0.5f);
  est_tensor t;
  assert_int_equal(est_ckpt_reader_read(r, "optimizer/iter/.ATTRIBUTES/VARIABLE_VALUE", &t), EST_OK);
  assert_int_equal(t.dtype, EST_DT_INT64);
  assert_int_equal(t.rank, 0);
  assert_int_equal(*(int64_t *)t.data, 0);
  est_tensor_free(&t);
  assert_int_equal(est_ckpt_reader_read(r, "_CHECKPOINTABLE_OBJECT_GRAPH", &t), EST_OK);
  assert_int_equal(t.dtype, EST_DT_STRING);
  assert_int_equal(t.rank, 0);
  est_bytes *s = t.data;
  assert_int_equal(s[0].size, 531);
  assert_int_equal(s[0].data[0], 0x0a); /* TrackableObjectGraph.nodes */
  est_tensor_free(&t);
  /* Every numeric tensor, at its offset in the unsorted data file: w@0, b@4 (float [1]),
   * decay@16, learning_rate@20, momentum@24 (float scalars). */
  struct { const char *name; int rank; uint32_t bits; } want[5] = {
      {"w/.ATTRIBUTES/VARIABLE_VALUE", 1, 0x3e513360u},
      {"b/.ATTRIBUTES/VARIABLE_VALUE", 1, 0},
      {"optimizer/decay/.ATTRIBUTES/VARIABLE_VALUE", 0, 0},
      {"optimizer/learning_rate/.ATTRIBUTES/VARIABLE_VALUE", 0, 0x3f000000u},
      {"optimizer/momentum/.ATTRIBUTES/VARIABLE_VALUE", 0, 0}};
  for (int i = 0; i < 5; i++) {
    assert_int_equal(est_ckpt_reader_read(r, want[i].name, &t), EST_OK);
    assert_int_equal(t.dtype, EST_DT_FLOAT);
    assert_int_equal(t.rank, want[i].rank);
    if (want[i].rank) assert_int_equal(t.dims[0], 1);
    uint32_t bits;
    memcpy(&bits, t.data, 4);
    assert_int_equal(bits, want[i].bits);
    est_tensor_free(&t);
  }
  est_ckpt_reader_close(r);

  size_t n;
  uint8_t *idx = hex(VEC_B_INDEX, &n);
  est_sstable table;
  assert_int_equal(est_sstable_parse(&table, idx, n, "b.index"), EST_OK);
  est_sstable_builder b;
  est_sstable_builder_init(&b, 0);
  for (size_t i = 0; i < table.count; i++)
    assert_int_equal(est_sstable_builder_add(&b, table.keys[i], table.key_lens[i], table.values[i],
                                             table.value_lens[i]), EST_OK);
  uint8_t *out;
  size_t m;
  assert_int_equal(est_sstable_builder_finish(&b, &out, &m), EST_OK);
  assert_int_equal(m, n);
  assert_memory_equal(out, idx, n);
  free(out);
  est_sstable_free(&table);
  free(idx);
  test_remove_tree(dir);
}

/* (c): mini BERT-style checkpoint with adam slots and global_step. */
static void test_vector_c_write(void **state) {
  (void)state;
  char dir[256], prefix[300], p[400];
  test_make_tmpdir(dir, sizeof dir);
  path_of(prefix, sizeof prefix, dir, "model.ckpt-7");
  float we[4] = {1, 2, 3, 4}, zeros[4] = {0};
  int64_t step = 7, d22[2] = {2, 2};
  const char *names[4] = {"global_step", "bert/embeddings/word_embeddings/adam_v",
                          "bert/embeddings/word_embeddings", "bert/embeddings/word_embeddings/adam_m"};
  est_tensor ts[4] = {make(EST_DT_INT64, 0, NULL, &step), make(EST_DT_FLOAT, 2, d22, zeros),
                      make(EST_DT_FLOAT, 2, d22, we), make(EST_DT_FLOAT, 2, d22, zeros)};
  assert_int_equal(est_ckpt_save(prefix, 4, names, ts), EST_OK);
  snprintf(p, sizeof p, "%s.index", prefix);
  assert_file_hex(p, VEC_C_INDEX);
  snprintf(p, sizeof p, "%s.data-00000-of-00001", prefix);
  assert_file_hex(p, VEC_C_DATA);

  est_ckpt_reader *r;
  assert_int_equal(est_ckpt_reader_open(&r, prefix), EST_OK);
  est_dtype dt;
  int rank;
  int64_t dims[EST_MAX_RANK];
  assert_int_equal(est_ckpt_reader_info(r, "global_step", &dt, &rank, dims), EST_OK);
  assert_int_equal(dt, EST_DT_INT64);
  assert_int_equal(rank, 0);
  int64_t got_step;
  assert_int_equal(est_ckpt_reader_read_into(r, "global_step", EST_DT_INT64, &got_step, 8), EST_OK);
  assert_int_equal(got_step, 7);
  float got[4];
  assert_int_equal(est_ckpt_reader_read_into(r, "bert/embeddings/word_embeddings", EST_DT_FLOAT, got, 16),
                   EST_OK);
  assert_memory_equal(got, we, 16);
  assert_true(est_ckpt_reader_has(r, "bert/embeddings/word_embeddings/adam_v"));
  assert_false(est_ckpt_reader_has(r, "bert/embeddings/word_embeddings/adam"));
  est_ckpt_reader_close(r);
  test_remove_tree(dir);
}

/* (d): bfloat16, an empty float [0,3], half, int32 and a string tensor. */
static void test_vector_d_dtypes(void **state) {
  (void)state;
  char dir[256], prefix[300], p[400];
  test_make_tmpdir(dir, sizeof dir);
  path_of(prefix, sizeof prefix, dir, "sampler");
  uint16_t bf[2] = {0x3f80, 0xc000}, h[2] = {0x3c00, 0xc000};
  int32_t i3[3] = {1, -1, 2};
  est_bytes s[2] = {{2, (uint8_t *)"hi"}, {0, NULL}};
  int64_t d2[1] = {2}, d03[2] = {0, 3}, d3[1] = {3};
  const char *names[5] = {"s", "i", "h", "empty", "bf"};
  est_tensor ts[5] = {make(EST_DT_STRING, 1, d2, s), make(EST_DT_INT32, 1, d3, i3), make(EST_DT_HALF, 1, d2, h),
                      make(EST_DT_FLOAT, 2, d03, NULL), make(EST_DT_BFLOAT16, 1, d2, bf)};
  assert_int_equal(est_ckpt_save(prefix, 5, names, ts), EST_OK);
  snprintf(p, sizeof p, "%s.index", prefix);
  assert_file_hex(p, VEC_D_INDEX);
  snprintf(p, sizeof p, "%s.data-00000-of-00001", prefix);
  assert_file_hex(p, VEC_D_DATA);

  est_ckpt_reader *r;
  assert_int_equal(est_ckpt_reader_open(&r, prefix), EST_OK);
  est_tensor t;
  assert_int_equal(est_ckpt_reader_read(r, "s", &t), EST_OK);
  est_bytes *gs = t.data;
  assert_int_equal(gs[0].size, 2);
  assert_memory_equal(gs[0].data, "hi", 2);
  assert_int_equal(gs[1].size, 0);
  est_tensor_free(&t);
  assert_int_equal(est_ckpt_reader_read(r, "empty", &t), EST_OK);
  assert_int_equal(t.rank, 2);
  assert_int_equal(t.dims[0], 0);
  assert_int_equal(t.dims[1], 3);
  est_tensor_free(&t);
  float f[2];
  assert_int_equal(est_ckpt_reader_read_into(r, "h", EST_DT_FLOAT, f, sizeof f), EST_OK); /* widened */
  assert_true(f[0] == 1.0f && f[1] == -2.0f);
  assert_int_equal(est_ckpt_reader_read_into(r, "bf", EST_DT_FLOAT, f, sizeof f), EST_OK);
  assert_true(f[0] == 1.0f && f[1] == -2.0f);
  assert_int_equal(est_ckpt_reader_read_into(r, "s", EST_DT_STRING, f, sizeof f), EST_ERR_FAILED_PRECONDITION);
  est_ckpt_reader_close(r);
  test_remove_tree(dir);
}

/* (e): no tensors: only the header, and an empty data file. */
static void test_vector_e_header_only(void **state) {
  (void)state;
  char dir[256], prefix[300], p[400];
  test_make_tmpdir(dir, sizeof dir);
  path_of(prefix, sizeof prefix, dir, "empty");
  assert_int_equal(est_ckpt_save(prefix, 0, NULL, NULL), EST_OK);
  snprintf(p, sizeof p, "%s.index", prefix);
  assert_file_hex(p, VEC_E_INDEX);
  snprintf(p, sizeof p, "%s.data-00000-of-00001", prefix);
  assert_file_hex(p, "");
  est_ckpt_reader *r;
  assert_int_equal(est_ckpt_reader_open(&r, prefix), EST_OK);
  assert_int_equal(est_ckpt_reader_count(r), 0);
  assert_int_equal(est_ckpt_reader_num_shards(r), 1);
  est_ckpt_reader_close(r);
  test_remove_tree(dir);
}

/* ---- real TF-written files ------------------------------------------------------------ */

static void test_half_plus_two_tf1_snappy(void **state) {
  (void)state;
  est_ckpt_reader *r;
  assert_int_equal(est_ckpt_reader_open(&r, EST_TEST_DATA "/half_plus_two_tf1/variables"), EST_OK);
  const char *names[5] = {"a", "a2", "b", "c", "c2"};
  const float want[5] = {0.5f, 0.5f, 2.0f, 3.0f, 3.0f};
  assert_int_equal(est_ckpt_reader_count(r), 5);
  for (int i = 0; i < 5; i++) {
    assert_string_equal(est_ckpt_reader_name(r, (size_t)i), names[i]);
    est_tensor t;
    assert_int_equal(est_ckpt_reader_read(r, names[i], &t), EST_OK);
    assert_int_equal(t.dtype, EST_DT_FLOAT);
    assert_int_equal(t.rank, 0);
    assert_true(*(float *)t.data == want[i]);
    est_tensor_free(&t);
  }
  est_ckpt_reader_close(r);
}

static void test_half_plus_two_tf2_string(void **state) {
  (void)state;
  est_ckpt_reader *r;
  assert_int_equal(est_ckpt_reader_open(&r, EST_TEST_DATA "/half_plus_two_tf2/variables"), EST_OK);
  assert_int_equal(est_ckpt_reader_count(r), 4);
  assert_string_equal(est_ckpt_reader_name(r, 0), "_CHECKPOINTABLE_OBJECT_GRAPH");
  float v;
  assert_int_equal(est_ckpt_reader_read_into(r, "a/.ATTRIBUTES/VARIABLE_VALUE", EST_DT_FLOAT, &v, 4), EST_OK);
  assert_true(v == 0.5f);
  assert_int_equal(est_ckpt_reader_read_into(r, "b/.ATTRIBUTES/VARIABLE_VALUE", EST_DT_FLOAT, &v, 4), EST_OK);
  assert_true(v == 2.0f);
  assert_int_equal(est_ckpt_reader_read_into(r, "c/.ATTRIBUTES/VARIABLE_VALUE", EST_DT_FLOAT, &v, 4), EST_OK);
  assert_true(v == 3.0f);
  est_tensor t;
  assert_int_equal(est_ckpt_reader_read(r, "_CHECKPOINTABLE_OBJECT_GRAPH", &t), EST_OK);
  assert_int_equal(t.dtype, EST_DT_STRING);
  /* 619 entry bytes = varint length (2 bytes) + 4-byte length checksum + 613 bytes. */
  assert_int_equal(((est_bytes *)t.data)[0].size, 613);
  est_tensor_free(&t);
  est_ckpt_reader_close(r);
}

static void test_keras_bert_tiny(void **state) {
  (void)state;
  est_ckpt_reader *r;
  assert_int_equal(est_ckpt_reader_open(&r, EST_TEST_DATA "/keras_bert_tiny/bert_model.ckpt"), EST_OK);
  size_t n = est_ckpt_reader_count(r);
  assert_int_equal(n, 139);
  int adam_m = 0, adam_v = 0;
  int64_t total_bytes = 0;
  for (size_t i = 0; i < n; i++) {
    const char *name = est_ckpt_reader_name(r, i);
    if (i) assert_true(strcmp(est_ckpt_reader_name(r, i - 1), name) < 0);
    size_t len = strlen(name);
    adam_m += len > 7 && !strcmp(name + len - 7, "/adam_m");
    adam_v += len > 7 && !strcmp(name + len - 7, "/adam_v");
    est_tensor t;
    assert_int_equal(est_ckpt_reader_read(r, name, &t), EST_OK); /* every CRC checks */
    assert_int_equal(t.dtype, strcmp(name, "global_step") ? EST_DT_FLOAT : EST_DT_INT64);
    total_bytes += (int64_t)est_tensor_num_bytes(&t);
    est_tensor_free(&t);
  }
  assert_int_equal(adam_m, 46);
  assert_int_equal(adam_v, 46);
  assert_int_equal(total_bytes, 8420);
  est_dtype dt;
  int rank;
  int64_t dims[EST_MAX_RANK];
  assert_int_equal(est_ckpt_reader_info(r, "bert/embeddings/word_embeddings", &dt, &rank, dims), EST_OK);
  assert_int_equal(rank, 2);
  assert_int_equal(dims[0], 15); /* vocab_size */
  assert_int_equal(dims[1], 4);  /* hidden_size */
  assert_int_equal(est_ckpt_reader_info(r, "bert/encoder/layer_1/intermediate/dense/kernel", &dt, &rank, dims),
                   EST_OK);
  assert_int_equal(dims[0], 4);
  assert_int_equal(dims[1], 16);
  assert_int_equal(est_ckpt_reader_info(r, "global_step", &dt, &rank, dims), EST_OK);
  assert_int_equal(rank, 0);
  est_tensor t;
  assert_int_equal(est_ckpt_reader_read(r, "no/such/tensor", &t), EST_ERR_NOT_FOUND);
  assert_non_null(strstr(est_error_message(), "not found in checkpoint"));
  /* Restoring into a model of another shape is refused. */
  float small[3];
  assert_int_equal(est_ckpt_reader_read_into(r, "bert/embeddings/word_embeddings", EST_DT_FLOAT, small,
                                             sizeof small), EST_ERR_FAILED_PRECONDITION);
  est_ckpt_reader_close(r);
}

static void test_bert_tiny_index_only(void **state) {
  (void)state;
  est_ckpt_reader *r;
  assert_int_equal(est_ckpt_reader_open(&r, EST_TEST_DATA "/bert_tiny_index/bert_model.ckpt"), EST_OK);
  assert_int_equal(est_ckpt_reader_count(r), 46);
  est_dtype dt;
  int rank;
  int64_t dims[EST_MAX_RANK];
  for (size_t i = 0; i < 46; i++) {
    assert_int_equal(est_ckpt_reader_info(r, est_ckpt_reader_name(r, i), &dt, NULL, NULL), EST_OK);
    assert_int_equal(dt, EST_DT_FLOAT);
  }
  assert_int_equal(est_ckpt_reader_info(r, "bert/embeddings/word_embeddings", &dt, &rank, dims), EST_OK);
  assert_int_equal(rank, 2);
  assert_int_equal(dims[0], 30522);
  assert_int_equal(dims[1], 128);
  assert_false(est_ckpt_reader_has(r, "global_step"));
  /* The 17.7 MB data file is not in the repository: reading says which file is missing. */
  est_tensor t;
  assert_int_equal(est_ckpt_reader_read(r, "bert/pooler/dense/bias", &t), EST_ERR_NOT_FOUND);
  assert_non_null(strstr(est_error_message(), "bert_model.ckpt.data-00000-of-00001"));
  est_ckpt_reader_close(r);
}

static void test_mrpc_finetuned_index(void **state) {
  (void)state;
  est_ckpt_reader *r;
  assert_int_equal(est_ckpt_reader_open(&r, EST_TEST_DATA "/mrpc_bert_tiny_run/model.ckpt-343"), EST_OK);
  assert_int_equal(est_ckpt_reader_count(r), 124);
  est_dtype dt;
  int rank;
  int64_t dims[EST_MAX_RANK];
  assert_int_equal(est_ckpt_reader_info(r, "output_weights", &dt, &rank, dims), EST_OK);
  assert_int_equal(rank, 2);
  assert_int_equal(dims[0], 2);
  assert_int_equal(dims[1], 128);
  assert_int_equal(est_ckpt_reader_info(r, "output_bias/adam_v", &dt, &rank, dims), EST_OK);
  assert_int_equal(dims[0], 2);
  assert_int_equal(est_ckpt_reader_info(r, "global_step", &dt, &rank, dims), EST_OK);
  assert_int_equal(dt, EST_DT_INT64);
  assert_false(est_ckpt_reader_has(r, "cls/predictions/output_bias"));
  est_ckpt_reader_close(r);
}

/* ---- round trips ---------------------------------------------------------------------- */

static void test_round_trip_every_dtype(void **state) {
  (void)state;
  char dir[256], prefix[300];
  test_make_tmpdir(dir, sizeof dir);
  path_of(prefix, sizeof prefix, dir, "sub/dir/rt"); /* the writer creates directories */
  static const est_dtype dts[] = {EST_DT_FLOAT, EST_DT_DOUBLE, EST_DT_INT32, EST_DT_UINT8, EST_DT_INT16,
                                  EST_DT_INT8, EST_DT_INT64, EST_DT_BOOL, EST_DT_BFLOAT16, EST_DT_UINT16,
                                  EST_DT_HALF, EST_DT_UINT32, EST_DT_UINT64};
  enum { ND = sizeof dts / sizeof dts[0] };
  est_tensor ts[ND + 3];
  char names[ND + 3][32];
  const char *np[ND + 3];
  int64_t dims[3] = {2, 3, 5};
  for (int i = 0; i < ND; i++) {
    assert_int_equal(est_tensor_alloc(&ts[i], dts[i], 3, dims), EST_OK);
    uint8_t *b = ts[i].data;
    for (size_t k = 0; k < est_tensor_num_bytes(&ts[i]); k++) b[k] = (uint8_t)(k * 37 + (size_t)i);
    if (dts[i] == EST_DT_BOOL)
      for (size_t k = 0; k < 30; k++) b[k] &= 1;
    snprintf(names[i], sizeof names[i], "t/%s", est_dtype_name(dts[i]));
    np[i] = names[i];
  }
  /* A rank-8 tensor, a scalar string, and a string vector with binary and empty values. */
  int64_t d8[8] = {1, 2, 1, 2, 1, 2, 1, 2};
  assert_int_equal(est_tensor_alloc(&ts[ND], EST_DT_INT32, 8, d8), EST_OK);
  for (int k = 0; k < 16; k++) ((int32_t *)ts[ND].data)[k] = -k;
  assert_int_equal(est_tensor_alloc(&ts[ND + 1], EST_DT_STRING, 0, NULL), EST_OK);
  est_bytes *s0 = ts[ND + 1].data;
  s0[0].data = (uint8_t *)strdup("hello");
  s0[0].size = 5;
  int64_t d4[1] = {4};
  assert_int_equal(est_tensor_alloc(&ts[ND + 2], EST_DT_STRING, 1, d4), EST_OK);
  est_bytes *s1 = ts[ND + 2].data;
  s1[0].data = (uint8_t *)strdup("hello");
  s1[0].size = 5;
  s1[2].data = malloc(300);
  s1[2].size = 300; /* a length that needs a 2-byte varint */
  for (int k = 0; k < 300; k++) s1[2].data[k] = (uint8_t)k;
  s1[3].data = (uint8_t *)strdup("x\x01\xff");
  s1[3].size = 3;
  np[ND] = "rank8";
  np[ND + 1] = "scalar_string";
  np[ND + 2] = "strings";
  assert_int_equal(est_ckpt_save(prefix, ND + 3, np, ts), EST_OK);

  est_ckpt_reader *r;
  assert_int_equal(est_ckpt_reader_open(&r, prefix), EST_OK);
  assert_int_equal(est_ckpt_reader_count(r), ND + 3);
  for (int i = 0; i < ND + 3; i++) {
    est_tensor t;
    assert_int_equal(est_ckpt_reader_read(r, np[i], &t), EST_OK);
    assert_int_equal(t.dtype, ts[i].dtype);
    assert_int_equal(t.rank, ts[i].rank);
    for (int k = 0; k < t.rank; k++) assert_int_equal(t.dims[k], ts[i].dims[k]);
    if (t.dtype == EST_DT_STRING) {
      for (int64_t k = 0; k < est_tensor_num_elements(&t); k++) {
        est_bytes *a = &((est_bytes *)t.data)[k], *b = &((est_bytes *)ts[i].data)[k];
        assert_int_equal(a->size, b->size);
        if (a->size) assert_memory_equal(a->data, b->data, a->size);
      }
    } else {
      assert_memory_equal(t.data, ts[i].data, est_tensor_num_bytes(&t));
      /* read_into gives the same bytes without allocating. */
      uint8_t buf[512];
      assert_int_equal(est_ckpt_reader_read_into(r, np[i], t.dtype, buf, est_tensor_num_bytes(&t)), EST_OK);
      assert_memory_equal(buf, ts[i].data, est_tensor_num_bytes(&t));
    }
    est_tensor_free(&t);
  }
  int32_t wrong[16];
  assert_int_equal(est_ckpt_reader_read_into(r, "rank8", EST_DT_FLOAT, wrong, sizeof wrong),
                   EST_ERR_FAILED_PRECONDITION);
  est_ckpt_reader_close(r);
  for (int i = 0; i < ND + 3; i++) est_tensor_free(&ts[i]);
  test_remove_tree(dir);
}

/* tensor_bundle_test StringTensors' empty ones: a scalar "" and a [0] string tensor. Each
 * is its varint lengths (none for [0]), the masked length checksum, no bytes. */
static void test_empty_string_tensors(void **state) {
  (void)state;
  char dir[256], prefix[300], p[400];
  test_make_tmpdir(dir, sizeof dir);
  path_of(prefix, sizeof prefix, dir, "empty_strings");
  est_bytes empty = {0, NULL};
  int64_t d0[1] = {0};
  const char *names[2] = {"none", "scalar"};
  est_tensor ts[2] = {make(EST_DT_STRING, 1, d0, NULL), make(EST_DT_STRING, 0, NULL, &empty)};
  assert_int_equal(est_ckpt_save(prefix, 2, names, ts), EST_OK);
  /* [0]: mask(crc of no lengths) = mask(0); scalar "": varint 0, mask(crc32c of 4 zero bytes). */
  snprintf(p, sizeof p, "%s.data-00000-of-00001", prefix);
  assert_file_hex(p, "d8ea82a2" "00" "a67b113a");
  est_ckpt_reader *r;
  assert_int_equal(est_ckpt_reader_open(&r, prefix), EST_OK);
  est_tensor t;
  assert_int_equal(est_ckpt_reader_read(r, "none", &t), EST_OK);
  assert_int_equal(t.dtype, EST_DT_STRING);
  assert_int_equal(t.rank, 1);
  assert_int_equal(t.dims[0], 0);
  est_tensor_free(&t);
  assert_int_equal(est_ckpt_reader_read(r, "scalar", &t), EST_OK);
  assert_int_equal(t.dtype, EST_DT_STRING);
  assert_int_equal(t.rank, 0);
  assert_int_equal(((est_bytes *)t.data)[0].size, 0);
  est_tensor_free(&t);
  est_ckpt_reader_close(r);
  test_remove_tree(dir);
}

/* tensor_bundle_test StringTensors: ["hello", "", "\x01", 32 MiB of 'c'] between floats. */
static void test_big_string(void **state) {
  (void)state;
  char dir[256], prefix[300];
  test_make_tmpdir(dir, sizeof dir);
  path_of(prefix, sizeof prefix, dir, "strings");
  size_t big = 32u << 20;
  uint8_t *c = malloc(big);
  memset(c, 'c', big);
  est_bytes s[4] = {{5, (uint8_t *)"hello"}, {0, NULL}, {1, (uint8_t *)"\x01"}, {big, c}};
  float f[2] = {1.5f, -1};
  const char *names[3] = {"a_float", "b_strings", "c_float"};
  est_tensor ts[3] = {{EST_DT_FLOAT, 1, {2}, f}, {EST_DT_STRING, 1, {4}, s}, {EST_DT_FLOAT, 1, {2}, f}};
  assert_int_equal(est_ckpt_save(prefix, 3, names, ts), EST_OK);
  est_ckpt_reader *r;
  assert_int_equal(est_ckpt_reader_open(&r, prefix), EST_OK);
  est_tensor t;
  assert_int_equal(est_ckpt_reader_read(r, "b_strings", &t), EST_OK);
  est_bytes *g = t.data;
  assert_int_equal(g[0].size, 5);
  assert_int_equal(g[1].size, 0);
  assert_int_equal(g[2].size, 1);
  assert_int_equal(g[2].data[0], 1);
  assert_int_equal(g[3].size, big);
  assert_memory_equal(g[3].data, c, big);
  est_tensor_free(&t);
  float got[2];
  assert_int_equal(est_ckpt_reader_read_into(r, "c_float", EST_DT_FLOAT, got, sizeof got), EST_OK);
  assert_memory_equal(got, f, sizeof f);
  est_ckpt_reader_close(r);
  free(c);
  test_remove_tree(dir);
}

/* tensor_bundle_test StringTensors, the 2^32-byte string: a length above UINT32_MAX
 * enters the length checksum as 8 little-endian bytes, not 4 (formats.md 3.5). Decoded
 * from a hand-made entry ["abc", <len bytes>], so nothing of that size is allocated: with
 * the right checksum the lengths are accepted (and the missing bytes found); with the
 * other width they are not. (The "abc" before it keeps the CRC register away from its
 * initial state, where crc32c(ff ff ff ff) == crc32c(ff ff ff ff 00 00 00 00).) */
static void test_string_length_checksum_64bit(void **state) {
  (void)state;
  const uint64_t lens[3] = {0xffffffffull, 0x100000000ull, (1ull << 40) + 5};
  for (int i = 0; i < 3; i++) {
    uint64_t len = lens[i];
    uint8_t buf[32], le[8];
    uint8_t *p = est_pw_encode_varint(buf, 3);
    p = est_pw_encode_varint(p, len);
    est_pw_encode_fixed64(le, 3);
    uint32_t first = est_crc32c(le, 4);
    est_pw_encode_fixed64(le, len);
    size_t width = len > 0xffffffffu ? 8 : 4;
    uint32_t right = est_crc32c_extend(first, le, width), wrong = est_crc32c_extend(first, le, 12 - width);
    assert_int_not_equal(right, wrong);
    for (int k = 0; k < 2; k++) {
      est_pw_encode_fixed32(p, est_crc32c_mask(k ? wrong : right));
      memcpy(p + 4, "abchello", 8);
      est_bundle_entry e = {.name = "big", .dtype = EST_DT_STRING, .rank = 1, .dims = {2}, .num_elements = 2,
                            .size = (uint64_t)(p + 12 - buf)};
      est_tensor t;
      assert_int_equal(est_bundle_decode_strings(&e, buf, &t, "hand"), EST_ERR_DATA_LOSS);
      const char *msg = est_error_message();
      char want[128];
      if (k) snprintf(want, sizeof want, "hand: The length checksum does not match for 'big'");
      else snprintf(want, sizeof want, "hand: string 1 of 'big' (%llu bytes) runs past", (unsigned long long)len);
      if (!strstr(msg, want)) fail_msg("length %llu: '%s' lacks '%s'", (unsigned long long)len, msg, want);
    }
  }
}

/* ---- hand-made bundles: endianness, shards, versions, bad entries ---------------------- */

/* Writes <prefix>.index from a raw header and raw entries (already sorted). */
static void write_index(const char *prefix, const uint8_t *hdr, size_t hdr_len, int n, const char **names,
                        est_pw_buf *entries) {
  est_sstable_builder b;
  est_sstable_builder_init(&b, 0);
  assert_int_equal(est_sstable_builder_add(&b, "", 0, hdr, hdr_len), EST_OK);
  for (int i = 0; i < n; i++)
    assert_int_equal(est_sstable_builder_add(&b, names[i], strlen(names[i]), entries[i].data, entries[i].size),
                     EST_OK);
  uint8_t *out;
  size_t size;
  assert_int_equal(est_sstable_builder_finish(&b, &out, &size), EST_OK);
  char p[400];
  snprintf(p, sizeof p, "%s.index", prefix);
  assert_int_equal(est_write_file_atomic(p, out, size), EST_OK);
  free(out);
}

static void test_big_endian_bundle(void **state) {
  (void)state;
  char dir[256], prefix[300], p[400];
  test_make_tmpdir(dir, sizeof dir);
  path_of(prefix, sizeof prefix, dir, "be");
  /* float [2] = {1.5, -2} and int16 [1] = 0x0102 stored big-endian; the CRC covers the
   * big-endian bytes. Header: num_shards 1, endianness BIG, version {producer 1}. */
  static const uint8_t hdr[] = {0x08, 0x01, 0x10, 0x01, 0x1a, 0x02, 0x08, 0x01};
  uint8_t data[10] = {0x3f, 0xc0, 0, 0, 0xc0, 0x00, 0, 0, 0x01, 0x02};
  est_pw_buf e[2];
  int64_t d2 = 2, d1 = 1;
  est_pw_buf_init(&e[0]);
  est_pw_buf_init(&e[1]);
  est_bundle_encode_entry(&e[0], EST_DT_FLOAT, 1, &d2, 0, 0, 8, est_crc32c_mask(est_crc32c(data, 8)));
  est_bundle_encode_entry(&e[1], EST_DT_INT16, 1, &d1, 0, 8, 2, est_crc32c_mask(est_crc32c(data + 8, 2)));
  const char *names[2] = {"f", "s"};
  write_index(prefix, hdr, sizeof hdr, 2, names, e);
  snprintf(p, sizeof p, "%s.data-00000-of-00001", prefix);
  assert_int_equal(est_write_file_atomic(p, data, sizeof data), EST_OK);
  est_ckpt_reader *r;
  assert_int_equal(est_ckpt_reader_open(&r, prefix), EST_OK);
  float f[2];
  assert_int_equal(est_ckpt_reader_read_into(r, "f", EST_DT_FLOAT, f, sizeof f), EST_OK);
  assert_true(f[0] == 1.5f && f[1] == -2.0f);
  est_tensor t;
  assert_int_equal(est_ckpt_reader_read(r, "s", &t), EST_OK);
  assert_int_equal(*(int16_t *)t.data, 0x0102);
  est_tensor_free(&t);
  est_ckpt_reader_close(r);
  est_pw_buf_free(&e[0]);
  est_pw_buf_free(&e[1]);
  test_remove_tree(dir);
}

static void test_two_shards_any_order(void **state) {
  (void)state;
  char dir[256], prefix[300], p[400];
  test_make_tmpdir(dir, sizeof dir);
  path_of(prefix, sizeof prefix, dir, "merged");
  static const uint8_t hdr[] = {0x08, 0x02, 0x1a, 0x02, 0x08, 0x01};
  int32_t x = 42, y[2] = {7, 8};
  uint8_t shard0[12] = {0xee, 0xee, 0xee, 0xee};
  memcpy(shard0 + 4, y, 8);
  est_pw_buf e[2];
  int64_t d1 = 1, d2 = 2;
  est_pw_buf_init(&e[0]);
  est_pw_buf_init(&e[1]);
  est_bundle_encode_entry(&e[0], EST_DT_INT32, 1, &d1, 1, 0, 4, est_crc32c_mask(est_crc32c(&x, 4)));
  est_bundle_encode_entry(&e[1], EST_DT_INT32, 1, &d2, 0, 4, 8, est_crc32c_mask(est_crc32c(y, 8)));
  const char *names[2] = {"x", "y"};
  write_index(prefix, hdr, sizeof hdr, 2, names, e);
  snprintf(p, sizeof p, "%s.data-00000-of-00002", prefix);
  assert_int_equal(est_write_file_atomic(p, shard0, sizeof shard0), EST_OK);
  snprintf(p, sizeof p, "%s.data-00001-of-00002", prefix);
  assert_int_equal(est_write_file_atomic(p, &x, 4), EST_OK);
  est_ckpt_reader *r;
  assert_int_equal(est_ckpt_reader_open(&r, prefix), EST_OK);
  assert_int_equal(est_ckpt_reader_num_shards(r), 2);
  int32_t gx, gy[2];
  assert_int_equal(est_ckpt_reader_read_into(r, "x", EST_DT_INT32, &gx, 4), EST_OK);
  assert_int_equal(gx, 42);
  assert_int_equal(est_ckpt_reader_read_into(r, "y", EST_DT_INT32, gy, 8), EST_OK);
  assert_int_equal(gy[0], 7);
  assert_int_equal(gy[1], 8);
  est_ckpt_reader_close(r);
  /* est_ckpt_remove deletes every shard. */
  assert_int_equal(est_ckpt_remove(prefix), EST_OK);
  assert_false(est_file_exists(p));
  snprintf(p, sizeof p, "%s.index", prefix);
  assert_false(est_file_exists(p));
  est_pw_buf_free(&e[0]);
  est_pw_buf_free(&e[1]);
  test_remove_tree(dir);
}

/* Opens a bundle whose header is `hdr` and expects `code` with `msg` in the message. */
static void expect_header_error(const uint8_t *hdr, size_t n, est_status code, const char *msg) {
  char dir[256], prefix[300];
  test_make_tmpdir(dir, sizeof dir);
  path_of(prefix, sizeof prefix, dir, "v");
  write_index(prefix, hdr, n, 0, NULL, NULL);
  est_ckpt_reader *r = NULL;
  assert_int_equal(est_ckpt_reader_open(&r, prefix), code);
  assert_null(r);
  if (!strstr(est_error_message(), msg)) fail_msg("message '%s' lacks '%s'", est_error_message(), msg);
  test_remove_tree(dir);
}

static void test_header_versions(void **state) {
  (void)state;
  static const uint8_t min_consumer2[] = {0x08, 0x01, 0x1a, 0x04, 0x08, 0x01, 0x10, 0x02};
  expect_header_error(min_consumer2, sizeof min_consumer2, EST_ERR_INVALID_ARGUMENT,
                      "Checkpoint min consumer version 2 above current version 1");
  /* producer -1: a 10-byte varint. */
  static const uint8_t producer_neg[] = {0x08, 0x01, 0x1a, 0x0b, 0x08, 0xff, 0xff, 0xff, 0xff,
                                         0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
  expect_header_error(producer_neg, sizeof producer_neg, EST_ERR_INVALID_ARGUMENT,
                      "Checkpoint producer version -1 below min producer 0");
  static const uint8_t bad_consumer[] = {0x08, 0x01, 0x1a, 0x04, 0x08, 0x01, 0x18, 0x01};
  expect_header_error(bad_consumer, sizeof bad_consumer, EST_ERR_INVALID_ARGUMENT,
                      "Checkpoint disallows consumer version 1");
  static const uint8_t garbage[] = {0x0a, 0x05, 0x01};
  expect_header_error(garbage, sizeof garbage, EST_ERR_DATA_LOSS, "corrupted checkpoint header");
  /* No header entry at all (an index whose first key is not ""): a corrupt file. */
  {
    char hdir[256], hprefix[300], p[400];
    test_make_tmpdir(hdir, sizeof hdir);
    path_of(hprefix, sizeof hprefix, hdir, "noheader");
    est_pw_buf e;
    est_pw_buf_init(&e);
    int64_t d1 = 1;
    est_bundle_encode_entry(&e, EST_DT_FLOAT, 1, &d1, 0, 0, 4, est_crc32c_mask(est_crc32c("\0\0\0\0", 4)));
    est_sstable_builder b;
    est_sstable_builder_init(&b, 0);
    assert_int_equal(est_sstable_builder_add(&b, "x", 1, e.data, e.size), EST_OK);
    uint8_t *out;
    size_t size;
    assert_int_equal(est_sstable_builder_finish(&b, &out, &size), EST_OK);
    snprintf(p, sizeof p, "%s.index", hprefix);
    assert_int_equal(est_write_file_atomic(p, out, size), EST_OK);
    free(out);
    est_ckpt_reader *r = NULL;
    assert_int_equal(est_ckpt_reader_open(&r, hprefix), EST_ERR_DATA_LOSS);
    assert_null(r);
    assert_non_null(strstr(est_error_message(), "no header entry"));
    assert_non_null(strstr(est_error_message(), p));
    est_pw_buf_free(&e);
    test_remove_tree(hdir);
  }
  /* A header with num_shards 0 followed by an entry: the shard is out of range. */
  char dir[256], prefix[300];
  test_make_tmpdir(dir, sizeof dir);
  path_of(prefix, sizeof prefix, dir, "v");
  static const uint8_t no_shards[] = {0x1a, 0x02, 0x08, 0x01};
  est_pw_buf e;
  est_pw_buf_init(&e);
  int64_t d1 = 1;
  est_bundle_encode_entry(&e, EST_DT_FLOAT, 1, &d1, 0, 0, 4, 1);
  const char *names[1] = {"x"};
  write_index(prefix, no_shards, sizeof no_shards, 1, names, &e);
  est_ckpt_reader *r;
  assert_int_equal(est_ckpt_reader_open(&r, prefix), EST_ERR_DATA_LOSS);
  assert_non_null(strstr(est_error_message(), "shard 0 of 0"));
  est_pw_buf_free(&e);
  test_remove_tree(dir);
}

/* One entry with a bad shape or size must stop the open with a message naming it. */
static void expect_entry_error(int dtype, int rank, const int64_t *dims, uint64_t size, const char *msg) {
  char dir[256], prefix[300];
  test_make_tmpdir(dir, sizeof dir);
  path_of(prefix, sizeof prefix, dir, "e");
  static const uint8_t hdr[] = {0x08, 0x01, 0x1a, 0x02, 0x08, 0x01};
  est_pw_buf e;
  est_pw_buf_init(&e);
  est_bundle_encode_entry(&e, dtype, rank, dims, 0, 0, size, 1);
  const char *names[1] = {"bad"};
  write_index(prefix, hdr, sizeof hdr, 1, names, &e);
  est_ckpt_reader *r;
  assert_int_equal(est_ckpt_reader_open(&r, prefix), EST_ERR_DATA_LOSS);
  if (!strstr(est_error_message(), msg)) fail_msg("message '%s' lacks '%s'", est_error_message(), msg);
  est_pw_buf_free(&e);
  test_remove_tree(dir);
}

static void test_bad_entries(void **state) {
  (void)state;
  int64_t neg[2] = {2, -1};
  expect_entry_error(EST_DT_FLOAT, 2, neg, 8, "Invalid tensor shape");
  int64_t huge[2] = {INT64_MAX / 2, 3};
  expect_entry_error(EST_DT_FLOAT, 2, huge, 8, "Invalid tensor shape");
  int64_t d3[1] = {3};
  expect_entry_error(EST_DT_FLOAT, 1, d3, 8, "Invalid size in bundle entry");
  expect_entry_error(EST_DT_STRING, 1, d3, 5, "Invalid size in bundle entry");
  expect_entry_error(0, 1, d3, 12, "invalid dtype");
}

/* Entries est lists but does not read: complex64 (TF dtype 8), a partitioned variable
 * (slices, field 7) and a DT_VARIANT scalar (21); plus a [16,0,18] empty tensor. */
static void test_unreadable_entries(void **state) {
  (void)state;
  char dir[256], prefix[300], p[400];
  test_make_tmpdir(dir, sizeof dir);
  path_of(prefix, sizeof prefix, dir, "odd");
  static const uint8_t hdr[] = {0x08, 0x01, 0x1a, 0x02, 0x08, 0x01};
  uint8_t c64[16] = {0};
  int64_t d2 = 2, d510[2] = {5, 10}, d16018[3] = {16, 0, 18};
  est_pw_buf e[4];
  for (int i = 0; i < 4; i++) est_pw_buf_init(&e[i]);
  est_bundle_encode_entry(&e[0], 8, 1, &d2, 0, 0, 16, est_crc32c_mask(est_crc32c(c64, 16)));
  est_bundle_encode_entry(&e[1], EST_DT_FLOAT, 3, d16018, 0, 16, 0, est_crc32c_mask(0));
  /* Full-tensor entry of a partitioned [5,10] variable: dtype, shape, one slice, no data. */
  est_pw_put_varint_field(&e[2], 1, EST_DT_FLOAT);
  size_t m = est_pw_begin_sub(&e[2], 2);
  for (int i = 0; i < 2; i++) {
    size_t dm = est_pw_begin_sub(&e[2], 2);
    est_pw_put_varint_field(&e[2], 1, (uint64_t)d510[i]);
    est_pw_end_sub(&e[2], dm);
  }
  est_pw_end_sub(&e[2], m);
  size_t sm = est_pw_begin_sub(&e[2], 7);
  est_pw_end_sub(&e[2], sm);
  est_bundle_encode_entry(&e[3], 21, 0, NULL, 0, 16, 0, 0);
  const char *names[4] = {"complex", "empty3", "part", "variant"};
  write_index(prefix, hdr, sizeof hdr, 4, names, e);
  snprintf(p, sizeof p, "%s.data-00000-of-00001", prefix);
  assert_int_equal(est_write_file_atomic(p, c64, sizeof c64), EST_OK);
  est_ckpt_reader *r;
  assert_int_equal(est_ckpt_reader_open(&r, prefix), EST_OK);
  assert_int_equal(est_ckpt_reader_count(r), 4);
  est_dtype dt;
  int rank;
  int64_t dims[EST_MAX_RANK];
  assert_int_equal(est_ckpt_reader_info(r, "complex", &dt, &rank, dims), EST_OK);
  assert_int_equal((int)dt, 8);
  est_tensor t;
  assert_int_equal(est_ckpt_reader_read(r, "complex", &t), EST_ERR_UNIMPLEMENTED);
  assert_int_equal(est_ckpt_reader_read(r, "part", &t), EST_ERR_UNIMPLEMENTED);
  assert_non_null(strstr(est_error_message(), "partitioned"));
  assert_int_equal(est_ckpt_reader_info(r, "variant", &dt, &rank, dims), EST_OK);
  assert_int_equal((int)dt, 21);
  assert_int_equal(rank, 0);
  assert_int_equal(est_ckpt_reader_read(r, "variant", &t), EST_ERR_UNIMPLEMENTED);
  assert_non_null(strstr(est_error_message(), "'variant' has TF dtype 21"));
  assert_int_equal(est_ckpt_reader_read(r, "empty3", &t), EST_OK);
  assert_int_equal(t.rank, 3);
  assert_int_equal(t.dims[2], 18);
  assert_int_equal(est_tensor_num_elements(&t), 0);
  est_tensor_free(&t);
  est_ckpt_reader_close(r);
  for (int i = 0; i < 4; i++) est_pw_buf_free(&e[i]);
  test_remove_tree(dir);
}

/* ---- errors on reading and writing -------------------------------------------------- */

static void test_errors(void **state) {
  (void)state;
  char dir[256], prefix[300], p[400];
  test_make_tmpdir(dir, sizeof dir);
  path_of(prefix, sizeof prefix, dir, "x");
  est_ckpt_reader *r;
  assert_int_equal(est_ckpt_reader_open(&r, prefix), EST_ERR_NOT_FOUND);

  est_ckpt_writer *w;
  float v[4] = {1, 2, 3, 4};
  int64_t d4[1] = {4};
  est_tensor t = make(EST_DT_FLOAT, 1, d4, v);
  assert_int_equal(est_ckpt_writer_open(&w, prefix), EST_OK);
  assert_int_equal(est_ckpt_writer_add(w, "v", &t), EST_OK);
  assert_int_equal(est_ckpt_writer_add(w, "v", &t), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "Adding duplicate key"));
  assert_int_equal(est_ckpt_writer_add(w, "", &t), EST_ERR_INVALID_ARGUMENT);
  est_bytes strs[1] = {{3, (uint8_t *)"abc"}};
  int64_t d1[1] = {1};
  est_tensor st = make(EST_DT_STRING, 1, d1, strs);
  assert_int_equal(est_ckpt_writer_add(w, "w", &st), EST_OK);
  assert_int_equal(est_ckpt_writer_finish(w), EST_OK);
  /* Writing left no temporary files behind. */
  char *out;
  test_run(&out, 0, "ls '%s' | grep -c tmp", dir);
  assert_string_equal(out, "0\n");
  free(out);

  /* Flip a data byte of "v": checksum error; of the string length: length checksum. */
  snprintf(p, sizeof p, "%s.data-00000-of-00001", prefix);
  uint8_t *data;
  size_t n;
  assert_int_equal(est_read_file(p, &data, &n), EST_OK);
  assert_int_equal(n, 16 + 1 + 4 + 3);
  data[5] ^= 1;
  data[16] ^= 1; /* the varint length of the string */
  assert_int_equal(est_write_file_atomic(p, data, n), EST_OK);
  assert_int_equal(est_ckpt_reader_open(&r, prefix), EST_OK);
  est_tensor got;
  assert_int_equal(est_ckpt_reader_read(r, "v", &got), EST_ERR_DATA_LOSS);
  assert_non_null(strstr(est_error_message(), "Checksum does not match"));
  assert_null(got.data);
  assert_int_equal(est_ckpt_reader_read(r, "w", &got), EST_ERR_DATA_LOSS);
  assert_non_null(strstr(est_error_message(), "length checksum does not match"));
  est_ckpt_reader_close(r);
  /* A string byte flipped: the entry checksum catches it. */
  data[5] ^= 1;
  data[16] ^= 1;
  data[22] ^= 0x20;
  assert_int_equal(est_write_file_atomic(p, data, n), EST_OK);
  assert_int_equal(est_ckpt_reader_open(&r, prefix), EST_OK);
  assert_int_equal(est_ckpt_reader_read(r, "w", &got), EST_ERR_DATA_LOSS);
  assert_non_null(strstr(est_error_message(), "Checksum does not match"));
  est_ckpt_reader_close(r);
  /* A data file missing its last byte: OUT_OF_RANGE on the tensor it cuts. */
  data[22] ^= 0x20;
  assert_int_equal(est_write_file_atomic(p, data, n - 1), EST_OK);
  assert_int_equal(est_ckpt_reader_open(&r, prefix), EST_OK);
  assert_int_equal(est_ckpt_reader_read(r, "v", &got), EST_OK);
  est_tensor_free(&got);
  assert_int_equal(est_ckpt_reader_read(r, "w", &got), EST_ERR_OUT_OF_RANGE);
  est_ckpt_reader_close(r);
  free(data);

  /* Index: short file, bad magic, block CRC. */
  snprintf(p, sizeof p, "%s.index", prefix);
  assert_int_equal(est_read_file(p, &data, &n), EST_OK);
  assert_int_equal(est_write_file_atomic(p, data, 40), EST_OK);
  assert_int_equal(est_ckpt_reader_open(&r, prefix), EST_ERR_DATA_LOSS);
  assert_non_null(strstr(est_error_message(), "too short to be an sstable"));
  data[n - 1] ^= 1;
  assert_int_equal(est_write_file_atomic(p, data, n), EST_OK);
  assert_int_equal(est_ckpt_reader_open(&r, prefix), EST_ERR_DATA_LOSS);
  assert_non_null(strstr(est_error_message(), "bad magic"));
  data[n - 1] ^= 1;
  data[12] ^= 1;
  assert_int_equal(est_write_file_atomic(p, data, n), EST_OK);
  assert_int_equal(est_ckpt_reader_open(&r, prefix), EST_ERR_DATA_LOSS);
  assert_non_null(strstr(est_error_message(), "block checksum mismatch"));
  free(data);
  test_remove_tree(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_vector_a_write),
    cmocka_unit_test(test_vector_b_read_and_rebuild),
    cmocka_unit_test(test_vector_c_write),
    cmocka_unit_test(test_vector_d_dtypes),
    cmocka_unit_test(test_vector_e_header_only),
    cmocka_unit_test(test_half_plus_two_tf1_snappy),
    cmocka_unit_test(test_half_plus_two_tf2_string),
    cmocka_unit_test(test_keras_bert_tiny),
    cmocka_unit_test(test_bert_tiny_index_only),
    cmocka_unit_test(test_mrpc_finetuned_index),
    cmocka_unit_test(test_round_trip_every_dtype),
    cmocka_unit_test(test_empty_string_tensors),
    cmocka_unit_test(test_big_string),
    cmocka_unit_test(test_string_length_checksum_64bit),
    cmocka_unit_test(test_big_endian_bundle),
    cmocka_unit_test(test_two_shards_any_order),
    cmocka_unit_test(test_header_versions),
    cmocka_unit_test(test_bad_entries),
    cmocka_unit_test(test_unreadable_entries),
    cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
