/* `est`: dispatches to one subcommand per file (see commands.h). */
#include <stdio.h>
#include <string.h>

#include "commands.h"

static const est_command commands[] = {
  /* Each subcommand adds its line here. */
  {"tfrecord", "dump or count the records of a TFRecord file", est_cmd_tfrecord},
  {"ckpt", "list, print or convert TF checkpoints and safetensors files", est_cmd_ckpt},
  {"tokenize", "BERT FullTokenizer: stdin lines to WordPiece tokens or ids", est_cmd_tokenize},
  {"convert", "GLUE/TSV task files to run_classifier's train/eval/predict.tf_record", est_cmd_convert},
  {"create_pretraining_data", "raw text to masked-LM/next-sentence TFRecords, as create_pretraining_data.py", est_cmd_create_pretraining_data},
  {"run_classifier", "fine-tune / evaluate / predict with BERT, as run_classifier.py", est_cmd_run_classifier},
  {"run_pretraining", "pretrain BERT (masked LM + next sentence), as run_pretraining.py", est_cmd_run_pretraining},
  {NULL, NULL, NULL},
};

static void print_usage(FILE *out) {
  fprintf(out,
          "usage: est COMMAND [ARGS...]\n\n"
          "est: tf.estimator and BERT's run_classifier in plain C.\n\ncommands:\n");
  for (const est_command *c = commands; c->name; c++) fprintf(out, "  %-16s %s\n", c->name, c->summary);
  fprintf(out, "\nRun 'est COMMAND --help' for a command's flags.\n");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    print_usage(stderr);
    return 2;
  }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
    print_usage(stdout);
    return 0;
  }
  if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
    printf("est 0.1.0\n");
    return 0;
  }
  for (const est_command *c = commands; c->name; c++)
    if (!strcmp(argv[1], c->name)) return c->run(argc - 1, argv + 1);
  fprintf(stderr, "est: unknown command '%s'\n\n", argv[1]);
  print_usage(stderr);
  return 2;
}
