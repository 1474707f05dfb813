/* --precision=fp32|bf16|int8 on every command that runs the model (est/precision.h): one check,
 * so each refuses the same bad value the same way; an export made in bf16 records it in
 * est_model.json and predicts in it unless --precision says otherwise; predict's bf16
 * probabilities stay within 0.02 of fp32's on the serving test model and texts
 * (serving_test_model.h).
 * Where the CPU has AVX512-BF16 the bf16 run must also differ from fp32 somewhere (else
 * the flag did nothing); elsewhere it must say that it fell back to fp32. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "est/est.h"
#include "serving_test_model.h"

static char out_dir[512];
static char export_base[600];

static int group_setup(void **state) {
  test_tmpdir_setup(state);
  snprintf(out_dir, sizeof out_dir, "%s/run", test_tmpdir);
  snprintf(export_base, sizeof export_base, "%s/export", out_dir);
  /* trained and exported in bf16 */
  char *log = NULL;
  int rc = test_run(&log, 1, EST_BIN " run_classifier --do_train --do_export" SERVING_TEST_FLAGS
                             " --precision=bf16 --output_dir=%s", out_dir);
  if (rc != 0) fail_msg("run_classifier exit %d:\n%s", rc, log);
  free(log);
  return 0;
}

static const char bf16_on[] = "precision bf16: matmul inputs in bfloat16";
static const char bf16_off[] = "this CPU has no AVX512-BF16, so the matmuls run in fp32";

/* est_model.json of a bf16-trained export records it. */
static void test_export_records_its_precision(void **state) {
  (void)state;
  char *out = NULL;
  assert_int_equal(test_run(&out, 1, "cat %s/*/est_model.json", export_base), 0);
  assert_non_null(strstr(out, "\"bert_config\""));
  assert_non_null(strstr(out, "\"precision\": \"bf16\""));
  free(out);
}

static void test_predict_bf16_close_to_fp32(void **state) {
  (void)state;
  char *fp32 = NULL, *bf16 = NULL, *log = NULL, path[700];
  snprintf(path, sizeof path, "%s/bf16.tsv", test_tmpdir);
  /* --precision overrides the export's bf16 */
  assert_int_equal(test_run(&fp32, 0, SERVING_TEST_TEXTS " | " EST_BIN " predict --precision=fp32 --export_dir=%s",
                            export_base), 0);
  /* without it the export's precision runs; stdout to the file, the log (stderr) to `log` */
  assert_int_equal(test_run(&log, 1, "(" SERVING_TEST_TEXTS " | " EST_BIN " predict --export_dir=%s > %s)",
                            export_base, path), 0);
  assert_non_null(strstr(log, "precision bf16, as tsv's est_model.json records (--precision overrides)"));
  bf16 = test_read_file(path, NULL);
  double a[64], b[64];
  int n = serving_parse_floats(fp32, a, 64);
  assert_int_equal(n, 10);
  assert_int_equal(serving_parse_floats(bf16, b, 64), n);
  double worst = 0;
  for (int i = 0; i < n; i++) worst = fmax(worst, fabs(a[i] - b[i]));
  printf("predict: bf16 vs fp32 probabilities, max |diff| %.3g\n", worst);
  assert_true(worst <= 0.02);
  if (strstr(log, bf16_on)) assert_true(worst > 0);
  else assert_non_null(strstr(log, bf16_off));
  free(fp32), free(bf16), free(log);
}

/* Every command refuses a bad value before doing any work, with the flag's name. */
static void test_bad_value_refused_everywhere(void **state) {
  (void)state;
  static const char *const commands[] = {
      "predict --export_dir=/nonexistent",
      "serve --model_base_path=/nonexistent",
      "extract_features --input_file=/nonexistent --output_file=/nonexistent/o --bert_config_file=/nonexistent "
      "--init_checkpoint=/nonexistent --vocab_file=/nonexistent",
      "run_pretraining --bert_config_file=/nonexistent --input_file=/nonexistent --output_dir=/nonexistent",
      "run_classifier --task_name=sst-2 --do_train --data_dir=/nonexistent --vocab_file=/nonexistent "
      "--bert_config_file=/nonexistent --output_dir=/nonexistent",
  };
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
    char *log = NULL;
    int rc = test_run(&log, 1, EST_BIN " %s --precision=fp16", commands[i]);
    if (rc == 0 || !strstr(log, "--precision=fp16: must be fp32, bf16 or int8"))
      fail_msg("est %s --precision=fp16: exit %d\n%s", commands[i], rc, log);
    free(log);
    /* and each lists the flag in its help */
    char cmd[64];
    snprintf(cmd, sizeof cmd, "%.*s", (int)strcspn(commands[i], " "), commands[i]);
    assert_int_equal(test_run(&log, 1, EST_BIN " %s --help", cmd), 0);
    assert_non_null(strstr(log, "--precision"));
    free(log);
  }
}

/* int8 (docs/int8.md): an export made with --do_export --precision=int8 records it; predict
 * runs it, within 0.02 of fp32's probabilities, and gives the same bytes as the reference
 * twin (EST_KERNEL=int8ref) on the fp32 export; training refuses it. Runs last: it adds an export version. */
static void test_int8_export_predicts_as_the_reference(void **state) {
  (void)state;
  char *log = NULL, *fp32 = NULL, *int8 = NULL, *twin = NULL, path[700];
  int rc = test_run(&log, 1, EST_BIN " run_classifier --do_train" SERVING_TEST_FLAGS " --precision=int8 --output_dir=%s/t",
                    test_tmpdir);
  if (rc == 0 || !strstr(log, "--precision=int8 is for inference")) fail_msg("int8 training: exit %d\n%s", rc, log);
  free(log);
  rc = test_run(&log, 1, EST_BIN " run_classifier --do_export" SERVING_TEST_FLAGS " --precision=int8 --output_dir=%s",
                out_dir);
  if (rc != 0) fail_msg("int8 export: exit %d\n%s", rc, log);
  free(log);
  assert_int_equal(test_run(&log, 1, "cat $(ls -d %s/*/ | tail -n 1)est_model.json", export_base), 0);
  assert_non_null(strstr(log, "\"precision\": \"int8\""));
  free(log);
  /* fp32 and the reference twin from the fp32 export (the first version): an int8 export
   * stores int8 weights and runs only int8 on a VNNI kernel (docs/int8.md §4) */
  char first[700];
  assert_int_equal(test_run(&log, 0, "ls -d %s/*/ | head -n 1 | tr -d '\\n'", export_base), 0);
  snprintf(first, sizeof first, "%s", log);
  free(log);
  assert_int_equal(test_run(&fp32, 0, SERVING_TEST_TEXTS " | " EST_BIN " predict --precision=fp32 --export_dir=%s",
                            first), 0);
  snprintf(path, sizeof path, "%s/int8.tsv", test_tmpdir);
  rc = test_run(&log, 1, "(" SERVING_TEST_TEXTS " | " EST_BIN " predict --export_dir=%s > %s)", export_base, path);
  if (rc != 0) { /* no VNNI here: refused, saying why */
    assert_non_null(strstr(log, "so the matmuls run in fp32"));
    assert_non_null(strstr(log, "is an int8 export"));
    free(log), free(fp32);
    return;
  }
  int8 = test_read_file(path, NULL);
  assert_int_equal(test_run(&twin, 0, SERVING_TEST_TEXTS " | EST_KERNEL=int8ref " EST_BIN
                            " predict --precision=int8 --export_dir=%s", first), 0);
  assert_string_equal(int8, twin);
  double a[64], b[64];
  int n = serving_parse_floats(fp32, a, 64);
  assert_int_equal(serving_parse_floats(int8, b, 64), n);
  double worst = 0;
  for (int i = 0; i < n; i++) worst = fmax(worst, fabs(a[i] - b[i]));
  printf("predict: int8 vs fp32 probabilities, max |diff| %.3g\n", worst);
  assert_true(worst <= 0.02);
  if (strstr(log, "precision int8: dense layers quantized")) assert_true(worst > 0);
  else assert_non_null(strstr(log, "so the matmuls run in fp32"));
  free(log), free(fp32), free(int8), free(twin);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_export_records_its_precision),
      cmocka_unit_test(test_predict_bf16_close_to_fp32),
      cmocka_unit_test(test_bad_value_refused_everywhere),
      cmocka_unit_test(test_int8_export_predicts_as_the_reference),
  };
  return cmocka_run_group_tests(tests, group_setup, test_tmpdir_teardown);
}
