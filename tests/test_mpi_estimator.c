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
 *   - a finite training input whose shards end at different steps: every rank stops at
 *     the first shard's end (no mismatched collectives), as one process would;
 *   - train_and_evaluate: every evaluation after a save sees that checkpoint on all ranks;
 *   - a hook's stop request on rank 1 alone stops both ranks after the same step;
 *   - the model reporting gradient ranges (est_grads_ready) overlaps the all-reduce with
 *     backward and still equals one process; the TPU-style sum is twice the mean of 2.
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

/* Worker modes (a bit set). */
enum {
  MODE_FINITE = 1,     /* TRAIN reads its shard once, whole batches only; train until it ends */
  MODE_TAE = 2,        /* train_and_evaluate instead of train + evaluate */
  MODE_OVERLAP = 4,    /* the model reports each variable's gradient as final (est_grads_ready) */
  MODE_SUM = 8,        /* grad_reduction = EST_GRAD_SUM */
  MODE_PLAIN = 16,     /* a hook without grads_begin/ready/finish: allreduce_mean of the buffer */
  MODE_NOCLIP = 32,    /* AdamWeightDecay without global-norm clipping (the sum would be clipped) */
  MODE_TRAIN_FAIL = 64,  /* rank 1's training input fails at its 7th batch */
  MODE_EVAL_FAIL = 128,  /* rank 1's evaluation input cannot be opened */
  MODE_SPLIT_DIR = 256,  /* rank 1 uses DIR/rank1 as model_dir (as if not on a shared filesystem) */
  MODE_HOOK_STOP = 512,  /* a hook on rank 1 alone requests a stop after global step 6 */
};
static int g_mode;

/* ---- a sharded input: global element g of the stream goes to rank g % num_shards ---- */

typedef struct sh_input {
  const tm_data *d;
  est_mode mode;
  int batch, shards, index;
  int64_t pos;      /* local elements consumed */
  int finite;       /* TRAIN: one pass, whole batches only */
  float *bx, *bw;
  int64_t *by;
  const char *names[3];
  est_tensor t[3];
} sh_input;

static est_status sh_next(void *self, est_features *out) {
  sh_input *in = self;
  const tm_data *d = in->d;
  int rows = 0;
  if ((g_mode & MODE_TRAIN_FAIL) && in->mode == EST_MODE_TRAIN && in->index == 1 && in->pos == 6 * in->batch)
    return est_error(EST_ERR_DATA_LOSS, "train.tfrecord: corrupted record at 1234 (test)");
  if (in->finite && (in->pos + in->batch - 1) * in->shards + in->index >= d->n)
    return est_error(EST_ERR_OUT_OF_RANGE, "end of input");   /* drop_remainder */
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
  if ((g_mode & MODE_EVAL_FAIL) && p->mode == EST_MODE_EVAL && p->shard_index == 1)
    return est_error(EST_ERR_NOT_FOUND, "eval.tfrecord: No such file or directory (test)");
  sh_input *in = calloc(1, sizeof *in);
  if (!in) return est_error(EST_ERR_NO_MEMORY, "input");
  in->d = ctx;
  in->mode = p->mode;
  in->batch = p->batch_size;
  in->shards = p->num_shards > 0 ? p->num_shards : 1;
  in->index = p->shard_index;
  in->finite = p->mode == EST_MODE_TRAIN && (g_mode & MODE_FINITE);
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
  if (pr->index != (int64_t)c->n)
    return est_error(EST_ERR_INTERNAL, "prediction index %lld, expected %zu", (long long)pr->index, c->n);
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

/* MODE_OVERLAP: the test model, plus a report of each variable's gradient as final,
 * last variable first (backward's order), as a layered model would after each layer. */
static est_grads_notifier *g_grads;

static est_status ov_build(const est_model_context *ctx, est_var_store *vs, void **out) {
  g_grads = ctx->grads;
  return tm_build(ctx, vs, out);
}

static est_status ov_call(void *model, est_var_store *vs, const est_features *f, est_mode mode, int64_t gs,
                          est_estimator_spec *spec) {
  est_status st = tm_call(model, vs, f, mode, gs, spec);
  for (size_t i = est_vars_count(vs); st == EST_OK && mode == EST_MODE_TRAIN && i-- > 0;)
    st = est_grads_ready(g_grads, est_vars_at(vs, i)->offset, est_vars_at(vs, i)->count);
  return st;
}

static est_status noclip_optimizer(void *model, est_var_store *vs, est_optimizer **out) {
  tm_model *m = model;
  est_adam_weight_decay_config c = bert_awd_config();
  c.init_lr = m->p->lr;
  c.schedule = est_lr_schedule_bert(m->p->num_train_steps, m->p->num_warmup_steps);
  c.clip_norm = 0.0;
  return est_optimizer_create_adam_weight_decay(out, vs, &c);
}

/* MODE_HOOK_STOP: rank 1's hook asks to stop after step 6; every rank's end writes the
 * global step it ended at to DIR/ended_rank<r>. */
static est_status stop_rank1_after_run(void *self, est_hook_run *run, const est_step_record *step) {
  (void)self;
  if (est_hook_rank(run) == 1 && step->global_step == 6) est_hook_request_stop(run);
  return EST_OK;
}

static est_status stop_rank1_end(void *self, est_hook_run *run) {
  char path[4200], text[32];
  snprintf(path, sizeof path, "%s/ended_rank%d", (const char *)self, est_hook_rank(run));
  int n = snprintf(text, sizeof text, "%lld", (long long)est_hook_global_step(run));
  return est_write_file_atomic(path, text, (size_t)n);
}

static int worker(const char *dir, int max_steps, int global_batch, int kill_rank, int kill_step) {
  if (est_dist_init(NULL, NULL) != EST_OK) return fprintf(stderr, "init: %s\n", est_error_message()), 1;
  tm_data train, eval;
  tm_data_make(&train, (g_mode & MODE_FINITE) ? 39 : NTRAIN, NF, 5);
  tm_data_make(&eval, NEVAL, NF, 6);
  tm_params p = tm_params_default(NF);
  p.dropout_keep = 1.0f; /* dropout off: equivalence is exact up to reassociation */
  p.lr = 0.05;
  p.num_train_steps = max_steps;
  p.num_warmup_steps = 2;
  if (est_dist_rank() == kill_rank) p.kill_at_step = kill_step;
  est_model_fn fn = tm_model_fn(&p);
  if (g_mode & MODE_OVERLAP) {
    fn.build = ov_build;
    fn.call = ov_call;
    est_dist_set_grad_bucket_bytes(sizeof(float)); /* a bucket per float: many start inside call */
  }
  if (g_mode & MODE_NOCLIP) fn.create_optimizer = noclip_optimizer;
  est_run_config rc = est_run_config_default();
  char own_dir[4200];
  snprintf(own_dir, sizeof own_dir, "%s/rank1", dir);
  rc.model_dir = (g_mode & MODE_SPLIT_DIR) && est_dist_rank() == 1 ? own_dir : dir;
  rc.seed = 7;
  rc.save_checkpoints_steps = 5;
  rc.log_step_count_steps = 1000;
  rc.save_summary_steps = 0;
  rc.train_batch_size = global_batch;
  rc.eval_batch_size = 6;
  if (g_mode & MODE_SUM) rc.grad_reduction = EST_GRAD_SUM;
  est_distribution hook;
  est_estimator *e = NULL;
  est_eval_result r = {0};
  est_status st = est_dist_configure_run_config(&rc, &hook);
  if (g_mode & MODE_PLAIN) hook.grads_begin = NULL, hook.grads_ready = NULL, hook.grads_finish = NULL;
  if (st == EST_OK) st = est_estimator_create(&e, &fn, &rc);
  est_input_fn train_in = {.open = sh_open, .ctx = &train}, eval_in = {.open = sh_open, .ctx = &eval};
  /* No barrier between training and evaluation: the Estimator waits for the chief's
   * checkpoint itself. */
  if (g_mode & MODE_TAE) {
    est_train_spec ts = {.input_fn = train_in, .max_steps = max_steps};
    /* Throttled: evaluations after step 5 (the first) and at the end only; whether to
     * skip one is the chief's decision on every rank. */
    est_eval_spec es = {.input_fn = eval_in, .throttle_secs = 3600};
    if (st == EST_OK) st = est_train_and_evaluate(e, &ts, &es, &r);
  } else {
    est_session_run_hook stop_hook = {.name = "stop_rank1", .self = (void *)dir, .after_run = stop_rank1_after_run,
                                      .end = stop_rank1_end};
    if (st == EST_OK)
      st = est_estimator_train_with_hooks(e, &train_in, 0, (g_mode & MODE_FINITE) ? 0 : max_steps, &stop_hook,
                                          (g_mode & MODE_HOOK_STOP) ? 1 : 0);
    if (st == EST_OK) st = est_estimator_evaluate(e, &eval_in, 0, NULL, NULL, &r);
  }
  if (st == EST_OK && (g_mode & MODE_OVERLAP) && est_dist_world_size() > 1 &&
      est_dist_hook_grad_stats().buckets_overlapped == 0)
    st = est_error(EST_ERR_INTERNAL, "no gradient bucket started inside the model call");
  if (st == EST_OK && est_dist_is_chief()) {
    char path[4200];
    snprintf(path, sizeof path, "%s/eval.txt", dir);
    st = est_eval_result_write(&r, path);
  }
  /* Prediction is sharded like evaluation; the Estimator gathers the rows back to the
   * chief in input order and calls back there only. */
  collected c = {0};
  if (st == EST_OK) st = est_estimator_predict(e, &eval_in, NULL, collect, &c);
  if (st == EST_OK && !est_dist_is_chief() && c.n != 0)
    st = est_error(EST_ERR_INTERNAL, "rank %d got %zu predictions; only the chief should", est_dist_rank(), c.n);
  if (st == EST_OK && est_dist_is_chief()) {
    char path[4200];
    snprintf(path, sizeof path, "%s/predictions.bin", dir);
    st = est_write_file_atomic(path, c.p, c.n * sizeof(float));
  }
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

/* EST_DIST_TIMEOUT=30: a collective mismatch fails within the test instead of after 600 s. */
static int run_ranks(int np, const char *dir, int steps, int batch, int kill_rank, int kill_step, char **out) {
  if (np == 1)
    return test_run(out, 1, "OMP_NUM_THREADS=1 timeout 120 '%s' --worker '%s' %d %d %d %d %d", self_exe, dir, steps,
                    batch, kill_rank, kill_step, g_mode);
  return test_run(out, 1, "EST_DIST_TIMEOUT=30 timeout 120 " MPIRUN " -x EST_DIST_TIMEOUT -np %d '%s' --worker '%s' %d %d %d %d %d",
                  np, self_exe, dir, steps, batch, kill_rank, kill_step, g_mode);
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
  /* "<key> = " at the start of a line ("loss" must not find "eval_loss") */
  char pat[128];
  snprintf(pat, sizeof pat, "\n%s = ", key);
  char *at = !strncmp(text, pat + 1, strlen(pat + 1)) ? text - 1 : strstr(text, pat);
  assert_non_null(at);
  double v = strtod(at + strlen(pat), NULL);
  free(text);
  return v;
}

/* Runs the worker in `mode` on 1 and on 2 ranks and checks that they agree: the
 * checkpoint at `final_step` (and none after it), the evaluation (metrics and "loss"),
 * and the predictions (all, in input order). */
static void one_vs_two(int mode, int steps, int final_step) {
  char base[4096], one[4200], two[4200], pa[4300], pb[4300];
  test_make_tmpdir(base, sizeof base);
  snprintf(one, sizeof one, "%s/one", base);
  snprintf(two, sizeof two, "%s/two", base);
  g_mode = mode;
  run_ok(1, one, steps, 8);
  run_ok(2, two, steps, 8);
  g_mode = 0;
  snprintf(pa, sizeof pa, "%s/model.ckpt-%d", one, final_step);
  snprintf(pb, sizeof pb, "%s/model.ckpt-%d", two, final_step);
  size_t nt = 0;
  double worst = compare_checkpoints(pa, pb, &nt);
  assert_true(nt >= 6); /* kernel, bias and their adam_m / adam_v slots */
  assert_true(worst <= 1e-5);
  snprintf(pb, sizeof pb, "%s/model.ckpt-%d.index", two, final_step + 1);
  assert_false(est_file_exists(pb));
  /* the run trained: the kernel moved from its 0.02-stddev initialisation */
  assert_true(eval_value(one, "eval_accuracy") > 0.7);
  /* sharded evaluation (37 examples: 19 + 18, batches of 3 per rank) gives one process's
   * metrics: the accuracy exactly, the losses to float rounding. "loss" (the mean of 7
   * batch means of 6, 6, 6, 6, 6, 6 and 1 rows) needs the ranks' k-th batches combined:
   * rank 0 runs 7 batches, rank 1 only 6, and a plain mean of their 13 batch means
   * differs in the third digit. */
  assert_true(eval_value(one, "eval_accuracy") == eval_value(two, "eval_accuracy"));
  assert_true(fabs(eval_value(one, "eval_loss") - eval_value(two, "eval_loss")) <= 1e-5 * eval_value(one, "eval_loss"));
  assert_true(fabs(eval_value(one, "loss") - eval_value(two, "loss")) <= 1e-6 * eval_value(one, "loss"));
  assert_true(fabs(eval_value(one, "auc") - eval_value(two, "auc")) <= 1e-6);
  assert_true(eval_value(two, "global_step") == final_step);
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

static void test_two_ranks_equal_one_process(void **state) {
  (void)state;
  one_vs_two(0, 20, 20);
}

/* 39 training examples, global batch 8: rank 0's shard (20) has 5 local batches of 4,
 * rank 1's (19) only 4. Before, rank 1 left the loop for the final save's allgather
 * while rank 0 was in step 5's gradient all-reduce. Now both stop after step 4, as one
 * process does (its 5th batch would have 7 rows and is dropped). */
static void test_uneven_finite_shards_stop_together(void **state) {
  (void)state;
  one_vs_two(MODE_FINITE, 0, 4);
}

/* Evaluation after a save (step 5, then throttled until the final one at 20) on both
 * ranks: each must restore the checkpoint the chief has just written (the Estimator
 * checks that all ranks restored the same step and fails otherwise). */
static void test_train_and_evaluate(void **state) {
  (void)state;
  one_vs_two(MODE_TAE, 20, 20);
}

/* Gradient ranges reported during the model call start their all-reduce there (the
 * worker fails when none did) and give the same training as one process. */
static void test_overlapped_gradients(void **state) {
  (void)state;
  one_vs_two(MODE_OVERLAP, 20, 20);
}

/* One step on 2 ranks: with the TPU-style sum, Adam's first moment (0.1 x gradient after
 * one step) is exactly twice the mean's, through both the bucketed hook and the plain
 * allreduce_mean fallback. */
static void read_first_moment(const char *dir, float *m) {
  char prefix[4400];
  assert_true(snprintf(prefix, sizeof prefix, "%s/model.ckpt-1", dir) < (int)sizeof prefix);
  est_ckpt_reader *r;
  assert_int_equal(est_ckpt_reader_open(&r, prefix), EST_OK);
  assert_int_equal(est_ckpt_reader_read_into(r, "dense/kernel/adam_m", EST_DT_FLOAT, m, NF * sizeof(float)), EST_OK);
  est_ckpt_reader_close(r);
}

static void test_gradient_sum(void **state) {
  (void)state;
  char base[4096], dirs[4][4300];
  test_make_tmpdir(base, sizeof base);
  const int modes[4] = {MODE_NOCLIP, MODE_NOCLIP | MODE_SUM, MODE_NOCLIP | MODE_PLAIN,
                        MODE_NOCLIP | MODE_PLAIN | MODE_SUM};
  float m[4][NF];
  for (int k = 0; k < 4; k++) {
    snprintf(dirs[k], sizeof dirs[k], "%s/m%d", base, modes[k]);
    g_mode = modes[k];
    run_ok(2, dirs[k], 1, 8);
    read_first_moment(dirs[k], m[k]);
  }
  g_mode = 0;
  int nonzero = 0;
  for (int j = 0; j < NF; j++) {
    nonzero += m[0][j] != 0.0f;
    assert_true(fabsf(m[1][j] - 2.0f * m[0][j]) <= 1e-6f * fabsf(m[0][j]) + 1e-12f);
    assert_true(fabsf(m[2][j] - m[0][j]) <= 1e-6f * fabsf(m[0][j]) + 1e-12f);
    assert_true(fabsf(m[3][j] - 2.0f * m[0][j]) <= 1e-6f * fabsf(m[0][j]) + 1e-12f);
  }
  assert_true(nonzero == NF);
  test_remove_tree(base);
}

/* A failure on one rank (its input) makes every rank return an error at once, naming
 * the rank, instead of leaving the others in a collective until the timeout (30 s
 * here). Training fails at step 6 after the checkpoint at 5, which stays the last. */
static void expect_failure_on_rank1(int mode, const char *own, const char *others) {
  char base[4096], probe[4300];
  test_make_tmpdir(base, sizeof base);
  g_mode = mode;
  char *out = NULL;
  int rc = run_ranks(2, base, 20, 8, -1, -1, &out);
  g_mode = 0;
  if (rc == 0 || !strstr(out, own) || !strstr(out, others)) fprintf(stderr, "%s\n", out);
  assert_int_not_equal(rc, 0);
  assert_int_not_equal(rc, 124); /* not the 120 s timeout: the failure stopped every rank */
  assert_non_null(strstr(out, own));
  assert_non_null(strstr(out, others));
  free(out);
  if (mode & MODE_TRAIN_FAIL) {
    snprintf(probe, sizeof probe, "%s/model.ckpt-5.index", base);
    assert_true(est_file_exists(probe));
    snprintf(probe, sizeof probe, "%s/model.ckpt-6.index", base);
    assert_false(est_file_exists(probe));
  }
  test_remove_tree(base);
}

static void test_failure_on_one_rank_stops_all(void **state) {
  (void)state;
  expect_failure_on_rank1(MODE_TRAIN_FAIL, "rank 1: input_fn (train) at global step 6: train.tfrecord: corrupted record",
                          "rank 0: training stopped at global step 6: 1 other rank(s) failed");
  expect_failure_on_rank1(MODE_EVAL_FAIL, "rank 1: input_fn (eval): eval.tfrecord: No such file",
                          "rank 0: evaluation failed on rank 1 of 2");
}

static void test_hook_stop_on_one_rank_stops_all(void **state) {
  (void)state;
  char base[4096], prefix[4200];
  test_make_tmpdir(base, sizeof base);
  g_mode = MODE_HOOK_STOP;
  run_ok(2, base, 20, 8);
  assert_int_equal(est_ckpt_latest(base, prefix, sizeof prefix), EST_OK);
  assert_non_null(strstr(prefix, "model.ckpt-7"));
  for (int r = 0; r < 2; r++) {
    char name[32];
    snprintf(name, sizeof name, "ended_rank%d", r);
    char *ended = test_read_in(base, name);
    assert_string_equal(ended, "7");
    free(ended);
  }
  test_remove_tree(base);
}

/* Rank 1 does not see the chief's checkpoints: rerunning to max_steps 20, the chief
 * would skip training (already there) while rank 1 started from step 0 alone (a hang),
 * and resuming to 30 would give rank 1 fresh Adam slots; refused on both ranks. */
static void test_ranks_must_share_model_dir(void **state) {
  (void)state;
  char base[4096];
  test_make_tmpdir(base, sizeof base);
  run_ok(2, base, 20, 8);
  g_mode = MODE_SPLIT_DIR;
  char *out = NULL;
  for (int steps = 20; steps <= 30; steps += 10) {
    int rc = run_ranks(2, base, steps, 8, -1, -1, &out);
    if (rc == 0) fprintf(stderr, "%s\n", out);
    assert_int_not_equal(rc, 0);
    assert_int_not_equal(rc, 124);
    assert_non_null(strstr(out, "rank 1 starts training at global step 0 but the chief at 20"));
    free(out);
  }
  g_mode = 0;
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

/* Each test starts in mode 0 even when the previous one failed half-way. */
static int reset_mode(void **state) {
  (void)state;
  g_mode = 0;
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 8 && !strcmp(argv[1], "--worker")) {
    g_mode = atoi(argv[7]);
    return worker(argv[2], atoi(argv[3]), atoi(argv[4]), atoi(argv[5]), atoi(argv[6]));
  }
  ssize_t len = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
  if (len <= 0) return 1;
  self_exe[len] = 0;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_two_ranks_equal_one_process, reset_mode),
      cmocka_unit_test_setup(test_uneven_finite_shards_stop_together, reset_mode),
      cmocka_unit_test_setup(test_train_and_evaluate, reset_mode),
      cmocka_unit_test_setup(test_overlapped_gradients, reset_mode),
      cmocka_unit_test_setup(test_gradient_sum, reset_mode),
      cmocka_unit_test_setup(test_failure_on_one_rank_stops_all, reset_mode),
      cmocka_unit_test_setup(test_hook_stop_on_one_rank_stops_all, reset_mode),
      cmocka_unit_test_setup(test_ranks_must_share_model_dir, reset_mode),
      cmocka_unit_test_setup(test_indivisible_batch_refused, reset_mode),
      cmocka_unit_test_setup(test_dead_rank_then_exact_resume, reset_mode),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
