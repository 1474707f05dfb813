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

/* Decodes the list of a Feature (bytes after the oneof tag) as TF's fast parser does:
 * the first tag decides packed vs unpacked; only the first packed run is read. */
static int decode_list(est_dtype t, const uint8_t *p, size_t n, sink *out) {
  est_pw_reader r = est_pw_reader_make(p, n), list;
  if (!est_pw_read_sub(&r, &list)) return 0;
  if (est_pw_eof(&list)) return 1;
  uint8_t first = *list.pos;
  if (t == EST_DT_STRING) {
    while (!est_pw_eof(&list)) {
      const uint8_t *d;
      size_t len;
      if (*list.pos != 0x0a) return 0;
      list.pos++;
      if (!est_pw_read_bytes(&list, &d, &len)) return 0;
      est_bytes *b = sink_slot(out);
      if (b) {
        b->data = (uint8_t *)d;
        b->size = len;
      } else if (out->oom) return 0;
    }
    return 1;
  }
  if (first == 0x0a) { /* packed */
    est_pw_reader packed;
    list.pos++;
    if (!est_pw_read_sub(&list, &packed)) return 0;
    if (t == EST_DT_FLOAT) {
      uint32_t u;
      if (est_pw_left(&packed) % 4) return 0;
      while (est_pw_read_fixed32(&packed, &u)) {
        float *f = sink_slot(out);
        if (f) *f = est_pw_float_from_bits(u);
        else if (out->oom) return 0;
      }
    } else if (!out->var) {
      /* The hot path (input_ids & co.): straight into the caller's buffer, with one- and
       * two-byte varints (token ids < 16384) decoded inline. */
      int64_t *dst = (int64_t *)out->fixed;
      size_t cnt = out->count, lim = out->limit;
      const uint8_t *q = packed.pos, *end = packed.end;
      while (q < end) {
        uint64_t v;
        if (q[0] < 0x80) {
          v = q[0];
          q += 1;
        } else if (q + 1 < end && q[1] < 0x80) {
          v = (uint64_t)(q[0] & 0x7f) | (uint64_t)q[1] << 7;
          q += 2;
        } else {
          est_pw_reader t = {q, end};
          if (!est_pw_read_varint(&t, &v)) return 0;
          q = t.pos;
        }
        if (cnt < lim) dst[cnt] = (int64_t)v;
        cnt++;
      }
      out->count = cnt;
    } else {
      while (!est_pw_eof(&packed)) {
        uint64_t v;
        if (!est_pw_read_varint(&packed, &v)) return 0;
        int64_t *x = sink_slot(out);
        if (x) *x = (int64_t)v;
        else if (out->oom) return 0;
      }
    }
    return 1;
  }
  uint8_t want = t == EST_DT_FLOAT ? 0x0d : 0x08; /* unpacked: tag + value, repeated */
  if (first != want) return 0;
  while (!est_pw_eof(&list)) {
    if (*list.pos != want) return 0;
    list.pos++;
    if (t == EST_DT_FLOAT) {
      uint32_t u;
      if (!est_pw_read_fixed32(&list, &u)) return 0;
      float *f = sink_slot(out);
      if (f) *f = est_pw_float_from_bits(u);
      else if (out->oom) return 0;
    } else {
      uint64_t v;
      if (!est_pw_read_varint(&list, &v)) return 0;
      int64_t *x = sink_slot(out);
      if (x) *x = (int64_t)v;
      else if (out->oom) return 0;
    }
  }
  return 1;
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
  est_pw_reader r = est_pw_reader_make(data, size);
  while (!est_pw_eof(&r) && st == EST_OK) {
    uint32_t field;
    int wt;
    est_pw_reader features;
    if (!est_pw_read_tag(&r, &field, &wt)) goto malformed;
    if (field != 1 || wt != EST_PW_LEN) {
      if (!est_pw_skip(&r, wt)) goto malformed;
      continue;
    }
    if (!est_pw_read_sub(&r, &features)) goto malformed;
    while (!est_pw_eof(&features) && st == EST_OK) {
      const uint8_t *key, *value;
      size_t key_size, value_size;
      if (!est_example_next_entry(&features, &key, &key_size, &value, &value_size)) goto malformed;
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
    if (!decode_list(s->dtype, f->value + 1, f->size - 1, &sk)) {
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
