/* `est tokenize` and `est convert` end to end through the built binary (EST_BIN). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "est/est.h"
#include "test_util.h"

#define VOCAB EST_TEST_DATA "/vocab_uncased.txt"

static void write_text(const char *path, const char *text) {
  assert_int_equal(est_write_file_atomic(path, text, strlen(text)), EST_OK);
}

static void test_tokenize_tokens_and_ids(void **state) {
  (void)state;
  char dir[256], in[512];
  test_make_tmpdir(dir, sizeof dir);
  snprintf(in, sizeof in, "%s/in.txt", dir);
  /* CRLF, an empty line, Chinese, invalid UTF-8, a last line without '\n'. */
  write_text(in, "Hello, World!\r\nUNwant\xC3\xA9" "d running\n\n\xE4\xB8\xAD\xFF\xE6\x96\x87\nlast");
  char *out;
  assert_int_equal(test_run(&out, 0, "%s tokenize --vocab_file=%s < %s", EST_BIN, VOCAB, in), 0);
  assert_string_equal(out, "hello , world !\nunwanted running\n\n\xE4\xB8\xAD \xE6\x96\x87\nlast\n");
  free(out);
  assert_int_equal(test_run(&out, 0, "%s tokenize --vocab_file=%s --output=ids < %s", EST_BIN, VOCAB, in), 0);
  assert_string_equal(out, "7592 1010 2088 999\n18162 2770\n\n1746 1861\n2197\n");
  free(out);
  assert_int_equal(test_run(&out, 0, "printf 'Hello' | %s tokenize --vocab_file=%s --do_lower_case=false", EST_BIN,
                            VOCAB), 0);
  assert_string_equal(out, "[UNK]\n");     /* the uncased vocab has no "Hello" */
  free(out);
  test_remove_tree(dir);
}

static void test_tokenize_errors(void **state) {
  (void)state;
  char *out;
  assert_int_equal(test_run(&out, 1, "%s tokenize --vocab_file=/nonexistent/v.txt < /dev/null", EST_BIN), 1);
  assert_non_null(strstr(out, "/nonexistent/v.txt"));
  free(out);
  assert_int_equal(test_run(&out, 1, "%s tokenize < /dev/null", EST_BIN), 2);
  assert_non_null(strstr(out, "vocab_file"));
  free(out);
  assert_int_equal(test_run(&out, 1, "%s tokenize --vocab_file=%s --output=json < /dev/null", EST_BIN, VOCAB), 2);
  free(out);
  assert_int_equal(test_run(&out, 0, "%s tokenize --help", EST_BIN), 0);
  assert_non_null(strstr(out, "--do_lower_case"));
  free(out);
}

static void test_convert_mrpc_matches_tensorflow(void **state) {
  (void)state;
  char dir[256];
  test_make_tmpdir(dir, sizeof dir);
  char *out;
  assert_int_equal(test_run(&out, 1,
                            "EST_LOG_LEVEL=info %s convert --task_name=MRPC --data_dir=%s/glue_mini/MRPC --vocab_file=%s "
                            "--max_seq_length=128 --do_lower_case=true --output_dir=%s/o --splits=dev",
                            EST_BIN, EST_TEST_DATA, VOCAB, dir), 0);
  /* The first 5 examples are logged like run_classifier's. */
  assert_non_null(strstr(out, "*** Example ***"));
  assert_non_null(strstr(out, "guid: dev-5"));
  assert_null(strstr(out, "guid: dev-6"));
  assert_non_null(strstr(out, "label: 1 (id = 1)"));
  free(out);
  /* Same features as TF's file, compared as parsed Examples (JSON dump), record by record. */
  char *ours, *tf;
  assert_int_equal(test_run(&ours, 0, "%s tfrecord dump %s/o/eval.tf_record", EST_BIN, dir), 0);
  assert_int_equal(test_run(&tf, 0, "%s tfrecord dump %s/mrpc_eval.tf_record", EST_BIN, EST_TEST_DATA), 0);
  assert_true(strlen(tf) > 1000);
  assert_string_equal(ours, tf);
  free(ours);
  free(tf);
  char path[512];
  snprintf(path, sizeof path, "%s/o/train.tf_record", dir);
  assert_false(est_file_exists(path));      /* --splits=dev only */

  /* Padding for eval/predict: 408 -> 416 with 8 padding records; train is never padded. */
  assert_int_equal(test_run(&out, 1,
                            "EST_LOG_LEVEL=info %s convert --task_name=mrpc --data_dir=%s/glue_mini/MRPC "
                            "--vocab_file=%s --output_dir=%s/p --pad_to_batch_size=32",
                            EST_BIN, EST_TEST_DATA, VOCAB, dir), 0);
  assert_non_null(strstr(out, "Num examples = 416 (408 actual, 8 padding)"));
  assert_non_null(strstr(out, "Num examples = 10 (10 actual, 0 padding)"));   /* train */
  assert_non_null(strstr(out, "Num examples = 32 (10 actual, 22 padding)"));  /* test */
  free(out);
  assert_int_equal(test_run(&out, 0, "%s tfrecord count %s/p/eval.tf_record", EST_BIN, dir), 0);
  assert_string_equal(out, "416\n");
  free(out);
  assert_int_equal(test_run(&out, 0, "%s tfrecord count %s/p/predict.tf_record", EST_BIN, dir), 0);
  assert_string_equal(out, "32\n");
  free(out);
  test_remove_tree(dir);
}

static void test_convert_generic_tsv(void **state) {
  (void)state;
  char dir[256], path[512];
  test_make_tmpdir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/train.tsv", dir);
  write_text(path, "text\tlabel\ngood movie\tpos\nbad movie\tneg\n");
  snprintf(path, sizeof path, "%s/dev.tsv", dir);
  write_text(path, "text\tlabel\nfine\tpos\n");
  char *out;
  assert_int_equal(test_run(&out, 1,
                            "%s convert --task_name=tsv --data_dir=%s --vocab_file=%s --max_seq_length=8 "
                            "--output_dir=%s/o --splits=train,dev --tsv_text_a_column=0 --tsv_label_column=1",
                            EST_BIN, dir, VOCAB, dir), 0);
  free(out);
  assert_int_equal(test_run(&out, 0, "%s tfrecord dump %s/o/train.tf_record", EST_BIN, dir), 0);
  /* labels sorted: neg=0, pos=1; "good movie" = 2204 3185. */
  assert_non_null(strstr(out, "\"input_ids\": {\"int64\": [101, 2204, 3185, 102, 0, 0, 0, 0]}"));
  assert_non_null(strstr(out, "\"label_ids\": {\"int64\": [1]}"));
  assert_non_null(strstr(out, "\"label_ids\": {\"int64\": [0]}"));
  free(out);
  test_remove_tree(dir);
}

static void test_convert_errors(void **state) {
  (void)state;
  char dir[256], path[512];
  test_make_tmpdir(dir, sizeof dir);
  char *out;
  /* Unknown task. */
  assert_int_equal(test_run(&out, 1, "%s convert --task_name=qqp --data_dir=%s --vocab_file=%s --output_dir=%s/o",
                            EST_BIN, dir, VOCAB, dir), 2);
  assert_non_null(strstr(out, "Task not found: qqp"));
  free(out);
  /* Missing vocab file. */
  assert_int_equal(test_run(&out, 1, "%s convert --task_name=mrpc --data_dir=%s/glue_mini/MRPC "
                                     "--vocab_file=%s/none.txt --output_dir=%s/o", EST_BIN, EST_TEST_DATA, dir, dir), 1);
  assert_non_null(strstr(out, "none.txt"));
  free(out);
  /* A vocab without [CLS]. */
  snprintf(path, sizeof path, "%s/vocab.txt", dir);
  write_text(path, "[UNK]\n[SEP]\nthe\n");
  assert_int_equal(test_run(&out, 1, "%s convert --task_name=mrpc --data_dir=%s/glue_mini/MRPC --vocab_file=%s "
                                     "--output_dir=%s/o --splits=dev", EST_BIN, EST_TEST_DATA, path, dir), 1);
  assert_non_null(strstr(out, "has no [CLS] token"));
  free(out);
  /* A malformed row: too few columns, reported with file and line. */
  snprintf(path, sizeof path, "%s/dev.tsv", dir);
  write_text(path, "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\ta\tb\n1\t1\t2\tonly a\n");
  assert_int_equal(test_run(&out, 1, "%s convert --task_name=mrpc --data_dir=%s --vocab_file=%s --output_dir=%s/o "
                                     "--splits=dev", EST_BIN, dir, VOCAB, dir), 1);
  assert_non_null(strstr(out, "dev.tsv:3: expected at least 5 tab-separated columns, found 4"));
  free(out);
  snprintf(path, sizeof path, "%s/o/eval.tf_record", dir);
  assert_false(est_file_exists(path));        /* nothing half-written */
  /* Bad flag values are usage errors. */
  assert_int_equal(test_run(&out, 1, "%s convert --task_name=mrpc --data_dir=%s --vocab_file=%s --output_dir=%s/o "
                                     "--splits=valid", EST_BIN, dir, VOCAB, dir), 2);
  free(out);
  assert_int_equal(test_run(&out, 1, "%s convert --task_name=mrpc --data_dir=%s --vocab_file=%s --output_dir=%s/o "
                                     "--max_seq_length=2", EST_BIN, dir, VOCAB, dir), 2);
  free(out);
  assert_int_equal(test_run(&out, 1, "%s convert --data_dir=%s", EST_BIN, dir), 2);
  free(out);
  test_remove_tree(dir);
}

/* EST_KERNEL names a kernel to force (docs/testing.md §3): a name est does not know stops
 * every command with exit 2 and the accepted names, instead of running some other kernel. */
static void test_unknown_forced_kernel_refused(void **state) {
  (void)state;
  char *out = NULL;
  int rc = test_run(&out, 1, "EST_KERNEL=bogus %s tokenize --vocab_file=%s < /dev/null", EST_BIN, VOCAB);
  assert_int_equal(rc, 2);
  assert_non_null(strstr(out, "est: EST_KERNEL=bogus: must be auto, blas, own, bf16dp, amx, noavx512, vnni512, avxvnni, int8ref, amxint8 or amxemu"));
  free(out);
  rc = test_run(&out, 1, "EST_KERNEL=blas %s tokenize --vocab_file=%s < /dev/null", EST_BIN, VOCAB);
  assert_int_equal(rc, 0);
  free(out);
}

/* --stride: the windows truncation leaves out, as tokenizers' Encoding.overflowing (0.22.1:
 * Tokenizer.from_file(xlmr_tiny.json), enable_truncation(5, stride=1), encode); and a Unigram
 * tokenizer.json through --vocab_file (est_tokenizer_open_any takes any model). */
static void test_tokenize_overflowing(void **state) {
  (void)state;
  char *out;
  assert_int_equal(test_run(&out, 0, "printf 'the world the world\\n' | %s tokenize --tokenizer_file=%s "
                            "--max_length=5 --stride=1 --output=json", EST_BIN, EST_TEST_DATA "/tokenizers/xlmr_tiny.json"), 0);
  assert_string_equal(out, "{\"ids\":[0,5,10,5,2],\"tokens\":[\"<s>\",\"\u2581the\",\"\u2581world\",\"\u2581the\",\"</s>\"],"
                      "\"type_ids\":[0,0,0,0,0],\"attention_mask\":[1,1,1,1,1],\"special_tokens_mask\":[1,0,0,0,1],"
                      "\"offsets\":[[0,0],[0,3],[3,9],[9,13],[0,0]],\"overflowing\":[{\"ids\":[0,5,10,2],\"tokens\":"
                      "[\"<s>\",\"\u2581the\",\"\u2581world\",\"</s>\"],\"type_ids\":[0,0,0,0],\"attention_mask\":[1,1,1,1],"
                      "\"special_tokens_mask\":[1,0,0,1],\"offsets\":[[0,0],[9,13],[13,19],[0,0]]}]}\n");
  free(out);
  assert_int_equal(test_run(&out, 0, "printf 'the world\\n' | %s tokenize --vocab_file=%s --output=ids", EST_BIN,
                            EST_TEST_DATA "/tokenizers/xlmr_tiny.json"), 0);
  assert_string_equal(out, "5 10\n");
  free(out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_tokenize_tokens_and_ids),
    cmocka_unit_test(test_tokenize_errors),
    cmocka_unit_test(test_tokenize_overflowing),
    cmocka_unit_test(test_convert_mrpc_matches_tensorflow),
    cmocka_unit_test(test_convert_generic_tsv),
    cmocka_unit_test(test_convert_errors),
    cmocka_unit_test(test_unknown_forced_kernel_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
