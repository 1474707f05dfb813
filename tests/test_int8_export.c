/* An int8 export (docs/int8.md §4): `run_classifier --do_export --precision=int8` stores the
 * dense layers that run int8 as int8 codes + per-column scales (serve/int8_weights.h) and the
 * rest fp32. Checked: the bundle's layout and size (the stored layers at 1/4 + 1/K of their
 * fp32 bytes), bit-identical probabilities with an fp32 export run --precision=int8 (API and
 * est predict), the refusal to run it fp32/bf16 or on the int8 reference, and clear errors for
 * stored tensors of the wrong shape or dtype, missing, out of range or corrupt. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "est/ckpt.h"
#include "est/est.h"
#include "est/serving.h"
#include "serving_test_model.h"

static char out_dir[512];
static char fp32_base[600], int8_base[600];

static int group_setup(void **state) {
  test_tmpdir_setup(state);
  snprintf(out_dir, sizeof out_dir, "%s/run", test_tmpdir);
  snprintf(fp32_base, sizeof fp32_base, "%s/export", out_dir);
  snprintf(int8_base, sizeof int8_base, "%s/export_int8", out_dir);
  serving_train_and_export(out_dir);
  char *log = test_run_ok(EST_BIN " run_classifier --do_export --precision=int8" SERVING_TEST_FLAGS
                          " --output_dir=%s --export_dir=%s", out_dir, int8_base);
  free(log);
  return 0;
}

/* The one version under base (its directory) and its bundle's prefix. */
static void version_of(const char *base, char *dir, char *prefix) {
  assert_int_equal(est_export_resolve(base, dir, 1024, NULL), EST_OK);
  snprintf(prefix, 1100, "%s/variables/variables", dir);
}

static long file_size(const char *path) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fclose(f);
  return n;
}

static void test_layout_and_size(void **state) {
  (void)state;
  char d32[1024], d8[1024], p32[1100], p8[1100], path[1200];
  version_of(fp32_base, d32, p32);
  version_of(int8_base, d8, p8);
  char *json = test_read_in(d8, "est_model.json");
  assert_non_null(strstr(json, "\"precision\": \"int8\""));
  free(json);
  est_ckpt_reader *r32, *r8;
  assert_int_equal(est_ckpt_reader_open(&r32, p32), EST_OK);
  assert_int_equal(est_ckpt_reader_open(&r8, p8), EST_OK);
  long saved = 0; /* fp32 bytes of the stored kernels minus their codes and scales */
  int stored = 0;
  for (size_t i = 0; i < est_ckpt_reader_count(r32); i++) {
    const char *name = est_ckpt_reader_name(r32, i);
    char codes[300], scales[300];
    snprintf(codes, sizeof codes, "%s/int8_codes", name);
    snprintf(scales, sizeof scales, "%s/int8_scales", name);
    int64_t dims[EST_MAX_RANK];
    int rank;
    assert_int_equal(est_ckpt_reader_info(r32, name, NULL, &rank, dims), EST_OK);
    const int dense = !strncmp(name, "bert/", 5) && strstr(name, "/kernel") == name + strlen(name) - 7;
    /* a dense kernel of the encoder or pooler is stored int8, everything else fp32 as before */
    assert_int_equal(est_ckpt_reader_has(r8, name), !dense);
    assert_int_equal(est_ckpt_reader_has(r8, codes), dense);
    assert_int_equal(est_ckpt_reader_has(r8, scales), dense);
    if (!dense) continue;
    est_dtype dt;
    int64_t cdims[EST_MAX_RANK];
    assert_int_equal(est_ckpt_reader_info(r8, codes, &dt, &rank, cdims), EST_OK);
    assert_int_equal(dt, EST_DT_INT8);
    assert_true(rank == 2 && cdims[0] == dims[0] && cdims[1] == dims[1]);
    saved += (long)(dims[0] * dims[1] * 4) - (long)(dims[0] * dims[1] + dims[1] * 4);
    stored++;
  }
  assert_int_equal(stored, 7); /* one layer: Q, K, V, attention output, intermediate, output; the pooler */
  est_ckpt_reader_close(r32);
  est_ckpt_reader_close(r8);
  char d32data[1200];
  snprintf(d32data, sizeof d32data, "%s.data-00000-of-00001", p32);
  snprintf(path, sizeof path, "%s.data-00000-of-00001", p8);
  assert_int_equal(file_size(d32data) - file_size(path), saved);
}

/* The probabilities of two rows through a servable of `base` at `precision` (keep it: <0). */
static est_status predict(const char *base, int precision, float p[4], est_servable **keep) {
  int32_t ids[2 * 8] = {101, 2023, 2003, 102, 0, 0, 0, 0, 101, 7592, 2088, 999, 102, 0, 0, 0};
  int32_t mask[2 * 8] = {1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0};
  est_servable *s;
  assert_int_equal(est_servable_load(&s, base, 4), EST_OK);
  if (precision >= 0) est_servable_set_precision(s, (est_precision)precision);
  est_status st = est_servable_predict(s, ids, mask, NULL, 2, 8, p);
  if (keep) *keep = s;
  else est_servable_free(s);
  return st;
}

static void test_bit_identical_with_load_time_quantization(void **state) {
  (void)state;
  float from_fp32[4], from_int8[4], fp32[4];
  est_servable *s;
  assert_int_equal(predict(fp32_base, EST_PRECISION_FP32, fp32, NULL), EST_OK);
  est_status st = predict(int8_base, -1, from_int8, &s);
  assert_true(est_servable_int8_weights(s));
  if (est_servable_precision(s) != EST_PRECISION_INT8) { /* no VNNI here: refused, saying why */
    assert_int_equal(st, EST_ERR_FAILED_PRECONDITION);
    assert_non_null(strstr(est_error_message(), "int8 export"));
    est_servable_free(s);
    skip();
  }
  assert_int_equal(st, EST_OK);
  est_servable_free(s);
  assert_int_equal(predict(fp32_base, EST_PRECISION_INT8, from_fp32, NULL), EST_OK);
  assert_memory_equal(from_int8, from_fp32, sizeof from_fp32);
  assert_memory_not_equal(from_int8, fp32, sizeof fp32); /* it really ran int8 */
  /* the CLI: est predict on the int8 export = on the fp32 export with --precision=int8 */
  char *a = NULL, *b = NULL; /* stdout only: the logs differ */
  assert_int_equal(test_run(&a, 0, SERVING_TEST_TEXTS " | " EST_BIN " predict --export_dir=%s", int8_base), 0);
  assert_int_equal(test_run(&b, 0, SERVING_TEST_TEXTS " | " EST_BIN " predict --precision=int8 --export_dir=%s",
                            fp32_base), 0);
  assert_string_equal(a, b);
  assert_true(strlen(a) > 50);
  free(a), free(b);
}

static void test_runs_only_int8(void **state) {
  (void)state;
  float p[4];
  const est_precision others[2] = {EST_PRECISION_FP32, EST_PRECISION_BF16};
  for (int k = 0; k < 2; k++) {
    assert_int_equal(predict(int8_base, others[k], p, NULL), EST_ERR_FAILED_PRECONDITION);
    assert_non_null(strstr(est_error_message(), "int8 export"));
    assert_non_null(strstr(est_error_message(), "runs only with --precision=int8"));
  }
  /* est predict says so; the plain-C reference twin quantizes the fp32 weights, which an
   * int8 export has not */
  const char *const runs[2][2] = {{"", "--precision=fp32", }, {"EST_KERNEL=int8ref", ""}};
  const char *const said[2] = {"is an int8 export", "not the plain-C reference (EST_KERNEL=int8ref)"};
  for (int k = 0; k < 2; k++) {
    char *log = NULL;
    assert_int_not_equal(test_run(&log, 1, "echo hello | %s " EST_BIN " predict %s --export_dir=%s", runs[k][0],
                                  runs[k][1], int8_base), 0);
    if (!strstr(log, said[k])) fail_msg("expected \"%s\" in:\n%s", said[k], log);
    free(log);
  }
}

/* A copy of the int8 export whose bundle has tensor `name` replaced by t (dropped when t is
 * NULL); returns the copy's directory. */
static const char *tampered(const char *tag, const char *name, const est_tensor *t) {
  char d8[1024], p8[1100];
  version_of(int8_base, d8, p8);
  const char *dir = test_tmp_path(tag);
  char *log = test_run_ok("rm -rf %s && cp -r %s %s", dir, d8, dir);
  free(log);
  char prefix[1200];
  snprintf(prefix, sizeof prefix, "%s/variables/variables", dir);
  est_ckpt_reader *r;
  assert_int_equal(est_ckpt_reader_open(&r, p8), EST_OK);
  const size_t n = est_ckpt_reader_count(r); /* a one-layer model's few dozen tensors */
  est_tensor tensors[n];
  const char *names[n];
  size_t kept = 0;
  for (size_t i = 0; i < n; i++) {
    const char *ni = est_ckpt_reader_name(r, i);
    if (!strcmp(ni, name) && !t) continue;
    names[kept] = ni;
    if (!strcmp(ni, name)) tensors[kept++] = *t;
    else assert_int_equal(est_ckpt_reader_read(r, ni, &tensors[kept++]), EST_OK);
  }
  assert_int_equal(est_ckpt_save(prefix, kept, names, tensors), EST_OK);
  for (size_t i = 0; i < kept; i++)
    if (strcmp(names[i], name)) est_tensor_free(&tensors[i]);
  est_ckpt_reader_close(r);
  return dir;
}

/* Loading dir fails with `code` and a message holding `want`. */
static void load_fails(const char *dir, est_status code, const char *want) {
  est_servable *s = NULL;
  est_status st = est_servable_load(&s, dir, 4);
  if (st == EST_OK) est_servable_free(s);
  assert_int_equal(st, code);
  if (!strstr(est_error_message(), want)) fail_msg("expected \"%s\" in: %s", want, est_error_message());
}

static void test_bad_stored_weights(void **state) {
  (void)state;
  const char *q = "bert/encoder/layer_0/attention/self/query/kernel";
  char codes[200], scales[200];
  snprintf(codes, sizeof codes, "%s/int8_codes", q);
  snprintf(scales, sizeof scales, "%s/int8_scales", q);
  int8_t c[32 * 31] = {0};
  float sc[32] = {0};
  est_tensor wrong_shape = {.dtype = EST_DT_INT8, .rank = 2, .dims = {32, 31}, .data = c};
  load_fails(tampered("shape", codes, &wrong_shape), EST_ERR_INVALID_ARGUMENT, "expected int8 [32, 32]");
  est_tensor wrong_dtype = {.dtype = EST_DT_FLOAT, .rank = 1, .dims = {8}, .data = sc};
  load_fails(tampered("dtype", codes, &wrong_dtype), EST_ERR_INVALID_ARGUMENT, "expected int8 [32, 32]");
  load_fails(tampered("missing", scales, NULL), EST_ERR_NOT_FOUND, "no tensor bert/encoder/layer_0/attention/self/query/kernel/int8_scales");
  int8_t full[32 * 32] = {0};
  full[5 * 32 + 7] = -128;
  est_tensor minus128 = {.dtype = EST_DT_INT8, .rank = 2, .dims = {32, 32}, .data = full};
  load_fails(tampered("minus128", codes, &minus128), EST_ERR_INVALID_ARGUMENT, "int8_codes[5][7] is -128");
  sc[3] = NAN;
  est_tensor nan_scale = {.dtype = EST_DT_FLOAT, .rank = 1, .dims = {32}, .data = sc};
  load_fails(tampered("nan", scales, &nan_scale), EST_ERR_INVALID_ARGUMENT, "int8_scales[3] is nan");
  /* one flipped byte in the codes: the bundle's CRC names the tensor */
  const char *dir = tampered("flip", "nothing", NULL);
  char data[1200];
  snprintf(data, sizeof data, "%s/variables/variables.data-00000-of-00001", dir);
  est_ckpt_reader *r;
  char prefix[1200];
  snprintf(prefix, sizeof prefix, "%s/variables/variables", dir);
  assert_int_equal(est_ckpt_reader_open(&r, prefix), EST_OK);
  est_tensor t;
  assert_int_equal(est_ckpt_reader_read(r, codes, &t), EST_OK);
  est_ckpt_reader_close(r);
  size_t size;
  char *bytes = test_read_file(data, &size);
  char *at = memmem(bytes, size, t.data, 32 * 32); /* the codes' place in the data file */
  assert_non_null(at);
  at[100] ^= 1;
  test_write_bytes(data, bytes, size);
  free(bytes);
  est_tensor_free(&t);
  load_fails(dir, EST_ERR_DATA_LOSS, "int8_codes");
}

int main(void) {
  test_forced_kernel_or_skip();
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_layout_and_size),
    cmocka_unit_test(test_bit_identical_with_load_time_quantization),
    cmocka_unit_test(test_runs_only_int8),
    cmocka_unit_test(test_bad_stored_weights),
  };
  return cmocka_run_group_tests(tests, group_setup, test_tmpdir_teardown);
}
