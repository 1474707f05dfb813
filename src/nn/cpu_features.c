/* The CPU probes (nn/cpu_features.h): GCC's __builtin_cpu_supports, and for AMX Linux's
 * grant of the tile state. Each answer is computed once and kept. */
#include "nn/cpu_features.h"

#if defined(__x86_64__) && defined(__linux__)
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>
#define AMX_BUILD 1
#else
#define AMX_BUILD 0
#endif

int est_cpu_has_avx512f(void) {
  static int cached = -1; /* a benign race: every thread computes the same value */
  if (cached < 0) {
    __builtin_cpu_init();
    cached = __builtin_cpu_supports("avx512f") != 0;
  }
  return cached;
}

int est_cpu_has_avx512_bf16(void) {
  static int cached = -1; /* a benign race: every thread computes the same value */
  if (cached < 0) {
    __builtin_cpu_init();
    cached = __builtin_cpu_supports("avx512bf16") != 0;
  }
  return cached;
}

int est_cpu_has_avx512_vnni(void) {
  static int cached = -1; /* a benign race: every thread computes the same value */
  if (cached < 0) {
    __builtin_cpu_init();
    cached = __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl");
  }
  return cached;
}

int est_cpu_has_avx_vnni(void) {
  static int cached = -1; /* a benign race: every thread computes the same value */
  if (cached < 0) {
    __builtin_cpu_init();
    cached = __builtin_cpu_supports("avxvnni") != 0;
  }
  return cached;
}

#if AMX_BUILD
/* Linux hands out AMX state only to a process that asks (arch_prctl ARCH_REQ_XCOMP_PERM, for
 * all its threads; asking again is harmless): 1 when granted, 0 when refused (kernels
 * before 5.16, or a CPU without the tile state). */
static int amx_permitted(void) {
  enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
  return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
}

static int amx_usable;
static pthread_once_t amx_once = PTHREAD_ONCE_INIT;

static void amx_probe(void) {
  __builtin_cpu_init();
  /* the CPU flags, then the kernel's permission (it says no on kernels before 5.16) */
  if (!__builtin_cpu_supports("amx-bf16") || !__builtin_cpu_supports("amx-tile") ||
      !__builtin_cpu_supports("avx512bf16"))
    return;
  amx_usable = amx_permitted();
}

int est_cpu_has_amx_bf16(void) {
  pthread_once(&amx_once, amx_probe);
  return amx_usable;
}

static int amx_int8_usable;
static pthread_once_t amx_int8_once = PTHREAD_ONCE_INIT;

/* the CPU's flags (the epilogue and the rows' quantization are AVX-512 code), then Linux's
 * grant of the tile state */
static void amx_int8_probe(void) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("amx-int8") || !__builtin_cpu_supports("amx-tile") || !est_cpu_has_avx512_vnni()) return;
  amx_int8_usable = amx_permitted();
}

int est_cpu_has_amx_int8(void) {
  pthread_once(&amx_int8_once, amx_int8_probe);
  return amx_int8_usable;
}
#else
int est_cpu_has_amx_bf16(void) { return 0; }
int est_cpu_has_amx_int8(void) { return 0; }
#endif
