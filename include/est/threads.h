/* est/threads.h — one knob for est's threads.
 *
 * Everything parallel in est runs in ONE pool, OpenMP's: elementwise ops, attention,
 * dropout, the optimizer sweep, and the GEMMs too, which est splits into blocks of rows
 * or columns and hands to OpenBLAS running single-threaded. Two pools (OpenBLAS's
 * pthreads + OpenMP) on the same cores spin-wait against each other; on a busy 2-core
 * machine that tripled the CPU time of a BERT step.
 *
 *     est_set_num_threads(2);      // 2 OpenMP threads; OpenBLAS set to 1 thread
 *
 * OpenBLAS's own pool, which Debian's pthread OpenBLAS starts in its library constructor
 * and est never uses, is stopped by est_blas_stop_threads() (the `est` command line calls
 * it first thing, so `est tokenize` runs on one thread); OpenMP starts its threads at the
 * first parallel region, i.e. only once math runs.
 *
 * Results of every non-GEMM op are bitwise identical for any thread count: loops split
 * work by rows or columns and never reduce across threads in a thread-dependent order.
 */
#ifndef EST_THREADS_H
#define EST_THREADS_H

#ifdef __cplusplus
extern "C" {
#endif

/* n <= 0 means est_default_num_threads(). Also sets OpenBLAS to one thread (est's GEMMs
 * make sure of that themselves too, since a direct cblas caller may change it). */
void est_set_num_threads(int n);
/* OMP_NUM_THREADS when set; otherwise the CPUs this process may run on: its affinity mask
 * (taskset, cpusets), capped by its cgroup v2 CPU quota (cpu.max, e.g. `docker --cpus=1.5`
 * gives 2) — not the machine's CPU count. */
int est_default_num_threads(void);
int est_get_num_threads(void);

/* OpenBLAS's own thread count (1 whenever est code has run a GEMM). */
int est_blas_get_num_threads(void);
void est_blas_set_num_threads(int n);
/* Joins the worker threads OpenBLAS started at load time (pthread builds; a no-op for
 * others). They come back only if someone asks OpenBLAS for more than one thread. */
void est_blas_stop_threads(void);

/* OpenBLAS picks its kernels by CPU model, and a model newer than the library (Debian 12's
 * 0.3.21 on an Intel family 6 model 207, Emerald Rapids) gets its generic "Prescott" SSE3
 * kernels: a quarter of the AVX-512 FMA rate, on the weight-gradient GEMMs est leaves to
 * OpenBLAS. OpenBLAS reads OPENBLAS_CORETYPE only in its library constructor, so the `est`
 * command line sets it and executes itself again (with its GOMP_SPINCOUNT, tools/main.c).
 *
 * est_blas_coretype_for: the OPENBLAS_CORETYPE to run with when OpenBLAS chose `core`
 * (openblas_get_corename()) on a CPU with the given features, or NULL to keep OpenBLAS's
 * choice. Only the generic fallback is replaced: "Prescott" becomes "Cooperlake" with
 * AVX512-BF16, "SkylakeX" with AVX-512 (F, CD, BW, DQ, VL), "Haswell" with AVX2 + FMA.
 * est_blas_coretype_fix: the same for this process's OpenBLAS and CPU; NULL also when the
 * user set OPENBLAS_CORETYPE (their choice stands). */
typedef struct {
  int avx2_fma;   /* AVX2 and FMA */
  int avx512;     /* AVX512 F, CD, BW, DQ, VL, the set OpenBLAS's SkylakeX kernels use */
  int avx512_bf16;
} est_cpu_features;
const char *est_blas_coretype_for(const char *core, est_cpu_features f);
const char *est_blas_coretype_fix(void);
/* OpenBLAS's kernel family in this process, as openblas_get_corename() names it. */
const char *est_blas_corename(void);

#ifdef __cplusplus
}
#endif
#endif
