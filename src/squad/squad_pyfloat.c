/* Python's repr() of a float, as json.dumps writes the SQuAD scripts' numbers (docs/squad.md
 * §4.5). CPython uses David Gay's dtoa in mode 0: the shortest digit string that reads back
 * (correctly rounded) as the same double, the one closest to the value when several of that
 * length do; then 'r' layout: positional when -4 < decpt <= 16 (decpt: the exponent of the
 * digits read as 0.ddd), with ".0" added to integers; else d.ddde+XX with at least two
 * exponent digits.
 *
 * Here the digits come from glibc's exact printf: for N = 1..17 digits, "%.{N-1}e" is the
 * N-digit decimal nearest the value; if it reads back, it is Python's choice. If it does not,
 * its neighbour one unit away on the far side may still read back: at a power of two the
 * interval of reals that round to the value is twice as wide above it as below, so the
 * nearest N-digit decimal can fall outside below while one above is inside. The first N with
 * a candidate that reads back gives the shortest digits. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/squad.h"

/* The digits of an N-digit candidate: m in [10^(N-1), 10^N), value m * 10^(e - N + 1). */
static bool reads_back(uint64_t m, int e10, double v) {
  char buf[48];
  snprintf(buf, sizeof buf, "%" PRIu64 "e%d", m, e10);
  return strtod(buf, NULL) == v;
}

/* Shortest digits of finite v > 0: digits[] (no trailing zeros), *nd of them, and decpt. */
static void shortest(double v, char digits[24], int *nd, int *decpt) {
  for (int n = 1; n <= 17; n++) {
    char buf[40];
    snprintf(buf, sizeof buf, "%.*e", n - 1, v);      /* d.ddde[+-]XX */
    uint64_t m = 0;
    const char *p = buf;
    for (; *p != 'e'; p++)
      if (*p != '.') m = m * 10 + (uint64_t)(*p - '0');
    int e = atoi(p + 1);                              /* v ~ m * 10^(e - n + 1) */
    int scale = e - n + 1;
    uint64_t found = 0;
    if (reads_back(m, scale, v)) {
      found = m;
    } else {
      /* The nearest did not read back: try the neighbour on the value's other side. */
      char exact[40];
      snprintf(exact, sizeof exact, "%" PRIu64 "e%d", m, scale);
      uint64_t other = strtod(exact, NULL) < v ? m + 1 : m - 1;
      if (other > 0 && reads_back(other, scale, v)) found = other;
    }
    if (!found) continue;
    /* Render found * 10^scale as digits and a decimal point position. */
    char d[24];
    int len = snprintf(d, sizeof d, "%" PRIu64, found);
    int point = len + scale;                          /* decpt: value = 0.d * 10^point */
    while (len > 1 && d[len - 1] == '0') len--;
    d[len] = '\0';
    memcpy(digits, d, (size_t)len + 1);
    *nd = len;
    *decpt = point;
    return;
  }
  /* 17 digits always read back; not reached. */
  snprintf(digits, 24, "0");
  *nd = 1;
  *decpt = 1;
}

char *est_squad_format_pyfloat(double v, char *buf, size_t size) {
  if (isnan(v)) {
    snprintf(buf, size, "NaN");
    return buf;
  }
  if (isinf(v)) {
    snprintf(buf, size, v > 0 ? "Infinity" : "-Infinity");
    return buf;
  }
  const char *sign = signbit(v) ? "-" : "";
  if (v == 0) {
    snprintf(buf, size, "%s0.0", sign);
    return buf;
  }
  char d[24];
  int nd, decpt;
  shortest(fabs(v), d, &nd, &decpt);
  if (decpt <= -4 || decpt > 16) {                    /* 1e-05, 1.5e+16 */
    int e = decpt - 1;
    snprintf(buf, size, "%s%c%s%.*s%s%02d", sign, d[0], nd > 1 ? "." : "", nd - 1, d + 1, e < 0 ? "e-" : "e+",
             e < 0 ? -e : e);
  } else if (decpt <= 0) {                            /* 0.000123 */
    snprintf(buf, size, "%s0.%.*s%s", sign, -decpt, "0000", d);
  } else if (decpt >= nd) {                           /* 1200.0 */
    snprintf(buf, size, "%s%s%.*s.0", sign, d, decpt - nd, "0000000000000000");
  } else {                                            /* 12.34 */
    snprintf(buf, size, "%s%.*s.%s", sign, decpt, d, d + decpt);
  }
  return buf;
}
