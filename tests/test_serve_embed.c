/* `est serve` with an embedding export (tools/serve_embed.c, docs/embeddings.md §4): TF
 * Serving's :predict, TEI's POST /embed and OpenAI's POST /v1/embeddings answer the vectors
 * `est embed` gives (embed_test_model.h computes them apart from the head), each error has
 * its status and names its field, and concurrent clients of all three APIs are batched
 * together and each gets its own rows. */
#include <jansson.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "embed_test_model.h"
#include "serve_test_client.h"
#include "serving_test_model.h"

static float want_raw[EMBED_NTEXTS * EMBED_H], want_unit[EMBED_NTEXTS * EMBED_H];
static int want_tokens[EMBED_NTEXTS];

static int group_setup(void **state) {
  test_tmpdir_setup(state);
  snprintf(export_base, sizeof export_base, "%s/export", test_tmpdir);
  char *log = NULL;
  if (test_run(&log, 1, EST_BIN " embed" EMBED_MODEL_FLAGS " --pooling=mean --export_dir=%s", export_base) != 0) {
    fprintf(stderr, "%s\n", log);
    return -1;
  }
  free(log);
  est_pooling_params raw = {.modes = EST_POOLING_MEAN}, unit = {.modes = EST_POOLING_MEAN, .normalize = true};
  embed_expected(embed_texts, EMBED_NTEXTS, &raw, want_raw, want_tokens);
  embed_expected(embed_texts, EMBED_NTEXTS, &unit, want_unit, NULL);
  return 0;
}

/* {"<key>": [texts...], <extra>} */
static char *texts_body(const char *key, const int *which, int n, const char *extra) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  fprintf(f, "{\"%s\": [", key);
  for (int i = 0; i < n; i++) fprintf(f, "%s\"%s\"", i ? ", " : "", embed_texts[which[i]]);
  fprintf(f, "]%s%s}", extra ? ", " : "", extra ? extra : "");
  fclose(f);
  return buf;
}

/* The vectors of an answer: TEI's [[...]], :predict's {"predictions": [[...]]}, OpenAI's
 * {"data": [{"embedding": [...], "index": i}]}; 0 when its shape is wrong. */
static int answer_vectors(const char *resp, const char *url, float *out, int n) {
  json_t *root = json_loads(resp, 0, NULL);
  const json_t *list = !strcmp(url, "/embed") ? root
                     : !strcmp(url, "/v1/embeddings") ? json_object_get(root, "data")
                                                      : json_object_get(root, "predictions");
  int ok = json_is_array(list) && (int)json_array_size(list) == n;
  for (int i = 0; ok && i < n; i++) {
    const json_t *v = json_array_get(list, i);
    if (!strcmp(url, "/v1/embeddings")) {
      ok = json_integer_value(json_object_get(v, "index")) == i &&
           !strcmp(json_string_value(json_object_get(v, "object")), "embedding");
      v = json_object_get(v, "embedding");
    }
    ok = ok && json_is_array(v) && json_array_size(v) == EMBED_H;
    for (int k = 0; ok && k < EMBED_H; k++) out[i * EMBED_H + k] = (float)json_number_value(json_array_get(v, k));
  }
  json_decref(root);
  return ok;
}

/* Whether the answer's vectors are those of texts `which` (raw or unit length) within tol. */
static int answer_matches(const char *resp, const char *url, const int *which, int n, int unit, double tol) {
  float got[EMBED_NTEXTS * EMBED_H * 4];
  if (!answer_vectors(resp, url, got, n)) return 0;
  for (int i = 0; i < n; i++)
    for (int k = 0; k < EMBED_H; k++) {
      float want = (unit ? want_unit : want_raw)[which[i] * EMBED_H + k];
      if (!(fabs(got[i * EMBED_H + k] - want) <= tol)) return 0;
    }
  return 1;
}

static void post_and_match(int port, const char *url, const char *body, const int *which, int n, int unit) {
  char *resp = NULL;
  int status = http(port, "POST", url, body, &resp);
  if (status != 200 || !answer_matches(resp, url, which, n, unit, 2e-6))
    fail_msg("POST %s %s: %d\n%s", url, body, status, resp);
  free(resp);
}

static void test_three_apis_answer_est_embeds_vectors(void **state) {
  (void)state;
  server s;
  server_start(&s, "apis", "--file_system_poll_wait_seconds=0");
  const int all[EMBED_NTEXTS] = {0, 1, 2, 3, 4, 5}, two[2] = {2, 0};
  /* TEI: normalised by default, raw with "normalize": false; the long text needs truncate */
  char *body = texts_body("inputs", all, EMBED_NTEXTS, "\"truncate\": true");
  post_and_match(s.port, "/embed", body, all, EMBED_NTEXTS, 1);
  free(body);
  body = texts_body("inputs", two, 2, "\"normalize\": false");
  post_and_match(s.port, "/embed", body, two, 2, 0);
  free(body);
  post_and_match(s.port, "/embed", "{\"inputs\": \"jack is a dull boy\"}", two, 1, 1);
  /* OpenAI: the model's own vectors, the model's name echoed, tokens counted */
  body = texts_body("input", two, 2, "\"model\": \"minilm\"");
  post_and_match(s.port, "/v1/embeddings", body, two, 2, 0);
  char *resp = NULL;
  assert_int_equal(http(s.port, "POST", "/v1/embeddings", body, &resp), 200);
  free(body);
  json_t *root = json_loads(resp, 0, NULL);
  assert_string_equal(json_string_value(json_object_get(root, "object")), "list");
  assert_string_equal(json_string_value(json_object_get(root, "model")), "minilm");
  const json_t *usage = json_object_get(root, "usage");
  assert_int_equal(json_integer_value(json_object_get(usage, "prompt_tokens")), want_tokens[2] + want_tokens[0]);
  assert_int_equal(json_integer_value(json_object_get(usage, "total_tokens")), want_tokens[2] + want_tokens[0]);
  json_decref(root);
  free(resp);
  post_and_match(s.port, "/v1/embeddings", "{\"input\": \"jack is a dull boy\"}", two, 1, 0);
  assert_int_equal(http(s.port, "POST", "/v1/embeddings", "{\"input\": \"a\"}", &resp), 200);
  assert_non_null(strstr(resp, "\"model\": \"jack\"")); /* no model given: --model_name */
  free(resp);
  /* TF Serving's :predict: the raw vectors; the long text is cut as est embed cuts it */
  body = texts_body("instances", all, EMBED_NTEXTS, NULL);
  post_and_match(s.port, "/v1/models/jack:predict", body, all, EMBED_NTEXTS, 0);
  free(body);
  expect(s.port, "GET", "/v1/models/jack/metadata", NULL, 200, "\"embeddings\"");
  assert_int_equal(server_stop(&s), 0);
}

static void test_errors_name_their_field(void **state) {
  (void)state;
  server s;
  server_start(&s, "errors", "--file_system_poll_wait_seconds=0 --max_request_bytes=4000 --max_batch_size=4 "
                             "--max_enqueued_batches=2 --max_client_batch_size=8");
  const char *long_text = embed_texts[EMBED_LONG_TEXT];
  char body[512];
  snprintf(body, sizeof body, "{\"inputs\": [\"a\", \"%s\"]}", long_text);
  expect(s.port, "POST", "/embed", body, 413, "inputs[1]: 24 tokens, above the model's max_seq_length 16");
  expect(s.port, "POST", "/embed", body, 413, "\"error_type\": \"Validation\"");
  snprintf(body, sizeof body, "{\"input\": [\"a\", \"%s\"]}", long_text);
  expect(s.port, "POST", "/v1/embeddings", body, 413, "input[1]: 24 tokens");
  expect(s.port, "POST", "/v1/embeddings", body, 413, "\"type\": \"invalid_request_error\"");
  /* TEI's statuses (tools/serve_tei.c): 400 no texts, 413 too many, 422 the wrong form */
  expect(s.port, "POST", "/embed", "{\"inputs\": []}", 400, "\\\"inputs\\\": empty");
  expect(s.port, "POST", "/embed", "{\"inputs\": []}", 400, "\"error_type\": \"Empty\"");
  expect(s.port, "POST", "/embed", "{\"inputs\": [\"a\", \"b\", \"c\", \"d\", \"e\", \"f\", \"g\", \"h\", \"i\"]}", 413,
         "9 texts; at most 8 per request");
  expect(s.port, "POST", "/embed", "{\"inputs\": \"a\", \"prompt_name\": \"query\"}", 413, "\\\"prompt_name\\\"");
  expect(s.port, "POST", "/v1/models/jack:classify", "{\"examples\": [{\"text_a\": \"a\"}]}", 400,
         "no classification signature");
  const struct {
    const char *url, *body, *needle;
  } bad[] = {
    {"/embed", "{\"inputs\": 5}", "\\\"inputs\\\": must be a string or a list of strings"},
    {"/embed", "{\"inputs\": [\"a\", 7]}", "inputs[1]: token ids are not supported"},
    {"/embed", "{\"input\": \"a\"}", "\\\"inputs\\\": missing"},
    {"/embed", "{\"inputs\": \"a\", \"normalize\": 1}", "\\\"normalize\\\": must be true or false"},
    {"/embed", "{\"inputs\": \"a\", \"truncation_direction\": \"Left\"}", "\\\"truncation_direction\\\""},
    {"/embed", "{\"inputs\": \"a\"", "JSON parse error"},
    {"/embed", "[\"a\"]", "must be a JSON object"},
    {"/v1/embeddings", "{\"input\": [[101, 102]]}", "input[0]: token ids are not supported"},
    {"/v1/embeddings", "{\"input\": \"a\", \"model\": 3}", "\\\"model\\\": must be a string"},
    {"/v1/embeddings", "{\"input\": \"a\", \"encoding_format\": \"base64\"}", "\\\"encoding_format\\\""},
    {"/v1/embeddings", "{\"input\": \"a\", \"dimensions\": -2}", "\\\"dimensions\\\""},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) expect(s.port, "POST", bad[i].url, bad[i].body, 422,
                                                                 bad[i].needle);
  expect(s.port, "GET", "/embed", NULL, 405, "use POST");
  expect(s.port, "GET", "/v1/embeddings", NULL, 405, "use POST");
  char big[5000];
  memset(big, 'a', sizeof big - 1);
  big[sizeof big - 1] = 0;
  memcpy(big, "{\"inputs\": \"", 12);
  expect(s.port, "POST", "/embed", big, 413, "--max_request_bytes=4000");
  /* the server is still fine */
  const int one[1] = {0};
  post_and_match(s.port, "/embed", "{\"inputs\": [\"all work and no play\"], \"normalize\": true}", one, 1, 1);
  assert_int_equal(server_stop(&s), 0);
}

/* ---- concurrent clients of all three APIs ---- */

typedef struct client {
  int port, id, failures, instances;
} client;

static void *client_main(void *arg) {
  client *c = arg;
  static const char *const urls[3] = {"/embed", "/v1/embeddings", "/v1/models/jack:predict"};
  static const char *const keys[3] = {"inputs", "input", "instances"};
  static const int short_texts[5] = {0, 1, 2, 4, 5};
  for (int r = 0; r < 6; r++) {
    const int api = (c->id + r) % 3, n = 1 + (c->id * 5 + r * 3) % 7;
    int which[7];
    for (int i = 0; i < n; i++) which[i] = short_texts[(c->id + r + i * 3) % 5];
    char *body = texts_body(keys[api], which, n, api == 0 ? "\"normalize\": false" : NULL), *resp = NULL;
    int status = http(c->port, "POST", urls[api], body, &resp);
    c->instances += n;
    if (status != 200 || !answer_matches(resp, urls[api], which, n, 0, 2e-6)) c->failures++;
    free(body);
    free(resp);
  }
  return NULL;
}

static void test_concurrent_clients_are_batched(void **state) {
  (void)state;
  server s;
  server_start(&s, "concurrent", "--enable_batching --max_batch_size=16 --batch_timeout_micros=5000"
                                 " --file_system_poll_wait_seconds=0");
  enum { N = 12 };
  client c[N];
  pthread_t t[N];
  for (int i = 0; i < N; i++) {
    c[i] = (client){.port = s.port, .id = i};
    assert_int_equal(pthread_create(&t[i], NULL, client_main, &c[i]), 0);
  }
  int total = 0;
  for (int i = 0; i < N; i++) {
    pthread_join(t[i], NULL);
    assert_int_equal(c[i].failures, 0);
    total += c[i].instances;
  }
  /* every text of every API went through the one batcher, exactly once */
  assert_int_equal((int)metric(s.port, "est_serving_batch_size_sum{model_name=\"jack\"} "), total);
  assert_int_equal(server_stop(&s), 0);
}

/* A classifier export has no embeddings: both embedding URLs say so, as TEI does (424). */
static void test_classifier_export_refuses_embed(void **state) {
  (void)state;
  char out[400];
  snprintf(out, sizeof out, "%s/classifier", test_tmpdir);
  serving_train_and_export(out);
  snprintf(export_base, sizeof export_base, "%s/export", out);
  server s;
  server_start(&s, "classifier", "--file_system_poll_wait_seconds=0");
  /* TEI's 424 (Backend): the model cannot answer the route */
  expect(s.port, "POST", "/embed", "{\"inputs\": \"a\"}", 424, "head is \\\"classifier\\\", not an embedding model");
  expect(s.port, "POST", "/v1/embeddings", "{\"input\": \"a\"}", 424, "not an embedding model");
  assert_int_equal(server_stop(&s), 0);
  snprintf(export_base, sizeof export_base, "%s/export", test_tmpdir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_three_apis_answer_est_embeds_vectors),
    cmocka_unit_test(test_errors_name_their_field),
    cmocka_unit_test(test_concurrent_clients_are_batched),
    cmocka_unit_test(test_classifier_export_refuses_embed),
  };
  return cmocka_run_group_tests(tests, group_setup, test_tmpdir_teardown);
}
