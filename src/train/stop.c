/* Stop requests (est_request_stop, est/estimator.h): one process-wide flag that a signal
 * handler may set, read by the train loop once per step, and by evaluate and predict
 * once per batch. (A test raises a signal inside a chosen training step through the
 * before_step hook of est/fault_hooks.h.)
 *
 * The flag is a volatile sig_atomic_t, the one object type C lets a handler store to
 * (C11 7.14.1.1); it holds signo + 1, so 0 means "no request" and a request without a
 * signal (signo 0) is still seen. Nothing here installs a handler (docs/estimator.md §7). */
#include <signal.h>
#include <stdio.h>

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
