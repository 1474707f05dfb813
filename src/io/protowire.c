/* Protobuf wire-format helpers: skipping unknown fields and the growable writer. */
#include "io/protowire.h"

#include <stdlib.h>

int est_pw_skip(est_pw_reader *r, int wt) {
  uint64_t v;
  const uint8_t *d;
  size_t n;
  switch (wt) {
    case EST_PW_VARINT: return est_pw_read_varint(r, &v);
    case EST_PW_FIXED64: return est_pw_read_fixed64(r, &v);
    case EST_PW_LEN: return est_pw_read_bytes(r, &d, &n);
    case EST_PW_FIXED32: {
      uint32_t u;
      return est_pw_read_fixed32(r, &u);
    }
    default: return 0; /* groups (3, 4) and the unused types 6, 7 */
  }
}

void est_pw_buf_init(est_pw_buf *b) { memset(b, 0, sizeof *b); }

void est_pw_buf_free(est_pw_buf *b) {
  free(b->data);
  memset(b, 0, sizeof *b);
}

uint8_t *est_pw_buf_reserve(est_pw_buf *b, size_t n) {
  if (b->failed) return NULL;
  if (n > SIZE_MAX / 2 - b->size) {
    b->failed = 1;
    return NULL;
  }
  if (b->size + n > b->cap) {
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->size + n) cap *= 2;
    uint8_t *d = realloc(b->data, cap);
    if (!d) {
      b->failed = 1;
      return NULL;
    }
    b->data = d;
    b->cap = cap;
  }
  return b->data + b->size;
}

uint8_t *est_pw_buf_release(est_pw_buf *b, size_t *size) {
  uint8_t *d = b->data;
  *size = b->size;
  /* An empty message is still a valid (non-NULL) allocation for the caller to free. */
  if (!d) d = malloc(1);
  memset(b, 0, sizeof *b);
  return d;
}

void est_pw_put_raw(est_pw_buf *b, const void *data, size_t n) {
  uint8_t *p = est_pw_buf_reserve(b, n);
  if (!p) return;
  if (n) memcpy(p, data, n);
  b->size += n;
}

void est_pw_put_varint(est_pw_buf *b, uint64_t v) {
  uint8_t *p = est_pw_buf_reserve(b, 10);
  if (!p) return;
  b->size = (size_t)(est_pw_encode_varint(p, v) - b->data);
}

void est_pw_put_tag(est_pw_buf *b, uint32_t field, int wire_type) {
  est_pw_put_varint(b, (uint64_t)field << 3 | (uint64_t)wire_type);
}

void est_pw_put_fixed32(est_pw_buf *b, uint32_t v) {
  uint8_t *p = est_pw_buf_reserve(b, 4);
  if (!p) return;
  est_pw_encode_fixed32(p, v);
  b->size += 4;
}

void est_pw_put_fixed64(est_pw_buf *b, uint64_t v) {
  uint8_t *p = est_pw_buf_reserve(b, 8);
  if (!p) return;
  est_pw_encode_fixed64(p, v);
  b->size += 8;
}

void est_pw_put_varint_field(est_pw_buf *b, uint32_t field, uint64_t v) {
  est_pw_put_tag(b, field, EST_PW_VARINT);
  est_pw_put_varint(b, v);
}

void est_pw_put_fixed32_field(est_pw_buf *b, uint32_t field, uint32_t v) {
  est_pw_put_tag(b, field, EST_PW_FIXED32);
  est_pw_put_fixed32(b, v);
}

void est_pw_put_fixed64_field(est_pw_buf *b, uint32_t field, uint64_t v) {
  est_pw_put_tag(b, field, EST_PW_FIXED64);
  est_pw_put_fixed64(b, v);
}

void est_pw_put_float_field(est_pw_buf *b, uint32_t field, float v) {
  uint32_t u;
  memcpy(&u, &v, 4);
  est_pw_put_fixed32_field(b, field, u);
}

void est_pw_put_double_field(est_pw_buf *b, uint32_t field, double v) {
  uint64_t u;
  memcpy(&u, &v, 8);
  est_pw_put_fixed64_field(b, field, u);
}

void est_pw_put_bytes_field(est_pw_buf *b, uint32_t field, const void *data, size_t n) {
  est_pw_put_tag(b, field, EST_PW_LEN);
  est_pw_put_varint(b, n);
  est_pw_put_raw(b, data, n);
}

size_t est_pw_begin_sub(est_pw_buf *b, uint32_t field) {
  est_pw_put_tag(b, field, EST_PW_LEN);
  return b->size;
}

void est_pw_end_sub(est_pw_buf *b, size_t mark) {
  if (b->failed) return;
  size_t len = b->size - mark;
  size_t lsize = est_pw_varint_size(len);
  if (!est_pw_buf_reserve(b, lsize)) return;
  /* Shift the body right to make room for its length prefix. */
  memmove(b->data + mark + lsize, b->data + mark, len);
  est_pw_encode_varint(b->data + mark, len);
  b->size += lsize;
}
