/* Odd and huge inputs: each works, or fails with a message naming the file and the place.
 * A 100 MB TSV line (one huge field: Python csv's field limit; 100 MB of small fields:
 * read), NUL bytes, CRLF endings, UTF-16 and Latin-1 files (TSV and vocab, library and
 * `est convert`; create_pretraining_data's corpus), a vocab of a million entries, a 300 MB
 * TFRecord file read in constant memory (RSS via getrusage; bench/tfrecord_stream_2gb.sh
 * does 2 GB), a text far longer than max_seq_length, and an output_dir that cannot be a
 * directory (tests run as root, which ignores permission bits: a regular file in its
 * place, and a path under /proc). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "est/est.h"
#include "est/processors.h"
#include "est/tokenizer.h"
#include "test_util.h"

#define UNCASED EST_TEST_DATA "/vocab_uncased.txt"
/* A string literal's bytes (embedded NULs included, the terminating one not) as a file. */
#define write_literal(path, lit) test_write_bytes((path), (lit), sizeof(lit) - 1)

static void expect_error(est_status st, const char *a, const char *b) {
  if (st == EST_OK) fail_msg("succeeded; want an error with '%s'", a);
  const char *m = est_error_message();
  if (!strstr(m, a) || (b && !strstr(m, b))) fail_msg("message '%s' lacks '%s' / '%s'", m, a, b ? b : "");
}

/* A file of `lines` copies of `line` (no terminator added) after `head`. */
static const char *make_file(const char *name, const char *head, const char *line, size_t len, size_t lines) {
  const char *path = test_tmp_path(name);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  fputs(head, f);
  for (size_t i = 0; i < lines; i++) assert_int_equal(fwrite(line, 1, len, f), len);
  assert_int_equal(fclose(f), 0);
  return path;
}

/* ---- TSV ---------------------------------------------------------------------------- */

static void test_tsv_100mb_line(void **s) {
  (void)s;
  /* 100 MB in one field: over Python csv's 131072-character limit, refused with file:line. */
  static char chunk[1 << 20];
  memset(chunk, 'a', sizeof chunk);
  const char *path = make_file("huge_field.tsv", "x\ty\n", chunk, sizeof chunk, 100);
  est_tsv t;
  expect_error(est_tsv_read(&t, path), "huge_field.tsv:2: field 1 larger than field limit (131072)", NULL);
  /* 100 MB on one line in fields of 1 KiB: read, every field intact. */
  for (size_t i = 1023; i < sizeof chunk; i += 1024) chunk[i] = '\t';
  chunk[sizeof chunk - 1] = '\n';
  const char *many = make_file("long_line.tsv", "", chunk, sizeof chunk - 1, 100);
  FILE *f = fopen(many, "ab");
  fputc('\n', f);
  fclose(f);
  assert_int_equal(est_tsv_read(&t, many), EST_OK);
  assert_int_equal(t.nrows, 1);
  assert_int_equal(t.ncols[0], 100 * 1024 - 99);
  assert_int_equal(strlen(t.rows[0][0]), 1023);
  est_tsv_free(&t);
}

static void test_tsv_nul_crlf_encodings(void **s) {
  (void)s;
  est_tsv t;
  const char *nul = test_tmp_path("nul.tsv");
  write_literal(nul, "a\tb\nc\0d\te\n");
  expect_error(est_tsv_read(&t, nul), "nul.tsv:2: NUL byte at column 2", NULL);
  const char *crlf = test_tmp_path("crlf.tsv");
  write_literal(crlf, "a\tb\r\nc\td\r\n");
  assert_int_equal(est_tsv_read(&t, crlf), EST_OK);
  assert_int_equal(t.nrows, 2);
  assert_string_equal(t.rows[1][1], "d");
  est_tsv_free(&t);
  const char *u16 = test_tmp_path("utf16.tsv");
  write_literal(u16, "\xff\xfe" "a\0\t\0b\0\n\0");
  expect_error(est_tsv_read(&t, u16), "utf16.tsv:1: the file is UTF-16LE", NULL);
  write_literal(u16, "\xfe\xff\0a");
  expect_error(est_tsv_read(&t, u16), "utf16.tsv:1: the file is UTF-16BE", NULL);
  const char *latin1 = test_tmp_path("latin1.tsv");
  write_literal(latin1, "ok\t1\ncaf\xe9\t0\n");
  expect_error(est_tsv_read(&t, latin1), "latin1.tsv:2: invalid UTF-8 at byte 4", NULL);
}

/* The same through `est convert`: exit 1, the message names the file and line. */
static void test_convert_names_file_and_line(void **s) {
  (void)s;
  const char *dir = test_tmp_path("data");
  assert_int_equal(est_mkdirs(dir), EST_OK);
  char path[1024], *log = NULL;
  snprintf(path, sizeof path, "%s/train.tsv", dir);
  write_literal(path, "good\t1\nna\xefve\t0\n");
  int rc = test_run(&log, 1, "%s convert --task_name=tsv --tsv_skip_header=false --splits=train --data_dir=%s"
                    " --vocab_file=%s --output_dir=%s", EST_BIN, dir, UNCASED, test_tmp_path("out"));
  assert_int_equal(rc, 1);
  if (!strstr(log, "train.tsv:2: invalid UTF-8")) fail_msg("%s", log);
  free(log);
  write_literal(path, "\xff\xfeg\0");
  rc = test_run(&log, 1, "%s convert --task_name=tsv --tsv_skip_header=false --splits=train --data_dir=%s"
                " --vocab_file=%s --output_dir=%s", EST_BIN, dir, UNCASED, test_tmp_path("out"));
  assert_int_equal(rc, 1);
  if (!strstr(log, "train.tsv:1: the file is UTF-16LE")) fail_msg("%s", log);
  free(log);
}

/* A text 1000x longer than max_seq_length: truncated to it, as the reference does. */
static void test_text_far_longer_than_max_seq_length(void **s) {
  (void)s;
  const char *dir = test_tmp_path("long");
  assert_int_equal(est_mkdirs(dir), EST_OK);
  char path[1024], *log = NULL;
  snprintf(path, sizeof path, "%s/train.tsv", dir);
  static char text[120000];
  for (size_t i = 0; i + 6 < sizeof text; i += 6) memcpy(text + i, "hello ", 6);
  text[sizeof text - 7] = 0;
  FILE *f = fopen(path, "wb");
  fprintf(f, "%s\tpos\nshort\tneg\n", text);
  fclose(f);
  char out[900];
  snprintf(out, sizeof out, "%s/out", dir);
  int rc = test_run(&log, 1, "%s convert --task_name=tsv --tsv_skip_header=false --splits=train --data_dir=%s"
                    " --vocab_file=%s --max_seq_length=16 --output_dir=%s", EST_BIN, dir, UNCASED, out);
  if (rc != 0) fail_msg("exit %d:\n%s", rc, log);
  free(log);
  snprintf(path, sizeof path, "%s/train.tf_record", out);
  est_tfrecord_reader *r;
  assert_int_equal(est_tfrecord_reader_open(&r, path, EST_COMPRESSION_NONE), EST_OK);
  const uint8_t *rec;
  size_t n;
  assert_int_equal(est_tfrecord_reader_next(r, &rec, &n), EST_OK);
  est_example ex;
  est_example_init(&ex);
  assert_int_equal(est_example_parse(&ex, rec, n), EST_OK);
  const est_feature *ids = est_example_find(&ex, "input_ids");
  assert_non_null(ids);
  assert_int_equal(ids->count, 16);
  assert_int_equal(ids->int64s[0], 101);  /* [CLS] */
  assert_int_equal(ids->int64s[15], 102); /* [SEP]: no padding, the text fills it */
  for (int i = 1; i < 15; i++) assert_int_equal(ids->int64s[i], 7592); /* hello */
  est_example_clear(&ex);
  est_tfrecord_reader_close(r);
}

/* ---- vocab ---------------------------------------------------------------------------- */

static void test_vocab_million_entries(void **s) {
  (void)s;
  const char *path = test_tmp_path("big_vocab.txt");
  FILE *f = fopen(path, "wb");
  fputs("[PAD]\n[UNK]\n[CLS]\n[SEP]\n", f);
  for (int i = 4; i < 1000000; i++) fprintf(f, "w%d\n", i);
  fclose(f);
  est_vocab *v;
  assert_int_equal(est_vocab_load(&v, path), EST_OK);
  assert_int_equal(est_vocab_size(v), 1000000);
  assert_int_equal(est_vocab_find(v, "w999999", 7), 999999);
  assert_string_equal(est_vocab_token(v, 500000), "w500000");
  est_tokenizer *tok;
  assert_int_equal(est_tokenizer_create(&tok, v, true), EST_OK);
  const int32_t *ids;
  size_t n;
  assert_int_equal(est_tokenizer_encode(tok, "w4 w999999 zz", 13, &ids, &n), EST_OK);
  assert_int_equal(n, 3);
  assert_int_equal(ids[0], 4);
  assert_int_equal(ids[1], 999999);
  assert_int_equal(ids[2], 1);
  est_tokenizer_free(tok);
  est_vocab_free(v);
}

static void test_vocab_encodings(void **s) {
  (void)s;
  est_vocab *v;
  const char *u16 = test_tmp_path("vocab16.txt");
  write_literal(u16, "\xff\xfe[\0P\0A\0D\0]\0\n\0");
  expect_error(est_vocab_load(&v, u16), "vocab16.txt:1: the vocab is UTF-16LE", NULL);
  const char *latin1 = test_tmp_path("vocab1.txt");
  write_literal(latin1, "[PAD]\ncaf\xe9\n");
  expect_error(est_vocab_load(&v, latin1), "vocab1.txt:2: invalid UTF-8", NULL);
  /* fuzz_vocab's find: a NUL inside a token (tests/fuzz/seeds/fuzz_vocab/nul_in_token). */
  const char *nul = test_tmp_path("vocab0.txt");
  write_literal(nul, "[PAD]\n[unused1]\n[\0\0x]\n");
  expect_error(est_vocab_load(&v, nul), "vocab0.txt:3: NUL byte at byte 2", NULL);
}

/* create_pretraining_data's document reader: a UTF-16 corpus is named as such, a Latin-1
 * one fails at its line and byte, and NUL bytes are dropped as the script's _clean_text
 * drops them (the records equal those of the text without them). */
static void test_pretraining_corpus_encodings(void **s) {
  (void)s;
  const char *cmd = "%s create_pretraining_data --input_file=%s --output_file=%s --vocab_file=" UNCASED
                    " --max_seq_length=16 --max_predictions_per_seq=3 --dupe_factor=2 --random_seed=3";
  char *log = NULL;
  const char *u16 = test_tmp_path("corpus16.txt");
  write_literal(u16, "\xff\xfeh\0i\0.\0\n\0");
  assert_int_equal(test_run(&log, 1, cmd, EST_BIN, u16, test_tmp_path("c16.tfrecord")), 1);
  if (!strstr(log, "corpus16.txt:1: the file is UTF-16LE (it starts with a byte-order mark)")) fail_msg("%s", log);
  free(log);
  assert_false(est_file_exists(test_tmp_path("c16.tfrecord")));
  const char *latin1 = test_tmp_path("corpus1.txt");
  write_literal(latin1, "the man went.\nto the caf\xe9 store.\n");
  assert_int_equal(test_run(&log, 1, cmd, EST_BIN, latin1, test_tmp_path("c1.tfrecord")), 1);
  if (!strstr(log, "corpus1.txt:2: invalid UTF-8 at byte 10 of the line")) fail_msg("%s", log);
  free(log);
  const char *plain = test_tmp_path("corpus.txt"), *nul = test_tmp_path("corpus0.txt");
  write_literal(plain, "the man went to the store.\nhe bought milk.\n\nthe dog ran.\nit was fast.\n");
  write_literal(nul, "the man went to the st\0ore.\nhe bought\0 milk.\n\n\0the dog ran.\nit was fast.\n");
  free(test_run_ok(cmd, EST_BIN, plain, test_tmp_path("plain.tfrecord")));
  free(test_run_ok(cmd, EST_BIN, nul, test_tmp_path("nul.tfrecord")));
  size_t na = 0, nb = 0;
  char *a = test_read_file(test_tmp_path("plain.tfrecord"), &na), *b = test_read_file(test_tmp_path("nul.tfrecord"), &nb);
  assert_true(na > 0);
  assert_int_equal(na, nb);
  assert_memory_equal(a, b, na);
  free(a), free(b);
}

/* ---- TFRecord streaming ---------------------------------------------------------------- */

static long max_rss_kb(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

/* Child mode (`test_odd_inputs --stream PATH COUNT`): a fresh process, so its peak RSS is
 * the reader's alone, reads every record and prints the peak after 10 records and at the end. */
static int stream_child(const char *path, int want) {
  est_tfrecord_reader *r;
  if (est_tfrecord_reader_open(&r, path, EST_COMPRESSION_NONE) != EST_OK) return 1;
  const uint8_t *data;
  size_t n;
  long after_10 = 0;
  int count = 0;
  est_status st;
  while ((st = est_tfrecord_reader_next(r, &data, &n)) == EST_OK) {
    if (data[0] != (uint8_t)count) return 1;
    if (++count == 10) after_10 = max_rss_kb();
  }
  est_tfrecord_reader_close(r);
  if (st != EST_ERR_OUT_OF_RANGE || count != want) return 1;
  printf("%ld %ld\n", after_10, max_rss_kb());
  return 0;
}

static char g_self[4096];

/* 300 MB of 1 MiB records, read by a fresh process: its peak RSS grows by a few MiB at most
 * from the 10th record to the 300th (the reader keeps one record and its window). */
static void test_tfrecord_300mb_constant_memory(void **s) {
  (void)s;
  enum { RECORD = 1 << 20, COUNT = 300 };
  const char *path = test_tmp_path("big.tf_record");
  uint8_t *rec = calloc(RECORD, 1);
  for (size_t i = 0; i < RECORD; i += 4096) rec[i] = (uint8_t)i;
  est_tfrecord_writer *w;
  assert_int_equal(est_tfrecord_writer_open(&w, path, EST_COMPRESSION_NONE), EST_OK);
  for (int i = 0; i < COUNT; i++) {
    rec[0] = (uint8_t)i;
    assert_int_equal(est_tfrecord_writer_write(w, rec, RECORD), EST_OK);
  }
  assert_int_equal(est_tfrecord_writer_close(w), EST_OK);
  free(rec);
  char *out = NULL;
  if (test_run(&out, 0, "'%s' --stream '%s' %d", g_self, path, COUNT) != 0) fail_msg("the reader failed: %s", out);
  long after_10, at_end;
  if (sscanf(out, "%ld %ld", &after_10, &at_end) != 2) fail_msg("reader said: %s", out);
  free(out);
  print_message("300 MB TFRecord: reader's peak RSS %ld KiB after 10 records, %ld KiB after all %d\n", after_10,
                at_end, COUNT);
  if (after_10 < RECORD / 1024) fail_msg("peak RSS %ld KiB is below one record: not measured", after_10);
  if (at_end - after_10 > 16 * 1024) fail_msg("RSS grew by %ld KiB while streaming", at_end - after_10);
}

/* ---- output_dir ------------------------------------------------------------------------- */

static void test_output_dir_not_writable(void **s) {
  (void)s;
  char *log = NULL;
  const char *file = test_tmp_path("a_file");
  write_literal(file, "x");
  const char *cmd = "%s convert --task_name=cola --data_dir=" EST_TEST_DATA "/glue_mini/CoLA --vocab_file=" UNCASED
                    " --output_dir=%s";
  assert_int_equal(test_run(&log, 1, cmd, EST_BIN, file), 1);
  if (!strstr(log, "a_file exists and is not a directory")) fail_msg("%s", log);
  free(log);
  char under[1024];
  snprintf(under, sizeof under, "%s/sub", file);
  assert_int_equal(test_run(&log, 1, cmd, EST_BIN, under), 1);
  if (!strstr(log, "cannot create directory") || !strstr(log, "a_file/sub")) fail_msg("%s", log);
  free(log);
  /* /proc/self exists as a directory but takes no new files, even from root. */
  assert_int_equal(test_run(&log, 1, cmd, EST_BIN, "/proc/self"), 1);
  if (!strstr(log, "/proc/self/train.tf_record")) fail_msg("%s", log);
  free(log);
  assert_int_equal(test_run(&log, 1,
                            "%s run_classifier --task_name=cola --do_train --data_dir=" EST_TEST_DATA
                            "/glue_mini/CoLA --vocab_file=" UNCASED " --bert_config_file=" EST_TEST_DATA
                            "/run_classifier/bert_config_h32.json --max_seq_length=16 --output_dir=%s",
                            EST_BIN, file),
                   2); /* a usage error: run_classifier checks output_dir before any work */
  if (!strstr(log, "output_dir") || !strstr(log, "a_file")) fail_msg("%s", log);
  free(log);
}

int main(int argc, char **argv) {
  if (argc == 4 && !strcmp(argv[1], "--stream")) return stream_child(argv[2], atoi(argv[3]));
  ssize_t n = readlink("/proc/self/exe", g_self, sizeof g_self - 1);
  if (n <= 0) return 1;
  g_self[n] = 0;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tsv_100mb_line),
      cmocka_unit_test(test_tsv_nul_crlf_encodings),
      cmocka_unit_test(test_convert_names_file_and_line),
      cmocka_unit_test(test_text_far_longer_than_max_seq_length),
      cmocka_unit_test(test_vocab_million_entries),
      cmocka_unit_test(test_vocab_encodings),
      cmocka_unit_test(test_pretraining_corpus_encodings),
      cmocka_unit_test(test_tfrecord_300mb_constant_memory),
      cmocka_unit_test(test_output_dir_not_writable),
  };
  return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
