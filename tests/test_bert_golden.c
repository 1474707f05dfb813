/* Whole-model golden test (llm.c style): est's BERT classifier against tensors dumped by
 * an independent PyTorch model (tests/reference/bert_golden.py, outputs committed under
 * tests/data/golden/). Same weights, same batch (padding + two segments), dropout off:
 *   - logits, per-example loss and mean loss to 1e-5 relative;
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
#include "est/optimizer.h"
#include "est/threads.h"
#include "est/variables.h"

/* AdamWeightDecay as BERT's create_optimizer sets it up, with the model's exclusions. */
static inline est_adam_weight_decay_config bert_awd_config(void) {
  est_adam_weight_decay_config c = est_adam_weight_decay_config_default();
  c.exclude_from_weight_decay = est_bert_exclude_from_weight_decay;
  c.num_exclude = EST_BERT_NUM_EXCLUDE_FROM_WEIGHT_DECAY;
  return c;
}

#include "golden_util.h"
#include "test_util.h"

/* ---- the model ------------------------------------------------------------------------- */

typedef struct fixture {
  golden g;
  est_bert_config cfg;
  est_var_store *vs;
  est_bert_classifier *m;
  int32_t *ids, *mask, *segs, *labels;
} fixture;

static void fixture_open(fixture *f, const char *name) {
  memset(f, 0, sizeof *f);
  golden_load(&f->g, name);
  char path[1200];
  snprintf(path, sizeof path, "%s/bert_config.json", f->g.dir);
  assert_int_equal(est_bert_config_from_json_file(&f->cfg, path), EST_OK);
  assert_int_equal(est_vars_create(&f->vs), EST_OK);
  assert_int_equal(est_bert_classifier_create(&f->m, &f->cfg, f->g.num_labels, f->vs), EST_OK);
  assert_int_equal(est_vars_finalize(f->vs, 1), EST_OK);
  /* The model declares exactly the reference's variables: same names, same sizes. */
  int nparams = 0;
  for (int i = 0; i < f->g.n; i++) nparams += !strncmp(f->g.entries[i].name, "param:", 6);
  assert_int_equal(nparams, (int)est_vars_count(f->vs));
  golden_set_params(&f->g, f->vs);
  assert_int_equal(est_bert_classifier_reserve(f->m, f->g.batch, f->g.seq_len), EST_OK);
  f->ids = golden_ints(&f->g, "input_ids");
  f->mask = golden_ints(&f->g, "input_mask");
  f->segs = golden_ints(&f->g, "segment_ids");
  f->labels = golden_ints(&f->g, "label_ids");
}

static void fixture_close(fixture *f) {
  est_bert_classifier_free(f->m);
  est_vars_free(f->vs);
  golden_free(&f->g);
  free(f->ids);
  free(f->mask);
  free(f->segs);
  free(f->labels);
}

static void check_config(const char *name) {
  fixture f;
  fixture_open(&f, name);
  const int B = f.g.batch, S = f.g.seq_len, C = f.g.num_labels;
  float *logits = malloc((size_t)B * C * sizeof(float)), *losses = malloc((size_t)B * sizeof(float)), loss;
  g_abs_floor = 0;

  /* forward */
  est_vars_zero_grads(f.vs);
  assert_int_equal(est_bert_classifier_forward(f.m, f.ids, f.mask, f.segs, f.labels, B, S, 0, 0, 0, logits, losses,
                                               &loss),
                   EST_OK);
  expect_close("logits", logits, golden_get(&f.g, "logits", NULL), (size_t)B * C, 1e-5, 1e-6);
  expect_close("per_example_loss", losses, golden_get(&f.g, "per_example_loss", NULL), (size_t)B, 1e-5, 0);
  expect_close("loss", &loss, golden_get(&f.g, "loss", NULL), 1, 1e-5, 0);

  /* backward: every parameter gradient */
  assert_int_equal(est_bert_classifier_backward(f.m), EST_OK);
  char key[400];
  golden_grad_floor(&f.g, f.vs, 1e-7); /* 1e-7 of the model's largest gradient (golden_util.h) */
  double worst_all = 0;
  const char *worst_name = "";
  for (size_t i = 0; i < est_vars_count(f.vs); i++) {
    const est_variable *v = est_vars_at(f.vs, i);
    snprintf(key, sizeof key, "grad:%s", v->name);
    const float *ref = golden_get(&f.g, key, NULL);
    double r = worst_ratio(est_vars_grad(f.vs, i), ref, v->count, 1e-4, 1e-4, NULL);
    if (r > worst_all) {
      worst_all = r;
      worst_name = v->name;
    }
    expect_close(key, est_vars_grad(f.vs, i), ref, v->count, 1e-4, 1e-4);
  }
  printf("%s: worst gradient at %.3f of the tolerance (%s)\n", name, worst_all, worst_name);

  /* A smaller batch (the last partial eval batch) reuses the reservation: same rows. */
  float *logits2 = malloc((size_t)B * C * sizeof(float));
  assert_int_equal(est_bert_classifier_forward(f.m, f.ids + S, f.mask + S, f.segs + S, NULL, B - 1, S, 0, 0, 0,
                                               logits2, NULL, NULL),
                   EST_OK);
  expect_close("partial-batch logits", logits2, logits + C, (size_t)(B - 1) * C, 1e-5, 1e-6);
  /* predict without labels: backward is refused */
  assert_int_equal(est_bert_classifier_backward(f.m), EST_ERR_FAILED_PRECONDITION);

  /* 3 steps of AdamWeightDecay on the same batch */
  est_adam_weight_decay_config oc = bert_awd_config();
  oc.init_lr = f.g.init_lr;
  oc.schedule = est_lr_schedule_bert(f.g.num_train_steps, f.g.num_warmup_steps);
  oc.clip_norm = 1.0;
  est_optimizer *opt;
  assert_int_equal(est_optimizer_create_adam_weight_decay(&opt, f.vs, &oc), EST_OK);
  size_t nsteps = 0;
  const float *step_losses = golden_get(&f.g, "step_losses", &nsteps);
  assert_int_equal((int)nsteps, f.g.steps);
  for (int t = 0; t < f.g.steps; t++) {
    est_vars_zero_grads(f.vs);
    assert_int_equal(est_bert_classifier_forward(f.m, f.ids, f.mask, f.segs, f.labels, B, S, 0, 0, (uint64_t)t, NULL,
                                                 NULL, &loss),
                     EST_OK);
    char what[64];
    snprintf(what, sizeof what, "loss before step %d", t);
    expect_close(what, &loss, &step_losses[t], 1, 1e-4, 0);
    assert_int_equal(est_bert_classifier_backward(f.m), EST_OK);
    assert_int_equal(est_optimizer_apply(opt, t), EST_OK);
  }
  double worst_p = 0;
  g_abs_floor = 0;
  for (size_t i = 0; i < est_vars_count(f.vs); i++) {
    const est_variable *v = est_vars_at(f.vs, i);
    snprintf(key, sizeof key, "step3:%s", v->name);
    const float *ref = golden_get(&f.g, key, NULL);
    snprintf(key, sizeof key, "param:%s", v->name);
    const float *p0 = golden_get(&f.g, key, NULL), *c = est_vars_value(f.vs, i);
    /* After 3 steps the tolerance is relative to the update itself: 1e-5 of the value,
     * plus 1% of |theta_3 - theta_0| (the big second step moves the loss from ~0.4 to
     * ~0.05, so float32 differences in step 2's gradients show up at ~0.5% of the update),
     * plus 1e-3 * init_lr for tensors with a zero true gradient (the key bias: Adam turns
     * its rounding noise into updates of up to ~lr * 0.1 g / eps). */
    for (size_t j = 0; j < v->count; j++) {
      double tol = 1e-5 * fabs(ref[j]) + 1e-2 * fabs((double)ref[j] - p0[j]) + 1e-3 * f.g.init_lr;
      double r = fabs((double)c[j] - ref[j]) / tol;
      if (!(r <= 1.0))
        fail_msg("step3:%s[%zu]: est %.9g vs torch %.9g (start %.9g)", v->name, j, c[j], ref[j], p0[j]);
      worst_p = fmax(worst_p, r);
    }
  }
  printf("%s: worst parameter after %d steps at %.3f of the tolerance\n", name, f.g.steps, worst_p);
  est_optimizer_free(opt);
  free(logits);
  free(logits2);
  free(losses);
  fixture_close(&f);
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
