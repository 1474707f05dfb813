/* The AMX int8 kernel (nn/gemm_kernels.h) for CPUs with AMX-INT8 (Sapphire Rapids and later
 * Xeons): TDPBUSD on the tile unit, the body in nn/gemm_int8_amx.h. A TDPBUSD is 16384 u8 x s8
 * multiply-adds; on the Xeons that have it, the tile unit's rate is several times the two
 * VPDPBUSD zmm a cycle of the AVX512-VNNI kernel (bench/bench_peak measures both). */
#include "nn/gemm_kernels.h"

#if defined(__x86_64__) && defined(__linux__)
#include "nn/amx.h"

#define AMX8_TARGET __attribute__((target("amx-tile,amx-int8,avx512f,avx512bw,avx512vl")))
#define AMX8_BLOCK est_int8_block_amx
#define TILE_CONFIGURE() est_amx_configure(8)
#define TILE_RELEASE() _tile_release()
#define TILE_ZERO(t) _tile_zero(t)
#define TILE_LOAD(t, p, stride) _tile_loadd(t, p, stride)
#define TILE_STORE(t, p, stride) _tile_stored(t, p, stride)
#define TILE_DPBUSD(c, a, b) _tile_dpbusd(c, a, b)
#include "nn/gemm_int8_amx.h"
#else
void est_int8_block_amx(est_int8_a_layout layout, const est_int8_weights *w, const uint8_t *qa, const float *sa,
                        const float *bias, float *C, int ldc, int m0, int m1, int n0, int n1) {
  (void)layout, (void)w, (void)qa, (void)sa, (void)bias, (void)C, (void)ldc, (void)m0, (void)m1, (void)n0, (void)n1;
}
#endif
