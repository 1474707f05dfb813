/* `mpirun -np 2 est run_pretraining`: two ranks train (global batch 8 = 4 per rank, the
 * step count one process's) over two interleaved record files and evaluate; the chief
 * alone writes eval_results.txt, and one process evaluating the chief's final checkpoint
 * gets the same metrics (to 1e-5). Skipped in a build without MPI. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/est.h"
#include "test_util.h"

#define TINY EST_TEST_DATA "/keras_bert_tiny"
#define MPIRUN                                                                                    \
  "EST_DIST_TIMEOUT=30 timeout 120 env ASAN_OPTIONS=\"$ASAN_OPTIONS:detect_leaks=0\" " EST_MPIEXEC \
  " --allow-run-as-root --oversubscribe --mca btl self,tcp --mca btl_tcp_if_include lo"            \
  " --mca oob_tcp_if_include lo -x OMP_NUM_THREADS=1 -x ASAN_OPTIONS -x EST_DIST_TIMEOUT -np 2 "
#define COMMON                                                                                    \
  " run_pretraining --bert_config_file=" TINY "/bert_config.json --max_seq_length=16"             \
  " --max_predictions_per_seq=3 --train_batch_size=8 --eval_batch_size=8 --num_train_steps=6"     \
  " --num_warmup_steps=1 --learning_rate=1e-2 --max_eval_steps=3 --seed=2 --num_threads=1"

static void read_values(const char *dir, double v[6]) {
  char *text = test_read_in(dir, "eval_results.txt");
  const char *p = text;
  for (int i = 0; i < 6; i++) {
    const char *eq = strstr(p, " = ");
    if (!eq) fail_msg("%s/eval_results.txt: line %d missing:\n%s", dir, i + 1, text);
    v[i] = strtod(eq + 3, (char **)&p);
  }
  free(text);
}

static void test_two_ranks_train_and_eval(void **state) {
  (void)state;
  char files[1100] = "", one[512], two[512];
  for (int i = 0; i < 2; i++) {
    char f[512];
    snprintf(f, sizeof f, "%s/r%d.tfrecord", test_tmpdir, i);
    free(test_run_ok(EST_BIN " create_pretraining_data --input_file=" EST_TEST_DATA "/pretraining/jack_docs.txt"
                        " --output_file=%s --vocab_file=" TINY "/vocab.txt --max_seq_length=16"
                        " --max_predictions_per_seq=3 --dupe_factor=2 --random_seed=%d", f, 20 + i));
    strcat(files, i ? "," : "");
    strcat(files, f);
  }
  snprintf(two, sizeof two, "%s/ranks2", test_tmpdir);
  snprintf(one, sizeof one, "%s/ranks1", test_tmpdir);
  char *log = test_run_ok(MPIRUN EST_BIN COMMON " --do_train --do_eval --input_file=%s --output_dir=%s", files, two);
  assert_int_equal(test_count_lines_with(log, "[rank 0]", "data parallel: 2 ranks x train batch 4 (global 8)"), 1);
  assert_int_equal(test_count_lines_with(log, "[rank 0]", "***** Eval results *****"), 1);
  assert_int_equal(test_count_lines_with(log, "[rank 1]", "***** Eval results *****"), 0);
  free(log);
  double v2[6], v1[6];
  read_values(two, v2);
  assert_int_equal((int)v2[0], 6);
  /* one process evaluates the chief's checkpoint with the same global batches */
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "mkdir -p %s && cp %s/checkpoint %s/model.ckpt-6.* %s/", one, two, two, one);
  assert_int_equal(system(cmd), 0);
  free(test_run_ok(EST_BIN COMMON " --do_eval --input_file=%s --output_dir=%s", files, one));
  read_values(one, v1);
  for (int i = 0; i < 6; i++)
    if (fabs(v1[i] - v2[i]) > 1e-5) fail_msg("eval_results.txt value %d: 2 ranks %.8g, 1 process %.8g", i + 1, v2[i], v1[i]);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_two_ranks_train_and_eval)};
  return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
