/* `est serve` as the tests run it: a server process on an ephemeral 127.0.0.1 port and the
 * tests' own minimal HTTP/1.1 client (Connection: close), shared by tests/test_serve.c and
 * tests/test_serve_abuse.c. Include after cmocka.h; the including test sets export_base (the
 * export the server serves) before server_start. */
#ifndef EST_TESTS_SERVE_TEST_CLIENT_H
#define EST_TESTS_SERVE_TEST_CLIENT_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "est/file.h"
#include "test_util.h"

static char export_base[600];

/* ---- a server process ---- */

typedef struct server {
  pid_t pid;
  int port;
  char log[700];
} server;

static inline void server_start(server *s, const char *tag, const char *extra) {
  char outp[700];
  snprintf(outp, sizeof outp, "%s/%s.out", test_tmpdir, tag);
  snprintf(s->log, sizeof s->log, "%s/%s.err", test_tmpdir, tag);
  char cmd[4096];
  snprintf(cmd, sizeof cmd,
           "exec " EST_BIN " serve --model_base_path=%s --model_name=jack --rest_api_address=127.0.0.1"
           " --rest_api_port=0 --num_threads=1 %s > %s 2> %s", export_base, extra, outp, s->log);
  s->pid = fork();
  assert_true(s->pid >= 0);
  if (s->pid == 0) {
    execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
    _exit(127);
  }
  /* Wait for "listening on 127.0.0.1:PORT" (or for the process to die). */
  for (;;) {
    char *text = NULL;
    uint8_t *data;
    size_t n;
    if (est_read_file(outp, &data, &n) == EST_OK) text = (char *)data;
    const char *at = text ? strstr(text, "listening on 127.0.0.1:") : NULL;
    if (at) {
      s->port = atoi(at + strlen("listening on 127.0.0.1:"));
      free(text);
      break;
    }
    free(text);
    int status;
    if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
      char *err = test_read_file(s->log, NULL);
      fail_msg("est serve exited before listening:\n%s", err);
    }
    usleep(20000);
  }
  assert_true(s->port > 0);
}

/* SIGTERM; returns the exit status. */
static inline int server_stop(server *s) {
  kill(s->pid, SIGTERM);
  int status;
  assert_int_equal(waitpid(s->pid, &status, 0), s->pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* ---- a minimal client ---- */

/* One request; returns the status code, *body (malloc'ed) gets the response body. */
static inline int http(int port, const char *method, const char *path, const char *body, char **resp) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(fd >= 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    close(fd);
    if (resp) *resp = strdup("");
    return -1;
  }
  size_t blen = body ? strlen(body) : 0;
  char head[512];
  int hn = snprintf(head, sizeof head,
                    "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\n"
                    "Content-Length: %zu\r\n\r\n", method, path, blen);
  ssize_t w = send(fd, head, (size_t)hn, MSG_NOSIGNAL);
  for (size_t off = 0; w >= 0 && off < blen; off += (size_t)w) w = send(fd, body + off, blen - off, MSG_NOSIGNAL);
  size_t cap = 8192, len = 0;
  char *buf = malloc(cap);
  ssize_t got;
  while ((got = read(fd, buf + len, cap - len - 1)) > 0) {
    len += (size_t)got;
    if (cap - len < 2) buf = realloc(buf, cap *= 2);
  }
  buf[len] = 0;
  close(fd);
  int status = -1;
  if (len > 12 && !strncmp(buf, "HTTP/1.", 7)) status = atoi(buf + 9);
  char *sep = strstr(buf, "\r\n\r\n");
  if (resp) *resp = strdup(sep ? sep + 4 : "");
  free(buf);
  return status;
}

static inline void expect(int port, const char *method, const char *path, const char *body, int status, const char *needle) {
  char *resp = NULL;
  int got = http(port, method, path, body, &resp);
  if (got != status || (needle && !strstr(resp, needle)))
    fail_msg("%s %s: got %d, want %d with '%s':\n%s", method, path, got, status, needle ? needle : "", resp);
  free(resp);
}

/* A number from the server's Prometheus metrics (-1 when the line is missing). */
static inline double metric(int port, const char *name) {
  char *resp = NULL;
  assert_int_equal(http(port, "GET", "/monitoring/prometheus/metrics", NULL, &resp), 200);
  const char *at = strstr(resp, name);
  double v = at ? atof(at + strlen(name)) : -1;
  free(resp);
  return v;
}

#endif
