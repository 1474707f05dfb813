/* Which OpenBLAS kernels est runs (est/threads.h, est_blas_coretype_fix): OpenBLAS's
 * DYNAMIC_ARCH build names its choice; when that is its generic fallback on a CPU with
 * wider vectors, est names the kernel family the CPU can run instead. */
#include <stdlib.h>
#include <string.h>

#include "est/threads.h"

/* From OpenBLAS's openblas_config.h (not every cblas.h variant declares it). */
extern char *openblas_get_corename(void);

const char *est_blas_coretype_for(const char *core, est_cpu_features f) {
  /* "Prescott" is what 0.3.21's dynamic.c returns for an x86-64 model it has no entry for;
   * a real Prescott has none of these features, so nothing that fits is overridden. */
  if (!core || strcmp(core, "Prescott") != 0) return NULL;
  if (f.avx512 && f.avx512_bf16) return "Cooperlake";
  if (f.avx512) return "SkylakeX";
  if (f.avx2_fma) return "Haswell";
  return NULL;
}

const char *est_blas_corename(void) {
  const char *name = openblas_get_corename();
  return name ? name : "unknown";
}

const char *est_blas_coretype_fix(void) {
  if (getenv("OPENBLAS_CORETYPE")) return NULL; /* the user's choice */
#if defined(__x86_64__)
  /* libgcc's checks include the OS's XSAVE state (XGETBV), not only CPUID */
  __builtin_cpu_init();
  est_cpu_features f = {
      .avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"),
      .avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
                __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                __builtin_cpu_supports("avx512vl"),
      .avx512_bf16 = __builtin_cpu_supports("avx512bf16"),
  };
  return est_blas_coretype_for(est_blas_corename(), f);
#else
  return NULL;
#endif
}
