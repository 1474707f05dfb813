/* extract_features.py's JSON lines, digit for digit: Python's json.dumps of an OrderedDict
 * (separators ", " and ": ", ensure_ascii) with float values round(float(x), 6), which
 * json prints with float.__repr__ (the shortest string that reads back; exponent form
 * below 1e-4, as repr switches at a decimal exponent of -4). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/serving.h"

char *est_py_round_repr(double v, int ndigits, char *buf, size_t size) {
  if (isnan(v)) return snprintf(buf, size, "NaN"), buf;
  if (isinf(v)) return snprintf(buf, size, v < 0 ? "-Infinity" : "Infinity"), buf;
  /* glibc's %.Nf rounds the exact binary value half-even, as Python's round() does; for
   * |v| < 1e9 the N-place decimal is also the shortest string naming the rounded double
   * (doubles there are far closer than 10^-N), so stripping its zeros gives repr. */
  char fixed[400];
  snprintf(fixed, sizeof fixed, "%.*f", ndigits, v);
  char *dot = strchr(fixed, '.');
  if (dot) {
    char *end = fixed + strlen(fixed);
    while (end > dot + 1 && end[-1] == '0') *--end = 0;
    if (end == dot + 1) *end++ = '0', *end = 0; /* "1." -> "1.0" */
  } else {
    strcat(fixed, ".0");
  }
  const char *p = fixed;
  int neg = *p == '-';
  if (neg) p++;
  double r = strtod(fixed, NULL);
  if (r == 0 || fabs(r) >= 1e-4) {
    snprintf(buf, size, "%s", fixed);
    return buf;
  }
  /* 0.0000ddd -> d.dde-0X */
  const char *digits = p + 2;
  int zeros = 0;
  while (digits[zeros] == '0') zeros++;
  const char *sig = digits + zeros;
  char mant[64];
  size_t n = strlen(sig);
  if (n == 1) snprintf(mant, sizeof mant, "%c", sig[0]);
  else snprintf(mant, sizeof mant, "%c.%s", sig[0], sig + 1);
  snprintf(buf, size, "%s%se-%02d", neg ? "-" : "", mant, zeros + 1);
  return buf;
}

void est_py_json_string(FILE *out, const char *s) {
  fputc('"', out);
  const unsigned char *p = (const unsigned char *)s;
  while (*p) {
    unsigned c = *p;
    uint32_t cp;
    int len;
    if (c < 0x80) cp = c, len = 1;
    else if ((c & 0xE0) == 0xC0) cp = c & 0x1F, len = 2;
    else if ((c & 0xF0) == 0xE0) cp = c & 0x0F, len = 3;
    else cp = c & 0x07, len = 4;
    for (int i = 1; i < len; i++) {
      if ((p[i] & 0xC0) != 0x80) { /* invalid UTF-8 (the vocab loader refuses it): U+FFFD */
        cp = 0xFFFD, len = i;
        break;
      }
      cp = cp << 6 | (p[i] & 0x3F);
    }
    p += len;
    switch (cp) {
      case '"': fputs("\\\"", out); continue;
      case '\\': fputs("\\\\", out); continue;
      case '\n': fputs("\\n", out); continue;
      case '\r': fputs("\\r", out); continue;
      case '\t': fputs("\\t", out); continue;
      case '\b': fputs("\\b", out); continue;
      case '\f': fputs("\\f", out); continue;
      default: break;
    }
    if (cp >= 0x20 && cp < 0x7F) fputc((int)cp, out);
    else if (cp < 0x10000) fprintf(out, "\\u%04x", cp);
    else {
      cp -= 0x10000;
      fprintf(out, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
    }
  }
  fputc('"', out);
}

void est_extract_features_write(FILE *out, int64_t linex_index, const char *const *tokens, int num_tokens,
                                const int *layer_indexes, int num_layers, const float *const *values, int hidden) {
  char num[64];
  fprintf(out, "{\"linex_index\": %lld, \"features\": [", (long long)linex_index);
  for (int t = 0; t < num_tokens; t++) {
    fputs(t ? ", {\"token\": " : "{\"token\": ", out);
    est_py_json_string(out, tokens[t]);
    fputs(", \"layers\": [", out);
    for (int k = 0; k < num_layers; k++) {
      fprintf(out, "%s{\"index\": %d, \"values\": [", k ? ", " : "", layer_indexes[k]);
      const float *v = values[k] + (size_t)t * hidden;
      for (int h = 0; h < hidden; h++) {
        if (h) fputs(", ", out);
        fputs(est_py_round_repr((double)v[h], 6, num, sizeof num), out);
      }
      fputs("]}", out);
    }
    fputs("]}", out);
  }
  fputs("]}\n", out);
}
