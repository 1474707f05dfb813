/* The encoder API (est/bert_encoder.h) as a head other than the classifier uses it: the BERT
 * model_fn with the classifier head is exactly encoder + head; the sequence-output gradient and a tied
 * word-embedding gradient reach the parameters (finite differences); output gradients
 * accumulate over several heads; a shorter forward equals an exact-size reservation; a
 * forward-only reservation gives the same outputs in less memory and refuses backward. */
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

enum { B = 3, S = 9, H = 16, L = 2, V = 41, C = 3 };

static est_bert_config small_config(void) {
  est_bert_config cfg = est_bert_config_default();
  cfg.vocab_size = V;
  cfg.hidden_size = H;
  cfg.num_hidden_layers = L;
  cfg.num_attention_heads = 2;
  cfg.intermediate_size = 24;
  cfg.max_position_embeddings = 32;
  cfg.type_vocab_size = 2;
  return cfg;
}

typedef struct batch {
  int32_t ids[B * S], mask[B * S], segs[B * S], labels[B];
} batch;

static void make_batch(batch *b) {
  est_rng r;
  est_rng_init(&r, 17);
  for (int i = 0; i < B * S; i++) {
    b->ids[i] = (int32_t)est_rng_below(&r, V);
    b->mask[i] = i % S < S - 2 * (i / S);  /* padded tails */
    b->segs[i] = i % S >= S / 2;
  }
  for (int i = 0; i < B; i++) b->labels[i] = i % C;
}

/* Copies the [b, s] prefix rows of an [B, S_full, cols] int array packed at seq s. */
static void repack(int32_t *dst, const int32_t *src, int b, int s, int s_full) {
  for (int i = 0; i < b; i++) memcpy(dst + (size_t)i * s, src + (size_t)i * s_full, (size_t)s * sizeof(int32_t));
}

static float *copy_grads(est_var_store *vs) {
  float *g = malloc(est_vars_size(vs) * sizeof(float));
  assert_non_null(g);
  memcpy(g, est_vars_grads(vs), est_vars_size(vs) * sizeof(float));
  return g;
}

static void test_classifier_is_encoder_plus_head(void **state) {
  (void)state;
  est_bert_config cfg = small_config();
  batch in;
  make_batch(&in);
  /* the one BERT model_fn with the classifier head: a TRAIN step (dropout on, seed 5, step 4) */
  bert_fn m;
  bert_fn_init(&m, &cfg, C, S);
  assert_int_equal(bert_fn_build(&m, EST_MODE_TRAIN, B, 5), EST_OK);
  est_var_store *vs1 = m.vs;
  est_vars_zero_grads(vs1);
  assert_int_equal(bert_fn_call(&m, in.ids, in.mask, in.segs, in.labels, B, 4), EST_OK);
  const float loss1 = m.spec.loss;
  /* the two parts by hand, same variables in the same order */
  est_var_store *vs2;
  est_bert_encoder *enc;
  est_bert_classifier_head *head;
  float logits2[B * C], loss2;
  assert_int_equal(est_vars_create(&vs2), EST_OK);
  assert_int_equal(est_bert_encoder_create(&enc, &cfg, vs2), EST_OK);
  assert_int_equal(est_bert_classifier_head_create(&head, H, C, vs2), EST_OK);
  assert_int_equal(est_vars_finalize(vs2, 5), EST_OK);
  assert_int_equal(est_vars_count(vs2), est_vars_count(vs1));
  assert_int_equal(est_bert_encoder_first_variable(enc), 0);
  assert_int_equal(est_bert_encoder_last_variable(enc) + 3, est_vars_count(vs2));
  assert_string_equal(est_vars_at(vs2, est_bert_encoder_word_embeddings_index(enc))->name,
                      "bert/embeddings/word_embeddings");
  assert_int_equal(est_bert_encoder_reserve(enc, B, S, 1), EST_OK);
  assert_int_equal(est_bert_classifier_head_reserve(head, B), EST_OK);
  est_vars_zero_grads(vs2);
  assert_int_equal(est_bert_encoder_forward(enc, in.ids, in.mask, in.segs, B, S, 1, 5, 4), EST_OK);
  assert_int_equal(est_bert_encoder_batch(enc), B);
  assert_int_equal(est_bert_encoder_seq_len(enc), S);
  assert_int_equal(est_bert_classifier_head_forward(head, est_bert_encoder_pooled_output(enc), in.labels, B, 1, 5, 4,
                                                    logits2, NULL, &loss2),
                   EST_OK);
  assert_int_equal(est_bert_classifier_head_backward(head, est_bert_encoder_pooled_output_grad(enc)), EST_OK);
  assert_int_equal(est_bert_encoder_backward(enc), EST_OK);
  assert_memory_equal(&loss1, &loss2, sizeof loss1);
  assert_memory_equal(est_vars_grads(vs1), est_vars_grads(vs2), est_vars_size(vs1) * sizeof(float));
  assert_memory_equal(est_bert_encoder_sequence_output(bert_fn_encoder(&m)), est_bert_encoder_sequence_output(enc),
                      sizeof(float) * B * S * H);
  assert_ptr_equal(est_bert_encoder_layer_output(enc, L - 1), est_bert_encoder_sequence_output(enc));
  assert_null(est_bert_encoder_layer_output(enc, L));
  /* one backward per forward */
  assert_int_equal(est_bert_encoder_backward(enc), EST_ERR_FAILED_PRECONDITION);
  /* PREDICT reserves forward-only: the same logits (as probabilities), less memory, no
   * backward */
  bert_fn mf;
  bert_fn_init(&mf, &cfg, C, S);
  assert_int_equal(bert_fn_build(&mf, EST_MODE_PREDICT, B, 5), EST_OK);
  est_bert_encoder *encf = bert_fn_encoder(&mf);
  assert_true(est_bert_encoder_activation_bytes(encf) < est_bert_encoder_activation_bytes(bert_fn_encoder(&m)));
  assert_int_equal(est_bert_encoder_forward(enc, in.ids, in.mask, in.segs, B, S, 0, 0, 0), EST_OK);
  assert_int_equal(est_bert_classifier_head_forward(head, est_bert_encoder_pooled_output(enc), NULL, B, 0, 0, 0,
                                                    logits2, NULL, NULL),
                   EST_OK);
  float probs2[B * C];
  est_bert_classifier_probabilities(probs2, logits2, B, C);
  assert_int_equal(bert_fn_call(&mf, in.ids, in.mask, in.segs, NULL, B, 0), EST_OK);
  assert_memory_equal(bert_fn_probabilities(&mf), probs2, sizeof probs2);
  assert_int_equal(est_bert_encoder_backward(encf), EST_ERR_FAILED_PRECONDITION);
  assert_int_equal(est_bert_encoder_forward(encf, in.ids, in.mask, in.segs, B, S, 1, 0, 0), EST_ERR_FAILED_PRECONDITION);
  bert_fn_free(&mf);

  bert_fn_free(&m);
  est_bert_classifier_head_free(head);
  est_bert_encoder_free(enc);
  est_vars_free(vs2);
}

/* A head that reads the whole sequence output and the tied word-embedding table, as a
 * masked-LM head does: loss = sum(seq * Wseq) + sum(pooled * Wpool) + sum(word * Wword).
 * Its gradients are Wseq, Wpool (into the encoder's buffers) and Wword (into the table's). */
typedef struct lm {
  est_var_store *vs;
  est_bert_encoder *enc;
  batch in;
  float wseq[B * S * H], wpool[B * H], wword[V * H];
} lm;

static double lm_loss(lm *t) {
  assert_int_equal(est_bert_encoder_forward(t->enc, t->in.ids, t->in.mask, t->in.segs, B, S, 0, 0, 0), EST_OK);
  const float *seq = est_bert_encoder_sequence_output(t->enc), *pooled = est_bert_encoder_pooled_output(t->enc);
  const float *word = est_vars_value(t->vs, est_bert_encoder_word_embeddings_index(t->enc));
  double l = 0;
  for (int i = 0; i < B * S * H; i++) l += (double)seq[i] * t->wseq[i];
  for (int i = 0; i < B * H; i++) l += (double)pooled[i] * t->wpool[i];
  for (int i = 0; i < V * H; i++) l += (double)word[i] * t->wword[i];
  return l;
}

/* forward + backward with the head's gradient split over `heads` calls that each add a share */
static void lm_backward(lm *t, int heads) {
  est_vars_zero_grads(t->vs);
  lm_loss(t);
  for (int k = 0; k < heads; k++) {
    float *dseq = est_bert_encoder_sequence_output_grad(t->enc), *dpool = est_bert_encoder_pooled_output_grad(t->enc);
    float *dword = est_vars_grad(t->vs, est_bert_encoder_word_embeddings_index(t->enc));
    assert_non_null(dseq);
    assert_non_null(dpool);
    for (int i = 0; i < B * S * H; i++) dseq[i] += t->wseq[i] / (float)heads;
    for (int i = 0; i < B * H; i++) dpool[i] += t->wpool[i] / (float)heads;
    for (int i = 0; i < V * H; i++) dword[i] += t->wword[i] / (float)heads;
  }
  assert_int_equal(est_bert_encoder_backward(t->enc), EST_OK);
}

static void test_sequence_and_tied_embedding_gradients(void **state) {
  (void)state;
  est_bert_config cfg = small_config();
  lm t;
  make_batch(&t.in);
  est_rng r;
  est_rng_init(&r, 3);
  for (int i = 0; i < B * S * H; i++) t.wseq[i] = 2.0f * est_rng_uniform(&r) - 1.0f;
  for (int i = 0; i < B * H; i++) t.wpool[i] = 2.0f * est_rng_uniform(&r) - 1.0f;
  for (int i = 0; i < V * H; i++) t.wword[i] = 0.5f * est_rng_uniform(&r);
  assert_int_equal(est_vars_create(&t.vs), EST_OK);
  assert_int_equal(est_bert_encoder_create(&t.enc, &cfg, t.vs), EST_OK);
  assert_int_equal(est_vars_finalize(t.vs, 9), EST_OK);
  assert_int_equal(est_bert_encoder_reserve(t.enc, B, S, 1), EST_OK);

  lm_backward(&t, 1);
  float *g1 = copy_grads(t.vs);
  /* three heads adding a third each: the same gradients (to rounding of the thirds) */
  lm_backward(&t, 3);
  for (size_t i = 0; i < est_vars_size(t.vs); i++)
    assert_true(fabsf(est_vars_grads(t.vs)[i] - g1[i]) <= 1e-5f * (1.0f + fabsf(g1[i])));

  /* central differences (in double over a float forward) on a few elements of a table,
   * a layer-0 kernel (reached only through the sequence output's layers) and the pooler */
  const char *names[] = {"bert/embeddings/word_embeddings", "bert/encoder/layer_0/attention/self/query/kernel",
                         "bert/encoder/layer_0/output/dense/kernel", "bert/pooler/dense/kernel"};
  for (size_t n = 0; n < sizeof names / sizeof *names; n++) {
    size_t idx = est_vars_count(t.vs);
    for (size_t i = 0; i < est_vars_count(t.vs); i++)
      if (!strcmp(est_vars_at(t.vs, i)->name, names[n])) idx = i;
    assert_true(idx < est_vars_count(t.vs));
    float *w = est_vars_value(t.vs, idx);
    const float *g = g1 + est_vars_at(t.vs, idx)->offset;
    size_t count = est_vars_at(t.vs, idx)->count;
    for (size_t j = 0; j < count; j += count / 7 + 1) {
      const float eps = 1e-2f, saved = w[j];
      w[j] = saved + eps;
      double lp = lm_loss(&t);
      w[j] = saved - eps;
      double lm_ = lm_loss(&t);
      w[j] = saved;
      double num = (lp - lm_) / ((double)(saved + eps) - (double)(saved - eps));
      if (fabs(num - g[j]) > 2e-3 + 2e-2 * fabs(num))
        fail_msg("%s[%zu]: analytic %.6g numeric %.6g", names[n], j, g[j], num);
    }
  }
  free(g1);
  est_bert_encoder_free(t.enc);
  est_vars_free(t.vs);
}

static void test_shorter_forward_and_forward_only(void **state) {
  (void)state;
  est_bert_config cfg = small_config();
  batch in;
  make_batch(&in);
  enum { b = 2, s = 5 };
  int32_t ids[b * s], mask[b * s], segs[b * s];
  repack(ids, in.ids, b, s, S);
  repack(mask, in.mask, b, s, S);
  repack(segs, in.segs, b, s, S);
  est_var_store *vs;
  est_bert_encoder *big, *exact, *fwd;
  assert_int_equal(est_vars_create(&vs), EST_OK);
  assert_int_equal(est_bert_encoder_create(&big, &cfg, vs), EST_OK);
  assert_int_equal(est_vars_finalize(vs, 2), EST_OK);
  /* Two more encoders read the same finalized store's variables: same indices, same order. */
  est_var_store *vs_b, *vs_c;
  assert_int_equal(est_vars_create(&vs_b), EST_OK);
  assert_int_equal(est_vars_create(&vs_c), EST_OK);
  assert_int_equal(est_bert_encoder_create(&exact, &cfg, vs_b), EST_OK);
  assert_int_equal(est_bert_encoder_create(&fwd, &cfg, vs_c), EST_OK);
  assert_int_equal(est_vars_finalize(vs_b, 2), EST_OK);
  assert_int_equal(est_vars_finalize(vs_c, 2), EST_OK);
  assert_memory_equal(est_vars_params(vs), est_vars_params(vs_b), est_vars_size(vs) * sizeof(float));

  assert_int_equal(est_bert_encoder_reserve(big, B, 2 * S, 1), EST_OK);
  assert_int_equal(est_bert_encoder_reserve(exact, b, s, 1), EST_OK);
  assert_int_equal(est_bert_encoder_reserve(fwd, B, 2 * S, 0), EST_OK);
  assert_true(est_bert_encoder_activation_bytes(fwd) < est_bert_encoder_activation_bytes(big) / 2);

  /* training forward + backward at (b, s) in the big reservation = the exact one */
  est_vars_zero_grads(vs);
  est_vars_zero_grads(vs_b);
  assert_int_equal(est_bert_encoder_forward(big, ids, mask, segs, b, s, 1, 8, 1), EST_OK);
  assert_int_equal(est_bert_encoder_forward(exact, ids, mask, segs, b, s, 1, 8, 1), EST_OK);
  assert_memory_equal(est_bert_encoder_sequence_output(big), est_bert_encoder_sequence_output(exact),
                      sizeof(float) * b * s * H);
  assert_memory_equal(est_bert_encoder_pooled_output(big), est_bert_encoder_pooled_output(exact),
                      sizeof(float) * b * H);
  float *d1 = est_bert_encoder_sequence_output_grad(big), *d2 = est_bert_encoder_sequence_output_grad(exact);
  for (int i = 0; i < b * s * H; i++) d1[i] = d2[i] = 0.01f * (float)(i % 13);
  assert_int_equal(est_bert_encoder_backward(big), EST_OK);
  assert_int_equal(est_bert_encoder_backward(exact), EST_OK);
  assert_memory_equal(est_vars_grads(vs), est_vars_grads(vs_b), est_vars_size(vs) * sizeof(float));

  /* forward-only: the same outputs, every layer's kept; no training, no backward */
  assert_int_equal(est_bert_encoder_forward(big, ids, mask, segs, b, s, 0, 0, 0), EST_OK);
  assert_int_equal(est_bert_encoder_forward(fwd, ids, mask, segs, b, s, 0, 0, 0), EST_OK);
  for (int l = 0; l < L; l++)
    assert_memory_equal(est_bert_encoder_layer_output(big, l), est_bert_encoder_layer_output(fwd, l),
                        sizeof(float) * b * s * H);
  assert_memory_equal(est_bert_encoder_pooled_output(big), est_bert_encoder_pooled_output(fwd),
                      sizeof(float) * b * H);
  assert_null(est_bert_encoder_sequence_output_grad(fwd));
  assert_int_equal(est_bert_encoder_backward(fwd), EST_ERR_FAILED_PRECONDITION);
  assert_int_equal(est_bert_encoder_forward(fwd, ids, mask, segs, b, s, 1, 0, 0), EST_ERR_FAILED_PRECONDITION);
  assert_int_equal(est_bert_encoder_forward(fwd, ids, mask, segs, B + 1, s, 0, 0, 0), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "exceeds the reservation"));
  /* growing into a training reservation */
  assert_int_equal(est_bert_encoder_reserve(fwd, B, S, 1), EST_OK);
  assert_int_equal(est_bert_encoder_forward(fwd, ids, mask, segs, b, s, 1, 0, 0), EST_OK);
  assert_int_equal(est_bert_encoder_backward(fwd), EST_OK);

  est_bert_encoder_free(big);
  est_bert_encoder_free(exact);
  est_bert_encoder_free(fwd);
  est_vars_free(vs);
  est_vars_free(vs_b);
  est_vars_free(vs_c);
}

int main(void) {
  est_set_num_threads(2);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_classifier_is_encoder_plus_head),
      cmocka_unit_test(test_sequence_and_tied_embedding_gradients),
      cmocka_unit_test(test_shorter_forward_and_forward_only),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
