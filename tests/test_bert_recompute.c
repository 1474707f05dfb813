/* Per-layer recomputation (est_bert_encoder_set_recompute): training with it is bit for bit
 * training without it (gradients, logits, loss and the parameters after AdamWeightDecay,
 * step after step, with dropout on, padded rows, a non-zero first row, no input mask, in
 * fp32 and, where the CPU has it, bf16), turning it on between steps reallocates and stays
 * identical, and the reservation holds less memory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "est/bert_classifier.h"
#include "est/optimizer.h"
#include "est/precision.h"
#include "est/rng.h"
#include "est/threads.h"
#include "est/variables.h"

enum { B = 3, S = 9, H = 16, L = 3, V = 41, C = 3, STEPS = 4 };

static est_bert_config small_config(void) {
  est_bert_config cfg = est_bert_config_default();  /* dropout 0.1 on hidden and attention */
  cfg.vocab_size = V;
  cfg.hidden_size = H;
  cfg.num_hidden_layers = L;
  cfg.num_attention_heads = 2;
  cfg.intermediate_size = 24;
  cfg.max_position_embeddings = 32;
  cfg.type_vocab_size = 2;
  return cfg;
}

typedef struct run {
  est_var_store *vs;
  est_bert_classifier *m;
  est_optimizer *opt;
} run;

static void run_open(run *r, int recompute, est_precision precision) {
  est_bert_config cfg = small_config();
  assert_int_equal(est_vars_create(&r->vs), EST_OK);
  assert_int_equal(est_bert_classifier_create(&r->m, &cfg, C, r->vs), EST_OK);
  assert_int_equal(est_vars_finalize(r->vs, 5), EST_OK);
  assert_int_equal(est_bert_classifier_set_precision(r->m, precision), precision);
  est_bert_encoder_set_recompute(est_bert_classifier_encoder(r->m), recompute);
  assert_int_equal(est_bert_classifier_reserve(r->m, B, S), EST_OK);
  est_adam_weight_decay_config oc = est_adam_weight_decay_config_default();
  oc.init_lr = 1e-2;  /* large, so a wrong gradient moves the parameters visibly */
  assert_int_equal(est_optimizer_create_adam_weight_decay(&r->opt, r->vs, &oc), EST_OK);
}

static void run_close(run *r) {
  est_optimizer_free(r->opt);
  est_bert_classifier_free(r->m);
  est_vars_free(r->vs);
}

/* One training step on batch `step` (random ids, padded tails; step 2 without a mask). */
static void train_step(run *r, int step, float *logits, float *loss) {
  int32_t ids[B * S], mask[B * S], segs[B * S], labels[B];
  est_rng g;
  est_rng_init(&g, 100 + (uint64_t)step);
  for (int i = 0; i < B * S; i++) {
    ids[i] = (int32_t)est_rng_below(&g, V);
    mask[i] = i % S < S - 2 * (i / S);
    segs[i] = i % S >= S / 2;
  }
  for (int i = 0; i < B; i++) labels[i] = (i + step) % C;
  est_bert_classifier_set_first_row(r->m, step == 3 ? 5 : 0);
  est_vars_zero_grads(r->vs);
  assert_int_equal(est_bert_classifier_forward(r->m, ids, step == 2 ? NULL : mask, segs, labels, B, S, 1, 7,
                                               (uint64_t)step, logits, NULL, loss),
                   EST_OK);
  assert_int_equal(est_bert_classifier_backward(r->m), EST_OK);
  assert_int_equal(est_optimizer_apply(r->opt, step), EST_OK);
}

static void assert_same_training(int switch_on_later, est_precision precision) {
  run keep, rc;
  run_open(&keep, 0, precision);
  run_open(&rc, !switch_on_later, precision);
  const size_t n = est_vars_size(keep.vs);
  assert_int_equal(est_vars_size(rc.vs), n);
  for (int step = 0; step < STEPS; step++) {
    if (switch_on_later && step == 2) {
      est_bert_encoder_set_recompute(est_bert_classifier_encoder(rc.m), 1);
      assert_int_equal(est_bert_classifier_reserve(rc.m, B, S), EST_OK);
    }
    float lk[B * C], lr[B * C], loss_k, loss_r;
    train_step(&keep, step, lk, &loss_k);
    train_step(&rc, step, lr, &loss_r);
    assert_memory_equal(lk, lr, sizeof lk);
    assert_memory_equal(&loss_k, &loss_r, sizeof loss_k);
    assert_memory_equal(est_vars_grads(keep.vs), est_vars_grads(rc.vs), n * sizeof(float));
    assert_memory_equal(est_vars_params(keep.vs), est_vars_params(rc.vs), n * sizeof(float));
  }
  /* one layer's scratch instead of L: less memory */
  assert_true(est_bert_classifier_activation_bytes(rc.m) < est_bert_classifier_activation_bytes(keep.m));
  run_close(&keep);
  run_close(&rc);
}

static void test_recompute_is_bit_identical_fp32(void **state) {
  (void)state;
  assert_same_training(0, EST_PRECISION_FP32);
}

static void test_recompute_switched_on_between_steps(void **state) {
  (void)state;
  assert_same_training(1, EST_PRECISION_FP32);
}

static void test_recompute_is_bit_identical_bf16(void **state) {
  (void)state;
  if (est_precision_resolve(EST_PRECISION_BF16) != EST_PRECISION_BF16) skip();
  assert_same_training(0, EST_PRECISION_BF16);
}

int main(void) {
  est_set_num_threads(2);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_recompute_is_bit_identical_fp32),
      cmocka_unit_test(test_recompute_switched_on_between_steps),
      cmocka_unit_test(test_recompute_is_bit_identical_bf16),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
