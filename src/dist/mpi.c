/* MPI layer: init/finalize, rank/size, and collectives that wait with a deadline.
 *
 * Every collective is started non-blocking (MPI_I*) and completed by est_dist_wait, which
 * polls MPI_Testall until a deadline. Two reasons:
 *  - a dead or stuck peer must not hang the job. OpenMPI's mpirun normally kills the job
 *    when a rank exits abnormally (measured here: ~1.4 s after a SIGKILL), but a rank that
 *    is alive and stuck, or one that left the collective sequence, would block a plain
 *    MPI_Allreduce forever;
 *  - with more ranks than cores (mpirun --oversubscribe) a busy-waiting rank steals the
 *    core its peer needs; after a short spin we yield between polls.
 * The communicator is a duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN, so a failure
 * becomes an est_status with MPI's own error text instead of an abort deep inside MPI.
 */
#include <limits.h>
#include <mpi.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dist/dist_internal.h"
#include "est/crc32c.h"
#include "est/dist.h"
#include "est/log.h"

static struct {
  int active;          /* we are using MPI (initialised by us or by the caller) */
  int we_initialised;  /* we called MPI_Init_thread, so we call MPI_Finalize */
  int broken;          /* a collective failed or timed out: no clean finalize possible */
  int rank, world;
  MPI_Comm comm;
  MPI_Comm stop_comm;  /* a second duplicate, only for est_dist_abort's stop barrier */
} g = {0, 0, 0, 0, 1, MPI_COMM_NULL, MPI_COMM_NULL};

int est_dist_built_with_mpi(void) { return 1; }
int est_dist_active(void) { return g.active; }
int est_dist_rank(void) { return g.rank; }
int est_dist_world_size(void) { return g.world; }
int est_dist_is_chief(void) { return g.rank == 0; }

/* mpirun (OpenMPI), mpiexec.hydra (MPICH), PMIx and Slurm's srun each leave one of these. */
static int launched_by_mpi(void) {
  static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK",
                                     "MPI_LOCALNRANKS"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
    if (getenv(vars[i])) return 1;
  return 0;
}

static est_status mpi_fail(int rc, const char *what) {
  char text[MPI_MAX_ERROR_STRING] = "";
  int len = 0;
  MPI_Error_string(rc, text, &len);
  g.broken = 1;
  return est_error(EST_ERR_ABORTED, "%s failed on rank %d of %d: %s (a peer rank probably died)", what,
                   g.rank, g.world, text);
}

est_status est_dist_init(int *argc, char ***argv) {
  if (g.active) return EST_OK;
  est_dist_load_timeout_from_env();
  const char *mode = getenv("EST_DIST");
  int already = 0;
  MPI_Initialized(&already);
  if (already) {
    int level = 0;
    MPI_Query_thread(&level);
    if (level < MPI_THREAD_FUNNELED)
      return est_error(EST_ERR_FAILED_PRECONDITION,
                       "MPI was initialised with thread level %d; est needs MPI_THREAD_FUNNELED (%d) because "
                       "OpenMP threads run beside MPI",
                       level, MPI_THREAD_FUNNELED);
  } else {
    if (mode && !strcmp(mode, "off")) return EST_OK;
    if (!launched_by_mpi() && !(mode && !strcmp(mode, "mpi"))) return EST_OK;
    int provided = 0;
    int rc = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) return est_error(EST_ERR_INTERNAL, "MPI_Init_thread failed (code %d)", rc);
    g.we_initialised = 1;
    if (provided < MPI_THREAD_FUNNELED) {
      MPI_Finalize();
      g.we_initialised = 0;
      return est_error(EST_ERR_FAILED_PRECONDITION,
                       "the MPI library offers thread level %d, est needs MPI_THREAD_FUNNELED (%d): OpenMP "
                       "threads run beside MPI",
                       provided, MPI_THREAD_FUNNELED);
    }
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rc = MPI_Comm_dup(MPI_COMM_WORLD, &g.comm);
  if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Comm_dup");
  MPI_Comm_set_errhandler(g.comm, MPI_ERRORS_RETURN);
  rc = MPI_Comm_dup(MPI_COMM_WORLD, &g.stop_comm);
  if (rc != MPI_SUCCESS) return mpi_fail(rc, "MPI_Comm_dup");
  MPI_Comm_set_errhandler(g.stop_comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(g.comm, &g.rank);
  MPI_Comm_size(g.comm, &g.world);
  g.active = 1;
  g.broken = 0;
  est_log_set_rank(g.rank, g.world);
  if (g.rank == 0 && g.world > 1)
    EST_LOG_INFO("data parallel over MPI: %d ranks, collective timeout %g s", g.world, est_dist_timeout());
  return EST_OK;
}

void est_dist_finalize(void) {
  est_dist_hook_release();
  if (!g.active) return;
  if (g.world > 1) {
    est_dist_comm_stats cs = est_dist_get_comm_stats();
    EST_LOG_INFO("communication: %lld collectives, %.1f MB, %.3f s", (long long)cs.calls, cs.bytes / 1e6,
                 cs.seconds);
  }
  if (g.broken && g.world > 1) {
    /* Peers may be inside a collective we will never join; MPI_Finalize could wait for
     * them forever. Take the whole job down instead. */
    EST_LOG_ERROR("a collective failed earlier: aborting all %d ranks", g.world);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Comm_free(&g.comm);
  g.comm = MPI_COMM_NULL;
  if (g.stop_comm != MPI_COMM_NULL) MPI_Comm_free(&g.stop_comm);
  g.active = 0;
  if (g.we_initialised) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
    g.we_initialised = 0;
  }
  g.rank = 0;
  g.world = 1;
  est_log_set_rank(0, 1);
}

/* A failure every rank agreed on (the Estimator's step and eval agreements) brings every
 * rank here, each after printing its own error: then nobody waits in a collective and the
 * job may end normally, so no rank's last words are lost (MPI_Abort kills the others while
 * their output may still be on its way to mpirun). The stop barrier runs on a communicator
 * of its own, so it can never be matched against a collective a peer is still inside.
 * A rank that does not come within STOP_GRACE_S is stuck or dead: abort the job. */
enum { STOP_GRACE_S = 10 };

void est_dist_abort(int exit_code) {
  if (!g.active || g.world <= 1) return;
  fflush(stdout);
  fflush(stderr);
  if (!g.broken && g.stop_comm != MPI_COMM_NULL) {
    MPI_Request req;
    if (MPI_Ibarrier(g.stop_comm, &req) == MPI_SUCCESS) {
      double deadline = est_dist_now() + STOP_GRACE_S;
      int done = 0;
      while (!done && est_dist_now() < deadline) {
        if (MPI_Test(&req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) break;
        if (!done) {
          struct timespec ts = {0, 1000000}; /* 1 ms: nothing to move but one barrier */
          nanosleep(&ts, NULL);
        }
      }
      if (done) {
        EST_LOG_ERROR("every one of the %d ranks stopped (exit code %d)", g.world, exit_code);
        return; /* the caller finalizes and exits with its code */
      }
    }
  }
  EST_LOG_ERROR("stopping all %d ranks (exit code %d)", g.world, exit_code);
  MPI_Abort(MPI_COMM_WORLD, exit_code);
}

/* Completes `n` requests or fails at the deadline. Spins ~2 ms (latency of small messages),
 * then yields the core between polls (oversubscribed ranks; and OpenMPI's TCP transport
 * only moves bytes inside MPI calls, so polling must go on at full rate while data flows:
 * a sleep between polls stalls the transfer itself). After 10 s no bucket-sized
 * transfer is still in flight, so we are waiting for a slow or stuck peer: poll ~5000
 * times a second from then on. */
est_status est_dist_wait(MPI_Request *reqs, int n, const char *what) {
  if (n == 0) return EST_OK;
  double start = est_dist_now(), timeout = est_dist_timeout();
  for (long polls = 0;; polls++) {
    int done = 0;
    int rc = MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, what);
    if (done) return EST_OK;
    if ((polls & 63) != 63) continue;
    double waited = est_dist_now() - start;
    if (waited > timeout) {
      g.broken = 1;
      return est_error(EST_ERR_ABORTED,
                       "%s did not complete within %g s on rank %d of %d: another rank died, is stuck, or "
                       "left the collective sequence (timeout: EST_DIST_TIMEOUT)",
                       what, timeout, g.rank, g.world);
    }
    if (waited > 10.0) nanosleep(&(struct timespec){0, 200000}, NULL);
    else if (waited > 0.002) sched_yield();
  }
}

est_status est_dist_test(MPI_Request *reqs, int n, int *done, const char *what) {
  *done = 0;
  int rc = MPI_Testall(n, reqs, done, MPI_STATUSES_IGNORE);
  return rc == MPI_SUCCESS ? EST_OK : mpi_fail(rc, what);
}

int est_dist_is_broken(void) { return g.broken; }
void est_dist_set_broken(void) { g.broken = 1; }
MPI_Comm est_dist_comm(void) { return g.comm; }

/* MPI counts are int: split big buffers into chunks started together. */
enum { CHUNK_ELEMS = 1 << 28, MAX_CHUNKS = 64 };

static est_status allreduce(void *buf, size_t n, MPI_Datatype type, size_t elem, MPI_Op op, const char *what) {
  if (!g.active || g.world == 1 || n == 0) return EST_OK;
  if (g.broken) return est_error(EST_ERR_ABORTED, "%s: an earlier collective failed on rank %d", what, g.rank);
  MPI_Request reqs[MAX_CHUNKS];
  double t0 = est_dist_now();
  size_t done = 0;
  while (done < n) {
    int k = 0;
    for (; k < MAX_CHUNKS && done < n; k++) {
      size_t c = n - done < CHUNK_ELEMS ? n - done : CHUNK_ELEMS;
      int rc = MPI_Iallreduce(MPI_IN_PLACE, (char *)buf + done * elem, (int)c, type, op, g.comm, &reqs[k]);
      if (rc != MPI_SUCCESS) return mpi_fail(rc, what);
      done += c;
    }
    est_status st = est_dist_wait(reqs, k, what);
    if (st != EST_OK) return st;
  }
  est_dist_stats_record((double)(n * elem), est_dist_now() - t0);
  return EST_OK;
}

est_status est_dist_allreduce_f32(float *buf, size_t n, est_dist_reduce op) {
  est_status st = allreduce(buf, n, MPI_FLOAT, sizeof(float), MPI_SUM, "all-reduce (float32)");
  if (st != EST_OK || op != EST_DIST_MEAN || g.world == 1) return st;
  const float scale = 1.0f / (float)g.world;
  for (size_t i = 0; i < n; i++) buf[i] *= scale;
  return EST_OK;
}

est_status est_dist_allreduce_sum_f64(double *buf, size_t n) {
  return allreduce(buf, n, MPI_DOUBLE, sizeof(double), MPI_SUM, "all-reduce (float64 sum)");
}

est_status est_dist_allreduce_sum_i64(int64_t *buf, size_t n) {
  return allreduce(buf, n, MPI_INT64_T, sizeof(int64_t), MPI_SUM, "all-reduce (int64 sum)");
}

est_status est_dist_allreduce_max_f64(double *buf, size_t n) {
  return allreduce(buf, n, MPI_DOUBLE, sizeof(double), MPI_MAX, "all-reduce (float64 max)");
}

est_status est_dist_barrier(void) {
  if (!g.active || g.world == 1) return EST_OK;
  if (g.broken) return est_error(EST_ERR_ABORTED, "barrier: an earlier collective failed on rank %d", g.rank);
  MPI_Request req;
  int rc = MPI_Ibarrier(g.comm, &req);
  if (rc != MPI_SUCCESS) return mpi_fail(rc, "barrier");
  return est_dist_wait(&req, 1, "barrier");
}

est_status est_dist_broadcast(void *buf, size_t bytes, int root) {
  if (root < 0 || root >= g.world)
    return est_error(EST_ERR_INVALID_ARGUMENT, "broadcast root %d is not a rank of %d", root, g.world);
  if (!g.active || g.world == 1 || bytes == 0) return EST_OK;
  if (g.broken) return est_error(EST_ERR_ABORTED, "broadcast: an earlier collective failed on rank %d", g.rank);
  MPI_Request reqs[MAX_CHUNKS];
  double t0 = est_dist_now();
  size_t done = 0;
  while (done < bytes) {
    int k = 0;
    for (; k < MAX_CHUNKS && done < bytes; k++) {
      size_t c = bytes - done < (size_t)CHUNK_ELEMS ? bytes - done : (size_t)CHUNK_ELEMS;
      int rc = MPI_Ibcast((char *)buf + done, (int)c, MPI_BYTE, root, g.comm, &reqs[k]);
      if (rc != MPI_SUCCESS) return mpi_fail(rc, "broadcast");
      done += c;
    }
    est_status st = est_dist_wait(reqs, k, "broadcast");
    if (st != EST_OK) return st;
  }
  est_dist_stats_record((double)bytes, est_dist_now() - t0);
  return EST_OK;
}

est_status est_dist_allgather_i64(const int64_t *send, size_t n, int64_t *recv) {
  if (!g.active || g.world == 1) {
    if (recv != send) memmove(recv, send, n * sizeof *send);
    return EST_OK;
  }
  if (n > INT_MAX) return est_error(EST_ERR_INVALID_ARGUMENT, "allgather of %zu int64 values is too large", n);
  if (g.broken) return est_error(EST_ERR_ABORTED, "allgather: an earlier collective failed on rank %d", g.rank);
  MPI_Request req;
  int rc = MPI_Iallgather(send, (int)n, MPI_INT64_T, recv, (int)n, MPI_INT64_T, g.comm, &req);
  if (rc != MPI_SUCCESS) return mpi_fail(rc, "allgather (int64)");
  return est_dist_wait(&req, 1, "allgather (int64)");
}

est_status est_dist_check_same(const void *buf, size_t bytes, const char *what) {
  if (!g.active || g.world == 1) return EST_OK;
  /* Each rank's (length, crc) against the chief's; min/max over ranks would need two
   * collectives, so gather everything and compare locally. */
  int64_t mine[2] = {(int64_t)bytes, (int64_t)est_crc32c(buf, bytes)};
  int64_t *all = malloc(sizeof(int64_t) * 2 * (size_t)g.world);
  if (!all) return est_error(EST_ERR_NO_MEMORY, "check_same: %d ranks", g.world);
  est_status st = est_dist_allgather_i64(mine, 2, all);
  if (st == EST_OK) {
    for (int r = 1; r < g.world; r++) {
      if (all[2 * r] != all[0] || all[2 * r + 1] != all[1]) {
        st = est_error(EST_ERR_FAILED_PRECONDITION,
                       "%s differ between ranks: rank 0 has %lld bytes (crc32c %08llx), rank %d has %lld bytes "
                       "(crc32c %08llx)",
                       what, (long long)all[0], (unsigned long long)all[1], r, (long long)all[2 * r],
                       (unsigned long long)all[2 * r + 1]);
        break;
      }
    }
  }
  free(all);
  return st;
}

est_status est_dist_gather_rows(const void *local, size_t local_rows, size_t row_bytes, void **out,
                                size_t *total_rows) {
  *out = NULL;
  *total_rows = local_rows;
  if (!g.active || g.world == 1) {
    void *copy = malloc(local_rows && row_bytes ? local_rows * row_bytes : 1);
    if (!copy) return est_error(EST_ERR_NO_MEMORY, "gather of %zu rows", local_rows);
    if (local_rows) memcpy(copy, local, local_rows * row_bytes);
    *out = copy;
    return EST_OK;
  }
  int world = g.world;
  int64_t *counts64 = malloc(sizeof(int64_t) * (size_t)world);
  int *counts = malloc(sizeof(int) * (size_t)world), *displs = malloc(sizeof(int) * (size_t)world);
  void **blocks = malloc(sizeof(void *) * (size_t)world);
  size_t *sizes = malloc(sizeof(size_t) * (size_t)world);
  char *packed = NULL, *result = NULL;
  est_status st = EST_OK;
  if (!counts64 || !counts || !displs || !blocks || !sizes) {
    st = est_error(EST_ERR_NO_MEMORY, "gather bookkeeping for %d ranks", world);
    goto done;
  }
  int64_t mine = (int64_t)local_rows;
  if ((st = est_dist_allgather_i64(&mine, 1, counts64)) != EST_OK) goto done;
  size_t total = 0;
  for (int r = 0; r < world; r++) {
    sizes[r] = (size_t)counts64[r];
    total += sizes[r];
  }
  *total_rows = total;
  if (total > (size_t)INT_MAX) {
    g.broken = 1; /* all ranks see the same totals, but say it loudly */
    st = est_error(EST_ERR_INVALID_ARGUMENT, "gather of %zu rows exceeds MPI's int count", total);
    goto done;
  }
  /* One MPI datatype per row keeps counts in rows, not bytes. */
  MPI_Datatype row;
  MPI_Type_contiguous((int)row_bytes, MPI_BYTE, &row);
  MPI_Type_commit(&row);
  if (g.rank == 0) {
    packed = malloc(total && row_bytes ? total * row_bytes : 1);
    result = malloc(total && row_bytes ? total * row_bytes : 1);
    if (!packed || !result) {
      /* The root cannot receive: the other ranks will wait at this gather until their
       * deadline unless the caller aborts the job (est_dist_abort), as it must. */
      g.broken = 1;
      MPI_Type_free(&row);
      st = est_error(EST_ERR_NO_MEMORY, "gather of %zu rows of %zu bytes", total, row_bytes);
      goto done;
    }
  }
  size_t off = 0;
  for (int r = 0; r < world; r++) {
    counts[r] = (int)sizes[r];
    displs[r] = (int)off;
    off += sizes[r];
  }
  MPI_Request req;
  int rc = MPI_Igatherv(local, (int)local_rows, row, packed, counts, displs,
                        row, 0, g.comm, &req);
  est_status wst = rc == MPI_SUCCESS ? est_dist_wait(&req, 1, "gather of prediction rows") : mpi_fail(rc, "gather");
  MPI_Type_free(&row);
  if ((st = wst) != EST_OK || g.rank != 0) goto done;
  for (int r = 0; r < world; r++) blocks[r] = packed + (size_t)displs[r] * row_bytes;
  if ((st = est_dist_interleave_rows((const void *const *)blocks, sizes, world, row_bytes, result)) != EST_OK)
    goto done;
  *out = result;
  result = NULL;
done:
  free(counts64);
  free(counts);
  free(displs);
  free(blocks);
  free(sizes);
  free(packed);
  free(result);
  return st;
}
