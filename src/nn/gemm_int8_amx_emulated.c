/* The AMX int8 kernel's body (nn/gemm_int8_amx.h) on tiles emulated in plain C, for the tests
 * only: est runs it only where EST_KERNEL=amxemu asks (nn/kernel_choice.h), so that a CPU
 * without AMX (Zen 4, Ice Lake) checks the AMX path against the reference: the activations in
 * the tiles' layout, the row blocks of whole 16-row tiles, the k tail, the row and column
 * edges and the epilogue (test_gemm_int8 and test_bert_golden_int8 under amxemu), leaving to
 * the hardware only the instructions themselves. Each
 * operation follows the instruction set's definition of TILELOADD, TILESTORED, TILEZERO and
 * TDPBUSD for tiles of 16 rows x 64 bytes: C.row[m].dword[n] += sum over k < 16 of the four
 * products ZeroExtend(A.row[m].byte[4k + i]) * SignExtend(B.row[k].byte[4n + i]). Needs
 * est_cpu_has_avx512_vnni() (the epilogue is AVX-512 code). */
#include <stdint.h>
#include <string.h>

#include "nn/gemm_kernels.h"

static __thread uint8_t tiles[8][16][64]; /* the eight tile registers of the thread */

static void tile_load(int t, const void *p, long stride) {
  for (int r = 0; r < 16; r++) memcpy(tiles[t][r], (const char *)p + r * stride, 64);
}

static void tile_store(int t, void *p, long stride) {
  for (int r = 0; r < 16; r++) memcpy((char *)p + r * stride, tiles[t][r], 64);
}

static void tile_dpbusd(int c, int a, int b) {
  for (int m = 0; m < 16; m++)
    for (int n = 0; n < 16; n++) {
      uint32_t acc; /* the dword's arithmetic wraps, as the instruction's */
      memcpy(&acc, tiles[c][m] + 4 * n, 4);
      for (int k = 0; k < 16; k++)
        for (int i = 0; i < 4; i++)
          acc += (uint32_t)((int32_t)tiles[a][m][4 * k + i] * (int32_t)(int8_t)tiles[b][k][4 * n + i]);
      memcpy(tiles[c][m] + 4 * n, &acc, 4);
    }
}

#define AMX8_TARGET __attribute__((target("avx512f,avx512bw,avx512vl")))
#define AMX8_BLOCK est_int8_block_amx_emulated
#define TILE_CONFIGURE() ((void)0)
#define TILE_RELEASE() ((void)0)
#define TILE_ZERO(t) memset(tiles[t], 0, sizeof tiles[t])
#define TILE_LOAD(t, p, stride) tile_load(t, p, stride)
#define TILE_STORE(t, p, stride) tile_store(t, p, stride)
#define TILE_DPBUSD(c, a, b) tile_dpbusd(c, a, b)
#include "nn/gemm_int8_amx.h"
