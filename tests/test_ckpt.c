/* TF checkpoints (tensor bundle): the byte-exact vectors of docs/checkpoint.md §9, real
 * TF-written files, round trips of every dtype, and the error cases of docs/checkpoint.md §10
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

/* Asserts that file `path` holds exactly the bytes of hex string `h`. */
static void assert_file_hex(const char *path, const char *h) {
  size_t n, m;
  uint8_t *want = test_unhex_alloc(h, &n), *got;
  assert_int_equal(est_read_file(path, &got, &m), EST_OK);
  assert_int_equal(m, n);
  for (size_t i = 0; i < n; i++)
    if (got[i] != want[i]) fail_msg("%s differs at byte %zu: %02x vs %02x", path, i, got[i], want[i]);
  free(want);
  free(got);
}

static void write_hex(const char *path, const char *h) {
  size_t n;
  uint8_t *b = test_unhex_alloc(h, &n);
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
  uint8_t *idx = test_unhex_alloc(VEC_B_INDEX, &n);
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
 * enters the length checksum as 8 little-endian bytes, not 4 (docs/checkpoint.md §5). Decoded
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

/* Entries est lists but does not read: complex64 (TF dtype 8) and a DT_VARIANT scalar
 * (21); plus a [16,0,18] empty tensor. (Partitioned variables are read: see below.) */
static void test_unreadable_entries(void **state) {
  (void)state;
  char dir[256], prefix[300], p[400];
  test_make_tmpdir(dir, sizeof dir);
  path_of(prefix, sizeof prefix, dir, "odd");
  static const uint8_t hdr[] = {0x08, 0x01, 0x1a, 0x02, 0x08, 0x01};
  uint8_t c64[16] = {0};
  int64_t d2 = 2, d16018[3] = {16, 0, 18};
  est_pw_buf e[3];
  for (int i = 0; i < 3; i++) est_pw_buf_init(&e[i]);
  est_bundle_encode_entry(&e[0], 8, 1, &d2, 0, 0, 16, est_crc32c_mask(est_crc32c(c64, 16)));
  est_bundle_encode_entry(&e[1], EST_DT_FLOAT, 3, d16018, 0, 16, 0, est_crc32c_mask(0));
  est_bundle_encode_entry(&e[2], 21, 0, NULL, 0, 16, 0, 0);
  const char *names[3] = {"complex", "empty3", "variant"};
  write_index(prefix, hdr, sizeof hdr, 3, names, e);
  snprintf(p, sizeof p, "%s.data-00000-of-00001", prefix);
  assert_int_equal(est_write_file_atomic(p, c64, sizeof c64), EST_OK);
  est_ckpt_reader *r;
  assert_int_equal(est_ckpt_reader_open(&r, prefix), EST_OK);
  assert_int_equal(est_ckpt_reader_count(r), 3);
  est_dtype dt;
  int rank;
  int64_t dims[EST_MAX_RANK];
  assert_int_equal(est_ckpt_reader_info(r, "complex", &dt, &rank, dims), EST_OK);
  assert_int_equal((int)dt, 8);
  est_tensor t;
  assert_int_equal(est_ckpt_reader_read(r, "complex", &t), EST_ERR_UNIMPLEMENTED);
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
  for (int i = 0; i < 3; i++) est_pw_buf_free(&e[i]);
  test_remove_tree(dir);
}

/* ---- partitioned variables (tensors saved as slices) ----------------------------------- */

/* A bundle built entry by entry, keys in any order: TF's BundleWriter::AddSlice output
 * reproduced by hand (the full-tensor entry, then each slice as an ordinary entry under
 * its ordered-code key), and variations on it that TF would not write. */
enum { PC_MAX = 16 };
typedef struct part_ckpt {
  est_pw_buf data; /* the single data shard */
  int n;
  est_pw_buf keys[PC_MAX], values[PC_MAX];
} part_ckpt;

static void pc_init(part_ckpt *pc) {
  memset(pc, 0, sizeof *pc);
  est_pw_buf_init(&pc->data);
}

/* The full-tensor entry: dtype, FULL shape, one TensorSliceProto per slice. */
static void pc_full(part_ckpt *pc, const char *name, int dtype, int rank, const int64_t *dims, int nslices,
                    const est_bundle_extent *ext) {
  assert_true(pc->n < PC_MAX);
  est_pw_buf_init(&pc->keys[pc->n]);
  est_pw_buf_init(&pc->values[pc->n]);
  est_pw_put_raw(&pc->keys[pc->n], name, strlen(name));
  assert_true(est_bundle_encode_entry(&pc->values[pc->n], dtype, rank, dims, 0, 0, 0, 0));
  assert_true(est_bundle_encode_slices(&pc->values[pc->n], rank, nslices, ext));
  pc->n++;
}

/* An ordinary entry under raw `key`: `bytes` appended to the data shard, with the masked
 * `crc`, or when NULL their own CRC. `swap` > 1 stores every swap-byte element reversed
 * (a big-endian bundle; the CRC covers the bytes as stored). */
static void pc_entry(part_ckpt *pc, const est_pw_buf *key, int dtype, int rank, const int64_t *dims,
                     const uint8_t *bytes, size_t n, size_t swap, const uint32_t *string_crc) {
  assert_true(pc->n < PC_MAX);
  uint64_t offset = pc->data.size;
  for (size_t i = 0; i < n; i++) {
    size_t at = swap > 1 ? i - i % swap + (swap - 1 - i % swap) : i;
    est_pw_put_raw(&pc->data, &bytes[at], 1);
  }
  uint32_t crc = string_crc ? *string_crc : est_crc32c(pc->data.data + offset, n);
  est_pw_buf_init(&pc->keys[pc->n]);
  est_pw_buf_init(&pc->values[pc->n]);
  est_pw_put_raw(&pc->keys[pc->n], key->data, key->size);
  assert_true(est_bundle_encode_entry(&pc->values[pc->n], dtype, rank, dims, 0, offset, n, est_crc32c_mask(crc)));
  pc->n++;
}

/* The data of slice `ext` of tensor `name` under its slice key: the elements of `full`
 * (row-major in shape `dims`, `esize` bytes each, or est_bytes for DT_STRING) that lie in
 * the slice, in the slice's row-major order. Picked element by element, the plain way. */
static void pc_slice(part_ckpt *pc, const char *name, int dtype, size_t esize, int rank, const int64_t *dims,
                     const void *full, const est_bundle_extent *ext, size_t swap) {
  int64_t total = 1, sdims[EST_MAX_RANK];
  for (int d = 0; d < rank; d++) {
    total *= dims[d];
    sdims[d] = ext[d].length == -1 ? dims[d] : ext[d].length;
  }
  size_t elem = dtype == EST_DT_STRING ? sizeof(est_bytes) : esize;
  uint8_t *picked = malloc((size_t)total * elem + 1);
  size_t m = 0;
  for (int64_t flat = 0; flat < total; flat++) {
    int64_t rest = flat;
    int inside = 1;
    for (int d = rank - 1; d >= 0; d--) {
      int64_t at = rest % dims[d];
      rest /= dims[d];
      if (ext[d].length != -1 && (at < ext[d].start || at >= ext[d].start + ext[d].length)) inside = 0;
    }
    if (inside) memcpy(picked + elem * m++, (const uint8_t *)full + elem * flat, elem);
  }
  est_pw_buf key;
  est_pw_buf_init(&key);
  assert_true(est_bundle_slice_key(&key, name, rank, ext));
  if (dtype == EST_DT_STRING) {
    est_pw_buf bytes;
    uint32_t crc;
    est_pw_buf_init(&bytes);
    assert_true(est_bundle_encode_strings(&bytes, (const est_bytes *)picked, (int64_t)m, &crc));
    pc_entry(pc, &key, dtype, rank, sdims, bytes.data, bytes.size, 1, &crc);
    est_pw_buf_free(&bytes);
  } else {
    pc_entry(pc, &key, dtype, rank, sdims, picked, m * esize, swap, NULL);
  }
  est_pw_buf_free(&key);
  free(picked);
}

static int bytes_cmp(const est_pw_buf *a, const est_pw_buf *b) {
  int c = memcmp(a->data, b->data, a->size < b->size ? a->size : b->size);
  return c ? c : (a->size > b->size) - (a->size < b->size);
}

/* Writes <prefix>.index (keys sorted bytewise, as TF's std::map orders them) and the
 * data shard, then frees pc. */
static void pc_write(part_ckpt *pc, const char *prefix, int big_endian) {
  static const uint8_t le[] = {0x08, 0x01, 0x1a, 0x02, 0x08, 0x01};
  static const uint8_t be[] = {0x08, 0x01, 0x10, 0x01, 0x1a, 0x02, 0x08, 0x01};
  int order[PC_MAX];
  for (int i = 0; i < pc->n; i++) {
    int j = i;
    while (j > 0 && bytes_cmp(&pc->keys[order[j - 1]], &pc->keys[i]) > 0) {
      order[j] = order[j - 1];
      j--;
    }
    order[j] = i;
  }
  est_sstable_builder b;
  est_sstable_builder_init(&b, 0);
  assert_int_equal(est_sstable_builder_add(&b, "", 0, big_endian ? be : le, big_endian ? sizeof be : sizeof le),
                   EST_OK);
  for (int i = 0; i < pc->n; i++) {
    const int k = order[i];
    assert_int_equal(est_sstable_builder_add(&b, pc->keys[k].data, pc->keys[k].size, pc->values[k].data,
                                             pc->values[k].size), EST_OK);
  }
  uint8_t *out;
  size_t size;
  assert_int_equal(est_sstable_builder_finish(&b, &out, &size), EST_OK);
  char p[400];
  snprintf(p, sizeof p, "%s.index", prefix);
  assert_int_equal(est_write_file_atomic(p, out, size), EST_OK);
  free(out);
  snprintf(p, sizeof p, "%s.data-00000-of-00001", prefix);
  assert_int_equal(est_write_file_atomic(p, pc->data.size ? pc->data.data : (const uint8_t *)"", pc->data.size),
                   EST_OK);
  for (int i = 0; i < pc->n; i++) {
    est_pw_buf_free(&pc->keys[i]);
    est_pw_buf_free(&pc->values[i]);
  }
  est_pw_buf_free(&pc->data);
}

static void assert_buf_hex(const est_pw_buf *b, const char *h) {
  size_t n;
  uint8_t *want = test_unhex_alloc(h, &n);
  if (b->size != n || memcmp(b->data, want, n)) {
    char got[512] = "";
    for (size_t i = 0; i < b->size && 2 * i + 2 < sizeof got; i++) sprintf(got + 2 * i, "%02x", b->data[i]);
    fail_msg("bytes %s, expected %s", got, h);
  }
  free(want);
}

/* Slice keys, checked against bytes derived by hand from ordered_code.cc's rules:
 *   WriteNumIncreasing(v): a length byte, then v big-endian without leading zero bytes
 *     (0 -> 00, 2 -> 01 02);
 *   WriteString(s): s with 00 -> 00 ff and ff -> ff 00, then the separator 00 01;
 *   WriteSignedNumIncreasing(v): for -64 <= v < 64 the single byte 0x80 ^ v (0 -> 80,
 *     1 -> 81, 9 -> 89, 10 -> 8a, -1 -> 7f); longer values below come from TF's own
 *     ordered_code_test.cc (EncodingIsExpected.Signed).
 * and EncodeTensorNameSlice = NumIncreasing(0) String(name) NumIncreasing(rank), then
 * SignedNumIncreasing(start) SignedNumIncreasing(length) per dimension, a whole
 * dimension being start 0, length -1 (saved_tensor_slice_util.cc, tensor_slice.cc). */
static void test_slice_keys(void **state) {
  (void)state;
  est_pw_buf b;
  est_pw_buf_init(&b);
  /* TF's PartitionedVariables test: "foo" [5,10] saved as "-:0,1" and "-:1,9".
   *   00                 NumIncreasing(0)
   *   66 6f 6f 00 01     String("foo")
   *   01 02              NumIncreasing(2), the rank
   *   80 7f              dimension 0 whole: start 0, length -1
   *   80 81 / 81 89      dimension 1: start 0, length 1 / start 1, length 9 */
  const est_bundle_extent s1[2] = {{0, -1}, {0, 1}}, s2[2] = {{0, -1}, {1, 9}};
  assert_true(est_bundle_slice_key(&b, "foo", 2, s1));
  assert_buf_hex(&b, "00666f6f00010102807f8081");
  b.size = 0;
  assert_true(est_bundle_slice_key(&b, "foo", 2, s2));
  assert_buf_hex(&b, "00666f6f00010102807f8189");
  /* EquivalentSliceTest's "0,5:0,10": explicit whole extents encode as written. */
  const est_bundle_extent both[2] = {{0, 5}, {0, 10}};
  b.size = 0;
  assert_true(est_bundle_slice_key(&b, "foo", 2, both));
  assert_buf_hex(&b, "00666f6f00010102808580" "8a");
  /* A 0xff byte in the name is escaped as ff 00; 64 and -65 take two bytes. */
  const est_bundle_extent odd[1] = {{64, -65}};
  b.size = 0;
  assert_true(est_bundle_slice_key(&b, "a\xff" "b", 1, odd));
  assert_buf_hex(&b, "0061ff00620001" "0101" "c040" "3fbf");
  /* Rank 0: NumIncreasing(0) is the single byte 00. */
  b.size = 0;
  assert_true(est_bundle_slice_key(&b, "s", 0, NULL));
  assert_buf_hex(&b, "0073000100");
  /* More of ordered_code_test.cc's signed vectors, each as a rank-1 slice's start (its
   * length 1 -> 81); the key's prefix for name "x" is 00 78 00 01 01 01. */
  struct { int64_t v; const char *hex; } sv[] = {
      {63, "bf"},
      {-64, "40"},
      {255, "c0ff"},
      {256, "c100"},
      {-4097, "2fff"},
      {-8193, "1fdfff"},
      {1048576, "f0100000"},
      {-1048577, "0fefffff"},
      {281474976710656LL, "ff01000000000000"},
      {36028797018963968LL, "ff8080000000000000"},
      {4611686018427387904LL, "ffc04000000000000000"},
      {INT64_MAX, "ffc07fffffffffffffff"},
      {-INT64_MAX, "003f8000000000000001"},
  };
  for (size_t i = 0; i < sizeof sv / sizeof *sv; i++) {
    const est_bundle_extent one[1] = {{sv[i].v, 1}};
    char want[64];
    snprintf(want, sizeof want, "007800010101%s81", sv[i].hex);
    b.size = 0;
    assert_true(est_bundle_slice_key(&b, "x", 1, one));
    assert_buf_hex(&b, want);
  }
  est_pw_buf_free(&b);
}

/* TF's PartitionedVariables (tensor_bundle_test.cc): a [5,10] float tensor saved as
 * "-:0,1" and "-:1,9" reads back whole, is listed once with its full shape, and the
 * files hold what TF's BundleWriter::AddSlice writes. Distinct values (TF uses 0s and
 * 1s) so that any misplaced element shows. */
static void test_partitioned_variables(void **state) {
  (void)state;
  char dir[256], prefix[300], p[400];
  test_make_tmpdir(dir, sizeof dir);
  path_of(prefix, sizeof prefix, dir, "foo");
  float want[50];
  for (int i = 0; i < 50; i++) want[i] = (float)i + 0.5f;
  const int64_t dims[2] = {5, 10};
  const est_bundle_extent slices[4] = {{0, -1}, {0, 1}, {0, -1}, {1, 9}};
  part_ckpt pc;
  pc_init(&pc);
  pc_full(&pc, "foo", EST_DT_FLOAT, 2, dims, 2, slices);
  /* The full-tensor entry as TF serializes it: dtype 1, shape [5,10], then per slice a
   * TensorSliceProto whose whole extent is empty (0a 00) and whose other has start
   * (omitted when 0) and length: 3a 06 0a00 0a02 1001 and 3a 08 0a00 0a04 0801 1009. */
  assert_buf_hex(&pc.values[0], "0801" "1208120208051202080a" "3a060a000a021001" "3a080a000a0408011009");
  pc_slice(&pc, "foo", EST_DT_FLOAT, 4, 2, dims, want, &slices[0], 1);
  pc_slice(&pc, "foo", EST_DT_FLOAT, 4, 2, dims, want, &slices[2], 1);
  pc_write(&pc, prefix, 0);

  /* The index holds the header, the two slice keys (they start with 00, so they sort
   * before every name) and "foo". */
  snprintf(p, sizeof p, "%s.index", prefix);
  uint8_t *idx;
  size_t n;
  assert_int_equal(est_read_file(p, &idx, &n), EST_OK);
  est_sstable table;
  assert_int_equal(est_sstable_parse(&table, idx, n, p), EST_OK);
  assert_int_equal(table.count, 4);
  est_pw_buf k;
  est_pw_buf_init(&k);
  est_pw_put_raw(&k, table.keys[1], table.key_lens[1]);
  assert_buf_hex(&k, "00666f6f00010102807f8081");
  k.size = 0;
  est_pw_put_raw(&k, table.keys[2], table.key_lens[2]);
  assert_buf_hex(&k, "00666f6f00010102807f8189");
  est_pw_buf_free(&k);
  assert_int_equal(table.key_lens[3], 3);
  est_sstable_free(&table);
  free(idx);

  est_ckpt_reader *r;
  assert_int_equal(est_ckpt_reader_open(&r, prefix), EST_OK);
  assert_int_equal(est_ckpt_reader_count(r), 1); /* list_variables: the slices are not tensors */
  assert_string_equal(est_ckpt_reader_name(r, 0), "foo");
  est_dtype dt;
  int rank;
  int64_t got_dims[EST_MAX_RANK];
  assert_int_equal(est_ckpt_reader_info(r, "foo", &dt, &rank, got_dims), EST_OK);
  assert_int_equal(dt, EST_DT_FLOAT);
  assert_int_equal(rank, 2);
  assert_int_equal(got_dims[0], 5);
  assert_int_equal(got_dims[1], 10);
  est_tensor t;
  assert_int_equal(est_ckpt_reader_read(r, "foo", &t), EST_OK);
  assert_int_equal(t.dtype, EST_DT_FLOAT);
  assert_int_equal(t.rank, 2);
  assert_int_equal(t.dims[0], 5);
  assert_int_equal(t.dims[1], 10);
  assert_memory_equal(t.data, want, sizeof want);
  est_tensor_free(&t);
  float got[50];
  memset(got, 0, sizeof got);
  assert_int_equal(est_ckpt_reader_read_into(r, "foo", EST_DT_FLOAT, got, sizeof got), EST_OK);
  assert_memory_equal(got, want, sizeof want);
  /* The destination must be the full shape's size. */
  assert_int_equal(est_ckpt_reader_read_into(r, "foo", EST_DT_FLOAT, got, 20), EST_ERR_FAILED_PRECONDITION);
  est_ckpt_reader_close(r);
  test_remove_tree(dir);
}

/* TF's EquivalentSliceTest, on the reading side: one slice with explicit whole extents
 * "0,5:0,10" lives under its own key; one slice "-:-" is the whole tensor, and TF's
 * GetSliceValue reads it from the full-tensor entry itself (offset, size, crc32c there). */
static void test_partitioned_equivalent_slices(void **state) {
  (void)state;
  char dir[256], prefix[300];
  test_make_tmpdir(dir, sizeof dir);
  path_of(prefix, sizeof prefix, dir, "eq");
  int32_t want[50];
  for (int i = 0; i < 50; i++) want[i] = 1000 - 7 * i;
  const int64_t dims[2] = {5, 10};
  const est_bundle_extent both[2] = {{0, 5}, {0, 10}}, none[2] = {{0, -1}, {0, -1}};
  part_ckpt pc;
  pc_init(&pc);
  pc_full(&pc, "both_extents", EST_DT_INT32, 2, dims, 1, both);
  pc_slice(&pc, "both_extents", EST_DT_INT32, 4, 2, dims, want, both, 1);
  /* "no_extents": an ordinary entry for the data plus the one whole slice. */
  est_pw_buf key;
  est_pw_buf_init(&key);
  est_pw_put_raw(&key, "no_extents", 10);
  pc_entry(&pc, &key, EST_DT_INT32, 2, dims, (const uint8_t *)want, sizeof want, 1, NULL);
  assert_true(est_bundle_encode_slices(&pc.values[pc.n - 1], 2, 1, none));
  est_pw_buf_free(&key);
  pc_write(&pc, prefix, 0);
  est_ckpt_reader *r;
  assert_int_equal(est_ckpt_reader_open(&r, prefix), EST_OK);
  assert_int_equal(est_ckpt_reader_count(r), 2);
  const char *names[2] = {"both_extents", "no_extents"};
  for (int i = 0; i < 2; i++) {
    int32_t got[50] = {0};
    assert_int_equal(est_ckpt_reader_read_into(r, names[i], EST_DT_INT32, got, sizeof got), EST_OK);
    assert_memory_equal(got, want, sizeof want);
  }
  est_ckpt_reader_close(r);
  test_remove_tree(dir);
}

/* Rank 1: an int64 [7] in three slices listed out of order, two with a start offset; a
 * half [5] read as half and widened to float; a string [5] in two slices. */
static void test_partitioned_rank1(void **state) {
  (void)state;
  char dir[256], prefix[300];
  test_make_tmpdir(dir, sizeof dir);
  path_of(prefix, sizeof prefix, dir, "r1");
  int64_t v[7] = {-3, 1LL << 40, 7, 0, INT64_MIN, 42, INT64_MAX};
  const int64_t d7 = 7, d5 = 5;
  const est_bundle_extent s7[3] = {{5, 2}, {0, 3}, {3, 2}};
  uint16_t h[5] = {0x3c00, 0xc000, 0x3800, 0x0000, 0x7bff}; /* 1, -2, 0.5, 0, 65504 */
  const est_bundle_extent s5[2] = {{0, 4}, {4, 1}};
  est_bytes str[5] = {{1, (uint8_t *)"a"}, {0, NULL}, {3, (uint8_t *)"ccc"}, {2, (uint8_t *)"\xff\x00"},
                      {5, (uint8_t *)"eeeee"}};
  const est_bundle_extent ss[2] = {{2, 3}, {0, 2}};
  part_ckpt pc;
  pc_init(&pc);
  pc_full(&pc, "h", EST_DT_HALF, 1, &d5, 2, s5);
  pc_full(&pc, "s", EST_DT_STRING, 1, &d5, 2, ss);
  pc_full(&pc, "v", EST_DT_INT64, 1, &d7, 3, s7);
  for (int i = 0; i < 3; i++) pc_slice(&pc, "v", EST_DT_INT64, 8, 1, &d7, v, &s7[i], 1);
  for (int i = 0; i < 2; i++) pc_slice(&pc, "h", EST_DT_HALF, 2, 1, &d5, h, &s5[i], 1);
  for (int i = 0; i < 2; i++) pc_slice(&pc, "s", EST_DT_STRING, 0, 1, &d5, str, &ss[i], 1);
  pc_write(&pc, prefix, 0);
  est_ckpt_reader *r;
  assert_int_equal(est_ckpt_reader_open(&r, prefix), EST_OK);
  assert_int_equal(est_ckpt_reader_count(r), 3);
  est_tensor t;
  assert_int_equal(est_ckpt_reader_read(r, "v", &t), EST_OK);
  assert_int_equal(t.dtype, EST_DT_INT64);
  assert_int_equal(t.dims[0], 7);
  assert_memory_equal(t.data, v, sizeof v);
  est_tensor_free(&t);
  assert_int_equal(est_ckpt_reader_read(r, "h", &t), EST_OK);
  assert_memory_equal(t.data, h, sizeof h);
  est_tensor_free(&t);
  float f[5];
  assert_int_equal(est_ckpt_reader_read_into(r, "h", EST_DT_FLOAT, f, sizeof f), EST_OK);
  assert_true(f[0] == 1.0f && f[1] == -2.0f && f[2] == 0.5f && f[3] == 0.0f && f[4] == 65504.0f);
  assert_int_equal(est_ckpt_reader_read(r, "s", &t), EST_OK);
  assert_int_equal(t.dtype, EST_DT_STRING);
  const est_bytes *gs = t.data;
  for (int i = 0; i < 5; i++) {
    assert_int_equal(gs[i].size, str[i].size);
    if (str[i].size) assert_memory_equal(gs[i].data, str[i].data, str[i].size);
  }
  est_tensor_free(&t);
  est_ckpt_reader_close(r);
  test_remove_tree(dir);
}

/* Rank 3 with a start offset in the middle dimension: a [2,5,3] double cut into
 * "-:0,2:-", "-:2,3:0,1" and "-:2,3:1,2" (the last two strided in two dimensions), in a
 * little- and a big-endian bundle (each slice swapped to host order after its CRC). */
static void test_partitioned_rank3(void **state) {
  (void)state;
  double v[30];
  for (int i = 0; i < 30; i++) v[i] = i * 1.25 - 3;
  const int64_t dims[3] = {2, 5, 3};
  const est_bundle_extent s[9] = {{0, -1}, {0, 2}, {0, -1}, {0, -1}, {2, 3}, {0, 1}, {0, -1}, {2, 3}, {1, 2}};
  for (int big = 0; big < 2; big++) {
    char dir[256], prefix[300];
    test_make_tmpdir(dir, sizeof dir);
    path_of(prefix, sizeof prefix, dir, "r3");
    part_ckpt pc;
    pc_init(&pc);
    pc_full(&pc, "w", EST_DT_DOUBLE, 3, dims, 3, s);
    for (int i = 0; i < 3; i++) pc_slice(&pc, "w", EST_DT_DOUBLE, 8, 3, dims, v, &s[3 * i], big ? 8 : 1);
    pc_write(&pc, prefix, big);
    est_ckpt_reader *r;
    assert_int_equal(est_ckpt_reader_open(&r, prefix), EST_OK);
    est_tensor t;
    assert_int_equal(est_ckpt_reader_read(r, "w", &t), EST_OK);
    assert_int_equal(t.rank, 3);
    assert_int_equal(t.dims[1], 5);
    assert_memory_equal(t.data, v, sizeof v);
    est_tensor_free(&t);
    est_ckpt_reader_close(r);
    test_remove_tree(dir);
  }
}

/* Writes a [5,10] float "foo" whose full entry lists `listed` slices and whose data
 * holds `stored` slices, then expects `code` with every string of `msgs` in the message
 * of opening (at_open) or of reading it. */
static void expect_partitioned_error(int nlisted, const est_bundle_extent *listed, int nstored,
                                     const est_bundle_extent *stored, int at_open, est_status code,
                                     const char *const *msgs) {
  char dir[256], prefix[300];
  test_make_tmpdir(dir, sizeof dir);
  path_of(prefix, sizeof prefix, dir, "bad");
  float v[50];
  for (int i = 0; i < 50; i++) v[i] = (float)i;
  const int64_t dims[2] = {5, 10};
  part_ckpt pc;
  pc_init(&pc);
  pc_full(&pc, "foo", EST_DT_FLOAT, 2, dims, nlisted, listed);
  for (int i = 0; i < nstored; i++) pc_slice(&pc, "foo", EST_DT_FLOAT, 4, 2, dims, v, &stored[2 * i], 1);
  pc_write(&pc, prefix, 0);
  est_ckpt_reader *r = NULL;
  est_status st = est_ckpt_reader_open(&r, prefix);
  if (!at_open) {
    assert_int_equal(st, EST_OK);
    assert_int_equal(est_ckpt_reader_count(r), 1);
    est_tensor t;
    st = est_ckpt_reader_read(r, "foo", &t);
    assert_null(t.data);
    float into[50];
    assert_int_equal(est_ckpt_reader_read_into(r, "foo", EST_DT_FLOAT, into, sizeof into), st);
    est_ckpt_reader_close(r);
  } else {
    assert_null(r);
  }
  assert_int_equal(st, code);
  for (int i = 0; msgs[i]; i++)
    if (!strstr(est_error_message(), msgs[i])) fail_msg("message '%s' lacks '%s'", est_error_message(), msgs[i]);
  test_remove_tree(dir);
}

static void test_partitioned_errors(void **state) {
  (void)state;
  const est_bundle_extent tf[4] = {{0, -1}, {0, 1}, {0, -1}, {1, 9}};
  /* A listed slice whose entry is missing. */
  expect_partitioned_error(2, tf, 1, tf, 0, EST_ERR_DATA_LOSS,
                           (const char *[]){"bad.index", "partitioned tensor 'foo' lacks the entry of its slice -:1,9",
                                            NULL});
  /* Column 1 in no slice: TF's QueryMeta refuses too ("Does not have sufficient slices");
   * either way no element is left unset. */
  const est_bundle_extent gap[4] = {{0, -1}, {0, 1}, {0, -1}, {2, 8}};
  expect_partitioned_error(2, gap, 2, gap, 0, EST_ERR_INVALID_ARGUMENT,
                           (const char *[]){"Does not have sufficient slices for partitioned tensor 'foo'",
                                            "its 2 slices hold 45 of its 50 elements", NULL});
  /* Overlapping slices (TF's TensorSliceSet::Register: "Overlapping slices"). */
  const est_bundle_extent over[4] = {{0, -1}, {0, 2}, {0, -1}, {1, 9}};
  expect_partitioned_error(2, over, 2, over, 0, EST_ERR_DATA_LOSS,
                           (const char *[]){"'foo' has overlapping slices -:0,2 and -:1,9", NULL});
  /* The same slice listed twice overlaps itself. */
  const est_bundle_extent twice[6] = {{0, -1}, {0, 1}, {0, -1}, {1, 9}, {0, -1}, {1, 9}};
  expect_partitioned_error(3, twice, 2, tf, 0, EST_ERR_DATA_LOSS,
                           (const char *[]){"overlapping slices -:1,9 and -:1,9", NULL});
  /* A slice whose data entry has another shape: the entry of "-:0,1" claims [5,2]. */
  {
    char dir[256], prefix[300];
    test_make_tmpdir(dir, sizeof dir);
    path_of(prefix, sizeof prefix, dir, "shape");
    const int64_t dims[2] = {5, 10}, wrong[2] = {5, 2};
    float v[50] = {0};
    part_ckpt pc;
    pc_init(&pc);
    pc_full(&pc, "foo", EST_DT_FLOAT, 2, dims, 2, tf);
    pc_slice(&pc, "foo", EST_DT_FLOAT, 4, 2, dims, v, &tf[2], 1);
    est_pw_buf key;
    est_pw_buf_init(&key);
    assert_true(est_bundle_slice_key(&key, "foo", 2, tf));
    pc_entry(&pc, &key, EST_DT_FLOAT, 2, wrong, (const uint8_t *)v, 40, 1, NULL);
    est_pw_buf_free(&key);
    pc_write(&pc, prefix, 0);
    est_ckpt_reader *r;
    assert_int_equal(est_ckpt_reader_open(&r, prefix), EST_OK);
    est_tensor t;
    assert_int_equal(est_ckpt_reader_read(r, "foo", &t), EST_ERR_DATA_LOSS);
    assert_non_null(strstr(est_error_message(),
                           "slice -:0,1 of partitioned tensor 'foo' is stored as dtype 1 [5,2]; expected dtype 1 [5,1]"));
    est_ckpt_reader_close(r);
    test_remove_tree(dir);
  }
  /* A flipped data byte in the second slice: its CRC names the tensor and the slice. */
  {
    char dir[256], prefix[300], p[400];
    test_make_tmpdir(dir, sizeof dir);
    path_of(prefix, sizeof prefix, dir, "crc");
    const int64_t dims[2] = {5, 10};
    float v[50] = {0};
    part_ckpt pc;
    pc_init(&pc);
    pc_full(&pc, "foo", EST_DT_FLOAT, 2, dims, 2, tf);
    pc_slice(&pc, "foo", EST_DT_FLOAT, 4, 2, dims, v, &tf[0], 1);
    pc_slice(&pc, "foo", EST_DT_FLOAT, 4, 2, dims, v, &tf[2], 1);
    pc.data.data[20 + 33] ^= 0x10; /* inside "-:1,9", which starts at byte 20 */
    pc_write(&pc, prefix, 0);
    est_ckpt_reader *r;
    assert_int_equal(est_ckpt_reader_open(&r, prefix), EST_OK);
    est_tensor t;
    assert_int_equal(est_ckpt_reader_read(r, "foo", &t), EST_ERR_DATA_LOSS);
    assert_non_null(strstr(est_error_message(), "Checksum does not match for 'foo (slice -:1,9)'"));
    est_ckpt_reader_close(r);
    /* A data file cut inside the second slice: OUT_OF_RANGE naming it. */
    snprintf(p, sizeof p, "%s.data-00000-of-00001", prefix);
    assert_int_equal(est_write_file_atomic(p, v, 30), EST_OK);
    assert_int_equal(est_ckpt_reader_open(&r, prefix), EST_OK);
    assert_int_equal(est_ckpt_reader_read(r, "foo", &t), EST_ERR_OUT_OF_RANGE);
    assert_non_null(strstr(est_error_message(), "'foo (slice -:1,9)' needs bytes [20, 200)"));
    est_ckpt_reader_close(r);
    test_remove_tree(dir);
  }
  /* Bad extents fail the open, as every malformed entry does, naming file and tensor:
   * outside the dimension, ... */
  const est_bundle_extent outside[4] = {{0, -1}, {0, 5}, {0, -1}, {5, 6}};
  expect_partitioned_error(2, outside, 1, outside, 1, EST_ERR_DATA_LOSS,
                           (const char *[]){"bad.index", "slice 1 of partitioned tensor 'foo': extent 1 (start 5, length 6) "
                                            "does not fit dimension 1 of size 10", NULL});
  /* ... a zero length, ... */
  const est_bundle_extent zero[2] = {{0, -1}, {3, 0}};
  expect_partitioned_error(1, zero, 0, zero, 1, EST_ERR_DATA_LOSS,
                           (const char *[]){"extent 1 (start 3, length 0) does not fit", NULL});
  /* ... a negative start. */
  const est_bundle_extent negative[2] = {{0, -1}, {-1, 2}};
  expect_partitioned_error(1, negative, 0, negative, 1, EST_ERR_DATA_LOSS,
                           (const char *[]){"extent 1 (start -1, length 2) does not fit", NULL});
}

/* TensorSliceProtos that do not fit the full entry, written byte by byte: an Extent with
 * a start but no length, a slice with one extent for a rank-2 tensor, and a slice field
 * that is not a message or that overruns the entry. */
static void test_partitioned_bad_protos(void **state) {
  (void)state;
  static const struct { const char *slices_hex, *msg; } cases[] = {
      {"3a060a000a020803", "slice 0 of partitioned tensor 'foo': extent 1 has start 3 but no length"},
      {"3a020a00", "slice 0 of partitioned tensor 'foo' has 1 extents; expected 2, its rank"},
      {"3a060a000a021001" "3a0a0a000a040801100912ff", "corrupted slice 1 (TensorSliceProto) in the entry of 'foo'"},
      {"3a050a000a0210", "corrupted slice 0 (TensorSliceProto) in the entry of 'foo'"},
      {"3a090a00", "corrupted entry (BundleEntryProto) for 'foo'"},
  };
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    char dir[256], prefix[300];
    test_make_tmpdir(dir, sizeof dir);
    path_of(prefix, sizeof prefix, dir, "proto");
    const int64_t dims[2] = {5, 10};
    part_ckpt pc;
    pc_init(&pc);
    pc_full(&pc, "foo", EST_DT_FLOAT, 2, dims, 0, NULL);
    size_t n;
    uint8_t *raw = test_unhex_alloc(cases[c].slices_hex, &n);
    est_pw_put_raw(&pc.values[0], raw, n);
    free(raw);
    pc_write(&pc, prefix, 0);
    est_ckpt_reader *r = NULL;
    assert_int_equal(est_ckpt_reader_open(&r, prefix), EST_ERR_DATA_LOSS);
    assert_null(r);
    if (!strstr(est_error_message(), cases[c].msg)) fail_msg("case %zu: '%s' lacks '%s'", c, est_error_message(), cases[c].msg);
    test_remove_tree(dir);
  }
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
    cmocka_unit_test(test_slice_keys),
    cmocka_unit_test(test_partitioned_variables),
    cmocka_unit_test(test_partitioned_equivalent_slices),
    cmocka_unit_test(test_partitioned_rank1),
    cmocka_unit_test(test_partitioned_rank3),
    cmocka_unit_test(test_partitioned_errors),
    cmocka_unit_test(test_partitioned_bad_protos),
    cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
