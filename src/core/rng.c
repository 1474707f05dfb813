/* Philox4x32-10 and a sequential stream on top of it. Constants from the Random123
 * paper (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as easy as 1, 2, 3"). */
#include "est/rng.h"

#include <math.h>

static const uint32_t PHILOX_M0 = 0xD2511F53u, PHILOX_M1 = 0xCD9E8D57u;
static const uint32_t PHILOX_W0 = 0x9E3779B9u, PHILOX_W1 = 0xBB67AE85u;

void est_philox4x32(uint64_t key, est_philox_counter counter, uint32_t out[4]) {
  uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
  uint32_t c0 = counter.c[0], c1 = counter.c[1], c2 = counter.c[2], c3 = counter.c[3];
  for (int round = 0; round < 10; round++) {
    uint64_t p0 = (uint64_t)PHILOX_M0 * c0, p1 = (uint64_t)PHILOX_M1 * c2;
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
    uint32_t n1 = (uint32_t)p1;
    uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
    uint32_t n3 = (uint32_t)p0;
    c0 = n0; c1 = n1; c2 = n2; c3 = n3;
    k0 += PHILOX_W0;
    k1 += PHILOX_W1;
  }
  out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

void est_rng_init(est_rng *rng, uint64_t seed) {
  rng->key = seed;
  rng->position = 0;
}

uint32_t est_rng_u32(est_rng *rng) {
  /* Word i lives in block i/4, lane i%4. Recomputing the block per word keeps the state
   * to one integer; streams here are not hot paths (dropout calls philox directly). */
  uint64_t block = rng->position >> 2;
  uint32_t out[4];
  est_philox_counter c = {{(uint32_t)block, (uint32_t)(block >> 32), 0x5eed5eedu, 0}};
  est_philox4x32(rng->key, c, out);
  return out[rng->position++ & 3];
}

uint64_t est_rng_u64(est_rng *rng) {
  uint64_t hi = est_rng_u32(rng);
  return (hi << 32) | est_rng_u32(rng);
}

float est_rng_uniform(est_rng *rng) { return est_u32_to_unit_float(est_rng_u32(rng)); }

uint64_t est_rng_below(est_rng *rng, uint64_t n) {
  uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x;
  do x = est_rng_u64(rng);
  while (x >= limit);
  return x % n;
}

double est_rng_normal(est_rng *rng) {
  /* u1 in (0, 1] so log(u1) is finite. */
  double u1 = ((double)(est_rng_u64(rng) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
  double u2 = (double)(est_rng_u64(rng) >> 11) * (1.0 / 9007199254740992.0);
  return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

float est_rng_truncated_normal(est_rng *rng, float stddev) {
  for (;;) {
    double z = est_rng_normal(rng);
    if (z >= -2.0 && z <= 2.0) return (float)(z * stddev);
  }
}
