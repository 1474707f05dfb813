/* est extract_features against tests/data/extract_features/expected.jsonl, written by
 * tests/reference/extract_features_ref.py (an independent float64 BERT forward and
 * extract_features.py's output code) on the TF-written keras_bert_tiny checkpoint: the same
 * lines, keys in the same order, tokens, layer indexes, and values within 2e-6 (both round
 * to 6 places; float32 against float64 can move the 6th digit by one). Python's repr of
 * round(x, 6) and json.dumps' string escapes are checked digit for digit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <string.h>

#include "est/est.h"
#include "est/serving.h"
#include "test_util.h"

#define KBT EST_TEST_DATA "/keras_bert_tiny"
#define XF_FLAGS                                                                                           \
  " --input_file=" EST_TEST_DATA "/extract_features/input.txt --bert_config_file=" KBT "/bert_config.json" \
  " --init_checkpoint=" KBT "/bert_model.ckpt --vocab_file=" KBT "/vocab.txt --max_seq_length=10 --num_threads=1"

static void test_py_round_repr(void **state) {
  (void)state;
  const struct {
    double v;
    int n;
    const char *want; /* Python 3: repr(round(v, n)) */
  } cases[] = {{1.0, 6, "1.0"},          {-1e-7, 6, "-0.0"},         {0.00001234, 6, "1.2e-05"},
               {0.000123, 6, "0.000123"}, {12.5, 6, "12.5"},          {2.675, 2, "2.67"},
               {5e-07, 6, "0.0"},         {-1.5e-05, 6, "-1.5e-05"},  {9.999e-05, 6, "0.0001"},
               {123456.1234567, 6, "123456.123457"}, {0.1, 6, "0.1"}, {-2.0000004, 6, "-2.0"},
               {1e-4, 6, "0.0001"},       {0.0, 6, "0.0"},            {0.000001, 6, "1e-06"}};
  char buf[64];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    assert_string_equal(est_py_round_repr(cases[i].v, cases[i].n, buf, sizeof buf), cases[i].want);
}

static void test_py_json_string(void **state) {
  (void)state;
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  /* json.dumps('a"b\\c\n\t\x01é中😀') */
  est_py_json_string(f, "a\"b\\c\n\t\x01\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80");
  fclose(f);
  assert_string_equal(text, "\"a\\\"b\\\\c\\n\\t\\u0001\\u00e9\\u4e2d\\ud83d\\ude00\"");
  free(text);
}

/* Key names of an object in order, joined by ','. */
static void keys(const json_t *o, char *buf, size_t size) {
  buf[0] = 0;
  const char *k;
  json_t *v;
  json_object_foreach((json_t *)o, k, v) {
    strncat(buf, k, size - strlen(buf) - 2);
    strcat(buf, ",");
  }
}

/* Two extract_features outputs line by line: the same keys in the same order, tokens and
 * layer indexes, and every value within tol; returns the number of values, and in *identical
 * how many agree to the last digit. */
static int compare_jsonl(char *got, char *want, double tol, int *identical) {
  char *gs, *ws;
  char *gl = strtok_r(got, "\n", &gs), *wl = strtok_r(want, "\n", &ws);
  int lines = 0, values = 0;
  char kg[256], kw[256];
  *identical = 0;
  while (gl && wl) {
    assert_memory_equal(gl, "{\"linex_index\": ", 16);
    json_t *g = json_loads(gl, 0, NULL), *w = json_loads(wl, 0, NULL);
    assert_non_null(g);
    assert_non_null(w);
    keys(g, kg, sizeof kg), keys(w, kw, sizeof kw);
    assert_string_equal(kg, kw);
    assert_int_equal(json_integer_value(json_object_get(g, "linex_index")), lines);
    json_t *fg = json_object_get(g, "features"), *fw = json_object_get(w, "features");
    assert_int_equal(json_array_size(fg), json_array_size(fw));
    for (size_t t = 0; t < json_array_size(fw); t++) {
      json_t *a = json_array_get(fg, t), *b = json_array_get(fw, t);
      keys(a, kg, sizeof kg), keys(b, kw, sizeof kw);
      assert_string_equal(kg, kw);
      assert_string_equal(json_string_value(json_object_get(a, "token")), json_string_value(json_object_get(b, "token")));
      json_t *la = json_object_get(a, "layers"), *lb = json_object_get(b, "layers");
      assert_int_equal(json_array_size(la), 3);
      for (size_t k = 0; k < 3; k++) {
        json_t *x = json_array_get(la, k), *y = json_array_get(lb, k);
        assert_int_equal(json_integer_value(json_object_get(x, "index")), json_integer_value(json_object_get(y, "index")));
        json_t *vx = json_object_get(x, "values"), *vy = json_object_get(y, "values");
        assert_int_equal(json_array_size(vx), 4);               /* hidden_size */
        assert_int_equal(json_array_size(vy), 4);
        for (size_t h = 0; h < 4; h++) {
          double p = json_number_value(json_array_get(vx, h)), q = json_number_value(json_array_get(vy, h));
          assert_true(fabs(p - q) <= tol);
          assert_true(fabs(p * 1e6 - round(p * 1e6)) < 1e-3);   /* 6 places */
          values++;
          *identical += p == q;
        }
      }
    }
    json_decref(g), json_decref(w);
    lines++;
    gl = strtok_r(NULL, "\n", &gs);
    wl = strtok_r(NULL, "\n", &ws);
  }
  assert_null(gl);
  assert_null(wl);
  assert_int_equal(lines, 8);
  return values;
}

static void test_matches_reference(void **state) {
  (void)state;
  char dir[256], out[512];
  test_make_tmpdir(dir, sizeof dir);
  snprintf(out, sizeof out, "%s/features.jsonl", dir);
  char *log = NULL;
  int rc = test_run(&log, 1, EST_BIN " extract_features" XF_FLAGS " --layers=-1,-2,0 --batch_size=3 --output_file=%s", out);
  if (rc) fail_msg("exit %d:\n%s", rc, log);
  free(log);
  char *got = test_read_file(out, NULL), *want = test_read_file(EST_TEST_DATA "/extract_features/expected.jsonl", NULL);
  int identical, values = compare_jsonl(got, want, 2e-6, &identical);
  assert_true(values > 600);
  assert_true(identical > values * 9 / 10);                   /* most agree to the last digit */
  free(got), free(want);

  /* -2 and 0 are the same layer of this 2-layer model, and the batch size changes nothing
   * but the GEMMs' row counts: OpenBLAS need not give rows of a 10-row product the bits it
   * gives them in a 30-row one (docs/testing.md §2), so the values agree within one unit
   * of their 6th place, not necessarily digit for digit */
  char out2[512];
  snprintf(out2, sizeof out2, "%s/features2.jsonl", dir);
  assert_int_equal(test_run(NULL, 1, EST_BIN " extract_features" XF_FLAGS " --layers=-1,-2,0 --batch_size=1 --output_file=%s",
                            out2), 0);
  got = test_read_file(out, NULL);
  char *got2 = test_read_file(out2, NULL);
  values = compare_jsonl(got2, got, 1e-6 + 1e-12, &identical);
  print_message("batch size 1 against 3: %d of %d values agree to the last digit\n", identical, values);
  free(got), free(got2);
  test_remove_tree(dir);
}

static void test_errors(void **state) {
  (void)state;
  char *log = NULL;
  assert_int_equal(test_run(&log, 1, EST_BIN " extract_features" XF_FLAGS " --layers=-3 --output_file=/tmp/never"), 1);
  assert_non_null(strstr(log, "--layers=-3: layer -3 outside the model's 2 layers"));
  free(log);
  assert_int_equal(test_run(&log, 1, EST_BIN " extract_features" XF_FLAGS " --layers=1,x --output_file=/tmp/never"), 1);
  assert_non_null(strstr(log, "not a comma-separated list"));
  free(log);
  assert_int_equal(test_run(&log, 1, EST_BIN " extract_features" XF_FLAGS " --max_seq_length=17 --output_file=/tmp/never"), 1);
  assert_non_null(strstr(log, "--max_seq_length=17"));
  free(log);
  assert_false(est_file_exists("/tmp/never"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_py_round_repr),
    cmocka_unit_test(test_py_json_string),
    cmocka_unit_test(test_matches_reference),
    cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
