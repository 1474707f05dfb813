/* OpenBLAS's kernel choice (est/threads.h, est_blas_coretype_for / _fix, tools/main.c):
 *  - the rule: only OpenBLAS's generic "Prescott" fallback is replaced, by the widest family
 *    the CPU's features allow, and never where the features do not allow one;
 *  - the command line: a math command run with OPENBLAS_CORETYPE unset ends up on a
 *    non-generic kernel family wherever the CPU has AVX2 + FMA (on a CPU Debian 12's
 *    OpenBLAS 0.3.21 does not know, such as Intel family 6 model 207, it would otherwise
 *    log "OpenBLAS kernels: Prescott"), says so once, and a user's OPENBLAS_CORETYPE is
 *    never overridden. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/threads.h"
#include "test_util.h"

static void test_only_the_generic_fallback_is_replaced(void **state) {
  (void)state;
  const est_cpu_features none = {0, 0, 0}, avx2 = {1, 0, 0}, avx512 = {1, 1, 0}, bf16 = {1, 1, 1};
  assert_string_equal(est_blas_coretype_for("Prescott", bf16), "Cooperlake");
  assert_string_equal(est_blas_coretype_for("Prescott", avx512), "SkylakeX");
  assert_string_equal(est_blas_coretype_for("Prescott", avx2), "Haswell");
  assert_null(est_blas_coretype_for("Prescott", none)); /* a real SSE3-only CPU */
  /* a family OpenBLAS recognised stays, even where a wider one would run */
  assert_null(est_blas_coretype_for("Haswell", bf16));
  assert_null(est_blas_coretype_for("SkylakeX", bf16));
  assert_null(est_blas_coretype_for("Zen", avx512));
  assert_null(est_blas_coretype_for(NULL, bf16));
}

/* Runs an evaluation of a tiny model (no checkpoint: the math commands' start-up path, a
 * second) under `env_prefix` and returns its merged output. */
static char *run_eval(const char *env_prefix) {
  char *out = NULL;
  int rc = test_run(&out, 1,
                    "env %s %s run_classifier --task_name=MRPC --do_eval --data_dir=%s/glue_mini/MRPC "
                    "--vocab_file=%s/vocab_uncased.txt --bert_config_file=%s/run_classifier/bert_config_h32.json "
                    "--output_dir=%s --max_seq_length=32",
                    env_prefix, EST_BIN, EST_TEST_DATA, EST_TEST_DATA, EST_TEST_DATA, test_tmp_path("out"));
  if (rc != 0) fail_msg("run_classifier exited %d:\n%s", rc, out);
  return out;
}

static int count(const char *text, const char *needle) {
  int n = 0;
  for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle)) n++;
  return n;
}

static void test_command_line_runs_the_cpus_kernels(void **state) {
  (void)state;
  char *out = run_eval("-u OPENBLAS_CORETYPE");
  __builtin_cpu_init();
  int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  assert_int_equal(count(out, "OpenBLAS kernels: "), 1);
  if (avx2 && strstr(out, "OpenBLAS kernels: Prescott")) fail_msg("generic kernels on an AVX2 CPU:\n%s", out);
  /* where est stepped in, it said so once, and the family it named is the one in use */
  const char *note = strstr(out, "running with OPENBLAS_CORETYPE=");
  if (note) {
    char core[32] = "", want[64];
    assert_int_equal(sscanf(note, "running with OPENBLAS_CORETYPE=%31[A-Za-z]", core), 1);
    snprintf(want, sizeof want, "OpenBLAS kernels: %s\n", core);
    assert_non_null(strstr(out, want));
    assert_int_equal(count(out, "did not recognise this CPU"), 1);
  }
  free(out);

  out = run_eval("OPENBLAS_CORETYPE=Haswell");
  assert_null(strstr(out, "did not recognise this CPU"));
  assert_non_null(strstr(out, "OpenBLAS kernels: Haswell\n"));
  free(out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_only_the_generic_fallback_is_replaced),
      cmocka_unit_test_setup_teardown(test_command_line_runs_the_cpus_kernels, test_tmpdir_setup, test_tmpdir_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
