/* est_dataset_interleave, run_pretraining's training file order: the (file, record) order
 * of every case in tests/data/interleave_order.txt, written by the Python model
 * tests/reference/interleave_order.py (itself checked against TF's interleave); the first
 * case is also spelled out by hand below. Resuming from the state after every batch gives
 * the rest of the stream exactly (the interleave position: file stream, shuffle buffer of
 * files and every open slot); GZIP files read the same. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "est/dataset.h"
#include "est/example.h"
#include "est/tfrecord.h"
#include "test_util.h"

enum { MAX_FILES = 8, MAX_TAKE = 128 };

/* File f holds records with id = 100 * f + r. */
static void write_file(const char *path, int f, int n, est_compression c) {
  est_tfrecord_writer *w;
  assert_int_equal(est_tfrecord_writer_open(&w, path, c), EST_OK);
  for (int r = 0; r < n; r++) {
    est_example ex;
    est_example_init(&ex);
    int64_t id = 100 * f + r;
    assert_int_equal(est_example_set_int64(&ex, "id", &id, 1), EST_OK);
    uint8_t *buf;
    size_t size;
    assert_int_equal(est_example_serialize(&ex, &buf, &size), EST_OK);
    assert_int_equal(est_tfrecord_writer_write(w, buf, size), EST_OK);
    free(buf);
    est_example_clear(&ex);
  }
  assert_int_equal(est_tfrecord_writer_close(w), EST_OK);
}

static const est_feature_spec spec = {.key = "id", .dtype = EST_DT_INT64, .rank = 0};

typedef struct icase {
  char name[40];
  int lengths[MAX_FILES], nfiles;
  int cycle, shuffle_files, repeat, buffer;
  uint64_t file_seed, record_seed;
  int64_t want[MAX_TAKE]; /* 100 * file + record */
  int take;
} icase;

static int parse_case(const char *line, icase *c) {
  memset(c, 0, sizeof *c);
  char lengths[64];
  unsigned long long fs, rs;
  int used;
  if (sscanf(line, "%39s %63s %d %d %llu %d %d %llu:%n", c->name, lengths, &c->cycle, &c->shuffle_files, &fs, &c->repeat,
             &c->buffer, &rs, &used) != 8)
    return 0;
  c->file_seed = fs;
  c->record_seed = rs;
  char *save = NULL;
  for (char *p = strtok_r(lengths, ",", &save); p; p = strtok_r(NULL, ",", &save)) c->lengths[c->nfiles++] = atoi(p);
  int f, r, n;
  for (const char *p = line + used; sscanf(p, " %d.%d%n", &f, &r, &n) == 2; p += n) c->want[c->take++] = 100 * f + r;
  return 1;
}

static est_dataset *open_case(const icase *c, est_compression comp, int batch) {
  char names[MAX_FILES][128];
  const char *paths[MAX_FILES];
  for (int i = 0; i < c->nfiles; i++) {
    snprintf(names[i], sizeof names[i], "%.39s-%d%s.tfrecord", c->name, i, comp ? "-gz" : "");
    paths[i] = test_tmp_path(names[i]);
    if (!est_file_exists(paths[i])) write_file(paths[i], i, c->lengths[i], comp);
  }
  const char *kept[MAX_FILES];
  for (int i = 0; i < c->nfiles; i++) kept[i] = strdup(paths[i]);
  est_dataset *ds;
  assert_int_equal(est_dataset_from_tfrecords(&ds, kept, (size_t)c->nfiles, comp), EST_OK);
  for (int i = 0; i < c->nfiles; i++) free((void *)kept[i]);
  assert_int_equal(est_dataset_parse(ds, &spec, 1, EST_DATASET_CAST_NONE), EST_OK);
  assert_int_equal(est_dataset_interleave(ds, c->cycle, c->shuffle_files, c->file_seed), EST_OK);
  assert_int_equal(est_dataset_repeat(ds, c->repeat), EST_OK);
  if (c->buffer > 1) assert_int_equal(est_dataset_shuffle(ds, c->buffer, c->record_seed), EST_OK);
  assert_int_equal(est_dataset_batch(ds, batch, 0), EST_OK);
  return ds;
}

/* Reads up to `take` ids into out; returns how many (fewer only at the end). */
static int read_ids(est_dataset *ds, int64_t *out, int take) {
  int n = 0;
  while (n < take) {
    const est_batch *b;
    est_status st = est_dataset_next(ds, &b);
    if (st == EST_ERR_OUT_OF_RANGE) break;
    assert_int_equal(st, EST_OK);
    const int64_t *ids = est_batch_feature(b, "id")->data;
    for (int r = 0; r < b->size && n < take; r++) out[n++] = ids[r];
  }
  return n;
}

static int load_cases(icase *cases, int cap) {
  char *text = test_read_file(EST_TEST_DATA "/interleave_order.txt", NULL);
  int n = 0;
  char *save = NULL;
  for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    if (line[0] == '#') continue;
    char copy[4096];
    snprintf(copy, sizeof copy, "%s", line);
    assert_true(n < cap);
    if (!parse_case(copy, &cases[n])) fail_msg("tests/data/interleave_order.txt: bad line %s", line);
    n++;
  }
  free(text);
  return n;
}

static void test_first_case_by_hand(void **state) {
  (void)state;
  icase cases[8];
  assert_int_equal(load_cases(cases, 8), 4);
  /* 3, 1 and 2 records, 2 slots, no file shuffle, one pass: slot 0 opens file 0 (0.0),
   * slot 1 file 1 (1.0); 0.1; file 1 ends (no output); 0.2; slot 1 opens file 2 (2.0);
   * file 0 ends; 2.1; the stream has ended and slot 1 empties. */
  const int64_t want[] = {0, 100, 1, 2, 200, 201};
  assert_string_equal(cases[0].name, "in_order_cycle2");
  assert_int_equal(cases[0].take, 6);
  assert_memory_equal(cases[0].want, want, sizeof want);
}

static void test_order_matches_the_reference(void **state) {
  (void)state;
  icase cases[8];
  int n = load_cases(cases, 8);
  for (int i = 0; i < n; i++)
    for (int comp = 0; comp < 2; comp++) {
      const est_compression c = comp ? EST_COMPRESSION_GZIP : EST_COMPRESSION_NONE;
      est_dataset *ds = open_case(&cases[i], c, 3);
      int64_t got[MAX_TAKE + 3];
      int m = read_ids(ds, got, cases[i].take);
      /* the finite case ends where the reference does */
      if (cases[i].repeat >= 0) {
        int64_t more;
        assert_int_equal(read_ids(ds, &more, 1), 0);
      }
      if (m != cases[i].take || memcmp(got, cases[i].want, sizeof(int64_t) * (size_t)m))
        fail_msg("case %s (%s): the order differs from tests/data/interleave_order.txt", cases[i].name,
                 comp ? "GZIP" : "plain");
      est_dataset_free(ds);
    }
}

/* The state after batch k, set on a fresh dataset, continues with batch k + 1. */
static void test_resume_after_every_batch(void **state) {
  (void)state;
  icase cases[8];
  int n = load_cases(cases, 8);
  for (int i = 0; i < n; i++) {
    const int batch = 2, nb = cases[i].take / batch;
    est_dataset *ds = open_case(&cases[i], EST_COMPRESSION_NONE, batch);
    size_t len = est_dataset_state_size(ds);
    int64_t *states = calloc((size_t)nb * len, sizeof *states);
    for (int k = 0; k < nb; k++) {
      const est_batch *b;
      assert_int_equal(est_dataset_next(ds, &b), EST_OK);
      size_t got;
      assert_int_equal(est_dataset_get_state(ds, states + (size_t)k * len, len, &got), EST_OK);
      assert_int_equal(got, len);
    }
    est_dataset_free(ds);
    for (int k = 0; k + 1 < nb; k++) {
      est_dataset *r = open_case(&cases[i], EST_COMPRESSION_NONE, batch);
      assert_int_equal(est_dataset_set_state(r, states + (size_t)k * len, len), EST_OK);
      int64_t rest[MAX_TAKE];
      int want_n = (nb - k - 1) * batch;
      assert_int_equal(read_ids(r, rest, want_n), want_n);
      if (memcmp(rest, cases[i].want + (k + 1) * batch, sizeof(int64_t) * (size_t)want_n))
        fail_msg("case %s: resumed after batch %d, the rest differs", cases[i].name, k + 1);
      est_dataset_free(r);
    }
    /* a state from another file seed is refused, naming it */
    icase other = cases[i];
    other.file_seed = cases[i].file_seed + 1;
    est_dataset *r = open_case(&other, EST_COMPRESSION_NONE, batch);
    assert_int_equal(est_dataset_set_state(r, states, len), EST_ERR_FAILED_PRECONDITION);
    assert_non_null(strstr(est_error_message(), "interleave seed"));
    est_dataset_free(r);
    free(states);
  }
}

/* Every file empty with repeat forever: the stream ends instead of spinning. Memory
 * records cannot be interleaved. */
static void test_edges(void **state) {
  (void)state;
  const char *paths[2] = {test_tmp_path("e0.tfrecord"), test_tmp_path("e1.tfrecord")};
  write_file(paths[0], 0, 0, EST_COMPRESSION_NONE);
  write_file(paths[1], 1, 0, EST_COMPRESSION_NONE);
  est_dataset *ds;
  assert_int_equal(est_dataset_from_tfrecords(&ds, paths, 2, EST_COMPRESSION_NONE), EST_OK);
  assert_int_equal(est_dataset_parse(ds, &spec, 1, EST_DATASET_CAST_NONE), EST_OK);
  assert_int_equal(est_dataset_interleave(ds, 2, 1, 5), EST_OK);
  assert_int_equal(est_dataset_repeat(ds, -1), EST_OK);
  const est_batch *b;
  assert_int_equal(est_dataset_next(ds, &b), EST_ERR_OUT_OF_RANGE);
  est_dataset_free(ds);
  est_bytes rec = {0};
  assert_int_equal(est_dataset_from_memory(&ds, &rec, 1), EST_OK);
  assert_int_equal(est_dataset_interleave(ds, 2, 0, 0), EST_ERR_FAILED_PRECONDITION);
  est_dataset_free(ds);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_first_case_by_hand),
    cmocka_unit_test(test_order_matches_the_reference),
    cmocka_unit_test(test_resume_after_every_batch),
    cmocka_unit_test(test_edges),
  };
  return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
