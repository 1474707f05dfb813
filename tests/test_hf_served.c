/* HuggingFace directories served as they are (src/serve/servable_hf.c, docs/serving.md, "HuggingFace directories"):
 * est_servable_load / est predict / est serve take a transformers *ForSequenceClassification,
 * *ForTokenClassification or *ForQuestionAnswering directory, the head chosen by the table of
 * served heads from config.json's architectures:
 *   - a cross-encoder (num_labels 1, tests/data/hf/cross_encoder, tests/reference/
 *     hf_served_golden.py): the raw logit of each (query, passage), transformers' to 1e-5;
 *   - a classifier (cls_gelu): softmax of transformers' logits; multi-label (cls_multi):
 *     sigmoids; token classification (tok_ner): the pipeline's entities; question answering
 *     (qa_tanh): an answer;
 *   - an architecture no head takes, or none, named;
 *   - est serve --model_base_path=DIR over HTTP: :predict, metadata, :classify refused for the
 *     token classifier. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <jansson.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "est/est.h"
#include "est/serving.h"
#include "serve_test_client.h"

#define HF EST_TEST_DATA "/hf"

static char *answer(est_servable *s, const char *format, char *line) {
  est_served_batch *b;
  assert_int_equal(est_served_batch_create(&b, s, format, NULL), EST_OK);
  if (est_served_batch_add_line(b, line, "in", 1) != EST_OK) fail_msg("%s", est_error_message());
  if (est_served_batch_run(b, s) != EST_OK) fail_msg("%s", est_error_message());
  char *text = NULL;
  size_t size = 0;
  FILE *f = open_memstream(&text, &size);
  est_served_batch_write(b, 0, EST_SERVED_LINE, f);
  fclose(f);
  est_served_batch_free(b);
  return text;
}

static void test_cross_encoder(void **state) {
  (void)state;
  est_servable *s;
  if (est_servable_load(&s, HF "/cross_encoder", 4) != EST_OK) fail_msg("%s", est_error_message());
  const est_model_meta *m = est_servable_meta(s);
  assert_ptr_equal(est_model_meta_head(m), &est_served_classifier);
  assert_int_equal(((const est_model_classifier *)est_model_meta_head_config(m))->problem_type, EST_PROBLEM_REGRESSION);
  assert_int_equal(m->num_labels, 1);
  assert_string_equal(m->labels[0], "LABEL_0");
  assert_int_equal(m->max_seq_length, 64); /* tokenizer_config.json's model_max_length */
  assert_int_equal(est_servable_version(s), 1);
  char *golden = test_read_file(HF "/cross_encoder/golden.tsv", NULL);
  int n = 0;
  for (char *line = strtok(golden, "\n"); line; line = strtok(NULL, "\n"), n++) {
    char *last = strrchr(line, '\t');
    *last = 0;
    const double want = strtod(last + 1, NULL);
    char *got = answer(s, "tsv", line);
    if (fabs(strtod(got, NULL) - want) > 1e-5) fail_msg("%s: est %s, transformers %.9g", line, got, want);
    free(got);
  }
  assert_int_equal(n, 4);
  free(golden);
  est_servable_free(s);
}

static void test_each_architecture(void **state) {
  (void)state;
  est_servable *s;
  /* BertForSequenceClassification, 3 labels: id2label's names, softmax probabilities */
  assert_int_equal(est_servable_load(&s, HF "/cls_gelu", 4), EST_OK);
  const est_model_meta *m = est_servable_meta(s);
  assert_int_equal(m->num_labels, 3);
  assert_string_equal(m->labels[2], "pos");
  char line[] = "the movie was very good";
  char *got = answer(s, "tsv", line);
  float p[3];
  assert_int_equal(sscanf(got, "%f\t%f\t%f", &p[0], &p[1], &p[2]), 3);
  assert_true(fabs(p[0] + p[1] + p[2] - 1.0) < 1e-5);
  free(got);
  est_servable_free(s);
  /* multi-label: config.json's problem_type, sigmoids */
  assert_int_equal(est_servable_load(&s, HF "/cls_multi", 4), EST_OK);
  assert_int_equal(((const est_model_classifier *)est_model_meta_head_config(est_servable_meta(s)))->problem_type,
                   EST_PROBLEM_MULTI_LABEL);
  est_safetensors *st;
  assert_int_equal(est_safetensors_open(&st, HF "/cls_multi/golden.safetensors"), EST_OK);
  est_tensor ids, mask, segs, logits;
  assert_int_equal(est_safetensors_read(st, "input_ids", &ids), EST_OK);
  assert_int_equal(est_safetensors_read(st, "input_mask", &mask), EST_OK);
  assert_int_equal(est_safetensors_read(st, "segment_ids", &segs), EST_OK);
  assert_int_equal(est_safetensors_read(st, "logits", &logits), EST_OK);
  est_safetensors_close(st);
  float probs[12];
  assert_int_equal(est_servable_predict(s, ids.data, mask.data, segs.data, 3, 8, probs), EST_OK);
  for (int i = 0; i < 12; i++) {
    const double want = 1.0 / (1.0 + exp(-(double)((const float *)logits.data)[i]));
    if (fabs(probs[i] - want) > 1e-5) fail_msg("cls_multi probability %d: %.9g, sigmoid of torch's %.9g", i, probs[i], want);
  }
  est_tensor_free(&ids), est_tensor_free(&mask), est_tensor_free(&segs), est_tensor_free(&logits);
  est_servable_free(s);
  /* BertForTokenClassification: the pipeline's entities (the first golden line's text) */
  assert_int_equal(est_servable_load(&s, HF "/tok_ner", 4), EST_OK);
  assert_ptr_equal(est_model_meta_head(est_servable_meta(s)), &est_served_token_classifier);
  char text[] = "Mary Smith met John in Berlin.";
  got = answer(s, "tsv", text);
  assert_non_null(strstr(got, "{\"entity_group\": \"LOC\", \"score\": 0.981"));
  assert_non_null(strstr(got, "\"word\": \"berlin\", \"start\": 23, \"end\": 29}"));
  free(got);
  est_servable_free(s);
  /* BertForQuestionAnswering: run_squad's defaults, cut to a quarter of 16 positions */
  assert_int_equal(est_servable_load(&s, HF "/qa_tanh", 4), EST_OK);
  assert_ptr_equal(est_model_meta_head(est_servable_meta(s)), &est_served_squad);
  assert_int_equal(((const est_model_squad *)est_model_meta_head_config(est_servable_meta(s)))->doc_stride, 4);
  char qa[] = "{\"question\": \"what is fun\", \"context\": \"the movie is fun and not boring\"}";
  got = answer(s, "jsonl", qa);
  assert_non_null(strstr(got, "{\"answer\": \""));
  free(got);
  est_servable_free(s);
}

static void test_refused(void **state) {
  (void)state;
  char dir[700];
  snprintf(dir, sizeof dir, "%s/base_model", test_tmpdir);
  assert_int_equal(test_run(NULL, 0, "mkdir -p %s && cp " HF "/cls_gelu/* %s/ && sed -i "
                   "'s/BertForSequenceClassification/BertModel/' %s/config.json", dir, dir, dir), 0);
  est_servable *s = NULL;
  assert_int_not_equal(est_servable_load(&s, dir, 4), EST_OK);
  if (!strstr(est_error_message(), "\"architectures\" names BertModel, which no served head takes; est serves a "
                                   "directory of *ForSequenceClassification, *ForQuestionAnswering, "
                                   "*ForTokenClassification"))
    fail_msg("%s", est_error_message());
  assert_null(s);
  assert_int_equal(test_run(NULL, 0, "sed -i '/architectures/,/]/d' %s/config.json", dir), 0);
  assert_int_not_equal(est_servable_load(&s, dir, 4), EST_OK);
  assert_non_null(strstr(est_error_message(), "\"architectures\" is missing"));
}

static void test_serve_http(void **state) {
  (void)state;
  /* the cross-encoder: :predict with pairs, its raw score */
  snprintf(export_base, sizeof export_base, "%s", HF "/cross_encoder");
  server sv;
  server_start(&sv, "ce", "");
  char *resp = NULL;
  const char *body = "{\"instances\": [{\"text_a\": \"what is the capital of france\", \"text_b\": \"paris is the "
                     "capital of france!\"}]}";
  assert_int_equal(http(sv.port, "POST", "/v1/models/jack:predict", body, &resp), 200);
  json_t *j = json_loads(resp, 0, NULL);
  const double score = json_number_value(json_array_get(json_array_get(json_object_get(j, "predictions"), 0), 0));
  if (fabs(score - -2.266500234603882) > 1e-5) fail_msg("served %s", resp);
  json_decref(j);
  free(resp);
  expect(sv.port, "GET", "/v1/models/jack/metadata", NULL, 200, "\"LABEL_0\"");
  assert_int_equal(server_stop(&sv), 0);
  /* the token classifier: entities; :classify refused */
  snprintf(export_base, sizeof export_base, "%s", HF "/tok_ner");
  server_start(&sv, "ner", "");
  expect(sv.port, "POST", "/v1/models/jack:predict",
         "{\"instances\": [{\"text_a\": \"Mary Smith met John in Berlin.\", \"aggregation_strategy\": \"none\"}]}", 200,
         "{\"entity\": \"I-LOC\", \"score\": ");
  expect(sv.port, "POST", "/v1/models/jack:classify", "{\"examples\": [{\"text_a\": \"x\"}]}", 400, "labels tokens");
  assert_int_equal(server_stop(&sv), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_cross_encoder),
    cmocka_unit_test(test_each_architecture),
    cmocka_unit_test(test_refused),
    cmocka_unit_test(test_serve_http),
  };
  return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
