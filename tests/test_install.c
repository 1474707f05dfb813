/* `make install` gives a usable library: install this build into a temporary prefix, build
 * examples/logistic_regression.c against the installed headers and libest.a with nothing
 * but `pkg-config --cflags --libs est`, and check that the program trains, checkpoints and
 * predicts exactly as the in-tree build of the same example does. Catches a public header
 * that includes a private one, a header left out of the install, or an est.pc that misses
 * a dependency. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <libgen.h>
#include <string.h>

#include "est/file.h"
#include "test_util.h"

/* Runs a shell command; on failure, fails the test with its output. */
static void run_ok(const char *fmt, ...) {
  char cmd[16384];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  char *out;
  int rc = test_run(&out, 1, "%s", cmd);
  if (rc != 0) fail_msg("'%s' exited %d:\n%s", cmd, rc, out);
  free(out);
}

static void test_installed_library_builds_the_example(void **state) {
  (void)state;
  char prefix[4200], program[4200], data[4200], model_a[4200], model_b[4200];
  snprintf(prefix, sizeof prefix, "%s/prefix", test_tmpdir);
  snprintf(program, sizeof program, "%s/lr", test_tmpdir);
  snprintf(data, sizeof data, "%s/data", test_tmpdir);
  snprintf(model_a, sizeof model_a, "%s/model_installed", test_tmpdir);
  snprintf(model_b, sizeof model_b, "%s/model_in_tree", test_tmpdir);

  run_ok("'%s' --install '%s' --prefix '%s'", EST_CMAKE, EST_BINARY_DIR, prefix);
  char pc[4300];
  snprintf(pc, sizeof pc, "%s/lib/pkgconfig/est.pc", prefix);
  assert_true(est_file_exists(pc));
  /* The compiler and flags the in-tree example was built with (a SAN build installs an
   * instrumented libest.a), so that both programs compute the same floats: gnu11, not c11,
   * whose ISO mode turns off the FMA contraction that -march=native allows. */
  char compile[16384];
  snprintf(compile, sizeof compile,
           "PKG_CONFIG_PATH='%s/lib/pkgconfig' && export PKG_CONFIG_PATH && "
           "'%s' %s -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Werror '%s/examples/logistic_regression.c' -o '%s' "
           "$(pkg-config --cflags --libs est)",
           prefix, EST_CC, EST_CFLAGS, EST_SOURCE_DIR, program);
  run_ok("%s", compile);

  /* The same program built in-tree sits beside `est`. */
  char bin[4096], in_tree[4200];
  snprintf(bin, sizeof bin, "%s", EST_BIN);
  snprintf(in_tree, sizeof in_tree, "%s/example_logistic_regression", dirname(bin));
  run_ok("'%s' make_data --data_dir='%s' --num_train=300 --num_eval=64", program, data);
  const char *flags = "--max_steps=30 --save_checkpoints_steps=10 --batch_size=16 --log_step_count_steps=10";
  run_ok("'%s' train_and_evaluate --data_dir='%s' --model_dir='%s' %s", program, data, model_a, flags);
  run_ok("'%s' train_and_evaluate --data_dir='%s' --model_dir='%s' %s", in_tree, data, model_b, flags);
  /* The example's custom hook (LoggingTensorHook-like), built against the installed library. */
  char *hook_log = NULL, hooked[4300];
  snprintf(hooked, sizeof hooked, "%s_hooked", model_a);
  assert_int_equal(test_run(&hook_log, 0, "'%s' train --data_dir='%s' --model_dir='%s' %s --log_loss_every_n=7",
                            program, data, hooked, flags), 0);
  for (int step = 0; step < 30; step++) {
    char line[32];
    snprintf(line, sizeof line, "step %d: loss ", step);
    if ((strstr(hook_log, line) != NULL) != (step % 7 == 0))
      fail_msg("'%s' %s:\n%s", line, step % 7 ? "printed" : "missing", hook_log);
  }
  free(hook_log);
  run_ok("'%s' predict --data_dir='%s' --model_dir='%s'", program, data, model_a);
  run_ok("'%s' predict --data_dir='%s' --model_dir='%s'", in_tree, data, model_b);

  char pa[4300], pb[4300];
  snprintf(pa, sizeof pa, "%s/predictions.tsv", model_a);
  snprintf(pb, sizeof pb, "%s/predictions.tsv", model_b);
  char *a = test_read_file(pa, NULL), *b = test_read_file(pb, NULL);
  int lines = 0;
  for (char *p = a; *p; p++) lines += *p == '\n';
  assert_int_equal(lines, 64);
  assert_string_equal(a, b);
  free(a);
  free(b);

  /* examples/regression_head.c, a BERT head on the one BERT model_fn (est/bert_head.h):
   * built the same way, it trains and evaluates as the in-tree build does. */
  char head_program[4300], head_a[4300], head_b[4300];
  snprintf(head_program, sizeof head_program, "%s/regression_head", test_tmpdir);
  snprintf(head_a, sizeof head_a, "%s/head_installed", test_tmpdir);
  snprintf(head_b, sizeof head_b, "%s/head_in_tree", test_tmpdir);
  snprintf(compile, sizeof compile,
           "PKG_CONFIG_PATH='%s/lib/pkgconfig' && export PKG_CONFIG_PATH && "
           "'%s' %s -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Werror '%s/examples/regression_head.c' -o '%s' "
           "$(pkg-config --cflags --libs est)",
           prefix, EST_CC, EST_CFLAGS, EST_SOURCE_DIR, head_program);
  run_ok("%s", compile);
  snprintf(bin, sizeof bin, "%s", EST_BIN); /* dirname wrote into it above */
  snprintf(in_tree, sizeof in_tree, "%s/example_regression_head", dirname(bin));
  run_ok("'%s' --model_dir='%s' --max_steps=20", head_program, head_a);
  run_ok("'%s' --model_dir='%s' --max_steps=20", in_tree, head_b);
  a = test_read_in(head_a, "eval_results.txt"), b = test_read_in(head_b, "eval_results.txt");
  assert_non_null(strstr(a, "eval_mse = "));
  assert_string_equal(a, b);
  free(a);
  free(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_installed_library_builds_the_example,
                                      test_tmpdir_setup, test_tmpdir_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
