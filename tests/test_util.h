/* Shared helpers for est's cmocka tests (header-only; include after cmocka.h). */
#ifndef EST_TEST_UTIL_H
#define EST_TEST_UTIL_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* A fresh directory under $TMPDIR (or /tmp): "est-test-XXXXXX". */
static inline void test_make_tmpdir(char *buf, size_t size) {
  const char *base = getenv("TMPDIR");
  snprintf(buf, size, "%s/est-test-XXXXXX", base && *base ? base : "/tmp");
  if (!mkdtemp(buf)) {
    perror("mkdtemp");
    abort();
  }
}

static inline void test_remove_tree(const char *dir) {
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", dir);
}

/* Runs a shell command, captures stdout (+ stderr when `merge_stderr`) into a malloc'ed
 * string, and returns the exit status (or -1 when it did not exit normally). */
static inline int test_run(char **output, int merge_stderr, const char *fmt, ...) {
  char cmd[8192];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  if (merge_stderr) strncat(cmd, " 2>&1", sizeof cmd - strlen(cmd) - 1);
  FILE *p = popen(cmd, "r");
  if (!p) return -1;
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap);
  size_t got;
  while ((got = fread(buf + len, 1, cap - len - 1, p)) > 0) {
    len += got;
    if (cap - len < 2) buf = realloc(buf, cap *= 2);
  }
  buf[len] = 0;
  int status = pclose(p);
  if (output) *output = buf;
  else free(buf);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

#endif
