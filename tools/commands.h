/* The `est` command line: one file per subcommand (tools/cmd_*.c), each exporting
 * `int est_cmd_NAME(int argc, char **argv)` where argv[0] is the subcommand's name.
 * Exit codes: 0 success, 1 the work failed (message on stderr), 2 bad usage, 128 + N
 * stopped by signal N after saving (training commands: 143 SIGTERM, 130 SIGINT). */
#ifndef EST_TOOLS_COMMANDS_H
#define EST_TOOLS_COMMANDS_H

#include "est/status.h"

/* stop_signals.c: the training commands' SIGTERM/SIGINT handlers (first: stop after the
 * step and save; second: default action), and the exit code for a final status (128 +
 * signo for a stop on request, else 0 / 1). */
void est_cli_install_stop_handlers(void);
int est_cli_exit_code(est_status st);

typedef struct est_command {
  const char *name;
  const char *summary;
  int (*run)(int argc, char **argv);
} est_command;

int est_cmd_tfrecord(int argc, char **argv);
int est_cmd_ckpt(int argc, char **argv);
int est_cmd_tokenize(int argc, char **argv);
int est_cmd_convert(int argc, char **argv);
int est_cmd_run_classifier(int argc, char **argv);
int est_cmd_run_pretraining(int argc, char **argv);
int est_cmd_create_pretraining_data(int argc, char **argv);
int est_cmd_predict(int argc, char **argv);
int est_cmd_serve(int argc, char **argv);
int est_cmd_extract_features(int argc, char **argv);

#endif
