/* bench_dist: what the gradient all-reduce costs, 1 rank vs N ranks side by side.
 *
 *   build-dir/bench_dist [--ranks 1,2] [--models tiny,mini,small,base] [--steps 5]
 *
 * Launches itself under mpirun once per rank count (loopback TCP, as the tests) and, for
 * each BERT size, times the per-step gradient combination over a buffer of exactly that
 * model's parameter count (classifier head with 2 labels included):
 *   - bucketed: est_dist_grad_sync (16 MiB buckets, the path training uses),
 *   - plain: one est_dist_allreduce_f32 over the whole buffer.
 * It prints milliseconds per step and the achieved "bus bandwidth" 2(N-1)/N * bytes / t,
 * the number that decides how step time grows with ranks (bench/README.md's model).
 * The training throughput side is bench/bench_dist_mrpc.sh (est run_classifier).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/alloc.h"
#include "dist/dist_internal.h"
#include "est/dist.h"

#ifndef EST_MPIEXEC
#define EST_MPIEXEC "mpirun"
#endif

typedef struct model_size {
  const char *name;
  int layers, hidden, intermediate;
} model_size;

static const model_size MODELS[] = {
    {"tiny", 2, 128, 512},
    {"mini", 4, 256, 1024},
    {"small", 4, 512, 2048},
    {"base", 12, 768, 3072},
};

/* Trainable parameters of BERT (vocab 30522, 512 positions, 2 token types) plus the
 * pooler and a 2-label classifier: the size of run_classifier's gradient buffer. */
static size_t bert_params(const model_size *m) {
  size_t H = (size_t)m->hidden, I = (size_t)m->intermediate;
  size_t emb = 30522 * H + 512 * H + 2 * H + 2 * H;
  size_t layer = 4 * (H * H + H) + 2 * (2 * H) + (H * I + I) + (I * H + H);
  return emb + (size_t)m->layers * layer + (H * H + H) + (2 * H + 2);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static int worker(const char *models, int steps) {
  int world = est_dist_world_size();
  for (size_t mi = 0; mi < sizeof MODELS / sizeof MODELS[0]; mi++) {
    const model_size *m = &MODELS[mi];
    if (!strstr(models, m->name)) continue;
    size_t n = bert_params(m);
    float *g = est_alloc(n * sizeof(float));
    if (!g) return fprintf(stderr, "out of memory for %zu floats\n", n), 1;
    for (size_t i = 0; i < n; i++) g[i] = 1e-3f * (float)(i % 1000);
    est_dist_grad_sync *s;
    if (est_dist_grad_sync_create(&s, g, n, NULL) != EST_OK) return fprintf(stderr, "%s\n", est_error_message()), 1;
    double tb[64], tp[64];
    if (steps > 64) steps = 64;
    for (int it = -1; it < steps; it++) { /* it = -1: warm-up (first touch, connections) */
      est_dist_barrier();
      double t0 = est_dist_now();
      if (est_dist_grad_sync_begin(s, 1.0 / world) != EST_OK || est_dist_grad_sync_finish(s) != EST_OK)
        return fprintf(stderr, "%s\n", est_error_message()), 1;
      double t1 = est_dist_now();
      est_dist_barrier();
      double t2 = est_dist_now();
      if (est_dist_allreduce_f32(g, n, EST_DIST_MEAN) != EST_OK) return fprintf(stderr, "%s\n", est_error_message()), 1;
      double t3 = est_dist_now();
      if (it >= 0) {
        tb[it] = t1 - t0;
        tp[it] = t3 - t2;
      }
    }
    /* the slowest rank decides the step: max over ranks of each rank's median */
    qsort(tb, (size_t)steps, sizeof(double), cmp_double);
    qsort(tp, (size_t)steps, sizeof(double), cmp_double);
    double med[2] = {tb[steps / 2], tp[steps / 2]};
    est_dist_allreduce_max_f64(med, 2);
    if (est_dist_is_chief())
      printf("RESULT %s %zu %d %.3f %.3f\n", m->name, n, world, 1e3 * med[0], 1e3 * med[1]);
    est_dist_grad_sync_free(s);
    est_free(g);
  }
  return 0;
}

int main(int argc, char **argv) {
  const char *ranks = "1,2", *models = "tiny,mini,small,base";
  int steps = 5;
  int is_worker = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--worker")) is_worker = 1;
    else if (!strcmp(argv[i], "--ranks") && i + 1 < argc) ranks = argv[++i];
    else if (!strcmp(argv[i], "--models") && i + 1 < argc) models = argv[++i];
    else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      printf("usage: bench_dist [--ranks 1,2] [--models tiny,mini,small,base] [--steps 5]\n");
      return 0;
    } else {
      fprintf(stderr, "bench_dist: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  if (steps < 1) steps = 1;
  if (is_worker) {
    if (est_dist_init(&argc, &argv) != EST_OK) return fprintf(stderr, "%s\n", est_error_message()), 1;
    int rc = worker(models, steps);
    if (rc) est_dist_abort(rc);
    est_dist_finalize();
    return rc;
  }

  char self[4096];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) return 1;
  self[len] = 0;
  printf("bench_dist: gradient all-reduce per step, BERT parameter counts, median of %d steps, loopback TCP\n", steps);
  printf("%-6s %11s %6s %12s %12s %14s\n", "model", "params", "ranks", "bucketed ms", "plain ms", "bus GB/s");
  char list[256];
  snprintf(list, sizeof list, "%s", ranks);
  for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
    int np = atoi(tok);
    if (np < 1) continue;
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "%s --allow-run-as-root --oversubscribe --mca btl self,tcp --mca btl_tcp_if_include lo "
             "--mca oob_tcp_if_include lo -x OMP_NUM_THREADS=1 -np %d '%s' --worker --models %s --steps %d",
             EST_MPIEXEC, np, self, models, steps);
    FILE *p = popen(cmd, "r");
    if (!p) return 1;
    char line[512];
    while (fgets(line, sizeof line, p)) {
      char name[32];
      size_t n;
      int world;
      double bms, pms;
      if (sscanf(line, "RESULT %31s %zu %d %lf %lf", name, &n, &world, &bms, &pms) != 5) {
        fputs(line, stdout);
        continue;
      }
      double bus = world > 1 ? 2.0 * (world - 1) / world * (double)n * 4 / (bms * 1e-3) / 1e9 : 0;
      printf("%-6s %11zu %6d %12.2f %12.2f %14.2f\n", name, n, world, bms, pms, bus);
    }
    if (pclose(p) != 0) {
      fprintf(stderr, "bench_dist: the %d-rank run failed\n", np);
      return 1;
    }
  }
  return 0;
}
