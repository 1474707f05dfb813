/* `est run_classifier` flag parsing and every bad-input check: each must fail at once with
 * a message naming the flag or file and why, exit non-zero, and leave no output behind
 * (output_dir is never created). Runs the real binary (EST_BIN). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>
#include <sys/stat.h>

#include "est/est.h"
#include "test_util.h"

static char tmp[256];
static char out_dir[512];

/* The flags every case starts from: a valid MRPC setup on the mini GLUE fixtures. */
#define BASE                                                                                       \
  EST_BIN " run_classifier --task_name=mrpc --data_dir=" EST_TEST_DATA "/glue_mini/MRPC"              \
          " --vocab_file=" EST_TEST_DATA "/vocab_uncased.txt"                                       \
          " --bert_config_file=" EST_TEST_DATA "/run_classifier/bert_config_h32.json"

static int setup(void **state) {
  (void)state;
  test_make_tmpdir(tmp, sizeof tmp);
  snprintf(out_dir, sizeof out_dir, "%s/out", tmp);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  test_remove_tree(tmp);
  return 0;
}

/* Runs `args` (stderr merged), expects exit code `want_rc`, every needle in the output,
 * and no output_dir afterwards. */
static void expect_failure(int want_rc, const char *args, const char *const *needles) {
  char *out = NULL;
  int rc = test_run(&out, 1, "%s", args);
  if (rc != want_rc) fail_msg("exit %d, want %d, for: %s\noutput:\n%s", rc, want_rc, args, out);
  for (const char *const *n = needles; *n; n++)
    if (!strstr(out, *n)) fail_msg("'%s' not in the output of: %s\noutput:\n%s", *n, args, out);
  struct stat sb;
  if (stat(out_dir, &sb) == 0) fail_msg("%s was created by a failing run: %s", out_dir, args);
  free(out);
}

#define EXPECT(rc, args, ...) expect_failure(rc, args, (const char *const[]){__VA_ARGS__, NULL})

static void test_help_lists_every_flag(void **state) {
  (void)state;
  char *out = NULL;
  assert_int_equal(test_run(&out, 0, EST_BIN " run_classifier --help"), 0);
  /* Every flag of run_classifier.py, then est's own. */
  const char *flags[] = {"data_dir", "bert_config_file", "task_name", "vocab_file", "output_dir",
                         "init_checkpoint", "do_lower_case", "max_seq_length", "do_train", "do_eval",
                         "do_predict", "train_batch_size", "eval_batch_size", "predict_batch_size",
                         "learning_rate", "num_train_epochs", "warmup_proportion", "save_checkpoints_steps",
                         "iterations_per_loop", "use_tpu", "tpu_name", "tpu_zone", "gcp_project", "master",
                         "num_tpu_cores", "num_threads", "seed", "keep_checkpoint_max", "log_step_count_steps",
                         "tsv_text_a_column", "tsv_labels"};
  for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
    char needle[64];
    snprintf(needle, sizeof needle, "--%s:", flags[i]);
    if (!strstr(out, needle)) fail_msg("--help does not list %s", needle);
  }
  /* The reference's defaults. */
  assert_non_null(strstr(out, "--max_seq_length: The maximum total input sequence length"));
  assert_non_null(strstr(out, "(default: '128')"));
  assert_non_null(strstr(out, "(default: '5e-05')"));
  assert_non_null(strstr(out, "[est]"));
  assert_non_null(strstr(out, "[TPU only"));
  free(out);
  /* And the top-level command table knows it. */
  assert_int_equal(test_run(&out, 0, EST_BIN " --help"), 0);
  assert_non_null(strstr(out, "run_classifier"));
  free(out);
}

static void test_usage_errors(void **state) {
  (void)state;
  char args[4096];
  EXPECT(2, EST_BIN " run_classifier", "flag --task_name must be specified");
  /* --data_dir: required by every run but --do_export alone (test_serving_export) */
  snprintf(args, sizeof args,
           EST_BIN " run_classifier --task_name=mrpc --vocab_file=" EST_TEST_DATA "/vocab_uncased.txt"
                   " --bert_config_file=" EST_TEST_DATA "/run_classifier/bert_config_h32.json --output_dir=%s"
                   " --do_train", out_dir);
  EXPECT(2, args, "flag --data_dir must be specified");
  snprintf(args, sizeof args, "%s", BASE " --do_train");
  EXPECT(2, args, "flag --output_dir must be specified");
  snprintf(args, sizeof args, BASE " --output_dir=%s --do_train --foo=1", out_dir);
  EXPECT(2, args, "unknown flag --foo");
  snprintf(args, sizeof args, BASE " --output_dir=%s --do_train --max_seq_length=abc", out_dir);
  EXPECT(2, args, "--max_seq_length", "'abc' is not an integer");
  snprintf(args, sizeof args, BASE " --output_dir=%s --do_train --learning_rate=fast", out_dir);
  EXPECT(2, args, "--learning_rate", "not a finite number");
  snprintf(args, sizeof args, BASE " --output_dir=%s --do_train=maybe", out_dir);
  EXPECT(2, args, "--do_train", "not a boolean");
  snprintf(args, sizeof args, BASE " --output_dir=%s --nodo_train=1", out_dir);
  EXPECT(2, args, "--nodo_train takes no value");
  snprintf(args, sizeof args, BASE " --output_dir=%s --do_train stray", out_dir);
  EXPECT(2, args, "unexpected argument 'stray'");
}

static void test_impossible_combinations(void **state) {
  (void)state;
  char args[4096];
  /* No do_*: also with the explicit false spellings absl accepts. */
  snprintf(args, sizeof args, BASE " --output_dir=%s", out_dir);
  EXPECT(2, args, "At least one of `do_train`, `do_eval` or `do_predict' must be True.");
  snprintf(args, sizeof args, BASE " --output_dir=%s --do_train=false --do_eval=0 --nodo_predict", out_dir);
  EXPECT(2, args, "At least one of");
  /* "--flag value" form; above max_position_embeddings (128 in this config). */
  snprintf(args, sizeof args, BASE " --output_dir %s --do_eval --max_seq_length 129", out_dir);
  EXPECT(2, args, "Cannot use sequence length 129", "max_position_embeddings", "128");
  snprintf(args, sizeof args, BASE " --output_dir=%s --do_eval --max_seq_length=2", out_dir);
  EXPECT(2, args, "--max_seq_length=2", "at least 3");
  /* A cased released checkpoint with do_lower_case (the default), and the reverse. The
   * case check comes first, so the checkpoint need not exist. */
  snprintf(args, sizeof args, BASE " --output_dir=%s --do_train --init_checkpoint=%s/cased_L-12_H-768_A-12/bert_model.ckpt",
           out_dir, tmp);
  EXPECT(2, args, "cased", "do_lower_case");
  snprintf(args, sizeof args,
           BASE " --output_dir=%s --do_train --nodo_lower_case --init_checkpoint=%s/uncased_L-12_H-768_A-12/bert_model.ckpt",
           out_dir, tmp);
  EXPECT(2, args, "lowercased", "do_lower_case");
  snprintf(args, sizeof args, BASE " --output_dir=%s --do_train --train_batch_size=0", out_dir);
  EXPECT(2, args, "--train_batch_size=0", "at least 1");
  snprintf(args, sizeof args, BASE " --output_dir=%s --do_eval --eval_batch_size=-8", out_dir);
  EXPECT(2, args, "--eval_batch_size=-8");
  snprintf(args, sizeof args, BASE " --output_dir=%s --do_train --warmup_proportion=1.5", out_dir);
  EXPECT(2, args, "--warmup_proportion=1.5");
  snprintf(args, sizeof args, BASE " --output_dir=%s --do_train --num_train_epochs=0", out_dir);
  EXPECT(2, args, "--num_train_epochs=0");
  snprintf(args, sizeof args, BASE " --output_dir=%s --do_train --save_checkpoints_steps=0", out_dir);
  EXPECT(2, args, "--save_checkpoints_steps=0");
  /* XNLI has no test set (NotImplementedError in the reference). */
  snprintf(args, sizeof args,
           EST_BIN " run_classifier --task_name=XNLI --data_dir=%s --vocab_file=" EST_TEST_DATA "/vocab_uncased.txt"
           " --bert_config_file=" EST_TEST_DATA "/run_classifier/bert_config_h32.json --output_dir=%s --do_predict",
           tmp, out_dir);
  EXPECT(2, args, "xnli has no test set");
  /* Fewer training examples than one batch: zero steps. */
  snprintf(args, sizeof args, BASE " --output_dir=%s --do_train --train_batch_size=32 --num_train_epochs=1", out_dir);
  EXPECT(1, args, "gives 0 training steps");
}

static void test_missing_and_bad_inputs(void **state) {
  (void)state;
  char args[4096];
  snprintf(args, sizeof args,
           EST_BIN " run_classifier --task_name=nope --data_dir=" EST_TEST_DATA "/glue_mini/MRPC --vocab_file="
           EST_TEST_DATA "/vocab_uncased.txt --bert_config_file=" EST_TEST_DATA
           "/run_classifier/bert_config_h32.json --output_dir=%s --do_train",
           out_dir);
  EXPECT(2, args, "--task_name", "Task not found: nope");
  snprintf(args, sizeof args,
           EST_BIN " run_classifier --task_name=mrpc --data_dir=%s/none --vocab_file=" EST_TEST_DATA
           "/vocab_uncased.txt --bert_config_file=" EST_TEST_DATA "/run_classifier/bert_config_h32.json"
           " --output_dir=%s --do_train",
           tmp, out_dir);
  EXPECT(2, args, "--data_dir", "none");
  /* CoLA's dev.tsv is absent in MRPC's directory. */
  snprintf(args, sizeof args,
           EST_BIN " run_classifier --task_name=mnli --data_dir=" EST_TEST_DATA "/glue_mini/MRPC --vocab_file="
           EST_TEST_DATA "/vocab_uncased.txt --bert_config_file=" EST_TEST_DATA
           "/run_classifier/bert_config_h32.json --output_dir=%s --do_eval",
           out_dir);
  EXPECT(2, args, "--data_dir", "dev_matched.tsv");
  snprintf(args, sizeof args,
           EST_BIN " run_classifier --task_name=mrpc --data_dir=" EST_TEST_DATA "/glue_mini/MRPC --vocab_file=%s/v.txt"
           " --bert_config_file=" EST_TEST_DATA "/run_classifier/bert_config_h32.json --output_dir=%s --do_train",
           tmp, out_dir);
  EXPECT(2, args, "--vocab_file", "v.txt");
  snprintf(args, sizeof args, BASE " --output_dir=%s --do_train --init_checkpoint=%s/bert_model.ckpt", out_dir, tmp);
  EXPECT(2, args, "--init_checkpoint", "bert_model.ckpt.index does not exist");

  /* A config that is not JSON. */
  char path[512];
  snprintf(path, sizeof path, "%s/bad_config.json", tmp);
  assert_int_equal(est_write_file_atomic(path, "{\"hidden_size\": 32,", 19), EST_OK);
  snprintf(args, sizeof args,
           EST_BIN " run_classifier --task_name=mrpc --data_dir=" EST_TEST_DATA "/glue_mini/MRPC --vocab_file="
           EST_TEST_DATA "/vocab_uncased.txt --bert_config_file=%s --output_dir=%s --do_train",
           path, out_dir);
  EXPECT(2, args, "--bert_config_file", "bad_config.json");

  /* The vocab is larger than the model's embedding table. */
  snprintf(args, sizeof args, BASE " --output_dir=%s --do_eval --bert_config_file=" EST_TEST_DATA
           "/keras_bert_tiny/bert_config.json --max_seq_length=16", out_dir);
  EXPECT(1, args, "30522 tokens", "vocab_size 15");

  /* A malformed training file: a row with too few columns, named by file and line. */
  char data[300];
  snprintf(data, sizeof data, "%s/cola", tmp);
  assert_int_equal(est_mkdirs(data), EST_OK);
  snprintf(path, sizeof path, "%s/train.tsv", data);
  const char bad[] = "gj04\t1\t\tgood sentence .\ngj04\t0\n";
  assert_int_equal(est_write_file_atomic(path, bad, sizeof bad - 1), EST_OK);
  snprintf(args, sizeof args,
           EST_BIN " run_classifier --task_name=cola --data_dir=%s --vocab_file=" EST_TEST_DATA
           "/vocab_uncased.txt --bert_config_file=" EST_TEST_DATA "/run_classifier/bert_config_h32.json"
           " --output_dir=%s --do_train --train_batch_size=1",
           data, out_dir);
  EXPECT(1, args, "train.tsv", ":2");
  /* A label outside the task's list. */
  const char bad_label[] = "gj04\t1\t\tgood sentence .\ngj04\t7\t*\tbad sentence .\n";
  assert_int_equal(est_write_file_atomic(path, bad_label, sizeof bad_label - 1), EST_OK);
  EXPECT(1, args, "train.tsv", "7");

  /* output_dir is a file. */
  snprintf(path, sizeof path, "%s/file", tmp);
  assert_int_equal(est_write_file_atomic(path, "x", 1), EST_OK);
  char *out = NULL;
  snprintf(args, sizeof args, BASE " --output_dir=%s --do_train", path);
  assert_int_equal(test_run(&out, 1, "%s", args), 2);
  assert_non_null(strstr(out, "is not a directory"));
  free(out);
}

static void test_tpu_flags_are_noted(void **state) {
  (void)state;
  char args[4096];
  /* Accepted (no "unknown flag"), noted, and the run goes on to its next check. */
  snprintf(args, sizeof args,
           BASE " --output_dir=%s --use_tpu --tpu_name=grpc://x --num_tpu_cores=8 --iterations_per_loop 10", out_dir);
  EXPECT(2, args, "note: --use_tpu is a TPU flag", "note: --tpu_name is a TPU flag",
         "note: --iterations_per_loop is a TPU flag", "At least one of");
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_help_lists_every_flag),
    cmocka_unit_test_setup_teardown(test_usage_errors, setup, teardown),
    cmocka_unit_test_setup_teardown(test_impossible_combinations, setup, teardown),
    cmocka_unit_test_setup_teardown(test_missing_and_bad_inputs, setup, teardown),
    cmocka_unit_test_setup_teardown(test_tpu_flags_are_noted, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
