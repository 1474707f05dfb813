/* The shared command line of the `est run_*` tasks (tools/task_cli.c, est/bert_task.h). */
#ifndef EST_TOOLS_TASK_CLI_H
#define EST_TOOLS_TASK_CLI_H

#include <stddef.h>

#include "est/bert_task.h"
#include "est/flags.h"

/* Optional parts of the shared group: do_predict and predict_batch_size (a task with a
 * predict mode); do_export and export_dir (a task with a servable head). NO_EVAL leaves out
 * do_eval and eval_batch_size, and the flags of evaluation during training (a task without an
 * eval mode: run_squad.py has neither). */
enum { EST_CLI_TASK_PREDICT = 1, EST_CLI_TASK_EXPORT = 2, EST_CLI_TASK_NO_EVAL = 4 };
/* The most flags the shared group adds. */
enum { EST_CLI_TASK_MAX_FLAGS = 48 };

/* Writes the shared flags (the reference scripts' names, help and defaults, then est's own
 * marked [est]) bound to f's fields into out; returns how many (<= EST_CLI_TASK_MAX_FLAGS). */
size_t est_cli_task_flags(est_task_flags *f, est_flag *out, unsigned groups);
/* Replaces the help text of flag `name` (a task whose script words a shared flag its way). */
void est_cli_flag_help(est_flag *flags, size_t n, const char *name, const char *help);
/* Parses argv (argv[0] is the command's name); prints --help. Returns -1 to go on, else the
 * exit code (0 after --help, 2 on a usage error, with the message on stderr). Logs one note
 * per TPU flag of f's group (known by the field it is bound to) given: accepted and ignored. */
int est_cli_task_parse(const char *cmd, const char *usage, const est_task_flags *f, est_flag *flags, size_t n,
                       int argc, char **argv);
/* Starts MPI when under mpirun, installs the stop handlers, runs run(ctx) and returns the
 * exit code: 0, 1 (error on stderr, the other ranks aborted) or 128 + signal after a
 * requested stop (commands.h). */
int est_cli_task_run(const char *cmd, int argc, char **argv, est_status (*run)(void *ctx), void *ctx);

#endif
