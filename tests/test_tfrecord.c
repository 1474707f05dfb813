/* TFRecord: the byte vectors of docs/tfrecord.md §4, the upstream edge cases of §5 (1-26),
 * GZIP/ZLIB, every single-byte corruption and every truncation of a small file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "est/est.h"
#include "test_util.h"

static const char *THREE_HEX =
    "000000000000000029039807d8ea82a201000000000000000175de4161786ee4280500000000000000eab2043e68656c6c6fbb1f1c19";
static const char *THREE_GZIP_HEX =
    "1f8b0800000000000003636080004de619ec375e352d6284f2194bef392656e43dd160850abcdac46297919a9393bf5b5e46120027e60f3436000000";
static const char *THREE_ZLIB_HEX =
    "789c636080004de619ec375e352d6284f2194bef392656e43dd160850abcdac46297919a9393bf5b5e46120027210ca1";

/* Reads every record; returns the final status; records concatenated into `all`. */
static est_status read_all(const char *path, est_compression c, size_t *count, uint8_t *all, size_t *all_size) {
  est_tfrecord_reader *r;
  est_status st = est_tfrecord_reader_open(&r, path, c);
  if (st != EST_OK) return st;
  const uint8_t *d;
  size_t n;
  *count = 0;
  if (all_size) *all_size = 0;
  while ((st = est_tfrecord_reader_next(r, &d, &n)) == EST_OK) {
    (*count)++;
    if (all) {
      memcpy(all + *all_size, d, n);
      *all_size += n;
    }
  }
  est_tfrecord_reader_close(r);
  return st;
}

static void expect_three(const char *path, est_compression c) {
  est_tfrecord_reader *r;
  assert_int_equal(est_tfrecord_reader_open(&r, path, c), EST_OK);
  const uint8_t *d;
  size_t n;
  const char *want[3] = {"", "a", "hello"};
  uint64_t offs[4] = {0, 16, 33, 54};
  for (int i = 0; i < 3; i++) {
    assert_int_equal(est_tfrecord_reader_offset(r), offs[i]);
    assert_int_equal(est_tfrecord_reader_next(r, &d, &n), EST_OK);
    assert_int_equal(n, strlen(want[i]));
    assert_memory_equal(d, want[i], n);
  }
  assert_int_equal(est_tfrecord_reader_offset(r), offs[3]);
  assert_int_equal(est_tfrecord_reader_next(r, &d, &n), EST_ERR_OUT_OF_RANGE);
  assert_int_equal(est_tfrecord_reader_next(r, &d, &n), EST_ERR_OUT_OF_RANGE);
  est_tfrecord_reader_close(r);
}

/* §4: framing of "", "a", "hello" and TF's "The Quick Brown Fox" file, byte for byte. */
static void test_frame_vectors(void **state) {
  (void)state;
  struct { const char *payload, *hex; } v[] = {
      {"", "000000000000000029039807d8ea82a2"},
      {"a", "01000000000000000175de4161786ee428"},
      {"hello", "0500000000000000eab2043e68656c6c6fbb1f1c19"},
      {"The Quick Brown Fox",
       "13000000000000000c91321b54686520517569636b2042726f776e20466f78180de83a"},
  };
  for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
    uint8_t want[64], got[64], h[12], f[4];
    size_t n = test_unhex(v[i].hex, want), len = strlen(v[i].payload);
    est_tfrecord_frame(h, f, v[i].payload, len);
    memcpy(got, h, 12);
    memcpy(got + 12, v[i].payload, len);
    memcpy(got + 12 + len, f, 4);
    assert_int_equal(n, 16 + len);
    assert_memory_equal(got, want, n);
  }
}

/* The writer produces the 54-byte three-record file exactly; it appears only on close. */
static void test_writer_exact_and_atomic(void **state) {
  (void)state;
  const char *p = test_tmp_path("three.tfrecord");
  est_tfrecord_writer *w;
  assert_int_equal(est_tfrecord_writer_open(&w, p, EST_COMPRESSION_NONE), EST_OK);
  assert_int_equal(est_tfrecord_writer_write(w, "", 0), EST_OK);
  assert_int_equal(est_tfrecord_writer_write(w, "a", 1), EST_OK);
  assert_int_equal(est_tfrecord_writer_write(w, "hello", 5), EST_OK);
  assert_false(est_file_exists(p));
  assert_int_equal(est_tfrecord_writer_close(w), EST_OK);
  uint8_t *data, want[64];
  size_t n, wn = test_unhex(THREE_HEX, want);
  assert_int_equal(est_read_file(p, &data, &n), EST_OK);
  assert_int_equal(n, 54);
  assert_memory_equal(data, want, wn);
  free(data);
  expect_three(p, EST_COMPRESSION_NONE);
  /* abort leaves no file behind */
  const char *q = test_tmp_path("aborted.tfrecord");
  assert_int_equal(est_tfrecord_writer_open(&w, q, EST_COMPRESSION_GZIP), EST_OK);
  assert_int_equal(est_tfrecord_writer_write(w, "x", 1), EST_OK);
  est_tfrecord_writer_abort(w);
  assert_false(est_file_exists(q));
}

/* The GZIP / ZLIB vectors of §4 decompress to the three records; our own compressed
 * output round-trips (byte equality of compressed bytes is not expected, §2). */
static void test_compressed_vectors_and_roundtrip(void **state) {
  (void)state;
  uint8_t buf[128];
  size_t n = test_unhex(THREE_GZIP_HEX, buf);
  test_write_bytes(test_tmp_path("v.gz"), buf, n);
  expect_three(test_tmp_path("v.gz"), EST_COMPRESSION_GZIP);
  n = test_unhex(THREE_ZLIB_HEX, buf);
  test_write_bytes(test_tmp_path("v.zlib"), buf, n);
  expect_three(test_tmp_path("v.zlib"), EST_COMPRESSION_ZLIB);
  /* Read as the wrong kind: a clean error, never garbage records. */
  size_t count;
  assert_int_equal(read_all(test_tmp_path("v.zlib"), EST_COMPRESSION_GZIP, &count, NULL, NULL),
                   EST_ERR_DATA_LOSS);
  assert_non_null(strstr(est_error_message(), "inflate() failed"));
  assert_int_equal(read_all(test_tmp_path("v.gz"), EST_COMPRESSION_NONE, &count, NULL, NULL),
                   EST_ERR_DATA_LOSS);

  est_compression cs[2] = {EST_COMPRESSION_GZIP, EST_COMPRESSION_ZLIB};
  for (int k = 0; k < 2; k++) {
    const char *p = test_tmp_path(k ? "rt.zlib" : "rt.gz");
    est_tfrecord_writer *w;
    assert_int_equal(est_tfrecord_writer_open(&w, p, cs[k]), EST_OK);
    assert_int_equal(est_tfrecord_writer_write(w, "", 0), EST_OK);
    assert_int_equal(est_tfrecord_writer_write(w, "a", 1), EST_OK);
    assert_int_equal(est_tfrecord_writer_write(w, "hello", 5), EST_OK);
    assert_int_equal(est_tfrecord_writer_close(w), EST_OK);
    uint8_t *data;
    assert_int_equal(est_read_file(p, &data, &n), EST_OK);
    if (k == 0) assert_memory_equal(data, "\x1f\x8b\x08\x00\x00\x00\x00\x00", 8); /* no name, mtime 0 */
    else assert_int_equal(data[0], 0x78);
    free(data);
    expect_three(p, cs[k]);
  }
}

/* §4 negative vectors: the status and TF's message with its offset. */
static void test_negative_vectors(void **state) {
  (void)state;
  struct { const char *hex; est_status st; const char *msg; } v[] = {
      {"", EST_ERR_OUT_OF_RANGE, NULL},
      {"0500000000", EST_ERR_DATA_LOSS, "truncated record at 0"},
      {"0500000000000000eab2043e", EST_ERR_DATA_LOSS, "truncated record at 0"},
      {"0500000000000000eab2043e68656c6c6fbb1f1c", EST_ERR_DATA_LOSS, "truncated record at 12"},
      {"0500000000000000eab2043e69656c6c6fbb1f1c19", EST_ERR_DATA_LOSS, "corrupted record at 12"},
      {"6162636465666768696a6b6c6d6e6f", EST_ERR_DATA_LOSS, "corrupted record at 0 (Is this even a TFRecord file?)"},
  };
  for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
    uint8_t buf[64];
    size_t n = test_unhex(v[i].hex, buf), count;
    const char *p = test_tmp_path("neg.tfrecord");
    test_write_bytes(p, buf, n);
    assert_int_equal(read_all(p, EST_COMPRESSION_NONE, &count, NULL, NULL), v[i].st);
    assert_int_equal(count, 0);
    if (v[i].msg) {
      char want[4400];
      snprintf(want, sizeof want, "%s: %s", p, v[i].msg);
      assert_string_equal(est_error_message(), want);
    }
  }
}

static void write_records(const char *path, est_compression c, size_t n, char (*recs)[64]) {
  est_tfrecord_writer *w;
  assert_int_equal(est_tfrecord_writer_open(&w, path, c), EST_OK);
  for (size_t i = 0; i < n; i++) assert_int_equal(est_tfrecord_writer_write(w, recs[i], strlen(recs[i])), EST_OK);
  assert_int_equal(est_tfrecord_writer_close(w), EST_OK);
}

/* §5 ReadWrite, Empty, ReadEnd, ReadPastEnd, TestSkipBasic/OutOfRange. */
static void test_read_write_empty_and_ends(void **state) {
  (void)state;
  char recs[4][64] = {"foo", "bar", "", "xxxx"};
  const char *p = test_tmp_path("rw.tfrecord");
  write_records(p, EST_COMPRESSION_NONE, 4, recs);
  est_tfrecord_reader *r;
  const uint8_t *d;
  size_t n;
  assert_int_equal(est_tfrecord_reader_open(&r, p, EST_COMPRESSION_NONE), EST_OK);
  for (int i = 0; i < 4; i++) {
    assert_int_equal(est_tfrecord_reader_next(r, &d, &n), EST_OK);
    assert_int_equal(n, strlen(recs[i]));
    assert_memory_equal(d, recs[i], n);
  }
  assert_int_equal(est_tfrecord_reader_next(r, &d, &n), EST_ERR_OUT_OF_RANGE);
  assert_int_equal(est_tfrecord_reader_next(r, &d, &n), EST_ERR_OUT_OF_RANGE);
  uint64_t size = est_tfrecord_reader_offset(r);
  assert_int_equal(size, 4 * 16 + 10);
  assert_int_equal(est_tfrecord_reader_records_read(r), 4);
  /* ReadEnd / ReadPastEnd */
  assert_int_equal(est_tfrecord_reader_seek(r, size), EST_OK);
  assert_int_equal(est_tfrecord_reader_next(r, &d, &n), EST_ERR_OUT_OF_RANGE);
  assert_int_equal(est_tfrecord_reader_seek(r, size + 5), EST_OK);
  assert_int_equal(est_tfrecord_reader_next(r, &d, &n), EST_ERR_OUT_OF_RANGE);
  /* Skip 2 then read the third (TestSkipBasic) */
  assert_int_equal(est_tfrecord_reader_seek(r, 0), EST_OK);
  for (int i = 0; i < 2; i++) assert_int_equal(est_tfrecord_reader_next(r, &d, &n), EST_OK);
  assert_int_equal(est_tfrecord_reader_next(r, &d, &n), EST_OK);
  assert_int_equal(n, 0);
  est_tfrecord_reader_close(r);

  /* Empty file: EOF at once; an empty writer gives an empty file. */
  write_records(test_tmp_path("empty.tfrecord"), EST_COMPRESSION_NONE, 0, NULL);
  struct stat sb;
  assert_int_equal(stat(test_tmp_path("empty.tfrecord"), &sb), 0);
  assert_int_equal(sb.st_size, 0);
  size_t count;
  assert_int_equal(read_all(test_tmp_path("empty.tfrecord"), EST_COMPRESSION_NONE, &count, NULL, NULL),
                   EST_ERR_OUT_OF_RANGE);
  assert_int_equal(count, 0);
  write_records(test_tmp_path("empty.gz"), EST_COMPRESSION_GZIP, 0, NULL);
  assert_int_equal(read_all(test_tmp_path("empty.gz"), EST_COMPRESSION_GZIP, &count, NULL, NULL),
                   EST_ERR_OUT_OF_RANGE);
  assert_int_equal(count, 0);
  /* A missing file is NOT_FOUND naming the path. */
  assert_int_equal(est_tfrecord_reader_open(&r, test_tmp_path("nope"), EST_COMPRESSION_NONE),
                   EST_ERR_NOT_FOUND);
  assert_non_null(strstr(est_error_message(), "nope"));
  uint64_t c64;
  assert_int_equal(est_tfrecord_count(p, EST_COMPRESSION_NONE, &c64), EST_OK);
  assert_int_equal(c64, 4);
}

/* ManyRecords (100,000 small records) in all three compressions. */
static void test_many_records(void **state) {
  (void)state;
  est_compression cs[3] = {EST_COMPRESSION_NONE, EST_COMPRESSION_ZLIB, EST_COMPRESSION_GZIP};
  for (int k = 0; k < 3; k++) {
    const char *p = test_tmp_path("many.tfrecord");
    est_tfrecord_writer *w;
    assert_int_equal(est_tfrecord_writer_open(&w, p, cs[k]), EST_OK);
    char buf[32];
    for (int i = 0; i < 100000; i++) {
      int len = snprintf(buf, sizeof buf, "%d", i);
      assert_int_equal(est_tfrecord_writer_write(w, buf, (size_t)len), EST_OK);
    }
    assert_int_equal(est_tfrecord_writer_close(w), EST_OK);
    est_tfrecord_reader *r;
    assert_int_equal(est_tfrecord_reader_open(&r, p, cs[k]), EST_OK);
    const uint8_t *d;
    size_t n;
    for (int i = 0; i < 100000; i++) {
      int len = snprintf(buf, sizeof buf, "%d", i);
      assert_int_equal(est_tfrecord_reader_next(r, &d, &n), EST_OK);
      assert_int_equal(n, (size_t)len);
      assert_memory_equal(d, buf, n);
    }
    assert_int_equal(est_tfrecord_reader_next(r, &d, &n), EST_ERR_OUT_OF_RANGE);
    est_tfrecord_reader_close(r);
  }
}

/* RandomRead-style: 500 records of skewed random length up to 128 KiB (bigger than the
 * first read window for some), then NonSequentialReads by saved offsets, plain and
 * compressed. */
static void test_random_lengths_and_seek(void **state) {
  (void)state;
  enum { N = 500 };
  size_t lens[N];
  uint64_t offs[N + 1];
  uint32_t x = 301;
  size_t total = 0;
  for (int i = 0; i < N; i++) {
    x = x * 1664525u + 1013904223u;
    int bits = (int)(x >> 28); /* skewed: 2^0 .. 2^15 scale, then uniform below */
    x = x * 1664525u + 1013904223u;
    lens[i] = i == 7 ? (3u << 20) : (x >> 8) % ((size_t)1 << (bits + 2)); /* record 7: 3 MiB */
    total += lens[i];
  }
  uint8_t *all = malloc(total);
  for (size_t i = 0; i < total; i++) all[i] = (uint8_t)(i * 31 + (i >> 9));
  est_compression cs[3] = {EST_COMPRESSION_NONE, EST_COMPRESSION_ZLIB, EST_COMPRESSION_GZIP};
  for (int k = 0; k < 3; k++) {
    const char *p = test_tmp_path("random.tfrecord");
    est_tfrecord_writer *w;
    assert_int_equal(est_tfrecord_writer_open(&w, p, cs[k]), EST_OK);
    size_t at = 0;
    for (int i = 0; i < N; i++) {
      assert_int_equal(est_tfrecord_writer_write(w, all + at, lens[i]), EST_OK);
      at += lens[i];
    }
    assert_int_equal(est_tfrecord_writer_close(w), EST_OK);
    est_tfrecord_reader *r;
    const uint8_t *d;
    size_t n;
    assert_int_equal(est_tfrecord_reader_open(&r, p, cs[k]), EST_OK);
    at = 0;
    for (int i = 0; i < N; i++) {
      offs[i] = est_tfrecord_reader_offset(r);
      assert_int_equal(est_tfrecord_reader_next(r, &d, &n), EST_OK);
      assert_int_equal(n, lens[i]);
      assert_memory_equal(d, all + at, n);
      at += n;
    }
    offs[N] = est_tfrecord_reader_offset(r);
    assert_int_equal(offs[N], total + 16 * N);
    /* back to 3, forward to 8, back to 0, to the last, to 250 */
    int order[] = {3, 8, 0, N - 1, 250, 4};
    for (size_t j = 0; j < sizeof order / sizeof *order; j++) {
      int i = order[j];
      size_t start = 0;
      for (int q = 0; q < i; q++) start += lens[q];
      assert_int_equal(est_tfrecord_reader_seek(r, offs[i]), EST_OK);
      assert_int_equal(est_tfrecord_reader_next(r, &d, &n), EST_OK);
      assert_int_equal(n, lens[i]);
      assert_memory_equal(d, all + start, n);
      assert_int_equal(est_tfrecord_reader_offset(r), offs[i + 1]);
    }
    /* ReadEnd / ReadPastEnd through the decompressor too: OUT_OF_RANGE, then a seek
     * back still reads. */
    assert_int_equal(est_tfrecord_reader_seek(r, offs[N]), EST_OK);
    assert_int_equal(est_tfrecord_reader_next(r, &d, &n), EST_ERR_OUT_OF_RANGE);
    assert_int_equal(est_tfrecord_reader_seek(r, offs[N] + 5), EST_OK);
    assert_int_equal(est_tfrecord_reader_next(r, &d, &n), EST_ERR_OUT_OF_RANGE);
    assert_int_equal(est_tfrecord_reader_seek(r, offs[N - 1]), EST_OK);
    assert_int_equal(est_tfrecord_reader_next(r, &d, &n), EST_OK);
    assert_int_equal(n, lens[N - 1]);
    assert_memory_equal(d, all + total - lens[N - 1], n);
    est_tfrecord_reader_close(r);
  }
  free(all);
}

/* CorruptLength (byte 6), CorruptLengthCrc (byte 10), CorruptData (byte 14),
 * CorruptDataCrc (last byte), and junk read at offset 1 (TestMalformedInput). */
static void test_named_corruptions(void **state) {
  (void)state;
  char recs[2][64] = {"abcdefgh", "ijkl"};
  const char *p = test_tmp_path("c.tfrecord");
  write_records(p, EST_COMPRESSION_NONE, 1, recs);
  uint8_t *orig;
  size_t n;
  assert_int_equal(est_read_file(p, &orig, &n), EST_OK);
  struct { size_t at; const char *msg; } v[] = {
      {6, "corrupted record at 0"}, {10, "corrupted record at 0"}, {14, "corrupted record at 12"}, {n - 1, "corrupted record at 12"}};
  for (size_t i = 0; i < 4; i++) {
    uint8_t buf[64];
    memcpy(buf, orig, n);
    buf[v[i].at] ^= 0x01;
    test_write_bytes(p, buf, n);
    size_t count;
    assert_int_equal(read_all(p, EST_COMPRESSION_NONE, &count, NULL, NULL), EST_ERR_DATA_LOSS);
    assert_non_null(strstr(est_error_message(), v[i].msg));
  }
  free(orig);
  /* 15 junk bytes read from offset 1: no "Is this even" note away from offset 0 */
  test_write_bytes(p, "xabcdefghijklmno", 16);
  est_tfrecord_reader *r;
  const uint8_t *d;
  assert_int_equal(est_tfrecord_reader_open(&r, p, EST_COMPRESSION_NONE), EST_OK);
  assert_int_equal(est_tfrecord_reader_seek(r, 1), EST_OK);
  assert_int_equal(est_tfrecord_reader_next(r, &d, &n), EST_ERR_DATA_LOSS);
  char want[4400];
  snprintf(want, sizeof want, "%s: corrupted record at 1", p);
  assert_string_equal(est_error_message(), want);
  /* The reader stays put: the same error again, offset unchanged. */
  assert_int_equal(est_tfrecord_reader_next(r, &d, &n), EST_ERR_DATA_LOSS);
  assert_int_equal(est_tfrecord_reader_offset(r), 1);
  est_tfrecord_reader_close(r);
}

/* Every single byte of the 54-byte file changed (three different XOR masks): the reader
 * returns an error or records identical to the originals, never other data. */
static void test_every_byte_flip(void **state) {
  (void)state;
  uint8_t orig[64], buf[64], got[64];
  size_t n = test_unhex(THREE_HEX, orig);
  const char *p = test_tmp_path("flip.tfrecord");
  uint8_t masks[3] = {0x01, 0x80, 0xff};
  for (size_t i = 0; i < n; i++)
    for (int m = 0; m < 3; m++) {
      memcpy(buf, orig, n);
      buf[i] ^= masks[m];
      test_write_bytes(p, buf, n);
      size_t count, gsize;
      est_status st = read_all(p, EST_COMPRESSION_NONE, &count, got, &gsize);
      assert_int_equal(st, EST_ERR_DATA_LOSS); /* every byte is covered by a CRC */
      /* the records returned before the error are a prefix of "", "a", "hello" */
      assert_true(count <= 2);
      assert_memory_equal(got, "ahello", gsize);
    }
}

/* What reading the first `avail` bytes of the 54-byte three-record stream must give
 * (docs/tfrecord.md §3): a clean EOF on a record boundary, else "truncated record at" the
 * record's offset (1-12 bytes of it) or its payload's offset (13 bytes or more). */
static void expect_cut_three(const char *path, size_t avail, est_status st, size_t count) {
  static const size_t starts[4] = {0, 16, 33, 54};
  size_t rec = 0;
  while (rec < 3 && starts[rec + 1] <= avail) rec++;
  assert_int_equal(count, rec);
  if (avail == starts[rec]) {
    assert_int_equal(st, EST_ERR_OUT_OF_RANGE);
    return;
  }
  assert_int_equal(st, EST_ERR_DATA_LOSS);
  char want[4400];
  size_t at = avail - starts[rec] <= EST_TFRECORD_HEADER_SIZE ? starts[rec] : starts[rec] + EST_TFRECORD_HEADER_SIZE;
  snprintf(want, sizeof want, "%s: truncated record at %zu", path, at);
  assert_string_equal(est_error_message(), want);
}

/* How many bytes of the uncompressed stream the first n bytes of a GZIP (gzip != 0) or
 * ZLIB stream decode to: all that zlib can produce from a cut stream. */
static size_t inflated_size(const uint8_t *z, size_t n, int gzip) {
  z_stream zs;
  memset(&zs, 0, sizeof zs);
  assert_int_equal(inflateInit2(&zs, gzip ? MAX_WBITS + 16 : MAX_WBITS), Z_OK);
  uint8_t out[256];
  zs.next_in = (Bytef *)z;
  zs.avail_in = (uInt)n;
  zs.next_out = out;
  zs.avail_out = sizeof out;
  int ret;
  while ((ret = inflate(&zs, Z_NO_FLUSH)) == Z_OK && zs.avail_in > 0) {
  }
  assert_true(ret == Z_OK || ret == Z_STREAM_END || ret == Z_BUF_ERROR);
  size_t got = (size_t)zs.total_out;
  inflateEnd(&zs);
  return got;
}

/* Cut at every length: clean EOF exactly at record boundaries, DATA_LOSS "truncated
 * record" with TF's offset elsewhere. The GZIP and ZLIB vectors cut at every length
 * follow the same rule on the bytes their prefix decompresses to (docs/tfrecord.md §3: a cut
 * on a record boundary of the decompressed stream is a clean EOF, mid-record truncated). */
static void test_every_truncation(void **state) {
  (void)state;
  uint8_t orig[128], got[64];
  size_t n = test_unhex(THREE_HEX, orig);
  const char *p = test_tmp_path("cut.tfrecord");
  for (size_t len = 0; len < n; len++) {
    test_write_bytes(p, orig, len);
    size_t count = 0, gsize = 0;
    est_status st = read_all(p, EST_COMPRESSION_NONE, &count, got, &gsize);
    expect_cut_three(p, len, st, count);
    assert_memory_equal(got, "ahello", gsize);
  }
  const char *hexes[2] = {THREE_GZIP_HEX, THREE_ZLIB_HEX};
  est_compression cs[2] = {EST_COMPRESSION_GZIP, EST_COMPRESSION_ZLIB};
  for (int k = 0; k < 2; k++) {
    size_t cn = test_unhex(hexes[k], orig);
    int mid_record = 0;
    for (size_t len = 0; len < cn; len++) {
      test_write_bytes(p, orig, len);
      size_t count = 0, gsize = 0;
      est_status st = read_all(p, cs[k], &count, got, &gsize);
      size_t avail = inflated_size(orig, len, cs[k] == EST_COMPRESSION_GZIP);
      assert_true(avail <= 54);
      expect_cut_three(p, avail, st, count);
      assert_memory_equal(got, "ahello", gsize);
      mid_record += st == EST_ERR_DATA_LOSS;
    }
    assert_true(mid_record > 0); /* the sweep did reach cuts inside a record */
  }
}

/* Concatenated gzip members read as one stream; bytes after a zlib stream are ignored;
 * a cut gzip stream at a record boundary of the decompressed stream is a clean EOF. */
static void test_gzip_members_and_trailers(void **state) {
  (void)state;
  uint8_t buf[256];
  size_t n = test_unhex(THREE_GZIP_HEX, buf);
  memcpy(buf + n, buf, n);
  test_write_bytes(test_tmp_path("two.gz"), buf, 2 * n);
  size_t count;
  assert_int_equal(read_all(test_tmp_path("two.gz"), EST_COMPRESSION_GZIP, &count, NULL, NULL),
                   EST_ERR_OUT_OF_RANGE);
  assert_int_equal(count, 6);
  n = test_unhex(THREE_ZLIB_HEX, buf);
  memcpy(buf + n, "trailing junk", 13);
  test_write_bytes(test_tmp_path("trail.zlib"), buf, n + 13);
  expect_three(test_tmp_path("trail.zlib"), EST_COMPRESSION_ZLIB);
  /* A gzip file holding only the first record (16 bytes), without its trailer, reads
   * one record then EOF: the cut falls on a record boundary. */
  char one[1][64] = {""};
  write_records(test_tmp_path("one.gz"), EST_COMPRESSION_GZIP, 1, one);
  uint8_t *data;
  assert_int_equal(est_read_file(test_tmp_path("one.gz"), &data, &n), EST_OK);
  test_write_bytes(test_tmp_path("one_cut.gz"), data, n - 8); /* drop CRC-32 + ISIZE */
  free(data);
  assert_int_equal(read_all(test_tmp_path("one_cut.gz"), EST_COMPRESSION_GZIP, &count, NULL, NULL),
                   EST_ERR_OUT_OF_RANGE);
  assert_int_equal(count, 1);
}

/* A gzip/zlib stream whose trailer checksum is wrong (all data intact) gives every record
 * first, then DATA_LOSS, whatever the read window: inflate meets the bad trailer in the
 * same call that produces the stream's last bytes, and those bytes must not be dropped
 * with the error. Seeking back to every record afterwards returns it again (a fuzzer
 * found the re-read failing once the window had grown past the stream's size). */
static void test_bad_trailer_checksum_keeps_data(void **state) {
  (void)state;
  est_compression cs[2] = {EST_COMPRESSION_GZIP, EST_COMPRESSION_ZLIB};
  for (int k = 0; k < 2; k++) {
    for (int records = 1; records <= 3000; records *= 50) { /* 1, 50, 2500: 1 and 3 windows */
      const char *p = test_tmp_path("badtrailer");
      est_tfrecord_writer *w;
      assert_int_equal(est_tfrecord_writer_open(&w, p, cs[k]), EST_OK);
      char buf[64];
      for (int i = 0; i < records; i++) {
        int len = snprintf(buf, sizeof buf, "record %d of a stream with a bad trailer", i);
        assert_int_equal(est_tfrecord_writer_write(w, buf, (size_t)len), EST_OK);
      }
      assert_int_equal(est_tfrecord_writer_close(w), EST_OK);
      uint8_t *data;
      size_t size;
      assert_int_equal(est_read_file(p, &data, &size), EST_OK);
      /* gzip: CRC-32 then ISIZE close the member; zlib: Adler-32 closes the stream */
      data[size - (cs[k] == EST_COMPRESSION_GZIP ? 8 : 4)] ^= 0x01;
      test_write_bytes(p, data, size);
      free(data);

      est_tfrecord_reader *r;
      assert_int_equal(est_tfrecord_reader_open(&r, p, cs[k]), EST_OK);
      const uint8_t *d;
      size_t n;
      uint64_t *offsets = calloc((size_t)records, sizeof *offsets);
      for (int i = 0; i < records; i++) {
        offsets[i] = est_tfrecord_reader_offset(r);
        int len = snprintf(buf, sizeof buf, "record %d of a stream with a bad trailer", i);
        if (est_tfrecord_reader_next(r, &d, &n) != EST_OK)
          fail_msg("%s, %d records: record %d lost: %s", est_compression_name(cs[k]), records, i,
                   est_error_message());
        assert_int_equal(n, (size_t)len);
        assert_memory_equal(d, buf, n);
      }
      assert_int_equal(est_tfrecord_reader_next(r, &d, &n), EST_ERR_DATA_LOSS);
      assert_non_null(strstr(est_error_message(), "badtrailer"));
      assert_non_null(strstr(est_error_message(), "incorrect"));
      for (int i = records - 1; i >= 0; i -= 7) {
        assert_int_equal(est_tfrecord_reader_seek(r, offsets[i]), EST_OK);
        int len = snprintf(buf, sizeof buf, "record %d of a stream with a bad trailer", i);
        if (est_tfrecord_reader_next(r, &d, &n) != EST_OK)
          fail_msg("%s: re-reading record %d: %s", est_compression_name(cs[k]), i, est_error_message());
        assert_int_equal(n, (size_t)len);
        assert_memory_equal(d, buf, n);
      }
      free(offsets);
      est_tfrecord_reader_close(r);
    }
  }
}

/* ReadError: an I/O error (reading a directory) is reported with the path, the reader
 * stays at its offset and reports it again on retry. */
static void test_read_error(void **state) {
  (void)state;
  est_tfrecord_reader *r;
  const uint8_t *d;
  size_t n;
  assert_int_equal(est_tfrecord_reader_open(&r, test_tmpdir, EST_COMPRESSION_NONE), EST_OK);
  assert_int_equal(est_tfrecord_reader_next(r, &d, &n), EST_ERR_IO);
  assert_non_null(strstr(est_error_message(), test_tmpdir));
  assert_int_equal(est_tfrecord_reader_offset(r), 0);
  assert_int_equal(est_tfrecord_reader_next(r, &d, &n), EST_ERR_IO);
  est_tfrecord_reader_close(r);
}

/* ReadError's other half: after a failed read the offset is unchanged and a retry can
 * succeed. A record cut short (the writer had not finished it) is DATA_LOSS; once the
 * rest of it is in the file, the same reader reads it. A cut ZLIB stream fails the same
 * way again without moving. */
static void test_retry_after_error(void **state) {
  (void)state;
  uint8_t buf[64];
  size_t n = test_unhex(THREE_HEX, buf);
  const char *p = test_tmp_path("growing.tfrecord");
  test_write_bytes(p, buf, n - 1); /* "hello" without the last byte of its footer */
  est_tfrecord_reader *r;
  const uint8_t *d;
  size_t len;
  assert_int_equal(est_tfrecord_reader_open(&r, p, EST_COMPRESSION_NONE), EST_OK);
  assert_int_equal(est_tfrecord_reader_next(r, &d, &len), EST_OK);
  assert_int_equal(est_tfrecord_reader_next(r, &d, &len), EST_OK);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(est_tfrecord_reader_next(r, &d, &len), EST_ERR_DATA_LOSS);
    assert_non_null(strstr(est_error_message(), "truncated record at 45"));
    assert_int_equal(est_tfrecord_reader_offset(r), 33);
    assert_int_equal(est_tfrecord_reader_records_read(r), 2);
  }
  FILE *f = fopen(p, "ab");
  assert_non_null(f);
  assert_int_equal(fwrite(buf + n - 1, 1, 1, f), 1);
  fclose(f);
  assert_int_equal(est_tfrecord_reader_next(r, &d, &len), EST_OK);
  assert_int_equal(len, 5);
  assert_memory_equal(d, "hello", 5);
  assert_int_equal(est_tfrecord_reader_offset(r), 54);
  assert_int_equal(est_tfrecord_reader_next(r, &d, &len), EST_ERR_OUT_OF_RANGE);
  est_tfrecord_reader_close(r);

  /* ZLIB stream cut in its last block: two records, then the same error at 33 each time. */
  n = test_unhex(THREE_ZLIB_HEX, buf);
  const char *z = test_tmp_path("cut.zlib");
  size_t cut = n;
  while (cut > 0 && inflated_size(buf, cut, 0) > 33 + EST_TFRECORD_HEADER_SIZE) cut--;
  assert_true(inflated_size(buf, cut, 0) > 33);
  test_write_bytes(z, buf, cut);
  assert_int_equal(est_tfrecord_reader_open(&r, z, EST_COMPRESSION_ZLIB), EST_OK);
  assert_int_equal(est_tfrecord_reader_next(r, &d, &len), EST_OK);
  assert_int_equal(est_tfrecord_reader_next(r, &d, &len), EST_OK);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(est_tfrecord_reader_next(r, &d, &len), EST_ERR_DATA_LOSS);
    assert_non_null(strstr(est_error_message(), "truncated record at 33"));
    assert_int_equal(est_tfrecord_reader_offset(r), 33);
  }
  est_tfrecord_reader_close(r);
}

/* The real TF-written MRPC eval file: 408 records, every CRC valid. */
static void test_real_tf_file(void **state) {
  (void)state;
  uint64_t count;
  assert_int_equal(est_tfrecord_count(EST_TEST_DATA "/mrpc_eval.tf_record", EST_COMPRESSION_NONE, &count),
                   EST_OK);
  assert_int_equal(count, 408);
}

static void test_compression_parse(void **state) {
  (void)state;
  est_compression c;
  assert_int_equal(est_compression_parse("", &c), EST_OK);
  assert_int_equal(c, EST_COMPRESSION_NONE);
  assert_int_equal(est_compression_parse("GZIP", &c), EST_OK);
  assert_int_equal(c, EST_COMPRESSION_GZIP);
  assert_int_equal(est_compression_parse("ZLIB", &c), EST_OK);
  assert_int_equal(c, EST_COMPRESSION_ZLIB);
  assert_int_equal(est_compression_parse("SNAPPY", &c), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "SNAPPY"));
}

/* `est tfrecord dump|count` through the real binary. */
static void test_cli(void **state) {
  (void)state;
  const char *p = test_tmp_path("cli.tfrecord");
  est_tfrecord_writer *w;
  assert_int_equal(est_tfrecord_writer_open(&w, p, EST_COMPRESSION_GZIP), EST_OK);
  for (int i = 0; i < 2; i++) {
    est_example ex;
    est_example_init(&ex);
    int64_t ids[2] = {101, 2023 + i};
    float f = 0.1f;
    est_bytes b = {2, (uint8_t *)"ab"};
    est_example_set_int64(&ex, "input_ids", ids, 2);
    est_example_set_float(&ex, "w", &f, 1);
    est_example_set_bytes(&ex, "s", &b, 1);
    uint8_t *ser;
    size_t n;
    assert_int_equal(est_example_serialize(&ex, &ser, &n), EST_OK);
    assert_int_equal(est_tfrecord_writer_write(w, ser, n), EST_OK);
    free(ser);
    est_example_clear(&ex);
  }
  assert_int_equal(est_tfrecord_writer_close(w), EST_OK);
  char *out;
  assert_int_equal(test_run(&out, 0, "%s tfrecord dump --compression=GZIP %s", EST_BIN, p), 0);
  assert_string_equal(out,
                      "{\"input_ids\": {\"int64\": [101, 2023]}, \"s\": {\"bytes\": [\"YWI=\"]}, \"w\": {\"float\": [0.100000001]}}\n"
                      "{\"input_ids\": {\"int64\": [101, 2024]}, \"s\": {\"bytes\": [\"YWI=\"]}, \"w\": {\"float\": [0.100000001]}}\n");
  free(out);
  assert_int_equal(test_run(&out, 0, "%s tfrecord count %s --compression GZIP", EST_BIN, p), 0);
  assert_string_equal(out, "2\n");
  free(out);
  assert_int_equal(test_run(&out, 0, "%s tfrecord count %s", EST_BIN, EST_TEST_DATA "/mrpc_eval.tf_record"),
                   0);
  assert_string_equal(out, "408\n");
  free(out);
  /* a corrupt file: exit 1 and the byte offset */
  uint8_t buf[64];
  size_t n = test_unhex(THREE_HEX, buf);
  buf[46] ^= 1; /* in the payload of the third record (record at 33, payload at 45) */
  test_write_bytes(test_tmp_path("bad.tfrecord"), buf, n);
  assert_int_equal(test_run(&out, 1, "%s tfrecord count %s", EST_BIN, test_tmp_path("bad.tfrecord")), 1);
  assert_non_null(strstr(out, "corrupted record at 45"));
  free(out);
  /* records that are not Examples: the record index is named */
  char recs[2][64] = {"", "hello"};
  write_records(test_tmp_path("notex.tfrecord"), EST_COMPRESSION_NONE, 2, recs);
  assert_int_equal(test_run(&out, 1, "%s tfrecord dump %s", EST_BIN, test_tmp_path("notex.tfrecord")), 1);
  assert_non_null(strstr(out, "{}\n")); /* the empty record is an empty Example */
  assert_non_null(strstr(out, "record 1 is not a tf.train.Example"));
  free(out);
  /* usage errors exit 2; --help exits 0 */
  assert_int_equal(test_run(&out, 1, "%s tfrecord", EST_BIN), 2);
  free(out);
  assert_int_equal(test_run(&out, 1, "%s tfrecord dump", EST_BIN), 2);
  assert_non_null(strstr(out, "missing FILE"));
  free(out);
  assert_int_equal(test_run(&out, 1, "%s tfrecord dump %s --nope", EST_BIN, p), 2);
  free(out);
  assert_int_equal(test_run(&out, 1, "%s tfrecord count %s --compression=LZ4", EST_BIN, p), 2);
  free(out);
  assert_int_equal(test_run(&out, 1, "%s tfrecord --help", EST_BIN), 0);
  assert_non_null(strstr(out, "usage: est tfrecord dump"));
  free(out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_frame_vectors),
      cmocka_unit_test(test_writer_exact_and_atomic),
      cmocka_unit_test(test_compressed_vectors_and_roundtrip),
      cmocka_unit_test(test_negative_vectors),
      cmocka_unit_test(test_read_write_empty_and_ends),
      cmocka_unit_test(test_many_records),
      cmocka_unit_test(test_random_lengths_and_seek),
      cmocka_unit_test(test_named_corruptions),
      cmocka_unit_test(test_every_byte_flip),
      cmocka_unit_test(test_every_truncation),
      cmocka_unit_test(test_gzip_members_and_trailers),
      cmocka_unit_test(test_bad_trailer_checksum_keeps_data),
      cmocka_unit_test(test_read_error),
      cmocka_unit_test(test_retry_after_error),
      cmocka_unit_test(test_real_tf_file),
      cmocka_unit_test(test_compression_parse),
      cmocka_unit_test(test_cli),
  };
  return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
