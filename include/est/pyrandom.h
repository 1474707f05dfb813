/* est/pyrandom.h — CPython's `random.Random`, draw for draw, for code that must reproduce
 * what a Python script drew (create_pretraining_data.py's one `random.Random(random_seed)`).
 *
 *     est_pyrandom r;
 *     est_pyrandom_seed(&r, 12345);             // random.Random(12345)
 *     double u = est_pyrandom_random(&r);       // r.random()
 *     int64_t k = est_pyrandom_randint(&r, 2, 125);   // r.randint(2, 125)
 *     est_pyrandom_shuffle(&r, items, n, sizeof *items);   // r.shuffle(items)
 *
 * What CPython does (Lib/random.py, Modules/_randommodule.c, Python 3.2 to 3.13):
 * - The generator is MT19937 (Matsumoto & Nishimura's 2002 reference, 624 words).
 * - Seeding from an int n: the key is |n| cut into 32-bit words, least significant first
 *   (one word 0 for n == 0), fed to the reference init_by_array.
 * - random() = (a * 2^26 + b) / 2^53 with a = next word >> 5, b = next word >> 6.
 * - getrandbits(k): ceil(k / 32) words, least significant word first; the last one keeps
 *   only its top bits (word >> (32 - remaining)). getrandbits(0) draws nothing.
 * - randrange/randint go through _randbelow_with_getrandbits(n): k = bit_length(n) bits,
 *   redrawn while >= n. So randint(a, a) still draws one word. randint(a, b) = a +
 *   _randbelow(b - a + 1).
 * - shuffle(x): for i = len(x)-1 down to 1, swap x[i] with x[_randbelow(i + 1)].
 * Not thread-safe: one generator per thread, as Python's (which holds the GIL).
 */
#ifndef EST_PYRANDOM_H
#define EST_PYRANDOM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { EST_PYRANDOM_N = 624 };

typedef struct est_pyrandom {
  uint32_t mt[EST_PYRANDOM_N];
  int index;           /* next word of mt to temper; N: regenerate first */
} est_pyrandom;

/* random.Random(seed) / r.seed(seed) for an int seed (negative seeds use |seed|). */
void est_pyrandom_seed(est_pyrandom *r, int64_t seed);
/* init_by_array(key[0..n)), n >= 1: the seeding step for an arbitrary-size int. */
void est_pyrandom_seed_array(est_pyrandom *r, const uint32_t *key, size_t n);

/* The next tempered 32-bit word (genrand_uint32). */
uint32_t est_pyrandom_u32(est_pyrandom *r);
/* random(): a double in [0, 1) with 53 random bits. */
double est_pyrandom_random(est_pyrandom *r);
/* getrandbits(k) for 0 <= k <= 64. */
uint64_t est_pyrandom_getrandbits(est_pyrandom *r, int k);
/* _randbelow(n) for n >= 1: uniform in [0, n). */
uint64_t est_pyrandom_randbelow(est_pyrandom *r, uint64_t n);
/* randint(a, b) for a <= b (b - a < 2^63). */
int64_t est_pyrandom_randint(est_pyrandom *r, int64_t a, int64_t b);
/* shuffle() of n elements of `size` bytes each at base (size <= 64). */
void est_pyrandom_shuffle(est_pyrandom *r, void *base, size_t n, size_t size);

#ifdef __cplusplus
}
#endif
#endif
