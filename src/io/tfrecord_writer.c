/* TFRecord writer: frames records, optionally deflates the whole stream with TF's
 * settings, and publishes the file atomically on close (temp file, fsync, rename). */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "est/crc32c.h"
#include "est/file.h"
#include "est/tfrecord.h"
#include "io/protowire.h"

enum {
  STDIO_BUF = 1 << 20,
  ZOUT_SIZE = 256 << 10, /* TF's output buffer size */
};

struct est_tfrecord_writer {
  est_atomic_file *af;
  FILE *f;
  char *stdio_buf;
  est_compression comp;
  z_stream zs;
  int zinit;
  uint8_t *zout;
  char *path;
};

void est_tfrecord_frame(uint8_t header[12], uint8_t footer[4], const void *data, size_t size) {
  est_pw_encode_fixed64(header, (uint64_t)size);
  est_pw_encode_fixed32(header + 8, est_crc32c_mask(est_crc32c(header, 8)));
  est_pw_encode_fixed32(footer, est_crc32c_mask(est_crc32c(data, size)));
}

static void writer_free(est_tfrecord_writer *w) {
  if (w->zinit) deflateEnd(&w->zs);
  free(w->zout);
  free(w->path);
  free(w->stdio_buf);
  free(w);
}

est_status est_tfrecord_writer_open(est_tfrecord_writer **out, const char *path, est_compression c) {
  *out = NULL;
  est_tfrecord_writer *w = calloc(1, sizeof *w);
  if (!w) return est_error(EST_ERR_NO_MEMORY, "%s: out of memory", path);
  w->comp = c;
  w->path = strdup(path);
  w->stdio_buf = malloc(STDIO_BUF);
  if (c != EST_COMPRESSION_NONE) w->zout = malloc(ZOUT_SIZE);
  if (!w->path || !w->stdio_buf || (c != EST_COMPRESSION_NONE && !w->zout)) {
    writer_free(w);
    return est_error(EST_ERR_NO_MEMORY, "%s: out of memory", path);
  }
  if (c != EST_COMPRESSION_NONE) {
    /* TF's ZlibCompressionOptions: level 6 (default), memLevel 9, windowBits 15 (zlib
     * wrapper) or 31 (gzip wrapper), default strategy (docs/tfrecord.md §2). */
    int wbits = c == EST_COMPRESSION_GZIP ? MAX_WBITS + 16 : MAX_WBITS;
    if (deflateInit2(&w->zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, wbits, 9, Z_DEFAULT_STRATEGY) != Z_OK) {
      writer_free(w);
      return est_error(EST_ERR_NO_MEMORY, "%s: deflateInit2 failed", path);
    }
    w->zinit = 1;
  }
  est_status st = est_atomic_open(&w->af, path);
  if (st != EST_OK) {
    writer_free(w);
    return st;
  }
  w->f = est_atomic_stream(w->af);
  setvbuf(w->f, w->stdio_buf, _IOFBF, STDIO_BUF); /* before any I/O on the stream */
  *out = w;
  return EST_OK;
}

static est_status put(est_tfrecord_writer *w, const void *data, size_t n, int flush) {
  if (w->comp == EST_COMPRESSION_NONE) {
    if (n && fwrite(data, 1, n, w->f) != n)
      return est_error(EST_ERR_IO, "%s: write failed", est_atomic_temp_path(w->af));
    return EST_OK;
  }
  z_stream *zs = &w->zs;
  zs->next_in = (Bytef *)data;
  const uint8_t *p = data;
  size_t left = n;
  do {
    /* avail_in is 32-bit: feed huge records in pieces */
    uInt chunk = (uInt)(left > (1u << 30) ? (1u << 30) : left);
    zs->next_in = (Bytef *)p;
    zs->avail_in = chunk;
    int ret;
    do {
      zs->next_out = w->zout;
      zs->avail_out = ZOUT_SIZE;
      ret = deflate(zs, flush && left == chunk ? Z_FINISH : Z_NO_FLUSH);
      if (ret == Z_STREAM_ERROR) return est_error(EST_ERR_INTERNAL, "%s: deflate failed", w->path);
      size_t have = ZOUT_SIZE - zs->avail_out;
      if (have && fwrite(w->zout, 1, have, w->f) != have)
        return est_error(EST_ERR_IO, "%s: write failed", est_atomic_temp_path(w->af));
    } while (zs->avail_out == 0 || (flush && left == chunk && ret != Z_STREAM_END));
    p += chunk;
    left -= chunk;
  } while (left);
  return EST_OK;
}

est_status est_tfrecord_writer_write(est_tfrecord_writer *w, const void *data, size_t size) {
  uint8_t header[EST_TFRECORD_HEADER_SIZE], footer[EST_TFRECORD_FOOTER_SIZE];
  est_tfrecord_frame(header, footer, data, size);
  est_status st;
  if ((st = put(w, header, sizeof header, 0)) != EST_OK) return st;
  if ((st = put(w, data, size, 0)) != EST_OK) return st;
  return put(w, footer, sizeof footer, 0);
}

est_status est_tfrecord_writer_close(est_tfrecord_writer *w) {
  if (!w) return EST_OK;
  est_status st = EST_OK;
  if (w->comp != EST_COMPRESSION_NONE) st = put(w, "", 0, 1); /* Z_FINISH: writes the trailer */
  if (st != EST_OK) {
    est_atomic_abort(w->af);
  } else {
    st = est_atomic_commit(w->af); /* flushes the stdio buffer before we free it */
  }
  writer_free(w);
  return st;
}

void est_tfrecord_writer_abort(est_tfrecord_writer *w) {
  if (!w) return;
  est_atomic_abort(w->af);
  writer_free(w);
}

est_status est_tfrecord_writer_finish(est_tfrecord_writer *w, est_status st, const char *path) {
  if (st == EST_OK) return est_tfrecord_writer_close(w);
  est_tfrecord_writer_abort(w);
  return est_error_prefix("writing %s: ", path);
}
