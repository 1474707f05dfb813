/* The token classifier served (est/served_head.h, src/bert/heads/head_token_classifier.c,
 * docs/ner.md §6): a random BertForTokenClassification directory (tests/data/hf/tok_ner,
 * tests/reference/ner_pipeline_golden.py) answers each of its golden texts, under each of
 * the five aggregation strategies, with transformers 4.44.2's token-classification pipeline's
 * entities: the same labels, words and character offsets, scores within 1e-5. Then a :predict
 * body's instances (a bare string, {"text_a", "aggregation_strategy"}), the errors of a bad
 * strategy, and est_model.json's "token_classifier" settings through an export. */
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

#include "est/serving.h"
#include "test_util.h"

#define TOK_NER EST_TEST_DATA "/hf/tok_ner"

/* The directory as a servable: its config.json's encoder and id2label, the head, 64 tokens. */
static est_servable *open_tok_ner(void) {
  est_model_meta meta = {0};
  assert_int_equal(est_bert_config_from_json_file(&meta.bert_config, TOK_NER), EST_OK);
  json_error_t err;
  json_t *config = json_load_file(TOK_NER "/config.json", 0, &err);
  assert_non_null(config);
  const json_t *id2label = json_object_get(config, "id2label");
  meta.num_labels = json_object_size(id2label);
  meta.labels = calloc(meta.num_labels, sizeof *meta.labels);
  for (size_t i = 0; i < meta.num_labels; i++) {
    char key[32];
    snprintf(key, sizeof key, "%zu", i);
    meta.labels[i] = (char *)json_string_value(json_object_get(id2label, key));
    assert_non_null(meta.labels[i]);
  }
  meta.max_seq_length = 64;
  meta.do_lower_case = true;
  snprintf(meta.task, sizeof meta.task, "ner");
  snprintf(meta.precision, sizeof meta.precision, "fp32");
  const est_model_token_classifier tc = {.aggregation_strategy = EST_AGGREGATION_SIMPLE};
  est_model_meta_set_head(&meta, &est_served_token_classifier, &tc);
  est_servable *s = NULL;
  if (est_servable_open(&s, &meta, TOK_NER, TOK_NER, 4) != EST_OK) fail_msg("%s", est_error_message());
  free(meta.labels);
  json_decref(config);
  return s;
}

static char *written(const est_served_batch *b, size_t i) {
  char *text = NULL;
  size_t size = 0;
  FILE *f = open_memstream(&text, &size);
  est_served_batch_write(b, i, EST_SERVED_LINE, f);
  fclose(f);
  return text;
}

/* est's entities (a JSON list) against the pipeline's, key by key. */
static void same_entities(const json_t *want, const char *got_text, const char *what) {
  json_error_t err;
  json_t *got = json_loads(got_text, 0, &err);
  if (!json_is_array(got)) fail_msg("%s: not a JSON list: %s", what, got_text);
  if (json_array_size(got) != json_array_size(want))
    fail_msg("%s: %zu entities, the pipeline %zu:\n%s\n%s", what, json_array_size(got), json_array_size(want),
             got_text, json_dumps(want, 0));
  for (size_t k = 0; k < json_array_size(want); k++) {
    const json_t *w = json_array_get(want, k), *g = json_array_get(got, k);
    if (json_object_size(w) != json_object_size(g)) fail_msg("%s: entity %zu's keys differ: %s", what, k, got_text);
    const char *key;
    const json_t *wv;
    json_object_foreach((json_t *)w, key, wv) {
      const json_t *gv = json_object_get(g, key);
      if (!strcmp(key, "score")) {
        if (!json_is_number(gv) || fabs(json_number_value(gv) - json_number_value(wv)) > 1e-5)
          fail_msg("%s: entity %zu's score %s, the pipeline's %.9g", what, k, got_text, json_number_value(wv));
      } else if (!json_equal((json_t *)gv, (json_t *)wv)) {
        fail_msg("%s: entity %zu's %s differs: %s\nwant %s", what, k, key, got_text, json_dumps(w, 0));
      }
    }
  }
  json_decref(got);
}

static void test_pipeline_golden(void **state) {
  (void)state;
  est_servable *s = open_tok_ner();
  char *golden = test_read_file(TOK_NER "/pipeline_golden.jsonl", NULL);
  int lines = 0;
  for (char *line = strtok(golden, "\n"); line; line = strtok(NULL, "\n"), lines++) {
    json_error_t err;
    json_t *g = json_loads(line, 0, &err);
    assert_non_null(g);
    const char *text = json_string_value(json_object_get(g, "text"));
    const char *strategy = json_string_value(json_object_get(g, "aggregation_strategy"));
    json_t *in = json_pack("{s:s, s:s}", "text_a", text, "aggregation_strategy", strategy);
    char *input = json_dumps(in, 0);
    est_served_batch *b;
    /* with a text of another length before it: a row's answer does not depend on its batch */
    char other[] = "{\"text_a\": \"Berlin\"}";
    assert_int_equal(est_served_batch_create(&b, s, "jsonl", NULL), EST_OK);
    assert_int_equal(est_served_batch_add_line(b, other, "golden", 0), EST_OK);
    if (est_served_batch_add_line(b, input, "golden", lines + 1) != EST_OK) fail_msg("%s", est_error_message());
    assert_int_equal(est_served_batch_run(b, s), EST_OK);
    char *answer = written(b, 1), what[600];
    snprintf(what, sizeof what, "\"%s\" (%s)", text, strategy);
    same_entities(json_object_get(g, "entities"), answer, what);
    free(answer), free(input);
    est_served_batch_free(b);
    json_decref(in), json_decref(g);
  }
  assert_int_equal(lines, 30); /* 6 texts x 5 strategies */
  free(golden);
  est_servable_free(s);
}

static void test_request_and_errors(void **state) {
  (void)state;
  est_servable *s = open_tok_ner();
  const est_model_meta *meta = est_servable_meta(s);
  const est_served_head *head = est_model_meta_head(meta);
  const est_request_limits lim = {64, meta->bert_config.vocab_size, meta->bert_config.type_vocab_size, 8};
  /* a bare string takes est_model.json's strategy (simple here); an object may name its own */
  const char *body = "{\"instances\": [\"Mary Smith met John in Berlin.\", "
                     "{\"text_a\": \"Mary Smith met John in Berlin.\", \"aggregation_strategy\": \"none\"}]}";
  est_request req;
  assert_int_equal(est_request_parse(&req, EST_REQUEST_PREDICT, &head->inputs, body, strlen(body), &lim), EST_OK);
  est_served_batch *b;
  assert_int_equal(est_served_batch_create(&b, s, NULL, NULL), EST_OK);
  for (size_t i = 0; i < req.count; i++) assert_int_equal(est_served_batch_add_instance(b, &req.instances[i]), EST_OK);
  assert_int_equal(est_served_batch_run(b, s), EST_OK);
  char *simple = written(b, 0), *none = written(b, 1);
  assert_non_null(strstr(simple, "{\"entity_group\": \"LOC\", \"score\": "));
  assert_non_null(strstr(simple, "\"word\": \"mary smith met\", \"start\": 0, \"end\": 14}"));
  assert_non_null(strstr(none, "{\"entity\": \"I-LOC\", \"score\": "));
  assert_non_null(strstr(none, "\"index\": 1, \"word\": \"mary\", \"start\": 0, \"end\": 4}"));
  free(simple), free(none);
  est_served_batch_free(b);
  est_request_clear(&req);
  /* a strategy est does not know names itself and the instance */
  const char *bad = "{\"instances\": [{\"text_a\": \"x\", \"aggregation_strategy\": \"longest\"}]}";
  assert_int_equal(est_request_parse(&req, EST_REQUEST_PREDICT, &head->inputs, bad, strlen(bad), &lim), EST_OK);
  assert_int_equal(est_served_batch_create(&b, s, NULL, NULL), EST_OK);
  assert_int_equal(est_served_batch_add_instance(b, &req.instances[0]), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "instance 0: aggregation_strategy \"longest\": expected none, simple"));
  est_served_batch_free(b);
  est_request_clear(&req);
  /* est predict lines: a jsonl line without text_a, a tsv line as the text */
  char no_text[] = "{\"text\": \"x\"}", tsv[] = "Berlin";
  assert_int_equal(est_served_batch_create(&b, s, "jsonl", NULL), EST_OK);
  assert_int_equal(est_served_batch_add_line(b, no_text, "in.jsonl", 3), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "in.jsonl:3: needs a string \"text_a\""));
  est_served_batch_free(b);
  assert_int_equal(est_served_batch_create(&b, s, "tsv", NULL), EST_OK);
  assert_int_equal(est_served_batch_add_line(b, tsv, "in.tsv", 1), EST_OK);
  assert_int_equal(est_served_batch_run(b, s), EST_OK);
  char *line = written(b, 0);
  assert_true(line[0] == '[' && line[strlen(line) - 1] == ']');
  free(line);
  est_served_batch_free(b);
  /* :classify is refused, saying why */
  assert_non_null(head->no_classify);
  /* est_model.json: the strategy written, read back, and a bad one named */
  char *json = est_model_meta_to_json(meta);
  assert_non_null(strstr(json, "\"token_classifier\": {\n    \"aggregation_strategy\": \"simple\"\n  }"));
  char *at = strstr(json, "\"simple\"");
  memcpy(at, "\"sample\"", 8);
  est_model_meta back;
  assert_int_equal(est_model_meta_parse(&back, json, strlen(json), "m/est_model.json"), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "m/est_model.json: \"token_classifier\".\"aggregation_strategy\" must "
                                              "be one of \"none\", \"simple\""));
  free(json);
  est_servable_free(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_pipeline_golden),
    cmocka_unit_test(test_request_and_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
