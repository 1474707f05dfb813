/* Internal: which kernel est's dispatch runs, and the one place that decides it.
 *
 *     EST_KERNEL=blas build/tests/test_gemm_f32      # every fp32 GEMM on OpenBLAS
 *     est_kernel_set(EST_KERNEL_OWN);               # or from a test or a bench
 *
 * By default (auto) each dispatch site picks by CPU and shape: est's own fp32 AVX-512F GEMM
 * or OpenBLAS per shape (gemm.c), the attention's per-head products on the own kernel
 * (attention.c), and in bf16 mode the AMX tiles where the CPU has them, else VDPBF16PS
 * (est_sgemm_bf16). A forced choice pins one path, so that one machine can run every path
 * it has (ctest runs the CPU-dependent tests once per choice, docs/testing.md §3), the way
 * oneDNN's ONEDNN_MAX_CPU_ISA caps the instruction set it uses:
 *
 *   auto      by CPU and shape
 *   blas      fp32: every GEMM and every attention product on OpenBLAS
 *   own       fp32: est's AVX-512F kernel (gemm_f32.c) for every product it can take (needs
 *             AVX-512F); it declines only what it never runs (K = 0, alpha = 0) or when it
 *             gets no memory for its packed B, and OpenBLAS runs those
 *   bf16dp    bf16: VDPBF16PS (gemm_bf16.c), never the AMX tiles (needs AVX512-BF16)
 *   amx       bf16: the AMX tiles (gemm_amx.c), where auto also runs them (needs AMX-BF16
 *             and Linux's grant of the tile state)
 *   noavx512  as on a CPU without AVX-512: none of est's run-time AVX-512 code (OpenBLAS for
 *             every GEMM, the scalar GELU), no bf16 (est_precision_resolve gives fp32), no AMX.
 *             What the compiler vectorised with -march=native stays as built, and OpenBLAS
 *             keeps its own kernels (OPENBLAS_CORETYPE=Haswell picks its AVX2 ones); int8 runs
 *             AVX-VNNI where the CPU has it, else fp32 (est_precision_resolve says so)
 *   amxint8   int8: the AMX tiles (gemm_int8_amx.c), where auto also runs them (needs AMX-INT8,
 *             AVX512-VNNI and Linux's grant of the tile state)
 *   vnni512   int8: the AVX512-VNNI kernel (gemm_int8_vnni512.c; needs AVX512-VNNI), never the
 *             AMX tiles
 *   avxvnni   int8: the AVX-VNNI kernel (gemm_int8_avxvnni.c; needs AVX-VNNI), never the
 *             AVX-512 one nor the tiles
 *   int8ref   int8: the plain-C reference twin (gemm_int8_ref.c), on any CPU: slow, for tests
 *             that compare a whole model's int8 run with the definition
 *   amxemu    int8: the AMX kernel's body on tiles emulated in plain C
 *             (gemm_int8_amx_emulated.c), with the AMX path's activation layout and blocking:
 *             slow, for tests on CPUs without AMX (needs AVX512-VNNI, as its epilogue is
 *             AVX-512 code)
 *
 * The fp32 choices leave the bf16 and int8 kernels to auto and the bf16 and int8 ones leave fp32's; which of the
 * two a GEMM runs is the precision's business (est/precision.h), which this module knows
 * nothing of. Not thread-safe: set it between GEMMs (before a model runs), not during one. */
#ifndef EST_NN_KERNEL_CHOICE_H
#define EST_NN_KERNEL_CHOICE_H

#include "est/status.h"

typedef enum {
  EST_KERNEL_AUTO = 0,
  EST_KERNEL_BLAS,
  EST_KERNEL_OWN,
  EST_KERNEL_BF16DP,
  EST_KERNEL_AMX,
  EST_KERNEL_NOAVX512,
  EST_KERNEL_VNNI512,
  EST_KERNEL_AVXVNNI,
  EST_KERNEL_INT8REF,
  EST_KERNEL_AMXINT8,
  EST_KERNEL_AMXEMU,
} est_kernel;

/* The choice in effect: the last est_kernel_set, else EST_KERNEL from the environment (read
 * once, on the first call of any function here), else auto. */
est_kernel est_kernel_get(void);
/* Sets the choice; EST_ERR_FAILED_PRECONDITION "kernel amx: this CPU has no ..." (choice
 * unchanged) when the CPU lacks what k needs. */
est_status est_kernel_set(est_kernel k);

/* "auto", "blas", ... <-> the enum; parse returns 0, or -1 for any other name. */
const char *est_kernel_name(est_kernel k);
int est_kernel_parse(const char *name, est_kernel *out);
/* NULL when this CPU can run k, else what it lacks ("AVX-512F", "AVX512-BF16", ...). */
const char *est_kernel_missing(est_kernel k);

/* EST_KERNEL as read: EST_OK when unset, empty or usable; else the error, with its message
 * (EST_ERR_INVALID_ARGUMENT for a name est does not know, EST_ERR_FAILED_PRECONDITION for a
 * kernel this CPU lacks), logged once as well, and the choice stays auto: the library never
 * exits, so a program that must not run on another kernel than the one named asks here
 * (the tests do: tests/test_util.h, test_forced_kernel_or_skip). */
est_status est_kernel_env_status(void);

/* The questions the dispatch sites ask, answered from the choice and the CPU: */
/* est's AVX-512F code may run (the own GEMM, the 16-lane GELU): the CPU has it, not noavx512 */
int est_kernel_avx512f(void);
/* bf16 GEMMs may run (VDPBF16PS): the CPU has AVX512-BF16, not noavx512 */
int est_kernel_avx512_bf16(void);
/* bf16 GEMMs run on the AMX tiles: the CPU and the OS allow it, and neither bf16dp nor noavx512 */
int est_kernel_amx(void);
/* int8 GEMMs run on the AMX tiles: the CPU and the OS allow it, and no other int8 kernel
 * (nor noavx512, nor the emulated tiles) is forced */
int est_kernel_amx_int8(void);
/* int8 GEMMs may run on AVX512-VNNI (they do unless the tiles are chosen above): the CPU has
 * it, and neither noavx512 nor avxvnni nor int8ref is forced */
int est_kernel_vnni512(void);
/* int8 GEMMs run on AVX-VNNI: the CPU has it and vnni512 is not forced nor may run */
int est_kernel_avxvnni(void);
/* some int8 GEMM may run: one of the three above, or int8ref or amxemu forced */
int est_kernel_int8(void);

#endif
