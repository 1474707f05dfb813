/* Internal to est's distribution layer (src/dist). */
#ifndef EST_DIST_INTERNAL_H
#define EST_DIST_INTERNAL_H

#include "est/status.h"

/* Reads EST_DIST_TIMEOUT (seconds) once, if set and valid. Always compiled. */
void est_dist_load_timeout_from_env(void);
/* Adds one collective to est_dist_get_comm_stats. */
void est_dist_stats_record(double bytes, double seconds);
double est_dist_now(void);
/* Frees the Estimator hook's gradient sync (est_dist_make_distribution); finalize calls it. */
void est_dist_hook_release(void);

#ifdef EST_HAVE_MPI
#include <mpi.h>

/* Completes the requests, polling until est_dist_timeout(); on failure marks the layer
 * broken (est_dist_finalize then aborts) and returns EST_ERR_ABORTED naming `what`. */
est_status est_dist_wait(MPI_Request *reqs, int n, const char *what);
/* Tests without blocking: *done = 1 when all completed. */
est_status est_dist_test(MPI_Request *reqs, int n, int *done, const char *what);
int est_dist_is_broken(void);
/* Marks the layer broken after a failure outside est_dist_wait (a collective that did not
 * start): est_dist_finalize then aborts instead of finalizing. */
void est_dist_set_broken(void);
MPI_Comm est_dist_comm(void);
#endif

#endif
