/* Golden test of est run_pretraining's model: the BERT encoder with the masked-LM and
 * next-sentence heads (est/bert_pretraining.h) against tensors dumped by an independent
 * PyTorch model (tests/reference/pretraining_golden.py, outputs committed under
 * tests/data/golden/pretrain_h32_l2_s12/). Same weights and batch (padding, two segments,
 * padded prediction slots with weight 0, one position masked twice), dropout off:
 *   - per-position and weighted masked-LM loss, next-sentence losses, the total, and the
 *     eval metrics (weighted masked_lm_accuracy, next_sentence_accuracy);
 *   - every parameter gradient, the tied word-embedding table included (lookup + output
 *     layer), to 1e-4 relative with a floor of 1e-4 of the tensor's largest |gradient|;
 *   - the per-step losses and every parameter after 3 AdamWeightDecay steps. */
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
#include "est/bert_pretraining.h"
#include "est/metrics.h"
#include "est/optimizer.h"
#include "est/threads.h"
#include "est/variables.h"

#include "golden_util.h"

/* ---- the model ------------------------------------------------------------------------- */

static float *golden_floats(const golden *g, const char *name) {
  size_t n = 0;
  const float *f = golden_get(g, name, &n);
  float *out = malloc(n * sizeof(float));
  memcpy(out, f, n * sizeof(float));
  return out;
}

/* ---- the model ------------------------------------------------------------------------- */

typedef struct fixture {
  golden g;
  est_bert_config cfg;
  est_var_store *vs;
  est_bert_encoder *enc;
  est_bert_pretraining_heads *heads;
  int32_t *ids, *mask, *segs, *pos, *lm_ids, *ns;
  float *lm_w;
} fixture;

static void fixture_open(fixture *f, const char *name) {
  memset(f, 0, sizeof *f);
  golden_load(&f->g, name);
  char path[1200];
  snprintf(path, sizeof path, "%s/bert_config.json", f->g.dir);
  assert_int_equal(est_bert_config_from_json_file(&f->cfg, path), EST_OK);
  assert_int_equal(est_vars_create(&f->vs), EST_OK);
  assert_int_equal(est_bert_encoder_create(&f->enc, &f->cfg, f->vs), EST_OK);
  assert_int_equal(est_bert_pretraining_heads_create(&f->heads, f->enc, f->vs), EST_OK);
  assert_int_equal(est_vars_finalize(f->vs, 1), EST_OK);
  /* exactly the reference's variables: same names (Google's), same sizes */
  golden_expect_exactly_params(&f->g, f->vs);
  golden_set_params(&f->g, f->vs);
  assert_int_equal(est_bert_encoder_reserve(f->enc, f->g.batch, f->g.seq_len, 1), EST_OK);
  assert_int_equal(est_bert_pretraining_heads_reserve(f->heads, f->g.batch, f->g.max_predictions), EST_OK);
  f->ids = golden_ints(&f->g, "input_ids");
  f->mask = golden_ints(&f->g, "input_mask");
  f->segs = golden_ints(&f->g, "segment_ids");
  f->pos = golden_ints(&f->g, "masked_lm_positions");
  f->lm_ids = golden_ints(&f->g, "masked_lm_ids");
  f->ns = golden_ints(&f->g, "next_sentence_labels");
  f->lm_w = golden_floats(&f->g, "masked_lm_weights");
}

static void fixture_close(fixture *f) {
  est_bert_pretraining_heads_free(f->heads);
  est_bert_encoder_free(f->enc);
  est_vars_free(f->vs);
  golden_free(&f->g);
  free(f->ids);
  free(f->mask);
  free(f->segs);
  free(f->pos);
  free(f->lm_ids);
  free(f->ns);
  free(f->lm_w);
}

static void step(fixture *f, uint64_t t, est_bert_pretraining_output *o, int backward) {
  const int B = f->g.batch, S = f->g.seq_len, P = f->g.max_predictions;
  est_vars_zero_grads(f->vs);
  assert_int_equal(est_bert_encoder_forward(f->enc, f->ids, f->mask, f->segs, B, S, 0, 0, t), EST_OK);
  assert_int_equal(est_bert_pretraining_heads_forward(f->heads, f->pos, f->lm_ids, f->lm_w, f->ns, B, S, P, o), EST_OK);
  if (!backward) return;
  assert_int_equal(est_bert_pretraining_heads_backward(f->heads), EST_OK);
  assert_int_equal(est_bert_encoder_backward(f->enc), EST_OK);
}

static void test_losses_metrics_and_gradients(void **state) {
  (void)state;
  fixture f;
  fixture_open(&f, "pretrain_h32_l2_s12");
  const int B = f.g.batch, N = f.g.batch * f.g.max_predictions;
  g_abs_floor = 0;
  est_bert_pretraining_output o;
  step(&f, 0, &o, 1);
  expect_close("masked_lm_example_loss", o.masked_lm_example_loss, golden_get(&f.g, "masked_lm_example_loss", NULL),
               (size_t)N, 1e-5, 0);
  expect_close("next_sentence_example_loss", o.next_sentence_example_loss,
               golden_get(&f.g, "next_sentence_example_loss", NULL), (size_t)B, 1e-5, 0);
  expect_close("masked_lm_loss", &o.masked_lm_loss, golden_get(&f.g, "masked_lm_loss", NULL), 1, 1e-5, 0);
  expect_close("next_sentence_loss", &o.next_sentence_loss, golden_get(&f.g, "next_sentence_loss", NULL), 1, 1e-5, 0);
  expect_close("loss", &o.loss, golden_get(&f.g, "loss", NULL), 1, 1e-5, 0);

  /* The model_fn's metrics: est/metrics.h over the heads' predictions, as the model_fn
   * feeds them (masked LM weighted by masked_lm_weights). */
  est_metric *lm_acc, *ns_acc;
  assert_int_equal(est_metric_create(&lm_acc, EST_METRIC_ACCURACY, "masked_lm_accuracy"), EST_OK);
  assert_int_equal(est_metric_create(&ns_acc, EST_METRIC_ACCURACY, "next_sentence_accuracy"), EST_OK);
  assert_int_equal(est_metric_update_classes(lm_acc, f.lm_ids, o.masked_lm_predictions, f.lm_w, (size_t)N), EST_OK);
  assert_int_equal(est_metric_update_classes(ns_acc, f.ns, o.next_sentence_predictions, NULL, (size_t)B), EST_OK);
  assert_float_equal(est_metric_result(lm_acc), golden_get(&f.g, "masked_lm_accuracy", NULL)[0], 1e-6);
  assert_float_equal(est_metric_result(ns_acc), golden_get(&f.g, "next_sentence_accuracy", NULL)[0], 1e-6);
  est_metric_free(lm_acc);
  est_metric_free(ns_acc);

  char key[400];
  /* The key bias' gradient is zero in exact arithmetic (a constant added to a row of
   * scores leaves the softmax alone): rounding noise on both sides, covered by an absolute
   * floor of 1e-7 of the model's largest gradient, as test_bert_golden.c. */
  golden_grad_floor(&f.g, f.vs, 1e-7);
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
  printf("worst gradient at %.3f of the tolerance (%s)\n", worst_all, worst_name);
  fixture_close(&f);
}

/* The tied table's gradient really holds the output layer's part: without the heads'
 * contribution the rows of words never in the batch would be zero, and they are not. */
static void test_tied_table_gets_output_path(void **state) {
  (void)state;
  fixture f;
  fixture_open(&f, "pretrain_h32_l2_s12");
  est_bert_pretraining_output o;
  step(&f, 0, &o, 1);
  const int H = f.cfg.hidden_size, V = f.cfg.vocab_size, T = f.g.batch * f.g.seq_len;
  int used[256] = {0};
  for (int i = 0; i < T; i++) used[f.ids[i]] = 1;
  size_t word = 0;
  for (size_t i = 0; i < est_vars_count(f.vs); i++)
    if (!strcmp(est_vars_at(f.vs, i)->name, "bert/embeddings/word_embeddings")) word = i;
  int nonzero_unused = 0;
  for (int v = 0; v < V; v++)
    if (!used[v])
      for (int k = 0; k < H; k++) nonzero_unused += est_vars_grad(f.vs, word)[(size_t)v * H + k] != 0.0f;
  assert_true(nonzero_unused > 0);
  fixture_close(&f);
}

static void test_adam_weight_decay_steps(void **state) {
  (void)state;
  fixture f;
  fixture_open(&f, "pretrain_h32_l2_s12");
  est_adam_weight_decay_config oc = est_adam_weight_decay_config_default();
  oc.init_lr = f.g.init_lr;
  oc.schedule = est_lr_schedule_bert(f.g.num_train_steps, f.g.num_warmup_steps);
  oc.exclude_from_weight_decay = est_bert_exclude_from_weight_decay;
  oc.num_exclude = EST_BERT_NUM_EXCLUDE_FROM_WEIGHT_DECAY;
  est_optimizer *opt;
  assert_int_equal(est_optimizer_create_adam_weight_decay(&opt, f.vs, &oc), EST_OK);
  size_t nsteps = 0;
  const float *ref_losses = golden_get(&f.g, "step_losses", &nsteps);
  assert_int_equal((int)nsteps, f.g.steps);
  for (int t = 0; t < f.g.steps; t++) {
    est_bert_pretraining_output o;
    step(&f, (uint64_t)t, &o, 1);
    expect_close("step loss", &o.loss, ref_losses + t, 1, 1e-5, 0);
    assert_int_equal(est_optimizer_apply(opt, t), EST_OK);
  }
  char key[400];
  for (size_t i = 0; i < est_vars_count(f.vs); i++) {
    const est_variable *v = est_vars_at(f.vs, i);
    snprintf(key, sizeof key, "step3:%s", v->name);
    const float *ref = golden_get(&f.g, key, NULL);
    snprintf(key, sizeof key, "param:%s", v->name);
    const float *p0 = golden_get(&f.g, key, NULL), *c = est_vars_value(f.vs, i);
    for (size_t j = 0; j < v->count; j++) {
      /* relative to the update itself, as test_bert_golden.c */
      double tol = 1e-5 * fabs(ref[j]) + 1e-2 * fabs((double)ref[j] - p0[j]) + 1e-3 * f.g.init_lr;
      if (!(fabs((double)c[j] - ref[j]) <= tol))
        fail_msg("%s[%zu] after %d steps: est %.9g vs torch %.9g", v->name, j, f.g.steps, c[j], ref[j]);
    }
  }
  est_optimizer_free(opt);
  fixture_close(&f);
}

static void test_bad_positions_and_ids(void **state) {
  (void)state;
  fixture f;
  fixture_open(&f, "pretrain_h32_l2_s12");
  const int B = f.g.batch, S = f.g.seq_len, P = f.g.max_predictions;
  est_bert_pretraining_output o;
  assert_int_equal(est_bert_encoder_forward(f.enc, f.ids, f.mask, f.segs, B, S, 0, 0, 0), EST_OK);
  f.pos[P + 1] = S;
  assert_int_equal(est_bert_pretraining_heads_forward(f.heads, f.pos, f.lm_ids, f.lm_w, f.ns, B, S, P, &o),
                   EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "masked_lm_positions[1][1]"));
  f.pos[P + 1] = 1;
  f.lm_ids[2] = f.cfg.vocab_size;
  assert_int_equal(est_bert_pretraining_heads_forward(f.heads, f.pos, f.lm_ids, f.lm_w, f.ns, B, S, P, &o),
                   EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "masked_lm_ids[0][2]"));
  assert_int_equal(est_bert_pretraining_heads_backward(f.heads), EST_ERR_FAILED_PRECONDITION);
  fixture_close(&f);
}

int main(void) {
  est_set_num_threads(2);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_losses_metrics_and_gradients),
      cmocka_unit_test(test_tied_table_gets_output_path),
      cmocka_unit_test(test_adam_weight_decay_steps),
      cmocka_unit_test(test_bad_positions_and_ids),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
