/* The one BERT model_fn and its head interface (est/bert_head.h, docs/heads.md):
 *   - a probe head sees what the interface promises: its variables declared right after the
 *     encoder's, the mode's batch at reserve, the encoder's outputs at forward, an output
 *     gradient to add into at backward, and is told nothing it did not ask for;
 *   - the model_fn's gradients through a head equal finite differences of its loss
 *     (the pooled-output gradient path the classifier and the regression head use);
 *   - a head without a predict mode or without backward gets an error naming it;
 *   - examples/regression_head.c (the smallest head) learns its task. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/bert_head.h"
#include "est/bert_pretraining.h"
#include "est/run_pretraining.h"
#include "est/dataset.h"
#include "est/example.h"
#include "est/file.h"
#include "est/tfrecord.h"
#include "test_util.h"

enum { S = 8, V = 32, B = 4 };

/* ---- a probe head: y = sum of pooled . u (u fixed, not a variable); loss = mean y^2 ---- */

typedef struct probe {
  est_bert_encoder *enc;
  est_var_store *vars;
  int H, scale;                /* one variable, "probe/scale" [1] */
  size_t vars_at_create;       /* the store's size when create ran */
  int max_batch;
  float y[B];
  int last_B;
  int backward_calls;
} probe;

static probe *g_probe; /* the last probe built, for the test to look at */

static est_status probe_create(void **out, const est_bert_head_context *ctx) {
  probe *h = calloc(1, sizeof *h);
  *out = h;
  g_probe = h;
  h->enc = ctx->encoder;
  h->vars = ctx->vars;
  h->H = est_bert_encoder_config(ctx->encoder)->hidden_size;
  h->vars_at_create = est_vars_count(ctx->vars);
  return est_vars_declare(ctx->vars, "probe/scale", 1, (int64_t[]){1}, est_init_constant(0.5f), &h->scale);
}

static est_status probe_reserve(void *head, const est_bert_head_context *ctx) {
  ((probe *)head)->max_batch = ctx->max_batch;
  return EST_OK;
}

/* u_j = (j + 1) / H: a fixed direction, so the loss depends on every pooled value */
static float u(int j, int H) { return (float)(j + 1) / (float)H; }

static est_status probe_forward(void *head, const est_bert_head_batch *b, float *loss) {
  probe *h = head;
  const float *pooled = est_bert_encoder_pooled_output(h->enc);
  const float c = est_vars_value(h->vars, (size_t)h->scale)[0];
  double sum = 0;
  for (int i = 0; i < b->batch; i++) {
    float y = 0;
    for (int j = 0; j < h->H; j++) y += pooled[(size_t)i * h->H + j] * u(j, h->H);
    h->y[i] = c * y;
    sum += (double)h->y[i] * h->y[i];
  }
  h->last_B = b->batch;
  if (loss) *loss = (float)(sum / b->batch);
  return EST_OK;
}

static est_status probe_backward(void *head) {
  probe *h = head;
  h->backward_calls++;
  float *d_pooled = est_bert_encoder_pooled_output_grad(h->enc);
  const float c = est_vars_value(h->vars, (size_t)h->scale)[0];
  float *dc = est_vars_grad(h->vars, (size_t)h->scale);
  for (int i = 0; i < h->last_B; i++) {
    float dy = 2.0f * h->y[i] / (float)h->last_B;
    dc[0] += dy * h->y[i] / c;
    for (int j = 0; j < h->H; j++) d_pooled[(size_t)i * h->H + j] += dy * c * u(j, h->H);
  }
  return EST_OK;
}

static void probe_free(void *head) { free(head); }

static const est_bert_head_type probe_type = {
  .name = "probe", .create = probe_create, .reserve = probe_reserve, .forward = probe_forward,
  .backward = probe_backward, .free = probe_free,
};

static est_bert_model_params tiny_params(const est_bert_head_type *head) {
  est_bert_model_params p = {.head = head, .max_seq_length = S, .learning_rate = 1e-3, .num_train_steps = 10,
                             .num_warmup_steps = 1};
  p.bert_config = est_bert_config_default();
  p.bert_config.vocab_size = V;
  p.bert_config.hidden_size = 8, p.bert_config.num_hidden_layers = 1, p.bert_config.num_attention_heads = 2;
  p.bert_config.intermediate_size = 16, p.bert_config.max_position_embeddings = S, p.bert_config.type_vocab_size = 2;
  p.bert_config.hidden_dropout_prob = p.bert_config.attention_probs_dropout_prob = 0.0;
  return p;
}

/* One batch of B examples as features, built by hand. */
typedef struct batch {
  int32_t ids[B * S], mask[B * S], segs[B * S];
  est_tensor t[3];
  const char *names[3];
  est_features f;
} batch;

static void make_batch(batch *b) {
  for (int i = 0; i < B * S; i++) {
    b->ids[i] = 1 + (i * 7) % (V - 1);
    b->mask[i] = i % S < 3 + i / S;
    b->segs[i] = i % S >= 4;
  }
  const char *names[3] = {"input_ids", "input_mask", "segment_ids"};
  int32_t *data[3] = {b->ids, b->mask, b->segs};
  for (int k = 0; k < 3; k++) {
    b->names[k] = names[k];
    b->t[k] = (est_tensor){.dtype = EST_DT_INT32, .rank = 2, .dims = {B, S}, .data = data[k]};
  }
  b->f = (est_features){.batch_size = B, .count = 3, .names = b->names, .tensors = b->t};
}

/* The model_fn driven by hand, as the Estimator drives it. */
typedef struct driven {
  est_model_fn fn;
  est_var_store *vars;
  void *model;
} driven;

static void drive_build(driven *d, const est_bert_model_params *p, est_mode mode) {
  d->fn = est_bert_model_fn(p);
  assert_int_equal(est_vars_create(&d->vars), EST_OK);
  est_model_context ctx = {.mode = mode, .batch_size = B, .seed = 3, .params = d->fn.params};
  d->model = NULL;
  assert_int_equal(d->fn.build(&ctx, d->vars, &d->model), EST_OK);
  assert_int_equal(est_vars_finalize(d->vars, 11), EST_OK);
}

static void drive_free(driven *d) {
  d->fn.destroy(d->model);
  est_vars_free(d->vars);
}

static void test_probe_sees_the_contract(void **state) {
  (void)state;
  est_bert_model_params p = tiny_params(&probe_type);
  driven d;
  drive_build(&d, &p, EST_MODE_TRAIN);
  /* 5 embedding + 16 layer + 2 pooler variables were declared before the head's */
  assert_int_equal(g_probe->vars_at_create, 23);
  assert_int_equal(est_vars_count(d.vars), 24);
  assert_string_equal(est_vars_at(d.vars, 23)->name, "probe/scale");
  assert_int_equal(g_probe->max_batch, B);
  batch b;
  make_batch(&b);
  est_estimator_spec spec = {0};
  est_vars_zero_grads(d.vars);
  assert_int_equal(d.fn.call(d.model, d.vars, &b.f, EST_MODE_TRAIN, 0, &spec), EST_OK);
  assert_int_equal(g_probe->backward_calls, 1);
  assert_true(spec.loss > 0 && isfinite(spec.loss));
  /* a wrong sequence length names the feature and the flag */
  b.t[1].dims[1] = S - 1;
  assert_int_not_equal(d.fn.call(d.model, d.vars, &b.f, EST_MODE_TRAIN, 1, &spec), EST_OK);
  assert_non_null(strstr(est_error_message(), "feature input_mask has length 7, expected --max_seq_length=8"));
  drive_free(&d);
}

/* d loss / d theta from the model_fn's TRAIN call (head backward, then the encoder's) against
 * central differences of the EVAL loss, on a few variables of each kind. */
static void test_gradients_through_the_head(void **state) {
  (void)state;
  est_bert_model_params p = tiny_params(&probe_type);
  driven d;
  drive_build(&d, &p, EST_MODE_TRAIN);
  batch b;
  make_batch(&b);
  est_estimator_spec spec = {0};
  est_vars_zero_grads(d.vars);
  assert_int_equal(d.fn.call(d.model, d.vars, &b.f, EST_MODE_TRAIN, 0, &spec), EST_OK);
  const char *checked[] = {"probe/scale", "bert/pooler/dense/kernel", "bert/encoder/layer_0/output/dense/bias",
                           "bert/embeddings/LayerNorm/gamma", "bert/encoder/layer_0/attention/self/query/kernel"};
  for (size_t k = 0; k < sizeof checked / sizeof *checked; k++) {
    int v = est_vars_find(d.vars, checked[k]);
    assert_true(v >= 0);
    float *x = est_vars_value(d.vars, (size_t)v);
    const float *g = est_vars_grad(d.vars, (size_t)v);
    for (size_t e = 0; e < 3 && e < est_vars_at(d.vars, (size_t)v)->count; e++) {
      const float keep = x[e], h = 1e-2f;
      float lp, lm;
      /* the loss alone (EVAL runs no backward, so the gradients stay the TRAIN call's) */
      x[e] = keep + h;
      assert_int_equal(d.fn.call(d.model, d.vars, &b.f, EST_MODE_EVAL, 0, &spec), EST_OK);
      lp = spec.loss;
      x[e] = keep - h;
      assert_int_equal(d.fn.call(d.model, d.vars, &b.f, EST_MODE_EVAL, 0, &spec), EST_OK);
      lm = spec.loss;
      x[e] = keep;
      const double fd = ((double)lp - lm) / (2.0 * h);
      /* fp32 forward, step 1e-2: agreement to 2% of the larger plus 1e-4 absolute */
      if (fabs(fd - g[e]) > 0.02 * fmax(fabs(fd), fabs(g[e])) + 1e-4)
        fail_msg("%s[%zu]: backward %g, finite difference %g", checked[k], e, g[e], fd);
    }
  }
  drive_free(&d);
}

static void test_missing_modes_are_named(void **state) {
  (void)state;
  /* no predictions: PREDICT fails naming the head */
  est_bert_model_params p = tiny_params(&probe_type);
  driven d;
  drive_build(&d, &p, EST_MODE_PREDICT);
  batch b;
  make_batch(&b);
  est_estimator_spec spec = {0};
  assert_int_not_equal(d.fn.call(d.model, d.vars, &b.f, EST_MODE_PREDICT, 0, &spec), EST_OK);
  assert_non_null(strstr(est_error_message(), "the probe head has no predict mode"));
  drive_free(&d);
  /* no backward: building for TRAIN fails naming the head */
  est_bert_head_type frozen = probe_type;
  frozen.backward = NULL;
  frozen.name = "frozen";
  p.head = &frozen;
  est_model_fn fn = est_bert_model_fn(&p);
  est_var_store *vars;
  assert_int_equal(est_vars_create(&vars), EST_OK);
  est_model_context ctx = {.mode = EST_MODE_TRAIN, .batch_size = B, .seed = 3, .params = fn.params};
  void *model = NULL;
  assert_int_not_equal(fn.build(&ctx, vars, &model), EST_OK);
  assert_non_null(strstr(est_error_message(), "the frozen head cannot train"));
  fn.destroy(model);
  est_vars_free(vars);
}

/* examples/regression_head.c: the eval MSE after 200 steps is well under what predicting
 * the mean gives (the target's variance, about 0.027 for 4-15 tokens of p = 1/2). */
static void test_regression_example_learns(void **state) {
  (void)state;
  char bin[4096], out[512];
  snprintf(bin, sizeof bin, "%s", EST_BIN);
  char *slash = strrchr(bin, '/');
  snprintf(slash + 1, sizeof bin - (size_t)(slash + 1 - bin), "example_regression_head");
  snprintf(out, sizeof out, "%s/regression", test_tmpdir);
  free(test_run_ok("'%s' --model_dir=%s --max_steps=200", bin, out));
  char *text = test_read_in(out, "eval_results.txt");
  double mse = -1;
  int found = sscanf(strstr(text, "eval_mse = ") ? strstr(text, "eval_mse = ") : "", "eval_mse = %lf", &mse);
  free(text);
  assert_int_equal(found, 1);
  if (!(mse >= 0 && mse < 0.012)) fail_msg("eval_mse %g after 200 steps: the head did not learn", mse);
}

/* The task driver runs --do_export through the task's export; a task without one (no
 * servable head: run_pretraining) refuses the flag before any work. */
static void test_driver_refuses_export_without_a_servable_head(void **state) {
  (void)state;
  est_run_pretraining_config c = est_run_pretraining_config_default();
  c.common.do_export = true;
  assert_int_equal(est_run_pretraining_validate(&c), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "--do_export: run_pretraining has no servable head to export"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_probe_sees_the_contract),
    cmocka_unit_test(test_gradients_through_the_head),
    cmocka_unit_test(test_missing_modes_are_named),
    cmocka_unit_test(test_regression_example_learns),
    cmocka_unit_test(test_driver_refuses_export_without_a_servable_head),
  };
  return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
