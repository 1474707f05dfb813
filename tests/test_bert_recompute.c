/* Per-layer recomputation (est_bert_model_params.recompute, est_bert_encoder_set_recompute):
 * training the BERT model_fn with it is bit for bit training without it (gradients, pooled
 * output, loss and the parameters after the model_fn's AdamWeightDecay, step after step, with
 * dropout on, padded rows and a batch without padding, a non-zero first row, in fp32 and,
 * where the CPU has it, bf16), turning it on between steps reallocates and stays identical,
 * and the reservation holds less memory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "est/bert_classifier.h"
#include "bert_fn_util.h"
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
  bert_fn m;
  est_optimizer *opt;
} run;

/* The BERT model_fn with the classifier head, TRAIN, dropout on, rows at first row 5 of a
 * larger global batch (as rank 1 of 2 would be), and the model_fn's optimizer. */
static void run_open(run *r, int recompute, est_precision precision) {
  est_bert_config cfg = small_config();
  bert_fn_init(&r->m, &cfg, C, S);
  r->m.params.recompute = recompute;
  r->m.params.precision = precision;
  r->m.params.learning_rate = 1e-2; /* large, so a wrong gradient moves the parameters visibly */
  r->m.params.num_train_steps = 100;
  r->m.first_row = 5;
  assert_int_equal(bert_fn_build(&r->m, EST_MODE_TRAIN, B, 7), EST_OK);
  assert_int_equal(est_bert_encoder_precision(bert_fn_encoder(&r->m)), precision);
  assert_int_equal(r->m.fn.create_optimizer(r->m.model, r->m.vs, &r->opt), EST_OK);
}

static void run_close(run *r) {
  est_optimizer_free(r->opt);
  bert_fn_free(&r->m);
}

/* One training step on batch `step` (random ids, padded tails; step 2 without padding). */
static void train_step(run *r, int step, float *loss) {
  int32_t ids[B * S], mask[B * S], segs[B * S], labels[B];
  est_rng g;
  est_rng_init(&g, 100 + (uint64_t)step);
  for (int i = 0; i < B * S; i++) {
    ids[i] = (int32_t)est_rng_below(&g, V);
    mask[i] = step == 2 || i % S < S - 2 * (i / S);
    segs[i] = i % S >= S / 2;
  }
  for (int i = 0; i < B; i++) labels[i] = (i + step) % C;
  est_vars_zero_grads(r->m.vs);
  assert_int_equal(bert_fn_call(&r->m, ids, mask, segs, labels, B, step), EST_OK);
  *loss = r->m.spec.loss;
  assert_int_equal(est_optimizer_apply(r->opt, step), EST_OK);
}

static void assert_same_training(int switch_on_later, est_precision precision) {
  run keep, rc;
  run_open(&keep, 0, precision);
  run_open(&rc, !switch_on_later, precision);
  est_var_store *vk = keep.m.vs, *vr = rc.m.vs;
  const size_t n = est_vars_size(vk);
  assert_int_equal(est_vars_size(vr), n);
  est_bert_encoder *ek = bert_fn_encoder(&keep.m), *er = bert_fn_encoder(&rc.m);
  for (int step = 0; step < STEPS; step++) {
    if (switch_on_later && step == 2) { /* the encoder's own switch: it reallocates */
      est_bert_encoder_set_recompute(er, 1);
      assert_int_equal(est_bert_encoder_reserve(er, B, S, 1), EST_OK);
    }
    float loss_k, loss_r;
    train_step(&keep, step, &loss_k);
    train_step(&rc, step, &loss_r);
    assert_memory_equal(&loss_k, &loss_r, sizeof loss_k);
    assert_memory_equal(est_bert_encoder_pooled_output(ek), est_bert_encoder_pooled_output(er), B * H * sizeof(float));
    assert_memory_equal(est_vars_grads(vk), est_vars_grads(vr), n * sizeof(float));
    assert_memory_equal(est_vars_params(vk), est_vars_params(vr), n * sizeof(float));
  }
  /* one layer's scratch instead of L: less memory */
  assert_true(est_bert_encoder_activation_bytes(er) < est_bert_encoder_activation_bytes(ek));
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
