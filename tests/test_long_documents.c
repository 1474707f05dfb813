/* run_classifier --do_predict --long_documents=mean|max (docs/run_classifier.md §13): a text
 * longer than max_seq_length - 2 tokens is cut into windows --doc_stride apart and its
 * windows' logits pooled. Checked on a test.tsv whose first text is exactly its three windows
 * (rows 2-4, whole-word tokens): its mean-pooled probabilities equal softmax of the mean of
 * those rows' log-probabilities under --long_documents=truncate (the same logits up to a
 * constant per window); a text of one window answers as under truncate, to the bit; max
 * differs; each line a distribution; a pair task and a bad mode are refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/est.h"
#include "test_util.h"

#define SMALL_CONFIG EST_TEST_DATA "/run_classifier/bert_config_h32.json"
#define UNCASED EST_TEST_DATA "/vocab_uncased.txt"

static char data[600], out[600];

static int setup(void **state) {
  test_tmpdir_setup(state);
  snprintf(data, sizeof data, "%s/data", test_tmpdir);
  snprintf(out, sizeof out, "%s/out", test_tmpdir);
  assert_int_equal(test_run(NULL, 0, "mkdir -p %s && cp " EST_TEST_DATA "/glue_mini/SST-2/train.tsv %s/train.tsv",
                            data, data), 0);
  char path[700];
  snprintf(path, sizeof path, "%s/test.tsv", data);
  const char test[] = "sentence\tlabel\n"
                      "the movie was good and the film is bad\t1\n" /* windows of 4 tokens, stride 4: */
                      "the movie was good\t1\n"
                      "and the film is\t1\n"
                      "bad\t0\n"
                      "good\t1\n";
  test_write_bytes(path, test, strlen(test));
  free(test_run_ok(EST_BIN " run_classifier --task_name=tsv --data_dir=%s --vocab_file=" UNCASED
                   " --bert_config_file=" SMALL_CONFIG " --output_dir=%s --do_train --max_seq_length=6"
                   " --train_batch_size=8 --learning_rate=1e-3 --num_train_epochs=2 --num_threads=2",
                   data, out));
  return 0;
}

/* test_results.tsv of --do_predict with the given long-document flags: 5 rows of 2. */
static void predict(const char *flags, float p[5][2]) {
  free(test_run_ok(EST_BIN " run_classifier --task_name=tsv --data_dir=%s --vocab_file=" UNCASED
                   " --bert_config_file=" SMALL_CONFIG " --output_dir=%s --do_predict --max_seq_length=6 %s",
                   data, out, flags));
  char *text = test_read_in(out, "test_results.tsv");
  const char *at = text;
  for (int i = 0; i < 5; i++) {
    int used = 0;
    if (sscanf(at, "%f\t%f\n%n", &p[i][0], &p[i][1], &used) != 2 || !used) fail_msg("row %d of:\n%s", i, text);
    assert_true(fabs(p[i][0] + p[i][1] - 1.0) < 1e-6);
    at += used;
  }
  assert_int_equal(*at, 0);
  free(text);
}

static void test_mean_and_max(void **state) {
  (void)state;
  float cut[5][2], mean[5][2], max[5][2];
  predict("", cut);
  predict("--long_documents=mean --doc_stride=4", mean);
  predict("--long_documents=max --doc_stride=4", max);
  /* softmax(mean of the windows' log p) = softmax(mean of their logits) */
  double lp[2] = {0, 0};
  for (int w = 1; w <= 3; w++)
    for (int c = 0; c < 2; c++) lp[c] += log((double)cut[w][c]) / 3.0;
  const double top = fmax(lp[0], lp[1]), z = exp(lp[0] - top) + exp(lp[1] - top);
  for (int c = 0; c < 2; c++)
    if (fabs(mean[0][c] - exp(lp[c] - top) / z) > 1e-5)
      fail_msg("pooled %.9g, softmax of the windows' mean log p %.9g", mean[0][c], exp(lp[c] - top) / z);
  /* one window: as truncate, to the bit; the long text: truncate is its first window alone */
  for (int i = 1; i < 5; i++)
    for (int c = 0; c < 2; c++) assert_true(mean[i][c] == cut[i][c] && max[i][c] == cut[i][c]);
  assert_true(cut[0][0] == cut[1][0]);
  assert_true(max[0][0] != mean[0][0]);
}

static void test_refused(void **state) {
  (void)state;
  char *log = NULL;
  assert_int_not_equal(test_run(&log, 1, EST_BIN " run_classifier --task_name=tsv --data_dir=%s --vocab_file=" UNCASED
                                " --bert_config_file=" SMALL_CONFIG " --output_dir=%s --do_predict --max_seq_length=6"
                                " --long_documents=median", data, out), 0);
  assert_non_null(strstr(log, "--long_documents=median: expected truncate, mean or max"));
  free(log);
  log = NULL;
  assert_int_not_equal(test_run(&log, 1, EST_BIN " run_classifier --task_name=tsv --data_dir=%s --vocab_file=" UNCASED
                                " --bert_config_file=" SMALL_CONFIG " --output_dir=%s --do_predict --max_seq_length=6"
                                " --long_documents=mean --tsv_text_b_column=0", data, out), 0);
  assert_non_null(strstr(log, "a text pair; long documents are single texts"));
  free(log);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_mean_and_max),
    cmocka_unit_test(test_refused),
  };
  return cmocka_run_group_tests(tests, setup, test_tmpdir_teardown);
}
