/* SIGTERM / SIGINT for the training commands (run_classifier, run_pretraining): the first
 * asks the Estimator to stop at the end of the step (est_request_stop: it saves a
 * checkpoint of that step and training returns EST_ERR_CANCELLED), the second ends the
 * process at once. The library installs no handler itself (docs/estimator.md §7); this
 * is the command line's choice.
 *
 * The handler does two async-signal-safe things only: it stores the flag and sets both
 * signals back to their default action (sigaction is async-signal-safe, POSIX.1-2008
 * 2.4.3), so a second SIGTERM or SIGINT is not caught again and terminates the process
 * by the kernel's hand, with the signal as its status. SA_RESTART keeps the file writes
 * and reads in flight from failing with EINTR when the first one lands. */
#include <signal.h>
#include <string.h>

#include "commands.h"
#include "est/estimator.h"

static void on_stop_signal(int signo) {
  est_request_stop(signo);
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(SIGTERM, &dfl, NULL);
  sigaction(SIGINT, &dfl, NULL);
}

void est_cli_install_stop_handlers(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaddset(&sa.sa_mask, SIGTERM);  /* the other one waits until the handler is done */
  sigaddset(&sa.sa_mask, SIGINT);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
}

int est_cli_exit_code(est_status st) {
  int signo = 0;
  if (st == EST_ERR_CANCELLED && est_stop_requested(&signo) && signo > 0) return 128 + signo;
  return st == EST_OK ? 0 : 1;
}
