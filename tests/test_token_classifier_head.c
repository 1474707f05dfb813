/* The token classification head (est_bert_token_classifier_head_type,
 * src/bert/heads/head_token_classifier.c) on a tiny random encoder: the loss against a
 * plain double-precision recomputation from the encoder's sequence output (mean over the
 * labelled positions only, -100 ignored, as torch's CrossEntropyLoss(ignore_index=-100));
 * central finite differences of that loss for weights of the head and of the encoder, with
 * dropout off and on (the masks are fixed by seed and step); the predictions [B, S, C]; the
 * eval metrics; and bad labels named. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "est/bert_head.h"
#include "est/metrics.h"
#include "est/threads.h"

enum { B = 3, S = 6, C = 5 };

typedef struct fixture {
  est_bert_config cfg;
  est_var_store *vs;
  est_bert_encoder *enc;
  void *head;
  int32_t ids[B * S], mask[B * S], segs[B * S], labels[B * S];
  est_tensor tensors[4];
  const char *names[4];
  est_features features;
  est_bert_token_classifier_head_params params;
} fixture;

static void fixture_open(fixture *f, est_mode mode, double dropout) {
  memset(f, 0, sizeof *f);
  f->cfg = est_bert_config_default();
  f->cfg.vocab_size = 20;
  f->cfg.hidden_size = 8;
  f->cfg.num_hidden_layers = 1;
  f->cfg.num_attention_heads = 2;
  f->cfg.intermediate_size = 16;
  f->cfg.max_position_embeddings = 16;
  f->cfg.type_vocab_size = 2;
  f->cfg.hidden_dropout_prob = dropout;
  f->cfg.attention_probs_dropout_prob = 0.0;
  f->params.num_labels = C;
  assert_int_equal(est_vars_create(&f->vs), EST_OK);
  assert_int_equal(est_bert_encoder_create(&f->enc, &f->cfg, f->vs), EST_OK);
  const est_bert_head_context ctx = {.mode = mode, .max_batch = B, .max_seq_length = S, .encoder = f->enc,
                                     .vars = f->vs, .params = &f->params};
  assert_int_equal(est_bert_token_classifier_head_type.create(&f->head, &ctx), EST_OK);
  assert_int_equal(est_vars_finalize(f->vs, 7), EST_OK);
  /* a bias that is not zero, so its gradient and the logits' offset are tested */
  for (size_t i = 0; i < est_vars_count(f->vs); i++)
    if (!strcmp(est_vars_at(f->vs, i)->name, "output_bias"))
      for (int c = 0; c < C; c++) est_vars_value(f->vs, i)[c] = 0.1f * (float)(c - 2);
  assert_int_equal(est_bert_encoder_reserve(f->enc, B, S, mode == EST_MODE_TRAIN), EST_OK);
  assert_int_equal(est_bert_token_classifier_head_type.reserve(f->head, &ctx), EST_OK);
  /* rows of 6, 4 and 5 real tokens; [CLS], [SEP], later sub-tokens and padding ignored */
  const int lengths[B] = {6, 4, 5};
  const int32_t labels[B * S] = {-100, 1, 2, -100, 0, -100,    /* [CLS] w w ## w [SEP] */
                                 -100, 4, 3, -100, -100, -100, /* [CLS] w w [SEP] pad pad */
                                 -100, 0, -100, -100, -100, -100}; /* [CLS] w ## ## [SEP] pad */
  for (int b = 0; b < B; b++)
    for (int s = 0; s < S; s++) {
      f->ids[b * S + s] = s < lengths[b] ? (3 + 5 * b + 7 * s) % 20 : 0;
      f->mask[b * S + s] = s < lengths[b];
      f->segs[b * S + s] = 0;
    }
  memcpy(f->labels, labels, sizeof labels);
  const char *names[4] = {"input_ids", "input_mask", "segment_ids", "label_ids"};
  int32_t *data[4] = {f->ids, f->mask, f->segs, f->labels};
  for (int k = 0; k < 4; k++) {
    f->names[k] = names[k];
    f->tensors[k] = (est_tensor){.dtype = EST_DT_INT32, .rank = 2, .dims = {B, S}, .data = data[k]};
  }
  f->features = (est_features){.batch_size = B, .count = 4, .names = f->names, .tensors = f->tensors};
}

static void fixture_close(fixture *f) {
  est_bert_token_classifier_head_type.free(f->head);
  est_bert_encoder_free(f->enc);
  est_vars_free(f->vs);
}

static size_t var_index(fixture *f, const char *name) {
  for (size_t i = 0; i < est_vars_count(f->vs); i++)
    if (!strcmp(est_vars_at(f->vs, i)->name, name)) return i;
  fail_msg("no variable %s", name);
  return 0;
}

/* The head's loss after the encoder's forward; training: dropout with seed 11, step 3. */
static float forward(fixture *f, est_mode mode, int training) {
  assert_int_equal(est_bert_encoder_forward(f->enc, f->ids, f->mask, f->segs, B, S, training, 11, 3), EST_OK);
  const est_bert_head_batch b = {.mode = mode, .features = &f->features, .batch = B, .seq_len = S,
                                 .training = training, .seed = 11, .step = 3};
  float loss = NAN;
  assert_int_equal(est_bert_token_classifier_head_type.forward(f->head, &b, mode == EST_MODE_PREDICT ? NULL : &loss),
                   EST_OK);
  return loss;
}

/* mean over labelled positions of -log softmax(seq . W^T + b)[label], in double */
static double reference_loss(fixture *f) {
  const float *seq = est_bert_encoder_sequence_output(f->enc);
  const float *W = est_vars_value(f->vs, var_index(f, "output_weights"));
  const float *bias = est_vars_value(f->vs, var_index(f, "output_bias"));
  const int H = f->cfg.hidden_size;
  double sum = 0.0;
  int n = 0;
  for (int t = 0; t < B * S; t++) {
    if (f->labels[t] == -100) continue;
    double z[C], zmax = -INFINITY, lse = 0.0;
    for (int c = 0; c < C; c++) {
      z[c] = bias[c];
      for (int k = 0; k < H; k++) z[c] += (double)seq[t * H + k] * W[c * H + k];
      zmax = fmax(zmax, z[c]);
    }
    for (int c = 0; c < C; c++) lse += exp(z[c] - zmax);
    sum += zmax + log(lse) - z[f->labels[t]];
    n++;
  }
  return sum / n;
}

static void test_loss_is_the_mean_over_labelled_positions(void **state) {
  (void)state;
  fixture f;
  fixture_open(&f, EST_MODE_TRAIN, 0.1);
  const float loss = forward(&f, EST_MODE_TRAIN, 0);
  const double ref = reference_loss(&f);
  assert_true(fabs(loss - ref) <= 1e-5 * fabs(ref) + 1e-6);
  /* a label changed at an ignored position changes nothing; at a labelled one it does */
  f.labels[3] = -100; /* still ignored */
  assert_true(forward(&f, EST_MODE_TRAIN, 0) == loss);
  f.labels[1] = 3;
  assert_true(fabs(forward(&f, EST_MODE_TRAIN, 0) - reference_loss(&f)) <= 1e-5);
  assert_true(forward(&f, EST_MODE_TRAIN, 0) != loss);
  /* no labelled position at all: loss 0 and zero gradients */
  for (int t = 0; t < B * S; t++) f.labels[t] = -100;
  assert_true(forward(&f, EST_MODE_TRAIN, 0) == 0.0f);
  est_vars_zero_grads(f.vs);
  assert_int_equal(est_bert_token_classifier_head_type.backward(f.head), EST_OK);
  const size_t w = var_index(&f, "output_weights");
  for (size_t j = 0; j < est_vars_at(f.vs, w)->count; j++) assert_true(est_vars_grad(f.vs, w)[j] == 0.0f);
  fixture_close(&f);
}

/* d loss / d w by central differences of the head's own forward, against backward's, for
 * the head's weights and bias and one encoder variable (the gradient reaches the encoder
 * through the sequence output); training = 1 runs the head's dropout with a fixed mask. */
static void gradcheck(int training) {
  fixture f;
  fixture_open(&f, EST_MODE_TRAIN, training ? 0.3 : 0.0);
  est_vars_zero_grads(f.vs);
  forward(&f, EST_MODE_TRAIN, training);
  assert_int_equal(est_bert_token_classifier_head_type.backward(f.head), EST_OK);
  assert_int_equal(est_bert_encoder_backward(f.enc), EST_OK);
  assert_int_not_equal(est_bert_token_classifier_head_type.backward(f.head), EST_OK); /* one backward a forward */
  const char *names[] = {"output_weights", "output_bias", "bert/encoder/layer_0/output/dense/bias",
                         "bert/embeddings/word_embeddings"};
  for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
    const size_t idx = var_index(&f, names[k]);
    float *w = est_vars_value(f.vs, idx);
    const float *g = est_vars_grad(f.vs, idx);
    const size_t count = est_vars_at(f.vs, idx)->count;
    for (size_t j = 0; j < count; j += count > 40 ? count / 13 : 1) {
      const float h = 1e-2f, w0 = w[j];
      w[j] = w0 + h;
      const double up = forward(&f, EST_MODE_TRAIN, training);
      w[j] = w0 - h;
      const double down = forward(&f, EST_MODE_TRAIN, training);
      w[j] = w0;
      const double fd = (up - down) / (2.0 * h);
      if (!(fabs(fd - g[j]) <= 2e-3 + 2e-2 * fabs(fd)))
        fail_msg("%s[%zu] (dropout %d): backward %.6g, finite differences %.6g", names[k], j, training, g[j], fd);
    }
  }
  fixture_close(&f);
}

static void test_gradcheck_without_dropout(void **state) {
  (void)state;
  gradcheck(0);
}

static void test_gradcheck_with_dropout(void **state) {
  (void)state;
  gradcheck(1);
}

static void test_predictions_and_metrics(void **state) {
  (void)state;
  fixture f;
  fixture_open(&f, EST_MODE_PREDICT, 0.1);
  forward(&f, EST_MODE_PREDICT, 0);
  const est_bert_head_batch b = {.mode = EST_MODE_PREDICT, .features = &f.features, .batch = B, .seq_len = S};
  est_estimator_spec spec = {0};
  assert_int_equal(est_bert_token_classifier_head_type.predictions(f.head, &b, &spec), EST_OK);
  assert_int_equal(spec.num_predictions, 1);
  assert_string_equal(spec.prediction_names[0], "probabilities");
  assert_int_equal(spec.predictions[0].rank, 3);
  assert_int_equal(spec.predictions[0].dims[0], B);
  assert_int_equal(spec.predictions[0].dims[1], S);
  assert_int_equal(spec.predictions[0].dims[2], C);
  const float *p = spec.predictions[0].data;
  for (int t = 0; t < B * S; t++) {
    double sum = 0;
    for (int c = 0; c < C; c++) sum += p[t * C + c];
    assert_true(fabs(sum - 1.0) < 1e-5);
  }
  fixture_close(&f);

  /* EVAL: token accuracy over the labelled positions, against the argmax by hand */
  fixture_open(&f, EST_MODE_EVAL, 0.1);
  const float loss = forward(&f, EST_MODE_EVAL, 0);
  const est_bert_head_batch e = {.mode = EST_MODE_EVAL, .features = &f.features, .batch = B, .seq_len = S};
  assert_int_equal(est_bert_token_classifier_head_type.update_metrics(f.head, &e), EST_OK);
  est_metric *const *metrics;
  size_t n;
  assert_int_equal(est_bert_token_classifier_head_type.metrics(f.head, &metrics, &n), EST_OK);
  assert_int_equal(n, 2);
  const float *seq = est_bert_encoder_sequence_output(f.enc);
  const float *W = est_vars_value(f.vs, var_index(&f, "output_weights"));
  const float *bias = est_vars_value(f.vs, var_index(&f, "output_bias"));
  int right = 0, labelled = 0;
  for (int t = 0; t < B * S; t++) {
    if (f.labels[t] == -100) continue;
    int best = 0;
    double zbest = -INFINITY;
    for (int c = 0; c < C; c++) {
      double z = bias[c];
      for (int k = 0; k < f.cfg.hidden_size; k++) z += (double)seq[t * f.cfg.hidden_size + k] * W[c * f.cfg.hidden_size + k];
      if (z > zbest) zbest = z, best = c;
    }
    right += best == f.labels[t];
    labelled++;
  }
  for (size_t k = 0; k < n; k++) {
    const double v = est_metric_result(metrics[k]);
    if (!strcmp(est_metric_name(metrics[k]), "eval_accuracy"))
      assert_true(fabs(v - (double)right / labelled) < 1e-6);
    else
      assert_true(fabs(v - loss) < 1e-5); /* mean per-token loss over the same positions */
  }
  fixture_close(&f);
}

/* A label outside [0, C) (and not -100) is an error naming the position; no labels at all
 * names the feature. */
static void test_bad_labels_are_named(void **state) {
  (void)state;
  fixture f;
  fixture_open(&f, EST_MODE_TRAIN, 0.1);
  assert_int_equal(est_bert_encoder_forward(f.enc, f.ids, f.mask, f.segs, B, S, 0, 0, 0), EST_OK);
  const est_bert_head_batch b = {.mode = EST_MODE_TRAIN, .features = &f.features, .batch = B, .seq_len = S};
  float loss;
  f.labels[1 * S + 2] = C;
  assert_int_not_equal(est_bert_token_classifier_head_type.forward(f.head, &b, &loss), EST_OK);
  assert_non_null(strstr(est_error_message(), "label_ids[1][2] = 5"));
  f.labels[1 * S + 2] = -1;
  assert_int_not_equal(est_bert_token_classifier_head_type.forward(f.head, &b, &loss), EST_OK);
  assert_int_not_equal(est_bert_token_classifier_head_type.backward(f.head), EST_OK);
  f.features.count = 3;
  assert_int_not_equal(est_bert_token_classifier_head_type.forward(f.head, &b, &loss), EST_OK);
  assert_non_null(strstr(est_error_message(), "label_ids"));
  fixture_close(&f);
}

int main(void) {
  est_set_num_threads(2);
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_loss_is_the_mean_over_labelled_positions),
    cmocka_unit_test(test_gradcheck_without_dropout),
    cmocka_unit_test(test_gradcheck_with_dropout),
    cmocka_unit_test(test_predictions_and_metrics),
    cmocka_unit_test(test_bad_labels_are_named),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
