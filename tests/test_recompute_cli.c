/* --recompute on run_classifier and run_pretraining (est_bert_encoder_set_recompute through
 * the model_fns): the training log's "training activations: X MiB" line is smaller with it,
 * and every checkpoint the two runs write is byte-identical (recomputation replays each
 * layer's forward with the same dropout coordinates, so no number may change). The model
 * has three layers, so a recomputing reservation (one layer's scratch plus each layer's
 * output) is well below one that keeps every layer's activations. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

static char g_config[600], g_records[600];

static const char config_json[] =
    "{\"attention_probs_dropout_prob\": 0.1, \"hidden_act\": \"gelu\", \"hidden_dropout_prob\": 0.1,\n"
    " \"hidden_size\": 32, \"initializer_range\": 0.02, \"intermediate_size\": 64,\n"
    " \"max_position_embeddings\": 64, \"num_attention_heads\": 2, \"num_hidden_layers\": 3,\n"
    " \"type_vocab_size\": 2, \"vocab_size\": 30522}\n";

static int setup(void **state) {
  test_tmpdir_setup(state);
  snprintf(g_config, sizeof g_config, "%s/bert_config.json", test_tmpdir);
  FILE *f = fopen(g_config, "w");
  if (!f || fputs(config_json, f) < 0 || fclose(f) != 0) fail_msg("cannot write %s", g_config);
  snprintf(g_records, sizeof g_records, "%s/jack.tfrecord", test_tmpdir);
  free(test_run_ok(EST_BIN " create_pretraining_data --input_file=" EST_TEST_DATA "/pretraining/jack_docs.txt"
                      " --output_file=%s --vocab_file=" EST_TEST_DATA "/vocab_uncased.txt --max_seq_length=32"
                      " --max_predictions_per_seq=5 --dupe_factor=2 --random_seed=3", g_records));
  return 0;
}

/* The MiB figure of the log's "training activations: X MiB" line; fails if absent. */
static double activation_mib(const char *log, int want_recompute) {
  const char *p = strstr(log, "training activations: ");
  if (!p) fail_msg("no 'training activations' line in:\n%s", log);
  const char *eol = strchr(p, '\n');
  int says = strstr(p, "(recompute:") && (!eol || strstr(p, "(recompute:") < eol);
  if (says != want_recompute) fail_msg("recompute %s in the log line: %.*s", says ? "claimed" : "not said",
                                       eol ? (int)(eol - p) : (int)strlen(p), p);
  return atof(p + strlen("training activations: "));
}

/* Runs `args` with and without --recompute into two output dirs, then compares. */
static void run_both(const char *name, const char *args, const char *const *ckpt_files, int nfiles) {
  char dir[2][700];
  double mib[2];
  for (int r = 0; r < 2; r++) {
    snprintf(dir[r], sizeof dir[r], "%s/%s-%s", test_tmpdir, name, r ? "recompute" : "keep");
    char *log = NULL;
    int rc = test_run(&log, 1, EST_BIN "%s --output_dir=%s%s", args, dir[r], r ? " --recompute" : "");
    if (rc != 0) fail_msg("%s (recompute %d): exit %d\n%s", name, r, rc, log);
    mib[r] = activation_mib(log, r);
    free(log);
  }
  printf("%s: training activations %.2f MiB, with --recompute %.2f MiB\n", name, mib[0], mib[1]);
  assert_true(mib[1] > 0);
  assert_true(mib[1] < 0.8 * mib[0]);
  for (int i = 0; i < nfiles; i++) {
    char pa[800], pb[800];
    snprintf(pa, sizeof pa, "%s/%s", dir[0], ckpt_files[i]);
    snprintf(pb, sizeof pb, "%s/%s", dir[1], ckpt_files[i]);
    size_t na = 0, nb = 0;
    char *a = test_read_file(pa, &na), *b = test_read_file(pb, &nb);
    if (!a || !b) fail_msg("missing %s or %s", pa, pb);
    if (na != nb || memcmp(a, b, na) != 0) fail_msg("%s differs with --recompute", ckpt_files[i]);
    free(a), free(b);
  }
}

static const char *const ckpt_files[] = {
    "model.ckpt-3.index", "model.ckpt-3.data-00000-of-00001",
    "model.ckpt-6.index", "model.ckpt-6.data-00000-of-00001",
};

static void test_run_classifier_recompute(void **state) {
  (void)state;
  char args[2048];
  snprintf(args, sizeof args,
           " run_classifier --task_name=tsv --tsv_labels=bright,dull --data_dir=" EST_TEST_DATA
           "/run_classifier/jack --vocab_file=" EST_TEST_DATA "/vocab_uncased.txt --bert_config_file=%s"
           " --do_train --max_seq_length=32 --train_batch_size=4 --num_train_epochs=1 --learning_rate=1e-3"
           " --save_checkpoints_steps=3 --num_threads=2 --seed=11", g_config);
  run_both("run_classifier", args, ckpt_files, 4);
}

static void test_run_pretraining_recompute(void **state) {
  (void)state;
  char args[2048];
  snprintf(args, sizeof args,
           " run_pretraining --bert_config_file=%s --input_file=%s --max_seq_length=32"
           " --max_predictions_per_seq=5 --do_train --train_batch_size=4 --num_train_steps=6"
           " --num_warmup_steps=2 --learning_rate=1e-3 --save_checkpoints_steps=3 --num_threads=2 --seed=5",
           g_config, g_records);
  run_both("run_pretraining", args, ckpt_files, 4);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_run_classifier_recompute),
      cmocka_unit_test(test_run_pretraining_recompute),
  };
  return cmocka_run_group_tests(tests, setup, test_tmpdir_teardown);
}
