/* tf.train.Example: the encodings of docs/example.md §2 byte for byte, the parser rules of
 * §3, and tf.io.parse_single_example semantics + error texts (§4, §6 cases 27-45). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "est/est.h"
#include "test_util.h"

static void expect_bytes(const est_example *ex, const char *hex) {
  uint8_t want[512], *got;
  size_t wn = test_unhex(hex, want), n;
  assert_int_equal(est_example_serialize(ex, &got, &n), EST_OK);
  assert_int_equal(n, wn);
  assert_memory_equal(got, want, n);
  free(got);
}

static void expect_json(const uint8_t *data, size_t n, const char *json) {
  est_example ex;
  est_example_init(&ex);
  assert_int_equal(est_example_parse(&ex, data, n), EST_OK);
  char *s;
  size_t len;
  assert_int_equal(est_example_to_json(&ex, &s, &len), EST_OK);
  assert_string_equal(s, json);
  assert_int_equal(strlen(s), len);
  free(s);
  est_example_clear(&ex);
}

static void expect_hex_json(const char *hex, const char *json) {
  uint8_t buf[512];
  size_t n = test_unhex(hex, buf);
  expect_json(buf, n, json);
}

static const char *MAIN_HEX = "0a2b0a150a09696e7075745f69647312081a060a0465e70f660a120a096c6162656c5f69647312051a030a0101";

/* §2: the main vector, its TFRecord framing, and the table of other vectors. */
static void test_serialize_vectors(void **state) {
  (void)state;
  est_example ex;
  est_example_init(&ex);
  int64_t label = 1, ids[3] = {101, 2023, 102};
  /* inserted out of order: the writer sorts */
  assert_int_equal(est_example_set_int64(&ex, "label_ids", &label, 1), EST_OK);
  assert_int_equal(est_example_set_int64(&ex, "input_ids", ids, 3), EST_OK);
  expect_bytes(&ex, MAIN_HEX);
  uint8_t *buf, h[12], f[4];
  size_t n;
  assert_int_equal(est_example_serialize(&ex, &buf, &n), EST_OK);
  est_tfrecord_frame(h, f, buf, n);
  uint8_t wh[12], wf[4];
  test_unhex("2d000000000000003c418afb", wh);
  test_unhex("2a037b9c", wf);
  assert_memory_equal(h, wh, 12);
  assert_memory_equal(f, wf, 4);
  free(buf);
  /* replacing a key */
  int64_t two = 2;
  assert_int_equal(est_example_set_int64(&ex, "label_ids", &two, 1), EST_OK);
  assert_int_equal(ex.count, 2);
  assert_int_equal(est_example_find(&ex, "label_ids")->int64s[0], 2);
  assert_null(est_example_find(&ex, "nope"));
  est_example_clear(&ex);

  expect_bytes(&ex, "0a00"); /* Example(features={}) */
  assert_int_equal(est_example_set_int64(&ex, "x", NULL, 0), EST_OK);
  expect_bytes(&ex, "0a090a070a017812021a00");
  est_example_clear(&ex);
  int64_t neg = -1;
  assert_int_equal(est_example_set_int64(&ex, "neg", &neg, 1), EST_OK);
  expect_bytes(&ex, "0a170a150a036e6567120e1a0c0a0affffffffffffffffff01");
  est_example_clear(&ex);
  float fl[2] = {1.0f, -2.5f};
  assert_int_equal(est_example_set_float(&ex, "f", fl, 2), EST_OK);
  expect_bytes(&ex, "0a130a110a0166120c120a0a080000803f000020c0");
  est_example_clear(&ex);
  est_bytes bs[2] = {{0, (uint8_t *)""}, {2, (uint8_t *)"ab"}};
  assert_int_equal(est_example_set_bytes(&ex, "b", bs, 2), EST_OK);
  expect_bytes(&ex, "0a0f0a0d0a016212080a060a000a026162");
  est_example_clear(&ex);
  assert_int_equal(est_example_set_none(&ex, "k"), EST_OK);
  expect_bytes(&ex, "0a070a050a016b1200");
  est_example_clear(&ex);
}

/* The generic parser reads all of them back, in any map order (Python's default order). */
static void test_parse_vectors_and_json(void **state) {
  (void)state;
  const char *main_json = "{\"input_ids\": {\"int64\": [101, 2023, 102]}, \"label_ids\": {\"int64\": [1]}}";
  expect_hex_json(MAIN_HEX, main_json);
  expect_hex_json("0a2b0a120a096c6162656c5f69647312051a030a01010a150a09696e7075745f69647312081a060a0465e70f66", main_json);
  expect_hex_json("0a090a070a017812021a00", "{\"x\": {\"int64\": []}}");
  expect_hex_json("0a170a150a036e6567120e1a0c0a0affffffffffffffffff01", "{\"neg\": {\"int64\": [-1]}}");
  expect_hex_json("0a130a110a0166120c120a0a080000803f000020c0", "{\"f\": {\"float\": [1, -2.5]}}");
  expect_hex_json("0a0f0a0d0a016212080a060a000a026162", "{\"b\": {\"bytes\": [\"\", \"YWI=\"]}}");
  expect_hex_json("0a070a050a016b1200", "{\"k\": {}}");
  expect_hex_json("0a00", "{}");   /* EmptyFeatures */
  expect_hex_json("", "{}");       /* Example() */
  /* 29: unpacked (08 0d) and packed (0a 01 0d) int64 both parse */
  expect_hex_json("0a0b0a090a01611204" "1a02080d", "{\"a\": {\"int64\": [13]}}");
  expect_hex_json("0a0c0a0a0a01611205" "1a030a010d", "{\"a\": {\"int64\": [13]}}");
  /* unknown top-level field (field 2 varint) is skipped */
  expect_hex_json("1005" "0a00", "{}");
  /* %.9g round-trips float32 */
  est_example ex;
  est_example_init(&ex);
  float v[3] = {0.1f, 3.4028235e38f, 1e-45f};
  est_example_set_float(&ex, "v", v, 3);
  char *s;
  size_t n;
  assert_int_equal(est_example_to_json(&ex, &s, &n), EST_OK);
  assert_string_equal(s, "{\"v\": {\"float\": [0.100000001, 3.40282347e+38, 1.40129846e-45]}}");
  free(s);
  est_example_clear(&ex);
}

/* A map entry missing its key or value, a third field, groups, bad lengths: errors. */
static void test_malformed(void **state) {
  (void)state;
  const char *bad[] = {
      "0a050a031201" "00",   /* entry with value only (12 00 inside is 3 bytes: wrong length) */
      "0a040a0212" "00",     /* entry: value only */
      "0a050a030a0161",      /* entry: key only */
      "0a0b0a090a016112001a0100", /* entry: a third field */
      "0b",                  /* group start */
      "0a05",                /* features length past the end */
      "0a030a0112",          /* entry length past the end */
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    uint8_t buf[64];
    size_t n = test_unhex(bad[i], buf);
    est_example ex;
    est_example_init(&ex);
    assert_int_equal(est_example_parse(&ex, buf, n), EST_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(est_error_message(), "Could not parse example input"));
    est_example_clear(&ex);
    est_feature_spec spec = {.key = "a", .dtype = EST_DT_INT64, .var_len = EST_VAR_LEN};
    est_varlen_value vv = {0};
    void *out[1] = {&vv};
    if (!strcmp(bad[i], "0a05")) {
      /* TF's parser (protobuf's CodedInputStream) clamps an overrunning length to the
       * input: an empty Example to it (test_specs_tf_wire_rules) */
      assert_int_equal(est_example_parse_specs(&spec, 1, buf, n, out, NULL), EST_OK);
      assert_int_equal(vv.count, 0);
      free(vv.values);
      continue;
    }
    assert_int_equal(est_example_parse_specs(&spec, 1, buf, n, out, NULL), EST_ERR_INVALID_ARGUMENT);
    assert_true(strncmp(est_error_message(), "Could not parse example input, value: '", 39) == 0);
    free(vv.values);
  }
  /* every truncation of the main vector: an error or a valid prefix, never a crash */
  uint8_t buf[64];
  size_t n = test_unhex(MAIN_HEX, buf);
  for (size_t len = 0; len < n; len++) {
    est_example ex;
    est_example_init(&ex);
    est_status st = est_example_parse(&ex, buf, len);
    assert_true(len == 0 ? st == EST_OK : st == EST_ERR_INVALID_ARGUMENT);
    est_example_clear(&ex);
  }
}

/* Builds {key: feature} where feature is given as the hex of a serialized Feature. */
static size_t one_feature(uint8_t *out, const char *key, const char *feature_hex) {
  uint8_t feat[256];
  size_t fn = test_unhex(feature_hex, feat), kn = strlen(key);
  size_t entry = 2 + kn + 2 + fn; /* all lengths < 128 in these tests */
  size_t o = 0;
  out[o++] = 0x0a;
  out[o++] = (uint8_t)(entry + 2);
  out[o++] = 0x0a;
  out[o++] = (uint8_t)entry;
  out[o++] = 0x0a;
  out[o++] = (uint8_t)kn;
  memcpy(out + o, key, kn);
  o += kn;
  out[o++] = 0x12;
  out[o++] = (uint8_t)fn;
  memcpy(out + o, feat, fn);
  return o + fn;
}

static est_feature_spec fixed(const char *key, est_dtype t, int rank, const int64_t *shape) {
  est_feature_spec s = {.key = key, .dtype = t, .var_len = EST_FIXED_LEN, .rank = rank};
  for (int i = 0; i < rank; i++) s.shape[i] = shape[i];
  return s;
}

static void expect_spec_error(const est_feature_spec *specs, size_t n, const uint8_t *data, size_t size, void *const *out,
                              const char *msg) {
  assert_int_equal(est_example_parse_specs(specs, n, data, size, out, NULL), EST_ERR_INVALID_ARGUMENT);
  assert_string_equal(est_error_message(), msg);
}

/* 35, 36, 42, 43: defaults and required features. */
static void test_specs_defaults_and_required(void **state) {
  (void)state;
  int64_t shape13[2] = {1, 3}, shape1[1] = {1};
  float dflt_a[3] = {1, 2, 3}, a[3];
  int64_t dflt_b = -1, b;
  est_bytes dflt_c = {1, (uint8_t *)"x"}, c;
  est_feature_spec specs[4] = {fixed("a", EST_DT_FLOAT, 2, shape13), fixed("b", EST_DT_INT64, 1, shape1),
                               fixed("c", EST_DT_STRING, 0, NULL),
                               {.key = "d", .dtype = EST_DT_FLOAT, .var_len = EST_VAR_LEN}};
  specs[0].default_value = dflt_a;
  specs[0].default_count = 3;
  specs[1].default_value = &dflt_b;
  specs[1].default_count = 1;
  specs[2].default_value = &dflt_c;
  specs[2].default_count = 1;
  assert_int_equal(est_feature_specs_validate(specs, 4), EST_OK);
  est_varlen_value d = {0};
  void *out[4] = {a, &b, &c, &d};
  /* empty input: all defaults, VarLen empty */
  assert_int_equal(est_example_parse_specs(specs, 4, (const uint8_t *)"", 0, out, NULL), EST_OK);
  assert_memory_equal(a, dflt_a, sizeof a);
  assert_int_equal(b, -1);
  assert_int_equal(c.size, 1);
  assert_int_equal(d.count, 0);
  /* a kind-less Feature also means "use the default" */
  uint8_t buf[128];
  size_t n = one_feature(buf, "b", "");
  assert_int_equal(est_example_parse_specs(specs, 4, buf, n, out, NULL), EST_OK);
  assert_int_equal(b, -1);
  /* without defaults: missing and kind-less both are "required" errors */
  est_feature_spec req = fixed("c", EST_DT_FLOAT, 0, NULL);
  float cf;
  void *out1[1] = {&cf};
  expect_spec_error(&req, 1, (const uint8_t *)"", 0, out1, "Feature: c (data type: float) is required but could not be found.");
  n = one_feature(buf, "c", "");
  expect_spec_error(&req, 1, buf, n, out1, "Feature: c (data type: float) is required but could not be found.");
  /* the record description prefixes every message */
  assert_int_equal(est_example_parse_specs(&req, 1, buf, n, out1, "train.tf_record record 17"), EST_ERR_INVALID_ARGUMENT);
  assert_string_equal(est_error_message(),
                      "train.tf_record record 17: Feature: c (data type: float) is required but could not be found.");
  free(d.values);
}

/* 37, 40, 45: dense shapes, counts, dtypes; BERT's label_ids cases from §4. */
static void test_specs_dense(void **state) {
  (void)state;
  uint8_t buf[256];
  size_t n;
  int64_t shape13[2] = {1, 3};
  est_feature_spec a = fixed("a", EST_DT_FLOAT, 2, shape13);
  float av[3];
  void *out[1] = {av};
  n = one_feature(buf, "a", "120a0a08" "0000803f" "0000803f"); /* 2 floats for (1,3) */
  expect_spec_error(&a, 1, buf, n, out, "Key: a.  Can't parse serialized Example: Some float_list slice was not parsed.");
  n = one_feature(buf, "a", "120e0a0c" "0000803f" "00000040" "00004040");
  assert_int_equal(est_example_parse_specs(&a, 1, buf, n, out, NULL), EST_OK);
  assert_true(av[0] == 1.0f && av[1] == 2.0f && av[2] == 3.0f);
  /* unpacked floats (0d tags) */
  n = one_feature(buf, "a", "120f" "0d0000803f" "0d00000040" "0d00004040");
  assert_int_equal(est_example_parse_specs(&a, 1, buf, n, out, NULL), EST_OK);
  assert_true(av[2] == 3.0f);

  /* label_ids: FixedLenFeature([], tf.int64) */
  est_feature_spec l = fixed("label_ids", EST_DT_INT64, 0, NULL);
  int64_t label = 0;
  void *lo[1] = {&label};
  n = one_feature(buf, "label_ids", "1a030a0101");
  assert_int_equal(est_example_parse_specs(&l, 1, buf, n, lo, NULL), EST_OK);
  assert_int_equal(label, 1);
  n = one_feature(buf, "label_ids", "1a0c0a0affffffffffffffffff01"); /* -1: a 10-byte varint */
  assert_int_equal(est_example_parse_specs(&l, 1, buf, n, lo, NULL), EST_OK);
  assert_int_equal(label, -1);
  n = one_feature(buf, "label_ids", "1a050a03ffff03"); /* 65535: a 3-byte varint */
  assert_int_equal(est_example_parse_specs(&l, 1, buf, n, lo, NULL), EST_OK);
  assert_int_equal(label, 65535);
  n = one_feature(buf, "label_ids", "1a040a02e70f"); /* 2023: 2 bytes */
  assert_int_equal(est_example_parse_specs(&l, 1, buf, n, lo, NULL), EST_OK);
  assert_int_equal(label, 2023);
  n = one_feature(buf, "label_ids", "1a00");
  expect_spec_error(&l, 1, buf, n, lo, "Key: label_ids.  Can't parse serialized Example: Some int64_list slice was not parsed.");
  n = one_feature(buf, "label_ids", "1a040a020102");
  expect_spec_error(&l, 1, buf, n, lo, "Key: label_ids.  Can't parse serialized Example: Some int64_list slice was not parsed.");
  n = one_feature(buf, "label_ids", "12060a040000803f");
  expect_spec_error(&l, 1, buf, n, lo, "Key: label_ids.  Data types don't match. Data type: float but expected type: int64");
  expect_spec_error(&l, 1, (const uint8_t *)"", 0, lo, "Feature: label_ids (data type: int64) is required but could not be found.");
  /* a key that starts like the spec's key but holds a NUL (found by fuzzing) */
  n = one_feature(buf, "label_idsX", "1a030a0101");
  buf[6 + 9] = 0; /* the entry's key is "label_ids\0": 10 bytes, not the spec's 9 */
  expect_spec_error(&l, 1, buf, n, lo, "Feature: label_ids (data type: int64) is required but could not be found.");
  /* a Feature whose kind tag is none of 0a/12/1a */
  n = one_feature(buf, "label_ids", "2200");
  expect_spec_error(&l, 1, buf, n, lo, "Unsupported datatype.");
  /* a broken list */
  n = one_feature(buf, "label_ids", "1a030a0581");
  expect_spec_error(&l, 1, buf, n, lo, "Key: label_ids.  Can't parse serialized Example: Parsing int64_list failed.");

  /* 40: shapes (1,2,1) and (1,1,1,1), bytes including an empty value */
  int64_t s121[3] = {1, 2, 1}, s1111[4] = {1, 1, 1, 1};
  est_feature_spec specs[2] = {fixed("b", EST_DT_STRING, 3, s121), fixed("c", EST_DT_INT64, 4, s1111)};
  uint8_t two[256];
  size_t n1 = one_feature(buf, "b", "0a060a000a026869");
  size_t n2 = one_feature(two, "c", "1a030a0105");
  memcpy(buf + n1, two, n2); /* 27: two concatenated Examples parse as their union */
  est_bytes bv[2];
  int64_t cv;
  void *o2[2] = {bv, &cv};
  assert_int_equal(est_example_parse_specs(specs, 2, buf, n1 + n2, o2, NULL), EST_OK);
  assert_int_equal(bv[0].size, 0);
  assert_int_equal(bv[1].size, 2);
  assert_memory_equal(bv[1].data, "hi", 2);
  assert_int_equal(cv, 5);
  /* 28, 41: the same key twice: the last one wins */
  n2 = one_feature(two, "c", "1a030a0107");
  memcpy(buf + n1, two, n2);
  size_t n3 = one_feature(buf + n1 + n2, "c", "1a030a0109");
  assert_int_equal(est_example_parse_specs(specs, 2, buf, n1 + n2 + n3, o2, NULL), EST_OK);
  assert_int_equal(cv, 9);
  /* ... but a later kind-less Feature does not hide the earlier value */
  n3 = one_feature(buf + n1 + n2, "c", "");
  assert_int_equal(est_example_parse_specs(specs, 2, buf, n1 + n2 + n3, o2, NULL), EST_OK);
  assert_int_equal(cv, 7);
}

/* 39: VarLenFeature; 44: FixedLenSequenceFeature(allow_missing=True). */
static void test_specs_varlen_and_sequence(void **state) {
  (void)state;
  uint8_t buf[256];
  size_t n;
  est_feature_spec c = {.key = "st_c", .dtype = EST_DT_FLOAT, .var_len = EST_VAR_LEN};
  est_feature_spec d = {.key = "st_d", .dtype = EST_DT_STRING, .var_len = EST_VAR_LEN};
  est_feature_spec both[2] = {c, d};
  est_varlen_value cv = {0}, dv = {0};
  void *out[2] = {&cv, &dv};
  n = one_feature(buf, "st_c", "120a0a08" "00004040" "00008040");
  assert_int_equal(est_example_parse_specs(both, 2, buf, n, out, NULL), EST_OK);
  assert_int_equal(cv.count, 2);
  assert_true(((float *)cv.values)[1] == 4.0f);
  assert_int_equal(dv.count, 0);
  n = one_feature(buf, "st_c", "1200"); /* empty float list */
  assert_int_equal(est_example_parse_specs(both, 2, buf, n, out, NULL), EST_OK);
  assert_int_equal(cv.count, 0);
  n = one_feature(buf, "st_d", ""); /* feature with nothing in it */
  assert_int_equal(est_example_parse_specs(both, 2, buf, n, out, NULL), EST_OK);
  assert_int_equal(dv.count, 0);
  n = one_feature(buf, "st_d", "0a040a026869");
  assert_int_equal(est_example_parse_specs(both, 2, buf, n, out, NULL), EST_OK);
  assert_int_equal(dv.count, 1);
  assert_memory_equal(((est_bytes *)dv.values)[0].data, "hi", 2);
  n = one_feature(buf, "st_c", "1a030a0101");
  expect_spec_error(both, 2, buf, n, out, "Key: st_c.  Data types don't match. Expected type: float, Actual type: int64");
  /* many values grow the buffer */
  est_example ex;
  est_example_init(&ex);
  float many[1000];
  for (int i = 0; i < 1000; i++) many[i] = (float)i;
  est_example_set_float(&ex, "st_c", many, 1000);
  uint8_t *ser;
  size_t sn;
  assert_int_equal(est_example_serialize(&ex, &ser, &sn), EST_OK);
  assert_int_equal(est_example_parse_specs(both, 2, ser, sn, out, NULL), EST_OK);
  assert_int_equal(cv.count, 1000);
  assert_memory_equal(cv.values, many, sizeof many);
  free(ser);
  est_example_clear(&ex);

  est_feature_spec seq = {.key = "a", .dtype = EST_DT_INT64, .var_len = EST_FIXED_LEN_SEQUENCE, .rank = 1, .shape = {2}};
  assert_int_equal(est_feature_specs_validate(&seq, 1), EST_OK);
  est_varlen_value sv = {0};
  void *so[1] = {&sv};
  assert_int_equal(est_example_parse_specs(&seq, 1, (const uint8_t *)"", 0, so, NULL), EST_OK);
  assert_int_equal(sv.count, 0); /* missing: [0, 2] */
  n = one_feature(buf, "a", "1a00");
  assert_int_equal(est_example_parse_specs(&seq, 1, buf, n, so, NULL), EST_OK);
  assert_int_equal(sv.count, 0);
  n = one_feature(buf, "a", "1a060a0401020304");
  assert_int_equal(est_example_parse_specs(&seq, 1, buf, n, so, NULL), EST_OK);
  assert_int_equal(sv.count, 4); /* two rows of stride 2 */
  assert_int_equal(((int64_t *)sv.values)[3], 4);
  n = one_feature(buf, "a", "1a050a03010203");
  expect_spec_error(&seq, 1, buf, n, so,
                    "Error while parsing feature with key a: number of elements should be divisible by 2, found 3 instead");
  free(cv.values);
  free(dv.values);
  free(sv.values);
}

/* 38 and the other graph-construction checks. */
static void test_specs_validate(void **state) {
  (void)state;
  est_feature_spec s = {.key = "a", .dtype = EST_DT_FLOAT, .rank = -1};
  assert_int_equal(est_feature_specs_validate(&s, 1), EST_ERR_INVALID_ARGUMENT);
  assert_string_equal(est_error_message(), "Missing shape for feature a.");
  s.rank = 2;
  s.shape[0] = -1;
  s.shape[1] = 3;
  assert_int_equal(est_feature_specs_validate(&s, 1), EST_ERR_INVALID_ARGUMENT);
  assert_string_equal(est_error_message(),
                      "First dimension of shape for feature a unknown. Consider using FixedLenSequenceFeature.");
  s.shape[0] = 3;
  s.shape[1] = -1;
  assert_int_equal(est_feature_specs_validate(&s, 1), EST_ERR_INVALID_ARGUMENT);
  assert_string_equal(est_error_message(), "All dimensions of shape for feature a need to be known but received [3, None].");
  s.shape[1] = 2;
  float d[5] = {0};
  s.default_value = d;
  s.default_count = 5;
  assert_int_equal(est_feature_specs_validate(&s, 1), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "Cannot reshape a tensor with 5 elements to shape [3, 2] (6 elements)"));
  s.default_count = 6;
  assert_int_equal(est_feature_specs_validate(&s, 1), EST_OK);
  s.dtype = EST_DT_INT32;
  assert_int_equal(est_feature_specs_validate(&s, 1), EST_ERR_INVALID_ARGUMENT);
  assert_string_equal(est_error_message(), "Invalid config dtype: int32");
}

/* 32 SomeFeatures and the writer rules of §2: the empty-string key, an empty list of
 * each kind (the Feature is then `0a 00` / `12 00` / `1a 00`: set, but nothing inside),
 * multi-byte varints 3, 270, 86942; every map entry holds both its key and its value. */
static void test_some_features(void **state) {
  (void)state;
  est_example ex;
  est_example_init(&ex);
  int64_t v[3] = {3, 270, 86942};
  assert_int_equal(est_example_set_int64(&ex, "", v, 3), EST_OK);
  assert_int_equal(est_example_set_bytes(&ex, "b", NULL, 0), EST_OK);
  assert_int_equal(est_example_set_float(&ex, "f", NULL, 0), EST_OK);
  assert_int_equal(est_example_set_int64(&ex, "i", NULL, 0), EST_OK);
  /* 0a 2b features { 0a 0e {0a 00 "" | 12 0a {1a 08 {0a 06 03 8e02 9ea705}}}
   *                  0a 09 {0a 01 "b" | 12 02 {0a 00}}, likewise "f" (12 00), "i" (1a 00) } */
  const char *hex = "0a2b"
                    "0a0e0a00120a1a080a06038e029ea705"
                    "0a070a016212020a00"
                    "0a070a016612021200"
                    "0a070a016912021a00";
  expect_bytes(&ex, hex);
  uint8_t buf[128];
  size_t n = test_unhex(hex, buf);
  expect_json(buf, n, "{\"\": {\"int64\": [3, 270, 86942]}, \"b\": {\"bytes\": []}, \"f\": {\"float\": []}, "
                      "\"i\": {\"int64\": []}}");
  /* The spec parser finds the empty key; the empty lists are present (not missing). */
  int64_t three[3];
  int64_t s3[1] = {3};
  est_feature_spec k = fixed("", EST_DT_INT64, 1, s3);
  void *out[1] = {three};
  assert_int_equal(est_example_parse_specs(&k, 1, buf, n, out, NULL), EST_OK);
  assert_memory_equal(three, v, sizeof v);
  est_feature_spec b = {.key = "b", .dtype = EST_DT_STRING, .var_len = EST_VAR_LEN};
  est_varlen_value bv = {.count = 99};
  void *bo[1] = {&bv};
  assert_int_equal(est_example_parse_specs(&b, 1, buf, n, bo, NULL), EST_OK);
  assert_int_equal(bv.count, 0);
  float dflt = 7;
  est_feature_spec f = fixed("f", EST_DT_FLOAT, 0, NULL);
  f.default_value = &dflt;
  f.default_count = 1;
  float fv;
  void *fo[1] = {&fv};
  expect_spec_error(&f, 1, buf, n, fo, "Key: f.  Can't parse serialized Example: Some float_list slice was not parsed.");
  free(bv.values);
  est_example_clear(&ex);
}

/* §3, what the fast parser accepts: a map entry's key and value in either order,
 * unknown top-level fields of every non-group wire type, groups and field 0 refused.
 * Lists: the first tag decides packed or unpacked; of a packed list only the first run is
 * read (the generic parser, protobuf's semantics, appends every run). */
static void test_parser_rules(void **state) {
  (void)state;
  /* value before key */
  expect_hex_json("0a0b0a0912041a02080d0a0161", "{\"a\": {\"int64\": [13]}}");
  /* unknown fields (varint: test_parse_vectors_and_json): fixed64, length-delimited, fixed32 */
  const char *skipped[] = {"09" "0102030405060708" "0a00", "12" "03616263" "0a00", "1d" "01020304" "0a00",
                           "0a0b0a090a01611204" "1a02080d" "1d01020304"};
  const char *skipped_json[] = {"{}", "{}", "{}", "{\"a\": {\"int64\": [13]}}"};
  for (size_t i = 0; i < sizeof skipped / sizeof *skipped; i++) {
    expect_hex_json(skipped[i], skipped_json[i]);
    uint8_t buf[64];
    size_t n = test_unhex(skipped[i], buf);
    int64_t a = -5, dflt = 42;
    est_feature_spec s = fixed("a", EST_DT_INT64, 0, NULL);
    s.default_value = &dflt;
    s.default_count = 1;
    void *out[1] = {&a};
    assert_int_equal(est_example_parse_specs(&s, 1, buf, n, out, NULL), EST_OK);
    assert_int_equal(a, i == 3 ? 13 : 42);
  }
  /* groups (start field 2, end field 1) and a tag of field 0 */
  const char *refused[] = {"13" "0a00", "0c" "0a00", "00" "0a00"};
  for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
    uint8_t buf[16];
    size_t n = test_unhex(refused[i], buf);
    est_example ex;
    est_example_init(&ex);
    assert_int_equal(est_example_parse(&ex, buf, n), EST_ERR_INVALID_ARGUMENT);
    est_example_clear(&ex);
    est_feature_spec s = {.key = "a", .dtype = EST_DT_INT64, .var_len = EST_VAR_LEN};
    est_varlen_value v = {0};
    void *out[1] = {&v};
    assert_int_equal(est_example_parse_specs(&s, 1, buf, n, out, NULL), EST_ERR_INVALID_ARGUMENT);
    assert_true(strncmp(est_error_message(), "Could not parse example input, value: '", 39) == 0);
    free(v.values);
  }

  /* int64 {0a 01 05, 0a 01 06}: two packed runs */
  uint8_t buf[128];
  size_t n = one_feature(buf, "a", "1a060a01050a0106");
  est_feature_spec var = {.key = "a", .dtype = EST_DT_INT64, .var_len = EST_VAR_LEN};
  est_varlen_value v = {0};
  void *out[1] = {&v};
  assert_int_equal(est_example_parse_specs(&var, 1, buf, n, out, NULL), EST_OK);
  assert_int_equal(v.count, 1);
  assert_int_equal(((int64_t *)v.values)[0], 5);
  int64_t one;
  est_feature_spec fix = fixed("a", EST_DT_INT64, 0, NULL);
  void *fo[1] = {&one};
  assert_int_equal(est_example_parse_specs(&fix, 1, buf, n, fo, NULL), EST_OK);
  assert_int_equal(one, 5);
  expect_json(buf, n, "{\"a\": {\"int64\": [5, 6]}}");
  /* packed, then an unpacked value: still only the first run */
  n = one_feature(buf, "a", "1a050a0105080d");
  assert_int_equal(est_example_parse_specs(&var, 1, buf, n, out, NULL), EST_OK);
  assert_int_equal(v.count, 1);
  assert_int_equal(((int64_t *)v.values)[0], 5);
  /* float {0a 04 1.0, 0a 04 2.0}: the same for packed floats */
  n = one_feature(buf, "a", "120c0a040000803f0a0400000040");
  est_feature_spec fvar = {.key = "a", .dtype = EST_DT_FLOAT, .var_len = EST_VAR_LEN};
  assert_int_equal(est_example_parse_specs(&fvar, 1, buf, n, out, NULL), EST_OK);
  assert_int_equal(v.count, 1);
  assert_true(((float *)v.values)[0] == 1.0f);
  /* unpacked first, then a packed run: the packed tag is not an unpacked value */
  n = one_feature(buf, "a", "1a05080d0a0106");
  expect_spec_error(&var, 1, buf, n, out, "Key: a.  Can't parse serialized Example: Parsing int64_list failed.");
  n = one_feature(buf, "a", "120b0d0000803f0a0400000040");
  expect_spec_error(&fvar, 1, buf, n, out, "Key: a.  Can't parse serialized Example: Parsing float_list failed.");
  /* a first tag that is neither: field 2 of the list */
  n = one_feature(buf, "a", "1a021005");
  expect_spec_error(&var, 1, buf, n, out, "Key: a.  Can't parse serialized Example: Parsing int64_list failed.");
  /* an int64 tag in a float list */
  n = one_feature(buf, "a", "1202080d");
  expect_spec_error(&fvar, 1, buf, n, out, "Key: a.  Can't parse serialized Example: Parsing float_list failed.");
  free(v.values);
}

/* §4 messages for each dtype: "(data type: string)" when required, the bytes_list
 * count error, too many floats. */
static void test_specs_messages_per_dtype(void **state) {
  (void)state;
  uint8_t buf[128];
  size_t n;
  est_bytes bv[2];
  void *bo[1] = {bv};
  est_feature_spec s = fixed("s", EST_DT_STRING, 0, NULL);
  expect_spec_error(&s, 1, (const uint8_t *)"", 0, bo, "Feature: s (data type: string) is required but could not be found.");
  n = one_feature(buf, "s", "0a060a000a026869"); /* two values for shape [] */
  expect_spec_error(&s, 1, buf, n, bo, "Key: s.  Can't parse serialized Example: Some bytes_list slice was not parsed.");
  n = one_feature(buf, "s", "0a00");
  expect_spec_error(&s, 1, buf, n, bo, "Key: s.  Can't parse serialized Example: Some bytes_list slice was not parsed.");
  n = one_feature(buf, "s", "1a030a0101");
  expect_spec_error(&s, 1, buf, n, bo, "Key: s.  Data types don't match. Data type: int64 but expected type: string");
  int64_t two[1] = {2};
  est_feature_spec f = fixed("f", EST_DT_FLOAT, 1, two);
  float fv[2];
  void *fo[1] = {fv};
  n = one_feature(buf, "f", "120e0a0c" "0000803f" "00000040" "00004040"); /* 3 floats for [2] */
  expect_spec_error(&f, 1, buf, n, fo, "Key: f.  Can't parse serialized Example: Some float_list slice was not parsed.");
  n = one_feature(buf, "f", "0a040a026869");
  expect_spec_error(&f, 1, buf, n, fo, "Key: f.  Data types don't match. Data type: string but expected type: float");
}

/* What tf.io.parse_single_example (TF 2.15) accepts although the wire format would not,
 * each found by tests/interop's differential fuzzing, where est rejected it; the expected
 * values are TF's. Specs: a FixedLen int64 [1] default 5, b VarLen float, c VarLen string. */
static void test_specs_tf_wire_rules(void **state) {
  (void)state;
  static const struct {
    const char *hex, *why;
    int64_t a;
    size_t nb, nc;
    float b0;
    const char *c0, *c1;
  } cases[] = {
      {"0a45", "Features length past the end: clamped to the input", 5, 0, 0, 0, NULL, NULL},
      {"1a2e0a170a0161121212", "unknown field's length past the end: skipped to the end", 5, 0, 0, 0, NULL, NULL},
      {"a006bcae86e78b1f0a2e0a0c0a016312070a050a01550a00", "6-byte varint field, then Features clamped", 5, 0, 2,
       0, "U", ""},
      {"0a110a0f0a0162120a12080a060000803f0000", "packed floats in 6 bytes: one float, 2 ignored", 5, 1, 0, 1.0f,
       NULL, NULL},
      {"0a150a130a0161120e1a0c0a0affffffffffffffffff7f", "10-byte varint, bits past 64 dropped", -1, 0, 0, 0, NULL,
       NULL},
      {"00050a0c0a0a0a016112051a030a0107", "field number 0 (varint) skipped", 7, 0, 0, 0, NULL, NULL},
      {"0a0d0a0b8a00016112051a030a0107", "map-entry key tag as a 2-byte varint", 7, 0, 0, 0, NULL, NULL},
      {"1a80808080080a0c0a0a0a016112051a030a0107", "length >= 2^31: not skipped, what follows is parsed", 7, 0, 0, 0,
       NULL, NULL},
  };
  int64_t one[1] = {1}, dflt = 5;
  est_feature_spec specs[3] = {fixed("a", EST_DT_INT64, 1, one),
                               {.key = "b", .dtype = EST_DT_FLOAT, .var_len = EST_VAR_LEN},
                               {.key = "c", .dtype = EST_DT_STRING, .var_len = EST_VAR_LEN}};
  specs[0].default_value = &dflt;
  specs[0].default_count = 1;
  assert_int_equal(est_feature_specs_validate(specs, 3), EST_OK);
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    uint8_t buf[64];
    size_t n = test_unhex(cases[i].hex, buf);
    int64_t a = 0;
    est_varlen_value b = {0}, c = {0};
    void *out[3] = {&a, &b, &c};
    est_status st = est_example_parse_specs(specs, 3, buf, n, out, NULL);
    if (st != EST_OK) fail_msg("%s (%s): %s", cases[i].hex, cases[i].why, est_error_message());
    assert_int_equal(a, cases[i].a);
    assert_int_equal(b.count, cases[i].nb);
    if (cases[i].nb) assert_true(((float *)b.values)[0] == cases[i].b0);
    assert_int_equal(c.count, cases[i].nc);
    for (size_t k = 0; k < c.count; k++) {
      const est_bytes *v = (const est_bytes *)c.values + k;
      const char *want = k == 0 ? cases[i].c0 : cases[i].c1;
      assert_int_equal(v->size, strlen(want));
      assert_memory_equal(v->data, want, v->size);
    }
    free(b.values);
    free(c.values);
  }
}

/* 33: random keys (1-200 chars) and types, 1-4 concatenations: the union, last wins,
 * matches what we built; the generic parse and the spec parse agree. */
static uint32_t rnd_state = 7;
static uint32_t rnd(void) {
  rnd_state = rnd_state * 1664525u + 1013904223u;
  return rnd_state >> 8;
}
#define RND() rnd()

static void test_fuzz_roundtrip(void **state) {
  (void)state;
  for (int iter = 0; iter < 200; iter++) {
    est_example want;
    est_example_init(&want);
    uint8_t all[65536];
    size_t total = 0;
    int parts = 1 + (int)(RND() % 4);
    for (int p = 0; p < parts; p++) {
      est_example ex;
      est_example_init(&ex);
      int nf = (int)(RND() % 5);
      for (int k = 0; k < nf; k++) {
        char key[201];
        int kl = 1 + (int)(RND() % 200);
        for (int i = 0; i < kl; i++) key[i] = (char)('a' + RND() % 3);
        /* mostly keys of <= 3 letters, so parts share keys and "last wins" is exercised */
        key[RND() % 4 && kl > 3 ? 3 : kl] = 0;
        int64_t iv[4];
        float fv[4];
        est_bytes bv[4];
        size_t cnt = RND() % 5;
        for (size_t i = 0; i < cnt; i++) {
          iv[i] = (int64_t)((uint64_t)RND() << 40) - (int64_t)RND();
          fv[i] = (float)RND() / 7.0f;
          bv[i].data = (uint8_t *)key;
          bv[i].size = RND() % 4;
        }
        switch (RND() % 4) {
          case 0: est_example_set_int64(&ex, key, iv, cnt), est_example_set_int64(&want, key, iv, cnt); break;
          case 1: est_example_set_float(&ex, key, fv, cnt), est_example_set_float(&want, key, fv, cnt); break;
          case 2: est_example_set_bytes(&ex, key, bv, cnt), est_example_set_bytes(&want, key, bv, cnt); break;
          default: est_example_set_none(&ex, key), est_example_set_none(&want, key); break;
        }
      }
      uint8_t *ser;
      size_t n;
      assert_int_equal(est_example_serialize(&ex, &ser, &n), EST_OK);
      assert_true(total + n <= sizeof all);
      memcpy(all + total, ser, n);
      total += n;
      free(ser);
      est_example_clear(&ex);
    }
    est_example got;
    est_example_init(&got);
    assert_int_equal(est_example_parse(&got, all, total), EST_OK);
    char *a, *b;
    size_t an, bn;
    est_example_to_json(&want, &a, &an);
    est_example_to_json(&got, &b, &bn);
    assert_string_equal(a, b);
    free(a);
    free(b);
    /* the spec parser agrees for every int64 feature that is present with a kind */
    for (size_t i = 0; i < want.count; i++) {
      const est_feature *f = &want.features[i];
      if (f->kind != EST_FEATURE_INT64) continue;
      est_feature_spec s = {.key = f->key, .dtype = EST_DT_INT64, .var_len = EST_VAR_LEN};
      est_varlen_value v = {0};
      void *out[1] = {&v};
      assert_int_equal(est_example_parse_specs(&s, 1, all, total, out, NULL), EST_OK);
      assert_int_equal(v.count, f->count);
      if (f->count) assert_memory_equal(v.values, f->int64s, f->count * sizeof(int64_t));
      free(v.values);
    }
    est_example_clear(&got);
    est_example_clear(&want);
  }
}

/* The real TF-written MRPC eval file: all 408 Examples parse with run_classifier's specs,
 * and the generic parse + our serializer give Examples with identical content. */
static void test_real_mrpc_records(void **state) {
  (void)state;
  int64_t s128[1] = {128};
  est_feature_spec specs[5] = {
      fixed("input_ids", EST_DT_INT64, 1, s128), fixed("input_mask", EST_DT_INT64, 1, s128),
      fixed("segment_ids", EST_DT_INT64, 1, s128), fixed("label_ids", EST_DT_INT64, 0, NULL),
      fixed("is_real_example", EST_DT_INT64, 0, NULL)};
  assert_int_equal(est_feature_specs_validate(specs, 5), EST_OK);
  int64_t ids[128], mask[128], seg[128], label, real;
  void *out[5] = {ids, mask, seg, &label, &real};
  est_tfrecord_reader *r;
  assert_int_equal(est_tfrecord_reader_open(&r, EST_TEST_DATA "/mrpc_eval.tf_record", EST_COMPRESSION_NONE), EST_OK);
  const uint8_t *d;
  size_t n;
  int count = 0, positives = 0;
  while (est_tfrecord_reader_next(r, &d, &n) == EST_OK) {
    assert_int_equal(est_example_parse_specs(specs, 5, d, n, out, "mrpc_eval.tf_record"), EST_OK);
    assert_int_equal(ids[0], 101); /* [CLS] */
    assert_int_equal(real, 1);
    assert_true(label == 0 || label == 1);
    positives += (int)label;
    int len = 0;
    while (len < 128 && mask[len] == 1) len++;
    for (int i = len; i < 128; i++) assert_true(mask[i] == 0 && ids[i] == 0 && seg[i] == 0);
    assert_int_equal(ids[len - 1], 102); /* [SEP] */
    est_example ex;
    est_example_init(&ex);
    assert_int_equal(est_example_parse(&ex, d, n), EST_OK);
    assert_int_equal(ex.count, 5);
    uint8_t *ser;
    size_t sn;
    assert_int_equal(est_example_serialize(&ex, &ser, &sn), EST_OK);
    assert_int_equal(sn, n); /* same bytes in another map order */
    est_example back;
    est_example_init(&back);
    assert_int_equal(est_example_parse(&back, ser, sn), EST_OK);
    char *a, *b;
    size_t an, bn;
    est_example_to_json(&ex, &a, &an);
    est_example_to_json(&back, &b, &bn);
    assert_string_equal(a, b);
    free(a);
    free(b);
    free(ser);
    est_example_clear(&back);
    est_example_clear(&ex);
    count++;
  }
  est_tfrecord_reader_close(r);
  assert_int_equal(count, 408);
  assert_int_equal(positives, 279); /* MRPC dev: 279 paraphrases of 408 */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_serialize_vectors),
      cmocka_unit_test(test_parse_vectors_and_json),
      cmocka_unit_test(test_malformed),
      cmocka_unit_test(test_specs_defaults_and_required),
      cmocka_unit_test(test_specs_dense),
      cmocka_unit_test(test_specs_varlen_and_sequence),
      cmocka_unit_test(test_specs_validate),
      cmocka_unit_test(test_some_features),
      cmocka_unit_test(test_parser_rules),
      cmocka_unit_test(test_specs_messages_per_dtype),
      cmocka_unit_test(test_specs_tf_wire_rules),
      cmocka_unit_test(test_fuzz_roundtrip),
      cmocka_unit_test(test_real_mrpc_records),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
