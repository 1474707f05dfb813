/* est/dist.h over real MPI: each test launches this same executable under
 * `mpirun -np 2` (loopback only) in worker mode, and the workers check their results.
 *
 *   test_mpi_dist                      cmocka tests (the launcher)
 *   test_mpi_dist --worker NAME ARGS   one rank of scenario NAME (run by mpirun)
 *
 * Scenarios: collectives, grad_sync (buckets reported in different orders, uneven
 * weights), train (a small MLP trained data-parallel; the launcher compares its parameters
 * with a one-process run of the same global batch), dead_peer and stuck_peer (faults must
 * end the job with a message in bounded time, never hang).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "est/dist.h"
#include "est/file.h"
#include "est/rng.h"
#include "est/variables.h"
#include "test_util.h"

/* ------------------------------------------------------------------ workers */

#define CHECK(cond, ...)                                                        \
  do {                                                                          \
    if (!(cond)) {                                                              \
      fprintf(stderr, "rank %d: FAIL %s:%d: ", est_dist_rank(), __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                                             \
      fprintf(stderr, "\n");                                                    \
      return 1;                                                                 \
    }                                                                           \
  } while (0)
#define CHECK_OK(expr) CHECK((expr) == EST_OK, "%s: %s", #expr, est_error_message())

static int worker_collectives(void) {
  int r = est_dist_rank(), n = est_dist_world_size();
  CHECK(n == 2, "world size %d, want 2", n);
  CHECK(est_dist_active() && est_dist_is_chief() == (r == 0), "chief flag");

  /* float sums of exactly representable values are exact in any order */
  float f[5] = {1.0f + r, 2.0f * r, -3.0f, 0.5f, (float)(10 * r)};
  CHECK_OK(est_dist_allreduce_f32(f, 5, EST_DIST_SUM));
  CHECK(f[0] == 3.0f && f[1] == 2.0f && f[2] == -6.0f && f[3] == 1.0f && f[4] == 10.0f, "sum %g %g %g %g %g", f[0],
        f[1], f[2], f[3], f[4]);
  float m[2] = {1.0f + 2.0f * r, 4.0f};
  CHECK_OK(est_dist_allreduce_f32(m, 2, EST_DIST_MEAN));
  CHECK(m[0] == 2.0f && m[1] == 4.0f, "mean %g %g", m[0], m[1]);

  double d[2] = {0.1 * (r + 1), 1e300 * (r == 0)};
  CHECK_OK(est_dist_allreduce_sum_f64(d, 2));
  CHECK(d[0] == 0.1 + 0.2 && d[1] == 1e300, "f64 %.17g %g", d[0], d[1]);
  int64_t i[1] = {((int64_t)1 << 40) + r};
  CHECK_OK(est_dist_allreduce_sum_i64(i, 1));
  CHECK(i[0] == ((int64_t)1 << 41) + 1, "i64 %lld", (long long)i[0]);
  double mx[1] = {r == 1 ? 7.5 : -1.0};
  CHECK_OK(est_dist_allreduce_max_f64(mx, 1));
  CHECK(mx[0] == 7.5, "max %g", mx[0]);

  /* broadcast: rank 1's bytes everywhere; a buffer that is not a multiple of 4 */
  unsigned char b[13];
  for (int k = 0; k < 13; k++) b[k] = (unsigned char)(r == 1 ? 100 + k : 0);
  CHECK_OK(est_dist_broadcast(b, sizeof b, 1));
  for (int k = 0; k < 13; k++) CHECK(b[k] == 100 + k, "broadcast byte %d = %d", k, b[k]);
  CHECK(est_dist_broadcast(b, 1, 5) == EST_ERR_INVALID_ARGUMENT, "bad root accepted");

  int64_t send[2] = {r, 10 + r}, all[4];
  CHECK_OK(est_dist_allgather_i64(send, 2, all));
  CHECK(all[0] == 0 && all[1] == 10 && all[2] == 1 && all[3] == 11, "allgather");

  CHECK_OK(est_dist_check_same(b, sizeof b, "broadcast bytes"));
  float differs[3] = {1, 2, (float)r};
  CHECK(est_dist_check_same(differs, sizeof differs, "parameters") == EST_ERR_FAILED_PRECONDITION,
        "check_same missed a difference");
  CHECK(strstr(est_error_message(), "parameters differ between ranks"), "message: %s", est_error_message());

  /* gather in input order: 7 rows sharded 2 ways -> rank 0 rows 0,2,4,6; rank 1 rows 1,3,5 */
  size_t mine = est_dist_shard_rows(7, r, 2);
  int32_t rows[4][2];
  for (size_t k = 0; k < mine; k++) {
    int g = (int)(k * 2 + (size_t)r);
    rows[k][0] = g;
    rows[k][1] = -g;
  }
  void *out = NULL;
  size_t total = 0;
  CHECK_OK(est_dist_gather_rows(rows, mine, sizeof rows[0], &out, &total));
  CHECK(total == 7, "total %zu", total);
  if (r == 0) {
    CHECK(out != NULL, "chief got no rows");
    int32_t(*g)[2] = out;
    for (int k = 0; k < 7; k++) CHECK(g[k][0] == k && g[k][1] == -k, "row %d = (%d, %d)", k, g[k][0], g[k][1]);
  } else {
    CHECK(out == NULL, "non-chief got rows");
  }
  free(out);

  /* a rank with a wrong count is caught on the chief; the others see success */
  size_t wrong = r == 0 ? 2 : 3;
  est_status st = est_dist_gather_rows(rows, wrong, sizeof rows[0], &out, &total);
  if (r == 0) {
    CHECK(st == EST_ERR_FAILED_PRECONDITION, "bad counts accepted");
    CHECK(strstr(est_error_message(), "did not read the same input"), "message: %s", est_error_message());
  } else {
    CHECK(st == EST_OK, "non-chief gather: %s", est_error_message());
  }
  free(out);
  CHECK_OK(est_dist_barrier());
  return 0;
}

/* Two ranks, uneven local batches (weights 3/5 and 2/5), ranges reported in opposite
 * orders with padding between them and tiny buckets: the result must be the exact
 * weighted sum on both ranks, for several steps. */
static int worker_grad_sync(void) {
  int r = est_dist_rank();
  enum { N = 1000 };
  float *g = calloc(N, sizeof(float));
  /* three "variables" with padding around them */
  size_t off[3] = {0, 300, 640}, cnt[3] = {250, 300, 333};
  est_dist_grad_sync *s;
  est_dist_grad_sync_config cfg = {.bucket_bytes = 64 * sizeof(float)};
  CHECK_OK(est_dist_grad_sync_create(&s, g, N, &cfg));
  CHECK_OK(est_dist_grad_sync_set_layout(s, off, cnt, 3));
  double w = r == 0 ? 0.6 : 0.4;
  for (int step = 0; step < 3; step++) {
    for (int k = 0; k < N; k++) g[k] = 0;
    CHECK_OK(est_dist_grad_sync_begin(s, w));
    /* rank 0 reports backward order (last variable first), rank 1 forward order, and rank
     * 1 splits its reports; the start order must still agree */
    for (int v = 0; v < 3; v++) {
      int vi = r == 0 ? 2 - v : v;
      for (size_t k = 0; k < cnt[vi]; k++) g[off[vi] + k] = (float)(r + 1) * (float)(step + 1) + (float)k * 0.25f;
      if (r == 1) {
        CHECK_OK(est_dist_grad_sync_ready(s, off[vi], cnt[vi] / 2));
        CHECK_OK(est_dist_grad_sync_ready(s, off[vi] + cnt[vi] / 2, cnt[vi] - cnt[vi] / 2));
      } else {
        CHECK_OK(est_dist_grad_sync_ready(s, off[vi], cnt[vi]));
      }
    }
    CHECK(est_dist_grad_sync_ready(s, off[0], 1) == EST_ERR_FAILED_PRECONDITION, "double report accepted");
    CHECK_OK(est_dist_grad_sync_finish(s));
    for (int v = 0; v < 3; v++)
      for (size_t k = 0; k < cnt[v]; k++) {
        float a = (float)(step + 1) + (float)k * 0.25f, b = 2.0f * (float)(step + 1) + (float)k * 0.25f;
        float want = a * 0.6f + b * 0.4f;
        float got = g[off[v] + k];
        CHECK(fabsf(got - want) <= 1e-6f * fabsf(want), "step %d var %d [%zu]: %g want %g", step, v, k, got, want);
      }
    for (size_t k = 250; k < 300; k++) CHECK(g[k] == 0.0f, "padding %zu = %g", k, g[k]);
  }
  est_dist_grad_sync_stats stats = est_dist_grad_sync_get_stats(s);
  CHECK(stats.steps == 3 && stats.buckets == 16, "stats steps %lld buckets %lld", (long long)stats.steps,
        (long long)stats.buckets);
  /* rank 0 reports the last variable first, so its upper buckets start inside "backward" */
  if (r == 0) CHECK(stats.buckets_overlapped > 0, "no bucket overlapped backward");
  est_dist_grad_sync_free(s);
  free(g);
  return 0;
}

/* ---- a small MLP trained data-parallel: x[D] -> tanh(x W1 + b1)[H] -> W2 + b2 -> softmax[C] ---- */
enum { D = 6, H = 5, C = 3, NEX = 96 };

typedef struct mlp {
  est_var_store *vs;
  int w1, b1, w2, b2;
  float *m, *v;  /* Adam moments (BERT's AdamWeightDecay: no bias correction) */
} mlp;

static void make_data(float x[NEX][D], int y[NEX]) {
  est_rng rng;
  est_rng_init(&rng, 2024);
  for (int i = 0; i < NEX; i++) {
    for (int k = 0; k < D; k++) x[i][k] = (float)est_rng_normal(&rng);
    y[i] = (int)est_rng_below(&rng, C);
  }
}

/* Adds d(mean loss over `total` examples)/dθ of examples idx[0..n) to the gradient buffer
 * (reporting each variable to the sync as it is finished, last layer first). */
static est_status mlp_forward_backward(mlp *net, float x[NEX][D], const int *y, const int *idx, int n, int total,
                                       est_dist_grad_sync *sync, double *loss_sum) {
  float *W1 = est_vars_value(net->vs, net->w1), *B1 = est_vars_value(net->vs, net->b1);
  float *W2 = est_vars_value(net->vs, net->w2), *B2 = est_vars_value(net->vs, net->b2);
  float *dW1 = est_vars_grad(net->vs, net->w1), *dB1 = est_vars_grad(net->vs, net->b1);
  float *dW2 = est_vars_grad(net->vs, net->w2), *dB2 = est_vars_grad(net->vs, net->b2);
  float h[64][H], dlog[64][C];
  for (int e = 0; e < n; e++) {
    const float *xi = x[idx[e]];
    float logit[C];
    for (int j = 0; j < H; j++) {
      float a = B1[j];
      for (int k = 0; k < D; k++) a += xi[k] * W1[k * H + j];
      h[e][j] = tanhf(a);
    }
    float mx = -INFINITY, z = 0;
    for (int c = 0; c < C; c++) {
      logit[c] = B2[c];
      for (int j = 0; j < H; j++) logit[c] += h[e][j] * W2[j * C + c];
      mx = fmaxf(mx, logit[c]);
    }
    for (int c = 0; c < C; c++) z += expf(logit[c] - mx);
    for (int c = 0; c < C; c++) dlog[e][c] = (expf(logit[c] - mx) / z - (c == y[idx[e]])) / (float)total;
    *loss_sum += -(logit[y[idx[e]]] - mx - logf(z));
  }
  /* output layer first, like a real backward */
  for (int e = 0; e < n; e++)
    for (int c = 0; c < C; c++) {
      dB2[c] += dlog[e][c];
      for (int j = 0; j < H; j++) dW2[j * C + c] += h[e][j] * dlog[e][c];
    }
  est_status st;
  if (sync && ((st = est_dist_grad_sync_ready(sync, est_vars_at(net->vs, net->b2)->offset, C)) != EST_OK ||
               (st = est_dist_grad_sync_ready(sync, est_vars_at(net->vs, net->w2)->offset, H * C)) != EST_OK))
    return st;
  for (int e = 0; e < n; e++) {
    const float *xi = x[idx[e]];
    for (int j = 0; j < H; j++) {
      float dh = 0;
      for (int c = 0; c < C; c++) dh += dlog[e][c] * W2[j * C + c];
      float da = dh * (1 - h[e][j] * h[e][j]);
      dB1[j] += da;
      for (int k = 0; k < D; k++) dW1[k * H + j] += xi[k] * da;
    }
  }
  if (sync && ((st = est_dist_grad_sync_ready(sync, est_vars_at(net->vs, net->b1)->offset, H)) != EST_OK ||
               (st = est_dist_grad_sync_ready(sync, est_vars_at(net->vs, net->w1)->offset, D * H)) != EST_OK))
    return st;
  return EST_OK;
}

/* Trains `steps` steps of global batch `B`; rank r takes its est_dist_local_batch slice
 * of each global batch. Rank 0 writes the final parameters to `out` (raw floats). */
static int worker_train(int steps, int B, const char *out) {
  int r = est_dist_rank(), n = est_dist_world_size();
  static float x[NEX][D];
  static int y[NEX];
  make_data(x, y);
  mlp net = {0};
  CHECK_OK(est_vars_create(&net.vs));
  CHECK_OK(est_vars_declare(net.vs, "dense/kernel", 2, (int64_t[]){D, H}, est_init_truncated_normal(0.5f), &net.w1));
  CHECK_OK(est_vars_declare(net.vs, "dense/bias", 1, (int64_t[]){H}, est_init_zeros(), &net.b1));
  CHECK_OK(est_vars_declare(net.vs, "output/kernel", 2, (int64_t[]){H, C}, est_init_truncated_normal(0.5f), &net.w2));
  CHECK_OK(est_vars_declare(net.vs, "output/bias", 1, (int64_t[]){C}, est_init_zeros(), &net.b2));
  /* each rank initialises with its own seed: the broadcast must make them equal */
  CHECK_OK(est_vars_finalize(net.vs, 1234 + (uint64_t)r * 77));
  size_t P = est_vars_size(net.vs);
  float *params = est_vars_params(net.vs), *grads = est_vars_grads(net.vs);
  CHECK_OK(est_dist_broadcast(params, P * sizeof(float), 0));
  CHECK_OK(est_dist_check_same(params, P * sizeof(float), "initial parameters"));
  net.m = calloc(P, sizeof(float));
  net.v = calloc(P, sizeof(float));
  est_dist_grad_sync *sync;
  est_dist_grad_sync_config cfg = {.bucket_bytes = 16 * sizeof(float)};
  CHECK_OK(est_dist_grad_sync_create_for_vars(&sync, net.vs, &cfg));
  int local = (int)est_dist_local_batch(B, r, n), first = 0;
  for (int q = 0; q < r; q++) first += (int)est_dist_local_batch(B, q, n);
  double loss = 0;
  for (int step = 0; step < steps; step++) {
    int idx[64];
    for (int e = 0; e < local; e++) idx[e] = (step * B + first + e) % NEX;
    est_vars_zero_grads(net.vs);
    /* each rank's gradient is the mean over its local examples; weight local/B makes
     * the sum over ranks the mean over the global batch */
    CHECK_OK(est_dist_grad_sync_begin(sync, (double)local / (double)B));
    loss = 0;
    CHECK_OK(mlp_forward_backward(&net, x, y, idx, local, local, sync, &loss));
    CHECK_OK(est_dist_grad_sync_finish(sync));
    /* clip by global norm 1.0 after the reduction (the single-device semantics) */
    double norm2 = 0;
    for (size_t i = 0; i < P; i++) norm2 += (double)grads[i] * grads[i];
    float scale = (float)(1.0 / fmax(sqrt(norm2), 1.0));
    const float lr = 0.05f, b1 = 0.9f, b2 = 0.999f, eps = 1e-6f;
    for (size_t i = 0; i < P; i++) {
      float gi = grads[i] * scale;
      net.m[i] = b1 * net.m[i] + (1 - b1) * gi;
      net.v[i] = b2 * net.v[i] + (1 - b2) * gi * gi;
      params[i] -= lr * net.m[i] / (sqrtf(net.v[i]) + eps);
    }
  }
  /* parameters must still agree across ranks after training */
  CHECK_OK(est_dist_check_same(params, P * sizeof(float), "trained parameters"));
  double lsum[1] = {loss};
  CHECK_OK(est_dist_allreduce_sum_f64(lsum, 1));
  if (r == 0) {
    CHECK_OK(est_write_file_atomic(out, params, P * sizeof(float)));
    printf("final local loss sum %.6f\n", lsum[0]);
  }
  est_dist_grad_sync_free(sync);
  free(net.m);
  free(net.v);
  est_vars_free(net.vs);
  return 0;
}

/* Rank 1 dies (SIGKILL) in the middle of the all-reduce sequence. */
static int worker_dead_peer(void) {
  float f[1024] = {0};
  for (int step = 0; step < 1000000; step++) {
    if (est_dist_rank() == 1 && step == 5) raise(SIGKILL);
    if (est_dist_allreduce_f32(f, 1024, EST_DIST_SUM) != EST_OK) {
      fprintf(stderr, "rank %d: %s\n", est_dist_rank(), est_error_message());
      est_dist_abort(1);
      return 1;
    }
  }
  return 0;
}

/* Rank 1 is alive but never joins the collective (stuck in I/O, a deadlock, a bug). */
static int worker_stuck_peer(void) {
  float f[16] = {0};
  if (est_dist_rank() == 1) {
    sleep(600);
    return 0;
  }
  if (est_dist_allreduce_f32(f, 16, EST_DIST_SUM) != EST_OK) {
    fprintf(stderr, "rank %d: %s\n", est_dist_rank(), est_error_message());
    est_dist_abort(3);
    return 1;
  }
  return 0;
}

static int worker_main(int argc, char **argv) {
  if (est_dist_init(&argc, &argv) != EST_OK) {
    fprintf(stderr, "est_dist_init: %s\n", est_error_message());
    return 1;
  }
  const char *name = argv[2];
  int rc = 2;
  if (!strcmp(name, "collectives")) rc = worker_collectives();
  else if (!strcmp(name, "grad_sync")) rc = worker_grad_sync();
  else if (!strcmp(name, "train") && argc >= 6) rc = worker_train(atoi(argv[3]), atoi(argv[4]), argv[5]);
  else if (!strcmp(name, "dead_peer")) rc = worker_dead_peer();
  else if (!strcmp(name, "stuck_peer")) rc = worker_stuck_peer();
  else fprintf(stderr, "unknown worker scenario %s\n", name);
  if (rc != 0) est_dist_abort(rc);
  est_dist_finalize();
  return rc;
}

/* ------------------------------------------------------------------ launcher */

static char self_exe[4096];

/* mpirun on loopback only, as root if need be, more ranks than cores allowed. Under
 * AddressSanitizer (make test SAN=1) LeakSanitizer is off in the ranks: OpenMPI leaks in
 * components it dlclose()s, which no suppression can name; our own code's leaks are still
 * checked by the single-process runs of the same worker code. */
#define MPIRUN                                                                                    \
  "env ASAN_OPTIONS=\"$ASAN_OPTIONS:detect_leaks=0\" " EST_MPIEXEC                                \
  " --allow-run-as-root --oversubscribe --mca btl self,tcp --mca btl_tcp_if_include lo"            \
  " --mca oob_tcp_if_include lo -x OMP_NUM_THREADS=1 -x ASAN_OPTIONS"

static void run_scenario(const char *name) {
  char *out = NULL;
  int rc = test_run(&out, 1, "timeout 120 " MPIRUN " -np 2 '%s' --worker %s", self_exe, name);
  if (rc != 0) fprintf(stderr, "%s\n", out);
  assert_int_equal(rc, 0);
  free(out);
}

static void test_collectives(void **state) {
  (void)state;
  run_scenario("collectives");
}

static void test_grad_sync_buckets(void **state) {
  (void)state;
  run_scenario("grad_sync");
}

static float *read_floats(const char *path, size_t *n) {
  uint8_t *data = NULL;
  size_t size = 0;
  assert_int_equal(est_read_file(path, &data, &size), EST_OK);
  *n = size / sizeof(float);
  return (float *)data;
}

/* Same global batch, 2 ranks vs 1 process: parameters equal to float reassociation. */
static void check_equivalence(int steps, int batch) {
  char dir[4096], one[4200], two[4200];
  test_make_tmpdir(dir, sizeof dir);
  snprintf(one, sizeof one, "%s/one.bin", dir);
  snprintf(two, sizeof two, "%s/two.bin", dir);
  char *out = NULL;
  /* the reference runs without mpirun: a plain single process */
  int rc = test_run(&out, 1, "'%s' --worker train %d %d '%s'", self_exe, steps, batch, one);
  if (rc) fprintf(stderr, "%s\n", out);
  assert_int_equal(rc, 0);
  free(out);
  rc = test_run(&out, 1, "timeout 120 " MPIRUN " -np 2 '%s' --worker train %d %d '%s'", self_exe, steps, batch, two);
  if (rc) fprintf(stderr, "%s\n", out);
  assert_int_equal(rc, 0);
  free(out);
  size_t n1, n2;
  float *a = read_floats(one, &n1), *b = read_floats(two, &n2);
  assert_int_equal(n1, n2);
  double diff2 = 0, ref2 = 0, moved = 0;
  for (size_t i = 0; i < n1; i++) {
    double d = (double)a[i] - b[i];
    diff2 += d * d;
    ref2 += (double)a[i] * a[i];
    assert_true(fabs(d) <= 1e-5 * fabs(a[i]) + 1e-6);
  }
  /* the run must really train: parameters moved far beyond the tolerance from their init */
  for (size_t i = 0; i < n1; i++) moved += fabs((double)a[i]);
  assert_true(moved > 1.0);
  assert_true(sqrt(diff2) <= 1e-5 * sqrt(ref2));
  free(a);
  free(b);
  test_remove_tree(dir);
}

static void test_equivalence_even_batch(void **state) {
  (void)state;
  check_equivalence(12, 8);
}

/* 7 examples over 2 ranks: local batches 4 and 3, weights 4/7 and 3/7. */
static void test_equivalence_uneven_batch(void **state) {
  (void)state;
  check_equivalence(12, 7);
}

/* A rank killed mid-training: the job ends non-zero quickly (mpirun's own failure
 * detection, or our error path), never a hang. */
static void test_dead_peer_stops_job(void **state) {
  (void)state;
  char *out = NULL;
  time_t t0 = time(NULL);
  int rc = test_run(&out, 1, "EST_DIST_TIMEOUT=20 timeout 100 " MPIRUN " -np 2 '%s' --worker dead_peer", self_exe);
  time_t dt = time(NULL) - t0;
  if (rc == 0 || rc == 124) fprintf(stderr, "%s\n", out);
  assert_int_not_equal(rc, 0);
  assert_int_not_equal(rc, 124); /* `timeout` fired: a hang */
  assert_true(dt < 90);
  free(out);
}

/* A rank that lives but never joins: the waiting rank gives up at the deadline with a
 * message naming the collective, and est_dist_abort ends the whole job. */
static void test_stuck_peer_times_out(void **state) {
  (void)state;
  char *out = NULL;
  int rc = test_run(&out, 1, "EST_DIST_TIMEOUT=2 timeout 100 " MPIRUN " -np 2 '%s' --worker stuck_peer", self_exe);
  if (rc == 0 || rc == 124 || !strstr(out, "did not complete within 2 s")) fprintf(stderr, "%s\n", out);
  assert_int_not_equal(rc, 0);
  assert_int_not_equal(rc, 124);
  assert_non_null(strstr(out, "all-reduce (float32) did not complete within 2 s on rank 0 of 2"));
  free(out);
}

int main(int argc, char **argv) {
  if (argc >= 3 && !strcmp(argv[1], "--worker")) return worker_main(argc, argv);
  ssize_t len = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
  if (len <= 0) return 1;
  self_exe[len] = 0;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_collectives),
      cmocka_unit_test(test_grad_sync_buckets),
      cmocka_unit_test(test_equivalence_even_batch),
      cmocka_unit_test(test_equivalence_uneven_batch),
      cmocka_unit_test(test_dead_peer_stops_job),
      cmocka_unit_test(test_stuck_peer_times_out),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
