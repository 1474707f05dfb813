/* Thread count for OpenMP and OpenBLAS together (see est/threads.h). */
#include "est/threads.h"

#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/threads_internal.h"

/* From OpenBLAS's cblas.h; declared here so this file does not depend on which BLAS
 * header variant is installed. */
extern void openblas_set_num_threads(int num_threads);
extern int openblas_get_num_threads(void);
/* Exported by OpenBLAS's pthread build, which runs it before fork(): joins its worker
 * threads; a later multi-threaded BLAS call starts them again. Weak, so that a serial or
 * OpenMP OpenBLAS (no pool of its own, maybe no such symbol) links as well. */
extern int blas_thread_shutdown_(void) __attribute__((weak));

/* openblas_set_num_threads() (re)starts the pool whenever it is not running, even for one
 * thread, so it is only called when the count really changes. */
static void blas_use_one_thread(void) {
  if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);
}

void est_blas_stop_threads(void) {
  blas_use_one_thread();
  if (blas_thread_shutdown_) blas_thread_shutdown_();
}

int est_threads_from_cpu_max(const char *text) {
  /* cgroup v2 cpu.max: "QUOTA PERIOD" in microseconds, or "max PERIOD" for no limit. */
  long long quota, period;
  if (!text || sscanf(text, "%lld %lld", &quota, &period) != 2 || quota <= 0 || period <= 0) return 0;
  long long n = (quota + period - 1) / period; /* 1.5 CPUs' worth of quota: 2 threads */
  return n > 4096 ? 4096 : (int)n;
}

/* Reads a small file into buf (NUL-terminated); 0 when it cannot. */
static int read_small(const char *path, char *buf, size_t size) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(buf, 1, size - 1, f);
  fclose(f);
  buf[n] = '\0';
  return n > 0;
}

/* The tightest cpu.max quota on the way from this process's cgroup (v2) up to the root,
 * in whole CPUs (rounded up); 0 for none. Inside a container the namespace root is the
 * container's own cgroup, whose cpu.max is the quota `docker --cpus` sets. */
static int cgroup_quota_threads(void) {
  char line[4096], path[4200], text[64];
  FILE *f = fopen("/proc/self/cgroup", "r");
  if (!f) return 0;
  char *dir = NULL;
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, "0::", 3)) {
      dir = line + 3;
      dir[strcspn(dir, "\n")] = '\0';
      break;
    }
  fclose(f);
  if (!dir) return 0;
  size_t len = strlen(dir);
  while (len > 0 && dir[len - 1] == '/') dir[--len] = '\0'; /* the root "/" becomes "" */
  int best = 0;
  for (;;) {
    snprintf(path, sizeof path, "/sys/fs/cgroup%s/cpu.max", dir);
    int n = read_small(path, text, sizeof text) ? est_threads_from_cpu_max(text) : 0;
    if (n > 0 && (best == 0 || n < best)) best = n;
    char *slash = strrchr(dir, '/');
    if (!slash) break; /* the root was the last one read */
    *slash = '\0';     /* "/a/b" -> "/a" -> "" */
  }
  return best;
}

int est_default_num_threads(void) {
  const char *env = getenv("OMP_NUM_THREADS");
  if (env && atoi(env) > 0) return atoi(env); /* the user's word, as OpenMP reads it */
  int cpus = 0;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) cpus = CPU_COUNT(&set);
  if (cpus <= 0) cpus = omp_get_num_procs();
  int quota = cgroup_quota_threads();
  if (quota > 0 && quota < cpus) cpus = quota;
  return cpus > 0 ? cpus : 1;
}

void est_set_num_threads(int n) {
  if (n <= 0) n = est_default_num_threads();
  omp_set_num_threads(n);
  blas_use_one_thread();
}

int est_get_num_threads(void) { return omp_get_max_threads(); }

int est_blas_get_num_threads(void) { return openblas_get_num_threads(); }

void est_blas_set_num_threads(int n) { openblas_set_num_threads(n); }
