/* `est tfrecord dump|count|copy|parse`: look inside TFRecord files.
 *
 * dump prints one JSON object per record and line, features in key order:
 *   {"input_ids": {"int64": [101, 2023]}, "label_ids": {"int64": [1]}}
 * count verifies every CRC and prints the number of records; copy re-writes the records
 * with another compression; parse checks them against feature specs (tfrecord_parse.c). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "est/example.h"
#include "est/flags.h"
#include "est/tfrecord.h"
#include "tfrecord_parse.h"

static const char *USAGE =
    "usage: est tfrecord dump FILE [--compression=GZIP|ZLIB]\n"
    "       est tfrecord count FILE [--compression=GZIP|ZLIB]\n"
    "       est tfrecord copy IN OUT [--compression=C] [--output_compression=C]\n"
    "       est tfrecord parse FILE --spec=SPEC [--compression=C]\n\n"
    "dump:  one JSON object per record (a tf.train.Example), features in key order, as\n"
    "       {\"key\": {\"int64\": [...]}}, {\"float\": [...]} or {\"bytes\": [\"<base64>\", ...]}.\n"
    "count: checks every record's CRCs and prints how many records the file holds.\n"
    "copy:  writes IN's records to OUT (atomically) with --output_compression.\n"
    "parse: parses each record as tf.io.parse_example would with the feature specs\n"
    "       SPEC = KEY:DTYPE:KIND[:SHAPE[:DEFAULT]] entries joined by ';' (DTYPE int64,\n"
    "       float or string; KIND fixed, var or seq; SHAPE like 2x3, empty for a scalar;\n"
    "       DEFAULT comma-separated, strings in base64) and prints one JSON line per\n"
    "       record: the values (floats as uint32 bit patterns) or {\"error\": ...}.\n";

/* Re-frames every record of r into a new file at out_path. */
static int copy(est_tfrecord_reader *r, const char *out_path, est_compression oc) {
  est_tfrecord_writer *w;
  if (est_tfrecord_writer_open(&w, out_path, oc) != EST_OK) {
    fprintf(stderr, "est tfrecord: %s\n", est_error_message());
    return 1;
  }
  const uint8_t *d;
  size_t n;
  est_status st;
  while ((st = est_tfrecord_reader_next(r, &d, &n)) == EST_OK)
    if (est_tfrecord_writer_write(w, d, n) != EST_OK) break;
  if (st != EST_ERR_OUT_OF_RANGE) {
    fprintf(stderr, "est tfrecord: %s\n", est_error_message());
    est_tfrecord_writer_abort(w);
    return 1;
  }
  if (est_tfrecord_writer_close(w) != EST_OK) {
    fprintf(stderr, "est tfrecord: %s\n", est_error_message());
    return 1;
  }
  return 0;
}

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
  const char *compression = "", *output_compression = "", *spec = NULL;
  est_flag flags[] = {
      EST_FLAG_STRING("compression", &compression, "\"\" (none), ZLIB or GZIP, as TFRecordDataset's compression_type.", 0),
      EST_FLAG_STRING("output_compression", &output_compression, "copy: OUT's compression (\"\", ZLIB or GZIP).", 0),
      EST_FLAG_STRING("spec", &spec, "parse: the feature specs (see above).", 0),
  };
  const int nflags = (int)(sizeof flags / sizeof *flags);
  char *pos[3];
  int npos = 0;
  int rc = est_cli_parse("tfrecord", USAGE, flags, nflags, argc, argv, pos, &npos, 3, 1);
  if (rc >= 0) return rc;
  const char *sub = npos ? pos[0] : "";
  int known = !strcmp(sub, "dump") || !strcmp(sub, "count") || !strcmp(sub, "copy") || !strcmp(sub, "parse");
  int want = !strcmp(sub, "copy") ? 3 : 2;
  const char *problem = npos == 0      ? "missing subcommand (dump, count, copy or parse)"
                        : !known       ? "unknown subcommand"
                        : npos < want  ? (want == 3 ? "copy needs IN and OUT" : "missing FILE")
                        : npos > want  ? "too many arguments"
                        : !strcmp(sub, "parse") && !spec ? "parse needs --spec"
                                                         : NULL;
  if (problem) {
    fprintf(stderr, "est tfrecord: %s\n\n%s", problem, USAGE);
    return 2;
  }
  est_compression c, oc;
  if (est_compression_parse(compression, &c) != EST_OK) {
    fprintf(stderr, "est tfrecord: --compression: %s\n", est_error_message());
    return 2;
  }
  if (est_compression_parse(output_compression, &oc) != EST_OK) {
    fprintf(stderr, "est tfrecord: --output_compression: %s\n", est_error_message());
    return 2;
  }
  if (!strcmp(sub, "parse")) return est_tfrecord_parse_file(pos[1], c, spec);
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
  rc = !strcmp(sub, "copy") ? copy(r, pos[2], oc) : dump(r);
  est_tfrecord_reader_close(r);
  return rc;
}
