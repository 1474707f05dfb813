/* `est tfrecord parse FILE --spec=SPEC`: parse every record against feature specs, the
 * way tf.io.parse_example does, and print one JSON line per record.
 *
 * It is the fast half of tests/interop's differential fuzzing (hundreds of thousands of
 * serialized Examples in one process, against TensorFlow's parser on the same bytes), and
 * a way to check that a record file holds what a model's feature specs expect.
 *
 * SPEC: entries separated by ';', each KEY:DTYPE:KIND[:SHAPE[:DEFAULT]]
 *   DTYPE   int64 | float | string
 *   KIND    fixed (FixedLenFeature) | var (VarLenFeature) | seq (FixedLenSequenceFeature,
 *           allow_missing=True)
 *   SHAPE   dims joined by 'x' ("2x3"); empty for a scalar (fixed, seq)
 *   DEFAULT fixed only: prod(SHAPE) values joined by ','; strings in base64
 * e.g. --spec='ids:int64:fixed:4;w:float:var;name:string:fixed::YWI='
 *
 * Output per record, keys in spec order:
 *   {"error": "<message>"}  when the parser rejects it, else
 *   {"ids": {"int64": [..]}, "w": {"float_bits": [..]}, "name": {"bytes": ["<base64>"]}}
 * Floats print as their IEEE-754 bit patterns (uint32), so NaN payloads and -0 compare
 * exactly. A seq feature also gives "rows". */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base64.h"
#include "est/example.h"
#include "est/tfrecord.h"
#include "tfrecord_parse.h"

enum { MAX_SPECS = 64, MAX_DEFAULT = 4096 };

typedef struct parsed_specs {
  size_t n;
  est_feature_spec specs[MAX_SPECS];
  char *text;                     /* owns every key */
  void *defaults[MAX_SPECS];      /* owned default buffers */
  uint8_t *default_bytes[MAX_SPECS];
} parsed_specs;

static int spec_fail(const char *entry, const char *why) {
  fprintf(stderr, "est tfrecord: --spec: entry '%s': %s\n", entry, why);
  return -1;
}

/* Splits s at the first c: returns the rest (NULL when c is absent) and ends s there. */
static char *cut(char *s, char c) {
  char *p = s ? strchr(s, c) : NULL;
  if (!p) return NULL;
  *p = 0;
  return p + 1;
}

static int parse_default(parsed_specs *ps, est_feature_spec *s, char *text, const char *entry) {
  int64_t want = 1;
  for (int d = 0; d < s->rank; d++) want *= s->shape[d];
  if (want > MAX_DEFAULT) return spec_fail(entry, "default too large");
  size_t esz = s->dtype == EST_DT_INT64 ? sizeof(int64_t) : s->dtype == EST_DT_FLOAT ? sizeof(float) : sizeof(est_bytes);
  uint8_t *buf = calloc((size_t)(want ? want : 1), esz);
  uint8_t *bytes = s->dtype == EST_DT_STRING ? malloc(strlen(text) + 1) : NULL;
  ps->defaults[ps->n] = buf;
  ps->default_bytes[ps->n] = bytes;
  if (!buf || (s->dtype == EST_DT_STRING && !bytes)) return spec_fail(entry, "out of memory");
  size_t count = 0, used = 0;
  for (char *v = text, *next; v; v = next) {
    next = cut(v, ',');
    if (!*v && !next && count == 0 && s->dtype != EST_DT_STRING) break; /* empty: no values */
    if ((int64_t)count >= want) return spec_fail(entry, "more default values than the shape holds");
    char *end;
    if (s->dtype == EST_DT_INT64) {
      ((int64_t *)buf)[count] = strtoll(v, &end, 10);
      if (end == v || *end) return spec_fail(entry, "bad int64 default");
    } else if (s->dtype == EST_DT_FLOAT) {
      ((float *)buf)[count] = strtof(v, &end);
      if (end == v || *end) return spec_fail(entry, "bad float default");
    } else {
      long k = est_base64_decode(v, bytes + used);
      if (k < 0) return spec_fail(entry, "bad base64 default");
      ((est_bytes *)buf)[count] = (est_bytes){(size_t)k, bytes + used};
      used += (size_t)k;
    }
    count++;
  }
  s->default_value = buf;
  s->default_count = count;
  return 0;
}

static int parse_entry(parsed_specs *ps, char *entry) {
  if (ps->n == MAX_SPECS) return spec_fail(entry, "too many entries");
  est_feature_spec *s = &ps->specs[ps->n];
  memset(s, 0, sizeof *s);
  char *dtype = cut(entry, ':'), *kind = cut(dtype, ':'), *shape = cut(kind, ':'), *dflt = cut(shape, ':');
  if (!kind) return spec_fail(entry, "want KEY:DTYPE:KIND[:SHAPE[:DEFAULT]]");
  s->key = entry;
  s->dtype = !strcmp(dtype, "int64") ? EST_DT_INT64 : !strcmp(dtype, "float") ? EST_DT_FLOAT
             : !strcmp(dtype, "string") ? EST_DT_STRING : EST_DT_INVALID;
  if (s->dtype == EST_DT_INVALID) return spec_fail(entry, "DTYPE must be int64, float or string");
  s->var_len = !strcmp(kind, "fixed") ? EST_FIXED_LEN : !strcmp(kind, "var") ? EST_VAR_LEN
               : !strcmp(kind, "seq") ? EST_FIXED_LEN_SEQUENCE : -1;
  if (s->var_len < 0) return spec_fail(entry, "KIND must be fixed, var or seq");
  s->rank = s->var_len == EST_VAR_LEN ? -1 : 0;
  if (shape && *shape) {
    for (char *d = shape, *next; d; d = next) {
      next = cut(d, 'x');
      char *end;
      if (s->rank == EST_MAX_RANK) return spec_fail(entry, "SHAPE has too many dimensions");
      s->shape[s->rank++] = strtoll(d, &end, 10);
      if (end == d || *end) return spec_fail(entry, "bad SHAPE");
    }
  }
  if (dflt) {
    if (s->var_len != EST_FIXED_LEN) return spec_fail(entry, "only fixed features take a DEFAULT");
    if (parse_default(ps, s, dflt, s->key)) return -1;
  }
  ps->n++;
  return 0;
}

static void parsed_specs_free(parsed_specs *ps) {
  for (size_t i = 0; i < MAX_SPECS; i++) {
    free(ps->defaults[i]);
    free(ps->default_bytes[i]);
  }
  free(ps->text);
}

static int parse_spec_text(parsed_specs *ps, const char *text) {
  memset(ps, 0, sizeof *ps);
  ps->text = strdup(text);
  if (!ps->text) return -1;
  for (char *e = ps->text, *next; e; e = next) {
    next = cut(e, ';');
    if (*e && parse_entry(ps, e)) return -1;
  }
  if (est_feature_specs_validate(ps->specs, ps->n) != EST_OK) {
    fprintf(stderr, "est tfrecord: --spec: %s\n", est_error_message());
    return -1;
  }
  return 0;
}

static void print_json_string(FILE *out, const char *s) {
  fputc('"', out);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') fprintf(out, "\\%c", c);
    else if (c < 0x20 || c >= 0x7f) fprintf(out, "\\u%04x", c); /* bytes, not code points: ASCII-safe */
    else fputc(c, out);
  }
  fputc('"', out);
}

static void print_base64(FILE *out, const uint8_t *d, size_t n) {
  static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  fputc('"', out);
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = (uint32_t)d[i] << 16 | (i + 1 < n ? (uint32_t)d[i + 1] << 8 : 0) | (i + 2 < n ? d[i + 2] : 0);
    fputc(tab[v >> 18], out);
    fputc(tab[(v >> 12) & 63], out);
    fputc(i + 1 < n ? tab[(v >> 6) & 63] : '=', out);
    fputc(i + 2 < n ? tab[v & 63] : '=', out);
  }
  fputc('"', out);
}

static void print_values(FILE *out, est_dtype t, const void *v, size_t n) {
  fputs(t == EST_DT_INT64 ? "{\"int64\": [" : t == EST_DT_FLOAT ? "{\"float_bits\": [" : "{\"bytes\": [", out);
  for (size_t i = 0; i < n; i++) {
    if (i) fputs(", ", out);
    if (t == EST_DT_INT64) {
      fprintf(out, "%" PRId64, ((const int64_t *)v)[i]);
    } else if (t == EST_DT_FLOAT) {
      uint32_t bits;
      memcpy(&bits, (const float *)v + i, 4);
      fprintf(out, "%" PRIu32, bits);
    } else {
      const est_bytes *b = (const est_bytes *)v + i;
      print_base64(out, b->data, b->size);
    }
  }
  fputc(']', out);
}

static int parse_all(est_tfrecord_reader *r, const parsed_specs *ps) {
  size_t esz[MAX_SPECS];
  int64_t elems[MAX_SPECS];
  void *out[MAX_SPECS] = {0};
  est_varlen_value var[MAX_SPECS];
  memset(var, 0, sizeof var);
  int rc = 0;
  for (size_t i = 0; i < ps->n; i++) {
    const est_feature_spec *s = &ps->specs[i];
    esz[i] = s->dtype == EST_DT_INT64 ? sizeof(int64_t) : s->dtype == EST_DT_FLOAT ? sizeof(float) : sizeof(est_bytes);
    elems[i] = 1;
    for (int d = 0; d < s->rank; d++) elems[i] *= s->shape[d];
    out[i] = s->var_len == EST_FIXED_LEN ? calloc((size_t)(elems[i] ? elems[i] : 1), esz[i]) : (void *)&var[i];
    if (!out[i]) {
      fprintf(stderr, "est tfrecord: out of memory\n");
      rc = 1;
      goto done;
    }
  }
  const uint8_t *d;
  size_t n;
  est_status st;
  while ((st = est_tfrecord_reader_next(r, &d, &n)) == EST_OK) {
    if (est_example_parse_specs(ps->specs, ps->n, d, n, out, NULL) != EST_OK) {
      fputs("{\"error\": ", stdout);
      print_json_string(stdout, est_error_message());
      fputs("}\n", stdout);
      continue;
    }
    fputc('{', stdout);
    for (size_t i = 0; i < ps->n; i++) {
      const est_feature_spec *s = &ps->specs[i];
      if (i) fputs(", ", stdout);
      print_json_string(stdout, s->key);
      fputs(": ", stdout);
      if (s->var_len == EST_FIXED_LEN) {
        print_values(stdout, s->dtype, out[i], (size_t)elems[i]);
      } else {
        print_values(stdout, s->dtype, var[i].values, var[i].count);
        if (s->var_len == EST_FIXED_LEN_SEQUENCE)
          fprintf(stdout, ", \"rows\": %" PRId64, elems[i] ? (int64_t)var[i].count / elems[i] : 0);
      }
      fputc('}', stdout);
    }
    fputs("}\n", stdout);
  }
  if (st != EST_ERR_OUT_OF_RANGE) {
    fprintf(stderr, "est tfrecord: %s\n", est_error_message());
    rc = 1;
  }
done:
  for (size_t i = 0; i < ps->n; i++) {
    if (ps->specs[i].var_len == EST_FIXED_LEN) free(out[i]);
    else free(var[i].values);
  }
  if (fflush(stdout) != 0) rc = 1;
  return rc;
}

int est_tfrecord_parse_file(const char *path, est_compression c, const char *spec) {
  parsed_specs ps;
  if (parse_spec_text(&ps, spec)) {
    parsed_specs_free(&ps);
    return 2;
  }
  est_tfrecord_reader *r;
  if (est_tfrecord_reader_open(&r, path, c) != EST_OK) {
    fprintf(stderr, "est tfrecord: %s\n", est_error_message());
    parsed_specs_free(&ps);
    return 1;
  }
  int rc = parse_all(r, &ps);
  est_tfrecord_reader_close(r);
  parsed_specs_free(&ps);
  return rc;
}
