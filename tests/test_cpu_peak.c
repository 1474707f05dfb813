/* nn/cpu_peak.h: the instruction loops run exactly where the CPU has the instruction, and
 * the bf16/fp32 probe reports a ratio only where AVX512-BF16 exists. The probe is a timing,
 * so its value is checked only against what the hardware can physically do: VDPBF16PS does
 * 64 FLOP to an FMA's 32 and cannot issue faster than the FMA pipes, so the FLOP ratio lies
 * in (0, 2] up to timing noise (the test allows 4x that), and with AMX's TDPBF16PS (16384
 * FLOP per instruction, one per 16 cycles) in (0, 16] (again 4x allowed); the lower bound 0.01 would mean
 * a bf16 instruction costing 200 FMAs, i.e. the loop did not run as written. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "nn/cpu_peak.h"
#include "nn/gemm.h"

static int has(const char *feature) {
  __builtin_cpu_init();
  if (feature[0] == 'f') return __builtin_cpu_supports("avx512f") != 0;
  return __builtin_cpu_supports("avx512bf16") != 0;
}

static void loops_run_where_the_cpu_has_them(void **state) {
  (void)state;
  assert_int_equal(est_peak_fma_loop(0), has("f") ? 0 : -1);
  assert_int_equal(est_peak_fma_loop(1000), has("f") ? 0 : -1);
  assert_int_equal(est_peak_dpbf16_loop(1000), has("b") ? 0 : -1);
  assert_int_equal(est_cpu_has_avx512_bf16(), has("b"));
  /* AMX needs the kernel's say as well as the CPU flag: never more than the flag */
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("amx-bf16")) assert_int_equal(est_cpu_has_amx_bf16(), 0);
  assert_int_equal(est_peak_amx_loop(10), est_cpu_has_amx_bf16() ? 0 : -1);
}

static void probe_ratio_is_physical(void **state) {
  (void)state;
  double r = est_peak_bf16_fp32_ratio();
  if (!has("b") || !has("f")) {
    assert_true(r == 0);
    return;
  }
  print_message("bf16/fp32 FLOP ratio on this CPU: %.2f\n", r);
  assert_true(r > 0.01);
  /* with AMX the tiles' ceiling is 16 (1024 FLOP per cycle against two FMA pipes' 64) */
  assert_true(r < (est_cpu_has_amx_bf16() ? 64.0 : 8.0));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(loops_run_where_the_cpu_has_them),
      cmocka_unit_test(probe_ratio_is_physical),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
