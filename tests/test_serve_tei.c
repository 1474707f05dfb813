/* est serve's text-embeddings-inference routes (tools/serve_tei*.c, docs/serving.md §6),
 * driven over HTTP: /health, /info, /metrics, /tokenize, /decode, /predict, /rerank,
 * /similarity, /embed's options, the routes a model cannot answer (424), every error status
 * (400, 413, 422, 424, 429) in TEI's {"error", "error_type"} shape, and token-budget batching
 * whose answers are byte-identical to unbatched ones.
 * Models: run_classifier's jack classifier (2 labels), a cross-encoder made from it (its
 * checkpoint with output_weights' first row only: one label, so TEI's "reranker", whose
 * logit is the classifier's first), and est embed's keras_bert_tiny mean-pooling export. */
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cmocka.h>

#include "embed_test_model.h"
#include "est/ckpt.h"
#include "serve_test_client.h"
#include "serving_test_model.h"

static char cls_base[500], rr_base[500], emb_base[500];

/* The first version directory under base. */
static void version_dir(const char *base, char *out, size_t size) {
  char *log = NULL;
  assert_int_equal(test_run(&log, 1, "ls %s | head -1", base), 0);
  log[strcspn(log, "\n")] = 0;
  snprintf(out, size, "%s/%s", base, log);
  free(log);
}

/* The cross-encoder: the classifier's export with one label, "score", whose weights are
 * output_weights[0] and output_bias[0]. */
static void make_reranker(const char *cls_version, const char *out_base) {
  char dir[600], prefix[700], src[700], cmd[2000];
  snprintf(dir, sizeof dir, "%s/1", out_base);
  snprintf(cmd, sizeof cmd, "mkdir -p %s/variables && cp -r %s/assets %s/", dir, cls_version, dir);
  char *log = NULL;
  assert_int_equal(test_run(&log, 1, "%s", cmd), 0);
  free(log);
  snprintf(src, sizeof src, "%s/variables/variables", cls_version);
  snprintf(prefix, sizeof prefix, "%s/variables/variables", dir);
  est_ckpt_reader *r;
  assert_int_equal(est_ckpt_reader_open(&r, src), EST_OK);
  const size_t n = est_ckpt_reader_count(r);
  est_tensor *t = calloc(n, sizeof *t);
  const char **names = calloc(n, sizeof *names);
  for (size_t i = 0; i < n; i++) {
    names[i] = est_ckpt_reader_name(r, i);
    assert_int_equal(est_ckpt_reader_read(r, names[i], &t[i]), EST_OK);
    if (!strcmp(names[i], "output_weights") || !strcmp(names[i], "output_bias")) t[i].dims[0] = 1;
  }
  assert_int_equal(est_ckpt_save(prefix, n, names, t), EST_OK);
  for (size_t i = 0; i < n; i++) est_tensor_free(&t[i]);
  free(t), free(names);
  est_ckpt_reader_close(r);
  char json_in[700], json_out[700];
  snprintf(json_in, sizeof json_in, "%s/est_model.json", cls_version);
  snprintf(json_out, sizeof json_out, "%s/est_model.json", dir);
  json_t *meta = json_load_file(json_in, 0, NULL);
  assert_non_null(meta);
  json_object_set_new(meta, "labels", json_pack("[s]", "score"));
  assert_int_equal(json_dump_file(meta, json_out, JSON_INDENT(2)), 0);
  json_decref(meta);
}

static int group_setup(void **state) {
  test_tmpdir_setup(state);
  char out[400], v[600];
  snprintf(out, sizeof out, "%s/classifier", test_tmpdir);
  serving_train_and_export(out);
  snprintf(cls_base, sizeof cls_base, "%s/export", out);
  version_dir(cls_base, v, sizeof v);
  snprintf(rr_base, sizeof rr_base, "%s/reranker", test_tmpdir);
  make_reranker(v, rr_base);
  snprintf(emb_base, sizeof emb_base, "%s/embed", test_tmpdir);
  char *log = NULL;
  if (test_run(&log, 1, EST_BIN " embed" EMBED_MODEL_FLAGS " --pooling=mean --export_dir=%s", emb_base) != 0) {
    fprintf(stderr, "%s\n", log);
    return -1;
  }
  free(log);
  return 0;
}

/* POSTs (or GETs, body NULL) and parses the JSON answer; fails unless the status is `want`. */
static json_t *call(int port, const char *path, const char *body, int want) {
  char *resp = NULL;
  int got = http(port, body ? "POST" : "GET", path, body, &resp);
  if (got != want) fail_msg("%s %s: got %d, want %d:\n%s", body ? "POST" : "GET", path, got, want, resp);
  json_t *j = json_loads(resp, JSON_DECODE_ANY, NULL);
  if (!j) fail_msg("%s: not JSON:\n%s", path, resp);
  free(resp);
  return j;
}

/* A TEI error of `status` whose message holds needle and whose error_type is `type`. */
static void tei_error(int port, const char *path, const char *body, int status, const char *type, const char *needle) {
  json_t *j = call(port, path, body, status);
  const char *msg = json_string_value(json_object_get(j, "error"));
  const char *t = json_string_value(json_object_get(j, "error_type"));
  if (!msg || !t || strcmp(t, type) || (needle && !strstr(msg, needle)))
    fail_msg("%s %s: want error_type %s with '%s', got %s / %s", path, body, type, needle ? needle : "", t ? t : "-",
             msg ? msg : "-");
  assert_int_equal(json_object_size(j), 2);
  json_decref(j);
}

static double num(const json_t *v) { return json_number_value(v); }

/* ---- a classifier ------------------------------------------------------------------------- */

static void test_classifier_predict_and_info(void **state) {
  (void)state;
  snprintf(export_base, sizeof export_base, "%s", cls_base);
  server s;
  server_start(&s, "cls", "--file_system_poll_wait_seconds=0 --max_client_batch_size=3 --max_request_bytes=2000");
  expect(s.port, "GET", "/health", NULL, 200, NULL);
  json_t *info = call(s.port, "/info", NULL, 200);
  assert_string_equal(json_string_value(json_object_get(info, "served_model_name")), "jack");
  assert_int_equal(json_integer_value(json_object_get(info, "max_input_length")), 32);
  assert_int_equal(json_integer_value(json_object_get(info, "max_client_batch_size")), 3);
  assert_int_equal(json_integer_value(json_object_get(info, "max_concurrent_requests")), 512);
  assert_int_equal(json_integer_value(json_object_get(info, "max_batch_tokens")), 16384);
  assert_string_equal(json_string_value(json_object_get(info, "model_dtype")), "float32");
  const json_t *c = json_object_get(json_object_get(info, "model_type"), "classifier");
  assert_string_equal(json_string_value(json_object_get(json_object_get(c, "id2label"), "1")), "dull");
  assert_int_equal(json_integer_value(json_object_get(json_object_get(c, "label2id"), "dull")), 1);
  json_decref(info);

  /* /predict's scores are :predict's probabilities, highest first, each with its label */
  json_t *tf = call(s.port, "/v1/models/jack:predict", "{\"instances\": [\"jack is a dull boy\"]}", 200);
  const json_t *probs = json_array_get(json_object_get(tf, "predictions"), 0);
  assert_int_equal(json_array_size(probs), 2); /* the answered output only, not the logits */
  json_t *p = call(s.port, "/predict", "{\"inputs\": \"jack is a dull boy\"}", 200);
  assert_int_equal(json_array_size(p), 2);
  const int top = num(json_array_get(probs, 1)) > num(json_array_get(probs, 0));
  const char *labels[2] = {"bright", "dull"};
  for (int k = 0; k < 2; k++) {
    const json_t *e = json_array_get(p, (size_t)k);
    const int c_ = k == 0 ? top : 1 - top;
    assert_string_equal(json_string_value(json_object_get(e, "label")), labels[c_]);
    assert_float_equal(num(json_object_get(e, "score")), num(json_array_get(probs, (size_t)c_)), 0);
  }
  json_decref(p);
  /* raw_scores: the logits, whose softmax is the probabilities */
  p = call(s.port, "/predict", "{\"inputs\": \"jack is a dull boy\", \"raw_scores\": true}", 200);
  double z[2];
  for (int k = 0; k < 2; k++) {
    const json_t *e = json_array_get(p, (size_t)k);
    z[strcmp(json_string_value(json_object_get(e, "label")), "bright") ? 1 : 0] = num(json_object_get(e, "score"));
  }
  const double p1 = 1 / (1 + exp(z[0] - z[1]));
  assert_float_equal(p1, num(json_array_get(probs, 1)), 1e-6);
  json_decref(p);
  json_decref(tf);
  /* a pair is one input; a list of lists a batch (of one text and of a pair) */
  p = call(s.port, "/predict", "{\"inputs\": [\"jack\", \"a dull boy\"]}", 200);
  assert_true(json_is_object(json_array_get(p, 0)));
  json_decref(p);
  p = call(s.port, "/predict", "{\"inputs\": [[\"jack is a dull boy\"], [\"jack\", \"a dull boy\"]]}", 200);
  assert_int_equal(json_array_size(p), 2);
  assert_int_equal(json_array_size(json_array_get(p, 1)), 2);
  json_decref(p);

  /* errors, as TEI answers them */
  tei_error(s.port, "/predict", "{\"inputs\": []}", 400, "Empty", "cannot be empty");
  tei_error(s.port, "/predict", "{\"inputs\": [[\"a\"], [\"b\"], [\"c\"], [\"d\"]]}", 413, "Validation",
            "batch size 4 > maximum allowed batch size 3");
  char body[900];
  static const char long_text[] = "all work and no play makes jack a dull boy all work and no play makes jack a "
                                  "dull boy all work and no play makes jack a dull boy all work and no play";
  snprintf(body, sizeof body, "{\"inputs\": \"%s\"}", long_text);
  tei_error(s.port, "/predict", body, 413, "Validation", "must have less than 32 tokens. Given: 37");
  snprintf(body, sizeof body, "{\"inputs\": \"%s\", \"truncate\": true}", long_text);
  json_decref(call(s.port, "/predict", body, 200));
  tei_error(s.port, "/predict", "{\"inputs\": \"a\"", 422, "Tokenizer", "JSON");
  tei_error(s.port, "/predict", "[1]", 422, "Tokenizer", "expected an object");
  tei_error(s.port, "/predict", "{\"inputs\": 5}", 422, "Tokenizer", "`inputs`");
  tei_error(s.port, "/predict", "{\"inputs\": [\"a\", \"b\", \"c\"]}", 422, "Tokenizer", "pair");
  tei_error(s.port, "/predict", "{\"inputs\": \"a\", \"raw_scores\": 1}", 422, "Tokenizer", "`raw_scores`");
  tei_error(s.port, "/predict", "{\"inputs\": \"a\", \"truncation_direction\": \"Left\"}", 422, "Tokenizer",
            "`truncation_direction`");
  /* the routes a classifier does not answer */
  tei_error(s.port, "/rerank", "{\"query\": \"a\", \"texts\": [\"b\"]}", 424, "Backend", "not a re-ranker model");
  tei_error(s.port, "/embed", "{\"inputs\": \"a\"}", 424, "Backend", "not an embedding model");
  tei_error(s.port, "/similarity", "{\"inputs\": {\"source_sentence\": \"a\", \"sentences\": [\"b\"]}}", 424,
            "Backend", "embedding models");
  tei_error(s.port, "/embed_all", "{\"inputs\": \"a\"}", 424, "Backend", "`embed_all` is only available for embedding");
  tei_error(s.port, "/embed_sparse", "{\"inputs\": \"a\"}", 424, "Backend", "SPLADE");
  /* a body over --max_request_bytes: 413 from the headers, in TEI's shape */
  char big[2100];
  memset(big, ' ', sizeof big - 1);
  big[sizeof big - 1] = 0;
  memcpy(big, "{\"inputs\": \"a\"}", 15);
  tei_error(s.port, "/predict", big, 413, "Validation", "--max_request_bytes=2000");
  expect(s.port, "GET", "/predict", NULL, 405, "use POST");
  expect(s.port, "POST", "/info", "{}", 405, "use GET");
  /* /metrics: TEI's names */
  char *m = NULL;
  assert_int_equal(http(s.port, "GET", "/metrics", NULL, &m), 200);
  assert_non_null(strstr(m, "te_predict_count 14\n"));
  assert_non_null(strstr(m, "te_predict_success 5\n"));
  assert_non_null(strstr(m, "te_predict_failure{err=\"validation\"} 2\n"));
  assert_non_null(strstr(m, "te_rerank_failure{err=\"backend\"} 1\n"));
  assert_non_null(strstr(m, "te_queue_size 0\n"));
  assert_non_null(strstr(m, "# TYPE te_batch_next_tokens histogram"));
  assert_non_null(strstr(m, "te_batch_next_size_count 6\n")); /* 5 /predict + 1 :predict forward passes */
  free(m);
  assert_int_equal(server_stop(&s), 0);
}

/* ---- a cross-encoder ----------------------------------------------------------------------- */

static void test_reranker(void **state) {
  (void)state;
  static const char *const texts[3] = {"jack is a dull boy", "all work", "no play makes jack"};
  /* the classifier's first logit of each (query, text) pair */
  snprintf(export_base, sizeof export_base, "%s", cls_base);
  server s;
  server_start(&s, "rr_cls", "--file_system_poll_wait_seconds=0");
  char body[900];
  snprintf(body, sizeof body, "{\"inputs\": [[\"work\", \"%s\"], [\"work\", \"%s\"], [\"work\", \"%s\"]], "
           "\"raw_scores\": true}", texts[0], texts[1], texts[2]);
  json_t *p = call(s.port, "/predict", body, 200);
  double z[3];
  for (int i = 0; i < 3; i++)
    for (int k = 0; k < 2; k++) {
      const json_t *e = json_array_get(json_array_get(p, (size_t)i), (size_t)k);
      if (!strcmp(json_string_value(json_object_get(e, "label")), "bright")) z[i] = num(json_object_get(e, "score"));
    }
  json_decref(p);
  assert_int_equal(server_stop(&s), 0);

  snprintf(export_base, sizeof export_base, "%s", rr_base);
  server_start(&s, "rr", "--file_system_poll_wait_seconds=0");
  json_t *info = call(s.port, "/info", NULL, 200);
  const json_t *rr = json_object_get(json_object_get(info, "model_type"), "reranker");
  assert_string_equal(json_string_value(json_object_get(json_object_get(rr, "id2label"), "0")), "score");
  json_decref(info);
  for (int raw = 0; raw < 2; raw++) {
    snprintf(body, sizeof body, "{\"query\": \"work\", \"texts\": [\"%s\", \"%s\", \"%s\"], \"raw_scores\": %s, "
             "\"return_text\": %s}", texts[0], texts[1], texts[2], raw ? "true" : "false", raw ? "false" : "true");
    json_t *r = call(s.port, "/rerank", body, 200);
    assert_int_equal(json_array_size(r), 3);
    double last = INFINITY;
    for (size_t k = 0; k < 3; k++) {
      const json_t *e = json_array_get(r, k);
      const int i = (int)json_integer_value(json_object_get(e, "index"));
      const double score = num(json_object_get(e, "score"));
      assert_true(score <= last); /* highest first */
      last = score;
      /* TEI: sigmoid of the one logit unless raw_scores */
      assert_float_equal(score, raw ? z[i] : 1 / (1 + exp(-z[i])), 1e-5);
      if (raw) assert_null(json_object_get(e, "text"));
      else assert_string_equal(json_string_value(json_object_get(e, "text")), texts[i]);
    }
    json_decref(r);
  }
  /* /predict of a one-label model: its sigmoid */
  p = call(s.port, "/predict", "{\"inputs\": [\"work\", \"all work\"]}", 200);
  assert_string_equal(json_string_value(json_object_get(json_array_get(p, 0), "label")), "score");
  assert_float_equal(num(json_object_get(json_array_get(p, 0), "score")), 1 / (1 + exp(-z[1])), 1e-5);
  json_decref(p);
  tei_error(s.port, "/rerank", "{\"query\": \"a\", \"texts\": []}", 400, "Empty", "`texts` cannot be empty");
  tei_error(s.port, "/rerank", "{\"query\": 1, \"texts\": [\"a\"]}", 422, "Tokenizer", "`query`");
  tei_error(s.port, "/rerank", "{\"query\": \"a\", \"texts\": [\"a\", 2]}", 422, "Tokenizer", "`texts[1]`");
  tei_error(s.port, "/rerank", "{\"query\": \"a\", \"texts\": [\"a\"], \"return_text\": \"yes\"}", 422, "Tokenizer",
            "`return_text`");
  assert_int_equal(server_stop(&s), 0);
}

/* ---- tokenize and decode ------------------------------------------------------------------- */

static void test_tokenize_and_decode(void **state) {
  (void)state;
  snprintf(export_base, sizeof export_base, "%s", cls_base);
  server s;
  server_start(&s, "tok", "--file_system_poll_wait_seconds=0");
  /* "J\xc3\xa4ck" is "Jäck": byte offsets, not code points */
  static const char text[] = "J\xc3\xa4" "ck is a dull boy";
  char body[300];
  snprintf(body, sizeof body, "{\"inputs\": [\"%s\", \"a\"]}", text);
  json_t *t = call(s.port, "/tokenize", body, 200);
  assert_int_equal(json_array_size(t), 2);
  const json_t *toks = json_array_get(t, 0);
  /* est's own tokenizer gives the same ids between [CLS] and [SEP] */
  est_tokenizer *tok;
  assert_int_equal(est_tokenizer_open(&tok, EST_TEST_DATA "/vocab_uncased.txt", true), EST_OK);
  const int32_t *ids;
  size_t n;
  assert_int_equal(est_tokenizer_encode(tok, text, SIZE_MAX, &ids, &n), EST_OK);
  assert_int_equal(json_array_size(toks), n + 2);
  const json_t *first = json_array_get(toks, 0), *last = json_array_get(toks, n + 1);
  assert_string_equal(json_string_value(json_object_get(first, "text")), "[CLS]");
  assert_true(json_is_true(json_object_get(first, "special")));
  assert_true(json_is_null(json_object_get(first, "start")));
  assert_string_equal(json_string_value(json_object_get(last, "text")), "[SEP]");
  for (size_t k = 0; k < n; k++) {
    const json_t *e = json_array_get(toks, k + 1);
    assert_int_equal(json_integer_value(json_object_get(e, "id")), ids[k]);
    assert_true(json_is_false(json_object_get(e, "special")));
    const size_t a = (size_t)json_integer_value(json_object_get(e, "start"));
    const size_t b = (size_t)json_integer_value(json_object_get(e, "stop"));
    assert_true(a < b && b <= strlen(text));
    assert_int_equal(strlen(json_string_value(json_object_get(e, "text"))), b - a);
    assert_memory_equal(json_string_value(json_object_get(e, "text")), text + a, b - a);
  }
  /* "Jäck" is one word: its first token starts at 0 and the next word "is" at byte 6 */
  assert_int_equal(json_integer_value(json_object_get(json_array_get(toks, 1), "start")), 0);
  est_tokenizer_free(tok);
  json_decref(t);
  t = call(s.port, "/tokenize", "{\"inputs\": \"dull\", \"add_special_tokens\": false}", 200);
  assert_int_equal(json_array_size(json_array_get(t, 0)), 1);
  const json_int_t dull = json_integer_value(json_object_get(json_array_get(json_array_get(t, 0), 0), "id"));
  json_decref(t);
  /* /decode: one list or a list of lists; special tokens skipped unless asked */
  snprintf(body, sizeof body, "{\"ids\": [101, %lld, 102]}", (long long)dull);
  t = call(s.port, "/decode", body, 200);
  assert_string_equal(json_string_value(json_array_get(t, 0)), "dull");
  json_decref(t);
  snprintf(body, sizeof body, "{\"ids\": [[101, %lld, 102], [%lld]], \"skip_special_tokens\": false}",
           (long long)dull, (long long)dull);
  t = call(s.port, "/decode", body, 200);
  assert_string_equal(json_string_value(json_array_get(t, 0)), "[CLS] dull [SEP]");
  assert_string_equal(json_string_value(json_array_get(t, 1)), "dull");
  json_decref(t);
  tei_error(s.port, "/tokenize", "{\"inputs\": []}", 400, "Empty", "cannot be empty");
  tei_error(s.port, "/tokenize", "{\"inputs\": [\"a\", 3]}", 422, "Tokenizer", "`inputs[1]`");
  tei_error(s.port, "/tokenize", "{\"inputs\": \"a\", \"prompt_name\": \"query\"}", 413, "Validation", "`query`");
  tei_error(s.port, "/decode", "{\"ids\": []}", 400, "Empty", "cannot be empty");
  tei_error(s.port, "/decode", "{\"ids\": [1, \"a\"]}", 422, "Tokenizer", "`ids[1]`");
  tei_error(s.port, "/decode", "{\"ids\": [-1]}", 422, "Tokenizer", "`ids[0]`");
  tei_error(s.port, "/decode", "{}", 422, "Tokenizer", "`ids`");
  assert_int_equal(server_stop(&s), 0);
}

/* ---- an embedding model ---------------------------------------------------------------------- */

static void test_embedding_routes(void **state) {
  (void)state;
  snprintf(export_base, sizeof export_base, "%s", emb_base);
  server s;
  server_start(&s, "emb", "--file_system_poll_wait_seconds=0");
  json_t *info = call(s.port, "/info", NULL, 200);
  const json_t *e = json_object_get(json_object_get(info, "model_type"), "embedding");
  assert_string_equal(json_string_value(json_object_get(e, "pooling")), "mean");
  json_decref(info);
  /* /similarity is the cosine of /embed's vectors */
  json_t *v = call(s.port, "/embed", "{\"inputs\": [\"all work and no play\", \"jack is a dull boy\", \"a\"]}", 200);
  json_t *sim = call(s.port, "/similarity", "{\"inputs\": {\"source_sentence\": \"all work and no play\", "
                                            "\"sentences\": [\"jack is a dull boy\", \"a\"]}}", 200);
  assert_int_equal(json_array_size(sim), 2);
  for (size_t i = 1; i <= 2; i++) {
    double dot = 0;
    for (size_t k = 0; k < EMBED_H; k++)
      dot += num(json_array_get(json_array_get(v, 0), k)) * num(json_array_get(json_array_get(v, i), k));
    assert_float_equal(num(json_array_get(sim, i - 1)), dot, 1e-6); /* /embed's are unit vectors */
  }
  json_decref(sim);
  /* dimensions: the first so many floats, normalized again */
  json_t *d = call(s.port, "/embed", "{\"inputs\": [\"all work and no play\"], \"dimensions\": 2}", 200);
  json_t *raw = call(s.port, "/embed", "{\"inputs\": [\"all work and no play\"], \"normalize\": false}", 200);
  const json_t *dv = json_array_get(d, 0), *rv = json_array_get(raw, 0);
  assert_int_equal(json_array_size(dv), 2);
  const double r0 = num(json_array_get(rv, 0)), r1 = num(json_array_get(rv, 1)), norm = sqrt(r0 * r0 + r1 * r1);
  assert_float_equal(num(json_array_get(dv, 0)), r0 / norm, 1e-6);
  assert_float_equal(num(json_array_get(dv, 1)), r1 / norm, 1e-6);
  json_decref(d), json_decref(raw), json_decref(v);
  d = call(s.port, "/v1/embeddings", "{\"input\": \"a\", \"dimensions\": 3}", 200);
  assert_int_equal(json_array_size(json_object_get(json_array_get(json_object_get(d, "data"), 0), "embedding")), 3);
  json_decref(d);
  tei_error(s.port, "/embed", "{\"inputs\": \"a\", \"dimensions\": 5}", 413, "Validation", "above the model's 4");
  tei_error(s.port, "/embed", "{\"inputs\": \"a\", \"dimensions\": 0}", 422, "Tokenizer", "positive integer");
  tei_error(s.port, "/embed", "{\"inputs\": []}", 400, "Empty", "empty");
  tei_error(s.port, "/similarity", "{\"inputs\": {\"source_sentence\": \"a\", \"sentences\": []}}", 400, "Empty",
            "cannot be empty");
  tei_error(s.port, "/similarity", "{\"inputs\": {\"sentences\": [\"a\"]}}", 422, "Tokenizer", "source_sentence");
  tei_error(s.port, "/similarity", "{\"inputs\": {\"source_sentence\": \"a\", \"sentences\": [\"b\"]}, "
                                   "\"parameters\": {\"prompt_name\": \"q\"}}", 413, "Validation", "`q`");
  tei_error(s.port, "/predict", "{\"inputs\": \"a\"}", 424, "Backend", "not a classifier model");
  tei_error(s.port, "/rerank", "{\"query\": \"a\", \"texts\": [\"b\"]}", 424, "Backend", "not a re-ranker model");
  /* /embed_all: per token ([CLS] and [SEP] included) the encoder's output, whose mean over
   * the tokens is the mean-pooled /embed vector */
  json_t *all = call(s.port, "/embed_all", "{\"inputs\": [\"all work and no play\", \"a\"]}", 200);
  json_t *toks = call(s.port, "/tokenize", "{\"inputs\": [\"all work and no play\", \"a\"]}", 200);
  raw = call(s.port, "/embed", "{\"inputs\": [\"all work and no play\", \"a\"], \"normalize\": false}", 200);
  assert_int_equal(json_array_size(all), 2);
  for (size_t i = 0; i < 2; i++) {
    const json_t *rows = json_array_get(all, i);
    const size_t n = json_array_size(rows);
    assert_int_equal(n, json_array_size(json_array_get(toks, i)));
    for (size_t k = 0; k < EMBED_H; k++) {
      double mean = 0;
      for (size_t t = 0; t < n; t++) {
        assert_int_equal(json_array_size(json_array_get(rows, t)), EMBED_H);
        mean += num(json_array_get(json_array_get(rows, t), k)) / (double)n;
      }
      assert_float_equal(mean, num(json_array_get(json_array_get(raw, i), k)), 1e-5);
    }
  }
  json_decref(all), json_decref(toks), json_decref(raw);
  tei_error(s.port, "/embed_all", "{\"inputs\": []}", 400, "Empty", "cannot be empty");
  tei_error(s.port, "/embed_all", "{\"inputs\": [1]}", 422, "Tokenizer", "`inputs[0]`");
  tei_error(s.port, "/embed_sparse", "{\"inputs\": \"a\"}", 424, "Backend", "SPLADE");
  /* a long text: 413 unless truncated */
  char body[400];
  snprintf(body, sizeof body, "{\"inputs\": \"%s\"}", embed_texts[EMBED_LONG_TEXT]);
  tei_error(s.port, "/embed", body, 413, "Validation", "24 tokens");
  assert_int_equal(server_stop(&s), 0);
  server_start(&s, "emb_auto", "--file_system_poll_wait_seconds=0 --auto_truncate");
  json_decref(call(s.port, "/embed", body, 200));
  assert_int_equal(server_stop(&s), 0);
}

/* ---- token-budget batching -------------------------------------------------------------------- */

enum { NCLIENTS = 8, ROUNDS = 4 };
static const char *const batch_texts[] = {"jack", "all work and no play makes jack a dull boy", "a dull boy",
                                          "no play", "all work and no play", "makes jack a"};
enum { NBT = sizeof batch_texts / sizeof *batch_texts };

static char *predict_body(int i) {
  char *b = NULL;
  if (asprintf(&b, "{\"inputs\": [[\"%s\"], [\"%s\", \"%s\"]], \"raw_scores\": true}", batch_texts[i % NBT],
               batch_texts[(i + 1) % NBT], batch_texts[(i + 3) % NBT]) < 0)
    return NULL;
  return b;
}

typedef struct batch_client {
  int port, id, mismatches;
  char **want; /* [NBT] the unbatched answers */
} batch_client;

static void *batch_client_main(void *arg) {
  batch_client *c = arg;
  for (int r = 0; r < ROUNDS; r++) {
    const int i = (c->id + r) % NBT;
    char *body = predict_body(i), *resp = NULL;
    if (http(c->port, "POST", "/predict", body, &resp) != 200 || strcmp(resp, c->want[i])) c->mismatches++;
    free(body), free(resp);
  }
  return NULL;
}

/* Answers are byte-identical whether a request ran alone or in a batch cut by the token
 * budget: a served result never depends on what else was in its forward pass. */
static void test_token_budget_batching_is_invariant(void **state) {
  (void)state;
  snprintf(export_base, sizeof export_base, "%s", cls_base);
  char *want[NBT];
  server s;
  server_start(&s, "alone", "--file_system_poll_wait_seconds=0");
  for (int i = 0; i < NBT; i++) {
    char *body = predict_body(i);
    assert_int_equal(http(s.port, "POST", "/predict", body, &want[i]), 200);
    free(body);
  }
  assert_int_equal(server_stop(&s), 0);
  static const char *const configs[2] = {
    "--file_system_poll_wait_seconds=0 --enable_batching --batch_timeout_micros=20000 --max_batch_tokens=24",
    "--file_system_poll_wait_seconds=0 --enable_batching --batch_timeout_micros=20000 --max_batch_size=64"};
  for (int k = 0; k < 2; k++) {
    server_start(&s, k ? "budget_large" : "budget_small", configs[k]);
    batch_client c[NCLIENTS];
    pthread_t t[NCLIENTS];
    for (int i = 0; i < NCLIENTS; i++) {
      c[i] = (batch_client){.port = s.port, .id = i, .want = want};
      assert_int_equal(pthread_create(&t[i], NULL, batch_client_main, &c[i]), 0);
    }
    for (int i = 0; i < NCLIENTS; i++) {
      pthread_join(t[i], NULL);
      assert_int_equal(c[i].mismatches, 0);
    }
    char *m = NULL;
    assert_int_equal(http(s.port, "GET", "/metrics", NULL, &m), 200);
    const char *at = strstr(m, "te_batch_next_size_count ");
    assert_non_null(at);
    const int batches = atoi(at + strlen("te_batch_next_size_count "));
    assert_true(batches >= 1 && batches <= NCLIENTS * ROUNDS);
    /* with a budget of 24 tokens, no batch of two or more requests passes it: every batch
     * above 24 tokens is one request's (each has 2 rows of at most 9 + 11 real tokens) */
    if (k == 0) {
      at = strstr(m, "te_batch_next_tokens_bucket{le=\"32\"} ");
      const char *inf = strstr(m, "te_batch_next_tokens_bucket{le=\"+Inf\"} ");
      assert_non_null(at), assert_non_null(inf);
      assert_int_equal(atoi(at + strlen("te_batch_next_tokens_bucket{le=\"32\"} ")),
                       atoi(inf + strlen("te_batch_next_tokens_bucket{le=\"+Inf\"} ")));
    }
    free(m);
    assert_int_equal(server_stop(&s), 0);
  }
  for (int i = 0; i < NBT; i++) free(want[i]);
}

/* /embed_all and /embed batched together answer byte for byte as alone (the token outputs of
 * a batch of several jobs go through the batcher's own buffer). */
typedef struct embed_client {
  int port, id, mismatches;
  char **want;
} embed_client;

static char *embed_body(int i) {
  char *b = NULL;
  if (asprintf(&b, "{\"inputs\": [\"%s\", \"%s\"]}", embed_texts[i % 3], embed_texts[(i + 2) % 6]) < 0) return NULL;
  return b;
}

static void *embed_client_main(void *arg) {
  embed_client *c = arg;
  for (int r = 0; r < ROUNDS; r++) {
    const int i = (c->id + r) % 6, all = (c->id + r) % 2;
    char *body = embed_body(i), *resp = NULL;
    if (http(c->port, "POST", all ? "/embed_all" : "/embed", body, &resp) != 200 || strcmp(resp, c->want[2 * i + all]))
      c->mismatches++;
    free(body), free(resp);
  }
  return NULL;
}

static void test_embed_all_batched_is_invariant(void **state) {
  (void)state;
  snprintf(export_base, sizeof export_base, "%s", emb_base);
  char *want[12];
  server s;
  server_start(&s, "emb_alone", "--file_system_poll_wait_seconds=0 --auto_truncate");
  for (int i = 0; i < 6; i++) {
    char *body = embed_body(i);
    assert_int_equal(http(s.port, "POST", "/embed", body, &want[2 * i]), 200);
    assert_int_equal(http(s.port, "POST", "/embed_all", body, &want[2 * i + 1]), 200);
    free(body);
  }
  assert_int_equal(server_stop(&s), 0);
  server_start(&s, "emb_batched", "--file_system_poll_wait_seconds=0 --auto_truncate --enable_batching "
                                  "--batch_timeout_micros=20000");
  embed_client c[NCLIENTS];
  pthread_t t[NCLIENTS];
  for (int i = 0; i < NCLIENTS; i++) {
    c[i] = (embed_client){.port = s.port, .id = i, .want = want};
    assert_int_equal(pthread_create(&t[i], NULL, embed_client_main, &c[i]), 0);
  }
  for (int i = 0; i < NCLIENTS; i++) {
    pthread_join(t[i], NULL);
    assert_int_equal(c[i].mismatches, 0);
  }
  assert_int_equal(server_stop(&s), 0);
  for (int i = 0; i < 12; i++) free(want[i]);
}

/* ---- 429 ------------------------------------------------------------------------------------ */

/* --max_concurrent_requests=1: while one request is being answered a second gets 429. The
 * first is held in the queue deterministically: a third connection has sent the headers of a
 * POST but not its body, so the batcher waits (batch_timeout_micros) for it to fill the
 * batch; the test sees the first queued in te_queue_size before sending the second. */
static void test_overloaded(void **state) {
  (void)state;
  snprintf(export_base, sizeof export_base, "%s", cls_base);
  server s;
  server_start(&s, "overload", "--file_system_poll_wait_seconds=0 --enable_batching --batch_timeout_micros=60000000 "
                               "--max_concurrent_requests=1");
  /* the straggler: headers only */
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)s.port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
  const struct timeval limit = {.tv_sec = 120};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  /* /tokenize takes no permit, as TEI's: it does not compete with the first request */
  static const char straggler_body[] = "{\"inputs\": \"jack\"}";
  char head[300];
  int hn = snprintf(head, sizeof head, "POST /tokenize HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                    "Content-Length: %zu\r\n\r\n", strlen(straggler_body));
  assert_int_equal(send(fd, head, (size_t)hn, MSG_NOSIGNAL), hn);
  /* the first request, in a thread: it waits in the queue */
  batch_client first = {.port = s.port, .id = 0};
  char *want[NBT] = {0};
  for (int i = 0; i < NBT; i++) want[i] = strdup("");
  first.want = want;
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, (void *(*)(void *))batch_client_main, &first), 0);
  for (;;) {
    char *m = NULL;
    assert_int_equal(http(s.port, "GET", "/metrics", NULL, &m), 200);
    const char *at = strstr(m, "\nte_queue_size ");
    const int queued = at ? atoi(at + strlen("\nte_queue_size ")) : 0;
    free(m);
    if (queued > 0) break;
    usleep(10000);
  }
  tei_error(s.port, "/predict", "{\"inputs\": \"a\"}", 429, "Overloaded", "Model is overloaded");
  tei_error(s.port, "/similarity", "{\"inputs\": {\"source_sentence\": \"a\", \"sentences\": [\"b\"]}}", 429,
            "Overloaded", "overloaded");
  json_decref(call(s.port, "/tokenize", "{\"inputs\": \"a\"}", 200));
  /* the straggler's body: the batch runs, everyone is answered */
  assert_int_equal(send(fd, straggler_body, strlen(straggler_body), MSG_NOSIGNAL), (ssize_t)strlen(straggler_body));
  char buf[4096];
  ssize_t got = read(fd, buf, sizeof buf - 1);
  assert_true(got > 12);
  buf[got] = 0;
  close(fd);
  assert_int_equal(atoi(buf + 9), 200);
  pthread_join(t, NULL);
  /* every round of the first client's was answered (the answers differ from ""): */
  assert_int_equal(first.mismatches, ROUNDS);
  for (int i = 0; i < NBT; i++) free(want[i]);
  assert_int_equal(server_stop(&s), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_classifier_predict_and_info),
    cmocka_unit_test(test_reranker),
    cmocka_unit_test(test_tokenize_and_decode),
    cmocka_unit_test(test_embedding_routes),
    cmocka_unit_test(test_token_budget_batching_is_invariant),
    cmocka_unit_test(test_embed_all_batched_is_invariant),
    cmocka_unit_test(test_overloaded),
  };
  return cmocka_run_group_tests(tests, group_setup, test_tmpdir_teardown);
}
