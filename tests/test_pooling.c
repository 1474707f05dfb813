/* Sentence-embedding pooling (est/sentence_embedding.h): the kernel against
 * sentence-transformers' formulas (tests/reference/pooling_reference.py ->
 * tests/data/pooling/pooling_golden.txt), the mode list, sentence-transformers'
 * modules.json / 1_Pooling/config.json, and the pooling head on the BERT model_fn. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "est/bert_head.h"
#include "est/sentence_embedding.h"

static void test_golden_modes(void **state) {
  (void)state;
  FILE *f = fopen(EST_TEST_DATA "/pooling/pooling_golden.txt", "r");
  assert_non_null(f);
  int B, S, H;
  assert_int_equal(fscanf(f, "%d %d %d", &B, &S, &H), 3);
  float *seq = malloc(sizeof(float) * B * S * H);
  int32_t *mask = malloc(sizeof(int32_t) * B * S);
  for (int i = 0; i < B * S * H; i++) assert_int_equal(fscanf(f, "%f", &seq[i]), 1);
  for (int i = 0; i < B * S; i++) assert_int_equal(fscanf(f, "%d", &mask[i]), 1);
  char modes[128];
  int normalize, cases = 0;
  while (fscanf(f, "%127s %d", modes, &normalize) == 2) {
    est_pooling_params p;
    assert_int_equal(est_pooling_params_parse(&p, modes, normalize), EST_OK);
    const int W = est_pooling_width(&p, H);
    float *out = malloc(sizeof(float) * B * W);
    est_pooling_forward(out, seq, mask, B, S, H, &p);
    for (int i = 0; i < B * W; i++) {
      double want;
      assert_int_equal(fscanf(f, "%lf", &want), 1);
      if (fabs(out[i] - want) > 1e-6 * (1 + fabs(want))) fail_msg("%s normalize %d [%d]: %.9g, want %.9g", modes,
                                                                   normalize, i, out[i], want);
    }
    free(out);
    cases++;
  }
  assert_int_equal(cases, 8);
  fclose(f);
  free(seq);
  free(mask);
}

static void test_mode_list(void **state) {
  (void)state;
  est_pooling_params p;
  char buf[64];
  assert_int_equal(est_pooling_params_parse(&p, "mean,cls", 0), EST_OK);
  assert_int_equal(p.modes, EST_POOLING_MEAN | EST_POOLING_CLS);
  assert_string_equal(est_pooling_modes_string(&p, buf, sizeof buf), "cls,mean"); /* concatenation order */
  assert_int_equal(est_pooling_width(&p, 10), 20);
  assert_int_equal(est_pooling_params_parse(&p, "weightedmean", 0), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "\"weightedmean\" unknown"));
  assert_int_equal(est_pooling_params_parse(&p, "mean,mean", 0), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "twice"));
  assert_int_equal(est_pooling_params_parse(&p, "", 0), EST_ERR_INVALID_ARGUMENT);
  assert_int_equal(est_pooling_params_parse(&p, "mean,", 0), EST_ERR_INVALID_ARGUMENT);
}

/* ---- sentence-transformers' files ---------------------------------------------------- */

static void write_text(const char *dir, const char *name, const char *text) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  char *slash = strrchr(p, '/');
  *slash = 0;
  mkdir(p, 0755);
  *slash = '/';
  FILE *f = fopen(p, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static const char MINILM_MODULES[] =
    "[{\"idx\": 0, \"name\": \"0\", \"path\": \"\", \"type\": \"sentence_transformers.models.Transformer\"},\n"
    " {\"idx\": 1, \"name\": \"1\", \"path\": \"1_Pooling\", \"type\": \"sentence_transformers.models.Pooling\"},\n"
    " {\"idx\": 2, \"name\": \"2\", \"path\": \"2_Normalize\", \"type\": \"sentence_transformers.models.Normalize\"}]";
static const char MEAN_CONFIG[] =
    "{\"word_embedding_dimension\": 384, \"pooling_mode_cls_token\": false, \"pooling_mode_mean_tokens\": true,"
    " \"pooling_mode_max_tokens\": false, \"pooling_mode_mean_sqrt_len_tokens\": false,"
    " \"pooling_mode_weightedmean_tokens\": false, \"pooling_mode_lasttoken\": false, \"include_prompt\": true}";

static void fresh_dir(char *dir, size_t size) {
  snprintf(dir, size, "/tmp/est_test_pooling_XXXXXX");
  assert_non_null(mkdtemp(dir));
}

static void test_sentence_transformers_files(void **state) {
  (void)state;
  char dir[64];
  est_pooling_params p = {.modes = EST_POOLING_CLS, .normalize = false};
  int found = 1;
  fresh_dir(dir, sizeof dir);
  /* nothing there: not found, p untouched */
  assert_int_equal(est_pooling_read_sentence_transformers(&p, dir, &found), EST_OK);
  assert_int_equal(found, 0);
  assert_int_equal(p.modes, EST_POOLING_CLS);
  /* only 1_Pooling/config.json: its modes, no normalisation */
  write_text(dir, "1_Pooling/config.json", MEAN_CONFIG);
  assert_int_equal(est_pooling_read_sentence_transformers(&p, dir, &found), EST_OK);
  assert_int_equal(found, 1);
  assert_int_equal(p.modes, EST_POOLING_MEAN);
  assert_false(p.normalize);
  /* all-MiniLM-L6-v2's layout: mean, then Normalize */
  write_text(dir, "modules.json", MINILM_MODULES);
  assert_int_equal(est_pooling_read_sentence_transformers(&p, dir, &found), EST_OK);
  assert_int_equal(p.modes, EST_POOLING_MEAN);
  assert_true(p.normalize);
  /* a mode est does not run */
  write_text(dir, "1_Pooling/config.json", "{\"pooling_mode_mean_tokens\": false, \"pooling_mode_lasttoken\": true}");
  assert_int_equal(est_pooling_read_sentence_transformers(&p, dir, &found), EST_ERR_UNIMPLEMENTED);
  assert_non_null(strstr(est_error_message(), "pooling_mode_lasttoken"));
  assert_non_null(strstr(est_error_message(), "1_Pooling/config.json"));
  /* no mode at all; a non-boolean */
  write_text(dir, "1_Pooling/config.json", "{\"pooling_mode_mean_tokens\": false}");
  assert_int_equal(est_pooling_read_sentence_transformers(&p, dir, &found), EST_ERR_INVALID_ARGUMENT);
  write_text(dir, "1_Pooling/config.json", "{\"pooling_mode_max_tokens\": 1}");
  assert_int_equal(est_pooling_read_sentence_transformers(&p, dir, &found), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "\"pooling_mode_max_tokens\" must be true or false"));
  /* a module est cannot run */
  write_text(dir, "1_Pooling/config.json", MEAN_CONFIG);
  write_text(dir, "modules.json",
             "[{\"path\": \"\", \"type\": \"sentence_transformers.models.Transformer\"},"
             " {\"path\": \"1_Pooling\", \"type\": \"sentence_transformers.models.Pooling\"},"
             " {\"path\": \"2_Dense\", \"type\": \"sentence_transformers.models.Dense\"}]");
  assert_int_equal(est_pooling_read_sentence_transformers(&p, dir, &found), EST_ERR_UNIMPLEMENTED);
  assert_non_null(strstr(est_error_message(), "module [2] \"sentence_transformers.models.Dense\""));
  /* modules.json naming a Pooling directory that is not there */
  write_text(dir, "modules.json",
             "[{\"path\": \"\", \"type\": \"sentence_transformers.models.Transformer\"},"
             " {\"path\": \"elsewhere\", \"type\": \"sentence_transformers.models.Pooling\"}]");
  assert_int_equal(est_pooling_read_sentence_transformers(&p, dir, &found), EST_ERR_NOT_FOUND);
  assert_non_null(strstr(est_error_message(), "elsewhere/config.json is missing"));
  /* not JSON */
  write_text(dir, "modules.json", "[{");
  assert_int_equal(est_pooling_read_sentence_transformers(&p, dir, &found), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "modules.json:"));
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  assert_int_equal(system(cmd), 0);
}

/* ---- the head on the BERT model_fn ----------------------------------------------------- */

enum { B = 3, S = 8, V = 20 };

static est_bert_config tiny_config(void) {
  est_bert_config c = est_bert_config_default();
  c.vocab_size = V;
  c.hidden_size = 8, c.num_hidden_layers = 1, c.num_attention_heads = 2;
  c.intermediate_size = 16, c.max_position_embeddings = S, c.type_vocab_size = 2;
  return c;
}

static void test_head_on_the_model_fn(void **state) {
  (void)state;
  est_pooling_params pp = {.modes = EST_POOLING_CLS | EST_POOLING_MAX | EST_POOLING_MEAN, .normalize = true};
  est_bert_model_params p = {.bert_config = tiny_config(), .head = &est_bert_pooling_head_type, .head_params = &pp,
                             .max_seq_length = S};
  est_model_fn fn = est_bert_model_fn(&p);
  est_var_store *vars;
  void *model = NULL;
  assert_int_equal(est_vars_create(&vars), EST_OK);
  est_model_context ctx = {.mode = EST_MODE_PREDICT, .batch_size = B, .seed = 3, .params = fn.params};
  assert_int_equal(fn.build(&ctx, vars, &model), EST_OK);
  assert_int_equal(est_vars_finalize(vars, 11), EST_OK);
  int32_t ids[B * S], mask[B * S], segs[B * S];
  for (int i = 0; i < B * S; i++) {
    ids[i] = 1 + (i * 7) % (V - 1);
    mask[i] = i % S < 2 + 3 * (i / S);
    segs[i] = 0;
  }
  const char *names[3] = {"input_ids", "input_mask", "segment_ids"};
  int32_t *data[3] = {ids, mask, segs};
  est_tensor t[3];
  for (int k = 0; k < 3; k++) t[k] = (est_tensor){.dtype = EST_DT_INT32, .rank = 2, .dims = {B, S}, .data = data[k]};
  est_features f = {.batch_size = B, .count = 3, .names = names, .tensors = t};
  est_estimator_spec spec = {0};
  assert_int_equal(fn.call(model, vars, &f, EST_MODE_PREDICT, 0, &spec), EST_OK);
  assert_int_equal(spec.num_predictions, 1);
  assert_string_equal(spec.prediction_names[0], "embeddings");
  assert_int_equal(spec.predictions[0].dims[1], 3 * 8);

  /* The same encoder, run alone, then the reference kernel on its sequence output. */
  est_var_store *vs2;
  est_bert_encoder *enc;
  est_bert_config cfg = tiny_config();
  assert_int_equal(est_vars_create(&vs2), EST_OK);
  assert_int_equal(est_bert_encoder_create(&enc, &cfg, vs2), EST_OK);
  assert_int_equal(est_vars_finalize(vs2, 1), EST_OK);
  assert_int_equal(est_vars_count(vs2), est_vars_count(vars)); /* the head declares nothing */
  for (size_t i = 0; i < est_vars_count(vs2); i++)
    memcpy(est_vars_value(vs2, i), est_vars_value(vars, i), est_vars_at(vars, i)->count * sizeof(float));
  assert_int_equal(est_bert_encoder_reserve(enc, B, S, 0), EST_OK);
  assert_int_equal(est_bert_encoder_forward(enc, ids, mask, segs, B, S, 0, 0, 0), EST_OK);
  float want[B * 24];
  est_pooling_forward(want, est_bert_encoder_sequence_output(enc), mask, B, S, 8, &pp);
  const float *got = spec.predictions[0].data;
  for (int i = 0; i < B * 24; i++) assert_float_equal(got[i], want[i], 0);
  double norm = 0;
  for (int i = 0; i < 24; i++) norm += (double)got[i] * got[i];
  assert_float_equal(norm, 1.0, 1e-5);
  est_bert_encoder_free(enc);
  est_vars_free(vs2);
  fn.destroy(model);
  est_vars_free(vars);

  /* it cannot train or evaluate */
  assert_int_equal(est_vars_create(&vars), EST_OK);
  model = NULL;
  ctx.mode = EST_MODE_TRAIN;
  assert_int_not_equal(fn.build(&ctx, vars, &model), EST_OK);
  assert_non_null(strstr(est_error_message(), "pooling head cannot train"));
  if (model) fn.destroy(model);
  model = NULL;
  ctx.mode = EST_MODE_EVAL;
  est_vars_free(vars);
  assert_int_equal(est_vars_create(&vars), EST_OK);
  assert_int_not_equal(fn.build(&ctx, vars, &model), EST_OK);
  assert_non_null(strstr(est_error_message(), "only predicts"));
  if (model) fn.destroy(model);
  est_vars_free(vars);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_golden_modes),
    cmocka_unit_test(test_mode_list),
    cmocka_unit_test(test_sentence_transformers_files),
    cmocka_unit_test(test_head_on_the_model_fn),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
