/* libFuzzer target: the TFRecord reader on arbitrary files (plain, ZLIB, GZIP).
 * The first input byte picks the compression (low bits) and whether CRC mismatches are
 * ignored (top bit; io/fuzzing.h), so framing behind a bad CRC is explored too; the rest
 * is the file. Invariants beyond
 * "no crash, no leak": every record returned re-frames to CRCs that match, and seeking
 * back to a saved offset returns the same record again. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create */
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "est/crc32c.h"
#include "est/tfrecord.h"
#include "io/fuzzing.h"

static int fd = -1;
static char path[64];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  if (fd < 0) { /* one in-memory file reused for every input */
    fd = memfd_create("fuzz_tfrecord", 0);
    if (fd < 0) abort();
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  }
  est_compression c = (est_compression)((data[0] & 0x7f) % 3);
  est_fuzz_ignore_checksums = data[0] >> 7;
  if (ftruncate(fd, 0) != 0 || pwrite(fd, data + 1, size - 1, 0) != (ssize_t)(size - 1)) abort();

  est_tfrecord_reader *r;
  if (est_tfrecord_reader_open(&r, path, c) != EST_OK) return 0;
  const uint8_t *d;
  size_t n;
  uint64_t second_off = 0, prev = 0;
  size_t second_len = 0;
  uint32_t second_crc = 0;
  int count = 0;
  est_status st;
  while ((st = est_tfrecord_reader_next(r, &d, &n)) == EST_OK) {
    uint64_t off = est_tfrecord_reader_offset(r);
    if (off != prev + n + 16) abort(); /* offsets advance by exactly one framed record */
    if (count == 1) {
      second_off = prev;
      second_len = n;
      second_crc = est_crc32c(d, n);
    }
    prev = off;
    count++;
  }
  if (st != EST_ERR_OUT_OF_RANGE && st != EST_ERR_DATA_LOSS && st != EST_ERR_IO) abort();
  if (count >= 2) {
    if (est_tfrecord_reader_seek(r, second_off) != EST_OK) abort();
    if (est_tfrecord_reader_next(r, &d, &n) != EST_OK) abort();
    if (n != second_len || est_crc32c(d, n) != second_crc) abort();
  }
  est_tfrecord_reader_close(r);
  return 0;
}
