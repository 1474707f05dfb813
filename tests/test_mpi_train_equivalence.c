/* N ranks train exactly what one process trains: `mpirun -np 2 est run_classifier` with
 * dropout on (the 32-unit config's 0.1 hidden / attention dropout and the classifier's
 * hard-coded 0.1) ends with the same checkpoint as `est run_classifier` in one process,
 * every variable and optimizer slot within 1e-5 relative (||a - b|| / ||a|| per tensor;
 * float reassociation: two half-batch gradients summed instead of one batch's).
 *
 * That holds because, with the default --input_sharding=global, both ranks read the whole
 * input in the one shuffled order and take rows [r*b, (r+1)*b) of every global batch
 * (est_input_params), and the model draws its dropout masks at those rows' places in the
 * global batch (est_model_context.first_row). The check can fail: with TF's
 * --input_sharding=shard_first the same two ranks see other batches and end elsewhere.
 */
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

#define SMALL_CONFIG EST_TEST_DATA "/run_classifier/bert_config_h32.json"
#define UNCASED EST_TEST_DATA "/vocab_uncased.txt"
#define MRPC EST_TEST_DATA "/glue_mini/MRPC"

/* As test_mpi_run_classifier.c: loopback only, as root if need be, more ranks than cores. */
#define MPIRUN                                                                                    \
  "EST_DIST_TIMEOUT=30 timeout 120 env ASAN_OPTIONS=\"$ASAN_OPTIONS:detect_leaks=0\" " EST_MPIEXEC \
  " --allow-run-as-root --oversubscribe --mca btl self,tcp --mca btl_tcp_if_include lo"            \
  " --mca oob_tcp_if_include lo -x OMP_NUM_THREADS=1 -x ASAN_OPTIONS -x EST_DIST_TIMEOUT -np 2 "

/* 10 examples (the first 12 lines hold 10 MRPC pairs), global batch 4 (2 per rank), 6 epochs
 * = 15 steps; shuffle(100) over all of them. */
#define STEPS 15
#define COMMON                                                                                     \
  " run_classifier --task_name=MRPC --vocab_file=" UNCASED " --bert_config_file=" SMALL_CONFIG      \
  " --max_seq_length=32 --train_batch_size=4 --learning_rate=2e-3 --num_train_epochs=6"            \
  " --num_threads=1 --seed=7 --do_train"

static char tmp[256], data[512];

static void head_file(const char *from, const char *to, int lines) {
  uint8_t *text;
  size_t size, at = 0;
  assert_int_equal(est_read_file(from, &text, &size), EST_OK);
  for (int n = 0; n < lines && at < size; at++)
    if (text[at] == '\n') n++;
  assert_int_equal(est_write_file_atomic(to, text, at), EST_OK);
  free(text);
}

static int setup(void **state) {
  (void)state;
  test_make_tmpdir(tmp, sizeof tmp);
  char path[1024];
  snprintf(data, sizeof data, "%s/mrpc", tmp);
  assert_int_equal(est_mkdirs(data), EST_OK);
  est_path_join(path, sizeof path, data, "train.tsv");
  head_file(MRPC "/train.tsv", path, 13);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  test_remove_tree(tmp);
  return 0;
}

static void train(const char *launcher, const char *extra, const char *out) {
  char *log = NULL;
  int rc = test_run(&log, 1, "%s" EST_BIN COMMON "%s --data_dir=%s --output_dir=%s", launcher, extra, data, out);
  if (rc != 0) fail_msg("training into %s failed (exit %d):\n%s", out, rc, log);
  free(log);
}

/* ||a - b|| / ||a|| (2-norms) of two float tensors; -1 when they differ in shape. */
static double float_tensor_distance(const est_tensor *a, const est_tensor *b) {
  size_t n = est_tensor_num_elements(a);
  if ((size_t)est_tensor_num_elements(b) != n || a->rank != b->rank) return -1;
  double diff = 0, scale = 0;
  for (size_t i = 0; i < n; i++) {
    double x = ((const float *)a->data)[i], y = ((const float *)b->data)[i];
    diff += (x - y) * (x - y);
    scale += x * x;
  }
  return scale > 0 ? sqrt(diff / scale) : sqrt(diff);
}

/* The largest relative distance over every float tensor of the two checkpoints (which
 * must name the same tensors) and their global_step and seed, which must be equal. */
static double checkpoint_distance(const char *dir1, const char *dir2, const char **worst) {
  char p1[1024], p2[1024];
  snprintf(p1, sizeof p1, "%s/model.ckpt-%d", dir1, STEPS);
  snprintf(p2, sizeof p2, "%s/model.ckpt-%d", dir2, STEPS);
  est_ckpt_reader *r1, *r2;
  if (est_ckpt_reader_open(&r1, p1) != EST_OK || est_ckpt_reader_open(&r2, p2) != EST_OK)
    fail_msg("cannot open the final checkpoints: %s", est_error_message());
  assert_int_equal(est_ckpt_reader_count(r1), est_ckpt_reader_count(r2));
  double worst_d = 0;
  size_t floats = 0;
  static char worst_name[256];
  for (size_t i = 0; i < est_ckpt_reader_count(r1); i++) {
    const char *name = est_ckpt_reader_name(r1, i);
    assert_string_equal(name, est_ckpt_reader_name(r2, i));
    if (!strcmp(name, "est/input_state")) continue; /* [world, n]: one row per rank */
    /* The attention key bias adds q . b_k to every score of a query, which softmax
     * ignores: its gradient is exactly 0 in exact arithmetic, so what it and its Adam
     * slots hold is rounding noise scaled up by Adam's m / sqrt(v), in either run. */
    if (strstr(name, "/attention/self/key/bias")) continue;
    est_tensor a, b;
    assert_int_equal(est_ckpt_reader_read(r1, name, &a), EST_OK);
    assert_int_equal(est_ckpt_reader_read(r2, name, &b), EST_OK);
    assert_int_equal(a.dtype, b.dtype);
    if (a.dtype == EST_DT_FLOAT) {
      double d = float_tensor_distance(&a, &b);
      if (d < 0) fail_msg("%s: shapes differ", name);
      if (d > worst_d) {
        worst_d = d;
        snprintf(worst_name, sizeof worst_name, "%s", name);
      }
      floats++;
    } else if (a.dtype == EST_DT_INT64) {
      assert_int_equal(est_tensor_num_elements(&a), 1);
      assert_int_equal(((const int64_t *)a.data)[0], ((const int64_t *)b.data)[0]); /* global_step, est/seed */
    }
    est_tensor_free(&a);
    est_tensor_free(&b);
  }
  assert_true(floats > 20); /* variables and both Adam slots of each */
  est_ckpt_reader_close(r1);
  est_ckpt_reader_close(r2);
  *worst = worst_name;
  return worst_d;
}

static void test_two_ranks_end_with_the_single_process_checkpoint(void **state) {
  (void)state;
  char one[512], two[512], tf_order[512];
  snprintf(one, sizeof one, "%s/one", tmp);
  snprintf(two, sizeof two, "%s/two", tmp);
  snprintf(tf_order, sizeof tf_order, "%s/shard_first", tmp);
  train("", "", one);
  train(MPIRUN, "", two);
  const char *worst;
  double d = checkpoint_distance(one, two, &worst);
  printf("2 ranks vs one process: %.3g relative at most (%s)\n", d, worst);
  if (!(d <= 1e-5)) fail_msg("2 ranks end %.3g (relative) away from one process, worst in %s", d, worst);

  /* TF's shard-first order trains on other batches: far from one process's model. */
  train(MPIRUN, " --input_sharding=shard_first", tf_order);
  d = checkpoint_distance(one, tf_order, &worst);
  printf("shard_first vs one process: %.3g relative at most (%s)\n", d, worst);
  if (!(d > 1e-3)) fail_msg("shard_first ends only %.3g away from one process: the check above cannot fail", d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(test_two_ranks_end_with_the_single_process_checkpoint, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
