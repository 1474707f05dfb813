/* The machine's arithmetic ceiling, measured rather than read off a data sheet: how many
 * fp32 FMA (VFMADD231PS zmm), bf16 dot-product (VDPBF16PS zmm) and int8 dot-product
 * (VPDPBUSD zmm, AVX512-VNNI; TDPBUSD tiles, AMX-INT8) instructions each core
 * retires per second when nothing else limits it, and the GFLOP/s that makes
 * (the loops: src/nn/cpu_peak.c).
 *
 * Why: bench/README.md's share-of-peak figures divide by a peak, and whether bf16 can beat
 * fp32 at all is decided by the ratio of the two throughputs. A data sheet gives two FMA
 * pipes per core and "2x" for VDPBF16PS (64 FLOP per instruction against 32); a virtual
 * machine's CPU may differ, and on the one this was written on (Intel Xeon, family 6 model
 * 207) one VDPBF16PS retires for every four FMAs: half fp32's FLOP rate, so no bf16 GEMM
 * can beat fp32 there. The same CPU family has AMX (TDPBF16PS: 16 x 16 x 32 bf16 products
 * per instruction), which a VM may or may not expose; where it does, that is bf16's peak.
 *
 *   bench_peak [THREADS]    one OpenMP thread per core (default: OpenMP's thread count)
 *
 * Wall-clock over a fixed instruction count, best of 5, every thread running the same count
 * at once: on a shared machine a figure can only drop (another process took a core), so the
 * best run is the honest ceiling. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "nn/cpu_peak.h"

static double wall(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Best-of-5 instructions per second per thread with `threads` threads at once; 0 if the
 * CPU lacks the instruction. */
static double rate(int (*loop)(long), long blocks, int threads) {
  double best = 1e30;
  int failed = 0;
  for (int r = 0; r < 5; r++) {
    double t0 = 0, t1 = 0;
#pragma omp parallel num_threads(threads) reduction(| : failed)
    {
#pragma omp barrier
#pragma omp master
      t0 = wall();
      failed |= loop(blocks) != 0;
#pragma omp barrier
#pragma omp master
      t1 = wall();
    }
    if (failed) return 0;
    if (t1 - t0 < best) best = t1 - t0;
  }
  return (double)blocks * EST_PEAK_BLOCK / best;
}

static void report(const char *what, double per_core, int flop, int threads) {
  if (per_core <= 0) {
    printf("%-26s not available on this CPU\n", what);
    return;
  }
  printf("%-26s %.2f G instr/s per core = %6.1f GFLOP/s per core, %6.1f GFLOP/s on %d\n", what, per_core / 1e9,
         per_core * flop / 1e9, per_core * flop * threads / 1e9, threads);
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : omp_get_max_threads();
  if (threads < 1) {
    fprintf(stderr, "usage: bench_peak [THREADS >= 1]\n");
    return 2;
  }
  const long blocks = 20L * 1000 * 1000; /* 400 M instructions per thread: ~0.1-0.3 s */
  rate(est_peak_fma_loop, blocks / 10, threads); /* warm-up: wake the cores */
  double fma = rate(est_peak_fma_loop, blocks, threads);
  double dot = rate(est_peak_dpbf16_loop, blocks, threads);
  double tile = rate(est_peak_amx_loop, blocks / 50, threads); /* ~16 cycles each */
  double dpbusd = rate(est_peak_dpbusd_loop, blocks, threads);
  double tile8 = rate(est_peak_amx_int8_loop, blocks / 50, threads); /* ~16 cycles each */
  report("fp32 FMA  vfmadd231ps zmm", fma, EST_PEAK_FMA_FLOP, threads);
  report("bf16 dot  vdpbf16ps zmm", dot, EST_PEAK_DPBF16_FLOP, threads);
  report("bf16 AMX  tdpbf16ps tiles", tile, EST_PEAK_TDPBF16_FLOP, threads);
  report("int8 dot  vpdpbusd zmm", dpbusd, EST_PEAK_DPBUSD_OPS, threads); /* GFLOP: G int ops */
  report("int8 AMX  tdpbusd tiles", tile8, EST_PEAK_TDPBUSD_OPS, threads);
  if (fma > 0 && dot > 0)
    printf("bf16/fp32 FLOP ratio %.2f (2.00: a bf16 GEMM can reach twice fp32's speed; 1.00: at best fp32's)\n",
           dot * EST_PEAK_DPBF16_FLOP / (fma * EST_PEAK_FMA_FLOP));
  if (fma > 0 && tile > 0)
    printf("AMX bf16/fp32 FLOP ratio %.2f (est's bf16 GEMM runs on the tiles where this is printed)\n",
           tile * EST_PEAK_TDPBF16_FLOP / (fma * EST_PEAK_FMA_FLOP));
  if (fma > 0 && dpbusd > 0)
    printf("int8/fp32 op ratio %.2f (4.00: an int8 GEMM can reach four times fp32's speed)\n",
           dpbusd * EST_PEAK_DPBUSD_OPS / (fma * EST_PEAK_FMA_FLOP));
  if (fma > 0 && tile8 > 0)
    printf("AMX int8/fp32 op ratio %.2f (est's int8 GEMM runs on the tiles where this is printed)\n",
           tile8 * EST_PEAK_TDPBUSD_OPS / (fma * EST_PEAK_FMA_FLOP));
  return fma > 0 ? 0 : 1;
}
