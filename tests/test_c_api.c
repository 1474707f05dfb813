/* est/c_api.h, the calls the Python package makes (docs/python.md), without Python:
 * - est_capi_embed over 1100 lines of varied length equals `est embed` on the same lines, bit
 *   for bit (two windows of 1024, batches of 7), on tests/data/hf/qa_tanh;
 * - est_capi_tokenizer_encode_batch over 4 threads equals one est_tokenizer_encode_pair per
 *   input; BatchLongest padding pads to the batch's longest, left or right, as tokenizers does;
 * - errors name the input (sentences[i], inputs[i]) and the file;
 * - est_capi_log_to hands log lines to a callback with their level, without the time stamp;
 * - est_capi_served_run refuses an embedding model (no texts to answer). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "est/c_api.h"
#include "est/file.h"
#include "est/log.h"
#include "test_util.h"

#define QA_DIR EST_TEST_DATA "/hf/qa_tanh"
#define WORDPIECE EST_TEST_DATA "/tokenizers/wordpiece.json"

enum { LINES = 1100 };

/* The file as a NUL-terminated string (est_read_file). Not inlined: GCC 12 then takes the
 * returned buffer for the local pointer it came through (-Wdangling-pointer). */
static __attribute__((noinline)) char *read_text(const char *path, size_t *size) {
  uint8_t *data = NULL;
  if (est_read_file(path, &data, size) != EST_OK) fail_msg("%s", est_error_message());
  return (char *)data;
}

/* Line i: i % 13 words of a few letters, so lengths vary inside each window. */
static char *line_text(int i) {
  static const char *words[] = {"the", "cat", "sat", "on", "a", "mat", "hello", "world", "running", "unwanted"};
  char *s = calloc(1, 256);
  for (int w = 0; w < i % 13; w++) {
    if (w) strcat(s, " ");
    strcat(s, words[(i * 7 + w * 3) % 10]);
  }
  return s;
}

static void test_embed_equals_est_embed(void **state) {
  (void)state;
  char *texts[LINES];
  const char *in = test_tmp_path("lines.txt");
  FILE *f = fopen(in, "w");
  assert_non_null(f);
  for (int i = 0; i < LINES; i++) texts[i] = line_text(i), fprintf(f, "%s\n", texts[i]);
  fclose(f);
  const char *tsv = test_tmp_path("embed.tsv");
  free(test_run_ok("{ " EST_BIN " embed --model_dir=" QA_DIR " --batch_size=7 --input_file=%s --output_format=tsv "
                   "--num_threads=2 2>/dev/null; } > %s", in, tsv));
  char *out = test_read_file(tsv, NULL);

  est_servable *s;
  if (est_capi_embed_open(&s, QA_DIR, NULL, 7) != EST_OK) fail_msg("%s", est_error_message());
  const int W = est_servable_output_width(s);
  float *got = malloc((size_t)LINES * W * sizeof(float));
  if (est_capi_embed(s, LINES, (const char *const *)texts, NULL, 7, 2, got) != EST_OK)
    fail_msg("%s", est_error_message());
  char *p = out;
  for (int i = 0; i < LINES * W; i++) {
    char *end;
    float want = strtof(p, &end);
    if (end == p) fail_msg("est embed wrote %d values, not %d: %.80s", i, LINES * W, p);
    if (memcmp(&want, &got[i], sizeof want)) fail_msg("line %d, value %d: est embed %.9g, c_api %.9g", i / W, i % W,
                                                      want, got[i]);
    p = end;
  }
  /* a batch larger than the servable was opened for is refused; so is a NUL byte, by index */
  assert_int_equal(est_capi_embed(s, 1, (const char *const *)texts, NULL, 8, 1, got), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "batch_size=8: must be in [1, 7]"));
  const char *bad[2] = {"fine", "a\0b"};
  const size_t lens[2] = {4, 3};
  assert_int_equal(est_capi_embed(s, 2, bad, lens, 7, 1, got), EST_ERR_INVALID_ARGUMENT);
  assert_string_equal(est_error_message(), "sentences[1]: a NUL byte at byte 1");
  const char *utf8[1] = {"caf\xc3"};
  assert_int_equal(est_capi_embed(s, 1, utf8, NULL, 7, 1, got), EST_ERR_INVALID_ARGUMENT);
  assert_string_equal(est_error_message(), "sentences[0]: invalid UTF-8 at byte 3");
  /* an embedding model answers no texts */
  char *json;
  size_t size;
  assert_int_equal(est_capi_served_run(s, 1, (const char *const *)texts, 1, &json, &size),
                   EST_ERR_FAILED_PRECONDITION);
  assert_non_null(strstr(est_error_message(), "the pooling head takes no texts to answer"));
  assert_string_equal(est_capi_served_head(s), "pooling");
  /* a precision est does not know */
  est_servable *s2;
  assert_int_equal(est_capi_embed_open(&s2, QA_DIR, "fp16", 7), EST_ERR_INVALID_ARGUMENT);
  assert_null(s2);
  assert_int_equal(est_capi_embed_open(&s2, QA_DIR, NULL, 0), EST_ERR_INVALID_ARGUMENT);
  est_servable_free(s);
  free(got), free(out);
  for (int i = 0; i < LINES; i++) free(texts[i]);
}

/* Every field of encoding i of the batch equals est_tokenizer_encode_pair's. */
static void assert_same_encoding(const est_capi_encodings *e, size_t i, const est_encoding *w) {
  const size_t a = e->start[i];
  assert_int_equal(e->start[i + 1] - a, w->n);
  for (size_t j = 0; j < w->n; j++) {
    assert_int_equal(e->ids[a + j], w->ids[j]);
    assert_int_equal(e->type_ids[a + j], w->type_ids[j]);
    assert_int_equal(e->special_tokens_mask[a + j], w->special_tokens_mask[j]);
    assert_int_equal(e->attention_mask[a + j], w->attention_mask[j]);
    assert_int_equal(e->offset_start[a + j], w->offset_start[j]);
    assert_int_equal(e->offset_end[a + j], w->offset_end[j]);
    assert_string_equal(e->tokens[a + j], w->tokens[j]);
  }
}

static void test_encode_batch_equals_one_by_one(void **state) {
  (void)state;
  enum { N = 300 };
  char *texts[N], *pairs[N];
  for (int i = 0; i < N; i++) texts[i] = line_text(i), pairs[i] = i % 3 ? line_text(i + 5) : NULL;
  est_capi_tokenizer *t;
  if (est_capi_tokenizer_open(&t, WORDPIECE) != EST_OK) fail_msg("%s", est_error_message());
  est_capi_encodings *e;
  if (est_capi_tokenizer_encode_batch(t, N, (const char *const *)texts, NULL, (const char *const *)pairs, NULL, 1, 4,
                                      &e) != EST_OK)
    fail_msg("%s", est_error_message());
  assert_int_equal(e->count, N);
  est_tokenizer *one;
  assert_int_equal(est_tokenizer_from_json(&one, WORDPIECE), EST_OK);
  for (size_t i = 0; i < N; i++) {
    est_encoding w;
    assert_int_equal(est_tokenizer_encode_pair(one, texts[i], strlen(texts[i]), pairs[i],
                                               pairs[i] ? strlen(pairs[i]) : 0, true, &w), EST_OK);
    assert_same_encoding(e, i, &w);
  }
  est_capi_encodings_free(e);

  est_tokenizer_free(one);
  est_capi_tokenizer_free(t);
  for (int i = 0; i < N; i++) free(texts[i]), free(pairs[i]);
}

/* BatchLongest padding, on a copy of the file that asks for it (on the left). */
static void test_batch_longest_padding(void **state) {
  (void)state;
  size_t size;
  char *spec = read_text(WORDPIECE, &size);
  const char *at = strstr(spec, "\"padding\"");
  assert_non_null(at);
  const char *pad = "\"padding\": {\"strategy\": \"BatchLongest\", \"direction\": \"Left\", \"pad_to_multiple_of\": null, "
                    "\"pad_id\": 0, \"pad_type_id\": 0, \"pad_token\": \"[PAD]\"}";
  /* replace `"padding": null` */
  assert_int_equal(strncmp(at, "\"padding\": null", 15), 0);
  char *out = malloc(size + strlen(pad) + 1);
  size_t head = (size_t)(at - spec);
  memcpy(out, spec, head);
  strcpy(out + head, pad);
  strcat(out, at + 15);
  const char *path = test_tmp_path("padded.json");
  test_write_bytes(path, out, strlen(out));
  est_capi_tokenizer *t;
  if (est_capi_tokenizer_open(&t, path) != EST_OK) fail_msg("%s", est_error_message());
  const char *three[3] = {"a", "the cat sat on the mat", "hello"};
  est_capi_encodings *e;
  assert_int_equal(est_capi_tokenizer_encode_batch(t, 3, three, NULL, NULL, NULL, 1, 2, &e), EST_OK);
  const size_t n = e->start[1] - e->start[0];
  assert_int_equal(e->start[2] - e->start[1], n);
  assert_int_equal(e->start[3] - e->start[2], n);
  /* "a" is padded on the left: [PAD]s first, mask 0, special 1, offsets (0, 0) */
  assert_true(n > 3);
  assert_string_equal(e->tokens[0], "[PAD]");
  assert_int_equal(e->attention_mask[0], 0);
  assert_int_equal(e->special_tokens_mask[0], 1);
  assert_int_equal(e->offset_start[0] + e->offset_end[0], 0);
  assert_int_equal(e->attention_mask[n - 1], 1);
  /* the longest is not padded */
  for (size_t j = 0; j < n; j++) assert_int_equal(e->attention_mask[e->start[1] + j], 1);
  est_capi_encodings_free(e);
  /* one text: its own length */
  assert_int_equal(est_capi_tokenizer_encode_batch(t, 1, three, NULL, NULL, NULL, 1, 1, &e), EST_OK);
  for (size_t j = 0; j < e->start[1]; j++) assert_int_equal(e->attention_mask[j], 1);
  est_capi_encodings_free(e);
  est_capi_tokenizer_free(t);
  free(out), free(spec);
}

static void test_tokenizer_errors(void **state) {
  (void)state;
  est_capi_tokenizer *t;
  assert_int_not_equal(est_capi_tokenizer_open(&t, EST_TEST_DATA "/no_such.json"), EST_OK);
  assert_non_null(strstr(est_error_message(), "no_such.json"));
  assert_null(t);
  /* a pair on a file whose truncation cannot cut it: the message names the input */
  size_t size;
  char *spec = read_text(WORDPIECE, &size);
  const char *at = strstr(spec, "\"truncation\": null");
  assert_non_null(at);
  const char *trunc = "\"truncation\": {\"direction\": \"Right\", \"max_length\": 6, \"strategy\": \"OnlySecond\", "
                      "\"stride\": 0}";
  char *out = malloc(size + strlen(trunc) + 1);
  size_t head = (size_t)(at - spec);
  memcpy(out, spec, head);
  strcpy(out + head, trunc);
  strcat(out, at + strlen("\"truncation\": null"));
  const char *path = test_tmp_path("truncated.json");
  test_write_bytes(path, out, strlen(out));
  assert_int_equal(est_capi_tokenizer_open(&t, path), EST_OK);
  const char *texts[3] = {"a", "b", "the cat sat on the mat again and again"};
  const char *pairs[3] = {"x", "y", "z"};
  est_capi_encodings *e = (est_capi_encodings *)1;
  assert_int_not_equal(est_capi_tokenizer_encode_batch(t, 3, texts, NULL, pairs, NULL, 1, 2, &e), EST_OK);
  assert_null(e);
  assert_non_null(strstr(est_error_message(), "inputs[2]: "));
  char *text;
  size_t len;
  const int32_t ids[1] = {0};
  assert_int_equal(est_capi_tokenizer_decode(t, ids, 1, 0, &text, &len), EST_OK);
  free(text);
  assert_non_null(est_capi_tokenizer_id_to_token(t, 0));
  assert_null(est_capi_tokenizer_id_to_token(t, 1 << 30));
  est_capi_tokenizer_free(t);
  free(out), free(spec);
}

static int lines_seen, last_level;
static char last_line[256];
static void on_log(int level, const char *line) {
  lines_seen++, last_level = level;
  snprintf(last_line, sizeof last_line, "%s", line);
}

static void test_log_callback(void **state) {
  (void)state;
  assert_int_equal(est_capi_log_to(on_log), EST_OK);
  EST_LOG_WARN("a warning with %d", 7);
  assert_int_equal(lines_seen, 1);
  assert_int_equal(last_level, EST_LOG_WARN);
  assert_string_equal(last_line, "a warning with 7");
  EST_LOG_INFO("info");
  assert_int_equal(last_level, EST_LOG_INFO);
  assert_string_equal(last_line, "info");
  assert_int_equal(est_capi_log_to(NULL), EST_OK);
  EST_LOG_INFO("to stderr again");
  assert_int_equal(lines_seen, 2);
  assert_int_equal(est_capi_version(), EST_CAPI_VERSION);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(test_embed_equals_est_embed, test_tmpdir_setup, test_tmpdir_teardown),
    cmocka_unit_test(test_encode_batch_equals_one_by_one),
    cmocka_unit_test_setup_teardown(test_batch_longest_padding, test_tmpdir_setup, test_tmpdir_teardown),
    cmocka_unit_test_setup_teardown(test_tokenizer_errors, test_tmpdir_setup, test_tmpdir_teardown),
    cmocka_unit_test(test_log_callback),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
