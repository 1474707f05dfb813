/* Tensor-bundle index and entry encoding over memory buffers (docs/checkpoint.md §3-§5;
 * TF tensor_bundle.cc). Shared by the checkpoint reader, the writer and the fuzzer. */
#include "io/bundle.h"

#include <stdlib.h>
#include <string.h>

#include "est/crc32c.h"
#include "io/fuzzing.h"

/* kTensorBundleVersion / kTensorBundleMinProducer / kTensorBundleMinConsumer. */
enum { BUNDLE_VERSION = 1, BUNDLE_MIN_PRODUCER = 0 };
/* More shards than this is a corrupt header, not a real checkpoint. */
enum { MAX_SHARDS = 1 << 20 };
/* TensorShape::IsValid's limit on the number of dimensions. */
enum { MAX_TF_RANK = 254 };

size_t est_bundle_dtype_size(int dtype) {
  switch (dtype) {
  case 1: case 3: case 13: case 22: return 4;          /* float, int32, qint32, uint32 */
  case 2: case 8: case 9: case 23: return 8;           /* double, complex64, int64, uint64 */
  case 4: case 6: case 10: case 11: case 12: case 24: case 25: return 1; /* u8 i8 bool q8 fp8 */
  case 5: case 14: case 15: case 16: case 17: case 19: return 2;         /* i16 bf16 q16 u16 half */
  case 18: return 16;                                  /* complex128 */
  default: return 0;
  }
}

/* BundleHeaderProto {num_shards=1, endianness=2, version=3 {producer=1, min_consumer=2,
 * bad_consumers=3}} and TF's CheckVersions. */
static est_status parse_header(est_bundle_index *ix, const uint8_t *v, size_t n, const char *what) {
  est_pw_reader r = est_pw_reader_make(v, n);
  int64_t producer = 0, min_consumer = 0, num_shards = 0, endianness = 0;
  int bad_consumer = 0;
  while (!est_pw_eof(&r)) {
    uint32_t field, f2;
    int wt, wt2;
    uint64_t x;
    if (!est_pw_read_field(&r, &field, &wt, &x)) goto corrupt;
    if (field == 1 && wt == EST_PW_VARINT) {
      num_shards = (int32_t)x;
    } else if (field == 2 && wt == EST_PW_VARINT) {
      endianness = (int32_t)x;
    } else if (field == 3 && wt == EST_PW_LEN) {
      est_pw_reader sub;
      if (!est_pw_read_sub(&r, &sub)) goto corrupt;
      while (!est_pw_eof(&sub)) {
        if (!est_pw_read_field(&sub, &f2, &wt2, &x)) goto corrupt;
        if (f2 == 1 && wt2 == EST_PW_VARINT) {
          producer = (int32_t)x;
        } else if (f2 == 2 && wt2 == EST_PW_VARINT) {
          min_consumer = (int32_t)x;
        } else if (f2 == 3 && wt2 == EST_PW_VARINT) {
          if ((int32_t)x == BUNDLE_VERSION) bad_consumer = 1;
        } else if (f2 == 3 && wt2 == EST_PW_LEN) { /* packed bad_consumers */
          est_pw_reader packed;
          if (!est_pw_read_sub(&sub, &packed)) goto corrupt;
          while (!est_pw_eof(&packed)) {
            if (!est_pw_read_varint(&packed, &x)) goto corrupt;
            if ((int32_t)x == BUNDLE_VERSION) bad_consumer = 1;
          }
        } else if (f2 <= 3 || !est_pw_skip_rest(&sub, wt2)) {
          goto corrupt;
        }
      }
    } else if (field <= 3 || !est_pw_skip_rest(&r, wt)) {
      goto corrupt;
    }
  }
  if (producer < BUNDLE_MIN_PRODUCER)
    return est_error(EST_ERR_INVALID_ARGUMENT,
                     "%s: Checkpoint producer version %lld below min producer %d supported by "
                     "TensorFlow. Please upgrade TensorFlow.",
                     what, (long long)producer, BUNDLE_MIN_PRODUCER);
  if (min_consumer > BUNDLE_VERSION)
    return est_error(EST_ERR_INVALID_ARGUMENT,
                     "%s: Checkpoint min consumer version %lld above current version %d for "
                     "TensorFlow. Please upgrade TensorFlow.",
                     what, (long long)min_consumer, BUNDLE_VERSION);
  if (bad_consumer)
    return est_error(EST_ERR_INVALID_ARGUMENT,
                     "%s: Checkpoint disallows consumer version %d. Please upgrade TensorFlow.", what,
                     BUNDLE_VERSION);
  if (endianness != 0 && endianness != 1)
    return est_error(EST_ERR_DATA_LOSS, "%s: bundle header has unknown endianness %lld", what,
                     (long long)endianness);
  if (num_shards < 0 || num_shards > MAX_SHARDS)
    return est_error(EST_ERR_DATA_LOSS, "%s: bundle header has an implausible num_shards %lld", what,
                     (long long)num_shards);
  ix->num_shards = (int)num_shards;
  ix->big_endian = (int)endianness;
  return EST_OK;
corrupt:
  return est_error(EST_ERR_DATA_LOSS, "%s: corrupted checkpoint header (BundleHeaderProto)", what);
}

/* TensorShapeProto {dim=2 {size=1, name=2}, unknown_rank=3} with TensorShape::IsValid. */
static est_status parse_shape(est_bundle_entry *e, est_pw_reader *r, const char *what) {
  int rank = 0;
  int64_t elements = 1;
  while (!est_pw_eof(r)) {
    uint32_t field, f2;
    int wt, wt2;
    uint64_t x;
    if (!est_pw_read_field(r, &field, &wt, &x)) goto corrupt;
    if (field == 2 && wt == EST_PW_LEN) {
      est_pw_reader dim;
      int64_t size = 0;
      if (!est_pw_read_sub(r, &dim)) goto corrupt;
      while (!est_pw_eof(&dim)) {
        if (!est_pw_read_field(&dim, &f2, &wt2, &x)) goto corrupt;
        if (f2 == 1 && wt2 == EST_PW_VARINT) size = (int64_t)x;
        else if (f2 == 1 || !est_pw_skip_rest(&dim, wt2)) goto corrupt;
      }
      if (size < 0 || rank >= MAX_TF_RANK || __builtin_mul_overflow(elements, size, &elements))
        return est_error(EST_ERR_DATA_LOSS, "%s: Invalid tensor shape for '%s' (dimension %d is %lld)",
                         what, e->name, rank, (long long)size);
      if (rank < EST_MAX_RANK) e->dims[rank] = size;
      rank++;
    } else if (field == 3 && wt == EST_PW_VARINT) {
      if (x) return est_error(EST_ERR_DATA_LOSS, "%s: Invalid tensor shape for '%s' (unknown rank)", what,
                              e->name);
    } else if (field == 2 || field == 3 || !est_pw_skip_rest(r, wt)) {
      goto corrupt;
    }
  }
  if (rank > EST_MAX_RANK)
    return est_error(EST_ERR_UNIMPLEMENTED, "%s: tensor '%s' has rank %d; est supports at most %d", what,
                     e->name, rank, EST_MAX_RANK);
  e->rank = rank;
  e->num_elements = elements;
  return EST_OK;
corrupt:
  return est_error(EST_ERR_DATA_LOSS, "%s: corrupted shape in the entry of '%s'", what, e->name);
}

/* TensorSliceProto {extent=1 {start=1, oneof has_length {length=2}}} of slice `i` of
 * `e`, into ext[0..rank). Checked as TF's TensorSlice::BuildTensorSlice and
 * SliceTensorShape would: one extent per dimension; an extent without a length (or with
 * length -1, TF's kFullExtent) is the whole dimension and must start at 0; any other has
 * start >= 0, length > 0 and ends inside the dimension. */
static est_status parse_slice(const est_bundle_entry *e, int i, est_pw_reader *r, est_bundle_extent *ext,
                              const char *what) {
  int d = 0;
  while (!est_pw_eof(r)) {
    uint32_t field;
    int wt;
    if (!est_pw_read_tag(r, &field, &wt)) goto corrupt;
    if (field != 1 || wt != EST_PW_LEN) {
      if (field == 1 || !est_pw_skip(r, wt)) goto corrupt;
      continue;
    }
    est_pw_reader x;
    if (!est_pw_read_sub(r, &x)) goto corrupt;
    int64_t start = 0, length = -1;
    while (!est_pw_eof(&x)) {
      uint32_t f2;
      int wt2;
      uint64_t v;
      if (!est_pw_read_field(&x, &f2, &wt2, &v)) goto corrupt;
      if (f2 == 1 && wt2 == EST_PW_VARINT) start = (int64_t)v;
      else if (f2 == 2 && wt2 == EST_PW_VARINT) length = (int64_t)v;
      else if (f2 <= 2 || !est_pw_skip_rest(&x, wt2)) goto corrupt;
    }
    if (d < e->rank) {
      int64_t dim = e->dims[d];
      if (length == -1 && start != 0)
        return est_error(EST_ERR_DATA_LOSS,
                         "%s: slice %d of partitioned tensor '%s': extent %d has start %lld but no length", what,
                         i, e->name, d, (long long)start);
      if (length != -1 && (start < 0 || length <= 0 || start > dim || length > dim - start))
        return est_error(EST_ERR_DATA_LOSS,
                         "%s: slice %d of partitioned tensor '%s': extent %d (start %lld, length %lld) does not "
                         "fit dimension %d of size %lld (expected start >= 0, length > 0, start + length <= %lld)",
                         what, i, e->name, d, (long long)start, (long long)length, d, (long long)dim,
                         (long long)dim);
      ext[d].start = start;
      ext[d].length = length;
    }
    d++;
  }
  if (d != e->rank)
    return est_error(EST_ERR_DATA_LOSS, "%s: slice %d of partitioned tensor '%s' has %d extents; expected %d, its rank",
                     what, i, e->name, d, e->rank);
  return EST_OK;
corrupt:
  return est_error(EST_ERR_DATA_LOSS, "%s: corrupted slice %d (TensorSliceProto) in the entry of '%s'", what, i,
                   e->name);
}

/* Every `slices` field (7) of the entry's bytes, counted by parse_entry, into e->slices. */
static est_status parse_slices(est_bundle_entry *e, const uint8_t *v, size_t n, const char *what) {
  size_t per = e->rank > 0 ? (size_t)e->rank : 1;
  est_bundle_extent *ext = calloc((size_t)e->num_slices * per, sizeof *ext);
  if (!ext) return est_error(EST_ERR_NO_MEMORY, "%s: out of memory for the slices of '%s'", what, e->name);
  est_pw_reader r = est_pw_reader_make(v, n);
  int i = 0;
  while (!est_pw_eof(&r) && i < e->num_slices) {
    uint32_t field;
    int wt;
    est_pw_reader slice;
    if (!est_pw_read_tag(&r, &field, &wt)) break;
    if (field == 7 && wt == EST_PW_LEN) {
      if (!est_pw_read_sub(&r, &slice)) break;
      est_status st = parse_slice(e, i, &slice, ext + (size_t)i * per, what);
      if (st != EST_OK) {
        free(ext);
        return st;
      }
      i++;
    } else if (!est_pw_skip(&r, wt)) {
      break;
    }
  }
  if (i != e->num_slices) { /* parse_entry read every field, so this cannot happen */
    free(ext);
    return est_error(EST_ERR_DATA_LOSS, "%s: corrupted entry (BundleEntryProto) for '%s'", what, e->name);
  }
  e->slices = ext;
  return EST_OK;
}

/* A slice that is whole in every dimension (TensorSlice::IsFull): TF's GetSliceValue
 * then reads the full-tensor entry's own offset/size/crc32c instead of a slice key. */
static int has_full_slice(const est_bundle_entry *e) {
  for (int i = 0; i < e->num_slices; i++) {
    int full = 1;
    for (int d = 0; d < e->rank; d++) full &= e->slices[(size_t)i * (size_t)e->rank + (size_t)d].length == -1;
    if (full) return 1;
  }
  return 0;
}

/* The checks TF makes before reading an entry's data: its shard exists and its size
 * fits its dtype and shape. */
static est_status check_data(const est_bundle_index *ix, est_bundle_entry *e, int64_t shard, const char *what) {
  if (shard < 0 || shard >= ix->num_shards)
    return est_error(EST_ERR_DATA_LOSS, "%s: entry '%s' names shard %lld of %d", what, e->name,
                     (long long)shard, ix->num_shards);
  e->shard_id = (int32_t)shard;
  size_t esize = est_bundle_dtype_size(e->dtype);
  if (esize) {
    uint64_t want;
    if (__builtin_mul_overflow((uint64_t)e->num_elements, (uint64_t)esize, &want) || want != e->size)
      return est_error(EST_ERR_DATA_LOSS,
                       "%s: Invalid size in bundle entry: key '%s'; stored size %llu; expected size "
                       "%lld x %zu bytes",
                       what, e->name, (unsigned long long)e->size, (long long)e->num_elements, esize);
  } else if (e->dtype == EST_DT_STRING) {
    /* At least one varint byte per string plus the 4-byte length checksum. */
    if (e->size < (uint64_t)e->num_elements + 4)
      return est_error(EST_ERR_DATA_LOSS,
                       "%s: Invalid size in bundle entry: key '%s'; %llu bytes cannot hold %lld strings",
                       what, e->name, (unsigned long long)e->size, (long long)e->num_elements);
  }
  return EST_OK;
}

/* BundleEntryProto {dtype=1, shape=2, shard_id=3, offset=4, size=5, crc32c=6 (fixed32),
 * slices=7}, then the checks TF makes before reading. On success e->slices may own
 * memory (est_bundle_index_free frees it); on failure it owns none. */
static est_status parse_entry(est_bundle_index *ix, est_bundle_entry *e, const uint8_t *v, size_t n,
                              const char *what) {
  est_pw_reader r = est_pw_reader_make(v, n);
  int64_t offset = 0, size = 0, shard = 0;
  int has_shape = 0;
  while (!est_pw_eof(&r)) {
    uint32_t field;
    int wt;
    uint64_t x;
    if (!est_pw_read_field(&r, &field, &wt, &x)) goto corrupt;
    if (field == 1 && wt == EST_PW_VARINT) {
      e->dtype = (int)(int32_t)x;
    } else if (field == 2 && wt == EST_PW_LEN) {
      est_pw_reader shape;
      if (!est_pw_read_sub(&r, &shape)) goto corrupt;
      est_status st = parse_shape(e, &shape, what);
      if (st != EST_OK) return st;
      has_shape = 1;
    } else if (field == 3 && wt == EST_PW_VARINT) {
      shard = (int32_t)x;
    } else if (field == 4 && wt == EST_PW_VARINT) {
      offset = (int64_t)x;
    } else if (field == 5 && wt == EST_PW_VARINT) {
      size = (int64_t)x;
    } else if (field == 6 && wt == EST_PW_FIXED32) {
      if (!est_pw_read_fixed32(&r, &e->masked_crc)) goto corrupt;
    } else if (field == 7 && wt == EST_PW_LEN) {
      /* Counted here, parsed once the shape is known (fields may come in any order). */
      const uint8_t *d;
      size_t len;
      if (!est_pw_read_bytes(&r, &d, &len) || e->num_slices == INT32_MAX) goto corrupt;
      e->num_slices++;
    } else if (field <= 7 || !est_pw_skip_rest(&r, wt)) {
      goto corrupt;
    }
  }
  if (!has_shape) {
    e->rank = 0; /* proto3: an absent shape reads as a scalar, as in TF */
    e->num_elements = 1;
  }
  if (e->dtype <= 0 || e->dtype >= 100)
    return est_error(EST_ERR_DATA_LOSS, "%s: entry '%s' has invalid dtype %d", what, e->name, e->dtype);
  if (offset < 0 || size < 0 || (uint64_t)offset > UINT64_MAX - (uint64_t)size)
    return est_error(EST_ERR_DATA_LOSS, "%s: entry '%s' has invalid offset %lld / size %lld", what,
                     e->name, (long long)offset, (long long)size);
  e->offset = (uint64_t)offset;
  e->size = (uint64_t)size;
  if (e->num_slices) {
    est_status st = parse_slices(e, v, n, what);
    if (st != EST_OK) return st;
    /* The full-tensor entry has no data of its own (no shard, offset, size or crc32c),
     * unless one slice is whole: then its data is this entry's. */
    if (!has_full_slice(e)) return EST_OK;
    st = check_data(ix, e, shard, what);
    if (st != EST_OK) {
      free(e->slices);
      e->slices = NULL;
    }
    return st;
  }
  return check_data(ix, e, shard, what);
corrupt:
  return est_error(EST_ERR_DATA_LOSS, "%s: corrupted entry (BundleEntryProto) for '%s'", what, e->name);
}

/* A key as text for messages: printable ASCII kept, every other byte (and the backslash)
 * as \xNN. `out` has room for 4 * n + 1 bytes. */
static size_t escape_key(const uint8_t *k, size_t n, char *out) {
  static const char hexdig[] = "0123456789abcdef";
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    if (k[i] >= 0x20 && k[i] < 0x7f && k[i] != '\\') {
      out[o++] = (char)k[i];
    } else {
      out[o++] = '\\';
      out[o++] = 'x';
      out[o++] = hexdig[k[i] >> 4];
      out[o++] = hexdig[k[i] & 15];
    }
  }
  out[o] = 0;
  return o + 1;
}

est_status est_bundle_index_parse(est_bundle_index *ix, const uint8_t *data, size_t size,
                                  const char *what) {
  memset(ix, 0, sizeof *ix);
  est_status st = est_sstable_parse(&ix->table, data, size, what);
  if (st != EST_OK) return st;
  const est_sstable *t = &ix->table;
  /* The empty key sorts first, so the header is entry 0 when present. */
  if (t->count == 0 || t->key_lens[0] != 0) {
    st = est_error(EST_ERR_DATA_LOSS, "%s: checkpoint index has no header entry (empty key)", what);
    goto fail;
  }
  st = parse_header(ix, t->values[0], t->value_lens[0], what);
  if (st != EST_OK) goto fail;
  /* Keys holding a NUL are the ordered-code keys of partitioned-variable slices (they all
   * start with WriteNumIncreasing(0) = 00). A C string cannot name them, and TF's
   * list_variables skips them, so they go to their own array, named by a printable copy. */
  size_t nslices = 0, name_bytes = 0;
  for (size_t i = 1; i < t->count; i++)
    if (memchr(t->keys[i], 0, t->key_lens[i])) {
      nslices++;
      name_bytes += 4 * t->key_lens[i] + 1;
    }
  ix->entries = calloc(t->count, sizeof *ix->entries);
  ix->slice_entries = calloc(nslices ? nslices : 1, sizeof *ix->slice_entries);
  ix->slice_names = malloc(name_bytes ? name_bytes : 1);
  if (!ix->entries || !ix->slice_entries || !ix->slice_names) {
    st = est_error(EST_ERR_NO_MEMORY, "%s: out of memory", what);
    goto fail;
  }
  size_t name_pos = 0;
  for (size_t i = 1; i < t->count; i++) {
    est_bundle_entry *e;
    int slice_key = memchr(t->keys[i], 0, t->key_lens[i]) != NULL;
    if (slice_key) {
      e = &ix->slice_entries[ix->slice_count];
      e->name = ix->slice_names + name_pos;
      name_pos += escape_key(t->keys[i], t->key_lens[i], ix->slice_names + name_pos);
    } else {
      e = &ix->entries[ix->count];
      e->name = (const char *)t->keys[i]; /* NUL-terminated by the sstable parser */
    }
    e->key = t->keys[i];
    e->key_len = t->key_lens[i];
    st = parse_entry(ix, e, t->values[i], t->value_lens[i], what);
    if (st != EST_OK) goto fail;
    if (slice_key) ix->slice_count++;
    else ix->count++;
  }
  return EST_OK;
fail:
  est_bundle_index_free(ix);
  return st;
}

void est_bundle_index_free(est_bundle_index *ix) {
  if (!ix) return;
  for (size_t i = 0; i < ix->count; i++) free(ix->entries[i].slices);
  for (size_t i = 0; i < ix->slice_count; i++) free(ix->slice_entries[i].slices);
  free(ix->entries);
  free(ix->slice_entries);
  free(ix->slice_names);
  est_sstable_free(&ix->table);
  memset(ix, 0, sizeof *ix);
}

const est_bundle_entry *est_bundle_index_find(const est_bundle_index *ix, const char *name) {
  size_t lo = 0, hi = ix->count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = strcmp(ix->entries[mid].name, name);
    if (c == 0) return &ix->entries[mid];
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  return NULL;
}

/* Bytewise key order (memcmp, a shorter prefix first), as the SSTable sorts keys. */
static int key_cmp(const uint8_t *a, size_t an, const uint8_t *b, size_t bn) {
  int c = memcmp(a, b, an < bn ? an : bn);
  return c ? c : (an > bn) - (an < bn);
}

const est_bundle_entry *est_bundle_index_find_key(const est_bundle_index *ix, const void *key,
                                                  size_t key_len) {
  int slice = key_len && memchr(key, 0, key_len);
  const est_bundle_entry *v = slice ? ix->slice_entries : ix->entries;
  size_t lo = 0, hi = slice ? ix->slice_count : ix->count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = key_cmp(v[mid].key, v[mid].key_len, key, key_len);
    if (c == 0) return &v[mid];
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  return NULL;
}

static void swap_bytes(uint8_t *p, uint64_t n, size_t esize) {
  for (uint64_t i = 0; i + esize <= n; i += esize)
    for (size_t a = 0, b = esize - 1; a < b; a++, b--) {
      uint8_t t = p[i + a];
      p[i + a] = p[i + b];
      p[i + b] = t;
    }
}

est_status est_bundle_check_numeric(const est_bundle_entry *e, int big_endian, uint8_t *bytes,
                                    const char *what) {
  uint32_t actual = est_crc32c(bytes, (size_t)e->size);
  uint32_t stored = est_crc32c_unmask(e->masked_crc);
  if (EST_CHECKSUM_MISMATCH(stored, actual))
    return est_error(EST_ERR_DATA_LOSS,
                     "%s: Checksum does not match for '%s': stored %u vs. calculated on the restored "
                     "bytes %u",
                     what, e->name, stored, actual);
  /* The CRC covers the bytes as stored; swap only afterwards. */
  int host_big = __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__;
  size_t esize = est_bundle_dtype_size(e->dtype);
  if (big_endian != host_big && esize > 1) {
    if (e->dtype == 8 || e->dtype == 18) esize /= 2; /* complex: two floats per element */
    swap_bytes(bytes, e->size, esize);
  }
  return EST_OK;
}

/* Each length is fed to the length checksum as a little-endian uint32, or uint64 when it
 * does not fit (WriteStringTensor). */
static uint32_t extend_length(uint32_t crc, uint64_t len) {
  uint8_t b[8];
  est_pw_encode_fixed64(b, len);
  return est_crc32c_extend(crc, b, len > 0xffffffffu ? 8 : 4);
}

est_status est_bundle_decode_strings(const est_bundle_entry *e, const uint8_t *bytes, est_tensor *out,
                                     const char *what) {
  memset(out, 0, sizeof *out);
  est_status st = est_tensor_alloc(out, EST_DT_STRING, e->rank, e->dims);
  if (st != EST_OK) return st;
  est_bytes *s = out->data;
  int64_t n = e->num_elements;
  est_pw_reader r = est_pw_reader_make(bytes, (size_t)e->size);
  uint32_t crc = 0;
  for (int64_t i = 0; i < n; i++) {
    uint64_t len;
    if (!est_pw_read_varint(&r, &len)) {
      st = est_error(EST_ERR_DATA_LOSS, "%s: bad length of string %lld in '%s'", what, (long long)i, e->name);
      goto fail;
    }
    s[i].size = (size_t)len; /* checked against the bytes left below */
    crc = extend_length(crc, len);
  }
  uint32_t stored_len_crc;
  if (!est_pw_read_fixed32(&r, &stored_len_crc)) {
    st = est_error(EST_ERR_DATA_LOSS, "%s: string tensor '%s' is cut before its length checksum", what,
                   e->name);
    goto fail;
  }
  if (EST_CHECKSUM_MISMATCH(stored_len_crc, est_crc32c_mask(crc))) {
    st = est_error(EST_ERR_DATA_LOSS,
                   "%s: The length checksum does not match for '%s': expected 0x%08x, got 0x%08x", what,
                   e->name, est_crc32c_mask(crc), stored_len_crc);
    goto fail;
  }
  crc = est_crc32c_extend(crc, r.pos - 4, 4);
  for (int64_t i = 0; i < n; i++) {
    size_t len = s[i].size;
    s[i].size = 0;
    if (len > est_pw_left(&r)) {
      st = est_error(EST_ERR_DATA_LOSS, "%s: string %lld of '%s' (%zu bytes) runs past the entry's %llu bytes",
                     what, (long long)i, e->name, len, (unsigned long long)e->size);
      goto fail;
    }
    /* +1 keeps every element NUL-terminated for callers that print it. */
    s[i].data = malloc(len + 1);
    if (!s[i].data) {
      st = est_error(EST_ERR_NO_MEMORY, "%s: out of memory for string %lld of '%s'", what, (long long)i,
                     e->name);
      goto fail;
    }
    memcpy(s[i].data, r.pos, len);
    s[i].data[len] = 0;
    s[i].size = len;
    crc = est_crc32c_extend(crc, r.pos, len);
    r.pos += len;
  }
  if (!est_pw_eof(&r)) {
    st = est_error(EST_ERR_DATA_LOSS, "%s: string tensor '%s' has %zu unexplained bytes at its end", what,
                   e->name, est_pw_left(&r));
    goto fail;
  }
  if (crc != est_crc32c_unmask(e->masked_crc)) {
    st = est_error(EST_ERR_DATA_LOSS,
                   "%s: Checksum does not match for '%s': stored %u vs. calculated on the restored "
                   "bytes %u",
                   what, e->name, est_crc32c_unmask(e->masked_crc), crc);
    goto fail;
  }
  return EST_OK;
fail:
  est_tensor_free(out); /* frees the elements copied so far */
  return st;
}

int est_bundle_encode_entry(est_pw_buf *b, int dtype, int rank, const int64_t *dims, int32_t shard_id,
                            uint64_t offset, uint64_t size, uint32_t masked_crc) {
  est_pw_put_varint_field(b, 1, (uint64_t)dtype);
  size_t shape = est_pw_begin_sub(b, 2);
  for (int i = 0; i < rank; i++) {
    size_t dim = est_pw_begin_sub(b, 2);
    if (dims[i]) est_pw_put_varint_field(b, 1, (uint64_t)dims[i]);
    est_pw_end_sub(b, dim);
  }
  est_pw_end_sub(b, shape);
  if (shard_id) est_pw_put_varint_field(b, 3, (uint64_t)shard_id);
  if (offset) est_pw_put_varint_field(b, 4, offset);
  if (size) est_pw_put_varint_field(b, 5, size);
  if (masked_crc) est_pw_put_fixed32_field(b, 6, masked_crc);
  return !b->failed;
}

int est_bundle_encode_strings(est_pw_buf *b, const est_bytes *s, int64_t n, uint32_t *crc) {
  uint32_t c = 0;
  for (int64_t i = 0; i < n; i++) {
    est_pw_put_varint(b, s[i].size);
    c = extend_length(c, s[i].size);
  }
  uint8_t masked[4];
  est_pw_encode_fixed32(masked, est_crc32c_mask(c));
  est_pw_put_raw(b, masked, 4);
  c = est_crc32c_extend(c, masked, 4);
  for (int64_t i = 0; i < n; i++) {
    est_pw_put_raw(b, s[i].data, s[i].size);
    c = est_crc32c_extend(c, s[i].data, s[i].size);
  }
  *crc = c;
  return !b->failed;
}
