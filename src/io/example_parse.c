/* Parsing a serialized Example against feature specs, as tf.io.parse_single_example
 * (TF's FastParseSingleExample in example_proto_fast_parsing.cc, re-implemented).
 *
 * One pass over the Example finds, for every spec, the serialized Feature of the last
 * map entry with that key whose Feature has a kind set (a kind-less Feature counts as
 * missing, so it does not hide an earlier one). A second step decodes just those
 * Features straight into the caller's buffers. Nothing is allocated for fixed-length
 * features; error texts are TF's, word for word. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/example.h"
#include "io/example_internal.h"
#include "io/protowire.h"

/* DataTypeString() of the three dtypes an Example can hold. */
static const char *tf_type_name(est_dtype t) {
  switch (t) {
    case EST_DT_INT64: return "int64";
    case EST_DT_FLOAT: return "float";
    case EST_DT_STRING: return "string";
    default: return est_dtype_name(t) ? est_dtype_name(t) : "invalid";
  }
}

static const char *list_name(est_dtype t) {
  return t == EST_DT_INT64 ? "int64_list" : t == EST_DT_FLOAT ? "float_list" : "bytes_list";
}

static size_t elem_size(est_dtype t) {
  return t == EST_DT_INT64 ? sizeof(int64_t) : t == EST_DT_FLOAT ? sizeof(float) : sizeof(est_bytes);
}

static est_status spec_error(const char *desc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static est_status spec_error(const char *desc, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (desc) return est_error(EST_ERR_INVALID_ARGUMENT, "%s: %s", desc, msg);
  return est_error(EST_ERR_INVALID_ARGUMENT, "%s", msg);
}

static void shape_string(char *buf, size_t cap, const est_feature_spec *s) {
  size_t o = (size_t)snprintf(buf, cap, "[");
  for (int i = 0; i < s->rank && o < cap; i++)
    o += (size_t)(s->shape[i] < 0 ? snprintf(buf + o, cap - o, "%sNone", i ? ", " : "")
                                  : snprintf(buf + o, cap - o, "%s%lld", i ? ", " : "", (long long)s->shape[i]));
  if (o < cap) snprintf(buf + o, cap - o, "]");
}

static int64_t num_elements(const est_feature_spec *s) {
  int64_t n = 1;
  for (int i = 0; i < s->rank; i++) n *= s->shape[i];
  return n;
}

/* A spec's default, copied: the values, and for STRING the est_bytes followed by their
 * bytes in the same block (so one free() releases both). */
static void *copy_default(const est_feature_spec *s) {
  /* by the dtype's own size: the copy runs before validation, on any dtype */
  const size_t head = s->default_count * (s->dtype == EST_DT_STRING ? sizeof(est_bytes) : est_dtype_size(s->dtype));
  size_t total = head;
  if (s->dtype == EST_DT_STRING)
    for (size_t k = 0; k < s->default_count; k++) total += ((const est_bytes *)s->default_value)[k].size;
  uint8_t *copy = malloc(total + 1);
  if (!copy) return NULL;
  memcpy(copy, s->default_value, head);
  if (s->dtype == EST_DT_STRING) {
    est_bytes *v = (est_bytes *)copy;
    uint8_t *p = copy + head;
    for (size_t k = 0; k < s->default_count; k++) {
      if (v[k].size) memcpy(p, v[k].data, v[k].size);
      v[k].data = p;
      p += v[k].size;
    }
  }
  return copy;
}

est_feature_spec *est_feature_specs_copy(const est_feature_spec *specs, size_t n) {
  est_feature_spec *copy = calloc(n ? n : 1, sizeof *copy);
  if (!copy) return NULL;
  for (size_t i = 0; i < n; i++) {
    copy[i] = specs[i];
    copy[i].key = NULL;
    copy[i].default_value = NULL;
    if ((specs[i].key && !(copy[i].key = strdup(specs[i].key))) ||
        (specs[i].default_value && !(copy[i].default_value = copy_default(&specs[i])))) {
      est_feature_specs_free(copy, i + 1);
      return NULL;
    }
  }
  return copy;
}

void est_feature_specs_free(est_feature_spec *specs, size_t n) {
  if (!specs) return;
  for (size_t i = 0; i < n; i++) {
    free((void *)specs[i].key);
    free((void *)specs[i].default_value);
  }
  free(specs);
}

est_status est_feature_specs_validate(const est_feature_spec *specs, size_t n) {
  char shape[256];
  for (size_t i = 0; i < n; i++) {
    const est_feature_spec *s = &specs[i];
    if (!s->key) return spec_error(NULL, "feature spec %zu has no key", i);
    for (size_t j = 0; j < i; j++)
      if (!strcmp(specs[j].key, s->key)) return spec_error(NULL, "Duplicate feature key %s.", s->key);
    if (s->dtype == EST_DT_INVALID) return spec_error(NULL, "Missing type for feature %s.", s->key);
    if (s->dtype != EST_DT_INT64 && s->dtype != EST_DT_FLOAT && s->dtype != EST_DT_STRING)
      return spec_error(NULL, "Invalid config dtype: %s", tf_type_name(s->dtype));
    if (s->var_len == EST_VAR_LEN) continue;
    if (s->var_len != EST_FIXED_LEN && s->var_len != EST_FIXED_LEN_SEQUENCE)
      return spec_error(NULL, "Invalid feature %s: unknown spec type %d.", s->key, s->var_len);
    if (s->rank < 0) return spec_error(NULL, "Missing shape for feature %s.", s->key);
    if (s->rank > EST_MAX_RANK)
      return spec_error(NULL, "Shape of feature %s has rank %d, more than %d.", s->key, s->rank, (int)EST_MAX_RANK);
    if (s->var_len == EST_FIXED_LEN && s->rank > 0 && s->shape[0] < 0)
      return spec_error(NULL, "First dimension of shape for feature %s unknown. Consider using FixedLenSequenceFeature.",
                        s->key);
    for (int d = 0; d < s->rank; d++)
      if (s->shape[d] < 0) {
        shape_string(shape, sizeof shape, s);
        return spec_error(NULL, "All dimensions of shape for feature %s need to be known but received %s.", s->key, shape);
      }
    if (s->var_len == EST_FIXED_LEN && s->default_value && (int64_t)s->default_count != num_elements(s)) {
      /* TF reshapes the default to the shape: no broadcasting (parsing_config.py) */
      shape_string(shape, sizeof shape, s);
      return spec_error(NULL, "Cannot reshape a tensor with %zu elements to shape %s (%lld elements) for feature %s.",
                        s->default_count, shape, (long long)num_elements(s), s->key);
    }
    if (s->var_len == EST_FIXED_LEN_SEQUENCE && s->default_value && s->default_count != 1)
      /* the padding value is reshaped to a scalar (parsing_config.py _make_dense_default) */
      return spec_error(NULL, "Cannot reshape a tensor with %zu elements to shape [] (1 elements) for feature %s.",
                        s->default_count, s->key);
  }
  return EST_OK;
}

/* Output sink for list values: a fixed slice (counts past its end, like TF's
 * LimitedArraySlice) or a growable est_varlen_value. */
typedef struct sink {
  uint8_t *fixed;
  size_t limit;
  est_varlen_value *var;
  size_t count;
  size_t esize;
  int oom;
} sink;

static inline void *sink_slot(sink *s) {
  size_t i = s->count++;
  if (!s->var) return i < s->limit ? s->fixed + i * s->esize : NULL;
  if (i >= s->var->cap) {
    size_t ncap = s->var->cap ? s->var->cap * 2 : 16;
    void *p = realloc(s->var->values, ncap * s->esize);
    if (!p) {
      s->oom = 1;
      return NULL;
    }
    s->var->values = p;
    s->var->cap = ncap;
  }
  return (uint8_t *)s->var->values + i * s->esize;
}

/* ---- reading as TF's fast parser reads ---------------------------------------------
 *
 * TF's FastParseExample reads through protobuf's CodedInputStream, which is laxer than the
 * wire format in ways est must copy to accept and reject exactly what TF does (found by
 * tests/interop's differential fuzzing against TF 2.15):
 *  - a nested length (Features, a map entry, a Feature's list, a packed run) that overruns
 *    the enclosing message, or is >= 2^31, is clamped to it (PushLimit keeps the old limit);
 *  - an unknown top-level length-delimited field that overruns the input is skipped to the
 *    end (Skip()'s failure is ignored); one >= 2^31 is not skipped at all;
 *  - varints (tags, lengths, values) may take 10 bytes, the bits past 32/64 dropped;
 *  - map-entry tags are read as varints (any encoding of 0x0a / 0x12), exactly two of them,
 *    and a missing key is the empty key;
 *  - a packed float run of n bytes holds n/4 floats (the rest is ignored), and only the
 *    first packed run of a list is read: what follows it in the Feature is ignored.
 * Strings (keys, Feature values, bytes_list elements) must still fit inside their limit. */

/* ReadVarint64: up to 10 bytes, the 10th may not continue; bits past 64 are dropped. */
static inline int tf_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
  const uint8_t *q = *p;
  uint64_t x = 0;
  for (int i = 0; i < 10; i++) {
    if (q >= end) return 0;
    uint8_t b = *q++;
    x |= i < 9 ? (uint64_t)(b & 0x7f) << (7 * i) : (uint64_t)b << 63;
    if (b < 0x80) {
      *v = x;
      *p = q;
      return 1;
    }
  }
  return 0;
}

/* ReadVarint32: the same bytes, the low 32 bits kept. */
static inline int tf_varint32(const uint8_t **p, const uint8_t *end, uint32_t *v) {
  uint64_t x;
  if (!tf_varint(p, end, &x)) return 0;
  *v = (uint32_t)x;
  return 1;
}

/* PushLimit(len) at p inside [p, end): the new end, clamped to end. */
static inline const uint8_t *tf_limit(const uint8_t *p, const uint8_t *end, uint32_t len) {
  return len <= INT32_MAX && len < (size_t)(end - p) ? p + len : end;
}

/* ParseString: a length, then that many bytes, all before end. */
static inline int tf_string(const uint8_t **p, const uint8_t *end, const uint8_t **d, size_t *n) {
  uint32_t len;
  if (!tf_varint32(p, end, &len) || len > (size_t)(end - *p)) return 0;
  *d = *p;
  *n = len;
  *p += len;
  return 1;
}

/* Decodes the list of a Feature (p..end: the bytes after the oneof tag). */
static int decode_list(est_dtype t, const uint8_t *p, const uint8_t *end, sink *out) {
  uint32_t len;
  if (!tf_varint32(&p, end, &len)) return 0;
  const uint8_t *lim = tf_limit(p, end, len);
  if (p == lim) return 1;
  if (t == EST_DT_STRING) {
    while (p < lim) {
      const uint8_t *d;
      size_t n;
      if (*p++ != 0x0a || !tf_string(&p, lim, &d, &n)) return 0;
      est_bytes *b = sink_slot(out);
      if (b) {
        b->data = (uint8_t *)d;
        b->size = n;
      } else if (out->oom) {
        return 0;
      } /* else a fixed slice already full: counted, and refused after the loop */
    }
    return 1;
  }
  if (*p == 0x0a) { /* packed */
    p++;
    uint32_t plen;
    if (!tf_varint32(&p, lim, &plen)) return 0;
    const uint8_t *pend = tf_limit(p, lim, plen);
    if (t == EST_DT_FLOAT) {
      size_t nf = plen / 4;
      if (nf > (size_t)(pend - p) / 4) return 0;
      for (size_t i = 0; i < nf; i++, p += 4) {
        float *f = sink_slot(out);
        if (f) *f = est_pw_float_from_bits(est_pw_decode_fixed32(p));
        else if (out->oom) return 0;
      }
    } else if (!out->var) {
      /* The hot path (input_ids & co.): straight into the caller's buffer, with one- and
       * two-byte varints (token ids < 16384) decoded inline. */
      int64_t *dst = (int64_t *)out->fixed;
      size_t cnt = out->count, lim_n = out->limit;
      const uint8_t *q = p;
      while (q < pend) {
        uint64_t v;
        if (q[0] < 0x80) {
          v = q[0];
          q += 1;
        } else if (q + 1 < pend && q[1] < 0x80) {
          v = (uint64_t)(q[0] & 0x7f) | (uint64_t)q[1] << 7;
          q += 2;
        } else if (!tf_varint(&q, pend, &v)) {
          return 0;
        }
        if (cnt < lim_n) dst[cnt] = (int64_t)v;
        cnt++;
      }
      out->count = cnt;
    } else {
      while (p < pend) {
        uint64_t v;
        if (!tf_varint(&p, pend, &v)) return 0;
        int64_t *x = sink_slot(out);
        if (x) *x = (int64_t)v;
        else if (out->oom) return 0;
      }
    }
    return 1;
  }
  uint8_t want = t == EST_DT_FLOAT ? 0x0d : 0x08; /* unpacked: tag + value, repeated */
  if (*p != want) return 0;
  while (p < lim) {
    if (*p++ != want) return 0;
    if (t == EST_DT_FLOAT) {
      if (lim - p < 4) return 0;
      float *f = sink_slot(out);
      if (f) *f = est_pw_float_from_bits(est_pw_decode_fixed32(p));
      else if (out->oom) return 0;
      p += 4;
    } else {
      uint64_t v;
      if (!tf_varint(&p, lim, &v)) return 0;
      int64_t *x = sink_slot(out);
      if (x) *x = (int64_t)v;
      else if (out->oom) return 0;
    }
  }
  return 1;
}

/* SkipExtraneousTag: an unknown field before, between or after `features`. */
static int tf_skip_field(const uint8_t **p, const uint8_t *end) {
  uint32_t tag, v32;
  if (!tf_varint32(p, end, &tag)) return 0;
  switch (tag & 7) {
    case EST_PW_VARINT: return tf_varint32(p, end, &v32);
    case EST_PW_FIXED64:
      if (end - *p < 8) return 0;
      *p += 8;
      return 1;
    case EST_PW_LEN:
      if (!tf_varint32(p, end, &v32)) return 0;
      if (v32 <= INT32_MAX) *p = v32 < (size_t)(end - *p) ? *p + v32 : end;
      return 1;
    case EST_PW_FIXED32:
      if (end - *p < 4) return 0;
      *p += 4;
      return 1;
    default: return 0; /* groups, wire types 6 and 7 */
  }
}

/* ParseFeatureMapEntry at p (after the entry's 0x0a tag), inside [p, end). */
static int tf_map_entry(const uint8_t **p, const uint8_t *end, const uint8_t **key, size_t *key_size,
                        const uint8_t **value, size_t *value_size) {
  uint32_t len;
  if (!tf_varint32(p, end, &len)) return 0;
  const uint8_t *lim = tf_limit(*p, end, len);
  static const uint8_t empty = 0;
  *key = *value = &empty;
  *key_size = *value_size = 0;
  for (int i = 0; i < 2; i++) {
    uint32_t tag;
    if (*p >= lim || !tf_varint32(p, lim, &tag)) return 0;
    if (tag == 0x0a) {
      if (!tf_string(p, lim, key, key_size)) return 0;
    } else if (tag == 0x12) {
      if (!tf_string(p, lim, value, value_size)) return 0;
    } else {
      return 0;
    }
  }
  return *p == lim;
}

typedef struct found_feature {
  const uint8_t *value; /* serialized Feature, NULL when missing */
  size_t size;
  size_t key_size;      /* strlen of the spec's key */
} found_feature;

enum { STACK_SPECS = 32 };

est_status est_example_parse_specs(const est_feature_spec *specs, size_t n, const uint8_t *data, size_t size,
                                   void *const *out, const char *desc) {
  found_feature stack_found[STACK_SPECS];
  found_feature *found = n <= STACK_SPECS ? stack_found : calloc(n, sizeof *found);
  if (!found) return est_error(EST_ERR_NO_MEMORY, "parse example: out of memory");
  memset(found, 0, (n <= STACK_SPECS ? STACK_SPECS : n) * sizeof *found);
  for (size_t i = 0; i < n; i++) found[i].key_size = strlen(specs[i].key);
  est_status st = EST_OK;

  /* Pass 1: the Example's structure, remembering the Features we were asked for. */
  const uint8_t *p = data, *end = data + size;
  while (p < end && st == EST_OK) {
    if (*p != 0x0a) {
      if (!tf_skip_field(&p, end)) goto malformed;
      continue;
    }
    p++;
    uint32_t flen;
    if (!tf_varint32(&p, end, &flen)) goto malformed;
    const uint8_t *fend = tf_limit(p, end, flen);
    while (p < fend && st == EST_OK) {
      const uint8_t *key, *value;
      size_t key_size, value_size;
      if (*p++ != 0x0a || !tf_map_entry(&p, fend, &key, &key_size, &value, &value_size)) goto malformed;
      for (size_t i = 0; i < n; i++) {
        /* keys may hold any bytes (even NUL): compare lengths, then bytes */
        if (found[i].key_size != key_size || memcmp(specs[i].key, key, key_size)) continue;
        if (value_size == 0) break; /* no kind set: counts as missing */
        if (value[0] != 0x0a && value[0] != 0x12 && value[0] != 0x1a) {
          st = spec_error(desc, "Unsupported datatype.");
          break;
        }
        found[i].value = value;
        found[i].size = value_size;
        break;
      }
    }
  }

  /* Pass 2: decode each requested feature into its output. */
  for (size_t i = 0; i < n && st == EST_OK; i++) {
    const est_feature_spec *s = &specs[i];
    const found_feature *f = &found[i];
    if (s->var_len != EST_FIXED_LEN) {
      est_varlen_value *v = out[i];
      v->count = 0;
      if (!f->value) continue;
    }
    if (!f->value) {
      if (!s->default_value) {
        st = spec_error(desc, "Feature: %s (data type: %s) is required but could not be found.", s->key,
                        tf_type_name(s->dtype));
        break;
      }
      memcpy(out[i], s->default_value, s->default_count * elem_size(s->dtype));
      continue;
    }
    est_dtype actual = f->value[0] == 0x0a ? EST_DT_STRING : f->value[0] == 0x12 ? EST_DT_FLOAT : EST_DT_INT64;
    if (actual != s->dtype) {
      if (s->var_len == EST_VAR_LEN)
        st = spec_error(desc, "Key: %s.  Data types don't match. Expected type: %s, Actual type: %s", s->key,
                        tf_type_name(s->dtype), tf_type_name(actual));
      else
        st = spec_error(desc, "Key: %s.  Data types don't match. Data type: %s but expected type: %s", s->key,
                        tf_type_name(actual), tf_type_name(s->dtype));
      break;
    }
    sink sk = {.esize = elem_size(s->dtype)};
    if (s->var_len == EST_FIXED_LEN) {
      sk.fixed = out[i];
      sk.limit = (size_t)num_elements(s);
    } else {
      sk.var = out[i];
    }
    if (!decode_list(s->dtype, f->value + 1, f->value + f->size, &sk)) {
      if (sk.oom) st = est_error(EST_ERR_NO_MEMORY, "%s%sout of memory parsing feature %s", desc ? desc : "",
                                 desc ? ": " : "", s->key);
      else st = spec_error(desc, "Key: %s.  Can't parse serialized Example: Parsing %s failed.", s->key, list_name(s->dtype));
      break;
    }
    if (s->var_len == EST_FIXED_LEN) {
      if (sk.count != sk.limit) { /* exactly prod(shape): no padding, no truncation */
        st = spec_error(desc, "Key: %s.  Can't parse serialized Example: Some %s slice was not parsed.", s->key,
                        list_name(s->dtype));
        break;
      }
    } else {
      sk.var->count = sk.count;
      int64_t stride = s->var_len == EST_FIXED_LEN_SEQUENCE ? num_elements(s) : 1;
      if ((stride == 0 && sk.count != 0) || (stride > 0 && sk.count % (size_t)stride)) {
        st = spec_error(desc,
                        "Error while parsing feature with key %s: number of elements should be divisible by %lld, "
                        "found %zu instead",
                        s->key, (long long)stride, sk.count);
        break;
      }
    }
  }
  if (found != stack_found) free(found);
  return st;

malformed:;
  char esc[300];
  est_example_escape(esc, sizeof esc, data, size);
  if (found != stack_found) free(found);
  return spec_error(desc, "Could not parse example input, value: '%s'", esc);
}
