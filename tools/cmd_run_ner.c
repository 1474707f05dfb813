/* `est run_ner`: token classification (NER) fine-tuning with run_classifier's flags, on
 * CoNLL or JSON lines files (est/run_ner.h). The shared flags come from the task driver's
 * group (task_cli.c); this file adds run_classifier.py's own that apply, then est's. */
#include <stdio.h>

#include "commands.h"
#include "est/run_ner.h"
#include "task_cli.h"

static const char usage[] =
    "usage: est run_ner --data_dir=DIR --vocab_file=FILE --bert_config_file=FILE\n"
    "                   --output_dir=DIR [--do_train] [--do_eval] [--do_predict] [flags...]\n\n"
    "Fine-tunes BERT for token classification (named-entity recognition), as transformers'\n"
    "run_ner and the BERT-NER forks of run_classifier.py. DIR holds train.txt, dev.txt and\n"
    "test.txt, each CoNLL (a token and its tag a line, the tag last, blank lines between\n"
    "sentences, -DOCSTART- skipped) or JSON lines ({\"tokens\": [...], \"tags\": [...]}); the\n"
    "labels are train.txt's tags, \"O\" first. Writes under output_dir: train.tf_record,\n"
    "eval.tf_record, predict.tf_record, model.ckpt-N checkpoints, eval_results.txt (seqeval's\n"
    "entity-level eval_precision, eval_recall, eval_f1, per-type keys, eval_accuracy) and\n"
    "test_predictions.txt (one \"token tag\" line a word of test.txt). --do_export\n"
    "--export_format=hf writes a HuggingFace BertForTokenClassification directory (id2label).";

static est_status run_task(void *ctx) { return est_run_ner_main(ctx); }
static est_status validate_task(void *ctx) { return est_run_ner_validate(ctx); }

int est_cmd_run_ner(int argc, char **argv) {
  est_run_ner_config config = est_run_ner_config_default(), *c = &config;
  const est_flag task_flags[] = {
    EST_FLAG_STRING("data_dir", &c->data_dir, "The input data dir: train.txt, dev.txt, test.txt.", 0),
    EST_CLI_VOCAB_FLAG(c),
    EST_CLI_LOWER_CASE_FLAG(c),
    EST_CLI_EPOCH_FLAGS(c),
    EST_FLAG_BOOL("label_all_tokens", &c->label_all_tokens,
                  "Label every sub-token of a word (B- becoming I- after the first), not only the first "
                  "(transformers' run_ner).", 0),
    EST_FLAG_INT("doc_stride", &c->doc_stride,
                 "[est] Sentences longer than max_seq_length: sub-tokens between the starts of their windows "
                 "(0: half a window).", 0),
  };
  /* its 2 leading flags, the shared group, then the rest */
  const est_cli_task_command command = {
      .name = "run_ner", .usage = usage, .common = &c->common, .task_flags = task_flags,
      .num_task_flags = sizeof task_flags / sizeof *task_flags, .lead = 2,
      .groups = EST_CLI_TASK_PREDICT | EST_CLI_TASK_EXPORT, .vocab_file = &c->vocab_file,
      .validate = validate_task, .run = run_task, .ctx = c};
  return est_cli_task_main(&command, argc, argv);
}
