/* The other families' *ForSequenceClassification heads (docs/heads.md §7): tests/data/encoders'
 * tiny RobertaForSequenceClassification, XLMRobertaForSequenceClassification,
 * DistilBertForSequenceClassification and ElectraForSequenceClassification directories
 * (num_labels 3), written with their logits, loss and gradients by
 * tests/reference/encoder_golden.py (transformers 4.44.2, torch 2.4.1). Through the one BERT
 * model_fn with the classifier head and --init_checkpoint=DIR: the head loads by the family's
 * names (hf_names.c), its logits are transformers' within 1e-5 (fp32), the loss and every
 * parameter's gradient of a training step torch autograd's within 1e-4. Then run_classifier
 * on tests/data/glue_mini from each directory: train, eval, export, `est predict`, and
 * --export_format=hf read back (tests/interop/test_hf_models.py has transformers read it).
 * And *ForQuestionAnswering of three name tables (roberta_qa, distilbert_qa, electra_qa):
 * their start / end logits, loss and gradients through the squad head. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bert_fn_util.h"
#include "est/bert_classifier.h"
#include "est/hf_model.h"
#include "est/safetensors.h"
#include "test_util.h"

#define ENC_DIR EST_TEST_DATA "/encoders"

static est_tensor read_golden(est_safetensors *g, const char *name) {
  est_tensor t;
  if (est_safetensors_read(g, name, &t) != EST_OK) fail_msg("golden tensor %s: %s", name, est_error_message());
  return t;
}

static void assert_close(const char *what, const float *got, const float *want, size_t n, double tol) {
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)got[i] - want[i]);
    if (!(d <= worst)) worst = d, at = i;
  }
  if (!(worst <= tol)) fail_msg("%s: max |est - transformers| = %g at %zu (est %g, transformers %g) > %g", what, worst,
                                at, got[at], want[at], tol);
}

/* The model_fn for `dir` in `mode`, its variables from --init_checkpoint=dir. */
static void build(bert_fn *m, const char *dir, est_bert_config *cfg, est_mode mode, int B, int S) {
  if (est_bert_config_from_json_file(cfg, dir) != EST_OK) fail_msg("%s: %s", dir, est_error_message());
  bert_fn_init(m, cfg, 3, S);
  m->params.no_dropout = 1;
  m->params.init_checkpoint = dir;
  if (bert_fn_build(m, mode, B, 1) != EST_OK) fail_msg("%s: %s", dir, est_error_message());
  if (m->fn.init(m->model, m->vs) != EST_OK) fail_msg("%s: %s", dir, est_error_message());
}

/* head_tensors: the head's tensors in the directory (all loaded, all with a gradient);
 * min_grads: the gradients the golden has at least. */
static void check_classifier(const char *name, est_classifier_kind kind, size_t head_tensors, size_t min_grads) {
  char dir[512], path[600], what[256];
  snprintf(dir, sizeof dir, ENC_DIR "/%s", name);
  snprintf(path, sizeof path, "%s/golden.safetensors", dir);
  est_safetensors *g;
  assert_int_equal(est_safetensors_open(&g, path), EST_OK);
  est_tensor ids = read_golden(g, "input_ids"), mask = read_golden(g, "input_mask"),
             segs = read_golden(g, "segment_ids"), labels = read_golden(g, "label_ids"),
             logits = read_golden(g, "logits"), loss = read_golden(g, "loss");
  const int B = (int)ids.dims[0], S = (int)ids.dims[1], C = 3;
  est_bert_config cfg;
  bert_fn m;

  /* PREDICT: the probabilities of transformers' logits */
  build(&m, dir, &cfg, EST_MODE_PREDICT, B, S);
  assert_int_equal(est_classifier_kind_of(cfg.opt.family), kind);
  assert_true(est_vars_find(m.vs, "classifier/dense/kernel") >= 0);
  assert_int_equal(bert_fn_call(&m, ids.data, mask.data, segs.data, NULL, B, 0), EST_OK);
  const float *probs = bert_fn_probabilities(&m);
  assert_non_null(probs);
  float want_p[16];
  est_softmax_forward(want_p, logits.data, B, C);
  snprintf(what, sizeof what, "%s probabilities", name);
  assert_close(what, probs, want_p, (size_t)B * C, 1e-6);
  /* the logits themselves: the head's layer on the encoder's first tokens, variables loaded */
  {
    est_bert_encoder *enc = bert_fn_encoder(&m);
    const int H = cfg.hidden_size;
    est_var_store *vs;
    assert_int_equal(est_vars_create(&vs), EST_OK);
    est_bert_classifier_head *h;
    est_classifier_head_options o = est_classifier_head_options_of(&cfg);
    o.dropout = 0.1;
    assert_int_equal(est_bert_classifier_head_create_opts(&h, H, C, &o, vs), EST_OK);
    assert_int_equal(est_vars_finalize(vs, 1), EST_OK);
    size_t loaded = 0;
    assert_int_equal(est_hf_load_vars(vs, dir, &loaded), EST_OK);
    assert_int_equal(loaded, head_tensors); /* e.g. dense kernel and bias, output weights and bias */
    assert_int_equal(est_bert_classifier_head_reserve(h, B), EST_OK);
    float first[64 * 2], got[16];
    const float *seq = est_bert_encoder_sequence_output(enc);
    for (int b = 0; b < B; b++) {
      if (!o.mean_pooling) { /* the first token */
        memcpy(first + b * H, seq + (size_t)b * S * H, (size_t)H * sizeof(float));
        continue;
      }
      int n = 0; /* the mean of the unpadded tokens */
      for (int j = 0; j < H; j++) first[b * H + j] = 0.0f;
      for (int s = 0; s < S; s++)
        if (((const int32_t *)mask.data)[b * S + s]) {
          n++;
          for (int j = 0; j < H; j++) first[b * H + j] += seq[((size_t)b * S + s) * H + j];
        }
      for (int j = 0; j < H; j++) first[b * H + j] /= (float)n;
    }
    assert_int_equal(est_bert_classifier_head_forward(h, first, NULL, B, 0, 0, 0, got, NULL, NULL), EST_OK);
    snprintf(what, sizeof what, "%s logits", name);
    assert_close(what, got, logits.data, (size_t)B * C, 1e-5);
    est_bert_classifier_head_free(h);
    est_vars_free(vs);
  }
  bert_fn_free(&m);

  /* TRAIN without dropout: the loss and every gradient */
  build(&m, dir, &cfg, EST_MODE_TRAIN, B, S);
  est_vars_zero_grads(m.vs);
  assert_int_equal(bert_fn_call(&m, ids.data, mask.data, segs.data, labels.data, B, 0), EST_OK);
  snprintf(what, sizeof what, "%s loss", name);
  assert_close(what, &m.spec.loss, loss.data, 1, 1e-5);
  size_t checked = 0, head = 0;
  for (size_t i = 0; i < est_safetensors_count(g); i++) {
    const char *gname = est_safetensors_name(g, i);
    if (strncmp(gname, "grad.", 5)) continue;
    char tf[EST_VAR_NAME_MAX];
    int transpose = 0;
    if (!est_hf_family_name_to_tf(cfg.opt.family, gname + 5, tf, sizeof tf, &transpose))
      fail_msg("%s: no est name for %s", name, gname + 5);
    int v = est_vars_find(m.vs, tf);
    if (v < 0) fail_msg("%s: %s maps to %s, which est does not declare", name, gname + 5, tf);
    const est_variable *var = est_vars_at(m.vs, (size_t)v);
    est_tensor want = read_golden(g, gname);
    assert_int_equal((size_t)est_tensor_num_elements(&want), var->count);
    const float *gr = est_vars_grad(m.vs, (size_t)v);
    float *got = malloc(var->count * sizeof(float));
    if (transpose) { /* est's kernel [in,out] -> torch's weight [out,in] */
      const int64_t I = var->dims[0], O = var->dims[1];
      for (int64_t o = 0; o < O; o++)
        for (int64_t k = 0; k < I; k++) got[o * I + k] = gr[k * O + o];
    } else {
      memcpy(got, gr, var->count * sizeof(float));
    }
    snprintf(what, sizeof what, "%s d %s", name, gname + 5);
    assert_close(what, got, want.data, var->count, 1e-4);
    free(got);
    est_tensor_free(&want);
    checked++;
    head += strncmp(tf, "bert/", 5) != 0;
  }
  assert_int_equal(head, head_tensors);
  if (checked < min_grads) fail_msg("%s: %zu gradients checked, expected %zu", name, checked, min_grads);
  bert_fn_free(&m);
  est_tensor_free(&ids), est_tensor_free(&mask), est_tensor_free(&segs);
  est_tensor_free(&labels), est_tensor_free(&logits), est_tensor_free(&loss);
  est_safetensors_close(g);
}

static void test_roberta(void **state) {
  (void)state;
  check_classifier("roberta_cls", EST_CLASSIFIER_DENSE_TANH, 4, 30);
}
static void test_xlm_roberta(void **state) {
  (void)state;
  check_classifier("xlm_roberta_cls", EST_CLASSIFIER_DENSE_TANH, 4, 30);
}
static void test_distilbert(void **state) {
  (void)state;
  check_classifier("distilbert_cls", EST_CLASSIFIER_DENSE_RELU, 4, 30);
}
static void test_electra(void **state) {
  (void)state;
  check_classifier("electra_cls", EST_CLASSIFIER_DENSE_GELU, 4, 30);
}
/* ModernBertForSequenceClassification (tests/reference/modernbert_golden.py, transformers
 * 4.48.3): head = dense -> GELU -> LayerNorm on the cls token, without biases (dense kernel,
 * norm gamma, classifier weight and bias), and on the mean of the unpadded tokens with every
 * bias (6 head tensors). */
static void test_modernbert_cls(void **state) {
  (void)state;
  check_classifier("modernbert_cls", EST_CLASSIFIER_MODERNBERT, 4, 24);
}
static void test_modernbert_mean_pooling(void **state) {
  (void)state;
  check_classifier("modernbert_cls_mean", EST_CLASSIFIER_MODERNBERT, 6, 42);
}

/* The head's dropout comes from config.json: classifier_dropout, else hidden_dropout_prob;
 * DistilBERT's seq_classif_dropout (0.2 when absent); out of range is named. */
static void test_classifier_dropout_from_config(void **state) {
  (void)state;
  est_bert_config c;
  assert_int_equal(est_bert_config_from_json_file(&c, ENC_DIR "/roberta_cls"), EST_OK);
  assert_true(c.opt.classifier_dropout == 0.0);
  assert_int_equal(est_bert_config_from_json_file(&c, ENC_DIR "/roberta"), EST_OK);
  assert_true(c.opt.classifier_dropout == c.hidden_dropout_prob); /* "classifier_dropout": null */
  const char *d = "{\"model_type\": \"distilbert\", \"vocab_size\": 9, \"dim\": 8, \"n_heads\": 2}";
  assert_int_equal(est_bert_config_from_json_string(&c, d, "d.json"), EST_OK);
  assert_true(c.opt.classifier_dropout == 0.2);
  const char *bad = "{\"model_type\": \"roberta\", \"vocab_size\": 9, \"classifier_dropout\": 1.5}";
  assert_int_equal(est_bert_config_from_json_string(&c, bad, "r.json"), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "r.json: the classifier dropout must be in [0, 1), got 1.5"));
  /* est's own bert_config.json (exports) keeps it, checked the same way */
  const char *own = "{\"vocab_size\": 9, \"encoder_options\": {\"family\": \"roberta\", "
                    "\"classifier_dropout\": -0.5}}";
  assert_int_equal(est_bert_config_from_json_string(&c, own, "own.json"), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "own.json: field \"encoder_options.classifier_dropout\" = -0.5"));
}

/* run_classifier from each family's directory (--bert_config_file = --init_checkpoint = DIR,
 * its WordPiece vocab.txt) on glue_mini's SST-2: train, eval and predict, the head's dense layer
 * loaded from the directory (its 3-label output layer is another shape for SST-2's 2 labels:
 * fresh); then --do_export and `est predict` of the export answer the test example with
 * run_classifier's probabilities. */
static void check_cli(const char *name) {
  char dir[512], flags[2048];
  snprintf(dir, sizeof dir, ENC_DIR "/%s", name);
  snprintf(flags, sizeof flags, "--task_name=sst-2 --data_dir=" EST_TEST_DATA "/glue_mini/SST-2 "
           "--vocab_file=%s/vocab.txt --bert_config_file=%s --init_checkpoint=%s --max_seq_length=32 "
           "--num_threads=1 --output_dir=%s", dir, dir, dir, test_tmp_path(name));
  char *log = test_run_ok(EST_BIN " run_classifier %s --do_train --do_eval --do_predict --train_batch_size=4 "
                          "--num_train_epochs=1 --do_export 2>&1", flags);
  if (!strstr(log, "Initialized ") || !strstr(log, "eval_accuracy = ")) fail_msg("%s: %s", name, log);
  free(log);
  char results[1024];
  snprintf(results, sizeof results, "%s/test_results.tsv", test_tmp_path(name));
  char *want = test_run_ok("cat '%s'", results);
  char *got = NULL;
  if (test_run(&got, 0, "tail -n +2 " EST_TEST_DATA "/glue_mini/SST-2/test.tsv | cut -f2 | " EST_BIN
               " predict --export_dir=%s/export --num_threads=1", test_tmp_path(name)))
    fail_msg("%s: est predict failed: %s", name, got);
  float w[2], g[2];
  if (sscanf(want, "%f\t%f", &w[0], &w[1]) != 2 || sscanf(got, "%f\t%f", &g[0], &g[1]) != 2)
    fail_msg("%s: run_classifier's %s vs est predict's %s", name, want, got);
  for (int i = 0; i < 2; i++)
    if (fabsf(w[i] - g[i]) > 1e-5f) fail_msg("%s: run_classifier's %s vs est predict's %s", name, want, got);
  free(got);

  /* --export_format=hf: the family's class (config.json's architectures as the source
   * directory's), read back by est as any HF directory gives run_classifier's probabilities */
  char hf[1024], again[1024];
  snprintf(hf, sizeof hf, "%s/hf", test_tmp_path(name));
  free(test_run_ok(EST_BIN " run_classifier %s --do_export --export_format=hf 2>&1", flags));
  char *arch = test_run_ok("grep -A1 '\"architectures\"' %s/config.json | tail -1", dir);
  char *arch_out = test_run_ok("grep -A1 '\"architectures\"' %s/config.json | tail -1", hf);
  if (strcmp(arch, arch_out)) fail_msg("%s: exported %s, want %s", name, arch_out, arch);
  free(arch);
  free(arch_out);
  snprintf(again, sizeof again, "%s_again", test_tmp_path(name));
  free(test_run_ok(EST_BIN " run_classifier --task_name=sst-2 --data_dir=" EST_TEST_DATA "/glue_mini/SST-2 "
                   "--vocab_file=%s/vocab.txt --bert_config_file=%s --init_checkpoint=%s --max_seq_length=32 "
                   "--num_threads=1 --output_dir=%s --do_predict 2>&1", hf, hf, hf, again));
  got = test_run_ok("cat '%s/test_results.tsv'", again);
  if (sscanf(got, "%f\t%f", &g[0], &g[1]) != 2) fail_msg("%s: %s", name, got);
  for (int i = 0; i < 2; i++)
    if (fabsf(w[i] - g[i]) > 1e-6f) fail_msg("%s: run_classifier's %s vs from its HF export %s", name, want, got);
  free(want);
  free(got);
}

/* The loaded head: the log counts the directory's variables est took. */
static void check_loaded(const char *name, int want_loaded) {
  char dir[512];
  snprintf(dir, sizeof dir, ENC_DIR "/%s", name);
  char *log = test_run_ok(EST_BIN " run_classifier --task_name=sst-2 --data_dir=" EST_TEST_DATA "/glue_mini/SST-2 "
                          "--vocab_file=%s/vocab.txt --bert_config_file=%s --init_checkpoint=%s --max_seq_length=32 "
                          "--num_threads=1 --output_dir=%s --do_eval 2>&1", dir, dir, dir, test_tmp_path("loaded"));
  char line[128];
  snprintf(line, sizeof line, "Initialized %d of ", want_loaded);
  if (!strstr(log, line)) fail_msg("%s: want \"%s\" in:\n%s", name, line, log);
  free(log);
  test_remove_tree(test_tmp_path("loaded"));
}

static void test_cli_each_family(void **state) {
  (void)state;
  const char *names[] = {"roberta_cls", "xlm_roberta_cls", "distilbert_cls", "electra_cls", "modernbert_cls",
                         "modernbert_cls_mean"};
  for (size_t i = 0; i < 6; i++) check_cli(names[i]);
  /* RoBERTa: 5 embedding tensors + 16 per layer x 2 + classifier/dense (2), no pooler; the
   * output layer [3,H] does not fit SST-2's 2 labels */
  check_loaded("roberta_cls", 39);
}

/* *ForQuestionAnswering (qa_outputs on every position: est's span head, BERT's maths) of
 * three name tables: start and end logits within 1e-5, the loss and every gradient within
 * 1e-4, through the model_fn with the squad head and --init_checkpoint=DIR. */
static void check_qa(const char *name) {
  char dir[512], path[600], what[256];
  snprintf(dir, sizeof dir, ENC_DIR "/%s", name);
  snprintf(path, sizeof path, "%s/golden.safetensors", dir);
  est_safetensors *g;
  assert_int_equal(est_safetensors_open(&g, path), EST_OK);
  est_tensor t[7];
  const char *names[7] = {"input_ids", "input_mask", "segment_ids", "start_positions", "end_positions",
                          "start_logits", "end_logits"};
  for (int i = 0; i < 7; i++) t[i] = read_golden(g, names[i]);
  est_tensor loss = read_golden(g, "loss");
  const int B = (int)t[0].dims[0], S = (int)t[0].dims[1];
  int32_t unique_ids[2] = {1000, 1001};
  est_bert_config cfg;
  if (est_bert_config_from_json_file(&cfg, dir) != EST_OK) fail_msg("%s: %s", dir, est_error_message());
  for (int mode = 0; mode < 2; mode++) { /* PREDICT, then TRAIN */
    est_bert_model_params params = {.bert_config = cfg, .head = &est_bert_squad_head_type, .max_seq_length = S,
                                    .learning_rate = 1e-3, .num_train_steps = 10, .no_dropout = 1,
                                    .init_checkpoint = dir, .precision = EST_PRECISION_FP32};
    est_model_fn fn = est_bert_model_fn(&params);
    const est_mode m = mode ? EST_MODE_TRAIN : EST_MODE_PREDICT;
    est_var_store *vs;
    void *model = NULL;
    assert_int_equal(est_vars_create(&vs), EST_OK);
    const est_model_context ctx = {.mode = m, .batch_size = B, .seed = 1, .params = &params};
    if (fn.build(&ctx, vs, &model) != EST_OK || est_vars_finalize(vs, 1) != EST_OK || fn.init(model, vs) != EST_OK)
      fail_msg("%s: %s", name, est_error_message());
    est_tensor uid = {.dtype = EST_DT_INT32, .rank = 1, .dims = {B}, .data = unique_ids};
    const char *fnames[5] = {"input_ids", "input_mask", "segment_ids", mode ? "start_positions" : "unique_ids",
                             "end_positions"};
    est_tensor ft[5] = {t[0], t[1], t[2], mode ? t[3] : uid, t[4]};
    est_features f = {.batch_size = B, .count = mode ? 5 : 4, .names = fnames, .tensors = ft};
    est_estimator_spec spec;
    memset(&spec, 0, sizeof spec);
    est_vars_zero_grads(vs);
    if (fn.call(model, vs, &f, m, 0, &spec) != EST_OK) fail_msg("%s: %s", name, est_error_message());
    if (!mode) {
      int compared = 0;
      for (size_t i = 0; i < spec.num_predictions; i++)
        for (int k = 5; k < 7; k++)
          if (!strcmp(spec.prediction_names[i], names[k])) {
            snprintf(what, sizeof what, "%s %s", name, names[k]);
            assert_close(what, spec.predictions[i].data, t[k].data, (size_t)B * S, 1e-5);
            compared++;
          }
      assert_int_equal(compared, 2);
    } else {
      snprintf(what, sizeof what, "%s loss", name);
      assert_close(what, &spec.loss, loss.data, 1, 1e-5);
      size_t checked = 0, head = 0;
      for (size_t i = 0; i < est_safetensors_count(g); i++) {
        const char *gname = est_safetensors_name(g, i);
        if (strncmp(gname, "grad.", 5)) continue;
        char tf[EST_VAR_NAME_MAX];
        int transpose = 0;
        if (!est_hf_family_name_to_tf(cfg.opt.family, gname + 5, tf, sizeof tf, &transpose))
          fail_msg("%s: no est name for %s", name, gname + 5);
        int v = est_vars_find(vs, tf);
        if (v < 0) fail_msg("%s: %s maps to %s, which est does not declare", name, gname + 5, tf);
        const est_variable *var = est_vars_at(vs, (size_t)v);
        est_tensor want = read_golden(g, gname);
        assert_int_equal((size_t)est_tensor_num_elements(&want), var->count);
        const float *gr = est_vars_grad(vs, (size_t)v);
        float *got = malloc(var->count * sizeof(float));
        if (transpose) {
          const int64_t I = var->dims[0], O = var->dims[1];
          for (int64_t o = 0; o < O; o++)
            for (int64_t k = 0; k < I; k++) got[o * I + k] = gr[k * O + o];
        } else {
          memcpy(got, gr, var->count * sizeof(float));
        }
        snprintf(what, sizeof what, "%s d %s", name, gname + 5);
        assert_close(what, got, want.data, var->count, 1e-4);
        free(got);
        est_tensor_free(&want);
        checked++;
        head += !strncmp(tf, "cls/squad/", 10);
      }
      assert_int_equal(head, 2);
      assert_true(checked >= 20);
    }
    fn.destroy(model);
    est_vars_free(vs);
  }
  for (int i = 0; i < 7; i++) est_tensor_free(&t[i]);
  est_tensor_free(&loss);
  est_safetensors_close(g);
}

static void test_question_answering(void **state) {
  (void)state;
  check_qa("roberta_qa");
  check_qa("distilbert_qa");
  check_qa("electra_qa");
}

/* run_squad from each *ForQuestionAnswering directory: its head loads (every variable but the
 * pooler those classes lack), trains, predicts, exports; `est ckpt export_hf` of the trained
 * checkpoint writes the family's class, and run_squad from that directory predicts the same
 * nbest_predictions.json byte for byte. */
static void test_run_squad_each_family(void **state) {
  (void)state;
  const char *names[] = {"roberta_qa", "distilbert_qa", "electra_qa"};
  const char *classes[] = {"RobertaForQuestionAnswering", "DistilBertForQuestionAnswering",
                           "ElectraForQuestionAnswering"};
  const char *squad = " --do_predict --predict_file=" EST_TEST_DATA "/squad/edge_v1.json --max_seq_length=32"
                      " --doc_stride=16 --max_query_length=8 --num_threads=1";
  for (size_t i = 0; i < 3; i++) {
    char dir[512], run[1024], hf[1040], again[1040];
    snprintf(dir, sizeof dir, ENC_DIR "/%s", names[i]);
    snprintf(run, sizeof run, "%s", test_tmp_path(names[i]));
    snprintf(hf, sizeof hf, "%s-hf", run);
    snprintf(again, sizeof again, "%s-again", run);
    est_bert_config cfg;
    assert_int_equal(est_bert_config_from_json_file(&cfg, dir), EST_OK);
    char *log = test_run_ok(EST_BIN " run_squad --vocab_file=%s/vocab.txt --bert_config_file=%s --init_checkpoint=%s"
                            " --do_train --train_file=" EST_TEST_DATA "/squad/edge_v1.json --train_batch_size=2"
                            " --num_train_epochs=1 --do_export --output_dir=%s%s 2>&1", dir, dir, dir, run, squad);
    /* 5 embedding tensors (+2 for ELECTRA's projection, -1 for DistilBERT's types) + 16 per
     * layer + qa_outputs (2) of the variables, all but the pooler's 2 */
    const int vars = 5 + (cfg.opt.embedding_size ? 2 : 0) - (cfg.opt.token_types == EST_TYPES_NONE) + 16 + 2 + 2;
    char line[128];
    snprintf(line, sizeof line, "Initialized %d of %d variables", vars - 2, vars);
    if (!strstr(log, line)) fail_msg("%s: want \"%s\" in:\n%s", names[i], line, log);
    free(log);
    free(test_run_ok(EST_BIN " ckpt export_hf %s/model.ckpt-8 %s --bert_config_file=%s --vocab_file=%s/vocab.txt 2>&1",
                     run, hf, dir, dir));
    char *arch = test_run_ok("grep -A1 '\"architectures\"' %s/config.json | tail -1", hf);
    if (!strstr(arch, classes[i])) fail_msg("%s: exported %s", names[i], arch);
    free(arch);
    free(test_run_ok(EST_BIN " run_squad --vocab_file=%s/vocab.txt --bert_config_file=%s --init_checkpoint=%s"
                     " --output_dir=%s%s 2>&1", hf, hf, hf, again, squad));
    free(test_run_ok("cmp %s/nbest_predictions.json %s/nbest_predictions.json", run, again));
  }
}

/* --export_format=hf writes a family's class only for what that class computes: est's own
 * bert_config.json may combine options no transformers class has, and those are named. */
static void test_hf_export_refuses_other_maths(void **state) {
  (void)state;
  est_bert_config c;
  assert_int_equal(est_bert_config_from_json_file(&c, ENC_DIR "/roberta_cls"), EST_OK);
  c.opt.position_ids = EST_POS_IDS_INDEX;
  est_hf_export_params p = {.cfg = &c, .vocab_file = ENC_DIR "/roberta_cls/vocab.txt"};
  assert_int_equal(est_hf_export("/nonexistent/model.ckpt-1", "/nonexistent/hf", &p), EST_ERR_UNIMPLEMENTED);
  assert_non_null(strstr(est_error_message(), "this \"roberta\" model differs from transformers' in its position ids"));
  assert_int_equal(est_bert_config_from_json_file(&c, ENC_DIR "/distilbert_cls"), EST_OK);
  c.opt.embedding_size = 13;
  assert_int_equal(est_hf_export("/nonexistent/model.ckpt-1", "/nonexistent/hf", &p), EST_ERR_UNIMPLEMENTED);
  assert_non_null(strstr(est_error_message(), "an embedding projection"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_roberta),
      cmocka_unit_test(test_xlm_roberta),
      cmocka_unit_test(test_distilbert),
      cmocka_unit_test(test_electra),
      cmocka_unit_test(test_modernbert_cls),
      cmocka_unit_test(test_modernbert_mean_pooling),
      cmocka_unit_test(test_classifier_dropout_from_config),
      cmocka_unit_test(test_question_answering),
      cmocka_unit_test(test_hf_export_refuses_other_maths),
      cmocka_unit_test_setup_teardown(test_cli_each_family, test_tmpdir_setup, test_tmpdir_teardown),
      cmocka_unit_test_setup_teardown(test_run_squad_each_family, test_tmpdir_setup, test_tmpdir_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
