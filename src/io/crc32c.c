/* CRC32C (Castagnoli): a slicing-by-8 table path and an SSE4.2 path.
 *
 * The hardware path runs three independent crc32 instruction streams over three
 * adjacent blocks (the instruction has a 3-cycle latency but a 1-cycle throughput), then
 * merges them: the CRC register is linear over GF(2), so
 *     reg(A ‖ B) = shift_|B|(reg(A)) ^ reg_from_0(B),
 * where shift_n appends n zero bytes. shift_n for the two fixed block sizes is a 4×256
 * table built once at start-up. The same scheme as Mark Adler's crc32c.c, written anew. */
#include "est/crc32c.h"

#include <pthread.h>
#include <string.h>

#if defined(__x86_64__)
#include <nmmintrin.h>
#define EST_CRC_X86 1
#endif

#define POLY 0x82f63b78u /* reflected 0x1EDC6F41 */

enum { LONG_BLOCK = 8192, SHORT_BLOCK = 256 };

static uint32_t table8[8][256];       /* slicing-by-8 */
static uint32_t zeros_long[4][256];   /* shift by LONG_BLOCK zero bytes */
static uint32_t zeros_short[4][256];  /* shift by SHORT_BLOCK zero bytes */
static int have_hw;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

/* Raw register (no pre/post inversion) advanced over n zero bytes, one byte at a time. */
static uint32_t shift_slow(uint32_t reg, size_t n) {
  while (n--) reg = (reg >> 8) ^ table8[0][reg & 0xff];
  return reg;
}

static void build_zeros(uint32_t zeros[4][256], size_t n) {
  uint32_t basis[32];
  for (int b = 0; b < 32; b++) basis[b] = shift_slow(1u << b, n);
  for (int k = 0; k < 4; k++)
    for (int v = 0; v < 256; v++) {
      uint32_t r = 0;
      for (int b = 0; b < 8; b++)
        if (v >> b & 1) r ^= basis[8 * k + b];
      zeros[k][v] = r;
    }
}

static inline uint32_t shift_fast(const uint32_t zeros[4][256], uint32_t reg) {
  return zeros[0][reg & 0xff] ^ zeros[1][(reg >> 8) & 0xff] ^ zeros[2][(reg >> 16) & 0xff] ^
         zeros[3][reg >> 24];
}

static void init_tables(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (POLY & (0u - (c & 1)));
    table8[0][i] = c;
  }
  for (int t = 1; t < 8; t++)
    for (int i = 0; i < 256; i++) table8[t][i] = (table8[t - 1][i] >> 8) ^ table8[0][table8[t - 1][i] & 0xff];
  build_zeros(zeros_long, LONG_BLOCK);
  build_zeros(zeros_short, SHORT_BLOCK);
#ifdef EST_CRC_X86
  __builtin_cpu_init();
  have_hw = __builtin_cpu_supports("sse4.2");
#endif
}

static inline uint64_t load64(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, 8); /* x86 / little-endian: bytes in stream order */
  return v;
}

/* Portable path: raw register in, raw register out. */
static uint32_t sw_update(uint32_t reg, const uint8_t *p, size_t n) {
  while (n && ((uintptr_t)p & 7)) {
    reg = (reg >> 8) ^ table8[0][(reg ^ *p++) & 0xff];
    n--;
  }
  while (n >= 8) {
    uint64_t w = load64(p) ^ reg;
    reg = table8[7][w & 0xff] ^ table8[6][(w >> 8) & 0xff] ^ table8[5][(w >> 16) & 0xff] ^
          table8[4][(w >> 24) & 0xff] ^ table8[3][(w >> 32) & 0xff] ^ table8[2][(w >> 40) & 0xff] ^
          table8[1][(w >> 48) & 0xff] ^ table8[0][w >> 56];
    p += 8;
    n -= 8;
  }
  while (n--) reg = (reg >> 8) ^ table8[0][(reg ^ *p++) & 0xff];
  return reg;
}

#ifdef EST_CRC_X86
/* Three streams over blocks of `block` bytes, merged with the matching zeros table. */
#define HW_TRIPLE(block, zeros)                                 \
  while (n >= 3 * (block)) {                                    \
    uint64_t c0 = reg, c1 = 0, c2 = 0;                          \
    const uint8_t *end = p + (block);                           \
    do {                                                        \
      c0 = _mm_crc32_u64(c0, load64(p));                        \
      c1 = _mm_crc32_u64(c1, load64(p + (block)));              \
      c2 = _mm_crc32_u64(c2, load64(p + 2 * (block)));          \
      p += 8;                                                   \
    } while (p < end);                                          \
    reg = shift_fast(zeros, (uint32_t)c0) ^ (uint32_t)c1;       \
    reg = shift_fast(zeros, reg) ^ (uint32_t)c2;                \
    p += 2 * (block);                                           \
    n -= 3 * (block);                                           \
  }

__attribute__((target("sse4.2"))) static uint32_t hw_update(uint32_t reg, const uint8_t *p, size_t n) {
  while (n && ((uintptr_t)p & 7)) {
    reg = _mm_crc32_u8(reg, *p++);
    n--;
  }
  HW_TRIPLE(LONG_BLOCK, zeros_long)
  HW_TRIPLE(SHORT_BLOCK, zeros_short)
  uint64_t c = reg;
  while (n >= 8) {
    c = _mm_crc32_u64(c, load64(p));
    p += 8;
    n -= 8;
  }
  reg = (uint32_t)c;
  while (n--) reg = _mm_crc32_u8(reg, *p++);
  return reg;
}
#endif

uint32_t est_crc32c_portable_extend(uint32_t crc, const void *data, size_t n) {
  pthread_once(&init_once, init_tables);
  return ~sw_update(~crc, (const uint8_t *)data, n);
}

uint32_t est_crc32c_extend(uint32_t crc, const void *data, size_t n) {
  pthread_once(&init_once, init_tables);
#ifdef EST_CRC_X86
  if (have_hw) return ~hw_update(~crc, (const uint8_t *)data, n);
#endif
  return ~sw_update(~crc, (const uint8_t *)data, n);
}

uint32_t est_crc32c(const void *data, size_t n) { return est_crc32c_extend(0, data, n); }

int est_crc32c_is_hardware(void) {
  pthread_once(&init_once, init_tables);
  return have_hw;
}

#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
#include "io/fuzzing.h"
int est_fuzz_ignore_checksums; /* see io/fuzzing.h: fuzz builds only */
#endif
