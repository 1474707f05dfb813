/* Helpers for the preemption tests (test_preempt.c: run_classifier, test_preempt_pretraining.c:
 * run_pretraining): run `est` with a fault (tests/fault/fault_hooks.c) and get its wait status
 * and log, and read a checkpoint's every tensor for a bit-for-bit comparison. Header-only; include
 * after cmocka.h and test_util.h (it uses test_tmpdir); the test links libest. */
#ifndef EST_TESTS_PREEMPT_UTIL_H
#define EST_TESTS_PREEMPT_UTIL_H

#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "est/ckpt.h"
#include "est/est.h"

/* Runs `est` (through sh -c "exec ...", so the wait status is est's own); with `fault`
 * ("EST_FAULT_SIGNAL_AT_STEP=..." or NULL) set in est's environment along with the
 * LD_PRELOAD shim tests/fault/fault_hooks.c that acts on it (est alone gets the shim, not
 * the shell). The merged output goes to *log. Returns the wait status. */
static int run_est(const char *fault, char **log, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int run_est(const char *fault, char **log, const char *fmt, ...) {
  char cmd[8192], logpath[1024];
  int n = fault ? snprintf(cmd, sizeof cmd,
                           "exec env LD_PRELOAD='" EST_FAULT_HOOKS_SHIM "'"
                           " ASAN_OPTIONS=\"$ASAN_OPTIONS:verify_asan_link_order=0\" %s " EST_BIN " ", fault)
                : snprintf(cmd, sizeof cmd, "exec " EST_BIN " ");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd + n, sizeof cmd - (size_t)n, fmt, ap);
  va_end(ap);
  snprintf(logpath, sizeof logpath, "%s/run.log", test_tmpdir);
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) _exit(126);
    dup2(fd, 1), dup2(fd, 2);
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
    _exit(127);
  }
  int status = -1;
  assert_true(waitpid(pid, &status, 0) == pid);
  *log = test_read_file(logpath, NULL);
  return status;
}

static int exit_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }

static int exists_in(const char *dir, const char *name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return access(path, F_OK) == 0;
}

/* Every tensor of `prefix`, name then bytes, concatenated: what "bit-identical" compares. */
static uint8_t *all_tensors(const char *prefix, size_t *size, int *all_finite) {
  est_ckpt_reader *r;
  assert_int_equal(est_ckpt_reader_open(&r, prefix), EST_OK);
  size_t cap = 1 << 20, len = 0;
  uint8_t *buf = malloc(cap);
  *all_finite = 1;
  for (size_t i = 0; i < est_ckpt_reader_count(r); i++) {
    const char *name = est_ckpt_reader_name(r, i);
    est_tensor t;
    assert_int_equal(est_ckpt_reader_read(r, name, &t), EST_OK);
    size_t nb = est_tensor_num_bytes(&t), nl = strlen(name) + 1;
    while (len + nl + nb > cap) buf = realloc(buf, cap *= 2);
    memcpy(buf + len, name, nl), len += nl;
    memcpy(buf + len, t.data, nb), len += nb;
    if (t.dtype == EST_DT_FLOAT)
      for (size_t k = 0; k < nb / sizeof(float); k++) *all_finite &= isfinite(((const float *)t.data)[k]) != 0;
    est_tensor_free(&t);
  }
  est_ckpt_reader_close(r);
  *size = len;
  return buf;
}

static void latest(const char *dir, char *prefix, size_t size) {
  assert_int_equal(est_ckpt_latest(dir, prefix, size), EST_OK);
}

#endif
