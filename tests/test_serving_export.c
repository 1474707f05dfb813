/* run_classifier --do_export and `est predict`: the export's layout (weights only, vocab,
 * est_model.json), versions, and predictions equal to run_classifier --do_predict's
 * test_results.tsv on the same texts, at the batch's own length and at full length. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <string.h>

#include "est/ckpt.h"
#include "est/est.h"
#include "est/serving.h"
#include "serving_test_model.h"

static char out_dir[512];
static char export_base[600];

static int group_setup(void **state) {
  test_tmpdir_setup(state);
  snprintf(out_dir, sizeof out_dir, "%s/run", test_tmpdir);
  snprintf(export_base, sizeof export_base, "%s/export", out_dir);
  serving_train_and_export(out_dir);
  return 0;
}

/* Version directories under base, sorted ascending (at most 8). */
static int list_versions(const char *base, long long *v) {
  int n = 0;
  DIR *d = opendir(base);
  assert_non_null(d);
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    assert_true(n < 8);
    v[n++] = atoll(e->d_name);
  }
  closedir(d);
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
      long long t = v[j];
      v[j] = v[j - 1], v[j - 1] = t;
    }
  return n;
}

static void test_export_layout(void **state) {
  (void)state;
  long long v[8];
  assert_int_equal(list_versions(export_base, v), 1);
  assert_true(v[0] > 1000000000LL);                     /* seconds since the epoch */
  char dir[1024], p[1200];
  snprintf(dir, sizeof dir, "%s/%lld", export_base, v[0]);
  snprintf(p, sizeof p, "%s/variables/variables.data-00000-of-00001", dir);
  assert_true(est_file_exists(p));
  snprintf(p, sizeof p, "%s/assets/vocab.txt", dir);
  char *vocab = test_read_file(p, NULL), *orig = test_read_file(EST_TEST_DATA "/vocab_uncased.txt", NULL);
  assert_string_equal(vocab, orig);
  free(vocab), free(orig);

  /* Weights only: the classifier's 1-layer variables (5 embeddings + 16 layer + 2 pooler + 2 head). */
  snprintf(p, sizeof p, "%s/variables/variables", dir);
  est_ckpt_reader *r;
  assert_int_equal(est_ckpt_reader_open(&r, p), EST_OK);
  assert_int_equal((int)est_ckpt_reader_count(r), 25);
  for (size_t i = 0; i < est_ckpt_reader_count(r); i++) {
    const char *name = est_ckpt_reader_name(r, i);
    assert_null(strstr(name, "adam"));
    assert_true(strncmp(name, "est/", 4) != 0);
    assert_true(strcmp(name, "global_step") != 0);
  }
  /* Equal to the checkpoint it came from. */
  est_ckpt_reader *src;
  snprintf(p, sizeof p, "%s/model.ckpt-30", out_dir);
  assert_int_equal(est_ckpt_reader_open(&src, p), EST_OK);
  est_tensor a = {0}, b = {0};
  assert_int_equal(est_ckpt_reader_read(r, "output_weights", &a), EST_OK);
  assert_int_equal(est_ckpt_reader_read(src, "output_weights", &b), EST_OK);
  assert_int_equal(est_tensor_num_elements(&a), 64);
  assert_memory_equal(a.data, b.data, 64 * sizeof(float));
  est_tensor_free(&a), est_tensor_free(&b);
  est_ckpt_reader_close(src);
  est_ckpt_reader_close(r);

  est_model_meta m;
  snprintf(p, sizeof p, "%s/est_model.json", dir);
  assert_int_equal(est_model_meta_read(&m, p), EST_OK);
  assert_int_equal((int)m.num_labels, 2);
  assert_string_equal(m.labels[0], "bright");
  assert_string_equal(m.labels[1], "dull");
  assert_int_equal(m.max_seq_length, 32);
  assert_true(m.do_lower_case);
  assert_string_equal(m.task, "tsv");
  assert_ptr_equal(m.head, &est_served_classifier);
  assert_int_equal(m.bert_config.hidden_size, 32);
  assert_int_equal(m.bert_config.vocab_size, 30522);
  est_model_meta_clear(&m);
}

/* The servable runs the head est_model.json names: an export without "head" (written
 * before heads were named) loads as the classifier with the same probabilities; a head est
 * cannot serve, or a "head" that is no name, is an error naming the file and the field. */
static void test_servable_loads_the_named_head(void **state) {
  (void)state;
  long long v[8];
  assert_int_equal(list_versions(export_base, v), 1);
  char dir[1024], copy[1024], p[1200], cmd[4096];
  snprintf(dir, sizeof dir, "%s/%lld", export_base, v[0]);
  snprintf(copy, sizeof copy, "%s/headless", test_tmpdir);
  snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", copy, dir, copy);
  assert_int_equal(system(cmd), 0);
  snprintf(p, sizeof p, "%s/est_model.json", copy);
  uint8_t *bytes = NULL;
  size_t n = 0;
  assert_int_equal(est_read_file(p, &bytes, &n), EST_OK);
  char *json = (char *)bytes, *at = strstr(json, "  \"head\": \"classifier\",\n");
  assert_non_null(at);
  memmove(at, at + strlen("  \"head\": \"classifier\",\n"), strlen(at + strlen("  \"head\": \"classifier\",\n")) + 1);
  test_write_bytes(p, json, strlen(json));
  est_servable *a, *b;
  assert_int_equal(est_servable_load(&a, dir, 4), EST_OK);
  assert_int_equal(est_servable_load(&b, copy, 4), EST_OK);
  assert_string_equal(est_model_meta_head(est_servable_meta(b))->name, "classifier");
  int32_t ids[2 * 8] = {101, 2023, 2003, 102, 0, 0, 0, 0, 101, 7592, 2088, 999, 102, 0, 0, 0};
  int32_t mask[2 * 8] = {1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0};
  float pa[4], pb[4];
  assert_int_equal(est_servable_predict(a, ids, mask, NULL, 2, 8, pa), EST_OK);
  assert_int_equal(est_servable_predict(b, ids, mask, NULL, 2, 8, pb), EST_OK);
  assert_memory_equal(pa, pb, sizeof pa);
  assert_true(fabsf(pa[0] + pa[1] - 1.0f) < 1e-6f);
  est_servable_free(a), est_servable_free(b);

  const char *bad[][2] = {{"\"head\": \"pretraining\",", "\"head\": \"pretraining\" cannot be served"},
                          {"\"head\": 3,", "\"head\" must be a head's name"}};
  for (size_t k = 0; k < 2; k++) {
    char *edited = malloc(strlen(json) + 64);
    const char *brace = strchr(json, '{');
    snprintf(edited, strlen(json) + 64, "{\n  %s%s", bad[k][0], brace + 1);
    test_write_bytes(p, edited, strlen(edited));
    free(edited);
    est_servable *c = NULL;
    assert_int_not_equal(est_servable_load(&c, copy, 4), EST_OK);
    if (!strstr(est_error_message(), "est_model.json") || !strstr(est_error_message(), bad[k][1]))
      fail_msg("unclear error: %s", est_error_message());
  }
  free(json);
}

/* Precision belongs to each servable (est/precision.h): three servables of one export in one
 * process, fp32, bf16 and int8, run alternately, each give exactly the probabilities they
 * give alone. Without AVX512-BF16 (VNNI) the bf16 (int8) one resolves to fp32 and the test
 * says so. */
static void test_two_servables_two_precisions(void **state) {
  (void)state;
  int32_t ids[2 * 8] = {101, 2023, 2003, 102, 0, 0, 0, 0, 101, 7592, 2088, 999, 102, 0, 0, 0};
  int32_t mask[2 * 8] = {1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0};
  const est_precision want[3] = {EST_PRECISION_FP32, EST_PRECISION_BF16, EST_PRECISION_INT8};
  float alone[3][4];
  est_precision got[3];
  for (int k = 0; k < 3; k++) { /* each precision alone, in a servable of its own */
    est_servable *s;
    assert_int_equal(est_servable_load(&s, export_base, 4), EST_OK);
    assert_int_equal(est_servable_precision(s), EST_PRECISION_FP32); /* the default */
    got[k] = est_servable_set_precision(s, want[k]);
    assert_int_equal(est_servable_precision(s), got[k]);
    assert_int_equal(est_servable_predict(s, ids, mask, NULL, 2, 8, alone[k]), EST_OK);
    est_servable_free(s);
  }
  if (got[1] != EST_PRECISION_BF16) printf("no AVX512-BF16 here: the bf16 servable runs fp32\n");
  else assert_memory_not_equal(alone[0], alone[1], sizeof alone[0]); /* it really ran bf16 */
  if (got[2] != EST_PRECISION_INT8) printf("no VNNI here: the int8 servable runs fp32\n");
  else assert_memory_not_equal(alone[0], alone[2], sizeof alone[0]); /* it really ran int8 */
  est_servable *both[3];
  for (int k = 0; k < 3; k++) {
    assert_int_equal(est_servable_load(&both[k], export_base, 4), EST_OK);
    est_servable_set_precision(both[k], want[k]);
  }
  for (int round = 0; round < 3; round++)
    for (int k = 0; k < 3; k++) {
      float p[4];
      assert_int_equal(est_servable_predict(both[k], ids, mask, NULL, 2, 8, p), EST_OK);
      if (memcmp(p, alone[k], sizeof p))
        fail_msg("round %d: the %s servable gave %.9g, alone %.9g", round, est_precision_name(got[k]), p[0],
                 alone[k][0]);
    }
  est_servable_free(both[0]), est_servable_free(both[1]), est_servable_free(both[2]);
}

/* est predict's probabilities = test_results.tsv (1e-5), in order; label and jsonl forms. */
static void test_predict_equals_do_predict(void **state) {
  (void)state;
  char path[700];
  snprintf(path, sizeof path, "%s/test_results.tsv", out_dir);
  char *expected = test_read_file(path, NULL);
  double want[64], got[64];
  int n = serving_parse_floats(expected, want, 64);
  assert_int_equal(n, 10);
  char *out = NULL;
  /* batch 2: three batches (the last short), each at its own length (16 here, not 32) */
  assert_int_equal(test_run(&out, 0, SERVING_TEST_TEXTS " | " EST_BIN " predict --batch_size=2 --export_dir=%s",
                            export_base), 0);
  assert_int_equal(serving_parse_floats(out, got, 64), n);
  for (int i = 0; i < n; i++) assert_true(fabs(got[i] - want[i]) <= 1e-5);
  /* the rows differ (the model learned something), so an order mix-up would show */
  assert_true(fabs(want[0] - want[2]) > 0.1);
  free(out);

  /* labels: the argmax of each row */
  assert_int_equal(test_run(&out, 0, SERVING_TEST_TEXTS " | " EST_BIN " predict --output_format=label --export_dir=%s",
                            export_base), 0);
  const char *line = out;
  for (int i = 0; i < n / 2; i++) {
    const char *label = want[2 * i] > want[2 * i + 1] ? "bright\n" : "dull\n";
    assert_memory_equal(line, label, strlen(label));
    line += strlen(label);
  }
  assert_string_equal(line, "");
  free(out);

  /* jsonl in and out; a version directory given directly */
  long long v[8];
  list_versions(export_base, v);
  assert_int_equal(test_run(&out, 0, SERVING_TEST_TEXTS " | sed 's/.*/{\"text_a\": \"&\"}/' | " EST_BIN
                            " predict --input_format=jsonl --output_format=jsonl --export_dir=%s/%lld", export_base, v[0]), 0);
  assert_non_null(strstr(out, "{\"probabilities\": ["));
  assert_non_null(strstr(out, "\"label\": \"dull\"}\n"));
  free(out);
  /* a \u0000 in a jsonl line: said in the line's terms, not jansson's (JSON_ALLOW_NUL) */
  assert_int_equal(test_run(&out, 1, "printf '{\"text_a\": \"ok\"}\\n{\"text_a\": \"a\\\\u0000\"}\\n' | " EST_BIN
                            " predict --input_format=jsonl --export_dir=%s/%lld", export_base, v[0]), 1);
  if (!strstr(out, "<stdin>:2: not a JSON object (a string holds \\u0000 (the NUL character), which est does not "
                   "accept in text") || strstr(out, "JSON_ALLOW_NUL"))
    fail_msg("%s", out);
  free(out);
  free(expected);
}

/* The servable API: a batch at its bucket length equals the same rows at max_seq_length. */
static void test_servable_bucket_equals_full(void **state) {
  (void)state;
  est_servable *s;
  assert_int_equal(est_servable_load(&s, export_base, 4), EST_OK);
  est_featurizer *f;
  assert_int_equal(est_featurizer_create(&f, s), EST_OK);
  int32_t ids[3 * 32], mask[3 * 32], segs[3 * 32];
  int len[3];
  const char *a[3] = {"all work and no play", "jack is a dull boy", "play"};
  for (int i = 0; i < 3; i++)
    assert_int_equal(est_featurizer_run(f, a[i], i == 1 ? "no play" : NULL, ids + 32 * i, mask + 32 * i, segs + 32 * i,
                                        &len[i]), EST_OK);
  assert_int_equal(len[2], 3);                          /* [CLS] play [SEP] */
  assert_int_equal(segs[32 + len[1] - 1], 1);           /* pair: b's [SEP] is segment 1 */
  assert_int_equal(est_serving_bucket_length(9, 32), 16);
  assert_int_equal(est_serving_bucket_length(8, 32), 8);
  assert_int_equal(est_serving_bucket_length(31, 32), 32);
  assert_int_equal(est_serving_bucket_length(40, 36), 36);
  float full[6], cut[6];
  assert_int_equal(est_servable_predict(s, ids, mask, segs, 3, 32, full), EST_OK);
  assert_int_equal(len[1], 10);                         /* the longest: runs at 16 */
  assert_int_equal(est_servable_predict_strided(s, ids, mask, segs, 3, 32, 16, cut), EST_OK);
  for (int i = 0; i < 6; i++) assert_true(fabsf(full[i] - cut[i]) <= 1e-5f);
  /* more rows than max_batch run in pieces */
  int32_t ids8[8 * 32], mask8[8 * 32], segs8[8 * 32];
  for (int i = 0; i < 8; i++) {
    memcpy(ids8 + 32 * i, ids + 32 * (i % 3), sizeof(int32_t) * 32);
    memcpy(mask8 + 32 * i, mask + 32 * (i % 3), sizeof(int32_t) * 32);
    memcpy(segs8 + 32 * i, segs + 32 * (i % 3), sizeof(int32_t) * 32);
  }
  float p8[16];
  assert_int_equal(est_servable_predict_strided(s, ids8, mask8, segs8, 8, 32, 16, p8), EST_OK);
  for (int i = 0; i < 16; i++) assert_true(fabsf(p8[i] - full[i % 6]) <= 1e-5f);
  /* an id outside the vocabulary is refused */
  ids[5] = 30522;
  assert_int_not_equal(est_servable_predict(s, ids, mask, segs, 1, 32, full), EST_OK);
  est_featurizer_free(f);
  est_servable_free(s);
}

/* --do_export alone exports the newest checkpoint again, as a newer version; an output_dir
 * without checkpoints is an error naming it; a half-built version is never picked. */
static void test_export_only_and_versions(void **state) {
  (void)state;
  char *log = NULL;
  assert_int_equal(test_run(&log, 1, EST_BIN " run_classifier --do_export" SERVING_TEST_FLAGS " --output_dir=%s", out_dir), 0);
  free(log);
  long long v[8];
  assert_int_equal(list_versions(export_base, v), 2);
  assert_true(v[1] > v[0]);
  char dir[1024];
  int64_t got;
  assert_int_equal(est_export_resolve(export_base, dir, sizeof dir, &got), EST_OK);
  assert_int_equal((long long)got, v[1]);
  /* est predict logs the version it loaded, as est serve does (on stderr: stdout unchanged) */
  char want[1200];
  snprintf(want, sizeof want, "predicting with version %lld from %s/%lld\n", v[1], export_base, v[1]);
  assert_int_equal(test_run(&log, 0, "echo hi | " EST_BIN " predict --export_dir=%s --output_format=label 2>&1 "
                                     ">/dev/null", export_base), 0);
  if (!strstr(log, want)) fail_msg("wanted '%s' in:\n%s", want, log);
  free(log);
  snprintf(want, sizeof want, "predicting with version %lld from %s/%lld\n", v[0], export_base, v[0]);
  assert_int_equal(test_run(&log, 0, "echo hi | " EST_BIN " predict --export_dir=%s/%lld --output_format=label 2>&1 "
                                     ">/dev/null", export_base, v[0]), 0);
  if (!strstr(log, want)) fail_msg("wanted '%s' in:\n%s", want, log);
  free(log);
  /* a newer directory without est_model.json (as a crash mid-copy by another tool) is skipped */
  char junk[1024];
  snprintf(junk, sizeof junk, "%s/%lld", export_base, v[1] + 100);
  assert_int_equal(est_mkdirs(junk), EST_OK);
  assert_int_equal(est_export_resolve(export_base, dir, sizeof dir, &got), EST_OK);
  assert_int_equal((long long)got, v[1]);

  char empty[700];
  snprintf(empty, sizeof empty, "%s/empty", test_tmpdir);
  assert_int_equal(est_mkdirs(empty), EST_OK);
  assert_int_equal(test_run(&log, 1, EST_BIN " run_classifier --do_export" SERVING_TEST_FLAGS " --output_dir=%s", empty), 1);
  assert_non_null(strstr(log, "no checkpoint in --output_dir="));
  free(log);
  assert_int_equal(test_run(&log, 1, "echo hi | " EST_BIN " predict --export_dir=%s", empty), 1);
  assert_non_null(strstr(log, "holds no complete version"));
  free(log);
}

/* --do_export alone reads no data: run_classifier's help says "Alone, it only exports", so it
 * asks for no --data_dir, and writes the same est_model.json as with one. Only a tsv task
 * without --tsv_labels needs train.tsv (its labels), and says so. */
static void test_export_only_needs_no_data_dir(void **state) {
  (void)state;
#define NO_DATA_DIR_FLAGS                                                                                      \
  " --task_name=tsv --vocab_file=" EST_TEST_DATA "/vocab_uncased.txt --bert_config_file=" EST_TEST_DATA          \
  "/run_classifier/bert_config_h32.json --max_seq_length=32 --num_threads=1"
  char base[700], *log = NULL;
  snprintf(base, sizeof base, "%s/export_no_data_dir", test_tmpdir);
  int rc = test_run(&log, 1, EST_BIN " run_classifier --do_export --tsv_labels=bright,dull" NO_DATA_DIR_FLAGS
                             " --output_dir=%s --export_dir=%s", out_dir, base);
  if (rc != 0) fail_msg("run_classifier --do_export without --data_dir: exit %d\n%s", rc, log);
  free(log);
  long long v[8], w[8];
  assert_int_equal(list_versions(base, w), 1);
  assert_true(list_versions(export_base, v) >= 1);
  char a[1200], b[1200];
  snprintf(a, sizeof a, "%s/%lld/est_model.json", export_base, v[0]);
  snprintf(b, sizeof b, "%s/%lld/est_model.json", base, w[0]);
  size_t na, nb;
  char *ja = test_read_file(a, &na), *jb = test_read_file(b, &nb);
  assert_int_equal(na, nb);
  assert_memory_equal(ja, jb, na);
  free(ja), free(jb);

  assert_int_equal(test_run(&log, 1, EST_BIN " run_classifier --do_export" NO_DATA_DIR_FLAGS " --output_dir=%s"
                                     " --export_dir=%s", out_dir, base), 1);
  assert_null(strstr(log, "flag --data_dir must be specified"));
  assert_non_null(strstr(log, "without a label list (--tsv_labels) the labels are train.tsv's: give --data_dir"));
  free(log);
  assert_int_equal(list_versions(base, w), 1);
#undef NO_DATA_DIR_FLAGS
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_export_layout),
    cmocka_unit_test(test_servable_loads_the_named_head),
    cmocka_unit_test(test_two_servables_two_precisions),
    cmocka_unit_test(test_predict_equals_do_predict),
    cmocka_unit_test(test_servable_bucket_equals_full),
    cmocka_unit_test(test_export_only_and_versions),
    cmocka_unit_test(test_export_only_needs_no_data_dir),
  };
  return cmocka_run_group_tests(tests, group_setup, test_tmpdir_teardown);
}
