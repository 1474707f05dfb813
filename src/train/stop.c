/* Stop requests (est_request_stop, est/estimator.h): one process-wide flag that a signal
 * handler may set, read by the train loop once per step, and by evaluate and predict
 * once per batch. Plus the test hook that raises a signal inside a chosen training step.
 *
 * The flag is a volatile sig_atomic_t, the one object type C lets a handler store to
 * (C11 7.14.1.1); it holds signo + 1, so 0 means "no request" and a request without a
 * signal (signo 0) is still seen. Nothing here installs a handler (docs/estimator.md §7). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "train/estimator_internal.h"

static volatile sig_atomic_t stop_flag = 0;

void est_request_stop(int signo) { stop_flag = (sig_atomic_t)(signo >= 0 && signo < 1000 ? signo + 1 : 1); }

int est_stop_requested(int *signo) {
  sig_atomic_t v = stop_flag;
  if (signo) *signo = v > 0 ? (int)v - 1 : 0;
  return v > 0;
}

void est_clear_stop_request(void) { stop_flag = 0; }

const char *est_stop_signal_name(int signo, char *buf, size_t size) {
  switch (signo) {
    case 0: snprintf(buf, size, "a stop request"); break;
    case SIGTERM: snprintf(buf, size, "SIGTERM"); break;
    case SIGINT: snprintf(buf, size, "SIGINT"); break;
    case SIGHUP: snprintf(buf, size, "SIGHUP"); break;
    case SIGUSR1: snprintf(buf, size, "SIGUSR1"); break;
    case SIGUSR2: snprintf(buf, size, "SIGUSR2"); break;
    default: snprintf(buf, size, "signal %d", signo); break;
  }
  return buf;
}

/* EST_FAULT_SIGNAL_AT_STEP="<step>:<signo>[:<count>[:<rank>]]": the train loop raises
 * signal <signo> <count> times (default 1) at the start of global step <step> (on rank
 * <rank> only when given, so a test can ask one rank of N), after reading
 * that step's batch and before the model call, so a test can preempt a run (the est
 * command line's handlers see a real signal) at a point that does not depend on timing.
 * Read once per train call; unset or malformed: no effect. */
est_signal_fault est_signal_fault_from_env(int rank) {
  est_signal_fault f = {.step = -1, .signo = 0, .count = 0};
  const char *spec = getenv("EST_FAULT_SIGNAL_AT_STEP");
  if (!spec || !*spec) return f;
  char *end;
  long long step = strtoll(spec, &end, 10);
  if (*end != ':' || step < 0) return f;
  long signo = strtol(end + 1, &end, 10);
  long count = 1;
  if (*end == ':') count = strtol(end + 1, &end, 10);
  long only_rank = -1;
  if (*end == ':') only_rank = strtol(end + 1, &end, 10);
  if (only_rank >= 0 && only_rank != rank) return f;
  if (*end || signo <= 0 || signo >= 65 || count < 1 || count > 8) return f;
  f.step = step;
  f.signo = (int)signo;
  f.count = (int)count;
  return f;
}

void est_signal_fault_fire(const est_signal_fault *f, int64_t global_step) {
  if (f->step != global_step) return;
  for (int i = 0; i < f->count; i++) raise(f->signo);
}
