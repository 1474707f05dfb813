/* `est serve` over real HTTP on 127.0.0.1 (a port the kernel picks): every endpoint and
 * error code, 32 concurrent clients with mixed request sizes each checked against the
 * model's own probabilities, coalescing into one batch, a version swap under load (and a
 * broken version skipped) with no failed request, SIGTERM finishing a queued request, and a
 * swap from an fp32 version to a bf16 one, each run in the precision it records.
 * The server process and the client are tests/serve_test_client.h's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>

#include "est/est.h"
#include "est/serving.h"
#include "serve_test_client.h"
#include "serving_test_model.h"

static char out_dir[512];  /* export_base: serve_test_client.h */
static est_servable *ref;              /* the same export, loaded in-process: expected answers */

/* The servable's probabilities for one text (pair), at full length. Client threads call it
 * too, and a servable runs one forward at a time. */
static pthread_mutex_t ref_lock = PTHREAD_MUTEX_INITIALIZER;

static void servable_probs(est_servable *s, const char *a, const char *b, float *p) {
  est_featurizer *f;
  assert_int_equal(est_featurizer_create(&f, s), EST_OK);
  int32_t ids[32], mask[32], segs[32];
  assert_int_equal(est_featurizer_run(f, a, b, ids, mask, segs, NULL), EST_OK);
  assert_int_equal(est_servable_predict(s, ids, mask, segs, 1, 32, p), EST_OK);
  est_featurizer_free(f);
}

static void expected(const char *a, const char *b, float *p) {
  pthread_mutex_lock(&ref_lock);
  servable_probs(ref, a, b, p);
  pthread_mutex_unlock(&ref_lock);
}

/* predictions[i] of a response == expected(texts[i]) (fp32) to tol; returns 0/1 (no cmocka:
 * threads). *worst (may be NULL) gets the largest difference seen. */
static int check_predictions_to(const char *resp, const char *key, const char *const *texts, int n, double tol,
                                double *worst) {
  json_t *j = json_loads(resp, 0, NULL);
  json_t *preds = json_object_get(j, key);
  int ok = json_is_array(preds) && (int)json_array_size(preds) == n;
  for (int i = 0; ok && i < n; i++) {
    float p[2];
    expected(texts[i], NULL, p);
    json_t *row = json_array_get(preds, i);
    ok = json_array_size(row) == 2;
    for (int c = 0; ok && c < 2; c++) {
      double d = fabs(json_number_value(json_array_get(row, c)) - p[c]);
      ok = d <= tol;
      if (worst && d > *worst) *worst = d;
    }
  }
  json_decref(j);
  return ok;
}

static int check_predictions(const char *resp, const char *key, const char *const *texts, int n) {
  return check_predictions_to(resp, key, texts, n, 1e-5, NULL);
}

static const char *const pool[] = {"all work and no play", "jack is a dull boy", "play", "dull dull dull",
                                   "a boy makes no work and all play makes jack a boy", "work", "no",
                                   "makes jack play all work and no dull boy a play work"};
enum { NPOOL = sizeof pool / sizeof pool[0] };

static char *predict_body(const char *const *texts, int n) {
  json_t *inst = json_array();
  for (int i = 0; i < n; i++) json_array_append_new(inst, json_string(texts[i]));
  json_t *j = json_pack("{s:o}", "instances", inst);
  char *s = json_dumps(j, 0);
  json_decref(j);
  return s;
}

static int group_setup(void **state) {
  test_tmpdir_setup(state);
  snprintf(out_dir, sizeof out_dir, "%s/run", test_tmpdir);
  snprintf(export_base, sizeof export_base, "%s/export", out_dir);
  serving_train_and_export(out_dir);
  assert_int_equal(est_servable_load(&ref, export_base, 8), EST_OK);
  return 0;
}

static int group_teardown(void **state) {
  est_servable_free(ref);
  return test_tmpdir_teardown(state);
}

/* ---- endpoints and errors ---- */

static void test_endpoints_and_errors(void **state) {
  (void)state;
  server s;
  server_start(&s, "endpoints", "--max_request_bytes=4096 --file_system_poll_wait_seconds=0");
  char v[32], path[128], *resp;
  snprintf(v, sizeof v, "%lld", (long long)est_servable_version(ref));
  int p = s.port;
  expect(p, "GET", "/v1/models/jack", NULL, 200, "\"state\": \"AVAILABLE\"");
  expect(p, "GET", "/v1/models/jack", NULL, 200, v);
  snprintf(path, sizeof path, "/v1/models/jack/versions/%s", v);
  expect(p, "GET", path, NULL, 200, "\"error_code\": \"OK\"");
  expect(p, "GET", "/v1/models/jack/metadata", NULL, 200, "\"serving_default\"");
  expect(p, "GET", "/v1/models/jack/metadata", NULL, 200, "\"probabilities\"");

  /* row format: strings, pairs and tokenized rows; the tokenized one is "play"'s features */
  const char *texts[3] = {"all work and no play", "jack is a dull boy", "play"};
  assert_int_equal(http(p, "POST", "/v1/models/jack:predict",
                        "{\"instances\": [\"all work and no play\", {\"text_a\": \"jack is a dull boy\"},"
                        " {\"input_ids\": [101, 2377, 102], \"input_mask\": [1, 1, 1], \"segment_ids\": [0, 0, 0]}]}",
                        &resp), 200);
  assert_true(check_predictions(resp, "predictions", texts, 3));
  free(resp);
  snprintf(path, sizeof path, "/v1/models/jack/versions/%s:predict", v);
  assert_int_equal(http(p, "POST", path, "{\"signature_name\": \"serving_default\", \"instances\": [\"play\"]}", &resp), 200);
  assert_true(check_predictions(resp, "predictions", texts + 2, 1));
  free(resp);
  /* a pair differs from its first sentence alone */
  float pair[2], single[2];
  expected("all work and no play", "dull dull", pair);
  expected("all work and no play", NULL, single);
  assert_true(fabsf(pair[0] - single[0]) > 1e-3f);
  assert_int_equal(http(p, "POST", "/v1/models/jack:predict",
                        "{\"instances\": [{\"text_a\": \"all work and no play\", \"text_b\": \"dull dull\"}]}", &resp), 200);
  json_t *j = json_loads(resp, 0, NULL);
  assert_true(fabs(json_number_value(json_array_get(json_array_get(json_object_get(j, "predictions"), 0), 0)) - pair[0]) <= 1e-5);
  json_decref(j);
  free(resp);
  /* export -> serve = run_classifier --do_predict: test.tsv's texts against test_results.tsv */
  {
    char tr[700];
    snprintf(tr, sizeof tr, "%s/test_results.tsv", out_dir);
    char *results = test_read_file(tr, NULL);
    double want[16];
    assert_int_equal(serving_parse_floats(results, want, 16), 10);
    free(results);
    char *texts_out = NULL;
    assert_int_equal(test_run(&texts_out, 0, SERVING_TEST_TEXTS), 0);
    const char *rows5[5];
    char *save, *line = strtok_r(texts_out, "\n", &save);
    for (int i = 0; i < 5; i++, line = strtok_r(NULL, "\n", &save)) rows5[i] = line;
    char *body = predict_body(rows5, 5);
    assert_int_equal(http(p, "POST", "/v1/models/jack:predict", body, &resp), 200);
    j = json_loads(resp, 0, NULL);
    for (int i = 0; i < 5; i++)
      for (int c = 0; c < 2; c++)
        assert_true(fabs(json_number_value(json_array_get(json_array_get(json_object_get(j, "predictions"), i), c)) -
                         want[2 * i + c]) <= 1e-5);
    json_decref(j);
    free(resp);
    free(body);
    free(texts_out);
  }
  /* columnar */
  assert_int_equal(http(p, "POST", "/v1/models/jack:predict", "{\"inputs\": {\"text_a\": [\"all work and no play\","
                        " \"jack is a dull boy\"]}}", &resp), 200);
  assert_true(check_predictions(resp, "outputs", texts, 2));
  free(resp);
  /* classify: [label, score] pairs in label order */
  float e[2];
  expected("dull dull", NULL, e);
  assert_int_equal(http(p, "POST", "/v1/models/jack:classify", "{\"examples\": [{\"text_a\": \"dull dull\"}]}", &resp), 200);
  j = json_loads(resp, 0, NULL);
  json_t *r0 = json_array_get(json_object_get(j, "results"), 0);
  assert_string_equal(json_string_value(json_array_get(json_array_get(r0, 0), 0)), "bright");
  assert_string_equal(json_string_value(json_array_get(json_array_get(r0, 1), 0)), "dull");
  assert_true(fabs(json_number_value(json_array_get(json_array_get(r0, 1), 1)) - e[1]) <= 1e-5);
  json_decref(j);
  free(resp);

  /* 400: what is wrong, and where */
  expect(p, "POST", "/v1/models/jack:predict", "{\"instances\": [", 400, "JSON parse error");
  /* a \u0000 in words of the request, not jansson's "not allowed without JSON_ALLOW_NUL" */
  expect(p, "POST", "/v1/models/jack:predict", "{\"instances\": [\"a\\u0000b\"]}", 400,
         "JSON parse error at line 1, column 25: a string holds \\\\u0000 (the NUL character), which est does not "
         "accept in text");
  expect(p, "POST", "/v1/models/jack:predict", "[1]", 400, "must be a JSON object");
  expect(p, "POST", "/v1/models/jack:predict", "{\"instances\": []}", 400, "empty");
  expect(p, "POST", "/v1/models/jack:predict", "{}", 400, "needs \\\"instances\\\"");
  expect(p, "POST", "/v1/models/jack:predict", "{\"instances\": [\"a\", 7]}", 400, "instances[1]: must be");
  expect(p, "POST", "/v1/models/jack:predict", "{\"instances\": [{\"input_ids\": [101, 40000]}]}", 400,
         "instances[0].input_ids[1]: 40000 is outside [0, 30522)");
  expect(p, "POST", "/v1/models/jack:predict", "{\"instances\": [{\"input_ids\": [101, 102], \"input_mask\": [1]}]}",
         400, "instances[0].input_mask: 1 values, but input_ids has 2");
  expect(p, "POST", "/v1/models/jack:predict", "{\"instances\": [{\"text_a\": \"x\", \"image\": 1}]}", 400,
         "unknown input \\\"image\\\"");
  expect(p, "POST", "/v1/models/jack:predict", "{\"signature_name\": \"other\", \"instances\": [\"x\"]}", 400,
         "\\\"other\\\" not found");
  expect(p, "POST", "/v1/models/jack:classify", "{\"instances\": [\"x\"]}", 400, "needs \\\"examples\\\"");
  /* 404: model, version, path; nothing outside the model is reachable */
  expect(p, "GET", "/v1/models/other", NULL, 404, "Servable not found for request: Latest(other)");
  expect(p, "POST", "/v1/models/other:predict", "{\"instances\": [\"x\"]}", 404, "Latest(other)");
  expect(p, "GET", "/v1/models/jack/versions/1", NULL, 404, "Specific(jack, 1)");
  expect(p, "GET", "/v1/models/jack/versions/abc", NULL, 404, "Malformed request");
  expect(p, "GET", "/v1/models/jack/labels", NULL, 404, NULL);
  expect(p, "GET", "/v2/models/jack", NULL, 404, NULL);
  expect(p, "GET", "/v1/models/../../etc/passwd", NULL, 404, NULL);
  /* 405 */
  expect(p, "GET", "/v1/models/jack:predict", NULL, 405, "use POST");
  expect(p, "POST", "/v1/models/jack", "{}", 405, "use GET");
  expect(p, "DELETE", "/v1/models/jack/metadata", NULL, 405, NULL);
  /* 413 */
  char big[6000];
  memset(big, ' ', sizeof big - 1);
  big[sizeof big - 1] = 0;
  memcpy(big, "{\"instances\": [\"x\"]}", 20);
  expect(p, "POST", "/v1/models/jack:predict", big, 413, "max_request_bytes");
  /* the server is still well */
  expect(p, "POST", "/v1/models/jack:predict", "{\"instances\": [\"play\"]}", 200, "predictions");

  /* metrics: counts by status */
  assert_int_equal(http(p, "GET", "/monitoring/prometheus/metrics", NULL, &resp), 200);
  assert_non_null(strstr(resp, "est_serving_request_count{model_name=\"jack\",status=\"413\"} 1\n"));
  assert_non_null(strstr(resp, "est_serving_request_count{model_name=\"jack\",status=\"405\"} 3\n"));
  assert_non_null(strstr(resp, "est_serving_request_count{model_name=\"jack\",status=\"400\"} 11\n"));
  assert_non_null(strstr(resp, "# TYPE est_serving_request_latency_seconds histogram"));
  assert_non_null(strstr(resp, "# TYPE est_serving_batch_size histogram"));
  free(resp);
  expect(p, "POST", "/monitoring/prometheus/metrics", "", 405, NULL);
  assert_int_equal(server_stop(&s), 0);
}

/* ---- concurrency ---- */

typedef struct client {
  int port, id, rounds;
  volatile int *stop;            /* loop until set (when rounds is 0) */
  int requests, failures;
  int instances;
  double tol, worst;             /* against the fp32 answers: 0 means 1e-5 */
} client;

static void *client_main(void *arg) {
  client *c = arg;
  for (int r = 0; c->rounds ? r < c->rounds : !*c->stop; r++) {
    int n = 1 + (c->id * 7 + r * 3) % 12;          /* 1..12 instances */
    const char *texts[12];
    for (int i = 0; i < n; i++) texts[i] = pool[(c->id + r + i * 5) % NPOOL];
    char *body = predict_body(texts, n), *resp = NULL;
    int status = http(c->port, "POST", "/v1/models/jack:predict", body, &resp);
    c->requests++;
    c->instances += n;
    if (status != 200 || !check_predictions_to(resp, "predictions", texts, n, c->tol > 0 ? c->tol : 1e-5, &c->worst))
      c->failures++;
    free(body);
    free(resp);
  }
  return NULL;
}

/* Whether the server's log has a line containing needle. */
static int log_has(const server *s, const char *needle) {
  char *log = test_read_file(s->log, NULL);
  int has = strstr(log, needle) != NULL;
  free(log);
  return has;
}

/* n clients of `rounds` requests each on port, every answer checked against the fp32 one to
 * tol (0: 1e-5); none may fail. Returns the instances sent; *worst gets the largest
 * difference seen. */
static int run_clients(int port, int n, int rounds, double tol, double *worst) {
  client c[32];
  pthread_t t[32];
  assert_true(n <= 32);
  for (int i = 0; i < n; i++) {
    c[i] = (client){.port = port, .id = i, .rounds = rounds, .tol = tol};
    assert_int_equal(pthread_create(&t[i], NULL, client_main, &c[i]), 0);
  }
  int total = 0;
  *worst = 0;
  for (int i = 0; i < n; i++) {
    pthread_join(t[i], NULL);
    assert_int_equal(c[i].failures, 0);
    total += c[i].instances;
    if (c[i].worst > *worst) *worst = c[i].worst;
  }
  return total;
}

static void test_32_concurrent_clients(void **state) {
  (void)state;
  server s;
  server_start(&s, "concurrent", "--enable_batching --max_batch_size=16 --batch_timeout_micros=2000"
                                 " --file_system_poll_wait_seconds=0");
  double worst;
  int total = run_clients(s.port, 32, 4, 0, &worst);
  /* every example went through exactly one forward pass */
  assert_int_equal((int)metric(s.port, "est_serving_batch_size_sum{model_name=\"jack\"} "), total);
  assert_int_equal(server_stop(&s), 0);
}

/* --precision=bf16 on the server: its batch thread and request threads run the bf16 GEMMs
 * (on AMX tiles where the CPU has them: tile state is asked for once per process and
 * configured per thread), and every answer is within 0.02 of the fp32 one, as est predict's
 * (test_precision_cli.c). Where the CPU runs bf16 the answers must differ from fp32
 * somewhere, else the flag did nothing. */
static void test_bf16_serves_close_to_fp32(void **state) {
  (void)state;
  server s;
  server_start(&s, "bf16", "--precision=bf16 --enable_batching --max_batch_size=8 --batch_timeout_micros=1000"
                           " --file_system_poll_wait_seconds=0");
  double worst;
  run_clients(s.port, 8, 3, 0.02, &worst);
  print_message("serve bf16 vs fp32: max |diff| %.3g\n", worst);
  if (log_has(&s, "precision bf16: matmul inputs in bfloat16")) assert_true(worst > 0);
  else assert_true(log_has(&s, "this CPU has no AVX512-BF16"));
  assert_int_equal(server_stop(&s), 0);
}


/* A request whose body has only partly arrived: headers + the first `sent` bytes. */
static int partial_open(int port, const char *body, size_t sent) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(fd >= 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
  char head[512];
  int hn = snprintf(head, sizeof head, "POST /v1/models/jack:predict HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                    "Content-Length: %zu\r\n\r\n", strlen(body));
  assert_int_equal(send(fd, head, (size_t)hn, MSG_NOSIGNAL), hn);
  assert_int_equal(send(fd, body, sent, MSG_NOSIGNAL), (ssize_t)sent);
  return fd;
}

/* Sends the rest and reads the answer; returns the status. */
static int partial_finish(int fd, const char *body, size_t sent, char **resp) {
  size_t n = strlen(body) - sent;
  assert_int_equal(send(fd, body + sent, n, MSG_NOSIGNAL), (ssize_t)n);
  static char buf[65536];
  size_t len = 0;
  ssize_t got;
  while (len < sizeof buf - 1 && (got = read(fd, buf + len, sizeof buf - 1 - len)) > 0) len += (size_t)got;
  buf[len] = 0;
  close(fd);
  char *sep = strstr(buf, "\r\n\r\n");
  *resp = strdup(sep ? sep + 4 : "");
  return !strncmp(buf, "HTTP/1.", 7) ? atoi(buf + 9) : -1;
}

static void wait_metric(int port, const char *name, double value) {
  for (int i = 0; metric(port, name) != value; i++) {
    if (i > 6000) fail_msg("%s never reached %g", name, value);
    usleep(10000);
  }
}

/* The batcher waits (up to the minute of batch_timeout_micros) while a request is still
 * arriving: with one request's body held back, three one-example requests queue, and when
 * the fourth completes all four run as exactly one forward pass. */
static void test_requests_coalesce(void **state) {
  (void)state;
  server s;
  server_start(&s, "coalesce", "--enable_batching --max_batch_size=4 --batch_timeout_micros=60000000"
                               " --file_system_poll_wait_seconds=0");
  const char *body = "{\"instances\": [\"all work and no play\"]}";
  int held = partial_open(s.port, body, 5);
  wait_metric(s.port, "est_serving_requests_arriving{model_name=\"jack\"} ", 1);
  client c[3];
  pthread_t t[3];
  for (int i = 0; i < 3; i++) {
    c[i] = (client){.port = s.port, .id = 12 * i, .rounds = 1};  /* 1 + (12i * 7) % 12 = 1 instance */
    assert_int_equal(pthread_create(&t[i], NULL, client_main, &c[i]), 0);
  }
  wait_metric(s.port, "est_serving_queued_examples{model_name=\"jack\"} ", 3);
  assert_int_equal(metric(s.port, "est_serving_batch_size_count{model_name=\"jack\"} "), 0);
  char *resp;
  assert_int_equal(partial_finish(held, body, 5, &resp), 200);
  const char *texts[1] = {"all work and no play"};
  assert_true(check_predictions(resp, "predictions", texts, 1));
  free(resp);
  for (int i = 0; i < 3; i++) {
    pthread_join(t[i], NULL);
    assert_int_equal(c[i].failures, 0);
    assert_int_equal(c[i].instances, 1);
  }
  assert_int_equal((int)metric(s.port, "est_serving_batch_size_count{model_name=\"jack\"} "), 1);
  assert_int_equal((int)metric(s.port, "est_serving_batch_size_sum{model_name=\"jack\"} "), 4);
  /* a lone request runs as its own batch (nothing else is arriving: no minute-long wait) */
  expect(s.port, "POST", "/v1/models/jack:predict", "{\"instances\": [\"play\"]}", 200, "predictions");
  assert_int_equal((int)metric(s.port, "est_serving_batch_size_count{model_name=\"jack\"} "), 2);
  assert_int_equal(server_stop(&s), 0);
}

/* ---- versions ---- */

/* Waits for a log line (a hang guard of about a minute, not a speed check). */
static void wait_log(const server *s, const char *needle) {
  for (int i = 0; !log_has(s, needle); i++) {
    if (i > 3000) fail_msg("no '%s' in the server's log", needle);
    usleep(20000);
  }
}

static void test_version_swap_under_load(void **state) {
  (void)state;
  server s;
  server_start(&s, "swap", "--enable_batching --max_batch_size=8 --batch_timeout_micros=1000"
                           " --file_system_poll_wait_seconds=0.2");
  volatile int stop = 0;
  enum { N = 8 };
  client c[N];
  pthread_t t[N];
  for (int i = 0; i < N; i++) {
    c[i] = (client){.port = s.port, .id = i, .stop = &stop};
    assert_int_equal(pthread_create(&t[i], NULL, client_main, &c[i]), 0);
  }
  /* a new version of the same weights, written while the clients run */
  est_model_meta meta;
  char p[1400], dir[1024], ckpt[1024];
  snprintf(p, sizeof p, "%s/est_model.json", est_servable_dir(ref));
  assert_int_equal(est_model_meta_read(&meta, p), EST_OK);
  snprintf(ckpt, sizeof ckpt, "%s/model.ckpt-30", out_dir);
  assert_int_equal(est_export_write(export_base, ckpt, &meta, EST_TEST_DATA "/vocab_uncased.txt", dir, sizeof dir), EST_OK);
  est_model_meta_clear(&meta);
  const char *leaf = strrchr(dir, '/') + 1;
  char want[64];
  snprintf(want, sizeof want, "serving jack version %s", leaf);
  wait_log(&s, want);
  expect(s.port, "GET", "/v1/models/jack", NULL, 200, leaf);
  char path[128];
  snprintf(path, sizeof path, "/v1/models/jack/versions/%lld", (long long)est_servable_version(ref));
  expect(s.port, "GET", path, NULL, 404, "Specific(jack,");

  /* a newer but broken version (complete-looking, garbage weights) is skipped */
  char broken[1200];
  snprintf(broken, sizeof broken, "%s/%lld", export_base, atoll(leaf) + 1000);
  snprintf(p, sizeof p, "%s/variables", broken);
  assert_int_equal(est_mkdirs(p), EST_OK);
  snprintf(p, sizeof p, "%s/variables/variables.index", broken);
  test_write_bytes(p, "not an sstable", 14);
  snprintf(p, sizeof p, "%s/est_model.json", broken);
  char *json = NULL;
  {
    char src[1200];
    snprintf(src, sizeof src, "%s/est_model.json", dir);
    json = test_read_file(src, NULL);
  }
  test_write_bytes(p, json, strlen(json));
  free(json);
  snprintf(want, sizeof want, "version %lld under", atoll(leaf) + 1000);
  wait_log(&s, want);
  expect(s.port, "GET", "/v1/models/jack", NULL, 200, leaf);

  stop = 1;
  for (int i = 0; i < N; i++) {
    pthread_join(t[i], NULL);
    assert_true(c[i].requests > 0);
    assert_int_equal(c[i].failures, 0);
  }
  assert_true(log_has(&s, "not loaded, still serving the current one"));
  assert_int_equal(server_stop(&s), 0);
}

/* Each version runs the precision its est_model.json records (est/precision.h): a server
 * started on an fp32 version swaps to a bf16 one (same weights) and answers exactly what an
 * in-process bf16 servable of it answers, while the process still holds the fp32 servable
 * `ref`, which keeps giving its own fp32 bits. Without AVX512-BF16 the new version runs fp32
 * and the test says so. Runs last: the bf16 version stays the latest in export_base. */
static void test_versions_of_two_precisions(void **state) {
  (void)state;
  server s;
  server_start(&s, "twoprec", "--enable_batching --max_batch_size=8 --batch_timeout_micros=1000"
                              " --file_system_poll_wait_seconds=0.2");
  char *resp = NULL;
  const char *texts[NPOOL];
  for (int i = 0; i < NPOOL; i++) texts[i] = pool[i];
  char *body = predict_body(texts, NPOOL);
  assert_int_equal(http(s.port, "POST", "/v1/models/jack:predict", body, &resp), 200);
  assert_true(check_predictions_to(resp, "predictions", texts, NPOOL, 1e-7, NULL)); /* fp32, as ref */
  free(resp);

  est_model_meta meta;
  char p[1400], dir[1024], ckpt[1024];
  snprintf(p, sizeof p, "%s/est_model.json", est_servable_dir(ref));
  assert_int_equal(est_model_meta_read(&meta, p), EST_OK);
  assert_string_equal(meta.precision, "fp32");
  snprintf(meta.precision, sizeof meta.precision, "bf16");
  snprintf(ckpt, sizeof ckpt, "%s/model.ckpt-30", out_dir);
  assert_int_equal(est_export_write(export_base, ckpt, &meta, EST_TEST_DATA "/vocab_uncased.txt", dir, sizeof dir), EST_OK);
  est_model_meta_clear(&meta);
  char want[64];
  snprintf(want, sizeof want, "serving jack version %s", strrchr(dir, '/') + 1);
  wait_log(&s, want);
  est_servable *bf16;
  assert_int_equal(est_servable_load(&bf16, dir, 8), EST_OK);
  const int runs_bf16 = est_servable_set_precision(bf16, EST_PRECISION_BF16) == EST_PRECISION_BF16;
  if (!runs_bf16) print_message("no AVX512-BF16 here: the bf16 version runs fp32\n");
  assert_int_equal(est_servable_precision(ref), EST_PRECISION_FP32);

  assert_int_equal(http(s.port, "POST", "/v1/models/jack:predict", body, &resp), 200);
  json_t *j = json_loads(resp, 0, NULL), *preds = json_object_get(j, "predictions");
  assert_int_equal((int)json_array_size(preds), NPOOL);
  int differs = 0;
  for (int i = 0; i < NPOOL; i++) {
    float want_bf16[2], want_fp32[2];
    servable_probs(bf16, texts[i], NULL, want_bf16);
    expected(texts[i], NULL, want_fp32);
    for (int c = 0; c < 2; c++) {
      const float got = (float)json_number_value(json_array_get(json_array_get(preds, i), c));
      if (got != want_bf16[c]) fail_msg("\"%s\"[%d]: served %.9g, the bf16 servable %.9g", texts[i], c, got, want_bf16[c]);
      differs |= got != want_fp32[c];
    }
  }
  json_decref(j);
  free(resp), free(body);
  assert_int_equal(differs, runs_bf16); /* bf16 really ran where the CPU has it, and only there */
  if (runs_bf16) assert_true(log_has(&s, "precision bf16, as"));
  est_servable_free(bf16);
  assert_int_equal(server_stop(&s), 0);
}

/* ---- SIGTERM ---- */

static void *one_request(void *arg) {
  int *port_status = arg;
  char *resp = NULL;
  port_status[1] = http(port_status[0], "POST", "/v1/models/jack:predict", "{\"instances\": [\"play\"]}", &resp);
  free(resp);
  return NULL;
}

/* A request waiting in the queue (its batch waits for a held-back request, up to a
 * minute) when SIGTERM comes is answered at once, and the server exits 0 once the held
 * connection is gone. */
static void test_sigterm_finishes_in_flight(void **state) {
  (void)state;
  server s;
  server_start(&s, "sigterm", "--enable_batching --max_batch_size=4 --batch_timeout_micros=60000000"
                              " --file_system_poll_wait_seconds=0");
  const char *body = "{\"instances\": [\"play\"]}";
  int held = partial_open(s.port, body, 3);
  wait_metric(s.port, "est_serving_requests_arriving{model_name=\"jack\"} ", 1);
  int ps[2] = {s.port, 0};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, one_request, ps), 0);
  wait_metric(s.port, "est_serving_queued_examples{model_name=\"jack\"} ", 1);
  kill(s.pid, SIGTERM);
  pthread_join(t, NULL);
  assert_int_equal(ps[1], 200);
  close(held);
  int status;
  assert_int_equal(waitpid(s.pid, &status, 0), s.pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  assert_true(log_has(&s, "SIGTERM: no new connections"));
  assert_true(log_has(&s, "stopped"));
  /* the version was warmed up at the largest batch the batcher forms: 4 rows, full length */
  char warm[96];
  snprintf(warm, sizeof warm, "warm-up: one batch of 4 x %d tokens in ", (int)est_servable_meta(ref)->max_seq_length);
  assert_true(log_has(&s, warm));
  /* nothing listens any more */
  assert_int_equal(http(s.port, "GET", "/v1/models/jack", NULL, NULL), -1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_endpoints_and_errors),
    cmocka_unit_test(test_32_concurrent_clients),
    cmocka_unit_test(test_bf16_serves_close_to_fp32),
    cmocka_unit_test(test_requests_coalesce),
    cmocka_unit_test(test_version_swap_under_load),
    cmocka_unit_test(test_sigterm_finishes_in_flight),
    cmocka_unit_test(test_versions_of_two_precisions),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
