/* The Estimator data-parallel over MPI (est_dist_configure_run_config + the estimator's
 * distribution hook), run by this executable under `mpirun -np 2` in worker mode:
 *
 *   - equivalence: 2 ranks with global batch B end with the same parameters (and Adam
 *     slots) as one process with batch B, to float reassociation (1e-5 relative), and
 *     their sharded evaluation gives the same metrics, and their sharded predictions,
 *     gathered with est_dist_gather_rows, come back complete and in input order;
 *   - faults + resume: rank 1 is SIGKILLed mid-run, then (after a restart) the chief; the
 *     job stops each time (no hang); the same command restarted resumes from the last
 *     checkpoint and ends bit-identical to a run that was never interrupted.
 * Model: tests/estimator_test_model.h's logistic regression with dropout off, and an
 * input_fn here that shards the example stream as Dataset.shard(num_shards, index).
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
#include <time.h>
#include <unistd.h>

#include "est/ckpt.h"
#include "est/dist.h"
#include "est/est.h"
#include "estimator_test_model.h"
#include "test_util.h"

enum { NF = 8, NTRAIN = 64, NEVAL = 37 };

/* ---- a sharded input: global element g of the stream goes to rank g % num_shards ---- */

typedef struct sh_input {
  const tm_data *d;
  est_mode mode;
  int batch, shards, index;
  int64_t pos;      /* local elements consumed */
  float *bx, *bw;
  int64_t *by;
  const char *names[3];
  est_tensor t[3];
} sh_input;

static est_status sh_next(void *self, est_features *out) {
  sh_input *in = self;
  const tm_data *d = in->d;
  int rows = 0;
  for (; rows < in->batch; rows++) {
    int64_t g = (in->pos + rows) * in->shards + in->index; /* this rank's k-th element */
    if (in->mode != EST_MODE_TRAIN && g >= d->n) break;   /* eval: one pass */
    int idx = (int)(g % d->n);                            /* train: repeat forever */
    memcpy(in->bx + (size_t)rows * NF, d->x + (size_t)idx * NF, NF * sizeof(float));
    in->by[rows] = d->y[idx];
    in->bw[rows] = d->w[idx];
  }
  if (rows == 0) return est_error(EST_ERR_OUT_OF_RANGE, "end of input");
  in->pos += rows;
  in->t[0] = (est_tensor){.dtype = EST_DT_FLOAT, .rank = 2, .dims = {rows, NF}, .data = in->bx};
  in->t[1] = (est_tensor){.dtype = EST_DT_FLOAT, .rank = 1, .dims = {rows}, .data = in->bw};
  in->t[2] = (est_tensor){.dtype = EST_DT_INT64, .rank = 1, .dims = {rows}, .data = in->by};
  in->names[0] = "x";
  in->names[1] = "is_real_example";
  in->names[2] = "label";
  *out = (est_features){.batch_size = rows, .count = 3, .names = in->names, .tensors = in->t};
  return EST_OK;
}

static size_t sh_state_size(void *self) {
  (void)self;
  return 1;
}

static est_status sh_get_state(void *self, int64_t *state, size_t cap, size_t *n) {
  if (cap < 1) return est_error(EST_ERR_INVALID_ARGUMENT, "state buffer too small");
  state[0] = ((sh_input *)self)->pos;
  *n = 1;
  return EST_OK;
}

static est_status sh_set_state(void *self, const int64_t *state, size_t n) {
  if (n != 1 || state[0] < 0) return est_error(EST_ERR_INVALID_ARGUMENT, "bad input state");
  ((sh_input *)self)->pos = state[0];
  return EST_OK;
}

static void sh_close(void *self) {
  sh_input *in = self;
  free(in->bx);
  free(in->bw);
  free(in->by);
  free(in);
}

static est_status sh_open(void *ctx, const est_input_params *p, est_input *out) {
  sh_input *in = calloc(1, sizeof *in);
  if (!in) return est_error(EST_ERR_NO_MEMORY, "input");
  in->d = ctx;
  in->mode = p->mode;
  in->batch = p->batch_size;
  in->shards = p->num_shards > 0 ? p->num_shards : 1;
  in->index = p->shard_index;
  in->bx = calloc((size_t)p->batch_size * NF, sizeof(float));
  in->bw = calloc((size_t)p->batch_size, sizeof(float));
  in->by = calloc((size_t)p->batch_size, sizeof(int64_t));
  *out = (est_input){.self = in, .next = sh_next, .state_size = sh_state_size, .get_state = sh_get_state, .set_state = sh_set_state,
                     .close = sh_close};
  return EST_OK;
}

/* ---- worker: train to max_steps, evaluate, predict; the chief writes DIR/eval.txt and
 * DIR/predictions.bin (one float32 probability per eval example, in input order) ---- */

typedef struct collected {
  float *p;
  size_t n, cap;
} collected;

static est_status collect(void *ctx, const est_prediction *pr) {
  collected *c = ctx;
  for (size_t k = 0; k < pr->count; k++) {
    if (strcmp(pr->names[k], "probabilities")) continue;
    if (c->n == c->cap) {
      size_t cap = c->cap ? 2 * c->cap : 16;
      float *grown = realloc(c->p, cap * sizeof(float));
      if (!grown) return est_error(EST_ERR_NO_MEMORY, "predictions");
      c->p = grown;
      c->cap = cap;
    }
    c->p[c->n++] = *(const float *)pr->values[k].data;
  }
  return EST_OK;
}

static int worker(const char *dir, int max_steps, int global_batch, int kill_rank, int kill_step) {
  if (est_dist_init(NULL, NULL) != EST_OK) return fprintf(stderr, "init: %s\n", est_error_message()), 1;
  tm_data train, eval;
  tm_data_make(&train, NTRAIN, NF, 5);
  tm_data_make(&eval, NEVAL, NF, 6);
  tm_params p = tm_params_default(NF);
  p.dropout_keep = 1.0f; /* dropout off: equivalence is exact up to reassociation */
  p.lr = 0.05;
  p.num_train_steps = max_steps;
  p.num_warmup_steps = 2;
  if (est_dist_rank() == kill_rank) p.kill_at_step = kill_step;
  est_model_fn fn = tm_model_fn(&p);
  est_run_config rc = est_run_config_default();
  rc.model_dir = dir;
  rc.seed = 7;
  rc.save_checkpoints_steps = 5;
  rc.log_step_count_steps = 1000;
  rc.save_summary_steps = 0;
  rc.train_batch_size = global_batch;
  rc.eval_batch_size = 6;
  est_distribution hook;
  est_estimator *e = NULL;
  est_eval_result r = {0};
  est_status st = est_dist_configure_run_config(&rc, &hook);
  if (st == EST_OK) st = est_estimator_create(&e, &fn, &rc);
  est_input_fn train_in = {.open = sh_open, .ctx = &train}, eval_in = {.open = sh_open, .ctx = &eval};
  if (st == EST_OK) st = est_estimator_train(e, &train_in, 0, max_steps);
  /* The chief writes the final checkpoint after the last collective of training; without
   * this barrier another rank can look for the latest checkpoint before it exists (the
   * Estimator does not synchronise there yet). */
  if (st == EST_OK) st = est_dist_barrier();
  if (st == EST_OK) st = est_estimator_evaluate(e, &eval_in, 0, NULL, NULL, &r);
  if (st == EST_OK && est_dist_is_chief()) {
    char path[4200];
    snprintf(path, sizeof path, "%s/eval.txt", dir);
    st = est_eval_result_write(&r, path);
  }
  /* Prediction is sharded like evaluation; each rank's rows go back to input order on
   * the chief through est_dist_gather_rows. */
  collected c = {0};
  void *all = NULL;
  size_t total = 0;
  if (st == EST_OK) st = est_estimator_predict(e, &eval_in, NULL, collect, &c);
  if (st == EST_OK) st = est_dist_gather_rows(c.p, c.n, sizeof(float), &all, &total);
  if (st == EST_OK && est_dist_is_chief()) {
    char path[4200];
    snprintf(path, sizeof path, "%s/predictions.bin", dir);
    st = est_write_file_atomic(path, all, total * sizeof(float));
  }
  free(all);
  free(c.p);
  int rc_exit = 0;
  if (st != EST_OK) {
    fprintf(stderr, "rank %d: %s\n", est_dist_rank(), est_error_message());
    rc_exit = 1;
  }
  est_eval_result_clear(&r);
  est_estimator_free(e);
  tm_data_free(&train);
  tm_data_free(&eval);
  if (rc_exit) est_dist_abort(rc_exit);
  est_dist_finalize();
  return rc_exit;
}

/* ---- launcher ---- */

static char self_exe[4096];

/* mpirun on loopback only, as root if need be, more ranks than cores allowed. Under
 * AddressSanitizer (make test SAN=1) LeakSanitizer is off in the ranks: OpenMPI leaks in
 * components it dlclose()s, which no suppression can name; our own code's leaks are still
 * checked by the single-process runs of the same worker code. */
#define MPIRUN                                                                                    \
  "env ASAN_OPTIONS=\"$ASAN_OPTIONS:detect_leaks=0\" " EST_MPIEXEC                                \
  " --allow-run-as-root --oversubscribe --mca btl self,tcp --mca btl_tcp_if_include lo"            \
  " --mca oob_tcp_if_include lo -x OMP_NUM_THREADS=1 -x ASAN_OPTIONS"

static int run_ranks(int np, const char *dir, int steps, int batch, int kill_rank, int kill_step, char **out) {
  if (np == 1)
    return test_run(out, 1, "OMP_NUM_THREADS=1 timeout 120 '%s' --worker '%s' %d %d %d %d", self_exe, dir, steps,
                    batch, kill_rank, kill_step);
  return test_run(out, 1, "timeout 120 " MPIRUN " -np %d '%s' --worker '%s' %d %d %d %d", np, self_exe, dir, steps,
                  batch, kill_rank, kill_step);
}

static void run_ok(int np, const char *dir, int steps, int batch) {
  char *out = NULL;
  int rc = run_ranks(np, dir, steps, batch, -1, -1, &out);
  if (rc != 0) fprintf(stderr, "%s\n", out);
  assert_int_equal(rc, 0);
  free(out);
}

/* Compares every float tensor of two checkpoints: max relative difference (0 = identical). */
static double compare_checkpoints(const char *a_prefix, const char *b_prefix, size_t *ntensors) {
  est_ckpt_reader *a, *b;
  assert_int_equal(est_ckpt_reader_open(&a, a_prefix), EST_OK);
  assert_int_equal(est_ckpt_reader_open(&b, b_prefix), EST_OK);
  assert_int_equal(est_ckpt_reader_count(a), est_ckpt_reader_count(b));
  double worst = 0;
  *ntensors = 0;
  for (size_t i = 0; i < est_ckpt_reader_count(a); i++) {
    const char *name = est_ckpt_reader_name(a, i);
    est_tensor ta, tb;
    assert_int_equal(est_ckpt_reader_read(a, name, &ta), EST_OK);
    assert_int_equal(est_ckpt_reader_read(b, name, &tb), EST_OK);
    if (ta.dtype == EST_DT_FLOAT) {
      (*ntensors)++;
      size_t n = (size_t)est_tensor_num_elements(&ta);
      assert_int_equal(n, est_tensor_num_elements(&tb));
      const float *x = ta.data, *y = tb.data;
      for (size_t k = 0; k < n; k++) {
        double d = fabs((double)x[k] - y[k]), scale = fmax(fabs((double)x[k]), 1e-3);
        if (d / scale > worst) worst = d / scale;
      }
    } else if (!strcmp(name, "global_step")) {
      assert_memory_equal(ta.data, tb.data, sizeof(int64_t));
    }
    est_tensor_free(&ta);
    est_tensor_free(&tb);
  }
  est_ckpt_reader_close(a);
  est_ckpt_reader_close(b);
  return worst;
}

static double eval_value(const char *dir, const char *key) {
  char path[4200], *text = NULL;
  snprintf(path, sizeof path, "%s/eval.txt", dir);
  uint8_t *data;
  size_t size;
  assert_int_equal(est_read_file(path, &data, &size), EST_OK);
  text = realloc(data, size + 1);
  text[size] = 0;
  char pat[128];
  snprintf(pat, sizeof pat, "%s = ", key);
  char *at = strstr(text, pat);
  assert_non_null(at);
  double v = strtod(at + strlen(pat), NULL);
  free(text);
  return v;
}

static void test_two_ranks_equal_one_process(void **state) {
  (void)state;
  char base[4096], one[4200], two[4200], pa[4300], pb[4300];
  test_make_tmpdir(base, sizeof base);
  snprintf(one, sizeof one, "%s/one", base);
  snprintf(two, sizeof two, "%s/two", base);
  run_ok(1, one, 20, 8);
  run_ok(2, two, 20, 8);
  snprintf(pa, sizeof pa, "%s/model.ckpt-20", one);
  snprintf(pb, sizeof pb, "%s/model.ckpt-20", two);
  size_t nt = 0;
  double worst = compare_checkpoints(pa, pb, &nt);
  assert_true(nt >= 6); /* kernel, bias and their adam_m / adam_v slots */
  assert_true(worst <= 1e-5);
  /* the run trained: the kernel moved from its 0.02-stddev initialisation */
  assert_true(eval_value(one, "eval_accuracy") > 0.7);
  /* sharded evaluation (37 examples: 19 + 18, batches of 3 per rank) gives one process's
   * metrics: the accuracy exactly, the losses to float rounding */
  assert_true(eval_value(one, "eval_accuracy") == eval_value(two, "eval_accuracy"));
  assert_true(fabs(eval_value(one, "eval_loss") - eval_value(two, "eval_loss")) <= 1e-5 * eval_value(one, "eval_loss"));
  assert_true(fabs(eval_value(one, "auc") - eval_value(two, "auc")) <= 1e-6);
  assert_true(eval_value(two, "global_step") == 20);
  /* predictions: all 37, in input order, equal to one process's to float rounding */
  char p1[4300], p2[4300];
  snprintf(p1, sizeof p1, "%s/predictions.bin", one);
  snprintf(p2, sizeof p2, "%s/predictions.bin", two);
  uint8_t *a, *b;
  size_t na, nb;
  assert_int_equal(est_read_file(p1, &a, &na), EST_OK);
  assert_int_equal(est_read_file(p2, &b, &nb), EST_OK);
  assert_int_equal(na, NEVAL * sizeof(float));
  assert_int_equal(nb, na);
  const float *fa = (const float *)a, *fb = (const float *)b;
  int distinct = 0;
  for (int i = 0; i < NEVAL; i++) {
    assert_true(fabsf(fa[i] - fb[i]) <= 1e-5f);
    distinct += i > 0 && fabsf(fa[i] - fa[i - 1]) > 1e-3f; /* an order mix-up would show */
  }
  assert_true(distinct > NEVAL / 2);
  free(a);
  free(b);
  test_remove_tree(base);
}

/* A global batch that does not divide over the ranks is refused with a clear message. */
static void test_indivisible_batch_refused(void **state) {
  (void)state;
  char base[4096];
  test_make_tmpdir(base, sizeof base);
  char *out = NULL;
  int rc = run_ranks(2, base, 4, 7, -1, -1, &out);
  assert_int_not_equal(rc, 0);
  assert_non_null(strstr(out, "train_batch_size=7 is the global batch and must divide evenly over the 2 ranks"));
  free(out);
  test_remove_tree(base);
}

static void test_dead_rank_then_exact_resume(void **state) {
  (void)state;
  char base[4096], ref[4200], crash[4200], pa[4300], pb[4300];
  test_make_tmpdir(base, sizeof base);
  snprintf(ref, sizeof ref, "%s/ref", base);
  snprintf(crash, sizeof crash, "%s/crash", base);
  run_ok(2, ref, 20, 8);

  /* rank 1 dies in the middle of step 13 (checkpoints at 5 and 10 exist by then) */
  char *out = NULL;
  time_t t0 = time(NULL);
  int rc = run_ranks(2, crash, 20, 8, 1, 13, &out);
  time_t dt = time(NULL) - t0;
  if (rc == 0 || rc == 124) fprintf(stderr, "%s\n", out);
  assert_int_not_equal(rc, 0);
  assert_int_not_equal(rc, 124);
  assert_true(dt < 100);
  free(out);
  snprintf(pa, sizeof pa, "%s/model.ckpt-10.index", crash);
  assert_true(est_file_exists(pa));
  snprintf(pa, sizeof pa, "%s/model.ckpt-20.index", crash);
  assert_false(est_file_exists(pa));

  /* the same command again, and this time the chief dies in step 16 (after the
   * checkpoint at 15 that this resumed run wrote) */
  t0 = time(NULL);
  rc = run_ranks(2, crash, 20, 8, 0, 16, &out);
  dt = time(NULL) - t0;
  if (rc == 0 || rc == 124) fprintf(stderr, "%s\n", out);
  assert_int_not_equal(rc, 0);
  assert_int_not_equal(rc, 124);
  assert_true(dt < 100);
  free(out);
  snprintf(pa, sizeof pa, "%s/model.ckpt-15.index", crash);
  assert_true(est_file_exists(pa));

  /* and once more: resumes from step 15 on both ranks and ends where the uninterrupted
   * run ended, bit for bit */
  run_ok(2, crash, 20, 8);
  snprintf(pa, sizeof pa, "%s/model.ckpt-20", ref);
  snprintf(pb, sizeof pb, "%s/model.ckpt-20", crash);
  size_t nt = 0;
  assert_true(compare_checkpoints(pa, pb, &nt) == 0.0);
  assert_true(nt >= 6);
  assert_true(eval_value(ref, "eval_accuracy") == eval_value(crash, "eval_accuracy"));
  test_remove_tree(base);
}

int main(int argc, char **argv) {
  if (argc == 7 && !strcmp(argv[1], "--worker"))
    return worker(argv[2], atoi(argv[3]), atoi(argv[4]), atoi(argv[5]), atoi(argv[6]));
  ssize_t len = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
  if (len <= 0) return 1;
  self_exe[len] = 0;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_two_ranks_equal_one_process),
      cmocka_unit_test(test_indivisible_batch_refused),
      cmocka_unit_test(test_dead_rank_then_exact_resume),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
