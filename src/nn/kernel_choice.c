/* The kernel choice (nn/kernel_choice.h): EST_KERNEL read once, est_kernel_set, and the
 * dispatch's questions. The CPU facts come from the probes (nn/cpu_features.h); the
 * kernels ask here, so this file knows none of them. */
#include "nn/kernel_choice.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/log.h"
#include "nn/cpu_features.h"

static const char *const names[] = {"auto",    "blas",    "own",     "bf16dp",  "amx",    "noavx512",
                                    "vnni512", "avxvnni", "int8ref", "amxint8", "amxemu"};
enum { NAMES = sizeof names / sizeof names[0] };

/* Written by the environment's read (once) and by est_kernel_set; read by every dispatch. */
static est_kernel choice = EST_KERNEL_AUTO;

/* What the read of EST_KERNEL found: the status and its message, kept for
 * est_kernel_env_status (the thread's error message is set anew on each call). */
static est_status env_code = EST_OK;
static char env_message[256];
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

const char *est_kernel_name(est_kernel k) { return (unsigned)k < NAMES ? names[k] : "?"; }

int est_kernel_parse(const char *name, est_kernel *out) {
  for (int i = 0; i < NAMES; i++)
    if (!strcmp(name, names[i])) {
      *out = (est_kernel)i;
      return 0;
    }
  return -1;
}

const char *est_kernel_missing(est_kernel k) {
  switch (k) {
  case EST_KERNEL_OWN: return est_cpu_has_avx512f() ? NULL : "AVX-512F";
  case EST_KERNEL_BF16DP: return est_cpu_has_avx512_bf16() ? NULL : "AVX512-BF16";
  case EST_KERNEL_AMX:
    return est_cpu_has_amx_bf16() ? NULL : "AMX-BF16 usable by this process (the CPU flag and Linux's grant of the "
                                           "tile state)";
  case EST_KERNEL_AMXINT8:
    return est_cpu_has_amx_int8() ? NULL : "AMX-INT8 usable by this process (the CPU flags, AVX512-VNNI and "
                                           "Linux's grant of the tile state)";
  case EST_KERNEL_VNNI512:
  case EST_KERNEL_AMXEMU: return est_cpu_has_avx512_vnni() ? NULL : "AVX512-VNNI";
  case EST_KERNEL_AVXVNNI: return est_cpu_has_avx_vnni() ? NULL : "AVX-VNNI";
  default: return NULL; /* auto, blas and noavx512 run anywhere */
  }
}

static void read_env(void) {
  const char *v = getenv("EST_KERNEL");
  if (!v || !*v) return;
  est_kernel k;
  const char *missing = NULL;
  if (est_kernel_parse(v, &k) != 0) {
    env_code = EST_ERR_INVALID_ARGUMENT;
    snprintf(env_message, sizeof env_message,
             "EST_KERNEL=%s: must be auto, blas, own, bf16dp, amx, noavx512, vnni512, avxvnni, int8ref, amxint8 "
             "or amxemu",
             v);
  } else if ((missing = est_kernel_missing(k))) {
    env_code = EST_ERR_FAILED_PRECONDITION;
    snprintf(env_message, sizeof env_message, "EST_KERNEL=%s: this CPU has no %s", v, missing);
  } else {
    choice = k;
    return;
  }
  EST_LOG_ERROR("%s; the kernels are chosen as with EST_KERNEL=auto", env_message);
}

est_kernel est_kernel_get(void) {
  pthread_once(&env_once, read_env);
  return choice;
}

est_status est_kernel_set(est_kernel k) {
  pthread_once(&env_once, read_env); /* so that a later first read cannot undo this */
  if ((unsigned)k >= NAMES) return est_error(EST_ERR_INVALID_ARGUMENT, "kernel %d: no such choice", (int)k);
  const char *missing = est_kernel_missing(k);
  if (missing) return est_error(EST_ERR_FAILED_PRECONDITION, "kernel %s: this CPU has no %s", names[k], missing);
  choice = k;
  return EST_OK;
}

est_status est_kernel_env_status(void) {
  pthread_once(&env_once, read_env);
  return env_code == EST_OK ? EST_OK : est_error(env_code, "%s", env_message);
}

int est_kernel_avx512f(void) { return est_kernel_get() != EST_KERNEL_NOAVX512 && est_cpu_has_avx512f(); }

int est_kernel_avx512_bf16(void) {
  return est_kernel_get() != EST_KERNEL_NOAVX512 && est_cpu_has_avx512_bf16();
}

int est_kernel_amx(void) {
  est_kernel k = est_kernel_get();
  return k != EST_KERNEL_NOAVX512 && k != EST_KERNEL_BF16DP && est_cpu_has_amx_bf16();
}

int est_kernel_amx_int8(void) {
  est_kernel k = est_kernel_get();
  return k != EST_KERNEL_NOAVX512 && k != EST_KERNEL_VNNI512 && k != EST_KERNEL_AVXVNNI && k != EST_KERNEL_INT8REF &&
         k != EST_KERNEL_AMXEMU && est_cpu_has_amx_int8();
}

int est_kernel_vnni512(void) {
  est_kernel k = est_kernel_get();
  return k != EST_KERNEL_NOAVX512 && k != EST_KERNEL_AVXVNNI && k != EST_KERNEL_INT8REF && est_cpu_has_avx512_vnni();
}

int est_kernel_avxvnni(void) {
  est_kernel k = est_kernel_get();
  return k != EST_KERNEL_VNNI512 && k != EST_KERNEL_INT8REF && !est_kernel_vnni512() && est_cpu_has_avx_vnni();
}

int est_kernel_int8(void) {
  const est_kernel k = est_kernel_get();
  return k == EST_KERNEL_INT8REF || k == EST_KERNEL_AMXEMU || est_kernel_amx_int8() || est_kernel_vnni512() ||
         est_kernel_avxvnni();
}
