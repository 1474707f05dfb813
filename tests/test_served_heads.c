/* The table of served heads (est/served_head.h, src/bert/heads/served_heads.c):
 *   - every head of the table has what export, predict and serve call, a name that only it
 *     has, and round-trips its est_model.json fields (write, read, write: the same bytes);
 *   - est_model.json's bytes for each head, as every earlier export wrote them;
 *   - the table is the one place a head is looked up: no file outside src/bert/heads
 *     compares a head's name (a scan of src/ and tools/);
 *   - a head made up here, registered and nothing else (a sigmoid score on the pooled
 *     output, with its own inputs {"query", "document"}, its own est_model.json field and its
 *     own answer on the text form's batch), is exported, served (a :predict body,
 *     est_served_batch) and predicted (input lines) by the code est serve and est predict
 *     run. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/ckpt.h"
#include "est/sentence_embedding.h"
#include "est/serving.h"
#include "test_util.h"

#define KBT EST_TEST_DATA "/keras_bert_tiny"

static est_model_meta sample_meta(const est_served_head *head) {
  est_model_meta m = {0};
  m.bert_config = est_bert_config_default();
  m.bert_config.vocab_size = 30, m.bert_config.hidden_size = 8, m.bert_config.num_hidden_layers = 1;
  m.bert_config.num_attention_heads = 2, m.bert_config.intermediate_size = 16;
  m.bert_config.max_position_embeddings = 32;
  m.max_seq_length = 16;
  m.do_lower_case = true;
  snprintf(m.task, sizeof m.task, "t");
  snprintf(m.precision, sizeof m.precision, "fp32");
  est_model_meta_set_head(&m, head, NULL);
  if (head->labels) {
    static char *labels[2] = {"no", "yes"};
    m.labels = labels, m.num_labels = 2;
  }
  return m;
}

/* Settings of the heads with their own fields (a head of the table without a sample here
 * fails test_every_head_round_trips). */
static const void *sample_config(const est_served_head *head) {
  static const est_pooling_params pooling = {.modes = EST_POOLING_CLS | EST_POOLING_MEAN, .normalize = true};
  static const est_model_squad squad = {.doc_stride = 16, .max_query_length = 12, .n_best_size = 20,
                                        .max_answer_length = 30, .version_2_with_negative = true,
                                        .null_score_diff_threshold = -1.5};
  if (head == &est_served_pooling) return &pooling;
  static const est_model_token_classifier token_classifier = {.aggregation_strategy = EST_AGGREGATION_FIRST};
  static const est_model_classifier classifier = {.problem_type = EST_PROBLEM_SINGLE_LABEL};
  if (head == &est_served_classifier) return &classifier;
  if (head == &est_served_squad) return &squad;
  if (head == &est_served_token_classifier) return &token_classifier;
  return NULL;
}

static void test_every_head_round_trips(void **state) {
  (void)state;
  assert_true(est_served_head_count() >= 3);
  assert_ptr_equal(est_served_head_at(0), &est_served_classifier); /* the head of exports without "head" */
  for (size_t i = 0; i < est_served_head_count(); i++) {
    const est_served_head *h = est_served_head_at(i);
    /* what export, predict and serve call */
    assert_non_null(h->name);
    assert_ptr_equal(est_served_head_find(h->name), h);
    assert_non_null(h->type);
    assert_non_null(h->type->predictions);
    assert_non_null(h->params);
    assert_non_null(h->outputs[0]);
    assert_non_null(h->signature);
    assert_non_null(h->inputs.texts[0]);
    assert_true(h->batch_create && h->add_instance && h->rows && h->answer && h->write && h->batch_free);
    assert_true(h->add_line || h->no_predict);
    assert_true(h->config_size <= EST_MODEL_HEAD_CONFIG_SIZE);
    assert_true(!h->config_size == !h->read_config && !h->config_size == !h->write_config);
    /* est_model.json: write, read, write */
    est_model_meta m = sample_meta(h);
    if (h->config_size) {
      if (!sample_config(h)) fail_msg("the %s head has est_model.json fields: give it a sample here", h->name);
      est_model_meta_set_head(&m, h, sample_config(h));
    }
    char *a = est_model_meta_to_json(&m);
    assert_non_null(a);
    est_model_meta back;
    if (est_model_meta_parse(&back, a, strlen(a), "round-trip") != EST_OK) fail_msg("%s: %s", h->name, est_error_message());
    assert_ptr_equal(back.head, h);
    assert_int_equal(back.num_labels, m.num_labels);
    assert_memory_equal(back.head_config.bytes, m.head_config.bytes, h->config_size);
    char *b = est_model_meta_to_json(&back);
    assert_string_equal(a, b);
    /* the served floats per example */
    unsigned char params[EST_SERVED_PARAMS_SIZE];
    assert_true(h->params(params, &back) > 0);
    free(a), free(b);
    est_model_meta_clear(&back);
  }
  /* a head nobody serves, and the list that error gives */
  char names[256];
  assert_null(est_served_head_find("pretraining"));
  assert_null(est_served_head_find(NULL));
  assert_non_null(strstr(est_served_head_names(names, sizeof names), "classifier, pooling, squad"));
}

/* est_model.json as every export before the table wrote it: the head's own object beside
 * the fields every export has, keys sorted. */
static void test_est_model_json_bytes(void **state) {
  (void)state;
  static const char *const COMMON =
      "{\n  \"bert_config\": {\n    \"attention_probs_dropout_prob\": 0.10000000000000001,\n"
      "    \"hidden_act\": \"gelu\",\n    \"hidden_dropout_prob\": 0.10000000000000001,\n    \"hidden_size\": 8,\n"
      "    \"initializer_range\": 0.02,\n    \"intermediate_size\": 16,\n    \"max_position_embeddings\": 32,\n"
      "    \"num_attention_heads\": 2,\n    \"num_hidden_layers\": 1,\n    \"type_vocab_size\": 16,\n"
      "    \"vocab_size\": 30\n  },\n  \"do_lower_case\": true,\n";
  const struct {
    const est_served_head *head;
    const char *rest;
  } want[] = {
    {&est_served_classifier, "  \"head\": \"classifier\",\n  \"labels\": [\n    \"no\",\n    \"yes\"\n  ],\n"
                             "  \"max_seq_length\": 16,\n  \"precision\": \"fp32\",\n  \"task\": \"t\"\n}\n"},
    {&est_served_pooling, "  \"head\": \"pooling\",\n  \"labels\": [],\n  \"max_seq_length\": 16,\n  \"pooling\": {\n"
                          "    \"modes\": \"cls,mean\",\n    \"normalize\": true\n  },\n  \"precision\": \"fp32\",\n"
                          "  \"task\": \"t\"\n}\n"},
    {&est_served_squad, "  \"head\": \"squad\",\n  \"labels\": [],\n  \"max_seq_length\": 16,\n  \"precision\": \"fp32\",\n"
                        "  \"squad\": {\n    \"doc_stride\": 16,\n    \"max_answer_length\": 30,\n"
                        "    \"max_query_length\": 12,\n    \"n_best_size\": 20,\n"
                        "    \"null_score_diff_threshold\": -1.5,\n    \"version_2_with_negative\": true\n  },\n"
                        "  \"task\": \"t\"\n}\n"},
    {&est_served_token_classifier, "  \"head\": \"token_classifier\",\n  \"labels\": [\n    \"no\",\n    \"yes\"\n  ],\n"
                                   "  \"max_seq_length\": 16,\n  \"precision\": \"fp32\",\n  \"task\": \"t\",\n"
                                   "  \"token_classifier\": {\n    \"aggregation_strategy\": \"first\"\n  }\n}\n"},
  };
  for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
    est_model_meta m = sample_meta(want[i].head);
    est_model_meta_set_head(&m, want[i].head, sample_config(want[i].head));
    char *text = est_model_meta_to_json(&m), expected[2048];
    snprintf(expected, sizeof expected, "%s%s", COMMON, want[i].rest);
    assert_string_equal(text, expected);
    free(text);
  }
  /* no head at all: the classifier's, as exports written before heads were named are read */
  est_model_meta m = sample_meta(&est_served_classifier);
  m.head = NULL;
  char *text = est_model_meta_to_json(&m);
  assert_non_null(strstr(text, "\"head\": \"classifier\""));
  free(text);
}

/* No file of src/ or tools/ outside src/bert/heads compares a head's name: every strcmp
 * or "name" test on a head goes through the table. */
static void test_names_are_compared_in_the_table_only(void **state) {
  (void)state;
  char *out = NULL;
  /* strcmp / strncmp on a head (meta->head, head->name, a head type's .name, ...) */
  int rc = test_run(&out, 0, "grep -rnE 'str(n)?cmp\\([^;]*(->head|head->name|head\\.name|head_type|HEADS)' "
                    EST_SOURCE_DIR "/src " EST_SOURCE_DIR
                    "/tools | grep -v '^" EST_SOURCE_DIR "/src/bert/heads/'");
  if (rc == 0 && out && *out) fail_msg("a head's name compared outside the table:\n%s", out);
  free(out);
  /* a head's name as a string literal in code, e.g. !strcmp(x, "squad") */
  for (size_t i = 0; i < est_served_head_count(); i++) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "grep -rnE 'cmp\\([^;]*\"%s\"' " EST_SOURCE_DIR "/src " EST_SOURCE_DIR "/tools | grep -v '^" EST_SOURCE_DIR
             "/src/bert/heads/'",
             est_served_head_at(i)->name);
    rc = test_run(&out, 0, "%s", cmd);
    if (rc == 0 && out && *out) fail_msg("\"%s\" compared outside its head:\n%s", est_served_head_at(i)->name, out);
    free(out);
  }
}

/* ---- a head of this test's own ------------------------------------------------------------ */

/* scores [B, 1] = sigmoid(pooled . scorer/kernel + scorer/bias) */
typedef struct scorer {
  est_bert_encoder *enc;
  est_var_store *vs;
  int H, w, b;
  float *scores;
  est_tensor out;
} scorer;

static const char *const SCORER_OUTPUTS[] = {"scores"};

static est_status scorer_create(void **out, const est_bert_head_context *ctx) {
  scorer *h = calloc(1, sizeof *h);
  if (!h) return est_error(EST_ERR_NO_MEMORY, "scorer");
  *out = h;
  h->enc = ctx->encoder, h->vs = ctx->vars;
  h->H = est_bert_encoder_config(ctx->encoder)->hidden_size;
  const int64_t wd[2] = {h->H, 1}, bd[1] = {1};
  est_status st = est_vars_declare(h->vs, "scorer/kernel", 2, wd, est_init_truncated_normal(0.5f), &h->w);
  return st == EST_OK ? est_vars_declare(h->vs, "scorer/bias", 1, bd, est_init_zeros(), &h->b) : st;
}

static est_status scorer_reserve(void *head, const est_bert_head_context *ctx) {
  scorer *h = head;
  free(h->scores);
  h->scores = malloc((size_t)ctx->max_batch * sizeof(float));
  return h->scores ? EST_OK : est_error(EST_ERR_NO_MEMORY, "scorer");
}

static est_status scorer_forward(void *head, const est_bert_head_batch *b, float *loss) {
  scorer *h = head;
  if (loss) return est_error(EST_ERR_INVALID_ARGUMENT, "the scorer only predicts");
  const float *pooled = est_bert_encoder_pooled_output(h->enc), *w = est_vars_value(h->vs, (size_t)h->w);
  for (int r = 0; r < b->batch; r++) {
    double z = est_vars_value(h->vs, (size_t)h->b)[0];
    for (int k = 0; k < h->H; k++) z += (double)pooled[(size_t)r * h->H + k] * w[k];
    h->scores[r] = (float)(1 / (1 + exp(-z)));
  }
  return EST_OK;
}

static est_status scorer_predictions(void *head, const est_bert_head_batch *b, est_estimator_spec *spec) {
  scorer *h = head;
  h->out = (est_tensor){.dtype = EST_DT_FLOAT, .rank = 2, .dims = {b->batch, 1}, .data = h->scores};
  spec->num_predictions = 1, spec->prediction_names = SCORER_OUTPUTS, spec->predictions = &h->out;
  return EST_OK;
}

static void scorer_free(void *head) {
  scorer *h = head;
  if (h) free(h->scores);
  free(h);
}

static const est_bert_head_type scorer_type = {.name = "scorer", .create = scorer_create, .reserve = scorer_reserve,
                                               .forward = scorer_forward, .predictions = scorer_predictions,
                                               .free = scorer_free};

/* est_model.json's "scorer": {"threshold": x} */
typedef struct scorer_config {
  double threshold;
} scorer_config;

static est_status scorer_read(void *config, const json_t *root, const char *path) {
  const json_t *t = json_object_get(json_object_get(root, "scorer"), "threshold");
  if (!json_is_number(t)) return est_error(EST_ERR_INVALID_ARGUMENT, "%s: \"scorer\".\"threshold\" must be a number", path);
  ((scorer_config *)config)->threshold = json_number_value(t);
  return EST_OK;
}

static est_status scorer_write(const void *config, json_t *root) {
  json_object_set_new(root, "scorer", json_pack("{s:f}", "threshold", ((const scorer_config *)config)->threshold));
  return EST_OK;
}

static int scorer_params(void *params, const est_model_meta *meta) {
  (void)params, (void)meta;
  return 1;
}

/* Its own answer on the text form's batch: {"score": s, "tokens": n} (:predict), the score
 * alone (est predict's line). */
static void scorer_answer(const void *batch, size_t i, est_served_form form, FILE *out) {
  const int32_t *mask;
  const float *score;
  est_served_text_row(batch, i, NULL, &mask, &score);
  const int S = est_served_text_context(batch)->meta->max_seq_length;
  int tokens = 0;
  for (int t = 0; t < S; t++) tokens += mask[t] != 0;
  if (form == EST_SERVED_LINE) fprintf(out, "%.9g", score[0]);
  else fprintf(out, "{\"score\": %.9g, \"tokens\": %d}", score[0], tokens);
}

static const est_served_head served_scorer = {
  .name = "scorer",
  .type = &scorer_type,
  .config_size = sizeof(scorer_config),
  .read_config = scorer_read,
  .write_config = scorer_write,
  .params = scorer_params,
  .outputs = {"scores"},
  .inputs = {.texts = {"query", "document"}, .required = 2, .model = "a scoring model"},
  .signature = est_served_text_signature,
  .no_classify = "the model scores: use :predict",
  /* the text form's batch, with its own answers */
  .batch_create = est_served_text_batch_create,
  .add_instance = est_served_text_add_instance,
  .add_line = est_served_text_add_line,
  .rows = est_served_text_rows,
  .answer = est_served_text_answer,
  .write = scorer_answer,
  .batch_free = est_served_text_batch_free,
};

/* A checkpoint of keras_bert_tiny's encoder (random) with the scorer on it. */
static void write_scorer_checkpoint(const est_bert_config *cfg, const char *prefix) {
  est_var_store *vs;
  est_bert_encoder *enc;
  void *head;
  assert_int_equal(est_vars_create(&vs), EST_OK);
  assert_int_equal(est_bert_encoder_create(&enc, cfg, vs), EST_OK);
  const est_bert_head_context ctx = {.mode = EST_MODE_PREDICT, .max_batch = 1, .max_seq_length = 16, .encoder = enc,
                                     .vars = vs};
  assert_int_equal(scorer_type.create(&head, &ctx), EST_OK);
  assert_int_equal(est_vars_finalize(vs, 3), EST_OK);
  const size_t n = est_vars_count(vs);
  const char **names = calloc(n, sizeof *names);
  est_tensor *tensors = calloc(n, sizeof *tensors);
  for (size_t i = 0; i < n; i++) names[i] = est_vars_at(vs, i)->name, tensors[i] = est_vars_tensor(vs, i);
  assert_int_equal(est_ckpt_save(prefix, n, names, tensors), EST_OK);
  free(names), free(tensors);
  scorer_type.free(head);
  est_bert_encoder_free(enc);
  est_vars_free(vs);
}

/* The one answer of a batch in `form`. */
static char *written(const est_served_batch *b, size_t i, est_served_form form) {
  char *text = NULL;
  size_t size = 0;
  FILE *f = open_memstream(&text, &size);
  est_served_batch_write(b, i, form, f);
  fclose(f);
  return text;
}

static void test_a_new_head_is_one_descriptor(void **state) {
  (void)state;
  /* registered, and nothing else: the name is then taken */
  const size_t before = est_served_head_count();
  assert_int_equal(est_served_head_register(&served_scorer), EST_OK);
  assert_int_equal(est_served_head_count(), before + 1);
  assert_ptr_equal(est_served_head_find("scorer"), &served_scorer);
  assert_int_equal(est_served_head_register(&served_scorer), EST_ERR_INVALID_ARGUMENT);
  const est_served_head nameless = {.name = "nameless"};
  assert_int_equal(est_served_head_register(&nameless), EST_ERR_INVALID_ARGUMENT);

  /* export */
  est_model_meta meta = {0};
  assert_int_equal(est_bert_config_from_json_file(&meta.bert_config, KBT "/bert_config.json"), EST_OK);
  meta.max_seq_length = 16;
  meta.do_lower_case = true;
  snprintf(meta.task, sizeof meta.task, "score");
  const scorer_config config = {.threshold = 0.25};
  est_model_meta_set_head(&meta, &served_scorer, &config);
  write_scorer_checkpoint(&meta.bert_config, test_tmp_path("model.ckpt"));
  char dir[4096];
  assert_int_equal(est_export_write(test_tmp_path("export"), test_tmp_path("model.ckpt"), &meta, KBT "/vocab.txt", dir,
                                    sizeof dir),
                   EST_OK);
  char path[4200];
  snprintf(path, sizeof path, "%s/est_model.json", dir);
  char *json = test_read_file(path, NULL);
  assert_non_null(strstr(json, "\"head\": \"scorer\""));
  assert_non_null(strstr(json, "\"scorer\": {\n    \"threshold\": 0.25\n  }"));
  free(json);

  /* a servable of it */
  est_servable *s;
  if (est_servable_load(&s, test_tmp_path("export"), 4) != EST_OK) fail_msg("%s", est_error_message());
  const est_model_meta *loaded = est_servable_meta(s);
  assert_ptr_equal(loaded->head, &served_scorer);
  assert_true(((const scorer_config *)est_model_meta_head_config(loaded))->threshold == 0.25);
  assert_int_equal(est_servable_output_width(s), 1);

  /* serve: a :predict body read by the head's inputs, its rows run, its answer */
  const est_request_limits lim = {16, loaded->bert_config.vocab_size, loaded->bert_config.type_vocab_size, 8};
  est_request req;
  const char *body = "{\"instances\": [{\"query\": \"all work\", \"document\": \"jack is a dull boy\"}, "
                     "{\"query\": \"no play\", \"document\": \"all work and no play\"}]}";
  assert_int_equal(est_request_parse(&req, EST_REQUEST_PREDICT, &served_scorer.inputs, body, strlen(body), &lim), EST_OK);
  est_served_batch *b;
  assert_int_equal(est_served_batch_create(&b, s, NULL, NULL), EST_OK);
  for (size_t i = 0; i < req.count; i++) assert_int_equal(est_served_batch_add_instance(b, &req.instances[i]), EST_OK);
  assert_int_equal(est_served_batch_run(b, s), EST_OK);
  char *served[2] = {written(b, 0, EST_SERVED_PREDICT), written(b, 1, EST_SERVED_PREDICT)};
  est_served_batch_free(b);
  est_request_clear(&req);
  float score[2];
  int tokens[2];
  for (int i = 0; i < 2; i++) {
    if (sscanf(served[i], "{\"score\": %f, \"tokens\": %d}", &score[i], &tokens[i]) != 2)
      fail_msg("answer %d: %s", i, served[i]);
    assert_true(score[i] > 0 && score[i] < 1);
  }
  assert_int_equal(tokens[0], 2 + 2 + 5 + 1); /* [CLS] all work [SEP] jack is a dull boy [SEP] */
  /* the same as the featurized rows through the servable */
  est_featurizer *f;
  int32_t ids[16], mask[16], segs[16];
  float direct;
  assert_int_equal(est_featurizer_create(&f, s), EST_OK);
  assert_int_equal(est_featurizer_run(f, "all work", "jack is a dull boy", ids, mask, segs, NULL), EST_OK);
  est_featurizer_free(f);
  assert_int_equal(est_servable_predict(s, ids, mask, segs, 1, 16, &direct), EST_OK);
  assert_true(fabsf(direct - score[0]) < 1e-6f);

  /* the request's errors name its own inputs */
  const struct {
    const char *body, *error;
  } bad[] = {
    {"{\"instances\": [{\"query\": \"a\"}]}", "instances[0].document: missing (a string)"},
    {"{\"instances\": [\"a\"]}", "instances[0]: must be an object with \"query\" and \"document\""},
    {"{\"instances\": [{\"text_a\": \"a\"}]}", "unknown input \"text_a\" (the signature's inputs: query, document)"},
    {"{\"inputs\": [\"a\"]}", "a scoring model takes \"instances\": [{\"query\": ..., \"document\": ...}, ...], not "
                              "\"inputs\""},
  };
  for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
    assert_int_equal(est_request_parse(&req, EST_REQUEST_PREDICT, &served_scorer.inputs, bad[k].body,
                                       strlen(bad[k].body), &lim),
                     EST_ERR_INVALID_ARGUMENT);
    if (!strstr(est_error_message(), bad[k].error)) fail_msg("%s: %s", bad[k].body, est_error_message());
  }

  /* predict: input lines, tsv and jsonl, answered as lines */
  const char *formats[2] = {"tsv", "jsonl"};
  char tsv[] = "all work\tjack is a dull boy", jsonl[] = "{\"query\": \"all work\", \"document\": \"jack is a dull boy\"}";
  char *lines[2] = {tsv, jsonl};
  for (int k = 0; k < 2; k++) {
    assert_int_equal(est_served_batch_create(&b, s, formats[k], "probabilities"), EST_OK);
    assert_int_equal(est_served_batch_add_line(b, lines[k], "in", 1), EST_OK);
    assert_int_equal(est_served_batch_run(b, s), EST_OK);
    char *line = written(b, 0, EST_SERVED_LINE);
    est_served_batch_free(b);
    float v;
    if (sscanf(line, "%f", &v) != 1 || v != score[0]) fail_msg("%s line \"%s\", served %s", formats[k], line, served[0]);
    free(line);
  }
  char half[] = "{\"query\": \"all work\"}";
  assert_int_equal(est_served_batch_create(&b, s, "jsonl", "probabilities"), EST_OK);
  assert_int_equal(est_served_batch_add_line(b, half, "in", 7), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "in:7: needs strings \"query\" and \"document\""));
  est_served_batch_free(b);
  free(served[0]), free(served[1]);
  est_servable_free(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_every_head_round_trips),
    cmocka_unit_test(test_est_model_json_bytes),
    cmocka_unit_test(test_names_are_compared_in_the_table_only),
    cmocka_unit_test_setup_teardown(test_a_new_head_is_one_descriptor, test_tmpdir_setup, test_tmpdir_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
