/* Every program takes any tokenizer.json (est_tokenizer_open_any, docs/tokenizer.md §9): a
 * HuggingFace RoBERTa / XLM-R directory (the tiny encoders of tests/data/encoders, with a
 * tokenizer.json beside their config.json and vocab.txt) gives run_classifier's and
 * extract_features' rows (est_convert_single_example), and embed / serve / predict's
 * (est_featurizer_run, also from an export of it), the ids and type ids that transformers'
 * AutoTokenizer gives there for tokenizer(a, b, truncation=True, max_length=S):
 * tests/data/tokenizers/programs.tsv, written by tests/reference/tokenizer_programs_golden.py
 * (tokenizers 0.19.1, transformers 4.44.2) with a byte-level BPE (roberta_tiny.json) and a
 * Unigram (xlmr_tiny.json). A BERT directory's WordPiece tokenizer.json keeps Google's rows byte
 * for byte, and est_hf_export carries a BPE tokenizer.json. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/bert_encoder.h"
#include "est/ckpt.h"
#include "est/classifier_features.h"
#include "est/file.h"
#include "est/hf_model.h"
#include "est/serving.h"
#include "est/tokenizer.h"
#include "test_util.h"

#define TOK_DIR EST_TEST_DATA "/tokenizers"
#define ENC_DIR EST_TEST_DATA "/encoders"

static void copy_file(const char *from, const char *dir, const char *name) {
  uint8_t *data;
  size_t size;
  char path[1024];
  if (est_read_file(from, &data, &size) != EST_OK) fail_msg("%s", est_error_message());
  snprintf(path, sizeof path, "%s/%s", dir, name);
  assert_int_equal(est_write_file_atomic(path, data, size), EST_OK);
  free(data);
}

/* tmp/<encoder>: the encoder's config.json, model.safetensors and vocab.txt, and tok_file as
 * its tokenizer.json. */
static void hf_dir(char *dir, size_t size, const char *encoder, const char *tok_file) {
  snprintf(dir, size, "%s/%s", test_tmpdir, encoder);
  if (est_is_directory(dir)) return;
  assert_int_equal(est_mkdirs(dir), EST_OK);
  const char *files[] = {"config.json", "model.safetensors", "vocab.txt"};
  char from[1024];
  for (int i = 0; i < 3; i++) {
    snprintf(from, sizeof from, ENC_DIR "/%s/%s", encoder, files[i]);
    copy_file(from, dir, files[i]);
  }
  snprintf(from, sizeof from, TOK_DIR "/%s", tok_file);
  copy_file(from, dir, "tokenizer.json");
}

typedef struct row {
  char file[64];
  int max_length;
  json_t *a, *b;
  int32_t ids[64], types[64];
  int n;
} row;

static int parse_ints(const char *s, int32_t *out) {
  int n = 0;
  for (char *end; *s; s = end) {
    out[n++] = (int32_t)strtol(s, &end, 10);
    if (end == s) break;
  }
  return n;
}

/* programs.tsv's rows; returns the count. */
static int read_rows(row *rows, int cap) {
  uint8_t *data;
  size_t size;
  assert_int_equal(est_read_file(TOK_DIR "/programs.tsv", &data, &size), EST_OK);
  char *text = realloc(data, size + 1);
  text[size] = 0;
  int n = 0;
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    char *f[6], *p = line;
    for (int i = 0; i < 6; i++) {
      f[i] = p;
      p = strchr(p, '\t');
      if (p) *p++ = 0;
    }
    assert_true(n < cap);
    row *r = &rows[n++];
    snprintf(r->file, sizeof r->file, "%s", f[0]);
    r->max_length = atoi(f[1]);
    r->a = json_loads(f[2], JSON_DECODE_ANY, NULL);
    r->b = json_loads(f[3], JSON_DECODE_ANY, NULL);
    assert_non_null(r->a);
    assert_non_null(r->b);
    r->n = parse_ints(f[4], r->ids);
    assert_int_equal(parse_ints(f[5], r->types), r->n);
  }
  free(text);
  return n;
}

static const char *encoder_of(const char *file) {
  return !strcmp(file, "roberta_tiny.json") ? "roberta_cls" : "xlm_roberta_cls";
}

/* One row of max_length ints against the golden: its ids and type ids, mask 1, then zeros. */
static void check_row(const row *r, int k, const int32_t *ids, const int32_t *mask, const int32_t *segs, int S) {
  for (int t = 0; t < S; t++) {
    int32_t want_id = t < r->n ? r->ids[t] : 0, want_type = t < r->n ? r->types[t] : 0;
    if (ids[t] != want_id || segs[t] != want_type || mask[t] != (t < r->n))
      fail_msg("programs.tsv row %d (%s, S %d, \"%s\" / \"%s\") position %d: id %d type %d mask %d, want %d %d %d",
               k, r->file, S, json_string_value(r->a), json_string_value(r->b), t, ids[t], segs[t], mask[t], want_id,
               want_type, t < r->n);
  }
}

static row rows[64];
static int nrows;

static int setup(void **state) {
  test_tmpdir_setup(state);
  nrows = read_rows(rows, 64);
  assert_int_equal(nrows, 36);
  return 0;
}

static int teardown(void **state) {
  for (int i = 0; i < nrows; i++) json_decref(rows[i].a), json_decref(rows[i].b);
  return test_tmpdir_teardown(state);
}

/* run_classifier's and extract_features' rows from the directory (its tokenizer.json wins over
 * its vocab.txt, as transformers' AutoTokenizer's fast tokenizer). */
static void test_classifier_rows_are_transformers(void **state) {
  (void)state;
  static const char *const labels[2] = {"0", "1"};
  for (int k = 0; k < nrows; k++) {
    const row *r = &rows[k];
    char dir[512];
    hf_dir(dir, sizeof dir, encoder_of(r->file), r->file);
    est_tokenizer *tok;
    if (est_tokenizer_open_any(&tok, dir, true) != EST_OK) fail_msg("%s", est_error_message());
    assert_null(est_tokenizer_vocab(tok)); /* not the Google path */
    assert_true(est_tokenizer_size(tok) <= 40);
    est_feature_converter c;
    assert_int_equal(est_feature_converter_init(&c, tok, labels, 2, r->max_length), EST_OK);
    const char *b = json_string_value(r->b);
    est_input_example ex = {.guid = "g", .text_a = json_string_value(r->a), .text_b = *b ? b : NULL, .label = "1"};
    int32_t ids[64], mask[64], segs[64], label, real;
    if (est_convert_single_example(&c, k, &ex, ids, mask, segs, &label, &real) != EST_OK)
      fail_msg("row %d: %s", k, est_error_message());
    assert_int_equal(label, 1);
    assert_int_equal(real, 1);
    check_row(r, k, ids, mask, segs, r->max_length);
    est_tokenizer_free(tok);
  }
}

/* embed / serve / predict: the servable of the directory, and of an export of it (which carries
 * the tokenizer.json and no vocab.txt), featurize alike. */
static void test_servable_rows_are_transformers(void **state) {
  (void)state;
  const char *files[2] = {"roberta_tiny.json", "xlmr_tiny.json"};
  for (int f = 0; f < 2; f++) {
    char dir[512], export_base[600], version[1024], path[1200];
    hf_dir(dir, sizeof dir, encoder_of(files[f]), files[f]);
    snprintf(export_base, sizeof export_base, "%s/export_%d", test_tmpdir, f);
    for (int S = 6; S <= 10; S += 4) {
      est_embed_model_options o = {.init_checkpoint = dir, .normalize = -1, .max_seq_length = S, .max_batch = 1};
      est_servable *s[2] = {NULL, NULL};
      if (est_embed_model_open(&s[0], &o) != EST_OK) fail_msg("%s", est_error_message());
      if (S == 10) { /* the export: tokenizer.json in assets, no vocab.txt from a BPE / Unigram file */
        est_model_meta meta;
        assert_int_equal(est_embed_model_meta(&meta, &o), EST_OK);
        if (est_export_write(export_base, dir, &meta, dir, version, sizeof version) != EST_OK)
          fail_msg("%s", est_error_message());
        est_model_meta_clear(&meta);
        snprintf(path, sizeof path, "%s/assets/tokenizer.json", version);
        assert_true(est_file_exists(path));
        snprintf(path, sizeof path, "%s/assets/vocab.txt", version);
        assert_false(est_file_exists(path));
        if (est_servable_load(&s[1], version, 1) != EST_OK) fail_msg("%s", est_error_message());
      }
      for (int v = 0; v < 2 && s[v]; v++) {
        est_featurizer *fz;
        assert_int_equal(est_featurizer_create(&fz, s[v]), EST_OK);
        for (int k = 0; k < nrows; k++) {
          const row *r = &rows[k];
          if (strcmp(r->file, files[f]) || r->max_length != S) continue;
          int32_t ids[64], mask[64], segs[64];
          int length, tokens;
          const char *b = json_string_value(r->b);
          if (est_featurizer_run(fz, json_string_value(r->a), b, ids, mask, segs, &length) != EST_OK)
            fail_msg("row %d: %s", k, est_error_message());
          check_row(r, k, ids, mask, segs, S);
          assert_int_equal(length, r->n);
          assert_int_equal(est_featurizer_count_tokens(fz, json_string_value(r->a), b, &tokens), EST_OK);
          assert_true(tokens >= r->n); /* before truncation */
        }
        est_featurizer_free(fz);
        est_servable_free(s[v]);
      }
    }
  }
}

/* A twin tokenizes alike, with its own truncation; freeing it leaves the original whole. */
static void test_twin(void **state) {
  (void)state;
  est_tokenizer *tok, *twin;
  if (est_tokenizer_from_json(&tok, TOK_DIR "/xlmr_tiny.json") != EST_OK) fail_msg("%s", est_error_message());
  assert_int_equal(est_tokenizer_twin(&twin, tok), EST_OK);
  est_tokenizer_truncation(twin)->enabled = true;
  est_tokenizer_truncation(twin)->max_length = 3;
  est_encoding a, b;
  assert_int_equal(est_tokenizer_encode_pair(tok, "the world is", SIZE_MAX, NULL, 0, true, &a), EST_OK);
  assert_int_equal(est_tokenizer_encode_pair(twin, "the world is", SIZE_MAX, NULL, 0, true, &b), EST_OK);
  assert_int_equal(a.n, 5);
  assert_int_equal(b.n, 3);
  assert_memory_equal(a.ids, b.ids, 2 * sizeof *a.ids);
  est_tokenizer_free(twin);
  assert_int_equal(est_tokenizer_encode_pair(tok, "the world", SIZE_MAX, NULL, 0, true, &a), EST_OK);
  assert_int_equal(a.n, 4);
  est_tokenizer_free(tok);
  /* a vocab.txt tokenizer's twin is the FullTokenizer with the same options */
  assert_int_equal(est_tokenizer_open(&tok, ENC_DIR "/roberta_cls/vocab.txt", false), EST_OK);
  assert_int_equal(est_tokenizer_twin(&twin, tok), EST_OK);
  const int32_t *ids;
  size_t n, m;
  int32_t first[64];
  assert_int_equal(est_tokenizer_encode(tok, "Hello world", SIZE_MAX, &ids, &n), EST_OK);
  memcpy(first, ids, n * sizeof *ids);
  assert_int_equal(est_tokenizer_encode(twin, "Hello world", SIZE_MAX, &ids, &m), EST_OK);
  assert_int_equal(n, m);
  assert_memory_equal(first, ids, n * sizeof *ids);
  assert_null(est_tokenizer_truncation(twin));
  assert_int_equal(est_tokenizer_size(twin), 40);
  est_tokenizer_free(twin);
  est_tokenizer_free(tok);
}

/* est_hf_export with the directory as --vocab_file: its BPE tokenizer.json goes out as it is,
 * with a tokenizer_config.json for AutoTokenizer and no vocab.txt or BERT special tokens. */
static void test_hf_export_carries_tokenizer_json(void **state) {
  (void)state;
  char dir[512], prefix[600], out[600], path[700];
  hf_dir(dir, sizeof dir, "roberta_cls", "roberta_tiny.json");
  /* the directory's weights as a TF checkpoint, which est_hf_export reads */
  est_hf_checkpoint *h;
  assert_int_equal(est_hf_checkpoint_open(&h, dir), EST_OK);
  size_t n = est_hf_checkpoint_count(h), m = 0;
  est_tensor *ts = calloc(n, sizeof *ts);
  const char **names = calloc(n, sizeof *names);
  for (size_t i = 0; i < n; i++) {
    if (!*est_hf_checkpoint_tf_name(h, i)) continue;
    assert_int_equal(est_hf_checkpoint_read(h, i, &ts[m]), EST_OK);
    names[m++] = est_hf_checkpoint_tf_name(h, i);
  }
  snprintf(prefix, sizeof prefix, "%s/tf/model.ckpt", test_tmpdir);
  assert_int_equal(est_ckpt_save(prefix, m, names, ts), EST_OK);
  for (size_t i = 0; i < m; i++) est_tensor_free(&ts[i]);
  free(ts);
  free(names);
  est_hf_checkpoint_close(h);
  est_bert_config cfg;
  assert_int_equal(est_bert_config_from_json_file(&cfg, dir), EST_OK);
  snprintf(out, sizeof out, "%s/hf_out", test_tmpdir);
  est_hf_export_params p = {.cfg = &cfg, .vocab_file = dir, .do_lower_case = 0};
  if (est_hf_export(prefix, out, &p) != EST_OK) fail_msg("%s", est_error_message());
  uint8_t *a, *b;
  size_t na, nb;
  snprintf(path, sizeof path, "%s/tokenizer.json", out);
  assert_int_equal(est_read_file(path, &a, &na), EST_OK);
  assert_int_equal(est_read_file(TOK_DIR "/roberta_tiny.json", &b, &nb), EST_OK);
  assert_int_equal(na, nb);
  assert_memory_equal(a, b, na);
  free(a), free(b);
  snprintf(path, sizeof path, "%s/tokenizer_config.json", out);
  assert_int_equal(est_read_file(path, &a, &na), EST_OK);
  a = realloc(a, na + 1);
  a[na] = 0;
  assert_non_null(strstr((char *)a, "\"tokenizer_class\": \"PreTrainedTokenizerFast\""));
  free(a);
  snprintf(path, sizeof path, "%s/vocab.txt", out);
  assert_false(est_file_exists(path));
  snprintf(path, sizeof path, "%s/special_tokens_map.json", out);
  assert_false(est_file_exists(path));
  /* and est reads the directory back with that tokenizer */
  est_tokenizer *tok;
  assert_int_equal(est_tokenizer_open_any(&tok, out, true), EST_OK);
  assert_null(est_tokenizer_vocab(tok));
  est_tokenizer_free(tok);
}

/* A BERT directory (tests/data/hf/cls_gelu: a WordPiece tokenizer.json with BertNormalizer and
 * BertPreTokenizer beside its vocab.txt) stays on Google's path: its tokenizer.json wins, has the
 * vocab, and gives run_classifier's rows byte for byte as the vocab.txt does (and so does a twin). */
static void test_wordpiece_directory_rows_unchanged(void **state) {
  (void)state;
  static const char *const labels[2] = {"0", "1"};
  const char *dir = EST_TEST_DATA "/hf/cls_gelu";
  est_tokenizer *from_dir, *from_txt, *twin;
  assert_int_equal(est_tokenizer_open_any(&from_dir, dir, true), EST_OK);
  assert_non_null(est_tokenizer_vocab(from_dir));
  assert_int_equal(est_tokenizer_open_any(&from_txt, EST_TEST_DATA "/hf/cls_gelu/vocab.txt",
                                          est_tokenizer_do_lower_case(from_dir)), EST_OK);
  assert_int_equal(est_tokenizer_twin(&twin, from_dir), EST_OK);
  est_tokenizer *toks[3] = {from_dir, from_txt, twin};
  static const char *const texts[][2] = {{"The quick brown fox.", NULL}, {"Hello, World!", "a second text here"},
                                         {"unaffable running jumps over the lazy dog again and again", "x y z"},
                                         {"", "only b"}, {"caf\xc3\xa9 na\xc3\xafve \xe4\xb8\xad\xe6\x96\x87", NULL}};
  enum { S = 12 };
  for (size_t k = 0; k < sizeof texts / sizeof *texts; k++) {
    int32_t rows[3][3][S];
    for (int t = 0; t < 3; t++) {
      est_feature_converter c;
      assert_int_equal(est_feature_converter_init(&c, toks[t], labels, 2, S), EST_OK);
      est_input_example ex = {.guid = "g", .text_a = texts[k][0], .text_b = texts[k][1], .label = "0"};
      int32_t label, real;
      assert_int_equal(est_convert_single_example(&c, 5, &ex, rows[t][0], rows[t][1], rows[t][2], &label, &real), EST_OK);
    }
    assert_memory_equal(rows[0], rows[1], sizeof rows[0]);
    assert_memory_equal(rows[0], rows[2], sizeof rows[0]);
    assert_int_equal(rows[0][0][0], est_vocab_find(est_tokenizer_vocab(from_dir), "[CLS]", 5));
  }
  est_tokenizer_free(twin);
  est_tokenizer_free(from_txt);
  est_tokenizer_free(from_dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_classifier_rows_are_transformers),
    cmocka_unit_test(test_servable_rows_are_transformers),
    cmocka_unit_test(test_twin),
    cmocka_unit_test(test_hf_export_carries_tokenizer_json),
    cmocka_unit_test(test_wordpiece_directory_rows_unchanged),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
