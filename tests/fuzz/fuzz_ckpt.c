/* libFuzzer target: checkpoint .index parsing (SSTable blocks, snappy, BundleHeaderProto,
 * BundleEntryProto) and tensor decoding, all on memory buffers.
 * Invariants: whatever parses re-encodes (our SSTable builder, our entry encoder) into an
 * index that parses to the same entries; decoding never reads outside its bytes.
 * Each input runs twice: with checksums checked, and with mismatches ignored (io/fuzzing.h)
 * so that mutations inside CRC-protected blocks reach the block and entry parsers. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/bundle.h"
#include "io/fuzzing.h"

static void same_entry(const est_bundle_entry *a, const est_bundle_entry *b) {
  if (strcmp(a->name, b->name) || a->dtype != b->dtype || a->rank != b->rank || a->offset != b->offset ||
      a->size != b->size || a->masked_crc != b->masked_crc || a->shard_id != b->shard_id)
    abort();
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i]) abort();
}

/* Decodes every entry whose bytes lie inside `data` (the input doubles as a data shard). */
static void decode_entries(const est_bundle_index *ix, const uint8_t *data, size_t size) {
  for (size_t i = 0; i < ix->count; i++) {
    const est_bundle_entry *e = &ix->entries[i];
    if (e->has_slices || e->offset > size || e->size > size - e->offset) continue;
    uint8_t *copy = malloc(e->size ? (size_t)e->size : 1);
    memcpy(copy, data + e->offset, (size_t)e->size);
    if (e->dtype == EST_DT_STRING) {
      est_tensor t;
      if (est_bundle_decode_strings(e, copy, &t, "fuzz") == EST_OK) est_tensor_free(&t);
    } else if (est_bundle_dtype_size(e->dtype)) {
      (void)est_bundle_check_numeric(e, ix->big_endian, copy, "fuzz");
    }
    free(copy);
  }
}

static void one_pass(const uint8_t *data, size_t size) {
  est_bundle_index ix;
  if (est_bundle_index_parse(&ix, data, size, "fuzz") != EST_OK) return;
  decode_entries(&ix, data, size);

  /* Re-encode: header as parsed (shards, endianness, producer 1), entries via our encoder. */
  est_sstable_builder b;
  est_sstable_builder_init(&b, 256); /* small blocks: exercise separators */
  est_pw_buf v;
  est_pw_buf_init(&v);
  est_pw_put_varint_field(&v, 1, (uint64_t)ix.num_shards);
  if (ix.big_endian) est_pw_put_varint_field(&v, 2, 1);
  size_t m = est_pw_begin_sub(&v, 3);
  est_pw_put_varint_field(&v, 1, 1);
  est_pw_end_sub(&v, m);
  if (est_sstable_builder_add(&b, "", 0, v.data, v.size) != EST_OK) abort();
  for (size_t i = 0; i < ix.count; i++) {
    const est_bundle_entry *e = &ix.entries[i];
    if (e->has_slices) continue;
    v.size = 0;
    est_bundle_encode_entry(&v, e->dtype, e->rank, e->dims, e->shard_id, e->offset, e->size, e->masked_crc);
    if (est_sstable_builder_add(&b, e->name, strlen(e->name), v.data, v.size) != EST_OK) abort();
  }
  est_pw_buf_free(&v);
  uint8_t *out;
  size_t n;
  if (est_sstable_builder_finish(&b, &out, &n) != EST_OK) abort();
  est_bundle_index back;
  if (est_bundle_index_parse(&back, out, n, "fuzz-rebuilt") != EST_OK) abort();
  if (back.num_shards != ix.num_shards || back.big_endian != ix.big_endian) abort();
  size_t k = 0;
  for (size_t i = 0; i < ix.count; i++) {
    if (ix.entries[i].has_slices) continue;
    if (k >= back.count) abort();
    same_entry(&ix.entries[i], &back.entries[k++]);
  }
  if (k != back.count) abort();
  est_bundle_index_free(&back);
  free(out);
  est_bundle_index_free(&ix);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  est_fuzz_ignore_checksums = 0;
  one_pass(data, size);
  est_fuzz_ignore_checksums = 1;
  one_pass(data, size);
  return 0;
}
