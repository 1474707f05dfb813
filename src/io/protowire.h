/* protowire.h — protobuf wire-format primitives with bounds checks (internal to libest).
 *
 * Used by tf.train.Example, TensorBoard events and the checkpoint bundle protos. Readers
 * never trust a length: every read checks it against `end` and reports failure by
 * returning 0, leaving the caller to word the error with its own context (file, record,
 * field). Writers append to a growable buffer; an allocation failure sticks in
 * `buf->failed` so a serializer can check once at the end.
 *
 *     est_pw_reader r = est_pw_reader_make(data, size);
 *     uint32_t field; int wt;
 *     while (!est_pw_eof(&r)) {
 *       if (!est_pw_read_tag(&r, &field, &wt)) return bad();
 *       if (field == 1 && wt == EST_PW_LEN) { est_pw_reader sub; if (!est_pw_read_sub(&r, &sub)) ...}
 *       else if (!est_pw_skip(&r, wt)) return bad();
 *     }
 *
 *     est_pw_buf b; est_pw_buf_init(&b);
 *     size_t m = est_pw_begin_sub(&b, 1);      // tag of field 1, length filled in later
 *     est_pw_put_varint_field(&b, 2, 7);
 *     est_pw_end_sub(&b, m);                   // inserts the minimal length varint
 *     if (b.failed) ...; use b.data/b.size; est_pw_buf_free(&b);
 *
 * Wire format (docs/encoding.md §1, §4): tag = field<<3 | wire type, little-endian fixed32/64,
 * LEB128 varints of at most 10 bytes.
 */
#ifndef EST_IO_PROTOWIRE_H
#define EST_IO_PROTOWIRE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum {
  EST_PW_VARINT = 0,
  EST_PW_FIXED64 = 1,
  EST_PW_LEN = 2,
  EST_PW_SGROUP = 3, /* groups: never used by the messages we read; rejected */
  EST_PW_EGROUP = 4,
  EST_PW_FIXED32 = 5,
};

/* ---- reading ---------------------------------------------------------------------- */

typedef struct est_pw_reader {
  const uint8_t *pos;
  const uint8_t *end;
} est_pw_reader;

static inline est_pw_reader est_pw_reader_make(const void *data, size_t size) {
  est_pw_reader r;
  r.pos = (const uint8_t *)data;
  r.end = r.pos + size;
  return r;
}

static inline int est_pw_eof(const est_pw_reader *r) { return r->pos >= r->end; }
static inline size_t est_pw_left(const est_pw_reader *r) { return (size_t)(r->end - r->pos); }

/* A varint of at most 10 bytes; the 10th byte may only carry bit 63 (values above
 * 2^64 are malformed, as protobuf's parser says). */
static inline int est_pw_read_varint(est_pw_reader *r, uint64_t *v) {
  const uint8_t *p = r->pos;
  if (p < r->end && p[0] < 0x80) { /* fast path: one byte */
    *v = p[0];
    r->pos = p + 1;
    return 1;
  }
  uint64_t x = 0;
  for (int i = 0; i < 10; i++) {
    if (p >= r->end) return 0;
    uint8_t b = *p++;
    if (i == 9 && b > 1) return 0;
    x |= (uint64_t)(b & 0x7f) << (7 * i);
    if (b < 0x80) {
      *v = x;
      r->pos = p;
      return 1;
    }
  }
  return 0;
}

/* Like protobuf's ReadVarint32: reads a varint64 and keeps the low 32 bits. */
static inline int est_pw_read_varint32(est_pw_reader *r, uint32_t *v) {
  uint64_t x;
  if (!est_pw_read_varint(r, &x)) return 0;
  *v = (uint32_t)x;
  return 1;
}

static inline int est_pw_read_fixed32(est_pw_reader *r, uint32_t *v) {
  if (est_pw_left(r) < 4) return 0;
  const uint8_t *p = r->pos;
  *v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
  r->pos += 4;
  return 1;
}

static inline int est_pw_read_fixed64(est_pw_reader *r, uint64_t *v) {
  if (est_pw_left(r) < 8) return 0;
  uint64_t x = 0;
  for (int i = 7; i >= 0; i--) x = x << 8 | r->pos[i];
  *v = x;
  r->pos += 8;
  return 1;
}

/* Reads a tag; field number 0 and numbers above 2^29-1 are malformed. */
static inline int est_pw_read_tag(est_pw_reader *r, uint32_t *field, int *wire_type) {
  uint64_t t;
  if (!est_pw_read_varint(r, &t) || t > 0xffffffffu) return 0;
  *field = (uint32_t)(t >> 3);
  *wire_type = (int)(t & 7);
  return *field != 0;
}

/* A tag and, when its wire type is VARINT, the value as well (*varint; 0 otherwise): a loop
 * over a message whose fields are mostly varints then tests field and wire type and uses the
 * value. A field it does not know goes to est_pw_skip_rest, which has nothing left to skip
 * for a varint. */
static inline int est_pw_read_field(est_pw_reader *r, uint32_t *field, int *wire_type, uint64_t *varint) {
  *varint = 0;
  if (!est_pw_read_tag(r, field, wire_type)) return 0;
  return *wire_type != EST_PW_VARINT || est_pw_read_varint(r, varint);
}

/* A length-delimited payload: varint length, then that many bytes (checked). */
static inline int est_pw_read_bytes(est_pw_reader *r, const uint8_t **data, size_t *size) {
  uint64_t n;
  if (!est_pw_read_varint(r, &n) || n > est_pw_left(r)) return 0;
  *data = r->pos;
  *size = (size_t)n;
  r->pos += n;
  return 1;
}

/* A length-delimited payload as a sub-reader (for nested messages). */
static inline int est_pw_read_sub(est_pw_reader *r, est_pw_reader *sub) {
  const uint8_t *d;
  size_t n;
  if (!est_pw_read_bytes(r, &d, &n)) return 0;
  *sub = est_pw_reader_make(d, n);
  return 1;
}

/* Skips the value of a field of wire type `wt`; groups and unknown types fail. */
int est_pw_skip(est_pw_reader *r, int wt);
/* After est_pw_read_field: skips what is left of a field (nothing for a varint). */
static inline int est_pw_skip_rest(est_pw_reader *r, int wt) { return wt == EST_PW_VARINT || est_pw_skip(r, wt); }

/* Bit casts for fixed32 floats / fixed64 doubles and zigzag (sint32/64). */
static inline float est_pw_float_from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline double est_pw_double_from_bits(uint64_t u) {
  double d;
  memcpy(&d, &u, 8);
  return d;
}
static inline int64_t est_pw_zigzag_decode(uint64_t v) { return (int64_t)(v >> 1) ^ -(int64_t)(v & 1); }
static inline uint64_t est_pw_zigzag_encode(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }

/* ---- writing ---------------------------------------------------------------------- */

/* Bytes a varint takes (1..10). */
static inline size_t est_pw_varint_size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    n++;
  }
  return n;
}

/* Encodes a varint at p (room for 10 bytes); returns the byte after it. */
static inline uint8_t *est_pw_encode_varint(uint8_t *p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *p++ = (uint8_t)v;
  return p;
}

static inline void est_pw_encode_fixed32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16);
  p[3] = (uint8_t)(v >> 24);
}

static inline void est_pw_encode_fixed64(uint8_t *p, uint64_t v) {
  est_pw_encode_fixed32(p, (uint32_t)v);
  est_pw_encode_fixed32(p + 4, (uint32_t)(v >> 32));
}

static inline uint32_t est_pw_decode_fixed32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t est_pw_decode_fixed64(const uint8_t *p) {
  return (uint64_t)est_pw_decode_fixed32(p + 4) << 32 | est_pw_decode_fixed32(p);
}

/* A growable output buffer. `failed` becomes 1 on the first allocation failure and
 * every later put is then a no-op. */
typedef struct est_pw_buf {
  uint8_t *data;
  size_t size;
  size_t cap;
  int failed;
} est_pw_buf;

void est_pw_buf_init(est_pw_buf *b);
void est_pw_buf_free(est_pw_buf *b);
/* Makes room for `n` more bytes; returns a pointer to write them at, or NULL. The
 * caller then adds what it wrote to b->size. */
uint8_t *est_pw_buf_reserve(est_pw_buf *b, size_t n);
/* Hands the bytes to the caller (who frees them with free()) and resets b. */
uint8_t *est_pw_buf_release(est_pw_buf *b, size_t *size);

void est_pw_put_raw(est_pw_buf *b, const void *data, size_t n);
void est_pw_put_varint(est_pw_buf *b, uint64_t v);
void est_pw_put_tag(est_pw_buf *b, uint32_t field, int wire_type);
void est_pw_put_fixed32(est_pw_buf *b, uint32_t v);
void est_pw_put_fixed64(est_pw_buf *b, uint64_t v);

/* Whole fields: tag + value. Proto3 default omission is the caller's choice. */
void est_pw_put_varint_field(est_pw_buf *b, uint32_t field, uint64_t v);
void est_pw_put_fixed32_field(est_pw_buf *b, uint32_t field, uint32_t v);
void est_pw_put_fixed64_field(est_pw_buf *b, uint32_t field, uint64_t v);
void est_pw_put_float_field(est_pw_buf *b, uint32_t field, float v);
void est_pw_put_double_field(est_pw_buf *b, uint32_t field, double v);
void est_pw_put_bytes_field(est_pw_buf *b, uint32_t field, const void *data, size_t n);
static inline void est_pw_put_string_field(est_pw_buf *b, uint32_t field, const char *s) {
  est_pw_put_bytes_field(b, field, s, strlen(s));
}

/* Nested message of unknown size: begin writes the tag and returns a mark; end
 * inserts the (minimal) length varint at the mark. Nesting is fine. */
size_t est_pw_begin_sub(est_pw_buf *b, uint32_t field);
void est_pw_end_sub(est_pw_buf *b, size_t mark);

#endif
