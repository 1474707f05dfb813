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
/* The fine-tuning tasks' own flags in their reference scripts' words (run_classifier.py and
 * run_squad.py word them alike), bound to the fields of the same names in c, a task config.
 * A vocabulary read from a file, or from a HuggingFace --init_checkpoint=DIR (est_cli_task_vocab): */
#define EST_CLI_VOCAB_FLAG(c)                                                                                     \
  EST_FLAG_STRING("vocab_file", &(c)->vocab_file,                                                                 \
                  "The vocabulary file that the BERT model was trained on (vocab.txt or tokenizer.json). "        \
                  "[est] Unset with a HuggingFace --init_checkpoint=DIR: DIR's tokenizer.json, else vocab.txt.", 0)
#define EST_CLI_LOWER_CASE_FLAG(c)                                                                                \
  EST_FLAG_BOOL("do_lower_case", &(c)->do_lower_case,                                                             \
                "Whether to lower case the input text. Should be True for uncased models and False for cased "    \
                "models.", 0)
#define EST_CLI_EPOCH_FLAGS(c)                                                                                    \
  EST_FLAG_FLOAT("num_train_epochs", &(c)->num_train_epochs, "Total number of training epochs to perform.", 0),  \
      EST_FLAG_FLOAT("warmup_proportion", &(c)->warmup_proportion,                                                \
                     "Proportion of training to perform linear learning rate warmup for. E.g., 0.1 = 10% of "     \
                     "training.", 0)

/* A task command's whole flag list into out (ntask + EST_CLI_TASK_MAX_FLAGS entries): the
 * task's first `lead` flags (its script's leading ones), the shared group of `groups`, then
 * the task's others, in its script's order. Returns how many. */
size_t est_cli_task_flag_list(est_task_flags *f, const est_flag *task_flags, size_t ntask, size_t lead,
                              unsigned groups, est_flag *out);
/* The vocabulary a task reads: vocab_file, or when it is unset and --init_checkpoint is a
 * HuggingFace model directory, that directory (its tokenizer.json or vocab.txt; docs/hf.md §5). */
const char *est_cli_task_vocab(const char *vocab_file, const est_task_flags *f);
/* A task command from its own flags to its exit code: the whole flag list
 * (est_cli_task_flag_list), est_cli_task_parse, the vocabulary (est_cli_task_vocab, where the
 * task has one), validate (its error is a usage error, exit 2), then est_cli_task_run. */
typedef struct est_cli_task_command {
  const char *name, *usage;
  est_task_flags *common;
  const est_flag *task_flags;
  size_t num_task_flags, lead;  /* lead: the task's flags listed before the shared group */
  unsigned groups;              /* the shared group's (EST_CLI_TASK_*) */
  const char **vocab_file;      /* the task's --vocab_file; NULL: none */
  est_status (*validate)(void *ctx);
  est_status (*run)(void *ctx);
  void *ctx;
} est_cli_task_command;
int est_cli_task_main(const est_cli_task_command *t, int argc, char **argv);
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
