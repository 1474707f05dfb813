/* The AVX-VNNI kernel's body (nn/gemm_int8_ymm.h) with EVEX encodings (AVX512-VNNI + VL), for
 * the tests only: est never dispatches to it, but a CPU with AVX-512 and no AVX-VNNI can check
 * the 8-lane kernel's arithmetic against the reference (test_gemm_int8). Needs
 * est_cpu_has_avx512_vnni(). */
#define YMM_TARGET __attribute__((target("avx2,fma,avx512vl,avx512vnni")))
#define YMM_DPBUSD _mm256_dpbusd_epi32
#define YMM_BLOCK est_int8_block_ymm_evex
#include "nn/gemm_int8_ymm.h"
