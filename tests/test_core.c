/* Core services: status messages, dtypes, half/bfloat16, rng, atomic files, flags. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <sys/stat.h>

#include "core/alloc.h"
#include "core/base64.h"
#include "est/est.h"
#include "test_util.h"

static void test_status_message_and_prefix(void **state) {
  (void)state;
  est_error_clear();
  assert_int_equal(est_error_code(), EST_OK);
  assert_int_equal(est_error(EST_ERR_DATA_LOSS, "corrupted record at %d", 12), EST_ERR_DATA_LOSS);
  assert_string_equal(est_error_message(), "corrupted record at 12");
  assert_int_equal(est_error_prefix("%s: ", "a.tf_record"), EST_ERR_DATA_LOSS);
  assert_string_equal(est_error_message(), "a.tf_record: corrupted record at 12");
  assert_string_equal(est_status_name(EST_ERR_OUT_OF_RANGE), "OUT_OF_RANGE");
}

static void test_dtype_names(void **state) {
  (void)state;
  assert_string_equal(est_dtype_name(EST_DT_FLOAT), "float32");
  assert_string_equal(est_dtype_name(EST_DT_HALF), "float16");
  assert_string_equal(est_dtype_name(EST_DT_BFLOAT16), "bfloat16");
  assert_int_equal(est_dtype_from_name("int64"), EST_DT_INT64);
  assert_int_equal(est_dtype_size(EST_DT_INT64), 8);
  assert_int_equal(est_dtype_from_name("nope"), EST_DT_INVALID);
  est_tensor t;
  int64_t dims[2] = {2, 3};
  assert_int_equal(est_tensor_alloc(&t, EST_DT_FLOAT, 2, dims), EST_OK);
  assert_int_equal(est_tensor_num_bytes(&t), 24);
  char buf[32];
  assert_string_equal(est_shape_string(&t, buf, sizeof buf), "[2,3]");
  est_tensor_free(&t);
}

static void test_half_and_bfloat16(void **state) {
  (void)state;
  assert_int_equal(est_float_to_half(1.0f), 0x3c00);
  assert_int_equal(est_float_to_half(-2.0f), 0xc000);
  assert_int_equal(est_float_to_half(65504.0f), 0x7bff);
  assert_int_equal(est_float_to_half(1e6f), 0x7c00);
  assert_true(est_half_to_float(0x0001) == ldexpf(1.0f, -24)); /* smallest subnormal */
  for (uint32_t h = 0; h < 0x7c00; h++) assert_int_equal(est_float_to_half(est_half_to_float((uint16_t)h)), h);
  assert_int_equal(est_float_to_bfloat16(1.0f), 0x3f80);
  assert_true(est_bfloat16_to_float(0x3f80) == 1.0f);
  /* 1 + 2^-8 is a tie between 0x3f80 and 0x3f81: round to even. */
  assert_int_equal(est_float_to_bfloat16(1.0f + ldexpf(1.0f, -8)), 0x3f80);
}

static void test_rng_is_counter_based(void **state) {
  (void)state;
  /* Philox4x32-10 known-answer vector from Random123's kat_vectors: key 0, counter 0. */
  uint32_t out[4];
  est_philox4x32(0, (est_philox_counter){{0, 0, 0, 0}}, out);
  assert_int_equal(out[0], 0x6627e8d5u);
  assert_int_equal(out[1], 0xe169c58du);
  assert_int_equal(out[2], 0xbc57ac4cu);
  assert_int_equal(out[3], 0x9b00dbd8u);
  est_rng a, b;
  est_rng_init(&a, 42);
  for (int i = 0; i < 7; i++) est_rng_u32(&a);
  b = a; /* the state is two integers: copying it replays the stream */
  assert_int_equal(est_rng_u32(&a), est_rng_u32(&b));
  double sum = 0, sq = 0;
  for (int i = 0; i < 20000; i++) {
    float z = est_rng_truncated_normal(&a, 0.02f);
    assert_true(fabsf(z) <= 0.04f);
    sum += z;
    sq += (double)z * z;
  }
  assert_true(fabs(sum / 20000) < 0.001);
  /* A normal truncated at 2 sigma has stddev 0.8796 sigma. */
  assert_true(fabs(sqrt(sq / 20000) - 0.8796 * 0.02) < 0.001);
}

static void test_atomic_file(void **state) {
  (void)state;
  char dir[256], path[512];
  test_make_tmpdir(dir, sizeof dir);
  est_path_join(path, sizeof path, dir, "out.txt");
  assert_int_equal(est_write_file_atomic(path, "old", 3), EST_OK);
  est_atomic_file *f;
  assert_int_equal(est_atomic_open(&f, path), EST_OK);
  fputs("new contents", est_atomic_stream(f));
  uint8_t *data;
  size_t n;
  /* Before commit, readers still see the old file. */
  assert_int_equal(est_read_file(path, &data, &n), EST_OK);
  assert_memory_equal(data, "old", 3);
  free(data);
  est_atomic_abort(f);
  assert_int_equal(est_read_file(path, &data, &n), EST_OK);
  assert_int_equal(n, 3);
  free(data);
  assert_int_equal(est_atomic_open(&f, path), EST_OK);
  fputs("new contents", est_atomic_stream(f));
  assert_int_equal(est_atomic_commit(f), EST_OK);
  assert_int_equal(est_read_file(path, &data, &n), EST_OK);
  assert_string_equal((char *)data, "new contents");
  free(data);
  char out[512];
  assert_int_equal(test_run(NULL, 0, "test $(ls '%s' | wc -l) = 1", dir), 0); /* no temp left */
  est_path_join(out, sizeof out, dir, "a/b/c");
  assert_int_equal(est_mkdirs(out), EST_OK);
  assert_true(est_is_directory(out));
  assert_int_equal(est_read_file("/nonexistent/x", &data, &n), EST_ERR_NOT_FOUND);
  assert_non_null(strstr(est_error_message(), "/nonexistent/x"));
  test_remove_tree(dir);
}

/* est_path_join: one separator, and a path that does not fit is an error, never a cut path. */
static void test_path_join(void **state) {
  (void)state;
  char buf[8];
  assert_int_equal(est_path_join(buf, sizeof buf, "a", "b"), EST_OK);
  assert_string_equal(buf, "a/b");
  assert_int_equal(est_path_join(buf, sizeof buf, "a/", "b"), EST_OK);
  assert_string_equal(buf, "a/b");
  assert_int_equal(est_path_join(buf, sizeof buf, "", "b"), EST_OK);
  assert_string_equal(buf, "b");
  assert_int_equal(est_path_join(buf, sizeof buf, "dir", "fil"), EST_OK); /* 8 bytes with the NUL */
  assert_string_equal(buf, "dir/fil");
  assert_int_equal(est_path_join(buf, sizeof buf, "dir", "file"), EST_ERR_INVALID_ARGUMENT);
  assert_string_equal(buf, "");
  assert_non_null(strstr(est_error_message(), "dir/file (8 bytes) does not fit a 8-byte buffer"));
  assert_int_equal(est_path_join(buf, sizeof buf, "dir/", "file"), EST_ERR_INVALID_ARGUMENT);
  assert_int_equal(est_path_join(buf, 0, "", ""), EST_ERR_INVALID_ARGUMENT);
}

static void test_flags(void **state) {
  (void)state;
  const char *vocab = NULL;
  int64_t seq = 128;
  double lr = 5e-5;
  bool lower = true, train = false;
  est_flag flags[] = {
    EST_FLAG_STRING("vocab_file", &vocab, "vocab", 1),
    EST_FLAG_INT("max_seq_length", &seq, "len", 0),
    EST_FLAG_FLOAT("learning_rate", &lr, "lr", 0),
    EST_FLAG_BOOL("do_lower_case", &lower, "lower", 0),
    EST_FLAG_BOOL("do_train", &train, "train", 0),
  };
  char *pos[4];
  int npos;
  char *argv1[] = {"--vocab_file=v.txt", "--max_seq_length", "64", "--nodo_lower_case", "--do_train",
                   "-learning_rate=2e-5", "file"};
  assert_int_equal(est_flags_parse(flags, 5, 7, argv1, pos, &npos, 4), EST_FLAGS_OK);
  assert_string_equal(vocab, "v.txt");
  assert_int_equal(seq, 64);
  assert_false(lower);
  assert_true(train);
  assert_true(lr == 2e-5);
  assert_int_equal(npos, 1);
  assert_string_equal(pos[0], "file");

  char *argv2[] = {"--vocab_file=v", "--max_seq_length=abc"};
  assert_int_equal(est_flags_parse(flags, 5, 2, argv2, pos, &npos, 4), EST_FLAGS_ERROR);
  assert_non_null(strstr(est_error_message(), "max_seq_length"));
  char *argv3[] = {"--vocab_file=v", "--bogus=1"};
  assert_int_equal(est_flags_parse(flags, 5, 2, argv3, pos, &npos, 4), EST_FLAGS_ERROR);
  assert_non_null(strstr(est_error_message(), "bogus"));
  char *argv4[] = {"--do_train=false"};
  flags[0].is_set = 0;
  assert_int_equal(est_flags_parse(flags, 5, 1, argv4, pos, &npos, 4), EST_FLAGS_ERROR);
  assert_non_null(strstr(est_error_message(), "vocab_file"));
  char *argv5[] = {"--do_lower_case=maybe"};
  assert_int_equal(est_flags_parse(flags, 5, 1, argv5, pos, &npos, 4), EST_FLAGS_ERROR);
  char *argv6[] = {"--help"};
  assert_int_equal(est_flags_parse(flags, 5, 1, argv6, pos, &npos, 4), EST_FLAGS_HELP);
}

/* est_progress: a line at the first batch and at the total, none between when
 * every_seconds is 0; est_format_duration as training's ETA. */
static void test_progress_lines(void **state) {
  (void)state;
  char buf[32];
  est_format_duration(7.4, buf, sizeof buf);
  assert_string_equal(buf, "7s");
  est_format_duration(245, buf, sizeof buf);
  assert_string_equal(buf, "4m05s");
  est_format_duration(3723, buf, sizeof buf);
  assert_string_equal(buf, "1h02m03s");
  est_format_duration(-1, buf, sizeof buf);
  assert_string_equal(buf, "?");
  char path[] = "/tmp/est-progress-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  FILE *log = fdopen(fd, "w+");
  est_log_set_stream(log);
  est_progress p;
  est_progress_start(&p, "Predicting feature", "features", 20, 8, 0.0);
  for (int done = 1; done <= 20; done++) est_progress_update(&p, done);
  est_log_set_stream(stderr);
  rewind(log);
  char text[4096];
  size_t n = fread(text, 1, sizeof text - 1, log);
  text[n] = 0;
  fclose(log);
  unlink(path);
  assert_non_null(strstr(text, "Predicting feature 8/20 (40.0%), "));
  assert_non_null(strstr(text, "Predicting feature 20/20 (100.0%), "));
  assert_non_null(strstr(text, " features/sec, ETA 0s\n"));
  int lines = 0;
  for (const char *c = text; *c; c++) lines += *c == '\n';
  assert_int_equal(lines, 2);
}

/* core/base64.h: RFC 4648's examples, padding optional, the first bad character's index. */
static void test_base64_decode(void **state) {
  (void)state;
  static const struct {
    const char *in, *out;
  } cases[] = {{"", ""}, {"Zg==", "f"}, {"Zm8=", "fo"}, {"Zm9v", "foo"}, {"Zm9vYg", "foob"},
               {"Zm9vYmE=", "fooba"}, {"Zm9vYmFy", "foobar"}, {"+/+/", "\xfb\xff\xbf"}};
  uint8_t out[16];
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const long n = est_base64_decode(cases[i].in, out);
    assert_int_equal(n, (long)strlen(cases[i].out));
    assert_memory_equal(out, cases[i].out, (size_t)n);
  }
  assert_int_equal(est_base64_decode("Zm!v", out), -1 - 2);
  assert_int_equal(est_base64_decode("-", out), -1);
}

/* core/alloc.h's est_grow: doubling from first_cap until need fits; the old array and cap
 * unchanged when the size would overflow. */
static void test_grow(void **state) {
  (void)state;
  size_t cap = 0;
  int *a = est_grow(NULL, &cap, 9, sizeof *a, 4);
  assert_non_null(a);
  assert_int_equal(cap, 16);
  for (int i = 0; i < 9; i++) a[i] = i;
  assert_ptr_equal(est_grow(a, &cap, 16, sizeof *a, 4), a);   /* fits: the same array */
  int *b = est_grow(a, &cap, 17, sizeof *b, 4);
  assert_non_null(b);
  assert_int_equal(cap, 32);
  for (int i = 0; i < 9; i++) assert_int_equal(b[i], i);
  assert_null(est_grow(b, &cap, SIZE_MAX / 2, sizeof *b, 4));
  assert_int_equal(cap, 32);
  free(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_status_message_and_prefix),
    cmocka_unit_test(test_dtype_names),
    cmocka_unit_test(test_half_and_bfloat16),
    cmocka_unit_test(test_rng_is_counter_based),
    cmocka_unit_test(test_atomic_file),
    cmocka_unit_test(test_path_join),
    cmocka_unit_test(test_flags),
    cmocka_unit_test(test_progress_lines),
    cmocka_unit_test(test_base64_decode),
    cmocka_unit_test(test_grow),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
