/* Shared helpers for est's cmocka tests (header-only; include after cmocka.h; the tests
 * link libest). */
#ifndef EST_TEST_UTIL_H
#define EST_TEST_UTIL_H

#include <omp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "est/file.h"
#include "nn/kernel_choice.h"

/* A fresh directory under $TMPDIR (or /tmp): "est-test-XXXXXX". */
static inline void test_make_tmpdir(char *buf, size_t size) {
  const char *base = getenv("TMPDIR");
  int n = snprintf(buf, size, "%s/est-test-XXXXXX", base && *base ? base : "/tmp");
  if (n < 0 || (size_t)n >= size) {
    fprintf(stderr, "TMPDIR is too long for a test directory (%zu bytes at most)\n", size - 1);
    abort();
  }
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

/* A tmpdir fixture for cmocka (cmocka_unit_test_setup_teardown or a group's setup):
 * a fresh test_tmpdir before, removed with everything in it after. */
static char test_tmpdir[256];

static inline int test_tmpdir_setup(void **state) {
  (void)state;
  test_make_tmpdir(test_tmpdir, sizeof test_tmpdir);
  return 0;
}

static inline int test_tmpdir_teardown(void **state) {
  (void)state;
  test_remove_tree(test_tmpdir);
  return 0;
}

/* "<test_tmpdir>/<name>" in one of 8 rotating buffers, so a call can take a few. */
static inline const char *test_tmp_path(const char *name) {
  static char buf[8][1024];
  static unsigned k;
  char *p = buf[k++ & 7];
  snprintf(p, sizeof buf[0], "%s/%s", test_tmpdir, name);
  return p;
}

/* Hex digits ("0a1b2c") to bytes; `out` has room for strlen(hex) / 2. Returns the count. */
static inline size_t test_unhex(const char *hex, uint8_t *out) {
  size_t n = 0;
  for (const char *p = hex; p[0] && p[1]; p += 2) {
    unsigned v;
    if (sscanf(p, "%2x", &v) != 1) fail_msg("not a hex digit pair at '%.2s'", p);
    out[n++] = (uint8_t)v;
  }
  return n;
}

/* The same into a malloc'ed buffer (never NULL, even for ""); *size is its length. */
static inline uint8_t *test_unhex_alloc(const char *hex, size_t *size) {
  uint8_t *out = malloc(strlen(hex) / 2 + 1);
  *size = test_unhex(hex, out);
  return out;
}

/* Writes a file with plain stdio: no temp file, no fsync, so a test can rewrite one
 * thousands of times, and it does not lean on the est_file code some tests check. */
static inline void test_write_bytes(const char *path, const void *data, size_t size) {
  FILE *f = fopen(path, "wb");
  if (!f) fail_msg("cannot create %s", path);
  if (size && fwrite(data, 1, size, f) != size) fail_msg("cannot write %s", path);
  if (fclose(f) != 0) fail_msg("cannot close %s", path);
}

/* est_read_file (the whole file, NUL after its last byte, so text reads as a string),
 * failing the test with the reason when the file cannot be read; size may be NULL. */
static inline char *test_read_file(const char *path, size_t *size) {
  uint8_t *data = NULL;
  size_t n = 0;
  if (est_read_file(path, &data, &n) != EST_OK) fail_msg("cannot read %s: %s", path, est_error_message());
  if (size) *size = n;
  return (char *)data;
}

/* Fails unless dir_a/name and dir_b/name hold the same bytes. */
static inline void test_assert_same_file(const char *dir_a, const char *dir_b, const char *name) {
  char a[1024], b[1024];
  snprintf(a, sizeof a, "%s/%s", dir_a, name);
  snprintf(b, sizeof b, "%s/%s", dir_b, name);
  size_t na = 0, nb = 0;
  char *da = test_read_file(a, &na), *db = test_read_file(b, &nb);
  if (!da || !db) fail_msg("cannot read %s or %s", a, b);
  if (na != nb || memcmp(da, db, na)) fail_msg("%s and %s differ", a, b);
  free(da);
  free(db);
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

/* How many distinct OpenMP threads run iterations of a static parallel loop, as est's
 * kernels are written, under the current thread setting. A test that compares 1 thread
 * with 2 asserts this is 2 for its second run: with OMP_THREAD_LIMIT=1, one CPU or a
 * setting that did not take, it would otherwise compare one thread with itself and pass. */
static inline int test_threads_that_ran(void) {
  enum { MAXT = 256, ITERS = 4096 };
  unsigned char seen[MAXT] = {0};
#pragma omp parallel for schedule(static)
  for (int i = 0; i < ITERS; i++) {
    int t = omp_get_thread_num();
    if (t < MAXT) seen[t] = 1; /* every writer stores the same value */
  }
  int n = 0;
  for (int t = 0; t < MAXT; t++) n += seen[t];
  return n;
}

/* The text of file `name` in `dir`, NUL-terminated (free it); fails the test when absent. */
static inline char *test_read_in(const char *dir, const char *name) {
  char path[4096];
  if (est_path_join(path, sizeof path, dir, name) != EST_OK) fail_msg("path too long: %s/%s", dir, name);
  return test_read_file(path, NULL);
}

/* Runs a command (stderr merged into the returned log; free it) and fails the test unless
 * it exits 0, showing the command and its log. */
static inline char *test_run_ok(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline char *test_run_ok(const char *fmt, ...) {
  char cmd[8192];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  char *log = NULL;
  int rc = test_run(&log, 1, "%s", cmd);
  if (rc != 0) fail_msg("exit %d for: %s\n%s", rc, cmd, log);
  return log;
}

/* How many lines of `text` contain `a` (and `b`, unless NULL); lines are looked at up to
 * their first 2047 bytes. */
static inline int test_count_lines_with(const char *text, const char *a, const char *b) {
  int n = 0;
  for (const char *line = text; line && *line;) {
    const char *end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    char buf[2048];
    snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf ? len : sizeof buf - 1), line);
    if (strstr(buf, a) && (!b || strstr(buf, b))) n++;
    line = end ? end + 1 : NULL;
  }
  return n;
}

/* First in main() of a test that ctest also runs once per forced kernel (tests/CMakeLists.txt,
 * EST_KERNEL, docs/testing.md §3): a name est does not know fails the test (exit 1), a kernel
 * this CPU lacks skips it (exit 77, ctest's SKIP_RETURN_CODE), saying which; so the test never
 * runs quietly on another kernel than the one it was registered for. */
static inline void test_forced_kernel_or_skip(void) {
  est_status st = est_kernel_env_status();
  if (st == EST_OK) {
    est_kernel k = est_kernel_get();
    if (k != EST_KERNEL_AUTO) printf("kernel forced: EST_KERNEL=%s\n", est_kernel_name(k));
    return;
  }
  int unknown = st == EST_ERR_INVALID_ARGUMENT;
  printf("%s: %s\n", unknown ? "failed" : "skipped", est_error_message());
  fflush(stdout);
  exit(unknown ? 1 : 77);
}

#endif
