/* safetensors: the vectors of docs/safetensors.md §4 and the Rust reference's test cases
 * (docs/safetensors.md §5, cases 73-92), round trips, and a byte-flip / truncation sweep. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "est/file.h"
#include "est/safetensors.h"
#include "test_util.h"

/* docs/safetensors.md §4 "mini BERT-like vector" (284 bytes). */
static const char MINI_HEX[] =
    "f8000000000000007b225f5f6d657461646174615f5f223a7b22666f726d6174223a227074227d2c22676c6f62616c5f"
    "73746570223a7b226474797065223a22493634222c227368617065223a5b5d2c22646174615f6f666673657473223a5b"
    "302c385d7d2c22626572742e656d62656464696e67732e776f72645f656d62656464696e67732e776569676874223a7b"
    "226474797065223a22463332222c227368617065223a5b322c325d2c22646174615f6f666673657473223a5b382c3234"
    "5d7d2c226c6e2e68616c66223a7b226474797065223a22463136222c227368617065223a5b325d2c22646174615f6f66"
    "6673657473223a5b32342c32385d7d7d07000000000000000000803f000000400000404000008040003c00c0";

static uint8_t *hex(const char *h, size_t *n) {
  size_t len = strlen(h) / 2;
  uint8_t *b = malloc(len ? len : 1);
  for (size_t i = 0; i < len; i++) sscanf(h + 2 * i, "%2hhx", &b[i]);
  *n = len;
  return b;
}

static est_tensor make(est_dtype dt, int rank, const int64_t *dims, void *data) {
  est_tensor t = {.dtype = dt, .rank = rank, .data = data};
  for (int i = 0; i < rank; i++) t.dims[i] = dims[i];
  return t;
}

/* Builds a file: u64 N + header text (+ `pad` spaces) + `data_len` zero bytes. */
static uint8_t *file_of(const char *header, size_t pad, size_t data_len, size_t *n) {
  size_t h = strlen(header) + pad;
  *n = 8 + h + data_len;
  uint8_t *b = calloc(1, *n);
  for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)h >> (8 * i));
  memcpy(b + 8, header, strlen(header));
  memset(b + 8 + strlen(header), ' ', pad);
  return b;
}

/* Opens `header` + data from memory and expects `code` with `kind` in the message. */
static void expect_open(const char *header, size_t data_len, est_status code, const char *kind) {
  size_t n;
  uint8_t *b = file_of(header, 0, data_len, &n);
  est_safetensors *st = NULL;
  assert_int_equal(est_safetensors_open_memory(&st, b, n, "mem"), code);
  if (code != EST_OK) {
    assert_null(st);
    if (!strstr(est_error_message(), kind)) fail_msg("'%s' lacks '%s'", est_error_message(), kind);
  }
  est_safetensors_close(st);
  free(b);
}

static void serialize_and_compare(est_safetensors_writer *w, const uint8_t *want, size_t want_n) {
  uint8_t *got;
  size_t n;
  assert_int_equal(est_safetensors_writer_serialize(w, &got, &n), EST_OK);
  assert_int_equal(n, want_n);
  assert_memory_equal(got, want, n);
  free(got);
}

static void test_empty_vectors(void **state) {
  (void)state;
  est_safetensors_writer *w;
  assert_int_equal(est_safetensors_writer_open(&w, "unused"), EST_OK);
  size_t n;
  uint8_t *want = hex("08000000000000007b7d202020202020", &n);
  serialize_and_compare(w, want, n);
  free(want);
  assert_int_equal(est_safetensors_writer_set_metadata(w, "framework", "pt"), EST_OK);
  want = file_of("{\"__metadata__\":{\"framework\":\"pt\"}}", 5, 0, &n);
  assert_int_equal(n, 48);
  serialize_and_compare(w, want, n);
  free(want);
  est_safetensors_writer_abort(w);
}

static void test_serialization_vectors(void **state) {
  (void)state;
  float v[6] = {0, 1, 2, 3, 4, 5};
  int64_t d123[3] = {1, 2, 3}, d1123[4] = {1, 1, 2, 3};
  est_tensor t = make(EST_DT_FLOAT, 3, d123, v);
  est_safetensors_writer *w;
  assert_int_equal(est_safetensors_writer_open(&w, "unused"), EST_OK);
  assert_int_equal(est_safetensors_writer_add(w, "attn.0", &t), EST_OK);
  size_t n;
  uint8_t *want = file_of("{\"attn.0\":{\"dtype\":\"F32\",\"shape\":[1,2,3],\"data_offsets\":[0,24]}}", 0, 24, &n);
  memcpy(want + n - 24, v, 24);
  assert_int_equal(n - 24 - 8, 64);
  serialize_and_compare(w, want, n);
  free(want);
  est_safetensors_writer_abort(w);

  /* Forced alignment: 65 bytes of JSON padded with 7 spaces. */
  t = make(EST_DT_FLOAT, 4, d1123, v);
  assert_int_equal(est_safetensors_writer_open(&w, "unused"), EST_OK);
  assert_int_equal(est_safetensors_writer_add(w, "attn0", &t), EST_OK);
  want = file_of("{\"attn0\":{\"dtype\":\"F32\",\"shape\":[1,1,2,3],\"data_offsets\":[0,24]}}", 7, 24, &n);
  memcpy(want + n - 24, v, 24);
  assert_int_equal(n - 24 - 8, 72);
  serialize_and_compare(w, want, n);
  free(want);
  est_safetensors_writer_abort(w);
}

static void test_mini_bert_vector(void **state) {
  (void)state;
  char dir[256], path[300];
  test_make_tmpdir(dir, sizeof dir);
  est_path_join(path, sizeof path, dir, "mini.safetensors");
  float we[4] = {1, 2, 3, 4};
  int64_t step = 7, d22[2] = {2, 2}, d2[1] = {2};
  uint16_t half[2] = {0x3c00, 0xc000};
  est_tensor t1 = make(EST_DT_FLOAT, 2, d22, we), t2 = make(EST_DT_INT64, 0, NULL, &step),
             t3 = make(EST_DT_HALF, 1, d2, half);
  est_safetensors_writer *w;
  assert_int_equal(est_safetensors_writer_open(&w, path), EST_OK);
  assert_int_equal(est_safetensors_writer_add(w, "ln.half", &t3), EST_OK);
  assert_int_equal(est_safetensors_writer_add(w, "bert.embeddings.word_embeddings.weight", &t1), EST_OK);
  assert_int_equal(est_safetensors_writer_add(w, "global_step", &t2), EST_OK);
  assert_int_equal(est_safetensors_writer_add(w, "global_step", &t2), EST_ERR_INVALID_ARGUMENT);
  assert_int_equal(est_safetensors_writer_add(w, "__metadata__", &t2), EST_ERR_INVALID_ARGUMENT);
  assert_int_equal(est_safetensors_writer_set_metadata(w, "format", "pt"), EST_OK);
  assert_int_equal(est_safetensors_writer_finish(w), EST_OK);
  size_t n, m;
  uint8_t *want = hex(MINI_HEX, &n), *got;
  assert_int_equal(est_read_file(path, &got, &m), EST_OK);
  assert_int_equal(m, 284);
  assert_memory_equal(got, want, n);
  free(got);

  est_safetensors *st;
  assert_int_equal(est_safetensors_open(&st, path), EST_OK);
  assert_int_equal(est_safetensors_count(st), 3);
  assert_string_equal(est_safetensors_name(st, 0), "bert.embeddings.word_embeddings.weight");
  assert_string_equal(est_safetensors_name(st, 1), "global_step");
  assert_string_equal(est_safetensors_name(st, 2), "ln.half");
  assert_int_equal(est_safetensors_metadata_count(st), 1);
  assert_string_equal(est_safetensors_metadata_get(st, "format"), "pt");
  assert_null(est_safetensors_metadata_get(st, "framework"));
  est_tensor t;
  assert_int_equal(est_safetensors_read(st, "global_step", &t), EST_OK);
  assert_int_equal(t.dtype, EST_DT_INT64);
  assert_int_equal(t.rank, 0);
  assert_int_equal(*(int64_t *)t.data, 7);
  est_tensor_free(&t);
  float f[4];
  assert_int_equal(est_safetensors_read_into(st, "bert.embeddings.word_embeddings.weight", EST_DT_FLOAT, f, 16),
                   EST_OK);
  assert_memory_equal(f, we, 16);
  assert_int_equal(est_safetensors_read_into(st, "ln.half", EST_DT_FLOAT, f, 8), EST_OK);
  assert_true(f[0] == 1.0f && f[1] == -2.0f);
  assert_int_equal(est_safetensors_read_into(st, "ln.half", EST_DT_FLOAT, f, 16), EST_ERR_FAILED_PRECONDITION);
  assert_int_equal(est_safetensors_read(st, "nope", &t), EST_ERR_NOT_FOUND);
  est_safetensors_close(st);

  /* Every single-byte change and every truncation: an error or a file that reads fully,
   * never a crash. (safetensors has no checksums, so a changed data byte or a changed
   * letter in a name is undetectable by design.) */
  for (size_t i = 0; i < n; i++) {
    for (int pass = 0; pass < 2; pass++) {
      uint8_t saved = want[i];
      want[i] = pass ? (uint8_t)(saved ^ 0xff) : (uint8_t)(saved + 1);
      if (est_safetensors_open_memory(&st, want, n, "flip") == EST_OK) {
        for (size_t k = 0; k < est_safetensors_count(st); k++) {
          est_status s = est_safetensors_read(st, est_safetensors_name(st, k), &t);
          assert_true(s == EST_OK || s == EST_ERR_UNIMPLEMENTED);
          est_tensor_free(&t);
        }
        est_safetensors_close(st);
      }
      want[i] = saved;
    }
  }
  for (size_t len = 0; len < n; len++) {
    assert_int_not_equal(est_safetensors_open_memory(&st, want, len, "cut"), EST_OK);
    assert_null(st);
  }
  free(want);
  test_remove_tree(dir);
}

static void test_reader_rules(void **state) {
  (void)state;
  /* test_deserialization: N = 60, not a multiple of 8, is fine. */
  expect_open("{\"test\":{\"dtype\":\"I32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}", 16, EST_OK, NULL);
  /* test_empty_shapes_allowed / test_zero_sized_tensor. */
  expect_open("{\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}", 4, EST_OK, NULL);
  expect_open("{\"z\":{\"dtype\":\"F32\",\"shape\":[2,0],\"data_offsets\":[0,0]}}", 0, EST_OK, NULL);
  /* Whitespace before and after the object. */
  expect_open(" \t\r\n{}\n ", 0, EST_OK, NULL);
  /* Sub-byte F4 [1,2]: 1 byte, listed but not readable; F4 [1,3] is misaligned. */
  expect_open("{\"f\":{\"dtype\":\"F4\",\"shape\":[1,2],\"data_offsets\":[0,1]}}", 1, EST_OK, NULL);
  expect_open("{\"f\":{\"dtype\":\"F4\",\"shape\":[1,3],\"data_offsets\":[0,2]}}", 2, EST_ERR_DATA_LOSS,
              "MisalignedSlice");
  expect_open("{\"f\":{\"dtype\":\"F4\",\"shape\":[2,2],\"data_offsets\":[0,1]}}", 1, EST_ERR_DATA_LOSS,
              "TensorInvalidInfo");
  /* test_invalid_info: I32 [2,2] claiming 4 bytes. */
  expect_open("{\"test\":{\"dtype\":\"I32\",\"shape\":[2,2],\"data_offsets\":[0,4]}}", 4, EST_ERR_DATA_LOSS,
              "TensorInvalidInfo");
  /* test_validation_overflow. */
  expect_open("{\"o\":{\"dtype\":\"I32\",\"shape\":[4611686018427387904,4],\"data_offsets\":[0,4]}}", 4,
              EST_ERR_DATA_LOSS, "ValidationOverflow");
  /* test_json_attack: several tensors claiming the same bytes. */
  char attack[2048] = "{";
  for (int i = 0; i < 10; i++) {
    char one[128];
    snprintf(one, sizeof one, "%s\"w%d\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}", i ? "," : "", i);
    strcat(attack, one);
  }
  strcat(attack, "}");
  expect_open(attack, 16, EST_ERR_DATA_LOSS, "InvalidOffset");
  /* A hole between tensors, and end before begin. */
  expect_open("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}", 2, EST_ERR_DATA_LOSS, "InvalidOffset");
  expect_open("{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[2,1]}}", 2, EST_ERR_DATA_LOSS, "InvalidOffset");
  /* test_metadata_incomplete_buffer: extra bytes after the data, or missing ones. */
  expect_open("{\"test\":{\"dtype\":\"I32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}", 17, EST_ERR_DATA_LOSS,
              "MetadataIncompleteBuffer");
  expect_open("{\"test\":{\"dtype\":\"I32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}", 14, EST_ERR_DATA_LOSS,
              "MetadataIncompleteBuffer");
  /* Schema: bad dtype, non-string metadata, duplicate keys, non-object, not JSON. */
  expect_open("{\"a\":{\"dtype\":\"X9\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, EST_ERR_DATA_LOSS,
              "InvalidHeaderDeserialization");
  expect_open("{\"__metadata__\":{\"n\":1}}", 0, EST_ERR_DATA_LOSS, "InvalidHeaderDeserialization");
  expect_open("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
              "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}",
              1, EST_ERR_DATA_LOSS, "InvalidHeaderDeserialization");
  expect_open("[]", 0, EST_ERR_DATA_LOSS, "InvalidHeaderDeserialization");
  expect_open("{", 0, EST_ERR_DATA_LOSS, "InvalidHeaderDeserialization");
  expect_open("{\"a\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,1]}}", 1, EST_ERR_DATA_LOSS,
              "InvalidHeaderDeserialization");
  /* test_invalid_header_non_utf8: InvalidHeader itself (the kind is followed by ": "; a
   * bare "InvalidHeader" would also match InvalidHeaderDeserialization / ...Length),
   * also where the bad bytes sit in an otherwise well-formed object: a key, a UTF-16
   * surrogate (ED A0 80) in a metadata value. */
  expect_open("\xff", 0, EST_ERR_DATA_LOSS, "mem: InvalidHeader: ");
  expect_open("{\"\xff\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, EST_ERR_DATA_LOSS,
              "mem: InvalidHeader: ");
  expect_open("{\"__metadata__\":{\"k\":\"\xed\xa0\x80\"}}", 0, EST_ERR_DATA_LOSS, "mem: InvalidHeader: ");

  est_safetensors *st;
  /* test_header_too_small / _too_large / test_invalid_header_length. */
  assert_int_equal(est_safetensors_open_memory(&st, "", 0, "mem"), EST_ERR_DATA_LOSS);
  assert_non_null(strstr(est_error_message(), "HeaderTooSmall"));
  static const uint8_t too_large[8] = {0x3c, 0, 0, 0, 0, 0xff, 0xff, 0xff};
  assert_int_equal(est_safetensors_open_memory(&st, too_large, 8, "mem"), EST_ERR_DATA_LOSS);
  assert_non_null(strstr(est_error_message(), "HeaderTooLarge"));
  static const uint8_t no_header[8] = {60, 0, 0, 0, 0, 0, 0, 0};
  assert_int_equal(est_safetensors_open_memory(&st, no_header, 8, "mem"), EST_ERR_DATA_LOSS);
  assert_non_null(strstr(est_error_message(), "InvalidHeaderLength"));
  /* The limit is N > 100,000,000 (docs/safetensors.md §3), checked before the file size. */
  static const uint8_t just_over[8] = {0x01, 0xe1, 0xf5, 0x05, 0, 0, 0, 0}; /* 100000001 */
  assert_int_equal(est_safetensors_open_memory(&st, just_over, 8, "mem"), EST_ERR_DATA_LOSS);
  assert_non_null(strstr(est_error_message(), "mem: HeaderTooLarge: "));
  static const uint8_t at_limit[8] = {0x00, 0xe1, 0xf5, 0x05, 0, 0, 0, 0}; /* 100000000 */
  assert_int_equal(est_safetensors_open_memory(&st, at_limit, 8, "mem"), EST_ERR_DATA_LOSS);
  assert_non_null(strstr(est_error_message(), "mem: InvalidHeaderLength: "));
  assert_int_equal(est_safetensors_open(&st, "/nonexistent/x.safetensors"), EST_ERR_NOT_FOUND);

  /* The F4 tensor is listed with its safetensors dtype but not readable. */
  size_t n;
  uint8_t *b = file_of("{\"f\":{\"dtype\":\"F4\",\"shape\":[1,2],\"data_offsets\":[0,1]}}", 0, 1, &n);
  assert_int_equal(est_safetensors_open_memory(&st, b, n, "mem"), EST_OK);
  assert_string_equal(est_safetensors_dtype_string(st, "f"), "F4");
  est_dtype dt;
  assert_int_equal(est_safetensors_info(st, "f", &dt, NULL, NULL), EST_OK);
  assert_int_equal(dt, EST_DT_INVALID);
  est_tensor t;
  assert_int_equal(est_safetensors_read(st, "f", &t), EST_ERR_UNIMPLEMENTED);
  est_safetensors_close(st);
  free(b);
}

static void test_round_trip_every_dtype(void **state) {
  (void)state;
  char dir[256], path[300];
  test_make_tmpdir(dir, sizeof dir);
  est_path_join(path, sizeof path, dir, "all.safetensors");
  static const est_dtype dts[] = {EST_DT_FLOAT, EST_DT_DOUBLE, EST_DT_INT32, EST_DT_UINT8, EST_DT_INT16,
                                  EST_DT_INT8, EST_DT_INT64, EST_DT_BOOL, EST_DT_BFLOAT16, EST_DT_UINT16,
                                  EST_DT_HALF, EST_DT_UINT32, EST_DT_UINT64};
  enum { ND = sizeof dts / sizeof dts[0] };
  est_tensor ts[ND];
  char names[ND][32];
  int64_t dims[2] = {3, 5};
  est_safetensors_writer *w;
  assert_int_equal(est_safetensors_writer_open(&w, path), EST_OK);
  for (int i = 0; i < ND; i++) {
    assert_int_equal(est_tensor_alloc(&ts[i], dts[i], 2, dims), EST_OK);
    uint8_t *b = ts[i].data;
    for (size_t k = 0; k < est_tensor_num_bytes(&ts[i]); k++) b[k] = (uint8_t)(k * 31 + (size_t)i);
    snprintf(names[i], sizeof names[i], "bert/%s:0\n\"q\"", est_dtype_name(dts[i])); /* needs escaping */
    assert_int_equal(est_safetensors_writer_add(w, names[i], &ts[i]), EST_OK);
  }
  est_tensor s = {.dtype = EST_DT_STRING};
  assert_int_equal(est_safetensors_writer_add(w, "str", &s), EST_ERR_INVALID_ARGUMENT);
  assert_int_equal(est_safetensors_writer_set_metadata(w, "b", "2"), EST_OK);
  assert_int_equal(est_safetensors_writer_set_metadata(w, "a", "caf\xc3\xa9"), EST_OK);
  assert_int_equal(est_safetensors_writer_set_metadata(w, "b", "3"), EST_OK); /* replaces */
  assert_int_equal(est_safetensors_writer_set_metadata(w, "c", "\xff"), EST_ERR_INVALID_ARGUMENT);
  assert_int_equal(est_safetensors_writer_finish(w), EST_OK);

  uint8_t *file;
  size_t n;
  assert_int_equal(est_read_file(path, &file, &n), EST_OK);
  uint64_t hlen;
  memcpy(&hlen, file, 8);
  assert_int_equal(hlen % 8, 0);
  /* Largest dtypes come first, so every tensor is naturally aligned. */
  assert_non_null(strstr((char *)file + 8, "{\"__metadata__\":{\"a\":\"caf\xc3\xa9\",\"b\":\"3\"},\"bert/uint64:0\\n\\\"q\\\"\""));
  free(file);

  est_safetensors *st;
  assert_int_equal(est_safetensors_open(&st, path), EST_OK);
  assert_int_equal(est_safetensors_count(st), ND);
  assert_string_equal(est_safetensors_metadata_key(st, 0), "a");
  assert_string_equal(est_safetensors_metadata_value(st, 1), "3");
  for (int i = 0; i < ND; i++) {
    est_tensor t;
    assert_int_equal(est_safetensors_read(st, names[i], &t), EST_OK);
    assert_int_equal(t.dtype, dts[i]);
    assert_int_equal(t.rank, 2);
    assert_int_equal(t.dims[1], 5);
    assert_memory_equal(t.data, ts[i].data, est_tensor_num_bytes(&t));
    est_tensor_free(&t);
    est_tensor_free(&ts[i]);
  }
  est_safetensors_close(st);
  test_remove_tree(dir);
}

static void test_writer_header_too_large(void **state) {
  (void)state;
  size_t big = 100000001;
  char *v = malloc(big + 1);
  memset(v, 'x', big);
  v[big] = 0;
  est_safetensors_writer *w;
  assert_int_equal(est_safetensors_writer_open(&w, "unused"), EST_OK);
  assert_int_equal(est_safetensors_writer_set_metadata(w, "k", v), EST_OK);
  uint8_t *out;
  size_t n;
  assert_int_equal(est_safetensors_writer_serialize(w, &out, &n), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "HeaderTooLarge"));
  est_safetensors_writer_abort(w);
  free(v);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_empty_vectors),
    cmocka_unit_test(test_serialization_vectors),
    cmocka_unit_test(test_mini_bert_vector),
    cmocka_unit_test(test_reader_rules),
    cmocka_unit_test(test_round_trip_every_dtype),
    cmocka_unit_test(test_writer_header_too_large),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
