/* The AVX-VNNI int8 kernel (nn/gemm_kernels.h), for CPUs with VPDPBUSD in its VEX (AVX2-width)
 * form but no AVX-512 (Alder Lake and later client cores, Zen 5 client parts); its body is
 * nn/gemm_int8_ymm.h. */
#define YMM_TARGET __attribute__((target("avx2,fma,avxvnni")))
#define YMM_DPBUSD _mm256_dpbusd_avx_epi32
#define YMM_BLOCK est_int8_block_avxvnni
#include "nn/gemm_int8_ymm.h"
