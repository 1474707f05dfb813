/* base64 decoding (core/base64.h): 6 bits a character into a bit accumulator, a byte out
 * whenever 8 have gathered. */
#include "core/base64.h"

static int value_of(int c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

long est_base64_decode(const char *s, uint8_t *out) {
  uint32_t acc = 0;
  int bits = 0;
  long n = 0;
  for (long i = 0; s[i] && s[i] != '='; i++) {
    const int v = value_of((unsigned char)s[i]);
    if (v < 0) return -1 - i;
    acc = acc << 6 | (uint32_t)v;
    if ((bits += 6) >= 8) {
      bits -= 8;
      out[n++] = (uint8_t)(acc >> bits);
    }
  }
  return n;
}
