/* `est run_pretraining`: google-research/bert's run_pretraining.py, same flags, same files.
 * The shared flags of every run_* come from the task driver's group (task_cli.c); this file
 * adds run_pretraining.py's own. */
#include <stdio.h>

#include "commands.h"
#include "est/bert_pretraining.h"
#include "est/run_pretraining.h"
#include "task_cli.h"

static const char usage[] =
    "usage: est run_pretraining --bert_config_file=FILE --input_file=GLOBS --output_dir=DIR\n"
    "                           [--do_train] [--do_eval] [flags...]\n\n"
    "Pretrains BERT (masked LM + next sentence) on records written by est create_pretraining_data,\n"
    "as google-research/bert's run_pretraining.py. --input_file is comma-separated, each a glob.\n"
    "Writes model.ckpt-N checkpoints (Google's variable names, cls/* heads included) and\n"
    "eval_results.txt under output_dir; the checkpoints fine-tune with est run_classifier\n"
    "--init_checkpoint. Data parallel: `mpirun -np N est run_pretraining ...`.";

static est_status run_task(void *ctx) { return est_run_pretraining_main(ctx); }

int est_cmd_run_pretraining(int argc, char **argv) {
  est_run_pretraining_config c = est_run_pretraining_config_default();
  const est_flag task_flags[] = {
    EST_FLAG_STRING("input_file", &c.input_file, "Input TF example files (can be a glob or comma separated).", 1),
    EST_FLAG_INT("max_predictions_per_seq", &c.max_predictions_per_seq,
                 "Maximum number of masked LM predictions per sequence. Must match data generation.", 0),
    EST_FLAG_INT("num_train_steps", &c.num_train_steps, "Number of training steps.", 0),
    EST_FLAG_INT("num_warmup_steps", &c.num_warmup_steps, "Number of warmup steps.", 0),
    EST_FLAG_INT("max_eval_steps", &c.max_eval_steps, "Maximum number of eval steps.", 0),
  };
  enum { NTASK = sizeof task_flags / sizeof *task_flags };
  est_flag flags[NTASK + EST_CLI_TASK_MAX_FLAGS];
  size_t n = est_cli_task_flags(&c.common, flags, 0); /* no predict mode in run_pretraining.py */
  est_cli_flag_help(flags, n, "max_seq_length",
                    "The maximum total input sequence length after WordPiece tokenization. Sequences longer than "
                    "this will be truncated, and sequences shorter than this will be padded. Must match data "
                    "generation.");
  est_cli_flag_help(flags, n, "seed",
                    "[est] Seed for initialisation, dropout and shuffling; 0 (the default) = draw one from the "
                    "clock and record it in the checkpoint.");
  for (size_t i = 0; i < NTASK; i++) flags[n++] = task_flags[i];
  int rc = est_cli_task_parse("run_pretraining", usage, &c.common, flags, n, argc, argv);
  if (rc >= 0) return rc;
  if (est_run_pretraining_validate(&c) != EST_OK) {
    fprintf(stderr, "est run_pretraining: %s\n", est_error_message());
    return 2;
  }
  return est_cli_task_run("run_pretraining", argc, argv, run_task, &c);
}
