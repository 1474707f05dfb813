/* `est run_classifier` end to end on small slices of GLUE (tests/data/glue_mini) and on a
 * TensorFlow-written checkpoint: the files it writes, their formats, resuming in the same
 * output_dir, record parity with the reference's eval.tf_record, init_checkpoint. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "est/ckpt.h"
#include "est/est.h"
#include "test_util.h"

#define SMALL_CONFIG EST_TEST_DATA "/run_classifier/bert_config_h32.json"
#define UNCASED EST_TEST_DATA "/vocab_uncased.txt"

/* eval_results.txt: "key = value" lines with exactly `keys` in this (sorted) order;
 * returns the values; global_step must be an integer. */
static void check_eval_results(const char *dir, const char *const *keys, size_t n, double *values) {
  char *text = test_read_in(dir, "eval_results.txt");
  const char *p = text;
  for (size_t i = 0; i < n; i++) {
    size_t klen = strlen(keys[i]);
    if (strncmp(p, keys[i], klen) || strncmp(p + klen, " = ", 3))
      fail_msg("eval_results.txt line %zu: want key '%s', file:\n%s", i + 1, keys[i], text);
    char *end;
    values[i] = strtod(p + klen + 3, &end);
    if (*end != '\n') fail_msg("eval_results.txt: bad number for %s:\n%s", keys[i], text);
    if (!strcmp(keys[i], "global_step") && strchr(p + klen + 3, '.') < end)
      fail_msg("global_step is not an integer:\n%s", text);
    if (!isfinite(values[i])) fail_msg("%s is not finite", keys[i]);
    p = end + 1;
  }
  if (*p) fail_msg("eval_results.txt has extra lines:\n%s", text);
  free(text);
}

/* test_results.tsv: `rows` lines of `cols` TAB-separated probabilities summing to 1. */
static void check_test_results(const char *dir, int rows, int cols) {
  char *text = test_read_in(dir, "test_results.tsv");
  const char *p = text;
  for (int r = 0; r < rows; r++) {
    double sum = 0;
    for (int c = 0; c < cols; c++) {
      char *end;
      double v = strtod(p, &end);
      if (end == p || v < 0 || v > 1) fail_msg("test_results.tsv line %d column %d: bad probability", r + 1, c + 1);
      sum += v;
      if (*end != (c + 1 < cols ? '\t' : '\n'))
        fail_msg("test_results.tsv line %d: want %d TAB-separated columns:\n%s", r + 1, cols, text);
      p = end + 1;
    }
    if (fabs(sum - 1.0) > 1e-5) fail_msg("test_results.tsv line %d sums to %g", r + 1, sum);
  }
  if (*p) fail_msg("test_results.tsv has more than %d lines", rows);
  free(text);
}

/* Every record of `a` parses to the same features as the record of `b` at its index
 * (feature order inside a serialized Example is free). */
static void assert_same_records(const char *a, const char *b, uint64_t want_count) {
  est_tfrecord_reader *ra, *rb;
  assert_int_equal(est_tfrecord_reader_open(&ra, a, EST_COMPRESSION_NONE), EST_OK);
  assert_int_equal(est_tfrecord_reader_open(&rb, b, EST_COMPRESSION_NONE), EST_OK);
  est_example ea, eb;
  est_example_init(&ea);
  est_example_init(&eb);
  uint64_t n = 0;
  for (;; n++) {
    const uint8_t *da, *db;
    size_t na, nb;
    est_status sa = est_tfrecord_reader_next(ra, &da, &na);
    est_status sb = est_tfrecord_reader_next(rb, &db, &nb);
    if (sa == EST_ERR_OUT_OF_RANGE && sb == EST_ERR_OUT_OF_RANGE) break;
    if (sa != EST_OK || sb != EST_OK) fail_msg("record %llu: %s ends or fails before %s", (unsigned long long)n, sa ? a : b, sa ? b : a);
    assert_int_equal(est_example_parse(&ea, da, na), EST_OK);
    assert_int_equal(est_example_parse(&eb, db, nb), EST_OK);
    assert_int_equal(ea.count, 5);
    assert_int_equal(ea.count, eb.count);
    for (size_t i = 0; i < ea.count; i++) {
      const est_feature *fa = &ea.features[i], *fb = est_example_find(&eb, fa->key);
      if (!fb) fail_msg("record %llu: feature %s missing", (unsigned long long)n, fa->key);
      assert_int_equal(fa->kind, EST_FEATURE_INT64);
      assert_int_equal(fb->kind, EST_FEATURE_INT64);
      assert_int_equal(fa->count, fb->count);
      if (memcmp(fa->int64s, fb->int64s, fa->count * sizeof(int64_t)))
        fail_msg("record %llu: feature %s differs", (unsigned long long)n, fa->key);
    }
  }
  assert_int_equal(n, want_count);
  est_example_clear(&ea);
  est_example_clear(&eb);
  est_tfrecord_reader_close(ra);
  est_tfrecord_reader_close(rb);
}

static void copy_file(const char *from, const char *to) {
  uint8_t *data;
  size_t size;
  assert_int_equal(est_read_file(from, &data, &size), EST_OK);
  assert_int_equal(est_write_file_atomic(to, data, size), EST_OK);
  free(data);
}

/* Parity: MRPC dev converted by est equals TF 1.15 run_classifier.py's eval.tf_record, and
 * est trains and evaluates from those records (train.tsv = dev.tsv here, so train.tf_record
 * must hold the same 408 records). */
static void test_mrpc_records_match_reference_and_train(void **state) {
  (void)state;
  char data[512], out[512], path[1024];
  snprintf(data, sizeof data, "%s/mrpc", test_tmpdir);
  snprintf(out, sizeof out, "%s/out", test_tmpdir);
  assert_int_equal(est_mkdirs(data), EST_OK);
  est_path_join(path, sizeof path, data, "train.tsv");
  copy_file(EST_TEST_DATA "/glue_mini/MRPC/dev.tsv", path);
  est_path_join(path, sizeof path, data, "dev.tsv");
  copy_file(EST_TEST_DATA "/glue_mini/MRPC/dev.tsv", path);
  char *log = test_run_ok(EST_BIN " run_classifier --task_name=MRPC --do_train --do_eval --data_dir=%s"
                             " --vocab_file=" UNCASED " --bert_config_file=" SMALL_CONFIG " --output_dir=%s"
                             " --max_seq_length=128 --train_batch_size=32 --eval_batch_size=16 --learning_rate=1e-3"
                             " --num_train_epochs=1 --num_threads=2",
                     data, out);
  est_path_join(path, sizeof path, out, "eval.tf_record");
  assert_same_records(path, EST_TEST_DATA "/mrpc_eval.tf_record", 408);
  est_path_join(path, sizeof path, out, "train.tf_record");
  assert_same_records(path, EST_TEST_DATA "/mrpc_eval.tf_record", 408);

  /* 408 / 32 * 1 = 12.75 -> 12 steps; 1 warm-up step. The reference's logs. */
  assert_non_null(strstr(log, "***** Running training *****"));
  assert_non_null(strstr(log, "  Num steps = 12"));
  assert_non_null(strstr(log, "***** Running evaluation *****"));
  assert_non_null(strstr(log, "  Num examples = 408 (408 actual, 0 padding)"));
  assert_non_null(strstr(log, "guid: dev-1"));
  assert_non_null(strstr(log, "*** Features ***"));
  assert_non_null(strstr(log, "examples/sec"));
  /* 408 = 25 full batches of 16 + one of 8: loss (mean of batch means) != eval_loss. */
  const char *keys[] = {"eval_accuracy", "eval_f1", "eval_loss", "global_step", "loss"};
  double v[5];
  check_eval_results(out, keys, 5, v);
  assert_true(v[0] >= 0 && v[0] <= 1);
  assert_true(v[1] >= 0 && v[1] <= 1);
  assert_true(v[2] > 0);
  assert_int_equal((int)v[3], 12);
  free(log);

  /* The checkpoint carries TF's variable names (and AdamWeightDecay's slot names). */
  est_path_join(path, sizeof path, out, "model.ckpt-12");
  est_ckpt_reader *r;
  assert_int_equal(est_ckpt_reader_open(&r, path), EST_OK);
  const char *names[] = {"bert/embeddings/word_embeddings", "bert/encoder/layer_0/attention/self/query/kernel",
                         "bert/encoder/layer_0/output/LayerNorm/gamma", "bert/pooler/dense/kernel",
                         "output_weights", "output_bias", "output_weights/adam_m", "output_weights/adam_v",
                         "global_step"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (!est_ckpt_reader_has(r, names[i])) fail_msg("model.ckpt-12 lacks %s", names[i]);
  int rank;
  int64_t dims[EST_MAX_RANK];
  assert_int_equal(est_ckpt_reader_info(r, "output_weights", NULL, &rank, dims), EST_OK);
  assert_int_equal(rank, 2);
  assert_int_equal(dims[0], 2); /* [C, H]: transposed w.r.t. dense kernels, as the reference */
  assert_int_equal(dims[1], 32);
  est_ckpt_reader_close(r);
}

/* CoLA slice: train + eval + predict, the result files' formats, then resuming. */
static void test_cola_end_to_end_and_resume(void **state) {
  (void)state;
  char out[512];
  snprintf(out, sizeof out, "%s/cola", test_tmpdir);
  /* 10 training examples / batch 4 * 2 epochs = 5 steps; a checkpoint every 2. */
#define COLA_RUN                                                                                       \
  EST_BIN " run_classifier --task_name=cola --do_train --do_eval --do_predict --data_dir=" EST_TEST_DATA     \
          "/glue_mini/CoLA --vocab_file=" UNCASED " --bert_config_file=" SMALL_CONFIG " --output_dir=%s"     \
          " --max_seq_length=32 --train_batch_size=4 --eval_batch_size=4 --predict_batch_size=3"            \
          " --learning_rate=1e-3 --save_checkpoints_steps=2 --num_threads=2 --num_train_epochs="
  char *log = test_run_ok(COLA_RUN "2", out);
  assert_non_null(strstr(log, "  Num steps = 5"));
  assert_non_null(strstr(log, "***** Running prediction*****"));
  assert_non_null(strstr(log, "***** Predict results *****"));
  free(log);
  const char *keys[] = {"eval_accuracy", "eval_loss", "eval_mcc", "global_step", "loss"};
  double v[5];
  check_eval_results(out, keys, 5, v);
  assert_int_equal((int)v[3], 5);
  assert_true(v[2] >= -1 && v[2] <= 1);
  check_test_results(out, 10, 2);
  char path[1024];
  est_path_join(path, sizeof path, out, "model.ckpt-5.index");
  assert_true(est_file_exists(path));
  est_path_join(path, sizeof path, out, "train.tf_record");
  uint64_t count;
  assert_int_equal(est_tfrecord_count(path, EST_COMPRESSION_NONE, &count), EST_OK);
  assert_int_equal(count, 10);

  /* The same command again: the checkpoint at max_steps exists, so no training. */
  log = test_run_ok(COLA_RUN "2", out);
  assert_non_null(strstr(log, "Skipping training since max_steps has already saved."));
  assert_null(strstr(log, "step = 0"));
  free(log);
  check_eval_results(out, keys, 5, v);
  assert_int_equal((int)v[3], 5);

  /* More epochs: resumes from model.ckpt-5 and runs steps 5..9, not from scratch. */
  log = test_run_ok(COLA_RUN "4", out);
  assert_non_null(strstr(log, "  Num steps = 10"));
  assert_non_null(strstr(log, "model.ckpt-5"));
  assert_null(strstr(log, "Saving checkpoints for 0 "));
  assert_null(strstr(log, "step = 0 "));
  assert_non_null(strstr(log, "Saving checkpoints for 10 "));
  free(log);
  check_eval_results(out, keys, 5, v);
  assert_int_equal((int)v[3], 10);
  check_test_results(out, 10, 2);
}

/* Killed after step 6 and restarted = never interrupted: the checkpoint carries the
 * input position (shuffle buffer included) and the seed, so the resumed run sees the same
 * batches and dropout masks and ends with the same results, digit for digit. */
static void test_resume_is_exact(void **state) {
  (void)state;
  char full[512], cut[512], from[1024], to[1024];
  snprintf(full, sizeof full, "%s/full", test_tmpdir);
  snprintf(cut, sizeof cut, "%s/cut", test_tmpdir);
  char *log = test_run_ok(COLA_RUN "4", full);
  free(log);
  /* The state a run killed just after saving step 6 leaves: checkpoints 0..6 only. */
  assert_int_equal(est_mkdirs(cut), EST_OK);
  const char *files[] = {"model.ckpt-6.index", "model.ckpt-6.data-00000-of-00001"};
  for (size_t i = 0; i < 2; i++) {
    est_path_join(from, sizeof from, full, files[i]);
    est_path_join(to, sizeof to, cut, files[i]);
    copy_file(from, to);
  }
  est_path_join(to, sizeof to, cut, "checkpoint");
  const char state_text[] = "model_checkpoint_path: \"model.ckpt-6\"\nall_model_checkpoint_paths: \"model.ckpt-6\"\n";
  assert_int_equal(est_write_file_atomic(to, state_text, sizeof state_text - 1), EST_OK);
  log = test_run_ok(COLA_RUN "4", cut);
  assert_non_null(strstr(log, "model.ckpt-6"));
  assert_null(strstr(log, "restarts from its beginning"));
  assert_null(strstr(log, "step = 0 "));
  free(log);
  const char *names[] = {"eval_results.txt", "test_results.tsv"};
  for (size_t i = 0; i < 2; i++) {
    char *a = test_read_in(full, names[i]), *b = test_read_in(cut, names[i]);
    assert_string_equal(a, b);
    free(a);
    free(b);
  }
}

/* MRPC slice, eval + predict on a fresh output_dir without init_checkpoint: the
 * reference's Estimator then evaluates the random initialisation at global_step 0. */
static void test_mrpc_eval_predict_only(void **state) {
  (void)state;
  char out[512];
  snprintf(out, sizeof out, "%s/mrpc_eval", test_tmpdir);
  char *log = test_run_ok(EST_BIN " run_classifier --task_name=mrpc --do_eval --do_predict --data_dir=" EST_TEST_DATA
                             "/glue_mini/MRPC --vocab_file=" UNCASED " --bert_config_file=" SMALL_CONFIG
                             " --output_dir=%s --max_seq_length=48 --eval_batch_size=64 --num_threads=2",
                     out);
  assert_non_null(strstr(log, "running initialization"));
  free(log);
  const char *keys[] = {"eval_accuracy", "eval_f1", "eval_loss", "global_step", "loss"};
  double v[5];
  check_eval_results(out, keys, 5, v);
  assert_int_equal((int)v[3], 0);
  check_test_results(out, 10, 2);
  char path[1024];
  est_path_join(path, sizeof path, out, "train.tf_record");
  assert_false(est_file_exists(path));
}

/* A TensorFlow-written BERT checkpoint (keras-bert's, 46 weights + Adam slots): every bert/
 * variable is loaded and logged *INIT_FROM_CKPT*, the head is fresh, training runs, and the
 * checkpoints written keep the same names and (at step 0) the same values. */
static void test_finetune_tf_checkpoint(void **state) {
  (void)state;
  char out[512];
  snprintf(out, sizeof out, "%s/jack", test_tmpdir);
  char *log = test_run_ok(EST_BIN " run_classifier --task_name=tsv --tsv_labels=bright,dull --tsv_test_label_column=-1"
                             " --do_train --do_eval --do_predict --data_dir=" EST_TEST_DATA "/run_classifier/jack"
                             " --vocab_file=" EST_TEST_DATA "/keras_bert_tiny/vocab.txt --bert_config_file=" EST_TEST_DATA
                             "/keras_bert_tiny/bert_config.json --init_checkpoint=" EST_TEST_DATA
                             "/keras_bert_tiny/bert_model.ckpt --output_dir=%s --max_seq_length=12"
                             " --train_batch_size=8 --num_train_epochs=2 --learning_rate=1e-3 --num_threads=1",
                     out);
  /* 5 embedding + 2 x 16 encoder + 2 pooler variables, in the variable table logged in
   * each of the three modes. Only training starts from init_checkpoint; eval and predict
   * restore model.ckpt-6, and est marks only values that really came from init_checkpoint
   * (the reference marks them in every mode, then restores over them). The classifier
   * head is never in the pre-trained checkpoint. */
  assert_int_equal(test_count_lines_with(log, "name = bert/", "*INIT_FROM_CKPT*"), 39);
  assert_int_equal(test_count_lines_with(log, "name = bert/", NULL), 3 * 39);
  assert_int_equal(test_count_lines_with(log, "name = output_", "*INIT_FROM_CKPT*"), 0);
  assert_int_equal(test_count_lines_with(log, "name = output_", NULL), 3 * 2);
  free(log);
  const char *keys[] = {"eval_accuracy", "eval_loss", "global_step", "loss"};
  double v[4];
  check_eval_results(out, keys, 4, v);
  assert_int_equal((int)v[2], 6); /* 24 / 8 * 2 */
  check_test_results(out, 5, 2);

  est_ckpt_reader *tf, *ours;
  char path[1024];
  est_path_join(path, sizeof path, out, "model.ckpt-0");
  assert_int_equal(est_ckpt_reader_open(&tf, EST_TEST_DATA "/keras_bert_tiny/bert_model.ckpt"), EST_OK);
  assert_int_equal(est_ckpt_reader_open(&ours, path), EST_OK);
  int compared = 0;
  for (size_t i = 0; i < est_ckpt_reader_count(tf); i++) {
    const char *name = est_ckpt_reader_name(tf, i);
    if (strncmp(name, "bert/", 5) || strstr(name, "/adam_")) continue;
    if (!est_ckpt_reader_has(ours, name)) fail_msg("model.ckpt-0 lacks %s", name);
    est_tensor a, b;
    assert_int_equal(est_ckpt_reader_read(tf, name, &a), EST_OK);
    assert_int_equal(est_ckpt_reader_read(ours, name, &b), EST_OK);
    assert_int_equal(est_tensor_num_bytes(&a), est_tensor_num_bytes(&b));
    if (memcmp(a.data, b.data, est_tensor_num_bytes(&a))) fail_msg("%s: step-0 value differs from the TF checkpoint", name);
    est_tensor_free(&a);
    est_tensor_free(&b);
    compared++;
  }
  assert_int_equal(compared, 39);
  est_ckpt_reader_close(tf);
  est_ckpt_reader_close(ours);

  /* Predict-only into an empty output_dir with --init_checkpoint = the fine-tuned
   * checkpoint loads everything, head included: the same probabilities. */
  char out2[512];
  snprintf(out2, sizeof out2, "%s/jack_predict", test_tmpdir);
  log = test_run_ok(EST_BIN " run_classifier --task_name=tsv --tsv_labels=bright,dull --tsv_test_label_column=-1"
                       " --do_predict --data_dir=" EST_TEST_DATA "/run_classifier/jack --vocab_file=" EST_TEST_DATA
                       "/keras_bert_tiny/vocab.txt --bert_config_file=" EST_TEST_DATA
                       "/keras_bert_tiny/bert_config.json --init_checkpoint=%s/model.ckpt-6 --output_dir=%s"
                       " --max_seq_length=12 --num_threads=1",
               out, out2);
  assert_int_equal(test_count_lines_with(log, "name = output_", "*INIT_FROM_CKPT*"), 2);
  free(log);
  char *a = test_read_in(out, "test_results.tsv"), *b = test_read_in(out2, "test_results.tsv");
  assert_string_equal(a, b);
  free(a);
  free(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(test_mrpc_records_match_reference_and_train,
                                    test_tmpdir_setup, test_tmpdir_teardown),
    cmocka_unit_test_setup_teardown(test_cola_end_to_end_and_resume, test_tmpdir_setup, test_tmpdir_teardown),
    cmocka_unit_test_setup_teardown(test_resume_is_exact, test_tmpdir_setup, test_tmpdir_teardown),
    cmocka_unit_test_setup_teardown(test_mrpc_eval_predict_only, test_tmpdir_setup, test_tmpdir_teardown),
    cmocka_unit_test_setup_teardown(test_finetune_tf_checkpoint, test_tmpdir_setup, test_tmpdir_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
