/* Every JSON parse path that reads a request body or a user's file says what is wrong in the
 * input's terms (src/core/json_error.h). jansson reports a string holding \u0000 as
 * "\u0000 is not allowed without JSON_ALLOW_NUL", a flag of its API that nobody writing a
 * request or a config can set; est says the string holds the NUL character, with the file or
 * request and the place. Each parser is fed one such input: the request bodies (predict,
 * classify, answer, TEI and OpenAI embeddings), est_model.json, bert_config.json /
 * config.json, tokenizer.json, sentence-transformers' files, model.safetensors.index.json, a
 * safetensors header, a SQuAD file and squad_eval's predictions. The CLI's jsonl inputs
 * (est predict, its question-answering form) are checked in test_serving_export and
 * test_serve_qa. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "core/json_error.h"
#include "est/est.h"
#include "test_util.h"

#define NUL_WORDING "a string holds \\u0000 (the NUL character), which est does not accept in text"

/* st failed with NUL_WORDING after `where`, and without jansson's own words. */
static void expect_nul_error(est_status st, const char *where, const char *what) {
  if (st == EST_OK) fail_msg("%s: accepted a \\u0000", what);
  const char *m = est_error_message();
  if (strstr(m, "JSON_ALLOW_NUL")) fail_msg("%s: jansson's wording leaks: %s", what, m);
  if (!strstr(m, NUL_WORDING) || (where && !strstr(m, where))) fail_msg("%s: '%s' lacks '%s'", what, m, where);
}

/* The helper: the NUL cases in est's words, every other message as jansson wrote it. */
static void test_error_text(void **state) {
  (void)state;
  json_error_t err;
  assert_null(json_loads("{\"a\": \"x\\u0000y\"}", 0, &err));
  assert_string_equal(est_json_error_text(&err), NUL_WORDING " near '\"x\\u0000y\"'");
  assert_null(json_loads("{\"a\\u0000\": 1}", JSON_ALLOW_NUL, &err));
  assert_string_equal(est_json_error_text(&err), "an object key holds \\u0000 (the NUL character), which est does "
                                                 "not accept near '\"a\\u0000\"'");
  assert_null(json_loads("{\"a\": [1,}", 0, &err));
  assert_string_equal(est_json_error_text(&err), err.text);
  assert_null(json_loads("{\"a\": 1, \"a\": 2}", JSON_REJECT_DUPLICATES, &err));
  assert_string_equal(est_json_error_text(&err), err.text);
}

static void test_request_bodies(void **state) {
  (void)state;
  const est_request_limits limits = {.max_seq_length = 16, .vocab_size = 100, .type_vocab_size = 2};
  static const struct {
    est_request_kind kind;
    const est_served_head *head;
    const char *body;
  } bodies[] = {
    {EST_REQUEST_PREDICT, &est_served_classifier, "{\"instances\": [\"a\\u0000b\"]}"},
    {EST_REQUEST_CLASSIFY, &est_served_classifier, "{\"examples\": [{\"text_a\": \"\\u0000\"}]}"},
    {EST_REQUEST_PREDICT, &est_served_squad, "{\"instances\": [{\"question\": \"who?\", \"context\": \"x\\u0000\"}]}"},
  };
  for (size_t i = 0; i < sizeof bodies / sizeof *bodies; i++) {
    est_request r;
    expect_nul_error(est_request_parse(&r, bodies[i].kind, &bodies[i].head->inputs, bodies[i].body, strlen(bodies[i].body), &limits),
                     "JSON parse error at line 1, column", bodies[i].body);
    est_request_clear(&r);
  }
  static const struct {
    est_embed_api api;
    const char *body;
  } embeds[] = {
    {EST_EMBED_API_TEI, "{\"inputs\": [\"a\", \"\\u0000\"]}"},
    {EST_EMBED_API_OPENAI, "{\"input\": \"\\u0000\", \"model\": \"m\"}"},
  };
  for (size_t i = 0; i < sizeof embeds / sizeof *embeds; i++) {
    est_embed_request r;
    expect_nul_error(est_embed_request_parse(&r, embeds[i].api, embeds[i].body, strlen(embeds[i].body), &limits),
                     "JSON parse error at line 1, column", embeds[i].body);
    est_embed_request_clear(&r);
  }
}

/* A file of `text` at test_tmpdir/name; returns its path (a rotating buffer). */
static const char *file_of(const char *name, const char *text) {
  const char *path = test_tmp_path(name);
  test_write_bytes(path, text, strlen(text));
  return path;
}

static void test_model_files(void **state) {
  (void)state;
  char where[1200];
  /* est_model.json, from a file and from memory */
  est_model_meta m;
  const char *meta = "{\"head\": \"classifier\",\n \"task\": \"\\u0000\"}";
  const char *path = file_of("est_model.json", meta);
  snprintf(where, sizeof where, "%s:2:", path);
  expect_nul_error(est_model_meta_read(&m, path), where, "est_model.json");
  expect_nul_error(est_model_meta_parse(&m, meta, strlen(meta), "meta.json"), "meta.json:2:", "est_model.json");
  /* bert_config.json, and a HuggingFace config.json in its directory */
  est_bert_config cfg;
  const char *config = "{\"vocab_size\": 10,\n \"hidden_act\": \"gelu\\u0000\"}";
  expect_nul_error(est_bert_config_from_json_string(&cfg, config, "cfg.json"), "cfg.json:2:", "bert config");
  assert_int_equal(est_mkdirs(test_tmp_path("hf")), EST_OK);
  path = file_of("hf/config.json", config);
  snprintf(where, sizeof where, "%s:2:", path);
  expect_nul_error(est_bert_config_from_json_file(&cfg, test_tmp_path("hf")), where, "config.json");
  /* tokenizer.json */
  est_tokenizer *tok;
  path = file_of("tokenizer.json", "{\"model\": {\"type\": \"WordPiece\", \"unk_token\": \"[UNK\\u0000]\"}}");
  snprintf(where, sizeof where, "%s:1:", path);
  expect_nul_error(est_tokenizer_from_json(&tok, path), where, "tokenizer.json");
  /* model.safetensors.index.json */
  est_hf_checkpoint *h;
  path = file_of("hf/model.safetensors.index.json", "{\"weight_map\": {\"a\": \"model\\u0000.safetensors\"}}");
  snprintf(where, sizeof where, "%s:1:", path);
  expect_nul_error(est_hf_checkpoint_open(&h, path), where, "index.json");
  /* a safetensors header: 8 bytes of little-endian length, then the JSON */
  const char header[] = "{\"a\": {\"dtype\": \"F32\\u0000\", \"shape\": [1], \"data_offsets\": [0, 4]}}";
  const uint64_t n = sizeof header - 1;
  uint8_t bytes[8 + sizeof header + 4] = {0};
  for (int i = 0; i < 8; i++) bytes[i] = (uint8_t)(n >> (8 * i));
  memcpy(bytes + 8, header, n);
  path = test_tmp_path("bad.safetensors");
  test_write_bytes(path, bytes, 8 + n + 4);
  est_safetensors *st;
  expect_nul_error(est_safetensors_open(&st, path), "bad.safetensors", "safetensors header");
}

/* sentence-transformers' files beside the model's config. */
static void test_sentence_transformers_files(void **state) {
  (void)state;
  assert_int_equal(est_mkdirs(test_tmp_path("st/1_Pooling")), EST_OK);
  const char *pooling = file_of("st/1_Pooling/config.json", "{\"pooling_mode_mean_tokens\": \"\\u0000\"}");
  char where[1200];
  snprintf(where, sizeof where, "%s:1:", pooling);
  est_pooling_params p;
  int found;
  expect_nul_error(est_pooling_read_sentence_transformers(&p, test_tmp_path("st"), &found), where, "1_Pooling");
  file_of("st/1_Pooling/config.json", "{\"pooling_mode_mean_tokens\": true}");
  const char *modules = file_of("st/modules.json", "[{\"path\": \"\\u0000\", \"type\": \"Transformer\"}]");
  snprintf(where, sizeof where, "%s:1:", modules);
  expect_nul_error(est_pooling_read_sentence_transformers(&p, test_tmp_path("st"), &found), where, "modules.json");
  unlink(modules);
  /* sentence_bert_config.json, read by est embed's model */
  file_of("st/bert_config.json", "{\"vocab_size\": 30, \"hidden_size\": 4, \"num_hidden_layers\": 1, "
                                 "\"num_attention_heads\": 1, \"intermediate_size\": 8}");
  const char *sbert = file_of("st/sentence_bert_config.json", "{\"max_seq_length\": 8, \"x\": \"\\u0000\"}");
  snprintf(where, sizeof where, "%s:1:", sbert);
  char config[1200];
  snprintf(config, sizeof config, "%s", test_tmp_path("st/bert_config.json"));
  est_embed_model_options o = {.init_checkpoint = "unused", .bert_config_file = config,
                               .vocab_file = EST_TEST_DATA "/vocab_uncased.txt", .normalize = -1};
  est_model_meta meta;
  expect_nul_error(est_embed_model_meta(&meta, &o), where, "sentence_bert_config.json");
}

/* A SQuAD file and squad_eval's predictions. */
static void test_squad_files(void **state) {
  (void)state;
  const char *data = "{\"version\": \"1.1\", \"data\": [{\"title\": \"t\\u0000\", \"paragraphs\": []}]}";
  est_squad_examples *ex;
  expect_nul_error(est_squad_read_examples_buffer(data, strlen(data), "squad.json", false, false, &ex),
                   "squad.json:1:", "SQuAD file");
  const char *path = file_of("squad.json", data);
  char where[1200];
  snprintf(where, sizeof where, "%s:1:", path);
  expect_nul_error(est_squad_read_examples(path, false, false, &ex), where, "SQuAD file");

  est_squad_eval_config c = est_squad_eval_config_default();
  c.data_file = EST_TEST_DATA "/squad/eval_v2.json";
  c.pred_file = file_of("preds.json", "{\"q1\": \"an\\u0000swer\"}");
  snprintf(where, sizeof where, "%s:1:", c.pred_file);
  est_squad_eval_result r;
  expect_nul_error(est_squad_evaluate(&c, &r), where, "predictions file");
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_error_text),
    cmocka_unit_test(test_request_bodies),
    cmocka_unit_test(test_model_files),
    cmocka_unit_test(test_sentence_transformers_files),
    cmocka_unit_test(test_squad_files),
  };
  return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
