/* `est run_pretraining` end to end: continuing to pretrain the TF-written keras_bert_tiny
 * checkpoint (its cls/... heads included) on records that `est create_pretraining_data` writes
 * from tests/data/pretraining/jack_docs.txt, fine-tuning the result with run_classifier,
 * a from-scratch run on the script-written CoLA records, and records whose lengths
 * disagree with the flags. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/ckpt.h"
#include "est/file.h"
#include "test_util.h"

#define TINY EST_TEST_DATA "/keras_bert_tiny"

/* run_pretraining's keys, sorted as the file lists them, each a finite number. */
static void check_eval_results(const char *dir, double *v) {
  static const char *const keys[] = {"global_step", "loss", "masked_lm_accuracy", "masked_lm_loss",
                                     "next_sentence_accuracy", "next_sentence_loss"};
  char *text = test_read_in(dir, "eval_results.txt");
  assert_non_null(text);
  const char *p = text;
  for (size_t i = 0; i < 6; i++) {
    size_t klen = strlen(keys[i]);
    if (strncmp(p, keys[i], klen) || strncmp(p + klen, " = ", 3))
      fail_msg("eval_results.txt line %zu: want key '%s', file:\n%s", i + 1, keys[i], text);
    char *end;
    v[i] = strtod(p + klen + 3, &end);
    if (*end != '\n' || !isfinite(v[i])) fail_msg("eval_results.txt: bad number for %s:\n%s", keys[i], text);
    p = end + 1;
  }
  assert_int_equal(*p, 0);
  free(text);
}

static void make_jack_records(const char *path) {
  free(test_run_ok(EST_BIN " create_pretraining_data --input_file=" EST_TEST_DATA "/pretraining/jack_docs.txt"
                      " --output_file=%s --vocab_file=" TINY "/vocab.txt --max_seq_length=16"
                      " --max_predictions_per_seq=3 --dupe_factor=4 --random_seed=1", path));
}

static void test_continue_pretraining_tf_checkpoint_then_finetune(void **state) {
  (void)state;
  char records[512], out[512], ft[512];
  snprintf(records, sizeof records, "%s/jack.tfrecord", test_tmpdir);
  snprintf(out, sizeof out, "%s/pretrain", test_tmpdir);
  snprintf(ft, sizeof ft, "%s/finetune", test_tmpdir);
  make_jack_records(records);
  /* a glob and a comma list naming the same file twice: both read */
  char *log = test_run_ok(EST_BIN " run_pretraining --bert_config_file=" TINY "/bert_config.json --input_file=%s/jack*.tfrecord,%s"
                             " --output_dir=%s --init_checkpoint=" TINY "/bert_model.ckpt --max_seq_length=16"
                             " --max_predictions_per_seq=3 --do_train --do_eval --train_batch_size=8"
                             " --eval_batch_size=8 --num_train_steps=10 --num_warmup_steps=2 --learning_rate=1e-3"
                             " --save_checkpoints_steps=5 --max_eval_steps=4 --use_tpu=false --seed=3 --num_threads=1",
                     test_tmpdir, records, out);
  /* every variable of Google's layout came from the TF checkpoint: 39 bert/ + 7 cls/ */
  assert_int_equal(test_count_lines_with(log, "name = bert/", "*INIT_FROM_CKPT*"), 39);
  assert_int_equal(test_count_lines_with(log, "name = cls/", "*INIT_FROM_CKPT*"), 7);
  assert_int_equal(test_count_lines_with(log, "note: --use_tpu is a TPU flag", NULL), 1);
  free(log);
  /* evaluation alone from the TF checkpoint logs the features and the variable table with
   * its marks, as run_pretraining.py's model_fn does in every mode */
  char eval_only[600];
  snprintf(eval_only, sizeof eval_only, "%s_eval_only", out);
  log = test_run_ok(EST_BIN " run_pretraining --bert_config_file=" TINY "/bert_config.json --input_file=%s"
                       " --output_dir=%s --init_checkpoint=" TINY "/bert_model.ckpt --max_seq_length=16"
                       " --max_predictions_per_seq=3 --do_eval --eval_batch_size=8 --max_eval_steps=2 --num_threads=1",
                    records, eval_only);
  assert_int_equal(test_count_lines_with(log, "name = bert/", "*INIT_FROM_CKPT*"), 39);
  assert_int_equal(test_count_lines_with(log, "name = cls/", "*INIT_FROM_CKPT*"), 7);
  assert_int_equal(test_count_lines_with(log, "*** Features ***", NULL), 1);
  assert_int_equal(test_count_lines_with(log, "name = masked_lm_positions, shape = (8, 3)", NULL), 1);
  free(log);
  double v[6];
  check_eval_results(out, v);
  assert_int_equal((int)v[0], 10);
  assert_true(v[2] >= 0 && v[2] <= 1 && v[4] >= 0 && v[4] <= 1);
  /* The estimator's loss is the mean of the batches' totals, the two metric losses are
   * weighted means over all rows: close, not equal, when batches hold different weight sums. */
  assert_true(fabs(v[1] - (v[3] + v[5])) < 0.05 * v[1]);

  /* the checkpoint keeps Google's names and shapes, heads included */
  char path[1024];
  est_path_join(path, sizeof path, out, "model.ckpt-10");
  est_ckpt_reader *r;
  assert_int_equal(est_ckpt_reader_open(&r, path), EST_OK);
  assert_true(est_ckpt_reader_has(r, "cls/predictions/output_bias"));
  assert_true(est_ckpt_reader_has(r, "cls/predictions/transform/LayerNorm/gamma"));
  assert_true(est_ckpt_reader_has(r, "cls/seq_relationship/output_weights"));
  assert_true(est_ckpt_reader_has(r, "bert/embeddings/word_embeddings"));
  assert_false(est_ckpt_reader_has(r, "cls/predictions/output_weights")); /* tied: no table of its own */
  est_ckpt_reader_close(r);

  /* ... and fine-tunes with run_classifier: every bert/ variable loaded from it */
  log = test_run_ok(EST_BIN " run_classifier --task_name=tsv --tsv_labels=bright,dull --tsv_test_label_column=-1"
                       " --do_train --do_eval --data_dir=" EST_TEST_DATA "/run_classifier/jack"
                       " --vocab_file=" TINY "/vocab.txt --bert_config_file=" TINY "/bert_config.json"
                       " --init_checkpoint=%s --output_dir=%s --max_seq_length=12 --train_batch_size=8"
                       " --num_train_epochs=2 --learning_rate=1e-3 --num_threads=1",
               path, ft);
  assert_int_equal(test_count_lines_with(log, "name = bert/", "*INIT_FROM_CKPT*"), 39);
  free(log);
  char *text = test_read_in(ft, "eval_results.txt");
  assert_non_null(strstr(text, "eval_accuracy = "));
  free(text);
}

/* The records create_pretraining_data.py wrote (seq 128, 20 predictions, vocab 30522),
 * a small BERT from scratch: trains and evaluates. */
static void test_from_scratch_on_script_records(void **state) {
  (void)state;
  char cfg[512], out[512];
  snprintf(cfg, sizeof cfg, "%s/small_config.json", test_tmpdir);
  snprintf(out, sizeof out, "%s/scratch", test_tmpdir);
  const char *json = "{\"vocab_size\": 30522, \"hidden_size\": 16, \"num_hidden_layers\": 1, \"num_attention_heads\": 2,"
                     " \"intermediate_size\": 32, \"hidden_act\": \"gelu\", \"max_position_embeddings\": 128,"
                     " \"type_vocab_size\": 2, \"initializer_range\": 0.02}\n";
  test_write_bytes(cfg, json, strlen(json));
  free(test_run_ok(EST_BIN " run_pretraining --bert_config_file=%s --input_file=" EST_TEST_DATA
                      "/pretraining/cola_seed12345.tfrecord --output_dir=%s --do_train --do_eval --train_batch_size=4"
                      " --eval_batch_size=4 --num_train_steps=3 --num_warmup_steps=1 --learning_rate=1e-3"
                      " --max_eval_steps=2 --seed=5 --num_threads=1",
              cfg, out));
  double v[6];
  check_eval_results(out, v);
  assert_int_equal((int)v[0], 3);
  /* near log(30522) = 10.3 for the masked LM after 3 steps from a random init */
  assert_true(v[3] > 8 && v[3] < 12);
}

/* An init_checkpoint that leaves encoder variables random is an error naming the checkpoint,
 * the counts on each side and the first names that did not match, unless
 * --init_checkpoint_partial accepts it: here Google's tiny checkpoint copied under
 * HuggingFace's names (0 of 39 match), then with its pooler left out (37 of 39). */
static void copy_checkpoint(const char *to, int hf_names, const char *skip) {
  est_ckpt_reader *r;
  assert_int_equal(est_ckpt_reader_open(&r, TINY "/bert_model.ckpt"), EST_OK);
  size_t n = 0, count = est_ckpt_reader_count(r);
  const char **names = calloc(count, sizeof *names);
  char **owned = calloc(count, sizeof *owned);
  est_tensor *tensors = calloc(count, sizeof *tensors);
  for (size_t i = 0; i < count; i++) {
    const char *name = est_ckpt_reader_name(r, i);
    if (strncmp(name, "bert/", 5) || strstr(name, "adam_") || (skip && strstr(name, skip))) continue;
    owned[n] = strdup(hf_names ? name + 5 : name);
    for (char *c = owned[n]; hf_names && *c; c++)
      if (*c == '/') *c = '.';
    names[n] = owned[n];
    assert_int_equal(est_ckpt_reader_read(r, name, &tensors[n]), EST_OK);
    n++;
  }
  est_ckpt_reader_close(r);
  assert_int_equal(est_ckpt_save(to, n, names, tensors), EST_OK);
  for (size_t i = 0; i < n; i++) free(owned[i]), est_tensor_free(&tensors[i]);
  free(names), free(owned), free(tensors);
}

static void test_init_checkpoint_that_misses_the_encoder(void **state) {
  (void)state;
  char records[512], hf[512], nopool[512], out[512];
  snprintf(records, sizeof records, "%s/jack_init.tfrecord", test_tmpdir);
  snprintf(hf, sizeof hf, "%s/hf_names.ckpt", test_tmpdir);
  snprintf(nopool, sizeof nopool, "%s/no_pooler.ckpt", test_tmpdir);
  make_jack_records(records);
  copy_checkpoint(hf, 1, NULL);
  copy_checkpoint(nopool, 0, "pooler");
  const char *flags = " --max_seq_length=16 --max_predictions_per_seq=3 --do_train --train_batch_size=8"
                      " --num_train_steps=2 --num_warmup_steps=1 --seed=1 --num_threads=1";
  char *log = NULL;
  snprintf(out, sizeof out, "%s/hf_out", test_tmpdir);
  int rc = test_run(&log, 1, EST_BIN " run_pretraining --bert_config_file=" TINY "/bert_config.json --input_file=%s"
                                     " --output_dir=%s --init_checkpoint=%s%s", records, out, hf, flags);
  assert_int_equal(rc, 1);
  char want[700];
  snprintf(want, sizeof want, "--init_checkpoint=%s initialises 0 of the model's 39 encoder variables", hf);
  if (!strstr(log, want) || !strstr(log, "0 of its 39 tensors matched") ||
      !strstr(log, "Not initialised: bert/embeddings/word_embeddings,") || !strstr(log, "embeddings.LayerNorm.beta"))
    fail_msg("unclear error:\n%s", log);
  free(log);
  char prefix[600];
  snprintf(prefix, sizeof prefix, "%s/model.ckpt-0.index", out);
  assert_false(est_file_exists(prefix)); /* nothing trained, nothing saved */

  snprintf(out, sizeof out, "%s/nopool_out", test_tmpdir);
  rc = test_run(&log, 1, EST_BIN " run_pretraining --bert_config_file=" TINY "/bert_config.json --input_file=%s"
                                 " --output_dir=%s --init_checkpoint=%s%s", records, out, nopool, flags);
  assert_int_equal(rc, 1);
  if (!strstr(log, "initialises 37 of the model's 39 encoder variables") ||
      !strstr(log, "Not initialised: bert/pooler/dense/kernel, bert/pooler/dense/bias.") ||
      !strstr(log, "no variable took: none"))
    fail_msg("unclear error:\n%s", log);
  free(log);
  /* accepted knowingly: trains, with a warning naming what stayed random */
  log = test_run_ok(EST_BIN " run_pretraining --bert_config_file=" TINY "/bert_config.json --input_file=%s"
                       " --output_dir=%s --init_checkpoint=%s --init_checkpoint_partial%s", records, out, nopool, flags);
  assert_int_equal(test_count_lines_with(log, "initialised 37 of the 39 encoder variables", "bert/pooler/dense/kernel"), 1);
  assert_int_equal(test_count_lines_with(log, "name = bert/", "*INIT_FROM_CKPT*"), 37);
  free(log);
}

static void test_record_lengths_disagree_with_flags(void **state) {
  (void)state;
  char records[512], out[512];
  snprintf(records, sizeof records, "%s/jack2.tfrecord", test_tmpdir);
  snprintf(out, sizeof out, "%s/bad", test_tmpdir);
  make_jack_records(records);
  char *log = NULL;
  int rc = test_run(&log, 1, EST_BIN " run_pretraining --bert_config_file=" TINY "/bert_config.json --input_file=%s"
                                     " --output_dir=%s --max_seq_length=16 --max_predictions_per_seq=5 --do_eval"
                                     " --eval_batch_size=8 --seed=1 --num_threads=1", records, out);
  assert_int_equal(rc, 1);
  char want[700];
  snprintf(want, sizeof want, "%s record 0: Key: masked_lm_positions", records);
  if (!strstr(log, want) || !strstr(log, "--max_predictions_per_seq=5")) fail_msg("unclear error:\n%s", log);
  free(log);
  rc = test_run(&log, 1, EST_BIN " run_pretraining --bert_config_file=" TINY "/bert_config.json --input_file=%s"
                                 " --output_dir=%s --max_seq_length=12 --max_predictions_per_seq=3 --do_train"
                                 " --train_batch_size=8 --num_train_steps=2 --seed=1 --num_threads=1", records, out);
  assert_int_equal(rc, 1);
  if (!strstr(log, "Key: input_ids") || !strstr(log, "--max_seq_length=12") || !strstr(log, records))
    fail_msg("unclear error:\n%s", log);
  free(log);
  rc = test_run(&log, 1, EST_BIN " run_pretraining --bert_config_file=" TINY "/bert_config.json"
                                 " --input_file=%s/nothing*.tfrecord --output_dir=%s --do_train --max_seq_length=16 --max_predictions_per_seq=3", test_tmpdir, out);
  assert_int_equal(rc, 1);
  assert_non_null(strstr(log, "matches no file"));
  free(log);
}

/* A run that stops after its checkpoint at step 4 (as after kill -9: the later files gone)
 * and is started again with the same flags ends with the same model.ckpt-8 as an
 * uninterrupted run: the Estimator restores the weights, Adam's slots, the seed and the
 * input position (shuffle buffer included), and the dropout masks are f(seed, step). */
static void test_resume_is_exact(void **state) {
  (void)state;
  char records[512], a[512], b[512], path[1024];
  snprintf(records, sizeof records, "%s/jack3.tfrecord", test_tmpdir);
  snprintf(a, sizeof a, "%s/resume_a", test_tmpdir);
  snprintf(b, sizeof b, "%s/resume_b", test_tmpdir);
  make_jack_records(records);
  const char *cmd = EST_BIN " run_pretraining --bert_config_file=" TINY "/bert_config.json --input_file=%s"
                            " --output_dir=%s --max_seq_length=16 --max_predictions_per_seq=3 --do_train"
                            " --train_batch_size=8 --num_train_steps=8 --num_warmup_steps=2 --learning_rate=1e-2"
                            " --save_checkpoints_steps=4 --seed=9 --num_threads=1";
  free(test_run_ok(cmd, records, a));
  free(test_run_ok(cmd, records, b));
  /* roll b back to its step-4 checkpoint */
  const char *gone[] = {"model.ckpt-8.index", "model.ckpt-8.data-00000-of-00001"};
  for (int i = 0; i < 2; i++) {
    est_path_join(path, sizeof path, b, gone[i]);
    assert_int_equal(remove(path), 0);
  }
  est_path_join(path, sizeof path, b, "checkpoint");
  const char *state_text = "model_checkpoint_path: \"model.ckpt-4\"\nall_model_checkpoint_paths: \"model.ckpt-0\"\n"
                           "all_model_checkpoint_paths: \"model.ckpt-4\"\n";
  test_write_bytes(path, state_text, strlen(state_text));
  char *log = test_run_ok(cmd, records, b);
  assert_non_null(strstr(log, "model.ckpt-4"));
  free(log);
  size_t na = 0, nb = 0;
  char pa[1024], pb[1024];
  est_path_join(pa, sizeof pa, a, "model.ckpt-8.data-00000-of-00001");
  est_path_join(pb, sizeof pb, b, "model.ckpt-8.data-00000-of-00001");
  char *da = test_read_file(pa, &na), *db = test_read_file(pb, &nb);
  assert_non_null(da);
  assert_non_null(db);
  assert_int_equal(na, nb);
  assert_memory_equal(da, db, na);
  free(da);
  free(db);
}

static int file_has(const char *path, const char *needle) {
  size_t n = 0;
  char *d = test_read_file(path, &n);
  int found = 0;
  for (size_t i = 0; !found && i + strlen(needle) <= n; i++) found = !memcmp(d + i, needle, strlen(needle));
  free(d);
  return found;
}

/* Three record files (so the training input interleaves 3 files, shuffled) and a run
 * that SIGKILLs itself in the middle of saving step 12 (checkpoint files written, the
 * state file not yet naming them) and again at step 21 (state written, old checkpoints
 * not yet deleted), restarted each time with the same command: its model.ckpt-30 is byte
 * for byte an uninterrupted run's (weights, Adam slots, global_step and the input
 * position: interleave slots, file shuffle and record shuffle buffer). The uninterrupted
 * run also logs progress with ETA and writes TensorBoard events. */
static void test_kill_9_mid_training_then_rerun_is_exact(void **state) {
  (void)state;
  char files[3][512], list[1600] = "", a[512], b[512], pa[1024], pb[1024];
  for (int i = 0; i < 3; i++) {
    snprintf(files[i], sizeof files[i], "%s/kill%d.tfrecord", test_tmpdir, i);
    free(test_run_ok(EST_BIN " create_pretraining_data --input_file=" EST_TEST_DATA "/pretraining/jack_docs.txt"
                        " --output_file=%s --vocab_file=" TINY "/vocab.txt --max_seq_length=16"
                        " --max_predictions_per_seq=3 --dupe_factor=2 --random_seed=%d", files[i], 10 + i));
    strcat(list, i ? "," : "");
    strcat(list, files[i]);
  }
  snprintf(a, sizeof a, "%s/kill_a", test_tmpdir);
  snprintf(b, sizeof b, "%s/kill_b", test_tmpdir);
  const char *cmd = EST_BIN " run_pretraining --bert_config_file=" TINY "/bert_config.json --input_file=%s"
                            " --output_dir=%s --max_seq_length=16 --max_predictions_per_seq=3 --do_train"
                            " --train_batch_size=8 --num_train_steps=30 --num_warmup_steps=3 --learning_rate=1e-2"
                            " --save_checkpoints_steps=3 --keep_checkpoint_max=2 --log_step_count_steps=10"
                            " --seed=4 --num_threads=1";
  char *log = test_run_ok(cmd, list, a);
  assert_int_equal(test_count_lines_with(log, "step 21/30 (70.0%)", "ETA"), 1);
  assert_int_equal(test_count_lines_with(log, "loss = ", "step = 20"), 1);
  free(log);
  char *ev = NULL;
  assert_int_equal(test_run(&ev, 0, "ls %s/events.out.tfevents.*", a), 0);
  ev[strcspn(ev, "\n")] = 0;
  assert_true(file_has(ev, "loss") && file_has(ev, "global_step/sec"));
  free(ev);

  const char *faults[2] = {"12:bundle", "21:state"};
  for (int k = 0; k < 2; k++) {
    char full[4096];
    snprintf(full, sizeof full, cmd, list, b);
    char *out = NULL;
    /* The shim tests/fault/fault_hooks.c, preloaded into est alone, acts on the variable. */
    int rc = test_run(&out, 1,
                      "LD_PRELOAD='" EST_FAULT_HOOKS_SHIM "' ASAN_OPTIONS=\"$ASAN_OPTIONS:verify_asan_link_order=0\""
                      " EST_FAULT_KILL_SAVE=%s %s", faults[k], full);
    if (rc != 137 && rc != -1) fail_msg("not killed at %s (exit %d):\n%s", faults[k], rc, out);
    free(out);
  }
  log = test_run_ok(cmd, list, b);
  assert_non_null(strstr(log, "model.ckpt-21"));  /* resumed from the last complete save */
  free(log);
  est_path_join(pa, sizeof pa, a, "model.ckpt-30.data-00000-of-00001");
  est_path_join(pb, sizeof pb, b, "model.ckpt-30.data-00000-of-00001");
  size_t na = 0, nb = 0;
  char *da = test_read_file(pa, &na), *db = test_read_file(pb, &nb);
  assert_int_equal(na, nb);
  assert_memory_equal(da, db, na);
  free(da);
  free(db);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_continue_pretraining_tf_checkpoint_then_finetune),
      cmocka_unit_test(test_from_scratch_on_script_records),
      cmocka_unit_test(test_init_checkpoint_that_misses_the_encoder),
      cmocka_unit_test(test_record_lengths_disagree_with_flags),
      cmocka_unit_test(test_resume_is_exact),
      cmocka_unit_test(test_kill_9_mid_training_then_rerun_is_exact),
  };
  return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
