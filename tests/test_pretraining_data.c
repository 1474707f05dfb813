/* est_create_pretraining_data against the records google-research/bert's
 * create_pretraining_data.py wrote (tests/data/pretraining, origins in tests/data/README.md),
 * and its behaviour on bad input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "pretraining_data/pretraining_internal.h"
#include "est/example.h"
#include "est/pretraining_data.h"
#include "est/tfrecord.h"
#include "test_util.h"

#define PT EST_TEST_DATA "/pretraining"
#define VOCAB EST_TEST_DATA "/vocab_uncased.txt"

/* Every record of `got` has exactly the features of the same record of `want` (same keys,
 * kinds, values; any map order). Fails naming the record and the feature. Returns the count. */
static uint64_t assert_same_features(const char *got, const char *want) {
  est_tfrecord_reader *a, *b;
  assert_int_equal(est_tfrecord_reader_open(&a, got, EST_COMPRESSION_NONE), EST_OK);
  assert_int_equal(est_tfrecord_reader_open(&b, want, EST_COMPRESSION_NONE), EST_OK);
  est_example ea, eb;
  est_example_init(&ea);
  est_example_init(&eb);
  uint64_t k = 0;
  for (;; k++) {
    const uint8_t *ra, *rb;
    size_t na, nb;
    est_status sa = est_tfrecord_reader_next(a, &ra, &na);
    assert_int_equal(sa == EST_OK || sa == EST_ERR_OUT_OF_RANGE, 1);
    if (sa == EST_OK) assert_int_equal(est_example_parse(&ea, ra, na), EST_OK);
    est_status sb = est_tfrecord_reader_next(b, &rb, &nb);
    assert_int_equal(sb == EST_OK || sb == EST_ERR_OUT_OF_RANGE, 1);
    if (sa != sb) fail_msg("%s has %s records than %s (record %llu)", got, sa == EST_OK ? "more" : "fewer", want,
                           (unsigned long long)k);
    if (sa != EST_OK) break;
    assert_int_equal(est_example_parse(&eb, rb, nb), EST_OK);
    if (ea.count != eb.count) fail_msg("record %llu: %zu features, want %zu", (unsigned long long)k, ea.count, eb.count);
    for (size_t f = 0; f < eb.count; f++) {
      const est_feature *fb = &eb.features[f], *fa = est_example_find(&ea, fb->key);
      if (!fa) fail_msg("record %llu: no feature %s", (unsigned long long)k, fb->key);
      bool same = fa->kind == fb->kind && fa->count == fb->count;
      for (size_t i = 0; same && i < fb->count; i++)
        same = fb->kind == EST_FEATURE_INT64 ? fa->int64s[i] == fb->int64s[i] : fa->floats[i] == fb->floats[i];
      if (!same) fail_msg("record %llu: feature %s differs from %s", (unsigned long long)k, fb->key, want);
    }
  }
  est_example_clear(&ea);
  est_example_clear(&eb);
  est_tfrecord_reader_close(a);
  est_tfrecord_reader_close(b);
  return k;
}

static void assert_same_bytes(const char *got, const char *want) {
  size_t ng, nw;
  char *g = test_read_file(got, &ng), *w = test_read_file(want, &nw);
  assert_int_equal(ng, nw);
  assert_memory_equal(g, w, nw);
  free(g);
  free(w);
}

static est_status run1(const est_pretraining_config *cfg, const char *vocab, const char *input, const char *output,
                       uint64_t *written) {
  const char *in[1] = {input}, *out[1] = {output};
  return est_create_pretraining_data(cfg, vocab, in, 1, out, 1, written);
}

/* cola_seed12345.tfrecord: --do_lower_case=True --max_seq_length=128
 * --max_predictions_per_seq=20 --masked_lm_prob=0.15 --random_seed=12345 --dupe_factor=2.
 * Byte-identical (TF 1.15's map order of features kept), so feature-identical too. */
static void test_reproduces_cola_seed12345(void **state) {
  (void)state;
  est_pretraining_config cfg = est_pretraining_config_default();
  cfg.dupe_factor = 2;
  uint64_t written = 0;
  const char *out = test_tmp_path("cola.tfrecord");
  assert_int_equal(run1(&cfg, VOCAB, PT "/cola_docs.txt", out, &written), EST_OK);
  assert_int_equal(written, 865);
  assert_int_equal(assert_same_features(out, PT "/cola_seed12345.tfrecord"), 865);
  assert_same_bytes(out, PT "/cola_seed12345.tfrecord");
}

/* cola_wwm_seed3.tfrecord: --do_whole_word_mask=True --max_seq_length=48
 * --max_predictions_per_seq=8 --random_seed=3 --dupe_factor=1 --short_seq_prob=0.3. */
static void test_reproduces_cola_wwm_seed3(void **state) {
  (void)state;
  est_pretraining_config cfg = est_pretraining_config_default();
  cfg.do_whole_word_mask = true;
  cfg.max_seq_length = 48;
  cfg.max_predictions_per_seq = 8;
  cfg.random_seed = 3;
  cfg.dupe_factor = 1;
  cfg.short_seq_prob = 0.3;
  const char *out = test_tmp_path("wwm.tfrecord");
  assert_int_equal(run1(&cfg, VOCAB, PT "/cola_docs.txt", out, NULL), EST_OK);
  assert_int_equal(assert_same_features(out, PT "/cola_wwm_seed3.tfrecord"), 604);
  assert_same_bytes(out, PT "/cola_wwm_seed3.tfrecord");
}

/* edge_1.txt + edge_2.txt, two outputs: CRLF, a '\r' inside a line (tf.gfile drops it), a
 * line without tokens inside a document (skipped, not a boundary: the script's silent
 * behaviour), a blank line of NBSP/tab (a boundary), one-sentence documents, a sentence of
 * 100 words (truncation), a document going on across the file boundary, a last line with no
 * '\n', round robin. The expected files were written by the script under TF 2.21, whose map
 * order of features changes from run to run: compared feature by feature. */
static void test_edge_cases_match_the_script(void **state) {
  (void)state;
  est_pretraining_config cfg = est_pretraining_config_default();
  cfg.do_whole_word_mask = true;
  cfg.max_seq_length = 24;
  cfg.max_predictions_per_seq = 5;
  cfg.dupe_factor = 3;
  cfg.short_seq_prob = 0.5;
  cfg.random_seed = 7;
  const char *in[2] = {PT "/edge_1.txt", PT "/edge_2.txt"};
  const char *out[2] = {test_tmp_path("e0.tfrecord"), test_tmp_path("e1.tfrecord")};
  uint64_t written = 0;
  assert_int_equal(est_create_pretraining_data(&cfg, VOCAB, in, 2, out, 2, &written), EST_OK);
  assert_int_equal(written, 50);
  assert_int_equal(assert_same_features(out[0], PT "/edge_out_0.tfrecord"), 25);
  assert_int_equal(assert_same_features(out[1], PT "/edge_out_1.tfrecord"), 25);
}

/* tiny_vocab.txt lists "the" twice: list(vocab.keys()) keeps its first place (random
 * replacements index that list) and its last id. Words split into many "##" pieces, so
 * whole-word masking skips words that do not fit; a negative seed (|seed| is used). */
static void test_duplicate_vocab_line_and_whole_words(void **state) {
  (void)state;
  est_pretraining_config cfg = est_pretraining_config_default();
  cfg.do_whole_word_mask = true;
  cfg.max_seq_length = 16;
  cfg.max_predictions_per_seq = 4;
  cfg.dupe_factor = 4;
  cfg.masked_lm_prob = 0.5;
  cfg.random_seed = -5;
  const char *out = test_tmp_path("tiny.tfrecord");
  assert_int_equal(run1(&cfg, PT "/tiny_vocab.txt", PT "/tiny_docs.txt", out, NULL), EST_OK);
  assert_int_equal(assert_same_features(out, PT "/tiny_out.tfrecord"), 171);
}

/* int(round(n * p)) with Python's half-to-even, floored at 1 and capped. */
static void test_num_to_predict(void **state) {
  (void)state;
  assert_int_equal(pt_num_to_predict(10, 0.15, 20), 2);  /* 1.5 -> 2 */
  assert_int_equal(pt_num_to_predict(5, 0.5, 20), 2);    /* 2.5 -> 2 (even) */
  assert_int_equal(pt_num_to_predict(7, 0.5, 20), 4);    /* 3.5 -> 4 */
  assert_int_equal(pt_num_to_predict(19, 0.15, 20), 3);  /* 2.85 */
  assert_int_equal(pt_num_to_predict(3, 0.15, 20), 1);   /* 0.45 -> 0 -> at least 1 */
  assert_int_equal(pt_num_to_predict(128, 0.15, 8), 8);  /* 19.2 -> capped */
  assert_int_equal(pt_num_to_predict(128, 0.15, 0), 0);
}

/* ---- bad input ----------------------------------------------------------------------- */

static void write_text(const char *path, const char *text) { test_write_bytes(path, text, strlen(text)); }

/* An empty corpus (blank lines and a line without tokens) is an error naming the file,
 * and no output appears (the script would silently write an empty file). */
static void test_empty_corpus_is_an_error(void **state) {
  (void)state;
  const char *in = test_tmp_path("empty.txt"), *out = test_tmp_path("empty.tfrecord");
  write_text(in, "\n \n\xE2\x80\x8B\n\n");
  est_pretraining_config cfg = est_pretraining_config_default();
  assert_int_equal(run1(&cfg, VOCAB, in, out, NULL), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), in));
  assert_non_null(strstr(est_error_message(), "no document"));
  assert_false(est_file_exists(out));
  write_text(in, "");
  assert_int_equal(run1(&cfg, VOCAB, in, out, NULL), EST_ERR_INVALID_ARGUMENT);
  assert_false(est_file_exists(out));
}

/* One document of one sentence: the script's silent behaviour. A one-segment chunk is
 * always a "random next"; with no other document, the ten tries land on the same one, so
 * segment B is that sentence again: one instance per dupe round, label 1. */
static void test_one_sentence_document(void **state) {
  (void)state;
  const char *in = test_tmp_path("one.txt"), *out = test_tmp_path("one.tfrecord");
  write_text(in, "\nHello world.\n\n");
  est_pretraining_config cfg = est_pretraining_config_default();
  cfg.dupe_factor = 3;
  uint64_t written = 0;
  assert_int_equal(run1(&cfg, VOCAB, in, out, &written), EST_OK);
  assert_int_equal(written, 3);
  est_tfrecord_reader *r;
  assert_int_equal(est_tfrecord_reader_open(&r, out, EST_COMPRESSION_NONE), EST_OK);
  const uint8_t *rec;
  size_t n;
  est_example ex;
  est_example_init(&ex);
  for (int k = 0; k < 3; k++) {
    assert_int_equal(est_tfrecord_reader_next(r, &rec, &n), EST_OK);
    assert_int_equal(est_example_parse(&ex, rec, n), EST_OK);
    assert_int_equal(est_example_find(&ex, "next_sentence_labels")->int64s[0], 1);
    /* [CLS] hello world . [SEP] hello world . [SEP]: 9 real tokens, segment B from 5. */
    const est_feature *mask = est_example_find(&ex, "input_mask"), *seg = est_example_find(&ex, "segment_ids");
    for (int i = 0; i < 128; i++) {
      assert_int_equal(mask->int64s[i], i < 9);
      assert_int_equal(seg->int64s[i], i >= 5 && i < 9);
    }
    assert_int_equal(est_example_find(&ex, "input_ids")->int64s[0], 101);   /* [CLS] */
  }
  assert_int_equal(est_tfrecord_reader_next(r, &rec, &n), EST_ERR_OUT_OF_RANGE);
  est_example_clear(&ex);
  est_tfrecord_reader_close(r);
}

static void test_vocab_without_mask(void **state) {
  (void)state;
  const char *vocab = test_tmp_path("vocab.txt"), *in = test_tmp_path("in.txt");
  write_text(vocab, "[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n");
  write_text(in, "hello hello\nhello\n");
  est_pretraining_config cfg = est_pretraining_config_default();
  assert_int_equal(run1(&cfg, vocab, in, test_tmp_path("o.tfrecord"), NULL), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), vocab));
  assert_non_null(strstr(est_error_message(), "[MASK]"));
  /* No [UNK] either: a word the vocab cannot cover is an error naming file and line (the
   * script's KeyError). */
  write_text(vocab, "[PAD]\n[CLS]\n[SEP]\n[MASK]\nhello\n");
  write_text(in, "hello\n\nhello world\n");
  assert_int_equal(run1(&cfg, vocab, in, test_tmp_path("o.tfrecord"), NULL), EST_ERR_INVALID_ARGUMENT);
  char where[1100];
  snprintf(where, sizeof where, "%s:3:", in);
  assert_non_null(strstr(est_error_message(), where));
  assert_non_null(strstr(est_error_message(), "[UNK]"));
}

static void test_invalid_utf8_names_the_line(void **state) {
  (void)state;
  const char *in = test_tmp_path("bad.txt");
  write_text(in, "good line\nbad \xFF byte\n");
  est_pretraining_config cfg = est_pretraining_config_default();
  assert_int_equal(run1(&cfg, VOCAB, in, test_tmp_path("o.tfrecord"), NULL), EST_ERR_INVALID_ARGUMENT);
  char where[1100];
  snprintf(where, sizeof where, "%s:2: invalid UTF-8 at byte 4", in);
  assert_non_null(strstr(est_error_message(), where));
}

static void test_bad_flags_and_patterns(void **state) {
  (void)state;
  est_pretraining_config cfg = est_pretraining_config_default();
  cfg.max_seq_length = 4;
  assert_int_equal(run1(&cfg, VOCAB, PT "/cola_docs.txt", test_tmp_path("o.tfrecord"), NULL),
                   EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "--max_seq_length=4"));
  cfg = est_pretraining_config_default();
  cfg.masked_lm_prob = 1.5;
  assert_int_equal(run1(&cfg, VOCAB, PT "/cola_docs.txt", test_tmp_path("o.tfrecord"), NULL),
                   EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "--masked_lm_prob"));

  char **files;
  size_t n;
  assert_int_equal(est_pretraining_expand_inputs(PT "/edge_?.txt," PT "/cola_docs.txt", &files, &n), EST_OK);
  assert_int_equal(n, 3);
  assert_string_equal(files[0], PT "/edge_1.txt");   /* sorted */
  assert_string_equal(files[1], PT "/edge_2.txt");
  assert_string_equal(files[2], PT "/cola_docs.txt");
  est_pretraining_free_inputs(files, n);
  assert_int_equal(est_pretraining_expand_inputs(PT "/cola_docs.txt," PT "/nothing*.txt", &files, &n),
                   EST_ERR_NOT_FOUND);
  assert_non_null(strstr(est_error_message(), "nothing*.txt"));
  assert_int_equal(est_pretraining_expand_inputs(PT "/cola_docs.txt,", &files, &n), EST_ERR_NOT_FOUND);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(test_reproduces_cola_seed12345, test_tmpdir_setup, test_tmpdir_teardown),
    cmocka_unit_test_setup_teardown(test_reproduces_cola_wwm_seed3, test_tmpdir_setup, test_tmpdir_teardown),
    cmocka_unit_test_setup_teardown(test_edge_cases_match_the_script, test_tmpdir_setup, test_tmpdir_teardown),
    cmocka_unit_test_setup_teardown(test_duplicate_vocab_line_and_whole_words, test_tmpdir_setup,
                                    test_tmpdir_teardown),
    cmocka_unit_test(test_num_to_predict),
    cmocka_unit_test_setup_teardown(test_empty_corpus_is_an_error, test_tmpdir_setup, test_tmpdir_teardown),
    cmocka_unit_test_setup_teardown(test_one_sentence_document, test_tmpdir_setup, test_tmpdir_teardown),
    cmocka_unit_test_setup_teardown(test_vocab_without_mask, test_tmpdir_setup, test_tmpdir_teardown),
    cmocka_unit_test_setup_teardown(test_invalid_utf8_names_the_line, test_tmpdir_setup, test_tmpdir_teardown),
    cmocka_unit_test_setup_teardown(test_bad_flags_and_patterns, test_tmpdir_setup, test_tmpdir_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
