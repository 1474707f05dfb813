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

static void test_goldens(void **state) {
  (void)state;
  uint8_t *data;
  size_t size;
  assert_int_equal(est_read_file(DIR "/golden.tsv", &data, &size), EST_OK);
  char *text = realloc(data, size + 1);
  text[size] = 0;
  est_tokenizer *tok = NULL;
  char current[64] = "";
  int rows = 0;
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    char *f[8];
    char *p = line;
    for (int i = 0; i < 8; i++) {
      f[i] = p;
      p = strchr(p, '\t');
      if (p) *p++ = 0;
      else assert_int_equal(i, 7);
    }
    if (strcmp(current, f[0])) {
      est_tokenizer_free(tok);
      char path[512];
      snprintf(path, sizeof path, DIR "/%s", f[0]);
      if (est_tokenizer_from_json(&tok, path) != EST_OK) fail_msg("%s", est_error_message());
      snprintf(current, sizeof current, "%s", f[0]);
    }
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
  assert_int_equal(rows, 204);
  est_tokenizer_free(tok);
  free(text);
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
    char *p = line;
    for (int i = 0; i < 4; i++) {
      f[i] = p;
      p = strchr(p, '\t');
      if (p) *p++ = 0;
      else assert_int_equal(i, 3);
    }
    if (strcmp(current, f[0])) {
      est_tokenizer_free(tok);
      char path[512];
      snprintf(path, sizeof path, DIR "/%s", f[0]);
      if (est_tokenizer_from_json(&tok, path) != EST_OK) fail_msg("%s", est_error_message());
      snprintf(current, sizeof current, "%s", f[0]);
    }
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

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_goldens),
    cmocka_unit_test(test_unknown_type_named),
    cmocka_unit_test(test_decode_goldens),
    cmocka_unit_test(test_stride_not_under_cut),
    cmocka_unit_test(test_unknown_decoder_named),
    cmocka_unit_test(test_vocab_gets_bert_pipeline),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
