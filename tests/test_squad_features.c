/* est_squad_convert_examples and the feature writer (est/squad.h) against run_squad.py's
 * convert_examples_to_features + FeatureWriter.
 *
 * tests/data/squad/features_golden.json was written by
 * tests/reference/squad_features_reference.py, which runs the unchanged reference functions
 * (read_squad_examples, convert_examples_to_features, FeatureWriter.process_feature) on the
 * windows_*, edge_* and allennlp_* fixtures with tests/data/vocab_uncased.txt, as 1.1
 * training, 2.0 training and prediction, at max_seq_length/doc_stride/max_query_length
 * 64/16/12 and 32/24/6 (tests/reference/README.md). For each run this test converts the same
 * examples and compares every feature field, and each serialized tf.train.Example byte for
 * byte with what the writer wrote (deterministic protobuf serialization, docs/squad.md
 * §7.4), and for three runs the INFO lines logged for the first 20 examples; then the same
 * through the file writer, read back record by record. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/log.h"
#include "est/squad.h"
#include "est/tfrecord.h"
#include "est/tokenizer.h"
#include "test_util.h"

static json_t *g_golden;
static est_tokenizer *g_tok;

static int setup(void **state) {
  (void)state;
  char path[1024];
  json_error_t err;
  snprintf(path, sizeof path, "%s/squad/features_golden.json", EST_TEST_DATA);
  g_golden = json_load_file(path, 0, &err);
  if (!g_golden) {
    fprintf(stderr, "%s:%d: %s\n", path, err.line, err.text);
    return -1;
  }
  snprintf(path, sizeof path, "%s/vocab_uncased.txt", EST_TEST_DATA);
  if (est_tokenizer_open(&g_tok, path, true) != EST_OK) return -1;
  test_make_tmpdir(test_tmpdir, sizeof test_tmpdir);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  json_decref(g_golden);
  est_tokenizer_free(g_tok);
  test_remove_tree(test_tmpdir);
  return 0;
}

/* The examples of one golden run, read as the reference read them. */
static est_squad_examples *read_run(const json_t *run, est_squad_feature_config *cfg) {
  const char *mode = json_string_value(json_object_get(run, "mode"));
  bool training = strcmp(mode, "predict") != 0, v2 = !strcmp(mode, "train_v2");
  char path[1024];
  snprintf(path, sizeof path, "%s/squad/%s", EST_TEST_DATA, json_string_value(json_object_get(run, "fixture")));
  est_squad_examples *ex = NULL;
  if (est_squad_read_examples(path, training, v2, &ex) != EST_OK) fail_msg("%s: %s", path, est_error_message());
  assert_int_equal(ex->count, json_integer_value(json_object_get(run, "num_examples")));
  *cfg = est_squad_feature_config_default();
  cfg->max_seq_length = (int)json_integer_value(json_object_get(run, "max_seq_length"));
  cfg->doc_stride = (int)json_integer_value(json_object_get(run, "doc_stride"));
  cfg->max_query_length = (int)json_integer_value(json_object_get(run, "max_query_length"));
  cfg->is_training = training;
  return ex;
}

typedef struct check_ctx {
  const json_t *features;      /* the run's golden features */
  size_t next;                 /* index of the next one */
  est_squad_feature_config cfg;
  char where[200];
} check_ctx;

static est_status check_feature(void *vctx, const est_squad_feature *f) {
  check_ctx *c = vctx;
  const char *w = c->where;
  if (c->next >= json_array_size(c->features)) fail_msg("%s: more features than the golden's %zu", w, c->next);
  const json_t *g = json_array_get(c->features, c->next++);
  const size_t S = (size_t)c->cfg.max_seq_length;
  assert_int_equal(f->unique_id, json_integer_value(json_object_get(g, "unique_id")));
  assert_int_equal(f->example_index, json_integer_value(json_object_get(g, "example_index")));
  assert_int_equal(f->doc_span_index, json_integer_value(json_object_get(g, "doc_span_index")));

  const json_t *tokens = json_object_get(g, "tokens");
  if ((size_t)f->num_tokens != json_array_size(tokens))
    fail_msg("%s: feature %lld has %d tokens, golden %zu", w, (long long)f->unique_id, f->num_tokens,
             json_array_size(tokens));
  const est_vocab *v = est_tokenizer_vocab(g_tok);
  for (size_t i = 0; i < S; i++) {
    if (i < (size_t)f->num_tokens) {
      const char *want = json_string_value(json_array_get(tokens, i)), *got = est_vocab_token(v, f->input_ids[i]);
      if (!got || strcmp(got, want))
        fail_msg("%s: feature %lld token %zu is '%s', golden '%s'", w, (long long)f->unique_id, i, got ? got : "?",
                 want);
      assert_int_equal(f->input_mask[i], 1);
    } else {
      assert_int_equal(f->input_ids[i], 0);
      assert_int_equal(f->input_mask[i], 0);
      assert_int_equal(f->segment_ids[i], 0);
    }
  }

  /* The two maps: keys doc_offset .. doc_offset + doc_length - 1, values in key order. */
  const json_t *orig = json_object_get(g, "token_to_orig_map");
  const char *maxc = json_string_value(json_object_get(g, "token_is_max_context"));
  assert_int_equal(f->doc_offset, json_integer_value(json_object_get(g, "doc_offset")));
  assert_int_equal((size_t)f->doc_length, json_array_size(orig));
  assert_int_equal((size_t)f->doc_length, strlen(maxc));
  assert_int_equal(f->num_tokens, f->doc_offset + f->doc_length + 1);
  for (size_t i = 0; i < S; i++) {
    int64_t k = (int64_t)i - f->doc_offset;
    bool inside = k >= 0 && k < f->doc_length;
    if (inside) {
      if (f->token_to_orig_map[i] != json_integer_value(json_array_get(orig, (size_t)k)) ||
          f->token_is_max_context[i] != (maxc[k] == '1'))
        fail_msg("%s: feature %lld position %zu: orig %d max_context %d, golden %lld %c", w,
                 (long long)f->unique_id, i, f->token_to_orig_map[i], f->token_is_max_context[i],
                 (long long)json_integer_value(json_array_get(orig, (size_t)k)), maxc[k]);
    } else {
      assert_int_equal(f->token_to_orig_map[i], -1);
      assert_int_equal(f->token_is_max_context[i], 0);
    }
    /* segment ids: 1 on the window and its closing [SEP] */
    if (i < (size_t)f->num_tokens) assert_int_equal(f->segment_ids[i], (int64_t)i >= f->doc_offset);
  }

  const json_t *sp = json_object_get(g, "start_position"), *ep = json_object_get(g, "end_position");
  if (json_is_null(sp)) {
    assert_false(c->cfg.is_training);
    assert_int_equal(f->start_position, -1);
    assert_int_equal(f->end_position, -1);
  } else if (f->start_position != json_integer_value(sp) || f->end_position != json_integer_value(ep)) {
    fail_msg("%s: feature %lld positions %lld..%lld, golden %lld..%lld", w, (long long)f->unique_id,
             (long long)f->start_position, (long long)f->end_position, (long long)json_integer_value(sp),
             (long long)json_integer_value(ep));
  }
  assert_int_equal(f->is_impossible, json_is_true(json_object_get(g, "is_impossible")));

  /* The record, byte for byte. */
  size_t want_n;
  uint8_t *want = test_unhex_alloc(json_string_value(json_object_get(g, "record")), &want_n);
  uint8_t *got;
  size_t got_n;
  assert_int_equal(est_squad_feature_serialize(f, c->cfg.max_seq_length, c->cfg.is_training, &got, &got_n), EST_OK);
  if (got_n != want_n || memcmp(got, want, got_n))
    fail_msg("%s: feature %lld: the serialized Example differs from the reference's (%zu vs %zu bytes)", w,
             (long long)f->unique_id, got_n, want_n);
  free(got);
  free(want);
  return EST_OK;
}

/* The INFO messages logged while converting, checked line by line against the reference's
 * tf.logging.info lines (each est line is "I<mmdd> <hh:mm:ss.mmm> message"). */
static void check_log(const char *log, const json_t *want, const char *where) {
  size_t k = 0;
  for (const char *p = log; p && *p;) {
    const char *end = strchr(p, '\n');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (p[0] == 'I') {
      const char *msg = memchr(p, ' ', len);
      msg = msg ? memchr(msg + 1, ' ', len - (size_t)(msg + 1 - p)) : NULL;
      assert_non_null(msg);
      msg++;
      size_t mlen = len - (size_t)(msg - p);
      if (k >= json_array_size(want)) fail_msg("%s: log line %zu past the reference's %zu", where, k, json_array_size(want));
      const char *w = json_string_value(json_array_get(want, k));
      if (strlen(w) != mlen || memcmp(w, msg, mlen))
        fail_msg("%s: log line %zu is '%.*s', the reference logged '%s'", where, k, (int)mlen, msg, w);
      k++;
    }
    p = end ? end + 1 : NULL;
  }
  if (k != json_array_size(want)) fail_msg("%s: %zu log lines, the reference logged %zu", where, k, json_array_size(want));
}

static void test_golden_features(void **state) {
  (void)state;
  const json_t *runs = json_object_get(g_golden, "runs");
  assert_true(json_array_size(runs) >= 20);
  size_t total = 0, windows = 0, answered = 0, logged = 0;
  for (size_t r = 0; r < json_array_size(runs); r++) {
    const json_t *run = json_array_get(runs, r);
    assert_null(json_object_get(run, "error"));
    check_ctx c = {.features = json_object_get(run, "features")};
    est_squad_examples *ex = read_run(run, &c.cfg);
    snprintf(c.where, sizeof c.where, "%s %s %d/%d/%d", json_string_value(json_object_get(run, "fixture")),
             json_string_value(json_object_get(run, "mode")), c.cfg.max_seq_length, c.cfg.doc_stride,
             c.cfg.max_query_length);
    const json_t *want_log = json_object_get(run, "log");
    char *log = NULL;
    size_t log_size = 0;
    FILE *stream = NULL;
    if (want_log) {
      stream = open_memstream(&log, &log_size);
      assert_non_null(stream);
      est_log_set_stream(stream);
      est_log_set_level(EST_LOG_INFO);
    }
    est_status st = est_squad_convert_examples(ex, g_tok, &c.cfg, check_feature, &c);
    if (want_log) {
      est_log_set_stream(stderr);
      fclose(stream);
      check_log(log, want_log, c.where);
      free(log);
      logged++;
    }
    if (st != EST_OK) fail_msg("%s: %s", c.where, est_error_message());
    if (c.next != json_array_size(c.features))
      fail_msg("%s: %zu features, golden %zu", c.where, c.next, json_array_size(c.features));
    for (size_t i = 0; i < c.next; i++) {
      const json_t *g = json_array_get(c.features, i);
      windows += json_integer_value(json_object_get(g, "doc_span_index")) > 0;
      answered += json_integer_value(json_object_get(g, "start_position")) > 0;
    }
    total += c.next;
    est_squad_examples_free(ex);
  }
  /* The goldens do exercise what they are for. */
  assert_true(total > 400);
  assert_true(windows > 100);
  assert_true(answered > 50);
  assert_int_equal(logged, 3);
}

/* FeatureWriter: the file holds exactly the reference's records, in order. */
static void test_writer_file(void **state) {
  (void)state;
  const json_t *runs = json_object_get(g_golden, "runs");
  for (size_t r = 0; r < json_array_size(runs); r++) {
    const json_t *run = json_array_get(runs, r);
    est_squad_feature_config cfg;
    est_squad_examples *ex = read_run(run, &cfg);
    const char *path = test_tmp_path("train.tf_record");
    est_squad_feature_writer *w;
    assert_int_equal(est_squad_feature_writer_open(&w, path, cfg.max_seq_length, cfg.is_training), EST_OK);
    if (est_squad_convert_examples(ex, g_tok, &cfg, est_squad_feature_writer_write, w) != EST_OK)
      fail_msg("%s", est_error_message());
    const json_t *features = json_object_get(run, "features");
    assert_int_equal(est_squad_feature_writer_count(w), json_array_size(features));
    assert_int_equal(est_squad_feature_writer_close(w), EST_OK);

    est_tfrecord_reader *rd;
    assert_int_equal(est_tfrecord_reader_open(&rd, path, EST_COMPRESSION_NONE), EST_OK);
    const uint8_t *rec;
    size_t n, k = 0;
    est_status st;
    while ((st = est_tfrecord_reader_next(rd, &rec, &n)) == EST_OK) {
      size_t want_n;
      uint8_t *want = test_unhex_alloc(json_string_value(json_object_get(json_array_get(features, k), "record")),
                                       &want_n);
      assert_int_equal(n, want_n);
      assert_memory_equal(rec, want, n);
      free(want);
      k++;
    }
    assert_int_equal(st, EST_ERR_OUT_OF_RANGE);
    assert_int_equal(k, json_array_size(features));
    est_tfrecord_reader_close(rd);
    est_squad_examples_free(ex);
  }
}

/* ---- the API beside the goldens ----------------------------------------------------- */

static est_status count_feature(void *ctx, const est_squad_feature *f) {
  (void)f;
  ++*(int *)ctx;
  return EST_OK;
}

static est_status stop_at_second(void *ctx, const est_squad_feature *f) {
  (void)ctx;
  if (f->doc_span_index == 1) return est_error(EST_ERR_CANCELLED, "enough");
  return EST_OK;
}

static void test_bad_settings(void **state) {
  (void)state;
  est_squad_converter *c;
  est_squad_feature_config cfg = est_squad_feature_config_default();
  assert_int_equal(cfg.max_seq_length, 384);
  assert_int_equal(cfg.doc_stride, 128);
  assert_int_equal(cfg.max_query_length, 64);
  cfg.max_seq_length = 67;
  assert_int_equal(est_squad_converter_create(&c, g_tok, &cfg), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "max_seq_length (67) must be greater than max_query_length (64) + 3"));
  cfg.max_seq_length = 68;
  assert_int_equal(est_squad_converter_create(&c, g_tok, &cfg), EST_OK);
  est_squad_converter_free(c);
  cfg.doc_stride = 0;
  assert_int_equal(est_squad_converter_create(&c, g_tok, &cfg), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "doc_stride 0"));
  cfg.doc_stride = 1;
  cfg.max_query_length = -1;
  assert_int_equal(est_squad_converter_create(&c, g_tok, &cfg), EST_ERR_INVALID_ARGUMENT);

  est_vocab *v;
  const char words[] = "[PAD]\n[UNK]\n[SEP]\nhello\n";
  assert_int_equal(est_vocab_load_buffer(&v, words, sizeof words - 1, "tiny"), EST_OK);
  est_tokenizer *t;
  assert_int_equal(est_tokenizer_create(&t, v, true), EST_OK);
  cfg = est_squad_feature_config_default();
  assert_int_equal(est_squad_converter_create(&c, t, &cfg), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "vocab tiny has no [CLS] token"));
  est_tokenizer_free(t);
  est_vocab_free(v);
}

/* One example at a time keeps the unique ids running; a callback's error stops it. */
static void test_streaming(void **state) {
  (void)state;
  char path[1024];
  snprintf(path, sizeof path, "%s/squad/windows_v2.json", EST_TEST_DATA);
  est_squad_examples *ex;
  assert_int_equal(est_squad_read_examples(path, false, false, &ex), EST_OK);
  est_squad_feature_config cfg = est_squad_feature_config_default();
  cfg.max_seq_length = 64;
  cfg.doc_stride = 16;
  cfg.max_query_length = 12;
  est_squad_converter *c;
  assert_int_equal(est_squad_converter_create(&c, g_tok, &cfg), EST_OK);
  int n = 0;
  for (size_t i = 0; i < ex->count; i++)
    assert_int_equal(est_squad_converter_convert(c, &ex->examples[i], i, count_feature, &n), EST_OK);
  assert_int_equal(est_squad_converter_next_unique_id(c), 1000000000 + n);
  assert_int_equal(est_squad_converter_convert(c, &ex->examples[0], 0, stop_at_second, NULL), EST_ERR_CANCELLED);
  assert_string_equal(est_error_message(), "enough");
  assert_int_equal(est_squad_converter_next_unique_id(c), 1000000000 + n + 1);
  est_squad_converter_free(c);
  est_squad_examples_free(ex);
}

/* A vocab without [UNK] makes the reference's convert_tokens_to_ids fail (KeyError). */
static void test_unk_missing(void **state) {
  (void)state;
  static const char json[] = "{\"data\": [{\"title\": \"t\", \"paragraphs\": [{\"context\": \"hello zebra\", "
                             "\"qas\": [{\"id\": \"q1\", \"question\": \"hello?\", \"answers\": []}]}]}]}";
  est_squad_examples *ex;
  assert_int_equal(est_squad_read_examples_buffer(json, sizeof json - 1, "mem.json", false, false, &ex), EST_OK);
  est_vocab *v;
  const char words[] = "[PAD]\n[CLS]\n[SEP]\nhello\n?\n";
  assert_int_equal(est_vocab_load_buffer(&v, words, sizeof words - 1, "tiny"), EST_OK);
  est_tokenizer *t;
  assert_int_equal(est_tokenizer_create(&t, v, true), EST_OK);
  est_squad_feature_config cfg = est_squad_feature_config_default();
  int n = 0;
  assert_int_equal(est_squad_convert_examples(ex, t, &cfg, count_feature, &n), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "question q1: token [UNK] is not in vocab tiny"));
  assert_int_equal(n, 0);
  est_tokenizer_free(t);
  est_vocab_free(v);
  est_squad_examples_free(ex);
}

/* A context with no words: no window and no feature in prediction (the unique ids do not
 * move); in training, the reference's orig_to_tok_index[start_position] is an IndexError. */
static void test_empty_context(void **state) {
  (void)state;
  est_squad_example e = {.qas_id = "q-empty", .question_text = "why?", .doc_tokens = NULL, .num_doc_tokens = 0,
                         .orig_answer_text = NULL, .start_position = -1, .end_position = -1};
  est_squad_feature_config cfg = est_squad_feature_config_default();
  est_squad_converter *c;
  assert_int_equal(est_squad_converter_create(&c, g_tok, &cfg), EST_OK);
  int n = 0;
  assert_int_equal(est_squad_converter_convert(c, &e, 0, count_feature, &n), EST_OK);
  assert_int_equal(n, 0);
  assert_int_equal(est_squad_converter_next_unique_id(c), 1000000000);
  est_squad_converter_free(c);

  cfg.is_training = true;
  e.orig_answer_text = "";
  e.start_position = e.end_position = 0;
  assert_int_equal(est_squad_converter_create(&c, g_tok, &cfg), EST_OK);
  assert_int_equal(est_squad_converter_convert(c, &e, 0, count_feature, &n), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "question q-empty: start_position 0 is outside the 0 words"));
  est_squad_converter_free(c);
}

/* An empty question (a :predict request may send one) as the first thing a converter sees:
 * [CLS] [SEP] window [SEP]. Its zero query tokens were appended to a list not yet allocated,
 * NULL + 0, which UBSan stops (fuzz_squad_read and fuzz_qa_request found it; make test SAN=1). */
static est_status first_feature(void *ctx, const est_squad_feature *f) {
  est_squad_feature *out = ctx;
  if (f->doc_span_index == 0) {
    *out = *f;
    out->input_ids = NULL; /* the rows are the converter's: only the layout is kept */
  }
  return EST_OK;
}

static void test_empty_question(void **state) {
  (void)state;
  const char *words[] = {"hello", "world"};
  est_squad_example e = {.qas_id = "q-no-question", .question_text = "", .doc_tokens = words, .num_doc_tokens = 2,
                         .start_position = -1, .end_position = -1};
  est_squad_feature_config cfg = est_squad_feature_config_default();
  est_squad_converter *c;
  assert_int_equal(est_squad_converter_create(&c, g_tok, &cfg), EST_OK);
  est_squad_feature f = {0};
  assert_int_equal(est_squad_converter_convert(c, &e, 0, first_feature, &f), EST_OK);
  assert_int_equal(f.doc_offset, 2);
  assert_int_equal(f.doc_length, 2);
  assert_int_equal(f.num_tokens, 5);
  est_squad_converter_free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_golden_features),
    cmocka_unit_test(test_writer_file),
    cmocka_unit_test(test_bad_settings),
    cmocka_unit_test(test_streaming),
    cmocka_unit_test(test_unk_missing),
    cmocka_unit_test(test_empty_context),
    cmocka_unit_test(test_empty_question),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
