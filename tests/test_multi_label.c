/* Multi-label classification (run_classifier --multi_label, docs/run_classifier.md §12):
 *   - est_multi_label_evaluate against scikit-learn 1.6.1 (tests/data/multi_label/
 *     sklearn_golden.txt, tests/reference/multi_label_golden.py): every number equal;
 *   - the classifier head's BCE loss and logits against torch's BCEWithLogitsLoss through a
 *     random BertForSequenceClassification with problem_type multi_label_classification
 *     (tests/data/hf/cls_multi);
 *   - the loss's gradients by central differences, dropout off and on;
 *   - est run_classifier --multi_label end to end: eval_results.txt's keys, test_results.tsv,
 *     the export (est_model.json's and config.json's problem_type), est predict's label form,
 *     an HF config's problem_type turning it on, and the errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/est.h"
#include "test_util.h"

#define ML EST_TEST_DATA "/multi_label"
#define CLS_MULTI EST_TEST_DATA "/hf/cls_multi"
#define SMALL_CONFIG EST_TEST_DATA "/run_classifier/bert_config_h32.json"
#define UNCASED EST_TEST_DATA "/vocab_uncased.txt"

/* ---- scikit-learn's numbers ---- */

static double golden_value(char *para, const char *key) {
  char pat[96];
  snprintf(pat, sizeof pat, "\n%.80s ", key);
  const char *at = strstr(para, pat);
  if (!at) fail_msg("golden lacks %s", key);
  return strtod(at + strlen(pat), NULL);
}

static void test_sklearn_golden(void **state) {
  (void)state;
  char *text = test_read_file(ML "/sklearn_golden.txt", NULL);
  int cases = 0;
  for (char *para = strstr(text, "case "); para; cases++) {
    char *next = strstr(para + 1, "\ncase ");
    if (next) *next = 0;
    size_t n, C;
    assert_int_equal(sscanf(para, "case %zu %zu", &n, &C), 2);
    int32_t *gold = malloc(n * C * sizeof *gold);
    float *probs = malloc(n * C * sizeof *probs);
    char *p = strstr(para, "\ngold ") + 6;
    for (size_t i = 0; i < n * C; i++) gold[i] = (int32_t)strtol(p, &p, 10);
    p = strstr(para, "\nprobs ") + 7;
    for (size_t i = 0; i < n * C; i++) probs[i] = strtof(p, &p);
    est_multi_label_report r;
    assert_int_equal(est_multi_label_evaluate(&r, gold, probs, n, C, 0.5), EST_OK);
    const struct {
      const char *key;
      double v;
    } all[] = {{"exact_match", r.exact_match},         {"micro_precision", r.micro_precision},
               {"micro_recall", r.micro_recall},       {"micro_f1", r.micro_f1},
               {"macro_precision", r.macro_precision}, {"macro_recall", r.macro_recall},
               {"macro_f1", r.macro_f1}};
    for (size_t k = 0; k < sizeof all / sizeof *all; k++)
      if (all[k].v != golden_value(para, all[k].key))
        fail_msg("case %d: %s %.17g, sklearn %.17g", cases, all[k].key, all[k].v, golden_value(para, all[k].key));
    for (size_t c = 0; c < C; c++) {
      char key[64];
      const double v[4] = {r.labels[c].precision, r.labels[c].recall, r.labels[c].f1, (double)r.labels[c].support};
      const char *names[4] = {"precision", "recall", "f1", "support"};
      for (int k = 0; k < 4; k++) {
        snprintf(key, sizeof key, "%s_%zu", names[k], c);
        if (v[k] != golden_value(para, key))
          fail_msg("case %d: %s %.17g, sklearn %.17g", cases, key, v[k], golden_value(para, key));
      }
    }
    est_multi_label_report_free(&r);
    free(gold), free(probs);
    para = next ? next + 1 : NULL;
  }
  assert_int_equal(cases, 6);
  free(text);
}

/* ---- the head ---- */

typedef struct fixture {
  est_bert_config cfg;
  est_var_store *vs;
  est_bert_encoder *enc;
  void *head;
  int B, S, C;
  int32_t ids[24], mask[24], segs[24], hot[12];
  est_tensor tensors[4];
  const char *names[4];
  est_features features;
  est_bert_classifier_head_params params;
} fixture;

/* A classifier head with multi_label on an encoder: cls_multi's (its weights) or a tiny random
 * one (dropout as given). */
static void fixture_open(fixture *f, int hf, double dropout) {
  memset(f, 0, sizeof *f);
  f->B = 3, f->S = 8, f->C = 4;
  if (hf) {
    assert_int_equal(est_bert_config_from_json_file(&f->cfg, CLS_MULTI), EST_OK);
  } else {
    f->cfg = est_bert_config_default();
    f->cfg.vocab_size = 40, f->cfg.hidden_size = 8, f->cfg.num_hidden_layers = 1, f->cfg.num_attention_heads = 2;
    f->cfg.intermediate_size = 16, f->cfg.max_position_embeddings = 16, f->cfg.type_vocab_size = 2;
    f->cfg.hidden_dropout_prob = dropout, f->cfg.attention_probs_dropout_prob = 0.0;
  }
  f->params = (est_bert_classifier_head_params){.num_labels = f->C, .multi_label = 1};
  assert_int_equal(est_vars_create(&f->vs), EST_OK);
  assert_int_equal(est_bert_encoder_create(&f->enc, &f->cfg, f->vs), EST_OK);
  const est_bert_head_context ctx = {.mode = EST_MODE_TRAIN, .max_batch = f->B, .max_seq_length = f->S,
                                     .encoder = f->enc, .vars = f->vs, .params = &f->params};
  assert_int_equal(est_bert_classifier_head_type.create(&f->head, &ctx), EST_OK);
  assert_int_equal(est_vars_finalize(f->vs, 5), EST_OK);
  if (hf) assert_int_equal(est_hf_load_vars(f->vs, CLS_MULTI, NULL), EST_OK);
  assert_int_equal(est_bert_encoder_reserve(f->enc, f->B, f->S, 1), EST_OK);
  assert_int_equal(est_bert_classifier_head_type.reserve(f->head, &ctx), EST_OK);
  const int32_t hot[12] = {1, 0, 1, 0, 0, 0, 0, 0, 1, 1, 1, 1};
  memcpy(f->hot, hot, sizeof hot);
  for (int i = 0; i < f->B * f->S; i++) f->ids[i] = 5 + (7 * i) % 30, f->mask[i] = i % f->S < 6 + i / f->S % 2;
  const char *names[4] = {"input_ids", "input_mask", "segment_ids", "label_ids"};
  int32_t *data[4] = {f->ids, f->mask, f->segs, f->hot};
  for (int k = 0; k < 4; k++) {
    f->names[k] = names[k];
    f->tensors[k] = (est_tensor){.dtype = EST_DT_INT32, .rank = 2, .dims = {f->B, k == 3 ? f->C : f->S},
                                 .data = data[k]};
  }
  f->features = (est_features){.batch_size = f->B, .count = 4, .names = f->names, .tensors = f->tensors};
}

static void fixture_close(fixture *f) {
  est_bert_classifier_head_type.free(f->head);
  est_bert_encoder_free(f->enc);
  est_vars_free(f->vs);
}

static float forward(fixture *f, int training) {
  assert_int_equal(est_bert_encoder_forward(f->enc, f->ids, f->mask, f->segs, f->B, f->S, training, 11, 3), EST_OK);
  const est_bert_head_batch b = {.mode = EST_MODE_TRAIN, .features = &f->features, .batch = f->B, .seq_len = f->S,
                                 .training = training, .seed = 11, .step = 3};
  float loss = NAN;
  if (est_bert_classifier_head_type.forward(f->head, &b, &loss) != EST_OK) fail_msg("%s", est_error_message());
  return loss;
}

static est_tensor golden(const char *name) {
  est_safetensors *st;
  assert_int_equal(est_safetensors_open(&st, CLS_MULTI "/golden.safetensors"), EST_OK);
  est_tensor t;
  assert_int_equal(est_safetensors_read(st, name, &t), EST_OK);
  est_safetensors_close(st);
  return t;
}

static void test_loss_against_torch(void **state) {
  (void)state;
  fixture f;
  fixture_open(&f, 1, 0.0);
  est_tensor ids = golden("input_ids"), mask = golden("input_mask"), segs = golden("segment_ids"),
             labels = golden("labels"), logits = golden("logits"), loss = golden("loss");
  memcpy(f.ids, ids.data, sizeof f.ids), memcpy(f.mask, mask.data, sizeof f.mask), memcpy(f.segs, segs.data, sizeof f.segs);
  for (int i = 0; i < 12; i++) f.hot[i] = (int32_t)((const float *)labels.data)[i];
  const float got = forward(&f, 0);
  const float want = ((const float *)loss.data)[0];
  if (!(fabsf(got - want) <= 1e-5f * fabsf(want) + 1e-6f)) fail_msg("loss %.9g, torch %.9g", got, want);
  /* the probabilities: sigmoid of torch's logits */
  const est_bert_head_batch b = {.mode = EST_MODE_PREDICT, .features = &f.features, .batch = 3, .seq_len = 8};
  est_estimator_spec spec = {0};
  assert_int_equal(est_bert_classifier_head_type.predictions(f.head, &b, &spec), EST_OK);
  const float *p = spec.predictions[0].data, *z = logits.data;
  for (int i = 0; i < 12; i++) {
    const double want_p = 1.0 / (1.0 + exp(-(double)z[i]));
    if (fabs(p[i] - want_p) > 1e-5) fail_msg("probability %d: %.9g, torch's sigmoid %.9g", i, p[i], want_p);
  }
  est_tensor_free(&ids), est_tensor_free(&mask), est_tensor_free(&segs), est_tensor_free(&labels);
  est_tensor_free(&logits), est_tensor_free(&loss);
  fixture_close(&f);
}

static size_t var_index(fixture *f, const char *name) {
  for (size_t i = 0; i < est_vars_count(f->vs); i++)
    if (!strcmp(est_vars_at(f->vs, i)->name, name)) return i;
  fail_msg("no variable %s", name);
  return 0;
}

static void gradcheck(int training) {
  fixture f;
  fixture_open(&f, 0, training ? 0.2 : 0.0);
  est_vars_zero_grads(f.vs);
  forward(&f, training);
  assert_int_equal(est_bert_classifier_head_type.backward(f.head), EST_OK);
  assert_int_equal(est_bert_encoder_backward(f.enc), EST_OK);
  const char *names[] = {"output_weights", "output_bias", "bert/pooler/dense/kernel",
                         "bert/encoder/layer_0/output/dense/bias"};
  for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
    const size_t idx = var_index(&f, names[k]);
    float *w = est_vars_value(f.vs, idx);
    const float *g = est_vars_grad(f.vs, idx);
    const size_t count = est_vars_at(f.vs, idx)->count;
    for (size_t j = 0; j < count; j += count > 40 ? count / 11 : 1) {
      const float h = 1e-2f, w0 = w[j];
      w[j] = w0 + h;
      const double up = forward(&f, training);
      w[j] = w0 - h;
      const double down = forward(&f, training);
      w[j] = w0;
      const double fd = (up - down) / (2.0 * h);
      if (!(fabs(fd - g[j]) <= 1e-3 + 2e-2 * fabs(fd)))
        fail_msg("%s[%zu] (dropout %d): backward %.6g, finite differences %.6g", names[k], j, training, g[j], fd);
    }
  }
  /* a label that is not 0 or 1 is named */
  f.hot[5] = 2;
  assert_int_equal(est_bert_encoder_forward(f.enc, f.ids, f.mask, f.segs, f.B, f.S, 0, 0, 0), EST_OK);
  const est_bert_head_batch b = {.mode = EST_MODE_TRAIN, .features = &f.features, .batch = f.B, .seq_len = f.S};
  float loss;
  assert_int_equal(est_bert_classifier_head_type.forward(f.head, &b, &loss), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "label_ids[1][1] = 2"));
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

/* ---- est run_classifier --multi_label ---- */

static double eval_value(const char *text, const char *key) {
  char pat[256];
  snprintf(pat, sizeof pat, "%s = ", key);
  for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
    if (!strncmp(p, pat, strlen(pat))) return strtod(p + strlen(pat), NULL);
  fail_msg("eval_results.txt has no %s:\n%s", key, text);
  return NAN;
}

static void test_run_classifier_multi_label(void **state) {
  (void)state;
  char out[600];
  snprintf(out, sizeof out, "%s/ml", test_tmpdir);
  free(test_run_ok(EST_BIN " run_classifier --task_name=tsv --multi_label --data_dir=" ML " --vocab_file=" UNCASED
                   " --bert_config_file=" SMALL_CONFIG " --output_dir=%s --do_train --do_eval --do_predict"
                   " --max_seq_length=16 --train_batch_size=8 --learning_rate=1e-3 --num_train_epochs=20"
                   " --num_threads=2",
                   out));
  char *text = test_read_in(out, "eval_results.txt");
  const char *keys[] = {"eval_accuracy", "eval_f1_micro", "eval_f1_macro", "eval_precision_micro", "eval_recall_macro",
                        "eval_sports_f1", "eval_politics_precision", "eval_tech_recall", "eval_tech_number", "eval_loss"};
  for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) eval_value(text, keys[i]);
  /* dev.tsv's labels: 9 sports, 7 politics, 7 tech; the model learned something */
  assert_true(eval_value(text, "eval_sports_number") == 9 && eval_value(text, "eval_tech_number") == 7);
  assert_true(eval_value(text, "eval_f1_micro") > 0.5);
  assert_true(eval_value(text, "eval_loss") < 0.6);
  free(text);
  /* test_results.tsv: 8 lines of 3 probabilities each (sigmoids: no sum to 1) */
  text = test_read_in(out, "test_results.tsv");
  int lines = 0;
  for (char *p = text; *p; p = strchr(p, '\n') + 1, lines++) {
    float a, b, c;
    assert_int_equal(sscanf(p, "%f\t%f\t%f\n", &a, &b, &c), 3);
    assert_true(a > 0 && a < 1 && b > 0 && b < 1 && c > 0 && c < 1);
  }
  assert_int_equal(lines, 8);
  free(text);
  /* the export: problem_type in est_model.json; est predict's label form lists labels */
  free(test_run_ok(EST_BIN " run_classifier --task_name=tsv --multi_label --data_dir=" ML " --vocab_file=" UNCASED
                   " --bert_config_file=" SMALL_CONFIG " --output_dir=%s --do_export --max_seq_length=16"
                   " --export_dir=%s/export", out, out));
  char *json = NULL;
  assert_int_equal(test_run(&json, 0, "cat %s/export/*/est_model.json", out), 0);
  assert_non_null(strstr(json, "\"problem_type\": \"multi_label_classification\""));
  free(json);
  char in[700];
  snprintf(in, sizeof in, "%s/in.txt", test_tmpdir);
  const char lines_in[] = "vote senate law\nthe a new\n";
  test_write_bytes(in, lines_in, strlen(lines_in));
  char *labels = NULL;
  assert_int_equal(test_run(&labels, 0, EST_BIN " predict --export_dir=%s/export --input_file=%s --output_format=label"
                            " 2>/dev/null", out, in), 0);
  /* each line: labels of {politics, sports, tech}, comma-separated, or empty */
  for (char *p = labels; *p; p = strchr(p, '\n') + 1) {
    char *end = strchr(p, '\n');
    assert_non_null(end);
    for (char *item = p; item < end;) {
      char *comma = memchr(item, ',', (size_t)(end - item));
      const size_t len = (size_t)((comma ? comma : end) - item);
      assert_true((len == 8 && !strncmp(item, "politics", 8)) || (len == 6 && !strncmp(item, "sports", 6)) ||
                  (len == 4 && !strncmp(item, "tech", 4)));
      item = comma ? comma + 1 : end;
    }
  }
  free(labels);
  /* HF: config.json's problem_type, which turns multi-label on when read back */
  char hf[700];
  snprintf(hf, sizeof hf, "%s/hf", out);
  free(test_run_ok(EST_BIN " run_classifier --task_name=tsv --multi_label --data_dir=" ML " --vocab_file=" UNCASED
                   " --bert_config_file=" SMALL_CONFIG " --output_dir=%s --do_export --export_format=hf"
                   " --export_dir=%s --max_seq_length=16", out, hf));
  char *config = test_read_in(hf, "config.json");
  assert_non_null(strstr(config, "\"problem_type\": \"multi_label_classification\""));
  free(config);
  char out2[700];
  snprintf(out2, sizeof out2, "%s/from_hf", test_tmpdir);
  free(test_run_ok(EST_BIN " run_classifier --task_name=tsv --data_dir=" ML " --init_checkpoint=%s"
                   " --bert_config_file=%s/config.json --vocab_file=%s --output_dir=%s --do_eval --max_seq_length=16"
                   " --num_threads=2", hf, hf, hf, out2));
  text = test_read_in(out2, "eval_results.txt");
  eval_value(text, "eval_f1_macro");
  free(text);
}

static void test_errors(void **state) {
  (void)state;
  char *log = NULL;
  /* a GLUE task has one label a row */
  assert_int_not_equal(test_run(&log, 1, EST_BIN " run_classifier --task_name=mrpc --multi_label --data_dir=" ML
                                " --vocab_file=" UNCASED " --bert_config_file=" SMALL_CONFIG
                                " --output_dir=%s/e1 --do_train", test_tmpdir), 0);
  assert_non_null(strstr(log, "--multi_label: task mrpc has one label a row"));
  free(log);
  /* a dev label train.tsv lacks, named with its file and line */
  char data[700], path[800];
  snprintf(data, sizeof data, "%s/bad", test_tmpdir);
  assert_int_equal(test_run(NULL, 0, "mkdir -p %s && cp " ML "/train.tsv " ML "/test.tsv %s/", data, data), 0);
  snprintf(path, sizeof path, "%s/dev.tsv", data);
  const char dev[] = "sentence\tlabels\nthe vote\tpolitics\nthe goal\tsports,weather\n";
  test_write_bytes(path, dev, strlen(dev));
  log = NULL;
  assert_int_not_equal(test_run(&log, 1, EST_BIN " run_classifier --task_name=tsv --multi_label --data_dir=%s"
                                " --vocab_file=" UNCASED " --bert_config_file=" SMALL_CONFIG
                                " --output_dir=%s/e2 --do_eval --max_seq_length=16", data, test_tmpdir), 0);
  if (!strstr(log, "dev.tsv:3: multi-label field 'sports,weather': label 'weather' is not one of the task's labels "
                   "(politics, sports, tech)"))
    fail_msg("%s", log);
  free(log);
  /* an empty label */
  const char dev2[] = "sentence\tlabels\nthe vote\tpolitics,,tech\n";
  test_write_bytes(path, dev2, strlen(dev2));
  log = NULL;
  assert_int_not_equal(test_run(&log, 1, EST_BIN " run_classifier --task_name=tsv --multi_label --data_dir=%s"
                                " --vocab_file=" UNCASED " --bert_config_file=" SMALL_CONFIG
                                " --output_dir=%s/e3 --do_eval --max_seq_length=16", data, test_tmpdir), 0);
  assert_non_null(strstr(log, "dev.tsv:2: multi-label field 'politics,,tech': an empty label"));
  free(log);
  /* est_model.json's problem_type: each of transformers' three names round-trips, anything
   * else is named */
  const est_problem_type types[3] = {EST_PROBLEM_SINGLE_LABEL, EST_PROBLEM_MULTI_LABEL, EST_PROBLEM_REGRESSION};
  for (int k = 0; k < 3; k++) {
    est_model_meta m = {0};
    assert_int_equal(est_bert_config_from_json_file(&m.bert_config, SMALL_CONFIG), EST_OK);
    m.max_seq_length = 8;
    snprintf(m.task, sizeof m.task, "t");
    snprintf(m.precision, sizeof m.precision, "fp32");
    static char *names[2] = {"x", "y"};
    m.labels = names, m.num_labels = 2;
    const est_model_classifier config = {.problem_type = types[k]};
    est_model_meta_set_head(&m, &est_served_classifier, &config);
    char *json = est_model_meta_to_json(&m);
    assert_true((strstr(json, "\"problem_type\"") != NULL) == (k > 0));
    est_model_meta back;
    if (est_model_meta_parse(&back, json, strlen(json), "m.json") != EST_OK) fail_msg("%s", est_error_message());
    assert_int_equal(((const est_model_classifier *)est_model_meta_head_config(&back))->problem_type, types[k]);
    est_model_meta_clear(&back);
    if (k == 1) {
      char *at = strstr(json, "multi_label_classification");
      memcpy(at, "multi_label_classifier", 22);
      assert_int_equal(est_model_meta_parse(&back, json, strlen(json), "m.json"), EST_ERR_INVALID_ARGUMENT);
      assert_non_null(strstr(est_error_message(), "m.json: \"problem_type\" must be"));
    }
    free(json);
  }
  int32_t hot[3];
  const char *const labels[3] = {"a", "b", "c"};
  assert_int_equal(est_multi_label_ids("", labels, 3, hot), EST_OK);
  assert_true(!hot[0] && !hot[1] && !hot[2]);
  assert_int_equal(est_multi_label_ids("c,a", labels, 3, hot), EST_OK);
  assert_true(hot[0] && !hot[1] && hot[2]);
  assert_int_equal(est_multi_label_ids("a,", labels, 3, hot), EST_ERR_INVALID_ARGUMENT);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_sklearn_golden),
    cmocka_unit_test(test_loss_against_torch),
    cmocka_unit_test(test_gradcheck_without_dropout),
    cmocka_unit_test(test_gradcheck_with_dropout),
    cmocka_unit_test(test_run_classifier_multi_label),
    cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
