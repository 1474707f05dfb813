/* The SQuAD head (est_bert_squad_head_type, src/bert/heads/head_squad.c) on the encoder against
 * tensors of an independent PyTorch model (tests/reference/bert_golden.py, SQUAD_CONFIGS:
 * run_squad.py create_model + compute_loss, dropout off): start and end logits and the loss
 * to 1e-5 relative, every parameter gradient to 1e-4 (the pooler's are exactly zero: the
 * head does not read the pooled output); then central finite differences of est's own loss
 * for a few weights of the head and of the encoder; then the predictions and the bad
 * positions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "est/bert_head.h"
#include "est/threads.h"
#include "golden_util.h"
#include "test_util.h"

typedef struct fixture {
  golden g;
  est_bert_config cfg;
  est_var_store *vs;
  est_bert_encoder *enc;
  void *head;
  int32_t *ids, *mask, *segs, *starts, *ends, *unique_ids;
  est_tensor tensors[6];
  const char *names[6];
  est_features features;
} fixture;

static void fixture_open(fixture *f) {
  memset(f, 0, sizeof *f);
  golden_load(&f->g, "squad_h48_l2_s24");
  char path[1200];
  snprintf(path, sizeof path, "%s/bert_config.json", f->g.dir);
  assert_int_equal(est_bert_config_from_json_file(&f->cfg, path), EST_OK);
  const int B = f->g.batch, S = f->g.seq_len;
  assert_int_equal(est_vars_create(&f->vs), EST_OK);
  assert_int_equal(est_bert_encoder_create(&f->enc, &f->cfg, f->vs), EST_OK);
  const est_bert_head_context ctx = {.mode = EST_MODE_TRAIN, .max_batch = B, .max_seq_length = S,
                                     .encoder = f->enc, .vars = f->vs};
  assert_int_equal(est_bert_squad_head_type.create(&f->head, &ctx), EST_OK);
  assert_int_equal(est_vars_finalize(f->vs, 1), EST_OK);
  golden_expect_exactly_params(&f->g, f->vs); /* the reference's variables, no more */
  golden_set_params(&f->g, f->vs);
  assert_int_equal(est_bert_encoder_reserve(f->enc, B, S, 1), EST_OK);
  assert_int_equal(est_bert_squad_head_type.reserve(f->head, &ctx), EST_OK);
  f->ids = golden_ints(&f->g, "input_ids");
  f->mask = golden_ints(&f->g, "input_mask");
  f->segs = golden_ints(&f->g, "segment_ids");
  f->starts = golden_ints(&f->g, "start_positions");
  f->ends = golden_ints(&f->g, "end_positions");
  f->unique_ids = malloc((size_t)B * sizeof(int32_t));
  for (int b = 0; b < B; b++) f->unique_ids[b] = 1000000000 + b;
  const char *names[6] = {"input_ids", "input_mask", "segment_ids", "start_positions", "end_positions", "unique_ids"};
  int32_t *data[6] = {f->ids, f->mask, f->segs, f->starts, f->ends, f->unique_ids};
  for (int k = 0; k < 6; k++) {
    f->names[k] = names[k];
    f->tensors[k] = k < 3 ? (est_tensor){.dtype = EST_DT_INT32, .rank = 2, .dims = {B, S}, .data = data[k]}
                          : (est_tensor){.dtype = EST_DT_INT32, .rank = 1, .dims = {B}, .data = data[k]};
  }
  f->features = (est_features){.batch_size = B, .count = 6, .names = f->names, .tensors = f->tensors};
}

static void fixture_close(fixture *f) {
  est_bert_squad_head_type.free(f->head);
  est_bert_encoder_free(f->enc);
  est_vars_free(f->vs);
  golden_free(&f->g);
  free(f->ids), free(f->mask), free(f->segs), free(f->starts), free(f->ends), free(f->unique_ids);
}

/* The head's loss after the encoder's forward, in `mode`. */
static float forward(fixture *f, est_mode mode) {
  const int B = f->g.batch, S = f->g.seq_len;
  assert_int_equal(est_bert_encoder_forward(f->enc, f->ids, f->mask, f->segs, B, S, 0, 0, 0), EST_OK);
  const est_bert_head_batch b = {.mode = mode, .features = &f->features, .batch = B, .seq_len = S};
  float loss = NAN;
  assert_int_equal(est_bert_squad_head_type.forward(f->head, &b, mode == EST_MODE_PREDICT ? NULL : &loss), EST_OK);
  return loss;
}

static void test_squad_head_matches_the_reference(void **state) {
  (void)state;
  fixture f;
  fixture_open(&f);
  const int B = f.g.batch, S = f.g.seq_len;
  g_abs_floor = 0;
  est_vars_zero_grads(f.vs);
  float loss = forward(&f, EST_MODE_TRAIN);
  expect_close("loss", &loss, golden_get(&f.g, "loss", NULL), 1, 1e-5, 0);
  assert_int_equal(est_bert_squad_head_type.backward(f.head), EST_OK);
  assert_int_equal(est_bert_encoder_backward(f.enc), EST_OK);
  char key[400];
  golden_grad_floor(&f.g, f.vs, 1e-7);
  for (size_t i = 0; i < est_vars_count(f.vs); i++) {
    const est_variable *v = est_vars_at(f.vs, i);
    snprintf(key, sizeof key, "grad:%s", v->name);
    expect_close(key, est_vars_grad(f.vs, i), golden_get(&f.g, key, NULL), v->count, 1e-4, 1e-4);
    if (!strncmp(v->name, "bert/pooler/", 12))
      for (size_t j = 0; j < v->count; j++) assert_true(est_vars_grad(f.vs, i)[j] == 0.0f);
  }
  /* PREDICT: unique_ids, start_logits, end_logits [B, S] */
  g_abs_floor = 0;
  forward(&f, EST_MODE_PREDICT);
  const est_bert_head_batch b = {.mode = EST_MODE_PREDICT, .features = &f.features, .batch = B, .seq_len = S};
  est_estimator_spec spec = {0};
  assert_int_equal(est_bert_squad_head_type.predictions(f.head, &b, &spec), EST_OK);
  assert_int_equal(spec.num_predictions, 3);
  assert_string_equal(spec.prediction_names[0], "unique_ids");
  assert_int_equal(((const int32_t *)spec.predictions[0].data)[B - 1], 1000000000 + B - 1);
  assert_string_equal(spec.prediction_names[1], "start_logits");
  assert_int_equal(spec.predictions[1].dims[1], S);
  expect_close("start_logits", spec.predictions[1].data, golden_get(&f.g, "start_logits", NULL), (size_t)B * S, 1e-5,
               1e-6);
  expect_close("end_logits", spec.predictions[2].data, golden_get(&f.g, "end_logits", NULL), (size_t)B * S, 1e-5, 1e-6);
  fixture_close(&f);
}

/* d loss / d w by central differences of est's own forward, for weights of the head and of
 * the encoder's last layer, against backward's. */
static void test_squad_head_gradcheck(void **state) {
  (void)state;
  fixture f;
  fixture_open(&f);
  est_vars_zero_grads(f.vs);
  forward(&f, EST_MODE_TRAIN);
  assert_int_equal(est_bert_squad_head_type.backward(f.head), EST_OK);
  assert_int_equal(est_bert_encoder_backward(f.enc), EST_OK);
  const char *names[] = {"cls/squad/output_weights", "cls/squad/output_bias", "bert/encoder/layer_1/output/dense/bias"};
  for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
    size_t idx = est_vars_count(f.vs);
    for (size_t i = 0; i < est_vars_count(f.vs); i++)
      if (!strcmp(est_vars_at(f.vs, i)->name, names[k])) idx = i;
    assert_true(idx < est_vars_count(f.vs));
    float *w = est_vars_value(f.vs, idx);
    const float *g = est_vars_grad(f.vs, idx);
    for (size_t j = 0; j < est_vars_at(f.vs, idx)->count && j < 5; j++) {
      const float h = 1e-2f, w0 = w[j];
      w[j] = w0 + h;
      const double up = forward(&f, EST_MODE_TRAIN);
      w[j] = w0 - h;
      const double down = forward(&f, EST_MODE_TRAIN);
      w[j] = w0;
      const double fd = (up - down) / (2.0 * h);
      if (!(fabs(fd - g[j]) <= 2e-3 + 2e-2 * fabs(fd)))
        fail_msg("%s[%zu]: backward %.6g, finite differences %.6g", names[k], j, g[j], fd);
    }
  }
  fixture_close(&f);
}

/* A position outside the sequence is an error naming the feature, not a wrong gradient. */
static void test_bad_positions_are_named(void **state) {
  (void)state;
  fixture f;
  fixture_open(&f);
  const int B = f.g.batch, S = f.g.seq_len;
  assert_int_equal(est_bert_encoder_forward(f.enc, f.ids, f.mask, f.segs, B, S, 0, 0, 0), EST_OK);
  f.ends[1] = S;
  const est_bert_head_batch b = {.mode = EST_MODE_TRAIN, .features = &f.features, .batch = B, .seq_len = S};
  float loss;
  assert_int_not_equal(est_bert_squad_head_type.forward(f.head, &b, &loss), EST_OK);
  assert_non_null(strstr(est_error_message(), "end_positions[1]"));
  assert_int_not_equal(est_bert_squad_head_type.backward(f.head), EST_OK); /* no forward to go back through */
  f.features.count = 3; /* no positions at all */
  assert_int_not_equal(est_bert_squad_head_type.forward(f.head, &b, &loss), EST_OK);
  assert_non_null(strstr(est_error_message(), "start_positions"));
  fixture_close(&f);
}

int main(void) {
  est_set_num_threads(2);
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_squad_head_matches_the_reference),
    cmocka_unit_test(test_squad_head_gradcheck),
    cmocka_unit_test(test_bad_positions_are_named),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
