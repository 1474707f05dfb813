/* Preemption under `mpirun -np 2 est run_classifier`: only rank 1 gets SIGTERM (in the
 * middle of step 4, by EST_FAULT_SIGNAL_AT_STEP's rank field: tests/fault/fault_hooks.c);
 * the request rides on the all-reduce every step already makes, so both ranks stop after
 * that same step, the chief saves model.ckpt-5, and both exit 143 (no abort, no timeout).
 * The same command run again resumes and ends with a final checkpoint bit-identical to a
 * 2-rank run never interrupted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "est/ckpt.h"
#include "est/est.h"
#include "test_util.h"

#define SMALL_CONFIG EST_TEST_DATA "/run_classifier/bert_config_h32.json"
#define UNCASED EST_TEST_DATA "/vocab_uncased.txt"

/* As tests/test_mpi_run_classifier.c: loopback only, as root if need be, oversubscribed.
 * `fault` adds mpirun options: -x sets a variable for the ranks alone, not for mpirun. */
#define MPIRUN(fault)                                                                        \
  "EST_DIST_TIMEOUT=30 timeout 120"                                                          \
  " env ASAN_OPTIONS=\"$ASAN_OPTIONS:detect_leaks=0:verify_asan_link_order=0\" " EST_MPIEXEC \
  " --allow-run-as-root --oversubscribe --mca btl self,tcp --mca btl_tcp_if_include lo"      \
  " --mca oob_tcp_if_include lo -x OMP_NUM_THREADS=1 -x ASAN_OPTIONS -x EST_DIST_TIMEOUT" fault " -np 2 "
/* 10 CoLA sentences, global batch 4, 4 epochs = 10 steps, a checkpoint every 3. */
#define RUN_WITH(fault)                                                                                           \
  MPIRUN(fault) EST_BIN " run_classifier --task_name=cola --do_train --data_dir=" EST_TEST_DATA "/glue_mini/CoLA" \
  " --vocab_file=" UNCASED " --bert_config_file=" SMALL_CONFIG " --max_seq_length=32"                             \
  " --train_batch_size=4 --learning_rate=1e-3 --save_checkpoints_steps=3 --num_threads=1"                         \
  " --num_train_epochs=4 --output_dir=%s"
#define RUN RUN_WITH("")
/* SIGTERM once, at the start of step 4, on rank 1 only: the shim tests/fault/fault_hooks.c,
 * preloaded into each rank, acts on the variable through libest's fault seam. */
#define RUN_SIGTERM_RANK_1 \
  RUN_WITH(" -x LD_PRELOAD=" EST_FAULT_HOOKS_SHIM " -x EST_FAULT_SIGNAL_AT_STEP=4:15:1:1")

static uint8_t *final_state(const char *dir, size_t *size) {
  char prefix[1024];
  assert_int_equal(est_ckpt_latest(dir, prefix, sizeof prefix), EST_OK);
  assert_non_null(strstr(prefix, "model.ckpt-10"));
  est_ckpt_reader *r;
  assert_int_equal(est_ckpt_reader_open(&r, prefix), EST_OK);
  size_t cap = 1 << 20, len = 0;
  uint8_t *buf = malloc(cap);
  for (size_t i = 0; i < est_ckpt_reader_count(r); i++) {
    const char *name = est_ckpt_reader_name(r, i);
    est_tensor t;
    assert_int_equal(est_ckpt_reader_read(r, name, &t), EST_OK);
    size_t nb = est_tensor_num_bytes(&t), nl = strlen(name) + 1;
    while (len + nl + nb > cap) buf = realloc(buf, cap *= 2);
    memcpy(buf + len, name, nl), len += nl;
    memcpy(buf + len, t.data, nb), len += nb;
    est_tensor_free(&t);
  }
  est_ckpt_reader_close(r);
  *size = len;
  return buf;
}

static void test_one_rank_signalled_all_stop_then_resume(void **state) {
  (void)state;
  char ref[512], dir[512], prefix[1024];
  snprintf(ref, sizeof ref, "%s/ref", test_tmpdir);
  snprintf(dir, sizeof dir, "%s/stopped", test_tmpdir);
  free(test_run_ok(RUN, ref));
  char *log = NULL;
  int rc = test_run(&log, 1, RUN_SIGTERM_RANK_1, dir);
  if (rc != 143) fail_msg("want exit 143, got %d:\n%s", rc, log);
  /* Rank 1 was asked; rank 0 (which logs without a rank tag or with [0]) saved. */
  assert_true(test_count_lines_with(log, "Received SIGTERM at step 5; saved checkpoint", "model.ckpt-5") >= 1);
  free(log);
  assert_int_equal(est_ckpt_latest(dir, prefix, sizeof prefix), EST_OK);
  assert_non_null(strstr(prefix, "model.ckpt-5"));
  free(test_run_ok(RUN, dir));
  size_t na, nb;
  uint8_t *a = final_state(ref, &na), *b = final_state(dir, &nb);
  assert_int_equal(na, nb);
  assert_memory_equal(a, b, na);
  free(a);
  free(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_one_rank_signalled_all_stop_then_resume, test_tmpdir_setup,
                                      test_tmpdir_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
