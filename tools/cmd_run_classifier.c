/* `est run_classifier`: google-research/bert's run_classifier.py, same flags, same files.
 * The shared flags of every run_* come from the task driver's group (task_cli.c); this file
 * adds run_classifier.py's own, then est's ("[est]"). */
#include <stdio.h>

#include "commands.h"
#include "est/run_classifier.h"
#include "task_cli.h"

static const char usage[] =
    "usage: est run_classifier --task_name=TASK --data_dir=DIR --vocab_file=FILE\n"
    "                          --bert_config_file=FILE --output_dir=DIR [--do_train]\n"
    "                          [--do_eval] [--do_predict] [flags...]\n\n"
    "Fine-tunes BERT for sequence classification, as google-research/bert's run_classifier.py.\n"
    "Tasks: cola, mnli, mnli-mm, mrpc, qnli, rte, sst-2 (or sst2), wnli, xnli, and tsv (a generic\n"
    "TSV file set: "
    "train.tsv, dev.tsv, test.tsv, columns chosen by the --tsv_* flags).\n"
    "Writes under output_dir: train.tf_record, eval.tf_record, predict.tf_record,\n"
    "model.ckpt-N checkpoints, eval_results.txt and test_results.tsv.\n"
    "Data parallel: `mpirun -np N est run_classifier ...` trains on N ranks (output_dir shared;\n"
    "the batch sizes are global, train_batch_size a multiple of N; rank 0 writes the files).";

static est_status run_task(void *ctx) { return est_run_classifier_main(ctx); }
static est_status validate_task(void *ctx) { return est_run_classifier_validate(ctx); }

int est_cmd_run_classifier(int argc, char **argv) {
  est_run_classifier_config config = est_run_classifier_config_default(), *c = &config;
  const est_flag task_flags[] = {
    /* Required (est_run_classifier_validate says so), except by --do_export alone: a flag-level
     * "required" would ask an export for a directory it does not read. */
    EST_FLAG_STRING("data_dir", &c->data_dir,
                    "The input data dir. Should contain the .tsv files (or other data files) for the task. "
                    "[est] Required, except by --do_export alone (which reads it only for task tsv without "
                    "--tsv_labels: train.tsv's labels).", 0),
    EST_FLAG_STRING("task_name", &c->task_name, "The name of the task to train.", 1),
    EST_CLI_VOCAB_FLAG(c),
    EST_CLI_LOWER_CASE_FLAG(c),
    EST_CLI_EPOCH_FLAGS(c),
    EST_CLI_TSV_FLAGS(&c->tsv_text_a_column, &c->tsv_text_b_column, &c->tsv_label_column, &c->tsv_test_text_a_column,
                      &c->tsv_test_text_b_column, &c->tsv_test_label_column, &c->tsv_labels, &c->tsv_skip_header),
    EST_FLAG_BOOL("multi_label", &c->multi_label,
                  "[est] task tsv: each label field lists any number of labels, comma-separated (\"a,b\"; \"\" for "
                  "none): sigmoid outputs, binary cross-entropy, micro / macro / per-label F1 in eval_results.txt. "
                  "On by itself for a HuggingFace config with problem_type multi_label_classification.", 0),
    EST_FLAG_STRING("long_documents", &c->long_documents,
                    "[est] --do_predict on texts longer than max_seq_length: truncate (the reference's), or mean / "
                    "max: every window of text_a (--doc_stride apart), their logits pooled by mean or max.", 0),
    EST_FLAG_INT("doc_stride", &c->doc_stride,
                 "[est] --long_documents=mean|max: tokens from one window's start to the next's; 0 = half a window.", 0),
  };
  /* run_classifier.py's order: its 3 required flags, the shared group, then the rest */
  const est_cli_task_command command = {
      .name = "run_classifier", .usage = usage, .common = &c->common, .task_flags = task_flags,
      .num_task_flags = sizeof task_flags / sizeof *task_flags, .lead = 3,
      .groups = EST_CLI_TASK_PREDICT | EST_CLI_TASK_EXPORT, .vocab_file = &c->vocab_file,
      .validate = validate_task, .run = run_task, .ctx = c};
  return est_cli_task_main(&command, argc, argv);
}
