/* Instruction-throughput loops, the add chain that measures the core clock, and the
 * bf16/fp32 probe (nn/cpu_peak.h). Inline assembly
 * rather than intrinsics so the compiler cannot shorten, fuse or reorder the loop: 20
 * accumulators zmm0..zmm19 (more than FMA latency 4 x 2 pipes, so only the issue rate
 * counts), sources zmm20 and zmm21 zeroed so every value stays 0 (no denormals). */
#include <immintrin.h>
#include <time.h>

#include "nn/amx.h"
#include "nn/cpu_peak.h"
#include "nn/kernel_choice.h" /* est_kernel_avx512f, ... */

#if defined(__x86_64__)
#define PEAK_OP20(op)                                                                                                  \
  op " %%zmm21, %%zmm20, %%zmm0\n\t" op " %%zmm21, %%zmm20, %%zmm1\n\t" op " %%zmm21, %%zmm20, %%zmm2\n\t" op         \
     " %%zmm21, %%zmm20, %%zmm3\n\t" op " %%zmm21, %%zmm20, %%zmm4\n\t" op " %%zmm21, %%zmm20, %%zmm5\n\t" op          \
     " %%zmm21, %%zmm20, %%zmm6\n\t" op " %%zmm21, %%zmm20, %%zmm7\n\t" op " %%zmm21, %%zmm20, %%zmm8\n\t" op          \
     " %%zmm21, %%zmm20, %%zmm9\n\t" op " %%zmm21, %%zmm20, %%zmm10\n\t" op " %%zmm21, %%zmm20, %%zmm11\n\t" op        \
     " %%zmm21, %%zmm20, %%zmm12\n\t" op " %%zmm21, %%zmm20, %%zmm13\n\t" op " %%zmm21, %%zmm20, %%zmm14\n\t" op       \
     " %%zmm21, %%zmm20, %%zmm15\n\t" op " %%zmm21, %%zmm20, %%zmm16\n\t" op " %%zmm21, %%zmm20, %%zmm17\n\t" op       \
     " %%zmm21, %%zmm20, %%zmm18\n\t" op " %%zmm21, %%zmm20, %%zmm19\n\t"

/* 20 adds into one register: a dependency chain, one add per cycle. The addend is a
 * register, not an immediate: Golden Cove and later cores fold `add $imm` chains in the
 * renamer (Sapphire / Emerald Rapids measured 20+ "GHz" with `add $1`), never `add reg`. */
#define PEAK_ADD20 "add %2, %1\n\t" "add %2, %1\n\t" "add %2, %1\n\t" "add %2, %1\n\t" "add %2, %1\n\t"            \
                   "add %2, %1\n\t" "add %2, %1\n\t" "add %2, %1\n\t" "add %2, %1\n\t" "add %2, %1\n\t"            \
                   "add %2, %1\n\t" "add %2, %1\n\t" "add %2, %1\n\t" "add %2, %1\n\t" "add %2, %1\n\t"            \
                   "add %2, %1\n\t" "add %2, %1\n\t" "add %2, %1\n\t" "add %2, %1\n\t" "add %2, %1\n\t"

#define PEAK_LOOP(op, blocks)                                                                                          \
  __asm__ volatile("vpxord %%zmm20, %%zmm20, %%zmm20\n\t"                                                              \
                   "vpxord %%zmm21, %%zmm21, %%zmm21\n\t"                                                              \
                   "1:\n\t" PEAK_OP20(op) "dec %0\n\t"                                                                 \
                                          "jnz 1b\n\t"                                                                 \
                   : "+r"(blocks)                                                                                      \
                   :                                                                                                   \
                   : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", \
                     "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "cc")

/* target("avx512f"): the clobber list names zmm16-21, which exist only with AVX-512, so
 * the file builds with any -march and the CPU check decides at run time. */
__attribute__((target("avx512f"))) static void fma_loop(long blocks) { PEAK_LOOP("vfmadd231ps", blocks); }
__attribute__((target("avx512f"))) static void dpbf16_loop(long blocks) { PEAK_LOOP("vdpbf16ps", blocks); }
__attribute__((target("avx512f"))) static void dpbusd_loop(long blocks) { PEAK_LOOP("vpdpbusd", blocks); }

/* Each loop runs where the kernel choice lets est use its instruction (nn/kernel_choice.h:
 * the CPU has it, and EST_KERNEL does not hide it), as the GEMMs it stands for would. */
int est_peak_fma_loop(long blocks) {
  if (!est_kernel_avx512f()) return -1;
  if (blocks > 0) fma_loop(blocks);
  return 0;
}

int est_peak_dpbf16_loop(long blocks) {
  if (!est_kernel_avx512_bf16()) return -1;
  if (blocks > 0) dpbf16_loop(blocks);
  return 0;
}

int est_peak_dpbusd_loop(long blocks) {
  if (!est_kernel_vnni512()) return -1;
  if (blocks > 0) dpbusd_loop(blocks);
  return 0;
}

/* The loop counter's dec + jnz run beside the chain (another port), so an iteration takes
 * the chain's 20 cycles. */
int est_peak_add_chain(long blocks) {
  long x = 0, one = 1;
  if (blocks > 0)
    __asm__ volatile("1:\n\t" PEAK_ADD20 "dec %0\n\t" "jnz 1b\n\t" : "+r"(blocks), "+r"(x) : "r"(one) : "cc");
  return 0;
}

/* Four accumulators (tiles 0-3) each fed by tiles 4 and 5, all zero: the tile unit's
 * latency is covered, so only its issue rate counts. The tile intrinsics are volatile
 * builtins, so the compiler keeps every one; dp is one of them (a macro: each tile number
 * must be a constant). */
#define AMX_PEAK_LOOP(dp, blocks)                                                                                      \
  do {                                                                                                                 \
    est_amx_configure(6);                                                                                              \
    _tile_zero(0);                                                                                                     \
    _tile_zero(1);                                                                                                     \
    _tile_zero(2);                                                                                                     \
    _tile_zero(3);                                                                                                     \
    _tile_zero(4);                                                                                                     \
    _tile_zero(5);                                                                                                     \
    for (long b = 0; b < (blocks); b++)                                                                                \
      for (int i = 0; i < EST_PEAK_BLOCK / 4; i++) {                                                                   \
        dp(0, 4, 5);                                                                                                   \
        dp(1, 4, 5);                                                                                                   \
        dp(2, 4, 5);                                                                                                   \
        dp(3, 4, 5);                                                                                                   \
      }                                                                                                                \
    _tile_release();                                                                                                   \
  } while (0)

__attribute__((target("amx-tile,amx-bf16"))) static void amx_loop(long blocks) {
  AMX_PEAK_LOOP(_tile_dpbf16ps, blocks);
}
__attribute__((target("amx-tile,amx-int8"))) static void amx_int8_loop(long blocks) {
  AMX_PEAK_LOOP(_tile_dpbusd, blocks);
}

int est_peak_amx_loop(long blocks) {
  if (!est_kernel_amx()) return -1;
  if (blocks > 0) amx_loop(blocks);
  return 0;
}

int est_peak_amx_int8_loop(long blocks) {
  if (!est_kernel_amx_int8()) return -1;
  if (blocks > 0) amx_int8_loop(blocks);
  return 0;
}
#else
int est_peak_add_chain(long blocks) {
  (void)blocks;
  return -1;
}
int est_peak_fma_loop(long blocks) {
  (void)blocks;
  return -1;
}
int est_peak_dpbf16_loop(long blocks) {
  (void)blocks;
  return -1;
}
int est_peak_amx_loop(long blocks) {
  (void)blocks;
  return -1;
}
int est_peak_amx_int8_loop(long blocks) {
  (void)blocks;
  return -1;
}
int est_peak_dpbusd_loop(long blocks) {
  (void)blocks;
  return -1;
}
#endif

static double thread_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); /* descheduled time does not count */
  return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Best of 3 seconds for `blocks` blocks of `loop`; < 0 if the loop cannot run. */
static double best_seconds(int (*loop)(long), long blocks) {
  double best = -1;
  for (int r = 0; r < 3; r++) {
    double t0 = thread_seconds();
    if (loop(blocks) != 0) return -1;
    double t = thread_seconds() - t0;
    if (best < 0 || t < best) best = t;
  }
  return best;
}

double est_peak_bf16_fp32_ratio(void) {
  const long blocks = 100 * 1000; /* 2 M instructions: ~0.5 ms of FMAs at 4 G/s */
  double fma = best_seconds(est_peak_fma_loop, blocks);
  if (est_kernel_amx()) { /* what est_sgemm_bf16 runs there; ~16 cycles each */
    double tile = best_seconds(est_peak_amx_loop, blocks / 20);
    if (fma <= 0 || tile <= 0) return 0;
    return (double)EST_PEAK_TDPBF16_FLOP * fma / (EST_PEAK_FMA_FLOP * 20 * tile);
  }
  double dot = best_seconds(est_peak_dpbf16_loop, blocks);
  if (fma <= 0 || dot <= 0) return 0;
  /* same instruction count: the FLOP ratio is (64 / dot) / (32 / fma) */
  return (double)EST_PEAK_DPBF16_FLOP * fma / (EST_PEAK_FMA_FLOP * dot);
}
