/* `est run_rerank`: cross-encoder reranking fine-tuning with run_classifier's flags, on
 * (query, passage, label) TSV or JSON lines files (est/run_rerank.h, docs/rerank.md). The
 * shared flags come from the task driver's group (task_cli.c); this file adds
 * run_classifier.py's own that apply, then est's. */
#include <stdio.h>

#include "commands.h"
#include "est/run_rerank.h"
#include "task_cli.h"

static const char usage[] =
    "usage: est run_rerank --data_dir=DIR --vocab_file=FILE --bert_config_file=FILE\n"
    "                      --output_dir=DIR [--do_train] [--do_eval] [--do_predict] [flags...]\n\n"
    "Fine-tunes a cross-encoder (BERT with one output on [CLS] query [SEP] passage [SEP]) as\n"
    "sentence-transformers' CrossEncoder(num_labels=1) does. DIR holds train, dev and test, each\n"
    "<split>.tsv (query<TAB>passage<TAB>label; a header line is skipped) or <split>.jsonl\n"
    "({\"query\": ..., \"passage\": ..., \"label\": ...}). --loss=bce (labels 0/1, the default) or mse\n"
    "(scores). Writes under output_dir: train/eval/predict.tf_record, model.ckpt-N checkpoints,\n"
    "eval_results.txt (eval_loss, and over dev's pairs grouped by query eval_mrr@10,\n"
    "eval_ndcg@10, eval_num_queries) and test_results.tsv (each test pair's score and its rank\n"
    "among its query's pairs). --do_export --export_format=hf writes a directory that\n"
    "CrossEncoder(DIR) loads.";

static est_status run_task(void *ctx) { return est_run_rerank_main(ctx); }
static est_status validate_task(void *ctx) { return est_run_rerank_validate(ctx); }

int est_cmd_run_rerank(int argc, char **argv) {
  est_run_rerank_config config = est_run_rerank_config_default(), *c = &config;
  const est_flag task_flags[] = {
    EST_FLAG_STRING("data_dir", &c->data_dir, "The input data dir: train, dev, test (.tsv or .jsonl).", 0),
    EST_CLI_VOCAB_FLAG(c),
    EST_CLI_LOWER_CASE_FLAG(c),
    EST_CLI_EPOCH_FLAGS(c),
    EST_FLAG_STRING("loss", &c->loss,
                    "[est] bce: binary cross-entropy on the logit, labels in [0, 1] (CrossEncoder's default for "
                    "one label); mse: squared error of the logit against a score.", 0),
  };
  /* its 2 leading flags, the shared group, then the rest */
  const est_cli_task_command command = {
      .name = "run_rerank", .usage = usage, .common = &c->common, .task_flags = task_flags,
      .num_task_flags = sizeof task_flags / sizeof *task_flags, .lead = 2,
      .groups = EST_CLI_TASK_PREDICT | EST_CLI_TASK_EXPORT, .vocab_file = &c->vocab_file,
      .validate = validate_task, .run = run_task, .ctx = c};
  return est_cli_task_main(&command, argc, argv);
}
