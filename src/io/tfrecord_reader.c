/* TFRecord reader: buffered, zero-copy record views, TF's error texts and offsets.
 *
 * The reader keeps a window buf[pos..len) of the *uncompressed* stream; `offset` is the
 * stream offset of buf[pos]. A record is returned as a pointer into the window, so the
 * window must hold the whole record: ensure() slides the window and grows it on demand.
 * Growth follows the bytes that actually arrive, so a corrupted (but CRC-valid) huge
 * length can never make us allocate more than about twice the real file. For GZIP/ZLIB
 * the window is filled by inflate instead of read(). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "est/crc32c.h"
#include "io/fuzzing.h"
#include "est/tfrecord.h"
#include "io/protowire.h"

enum {
  WINDOW_INITIAL = 1 << 20, /* 1 MiB: large reads keep read+verify well above 1 GB/s */
  ZIN_SIZE = 256 << 10,     /* compressed input chunk (TF's 256 KiB) */
};

struct est_tfrecord_reader {
  char *path;
  int fd;
  est_compression comp;
  uint8_t *buf;
  size_t cap, pos, len;
  uint64_t offset;   /* uncompressed stream offset of buf[pos] */
  int eof;           /* the underlying stream has no more bytes */
  uint64_t records;
  /* compressed input */
  z_stream zs;
  int zinit;
  int zin_eof;
  uint8_t *zin;
  int zerr;             /* an inflate error held back until the bytes before it are read */
  const char *zerr_msg; /* zlib's static message for it */
};

est_status est_compression_parse(const char *name, est_compression *out) {
  if (!name || !*name || !strcmp(name, "NONE") || !strcmp(name, "none")) *out = EST_COMPRESSION_NONE;
  else if (!strcmp(name, "ZLIB") || !strcmp(name, "zlib")) *out = EST_COMPRESSION_ZLIB;
  else if (!strcmp(name, "GZIP") || !strcmp(name, "gzip")) *out = EST_COMPRESSION_GZIP;
  else
    return est_error(EST_ERR_INVALID_ARGUMENT,
                     "unknown compression type '%s' (expected \"\", NONE, ZLIB or GZIP)", name);
  return EST_OK;
}

const char *est_compression_name(est_compression c) {
  return c == EST_COMPRESSION_ZLIB ? "ZLIB" : c == EST_COMPRESSION_GZIP ? "GZIP" : "";
}

static est_status zlib_start(est_tfrecord_reader *r) {
  if (r->zinit) inflateEnd(&r->zs);
  memset(&r->zs, 0, sizeof r->zs);
  r->zinit = 0;
  /* windowBits 15 = zlib wrapper, 15+16 = gzip wrapper (docs/tfrecord.md §2). */
  int wbits = r->comp == EST_COMPRESSION_GZIP ? MAX_WBITS + 16 : MAX_WBITS;
  if (inflateInit2(&r->zs, wbits) != Z_OK)
    return est_error(EST_ERR_NO_MEMORY, "%s: inflateInit2 failed", r->path);
  r->zinit = 1;
  r->zin_eof = 0;
  r->zerr = 0;
  r->zerr_msg = NULL;
  return EST_OK;
}

/* Reads raw file bytes into dst; returns the count (0 at end of file) or -1 on error. */
static ssize_t read_raw(est_tfrecord_reader *r, uint8_t *dst, size_t n) {
  for (;;) {
    ssize_t got = read(r->fd, dst, n);
    if (got >= 0) return got;
    if (errno == EINTR) continue;
    est_error(EST_ERR_IO, "%s: read failed: %s", r->path, strerror(errno));
    return -1;
  }
}

static ssize_t inflate_failed(est_tfrecord_reader *r) {
  est_error(EST_ERR_DATA_LOSS, "%s: inflate() failed with error %d: %s", r->path, r->zerr,
            r->zerr_msg ? r->zerr_msg : "unknown");
  return -1;
}

/* Decompresses into dst; returns bytes produced (0 = end of stream) or -1 on error.
 * When inflate fails after producing bytes in this call (a bad gzip trailer CRC comes
 * after all of the member's data), those bytes are returned and the error on the next
 * call: what is read before a corruption then does not depend on the buffer sizes. */
static ssize_t read_inflate(est_tfrecord_reader *r, uint8_t *dst, size_t n) {
  if (r->zerr) return inflate_failed(r);
  z_stream *zs = &r->zs;
  zs->next_out = dst;
  zs->avail_out = (uInt)(n > (1u << 30) ? (1u << 30) : n);
  for (;;) {
    if (zs->avail_in == 0 && !r->zin_eof) {
      ssize_t got = read_raw(r, r->zin, ZIN_SIZE);
      if (got < 0) return -1;
      if (got == 0) r->zin_eof = 1;
      zs->next_in = r->zin;
      zs->avail_in = (uInt)got;
    }
    /* A stream cut short ends like EOF here: TF then reports a clean end at a record
     * boundary and "truncated record" inside one (docs/tfrecord.md §3). */
    if (zs->avail_in == 0 && r->zin_eof) break;
    int ret = inflate(zs, Z_NO_FLUSH);
    if (ret == Z_STREAM_END) {
      if (r->comp == EST_COMPRESSION_ZLIB) {
        r->zin_eof = 1; /* bytes after a zlib stream are ignored */
        zs->avail_in = 0;
        break;
      }
      /* GZIP: concatenated members read as one stream (TF calls inflateReset). */
      inflateReset(zs);
    } else if (ret != Z_OK && !(ret == Z_BUF_ERROR && zs->avail_in == 0)) {
      r->zerr = ret;
      r->zerr_msg = zs->msg; /* zlib's messages are string literals */
      if (zs->next_out == dst) return inflate_failed(r);
      break;
    }
    if (zs->avail_out == 0) break;
  }
  return (ssize_t)((size_t)(zs->next_out - dst));
}

/* Makes at least `need` bytes available at buf[pos] unless the stream ends first;
 * *avail gets what is available (may be less than need at end of stream). */
static est_status ensure(est_tfrecord_reader *r, size_t need, size_t *avail) {
  while (r->len - r->pos < need && !r->eof) {
    if (r->pos > 0) { /* slide the unread tail to the front */
      memmove(r->buf, r->buf + r->pos, r->len - r->pos);
      r->len -= r->pos;
      r->pos = 0;
    }
    if (r->len == r->cap) { /* the record is bigger than the window: grow by doubling */
      size_t ncap = r->cap * 2;
      uint8_t *nb = ncap > r->cap ? realloc(r->buf, ncap) : NULL;
      if (!nb) return est_error(EST_ERR_NO_MEMORY, "%s: cannot grow read buffer to %zu bytes", r->path, ncap);
      r->buf = nb;
      r->cap = ncap;
    }
    ssize_t got = r->comp == EST_COMPRESSION_NONE ? read_raw(r, r->buf + r->len, r->cap - r->len)
                                                  : read_inflate(r, r->buf + r->len, r->cap - r->len);
    if (got < 0) return est_error_code();
    if (got == 0) r->eof = 1;
    r->len += (size_t)got;
  }
  *avail = r->len - r->pos;
  return EST_OK;
}

est_status est_tfrecord_reader_open(est_tfrecord_reader **out, const char *path, est_compression c) {
  *out = NULL;
  est_tfrecord_reader *r = calloc(1, sizeof *r);
  if (!r) return est_error(EST_ERR_NO_MEMORY, "%s: out of memory", path);
  r->fd = -1;
  r->comp = c;
  r->path = strdup(path);
  r->fd = open(path, O_RDONLY | O_CLOEXEC);
  if (r->fd < 0) {
    est_status code = errno == ENOENT ? EST_ERR_NOT_FOUND : EST_ERR_IO;
    est_error(code, "%s: cannot open: %s", path, strerror(errno));
    est_tfrecord_reader_close(r);
    return code;
  }
  /* Small files get small buffers (a dataset may open thousands of shards); the window
   * still grows for big records. */
  struct stat sb;
  size_t file_size = fstat(r->fd, &sb) == 0 && S_ISREG(sb.st_mode) ? (size_t)sb.st_size : WINDOW_INITIAL;
  if (file_size > WINDOW_INITIAL) file_size = WINDOW_INITIAL;
  size_t want = c == EST_COMPRESSION_NONE ? file_size + 1 : 4 * file_size + 64;
  r->cap = want < 4096 ? 4096 : want > WINDOW_INITIAL ? WINDOW_INITIAL : want;
  r->buf = malloc(r->cap);
  if (c != EST_COMPRESSION_NONE) r->zin = malloc(ZIN_SIZE);
  if (!r->path || !r->buf || (c != EST_COMPRESSION_NONE && !r->zin)) {
    est_tfrecord_reader_close(r);
    return est_error(EST_ERR_NO_MEMORY, "%s: out of memory", path);
  }
  if (c != EST_COMPRESSION_NONE) {
    est_status st = zlib_start(r);
    if (st != EST_OK) {
      est_tfrecord_reader_close(r);
      return st;
    }
  }
  *out = r;
  return EST_OK;
}

est_status est_tfrecord_reader_next(est_tfrecord_reader *r, const uint8_t **data, size_t *size) {
  const uint64_t off = r->offset;
  size_t avail;
  /* A plain file may have grown since we saw its end (an event file being written,
   * a record being appended): look again rather than remember the EOF. */
  if (r->comp == EST_COMPRESSION_NONE) r->eof = 0;
  est_status st = ensure(r, EST_TFRECORD_HEADER_SIZE, &avail);
  if (st != EST_OK) return st;
  if (avail == 0) return est_error(EST_ERR_OUT_OF_RANGE, "%s: end of file at %llu", r->path, (unsigned long long)off);
  if (avail < EST_TFRECORD_HEADER_SIZE)
    return est_error(EST_ERR_DATA_LOSS, "%s: truncated record at %llu", r->path, (unsigned long long)off);
  const uint8_t *h = r->buf + r->pos;
  /* The length is trusted only once its own CRC matches. */
  if (EST_CHECKSUM_MISMATCH(est_crc32c_unmask(est_pw_decode_fixed32(h + 8)), est_crc32c(h, 8)))
    return est_error(EST_ERR_DATA_LOSS, "%s: corrupted record at %llu%s", r->path, (unsigned long long)off,
                     off == 0 ? " (Is this even a TFRecord file?)" : "");
  uint64_t length = est_pw_decode_fixed64(h);
  if (length >= SIZE_MAX - EST_TFRECORD_HEADER_SIZE - EST_TFRECORD_FOOTER_SIZE)
    return est_error(EST_ERR_DATA_LOSS, "%s: record size too large at %llu", r->path, (unsigned long long)off);
  size_t total = EST_TFRECORD_HEADER_SIZE + (size_t)length + EST_TFRECORD_FOOTER_SIZE;
  if ((st = ensure(r, total, &avail)) != EST_OK) return st;
  if (avail < total) /* TF: nothing after the header reports the record, else the payload */
    return est_error(EST_ERR_DATA_LOSS, "%s: truncated record at %llu", r->path,
                     (unsigned long long)(avail == EST_TFRECORD_HEADER_SIZE ? off : off + EST_TFRECORD_HEADER_SIZE));
  const uint8_t *payload = r->buf + r->pos + EST_TFRECORD_HEADER_SIZE;
  if (EST_CHECKSUM_MISMATCH(est_crc32c_unmask(est_pw_decode_fixed32(payload + length)),
                            est_crc32c(payload, (size_t)length)))
    return est_error(EST_ERR_DATA_LOSS, "%s: corrupted record at %llu", r->path,
                     (unsigned long long)(off + EST_TFRECORD_HEADER_SIZE));
  *data = payload;
  *size = (size_t)length;
  r->pos += total;
  r->offset += total;
  r->records++;
  return EST_OK;
}

uint64_t est_tfrecord_reader_offset(const est_tfrecord_reader *r) { return r->offset; }
const char *est_tfrecord_reader_path(const est_tfrecord_reader *r) { return r->path; }
uint64_t est_tfrecord_reader_records_read(const est_tfrecord_reader *r) { return r->records; }

est_status est_tfrecord_reader_seek(est_tfrecord_reader *r, uint64_t target) {
  uint64_t window_start = r->offset - r->pos;
  if (target >= window_start && target <= r->offset + (r->len - r->pos)) {
    /* inside the current window: no I/O */
    r->pos = (size_t)(target - window_start);
    r->offset = target;
  } else if (r->comp == EST_COMPRESSION_NONE) {
    if (lseek(r->fd, (off_t)target, SEEK_SET) < 0)
      return est_error(EST_ERR_IO, "%s: seek to %llu failed: %s", r->path, (unsigned long long)target, strerror(errno));
    r->pos = r->len = 0;
    r->offset = target;
    r->eof = 0;
  } else {
    /* Compressed streams cannot seek: rewind when going back, then inflate forward. */
    if (target < r->offset) {
      if (lseek(r->fd, 0, SEEK_SET) < 0)
        return est_error(EST_ERR_IO, "%s: rewind failed: %s", r->path, strerror(errno));
      est_status st = zlib_start(r);
      if (st != EST_OK) return st;
      r->pos = r->len = 0;
      r->offset = 0;
      r->eof = 0;
    }
    while (r->offset < target) {
      size_t avail;
      est_status st = ensure(r, 1, &avail);
      if (st != EST_OK) return st;
      if (avail == 0) break; /* past the end: the next read is OUT_OF_RANGE, as TF */
      uint64_t step = target - r->offset < avail ? target - r->offset : avail;
      r->pos += (size_t)step;
      r->offset += step;
    }
  }
  if (target == 0) r->records = 0;
  return EST_OK;
}

void est_tfrecord_reader_close(est_tfrecord_reader *r) {
  if (!r) return;
  if (r->fd >= 0) close(r->fd);
  if (r->zinit) inflateEnd(&r->zs);
  free(r->zin);
  free(r->buf);
  free(r->path);
  free(r);
}

est_status est_tfrecord_count(const char *path, est_compression c, uint64_t *count) {
  est_tfrecord_reader *r;
  *count = 0;
  est_status st = est_tfrecord_reader_open(&r, path, c);
  if (st != EST_OK) return st;
  const uint8_t *d;
  size_t n;
  while ((st = est_tfrecord_reader_next(r, &d, &n)) == EST_OK) (*count)++;
  est_tfrecord_reader_close(r);
  if (st == EST_ERR_OUT_OF_RANGE) {
    est_error_clear();
    return EST_OK;
  }
  return st;
}
