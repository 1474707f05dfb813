/* tokenizer.json pipelines (docs/tokenizer.md §8) against HuggingFace `tokenizers`
 * 0.22.1: files that tests/reference/tokenizers_golden.py trained and saved (Unigram with
 * NFKC + Replace + Metaspace and a template; byte-level BPE with RobertaProcessing's
 * trim_offsets; WordLevel with StripAccents + Lowercase + Whitespace + Digits, BertProcessing
 * and the file's truncation; WordPiece with BertNormalizer; BPE with a suffix; a Llama-like
 * byte-fallback BPE), and their encodings of multilingual text, single and pair: ids, type ids,
 * special-token masks and code point offsets must be identical; and Tokenizer.decode through
 * each decoder (decode.tsv). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/file.h"
#include "est/tokenizer.h"
#include "test_util.h"

#define DIR EST_TEST_DATA "/tokenizers"

/* Space-separated ints of `s` as a line "a b c" (offsets "s:e" give both). */
static void check_list(const char *field, const char *want, const int32_t *a, const int32_t *b, size_t n, int row) {
  char got[8192];
  size_t k = 0;
  got[0] = 0;
  for (size_t i = 0; i < n && k < sizeof got - 32; i++) {
    if (b) k += (size_t)snprintf(got + k, sizeof got - k, i ? " %d:%d" : "%d:%d", a[i], b[i]);
    else k += (size_t)snprintf(got + k, sizeof got - k, i ? " %d" : "%d", a[i]);
  }
  if (strcmp(got, want)) fail_msg("golden row %d: %s\n  want %s\n  got  %s", row, field, want, got);
}

/* A golden line's n TAB-separated fields, split in place (exactly n). */
static void split_fields(char *line, char **f, int n) {
  char *p = line;
  for (int i = 0; i < n; i++) {
    f[i] = p;
    p = strchr(p, '\t');
    if (p) *p++ = 0;
    else assert_int_equal(i, n - 1);
  }
}

/* The golden rows name their tokenizer.json (file column 0): *tok is that file's, opened when
 * the name changes (current remembers it). */
static void use_file(est_tokenizer **tok, char current[64], const char *name) {
  if (!strcmp(current, name)) return;
  est_tokenizer_free(*tok);
  char path[512];
  snprintf(path, sizeof path, DIR "/%s", name);
  if (est_tokenizer_from_json(tok, path) != EST_OK) fail_msg("%s", est_error_message());
  snprintf(current, 64, "%s", name);
}

/* A golden.tsv-format file: every row's encoding exactly; want_rows rows. */
static void run_goldens(const char *tsv, int want_rows) {
  uint8_t *data;
  size_t size;
  assert_int_equal(est_read_file(tsv, &data, &size), EST_OK);
  char *text = realloc(data, size + 1);
  text[size] = 0;
  est_tokenizer *tok = NULL;
  char current[64] = "";
  int rows = 0;
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    char *f[8];
    split_fields(line, f, 8);
    use_file(&tok, current, f[0]);
    json_t *a = json_loads(f[2], JSON_DECODE_ANY, NULL), *b = json_loads(f[3], JSON_DECODE_ANY, NULL);
    assert_non_null(a);
    assert_non_null(b);
    est_encoding e;
    bool pair = f[1][0] == '1';
    assert_int_equal(est_tokenizer_encode_pair(tok, json_string_value(a), json_string_length(a),
                                               pair ? json_string_value(b) : NULL, json_string_length(b), true, &e),
                     EST_OK);
    check_list("ids", f[4], e.ids, NULL, e.n, rows);
    check_list("type_ids", f[5], e.type_ids, NULL, e.n, rows);
    check_list("special_tokens_mask", f[6], e.special_tokens_mask, NULL, e.n, rows);
    check_list("offsets", f[7], e.offset_start, e.offset_end, e.n, rows);
    json_decref(a);
    json_decref(b);
    rows++;
  }
  assert_int_equal(rows, want_rows);
  est_tokenizer_free(tok);
  free(text);
}

static void test_goldens(void **state) {
  (void)state;
  run_goldens(DIR "/golden.tsv", 204);
}

/* The Nmt normalizer (SentencePieceUnigramTokenizer's Sequence[Nmt, NFKC, Replace]) on controls
 * and space-like code points: nmt.tsv by tests/reference/tokenizers_nmt_golden.py. */
static void test_nmt_goldens(void **state) {
  (void)state;
  run_goldens(DIR "/nmt.tsv", 22);
}

/* Tokenizer.decode through each decoder (decode.tsv: file, skip_special_tokens, ids, text). */
static void test_decode_goldens(void **state) {
  (void)state;
  uint8_t *data;
  size_t size;
  assert_int_equal(est_read_file(DIR "/decode.tsv", &data, &size), EST_OK);
  char *text = realloc(data, size + 1);
  text[size] = 0;
  est_tokenizer *tok = NULL;
  char current[64] = "";
  int rows = 0;
  char *save = NULL;
  for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    char *f[4];
    split_fields(line, f, 4);
    use_file(&tok, current, f[0]);
    int32_t ids[512];
    size_t n = 0;
    for (char *q = f[2], *end; *q && n < 512; q = end) {
      ids[n++] = (int32_t)strtol(q, &end, 10);
      assert_true(end != q);
    }
    json_t *want = json_loads(f[3], JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    assert_non_null(want);
    char *got;
    size_t len;
    assert_int_equal(est_tokenizer_decode(tok, ids, n, f[1][0] == '1', &got, &len), EST_OK);
    if (len != json_string_length(want) || memcmp(got, json_string_value(want), len))
      fail_msg("decode row %d (%s, ids %s): want %s\n  got  \"%s\"", rows, f[0], f[2], f[3], got);
    free(got);
    json_decref(want);
    rows++;
  }
  assert_int_equal(rows, 2 * 6 * (17 + 8) + 2 * 3);
  est_tokenizer_free(tok);
  free(text);
}

/* A sequence cut to no more tokens than the stride is an error (tokenizers asserts it). */
static void test_stride_not_under_cut(void **state) {
  (void)state;
  est_tokenizer *tok = NULL;
  assert_int_equal(est_tokenizer_from_json(&tok, DIR "/wordlevel.json"), EST_OK);
  est_truncation *t = est_tokenizer_truncation(tok);
  t->max_length = 4; /* [CLS] x x [SEP]: the text is cut to 2 */
  t->stride = 2;
  est_encoding e;
  const char *text = "the quick brown fox";
  assert_int_not_equal(est_tokenizer_encode_pair(tok, text, strlen(text), NULL, 0, true, &e), EST_OK);
  assert_non_null(strstr(est_error_message(), "stride 2 must be less than the 2 tokens"));
  t->stride = 1;
  assert_int_equal(est_tokenizer_encode_pair(tok, text, strlen(text), NULL, 0, true, &e), EST_OK);
  assert_int_equal(e.n, 4);
  t->stride = 9; /* nothing to cut: no error */
  assert_int_equal(est_tokenizer_encode_pair(tok, "fox", 3, NULL, 0, true, &e), EST_OK);
  est_tokenizer_free(tok);
}

/* An unknown decoder is an error naming it. */
static void test_unknown_decoder_named(void **state) {
  (void)state;
  const char *path = test_tmp_path("tokenizer.json");
  const char *doc = "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0.0]], \"unk_id\": 0},"
                    " \"decoder\": {\"type\": \"Sequence\", \"decoders\": [{\"type\": \"CTC\"}]}}";
  test_write_bytes(path, doc, strlen(doc));
  est_tokenizer *tok = NULL;
  assert_int_not_equal(est_tokenizer_from_json(&tok, path), EST_OK);
  assert_non_null(strstr(est_error_message(), "decoder.decoders[0].type \"CTC\""));
  assert_null(tok);
}

/* A type est does not run is an error naming the field, never another tokenizer. */
static void test_unknown_type_named(void **state) {
  (void)state;
  const char *path = test_tmp_path("tokenizer.json");
  const char *doc = "{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"a\", 0.0]], \"unk_id\": 0},"
                    " \"normalizer\": null, \"pre_tokenizer\": {\"type\": \"UnicodeScripts\"}}";
  test_write_bytes(path, doc, strlen(doc));
  est_tokenizer *tok = NULL;
  assert_int_not_equal(est_tokenizer_from_json(&tok, path), EST_OK);
  assert_non_null(strstr(est_error_message(), "pre_tokenizer.type \"UnicodeScripts\""));
  assert_null(tok);
}

/* A vocab.txt tokenizer given BertTokenizerFast's pipeline (est_tokenizer_attach_bert_pipeline):
 * without special tokens, the Encoding of the tokenizer.json of the same vocab and normalizer
 * (tokenizer_lower.json: vocab_uncased.txt, lowercase); with them, [CLS] A [SEP] B [SEP] and
 * the pair's type ids; decode through the WordPiece decoder; Google's ids unchanged. */
static void test_vocab_gets_bert_pipeline(void **state) {
  (void)state;
  est_tokenizer *tok, *ref;
  assert_int_equal(est_tokenizer_open(&tok, EST_TEST_DATA "/vocab_uncased.txt", true), EST_OK);
  est_encoding e;
  assert_int_equal(est_tokenizer_encode_pair(tok, "a", 1, NULL, 0, true, &e), EST_ERR_FAILED_PRECONDITION);
  assert_int_equal(est_tokenizer_attach_bert_pipeline(tok), EST_OK);
  assert_int_equal(est_tokenizer_attach_bert_pipeline(tok), EST_OK); /* once is enough */
  assert_int_equal(est_tokenizer_from_json(&ref, EST_TEST_DATA "/hf/tokenizer_lower.json"), EST_OK);
  static const char *const texts[] = {"Hello, World!", "Caf\xc3\xa9 na\xc3\xafve unwantedrunning",
                                      "\xe4\xb8\xad\xe6\x96\x87 mixed \xf0\x9f\x98\x80", "", "[SEP] x"};
  for (size_t t = 0; t < sizeof texts / sizeof *texts; t++) {
    est_encoding want;
    assert_int_equal(est_tokenizer_encode_pair(ref, texts[t], SIZE_MAX, NULL, 0, false, &want), EST_OK);
    const size_t n = want.n;
    int32_t ids[64], starts[64], ends[64];
    assert_true(n < 64);
    for (size_t k = 0; k < n; k++) ids[k] = want.ids[k], starts[k] = want.offset_start[k], ends[k] = want.offset_end[k];
    assert_int_equal(est_tokenizer_encode_pair(tok, texts[t], SIZE_MAX, NULL, 0, false, &e), EST_OK);
    if (t < 4) { /* "[SEP]" is an added special token of BertTokenizerFast's, not of the bare file's */
      assert_int_equal(e.n, n);
      for (size_t k = 0; k < n; k++) {
        assert_int_equal(e.ids[k], ids[k]);
        assert_int_equal(e.offset_start[k], starts[k]);
        assert_int_equal(e.offset_end[k], ends[k]);
      }
    } else { /* one token, [SEP] at [0, 5), not special in the mask: tokenizers' Encoding */
      assert_int_equal(e.ids[0], 102);
      assert_int_equal(e.special_tokens_mask[0], 0);
      assert_int_equal(e.offset_end[0], 5);
    }
  }
  /* the template: [CLS] jack [SEP] is [SEP], types 0 0 0 1 1 */
  assert_int_equal(est_tokenizer_encode_pair(tok, "Jack", SIZE_MAX, "is", SIZE_MAX, true, &e), EST_OK);
  const int32_t want_ids[5] = {101, 2990, 102, 2003, 102}, want_types[5] = {0, 0, 0, 1, 1};
  const int32_t want_special[5] = {1, 0, 1, 0, 1};
  assert_int_equal(e.n, 5);
  assert_memory_equal(e.ids, want_ids, sizeof want_ids);
  assert_memory_equal(e.type_ids, want_types, sizeof want_types);
  assert_memory_equal(e.special_tokens_mask, want_special, sizeof want_special);
  char *text;
  size_t len;
  const int32_t run[4] = {101, 4895, 2098, 102}; /* [CLS] un ##ed [SEP] */
  assert_int_equal(est_tokenizer_decode(tok, run, 4, false, &text, &len), EST_OK);
  assert_string_equal(text, "[CLS] uned [SEP]");
  free(text);
  assert_int_equal(est_tokenizer_decode(tok, run, 4, true, &text, &len), EST_OK);
  assert_string_equal(text, "uned");
  free(text);
  /* est_tokenizer_encode is Google's FullTokenizer as before: no special tokens */
  const int32_t *g;
  size_t gn;
  assert_int_equal(est_tokenizer_encode(tok, "Jack is", SIZE_MAX, &g, &gn), EST_OK);
  assert_int_equal(gn, 2);
  assert_int_equal(g[0], 2990);
  est_tokenizer_free(ref);
  est_tokenizer_free(tok);
}

/* One encoding against [ids, type_ids, special_tokens_mask, attention_mask, offsets]. */
static void check_encoding(const est_encoding *e, json_t *want, int row, size_t k) {
  const int32_t *got[4] = {e->ids, e->type_ids, e->special_tokens_mask, e->attention_mask};
  const char *names[4] = {"ids", "type_ids", "special_tokens_mask", "attention_mask"};
  json_t *offsets = json_array_get(want, 4);
  if (json_array_size(offsets) != e->n)
    fail_msg("overflow.tsv row %d encoding %zu: %zu tokens, want %zu", row, k, e->n, json_array_size(offsets));
  for (size_t i = 0; i < e->n; i++) {
    for (int f = 0; f < 4; f++)
      if (json_integer_value(json_array_get(json_array_get(want, (size_t)f), i)) != got[f][i])
        fail_msg("overflow.tsv row %d encoding %zu: %s[%zu] %d, want %lld", row, k, names[f], i, got[f][i],
                 (long long)json_integer_value(json_array_get(json_array_get(want, (size_t)f), i)));
    json_t *o = json_array_get(offsets, i);
    if (json_integer_value(json_array_get(o, 0)) != e->offset_start[i] ||
        json_integer_value(json_array_get(o, 1)) != e->offset_end[i])
      fail_msg("overflow.tsv row %d encoding %zu: offsets[%zu] %d:%d", row, k, i, e->offset_start[i], e->offset_end[i]);
  }
}

/* Truncation with a stride: the encoding and its overflowing windows (Encoding.overflowing),
 * tokenizers 0.22.1 (overflow.tsv by tests/reference/tokenizers_overflow_golden.py), and the
 * cases it refuses (a stride not under what is left after the special tokens). */
static void test_overflowing_goldens(void **state) {
  (void)state;
  uint8_t *data;
  size_t size;
  assert_int_equal(est_read_file(DIR "/overflow.tsv", &data, &size), EST_OK);
  char *text = realloc(data, size + 1);
  text[size] = 0;
  est_tokenizer *tok = NULL;
  char current[64] = "";
  int rows = 0, windows = 0, errors = 0;
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"), rows++) {
    char *f[8];
    split_fields(line, f, 8);
    use_file(&tok, current, f[0]);
    est_truncation *t = est_tokenizer_truncation(tok);
    *t = (est_truncation){.enabled = true, .max_length = (size_t)atoi(f[1]), .stride = (size_t)atoi(f[2]),
                          .strategy = !strcmp(f[3], "only_first")    ? EST_TRUNCATE_ONLY_FIRST
                                      : !strcmp(f[3], "only_second") ? EST_TRUNCATE_ONLY_SECOND
                                                                     : EST_TRUNCATE_LONGEST_FIRST,
                          .left = !strcmp(f[4], "left")};
    json_t *a = json_loads(f[5], JSON_DECODE_ANY, NULL), *b = json_loads(f[6], JSON_DECODE_ANY, NULL);
    assert_non_null(a);
    assert_non_null(b);
    est_encoding e;
    est_status st = est_tokenizer_encode_pair(tok, json_string_value(a), json_string_length(a),
                                              json_is_string(b) ? json_string_value(b) : NULL, json_string_length(b),
                                              true, &e);
    if (!strcmp(f[7], "error")) {
      if (st == EST_OK) fail_msg("overflow.tsv row %d: tokenizers refuses, est encoded", rows);
      errors++;
    } else {
      if (st != EST_OK) fail_msg("overflow.tsv row %d: %s", rows, est_error_message());
      json_t *want = json_loads(f[7], 0, NULL);
      assert_non_null(want);
      assert_int_equal(est_tokenizer_num_overflowing(tok) + 1, json_array_size(want));
      check_encoding(&e, json_array_get(want, 0), rows, 0);
      for (size_t k = 0; k < est_tokenizer_num_overflowing(tok); k++) {
        est_encoding o;
        assert_true(est_tokenizer_overflowing(tok, k, &o));
        check_encoding(&o, json_array_get(want, k + 1), rows, k + 1);
        windows++;
      }
      assert_false(est_tokenizer_overflowing(tok, est_tokenizer_num_overflowing(tok), &e));
      json_decref(want);
    }
    json_decref(a);
    json_decref(b);
  }
  assert_int_equal(rows, 336);
  assert_int_equal(errors, 109);
  assert_true(windows > 1000);
  est_tokenizer_free(tok);
  free(text);
}

/* Unigram ties broken as tokenizers breaks them: its serde_json reads the scores "-10.383899129858237"
 * ("=") and "-9.809540206144039" ("==") an ulp away from strtod, so "===" after a piece is
 * "=" "==" there (exact scores give "==" "="). Expected ids: tokenizers 0.22.1 on this file. */
static void test_unigram_ties_as_serde_reads_scores(void **state) {
  (void)state;
  const char *json = "{\"version\":\"1.0\",\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"\u2581\","
                     "\"prepend_scheme\":\"always\",\"split\":true},\"model\":{\"type\":\"Unigram\",\"unk_id\":0,"
                     "\"vocab\":[[\"<unk>\",0.0],[\"\u2581\",-2.028520973879118],[\"=\",-10.383899129858237],"
                     "[\"==\",-9.809540206144039],[\"a\",-5.0],[\"b\",-5.5],[\"x\",-6.0],[\"y\",-6.5]],"
                     "\"byte_fallback\":false}}";
  char dir[256], path[300];
  test_make_tmpdir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/ties.json", dir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(json, f);
  fclose(f);
  est_tokenizer *tok;
  if (est_tokenizer_from_json(&tok, path) != EST_OK) fail_msg("%s", est_error_message());
  test_remove_tree(dir);
  static const struct {
    const char *text, *ids;
  } cases[] = {{"a===b", "1 4 2 3 5"}, {"x=== y", "1 6 2 3 1 7"}, {"===", "1 2 3"}, {"a======b", "1 4 3 3 3 5"}};
  for (int i = 0; i < 4; i++) {
    est_encoding e;
    assert_int_equal(est_tokenizer_encode_pair(tok, cases[i].text, SIZE_MAX, NULL, 0, true, &e), EST_OK);
    check_list("ids", cases[i].ids, e.ids, NULL, e.n, i);
  }
  est_tokenizer_free(tok);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_goldens),
    cmocka_unit_test(test_nmt_goldens),
    cmocka_unit_test(test_unigram_ties_as_serde_reads_scores),
    cmocka_unit_test(test_unknown_type_named),
    cmocka_unit_test(test_decode_goldens),
    cmocka_unit_test(test_stride_not_under_cut),
    cmocka_unit_test(test_overflowing_goldens),
    cmocka_unit_test(test_unknown_decoder_named),
    cmocka_unit_test(test_vocab_gets_bert_pipeline),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
