/* Whole-model golden test (llm.c style): est's BERT classifier, the one BERT model_fn with
 * the classifier head (est_bert_model_fn, driven as the Estimator drives it), against
 * tensors dumped by an independent PyTorch model (tests/reference/bert_golden.py, outputs
 * committed under tests/data/golden/). Same weights, same batch (padding + two segments),
 * dropout off (est_bert_model_params.no_dropout):
 *   - the mean loss (TRAIN) to 1e-5 relative; the logits through PREDICT's probabilities
 *     (log p against log_softmax of the golden logits) and the per-example loss (-log p of
 *     the label) to 1e-5 of the logits' scale;
 *   - every parameter gradient to 1e-4 relative, with an absolute floor of 1e-4 times the
 *     tensor's largest |gradient| for entries near zero (cancellation there is relative to
 *     the tensor's scale, not to the entry);
 *   - the per-step losses and every parameter after 3 steps of BERT's AdamWeightDecay
 *     (clip 1.0, warmup + linear decay, lr 0 at step 0) through est/optimizer.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/bert_classifier.h"
#include "est/bert_head.h"
#include "est/optimizer.h"
#include "est/threads.h"
#include "est/variables.h"

#include "golden_util.h"
#include "test_util.h"

/* ---- the model ------------------------------------------------------------------------- */

static void check_config(const char *name) {
  golden g;
  bert_fn train, predict;
  golden_classifier_open(&g, name, EST_PRECISION_FP32, EST_MODE_TRAIN, &train);
  golden_free(&g);
  golden_classifier_open(&g, name, EST_PRECISION_FP32, EST_MODE_PREDICT, &predict);
  int32_t *ids = golden_ints(&g, "input_ids"), *mask = golden_ints(&g, "input_mask");
  int32_t *segs = golden_ints(&g, "segment_ids"), *labels = golden_ints(&g, "label_ids");
  const int B = g.batch, S = g.seq_len, C = g.num_labels;
  g_abs_floor = 0;

  /* forward: the loss (TRAIN), the logits and per-example losses (PREDICT's probabilities) */
  est_vars_zero_grads(train.vs);
  assert_int_equal(bert_fn_call(&train, ids, mask, segs, labels, B, 0), EST_OK);
  const float loss = train.spec.loss;
  expect_close("loss", &loss, golden_get(&g, "loss", NULL), 1, 1e-5, 0);
  assert_int_equal(bert_fn_call(&predict, ids, mask, segs, NULL, B, 0), EST_OK);
  float *probs = malloc((size_t)B * C * sizeof(float));
  memcpy(probs, bert_fn_probabilities(&predict), (size_t)B * C * sizeof(float));
  const float *ref_logits = golden_get(&g, "logits", NULL), *ref_losses = golden_get(&g, "per_example_loss", NULL);
  double r = golden_logp_error(probs, ref_logits, B, C, 1e-5);
  if (r > 1) fail_msg("%s: log probabilities off by %.2fx the tolerance", name, r);
  double logit_scale = 0;
  for (int i = 0; i < B * C; i++) logit_scale = fmax(logit_scale, fabs(ref_logits[i]));
  for (int b = 0; b < B; b++) {
    const double got = -log((double)probs[(size_t)b * C + labels[b]]);
    if (fabs(got - ref_losses[b]) > 1e-5 * fabs(ref_losses[b]) + 2e-5 * logit_scale)
      fail_msg("%s: per_example_loss[%d]: est %.9g vs torch %.9g", name, b, got, ref_losses[b]);
  }

  /* backward: every parameter gradient */
  char key[400];
  golden_grad_floor(&g, train.vs, 1e-7); /* 1e-7 of the model's largest gradient (golden_util.h) */
  double worst_all = 0;
  const char *worst_name = "";
  for (size_t i = 0; i < est_vars_count(train.vs); i++) {
    const est_variable *v = est_vars_at(train.vs, i);
    snprintf(key, sizeof key, "grad:%s", v->name);
    const float *ref = golden_get(&g, key, NULL);
    double rv = worst_ratio(est_vars_grad(train.vs, i), ref, v->count, 1e-4, 1e-4, NULL);
    if (rv > worst_all) {
      worst_all = rv;
      worst_name = v->name;
    }
    expect_close(key, est_vars_grad(train.vs, i), ref, v->count, 1e-4, 1e-4);
  }
  printf("%s: worst gradient at %.3f of the tolerance (%s)\n", name, worst_all, worst_name);

  /* A smaller batch (the last partial eval batch) reuses the reservation: same rows. */
  assert_int_equal(bert_fn_call(&predict, ids + S, mask + S, segs + S, NULL, B - 1, 0), EST_OK);
  expect_close("partial-batch probabilities", bert_fn_probabilities(&predict), probs + C, (size_t)(B - 1) * C, 1e-5,
               1e-6);
  /* TRAIN needs the labels, and says which feature is missing */
  assert_int_not_equal(bert_fn_call(&train, ids, mask, segs, NULL, B, 0), EST_OK);
  assert_non_null(strstr(est_error_message(), "label_ids"));

  /* 3 steps of the model_fn's optimizer (BERT's AdamWeightDecay, clip 1.0, warmup + linear
   * decay, lr 0 at step 0) on the same batch, as the Estimator's train step runs them */
  est_optimizer *opt;
  assert_int_equal(train.fn.create_optimizer(train.model, train.vs, &opt), EST_OK);
  size_t nsteps = 0;
  const float *step_losses = golden_get(&g, "step_losses", &nsteps);
  assert_int_equal((int)nsteps, g.steps);
  for (int t = 0; t < g.steps; t++) {
    est_vars_zero_grads(train.vs);
    assert_int_equal(bert_fn_call(&train, ids, mask, segs, labels, B, t), EST_OK);
    char what[64];
    snprintf(what, sizeof what, "loss before step %d", t);
    expect_close(what, &train.spec.loss, &step_losses[t], 1, 1e-4, 0);
    assert_int_equal(est_optimizer_apply(opt, t), EST_OK);
  }
  double worst_p = 0;
  g_abs_floor = 0;
  for (size_t i = 0; i < est_vars_count(train.vs); i++) {
    const est_variable *v = est_vars_at(train.vs, i);
    snprintf(key, sizeof key, "step3:%s", v->name);
    const float *ref = golden_get(&g, key, NULL);
    snprintf(key, sizeof key, "param:%s", v->name);
    const float *p0 = golden_get(&g, key, NULL), *c = est_vars_value(train.vs, i);
    /* After 3 steps the tolerance is relative to the update itself: 1e-5 of the value,
     * plus 1% of |theta_3 - theta_0| (the big second step moves the loss from ~0.4 to
     * ~0.05, so float32 differences in step 2's gradients show up at ~0.5% of the update),
     * plus 1e-3 * init_lr for tensors with a zero true gradient (the key bias: Adam turns
     * its rounding noise into updates of up to ~lr * 0.1 g / eps). */
    for (size_t j = 0; j < v->count; j++) {
      double tol = 1e-5 * fabs(ref[j]) + 1e-2 * fabs((double)ref[j] - p0[j]) + 1e-3 * g.init_lr;
      double rj = fabs((double)c[j] - ref[j]) / tol;
      if (!(rj <= 1.0))
        fail_msg("step3:%s[%zu]: est %.9g vs torch %.9g (start %.9g)", v->name, j, c[j], ref[j], p0[j]);
      worst_p = fmax(worst_p, rj);
    }
  }
  printf("%s: worst parameter after %d steps at %.3f of the tolerance\n", name, g.steps, worst_p);
  est_optimizer_free(opt);
  free(probs), free(ids), free(mask), free(segs), free(labels);
  bert_fn_free(&train);
  bert_fn_free(&predict);
  golden_free(&g);
}

static void test_golden_h64_l2_s16(void **state) {
  (void)state;
  check_config("h64_l2_s16");
}

static void test_golden_h36_l2_s40_c3(void **state) {
  (void)state;
  check_config("h36_l2_s40_c3");
}

int main(void) {
  test_forced_kernel_or_skip(); /* ctest runs it per fp32 kernel too (docs/testing.md §3) */
  est_set_num_threads(2);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_golden_h64_l2_s16),
      cmocka_unit_test(test_golden_h36_l2_s40_c3),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
