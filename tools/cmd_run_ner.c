/* `est run_ner`: token classification (NER) fine-tuning with run_classifier's flags, on
 * CoNLL or JSON lines files (est/run_ner.h). The shared flags come from the task driver's
 * group (task_cli.c); this file adds run_classifier.py's own that apply, then est's. */
#include <stdio.h>

#include "commands.h"
#include "est/file.h"
#include "est/hf_model.h"
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

int est_cmd_run_ner(int argc, char **argv) {
  est_run_ner_config config = est_run_ner_config_default(), *c = &config;
  const est_flag task_flags[] = {
    EST_FLAG_STRING("data_dir", &c->data_dir, "The input data dir: train.txt, dev.txt, test.txt.", 0),
    EST_FLAG_STRING("vocab_file", &c->vocab_file,
                    "The vocabulary file that the BERT model was trained on (vocab.txt or tokenizer.json). "
                    "[est] Unset with a HuggingFace --init_checkpoint=DIR: DIR's tokenizer.json, else vocab.txt.", 0),
    EST_FLAG_BOOL("do_lower_case", &c->do_lower_case,
                  "Whether to lower case the input text. Should be True for uncased models and False for cased "
                  "models.", 0),
    EST_FLAG_FLOAT("num_train_epochs", &c->num_train_epochs, "Total number of training epochs to perform.", 0),
    EST_FLAG_FLOAT("warmup_proportion", &c->warmup_proportion,
                   "Proportion of training to perform linear learning rate warmup for. E.g., 0.1 = 10% of "
                   "training.", 0),
    EST_FLAG_BOOL("label_all_tokens", &c->label_all_tokens,
                  "Label every sub-token of a word (B- becoming I- after the first), not only the first "
                  "(transformers' run_ner).", 0),
    EST_FLAG_INT("doc_stride", &c->doc_stride,
                 "[est] Sentences longer than max_seq_length: sub-tokens between the starts of their windows "
                 "(0: half a window).", 0),
  };
  enum { NTASK = sizeof task_flags / sizeof *task_flags };
  est_flag flags[NTASK + EST_CLI_TASK_MAX_FLAGS];
  size_t n = 0;
  for (size_t i = 0; i < 2; i++) flags[n++] = task_flags[i];
  n += est_cli_task_flags(&c->common, flags + n, EST_CLI_TASK_PREDICT | EST_CLI_TASK_EXPORT);
  for (size_t i = 2; i < NTASK; i++) flags[n++] = task_flags[i];
  int rc = est_cli_task_parse("run_ner", usage, &c->common, flags, n, argc, argv);
  if (rc >= 0) return rc;
  if ((!c->vocab_file || !*c->vocab_file) && c->common.init_checkpoint && est_is_directory(c->common.init_checkpoint) &&
      est_hf_is_checkpoint(c->common.init_checkpoint))
    c->vocab_file = c->common.init_checkpoint; /* its tokenizer.json or vocab.txt (docs/hf.md §5) */
  if (est_run_ner_validate(c) != EST_OK) {
    fprintf(stderr, "est run_ner: %s\n", est_error_message());
    return 2;
  }
  return est_cli_task_run("run_ner", argc, argv, run_task, c);
}
