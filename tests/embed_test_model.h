/* The sentence-embedding tests' model and texts: keras_bert_tiny (2 layers, H 4, a 15-token
 * vocab: tests/data/keras_bert_tiny) at max_seq_length 16, and expected vectors computed
 * apart from the pooling head: the last encoder layer from est_encoder_layers (the
 * extract_features path) pooled by est_pooling_forward (checked against
 * sentence-transformers' formulas in test_pooling). Shared by test_embed.c and
 * test_serve_embed.c. */
#ifndef EST_TESTS_EMBED_TEST_MODEL_H
#define EST_TESTS_EMBED_TEST_MODEL_H

#include <math.h>

#include "est/classifier_features.h"
#include "est/sentence_embedding.h"
#include "est/serving.h"
#include "test_util.h"

#define EMBED_KBT EST_TEST_DATA "/keras_bert_tiny"
#define EMBED_MODEL_FLAGS                                                                                         \
  " --init_checkpoint=" EMBED_KBT "/bert_model.ckpt --bert_config_file=" EMBED_KBT "/bert_config.json"            \
  " --vocab_file=" EMBED_KBT "/vocab.txt --max_seq_length=16 --num_threads=1"
enum { EMBED_S = 16, EMBED_H = 4 };

/* Varied lines: words of the vocab, an empty line, one cut at 16 tokens (22 + 2), unknown
 * words with accents, CJK and an emoji, one letter. */
static const char *const embed_texts[] = {
  "all work and no play",
  "",
  "jack is a dull boy",
  "all work and no play makes jack a dull boy all work and no play makes jack a dull boy all work",
  "\xc3\xbcnknown w\xc3\xb6rds \xe6\x9d\xb1\xe4\xba\xac \xf0\x9f\x98\x80 play",
  "a",
};
enum { EMBED_NTEXTS = sizeof embed_texts / sizeof *embed_texts, EMBED_LONG_TEXT = 3 };

/* out [n, W]: the pooled vectors of texts under p; tokens[i] (may be NULL): row i's length. */
static inline void embed_expected(const char *const *texts, int n, const est_pooling_params *p, float *out,
                                  int *tokens) {
  est_bert_config cfg;
  assert_int_equal(est_bert_config_from_json_file(&cfg, EMBED_KBT "/bert_config.json"), EST_OK);
  est_tokenizer *tok;
  assert_int_equal(est_tokenizer_open(&tok, EMBED_KBT "/vocab.txt", true), EST_OK);
  static const char *const labels[1] = {"0"};
  est_feature_converter conv;
  assert_int_equal(est_feature_converter_init(&conv, tok, labels, 1, EMBED_S), EST_OK);
  const int last = cfg.num_hidden_layers - 1;
  est_encoder_layers *enc;
  assert_int_equal(est_encoder_layers_open(&enc, &cfg, EMBED_KBT "/bert_model.ckpt", &last, 1, 1, EMBED_S,
                                           EST_PRECISION_FP32), EST_OK);
  const int W = est_pooling_width(p, cfg.hidden_size);
  for (int i = 0; i < n; i++) {
    int32_t ids[EMBED_S], mask[EMBED_S], segs[EMBED_S], label, real;
    est_input_example ex = {.guid = "t", .text_a = texts[i], .label = "0"};
    assert_int_equal(est_convert_single_example(&conv, 5, &ex, ids, mask, segs, &label, &real), EST_OK);
    float seq[EMBED_S * EMBED_H];
    float *layers[1] = {seq};
    assert_int_equal(est_encoder_layers_run(enc, ids, mask, segs, 1, EMBED_S, layers), EST_OK);
    est_pooling_forward(out + (size_t)i * W, seq, mask, 1, EMBED_S, cfg.hidden_size, p);
    if (tokens) {
      tokens[i] = 0;
      for (int t = 0; t < EMBED_S; t++) tokens[i] += mask[t];
    }
  }
  est_encoder_layers_free(enc);
  est_tokenizer_free(tok);
}

static inline void embed_assert_close(const double *got, const float *want, int n, double tol, const char *what) {
  for (int i = 0; i < n; i++)
    if (!(fabs(got[i] - want[i]) <= tol)) fail_msg("%s [%d]: %.9g, want %.9g", what, i, got[i], want[i]);
}

#endif
