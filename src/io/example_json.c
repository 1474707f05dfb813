/* An Example as one line of JSON, for `est tfrecord dump` and for eyes. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/example.h"
#include "io/protowire.h"

static void put_str(est_pw_buf *b, const char *s) { est_pw_put_raw(b, s, strlen(s)); }

static void put_fmt(est_pw_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put_fmt(est_pw_buf *b, const char *fmt, ...) {
  char tmp[64];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n > 0) est_pw_put_raw(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* A JSON string; bytes >= 0x80 are passed through (keys are UTF-8 in practice). */
static void put_json_string(est_pw_buf *b, const char *s, size_t n) {
  est_pw_put_raw(b, "\"", 1);
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') {
      char e[2] = {'\\', (char)c};
      est_pw_put_raw(b, e, 2);
    } else if (c < 0x20) {
      put_fmt(b, "\\u%04x", c);
    } else {
      est_pw_put_raw(b, &s[i], 1);
    }
  }
  est_pw_put_raw(b, "\"", 1);
}

static void put_base64(est_pw_buf *b, const uint8_t *d, size_t n) {
  static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  est_pw_put_raw(b, "\"", 1);
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = (uint32_t)d[i] << 16 | (i + 1 < n ? (uint32_t)d[i + 1] << 8 : 0) | (i + 2 < n ? d[i + 2] : 0);
    char q[4] = {tab[v >> 18], tab[(v >> 12) & 63], i + 1 < n ? tab[(v >> 6) & 63] : '=', i + 2 < n ? tab[v & 63] : '='};
    est_pw_put_raw(b, q, 4);
  }
  est_pw_put_raw(b, "\"", 1);
}

est_status est_example_to_json(const est_example *ex, char **json, size_t *size) {
  est_pw_buf b;
  est_pw_buf_init(&b);
  put_str(&b, "{");
  for (size_t i = 0; i < ex->count; i++) {
    const est_feature *f = &ex->features[i];
    if (i) put_str(&b, ", ");
    put_json_string(&b, f->key, f->key_size);
    switch (f->kind) {
      case EST_FEATURE_NONE: put_str(&b, ": {}"); continue;
      case EST_FEATURE_INT64: put_str(&b, ": {\"int64\": ["); break;
      case EST_FEATURE_FLOAT: put_str(&b, ": {\"float\": ["); break;
      case EST_FEATURE_BYTES: put_str(&b, ": {\"bytes\": ["); break;
    }
    for (size_t j = 0; j < f->count; j++) {
      if (j) put_str(&b, ", ");
      if (f->kind == EST_FEATURE_INT64) {
        put_fmt(&b, "%lld", (long long)f->int64s[j]);
      } else if (f->kind == EST_FEATURE_FLOAT) {
        float v = f->floats[j];
        /* %.9g round-trips every float32; JSON has no NaN/Inf, write them as Python does */
        if (isnan(v)) put_str(&b, "NaN");
        else if (isinf(v)) put_str(&b, v > 0 ? "Infinity" : "-Infinity");
        else put_fmt(&b, "%.9g", (double)v);
      } else {
        put_base64(&b, f->bytes[j].data, f->bytes[j].size);
      }
    }
    put_str(&b, "]}");
  }
  put_str(&b, "}");
  est_pw_put_raw(&b, "", 1); /* NUL terminator, not counted */
  if (b.failed) {
    est_pw_buf_free(&b);
    return est_error(EST_ERR_NO_MEMORY, "example: out of memory formatting JSON");
  }
  *json = (char *)est_pw_buf_release(&b, size);
  (*size)--;
  return EST_OK;
}
