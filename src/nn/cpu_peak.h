/* The CPU's arithmetic ceiling, measured: instruction loops that retire only fp32 FMAs
 * (VFMADD231PS zmm) or only bf16 dot products (VDPBF16PS zmm), and a short start-up probe
 * of their ratio. bench/bench_peak.c times the loops on every core for the share-of-peak
 * figures; est_precision_apply_flag uses the probe to tell a user whose CPU runs bf16 no
 * faster than fp32 (some do: the Intel Xeon family 6 model 207 this was written on retires
 * one VDPBF16PS for every four FMAs, so bf16's FLOP rate is half of fp32's there).
 *
 * FLOP per instruction: VFMADD231PS zmm 16 lanes x 2 = 32; VDPBF16PS zmm 16 x 2 x 2 = 64. */
#ifndef EST_NN_CPU_PEAK_H
#define EST_NN_CPU_PEAK_H

enum { EST_PEAK_BLOCK = 20 };  /* instructions per loop iteration: 20 independent accumulators */
enum { EST_PEAK_FMA_FLOP = 32, EST_PEAK_DPBF16_FLOP = 64 };
/* VPDPBUSD zmm: 64 u8 x s8 products, each group of four summed into one of 16 int32 lanes:
 * 64 multiplies + 64 adds = 128 integer ops (int8's "FLOP") per instruction */
enum { EST_PEAK_DPBUSD_OPS = 128 };
/* TDPBF16PS on full tiles: a 16 x 32 bf16 tile times a 32 x 16 one into 16 x 16 fp32 */
enum { EST_PEAK_TDPBF16_FLOP = 16 * 16 * 32 * 2 };
/* TDPBUSD on full tiles: a 16 x 64 u8 tile times a 64 x 16 s8 one into 16 x 16 int32 */
enum { EST_PEAK_TDPBUSD_OPS = 16 * 16 * 64 * 2 };

/* Each runs `blocks` x EST_PEAK_BLOCK instructions on the calling thread, registers only.
 * Return 0, or -1 where the build or the CPU lacks the instruction, or the kernel choice
 * hides it (EST_KERNEL=noavx512, nn/kernel_choice.h): then nothing is run. */
int est_peak_fma_loop(long blocks);
int est_peak_dpbf16_loop(long blocks);
/* VPDPBUSD zmm (int8, AVX512-VNNI): -1 without it or with EST_KERNEL=noavx512 or avxvnni */
int est_peak_dpbusd_loop(long blocks);
/* The core clock's yardstick: `blocks` x EST_PEAK_BLOCK dependent integer adds, one per core
 * cycle on every x86-64 core (ADD's latency is 1 cycle), so the time they take gives the
 * clock the other loops run at, whatever the TSC or the OS report: instructions per cycle of
 * a loop = (its rate) / (this one's). Runs on any x86-64 CPU; -1 elsewhere. */
int est_peak_add_chain(long blocks);
/* AMX: `blocks` x EST_PEAK_BLOCK TDPBF16PS into four accumulator tiles (zero operands);
 * -1 without AMX-BF16 or without the kernel's permission for the tile state (or with
 * EST_KERNEL=bf16dp or noavx512). */
int est_peak_amx_loop(long blocks);
/* The same with TDPBUSD (int8); -1 without AMX-INT8 or the tile state, or where the kernel
 * choice keeps int8 off the tiles (EST_KERNEL=noavx512, vnni512, avxvnni, int8ref). */
int est_peak_amx_int8_loop(long blocks);

/* bf16 FLOP rate over fp32-FMA FLOP rate on the calling thread, for the instruction est's
 * bf16 GEMM runs: TDPBF16PS where AMX is usable and chosen (up to 16: 1024 FLOP per cycle against two
 * FMA pipes' 64), else VDPBF16PS (2.0 where it issues as fast as VFMADD231PS, 1.0 where a
 * bf16 GEMM can at best match fp32). Best of 3
 * runs of ~1 ms each; returns 0 without AVX512-BF16. A timing, so it varies a little from
 * run to run and a busy machine can lower it: use it for messages, never for results. */
double est_peak_bf16_fp32_ratio(void);

#endif
