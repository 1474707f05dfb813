/* Optimizers: BERT's AdamWeightDecay (optimization_test.py trajectory, the MRPC learning
 * rates, decay exclusions, dense updates, clipping), tf.train.Adam and Momentum against
 * values computed offline with numpy float32 in TF's op order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "est/status.h"
#include "est/variables.h"
#include "est/optimizer.h"
#include "reference/optimizer_golden.h"
#include "test_util.h"

/* BERT's exclusions from weight decay (a model_fn passes its own; the optimizer has no
 * list of its own), for the models here that name variables as BERT does. */
static const char *const BERT_NO_DECAY[] = {"LayerNorm", "layer_norm", "bias"};
static inline est_adam_weight_decay_config bert_awd_config(void) {
  est_adam_weight_decay_config c = est_adam_weight_decay_config_default();
  c.exclude_from_weight_decay = BERT_NO_DECAY;
  c.num_exclude = 3;
  return c;
}

static est_var_store *store_with(int n, const char *const *names, const int64_t *sizes) {
  est_var_store *vs;
  assert_int_equal(est_vars_create(&vs), EST_OK);
  for (int i = 0; i < n; i++) assert_int_equal(est_vars_declare(vs, names[i], 1, &sizes[i], est_init_zeros(), NULL), EST_OK);
  assert_int_equal(est_vars_finalize(vs, 1), EST_OK);
  return vs;
}

/* optimization_test.py test_adam: w = [0.1, -0.2, -0.1], loss = mean((x - w)^2),
 * AdamWeightDecay(lr 0.2, weight_decay_rate 0), raw apply_gradients, 100 steps. */
static void test_adam_weight_decay_reference_trajectory(void **state) {
  (void)state;
  const char *names[] = {"w"};
  est_var_store *vs = store_with(1, names, (int64_t[]){3});
  float *w = est_vars_value(vs, 0), *g = est_vars_grad(vs, 0);
  const float init[3] = {0.1f, -0.2f, -0.1f}, x[3] = {0.4f, 0.2f, -0.5f};
  memcpy(w, init, sizeof init);
  est_adam_weight_decay_config c = bert_awd_config();
  c.init_lr = 0.2;
  c.weight_decay_rate = 0.0;
  c.clip_norm = 0;  /* raw apply_gradients: no clipping, no schedule */
  est_optimizer *opt;
  assert_int_equal(est_optimizer_create_adam_weight_decay(&opt, vs, &c), EST_OK);
  assert_string_equal(est_optimizer_name(opt), "AdamWeightDecay");
  assert_int_equal(est_optimizer_decays(opt, 0), 0);
  static const struct { int step; float w[3]; } expect[] = {
    {1, {0.732360f, 0.432385f, -0.732385f}},   {2, {0.644261f, 0.606904f, -0.906904f}},
    {3, {0.271594f, 0.306972f, -0.606972f}},   {10, {0.190685f, 0.123023f, -0.423023f}},
    {50, {0.374956f, 0.196980f, -0.496980f}},  {100, {0.401646f, 0.197824f, -0.497824f}},
  };
  int next = 0;
  for (int step = 1; step <= 100; step++) {
    /* d/dw mean((x - w)^2) in TF's op order: -(1/3 * ((x - w) * 2)) */
    for (int i = 0; i < 3; i++) g[i] = -((1.0f / 3.0f) * ((x[i] - w[i]) * 2.0f));
    assert_int_equal(est_optimizer_apply(opt, step - 1), EST_OK);
    assert_float_equal(est_optimizer_learning_rate(opt, step - 1), 0.2f, 0);
    if (step == expect[next].step) {
      for (int i = 0; i < 3; i++) assert_float_equal(w[i], expect[next].w[i], 1e-5);
      next++;
    }
  }
  assert_int_equal(next, 6);
  for (int i = 0; i < 3; i++) assert_true(fabsf(w[i] - x[i]) <= 1e-2f + 1e-2f * fabsf(x[i]));
  est_optimizer_free(opt);
  est_vars_free(vs);
}

/* docs/optimizer.md §1, MRPC: init 2e-5, T = 343, W = 34. */
static void test_bert_learning_rate_schedule(void **state) {
  (void)state;
  static const struct { int64_t t; float lr; } v[] = {
    {0, 0.0f}, {1, 5.882353e-07f}, {17, 1.0e-05f}, {33, 1.941176e-05f}, {34, 1.801749e-05f},
    {35, 1.795918e-05f}, {100, 1.416910e-05f}, {200, 8.338192e-06f}, {342, 5.830904e-08f},
    {343, 0.0f}, {1000, 0.0f},
  };
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
    float lr = est_learning_rate_bert(v[i].t, 2e-5, 343, 34);
    /* the listed values are exact (double); float32 1 - t/T costs up to ~1e-5 relative near T */
    assert_float_equal(lr, v[i].lr, 1e-5 * v[i].lr + 1e-30);
  }
  volatile float t342 = 342.0f, big_t = 343.0f;  /* no constant folding in double */
  assert_true(est_learning_rate_bert(342, 2e-5, 343, 34) == 2e-5f * (1.0f - t342 / big_t));
  /* exactly what the float32 graph computes at the end of warmup */
  assert_true(est_learning_rate_bert(34, 2e-5, 343, 34) == 2e-5f * (1.0f - 34.0f / 343.0f));
  /* no warmup: pure linear decay; no decay: constant */
  assert_true(est_learning_rate_bert(0, 1e-3, 10, 0) == 1e-3f);
  assert_float_equal(est_learning_rate_bert(5, 1e-3, 10, 0), 5e-4f, 1e-10);
  assert_true(est_learning_rate_bert(12345, 0.25, 0, 0) == 0.25f);
  assert_true(est_learning_rate_bert(3, 0.25, 0, 6) == 0.125f);
  assert_true(est_learning_rate_bert(7, 0.25, 0, 6) == 0.25f);

  /* The optimizer uses the schedule: with lr(0) = 0 the first update moves only moments. */
  const char *names[] = {"output_weights"};
  est_var_store *vs = store_with(1, names, (int64_t[]){4});
  float *w = est_vars_value(vs, 0), *g = est_vars_grad(vs, 0);
  for (int i = 0; i < 4; i++) w[i] = 1.0f + (float)i, g[i] = 0.5f;
  est_adam_weight_decay_config c = bert_awd_config();
  c.init_lr = 2e-5; c.schedule = est_lr_schedule_bert(343, 34);
  est_optimizer *opt;
  assert_int_equal(est_optimizer_create_adam_weight_decay(&opt, vs, &c), EST_OK);
  assert_true(est_optimizer_learning_rate(opt, 34) == est_learning_rate_bert(34, 2e-5, 343, 34));
  assert_int_equal(est_optimizer_apply(opt, 0), EST_OK);
  for (int i = 0; i < 4; i++) assert_true(w[i] == 1.0f + (float)i);
  assert_true(est_optimizer_slot(opt, 0)[0] != 0.0f);
  est_optimizer_free(opt);
  est_vars_free(vs);
}

static void test_weight_decay_exclusions_and_dense_updates(void **state) {
  (void)state;
  const char *names[] = {
    "bert/embeddings/word_embeddings", "bert/embeddings/LayerNorm/gamma",
    "bert/encoder/layer_0/attention/self/query/kernel", "bert/encoder/layer_0/attention/self/query/bias",
    "output_weights", "output_bias", "my/layer_norm/beta",
  };
  const int decays[] = {1, 0, 1, 0, 1, 0, 0};
  est_var_store *vs = store_with(7, names, (int64_t[]){6, 3, 4, 2, 2, 1, 5});
  est_adam_weight_decay_config c = bert_awd_config();
  c.init_lr = 0.1;
  c.clip_norm = 0;
  est_optimizer *opt;
  assert_int_equal(est_optimizer_create_adam_weight_decay(&opt, vs, &c), EST_OK);
  for (int i = 0; i < 7; i++) assert_int_equal(est_optimizer_decays(opt, (size_t)i), decays[i]);
  assert_int_equal(est_optimizer_num_slots(opt), 2);
  assert_string_equal(est_optimizer_slot_suffix(opt, 0), "adam_m");
  assert_string_equal(est_optimizer_slot_suffix(opt, 1), "adam_v");
  assert_null(est_optimizer_slot_suffix(opt, 2));
  assert_int_equal(est_optimizer_num_scalars(opt), 0);

  /* Every variable at 1.0, zero gradients: the update is exactly -lr * 0.01 * theta where
   * decay applies (m / (sqrt(v) + eps) = 0) and nothing elsewhere. */
  for (int i = 0; i < 7; i++) {
    const est_variable *v = est_vars_at(vs, (size_t)i);
    for (size_t k = 0; k < v->count; k++) est_vars_value(vs, (size_t)i)[k] = 1.0f;
  }
  assert_int_equal(est_optimizer_apply(opt, 0), EST_OK);
  const float decayed = 1.0f - 0.1f * (0.0f + 0.01f * 1.0f);
  for (int i = 0; i < 7; i++) {
    const est_variable *v = est_vars_at(vs, (size_t)i);
    for (size_t k = 0; k < v->count; k++)
      assert_true(est_vars_value(vs, (size_t)i)[k] == (decays[i] ? decayed : 1.0f));
  }

  /* Embedding row 0 gets a gradient once; at the next step (no gradient) the whole table
   * still moves: m decays by beta1 and row 0 keeps moving. */
  float *emb = est_vars_value(vs, 0), *gemb = est_vars_grad(vs, 0);
  float *m = est_optimizer_slot(opt, 0) + est_vars_at(vs, 0)->offset;
  float *v = est_optimizer_slot(opt, 1) + est_vars_at(vs, 0)->offset;
  gemb[0] = 0.5f;
  assert_int_equal(est_optimizer_apply(opt, 1), EST_OK);
  float m1 = m[0], row0 = emb[0], row1 = emb[1];
  assert_true(m1 == 0.9f * 0.0f + (float)(1.0 - 0.9) * 0.5f);
  assert_true(v[0] == 0.999f * 0.0f + (float)(1.0 - 0.999) * (0.5f * 0.5f));
  memset(gemb, 0, 6 * sizeof(float));
  assert_int_equal(est_optimizer_apply(opt, 2), EST_OK);
  assert_true(m[0] == 0.9f * m1);
  assert_true(emb[0] < row0 - 0.1f * (0.01f * row0)); /* m > 0 adds to the decay */
  assert_true(emb[1] == row1 - 0.1f * (0.01f * row1));
  est_optimizer_free(opt);

  /* weight_decay_rate 0 decays nothing; custom patterns are regexes; a bad one is refused. */
  c.weight_decay_rate = 0;
  assert_int_equal(est_optimizer_create_adam_weight_decay(&opt, vs, &c), EST_OK);
  for (int i = 0; i < 7; i++) assert_int_equal(est_optimizer_decays(opt, (size_t)i), 0);
  est_optimizer_free(opt);
  c.weight_decay_rate = 0.01;
  const char *pats[] = {"^output_", "gamma$"};
  c.exclude_from_weight_decay = pats;
  c.num_exclude = 2;
  assert_int_equal(est_optimizer_create_adam_weight_decay(&opt, vs, &c), EST_OK);
  const int decays2[] = {1, 0, 1, 1, 0, 0, 1};
  for (int i = 0; i < 7; i++) assert_int_equal(est_optimizer_decays(opt, (size_t)i), decays2[i]);
  est_optimizer_free(opt);
  const char *bad[] = {"(unclosed"};
  c.exclude_from_weight_decay = bad;
  c.num_exclude = 1;
  assert_int_equal(est_optimizer_create_adam_weight_decay(&opt, vs, &c), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "(unclosed"));
  assert_null(opt);
  est_vars_free(vs);
}

static void test_clip_by_global_norm(void **state) {
  (void)state;
  est_var_store *vs;
  assert_int_equal(est_vars_create(&vs), EST_OK);
  assert_int_equal(est_vars_declare(vs, "a/kernel", 1, (int64_t[]){2}, est_init_zeros(), NULL), EST_OK);
  assert_int_equal(est_vars_declare_frozen(vs, "frozen", 1, (int64_t[]){1}, est_init_zeros(), NULL), EST_OK);
  assert_int_equal(est_vars_declare(vs, "b/bias", 1, (int64_t[]){1}, est_init_zeros(), NULL), EST_OK);
  assert_int_equal(est_vars_finalize(vs, 1), EST_OK);
  float *ga = est_vars_grad(vs, 0), *gb = est_vars_grad(vs, 2);
  ga[0] = 3.0f; ga[1] = 4.0f; gb[0] = 12.0f;       /* norm 13 */
  est_vars_value(vs, 1)[0] = 7.0f;                  /* frozen: never touched */
  assert_float_equal(est_optimizer_global_norm(vs), 13.0f, 0);

  est_adam_weight_decay_config c = bert_awd_config();
  c.init_lr = 0.5;
  est_optimizer *opt;
  assert_int_equal(est_optimizer_create_adam_weight_decay(&opt, vs, &c), EST_OK);
  assert_int_equal(est_optimizer_apply(opt, 0), EST_OK);
  assert_float_equal(est_optimizer_last_global_norm(opt), 13.0f, 0);
  const float scale = 1.0f * (1.0f / 13.0f);        /* clip * min(1/norm, 1/clip) */
  float *m = est_optimizer_slot(opt, 0), *v = est_optimizer_slot(opt, 1);
  const float c1 = (float)(1.0 - 0.9), c2 = (float)(1.0 - 0.999);
  for (int i = 0; i < 2; i++) {
    float g = (i ? 4.0f : 3.0f) * scale;
    assert_true(m[est_vars_at(vs, 0)->offset + (size_t)i] == c1 * g);
    assert_true(v[est_vars_at(vs, 0)->offset + (size_t)i] == c2 * (g * g));
  }
  assert_true(m[est_vars_at(vs, 2)->offset] == c1 * (12.0f * scale));
  assert_true(ga[0] == 3.0f && gb[0] == 12.0f);     /* the gradient buffer is not modified */
  assert_true(est_vars_value(vs, 1)[0] == 7.0f);
  /* below the threshold the gradients are used as they are */
  ga[0] = 0.3f; ga[1] = 0.4f; gb[0] = 0.0f;
  float m_before = m[est_vars_at(vs, 0)->offset];
  assert_int_equal(est_optimizer_apply(opt, 1), EST_OK);
  assert_true(m[est_vars_at(vs, 0)->offset] == 0.9f * m_before + c1 * 0.3f);
  assert_float_equal(est_optimizer_last_global_norm(opt), 0.5f, 1e-7);
  /* a non-finite norm poisons everything, as tf.clip_by_global_norm */
  ga[0] = INFINITY;
  assert_int_equal(est_optimizer_apply(opt, 2), EST_OK);
  assert_true(isnan(est_optimizer_slot(opt, 0)[est_vars_at(vs, 2)->offset]) && isnan(est_vars_value(vs, 2)[0]));
  assert_true(est_vars_value(vs, 1)[0] == 7.0f);
  /* the padding after each variable is never touched, so restoring the variables and
   * slots (as a restart from a checkpoint does) gives finite steps again */
  for (size_t k = 2; k < 16; k++)
    for (int b = -1; b < 2; b++) {
      const float *buf = b < 0 ? est_vars_params(vs) : est_optimizer_slot(opt, b);
      assert_true(buf[est_vars_at(vs, 0)->offset + k] == 0.0f);
    }
  for (size_t i = 0; i < 3; i += 2)
    for (size_t k = 0; k < est_vars_at(vs, i)->count; k++) {
      size_t o = est_vars_at(vs, i)->offset + k;
      est_vars_params(vs)[o] = 1.0f;
      est_vars_grads(vs)[o] = 0.5f;
      est_optimizer_slot(opt, 0)[o] = est_optimizer_slot(opt, 1)[o] = 0.0f;
    }
  assert_int_equal(est_optimizer_apply(opt, 3), EST_OK);
  assert_float_equal(est_optimizer_last_global_norm(opt), sqrtf(0.75f), 1e-6);
  assert_true(isfinite(est_vars_value(vs, 0)[0]) && isfinite(est_vars_value(vs, 2)[0]));
  est_optimizer_free(opt);
  est_vars_free(vs);
}

/* tf.train.AdamOptimizer(0.1): theta = [1, -2], constant g = [0.5, -0.25], three steps.
 * Expected values from numpy float32 following ApplyAdam's op order. */
static void test_tf_adam(void **state) {
  (void)state;
  const char *names[] = {"w"};
  est_var_store *vs = store_with(1, names, (int64_t[]){2});
  float *w = est_vars_value(vs, 0), *g = est_vars_grad(vs, 0);
  w[0] = 1.0f; w[1] = -2.0f;
  est_adam_config c = est_adam_config_default();
  c.learning_rate = 0.1;
  est_optimizer *opt;
  assert_int_equal(est_optimizer_create_adam(&opt, vs, &c), EST_OK);
  assert_string_equal(est_optimizer_slot_suffix(opt, 0), "Adam");
  assert_string_equal(est_optimizer_slot_suffix(opt, 1), "Adam_1");
  assert_int_equal(est_optimizer_num_scalars(opt), 2);
  assert_string_equal(est_optimizer_scalar_name(opt, 0), "beta1_power");
  assert_string_equal(est_optimizer_scalar_name(opt, 1), "beta2_power");
  assert_true(*est_optimizer_scalar(opt, 0) == 0.9f);
  static const float expect[3][2] = {{0.900000036f, -1.9000001f}, {0.800000429f, -1.80000055f},
                                     {0.70000118f, -1.70000136f}};
  for (int s = 0; s < 3; s++) {
    g[0] = 0.5f; g[1] = -0.25f;
    assert_int_equal(est_optimizer_apply(opt, s), EST_OK);
    assert_float_equal(w[0], expect[s][0], 2e-7);
    assert_float_equal(w[1], expect[s][1], 2e-7);
  }
  assert_float_equal(est_optimizer_slot(opt, 0)[0], 0.135500029f, 1e-8);
  assert_float_equal(est_optimizer_slot(opt, 1)[1], 0.000187310157f, 1e-11);
  assert_float_equal(*est_optimizer_scalar(opt, 0), 0.656099916f, 1e-8);
  assert_float_equal(*est_optimizer_scalar(opt, 1), 0.996006072f, 1e-8);
  est_optimizer_free(opt);
  est_vars_free(vs);
}

static void test_momentum(void **state) {
  (void)state;
  const char *names[] = {"w"};
  est_var_store *vs = store_with(1, names, (int64_t[]){2});
  float *w = est_vars_value(vs, 0), *g = est_vars_grad(vs, 0);
  est_momentum_config c = est_momentum_config_default();
  c.learning_rate = 0.1;
  for (int nesterov = 0; nesterov <= 1; nesterov++) {
    c.use_nesterov = nesterov;
    w[0] = 1.0f; w[1] = -2.0f;
    est_optimizer *opt;
    assert_int_equal(est_optimizer_create_momentum(&opt, vs, &c), EST_OK);
    assert_int_equal(est_optimizer_num_slots(opt), 1);
    assert_string_equal(est_optimizer_slot_suffix(opt, 0), "Momentum");
    /* accum after steps: g, 1.9 g, 2.71 g. Plain: theta -= 0.1 accum.
     * Nesterov: theta -= 0.1 g + 0.09 accum. */
    static const float plain[3][2] = {{0.95f, -1.975f}, {0.855f, -1.9275f}, {0.7195f, -1.85975f}};
    static const float nest[3][2] = {{0.905f, -1.9525f}, {0.7695f, -1.88475f}, {0.59755f, -1.798775f}};
    for (int s = 0; s < 3; s++) {
      g[0] = 0.5f; g[1] = -0.25f;
      assert_int_equal(est_optimizer_apply(opt, s), EST_OK);
      const float *e = nesterov ? nest[s] : plain[s];
      assert_float_equal(w[0], e[0], 1e-6);
      assert_float_equal(w[1], e[1], 1e-6);
    }
    assert_float_equal(est_optimizer_slot(opt, 0)[0], 2.71f * 0.5f, 1e-6);
    est_optimizer_free(opt);
  }
  est_vars_free(vs);
}

/* Chunking is fixed, so 1 thread and 2 threads give bit-identical parameters and slots
 * (exact resume across machines depends on it). */
static void test_thread_count_independence(void **state) {
  (void)state;
  const char *names[] = {"big/kernel", "small/bias", "LayerNorm/gamma", "huge/kernel"};
  const int64_t sizes[] = {70001, 3, 768, 200000};
  float *result[2][3];
  for (int run = 0; run < 2; run++) {
    omp_set_num_threads(run + 1);
    if (test_threads_that_ran() != run + 1) fail_msg("run %d did not get %d OpenMP threads", run, run + 1);
    est_var_store *vs = store_with(4, names, sizes);
    est_vars_initialize(vs, 0);
    for (size_t i = 0; i < 4; i++) {
      const est_variable *v = est_vars_at(vs, i);
      for (size_t k = 0; k < v->count; k++) est_vars_value(vs, i)[k] = sinf((float)(k + 7 * i));
    }
    est_adam_weight_decay_config c = bert_awd_config();
    c.init_lr = 1e-3; c.schedule = est_lr_schedule_bert(10, 2);
    est_optimizer *opt;
    assert_int_equal(est_optimizer_create_adam_weight_decay(&opt, vs, &c), EST_OK);
    for (int step = 0; step < 4; step++) {
      for (size_t i = 0; i < 4; i++) {
        const est_variable *v = est_vars_at(vs, i);
        for (size_t k = 0; k < v->count; k++) est_vars_grad(vs, i)[k] = cosf((float)(k * (size_t)(step + 1) + i));
      }
      assert_int_equal(est_optimizer_apply(opt, step), EST_OK);
    }
    size_t n = est_vars_size(vs);
    for (int b = 0; b < 3; b++) result[run][b] = malloc(n * sizeof(float));
    memcpy(result[run][0], est_vars_params(vs), n * sizeof(float));
    memcpy(result[run][1], est_optimizer_slot(opt, 0), n * sizeof(float));
    memcpy(result[run][2], est_optimizer_slot(opt, 1), n * sizeof(float));
    if (run == 1)
      for (int b = 0; b < 3; b++) assert_memory_equal(result[0][b], result[1][b], n * sizeof(float));
    est_optimizer_free(opt);
    est_vars_free(vs);
  }
  for (int run = 0; run < 2; run++)
    for (int b = 0; b < 3; b++) free(result[run][b]);
}

/* Bit-exact against tests/reference/optimizer_golden.py, a numpy float32 statement of
 * each update in TF's op order (schedule, clipping, decay exclusions included). */
static float init_value(int v, int k) { return (float)(((k * 5 + v * 11) % 17 - 8) / 16.0); }
static float grad_value(int v, int k, int step) { return (float)(((k * 7 + step * 13 + v * 3) % 29 - 14) / 8.0); }

static void check_golden(est_optimizer *(*make)(est_var_store *), const float (*golden)[20], const char *what) {
  const char *names[] = {"dense/kernel", "dense/bias", "LayerNorm/gamma"};
  const int64_t sizes[] = {12, 3, 5};
  est_var_store *vs = store_with(3, names, sizes);
  for (int v = 0; v < 3; v++)
    for (int k = 0; k < sizes[v]; k++) est_vars_value(vs, (size_t)v)[k] = init_value(v, k);
  est_optimizer *opt = make(vs);
  for (int step = 0; step < 6; step++) {
    for (int v = 0; v < 3; v++)
      for (int k = 0; k < sizes[v]; k++) est_vars_grad(vs, (size_t)v)[k] = grad_value(v, k, step);
    assert_int_equal(est_optimizer_apply(opt, step), EST_OK);
    int at = 0;
    for (int v = 0; v < 3; v++)
      for (int k = 0; k < sizes[v]; k++, at++) {
        float got = est_vars_value(vs, (size_t)v)[k];
        if (memcmp(&got, &golden[step][at], sizeof got) != 0)
          fail_msg("%s step %d %s[%d]: %a, golden %a", what, step, names[v], k, (double)got, (double)golden[step][at]);
      }
  }
  est_optimizer_free(opt);
  est_vars_free(vs);
}

static est_optimizer *make_awd(est_var_store *vs) {
  est_adam_weight_decay_config c = bert_awd_config();
  c.init_lr = 0.1; c.schedule = est_lr_schedule_bert(10, 2);
  est_optimizer *opt;
  assert_int_equal(est_optimizer_create_adam_weight_decay(&opt, vs, &c), EST_OK);
  return opt;
}

static est_optimizer *make_adam(est_var_store *vs) {
  est_adam_config c = est_adam_config_default();
  c.learning_rate = 0.05;
  est_optimizer *opt;
  assert_int_equal(est_optimizer_create_adam(&opt, vs, &c), EST_OK);
  return opt;
}

static est_optimizer *make_momentum(est_var_store *vs, int nesterov) {
  est_momentum_config c = est_momentum_config_default();
  c.learning_rate = 0.01; c.clip_norm = 2.5; c.use_nesterov = nesterov;
  est_optimizer *opt;
  assert_int_equal(est_optimizer_create_momentum(&opt, vs, &c), EST_OK);
  return opt;
}
static est_optimizer *make_plain_momentum(est_var_store *vs) { return make_momentum(vs, 0); }
static est_optimizer *make_nesterov(est_var_store *vs) { return make_momentum(vs, 1); }

static void test_bit_exact_against_numpy_float32(void **state) {
  (void)state;
  check_golden(make_awd, golden_adam_weight_decay, "AdamWeightDecay");
  check_golden(make_adam, golden_adam, "Adam");
  check_golden(make_plain_momentum, golden_momentum, "Momentum");
  check_golden(make_nesterov, golden_nesterov, "Momentum(nesterov)");
}

static void test_bad_arguments(void **state) {
  (void)state;
  est_var_store *vs;
  assert_int_equal(est_vars_create(&vs), EST_OK);
  assert_int_equal(est_vars_declare(vs, "w", 1, (int64_t[]){2}, est_init_zeros(), NULL), EST_OK);
  est_optimizer *opt;
  est_adam_weight_decay_config c = bert_awd_config();
  assert_int_equal(est_optimizer_create_adam_weight_decay(&opt, vs, &c), EST_ERR_FAILED_PRECONDITION);
  assert_int_equal(est_vars_finalize(vs, 1), EST_OK);
  c.beta1 = 1.0;
  assert_int_equal(est_optimizer_create_adam_weight_decay(&opt, vs, &c), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "beta1"));
  est_momentum_config mc = est_momentum_config_default();
  mc.clip_norm = -1;
  assert_int_equal(est_optimizer_create_momentum(&opt, vs, &mc), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "clip_norm"));
  est_vars_free(vs);
}

/* tf.compat.v1.train's decays (values from their formulas in double; float32 is within
 * a few ulps), BERT's warmup in front of any of them, and the optimizer using its
 * config's schedule. */
static void test_learning_rate_schedules(void **state) {
  (void)state;
  const float rel = 1e-6f;
  est_lr_schedule s = est_lr_schedule_constant();
  assert_true(est_lr_schedule_value(&s, 0.1, 0) == 0.1f);
  assert_true(est_lr_schedule_value(&s, 0.1, 100000) == 0.1f);

  s = (est_lr_schedule){.decay = EST_LR_POLYNOMIAL, .decay_steps = 100, .end_learning_rate = 0.01, .power = 2};
  assert_true(est_lr_schedule_value(&s, 0.1, 0) == 0.1f);
  assert_float_equal(est_lr_schedule_value(&s, 0.1, 50), 0.0325f, 0.0325f * rel);
  assert_float_equal(est_lr_schedule_value(&s, 0.1, 150), 0.01f, 0.01f * rel); /* cycle=False: stays at end */

  s = (est_lr_schedule){.decay = EST_LR_EXPONENTIAL, .decay_steps = 10, .decay_rate = 0.5};
  assert_float_equal(est_lr_schedule_value(&s, 0.1, 5), 0.07071067811865477f, 0.0707f * rel);
  assert_float_equal(est_lr_schedule_value(&s, 0.1, 20), 0.025f, 0.025f * rel);
  s.staircase = 1;
  assert_true(est_lr_schedule_value(&s, 0.1, 5) == 0.1f);
  assert_float_equal(est_lr_schedule_value(&s, 0.1, 15), 0.05f, 0.05f * rel);

  s = (est_lr_schedule){.decay = EST_LR_COSINE, .decay_steps = 100, .alpha = 0.1};
  assert_true(est_lr_schedule_value(&s, 0.1, 0) == 0.1f);
  assert_float_equal(est_lr_schedule_value(&s, 0.1, 50), 0.055f, 0.055f * rel);
  assert_float_equal(est_lr_schedule_value(&s, 0.1, 100), 0.01f, 0.01f * rel);
  assert_float_equal(est_lr_schedule_value(&s, 0.1, 500), 0.01f, 0.01f * rel);
  /* BERT's warmup in front: linear to lr0 over W steps, then the (unshifted) decay */
  s.warmup_steps = 10;
  assert_true(est_lr_schedule_value(&s, 0.1, 0) == 0.0f);
  assert_true(est_lr_schedule_value(&s, 0.1, 5) == 0.1f * 0.5f);
  assert_float_equal(est_lr_schedule_value(&s, 0.1, 10), 0.09779754323328192f, 0.0978f * rel);

  /* the BERT schedule is the polynomial one with power 1, bit for bit */
  s = est_lr_schedule_bert(343, 34);
  for (int64_t t = 0; t < 400; t += 7)
    assert_true(est_lr_schedule_value(&s, 2e-5, t) == est_learning_rate_bert(t, 2e-5, 343, 34));

  /* every optimizer runs on its config's schedule */
  const char *names[] = {"w"};
  est_var_store *vs = store_with(1, names, (int64_t[]){2});
  est_adam_config ac = est_adam_config_default();
  ac.schedule = (est_lr_schedule){.decay = EST_LR_EXPONENTIAL, .decay_steps = 10, .decay_rate = 0.5};
  est_optimizer *opt;
  assert_int_equal(est_optimizer_create_adam(&opt, vs, &ac), EST_OK);
  assert_true(est_optimizer_learning_rate(opt, 20) == est_lr_schedule_value(&ac.schedule, 0.001, 20));
  est_optimizer_free(opt);
  est_momentum_config mc = est_momentum_config_default();
  assert_true(mc.schedule.decay == EST_LR_CONSTANT);
  mc.schedule = (est_lr_schedule){.decay = EST_LR_COSINE, .decay_steps = 100};
  assert_int_equal(est_optimizer_create_momentum(&opt, vs, &mc), EST_OK);
  assert_float_equal(est_optimizer_learning_rate(opt, 50), 0.005f, 0.005f * rel);
  est_optimizer_free(opt);
  est_adam_weight_decay_config wc = est_adam_weight_decay_config_default();
  assert_true(wc.schedule.decay == EST_LR_POLYNOMIAL && wc.schedule.power == 1.0 && wc.schedule.end_learning_rate == 0);

  /* bad schedules are refused, naming the field */
  wc.schedule = (est_lr_schedule){.decay = EST_LR_EXPONENTIAL, .decay_steps = 10, .decay_rate = 0};
  assert_int_equal(est_optimizer_create_adam_weight_decay(&opt, vs, &wc), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "decay_rate"));
  wc.schedule = (est_lr_schedule){.decay = (est_lr_decay)9};
  assert_int_equal(est_optimizer_create_adam_weight_decay(&opt, vs, &wc), EST_ERR_INVALID_ARGUMENT);
  wc.schedule = est_lr_schedule_bert(10, (int64_t)INT32_MAX + 1);
  assert_int_equal(est_optimizer_create_adam_weight_decay(&opt, vs, &wc), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "warmup_steps"));
  est_vars_free(vs);
}

/* The exclusions are the model's: without a list, every trainable variable decays. */
static void test_no_exclusions_without_a_list(void **state) {
  (void)state;
  const char *names[] = {"bert/embeddings/LayerNorm/gamma", "output_bias", "w"};
  est_var_store *vs = store_with(3, names, (int64_t[]){2, 1, 3});
  est_adam_weight_decay_config c = est_adam_weight_decay_config_default();
  est_optimizer *opt;
  assert_int_equal(est_optimizer_create_adam_weight_decay(&opt, vs, &c), EST_OK);
  for (size_t i = 0; i < 3; i++) assert_int_equal(est_optimizer_decays(opt, i), 1);
  est_optimizer_free(opt);
  c = bert_awd_config();
  assert_int_equal(est_optimizer_create_adam_weight_decay(&opt, vs, &c), EST_OK);
  assert_int_equal(est_optimizer_decays(opt, 0), 0);
  assert_int_equal(est_optimizer_decays(opt, 1), 0);
  assert_int_equal(est_optimizer_decays(opt, 2), 1);
  est_optimizer_free(opt);
  est_vars_free(vs);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_adam_weight_decay_reference_trajectory),
    cmocka_unit_test(test_bert_learning_rate_schedule),
    cmocka_unit_test(test_weight_decay_exclusions_and_dense_updates),
    cmocka_unit_test(test_clip_by_global_norm),
    cmocka_unit_test(test_tf_adam),
    cmocka_unit_test(test_momentum),
    cmocka_unit_test(test_thread_count_independence),
    cmocka_unit_test(test_bit_exact_against_numpy_float32),
    cmocka_unit_test(test_bad_arguments),
    cmocka_unit_test(test_learning_rate_schedules),
    cmocka_unit_test(test_no_exclusions_without_a_list),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
