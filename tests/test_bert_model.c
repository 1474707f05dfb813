/* BertConfig loading and the classifier's contract, through the one BERT model_fn with the
 * classifier head (est_bert_model_fn, bert_fn_util.h): modeling_test.py's shapes with
 * dropout on, variable names and counts, dropout determinism, error paths. (Numerical
 * agreement with PyTorch is test_bert_golden.c.) */
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
#include "est/rng.h"
#include "est/threads.h"
#include "bert_fn_util.h"
#include "test_util.h"

/* ---- config ----------------------------------------------------------------------------- */

static void test_config_defaults_and_unknown_keys(void **state) {
  (void)state;
  est_bert_config c;
  assert_int_equal(est_bert_config_from_json_string(
                       &c, "{\"vocab_size\": 99, \"hidden_size\": 36, \"num_attention_heads\": 6, "
                           "\"directionality\": \"bidi\", \"pooler_fc_size\": 768}", "t.json"),
                   EST_OK);
  assert_int_equal(c.vocab_size, 99);
  assert_int_equal(c.hidden_size, 36);
  assert_int_equal(c.num_attention_heads, 6);
  /* the rest are modeling.BertConfig's constructor defaults (type_vocab_size 16) */
  assert_int_equal(c.num_hidden_layers, 12);
  assert_int_equal(c.intermediate_size, 3072);
  assert_int_equal(c.hidden_act, EST_ACT_GELU);
  assert_int_equal(c.max_position_embeddings, 512);
  assert_int_equal(c.type_vocab_size, 16);
  assert_true(c.hidden_dropout_prob == 0.1 && c.attention_probs_dropout_prob == 0.1 && c.initializer_range == 0.02);

  /* to_json_string: sorted keys, indent 2, trailing newline; it reads back the same */
  char *text = est_bert_config_to_json_string(&c);
  assert_non_null(text);
  assert_non_null(strstr(text, "\"vocab_size\": 99"));
  assert_non_null(strstr(text, "\"hidden_size\": 36"));
  assert_non_null(strstr(text, "\"hidden_dropout_prob\": 0.1,"));
  assert_true(strstr(text, "attention_probs_dropout_prob") < strstr(text, "vocab_size"));
  assert_int_equal(text[strlen(text) - 1], '\n');
  est_bert_config back;
  assert_int_equal(est_bert_config_from_json_string(&back, text, "roundtrip"), EST_OK);
  assert_memory_equal(&back, &c, sizeof c);
  free(text);
}

static void expect_config_error(const char *json, const char *needle) {
  est_bert_config c;
  assert_int_equal(est_bert_config_from_json_string(&c, json, "my/bert_config.json"), EST_ERR_INVALID_ARGUMENT);
  if (!strstr(est_error_message(), needle) || !strstr(est_error_message(), "my/bert_config.json"))
    fail_msg("message '%s' lacks '%s' or the file name", est_error_message(), needle);
}

static void test_config_errors_name_file_and_field(void **state) {
  (void)state;
  expect_config_error("{\"hidden_size\": 768}", "vocab_size");
  expect_config_error("{\"vocab_size\": 10, \"hidden_size\": 100, \"num_attention_heads\": 12}",
                      "The hidden size (100) is not a multiple of the number of attention heads (12)");
  expect_config_error("{\"vocab_size\": 10, \"hidden_act\": \"swish\"}", "Unsupported activation: swish");
  expect_config_error("{\"vocab_size\": 10, \"hidden_act\": \"swish\"}", "hidden_act");
  expect_config_error("{\"vocab_size\": \"ten\"}", "\"vocab_size\" must be an integer");
  expect_config_error("{\"vocab_size\": 10, \"hidden_dropout_prob\": 1.5}", "hidden_dropout_prob");
  expect_config_error("{\"vocab_size\": 10, \"num_hidden_layers\": 0}", "num_hidden_layers");
  expect_config_error("[1, 2]", "expected a JSON object");
  expect_config_error("{\"vocab_size\": 10,", "my/bert_config.json:1");
  est_bert_config c;
  assert_int_equal(est_bert_config_from_json_string(&c, "{\"vocab_size\": 10, \"hidden_act\": \"GELU_EXACT\"}", "x"),
                   EST_OK);
  assert_int_equal(c.hidden_act, EST_ACT_GELU_EXACT);
}

static void test_config_from_file(void **state) {
  (void)state;
  char dir[512], path[600];
  test_make_tmpdir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/bert_config.json", dir);
  FILE *f = fopen(path, "w");
  fputs("{\n  \"attention_probs_dropout_prob\": 0.1,\n  \"hidden_act\": \"gelu\",\n  \"hidden_dropout_prob\": 0.1,\n"
        "  \"hidden_size\": 128,\n  \"initializer_range\": 0.02,\n  \"intermediate_size\": 512,\n"
        "  \"max_position_embeddings\": 512,\n  \"num_attention_heads\": 2,\n  \"num_hidden_layers\": 2,\n"
        "  \"type_vocab_size\": 2,\n  \"vocab_size\": 30522\n}\n", f);
  fclose(f);
  est_bert_config c;
  assert_int_equal(est_bert_config_from_json_file(&c, path), EST_OK);
  assert_int_equal(c.hidden_size, 128);
  assert_int_equal(c.type_vocab_size, 2);
  snprintf(path, sizeof path, "%s/missing.json", dir);
  assert_int_equal(est_bert_config_from_json_file(&c, path), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "missing.json"));
  test_remove_tree(dir);
}

/* ---- variables ------------------------------------------------------------------------- */

/* The model_fn's variables for cfg and C labels, declared only (built for PREDICT: no
 * finalize, so BERT-Base's table is cheap). */
static void declare(bert_fn *m, const est_bert_config *cfg, int num_labels) {
  bert_fn_init(m, cfg, num_labels, 8);
  m->fn = est_bert_model_fn(&m->params);
  m->mode = EST_MODE_PREDICT;
  assert_int_equal(est_vars_create(&m->vs), EST_OK);
  const est_model_context ctx = {.mode = EST_MODE_PREDICT, .batch_size = 1, .params = &m->params};
  assert_int_equal(m->fn.build(&ctx, m->vs, &m->model), EST_OK);
}

static void test_variable_names_and_counts(void **state) {
  (void)state;
  est_bert_config c = est_bert_config_default();
  c.vocab_size = 30522;
  c.type_vocab_size = 2;
  bert_fn m;
  declare(&m, &c, 2);
  est_var_store *vs = m.vs;
  /* spec 3.4: BERT-Base uncased has 109,482,240 parameters; the head adds 2*768 + 2 */
  assert_int_equal(est_vars_num_parameters(vs), 109482240 + 2 * 768 + 2);
  assert_int_equal(est_vars_count(vs), 5 + 12 * 16 + 2 + 2);
  int i = est_vars_find(vs, "bert/encoder/layer_11/intermediate/dense/kernel");
  assert_true(i >= 0);
  assert_int_equal(est_vars_at(vs, (size_t)i)->dims[0], 768);
  assert_int_equal(est_vars_at(vs, (size_t)i)->dims[1], 3072);
  i = est_vars_find(vs, "output_weights");
  assert_true(i >= 0);
  assert_int_equal(est_vars_at(vs, (size_t)i)->dims[0], 2);  /* [C, H], transposed vs kernels */
  assert_true(est_vars_at(vs, (size_t)i)->init.kind == EST_INIT_TRUNCATED_NORMAL &&
              est_vars_at(vs, (size_t)i)->init.value == 0.02f);
  /* initialisers: kernels/tables truncated normal(initializer_range), biases and beta 0,
   * gamma 1 */
  const est_variable *k = est_vars_at(vs, (size_t)est_vars_find(vs, "bert/encoder/layer_3/attention/self/key/kernel"));
  assert_true(k->init.kind == EST_INIT_TRUNCATED_NORMAL && k->init.value == (float)c.initializer_range);
  const est_variable *we = est_vars_at(vs, (size_t)est_vars_find(vs, "bert/embeddings/word_embeddings"));
  assert_true(we->init.kind == EST_INIT_TRUNCATED_NORMAL && we->dims[0] == 30522 && we->dims[1] == 768);
  assert_true(est_vars_at(vs, (size_t)est_vars_find(vs, "bert/encoder/layer_3/output/dense/bias"))->init.kind ==
              EST_INIT_ZEROS);
  assert_true(est_vars_at(vs, (size_t)est_vars_find(vs, "bert/embeddings/LayerNorm/beta"))->init.kind ==
              EST_INIT_ZEROS);
  assert_true(est_vars_at(vs, (size_t)est_vars_find(vs, "bert/encoder/layer_0/attention/output/LayerNorm/gamma"))
                  ->init.kind == EST_INIT_ONES);
  assert_true(est_vars_find(vs, "bert/embeddings/token_type_embeddings") >= 0);
  assert_true(est_vars_find(vs, "bert/pooler/dense/bias") >= 0);
  bert_fn_free(&m);

  /* BERT-Tiny: 4,385,920 */
  c.hidden_size = 128;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 2;
  c.intermediate_size = 512;
  declare(&m, &c, 3);
  assert_int_equal(est_vars_num_parameters(m.vs), 4385920 + 3 * 128 + 3);
  bert_fn_free(&m);
}

/* ---- modeling_test.py test_default ------------------------------------------------------ */

typedef struct tiny {
  est_bert_config cfg;
  bert_fn train;
  int32_t ids[13 * 7], mask[13 * 7], types[13 * 7], labels[13];
} tiny;

static est_bert_config tiny_config(void) {
  /* BertModelTester defaults: batch 13, seq 7, vocab 99, hidden 32, 5 layers, 4 heads,
   * intermediate 37, gelu, dropouts 0.1, type_vocab 16, init 0.02. */
  est_bert_config cfg = est_bert_config_default();
  cfg.vocab_size = 99;
  cfg.hidden_size = 32;
  cfg.num_hidden_layers = 5;
  cfg.num_attention_heads = 4;
  cfg.intermediate_size = 37;
  return cfg;
}

/* The model for `mode` (seed: initial values and dropout) with tiny's batch. */
static void tiny_model(bert_fn *m, est_mode mode, uint64_t seed) {
  const est_bert_config cfg = tiny_config();
  bert_fn_init(m, &cfg, 2, 7);
  assert_int_equal(bert_fn_build(m, mode, 13, seed), EST_OK);
}

static void tiny_open(tiny *t) {
  t->cfg = tiny_config();
  tiny_model(&t->train, EST_MODE_TRAIN, 12345);
  est_rng r;
  est_rng_init(&r, 7);
  for (int i = 0; i < 13 * 7; i++) {
    t->ids[i] = (int32_t)est_rng_below(&r, 99);
    t->mask[i] = (int32_t)est_rng_below(&r, 2);
    t->types[i] = (int32_t)est_rng_below(&r, 16);  /* ids up to 15 with type_vocab 16 */
  }
  for (int s = 0; s < 7; s++) t->mask[4 * 7 + s] = 0;  /* an all-zero mask row */
  for (int b = 0; b < 13; b++) t->labels[b] = b % 2;
}

static void tiny_close(tiny *t) { bert_fn_free(&t->train); }

/* TRAIN's loss at global step `step`, gradients zeroed first. */
static float train_loss(tiny *t, int64_t step) {
  est_vars_zero_grads(t->train.vs);
  assert_int_equal(bert_fn_call(&t->train, t->ids, t->mask, t->types, t->labels, 13, step), EST_OK);
  return t->train.spec.loss;
}

static void test_modeling_default_shapes_finite_and_all_params_used(void **state) {
  (void)state;
  tiny t;
  tiny_open(&t);
  const float loss = train_loss(&t, 0); /* forward, then backward: the model_fn's TRAIN call */
  assert_true(isfinite(loss) && loss > 0);
  const est_bert_encoder *enc = bert_fn_encoder(&t.train);
  const float *emb = est_bert_encoder_embedding_output(enc), *seq = est_bert_encoder_sequence_output(enc);
  const float *pooled = est_bert_encoder_pooled_output(enc);
  for (int i = 0; i < 13 * 7 * 32; i++) assert_true(isfinite(emb[i]) && isfinite(seq[i]));
  for (int i = 0; i < 13 * 32; i++) assert_true(isfinite(pooled[i]) && fabsf(pooled[i]) <= 1.0f);
  /* Dropout is on (training): some embedding outputs are exactly zero, about 10%. */
  int zeros = 0;
  for (int i = 0; i < 13 * 7 * 32; i++) zeros += emb[i] == 0.0f;
  assert_true(zeros > 13 * 7 * 32 / 20 && zeros < 13 * 7 * 32 / 5);

  /* "every op is reachable from the outputs": every variable gets a gradient. */
  for (size_t i = 0; i < est_vars_count(t.train.vs); i++) {
    const est_variable *v = est_vars_at(t.train.vs, i);
    const float *g = est_vars_grad(t.train.vs, i);
    int nonzero = 0;
    for (size_t j = 0; j < v->count; j++) {
      assert_true(isfinite(g[j]));
      nonzero += g[j] != 0.0f;
    }
    if (!nonzero) fail_msg("%s has an all-zero gradient", v->name);
  }

  /* EVAL's loss is the batch mean of PREDICT's -log p(label), without dropout */
  bert_fn eval, predict;
  tiny_model(&eval, EST_MODE_EVAL, 12345);
  tiny_model(&predict, EST_MODE_PREDICT, 12345);
  assert_int_equal(bert_fn_call(&eval, t.ids, t.mask, t.types, t.labels, 13, 0), EST_OK);
  assert_int_equal(bert_fn_call(&predict, t.ids, t.mask, t.types, NULL, 13, 0), EST_OK);
  const float *p = bert_fn_probabilities(&predict);
  double sum = 0;
  for (int b = 0; b < 13; b++) {
    assert_float_equal(p[2 * b] + p[2 * b + 1], 1.0f, 1e-6f);
    sum += -log((double)p[2 * b + t.labels[b]]);
  }
  assert_float_equal(eval.spec.loss, sum / 13, 1e-5);
  bert_fn_free(&eval);
  bert_fn_free(&predict);
  tiny_close(&t);
}

static void test_dropout_reproducible_and_eval_deterministic(void **state) {
  (void)state;
  tiny t;
  tiny_open(&t);
  const size_t P = 13 * 32 * sizeof(float);
  float pa[13 * 32], pc[13 * 32];
  const float a = train_loss(&t, 3);
  memcpy(pa, est_bert_encoder_pooled_output(bert_fn_encoder(&t.train)), P);
  const float b = train_loss(&t, 3);
  assert_memory_equal(&a, &b, sizeof a);
  assert_memory_equal(pa, est_bert_encoder_pooled_output(bert_fn_encoder(&t.train)), P);
  const float c = train_loss(&t, 4); /* another step: other masks */
  memcpy(pc, est_bert_encoder_pooled_output(bert_fn_encoder(&t.train)), P);
  assert_true(a != c && memcmp(pa, pc, P) != 0);
  /* another seed: other masks at the same step */
  bert_fn other;
  tiny_model(&other, EST_MODE_TRAIN, 99);
  memcpy(est_vars_params(other.vs), est_vars_params(t.train.vs), est_vars_size(t.train.vs) * sizeof(float));
  est_vars_zero_grads(other.vs);
  assert_int_equal(bert_fn_call(&other, t.ids, t.mask, t.types, t.labels, 13, 3), EST_OK);
  assert_true(other.spec.loss != a);
  bert_fn_free(&other);
  /* eval: no dropout, the step does not matter */
  bert_fn eval;
  tiny_model(&eval, EST_MODE_EVAL, 12345);
  assert_int_equal(bert_fn_call(&eval, t.ids, t.mask, t.types, t.labels, 13, 3), EST_OK);
  const float e1 = eval.spec.loss;
  assert_int_equal(bert_fn_call(&eval, t.ids, t.mask, t.types, t.labels, 13, 8), EST_OK);
  assert_memory_equal(&e1, &eval.spec.loss, sizeof e1);
  assert_true(e1 != a);
  /* the encoder: a NULL mask is all ones, NULL segments all zeros */
  est_bert_encoder *enc = bert_fn_encoder(&eval);
  int32_t ones[13 * 7], zeros[13 * 7] = {0};
  for (int i = 0; i < 13 * 7; i++) ones[i] = 1;
  float p1[13 * 32];
  assert_int_equal(est_bert_encoder_forward(enc, t.ids, ones, zeros, 13, 7, 0, 0, 0), EST_OK);
  memcpy(p1, est_bert_encoder_pooled_output(enc), P);
  assert_int_equal(est_bert_encoder_forward(enc, t.ids, NULL, NULL, 13, 7, 0, 0, 0), EST_OK);
  assert_memory_equal(p1, est_bert_encoder_pooled_output(enc), P);
  bert_fn_free(&eval);
  /* the probabilities helper: softmax */
  const float logits[4] = {0.5f, -1.0f, 3.0f, 3.0f};
  float p[4];
  est_bert_classifier_probabilities(p, logits, 2, 2);
  assert_float_equal(p[0] + p[1], 1.0f, 1e-6f);
  assert_float_equal(logf(p[0] / p[1]), 1.5f, 1e-5f);
  assert_float_equal(p[2], 0.5f, 1e-7f);
  tiny_close(&t);
}

static void test_thread_count_changes_only_gemm_rounding(void **state) {
  (void)state;
  /* Non-GEMM ops are bitwise thread-independent (test_nn_gradcheck); the whole model may
   * differ only by BLAS reassociation, far below the golden tolerances. Dropout masks do
   * not depend on the thread count at all. */
  tiny t;
  tiny_open(&t);
  float a[13 * 32];
  est_set_num_threads(1);
  const float la = train_loss(&t, 3);
  memcpy(a, est_bert_encoder_pooled_output(bert_fn_encoder(&t.train)), sizeof a);
  est_set_num_threads(2);
  if (test_threads_that_ran() != 2) fail_msg("the second run did not get 2 OpenMP threads");
  const float lb = train_loss(&t, 3);
  const float *b = est_bert_encoder_pooled_output(bert_fn_encoder(&t.train));
  for (int i = 0; i < 13 * 32; i++) assert_float_equal(a[i], b[i], 1e-6f * (1.0f + fabsf(a[i])));
  assert_float_equal(la, lb, 1e-6f * (1.0f + fabsf(la)));
  tiny_close(&t);
}

static void test_bad_inputs_are_errors(void **state) {
  (void)state;
  tiny t;
  tiny_open(&t);
  bert_fn eval;
  tiny_model(&eval, EST_MODE_EVAL, 1);
  t.ids[3 * 7 + 2] = 99;
  assert_int_equal(bert_fn_call(&eval, t.ids, t.mask, t.types, t.labels, 13, 0), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "input_ids[3][2] = 99"));
  t.ids[3 * 7 + 2] = 1;
  t.labels[5] = 2;
  assert_int_equal(bert_fn_call(&eval, t.ids, t.mask, t.types, t.labels, 13, 0), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "label_ids[5] = 2"));
  assert_int_equal(bert_fn_call(&t.train, t.ids, t.mask, t.types, t.labels, 13, 0), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "label_ids[5] = 2"));
  t.labels[5] = 1;
  bert_fn_free(&eval);
  /* beyond the reservation, beyond the position table */
  static int32_t more[14 * 7];
  assert_int_equal(bert_fn_call(&t.train, more, more, more, t.labels, 14, 0), EST_ERR_INVALID_ARGUMENT);
  bert_fn wide;
  const est_bert_config cfg = tiny_config();
  bert_fn_init(&wide, &cfg, 2, 513);
  assert_int_equal(bert_fn_build(&wide, EST_MODE_PREDICT, 1, 0), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "Cannot use sequence length 513"));
  bert_fn_free(&wide);
  tiny_close(&t);
}

int main(void) {
  est_set_num_threads(2);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_config_defaults_and_unknown_keys),
      cmocka_unit_test(test_config_errors_name_file_and_field),
      cmocka_unit_test(test_config_from_file),
      cmocka_unit_test(test_variable_names_and_counts),
      cmocka_unit_test(test_modeling_default_shapes_finite_and_all_params_used),
      cmocka_unit_test(test_dropout_reproducible_and_eval_deterministic),
      cmocka_unit_test(test_thread_count_changes_only_gemm_rounding),
      cmocka_unit_test(test_bad_inputs_are_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
