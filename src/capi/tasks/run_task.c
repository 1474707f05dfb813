/* est_capi_run_task (est/c_api.h): the command line's run_* commands inside libest.so, for
 * est.run_classifier(**flags) and the other tasks in Python (docs/python.md §6). Built into
 * libest.so only, beside the tools/ files of those commands (CMakeLists.txt, est_shared): the
 * static libest.a has no command-line code.
 *
 * A command installs SIGINT/SIGTERM handlers that ask training to stop at the end of its step
 * (tools/stop_signals.c); here they last for the run only: the caller's are put back after,
 * and the stop request is cleared before and after, so a later run starts afresh. */
#include <signal.h>
#include <string.h>

#include "../../../tools/commands.h"
#include "est/c_api.h"
#include "est/estimator.h"

int est_capi_run_task(const char *task, int argc, char **argv) {
  static const struct {
    const char *name;
    int (*run)(int, char **);
  } tasks[] = {
    {"run_classifier", est_cmd_run_classifier},
    {"run_squad", est_cmd_run_squad},
    {"run_ner", est_cmd_run_ner},
    {"run_pretraining", est_cmd_run_pretraining},
  };
  for (size_t i = 0; i < sizeof tasks / sizeof *tasks; i++) {
    if (strcmp(task, tasks[i].name)) continue;
    struct sigaction old_int, old_term;
    sigaction(SIGINT, NULL, &old_int);
    sigaction(SIGTERM, NULL, &old_term);
    est_clear_stop_request();
    est_error_clear();
    int rc = tasks[i].run(argc, argv);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    est_clear_stop_request();
    return rc;
  }
  est_error(EST_ERR_INVALID_ARGUMENT, "no task %s (run_classifier, run_squad, run_ner, run_pretraining)", task);
  return 2;
}
