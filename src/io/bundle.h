/* bundle.h — the tensor-bundle layer over the SSTable (internal to libest).
 *
 * The checkpoint reader (bundle_reader.c) and the fuzzer share this memory-buffer core:
 * est_bundle_index_parse turns the bytes of a .index file into validated entries, and
 * est_bundle_decode turns one entry's bytes from a data shard into a tensor. Neither
 * touches the file system.
 */
#ifndef EST_IO_BUNDLE_H
#define EST_IO_BUNDLE_H

#include <stddef.h>
#include <stdint.h>

#include "est/status.h"
#include "est/tensor.h"
#include "io/sstable.h"

/* One BundleEntryProto. `dtype` is TF's DataType number as stored (it may be one est does
 * not read, such as complex64; reading such a tensor is UNIMPLEMENTED). */
typedef struct est_bundle_entry {
  const char *name;          /* NUL-terminated, points into the table's arena */
  int dtype;
  int rank;
  int64_t dims[EST_MAX_RANK];
  int64_t num_elements;
  int32_t shard_id;
  uint64_t offset;
  uint64_t size;
  uint32_t masked_crc;       /* as stored (0 when the field was omitted) */
  int has_slices;            /* a partitioned variable: its data lives under slice keys */
} est_bundle_entry;

typedef struct est_bundle_index {
  int num_shards;
  int big_endian;            /* BundleHeaderProto.endianness == BIG */
  size_t count;
  est_bundle_entry *entries; /* sorted by name; slice-data keys (with NUL bytes) left out */
  est_sstable table;
} est_bundle_index;

/* Parses and validates a whole .index file held in memory: table structure and CRCs,
 * the header (versions, shard count), and every entry (dtype, shape, size). */
est_status est_bundle_index_parse(est_bundle_index *ix, const uint8_t *data, size_t size,
                                  const char *what);
void est_bundle_index_free(est_bundle_index *ix);

/* Entry of `name`, or NULL. */
const est_bundle_entry *est_bundle_index_find(const est_bundle_index *ix, const char *name);

/* Bytes per element of a fixed-size TF DataType (also those est_dtype lacks); 0 if none. */
size_t est_bundle_dtype_size(int dtype);

/* Checks the CRC of a numeric entry's bytes as stored, then swaps them to host order when
 * `big_endian`. `bytes` is e->size long; it is modified in place. */
est_status est_bundle_check_numeric(const est_bundle_entry *e, int big_endian, uint8_t *bytes,
                                    const char *what);

/* Decodes a DT_STRING entry's e->size bytes (varint lengths, length checksum, payload)
 * into `out`, an allocated STRING tensor of e's shape (est_tensor_free), checking both CRCs. */
est_status est_bundle_decode_strings(const est_bundle_entry *e, const uint8_t *bytes, est_tensor *out,
                                     const char *what);

/* Encodes a BundleEntryProto the way TF does (proto3 defaults omitted, shape always
 * present). Returns 0 on allocation failure. */
int est_bundle_encode_entry(est_pw_buf *b, int dtype, int rank, const int64_t *dims, int32_t shard_id,
                            uint64_t offset, uint64_t size, uint32_t masked_crc);

/* Encodes a string tensor's data as WriteStringTensor does; *crc gets the entry's
 * unmasked CRC. Returns 0 on allocation failure. */
int est_bundle_encode_strings(est_pw_buf *b, const est_bytes *s, int64_t n, uint32_t *crc);

#endif
