/* Internal: what this CPU (and its OS) can run, asked once and kept. The bottom of the GEMM
 * kernels' order in src/nn:
 *
 *   cpu_features.c   the probes below: facts about the CPU, nothing else
 *   kernel_choice.c  which kernel may run: the probes and EST_KERNEL (nn/kernel_choice.h)
 *   kernels          gemm_f32.c, gemm_bf16.c, gemm_amx.c, gemm_int8_*.c, quant_int8.c: they
 *                    ask the choice (or, for their own instructions, the probes)
 *   dispatch         gemm.c, gemm_int8.c: pick a kernel per precision and shape, run it
 *
 * Each file includes only the headers of its own step and those below (tests/test_layout.c).
 * Whether a dispatch may use a feature is the choice's question (est_kernel_avx512f, ...):
 * EST_KERNEL=noavx512 hides AVX-512 from a CPU that has it; these answer for the CPU. */
#ifndef EST_NN_CPU_FEATURES_H
#define EST_NN_CPU_FEATURES_H

/* 1 when the CPU has the instructions, else 0 */
int est_cpu_has_avx512f(void);
int est_cpu_has_avx512_bf16(void);
/* AVX512-VNNI with AVX512-BW and AVX512-VL (the int8 kernel's epilogue and quantization) */
int est_cpu_has_avx512_vnni(void);
/* AVX-VNNI: VPDPBUSD in its VEX (AVX2-width) form */
int est_cpu_has_avx_vnni(void);
/* AMX-BF16 (with AMX-TILE and AVX512-BF16) on the CPU and its tile state granted to this
 * process by Linux (asked for once, on the first call; refused before Linux 5.16) */
int est_cpu_has_amx_bf16(void);
/* AMX-INT8 (with AMX-TILE and AVX512-VNNI) and Linux's grant of the tile state */
int est_cpu_has_amx_int8(void);

#endif
