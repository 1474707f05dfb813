/* est/crc32c.h — CRC32C (Castagnoli), as TFRecord, checkpoints and events use it.
 *
 *     uint32_t c = est_crc32c("123456789", 9);           // 0xE3069283
 *     c = est_crc32c_extend(est_crc32c("hello ", 6), "world", 5);  // == crc of "hello world"
 *     uint32_t stored = est_crc32c_mask(c);               // what TF writes to disk
 *
 * est_crc32c uses the SSE4.2 crc32 instruction (three interleaved streams) when the CPU
 * has it, checked once at run time, and a slicing table otherwise. Both compute the
 * standard function: reflected polynomial 0x82F63B78, init and final XOR 0xFFFFFFFF.
 */
#ifndef EST_CRC32C_H
#define EST_CRC32C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* CRC32C of data[0..n); est_crc32c("", 0) == 0. */
uint32_t est_crc32c(const void *data, size_t n);

/* Continues `crc` (a finished CRC of a prefix) over more bytes:
 * est_crc32c_extend(est_crc32c(A), B) == est_crc32c(A ‖ B). */
uint32_t est_crc32c_extend(uint32_t crc, const void *data, size_t n);

/* The table-driven path regardless of the CPU (tests compare it against the fast one). */
uint32_t est_crc32c_portable_extend(uint32_t crc, const void *data, size_t n);

/* 1 when est_crc32c uses the hardware instruction. */
int est_crc32c_is_hardware(void);

/* TF stores CRCs "masked" (rotate right 15, add a constant) because a CRC of data that
 * itself contains CRCs is weak (crc32c.h in TSL). */
enum { EST_CRC32C_MASK_DELTA = 0xa282ead8u };

static inline uint32_t est_crc32c_mask(uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + (uint32_t)EST_CRC32C_MASK_DELTA;
}

static inline uint32_t est_crc32c_unmask(uint32_t masked) {
  uint32_t rot = masked - (uint32_t)EST_CRC32C_MASK_DELTA;
  return (rot >> 17) | (rot << 15);
}

#ifdef __cplusplus
}
#endif
#endif
