/* est/threads.h — one knob for the two thread pools est uses.
 *
 * GEMMs run in OpenBLAS's own pool; everything else (layer norm, GELU, attention, dropout,
 * the optimizer sweep) runs in OpenMP parallel loops. Both pools must agree on the
 * count, or they fight over the cores:
 *
 *     est_set_num_threads(2);      // OpenMP and OpenBLAS both use 2 threads
 *
 * Results of every non-GEMM op are bitwise identical for any thread count: loops split
 * work by rows or columns and never reduce across threads in a thread-dependent order.
 */
#ifndef EST_THREADS_H
#define EST_THREADS_H

#ifdef __cplusplus
extern "C" {
#endif

/* n <= 0 means "all cores" (omp_get_num_procs()). */
void est_set_num_threads(int n);
int est_get_num_threads(void);

/* OpenBLAS's own thread count, for code that temporarily makes it single-threaded
 * (small per-head GEMMs spread across OpenMP threads). */
int est_blas_get_num_threads(void);
void est_blas_set_num_threads(int n);

#ifdef __cplusplus
}
#endif
#endif
