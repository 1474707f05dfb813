/* CPython's random.Random: MT19937 as in Matsumoto & Nishimura's mt19937ar.c (2002), with
 * the seeding, random(), getrandbits() and _randbelow() that CPython layers on top. The
 * facts are listed in est/pyrandom.h; the constants are the MT19937 paper's. */
#include "est/pyrandom.h"

#include <assert.h>
#include <string.h>

#define MT_N EST_PYRANDOM_N
#define MT_M 397
#define MT_MATRIX_A 0x9908b0dfu
#define MT_UPPER 0x80000000u
#define MT_LOWER 0x7fffffffu

static void init_genrand(est_pyrandom *r, uint32_t s) {
  r->mt[0] = s;
  for (int i = 1; i < MT_N; i++)
    r->mt[i] = 1812433253u * (r->mt[i - 1] ^ (r->mt[i - 1] >> 30)) + (uint32_t)i;
  r->index = MT_N;
}

void est_pyrandom_seed_array(est_pyrandom *r, const uint32_t *key, size_t n) {
  assert(n >= 1);
  init_genrand(r, 19650218u);
  uint32_t *mt = r->mt;
  size_t i = 1, j = 0;
  for (size_t k = n > MT_N ? n : MT_N; k; k--) {
    mt[i] = (mt[i] ^ ((mt[i - 1] ^ (mt[i - 1] >> 30)) * 1664525u)) + key[j] + (uint32_t)j;
    i++;
    j++;
    if (i >= MT_N) {
      mt[0] = mt[MT_N - 1];
      i = 1;
    }
    if (j >= n) j = 0;
  }
  for (size_t k = MT_N - 1; k; k--) {
    mt[i] = (mt[i] ^ ((mt[i - 1] ^ (mt[i - 1] >> 30)) * 1566083941u)) - (uint32_t)i;
    i++;
    if (i >= MT_N) {
      mt[0] = mt[MT_N - 1];
      i = 1;
    }
  }
  mt[0] = 0x80000000u; /* the most significant bit is set: the state is never all zero */
  r->index = MT_N;
}

void est_pyrandom_seed(est_pyrandom *r, int64_t seed) {
  /* |seed| as an unsigned magnitude (|INT64_MIN| = 2^63 fits), cut into 32-bit words,
   * least significant first; only as many words as the magnitude needs, at least one. */
  uint64_t mag = seed < 0 ? (uint64_t)0 - (uint64_t)seed : (uint64_t)seed;
  uint32_t key[2] = {(uint32_t)mag, (uint32_t)(mag >> 32)};
  est_pyrandom_seed_array(r, key, key[1] ? 2 : 1);
}

static void regenerate(est_pyrandom *r) {
  static const uint32_t mag01[2] = {0u, MT_MATRIX_A};
  uint32_t *mt = r->mt, y;
  int kk = 0;
  for (; kk < MT_N - MT_M; kk++) {
    y = (mt[kk] & MT_UPPER) | (mt[kk + 1] & MT_LOWER);
    mt[kk] = mt[kk + MT_M] ^ (y >> 1) ^ mag01[y & 1u];
  }
  for (; kk < MT_N - 1; kk++) {
    y = (mt[kk] & MT_UPPER) | (mt[kk + 1] & MT_LOWER);
    mt[kk] = mt[kk + (MT_M - MT_N)] ^ (y >> 1) ^ mag01[y & 1u];
  }
  y = (mt[MT_N - 1] & MT_UPPER) | (mt[0] & MT_LOWER);
  mt[MT_N - 1] = mt[MT_M - 1] ^ (y >> 1) ^ mag01[y & 1u];
  r->index = 0;
}

uint32_t est_pyrandom_u32(est_pyrandom *r) {
  if (r->index >= MT_N) regenerate(r);
  uint32_t y = r->mt[r->index++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= y >> 18;
  return y;
}

double est_pyrandom_random(est_pyrandom *r) {
  uint32_t a = est_pyrandom_u32(r) >> 5, b = est_pyrandom_u32(r) >> 6;
  return ((double)a * 67108864.0 + (double)b) * (1.0 / 9007199254740992.0);
}

uint64_t est_pyrandom_getrandbits(est_pyrandom *r, int k) {
  assert(k >= 0 && k <= 64);
  if (k == 0) return 0;
  if (k <= 32) return est_pyrandom_u32(r) >> (32 - k);
  uint64_t lo = est_pyrandom_u32(r);   /* the least significant word comes first */
  uint64_t hi = est_pyrandom_u32(r) >> (64 - k);
  return lo | hi << 32;
}

uint64_t est_pyrandom_randbelow(est_pyrandom *r, uint64_t n) {
  assert(n >= 1);
  int k = 64 - __builtin_clzll(n); /* n.bit_length(), not that of n - 1: n may be 1 */
  uint64_t v;
  do v = est_pyrandom_getrandbits(r, k);
  while (v >= n);
  return v;
}

int64_t est_pyrandom_randint(est_pyrandom *r, int64_t a, int64_t b) {
  assert(a <= b);
  uint64_t width = (uint64_t)b - (uint64_t)a + 1u;
  return (int64_t)((uint64_t)a + est_pyrandom_randbelow(r, width));
}

void est_pyrandom_shuffle(est_pyrandom *r, void *base, size_t n, size_t size) {
  assert(size <= 64);
  unsigned char *p = base, tmp[64];
  for (size_t i = n; i-- > 1;) {
    size_t j = (size_t)est_pyrandom_randbelow(r, (uint64_t)i + 1u);
    if (j == i) continue;
    memcpy(tmp, p + i * size, size);
    memcpy(p + i * size, p + j * size, size);
    memcpy(p + j * size, tmp, size);
  }
}
