/* nn/cpu_peak.h against what the hardware can physically do.
 *
 * - Each instruction loop runs exactly where the kernel choice lets est use its instruction
 *   (nn/kernel_choice.h: the CPU has it and EST_KERNEL does not hide it), and the bf16/fp32
 *   probe is 0 exactly where no bf16 instruction may run: ctest runs this test again with
 *   EST_KERNEL=noavx512, where a CPU that has AVX-512 must answer as one without.
 * - The clock: a chain of dependent integer adds retires one per core cycle on every x86-64
 *   core, so its rate is the core clock, which lies between 0.4 and 7 GHz on any x86-64
 *   machine sold (a chain whose adds were independent would read several times too fast).
 * - fp32 FMAs per core cycle (the FMA loop's rate over the add chain's): a 512-bit
 *   VFMADD231PS issues on one 512-bit unit (1 per cycle: Zen 4, one-unit Xeons) or two (2
 *   per cycle: most Xeons, Zen 5); an AVX-512 clock licence only lowers it. So it lies in
 *   [1, 2] up to noise: the test allows [0.375, 2.25]. A loop whose FMAs depended on each
 *   other (one accumulator: 1 per FMA latency, 4 cycles) or ran a quarter of its count would
 *   fall outside. And twice the blocks take twice the time (1.7x to 2.35x).
 * - The bf16/fp32 FLOP ratio where bf16 runs: VDPBF16PS does 64 FLOP to an FMA's 32 and
 *   issues at most as often, so the ratio is at most 2 (2.2 allowed) and, on the CPUs
 *   measured, at least 0.5 (Xeon family 6 model 207, one per four FMAs; 0.2 allowed); with
 *   AMX's TDPBF16PS (16384 FLOP, one per ~16 cycles) 14-18 measured, (4, 20] allowed.
 * Timings on a shared machine can only come out slow (time descheduled does not count, but a
 * busy sibling core can still halve a rate), so each check takes the best of many runs and
 * measures again, up to 10 times, before it fails: a loop that is wrong fails every time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <time.h>

#include "nn/cpu_peak.h"
#include "nn/gemm.h"
#include "nn/kernel_choice.h"
#include "test_util.h"

enum { TRIES = 10, RUNS = 5 };
static const long BLOCKS = 100 * 1000; /* 2 M instructions: ~0.5-2 ms a run */

static double thread_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Shortest of RUNS runs of loop(blocks), in thread CPU seconds. */
static double best_seconds(int (*loop)(long), long blocks) {
  double best = 1e30;
  for (int r = 0; r < RUNS; r++) {
    double t0 = thread_seconds();
    assert_int_equal(loop(blocks), 0);
    double t = thread_seconds() - t0;
    if (t < best) best = t;
  }
  return best;
}

static void loops_run_where_the_choice_lets_them(void **state) {
  (void)state;
  __builtin_cpu_init();
  const int hide = est_kernel_get() == EST_KERNEL_NOAVX512;
  const int f = !hide && __builtin_cpu_supports("avx512f"), b = !hide && __builtin_cpu_supports("avx512bf16");
  assert_int_equal(est_kernel_avx512f(), f);
  assert_int_equal(est_kernel_avx512_bf16(), b);
  assert_int_equal(est_peak_fma_loop(0), f ? 0 : -1);
  assert_int_equal(est_peak_fma_loop(1000), f ? 0 : -1);
  assert_int_equal(est_peak_dpbf16_loop(1000), b ? 0 : -1);
  const int v = !hide && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl");
  assert_int_equal(est_peak_dpbusd_loop(1000), v ? 0 : -1);
  assert_int_equal(est_peak_add_chain(1000), 0);
  /* AMX needs the kernel's say as well as the CPU flag: never more than the flag, and
   * never where the choice rules the tiles out */
  if (!__builtin_cpu_supports("amx-bf16") || hide || est_kernel_get() == EST_KERNEL_BF16DP)
    assert_int_equal(est_kernel_amx(), 0);
  assert_int_equal(est_peak_amx_loop(10), est_kernel_amx() ? 0 : -1);
  /* int8's tiles the same way: never without the flag, never where int8 is pinned elsewhere */
  const est_kernel k = est_kernel_get();
  if (!__builtin_cpu_supports("amx-int8") || hide || k == EST_KERNEL_VNNI512 || k == EST_KERNEL_AVXVNNI ||
      k == EST_KERNEL_INT8REF)
    assert_int_equal(est_kernel_amx_int8(), 0);
  assert_int_equal(est_peak_amx_int8_loop(10), est_kernel_amx_int8() ? 0 : -1);
  if (hide) assert_true(est_peak_bf16_fp32_ratio() == 0); /* a feature forced absent measures 0 */
}

static void clock_and_fma_rate_are_physical(void **state) {
  (void)state;
  double ghz = 0, per_cycle = 0, twice = 0;
  int ok = 0;
  for (int t = 0; t < TRIES && !ok; t++) {
    double chain = best_seconds(est_peak_add_chain, BLOCKS);
    ghz = (double)BLOCKS * EST_PEAK_BLOCK / chain * 1e-9;
    ok = ghz > 0.4 && ghz < 7.0;
    if (!ok || !est_kernel_avx512f()) continue;
    double fma = best_seconds(est_peak_fma_loop, BLOCKS), fma2 = best_seconds(est_peak_fma_loop, 2 * BLOCKS);
    per_cycle = chain / fma; /* the same instruction count: FMAs per add, i.e. per cycle */
    twice = fma2 / fma;
    ok = per_cycle >= 0.375 && per_cycle <= 2.25 && twice > 1.7 && twice < 2.35;
  }
  if (!est_kernel_avx512f()) {
    print_message("core clock %.2f GHz (no AVX-512 FMA loop here)\n", ghz);
    assert_int_equal(est_peak_fma_loop(1), -1);
  } else {
    print_message("core clock %.2f GHz; 512-bit FMAs per cycle %.3f; twice the blocks take %.3fx the time\n", ghz,
                  per_cycle, twice);
  }
  if (!ok) fail_msg("not physical after %d tries: %.2f GHz, %.3f FMA/cycle, %.3fx", TRIES, ghz, per_cycle, twice);
}

static void probe_ratio_is_physical(void **state) {
  (void)state;
  double r = est_peak_bf16_fp32_ratio();
  if (!est_kernel_avx512_bf16() || !est_kernel_avx512f()) {
    assert_true(r == 0); /* no bf16 instruction may run: nothing measured */
    return;
  }
  const int amx = est_kernel_amx();
  const double lo = amx ? 4.0 : 0.2, hi = amx ? 20.0 : 2.2;
  for (int t = 1; t < TRIES && !(r > lo && r <= hi); t++) r = est_peak_bf16_fp32_ratio();
  print_message("bf16/fp32 FLOP ratio on this CPU (%s): %.2f\n", amx ? "AMX" : "VDPBF16PS", r);
  if (!(r > lo && r <= hi)) fail_msg("bf16/fp32 ratio %.3f outside (%g, %g] after %d tries", r, lo, hi, TRIES);
}

int main(void) {
  test_forced_kernel_or_skip(); /* ctest runs it with EST_KERNEL=noavx512, bf16dp, amx too */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(loops_run_where_the_choice_lets_them),
      cmocka_unit_test(clock_and_fma_rate_are_physical),
      cmocka_unit_test(probe_ratio_is_physical),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
