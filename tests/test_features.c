/* convert_single_example / file_based_convert_examples_to_features: the vectors of
 * docs/run_classifier.md §10, _truncate_seq_pair, padding examples, errors, and parity with the
 * eval.tf_record that TF's run_classifier.py wrote for MRPC dev (408 records). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "est/est.h"
#include "est/classifier_features.h"
#include "est/processors.h"
#include "est/tokenizer.h"
#include "test_util.h"

static const char VOCAB_A[] = "[UNK]\n[CLS]\n[SEP]\nwant\n##want\n##ed\nwa\nun\nrunn\n##ing\n,\n";

static void test_truncate_seq_pair(void **state) {
  (void)state;
  size_t a = 5, b = 5;
  est_truncate_seq_pair(&a, &b, 7);
  assert_int_equal(a, 4);
  assert_int_equal(b, 3);
  a = 7, b = 2;
  est_truncate_seq_pair(&a, &b, 5);
  assert_int_equal(a, 3);
  assert_int_equal(b, 2);
  a = 1, b = 1;
  est_truncate_seq_pair(&a, &b, 5);
  assert_int_equal(a + b, 2);
}

typedef struct vec {
  const char *a, *b;
  int S;
  int32_t ids[12], mask[12], seg[12];
} vec;

static void test_reference_vectors(void **state) {
  (void)state;
  est_vocab *v;
  assert_int_equal(est_vocab_load_buffer(&v, VOCAB_A, strlen(VOCAB_A), "vocabA"), EST_OK);
  est_tokenizer *tok;
  assert_int_equal(est_tokenizer_create(&tok, v, true), EST_OK);
  static const char *labels[] = {"0", "1"};
  est_feature_converter c;
  static const vec vecs[] = {
    {"UNwant\u00E9d,running", "want", 12, {1, 7, 4, 5, 10, 8, 9, 2, 3, 2, 0, 0},
     {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0}, {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0}},
    {"UNwant\u00E9d,running", "want wa", 8, {1, 7, 4, 5, 2, 3, 6, 2}, {1, 1, 1, 1, 1, 1, 1, 1},
     {0, 0, 0, 0, 0, 1, 1, 1}},
    {"unwanted running", NULL, 5, {1, 7, 4, 5, 2}, {1, 1, 1, 1, 1}, {0}},
    {"want", "", 6, {1, 3, 2, 0, 0, 0}, {1, 1, 1, 0, 0, 0}, {0}},
    {"want", "\x05", 6, {1, 3, 2, 0, 0, 0}, {1, 1, 1, 0, 0, 0}, {0}},
  };
  int32_t ids[12], mask[12], seg[12], label, real;
  for (size_t i = 0; i < sizeof vecs / sizeof *vecs; i++) {
    assert_int_equal(est_feature_converter_init(&c, tok, labels, 2, vecs[i].S), EST_OK);
    est_input_example ex = {.guid = "g", .text_a = vecs[i].a, .text_b = vecs[i].b, .label = "1"};
    assert_int_equal(est_convert_single_example(&c, 99, &ex, ids, mask, seg, &label, &real), EST_OK);
    assert_memory_equal(ids, vecs[i].ids, (size_t)vecs[i].S * 4);
    assert_memory_equal(mask, vecs[i].mask, (size_t)vecs[i].S * 4);
    assert_memory_equal(seg, vecs[i].seg, (size_t)vecs[i].S * 4);
    assert_int_equal(label, 1);
    assert_int_equal(real, 1);
  }
  /* PaddingInputExample: all zeros, label 0, not real. */
  assert_int_equal(est_feature_converter_init(&c, tok, labels, 2, 4), EST_OK);
  est_input_example pad = {.is_padding = true};
  memset(ids, 0x7f, sizeof ids);
  assert_int_equal(est_convert_single_example(&c, 0, &pad, ids, mask, seg, &label, &real), EST_OK);
  for (int t = 0; t < 4; t++) assert_int_equal(ids[t] | mask[t] | seg[t], 0);
  assert_int_equal(label, 0);
  assert_int_equal(real, 0);
  /* A label outside the list names the example. */
  est_input_example bad = {.guid = "dev-3", .text_a = "want", .label = "2", .source = "x.tsv", .line = 4};
  assert_int_equal(est_convert_single_example(&c, 0, &bad, ids, mask, seg, &label, &real), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "example dev-3 (x.tsv:4): label '2' is not in the label list"));
  assert_int_equal(est_feature_converter_init(&c, tok, labels, 2, 2), EST_ERR_INVALID_ARGUMENT);
  est_tokenizer_free(tok);
  est_vocab_free(v);
}

static void test_vocab_without_cls_sep_or_unk(void **state) {
  (void)state;
  est_vocab *v;
  assert_int_equal(est_vocab_load_buffer(&v, "[UNK]\n[SEP]\nhello\n", 18, "nocls.txt"), EST_OK);
  est_tokenizer *tok;
  assert_int_equal(est_tokenizer_create(&tok, v, true), EST_OK);
  static const char *labels[] = {"0"};
  est_feature_converter c;
  assert_int_equal(est_feature_converter_init(&c, tok, labels, 1, 8), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "nocls.txt has no [CLS] token"));
  est_tokenizer_free(tok);
  est_vocab_free(v);
  /* No [UNK]: fine until an unknown word survives truncation. */
  assert_int_equal(est_vocab_load_buffer(&v, "[CLS]\n[SEP]\nhello\n", 18, "nounk.txt"), EST_OK);
  assert_int_equal(est_tokenizer_create(&tok, v, true), EST_OK);
  assert_int_equal(est_feature_converter_init(&c, tok, labels, 1, 4), EST_OK);
  int32_t ids[4], mask[4], seg[4], label, real;
  est_input_example ok = {.guid = "g1", .text_a = "hello hello zzz", .label = "0"};  /* zzz cut off */
  assert_int_equal(est_convert_single_example(&c, 9, &ok, ids, mask, seg, &label, &real), EST_OK);
  est_input_example ko = {.guid = "g2", .text_a = "zzz", .label = "0"};
  assert_int_equal(est_convert_single_example(&c, 9, &ko, ids, mask, seg, &label, &real), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "example g2: token [UNK] is not in vocab nounk.txt"));
  est_tokenizer_free(tok);
  est_vocab_free(v);
}

/* Reads a TFRecord file of run_classifier Examples into flat arrays [n, S]. */
static size_t read_features(const char *path, int S, int64_t *ids, int64_t *mask, int64_t *seg, int64_t *label,
                            int64_t *real, size_t max) {
  est_tfrecord_reader *r;
  assert_int_equal(est_tfrecord_reader_open(&r, path, EST_COMPRESSION_NONE), EST_OK);
  est_feature_spec specs[5] = {
    {.key = "input_ids", .dtype = EST_DT_INT64, .rank = 1, .shape = {S}},
    {.key = "input_mask", .dtype = EST_DT_INT64, .rank = 1, .shape = {S}},
    {.key = "segment_ids", .dtype = EST_DT_INT64, .rank = 1, .shape = {S}},
    {.key = "label_ids", .dtype = EST_DT_INT64, .rank = 0},
    {.key = "is_real_example", .dtype = EST_DT_INT64, .rank = 0},
  };
  assert_int_equal(est_feature_specs_validate(specs, 5), EST_OK);
  const uint8_t *rec;
  size_t n, count = 0;
  est_status st;
  while ((st = est_tfrecord_reader_next(r, &rec, &n)) == EST_OK) {
    assert_true(count < max);
    void *out[5] = {ids + count * S, mask + count * S, seg + count * S, label + count, real + count};
    assert_int_equal(est_example_parse_specs(specs, 5, rec, n, out, path), EST_OK);
    /* Exactly these five int64 features, nothing else. */
    est_example ex;
    est_example_init(&ex);
    assert_int_equal(est_example_parse(&ex, rec, n), EST_OK);
    assert_int_equal(ex.count, 5);
    est_example_clear(&ex);
    count++;
  }
  assert_int_equal(st, EST_ERR_OUT_OF_RANGE);
  est_tfrecord_reader_close(r);
  return count;
}

/* MRPC dev through our processor, tokenizer and writer == TF's eval.tf_record, record by record. */
static void test_mrpc_parity_with_tensorflow(void **state) {
  (void)state;
  enum { S = 128, MAX = 420 };
  char dir[256], out[512];
  test_make_tmpdir(dir, sizeof dir);
  snprintf(out, sizeof out, "%s/eval.tf_record", dir);
  est_processor *p;
  assert_int_equal(est_processor_create(&p, "mrpc", NULL), EST_OK);
  est_examples ex;
  est_examples_init(&ex);
  assert_int_equal(est_processor_get_examples(p, EST_TEST_DATA "/glue_mini/MRPC", EST_SPLIT_DEV, &ex), EST_OK);
  const char *const *labels;
  size_t nl;
  assert_int_equal(est_processor_get_labels(p, NULL, &labels, &nl), EST_OK);
  est_tokenizer *tok;
  assert_int_equal(est_tokenizer_open(&tok, EST_TEST_DATA "/vocab_uncased.txt", true), EST_OK);
  assert_int_equal(est_file_based_convert_examples_to_features(&ex, labels, nl, S, tok, out), EST_OK);

  static int64_t a_ids[MAX * S], a_mask[MAX * S], a_seg[MAX * S], a_lab[MAX], a_real[MAX];
  static int64_t b_ids[MAX * S], b_mask[MAX * S], b_seg[MAX * S], b_lab[MAX], b_real[MAX];
  size_t na = read_features(out, S, a_ids, a_mask, a_seg, a_lab, a_real, MAX);
  size_t nb = read_features(EST_TEST_DATA "/mrpc_eval.tf_record", S, b_ids, b_mask, b_seg, b_lab, b_real, MAX);
  assert_int_equal(na, 408);
  assert_int_equal(nb, 408);
  size_t mismatches = 0;
  for (size_t i = 0; i < na; i++) {
    bool same = !memcmp(a_ids + i * S, b_ids + i * S, S * 8) && !memcmp(a_mask + i * S, b_mask + i * S, S * 8) &&
                !memcmp(a_seg + i * S, b_seg + i * S, S * 8) && a_lab[i] == b_lab[i] && a_real[i] == b_real[i];
    if (!same && mismatches++ < 3) fprintf(stderr, "record %zu (%s) differs\n", i, ex.items[i].guid);
  }
  assert_int_equal(mismatches, 0);

  /* The in-memory variant gives the same numbers. */
  est_input_features f;
  assert_int_equal(est_convert_examples_to_features(&ex, labels, nl, S, tok, &f), EST_OK);
  assert_int_equal(f.count, 408);
  for (size_t i = 0; i < 408 * S; i++) {
    assert_int_equal(f.input_ids[i], b_ids[i]);
    assert_int_equal(f.input_mask[i], b_mask[i]);
    assert_int_equal(f.segment_ids[i], b_seg[i]);
  }
  for (size_t i = 0; i < 408; i++) assert_int_equal(f.label_ids[i], b_lab[i]);
  est_input_features_free(&f);

  /* TPU-style padding: 408 % 7 = 2, so 5 padding records with is_real_example 0. */
  size_t added;
  assert_int_equal(est_examples_pad_to_multiple(&ex, 7, &added), EST_OK);
  assert_int_equal(added, 5);
  assert_int_equal(est_file_based_convert_examples_to_features(&ex, labels, nl, S, tok, out), EST_OK);
  na = read_features(out, S, a_ids, a_mask, a_seg, a_lab, a_real, MAX);
  assert_int_equal(na, 413);
  assert_int_equal(a_real[407], 1);
  for (size_t i = 408; i < 413; i++) {
    assert_int_equal(a_real[i], 0);
    assert_int_equal(a_lab[i], 0);
    for (size_t t = 0; t < S; t++) assert_int_equal(a_ids[i * S + t] | a_mask[i * S + t] | a_seg[i * S + t], 0);
  }
  est_tokenizer_free(tok);
  est_examples_free(&ex);
  est_processor_free(p);
  test_remove_tree(dir);
}

/* A failed conversion leaves an existing output file untouched (atomic write). */
static void test_failed_write_keeps_old_file(void **state) {
  (void)state;
  char dir[256], out[512];
  test_make_tmpdir(dir, sizeof dir);
  snprintf(out, sizeof out, "%s/train.tf_record", dir);
  assert_int_equal(est_write_file_atomic(out, "old", 3), EST_OK);
  est_vocab *v;
  assert_int_equal(est_vocab_load_buffer(&v, VOCAB_A, strlen(VOCAB_A), "vocabA"), EST_OK);
  est_tokenizer *tok;
  assert_int_equal(est_tokenizer_create(&tok, v, true), EST_OK);
  est_examples ex;
  est_examples_init(&ex);
  assert_int_equal(est_examples_add(&ex, "train-0", "want", NULL, "0"), EST_OK);
  assert_int_equal(est_examples_add(&ex, "train-1", "want", NULL, "7"), EST_OK);
  static const char *labels[] = {"0", "1"};
  assert_int_equal(est_file_based_convert_examples_to_features(&ex, labels, 2, 8, tok, out), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "train-1"));
  uint8_t *data;
  size_t size;
  assert_int_equal(est_read_file(out, &data, &size), EST_OK);
  assert_int_equal(size, 3);
  free(data);
  est_examples_free(&ex);
  est_tokenizer_free(tok);
  est_vocab_free(v);
  test_remove_tree(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_truncate_seq_pair),
    cmocka_unit_test(test_reference_vectors),
    cmocka_unit_test(test_vocab_without_cls_sep_or_unk),
    cmocka_unit_test(test_mrpc_parity_with_tensorflow),
    cmocka_unit_test(test_failed_write_keeps_old_file),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
