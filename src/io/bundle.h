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

/* One extent of a TensorSliceProto (tensor_slice.proto): `length` -1 means the whole
 * dimension (the field is absent; TF's kFullExtent), and then `start` is 0. */
typedef struct est_bundle_extent {
  int64_t start;
  int64_t length;
} est_bundle_extent;

/* One BundleEntryProto. `dtype` is TF's DataType number as stored (it may be one est does
 * not read, such as complex64; reading such a tensor is UNIMPLEMENTED).
 *
 * A partitioned variable (TF's BundleWriter::AddSlice) has a full-tensor entry with the
 * dtype, the FULL shape and one TensorSliceProto per saved slice (`slices`), and each
 * slice's data is an ordinary entry of the slice's shape stored under the key
 * est_bundle_slice_key(name, slice), which starts with a NUL byte. */
typedef struct est_bundle_entry {
  const char *name;          /* NUL-terminated, in the table's arena; for a slice key, a
                                printable copy (\xNN escapes) owned by the index */
  const uint8_t *key;        /* the key as stored (== name for tensors), key_len bytes */
  size_t key_len;
  int dtype;
  int rank;
  int64_t dims[EST_MAX_RANK];
  int64_t num_elements;
  int32_t shard_id;
  uint64_t offset;
  uint64_t size;
  uint32_t masked_crc;       /* as stored (0 when the field was omitted) */
  int num_slices;            /* > 0: a partitioned variable, its data lives under slice keys */
  est_bundle_extent *slices; /* num_slices x rank extents, slice by slice (owned by the index),
                                each checked to lie inside `dims` */
} est_bundle_entry;

typedef struct est_bundle_index {
  int num_shards;
  int big_endian;            /* BundleHeaderProto.endianness == BIG */
  size_t count;
  est_bundle_entry *entries; /* tensors, sorted by name; slice-data keys are not among them */
  size_t slice_count;
  est_bundle_entry *slice_entries; /* the keys holding a NUL byte (slice data), sorted by key */
  char *slice_names;         /* arena of their printable names */
  est_sstable table;
} est_bundle_index;

/* Parses and validates a whole .index file held in memory: table structure and CRCs,
 * the header (versions, shard count), and every entry (dtype, shape, size, and for a
 * partitioned variable each slice's extents against its shape). Slice-data entries are
 * validated like tensors but kept apart, as TF's list_variables leaves them out. */
est_status est_bundle_index_parse(est_bundle_index *ix, const uint8_t *data, size_t size,
                                  const char *what);
void est_bundle_index_free(est_bundle_index *ix);

/* Entry of `name`, or NULL. */
const est_bundle_entry *est_bundle_index_find(const est_bundle_index *ix, const char *name);

/* Entry stored under the raw key `key` (tensor or slice data), or NULL. */
const est_bundle_entry *est_bundle_index_find_key(const est_bundle_index *ix, const void *key,
                                                  size_t key_len);

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

/* ---- partitioned variables (bundle_slices.c) ----------------------------------------- */

/* Appends TF's key for the data of one slice (checkpoint::EncodeTensorNameSlice, in
 * saved_tensor_slice_util.cc), written with ordered_code.cc's rules:
 *   WriteNumIncreasing(0) ++ WriteString(name) ++ WriteNumIncreasing(rank)
 *   ++ for each dimension WriteSignedNumIncreasing(start) ++ WriteSignedNumIncreasing(length)
 * where a whole dimension is start 0, length -1. Returns 0 on allocation failure. */
int est_bundle_slice_key(est_pw_buf *b, const char *name, int rank, const est_bundle_extent *ext);

/* Slice i of `full` as TF's TensorSlice::DebugString prints it ("-:0,1"). */
void est_bundle_slice_text(const est_bundle_entry *full, int i, char *buf, size_t size);

/* Checks that the slices of partitioned `full` tile its shape: no two overlap (TF's
 * TensorSliceSet::Register) and together they hold every element (TF's QueryMeta).
 * Reads nothing; call it before allocating the full tensor. */
est_status est_bundle_slices_check(const est_bundle_entry *full, const char *what);

/* Reads e->size bytes of entry e (a slice's data) into dst, e.g. from its shard file. */
typedef est_status (*est_bundle_read_fn)(void *ctx, const est_bundle_entry *e, uint8_t *dst);

/* Assembles partitioned `full` into dst: for each slice, finds its entry, checks that it
 * is the slice's dtype and shape, reads it with `read`, checks its CRC (swapping a
 * big-endian bundle's numbers) and copies it into place. dst holds full->num_elements
 * elements: host-order numbers (est_bundle_dtype_size bytes each), or for DT_STRING
 * zeroed est_bytes that receive each string (free them with the tensor, also on error).
 * Never writes outside dst, whatever the index says; est_bundle_slices_check first. */
est_status est_bundle_assemble(const est_bundle_index *ix, const est_bundle_entry *full, void *dst,
                               est_bundle_read_fn read, void *ctx, const char *what);

/* Appends the `slices` fields (7) of a full-tensor entry as TF serializes them: an empty
 * Extent for a whole dimension, else start (omitted when 0) and length. Returns 0 on
 * allocation failure. */
int est_bundle_encode_slices(est_pw_buf *b, int rank, int num_slices, const est_bundle_extent *ext);

/* Encodes a BundleEntryProto the way TF does (proto3 defaults omitted, shape always
 * present). Returns 0 on allocation failure. */
int est_bundle_encode_entry(est_pw_buf *b, int dtype, int rank, const int64_t *dims, int32_t shard_id,
                            uint64_t offset, uint64_t size, uint32_t masked_crc);

/* Encodes a string tensor's data as WriteStringTensor does; *crc gets the entry's
 * unmasked CRC. Returns 0 on allocation failure. */
int est_bundle_encode_strings(est_pw_buf *b, const est_bytes *s, int64_t n, uint32_t *crc);

#endif
