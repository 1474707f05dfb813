/* The `est` command line: one file per subcommand (tools/cmd_*.c), each exporting
 * `int est_cmd_NAME(int argc, char **argv)` where argv[0] is the subcommand's name.
 * Exit codes: 0 success, 1 the work failed (message on stderr), 2 bad usage, 128 + N
 * stopped by signal N after saving (training commands: 143 SIGTERM, 130 SIGINT). */
#ifndef EST_TOOLS_COMMANDS_H
#define EST_TOOLS_COMMANDS_H

#include <stdint.h>
#include <stdio.h>

#include "est/flags.h"
#include "est/status.h"

/* stop_signals.c: the training commands' SIGTERM/SIGINT handlers (first: stop after the
 * step and save; second: default action), and the exit code for a final status (128 +
 * signo for a stop on request, else 0 / 1). */
void est_cli_install_stop_handlers(void);
int est_cli_exit_code(est_status st);

/* cli.c: parses argv (argv[0] is the command's name) into flags and up to max_pos
 * positional arguments (pos may be NULL when max_pos is 0). Returns -1 to go on, 0 after
 * --help was printed, 2 after a usage error "est CMD: message" on stderr (followed by the
 * usage text when usage_on_error). */
int est_cli_parse(const char *cmd, const char *usage, est_flag *flags, int nflags, int argc, char **argv, char **pos,
                  int *npos, int max_pos, int usage_on_error);
/* est_cli_parse for a command of flags only (no positional arguments): flags is the array
 * itself, counted here. */
#define EST_CLI_PARSE_FLAGS(cmd, usage, flags, argc, argv, usage_on_error) \
  est_cli_parse(cmd, usage, flags, (int)(sizeof flags / sizeof *flags), argc, argv, NULL, NULL, 0, usage_on_error)
/* --num_threads and --precision, est's own flags on every command that runs the model
 * (checked and applied by est_cli_apply_runtime_flags below). */
#define EST_CLI_RUNTIME_FLAGS(num_threads, precision)                                                   \
  EST_FLAG_INT("num_threads", num_threads, "[est] Threads for the math kernels; 0 = OpenMP's default.", 0), \
      EST_FLAG_STRING("precision", precision, EST_PRECISION_FLAG_HELP, 0)
/* The generic tsv task's columns, labels and header (est/processors.h), the same on
 * `est convert` and `est run_classifier`: 0-based columns, -1 none, test.tsv's -2 = as train. */
#define EST_CLI_TSV_FLAGS(text_a, text_b, label, test_text_a, test_text_b, test_label, labels, skip_header)            \
  EST_FLAG_INT("tsv_text_a_column", text_a, "[est] task tsv: 0-based column of text_a in the .tsv files.", 0),      \
      EST_FLAG_INT("tsv_text_b_column", text_b, "[est] task tsv: 0-based column of text_b; -1 = single-sentence task.", \
                   0),                                                                                             \
      EST_FLAG_INT("tsv_label_column", label, "[est] task tsv: 0-based column of the label; -1 = no label column.", 0), \
      EST_FLAG_INT("tsv_test_text_a_column", test_text_a,                                                          \
                   "[est] task tsv: text_a's column in test.tsv; -2 = as --tsv_text_a_column.", 0),                 \
      EST_FLAG_INT("tsv_test_text_b_column", test_text_b,                                                          \
                   "[est] task tsv: text_b's column in test.tsv; -2 = as --tsv_text_b_column.", 0),                 \
      EST_FLAG_INT("tsv_test_label_column", test_label,                                                            \
                   "[est] task tsv: the label's column in test.tsv; -2 = as --tsv_label_column, -1 = none (every "  \
                   "example gets the first label).", 0),                                                           \
      EST_FLAG_STRING("tsv_labels", labels,                                                                        \
                      "[est] task tsv: comma-separated label list, in the order of the classifier's outputs "      \
                      "(test_results.tsv's columns). Unset: the distinct labels of the training file, sorted.", 0), \
      EST_FLAG_BOOL("tsv_skip_header", skip_header, "[est] task tsv: skip the first line of each file.", 0)
/* The model-running commands' --precision and --num_threads, after their other checks:
 * flags_ok 0 (a check failed, message in est_error_message()) or a bad --precision prints
 * "est CMD: message" and returns 2; else sets the thread count, logs the precision's lines
 * (the model is set from the flag when it loads) and returns -1. */
int est_cli_apply_runtime_flags(const char *cmd, int flags_ok, const char *precision, int64_t num_threads);
/* Sets a servable's precision: the --precision flag when given (checked and logged by
 * est_cli_apply_runtime_flags), else the one its est_model.json records, with a log line
 * saying where it came from. Each servable keeps its own (est/serving.h). */
struct est_servable;
est_status est_cli_apply_model_precision(const char *flag, struct est_servable *s);

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
int est_cmd_run_squad(int argc, char **argv);
int est_cmd_run_ner(int argc, char **argv);
int est_cmd_run_rerank(int argc, char **argv);
int est_cmd_create_pretraining_data(int argc, char **argv);
int est_cmd_predict(int argc, char **argv);
int est_cmd_rerank(int argc, char **argv);
int est_cmd_serve(int argc, char **argv);
int est_cmd_extract_features(int argc, char **argv);
int est_cmd_embed(int argc, char **argv);
int est_cmd_squad_eval(int argc, char **argv);

#endif
