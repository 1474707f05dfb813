/* TensorBoard event files: the Event bytes, the file name, the file_version record, and
 * that records are readable while the writer is still open. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "est/est.h"
#include "test_util.h"

/* Hand-assembled from event.proto / summary.proto: wall_time=1.5 (field 1, fixed64),
 * step=7 (field 2, varint), summary (field 5) { value (1) { tag (1) "loss", simple_value
 * (2, fixed32) 0.5 } }. */
static void test_event_bytes(void **state) {
  (void)state;
  const char *tag = "loss";
  float v = 0.5f;
  uint8_t *got, want[64];
  size_t n, wn = test_unhex("09000000000000f83f" "1007" "2a0d" "0a0b" "0a046c6f7373" "150000003f", want);
  assert_int_equal(est_event_serialize_scalars(1.5, 7, NULL, 1, &tag, &v, &got, &n), EST_OK);
  assert_int_equal(n, wn);
  assert_memory_equal(got, want, n);
  free(got);
  /* file_version event; step 0 is omitted (proto3), a zero scalar is not (oneof) */
  wn = test_unhex("09000000000000f03f" "1a0d627261696e2e4576656e743a32", want);
  assert_int_equal(est_event_serialize_scalars(1.0, 0, "brain.Event:2", 0, NULL, NULL, &got, &n), EST_OK);
  assert_int_equal(n, wn);
  assert_memory_equal(got, want, n);
  free(got);
  v = 0.0f;
  wn = test_unhex("2a0a" "0a08" "0a01" "78" "1500000000", want);
  tag = "x";
  assert_int_equal(est_event_serialize_scalars(0, 0, NULL, 1, &tag, &v, &got, &n), EST_OK);
  assert_int_equal(n, wn);
  assert_memory_equal(got, want, n);
  free(got);
  /* malformed input is an error, not a crash */
  est_event ev;
  assert_int_equal(est_event_parse(&ev, (const uint8_t *)"\x2a\x05\x0a", 3), EST_ERR_INVALID_ARGUMENT);
  assert_int_equal(est_event_parse(&ev, (const uint8_t *)"\x09\x00", 2), EST_ERR_INVALID_ARGUMENT);
}

static void read_event(est_tfrecord_reader *r, est_event *ev) {
  const uint8_t *d;
  size_t n;
  assert_int_equal(est_tfrecord_reader_next(r, &d, &n), EST_OK);
  assert_int_equal(est_event_parse(ev, d, n), EST_OK);
}

static void test_writer(void **state) {
  (void)state;
  char dir[4096], sub[4200];
  test_make_tmpdir(dir, sizeof dir);
  snprintf(sub, sizeof sub, "%s/model/eval", dir);
  est_events_writer *w;
  assert_int_equal(est_events_writer_open(&w, sub), EST_OK);
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  const char *path = est_events_writer_path(w);
  const char *base = strrchr(path, '/') + 1;
  assert_true(strncmp(base, "events.out.tfevents.", 20) == 0);
  assert_true(strlen(base) >= 20 + 10 + 1 + strlen(host));
  assert_int_equal(base[30], '.');
  assert_string_equal(base + 31, host);

  assert_int_equal(est_events_writer_add_scalar(w, 100, "loss", 0.693f), EST_OK);
  const char *tags[2] = {"eval_accuracy", "eval_loss"};
  float vals[2] = {0.8f, 0.41f};
  assert_int_equal(est_events_writer_add_scalars(w, 343, 2, tags, vals), EST_OK);
  assert_int_equal(est_events_writer_flush(w), EST_OK);

  /* Readable while the writer is open (TensorBoard reads during training). */
  est_tfrecord_reader *r;
  est_event ev;
  assert_int_equal(est_tfrecord_reader_open(&r, path, EST_COMPRESSION_NONE), EST_OK);
  read_event(r, &ev);
  assert_string_equal(ev.file_version, "brain.Event:2");
  assert_int_equal(ev.count, 0);
  assert_true(ev.wall_time > 1.7e9);
  est_event_clear(&ev);
  read_event(r, &ev);
  assert_int_equal(ev.step, 100);
  assert_int_equal(ev.count, 1);
  assert_string_equal(ev.tags[0], "loss");
  assert_true(ev.values[0] == 0.693f);
  est_event_clear(&ev);
  read_event(r, &ev);
  assert_int_equal(ev.step, 343);
  assert_int_equal(ev.count, 2);
  assert_string_equal(ev.tags[1], "eval_loss");
  assert_true(ev.values[1] == 0.41f);
  est_event_clear(&ev);
  const uint8_t *d;
  size_t n;
  assert_int_equal(est_tfrecord_reader_next(r, &d, &n), EST_ERR_OUT_OF_RANGE);
  /* appended later: the same reader picks it up after having seen EOF */
  assert_int_equal(est_events_writer_add_scalar(w, 200, "loss", 0.5f), EST_OK);
  read_event(r, &ev);
  assert_int_equal(ev.step, 200);
  est_event_clear(&ev);
  est_tfrecord_reader_close(r);

  /* A second writer in the same directory and second gets its own file. */
  est_events_writer *w2;
  assert_int_equal(est_events_writer_open(&w2, sub), EST_OK);
  assert_string_not_equal(est_events_writer_path(w2), path);
  assert_int_equal(est_events_writer_close(w2), EST_OK);
  assert_int_equal(est_events_writer_close(w), EST_OK);
  test_remove_tree(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_event_bytes),
      cmocka_unit_test(test_writer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
