/* `est ckpt ls|get|convert` end to end through the built binary. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "est/ckpt.h"
#include "est/crc32c.h"
#include "est/file.h"
#include "est/safetensors.h"
#include "io/bundle.h"
#include "test_util.h"

#define DATA EST_TEST_DATA

static void expect(int rc_want, const char *out_want, const char *cmd) {
  char *out;
  int rc = test_run(&out, 0, "%s", cmd);
  if (rc != rc_want) fail_msg("'%s' exited %d, expected %d; output: %s", cmd, rc, rc_want, out);
  if (out_want && strcmp(out, out_want)) fail_msg("'%s' printed:\n%s\nexpected:\n%s", cmd, out, out_want);
  free(out);
}

static void test_ls(void **state) {
  (void)state;
  expect(0,
         "_CHECKPOINTABLE_OBJECT_GRAPH\tstring\t[]\n"
         "a/.ATTRIBUTES/VARIABLE_VALUE\tfloat32\t[]\n"
         "b/.ATTRIBUTES/VARIABLE_VALUE\tfloat32\t[]\n"
         "c/.ATTRIBUTES/VARIABLE_VALUE\tfloat32\t[]\n",
         EST_BIN " ckpt ls " DATA "/half_plus_two_tf2/variables");
  char *out;
  assert_int_equal(test_run(&out, 0, EST_BIN " ckpt ls " DATA "/mrpc_bert_tiny_run/model.ckpt-343"), 0);
  assert_non_null(strstr(out, "\nglobal_step\tint64\t[]\n"));
  assert_non_null(strstr(out, "\noutput_weights\tfloat32\t[2,128]\n"));
  assert_non_null(strstr(out, "bert/embeddings/word_embeddings\tfloat32\t[30522,128]\n"));
  int lines = 0;
  for (char *p = out; *p; p++) lines += *p == '\n';
  assert_int_equal(lines, 124);
  /* A directory means its latest checkpoint; the .index path means its prefix. */
  char *out2;
  assert_int_equal(test_run(&out2, 0, EST_BIN " ckpt ls " DATA "/mrpc_bert_tiny_run"), 0);
  assert_string_equal(out, out2);
  free(out2);
  assert_int_equal(test_run(&out2, 0, EST_BIN " ckpt ls " DATA "/mrpc_bert_tiny_run/model.ckpt-343.index"), 0);
  assert_string_equal(out, out2);
  free(out2);
  free(out);
  expect(1, "", EST_BIN " ckpt ls " DATA " 2>/dev/null"); /* a directory without a checkpoint */
  /* A directory with no state file but one .index (a downloaded bert_model.ckpt): that one. */
  assert_int_equal(test_run(&out, 0, EST_BIN " ckpt ls " DATA "/keras_bert_tiny"), 0);
  assert_int_equal(test_run(&out2, 0, EST_BIN " ckpt ls " DATA "/keras_bert_tiny/bert_model.ckpt"), 0);
  assert_non_null(strstr(out, "\nglobal_step\tint64\t[]\n"));
  assert_string_equal(out, out2);
  free(out2);
  free(out);
}

static void test_get(void **state) {
  (void)state;
  expect(0, "[0.5]\n", EST_BIN " ckpt get " DATA "/half_plus_two_tf1/variables a");
  expect(0, "[3]\n", EST_BIN " ckpt get " DATA "/half_plus_two_tf1/variables c2");
  expect(0, "[0.999994218, 1.0000056, 0.999994457, 1.00000548]\n",
         EST_BIN " ckpt get " DATA "/keras_bert_tiny/bert_model.ckpt bert/embeddings/LayerNorm/gamma");
  char *out;
  assert_int_equal(test_run(&out, 0, EST_BIN " ckpt get " DATA "/keras_bert_tiny/bert_model.ckpt global_step"), 0);
  assert_true(out[0] == '[' && out[1] >= '0' && out[1] <= '9');
  free(out);
  /* The object graph is a binary proto: base64. */
  assert_int_equal(test_run(&out, 0, EST_BIN " ckpt get " DATA "/half_plus_two_tf2/variables _CHECKPOINTABLE_OBJECT_GRAPH"), 0);
  assert_memory_equal(out, "[{\"base64\": \"CpgB", 17);
  free(out);
  expect(1, "", EST_BIN " ckpt get " DATA "/half_plus_two_tf1/variables nope");
  /* Strings, bools and half written here, read through the CLI. */
  char dir[256], prefix[300], cmd[1024];
  test_make_tmpdir(dir, sizeof dir);
  est_path_join(prefix, sizeof prefix, dir, "s");
  est_bytes s[4] = {{3, (uint8_t *)"a\"b"}, {2, (uint8_t *)"\n\x01"}, {2, (uint8_t *)"\xc3\xa9"}, {2, (uint8_t *)"\xff\x00"}};
  uint8_t flags[2] = {1, 0};
  uint16_t h[3] = {0x3c00, 0x7c00, 0x7e00}; /* 1, inf, nan */
  const char *names[3] = {"str", "flags", "h"};
  est_tensor ts[3] = {{EST_DT_STRING, 1, {4}, s}, {EST_DT_BOOL, 1, {2}, flags}, {EST_DT_HALF, 1, {3}, h}};
  assert_int_equal(est_ckpt_save(prefix, 3, names, ts), EST_OK);
  snprintf(cmd, sizeof cmd, EST_BIN " ckpt get '%s' str", prefix);
  expect(0, "[\"a\\\"b\", \"\\n\\u0001\", \"\xc3\xa9\", {\"base64\": \"/wA=\"}]\n", cmd);
  snprintf(cmd, sizeof cmd, EST_BIN " ckpt get '%s' flags", prefix);
  expect(0, "[true, false]\n", cmd);
  snprintf(cmd, sizeof cmd, EST_BIN " ckpt get '%s' h", prefix);
  expect(0, "[1, Infinity, NaN]\n", cmd);
  test_remove_tree(dir);
}

static int files_equal(const char *a, const char *b) {
  uint8_t *x, *y;
  size_t n, m;
  if (est_read_file(a, &x, &n) != EST_OK) return 0;
  if (est_read_file(b, &y, &m) != EST_OK) {
    free(x);
    return 0;
  }
  int eq = n == m && !memcmp(x, y, n);
  free(x);
  free(y);
  return eq;
}

/* TF -> safetensors -> TF: the result is byte-identical to the TF-written original. */
static void test_convert_round_trip(void **state) {
  (void)state;
  char dir[256], cmd[1024], st_path[400], back[400], p[500];
  test_make_tmpdir(dir, sizeof dir);
  est_path_join(st_path, sizeof st_path, dir, "bert.safetensors");
  est_path_join(back, sizeof back, dir, "back/model.ckpt");
  snprintf(cmd, sizeof cmd, EST_BIN " ckpt convert " DATA "/keras_bert_tiny/bert_model.ckpt '%s' 2>/dev/null", st_path);
  expect(0, "", cmd);
  est_safetensors *st;
  assert_int_equal(est_safetensors_open(&st, st_path), EST_OK);
  assert_int_equal(est_safetensors_count(st), 139);
  assert_string_equal(est_safetensors_dtype_string(st, "global_step"), "I64");
  assert_string_equal(est_safetensors_dtype_string(st, "bert/pooler/dense/kernel"), "F32");
  est_safetensors_close(st);
  snprintf(cmd, sizeof cmd, EST_BIN " ckpt convert '%s' '%s' 2>/dev/null", st_path, back);
  expect(0, "", cmd);
  snprintf(p, sizeof p, "%s.index", back);
  assert_true(files_equal(p, DATA "/keras_bert_tiny/bert_model.ckpt.index"));
  snprintf(p, sizeof p, "%s.data-00000-of-00001", back);
  assert_true(files_equal(p, DATA "/keras_bert_tiny/bert_model.ckpt.data-00000-of-00001"));
  /* ls of the safetensors file lists what ls of the checkpoint lists. */
  char *a, *b;
  snprintf(cmd, sizeof cmd, EST_BIN " ckpt ls '%s'", st_path);
  assert_int_equal(test_run(&a, 0, "%s", cmd), 0);
  assert_int_equal(test_run(&b, 0, EST_BIN " ckpt ls " DATA "/keras_bert_tiny/bert_model.ckpt"), 0);
  assert_string_equal(a, b);
  free(a);
  free(b);

  /* A string tensor cannot go to safetensors unless skipped. */
  snprintf(cmd, sizeof cmd, EST_BIN " ckpt convert " DATA "/half_plus_two_tf2/variables '%s/h.safetensors' 2>&1", dir);
  char *out;
  assert_int_equal(test_run(&out, 0, "%s", cmd), 1);
  assert_non_null(strstr(out, "_CHECKPOINTABLE_OBJECT_GRAPH' is a string tensor"));
  free(out);
  snprintf(p, sizeof p, "%s/h.safetensors", dir);
  assert_false(est_file_exists(p));
  snprintf(cmd, sizeof cmd, EST_BIN " ckpt convert --skip_strings " DATA "/half_plus_two_tf2/variables '%s' 2>/dev/null", p);
  expect(0, "", cmd);
  snprintf(cmd, sizeof cmd, EST_BIN " ckpt get '%s' b/.ATTRIBUTES/VARIABLE_VALUE", p);
  expect(0, "[2]\n", cmd);
  test_remove_tree(dir);
}

/* Writes a checkpoint as TF's BundleWriter::AddSlice does (its PartitionedVariables
 * test): float "foo" [5,10] = 0..49 saved as "-:0,1" and "-:1,9", each slice an entry
 * under its slice key, and "foo" an entry with the full shape and both slices; plus an
 * ordinary int32 "bar" [2]. */
static void write_partitioned(const char *prefix) {
  float v[50], col0[5], rest[45];
  for (int i = 0; i < 50; i++) v[i] = (float)i;
  for (int r = 0; r < 5; r++) {
    col0[r] = v[10 * r];
    for (int c = 1; c < 10; c++) rest[9 * r + c - 1] = v[10 * r + c];
  }
  int32_t bar[2] = {7, -8};
  uint8_t data[20 + 180 + 8];
  memcpy(data, col0, 20);
  memcpy(data + 20, rest, 180);
  memcpy(data + 200, bar, 8);
  const int64_t full[2] = {5, 10}, s1[2] = {5, 1}, s2[2] = {5, 9}, d2 = 2;
  const est_bundle_extent ext[4] = {{0, -1}, {0, 1}, {0, -1}, {1, 9}};
  est_pw_buf k1, k2, v1, v2, vbar, vfoo;
  est_pw_buf *bufs[6] = {&k1, &k2, &v1, &v2, &vbar, &vfoo};
  for (int i = 0; i < 6; i++) est_pw_buf_init(bufs[i]);
  assert_true(est_bundle_slice_key(&k1, "foo", 2, &ext[0]));
  assert_true(est_bundle_slice_key(&k2, "foo", 2, &ext[2]));
  est_bundle_encode_entry(&v1, EST_DT_FLOAT, 2, s1, 0, 0, 20, est_crc32c_mask(est_crc32c(data, 20)));
  est_bundle_encode_entry(&v2, EST_DT_FLOAT, 2, s2, 0, 20, 180, est_crc32c_mask(est_crc32c(data + 20, 180)));
  est_bundle_encode_entry(&vbar, EST_DT_INT32, 1, &d2, 0, 200, 8, est_crc32c_mask(est_crc32c(data + 200, 8)));
  est_bundle_encode_entry(&vfoo, EST_DT_FLOAT, 2, full, 0, 0, 0, 0);
  assert_true(est_bundle_encode_slices(&vfoo, 2, 2, ext));
  static const uint8_t hdr[] = {0x08, 0x01, 0x1a, 0x02, 0x08, 0x01};
  est_sstable_builder b;
  est_sstable_builder_init(&b, 0);
  /* Bytewise order: the header "", the slice keys (they start with 00), "bar", "foo". */
  assert_int_equal(est_sstable_builder_add(&b, "", 0, hdr, sizeof hdr), EST_OK);
  assert_int_equal(est_sstable_builder_add(&b, k1.data, k1.size, v1.data, v1.size), EST_OK);
  assert_int_equal(est_sstable_builder_add(&b, k2.data, k2.size, v2.data, v2.size), EST_OK);
  assert_int_equal(est_sstable_builder_add(&b, "bar", 3, vbar.data, vbar.size), EST_OK);
  assert_int_equal(est_sstable_builder_add(&b, "foo", 3, vfoo.data, vfoo.size), EST_OK);
  uint8_t *out;
  size_t size;
  assert_int_equal(est_sstable_builder_finish(&b, &out, &size), EST_OK);
  char p[400];
  snprintf(p, sizeof p, "%s.index", prefix);
  assert_int_equal(est_write_file_atomic(p, out, size), EST_OK);
  free(out);
  snprintf(p, sizeof p, "%s.data-00000-of-00001", prefix);
  assert_int_equal(est_write_file_atomic(p, data, sizeof data), EST_OK);
  for (int i = 0; i < 6; i++) est_pw_buf_free(bufs[i]);
}

/* ls lists a partitioned variable once, with its full shape (as TF's list_variables);
 * get and convert read it whole. */
static void test_partitioned(void **state) {
  (void)state;
  char dir[256], prefix[300], st_path[400], back[400], cmd[1400];
  test_make_tmpdir(dir, sizeof dir);
  est_path_join(prefix, sizeof prefix, dir, "model.ckpt-1");
  write_partitioned(prefix);
  const char *ls = "bar\tint32\t[2]\nfoo\tfloat32\t[5,10]\n";
  char values[400] = "[";
  for (int i = 0; i < 50; i++) snprintf(values + strlen(values), sizeof values - strlen(values), "%s%d", i ? ", " : "", i);
  strcat(values, "]\n");
  snprintf(cmd, sizeof cmd, EST_BIN " ckpt ls '%s'", prefix);
  expect(0, ls, cmd);
  snprintf(cmd, sizeof cmd, EST_BIN " ckpt ls '%s'", dir); /* its only .index */
  expect(0, ls, cmd);
  snprintf(cmd, sizeof cmd, EST_BIN " ckpt get '%s' foo", prefix);
  expect(0, values, cmd);
  snprintf(cmd, sizeof cmd, EST_BIN " ckpt get '%s' bar", prefix);
  expect(0, "[7, -8]\n", cmd);
  /* To safetensors and back: "foo" is then an ordinary [5,10] tensor. */
  est_path_join(st_path, sizeof st_path, dir, "p.safetensors");
  est_path_join(back, sizeof back, dir, "back/model.ckpt-1");
  snprintf(cmd, sizeof cmd, EST_BIN " ckpt convert '%s' '%s' 2>/dev/null", prefix, st_path);
  expect(0, "", cmd);
  snprintf(cmd, sizeof cmd, EST_BIN " ckpt ls '%s'", st_path);
  expect(0, ls, cmd);
  snprintf(cmd, sizeof cmd, EST_BIN " ckpt convert '%s' '%s' 2>/dev/null", st_path, back);
  expect(0, "", cmd);
  snprintf(cmd, sizeof cmd, EST_BIN " ckpt get '%s' foo", back);
  expect(0, values, cmd);
  /* A slice's data missing from the data file: get fails naming the tensor and slice. */
  char data_path[400], *out;
  snprintf(data_path, sizeof data_path, "%s.data-00000-of-00001", prefix);
  assert_int_equal(est_write_file_atomic(data_path, "", 0), EST_OK);
  snprintf(cmd, sizeof cmd, EST_BIN " ckpt get '%s' foo", prefix);
  assert_int_equal(test_run(&out, 1, "%s", cmd), 1);
  assert_non_null(strstr(out, "'foo (slice -:0,1)' needs bytes [0, 20)"));
  free(out);
  test_remove_tree(dir);
}

static void test_usage(void **state) {
  (void)state;
  char *out;
  assert_int_equal(test_run(&out, 0, EST_BIN " ckpt --help"), 0);
  assert_non_null(strstr(out, "usage: est ckpt ls"));
  assert_non_null(strstr(out, "base64"));
  free(out);
  assert_int_equal(test_run(&out, 0, EST_BIN " ckpt ls --help"), 0);
  free(out);
  expect(2, "", EST_BIN " ckpt 2>/dev/null");
  expect(2, "", EST_BIN " ckpt ls 2>/dev/null");
  expect(2, "", EST_BIN " ckpt get x 2>/dev/null");
  expect(2, "", EST_BIN " ckpt ls a b 2>/dev/null");
  expect(2, "", EST_BIN " ckpt frob x 2>/dev/null");
  expect(2, "", EST_BIN " ckpt ls x --frob 2>/dev/null");
  expect(2, "", EST_BIN " ckpt ls x --skip_strings 2>/dev/null");
  expect(2, "", EST_BIN " ckpt convert a b 2>/dev/null");                         /* neither safetensors */
  expect(2, "", EST_BIN " ckpt convert a.safetensors b.safetensors 2>/dev/null"); /* both */
  expect(1, "", EST_BIN " ckpt ls /nonexistent/model.ckpt 2>/dev/null");
  assert_int_equal(test_run(&out, 0, EST_BIN " --help"), 0);
  assert_non_null(strstr(out, "ckpt"));
  free(out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_ls),
    cmocka_unit_test(test_get),
    cmocka_unit_test(test_convert_round_trip),
    cmocka_unit_test(test_partitioned),
    cmocka_unit_test(test_usage),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
