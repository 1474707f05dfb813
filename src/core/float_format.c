/* str(np.float32(v)): the shortest round-trip digits, laid out as NumPy lays them out
 * (est/float_format.h). The only float32 formatter of est: every writer of
 * eval_results.txt, test_results.tsv and the training log goes through it. */
#include "est/float_format.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Does D * 10^e (D > 0) read back as a? strtof rounds correctly (half to even), which is
 * what "round-trips" means for a reader of the file. */
static int reads_back(uint64_t D, int e, float a) {
  char s[48];
  snprintf(s, sizeof s, "%llue%d", (unsigned long long)D, e);
  return strtof(s, NULL) == a;
}

/* The shortest digits of a > 0: a = D * 10^e10 as written, D with nd digits (no trailing
 * zeros). For each length p = 1..9 (9 digits always round-trip a float32) the two
 * p-digit decimals around a are candidates, the nearer first: the nearer one is
 * "%.*e"'s correctly rounded value; the farther one can be the only one inside a's
 * rounding interval when a is a power of two (the interval below a is half as wide as
 * the one above), and Dragon4 then takes it. */
static void shortest_digits(float a, char digits[16], int *nd, int *exp10) {
  for (int p = 1; p <= 9; p++) {
    char sci[48];
    snprintf(sci, sizeof sci, "%.*e", p - 1, (double)a);   /* "d.ddde[+-]XX" */
    uint64_t D = 0;
    const char *s = sci;
    for (; *s && *s != 'e'; s++)
      if (*s >= '0' && *s <= '9') D = D * 10 + (uint64_t)(*s - '0');
    int e = atoi(s + 1) - (p - 1);                          /* a ~ D * 10^e */
    uint64_t found = 0;
    if (reads_back(D, e, a)) {
      found = D;
    } else {
      /* The other neighbour: above when %.*e rounded down, else below. */
      const double near = (double)D * pow(10.0, e);
      const uint64_t other = near < (double)a ? D + 1 : D - 1;
      if (other > 0 && reads_back(other, e, a)) found = other;
    }
    if (found || p == 9) {
      if (!found) found = D;
      /* Back to a digit string and the exponent of its first digit. */
      char tmp[24];
      int n = snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)found);
      *exp10 = e + n - 1;
      while (n > 1 && tmp[n - 1] == '0') n--;
      for (int i = 0; i < n; i++) digits[i] = tmp[i];
      digits[n] = 0;
      *nd = n;
      return;
    }
  }
}

char *est_format_float32(float v, char *buf, size_t size) {
  if (size == 0) return buf;
  if (isnan(v)) return snprintf(buf, size, "nan"), buf;
  if (isinf(v)) return snprintf(buf, size, v < 0 ? "-inf" : "inf"), buf;
  const char *sign = signbit(v) ? "-" : "";
  const float a = fabsf(v);
  if (a == 0.0f) return snprintf(buf, size, "%s0.0", sign), buf;

  char digits[16];
  int nd, exp10;
  shortest_digits(a, digits, &nd, &exp10);

  char out[64];
  size_t o = 0;
  const double mag = (double)a;
  if (mag >= 1e-4 && mag < 1e16) {
    if (exp10 >= 0) {
      /* integer part digits[0..exp10], zero-padded; the fraction: the rest or "0" */
      for (int i = 0; i <= exp10; i++) out[o++] = i < nd ? digits[i] : '0';
      out[o++] = '.';
      if (nd > exp10 + 1)
        for (int i = exp10 + 1; i < nd; i++) out[o++] = digits[i];
      else out[o++] = '0';
    } else {
      out[o++] = '0';
      out[o++] = '.';
      for (int i = 0; i < -exp10 - 1; i++) out[o++] = '0';
      for (int i = 0; i < nd; i++) out[o++] = digits[i];
    }
    out[o] = 0;
  } else {
    out[o++] = digits[0];
    if (nd > 1) {
      out[o++] = '.';
      for (int i = 1; i < nd; i++) out[o++] = digits[i];
    }
    snprintf(out + o, sizeof out - o, "e%c%02d", exp10 < 0 ? '-' : '+', abs(exp10));
  }
  snprintf(buf, size, "%s%s", sign, out);
  return buf;
}

/* ---- Python's round() repr and json.dumps strings ------------------------------------ */

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
