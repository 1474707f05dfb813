/* `est serve` under abuse (over real HTTP on 127.0.0.1, the server of serve_test_client.h):
 *   - 200 idle sockets and a slowloris request (one header byte per 100 ms) do not keep a
 *     normal client from being answered, within --max_connections and beyond it; the
 *     slowloris and the idle sockets are cut at --rest_api_timeout_in_ms;
 *   - URLs naming other models, versions or paths ("..", "%2e%2e", "%2F", absolute paths,
 *     "versions/../1") get 404, and the server opens nothing while answering them (inotify
 *     on the export, its version and a valid-looking version outside it);
 *   - a body announced over --max_request_bytes gets 413 from its headers alone, a chunked
 *     one is cut off at the limit;
 *   - JSON nested 100000 deep and lists longer than any request may hold get 400 before
 *     parsing.
 * No timing thresholds: every wait is a hang guard of tens of seconds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/inotify.h>

#include "est/est.h"
#include "serve_test_client.h"
#include "serving_test_model.h"

static char out_dir[512];

static int group_setup(void **state) {
  test_tmpdir_setup(state);
  snprintf(out_dir, sizeof out_dir, "%s/run", test_tmpdir);
  snprintf(export_base, sizeof export_base, "%s/export", out_dir);
  serving_train_and_export(out_dir);
  return 0;
}

/* ---- raw sockets ---- */

static int raw_connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(fd >= 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
  return fd;
}

static void send_all(int fd, const char *text) {
  size_t n = strlen(text);
  assert_int_equal(send(fd, text, n, MSG_NOSIGNAL), (ssize_t)n);
}

/* Waits up to `seconds` for the server to answer or close fd; returns what it said
 * (malloc'ed, "" when it only closed), NULL when the wait ran out. */
static char *await_server(int fd, int seconds) {
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap);
  for (int waited = 0; waited < seconds * 10;) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int rc = poll(&p, 1, 100);
    if (rc == 0) {
      waited++;
      continue;
    }
    ssize_t got = read(fd, buf + len, cap - len - 1);
    if (got <= 0) {
      buf[len] = 0;
      return buf;     /* end of file or reset: the server closed it */
    }
    len += (size_t)got;
    if (cap - len < 2) buf = realloc(buf, cap *= 2);
  }
  free(buf);
  return NULL;
}

/* A predict of one text answered 200, retrying while connections are refused (at most about
 * a minute); returns the number of tries. */
static int answered_predict(int port) {
  for (int tries = 1; tries < 1200; tries++) {
    char *resp = NULL;
    int status = http(port, "POST", "/v1/models/jack:predict", "{\"instances\": [\"play\"]}", &resp);
    int ok = status == 200 && strstr(resp, "\"predictions\": [[") != NULL;
    if (status > 0 && status != 200) fail_msg("predict answered %d: %s", status, resp);
    free(resp);
    if (ok) return tries;
    usleep(50000);
  }
  fail_msg("a normal request was never answered");
  return 0;
}

/* ---- idle and slow connections ---- */

static void wait_metric_at_least(int port, const char *name, double value) {
  for (int i = 0; metric(port, name) < value; i++) {
    if (i > 3000) fail_msg("%s never reached %g", name, value);
    usleep(10000);
  }
}

enum { NIDLE = 200 };

typedef struct slowloris {
  int fd;
  int bytes;            /* header bytes trickled */
  char *answer;         /* what the server did: "" closed, "HTTP/1.1 408 ..." answered */
} slowloris;

/* One header byte every 100 ms (each byte is activity, so a silence timeout never fires)
 * until the server answers or closes; gives up after a minute. */
static void *slowloris_main(void *arg) {
  slowloris *sl = arg;
  for (sl->bytes = 0; sl->bytes < 600; sl->bytes++) {
    struct pollfd p = {.fd = sl->fd, .events = POLLIN};
    if (poll(&p, 1, 100) > 0) break;
    if (send(sl->fd, "x", 1, MSG_NOSIGNAL) != 1) break;
  }
  sl->answer = await_server(sl->fd, 1);
  return NULL;
}

static void start_slowloris(slowloris *sl, pthread_t *t, int port) {
  sl->fd = raw_connect(port);
  send_all(sl->fd, "POST /v1/models/jack:predict HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ");
  assert_int_equal(pthread_create(t, NULL, slowloris_main, sl), 0);
}

/* Within the connection limit (the defaults: 512 connections, 30 s): a normal request is
 * answered at its first try while 200 sockets sit idle and a slowloris trickles. */
static void test_idle_connections_within_limit(void **state) {
  (void)state;
  server s;
  server_start(&s, "idle", "--file_system_poll_wait_seconds=0");
  int idle[NIDLE];
  for (int i = 0; i < NIDLE; i++) idle[i] = raw_connect(s.port);
  wait_metric_at_least(s.port, "est_serving_connections_open{model_name=\"jack\"} ", NIDLE);
  slowloris sl = {0};
  pthread_t t;
  start_slowloris(&sl, &t, s.port);
  for (int i = 0; i < 3; i++) assert_int_equal(answered_predict(s.port), 1);
  expect(s.port, "GET", "/v1/models/jack", NULL, 200, "AVAILABLE");
  for (int i = 0; i < NIDLE; i++) close(idle[i]);
  shutdown(sl.fd, SHUT_RDWR);   /* ends the trickle */
  pthread_join(t, NULL);
  close(sl.fd);
  free(sl.answer);
  assert_int_equal(server_stop(&s), 0);
}

/* Beyond it (--max_connections=64, --rest_api_timeout_in_ms=1000): the slowloris is cut
 * with a 408 although it never falls silent, every idle socket is closed by the server,
 * and a normal client, refused while the slots are full, is answered once they are freed. */
static void test_slow_connections_are_cut(void **state) {
  (void)state;
  server s;
  server_start(&s, "slow", "--max_connections=64 --rest_api_timeout_in_ms=1000 --file_system_poll_wait_seconds=0");
  slowloris sl = {0};
  pthread_t t;
  start_slowloris(&sl, &t, s.port);
  wait_metric_at_least(s.port, "est_serving_connections_open{model_name=\"jack\"} ", 1);
  int idle[NIDLE];
  for (int i = 0; i < NIDLE; i++) idle[i] = raw_connect(s.port);
  assert_true(answered_predict(s.port) >= 1);
  pthread_join(t, NULL);
  if (!sl.answer) fail_msg("the slowloris connection was never cut (%d bytes trickled)", sl.bytes);
  assert_true(sl.answer[0] == 0 || strstr(sl.answer, "HTTP/1.1 408") == sl.answer);
  free(sl.answer);
  close(sl.fd);
  for (int i = 0; i < NIDLE; i++) {
    char *said = await_server(idle[i], 30);
    if (!said) fail_msg("idle socket %d was never closed by the server", i);
    free(said);
    close(idle[i]);
  }
  assert_true(metric(s.port, "est_serving_connections_timed_out{model_name=\"jack\"} ") >= 1);
  assert_int_equal(answered_predict(s.port), 1);
  assert_int_equal(server_stop(&s), 0);
}

/* ---- paths ---- */

static void copy_file(const char *from, const char *to) {
  size_t n;
  char *data = test_read_file(from, &n);
  test_write_bytes(to, data, n);
  free(data);
}

static void test_paths_outside_the_model(void **state) {
  (void)state;
  /* A complete-looking version 7 outside model_base_path, next to a sentinel file. */
  char version_dir[1024], outside[700], p[1200], q[1200];
  int64_t v;
  assert_int_equal(est_export_resolve(export_base, version_dir, sizeof version_dir, &v), EST_OK);
  snprintf(outside, sizeof outside, "%s/outside", test_tmpdir);
  snprintf(p, sizeof p, "%s/7/variables", outside);
  assert_int_equal(est_mkdirs(p), EST_OK);
  snprintf(p, sizeof p, "%s/est_model.json", version_dir);
  snprintf(q, sizeof q, "%s/7/est_model.json", outside);
  copy_file(p, q);
  snprintf(p, sizeof p, "%s/variables/variables.index", version_dir);
  snprintf(q, sizeof q, "%s/7/variables/variables.index", outside);
  copy_file(p, q);
  snprintf(q, sizeof q, "%s/sentinel", outside);
  test_write_bytes(q, "x", 1);

  server s;
  server_start(&s, "paths", "--file_system_poll_wait_seconds=0");
  expect(s.port, "GET", "/v1/models/jack", NULL, 200, NULL);   /* started and serving */
  /* From here on nothing may open the export, its version or anything outside. */
  int in = inotify_init1(IN_NONBLOCK);
  assert_true(in >= 0);
  const uint32_t mask = IN_OPEN | IN_ACCESS;
  assert_true(inotify_add_watch(in, export_base, mask) >= 0);
  assert_true(inotify_add_watch(in, version_dir, mask) >= 0);
  snprintf(p, sizeof p, "%s/variables", version_dir);
  assert_true(inotify_add_watch(in, p, mask) >= 0);
  assert_true(inotify_add_watch(in, test_tmpdir, mask) >= 0);
  assert_true(inotify_add_watch(in, outside, mask) >= 0);
  snprintf(p, sizeof p, "%s/7", outside);
  assert_true(inotify_add_watch(in, p, mask) >= 0);

  char abs_path[1200];
  snprintf(abs_path, sizeof abs_path, "/v1/models/jack/versions/7%s", outside);
  const char *const evil[] = {
      "/v1/models/jack/versions/../1", "/v1/models/jack/versions/%2e%2e/1", "/v1/models/jack/versions/..%2F1",
      "/v1/models/jack/versions/7", "/v1/models/jack/versions/1%2F..%2F7", "/v1/models/jack%2Fversions%2F7",
      "/v1/models/..%2F..%2Foutside/versions/7", "/v1/models/%2e%2e/versions/7", "/v1/models/../outside",
      "/v1/models/jack/../../outside/7", "/v1/models//outside/7", "/v1/models/jack/versions//7",
      "/v1/models/jack/versions/7/../../../sentinel", "/v1/models/jack/versions/-1", "/v1/models/jack/versions/0x7",
      "/v1/models/jack/versions/99999999999999999999", "/v1/models/jack/metadata/..",
      "/etc/passwd", "//etc/passwd", "/v1/models/%2Fetc%2Fpasswd", "/v1/models/jack/versions/%37", "/v1/models/jack/.",
      "/v1/models/outside", abs_path};
  for (size_t i = 0; i < sizeof evil / sizeof evil[0]; i++) {
    /* "%37" decodes to "7", a version not served */
    char *resp = NULL;
    int get = http(s.port, "GET", evil[i], NULL, &resp);
    free(resp);
    char post_path[1300];
    snprintf(post_path, sizeof post_path, "%s:predict", evil[i]);
    int post = http(s.port, "POST", post_path, "{\"instances\": [\"play\"]}", &resp);
    if (get != 404 || post != 404) fail_msg("%s: GET %d, POST :predict %d (want 404): %s", evil[i], get, post, resp);
    free(resp);
  }
  char ev[4096];
  ssize_t n = read(in, ev, sizeof ev);
  if (n > 0) {
    const struct inotify_event *e = (const struct inotify_event *)ev;
    fail_msg("the server opened %s while answering the 404s", e->len ? e->name : "a watched directory");
  }
  assert_true(n < 0 && errno == EAGAIN);
  /* the watch does see an open (so the silence above means something) */
  free(test_read_file(q, NULL));
  assert_true(read(in, ev, sizeof ev) > 0);
  close(in);
  expect(s.port, "POST", "/v1/models/jack:predict", "{\"instances\": [\"play\"]}", 200, "predictions");
  assert_int_equal(server_stop(&s), 0);
}

/* ---- bodies ---- */

static void test_oversized_bodies(void **state) {
  (void)state;
  server s;
  server_start(&s, "bodies", "--max_request_bytes=4096 --file_system_poll_wait_seconds=0");
  /* A terabyte announced, nothing sent: answered from the headers. */
  int fd = raw_connect(s.port);
  send_all(fd, "POST /v1/models/jack:predict HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000000000000\r\n\r\n");
  char *said = await_server(fd, 30);
  if (!said || strncmp(said, "HTTP/1.1 413", 12)) fail_msg("want a 413 from the headers, got: %s", said ? said : "(nothing)");
  assert_non_null(strstr(said, "--max_request_bytes=4096"));
  free(said);
  close(fd);
  /* Expect: 100-continue: a 413, never the 100 that would invite the body. */
  fd = raw_connect(s.port);
  send_all(fd, "POST /v1/models/jack:predict HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5000\r\n"
               "Expect: 100-continue\r\n\r\n");
  said = await_server(fd, 30);
  if (!said || strncmp(said, "HTTP/1.1 413", 12)) fail_msg("want a 413 instead of 100, got: %s", said ? said : "(nothing)");
  free(said);
  close(fd);
  /* A chunked body is cut off at the limit: of 64 MiB offered, the server takes little and
   * closes (the sends fail); it would otherwise read all of it. */
  fd = raw_connect(s.port);
  send_all(fd, "POST /v1/models/jack:predict HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n");
  static char chunk[1024 + 16];
  int hn = snprintf(chunk, sizeof chunk, "400\r\n");
  memset(chunk + hn, ' ', 1024);
  memcpy(chunk + hn + 1024, "\r\n", 2);
  const size_t clen = (size_t)hn + 1026;
  size_t sent = 0;
  while (sent < ((size_t)64 << 20) && send(fd, chunk, clen, MSG_NOSIGNAL) == (ssize_t)clen) sent += clen;
  if (sent >= ((size_t)64 << 20)) fail_msg("the server read a 64 MiB chunked body past --max_request_bytes=4096");
  close(fd);
  /* and it is still well */
  expect(s.port, "POST", "/v1/models/jack:predict", "{\"instances\": [\"play\"]}", 200, "predictions");
  assert_true(metric(s.port, "est_serving_request_count{model_name=\"jack\",status=\"413\"} ") >= 3);
  assert_int_equal(server_stop(&s), 0);
}

/* n copies of `unit` between head and tail (malloc'ed). */
static char *repeat(const char *head, const char *unit, size_t n, const char *tail) {
  size_t hl = strlen(head), ul = strlen(unit), tl = strlen(tail);
  char *s = malloc(hl + ul * n + tl + 1), *w = s;
  memcpy(w, head, hl), w += hl;
  for (size_t i = 0; i < n; i++) memcpy(w, unit, ul), w += ul;
  memcpy(w, tail, tl + 1);
  return s;
}

static void test_deep_and_huge_json(void **state) {
  (void)state;
  server s;
  /* at most 4 x 8 = 32 instances per request; rows of max_seq_length 32 */
  server_start(&s, "json", "--max_batch_size=4 --max_enqueued_batches=8 --file_system_poll_wait_seconds=0");
  char *deep = repeat("{\"instances\": ", "[", 100000, "");
  expect(s.port, "POST", "/v1/models/jack:predict", deep, 400, "nested deeper than 64");
  free(deep);
  deep = repeat("", "[", 100000, "");
  expect(s.port, "POST", "/v1/models/jack:classify", deep, 400, "nested deeper than 64");
  free(deep);
  deep = repeat("{\"instances\": [\"play\"], \"x\": ", "{\"a\": ", 100000, "1");
  expect(s.port, "POST", "/v1/models/jack:predict", deep, 400, "nested deeper than 64");
  free(deep);
  /* instances beyond the cap: 400 naming it, from the pre-scan */
  char *many = repeat("{\"instances\": [\"play\"", ", \"play\"", 5000, "]}");
  expect(s.port, "POST", "/v1/models/jack:predict", many, 400, "at most 32 instances");
  free(many);
  many = repeat("{\"examples\": [{\"text_a\": \"play\"}", ", {\"text_a\": \"play\"}", 40, "]}");
  expect(s.port, "POST", "/v1/models/jack:classify", many, 400, "at most 32 instances");
  free(many);
  /* 33 instances: past the cap by one */
  many = repeat("{\"instances\": [\"play\"", ", \"play\"", 32, "]}");
  expect(s.port, "POST", "/v1/models/jack:predict", many, 400, "at most 32");
  free(many);
  many = repeat("{\"instances\": [{\"input_ids\": [101", ", 7", 100000, "]}]}");
  expect(s.port, "POST", "/v1/models/jack:predict", many, 400, "more than 32 entries");
  free(many);
  /* at the cap it works: 32 instances */
  many = repeat("{\"instances\": [\"play\"", ", \"play\"", 31, "]}");
  expect(s.port, "POST", "/v1/models/jack:predict", many, 200, "predictions");
  free(many);
  /* commas and brackets inside strings are text, not structure */
  char *text = repeat("{\"instances\": [\"", "[,{", 300, "\"]}");
  expect(s.port, "POST", "/v1/models/jack:predict", text, 200, "predictions");
  free(text);
  assert_int_equal(server_stop(&s), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_idle_connections_within_limit),
    cmocka_unit_test(test_slow_connections_are_cut),
    cmocka_unit_test(test_paths_outside_the_model),
    cmocka_unit_test(test_oversized_bodies),
    cmocka_unit_test(test_deep_and_huge_json),
  };
  return cmocka_run_group_tests(tests, group_setup, test_tmpdir_teardown);
}
