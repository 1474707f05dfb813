/* Test-only LD_PRELOAD shim that drives libest's fault seam (est/fault_hooks.h) inside the
 * `est` command, from environment variables the library itself never reads:
 *
 *   EST_FAULT_KILL_SAVE="<step>:<phase>"
 *       SIGKILL the process inside the checkpoint save of global step <step>, at <phase>
 *       "bundle" (the checkpoint's files are complete, the `checkpoint` state file does not
 *       name them yet) or "state" (the state file names them, older checkpoints are not
 *       deleted yet).
 *   EST_FAULT_SIGNAL_AT_STEP="<step>:<signo>[:<count>[:<rank>]]"
 *       raise signal <signo> <count> times (1 to 8, default 1) at the start of global step
 *       <step>, after that step's batch was read and before the model call, on rank <rank>
 *       only when given (every rank otherwise), so a test preempts a run (the command
 *       line's own handlers see a real signal) at a point that does not depend on timing.
 *
 * Unset or empty: the shim does nothing. Set: its constructor parses the value and installs
 * the hooks with the executable's est_set_fault_hooks, found by dlsym (the `est` target
 * exports that one symbol: CMakeLists.txt). A value that does not parse, or a process that
 * does not export the seam, is a broken test, so the shim says so on stderr and aborts;
 * it never lets a drill pass by doing nothing. So preload it into `est` alone, never into
 * a shell or mpirun that starts it (`env LD_PRELOAD=... est ...`, `mpirun -x LD_PRELOAD=...`).
 *
 * It interposes no libc call (the write faults are tests/fault/fault_inject.c's), so the
 * run it drives does its I/O exactly as without it; under ASan add
 * ASAN_OPTIONS=verify_asan_link_order=0. docs/testing.md, "Fault injection", lists the
 * tests that use it. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/fault_hooks.h"

static long long kill_step = -1;
static const char *kill_phase;   /* "bundle" or "state" */
static long long signal_step = -1;
static int signal_signo, signal_count;
static long signal_rank = -1;    /* -1: every rank */

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("fault_hooks: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  abort();
}

static void before_step(void *ctx, int rank, int64_t global_step) {
  (void)ctx;
  if (global_step != signal_step || (signal_rank >= 0 && rank != signal_rank)) return;
  for (int i = 0; i < signal_count; i++) raise(signal_signo);
}

static void checkpoint_phase(void *ctx, int64_t step, const char *phase) {
  (void)ctx;
  if (step == kill_step && !strcmp(phase, kill_phase)) raise(SIGKILL);
}

static void parse_kill_save(const char *spec) {
  char *end;
  kill_step = strtoll(spec, &end, 10);
  if (end == spec || *end != ':' || kill_step < 0 || (strcmp(end + 1, "bundle") && strcmp(end + 1, "state")))
    die("EST_FAULT_KILL_SAVE=\"%s\": want <step>:bundle or <step>:state", spec);
  kill_phase = end + 1;   /* points into the environment, which lives as long as the process */
}

static void parse_signal_at_step(const char *spec) {
  char *end, *p = NULL;
  signal_step = strtoll(spec, &end, 10);
  int ok = end != spec && *end == ':' && signal_step >= 0;
  long signo = ok ? strtol(p = end + 1, &end, 10) : 0, count = 1;
  ok = ok && end != p && signo > 0 && signo < 65;
  if (ok && *end == ':') {
    count = strtol(p = end + 1, &end, 10);
    ok = end != p && count >= 1 && count <= 8;
  }
  if (ok && *end == ':') {
    signal_rank = strtol(p = end + 1, &end, 10);
    ok = end != p && signal_rank >= 0;
  }
  if (!ok || *end) die("EST_FAULT_SIGNAL_AT_STEP=\"%s\": want <step>:<signo>[:<count 1-8>[:<rank>]]", spec);
  signal_signo = (int)signo;
  signal_count = (int)count;
}

__attribute__((constructor)) static void fault_hooks_init(void) {
  const char *kill = getenv("EST_FAULT_KILL_SAVE"), *sig = getenv("EST_FAULT_SIGNAL_AT_STEP");
  int want_kill = kill && *kill, want_signal = sig && *sig;
  if (!want_kill && !want_signal) return;
  if (want_kill) parse_kill_save(kill);
  if (want_signal) parse_signal_at_step(sig);
  void (*set)(const est_fault_hooks *) = (void (*)(const est_fault_hooks *))dlsym(RTLD_DEFAULT, "est_set_fault_hooks");
  if (!set)
    die("%s is set but this process exports no est_set_fault_hooks (preload the shim into `est` only; "
        "a program linked with libest.a needs -Wl,--export-dynamic-symbol=est_set_fault_hooks)",
        want_kill ? "EST_FAULT_KILL_SAVE" : "EST_FAULT_SIGNAL_AT_STEP");
  est_fault_hooks h = {.before_step = want_signal ? before_step : NULL,
                       .checkpoint_phase = want_kill ? checkpoint_phase : NULL};
  set(&h);
}
