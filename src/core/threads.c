/* Thread count for OpenMP and OpenBLAS together (see est/threads.h). */
#include "est/threads.h"

#include <omp.h>

/* From OpenBLAS's cblas.h; declared here so this file does not depend on which BLAS
 * header variant is installed. */
extern void openblas_set_num_threads(int num_threads);
extern int openblas_get_num_threads(void);

void est_set_num_threads(int n) {
  if (n <= 0) n = omp_get_num_procs();
  omp_set_num_threads(n);
  openblas_set_num_threads(1);
}

int est_get_num_threads(void) { return omp_get_max_threads(); }

int est_blas_get_num_threads(void) { return openblas_get_num_threads(); }

void est_blas_set_num_threads(int n) { openblas_set_num_threads(n); }
