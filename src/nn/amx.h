/* Internal: AMX tile configuration, shared by the bf16 tile GEMM (gemm_amx.c), the int8 one
 * (gemm_int8_amx.c) and the throughput probes (cpu_peak.c); whether the CPU has the tiles
 * and Linux granted their state is nn/cpu_features.h's question. Include only where the
 * caller's function is compiled with target("amx-tile"). */
#ifndef EST_NN_AMX_H
#define EST_NN_AMX_H

#include <stdint.h>
#include <string.h>

/* LDTILECFG's 64-byte operand (palette 1: 8 tiles of up to 16 rows x 64 bytes). */
typedef struct {
  uint8_t palette, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} est_amx_config;

/* Tiles 0..tiles-1 as 16 rows x 64 bytes (16 x 32 bf16, 16 x 16 fp32 or int32 words).
 * Our own asm rather than GCC 12's _tile_loadconfig: that one tells the compiler it reads
 * only the first 8 bytes of the configuration, so the stores of the rows and column
 * widths were dropped as dead and LDTILECFG faulted on the zeros. */
static inline void est_amx_configure(int tiles) {
  est_amx_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.palette = 1;
  for (int t = 0; t < tiles; t++) cfg.colsb[t] = 64, cfg.rows[t] = 16;
  __asm__ volatile("ldtilecfg %0" : : "m"(cfg));
}

#endif
