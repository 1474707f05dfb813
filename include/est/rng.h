/* est/rng.h — counter-based random numbers (Philox4x32-10, Salmon et al. 2011).
 *
 * A value depends only on (key, counter), never on a hidden state or the thread that
 * asks for it. So dropout masks are the same for a given seed and step whatever the
 * thread count, a shuffle can be replayed exactly after a restart, and the whole "RNG
 * state" a checkpoint needs is one counter.
 *
 *     uint32_t r[4];
 *     est_philox4x32(seed, (est_philox_counter){step, stream, i, 0}, r);
 */
#ifndef EST_RNG_H
#define EST_RNG_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct est_philox_counter {
  uint32_t c[4];
} est_philox_counter;

/* Four independent 32-bit uniform words for (key, counter). */
void est_philox4x32(uint64_t key, est_philox_counter counter, uint32_t out[4]);

/* Uniform float in [0, 1) from the top 24 bits of a word. */
static inline float est_u32_to_unit_float(uint32_t x) { return (float)(x >> 8) * (1.0f / 16777216.0f); }

/* A simple sequential stream over Philox, for code that wants "next number" semantics
 * (weight init, shuffling). Its whole state is (key, position): save and restore both. */
typedef struct est_rng {
  uint64_t key;
  uint64_t position;   /* how many 32-bit words were consumed */
} est_rng;

void est_rng_init(est_rng *rng, uint64_t seed);
uint32_t est_rng_u32(est_rng *rng);
uint64_t est_rng_u64(est_rng *rng);
/* Uniform in [0, 1). */
float est_rng_uniform(est_rng *rng);
/* Uniform integer in [0, n), without modulo bias. n > 0. */
uint64_t est_rng_below(est_rng *rng, uint64_t n);
/* Standard normal (Box-Muller, double precision inside). */
double est_rng_normal(est_rng *rng);
/* Normal(0, stddev) truncated to [-2 stddev, 2 stddev] by resampling, as
 * tf.truncated_normal_initializer. */
float est_rng_truncated_normal(est_rng *rng, float stddev);

#ifdef __cplusplus
}
#endif
#endif
