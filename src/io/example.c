/* tf.train.Example as a plain struct: build, deterministic serialization, generic parse.
 * (Parsing against feature specs, the hot path, lives in example_parse.c.) */
#include <stdlib.h>
#include <string.h>

#include "est/example.h"
#include "io/example_internal.h"
#include "io/protowire.h"

void est_example_init(est_example *ex) { memset(ex, 0, sizeof *ex); }

static void feature_free_values(est_feature *f) {
  free(f->int64s);
  free(f->floats);
  if (f->bytes)
    for (size_t i = 0; i < f->count; i++) free(f->bytes[i].data);
  free(f->bytes);
  f->int64s = NULL;
  f->floats = NULL;
  f->bytes = NULL;
  f->count = 0;
  f->kind = EST_FEATURE_NONE;
}

void est_example_clear(est_example *ex) {
  for (size_t i = 0; i < ex->count; i++) {
    feature_free_values(&ex->features[i]);
    free(ex->features[i].key);
  }
  free(ex->features);
  memset(ex, 0, sizeof *ex);
}

static int key_cmp(const uint8_t *a, size_t an, const uint8_t *b, size_t bn) {
  int c = memcmp(a, b, an < bn ? an : bn);
  if (c) return c;
  return an < bn ? -1 : an > bn;
}

/* Binary search; returns the index of the key or where it would be inserted. */
static size_t lower_bound(const est_example *ex, const uint8_t *key, size_t n, int *found) {
  size_t lo = 0, hi = ex->count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = key_cmp((const uint8_t *)ex->features[mid].key, ex->features[mid].key_size, key, n);
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  *found = lo < ex->count && ex->features[lo].key_size == n && !memcmp(ex->features[lo].key, key, n);
  return lo;
}

est_feature *est_example_slot(est_example *ex, const uint8_t *key, size_t n) {
  int found;
  size_t i = lower_bound(ex, key, n, &found);
  if (found) {
    feature_free_values(&ex->features[i]);
    return &ex->features[i];
  }
  char *k = malloc(n + 1);
  if (!k) return NULL;
  if (n) memcpy(k, key, n);
  k[n] = 0;
  if (ex->count == ex->cap) {
    size_t ncap = ex->cap ? ex->cap * 2 : 8;
    est_feature *nf = realloc(ex->features, ncap * sizeof *nf);
    if (!nf) {
      free(k);
      return NULL;
    }
    ex->features = nf;
    ex->cap = ncap;
  }
  memmove(&ex->features[i + 1], &ex->features[i], (ex->count - i) * sizeof *ex->features);
  ex->count++;
  est_feature *f = &ex->features[i];
  memset(f, 0, sizeof *f);
  f->key = k;
  f->key_size = n;
  return f;
}

static est_feature *slot_or_error(est_example *ex, const char *key) {
  est_feature *f = est_example_slot(ex, (const uint8_t *)key, strlen(key));
  if (!f) est_error(EST_ERR_NO_MEMORY, "example: out of memory adding feature '%s'", key);
  return f;
}

/* A numeric feature: its slot, kind and a copy of the n values of `size` bytes each. */
static est_status set_numeric(est_example *ex, const char *key, est_feature_kind kind, const void *v, size_t n,
                              size_t size) {
  est_feature *f = slot_or_error(ex, key);
  if (!f) return EST_ERR_NO_MEMORY;
  void *copy = malloc(n ? n * size : 1);
  if (!copy) return est_error(EST_ERR_NO_MEMORY, "example: out of memory for '%s'", key);
  if (n && v) memcpy(copy, v, n * size); /* v NULL: the caller fills the values */
  f->kind = kind;
  if (kind == EST_FEATURE_INT64) f->int64s = copy;
  else f->floats = copy;
  f->count = n;
  return EST_OK;
}

est_status est_example_set_int64(est_example *ex, const char *key, const int64_t *v, size_t n) {
  return set_numeric(ex, key, EST_FEATURE_INT64, v, n, sizeof *v);
}

est_status est_example_set_int32(est_example *ex, const char *key, const int32_t *v, size_t n) {
  est_status st = set_numeric(ex, key, EST_FEATURE_INT64, NULL, n, sizeof(int64_t));
  if (st != EST_OK) return st;
  const est_feature *f = est_example_find(ex, key);
  for (size_t i = 0; i < n; i++) f->int64s[i] = v[i];
  return EST_OK;
}

est_status est_example_set_float(est_example *ex, const char *key, const float *v, size_t n) {
  return set_numeric(ex, key, EST_FEATURE_FLOAT, v, n, sizeof *v);
}

est_status est_example_set_bytes(est_example *ex, const char *key, const est_bytes *v, size_t n) {
  est_feature *f = slot_or_error(ex, key);
  if (!f) return EST_ERR_NO_MEMORY;
  f->kind = EST_FEATURE_BYTES;
  f->bytes = calloc(n ? n : 1, sizeof *f->bytes);
  if (!f->bytes) return est_error(EST_ERR_NO_MEMORY, "example: out of memory for '%s'", key);
  for (size_t i = 0; i < n; i++) {
    f->bytes[i].data = malloc(v[i].size ? v[i].size : 1);
    if (!f->bytes[i].data) {
      f->count = i;
      return est_error(EST_ERR_NO_MEMORY, "example: out of memory for '%s'", key);
    }
    if (v[i].size) memcpy(f->bytes[i].data, v[i].data, v[i].size);
    f->bytes[i].size = v[i].size;
  }
  f->count = n;
  return EST_OK;
}

est_status est_example_set_none(est_example *ex, const char *key) {
  return slot_or_error(ex, key) ? EST_OK : EST_ERR_NO_MEMORY;
}

const est_feature *est_example_find(const est_example *ex, const char *key) {
  int found;
  size_t i = lower_bound(ex, (const uint8_t *)key, strlen(key), &found);
  return found ? &ex->features[i] : NULL;
}

/* Feature message body: oneof bytes_list=1 / float_list=2 / int64_list=3. */
static void put_feature(est_pw_buf *b, const est_feature *f) {
  size_t m, m2;
  switch (f->kind) {
    case EST_FEATURE_BYTES:
      m = est_pw_begin_sub(b, 1);
      for (size_t i = 0; i < f->count; i++) est_pw_put_bytes_field(b, 1, f->bytes[i].data, f->bytes[i].size);
      est_pw_end_sub(b, m);
      break;
    case EST_FEATURE_FLOAT:
      m = est_pw_begin_sub(b, 2);
      if (f->count) { /* packed: one run of little-endian IEEE floats */
        est_pw_put_tag(b, 1, EST_PW_LEN);
        est_pw_put_varint(b, 4 * (uint64_t)f->count);
        for (size_t i = 0; i < f->count; i++) {
          uint32_t u;
          memcpy(&u, &f->floats[i], 4);
          est_pw_put_fixed32(b, u);
        }
      }
      est_pw_end_sub(b, m);
      break;
    case EST_FEATURE_INT64:
      m = est_pw_begin_sub(b, 3);
      if (f->count) { /* packed varints; negatives take 10 bytes (two's complement) */
        m2 = est_pw_begin_sub(b, 1);
        for (size_t i = 0; i < f->count; i++) est_pw_put_varint(b, (uint64_t)f->int64s[i]);
        est_pw_end_sub(b, m2);
      }
      est_pw_end_sub(b, m);
      break;
    case EST_FEATURE_NONE: break;
  }
}

est_status est_example_serialize(const est_example *ex, uint8_t **out, size_t *size) {
  est_pw_buf b;
  est_pw_buf_init(&b);
  size_t features = est_pw_begin_sub(&b, 1); /* Example.features */
  for (size_t i = 0; i < ex->count; i++) {   /* already in key order */
    const est_feature *f = &ex->features[i];
    size_t entry = est_pw_begin_sub(&b, 1);  /* map entry: key = 1, value = 2, both always */
    est_pw_put_bytes_field(&b, 1, f->key, f->key_size);
    size_t value = est_pw_begin_sub(&b, 2);
    put_feature(&b, f);
    est_pw_end_sub(&b, value);
    est_pw_end_sub(&b, entry);
  }
  est_pw_end_sub(&b, features);
  if (b.failed) {
    est_pw_buf_free(&b);
    return est_error(EST_ERR_NO_MEMORY, "example: out of memory serializing %zu features", ex->count);
  }
  *out = est_pw_buf_release(&b, size);
  return EST_OK;
}

est_status est_example_write(est_tfrecord_writer *w, const est_example *ex) {
  uint8_t *bytes = NULL;
  size_t n = 0;
  est_status st = est_example_serialize(ex, &bytes, &n);
  if (st == EST_OK) st = est_tfrecord_writer_write(w, bytes, n);
  free(bytes);
  return st;
}

/* ---- generic parse (protobuf semantics, for tools and tests) ---------------------- */

void est_example_escape(char *dst, size_t cap, const uint8_t *data, size_t size) {
  static const char hex[] = "0123456789abcdef";
  size_t o = 0, limit = 64;
  for (size_t i = 0; i < size && i < limit && o + 8 < cap; i++) {
    uint8_t c = data[i];
    if (c == '\\' || c == '\'') {
      dst[o++] = '\\';
      dst[o++] = (char)c;
    } else if (c >= 0x20 && c < 0x7f) {
      dst[o++] = (char)c;
    } else {
      dst[o++] = '\\';
      dst[o++] = 'x';
      dst[o++] = hex[c >> 4];
      dst[o++] = hex[c & 15];
    }
  }
  if (size > limit && o + 4 < cap) {
    memcpy(dst + o, "...", 3);
    o += 3;
  }
  dst[o] = 0;
}

static est_status bad_example(const uint8_t *data, size_t size, const uint8_t *at, const char *why) {
  char esc[300];
  est_example_escape(esc, sizeof esc, data, size);
  return est_error(EST_ERR_INVALID_ARGUMENT, "Could not parse example input, value: '%s' (%s at byte %zu)", esc, why,
                   (size_t)(at - data));
}

/* Appends n values to a growing array. */
static int grow(void **arr, size_t *cap, size_t count, size_t more, size_t elem) {
  if (count + more <= *cap) return 1;
  size_t ncap = *cap ? *cap : 8;
  while (ncap < count + more) ncap *= 2;
  void *p = realloc(*arr, ncap * elem);
  if (!p) return 0;
  *arr = p;
  *cap = ncap;
  return 1;
}

/* Parses a Feature message into f (protobuf semantics: the last oneof field wins,
 * packed and unpacked runs both append, unknown fields are skipped). Returns a reason
 * on failure, NULL on success. */
static const char *parse_feature(est_feature *f, est_pw_reader r, const uint8_t **at) {
  size_t cap = 0;
  while (!est_pw_eof(&r)) {
    uint32_t field;
    int wt;
    *at = r.pos;
    if (!est_pw_read_tag(&r, &field, &wt)) return "bad tag in Feature";
    if (field < 1 || field > 3 || wt != EST_PW_LEN) {
      if (!est_pw_skip(&r, wt)) return "bad field in Feature";
      continue;
    }
    est_pw_reader list;
    if (!est_pw_read_sub(&r, &list)) return "list overruns Feature";
    feature_free_values(f);
    cap = 0;
    f->kind = field == 1 ? EST_FEATURE_BYTES : field == 2 ? EST_FEATURE_FLOAT : EST_FEATURE_INT64;
    while (!est_pw_eof(&list)) {
      uint32_t lf;
      int lwt;
      *at = list.pos;
      if (!est_pw_read_tag(&list, &lf, &lwt)) return "bad tag in list";
      if (lf != 1) {
        if (!est_pw_skip(&list, lwt)) return "bad field in list";
        continue;
      }
      if (f->kind == EST_FEATURE_BYTES) {
        const uint8_t *d;
        size_t n;
        if (lwt != EST_PW_LEN || !est_pw_read_bytes(&list, &d, &n)) return "bad bytes_list value";
        if (!grow((void **)&f->bytes, &cap, f->count, 1, sizeof *f->bytes)) return "out of memory";
        f->bytes[f->count].data = malloc(n ? n : 1);
        if (!f->bytes[f->count].data) return "out of memory";
        if (n) memcpy(f->bytes[f->count].data, d, n);
        f->bytes[f->count++].size = n;
      } else if (f->kind == EST_FEATURE_FLOAT) {
        uint32_t u;
        if (lwt == EST_PW_FIXED32) {
          if (!est_pw_read_fixed32(&list, &u)) return "truncated float";
          if (!grow((void **)&f->floats, &cap, f->count, 1, sizeof(float))) return "out of memory";
          f->floats[f->count++] = est_pw_float_from_bits(u);
        } else if (lwt == EST_PW_LEN) {
          est_pw_reader packed;
          if (!est_pw_read_sub(&list, &packed) || est_pw_left(&packed) % 4) return "bad packed float_list";
          size_t n = est_pw_left(&packed) / 4;
          if (!grow((void **)&f->floats, &cap, f->count, n, sizeof(float))) return "out of memory";
          while (est_pw_read_fixed32(&packed, &u)) f->floats[f->count++] = est_pw_float_from_bits(u);
        } else {
          return "bad float_list wire type";
        }
      } else {
        uint64_t v;
        if (lwt == EST_PW_VARINT) {
          if (!est_pw_read_varint(&list, &v)) return "bad varint";
          if (!grow((void **)&f->int64s, &cap, f->count, 1, sizeof(int64_t))) return "out of memory";
          f->int64s[f->count++] = (int64_t)v;
        } else if (lwt == EST_PW_LEN) {
          est_pw_reader packed;
          if (!est_pw_read_sub(&list, &packed)) return "bad packed int64_list";
          while (!est_pw_eof(&packed)) {
            *at = packed.pos;
            if (!est_pw_read_varint(&packed, &v)) return "bad varint in packed int64_list";
            if (!grow((void **)&f->int64s, &cap, f->count, 1, sizeof(int64_t))) return "out of memory";
            f->int64s[f->count++] = (int64_t)v;
          }
        } else {
          return "bad int64_list wire type";
        }
      }
    }
    /* an empty list still needs a non-NULL array so callers can tell the kind */
    if (f->count == 0) {
      void **arr = f->kind == EST_FEATURE_BYTES ? (void **)&f->bytes
                   : f->kind == EST_FEATURE_FLOAT ? (void **)&f->floats : (void **)&f->int64s;
      if (!*arr && !(*arr = malloc(1))) return "out of memory";
    }
  }
  return NULL;
}

int est_example_next_entry(est_pw_reader *features, const uint8_t **key, size_t *key_size,
                           const uint8_t **value, size_t *value_size) {
  uint32_t field;
  int wt;
  est_pw_reader entry;
  /* Features holds only map entries (field 1); TF's fast parser rejects anything else. */
  if (!est_pw_read_tag(features, &field, &wt) || field != 1 || wt != EST_PW_LEN) return 0;
  if (!est_pw_read_sub(features, &entry)) return 0;
  int have_key = 0, have_value = 0;
  while (!est_pw_eof(&entry)) {
    if (!est_pw_read_tag(&entry, &field, &wt) || wt != EST_PW_LEN) return 0;
    if (field == 1 && !have_key) {
      if (!est_pw_read_bytes(&entry, key, key_size)) return 0;
      have_key = 1;
    } else if (field == 2 && !have_value) {
      if (!est_pw_read_bytes(&entry, value, value_size)) return 0;
      have_value = 1;
    } else {
      return 0; /* a third field or a repeated one */
    }
  }
  return have_key && have_value;
}

est_status est_example_parse(est_example *ex, const uint8_t *data, size_t size) {
  est_example_clear(ex);
  est_pw_reader r = est_pw_reader_make(data, size);
  while (!est_pw_eof(&r)) {
    const uint8_t *at = r.pos;
    uint32_t field;
    int wt;
    if (!est_pw_read_tag(&r, &field, &wt)) return bad_example(data, size, at, "bad tag");
    if (field != 1 || wt != EST_PW_LEN) { /* unknown top-level field: skipped, as TF */
      if (!est_pw_skip(&r, wt)) return bad_example(data, size, at, "bad unknown field");
      continue;
    }
    est_pw_reader features;
    if (!est_pw_read_sub(&r, &features)) return bad_example(data, size, at, "features overrun the input");
    while (!est_pw_eof(&features)) {
      const uint8_t *key, *value;
      size_t key_size, value_size;
      at = features.pos;
      if (!est_example_next_entry(&features, &key, &key_size, &value, &value_size))
        return bad_example(data, size, at, "bad feature map entry");
      /* concatenated Examples merge: a later entry for the same key replaces it */
      est_feature *f = est_example_slot(ex, key, key_size);
      if (!f) return est_error(EST_ERR_NO_MEMORY, "example: out of memory");
      const char *why = parse_feature(f, est_pw_reader_make(value, value_size), &at);
      if (why) return bad_example(data, size, at, why);
    }
  }
  return EST_OK;
}
