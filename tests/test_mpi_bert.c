/* The BERT classifier (the BERT model_fn with the classifier head, est/bert_head.h) trained
 * data-parallel with the model_fn's optimizer, BERT's AdamWeightDecay (global-norm clipping
 * at 1.0 after the all-reduce): 2 ranks with a global batch of 8 (4 each, record-sharded) end
 * with the same parameters as one process with batch 8, to float reassociation, step for
 * step. Dropout is off (est_bert_model_params.no_dropout, and the config's dropout
 * probabilities 0), which is what makes the two runs comparable: dropout masks are drawn
 * per batch position.
 *
 *   test_mpi_bert                           the cmocka launcher
 *   test_mpi_bert --worker STEPS OUT_PREFIX one rank (under mpirun or alone); the chief
 *                                           writes OUT_PREFIX-<step>.bin after each step
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
#include <unistd.h>

#include "est/bert_classifier.h"
#include "est/dist.h"
#include "est/file.h"
#include "est/optimizer.h"
#include "est/rng.h"
#include "bert_fn_util.h"
#include "test_util.h"

enum { S = 16, NEX = 64, BATCH = 8, LABELS = 3, VOCAB = 120 };

static est_bert_config small_config(void) {
  est_bert_config c = est_bert_config_default();
  c.vocab_size = VOCAB;
  c.hidden_size = 32;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 2;
  c.intermediate_size = 64;
  c.max_position_embeddings = 32;
  c.type_vocab_size = 2;
  c.hidden_dropout_prob = 0.0;
  c.attention_probs_dropout_prob = 0.0;
  return c;
}

/* Sentence pairs with padding: [CLS]=1 a.. [SEP]=2 b.. [SEP] 0 0 ... */
static void make_data(int32_t *ids, int32_t *mask, int32_t *seg, int32_t *labels) {
  est_rng rng;
  est_rng_init(&rng, 31337);
  for (int e = 0; e < NEX; e++) {
    int len = 6 + (int)est_rng_below(&rng, S - 6 + 1), split = 2 + (int)est_rng_below(&rng, (uint64_t)(len - 4));
    for (int t = 0; t < S; t++) {
      int32_t id = 0, m = 0, sg = 0;
      if (t < len) {
        m = 1;
        id = t == 0 ? 1 : (t == split || t == len - 1) ? 2 : 3 + (int32_t)est_rng_below(&rng, VOCAB - 3);
        sg = t > split;
      }
      ids[e * S + t] = id;
      mask[e * S + t] = m;
      seg[e * S + t] = sg;
    }
    labels[e] = (int32_t)est_rng_below(&rng, LABELS);
  }
}

#define WCHECK(expr)                                                                  \
  do {                                                                                \
    est_status st_ = (expr);                                                          \
    if (st_ != EST_OK) {                                                              \
      fprintf(stderr, "rank %d: %s: %s\n", est_dist_rank(), #expr, est_error_message()); \
      est_dist_abort(1);                                                              \
      return 1;                                                                       \
    }                                                                                 \
  } while (0)

static int worker(int steps, const char *out_prefix) {
  WCHECK(est_dist_init(NULL, NULL));
  const int rank = est_dist_rank(), world = est_dist_world_size();
  static int32_t ids[NEX * S], mask[NEX * S], seg[NEX * S], labels[NEX];
  make_data(ids, mask, seg, labels);
  est_bert_config cfg = small_config();
  static bert_fn m;
  bert_fn_init(&m, &cfg, LABELS, S);
  m.params.no_dropout = 1;
  m.params.learning_rate = 1e-3;
  m.params.num_train_steps = steps;
  m.params.num_warmup_steps = 2;
  /* a different initialisation per rank: only the chief's broadcast makes them agree */
  WCHECK(bert_fn_build(&m, EST_MODE_TRAIN, BATCH, 100 + (uint64_t)rank));
  est_var_store *vs = m.vs;
  const size_t P = est_vars_size(vs);
  WCHECK(est_dist_broadcast(est_vars_params(vs), P * sizeof(float), 0));
  est_optimizer *opt;
  WCHECK(m.fn.create_optimizer(m.model, vs, &opt));
  est_dist_grad_sync *sync;
  est_dist_grad_sync_config gc = {.bucket_bytes = 4096}; /* several buckets even for this small model */
  WCHECK(est_dist_grad_sync_create_for_vars(&sync, vs, &gc));

  /* rank r's share of global batch k: elements k*B + r, k*B + r + N, ... (shard order) */
  const int local = (int)est_dist_local_batch(BATCH, rank, world);
  int32_t bids[BATCH * S], bmask[BATCH * S], bseg[BATCH * S], blab[BATCH];
  for (int step = 0; step < steps; step++) {
    for (int i = 0; i < local; i++) {
      int e = (step * BATCH + rank + i * world) % NEX;
      memcpy(bids + i * S, ids + e * S, S * sizeof(int32_t));
      memcpy(bmask + i * S, mask + e * S, S * sizeof(int32_t));
      memcpy(bseg + i * S, seg + e * S, S * sizeof(int32_t));
      blab[i] = labels[e];
    }
    est_vars_zero_grads(vs);
    WCHECK(bert_fn_call(&m, bids, bmask, bseg, blab, local, step)); /* forward + backward */
    /* the local loss is a mean over `local` examples: weight local / B sums to the mean
     * over the global batch */
    WCHECK(est_dist_grad_sync_begin(sync, (double)local / BATCH));
    WCHECK(est_dist_grad_sync_finish(sync));
    WCHECK(est_optimizer_apply(opt, step));
    if (est_dist_is_chief()) {
      char path[4200];
      snprintf(path, sizeof path, "%s-%d.bin", out_prefix, step + 1);
      WCHECK(est_write_file_atomic(path, est_vars_params(vs), P * sizeof(float)));
    }
  }
  WCHECK(est_dist_check_same(est_vars_params(vs), P * sizeof(float), "trained BERT parameters"));
  est_dist_grad_sync_free(sync);
  est_optimizer_free(opt);
  bert_fn_free(&m);
  est_dist_finalize();
  return 0;
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

static float *load(const char *prefix, int step, size_t *n) {
  char path[4300];
  snprintf(path, sizeof path, "%s-%d.bin", prefix, step);
  uint8_t *data;
  size_t size;
  assert_int_equal(est_read_file(path, &data, &size), EST_OK);
  *n = size / sizeof(float);
  return (float *)data;
}

static void test_bert_two_ranks_equal_one_process(void **state) {
  (void)state;
  enum { STEPS = 6 };
  char dir[4096], one[4200], two[4200];
  test_make_tmpdir(dir, sizeof dir);
  snprintf(one, sizeof one, "%s/one", dir);
  snprintf(two, sizeof two, "%s/two", dir);
  char *out = NULL;
  int rc = test_run(&out, 1, "OMP_NUM_THREADS=1 timeout 200 '%s' --worker %d '%s'", self_exe, STEPS, one);
  if (rc) fprintf(stderr, "%s\n", out);
  assert_int_equal(rc, 0);
  free(out);
  rc = test_run(&out, 1, "timeout 200 " MPIRUN " -np 2 '%s' --worker %d '%s'", self_exe, STEPS, two);
  if (rc) fprintf(stderr, "%s\n", out);
  assert_int_equal(rc, 0);
  free(out);
  /* step for step: the parameters after every update agree */
  size_t n1, n2;
  float *init = load(one, 1, &n1);
  for (int step = 1; step <= STEPS; step++) {
    float *a = load(one, step, &n1), *b = load(two, step, &n2);
    assert_int_equal(n1, n2);
    double d2 = 0, a2 = 0, worst = 0;
    for (size_t i = 0; i < n1; i++) {
      double d = fabs((double)a[i] - b[i]);
      d2 += d * d;
      a2 += (double)a[i] * a[i];
      double rel = d / fmax(fabs((double)a[i]), 1e-2);
      if (rel > worst) worst = rel;
    }
    if (getenv("EST_TEST_VERBOSE") || sqrt(d2) > 1e-5 * sqrt(a2) || worst > 1e-5)
      fprintf(stderr, "step %d: relative norm difference %.3g, worst element %.3g\n", step, sqrt(d2 / a2), worst);
    assert_true(sqrt(d2) <= 1e-5 * sqrt(a2));
    assert_true(worst <= 1e-5);
    free(a);
    free(b);
  }
  /* and training moved them: the last step differs from the first by far more than 1e-5 */
  float *last = load(one, STEPS, &n1);
  double moved = 0;
  for (size_t i = 0; i < n1; i++) moved = fmax(moved, fabs((double)last[i] - init[i]));
  assert_true(moved > 1e-3);
  free(last);
  free(init);
  test_remove_tree(dir);
}

int main(int argc, char **argv) {
  if (argc == 4 && !strcmp(argv[1], "--worker")) return worker(atoi(argv[2]), argv[3]);
  ssize_t len = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
  if (len <= 0) return 1;
  self_exe[len] = 0;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bert_two_ranks_equal_one_process),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
