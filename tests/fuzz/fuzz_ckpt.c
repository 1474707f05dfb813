/* libFuzzer target: checkpoint .index parsing (SSTable blocks, snappy, BundleHeaderProto,
 * BundleEntryProto, TensorSliceProto) and tensor decoding, all on memory buffers.
 * Invariants: whatever parses re-encodes (our SSTable builder, our entry encoder) into an
 * index that parses to the same entries; decoding never reads outside its bytes; a
 * partitioned variable whose slices pass the checks assembles to the tensor it was cut from.
 * Each input runs twice: with checksums checked, and with mismatches ignored (io/fuzzing.h)
 * so that mutations inside CRC-protected blocks reach the block and entry parsers. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "est/crc32c.h"
#include "io/bundle.h"
#include "io/fuzzing.h"

static void same_entry(const est_bundle_entry *a, const est_bundle_entry *b) {
  if (strcmp(a->name, b->name) || a->key_len != b->key_len || memcmp(a->key, b->key, a->key_len) ||
      a->dtype != b->dtype || a->rank != b->rank || a->offset != b->offset || a->size != b->size ||
      a->masked_crc != b->masked_crc || a->shard_id != b->shard_id || a->num_slices != b->num_slices)
    abort();
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i]) abort();
  size_t n = (size_t)a->num_slices * (size_t)a->rank;
  if (n && memcmp(a->slices, b->slices, n * sizeof *a->slices)) abort();
}

/* b's bytes from `offset` on; a buffer nothing was written to has data == NULL, and
 * NULL + 0 is undefined. */
static const uint8_t *bytes_at(const est_pw_buf *b, uint64_t offset) {
  return b->data ? b->data + offset : (const uint8_t *)"";
}

/* The input doubles as the data shard. */
typedef struct shard {
  const uint8_t *data;
  size_t size;
} shard;

static est_status read_shard(void *ctx, const est_bundle_entry *e, uint8_t *dst) {
  const shard *s = ctx;
  if (e->offset > s->size || e->size > s->size - e->offset)
    return est_error(EST_ERR_OUT_OF_RANGE, "'%s' lies outside the shard", e->name);
  if (e->size) memcpy(dst, s->data + e->offset, (size_t)e->size); /* data is NULL when empty */
  return EST_OK;
}

/* Assembles a partitioned variable of at most 1 MiB into a fresh buffer; returns it (or
 * NULL when the slices do not check out or do not read), freeing strings on the way. */
static void *assemble(const est_bundle_index *ix, const est_bundle_entry *e, const shard *s) {
  size_t esize = e->dtype == EST_DT_STRING ? sizeof(est_bytes) : est_bundle_dtype_size(e->dtype);
  if (!esize || (uint64_t)e->num_elements > (1u << 20) / esize) return NULL;
  /* A string entry's size is only bounded below: keep the reads' buffers inside the input. */
  if (e->dtype == EST_DT_STRING) {
    if (e->size > s->size) return NULL;
    for (size_t i = 0; i < ix->slice_count; i++)
      if (ix->slice_entries[i].size > s->size) return NULL;
  }
  if (est_bundle_slices_check(e, "fuzz") != EST_OK) return NULL;
  void *dst = calloc((size_t)e->num_elements ? (size_t)e->num_elements : 1, esize);
  est_status st = est_bundle_assemble(ix, e, dst, read_shard, (void *)s, "fuzz");
  if (e->dtype == EST_DT_STRING) {
    for (int64_t i = 0; i < e->num_elements; i++) free(((est_bytes *)dst)[i].data);
  }
  if (st != EST_OK) {
    free(dst);
    return NULL;
  }
  return dst;
}

/* Decodes every entry whose bytes lie inside the shard, and assembles every partitioned one. */
static void decode_entries(const est_bundle_index *ix, const uint8_t *data, size_t size) {
  shard s = {data, size};
  for (size_t i = 0; i < ix->count; i++) {
    const est_bundle_entry *e = &ix->entries[i];
    if (e->num_slices) {
      free(assemble(ix, e, &s));
      continue;
    }
    if (e->offset > size || e->size > size - e->offset) continue;
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

static int key_less(const est_bundle_entry *a, const est_bundle_entry *b) {
  int c = memcmp(a->key, b->key, a->key_len < b->key_len ? a->key_len : b->key_len);
  return c ? c < 0 : a->key_len < b->key_len;
}

static void one_pass(const uint8_t *data, size_t size) {
  est_bundle_index ix;
  if (est_bundle_index_parse(&ix, data, size, "fuzz") != EST_OK) return;
  decode_entries(&ix, data, size);

  /* Re-encode: header as parsed (shards, endianness, producer 1), entries via our encoder,
   * tensors and slice-data entries merged back into key order. */
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
  for (size_t i = 0, j = 0; i < ix.count || j < ix.slice_count;) {
    const est_bundle_entry *e;
    if (j == ix.slice_count || (i < ix.count && key_less(&ix.entries[i], &ix.slice_entries[j])))
      e = &ix.entries[i++];
    else
      e = &ix.slice_entries[j++];
    v.size = 0;
    est_bundle_encode_entry(&v, e->dtype, e->rank, e->dims, e->shard_id, e->offset, e->size, e->masked_crc);
    est_bundle_encode_slices(&v, e->rank, e->num_slices, e->slices);
    if (est_sstable_builder_add(&b, e->key, e->key_len, v.data, v.size) != EST_OK) abort();
  }
  est_pw_buf_free(&v);
  uint8_t *out;
  size_t n;
  if (est_sstable_builder_finish(&b, &out, &n) != EST_OK) abort();
  est_bundle_index back;
  if (est_bundle_index_parse(&back, out, n, "fuzz-rebuilt") != EST_OK) abort();
  if (back.num_shards != ix.num_shards || back.big_endian != ix.big_endian || back.count != ix.count ||
      back.slice_count != ix.slice_count)
    abort();
  for (size_t i = 0; i < ix.count; i++) same_entry(&ix.entries[i], &back.entries[i]);
  for (size_t i = 0; i < ix.slice_count; i++) same_entry(&ix.slice_entries[i], &back.slice_entries[i]);
  est_bundle_index_free(&back);
  free(out);
  est_bundle_index_free(&ix);
}

static int buf_cmp(const est_pw_buf *a, const est_pw_buf *b) {
  int c = memcmp(a->data, b->data, a->size < b->size ? a->size : b->size);
  return c ? c : (a->size > b->size) - (a->size < b->size);
}

/* A partitioned int32 variable built from the input's bytes: rank 0-3, dimensions 0-5,
 * 1-6 slices with arbitrary extents (some whole, some out of range), each slice's data
 * stored under its key (a whole slice's in the full entry, as TF reads it) unless a byte
 * says to leave it out. Element k holds k, so whenever the checks pass, assembling must
 * give back 0, 1, 2, ... Mutated indexes rarely grow slice keys that match; this reaches
 * the lookups, the coverage check and the strided copy on every input. */
static void synthetic_partitioned(const uint8_t *in, size_t size) {
  size_t at = 0;
#define NEXT() (at < size ? in[at++] : 0)
  int rank = NEXT() % 4, big = NEXT() & 1;
  int64_t dims[3] = {1, 1, 1}, total = 1;
  for (int d = 0; d < rank; d++) total *= dims[d] = NEXT() % 6;
  int nslices = NEXT() % 6 + 1;
  est_bundle_extent ext[6 * 3];
  int omit[6];
  for (int i = 0; i < nslices; i++) {
    omit[i] = NEXT() < 8;
    for (int d = 0; d < rank; d++) {
      uint8_t a = NEXT(), l = NEXT();
      est_bundle_extent *x = &ext[i * rank + d];
      x->start = a % 3 == 0 ? 0 : a % 8 - 1;  /* -1 .. 6: sometimes outside */
      x->length = a % 3 == 0 ? -1 : l % 8 - 1; /* -1 .. 6 */
    }
  }
#undef NEXT
  est_pw_buf keys[6], vals[6], shard_bytes, full;
  est_pw_buf_init(&shard_bytes);
  est_pw_buf_init(&full);
  int order[6], kept = 0, whole = -1;
  uint64_t whole_offset = 0, whole_size = 0;
  for (int i = 0; i < nslices; i++) {
    est_pw_buf_init(&keys[i]);
    est_pw_buf_init(&vals[i]);
    int64_t sdims[3];
    int fits = 1, is_whole = 1;
    for (int d = 0; d < rank; d++) {
      const est_bundle_extent *x = &ext[i * rank + d];
      sdims[d] = x->length == -1 ? dims[d] : x->length;
      fits &= x->length == -1 || (x->start >= 0 && x->length >= 0 && x->start + x->length <= dims[d]);
      is_whole &= x->length == -1;
    }
    if (omit[i] || !fits) continue;
    uint64_t offset = shard_bytes.size;
    for (int64_t k = 0; k < total; k++) { /* the elements inside the slice, in order */
      int64_t rest = k;
      int inside = 1;
      for (int d = rank - 1; d >= 0; d--) {
        int64_t pos = rest % dims[d];
        rest /= dims[d];
        const est_bundle_extent *x = &ext[i * rank + d];
        inside &= x->length == -1 || (pos >= x->start && pos < x->start + x->length);
      }
      uint8_t le[4] = {(uint8_t)k, (uint8_t)(k >> 8), 0, 0}, be[4] = {0, 0, (uint8_t)(k >> 8), (uint8_t)k};
      if (inside) est_pw_put_raw(&shard_bytes, big ? be : le, 4);
    }
    uint64_t nbytes = shard_bytes.size - offset;
    if (is_whole) {
      if (whole < 0) {
        whole = i;
        whole_offset = offset;
        whole_size = nbytes;
      }
      continue;
    }
    est_bundle_slice_key(&keys[i], "v", rank, &ext[i * rank]);
    est_bundle_encode_entry(&vals[i], EST_DT_INT32, rank, sdims, 0, offset, nbytes,
                            est_crc32c_mask(est_crc32c(bytes_at(&shard_bytes, offset), (size_t)nbytes)));
    int dup = 0, j = kept;
    for (int q = 0; q < kept; q++) dup |= !buf_cmp(&keys[order[q]], &keys[i]);
    if (dup) continue;
    while (j > 0 && buf_cmp(&keys[order[j - 1]], &keys[i]) > 0) {
      order[j] = order[j - 1];
      j--;
    }
    order[j] = i; /* slice keys start with 00: they sort before "v" */
    kept++;
  }
  uint32_t whole_crc = whole < 0 ? 0 : est_crc32c(bytes_at(&shard_bytes, whole_offset), (size_t)whole_size);
  est_bundle_encode_entry(&full, EST_DT_INT32, rank, dims, 0, whole_offset, whole_size,
                          whole < 0 ? 0 : est_crc32c_mask(whole_crc));
  est_bundle_encode_slices(&full, rank, nslices, ext);
  static const uint8_t le_hdr[] = {0x08, 0x01, 0x1a, 0x02, 0x08, 0x01};
  static const uint8_t be_hdr[] = {0x08, 0x01, 0x10, 0x01, 0x1a, 0x02, 0x08, 0x01};
  est_sstable_builder b;
  est_sstable_builder_init(&b, 0);
  if (est_sstable_builder_add(&b, "", 0, big ? be_hdr : le_hdr, big ? sizeof be_hdr : sizeof le_hdr) != EST_OK)
    abort();
  for (int q = 0; q < kept; q++)
    if (est_sstable_builder_add(&b, keys[order[q]].data, keys[order[q]].size, vals[order[q]].data,
                                vals[order[q]].size) != EST_OK)
      abort();
  if (est_sstable_builder_add(&b, "v", 1, full.data, full.size) != EST_OK) abort();
  uint8_t *index;
  size_t index_size;
  if (est_sstable_builder_finish(&b, &index, &index_size) != EST_OK) abort();
  est_bundle_index ix;
  if (est_bundle_index_parse(&ix, index, index_size, "synthetic") == EST_OK) {
    const est_bundle_entry *e = est_bundle_index_find(&ix, "v");
    shard s = {shard_bytes.data, shard_bytes.size};
    if (!e) abort();
    int32_t *got = assemble(&ix, e, &s);
    for (int64_t k = 0; got && k < total; k++)
      if (got[k] != (int32_t)k) abort();
    free(got);
    est_bundle_index_free(&ix);
  }
  free(index);
  for (int i = 0; i < nslices; i++) {
    est_pw_buf_free(&keys[i]);
    est_pw_buf_free(&vals[i]);
  }
  est_pw_buf_free(&shard_bytes);
  est_pw_buf_free(&full);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  est_fuzz_ignore_checksums = 0;
  one_pass(data, size);
  synthetic_partitioned(data, size);
  est_fuzz_ignore_checksums = 1;
  one_pass(data, size);
  return 0;
}
