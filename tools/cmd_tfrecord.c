/* `est tfrecord dump|count FILE [--compression=GZIP|ZLIB]`: look inside TFRecord files.
 *
 * dump prints one JSON object per record and line, features in key order:
 *   {"input_ids": {"int64": [101, 2023]}, "label_ids": {"int64": [1]}}
 * count verifies every CRC and prints the number of records. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "est/example.h"
#include "est/flags.h"
#include "est/tfrecord.h"

static const char *USAGE =
    "usage: est tfrecord dump FILE [--compression=GZIP|ZLIB]\n"
    "       est tfrecord count FILE [--compression=GZIP|ZLIB]\n\n"
    "dump:  one JSON object per record (a tf.train.Example), features in key order, as\n"
    "       {\"key\": {\"int64\": [...]}}, {\"float\": [...]} or {\"bytes\": [\"<base64>\", ...]}.\n"
    "count: checks every record's CRCs and prints how many records the file holds.\n";

static int dump(est_tfrecord_reader *r) {
  const uint8_t *d;
  size_t n;
  est_status st;
  uint64_t index = 0;
  est_example ex;
  est_example_init(&ex);
  while ((st = est_tfrecord_reader_next(r, &d, &n)) == EST_OK) {
    char *json;
    size_t len;
    if (est_example_parse(&ex, d, n) != EST_OK) {
      fprintf(stderr, "est tfrecord: %s: record %" PRIu64 " is not a tf.train.Example: %s\n", est_tfrecord_reader_path(r),
              index, est_error_message());
      est_example_clear(&ex);
      return 1;
    }
    if (est_example_to_json(&ex, &json, &len) != EST_OK) {
      fprintf(stderr, "est tfrecord: %s\n", est_error_message());
      est_example_clear(&ex);
      return 1;
    }
    fwrite(json, 1, len, stdout);
    fputc('\n', stdout);
    free(json);
    index++;
  }
  est_example_clear(&ex);
  if (st != EST_ERR_OUT_OF_RANGE) {
    fflush(stdout);
    fprintf(stderr, "est tfrecord: %s (after %" PRIu64 " good records)\n", est_error_message(), index);
    return 1;
  }
  return fflush(stdout) == 0 ? 0 : 1;
}

int est_cmd_tfrecord(int argc, char **argv) {
  const char *compression = "";
  est_flag flags[] = {
      EST_FLAG_STRING("compression", &compression, "\"\" (none), ZLIB or GZIP, as TFRecordDataset's compression_type.", 0),
  };
  const int nflags = (int)(sizeof flags / sizeof *flags);
  char *pos[2];
  int npos = 0;
  est_flags_result fr = est_flags_parse(flags, nflags, argc - 1, argv + 1, pos, &npos, 2);
  if (fr == EST_FLAGS_HELP) {
    est_flags_print_help(stdout, USAGE, flags, nflags);
    return 0;
  }
  if (fr == EST_FLAGS_ERROR) {
    fprintf(stderr, "est tfrecord: %s\n\n%s", est_error_message(), USAGE);
    return 2;
  }
  if (npos != 2 || (strcmp(pos[0], "dump") && strcmp(pos[0], "count"))) {
    fprintf(stderr, "est tfrecord: %s\n\n%s",
            npos == 0 ? "missing subcommand (dump or count)"
            : npos == 1 && (!strcmp(pos[0], "dump") || !strcmp(pos[0], "count")) ? "missing FILE"
                                                                                  : "unknown subcommand",
            USAGE);
    return 2;
  }
  est_compression c;
  if (est_compression_parse(compression, &c) != EST_OK) {
    fprintf(stderr, "est tfrecord: --compression: %s\n", est_error_message());
    return 2;
  }
  if (!strcmp(pos[0], "count")) {
    uint64_t count;
    if (est_tfrecord_count(pos[1], c, &count) != EST_OK) {
      fprintf(stderr, "est tfrecord: %s\n", est_error_message());
      return 1;
    }
    printf("%" PRIu64 "\n", count);
    return 0;
  }
  est_tfrecord_reader *r;
  if (est_tfrecord_reader_open(&r, pos[1], c) != EST_OK) {
    fprintf(stderr, "est tfrecord: %s\n", est_error_message());
    return 1;
  }
  int rc = dump(r);
  est_tfrecord_reader_close(r);
  return rc;
}
