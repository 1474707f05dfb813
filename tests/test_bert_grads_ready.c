/* The BERT model_fn's gradient-ready reports (est_model_context.grads, est_grads_ready): a
 * TRAIN call's backward reports each group of parameter gradients (head, pooler, layers
 * top-down, embeddings) once, when it is final, as exact variable ranges (never padding), and
 * reporting changes no gradient. This is what lets N ranks start each bucket's all-reduce
 * during backward (tests/test_mpi_run_classifier.c runs it end to end). Here the notifier
 * is the Estimator's, inside a step, over a distribution that records the calls. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/bert_classifier.h"
#include "est/rng.h"
#include "bert_fn_util.h"
#include "train/estimator_internal.h" /* est_grads_notifier: the Estimator gives a model one */

enum { B = 3, S = 8, LABELS = 3, MAX_CALLS = 64 };

/* One backward's calls, with a copy of the gradient buffer as it was at each call. */
typedef struct recorder {
  est_var_store *vs;
  int n;
  size_t off[MAX_CALLS], count[MAX_CALLS];
  float *snap[MAX_CALLS];
} recorder;

static void record(void *ctx, size_t offset, size_t count) {
  recorder *r = ctx;
  if (r->n == MAX_CALLS) fail_msg("more than %d grads_ready calls", MAX_CALLS);
  r->off[r->n] = offset;
  r->count[r->n] = count;
  r->snap[r->n] = malloc(est_vars_size(r->vs) * sizeof(float));
  assert_non_null(r->snap[r->n]);
  memcpy(r->snap[r->n], est_vars_grads(r->vs), est_vars_size(r->vs) * sizeof(float));
  r->n++;
}

/* The distribution's grads_ready, as the Estimator's notifier forwards it during a step. */
static est_status record_ready(void *ctx, size_t offset, size_t count) {
  record(ctx, offset, count);
  return EST_OK;
}

/* A model of `hidden` units and 2 layers, with dropout, on a fixed random batch; runs one
 * TRAIN call (forward + backward), recording if `r`. Returns a copy of the gradient buffer. */
static float *run(int hidden, recorder *r, bert_fn *m) {
  est_bert_config cfg = est_bert_config_default();
  cfg.vocab_size = 50;
  cfg.hidden_size = hidden;
  cfg.num_hidden_layers = 2;
  cfg.num_attention_heads = 2;
  cfg.intermediate_size = 2 * hidden;
  cfg.max_position_embeddings = 16;
  cfg.type_vocab_size = 2;
  static est_distribution dist;
  static est_grads_notifier notifier;
  bert_fn_init(m, &cfg, LABELS, S);
  if (r) {
    dist = (est_distribution){.ctx = r, .grads_ready = record_ready};
    notifier = (est_grads_notifier){.dist = &dist, .in_step = 1};
    m->grads = &notifier;
  }
  assert_int_equal(bert_fn_build(m, EST_MODE_TRAIN, B, 7), EST_OK);
  if (r) r->vs = m->vs;
  int32_t ids[B * S], mask[B * S], segs[B * S], labels[B];
  est_rng rng;
  est_rng_init(&rng, 11);
  for (int i = 0; i < B * S; i++) {
    ids[i] = (int32_t)(est_rng_u32(&rng) % 50);
    mask[i] = i % S < S - i / S;   /* some padding */
    segs[i] = i % S >= S / 2;
  }
  for (int b = 0; b < B; b++) labels[b] = b % LABELS;
  est_vars_zero_grads(m->vs);
  assert_int_equal(bert_fn_call(m, ids, mask, segs, labels, B, 5), EST_OK);
  float *g = malloc(est_vars_size(m->vs) * sizeof(float));
  assert_non_null(g);
  memcpy(g, est_vars_grads(m->vs), est_vars_size(m->vs) * sizeof(float));
  return g;
}

/* Index of the variable called `name`, and its range. */
static const est_variable *var(est_var_store *vs, const char *name) {
  int i = est_vars_find(vs, name);
  if (i < 0) fail_msg("no variable %s", name);
  return est_vars_at(vs, (size_t)i);
}

static void check(int hidden, int want_calls) {
  recorder r = {0};
  bert_fn m, m0;
  float *with = run(hidden, &r, &m);
  float *without = run(hidden, NULL, &m0);
  est_var_store *vs = m.vs;
  const size_t n = est_vars_size(vs);

  /* Reporting is observation only: the same gradients, bit for bit. */
  assert_memory_equal(with, without, n * sizeof(float));
  assert_int_equal(r.n, want_calls);

  /* Every trainable float is reported exactly once; no padding float ever is. */
  unsigned char *seen = calloc(n, 1);
  assert_non_null(seen);
  for (int c = 0; c < r.n; c++) {
    assert_true(r.count[c] > 0 && r.off[c] + r.count[c] <= n);
    for (size_t i = r.off[c]; i < r.off[c] + r.count[c]; i++) {
      if (seen[i]) fail_msg("hidden %d: float %zu reported twice", hidden, i);
      seen[i] = 1;
    }
    /* "final": the reported range already holds its end-of-backward values. */
    if (memcmp(r.snap[c] + r.off[c], with + r.off[c], r.count[c] * sizeof(float)))
      fail_msg("hidden %d: call %d [%zu, +%zu) reported before its gradient was final", hidden, c, r.off[c],
               r.count[c]);
  }
  size_t covered = 0;
  for (size_t v = 0; v < est_vars_count(vs); v++) {
    const est_variable *x = est_vars_at(vs, v);
    for (size_t i = x->offset; i < x->offset + x->count; i++)
      if (!seen[i]) fail_msg("hidden %d: %s float %zu never reported", hidden, x->name, i - x->offset);
    covered += x->count;
  }
  size_t total = 0;
  for (int c = 0; c < r.n; c++) total += r.count[c];
  assert_int_equal(total, covered);   /* so nothing outside the variables (padding) */

  /* Backward's order: head, pooler, layer_1, layer_0, embeddings. The first call covers
   * output_weights; the first call at or past each group's start comes in that order. */
  const char *starts[] = {"output_weights", "bert/pooler/dense/kernel", "bert/encoder/layer_1/attention/self/query/kernel",
                          "bert/encoder/layer_0/attention/self/query/kernel", "bert/embeddings/word_embeddings"};
  int last = -1;
  for (size_t k = 0; k < sizeof starts / sizeof starts[0]; k++) {
    size_t off = var(vs, starts[k])->offset;
    int at = -1;
    for (int c = 0; c < r.n && at < 0; c++)
      if (r.off[c] == off) at = c;
    if (at <= last) fail_msg("hidden %d: %s reported at call %d, not after call %d", hidden, starts[k], at, last);
    last = at;
  }
  /* A group is final only when its last variable is: the snapshot at the pooler's call
   * still has layer_1's gradients at zero (they come later). */
  int pooler = -1;
  for (int c = 0; c < r.n && pooler < 0; c++)
    if (r.off[c] == var(vs, "bert/pooler/dense/kernel")->offset) pooler = c;
  const est_variable *q1 = var(vs, "bert/encoder/layer_1/attention/self/query/kernel");
  for (size_t i = 0; i < q1->count; i++)
    if (r.snap[pooler][q1->offset + i] != 0.0f) fail_msg("layer_1 gradient already written at the pooler's call");

  for (int c = 0; c < r.n; c++) free(r.snap[c]);
  free(seen);
  free(with);
  free(without);
  bert_fn_free(&m);
  bert_fn_free(&m0);
}

/* H = 32: every variable's count is a multiple of 16 floats except output_bias (3), which
 * ends its group, so each of the 5 groups is one range. */
static void test_one_range_per_group(void **state) {
  (void)state;
  check(32, 5);
}

/* H = 24: biases and LayerNorm vectors of 24 floats leave padding, so groups split into
 * several ranges; still exact and in order. */
static void test_padding_splits_groups(void **state) {
  (void)state;
  check(24, 23);   /* embeddings 2, each layer 9, pooler 1, head 2 (output_weights is 72 floats) */
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_one_range_per_group),
    cmocka_unit_test(test_padding_splits_groups),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
