/* `est create_pretraining_data` end to end through the built binary (EST_BIN), with the
 * script's own flag spellings. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "est/tfrecord.h"
#include "test_util.h"

#define PT EST_TEST_DATA "/pretraining"
#define VOCAB EST_TEST_DATA "/vocab_uncased.txt"

/* The flags of cola_seed12345.tfrecord, as the script was run (tests/data/README.md). */
#define COLA_FLAGS                                                                                      \
  "--input_file=" PT "/cola_docs.txt --vocab_file=" VOCAB " --do_lower_case=True --max_seq_length=128 " \
  "--max_predictions_per_seq=20 --masked_lm_prob=0.15 --random_seed=12345 --dupe_factor=2"

static void test_cli_reproduces_the_script_byte_for_byte(void **state) {
  (void)state;
  char *out;
  const char *o = test_tmp_path("cola.tfrecord");
  assert_int_equal(test_run(&out, 1, "%s create_pretraining_data " COLA_FLAGS " --output_file=%s", EST_BIN, o), 0);
  assert_non_null(strstr(out, "Wrote 865 total instances"));
  free(out);
  size_t ng, nw;
  char *g = test_read_file(o, &ng), *w = test_read_file(PT "/cola_seed12345.tfrecord", &nw);
  assert_int_equal(ng, nw);
  assert_memory_equal(g, w, nw);
  free(g);
  free(w);
}

/* Two outputs: record k goes to file k % 2, so file j holds records j, j + 2, ... */
static void test_cli_round_robin(void **state) {
  (void)state;
  char *out;
  const char *o0 = test_tmp_path("a.tfrecord"), *o1 = test_tmp_path("b.tfrecord");
  assert_int_equal(test_run(&out, 1, "%s create_pretraining_data " COLA_FLAGS " --output_file=%s,%s", EST_BIN, o0, o1),
                   0);
  free(out);
  est_tfrecord_reader *ref, *part[2];
  assert_int_equal(est_tfrecord_reader_open(&ref, PT "/cola_seed12345.tfrecord", EST_COMPRESSION_NONE), EST_OK);
  assert_int_equal(est_tfrecord_reader_open(&part[0], o0, EST_COMPRESSION_NONE), EST_OK);
  assert_int_equal(est_tfrecord_reader_open(&part[1], o1, EST_COMPRESSION_NONE), EST_OK);
  const uint8_t *a, *b;
  size_t na, nb;
  int k = 0;
  while (est_tfrecord_reader_next(ref, &a, &na) == EST_OK) {
    assert_int_equal(est_tfrecord_reader_next(part[k % 2], &b, &nb), EST_OK);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, na);
    k++;
  }
  assert_int_equal(k, 865);
  assert_int_equal(est_tfrecord_reader_next(part[0], &b, &nb), EST_ERR_OUT_OF_RANGE);
  assert_int_equal(est_tfrecord_reader_next(part[1], &b, &nb), EST_ERR_OUT_OF_RANGE);
  for (int i = 0; i < 2; i++) est_tfrecord_reader_close(part[i]);
  est_tfrecord_reader_close(ref);
}

static void test_cli_messages(void **state) {
  (void)state;
  char *out;
  /* --help lists the script's flags with their defaults. */
  assert_int_equal(test_run(&out, 0, "%s create_pretraining_data --help", EST_BIN), 0);
  const char *names[] = {"--input_file", "--output_file", "--vocab_file", "--do_lower_case", "--do_whole_word_mask",
                         "--max_seq_length", "--max_predictions_per_seq", "--random_seed", "--dupe_factor",
                         "--masked_lm_prob", "--short_seq_prob"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) assert_non_null(strstr(out, names[i]));
  free(out);
  /* A required flag missing: usage error. */
  assert_int_equal(test_run(&out, 1, "%s create_pretraining_data --input_file=x --vocab_file=%s", EST_BIN, VOCAB), 2);
  assert_non_null(strstr(out, "output_file"));
  free(out);
  /* A pattern that matches nothing is named. */
  assert_int_equal(test_run(&out, 1, "%s create_pretraining_data --input_file='%s/none-*.txt' --vocab_file=%s "
                                     "--output_file=%s", EST_BIN, test_tmpdir, VOCAB, test_tmp_path("o")), 2);
  assert_non_null(strstr(out, "none-*.txt"));
  free(out);
  /* A line with no tokens: the script skips it silently; est skips it too and says where. */
  const char *in = test_tmp_path("in.txt");
  const char text[] = "one two.\n\xE2\x80\x8B\nthree four.\n\nfive.\n";
  test_write_bytes(in, text, sizeof text - 1);
  assert_int_equal(test_run(&out, 1, "%s create_pretraining_data --input_file=%s --vocab_file=%s --output_file=%s",
                            EST_BIN, in, VOCAB, test_tmp_path("o.tfrecord")), 0);
  char where[1100];
  snprintf(where, sizeof where, "%s:2: the line has no tokens", in);
  assert_non_null(strstr(out, where));
  free(out);
  /* A vocab without [MASK]: the vocab file is named, and nothing is written. */
  const char *vocab = test_tmp_path("v.txt");
  const char v[] = "[PAD]\n[UNK]\n[CLS]\n[SEP]\none\n";
  test_write_bytes(vocab, v, sizeof v - 1);
  assert_int_equal(test_run(&out, 1, "%s create_pretraining_data --input_file=%s --vocab_file=%s --output_file=%s",
                            EST_BIN, in, vocab, test_tmp_path("p.tfrecord")), 1);
  assert_non_null(strstr(out, vocab));
  assert_non_null(strstr(out, "[MASK]"));
  assert_false(est_file_exists(test_tmp_path("p.tfrecord")));
  free(out);
}

/* The bad inputs through the command: an empty corpus fails naming the file and
 * writes nothing; one-sentence documents and lines without tokens are legal for the script
 * (records still written, exit 0) and est warns naming file and line: the first five of each
 * kind, then one count line. */
static void test_cli_bad_input(void **state) {
  (void)state;
  char *out, where[1100];
  const char *in = test_tmp_path("in.txt"), *o = test_tmp_path("o.tfrecord");
#define RUN_CPD(expect)                                                                                            \
  assert_int_equal(test_run(&out, 1, "%s create_pretraining_data --input_file=%s --vocab_file=%s --output_file=%s", \
                            EST_BIN, in, VOCAB, o),                                                                 \
                   expect)
  /* Empty: blank lines and a zero-width space only. */
  const char empty[] = "\n \n\xE2\x80\x8B\n\n";
  test_write_bytes(in, empty, sizeof empty - 1);
  RUN_CPD(1);
  snprintf(where, sizeof where, "--input_file %s: no document", in);
  assert_non_null(strstr(out, where));
  assert_false(est_file_exists(o));
  free(out);
  /* Two one-sentence documents (lines 1 and 6) around one of two sentences (lines 3-4). */
  const char docs[] = "one two.\n\nthree four.\nfive six.\n\nseven.\n";
  test_write_bytes(in, docs, sizeof docs - 1);
  RUN_CPD(0);
  assert_int_equal(test_count_lines_with(out, "a document of one sentence", NULL), 2);
  snprintf(where, sizeof where, "%s:1: a document of one sentence", in);
  assert_non_null(strstr(out, where));
  snprintf(where, sizeof where, "%s:6: a document of one sentence", in);
  assert_non_null(strstr(out, where));
  assert_null(strstr(out, "documents in all have one sentence"));
  assert_true(est_file_exists(o));
  free(out);
  /* Many of both: seven one-sentence documents, each after a line without tokens. */
  char many[512] = "";
  for (int i = 0; i < 7; i++) strcat(many, "\xE2\x80\x8B\nword.\n\n");
  test_write_bytes(in, many, strlen(many));
  RUN_CPD(0);
  assert_int_equal(test_count_lines_with(out, "a document of one sentence", NULL), 5);
  assert_int_equal(test_count_lines_with(out, "the line has no tokens", NULL), 5);
  snprintf(where, sizeof where, "%s:2: a document of one sentence", in);
  assert_non_null(strstr(out, where));
  snprintf(where, sizeof where, "%s:1: the line has no tokens", in);
  assert_non_null(strstr(out, where));
  assert_non_null(strstr(out, "7 documents in all have one sentence"));
  assert_non_null(strstr(out, "7 lines in all had no tokens"));
  free(out);
#undef RUN_CPD
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(test_cli_reproduces_the_script_byte_for_byte, test_tmpdir_setup,
                                    test_tmpdir_teardown),
    cmocka_unit_test_setup_teardown(test_cli_round_robin, test_tmpdir_setup, test_tmpdir_teardown),
    cmocka_unit_test_setup_teardown(test_cli_messages, test_tmpdir_setup, test_tmpdir_teardown),
    cmocka_unit_test_setup_teardown(test_cli_bad_input, test_tmpdir_setup, test_tmpdir_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
