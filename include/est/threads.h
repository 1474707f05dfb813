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
 * Results of every non-GEMM op are bitwise identical for any thread count: loops split
 * work by rows or columns and never reduce across threads in a thread-dependent order.
 */
#ifndef EST_THREADS_H
#define EST_THREADS_H

#ifdef __cplusplus
extern "C" {
#endif

/* n <= 0 means "all cores" (omp_get_num_procs()). Also sets OpenBLAS to one thread (est's
 * GEMMs make sure of that themselves too, since a direct cblas caller may change it). */
void est_set_num_threads(int n);
int est_get_num_threads(void);

/* OpenBLAS's own thread count (1 whenever est code has run a GEMM). */
int est_blas_get_num_threads(void);
void est_blas_set_num_threads(int n);

#ifdef __cplusplus
}
#endif
#endif
