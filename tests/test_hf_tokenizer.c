/* tokenizer.json (docs/hf.md §5): est's FullTokenizer read from HuggingFace tokenizer.json
 * files gives the ids `tokenizers` 0.19.1 gives, on the FullTokenizer tests' 1339 inputs
 * (tests/data/hf/tokenizer_json_golden.tsv, tests/reference/hf_tokenizer_ref.py); and every
 * tokenizer type est does not run is an error naming the field. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/file.h"
#include "est/tokenizer.h"
#include "test_util.h"

#define HF_DIR EST_TEST_DATA "/hf"

static void test_ids_match_tokenizers(void **state) {
  (void)state;
  est_tokenizer *lower, *strip;
  assert_int_equal(est_tokenizer_from_json(&lower, HF_DIR "/tokenizer_lower.json"), EST_OK);
  assert_int_equal(est_tokenizer_from_json(&strip, HF_DIR "/tokenizer_strip.json"), EST_OK);
  assert_true(est_tokenizer_do_lower_case(lower));
  assert_false(est_tokenizer_do_lower_case(strip));
  uint8_t *data;
  size_t size;
  assert_int_equal(est_read_file(HF_DIR "/tokenizer_json_golden.tsv", &data, &size), EST_OK);
  char *text = (char *)data, *save = NULL;
  size_t lines = 0, wrong = 0, unicode14 = 0;
  uint8_t *input = malloc(size);
  char *got = malloc(16 * size + 1);
  for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    char *hex = line, *file = strchr(hex, '\t');
    assert_non_null(file);
    *file++ = 0;
    char *want = strchr(file, '\t');
    assert_non_null(want);
    *want++ = 0;
    size_t n = test_unhex(hex, input);
    const int32_t *ids;
    size_t count;
    est_tokenizer *tok = !strcmp(file, "tokenizer_lower.json") ? lower : strip;
    assert_int_equal(est_tokenizer_encode(tok, (const char *)input, n, &ids, &count), EST_OK);
    size_t len = 0;
    got[0] = 0;
    for (size_t i = 0; i < count; i++) len += (size_t)sprintf(got + len, "%s%d", i ? " " : "", ids[i]);
    /* U+061D ARABIC END OF TEXT MARK (Unicode 14.0, punctuation for est's utf8proc 15.0 and
     * Python's tables) is an ordinary letter to tokenizers 0.19's older Unicode tables: a
     * Unicode-version difference, counted apart (5 inputs, both files) */
    if (memmem(input, n, "\xD8\x9D", 2)) {
      unicode14 += strcmp(got, want) != 0;
    } else if (strcmp(got, want)) {
      if (wrong < 5) print_message("%s %s:\n  est         %s\n  tokenizers  %s\n", file, hex, got, want);
      wrong++;
    }
    lines++;
  }
  assert_int_equal(lines, 2 * 1339);
  assert_int_equal(wrong, 0);
  assert_int_equal(unicode14, 10);
  free(got);
  free(input);
  free(data);
  est_tokenizer_free(lower);
  est_tokenizer_free(strip);
}

/* A copy of tokenizer_lower.json with `from` replaced by `to` must fail naming `expect`. */
static void assert_variant_fails(const char *from, const char *to, const char *expect) {
  size_t size;
  uint8_t *bytes;
  assert_int_equal(est_read_file(HF_DIR "/tokenizer_lower.json", &bytes, &size), EST_OK);
  char *text = (char *)bytes;
  assert_non_null(strstr(text, from));
  size_t head = (size_t)(strstr(text, from) - text), flen = strlen(from), tlen = strlen(to);
  char *out = malloc(size + tlen + 1);
  memcpy(out, text, head);
  memcpy(out + head, to, tlen);
  memcpy(out + head + tlen, text + head + flen, size - head - flen);
  const char *path = test_tmp_path("tokenizer.json");
  test_write_bytes(path, out, size - flen + tlen);
  est_tokenizer *tok = NULL;
  assert_int_not_equal(est_tokenizer_from_json(&tok, path), EST_OK);
  if (!strstr(est_error_message(), expect)) fail_msg("\"%s\" lacks \"%s\"", est_error_message(), expect);
  assert_null(tok);
  free(out);
  free(text);
}

static void test_other_types_refused(void **state) {
  (void)state;
  /* every tokenizer.json type est implements opens (test_tokenizer_json.c); others are named */
  assert_variant_fails("\"type\": \"WordPiece\"", "\"type\": \"CharBPE\"",
                       "model.type \"CharBPE\": est does not implement this model");
  assert_variant_fails("\"type\": \"BertNormalizer\"", "\"type\": \"ByteLevel\"",
                       "normalizer.type \"ByteLevel\": est does not implement this normalizer");
  assert_variant_fails("\"type\": \"BertPreTokenizer\"", "\"type\": \"UnicodeScripts\"",
                       "pre_tokenizer.type \"UnicodeScripts\": est does not implement this pre-tokenizer");
  assert_variant_fails("\"continuing_subword_prefix\": \"##\"", "\"continuing_subword_prefix\": \"@@\"",
                       "continuing_subword_prefix must be \"##\"");
  assert_variant_fails("\"[UNK]\": 100", "\"[UNK]\": 0", "ids must be 0..");
}

/* The file's switches are followed: its unk_token and max_input_chars_per_word. */
static void test_file_settings(void **state) {
  (void)state;
  est_tokenizer *tok;
  assert_int_equal(est_tokenizer_from_json(&tok, HF_DIR "/tokenizer_lower.json"), EST_OK);
  const int32_t *ids;
  size_t n;
  char word[128];
  memset(word, 'a', 101); /* HF's max_input_chars_per_word is 100, Google's 200 */
  word[101] = 0;
  assert_int_equal(est_tokenizer_encode(tok, word, SIZE_MAX, &ids, &n), EST_OK);
  assert_int_equal(n, 1);
  assert_int_equal(ids[0], 100); /* [UNK] */
  est_tokenizer_free(tok);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ids_match_tokenizers),
      cmocka_unit_test_setup_teardown(test_other_types_refused, test_tmpdir_setup, test_tmpdir_teardown),
      cmocka_unit_test(test_file_settings),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
