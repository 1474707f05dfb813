/* est/tfrecord.h — TFRecord files, read and written bit-compatibly with TensorFlow.
 *
 *     est_tfrecord_reader *r;
 *     if (est_tfrecord_reader_open(&r, "train.tf_record", EST_COMPRESSION_NONE)) goto fail;
 *     const uint8_t *rec; size_t n; est_status st;
 *     while ((st = est_tfrecord_reader_next(r, &rec, &n)) == EST_OK) use(rec, n);
 *     est_tfrecord_reader_close(r);
 *     if (st != EST_ERR_OUT_OF_RANGE) goto fail;   // DATA_LOSS: message has path + offset
 *
 *     est_tfrecord_writer *w;
 *     est_tfrecord_writer_open(&w, "out.tf_record", EST_COMPRESSION_GZIP);
 *     est_tfrecord_writer_write(w, bytes, size);   // once per record
 *     est_tfrecord_writer_close(w);                 // atomic: the file appears only now
 *
 * Framing (docs/tfrecord.md §1): u64 length, masked crc32c(length bytes), payload, masked
 * crc32c(payload), all little-endian. GZIP/ZLIB compress the whole framed stream; offsets
 * in this API are always offsets into the uncompressed stream, as TF's.
 */
#ifndef EST_TFRECORD_H
#define EST_TFRECORD_H

#include <stddef.h>
#include <stdint.h>

#include "est/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum est_compression {
  EST_COMPRESSION_NONE = 0,
  EST_COMPRESSION_ZLIB,
  EST_COMPRESSION_GZIP,
} est_compression;

/* "" or "NONE" -> NONE, "ZLIB", "GZIP" (as TF's compression_type strings; case-sensitive
 * like TF, lower case also accepted). Anything else is INVALID_ARGUMENT (TF silently falls
 * back to none; we refuse rather than read garbage). */
est_status est_compression_parse(const char *name, est_compression *out);
const char *est_compression_name(est_compression c); /* "", "ZLIB", "GZIP" */

enum { EST_TFRECORD_HEADER_SIZE = 12, EST_TFRECORD_FOOTER_SIZE = 4 };

/* ---- reading ---------------------------------------------------------------------- */

typedef struct est_tfrecord_reader est_tfrecord_reader;

est_status est_tfrecord_reader_open(est_tfrecord_reader **out, const char *path, est_compression c);

/* EST_OK: *data and *size hold the next record (valid until the next call on r).
 * EST_ERR_OUT_OF_RANGE: clean end of file (again on every later call).
 * EST_ERR_DATA_LOSS: "<path>: truncated record at <off>" or "<path>: corrupted record at
 * <off>" with TF's offsets (the payload offset for a bad payload CRC); for compressed
 * files also "inflate() failed ...". The reader stays at the failed record. */
est_status est_tfrecord_reader_next(est_tfrecord_reader *r, const uint8_t **data, size_t *size);

/* Offset of the next record in the uncompressed stream. */
uint64_t est_tfrecord_reader_offset(const est_tfrecord_reader *r);

/* Moves to `offset`, a record boundary previously returned by _offset (exact resume).
 * Uncompressed: a direct seek. Compressed: rewinds when going back, then decompresses
 * forward. An offset past the end makes the next read OUT_OF_RANGE, as TF. */
est_status est_tfrecord_reader_seek(est_tfrecord_reader *r, uint64_t offset);

const char *est_tfrecord_reader_path(const est_tfrecord_reader *r);

/* Number of records read (returned with EST_OK) since open or the last seek to 0. */
uint64_t est_tfrecord_reader_records_read(const est_tfrecord_reader *r);

void est_tfrecord_reader_close(est_tfrecord_reader *r); /* NULL is fine */

/* Counts the records of a whole file, verifying every CRC. */
est_status est_tfrecord_count(const char *path, est_compression c, uint64_t *count);

/* ---- writing ---------------------------------------------------------------------- */

typedef struct est_tfrecord_writer est_tfrecord_writer;

/* Writes to a temporary file next to `path`; close() makes it appear atomically.
 * Compressed writers use TF's settings (level 6, memLevel 9, windowBits 15 / 31). */
est_status est_tfrecord_writer_open(est_tfrecord_writer **out, const char *path, est_compression c);
est_status est_tfrecord_writer_write(est_tfrecord_writer *w, const void *data, size_t size);
/* Flush, finish the deflate stream, fsync, rename; frees w whatever the result. */
est_status est_tfrecord_writer_close(est_tfrecord_writer *w);
/* Discards the temporary file; frees w. NULL is fine. */
void est_tfrecord_writer_abort(est_tfrecord_writer *w);
/* The end of a writing loop whose status is st: close (st EST_OK) or abort, the error then
 * prefixed "writing PATH: ". w may be NULL (it failed to open). */
est_status est_tfrecord_writer_finish(est_tfrecord_writer *w, est_status st, const char *path);

/* Frames one record into caller buffers: header = length + masked crc of the length,
 * footer = masked crc of the payload. */
void est_tfrecord_frame(uint8_t header[12], uint8_t footer[4], const void *data, size_t size);

#ifdef __cplusplus
}
#endif
#endif
