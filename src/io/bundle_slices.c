/* Partitioned variables in a tensor bundle: the slice keys, the checks that the slices
 * tile the tensor, and assembling the full tensor from them (docs/checkpoint.md §4; TF's
 * BundleReader::GetSliceValue in tensor_bundle.cc).
 *
 * A variable saved in parts (tf.compat.v1.get_variable with a partitioner, or
 * BundleWriter::AddSlice) is stored as one full-tensor entry under its name, holding
 * dtype, FULL shape and one TensorSliceProto per part, plus one ordinary entry per part,
 * of the part's shape, under the key checkpoint::EncodeTensorNameSlice(name, slice).
 * E.g. a [5,10] float saved as "-:0,1" (column 0) and "-:1,9" (columns 1-9):
 *
 *     "foo"                            dtype 1, shape [5,10], slices {-:0,1}, {-:1,9}
 *     00 'f' 'o' 'o' 00 01 01 02 80 7f 80 81   dtype 1, shape [5,1], offset, size 20, crc
 *     00 'f' 'o' 'o' 00 01 01 02 80 7f 81 89   dtype 1, shape [5,9], offset, size 180, crc
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/bundle.h"

/* ---- the key: ordered_code.cc's increasing encodings ------------------------------- */

/* WriteString: 00 -> 00 ff, ff -> ff 00, other bytes as they are, then the separator 00 01. */
static void put_ordered_string(est_pw_buf *b, const char *s) {
  for (const uint8_t *p = (const uint8_t *)s; *p; p++) {
    uint8_t esc[2] = {*p, (uint8_t)(*p == 0xff ? 0x00 : 0xff)};
    est_pw_put_raw(b, esc, *p == 0x00 || *p == 0xff ? 2 : 1);
  }
  static const uint8_t sep[2] = {0x00, 0x01};
  est_pw_put_raw(b, sep, 2);
}

/* WriteNumIncreasing: one length byte, then the value big-endian without leading zero
 * bytes (0 is the single byte 00). */
static void put_num_increasing(est_pw_buf *b, uint64_t v) {
  uint8_t buf[9];
  int n = 0;
  for (uint64_t x = v; x; x >>= 8) n++;
  buf[0] = (uint8_t)n;
  for (int i = 0; i < n; i++) buf[1 + i] = (uint8_t)(v >> (8 * (n - 1 - i)));
  est_pw_put_raw(b, buf, (size_t)n + 1);
}

/* WriteSignedNumIncreasing: the value in `len` bytes, big-endian two's complement, whose
 * leading bits are replaced by a header: the sign bit inverted, then len-1 more copies of
 * it, then one bit of the opposite value. So header + value take len bytes when the
 * value's magnitude (v, or ~v when negative) has at most 7*len - 1 bits, i.e.
 * len = bits / 7 + 1 (1..10). Examples from ordered_code.cc: 0 -> 80, -1 -> 7f,
 * 64 -> c0 40, 0x424242 -> f0 42 42 42, -0x800 -> 38 00. */
static void put_signed_increasing(est_pw_buf *b, int64_t v) {
  uint64_t u = (uint64_t)v;
  uint64_t mag = v < 0 ? ~u : u;
  int bits = mag ? 64 - __builtin_clzll(mag) : 0;
  int len = bits / 7 + 1;
  uint8_t buf[10];
  buf[0] = buf[1] = v < 0 ? 0xff : 0x00; /* sign extension to 80 bits */
  for (int i = 0; i < 8; i++) buf[2 + i] = (uint8_t)(u >> (56 - 8 * i));
  /* `len` one-bits then a zero, over the first two bytes (the second only when len > 1).
   * XOR flips a negative value's leading ones into zeros, giving the inverted form. */
  unsigned header = (0xffffu << (16 - len)) & 0xffffu;
  uint8_t *p = buf + 10 - len;
  p[0] ^= (uint8_t)(header >> 8);
  if (len > 1) p[1] ^= (uint8_t)header;
  est_pw_put_raw(b, p, (size_t)len);
}

int est_bundle_slice_key(est_pw_buf *b, const char *name, int rank, const est_bundle_extent *ext) {
  put_num_increasing(b, 0); /* every slice key starts with 0 */
  put_ordered_string(b, name);
  put_num_increasing(b, (uint64_t)rank);
  for (int d = 0; d < rank; d++) {
    put_signed_increasing(b, ext[d].start);
    put_signed_increasing(b, ext[d].length);
  }
  return !b->failed;
}

/* ---- slice geometry ---------------------------------------------------------------- */

static const est_bundle_extent *slice_of(const est_bundle_entry *full, int i) {
  return full->slices + (size_t)i * (size_t)full->rank;
}

/* Start and length of slice i in dimension d, a whole dimension resolved. */
static int64_t ext_start(const est_bundle_entry *full, int i, int d) { return slice_of(full, i)[d].start; }
static int64_t ext_length(const est_bundle_entry *full, int i, int d) {
  int64_t l = slice_of(full, i)[d].length;
  return l == -1 ? full->dims[d] : l;
}

static int64_t slice_elements(const est_bundle_entry *full, int i) {
  int64_t n = 1;
  for (int d = 0; d < full->rank; d++) n *= ext_length(full, i, d); /* <= the full count */
  return n;
}

static int is_whole(const est_bundle_entry *full, int i) {
  for (int d = 0; d < full->rank; d++)
    if (slice_of(full, i)[d].length != -1) return 0;
  return 1;
}

void est_bundle_slice_text(const est_bundle_entry *full, int i, char *buf, size_t size) {
  size_t n = 0;
  buf[0] = 0;
  for (int d = 0; d < full->rank && n < size; d++) {
    const est_bundle_extent *x = &slice_of(full, i)[d];
    int w = x->length == -1 ? snprintf(buf + n, size - n, "%s-", d ? ":" : "")
                            : snprintf(buf + n, size - n, "%s%lld,%lld", d ? ":" : "", (long long)x->start,
                                       (long long)x->length);
    if (w < 0) break;
    n += (size_t)w;
  }
}

/* TF's TensorSlice::Intersect: two slices overlap when in every dimension either one is
 * whole or their ranges share an element. */
static int overlap(const est_bundle_entry *full, int i, int j) {
  for (int d = 0; d < full->rank; d++) {
    const est_bundle_extent *a = &slice_of(full, i)[d], *b = &slice_of(full, j)[d];
    if (a->length == -1 || b->length == -1) continue;
    int64_t lo = a->start > b->start ? a->start : b->start;
    int64_t ea = a->start + a->length, eb = b->start + b->length; /* no overflow: inside dims */
    if ((ea < eb ? ea : eb) - lo <= 0) return 0;
  }
  return 1;
}

est_status est_bundle_slices_check(const est_bundle_entry *full, const char *what) {
  char a[512], b[512];
  int64_t covered = 0;
  for (int i = 0; i < full->num_slices; i++) {
    for (int j = 0; j < i; j++)
      if (overlap(full, i, j)) {
        est_bundle_slice_text(full, j, a, sizeof a);
        est_bundle_slice_text(full, i, b, sizeof b);
        return est_error(EST_ERR_DATA_LOSS, "%s: partitioned tensor '%s' has overlapping slices %s and %s", what,
                         full->name, a, b);
      }
    covered += slice_elements(full, i); /* disjoint slices inside the shape: no overflow */
  }
  /* Disjoint slices cover the tensor exactly when their sizes add up to it. TF refuses
   * the same way (QueryMeta finds too few elements: "Does not have sufficient slices");
   * either way, no element is left unwritten. */
  if (covered != full->num_elements)
    return est_error(EST_ERR_INVALID_ARGUMENT,
                     "%s: Does not have sufficient slices for partitioned tensor '%s': its %d slices hold %lld of "
                     "its %lld elements",
                     what, full->name, full->num_slices, (long long)covered, (long long)full->num_elements);
  return EST_OK;
}

/* The entry holding slice i's data: under its slice key, or the full entry itself for a
 * slice whole in every dimension (as GetSliceValue does; parse_entry checked that entry's
 * size then). Its dtype and shape must be the slice's, or copying it would go wrong. */
static est_status slice_entry(const est_bundle_index *ix, const est_bundle_entry *full, int i,
                              const est_bundle_entry **out, const char *what) {
  char text[512];
  est_bundle_slice_text(full, i, text, sizeof text);
  if (is_whole(full, i)) {
    *out = full;
    return EST_OK;
  }
  est_pw_buf key;
  est_pw_buf_init(&key);
  if (!est_bundle_slice_key(&key, full->name, full->rank, slice_of(full, i))) {
    est_pw_buf_free(&key);
    return est_error(EST_ERR_NO_MEMORY, "%s: out of memory for a slice key of '%s'", what, full->name);
  }
  const est_bundle_entry *e = est_bundle_index_find_key(ix, key.data, key.size);
  est_pw_buf_free(&key);
  /* TF reports NOT_FOUND for the slice key; here the tensor itself exists, and it is the
   * index that lacks a part of it. */
  if (!e)
    return est_error(EST_ERR_DATA_LOSS, "%s: partitioned tensor '%s' lacks the entry of its slice %s", what,
                     full->name, text);
  int same = e->dtype == full->dtype && e->rank == full->rank && e->num_slices == 0;
  for (int d = 0; same && d < full->rank; d++) same = e->dims[d] == ext_length(full, i, d);
  if (!same) {
    est_tensor want = {.rank = full->rank}, got = {.rank = e->rank};
    for (int d = 0; d < full->rank; d++) want.dims[d] = ext_length(full, i, d);
    memcpy(got.dims, e->dims, sizeof got.dims);
    char ws[128], gs[128];
    est_shape_string(&want, ws, sizeof ws);
    est_shape_string(&got, gs, sizeof gs);
    return est_error(EST_ERR_DATA_LOSS,
                     "%s: slice %s of partitioned tensor '%s' is stored as dtype %d %s%s; expected dtype %d %s", what,
                     text, full->name, e->dtype, gs, e->num_slices ? " (itself partitioned)" : "", full->dtype, ws);
  }
  *out = e;
  return EST_OK;
}

/* Copies slice i's elements (row-major in the slice's shape, esize bytes each) from src
 * to their places in the full tensor dst. Trailing dimensions the slice spans whole are
 * contiguous in both, so each memcpy moves one block of them: one memcpy in all for a
 * tensor partitioned along axis 0, the usual case. */
static void copy_slice(const est_bundle_entry *full, int i, const uint8_t *src, uint8_t *dst, size_t esize) {
  int rank = full->rank;
  if (slice_elements(full, i) == 0) return;
  if (rank == 0) {
    memcpy(dst, src, esize);
    return;
  }
  int64_t stride[EST_MAX_RANK];
  stride[rank - 1] = 1;
  for (int d = rank - 2; d >= 0; d--) stride[d] = stride[d + 1] * full->dims[d + 1];
  int k = rank - 1; /* dimensions k+1.. are whole in the slice */
  while (k > 0 && ext_start(full, i, k) == 0 && ext_length(full, i, k) == full->dims[k]) k--;
  size_t block = (size_t)(ext_length(full, i, k) * stride[k]) * esize;
  int64_t idx[EST_MAX_RANK] = {0}; /* position in dimensions 0..k-1 of the slice */
  for (;;) {
    int64_t at = ext_start(full, i, k) * stride[k];
    for (int d = 0; d < k; d++) at += (ext_start(full, i, d) + idx[d]) * stride[d];
    memcpy(dst + (size_t)at * esize, src, block);
    src += block;
    int d = k - 1;
    while (d >= 0 && ++idx[d] == ext_length(full, i, d)) idx[d--] = 0;
    if (d < 0) break;
  }
}

est_status est_bundle_assemble(const est_bundle_index *ix, const est_bundle_entry *full, void *dst,
                               est_bundle_read_fn read, void *ctx, const char *what) {
  int strings = full->dtype == EST_DT_STRING;
  size_t esize = strings ? sizeof(est_bytes) : est_bundle_dtype_size(full->dtype);
  if (!esize)
    return est_error(EST_ERR_UNIMPLEMENTED, "%s: '%s' has TF dtype %d, which est does not read", what, full->name,
                     full->dtype);
  for (int i = 0; i < full->num_slices; i++) {
    const est_bundle_entry *e = NULL;
    est_status st = slice_entry(ix, full, i, &e, what);
    if (st != EST_OK) return st;
    /* The slice's entry under a readable name, for the messages of the reads below. */
    char text[512], name[1024];
    est_bundle_slice_text(full, i, text, sizeof text);
    snprintf(name, sizeof name, "%s (slice %s)", full->name, text);
    est_bundle_entry named = *e;
    named.name = name;
    uint8_t *buf = malloc(e->size ? (size_t)e->size : 1);
    if (!buf) return est_error(EST_ERR_NO_MEMORY, "%s: out of memory reading '%s'", what, name);
    st = read(ctx, &named, buf);
    if (st == EST_OK && strings) {
      est_tensor part;
      st = est_bundle_decode_strings(&named, buf, &part, what);
      if (st == EST_OK) {
        /* Move the strings: the full tensor owns them now, the part only its array. */
        copy_slice(full, i, part.data, dst, esize);
        memset(part.data, 0, (size_t)named.num_elements * esize);
        est_tensor_free(&part);
      }
    } else if (st == EST_OK) {
      st = est_bundle_check_numeric(&named, ix->big_endian, buf, what);
      if (st == EST_OK) copy_slice(full, i, buf, dst, esize);
    }
    free(buf);
    if (st != EST_OK) return st;
  }
  return EST_OK;
}

int est_bundle_encode_slices(est_pw_buf *b, int rank, int num_slices, const est_bundle_extent *ext) {
  for (int i = 0; i < num_slices; i++) {
    size_t slice = est_pw_begin_sub(b, 7);
    for (int d = 0; d < rank; d++) {
      const est_bundle_extent *x = &ext[(size_t)i * (size_t)rank + (size_t)d];
      size_t extent = est_pw_begin_sub(b, 1);
      if (x->length != -1) {
        if (x->start) est_pw_put_varint_field(b, 1, (uint64_t)x->start);
        est_pw_put_varint_field(b, 2, (uint64_t)x->length);
      }
      est_pw_end_sub(b, extent);
    }
    est_pw_end_sub(b, slice);
  }
  return !b->failed;
}
