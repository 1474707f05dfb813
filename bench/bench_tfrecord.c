/* bench_tfrecord: TFRecord read + CRC verify throughput, CRC32C kernels, and Example
 * parsing against BERT's five feature specs.
 *
 *   bench_tfrecord [RECORD_FILE] [MIB]
 *
 * Builds a MIB-sized (default 256) uncompressed TFRecord file in $TMPDIR by repeating the
 * records of RECORD_FILE (default tests/data/mrpc_eval.tf_record: real run_classifier
 * records of ~570 bytes), then times reading it back from the page cache. Best of 3 runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "est/est.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int die(const char *what) {
  fprintf(stderr, "bench_tfrecord: %s: %s\n", what, est_error_message());
  return 1;
}

int main(int argc, char **argv) {
  const char *src = argc > 1 ? argv[1] : EST_SOURCE_DIR "/tests/data/mrpc_eval.tf_record";
  size_t mib = argc > 2 ? (size_t)atol(argv[2]) : 256;
  const char *tmp = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  char path[4096];
  snprintf(path, sizeof path, "%s/bench_tfrecord.%d.tf_record", tmp, (int)getpid());

  /* Load the source records once. */
  uint8_t *recs = NULL;
  size_t *lens = NULL, nrec = 0, cap = 0, bytes = 0;
  est_tfrecord_reader *r;
  if (est_tfrecord_reader_open(&r, src, EST_COMPRESSION_NONE)) return die(src);
  const uint8_t *d;
  size_t n;
  while (est_tfrecord_reader_next(r, &d, &n) == EST_OK) {
    if (nrec == cap) {
      cap = cap ? cap * 2 : 1024;
      lens = realloc(lens, cap * sizeof *lens);
    }
    recs = realloc(recs, bytes + n);
    memcpy(recs + bytes, d, n);
    lens[nrec++] = n;
    bytes += n;
  }
  est_tfrecord_reader_close(r);
  if (!nrec) return die("no records");

  /* Write the big file. */
  est_tfrecord_writer *w;
  if (est_tfrecord_writer_open(&w, path, EST_COMPRESSION_NONE)) return die(path);
  size_t written = 0, total_records = 0;
  double t0 = now();
  while (written < mib << 20) {
    size_t at = 0;
    for (size_t i = 0; i < nrec; i++) {
      if (est_tfrecord_writer_write(w, recs + at, lens[i])) return die(path);
      at += lens[i];
      written += lens[i] + 16;
      total_records++;
    }
  }
  if (est_tfrecord_writer_close(w)) return die(path);
  double t_write = now() - t0;
  printf("file: %zu records, %.1f MiB (records of %s)\n", total_records, written / 1048576.0, src);
  printf("write (frame + crc + fsync):        %7.2f GB/s\n", written / t_write / 1e9);

  /* Read + verify: every header and payload CRC checked. */
  double best = 1e30;
  for (int rep = 0; rep < 3; rep++) {
    t0 = now();
    if (est_tfrecord_reader_open(&r, path, EST_COMPRESSION_NONE)) return die(path);
    size_t got = 0, sum = 0;
    while (est_tfrecord_reader_next(r, &d, &n) == EST_OK) {
      got++;
      sum += d[n / 2];
    }
    est_tfrecord_reader_close(r);
    double t = now() - t0;
    if (got != total_records) return die("record count mismatch");
    if (t < best) best = t;
    if (sum == 1) printf(" ");
  }
  printf("read + verify:                      %7.2f GB/s  (%.2f M records/s)\n", written / best / 1e9,
         total_records / best / 1e6);

  /* Read + verify + parse with run_classifier's specs (the input pipeline's hot path). */
  est_feature_spec specs[5] = {
      {.key = "input_ids", .dtype = EST_DT_INT64, .rank = 1, .shape = {128}},
      {.key = "input_mask", .dtype = EST_DT_INT64, .rank = 1, .shape = {128}},
      {.key = "segment_ids", .dtype = EST_DT_INT64, .rank = 1, .shape = {128}},
      {.key = "label_ids", .dtype = EST_DT_INT64, .rank = 0},
      {.key = "is_real_example", .dtype = EST_DT_INT64, .rank = 0},
  };
  int64_t ids[128], mask[128], seg[128], label, real;
  void *out[5] = {ids, mask, seg, &label, &real};
  best = 1e30;
  int parse_ok = 1;
  for (int rep = 0; rep < 3; rep++) {
    t0 = now();
    if (est_tfrecord_reader_open(&r, path, EST_COMPRESSION_NONE)) return die(path);
    while (est_tfrecord_reader_next(r, &d, &n) == EST_OK)
      if (est_example_parse_specs(specs, 5, d, n, out, NULL) != EST_OK) parse_ok = 0;
    est_tfrecord_reader_close(r);
    double t = now() - t0;
    if (t < best) best = t;
  }
  if (parse_ok)
    printf("read + verify + parse (5 specs):    %7.2f GB/s  (%.2f M records/s)\n", written / best / 1e9,
           total_records / best / 1e6);
  else
    printf("read + verify + parse: records do not match run_classifier's specs (%s)\n", est_error_message());
  unlink(path);

  /* CRC32C kernels on a 64 MiB buffer (in cache-missing sizes, as the reader sees them). */
  size_t cn = 64u << 20;
  uint8_t *buf = malloc(cn);
  for (size_t i = 0; i < cn; i++) buf[i] = (uint8_t)(i * 2654435761u >> 24);
  uint32_t c1 = 0, c2 = 0;
  double th = 1e30, ts = 1e30;
  for (int rep = 0; rep < 3; rep++) {
    t0 = now();
    c1 = est_crc32c(buf, cn);
    double t = now() - t0;
    if (t < th) th = t;
    t0 = now();
    c2 = est_crc32c_portable_extend(0, buf, cn);
    t = now() - t0;
    if (t < ts) ts = t;
  }
  printf("crc32c %s:                   %7.2f GB/s\n", est_crc32c_is_hardware() ? "sse4.2 x3" : "(table) ", cn / th / 1e9);
  printf("crc32c slicing-by-8 table:          %7.2f GB/s%s\n", cn / ts / 1e9, c1 == c2 ? "" : "  MISMATCH");
  free(buf);
  free(recs);
  free(lens);
  return c1 == c2 ? 0 : 1;
}
