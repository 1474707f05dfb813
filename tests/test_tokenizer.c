/* FullTokenizer: every case of tokenization_test.py (docs/tokenizer.md §5), the extra
 * vectors of §6, vocab quirks, invalid UTF-8, Chinese/cased/uncased vocabularies, and a
 * golden file of BasicTokenizer outputs made by tests/reference/bert_tokenizer_ref.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "est/est.h"
#include "est/tokenizer.h"
#include "test_util.h"

/* Vocab A of tokenization_test.py (ids = position); vocab B is A without ",". */
static const char VOCAB_A[] = "[UNK]\n[CLS]\n[SEP]\nwant\n##want\n##ed\nwa\nun\nrunn\n##ing\n,\n";

static est_vocab *vocab_from(const char *text) {
  est_vocab *v;
  assert_int_equal(est_vocab_load_buffer(&v, text, strlen(text), "test-vocab"), EST_OK);
  return v;
}

/* Space-joined WordPiece tokens of `text`. */
static const char *pieces(est_tokenizer *tok, const char *text, char *buf, size_t size) {
  const int32_t *ids;
  size_t n;
  assert_int_equal(est_tokenizer_encode(tok, text, SIZE_MAX, &ids, &n), EST_OK);
  buf[0] = 0;
  for (size_t i = 0; i < n; i++) {
    if (i) strncat(buf, " ", size - strlen(buf) - 1);
    strncat(buf, est_vocab_token(est_tokenizer_vocab(tok), ids[i]), size - strlen(buf) - 1);
  }
  return buf;
}

static const char *basic(est_tokenizer *tok, const char *text) {
  const char *s = est_tokenizer_basic(tok, text, SIZE_MAX, NULL);
  assert_non_null(s);
  return s;
}

static void test_full_tokenizer(void **state) {
  (void)state;
  char dir[256], path[512], buf[256];
  test_make_tmpdir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/vocab.txt", dir);
  assert_int_equal(est_write_file_atomic(path, VOCAB_A, strlen(VOCAB_A)), EST_OK);
  est_tokenizer *tok;
  assert_int_equal(est_tokenizer_open(&tok, path, true), EST_OK);
  assert_string_equal(pieces(tok, "UNwant\u00E9d,running", buf, sizeof buf), "un ##want ##ed , runn ##ing");
  const int32_t *ids;
  size_t n;
  assert_int_equal(est_tokenizer_encode(tok, "UNwant\u00E9d,running", SIZE_MAX, &ids, &n), EST_OK);
  int32_t want[] = {7, 4, 5, 10, 8, 9};
  assert_int_equal(n, 6);
  assert_memory_equal(ids, want, sizeof want);
  est_tokenizer_free(tok);
  test_remove_tree(dir);
}

static void test_chinese_and_basic_lower(void **state) {
  (void)state;
  est_vocab *v = vocab_from(VOCAB_A);
  est_tokenizer *lower, *cased;
  assert_int_equal(est_tokenizer_create(&lower, v, true), EST_OK);
  assert_int_equal(est_tokenizer_create(&cased, v, false), EST_OK);
  assert_string_equal(basic(lower, "ah\u535A\u63A8zz"), "ah \u535A \u63A8 zz");
  assert_string_equal(basic(lower, " \tHeLLo!how  \n Are yoU?  "), "hello ! how are you ?");
  assert_string_equal(basic(lower, "H\u00E9llo"), "hello");
  assert_string_equal(basic(cased, " \tHeLLo!how  \n Are yoU?  "), "HeLLo ! how Are yoU ?");
  est_tokenizer_free(lower);
  est_tokenizer_free(cased);
  est_vocab_free(v);
}

static void test_wordpiece_tokenizer(void **state) {
  (void)state;
  /* Vocab B: A without ",". */
  est_vocab *v = vocab_from("[UNK]\n[CLS]\n[SEP]\nwant\n##want\n##ed\nwa\nun\nrunn\n##ing\n");
  est_tokenizer *tok;
  assert_int_equal(est_tokenizer_create(&tok, v, true), EST_OK);
  const int32_t *ids;
  size_t n;
  assert_int_equal(est_tokenizer_wordpiece(tok, "", 0, &ids, &n), EST_OK);
  assert_int_equal(n, 0);
  assert_int_equal(est_tokenizer_wordpiece(tok, "unwanted running", SIZE_MAX, &ids, &n), EST_OK);
  int32_t w1[] = {7, 4, 5, 8, 9};     /* also test_convert_tokens_to_ids */
  assert_int_equal(n, 5);
  assert_memory_equal(ids, w1, sizeof w1);
  assert_int_equal(est_tokenizer_wordpiece(tok, "unwantedX running", SIZE_MAX, &ids, &n), EST_OK);
  int32_t w2[] = {0, 8, 9};
  assert_int_equal(n, 3);
  assert_memory_equal(ids, w2, sizeof w2);
  assert_int_equal(est_vocab_find(v, "##want", SIZE_MAX), 4);
  assert_int_equal(est_vocab_find(v, ",", SIZE_MAX), -1);
  est_tokenizer_free(tok);
  est_vocab_free(v);
}

static void test_char_classes(void **state) {
  (void)state;
  assert_true(est_tok_is_whitespace(' '));
  assert_true(est_tok_is_whitespace('\t'));
  assert_true(est_tok_is_whitespace('\r'));
  assert_true(est_tok_is_whitespace('\n'));
  assert_true(est_tok_is_whitespace(0xA0));
  assert_false(est_tok_is_whitespace('A'));
  assert_false(est_tok_is_whitespace('-'));
  assert_true(est_tok_is_control(0x05));
  assert_false(est_tok_is_control('A'));
  assert_false(est_tok_is_control(' '));
  assert_false(est_tok_is_control('\t'));
  assert_false(est_tok_is_control('\r'));
  assert_false(est_tok_is_control(0x1F4A9));
  assert_true(est_tok_is_punctuation('-'));
  assert_true(est_tok_is_punctuation('$'));
  assert_true(est_tok_is_punctuation('`'));
  assert_true(est_tok_is_punctuation('.'));
  assert_false(est_tok_is_punctuation('A'));
  assert_false(est_tok_is_punctuation(' '));
  assert_false(est_tok_is_punctuation(0x20AC));   /* Sc is not punctuation */
  assert_true(est_tok_is_punctuation(0x2014));    /* Pd */
}

/* docs/tokenizer.md §6, BasicTokenizer lower / cased under Unicode 14. */
static void test_basic_extra_vectors(void **state) {
  (void)state;
  est_vocab *v = vocab_from(VOCAB_A);
  est_tokenizer *lo, *ca;
  assert_int_equal(est_tokenizer_create(&lo, v, true), EST_OK);
  assert_int_equal(est_tokenizer_create(&ca, v, false), EST_OK);
  static const struct { const char *in, *lower, *cased; } cases[] = {
    {"John Johanson's,", "john johanson ' s ,", "John Johanson ' s ,"},
    {"\u0130stanbul", "istanbul", "\u0130stanbul"},
    {"STRASSE stra\u00DFe", "strasse stra\u00DFe", "STRASSE stra\u00DFe"},
    {"a\u2028b\u2029c", "a b c", "a b c"},
    {"a\u00A0b\u3000c", "a b c", "a b c"},
    {"x\u200By\uFEFFz\u00ADw", "xyzw", "xyzw"},
    {"a\uFFFDc\x05" "d", "acd", "acd"},
    {"\u00E9\u0301", "e", "\u00E9\u0301"},
    {"\u0301\u0301", "", "\u0301\u0301"},
    {"$5.00 + 3^2 = `x` | ~y", "$ 5 . 00 + 3 ^ 2 = ` x ` | ~ y", "$ 5 . 00 + 3 ^ 2 = ` x ` | ~ y"},
    {"\u20AC" "10 \u00A9 \u00B0" "C", "\u20AC" "10 \u00A9 \u00B0" "c", "\u20AC" "10 \u00A9 \u00B0" "C"},
    {"\u300C\u65E5\u672C\u300D\u3067\u3059", "\u300C \u65E5 \u672C \u300D \u3066\u3059",
     "\u300C \u65E5 \u672C \u300D \u3067\u3059"},
    {"\uD55C\uAD6D\uC5B4", "\u1112\u1161\u11AB\u1100\u116E\u11A8\u110B\u1165", "\uD55C\uAD6D\uC5B4"},
    {"\U0001F4A9poo", "\U0001F4A9poo", "\U0001F4A9poo"},
    {"don't", "don ' t", "don ' t"},
    {"\uFF21\uFF22\uFF23", "\uFF41\uFF42\uFF43", "\uFF21\uFF22\uFF23"},
    {"caf\u00E9\u2014\u201Cquoted\u201D", "cafe \u2014 \u201C quoted \u201D",
     "caf\u00E9 \u2014 \u201C quoted \u201D"},
    /* Python's lower(): final sigma only at the end of a cased word. */
    {"\u039F\u0394\u039F\u03A3 \u03A3", "\u03BF\u03B4\u03BF\u03C2 \u03C3", "\u039F\u0394\u039F\u03A3 \u03A3"},
    {"A\u03A3B A\u03A3'", "a\u03C3b a\u03C2 '", "A\u03A3B A\u03A3 '"},
    /* Zl/Zp split; VT, FF, U+0085 and U+001C are controls and vanish (joining words). */
    {"a\vb\fc\xC2\x85" "d\x1c" "e", "abcde", "abcde"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    assert_string_equal(basic(lo, cases[i].in), cases[i].lower);
    assert_string_equal(basic(ca, cases[i].in), cases[i].cased);
  }
  /* An embedded NUL and U+FFFD are deleted, not treated as an end. */
  assert_string_equal(est_tokenizer_basic(lo, "a\0b\xEF\xBF\xBD" "c", 7, NULL), "abc");
  est_tokenizer_free(lo);
  est_tokenizer_free(ca);
  est_vocab_free(v);
}

static void test_wordpiece_extra_vectors(void **state) {
  (void)state;
  char buf[4096];
  est_vocab *v = vocab_from(VOCAB_A);
  est_tokenizer *tok;
  assert_int_equal(est_tokenizer_create(&tok, v, true), EST_OK);
  assert_string_equal(pieces(tok, "wa", buf, sizeof buf), "wa");
  assert_string_equal(pieces(tok, "wanted", buf, sizeof buf), "want ##ed");
  assert_string_equal(pieces(tok, "unwantwant", buf, sizeof buf), "un ##want ##want");
  assert_string_equal(pieces(tok, "unx", buf, sizeof buf), "[UNK]");
  assert_string_equal(pieces(tok, "runnin", buf, sizeof buf), "[UNK]");
  est_tokenizer_free(tok);
  est_vocab_free(v);

  /* max_input_chars_per_word = 200 code points, not bytes and not 100. */
  v = vocab_from("a\n##a\n[UNK]\n\u00E9\n##\u00E9\n");
  assert_int_equal(est_tokenizer_create(&tok, v, false), EST_OK);
  char word[1024];
  const int32_t *ids;
  size_t n;
  memset(word, 'a', 200);
  word[200] = 0;
  assert_int_equal(est_tokenizer_encode(tok, word, SIZE_MAX, &ids, &n), EST_OK);
  assert_int_equal(n, 200);
  assert_int_equal(ids[0], 0);
  for (size_t i = 1; i < n; i++) assert_int_equal(ids[i], 1);
  word[200] = 'a';
  word[201] = 0;
  assert_int_equal(est_tokenizer_encode(tok, word, SIZE_MAX, &ids, &n), EST_OK);
  assert_int_equal(n, 1);
  assert_int_equal(ids[0], 2);
  /* 200 two-byte characters (400 bytes) are still one word of 200 pieces. */
  for (int i = 0; i < 200; i++) memcpy(word + 2 * i, "\u00E9", 2);
  word[400] = 0;
  assert_int_equal(est_tokenizer_encode(tok, word, SIZE_MAX, &ids, &n), EST_OK);
  assert_int_equal(n, 200);
  assert_int_equal(ids[0], 3);
  assert_int_equal(ids[199], 4);
  memcpy(word + 400, "\u00E9", 3);
  assert_int_equal(est_tokenizer_encode(tok, word, SIZE_MAX, &ids, &n), EST_OK);
  assert_int_equal(n, 1);
  assert_int_equal(ids[0], 2);
  est_tokenizer_free(tok);
  est_vocab_free(v);
}

static void test_vocab_quirks(void **state) {
  (void)state;
  /* [PAD]\n\n  spaced  \nx\nx\n -> {"[PAD]":0, "":1, "spaced":2, "x":4} */
  est_vocab *v = vocab_from("[PAD]\n\n  spaced  \nx\nx\n");
  assert_int_equal(est_vocab_size(v), 5);
  assert_int_equal(est_vocab_find(v, "[PAD]", SIZE_MAX), 0);
  assert_int_equal(est_vocab_find(v, "", 0), 1);
  assert_int_equal(est_vocab_find(v, "spaced", SIZE_MAX), 2);
  assert_int_equal(est_vocab_find(v, "x", SIZE_MAX), 4);
  assert_null(est_vocab_token(v, 3));   /* shadowed by the later duplicate */
  assert_string_equal(est_vocab_token(v, 4), "x");
  assert_null(est_vocab_token(v, 5));
  est_vocab_free(v);
  /* No trailing newline; CRLF and Unicode spaces are stripped (Python strip()). */
  v = vocab_from("a\r\n\u3000b\u2028\nc");
  assert_int_equal(est_vocab_size(v), 3);
  assert_int_equal(est_vocab_find(v, "a", SIZE_MAX), 0);
  assert_int_equal(est_vocab_find(v, "b", SIZE_MAX), 1);
  assert_int_equal(est_vocab_find(v, "c", SIZE_MAX), 2);
  est_vocab_free(v);
  /* Invalid UTF-8 in the vocab is refused with the line number. */
  est_vocab *bad;
  assert_int_equal(est_vocab_load_buffer(&bad, "ok\nb\xFFz\n", 7, "v.txt"), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "v.txt:2"));
  assert_int_equal(est_vocab_load(&bad, "/nonexistent/vocab.txt"), EST_ERR_NOT_FOUND);
  assert_non_null(strstr(est_error_message(), "/nonexistent/vocab.txt"));
}

/* [UNK] missing from the vocab: tokens still come back, as EST_TOKEN_UNK_MISSING. */
static void test_unk_missing(void **state) {
  (void)state;
  est_vocab *v = vocab_from("a\nb\n");
  est_tokenizer *tok;
  assert_int_equal(est_tokenizer_create(&tok, v, true), EST_OK);
  const int32_t *ids;
  size_t n;
  assert_int_equal(est_tokenizer_encode(tok, "a zz b", SIZE_MAX, &ids, &n), EST_OK);
  assert_int_equal(n, 3);
  assert_int_equal(ids[1], EST_TOKEN_UNK_MISSING);
  assert_string_equal(est_vocab_token(v, ids[1]), "[UNK]");
  est_tokenizer_free(tok);
  est_vocab_free(v);
}

/* A tokenizer made from another's est_tokenizer_get_options (est serve makes one per
 * request) tokenizes alike, also when the unk_token asked for is not in the vocab but
 * "[UNK]" is: both miss it (fuzz_tokenizer_json found the twin taking "[UNK]"'s id). */
static void test_options_twin_unk_missing(void **state) {
  (void)state;
  est_vocab *v = vocab_from("[UNK]\na\nb\n");
  est_tokenizer_options o = est_tokenizer_options_default(true);
  o.unk_token = "<unk>";
  est_tokenizer *tok, *twin;
  assert_int_equal(est_tokenizer_create_with(&tok, v, &o), EST_OK);
  const est_tokenizer_options back = est_tokenizer_get_options(tok);
  assert_string_equal(back.unk_token, "<unk>");
  assert_int_equal(est_tokenizer_create_with(&twin, v, &back), EST_OK);
  const int32_t *ids, *twin_ids;
  size_t n, twin_n;
  assert_int_equal(est_tokenizer_encode(tok, "a zz b", SIZE_MAX, &ids, &n), EST_OK);
  assert_int_equal(est_tokenizer_encode(twin, "a zz b", SIZE_MAX, &twin_ids, &twin_n), EST_OK);
  assert_int_equal(n, 3);
  assert_int_equal(twin_n, 3);
  assert_int_equal(ids[1], EST_TOKEN_UNK_MISSING);
  assert_int_equal(twin_ids[1], EST_TOKEN_UNK_MISSING);
  est_tokenizer_free(twin);
  est_tokenizer_free(tok);
  est_vocab_free(v);
}

/* Python bytes.decode("utf-8", "ignore"): maximal invalid subparts are dropped. */
static void test_invalid_utf8(void **state) {
  (void)state;
  static const struct { const char *in; size_t len; uint32_t out[8]; size_t n; } cases[] = {
    {"a\xFF" "b", 3, {'a', 'b'}, 2},
    {"\xE4\xB8" "a", 3, {'a'}, 1},                      /* truncated 3-byte sequence */
    {"\xED\xA0\x80" "x", 4, {'x'}, 1},                  /* encoded surrogate */
    {"\xC0\x80" "y", 3, {'y'}, 1},                      /* overlong NUL */
    {"\xF4\x90\x80\x80" "z", 5, {'z'}, 1},              /* above U+10FFFF */
    {"\xF0\x9F\x92" "\xC3\xA9", 5, {0xE9}, 1},          /* cut emoji then a good char */
    {"\xF0\x9F\x92\xA9", 4, {0x1F4A9}, 1},
    {"\xE0\x80\xAF", 3, {0}, 0},
  };
  uint32_t cps[16];
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    size_t n = est_utf8_decode_lossy(cases[i].in, cases[i].len, cps);
    assert_int_equal(n, cases[i].n);
    for (size_t k = 0; k < n; k++) assert_int_equal(cps[k], cases[i].out[k]);
  }
  est_vocab *v = vocab_from(VOCAB_A);
  est_tokenizer *tok;
  assert_int_equal(est_tokenizer_create(&tok, v, true), EST_OK);
  assert_string_equal(est_tokenizer_basic(tok, "un\xFFwant \xE4\xB8" "ed", 12, NULL), "unwant ed");
  est_tokenizer_free(tok);
  est_vocab_free(v);
}

/* The real vocabularies: uncased, cased and Chinese (copied into tests/data). */
static void test_real_vocabs(void **state) {
  (void)state;
  char buf[4096];
  est_tokenizer *un, *ca, *zh;
  assert_int_equal(est_tokenizer_open(&un, EST_TEST_DATA "/vocab_uncased.txt", true), EST_OK);
  assert_int_equal(est_vocab_size(est_tokenizer_vocab(un)), 30522);
  assert_int_equal(est_vocab_find(est_tokenizer_vocab(un), "[CLS]", SIZE_MAX), 101);
  assert_string_equal(pieces(un, "The quick brown fox jumped over \u00C9milie's lazy dogs!", buf, sizeof buf),
                      "the quick brown fox jumped over emil ##ie ' s lazy dogs !");
  assert_string_equal(pieces(un, "unaffable tokenization \U0001F600", buf, sizeof buf),
                      "una ##ffa ##ble token ##ization [UNK]");
  assert_int_equal(est_tokenizer_open(&ca, EST_TEST_DATA "/vocab_cased.txt", false), EST_OK);
  assert_string_equal(pieces(ca, "Hello World, caf\u00E9", buf, sizeof buf), "Hello World , caf\u00E9");
  assert_int_equal(est_tokenizer_open(&zh, EST_TEST_DATA "/vocab_chinese.txt", true), EST_OK);
  assert_string_equal(pieces(zh, "\u6211\u7231\u5317\u4EAC\u5929\u5B89\u95E8\u3002BERT\u6A21\u578B", buf, sizeof buf),
                      "\u6211 \u7231 \u5317 \u4EAC \u5929 \u5B89 \u95E8 \u3002 be ##rt \u6A21 \u578B");
  /* A word over 200 characters is one [UNK], whatever its content. */
  char longword[300];
  memset(longword, 'x', 250);
  longword[250] = 0;
  assert_string_equal(pieces(un, longword, buf, sizeof buf), "[UNK]");
  est_tokenizer_free(un);
  est_tokenizer_free(ca);
  est_tokenizer_free(zh);
}

/* Golden BasicTokenizer + WordPiece outputs written by tests/reference/bert_tokenizer_ref.py
 * (a Python transcription of tokenization.py): lines "<hex input>\t<lower 0|1>\t<ids>". */
static void test_golden_file(void **state) {
  (void)state;
  uint8_t *data;
  size_t size;
  assert_int_equal(est_read_file(EST_TEST_DATA "/tokenizer_golden.tsv", &data, &size), EST_OK);
  est_tokenizer *tok[2];
  assert_int_equal(est_tokenizer_open(&tok[0], EST_TEST_DATA "/vocab_uncased.txt", false), EST_OK);
  assert_int_equal(est_tokenizer_create(&tok[1], est_tokenizer_vocab(tok[0]), true), EST_OK);
  size_t lines = 0, bad = 0;
  char *save = NULL;
  char *text = malloc(size + 1);
  for (char *line = strtok_r((char *)data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    char *hex = line, *t1 = strchr(hex, '\t');
    assert_non_null(t1);
    *t1 = 0;
    int lower = t1[1] - '0';
    char *want = strchr(t1 + 1, '\t');
    assert_non_null(want);
    want++;
    size_t n = strlen(hex) / 2;
    for (size_t i = 0; i < n; i++) {
      unsigned b;
      sscanf(hex + 2 * i, "%2x", &b);
      text[i] = (char)b;
    }
    const int32_t *ids;
    size_t nids;
    assert_int_equal(est_tokenizer_encode(tok[lower], text, n, &ids, &nids), EST_OK);
    char got[8192];
    size_t g = 0;
    got[0] = 0;
    for (size_t i = 0; i < nids && g + 16 < sizeof got; i++) g += (size_t)snprintf(got + g, sizeof got - g, i ? " %d" : "%d", ids[i]);
    if (strcmp(got, want) != 0) {
      if (bad < 5) fprintf(stderr, "golden line %zu (lower=%d) input %s\n  want %s\n  got  %s\n", lines + 1, lower, hex, want, got);
      bad++;
    }
    lines++;
  }
  free(text);
  assert_true(lines >= 1000);
  assert_int_equal(bad, 0);
  est_tokenizer_free(tok[1]);
  est_tokenizer_free(tok[0]);
  free(data);
}

/* Random bytes (biased towards UTF-8 lead/continuation bytes, controls and separators) must
 * never crash, give only valid ids, and agree with WordPiece run on BasicTokenizer's output. */
static void test_random_bytes(void **state) {
  (void)state;
  est_tokenizer *tok[2];
  assert_int_equal(est_tokenizer_open(&tok[0], EST_TEST_DATA "/vocab_uncased.txt", true), EST_OK);
  assert_int_equal(est_tokenizer_create(&tok[1], est_tokenizer_vocab(tok[0]), false), EST_OK);
  int32_t vsize = est_vocab_size(est_tokenizer_vocab(tok[0]));
  static const uint8_t pool[] = {'a', 'Z', ' ', '\t', '\n', '\r', 0, 0x05, '.', '#', 0x80, 0xBF, 0xC3, 0xA9, 0xCC,
                                 0x81, 0xE2, 0x80, 0xA8, 0xE4, 0xB8, 0xAD, 0xED, 0xA0, 0xF0, 0x9F, 0x92, 0xA9,
                                 0xCE, 0xA3, 0xC4, 0xB0, 0xFF, 0xEF, 0xBB, 0xBF};
  uint64_t x = 0x9E3779B97F4A7C15ULL;
  char text[400];
  int32_t *copy = malloc(4096 * sizeof *copy);
  for (int iter = 0; iter < 3000; iter++) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    size_t len = (size_t)(x >> 33) % sizeof text;
    for (size_t i = 0; i < len; i++) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      text[i] = (x >> 60) < 4 ? (char)(x >> 40) : (char)pool[(x >> 33) % sizeof pool];
    }
    est_tokenizer *t = tok[iter & 1];
    const int32_t *ids;
    size_t n;
    assert_int_equal(est_tokenizer_encode(t, text, len, &ids, &n), EST_OK);
    assert_true(n <= 4096);
    for (size_t i = 0; i < n; i++) assert_true(ids[i] >= 0 && ids[i] < vsize);
    memcpy(copy, ids, n * sizeof *ids);
    size_t nb;
    const char *b = est_tokenizer_basic(t, text, len, &nb);
    assert_non_null(b);
    char *joined = strdup(b);
    const int32_t *ids2;
    size_t n2;
    assert_int_equal(est_tokenizer_wordpiece(t, joined, SIZE_MAX, &ids2, &n2), EST_OK);
    assert_int_equal(n2, n);
    assert_memory_equal(ids2, copy, n * sizeof *ids);
    free(joined);
  }
  free(copy);
  est_tokenizer_free(tok[1]);
  est_tokenizer_free(tok[0]);
}

static void test_case_check(void **state) {
  (void)state;
  assert_int_equal(est_validate_case_matches_checkpoint(false, NULL), EST_OK);
  assert_int_equal(est_validate_case_matches_checkpoint(false, ""), EST_OK);
  assert_int_equal(est_validate_case_matches_checkpoint(true, "/m/uncased_L-12_H-768_A-12/bert_model.ckpt"), EST_OK);
  assert_int_equal(est_validate_case_matches_checkpoint(false, "/m/uncased_L-12_H-768_A-12/bert_model.ckpt"),
                   EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "--do_lower_case=True"));
  assert_non_null(strstr(est_error_message(), "lowercased"));
  assert_int_equal(est_validate_case_matches_checkpoint(true, "gs://b/cased_L-12_H-768_A-12/bert_model.ckpt-1000"),
                   EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "`cased_L-12_H-768_A-12` seems to be a cased model"));
  assert_int_equal(est_validate_case_matches_checkpoint(false, "chinese_L-12_H-768_A-12/bert_model.ckpt"),
                   EST_ERR_INVALID_ARGUMENT);
  /* Unknown names, small models and paths without the pattern are not checked. */
  assert_int_equal(est_validate_case_matches_checkpoint(false, "x/uncased_L-2_H-128_A-2/bert_model.ckpt"), EST_OK);
  assert_int_equal(est_validate_case_matches_checkpoint(true, "x/cased_L-12_H-768_A-12/model.ckpt-5"), EST_OK);
  assert_int_equal(est_validate_case_matches_checkpoint(true, "bert_model.ckpt"), EST_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_full_tokenizer),
    cmocka_unit_test(test_chinese_and_basic_lower),
    cmocka_unit_test(test_wordpiece_tokenizer),
    cmocka_unit_test(test_char_classes),
    cmocka_unit_test(test_basic_extra_vectors),
    cmocka_unit_test(test_wordpiece_extra_vectors),
    cmocka_unit_test(test_vocab_quirks),
    cmocka_unit_test(test_unk_missing),
    cmocka_unit_test(test_options_twin_unk_missing),
    cmocka_unit_test(test_invalid_utf8),
    cmocka_unit_test(test_real_vocabs),
    cmocka_unit_test(test_golden_file),
    cmocka_unit_test(test_random_bytes),
    cmocka_unit_test(test_case_check),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
