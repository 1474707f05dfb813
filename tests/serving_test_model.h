/* A fine-tuned classifier for the serving tests: run_classifier trains the 1-layer h32
 * BERT (tests/data/run_classifier/bert_config_h32.json) from scratch on the `jack` TSV task
 * (labels bright,dull) for 10 epochs, which is enough for the test examples' probabilities
 * to differ (0.72/0.28 one way or the other), predicts test.tsv at max_seq_length 32 and
 * exports with --do_export. Under a second. */
#ifndef EST_SERVING_TEST_MODEL_H
#define EST_SERVING_TEST_MODEL_H

#include "test_util.h"

#define SERVING_TEST_FLAGS                                                                                     \
  " --task_name=tsv --tsv_labels=bright,dull --tsv_test_label_column=-1 --data_dir=" EST_TEST_DATA             \
  "/run_classifier/jack --vocab_file=" EST_TEST_DATA "/vocab_uncased.txt --bert_config_file=" EST_TEST_DATA    \
  "/run_classifier/bert_config_h32.json --max_seq_length=32 --train_batch_size=8 --num_train_epochs=10"        \
  " --learning_rate=3e-3 --num_threads=1"

/* The test examples' text_a, one per line (test.tsv without its header and label column). */
#define SERVING_TEST_TEXTS "tail -n +2 " EST_TEST_DATA "/run_classifier/jack/test.tsv | cut -f1"

/* Trains + predicts + exports into out_dir (export base out_dir/export); fails the test on error. */
static inline void serving_train_and_export(const char *out_dir) {
  char *log = NULL;
  int rc = test_run(&log, 1, EST_BIN " run_classifier --do_train --do_predict --do_export" SERVING_TEST_FLAGS
                             " --output_dir=%s", out_dir);
  if (rc != 0) fail_msg("run_classifier exit %d:\n%s", rc, log);
  free(log);
}

/* Parses lines of TAB-separated floats into vals (at most cap); returns how many. */
static inline int serving_parse_floats(const char *text, double *vals, int cap) {
  int n = 0;
  const char *p = text;
  while (*p && n < cap) {
    char *end;
    double v = strtod(p, &end);
    if (end == p) {
      p++;
      continue;
    }
    vals[n++] = v;
    p = end;
  }
  return n;
}

#endif
