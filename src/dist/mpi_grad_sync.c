/* Bucketed gradient all-reduce over the one contiguous gradient buffer.
 *
 * The buffer [0, n) is cut into buckets of bucket_elems floats. Each bucket counts the
 * floats reported final this step; when all of them are in, the bucket is scaled by the
 * rank's weight and its MPI_Iallreduce(SUM) starts, so communication overlaps the rest of
 * backward. MPI requires every rank to start collectives on a communicator in the same
 * order, and ranks may report in different orders (or not at all), so buckets always
 * start in one fixed order: from the last bucket down to the first (backward's order,
 * as variables are laid out input-to-output). A complete bucket waits until every
 * bucket above it has started. OpenMPI only advances non-blocking collectives inside
 * MPI calls, so each ready() also tests the buckets in flight.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dist/dist_internal.h"
#include "est/dist.h"

typedef struct bucket {
  size_t begin, end;    /* floats [begin, end) of the gradient buffer */
  size_t need, got;     /* floats that must be reported this step / reported so far */
  int started;
  MPI_Request req;
} bucket;

struct est_dist_grad_sync {
  float *grads;
  size_t n;
  int nbuckets;
  bucket *b;
  int next;             /* next bucket to start (counts down); -1 when all started */
  double weight;
  double step_seconds;  /* MPI time of the current step, for est_dist_get_comm_stats */
  int in_step;
  est_dist_grad_sync_stats stats;
  MPI_Request *reqs;    /* scratch for Testall */
};


est_status est_dist_grad_sync_create(est_dist_grad_sync **out, float *grads, size_t n,
                                     const est_dist_grad_sync_config *config) {
  *out = NULL;
  est_dist_grad_sync_config c = config ? *config : est_dist_grad_sync_default();
  if (!grads && n) return est_error(EST_ERR_INVALID_ARGUMENT, "grad_sync: NULL gradient buffer of %zu floats", n);
  size_t per = c.bucket_bytes / sizeof(float);
  if (per == 0 || per > n) per = n ? n : 1;
  if (per > (size_t)1 << 28) per = (size_t)1 << 28; /* MPI counts are int */
  est_dist_grad_sync *s = calloc(1, sizeof *s);
  if (!s) return est_error(EST_ERR_NO_MEMORY, "grad_sync");
  s->grads = grads;
  s->n = n;
  s->nbuckets = n ? (int)((n + per - 1) / per) : 0;
  s->b = calloc(s->nbuckets ? (size_t)s->nbuckets : 1, sizeof *s->b);
  s->reqs = calloc(s->nbuckets ? (size_t)s->nbuckets : 1, sizeof *s->reqs);
  if (!s->b || !s->reqs) {
    int nb = s->nbuckets;
    est_dist_grad_sync_free(s);
    return est_error(EST_ERR_NO_MEMORY, "grad_sync: %d buckets", nb);
  }
  for (int i = 0; i < s->nbuckets; i++) {
    s->b[i].begin = (size_t)i * per;
    s->b[i].end = s->b[i].begin + per < n ? s->b[i].begin + per : n;
    s->b[i].need = s->b[i].end - s->b[i].begin;
    s->b[i].req = MPI_REQUEST_NULL;
  }
  s->stats.buckets = s->nbuckets;
  s->weight = 1.0;
  *out = s;
  return EST_OK;
}

void est_dist_grad_sync_free(est_dist_grad_sync *s) {
  if (!s) return;
  free(s->b);
  free(s->reqs);
  free(s);
}

est_status est_dist_grad_sync_set_layout(est_dist_grad_sync *s, const size_t *offsets, const size_t *counts,
                                         size_t nranges) {
  if (s->in_step) return est_error(EST_ERR_FAILED_PRECONDITION, "grad_sync: set_layout inside a step");
  for (int i = 0; i < s->nbuckets; i++) s->b[i].need = 0;
  for (size_t r = 0; r < nranges; r++) {
    if (offsets[r] > s->n || counts[r] > s->n - offsets[r])
      return est_error(EST_ERR_INVALID_ARGUMENT, "grad_sync: range %zu [%zu, +%zu) outside the %zu-float buffer", r,
                       offsets[r], counts[r], s->n);
    for (int i = 0; i < s->nbuckets; i++) {
      size_t lo = offsets[r] > s->b[i].begin ? offsets[r] : s->b[i].begin;
      size_t hi = offsets[r] + counts[r] < s->b[i].end ? offsets[r] + counts[r] : s->b[i].end;
      if (lo < hi) s->b[i].need += hi - lo;
    }
  }
  return EST_OK;
}

est_status est_dist_grad_sync_begin(est_dist_grad_sync *s, double weight) {
  if (s->in_step) return est_error(EST_ERR_FAILED_PRECONDITION, "grad_sync: begin twice without finish");
  if (!(weight > 0.0) || !isfinite(weight))
    return est_error(EST_ERR_INVALID_ARGUMENT, "grad_sync: weight %g must be positive", weight);
  if (est_dist_is_broken()) return est_error(EST_ERR_ABORTED, "grad_sync: an earlier collective failed");
  for (int i = 0; i < s->nbuckets; i++) {
    s->b[i].got = 0;
    s->b[i].started = 0;
    s->b[i].req = MPI_REQUEST_NULL;
  }
  s->next = s->nbuckets - 1;
  s->weight = weight;
  s->step_seconds = 0;
  s->in_step = 1;
  return EST_OK;
}

static est_status start_bucket(est_dist_grad_sync *s, bucket *b) {
  float *p = s->grads + b->begin;
  size_t len = b->end - b->begin;
  if (s->weight != 1.0) {
    const float w = (float)s->weight;
    for (size_t i = 0; i < len; i++) p[i] *= w;
  }
  b->started = 1;
  s->stats.bytes += (double)len * sizeof(float);
  if (est_dist_world_size() == 1) return EST_OK;
  int rc = MPI_Iallreduce(MPI_IN_PLACE, p, (int)len, MPI_FLOAT, MPI_SUM, est_dist_comm(), &b->req);
  if (rc != MPI_SUCCESS) {
    char text[MPI_MAX_ERROR_STRING] = "";
    int tl = 0;
    MPI_Error_string(rc, text, &tl);
    est_dist_set_broken();
    return est_error(EST_ERR_ABORTED, "gradient all-reduce of bucket [%zu, %zu) failed to start: %s", b->begin,
                     b->end, text);
  }
  return EST_OK;
}

/* Starts every bucket that is complete and whose turn it is (descending order). */
static est_status start_ready(est_dist_grad_sync *s, int force, int *started) {
  *started = 0;
  while (s->next >= 0) {
    bucket *b = &s->b[s->next];
    if (!force && b->got < b->need) break;
    est_status st = start_bucket(s, b);
    if (st != EST_OK) return st;
    s->next--;
    (*started)++;
  }
  return EST_OK;
}

static int in_flight(est_dist_grad_sync *s) {
  int k = 0;
  for (int i = s->nbuckets - 1; i > s->next; i--)
    if (s->b[i].req != MPI_REQUEST_NULL) s->reqs[k++] = s->b[i].req;
  return k;
}

/* Writes back the (possibly completed = MPI_REQUEST_NULL) handles from s->reqs. */
static void store_back(est_dist_grad_sync *s) {
  int k = 0;
  for (int i = s->nbuckets - 1; i > s->next; i--)
    if (s->b[i].req != MPI_REQUEST_NULL) s->b[i].req = s->reqs[k++];
}

est_status est_dist_grad_sync_ready(est_dist_grad_sync *s, size_t offset, size_t count) {
  if (!s->in_step) return est_error(EST_ERR_FAILED_PRECONDITION, "grad_sync: ready() outside begin/finish");
  if (offset > s->n || count > s->n - offset)
    return est_error(EST_ERR_INVALID_ARGUMENT, "grad_sync: ready range [%zu, +%zu) outside the %zu-float buffer",
                     offset, count, s->n);
  double t0 = est_dist_now();
  for (int i = 0; i < s->nbuckets && count; i++) {
    bucket *b = &s->b[i];
    size_t lo = offset > b->begin ? offset : b->begin;
    size_t hi = offset + count < b->end ? offset + count : b->end;
    if (lo >= hi) continue;
    if (b->started || b->got + (hi - lo) > b->need)
      return est_error(EST_ERR_FAILED_PRECONDITION,
                       "grad_sync: floats [%zu, %zu) reported twice in one step or outside the layout", lo, hi);
    b->got += hi - lo;
  }
  int started = 0;
  est_status st = start_ready(s, 0, &started);
  if (st != EST_OK) return st;
  s->stats.buckets_overlapped += started;
  int k = in_flight(s);
  if (k) {
    int done = 0;
    st = est_dist_test(s->reqs, k, &done, "gradient all-reduce");
    store_back(s);
    if (st != EST_OK) return st;
  }
  double dt = est_dist_now() - t0;
  s->stats.reduce_seconds += dt;
  s->step_seconds += dt;
  return EST_OK;
}

est_status est_dist_grad_sync_finish(est_dist_grad_sync *s) {
  if (!s->in_step) return est_error(EST_ERR_FAILED_PRECONDITION, "grad_sync: finish() without begin()");
  double t0 = est_dist_now();
  s->in_step = 0;
  int started = 0;
  est_status st = start_ready(s, 1, &started);
  if (st != EST_OK) return st;
  int k = in_flight(s);
  st = est_dist_wait(s->reqs, k, "gradient all-reduce");
  for (int i = 0; i < s->nbuckets; i++) s->b[i].req = MPI_REQUEST_NULL;
  double dt = est_dist_now() - t0;
  s->stats.wait_seconds += dt;
  s->stats.reduce_seconds += dt;
  s->stats.steps++;
  if (est_dist_world_size() > 1) est_dist_stats_record((double)s->n * sizeof(float), s->step_seconds + dt);
  return st;
}

est_dist_grad_sync_stats est_dist_grad_sync_get_stats(const est_dist_grad_sync *s) { return s->stats; }
