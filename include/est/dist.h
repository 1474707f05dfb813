/* est/dist.h — data-parallel training over MPI (OpenMPI, MPICH: any MPI-3 library).
 *
 * N processes ("ranks") each run the same program on their own shard of the input. Before
 * every update the gradients are combined over the one contiguous gradient buffer, so N
 * ranks with a global batch B compute what one process with batch B would (the mean over
 * the global batch; TPU CrossShardOptimizer's sum is EST_DIST_SUM). Parameters start
 * identical because rank 0 broadcasts them, only rank 0 ("the chief") writes files, and
 * evaluation/prediction results are reduced or gathered back into input order.
 *
 *     est_dist_init(&argc, &argv);                 // MPI only when started by mpirun
 *     est_dist_broadcast(params, nbytes, 0);      // same start everywhere
 *     est_dist_grad_sync *sync;
 *     est_dist_grad_sync_create(&sync, grads, n, NULL);
 *     for (step...) {
 *       est_dist_grad_sync_begin(sync, 1.0 / est_dist_world_size());   // equal shards: mean
 *       ... backward; after each layer: est_dist_grad_sync_ready(sync, off, count);
 *       if (est_dist_grad_sync_finish(sync) != EST_OK) { log; est_dist_abort(1); }
 *       ... optimizer step on the combined gradients
 *     }
 *     est_dist_finalize();
 *
 * With the Estimator the loop above is its job: call est_dist_init, then
 * est_dist_configure_run_config(&run_config, &hook) before est_estimator_create, and
 * est_dist_abort(1) on a failed train/evaluate/predict before est_dist_finalize.
 *
 * Every collective waits with a deadline (est_dist_set_timeout, default 600 s or
 * EST_DIST_TIMEOUT seconds): a dead or stuck peer gives EST_ERR_ABORTED with a message
 * instead of a hang, and est_dist_abort then stops the whole job. Without MPI (built
 * without it, or not started by mpirun) everything is a one-rank no-op, so callers need
 * no #ifdef. All calls come from one thread (MPI_THREAD_FUNNELED).
 */
#ifndef EST_DIST_H
#define EST_DIST_H

#include <stddef.h>
#include <stdint.h>

#include "est/run_config.h"
#include "est/status.h"
#include "est/variables.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum est_dist_reduce {
  EST_DIST_SUM = 0,   /* plain sum over ranks (TPU CrossShardOptimizer) */
  EST_DIST_MEAN = 1,  /* sum / world_size */
} est_dist_reduce;

/* Starts MPI when the process was launched by mpirun/mpiexec/srun (their environment
 * variables are present) or EST_DIST=mpi is set; otherwise (or EST_DIST=off, or no MPI in
 * the build) this is a single process: rank 0 of 1. Tags log lines with the rank.
 * Safe to call twice. Does not take over an MPI that the caller initialised itself
 * except to use it. */
est_status est_dist_init(int *argc, char ***argv);

/* Ends MPI cleanly. After a failed collective (a peer died or timed out) a clean
 * MPI_Finalize could block forever, so it aborts the job instead. */
void est_dist_finalize(void);

/* Stops every rank of the job with `exit_code`. Call it on any fatal error while
 * world_size > 1, so the peers don't wait for this rank until their timeout. When every
 * rank calls it within 10 s (a failure they all agreed on) it returns, and each caller
 * finalizes and exits with its code, so every rank's error reaches mpirun's output;
 * otherwise (a peer stuck or dead) it ends the job with MPI_Abort. In a single process it
 * returns and the caller exits as usual. */
void est_dist_abort(int exit_code);

/* 1 when this build has MPI support compiled in. */
int est_dist_built_with_mpi(void);
/* 1 between a successful est_dist_init that started MPI and est_dist_finalize. */
int est_dist_active(void);
int est_dist_rank(void);
int est_dist_world_size(void);
/* Rank 0 is the chief: the only rank that writes checkpoints, summaries and results. */
int est_dist_is_chief(void);

/* Seconds any one collective may wait for the other ranks (> 0). */
void est_dist_set_timeout(double seconds);
double est_dist_timeout(void);

/* What this rank's collectives cost so far (all kinds, gradient buckets included):
 * est_dist_finalize logs it once on each rank of a multi-rank job. */
typedef struct est_dist_comm_stats {
  int64_t calls;
  double bytes;     /* payload bytes this rank contributed */
  double seconds;   /* wall time inside the collectives (start to completion) */
} est_dist_comm_stats;
est_dist_comm_stats est_dist_get_comm_stats(void);
void est_dist_reset_comm_stats(void);

/* Collectives. Every rank must call them in the same order with the same counts. */
est_status est_dist_barrier(void);
est_status est_dist_allreduce_f32(float *buf, size_t n, est_dist_reduce op);
/* Sums in double: metric numerators and denominators, so eval equals one process. */
est_status est_dist_allreduce_sum_f64(double *buf, size_t n);
est_status est_dist_allreduce_sum_i64(int64_t *buf, size_t n);
est_status est_dist_allreduce_max_f64(double *buf, size_t n);
/* recv receives world_size * n values: rank r's n values at recv + r * n. */
est_status est_dist_allgather_i64(const int64_t *send, size_t n, int64_t *recv);
/* Copies `bytes` bytes of `root`'s buffer into every rank's buffer. */
est_status est_dist_broadcast(void *buf, size_t bytes, int root);

/* Checks that `bytes` bytes of `buf` are identical on every rank (compares a CRC32C and the
 * length). `what` names the data in the error, e.g. "parameters after restore". */
est_status est_dist_check_same(const void *buf, size_t bytes, const char *what);

/* Gathers per-rank rows to the chief in input order. The input was sharded as
 * Dataset.shard(world_size, rank) does — global row g lives on rank g % N at local row
 * g / N — so each rank's `local_rows` must be ceil((total - rank) / N) for one total.
 * On the chief *out receives a malloc'ed buffer of *total_rows rows of row_bytes bytes
 * (free() it); on other ranks *out is NULL and *total_rows is still set. */
est_status est_dist_gather_rows(const void *local, size_t local_rows, size_t row_bytes, void **out,
                                size_t *total_rows);

/* Rows of a `total`-row input that rank `rank` of `world` holds under shard() (above). */
size_t est_dist_shard_rows(size_t total, int rank, int world);
/* Examples of a global batch of `global_batch` given to `rank` of `world`: the first
 * global_batch % world ranks take one more. */
int64_t est_dist_local_batch(int64_t global_batch, int rank, int world);

/* Interleaves per-rank row blocks into input order (the pure part of gather_rows):
 * `blocks[r]` holds counts[r] rows; `out` receives sum(counts) rows. Errors when the
 * counts cannot come from one shard() of a single input. */
est_status est_dist_interleave_rows(const void *const *blocks, const size_t *counts, int world,
                                    size_t row_bytes, void *out);

/* The one-rank distribution (rank 0 of 1, every collective the identity): the Estimator
 * runs on it when its run config names no distribution, so one process takes the same
 * code path as N ranks. Static and stateless; valid for the program's life. */
const est_distribution *est_dist_one_rank(void);

/* Fills the Estimator's distribution hook (est_run_config.distribution) with this layer:
 * the gradient reduction as a bucketed est_dist_grad_sync (grads_begin/ready/finish:
 * buckets reported by the model through est_grads_ready start during backward), double
 * sums of metrics, broadcast from rank 0, allgather of input positions, in-order gather
 * of prediction rows, barrier and abort. Call after est_dist_init; valid until
 * est_dist_finalize (which frees the hook's gradient sync). */
void est_dist_make_distribution(est_distribution *out);


/* Makes an Estimator run config data-parallel when world_size > 1: fills `hook` (which
 * must outlive the estimator) and points rc->distribution at it, and turns the GLOBAL
 * batch sizes into the per-rank ones the Estimator feeds each rank (it opens each rank's
 * input with rc's batch size): train_batch_size must divide by world_size
 * (INVALID_ARGUMENT otherwise, as TPUEstimator demands of num_shards); eval and predict
 * sizes are divided when they divide (so the union of the ranks' k-th batches is the
 * single process's k-th batch under record sharding) and kept per rank otherwise. A
 * single process leaves rc untouched. Call it once per config (it divides in place). */
est_status est_dist_configure_run_config(est_run_config *rc, est_distribution *hook);

/* ---- Bucketed gradient all-reduce, overlapped with backward ----
 *
 * The gradient buffer is cut into buckets of about bucket_bytes. Backward runs from the
 * last layer to the first, so the model reports ranges whose gradients are final with
 * est_dist_grad_sync_ready; as soon as a bucket is fully reported its all-reduce starts
 * (MPI_Iallreduce) and proceeds while backward computes earlier layers. finish() starts
 * whatever is left, waits for all, and leaves the combined gradient in the buffer. A model
 * that reports nothing still works: finish() then reduces every bucket at once. */
typedef struct est_dist_grad_sync est_dist_grad_sync;

typedef struct est_dist_grad_sync_config {
  size_t bucket_bytes;    /* default 16 MiB; 0 = one bucket */
} est_dist_grad_sync_config;

est_dist_grad_sync_config est_dist_grad_sync_default(void);

typedef struct est_dist_grad_sync_stats {
  int64_t steps;
  int64_t buckets;            /* per step */
  int64_t buckets_overlapped; /* total started inside backward (before finish) */
  double reduce_seconds;      /* total wall time inside ready()/finish() doing MPI work */
  double wait_seconds;        /* total time finish() blocked waiting for the reductions */
  double bytes;               /* total bytes all-reduced */
} est_dist_grad_sync_stats;

/* `grads` (n floats) must stay valid and at the same address for the sync's lifetime. */
est_status est_dist_grad_sync_create(est_dist_grad_sync **out, float *grads, size_t n,
                                     const est_dist_grad_sync_config *config);
void est_dist_grad_sync_free(est_dist_grad_sync *s);

/* Declares which floats the model will report each step (e.g. the trainable variables'
 * ranges); everything else (padding, frozen variables) counts as always ready. Without
 * it every float must be reported for a bucket to start before finish(). */
est_status est_dist_grad_sync_set_layout(est_dist_grad_sync *s, const size_t *offsets, const size_t *counts,
                                         size_t nranges);
/* create + set_layout for a finalized variable store's gradient buffer (trainable variables). */
est_status est_dist_grad_sync_create_for_vars(est_dist_grad_sync **out, est_var_store *vs,
                                              const est_dist_grad_sync_config *config);

/* Starts a step. Each rank's gradient is multiplied by `weight` and the results are
 * summed over ranks: weight = local_batch / global_batch gives the mean over the global
 * batch (1/N for equal shards), weight = 1 the TPU-style sum. */
est_status est_dist_grad_sync_begin(est_dist_grad_sync *s, double weight);
/* Floats [offset, offset + count) hold this step's final local gradient. */
est_status est_dist_grad_sync_ready(est_dist_grad_sync *s, size_t offset, size_t count);
/* Waits until the whole buffer holds the combined gradient. */
est_status est_dist_grad_sync_finish(est_dist_grad_sync *s);
est_dist_grad_sync_stats est_dist_grad_sync_get_stats(const est_dist_grad_sync *s);

/* The Estimator hook's own sync (est_dist_make_distribution): its bucket size from the
 * next train() on (0: est_dist_grad_sync_default's), and its statistics for the current
 * (last) training (zeros if none). */
void est_dist_set_grad_bucket_bytes(size_t bytes);
est_dist_grad_sync_stats est_dist_hook_grad_stats(void);

#ifdef __cplusplus
}
#endif
#endif
