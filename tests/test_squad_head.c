/* The SQuAD head (src/bert/head_squad.c, est_bert_squad_head_type):
 *   - its arithmetic equals tests/reference/squad_head_golden.py, a numpy statement of
 *     run_squad.py's create_model and loss, on a fixed sequence output (logits, loss, and
 *     the gradients of the sequence output, weights and bias);
 *   - through the BERT model_fn: Google's variable names and shapes, the model_fn's
 *     gradients equal central differences of its loss (head and encoder variables),
 *     PREDICT gives unique_ids / start_logits / end_logits, a position outside the sequence
 *     is an error naming the feature. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "est/bert_head.h"
#include "reference/squad_head_golden.h"
#include "test_util.h"

static void expect_close(const char *what, const float *got, const float *want, size_t n) {
  for (size_t i = 0; i < n; i++)
    /* float32 arithmetic against float64, both from the same float32 inputs */
    if (fabsf(got[i] - want[i]) > 1e-5f * fmaxf(1.0f, fabsf(want[i])))
      fail_msg("%s[%zu]: est %.9g, reference %.9g", what, i, got[i], want[i]);
}

static void test_matches_the_numpy_reference(void **state) {
  (void)state;
  enum { B = GOLDEN_B, S = GOLDEN_S, H = GOLDEN_H };
  float start[B * S], end[B * S], logits[B * S * 2], losses[2 * B], probs[2 * B * S], loss;
  est_squad_logits_forward(start, end, logits, golden_seq, golden_weights, golden_bias, B, S, H,
                           EST_PRECISION_FP32);
  expect_close("start_logits", start, golden_start_logits, B * S);
  expect_close("end_logits", end, golden_end_logits, B * S);
  assert_int_equal(est_squad_loss_forward(&loss, losses, probs, start, end, golden_start_positions,
                                          golden_end_positions, B, S), EST_OK);
  expect_close("loss", &loss, &golden_loss, 1);
  /* gradients add into what is there */
  float d_seq[B * S * H], d_w[2 * H], d_b[2], d_logits[B * S * 2];
  for (size_t i = 0; i < B * S * H; i++) d_seq[i] = 1.0f;
  memset(d_w, 0, sizeof d_w);
  memset(d_b, 0, sizeof d_b);
  est_squad_loss_backward(d_seq, d_w, d_b, d_logits, probs, golden_start_positions, golden_end_positions,
                          golden_seq, golden_weights, B, S, H, EST_PRECISION_FP32);
  for (size_t i = 0; i < B * S * H; i++) d_seq[i] -= 1.0f;
  expect_close("d_seq", d_seq, golden_d_seq, B * S * H);
  expect_close("d_weights", d_w, golden_d_weights, 2 * H);
  expect_close("d_bias", d_b, golden_d_bias, 2);
}

/* ---- through the BERT model_fn on a tiny encoder ----------------------------------- */

enum { TB = 3, TS = 8, TV = 32 };

typedef struct batch {
  int32_t ids[TB * TS], mask[TB * TS], segs[TB * TS], start[TB], end[TB], unique[TB];
  est_tensor t[6];
  const char *names[6];
  est_features f;
} batch;

static void make_batch(batch *b) {
  for (int i = 0; i < TB * TS; i++) {
    b->ids[i] = 1 + (i * 5) % (TV - 1);
    b->mask[i] = i % TS < 4 + i / TS;
    b->segs[i] = i % TS >= 3;
  }
  for (int r = 0; r < TB; r++) {
    b->start[r] = 1 + r;
    b->end[r] = 2 + 2 * r;
    b->unique[r] = 1000000000 + r;
  }
  static const char *const names[6] = {"input_ids", "input_mask", "segment_ids", "start_positions",
                                       "end_positions", "unique_ids"};
  int32_t *data[6] = {b->ids, b->mask, b->segs, b->start, b->end, b->unique};
  for (int k = 0; k < 6; k++) {
    b->names[k] = names[k];
    b->t[k] = k < 3 ? (est_tensor){.dtype = EST_DT_INT32, .rank = 2, .dims = {TB, TS}, .data = data[k]}
                    : (est_tensor){.dtype = EST_DT_INT32, .rank = 1, .dims = {TB}, .data = data[k]};
  }
  b->f = (est_features){.batch_size = TB, .count = 6, .names = b->names, .tensors = b->t};
}

typedef struct model {
  est_bert_model_params p;
  est_model_fn fn;
  est_var_store *vars;
  void *state;
} model;

static void model_build(model *m, est_mode mode) {
  m->p = (est_bert_model_params){.head = &est_bert_squad_head_type, .max_seq_length = TS, .learning_rate = 1e-3,
                                 .num_train_steps = 10, .num_warmup_steps = 1};
  est_bert_config *c = &m->p.bert_config;
  *c = est_bert_config_default();
  c->vocab_size = TV, c->hidden_size = 8, c->num_hidden_layers = 1, c->num_attention_heads = 2;
  c->intermediate_size = 16, c->max_position_embeddings = TS, c->type_vocab_size = 2;
  c->hidden_dropout_prob = c->attention_probs_dropout_prob = 0.0;
  m->fn = est_bert_model_fn(&m->p);
  assert_int_equal(est_vars_create(&m->vars), EST_OK);
  est_model_context ctx = {.mode = mode, .batch_size = TB, .seed = 5, .params = m->fn.params};
  m->state = NULL;
  assert_int_equal(m->fn.build(&ctx, m->vars, &m->state), EST_OK);
  assert_int_equal(est_vars_finalize(m->vars, 17), EST_OK);
  /* the bias starts at zero; a nonzero one checks that it reaches the logits */
  float *bias = est_vars_value(m->vars, (size_t)est_vars_find(m->vars, "cls/squad/output_bias"));
  bias[0] = 0.25f, bias[1] = -0.5f;
}

static void model_free(model *m) {
  m->fn.destroy(m->state);
  est_vars_free(m->vars);
}

static void test_google_variable_names(void **state) {
  (void)state;
  model m;
  model_build(&m, EST_MODE_TRAIN);
  const size_t n = est_vars_count(m.vars);
  const est_variable *w = est_vars_at(m.vars, n - 2), *b = est_vars_at(m.vars, n - 1);
  assert_string_equal(w->name, "cls/squad/output_weights");
  assert_int_equal(w->rank, 2);
  assert_int_equal(w->dims[0], 2);
  assert_int_equal(w->dims[1], 8);
  assert_string_equal(b->name, "cls/squad/output_bias");
  assert_int_equal(b->dims[0], 2);
  model_free(&m);
}

static void test_gradients_equal_finite_differences(void **state) {
  (void)state;
  model m;
  model_build(&m, EST_MODE_TRAIN);
  batch b;
  make_batch(&b);
  est_estimator_spec spec = {0};
  est_vars_zero_grads(m.vars);
  assert_int_equal(m.fn.call(m.state, m.vars, &b.f, EST_MODE_TRAIN, 0, &spec), EST_OK);
  assert_true(spec.loss > 0 && isfinite(spec.loss));
  const char *checked[] = {"cls/squad/output_weights", "cls/squad/output_bias",
                           "bert/encoder/layer_0/output/LayerNorm/gamma",
                           "bert/encoder/layer_0/attention/self/key/kernel", "bert/embeddings/word_embeddings"};
  for (size_t k = 0; k < sizeof checked / sizeof *checked; k++) {
    const int v = est_vars_find(m.vars, checked[k]);
    assert_true(v >= 0);
    float *x = est_vars_value(m.vars, (size_t)v);
    const float *g = est_vars_grad(m.vars, (size_t)v);
    const size_t count = est_vars_at(m.vars, (size_t)v)->count;
    /* word_embeddings: rows of ids the batch uses (1 + 5i mod 31 hits 1, 6, 11, ...) */
    const size_t first = k == 4 ? 6 * 8 : 0;
    for (size_t e = first; e < first + 4 && e < count; e++) {
      const float keep = x[e], h = 1e-2f;
      x[e] = keep + h;
      assert_int_equal(m.fn.call(m.state, m.vars, &b.f, EST_MODE_EVAL, 0, &spec), EST_OK);
      const float lp = spec.loss;
      x[e] = keep - h;
      assert_int_equal(m.fn.call(m.state, m.vars, &b.f, EST_MODE_EVAL, 0, &spec), EST_OK);
      const float lm = spec.loss;
      x[e] = keep;
      const double fd = ((double)lp - lm) / (2.0 * h);
      if (fabs(fd - g[e]) > 0.02 * fmax(fabs(fd), fabs(g[e])) + 1e-4)
        fail_msg("%s[%zu]: backward %g, finite difference %g", checked[k], e, g[e], fd);
    }
  }
  model_free(&m);
}

static void test_predictions_and_bad_positions(void **state) {
  (void)state;
  model m;
  model_build(&m, EST_MODE_PREDICT);
  batch b;
  make_batch(&b);
  est_estimator_spec spec = {0};
  assert_int_equal(m.fn.call(m.state, m.vars, &b.f, EST_MODE_PREDICT, 0, &spec), EST_OK);
  assert_int_equal(spec.num_predictions, 3);
  assert_string_equal(spec.prediction_names[0], "unique_ids");
  assert_string_equal(spec.prediction_names[1], "start_logits");
  assert_string_equal(spec.prediction_names[2], "end_logits");
  assert_int_equal(((const int32_t *)spec.predictions[0].data)[2], 1000000002);
  assert_int_equal(spec.predictions[1].dims[0], TB);
  assert_int_equal(spec.predictions[1].dims[1], TS);
  /* start - end logits = (w0 - w1) . seq + 0.75: not the same numbers */
  const float *s = spec.predictions[1].data, *e = spec.predictions[2].data;
  assert_true(s[0] != e[0] && isfinite(s[TB * TS - 1]) && isfinite(e[TB * TS - 1]));
  model_free(&m);

  model_build(&m, EST_MODE_TRAIN);
  b.end[1] = TS;
  assert_int_not_equal(m.fn.call(m.state, m.vars, &b.f, EST_MODE_TRAIN, 0, &spec), EST_OK);
  assert_non_null(strstr(est_error_message(), "feature end_positions: row 1 has position 8, expected 0..7"));
  model_free(&m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_matches_the_numpy_reference),
    cmocka_unit_test(test_google_variable_names),
    cmocka_unit_test(test_gradients_equal_finite_differences),
    cmocka_unit_test(test_predictions_and_bad_positions),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
