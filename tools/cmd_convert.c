/* `est convert`: run_classifier.py's data preparation on its own. Reads a task's TSV files,
 * tokenizes, and writes output_dir/train.tf_record, eval.tf_record and predict.tf_record
 * (from the train, dev and test splits) exactly as run_classifier names and fills them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "est/classifier_features.h"
#include "est/file.h"
#include "est/flags.h"
#include "est/log.h"
#include "est/processors.h"
#include "est/tokenizer.h"

static const char *USAGE =
    "usage: est convert --task_name=T --data_dir=D --vocab_file=V --output_dir=O\n"
    "                   [--max_seq_length=128] [--do_lower_case=true] [--splits=train,dev,test]\n"
    "                   [--pad_to_batch_size=N] [generic TSV flags]\n\n"
    "Writes O/train.tf_record (train split), O/eval.tf_record (dev) and O/predict.tf_record (test)\n"
    "as run_classifier.py does. Tasks: cola, mnli, mnli-mm, mrpc, qnli, rte, sst-2, wnli, xnli,\n"
    "and tsv (your own files: choose the columns with --tsv_text_a_column, --tsv_text_b_column,\n"
    "--tsv_label_column; the same --tsv_* flags as est run_classifier).\n";

typedef struct split_out {
  est_split split;
  const char *name;           /* as given in --splits */
  const char *file;           /* run_classifier's output name */
} split_out;

static const split_out SPLITS[] = {
  {EST_SPLIT_TRAIN, "train", "train.tf_record"},
  {EST_SPLIT_DEV, "dev", "eval.tf_record"},
  {EST_SPLIT_TEST, "test", "predict.tf_record"},
};

/* The int flags of the generic TSV task: -1 = none, -2 = same as train (test_* only). */
static bool column_ok(int64_t v, bool test) { return v >= (test ? -2 : -1) && v < 100000; }

int est_cmd_convert(int argc, char **argv) {
  const char *task = NULL, *data_dir = NULL, *vocab = NULL, *out_dir = NULL, *splits = NULL;
  const char *labels = "", *train_file = "train.tsv", *dev_file = "dev.tsv", *test_file = "test.tsv";
  const char *language = "zh";
  int64_t seq = 128, pad = 0, col_a = 0, col_b = -1, col_label = 1, tcol_a = -2, tcol_b = -2, tcol_label = -2;
  bool lower = true, skip_header = true;
  est_flag flags[] = {
    EST_FLAG_STRING("task_name", &task, "The task: cola, mnli, mnli-mm, mrpc, qnli, rte, sst-2, wnli, xnli or tsv.", 1),
    EST_FLAG_STRING("data_dir", &data_dir, "Directory with the task's .tsv files.", 1),
    EST_FLAG_STRING("vocab_file", &vocab, "The vocabulary file the BERT model was trained on.", 1),
    EST_FLAG_STRING("output_dir", &out_dir, "Where the .tf_record files go (created if needed).", 1),
    EST_FLAG_INT("max_seq_length", &seq, "Total WordPiece tokens per example after [CLS]/[SEP]; longer "
                                         "inputs are truncated, shorter ones zero-padded.", 0),
    EST_FLAG_BOOL("do_lower_case", &lower, "Lower-case the input (true for uncased models).", 0),
    EST_FLAG_STRING("splits", &splits, "Comma-separated subset of train,dev,test (default: all the task has).", 0),
    EST_FLAG_INT("pad_to_batch_size", &pad, "If > 0, append padding examples (is_real_example=0) to the dev "
                                            "and test files until their size is a multiple of N, as "
                                            "run_classifier does on TPU.", 0),
    EST_CLI_TSV_FLAGS(&col_a, &col_b, &col_label, &tcol_a, &tcol_b, &tcol_label, &labels, &skip_header),
    EST_FLAG_STRING("tsv_train_file", &train_file, "tsv task: training file name in data_dir.", 0),
    EST_FLAG_STRING("tsv_dev_file", &dev_file, "tsv task: dev file name in data_dir.", 0),
    EST_FLAG_STRING("tsv_test_file", &test_file, "tsv task: test file name in data_dir.", 0),
    EST_FLAG_STRING("xnli_language", &language, "xnli task: language of the train file and dev rows.", 0),
  };
  int rc = EST_CLI_PARSE_FLAGS("convert", USAGE, flags, argc, argv, 1);
  if (rc >= 0) return rc;
  if (seq < 3 || seq > 65536 || pad < 0 || !column_ok(col_a, false) || col_a < 0 || !column_ok(col_b, false) ||
      !column_ok(col_label, false) || !column_ok(tcol_a, true) || !column_ok(tcol_b, true) ||
      !column_ok(tcol_label, true)) {
    fprintf(stderr, "est convert: --max_seq_length must be in [3, 65536], --pad_to_batch_size >= 0, "
                    "columns >= 0 (or -1 for none; -2 for test_* = as train)\n");
    return 2;
  }
  est_tsv_task_config cfg = est_tsv_task_config_default();
  cfg.text_a_column = (int)col_a;
  cfg.text_b_column = (int)col_b;
  cfg.label_column = (int)col_label;
  cfg.test_text_a_column = (int)tcol_a;
  cfg.test_text_b_column = (int)tcol_b;
  cfg.test_label_column = (int)tcol_label;
  cfg.skip_header = skip_header;
  cfg.labels = labels;
  cfg.train_file = train_file;
  cfg.dev_file = dev_file;
  cfg.test_file = test_file;
  cfg.language = language;

  est_processor *proc;
  if (est_processor_create(&proc, task, &cfg) != EST_OK) {
    fprintf(stderr, "est convert: %s\n", est_error_message());
    return 2;
  }
  /* Which splits: the flag, or all that the task has (XNLI has no test set). */
  bool want[3] = {false, false, false};
  if (splits) {
    char *copy = strdup(splits), *save = NULL;
    for (char *s = strtok_r(copy, ",", &save); s; s = strtok_r(NULL, ",", &save)) {
      int k = -1;
      for (int i = 0; i < 3; i++)
        if (!strcmp(s, SPLITS[i].name)) k = i;
      if (k < 0) {
        fprintf(stderr, "est convert: --splits: unknown split '%s' (expected train, dev, test)\n", s);
        free(copy);
        est_processor_free(proc);
        return 2;
      }
      want[k] = true;
    }
    free(copy);
  } else {
    for (int i = 0; i < 3; i++) want[i] = est_processor_has_split(proc, SPLITS[i].split);
  }

  rc = 1;
  est_tokenizer *tok = NULL;
  const char *const *label_list;
  size_t nlabels;
  if (est_tokenizer_open(&tok, vocab, lower) != EST_OK || est_processor_get_labels(proc, data_dir, &label_list, &nlabels) != EST_OK ||
      est_mkdirs(out_dir) != EST_OK) {
    fprintf(stderr, "est convert: %s\n", est_error_message());
    goto done;
  }
  for (int i = 0; i < 3; i++) {
    if (!want[i]) continue;
    est_examples ex;
    est_examples_init(&ex);
    if (est_processor_get_examples(proc, data_dir, SPLITS[i].split, &ex) != EST_OK) {
      fprintf(stderr, "est convert: %s\n", est_error_message());
      est_examples_free(&ex);
      goto done;
    }
    size_t real = ex.count, added = 0;
    if (SPLITS[i].split != EST_SPLIT_TRAIN && est_examples_pad_to_multiple(&ex, pad, &added) != EST_OK) {
      fprintf(stderr, "est convert: %s\n", est_error_message());
      est_examples_free(&ex);
      goto done;
    }
    char path[4096];
    est_status st = est_path_join(path, sizeof path, out_dir, SPLITS[i].file);
    EST_LOG_INFO("***** Converting %s split to %s *****", SPLITS[i].name, path);
    EST_LOG_INFO("  Num examples = %zu (%zu actual, %zu padding)", ex.count, real, added);
    if (st == EST_OK) st = est_file_based_convert_examples_to_features(&ex, label_list, nlabels, (int)seq, tok, path);
    est_examples_free(&ex);
    if (st != EST_OK) {
      fprintf(stderr, "est convert: %s\n", est_error_message());
      goto done;
    }
  }
  rc = 0;
done:
  est_tokenizer_free(tok);
  est_processor_free(proc);
  return rc;
}
