/* bench_dist: data-parallel BERT training, 1 rank vs N ranks side by side.
 *
 *   build-dir/bench_dist [--ranks 1,2] [--models tiny,mini] [--steps 3] [--batch 32]
 *                        [--seq 128] [--cores 2] [--allreduce-only]
 *
 * Launches itself under mpirun once per rank count (loopback TCP, as the tests; each
 * rank gets cores/ranks threads) and for each BERT size (vocab 30522, 2 labels):
 *   1. trains: the real BERT classifier (the BERT model_fn with the classifier head, as
 *      run_classifier trains it) + its AdamWeightDecay, global batch --batch split over the
 *      ranks, random token ids, dropout on. Per step it
 *      times forward+backward, the gradient all-reduce (est_dist_grad_sync) and the
 *      optimizer, and reports examples/sec and the all-reduce's share of the step;
 *   2. times the all-reduce alone over that parameter count (bucketed via grad_sync, and
 *      one plain est_dist_allreduce_f32), with the achieved bus bandwidth
 *      2(N-1)/N * bytes / t — the number bench/README.md's scaling model is built on.
 * The slowest rank decides a step: each figure is the max over ranks of the per-rank
 * median. OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset (bench/README.md says why).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/alloc.h"
#include "dist/dist_internal.h"
#include "est/bert_classifier.h"
#include "est/bert_head.h"
#include "est/dist.h"
#include "est/optimizer.h"
#include "est/rng.h"
#include "est/threads.h"

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

static est_bert_config bert_config(const model_size *m) {
  est_bert_config c = est_bert_config_default();
  c.vocab_size = 30522;
  c.hidden_size = m->hidden;
  c.num_hidden_layers = m->layers;
  c.num_attention_heads = m->hidden / 64;
  c.intermediate_size = m->intermediate;
  c.type_vocab_size = 2;
  return c;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof(double), cmp_double);
  return v[n / 2];
}

#define BCHECK(expr)                                                                 \
  do {                                                                               \
    if ((expr) != EST_OK) {                                                          \
      fprintf(stderr, "rank %d: %s: %s\n", est_dist_rank(), #expr, est_error_message()); \
      return 1;                                                                      \
    }                                                                                \
  } while (0)

/* One BERT size: real training steps; prints "TRAIN name params world step fwdbwd ar opt". */
static int train_one(const model_size *ms, int steps, int global_batch, int seq) {
  const int rank = est_dist_rank(), world = est_dist_world_size();
  const int local = (int)est_dist_local_batch(global_batch, rank, world);
  /* the BERT model_fn with the classifier head, driven as the Estimator drives it (its
   * gradient-ready reports off: the all-reduce runs after backward, timed on its own) */
  const est_bert_classifier_head_params hp = {.num_labels = 2};
  const est_bert_model_params p = {.bert_config = bert_config(ms), .head = &est_bert_classifier_head_type,
                                   .head_params = &hp, .max_seq_length = seq, .learning_rate = 1e-4,
                                   .num_train_steps = 1000};
  const est_model_fn fn = est_bert_model_fn(&p);
  const est_model_context ctx = {.mode = EST_MODE_TRAIN, .batch_size = local, .seed = 1, .params = (void *)&p,
                                 .first_row = (int64_t)rank * local};
  est_var_store *vs;
  void *m = NULL;
  BCHECK(est_vars_create(&vs));
  BCHECK(fn.build(&ctx, vs, &m));
  BCHECK(est_vars_finalize(vs, 1));
  est_optimizer *opt;
  BCHECK(fn.create_optimizer(m, vs, &opt));
  est_dist_grad_sync *sync;
  BCHECK(est_dist_grad_sync_create_for_vars(&sync, vs, NULL));
  const size_t T = (size_t)local * seq;
  int32_t *ids = malloc(sizeof(int32_t) * T), *mask = malloc(sizeof(int32_t) * T), *segs = calloc(T, sizeof(int32_t));
  int32_t *labels = malloc(sizeof(int32_t) * (size_t)local);
  est_rng rng;
  est_rng_init(&rng, 7 + (uint64_t)rank);
  for (size_t i = 0; i < T; i++) ids[i] = (int32_t)est_rng_below(&rng, 30522), mask[i] = 1;
  for (int i = 0; i < local; i++) labels[i] = (int32_t)est_rng_below(&rng, 2);
  const char *names[4] = {"input_ids", "input_mask", "segment_ids", "label_ids"};
  int32_t *data[4] = {ids, mask, segs, labels};
  est_tensor tensors[4];
  for (int k = 0; k < 4; k++)
    tensors[k] = k < 3 ? (est_tensor){.dtype = EST_DT_INT32, .rank = 2, .dims = {local, seq}, .data = data[k]}
                       : (est_tensor){.dtype = EST_DT_INT32, .rank = 1, .dims = {local}, .data = data[k]};
  const est_features features = {.batch_size = local, .count = 4, .names = names, .tensors = tensors};
  double tc[64], ta[64], to[64], ts[64];
  if (steps > 64) steps = 64;
  for (int it = -1; it < steps; it++) { /* it = -1: warm-up (first touch of activations) */
    BCHECK(est_dist_barrier());
    double t0 = est_dist_now();
    est_vars_zero_grads(vs);
    est_estimator_spec spec = {0};
    BCHECK(fn.call(m, vs, &features, EST_MODE_TRAIN, it + 1, &spec)); /* forward + backward */
    double t1 = est_dist_now();
    BCHECK(est_dist_grad_sync_begin(sync, (double)local / global_batch));
    BCHECK(est_dist_grad_sync_finish(sync));
    double t2 = est_dist_now();
    BCHECK(est_optimizer_apply(opt, it + 1));
    double t3 = est_dist_now();
    if (it >= 0) {
      tc[it] = t1 - t0;
      ta[it] = t2 - t1;
      to[it] = t3 - t2;
      ts[it] = t3 - t0;
    }
  }
  double med[4] = {median(ts, steps), median(tc, steps), median(ta, steps), median(to, steps)};
  BCHECK(est_dist_allreduce_max_f64(med, 4));
  if (est_dist_is_chief())
    printf("TRAIN %s %zu %d %.3f %.3f %.3f %.3f\n", ms->name, est_vars_num_parameters(vs), world, 1e3 * med[0],
           1e3 * med[1], 1e3 * med[2], 1e3 * med[3]);
  free(ids), free(mask), free(segs), free(labels);
  est_dist_grad_sync_free(sync);
  est_optimizer_free(opt);
  fn.destroy(m);
  est_vars_free(vs);
  return 0;
}

static int worker(const char *models, int steps, int train, int global_batch, int seq) {
  int world = est_dist_world_size();
  for (size_t mi = 0; mi < sizeof MODELS / sizeof MODELS[0]; mi++) {
    const model_size *m = &MODELS[mi];
    if (!strstr(models, m->name)) continue;
    if (train && train_one(m, steps, global_batch, seq) != 0) return 1;
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
  const char *ranks = "1,2", *models = "tiny,mini";
  int steps = 3, train = 1, batch = 32, seq = 128, cores = 2;
  int is_worker = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--worker")) is_worker = 1;
    else if (!strcmp(argv[i], "--allreduce-only")) train = 0;
    else if (!strcmp(argv[i], "--ranks") && i + 1 < argc) ranks = argv[++i];
    else if (!strcmp(argv[i], "--models") && i + 1 < argc) models = argv[++i];
    else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--batch") && i + 1 < argc) batch = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--seq") && i + 1 < argc) seq = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--cores") && i + 1 < argc) cores = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      printf("usage: bench_dist [--ranks 1,2] [--models tiny,mini,small,base] [--steps 3] [--batch 32] [--seq 128]\n"
             "                  [--cores 2] [--allreduce-only]\n");
      return 0;
    } else {
      fprintf(stderr, "bench_dist: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  if (steps < 1) steps = 1;
  if (batch < 1 || seq < 2 || seq > 512 || cores < 1) {
    fprintf(stderr, "bench_dist: bad --batch/--seq/--cores\n");
    return 2;
  }
  if (is_worker) {
    if (est_dist_init(&argc, &argv) != EST_OK) return fprintf(stderr, "%s\n", est_error_message()), 1;
    const char *t = getenv("OMP_NUM_THREADS");
    est_set_num_threads(t && atoi(t) > 0 ? atoi(t) : 1);
    int rc = worker(models, steps, train, batch, seq);
    if (rc) est_dist_abort(rc);
    est_dist_finalize();
    return rc;
  }

  char self[4096];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) return 1;
  self[len] = 0;
  /* OpenBLAS picks its kernels from the CPU when these are unset (docs/performance.md §1). */
  unsetenv("OPENBLAS_CORETYPE");
  unsetenv("OPENBLAS_L2_SIZE");
  printf("bench_dist: %d cores, BERT seq %d, global batch %d, median of %d steps, loopback TCP\n", cores, seq, batch,
         steps);
  char list[256];
  snprintf(list, sizeof list, "%s", ranks);
  char train_lines[64][160], ar_lines[64][160];
  int ntrain = 0, nar = 0;
  for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
    int np = atoi(tok);
    if (np < 1) continue;
    int threads = cores / np > 0 ? cores / np : 1;
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "%s --allow-run-as-root --oversubscribe --mca btl self,tcp --mca btl_tcp_if_include lo "
             "--mca oob_tcp_if_include lo -x EST_LOG_LEVEL=warn -x OMP_NUM_THREADS=%d -np %d '%s' --worker --models %s --steps %d "
             "--batch %d --seq %d%s",
             EST_MPIEXEC, threads, np, self, models, steps, batch, seq, train ? "" : " --allreduce-only");
    FILE *p = popen(cmd, "r");
    if (!p) return 1;
    char line[512];
    while (fgets(line, sizeof line, p)) {
      char name[32];
      size_t n;
      int world;
      double a, b, c, d;
      if (sscanf(line, "TRAIN %31s %zu %d %lf %lf %lf %lf", name, &n, &world, &a, &b, &c, &d) == 7) {
        if (ntrain < 64)
          snprintf(train_lines[ntrain++], sizeof train_lines[0], "%-6s %6d %8d %10.1f %10.1f %10.1f %10.1f %9.2f %8.1f%%",
                   name, world, threads, a, b, c, d, batch / (a * 1e-3), 100.0 * c / a);
      } else if (sscanf(line, "RESULT %31s %zu %d %lf %lf", name, &n, &world, &a, &b) == 5) {
        double bus = world > 1 ? 2.0 * (world - 1) / world * (double)n * 4 / (a * 1e-3) / 1e9 : 0;
        if (nar < 64)
          snprintf(ar_lines[nar++], sizeof ar_lines[0], "%-6s %11zu %6d %12.2f %12.2f %10.2f", name, n, world, a, b,
                   bus);
      } else if (!strstr(line, "] communication:") && !strstr(line, "] data parallel over MPI")) {
        fputs(line, stdout);
      }
    }
    if (pclose(p) != 0) {
      fprintf(stderr, "bench_dist: the %d-rank run failed\n", np);
      return 1;
    }
  }
  if (ntrain) {
    printf("\ntraining step (ms; max over ranks of the median)\n");
    printf("%-6s %6s %8s %10s %10s %10s %10s %9s %9s\n", "model", "ranks", "threads", "step", "fwd+bwd", "allreduce",
           "optimizer", "ex/s", "AR share");
    for (int i = 0; i < ntrain; i++) puts(train_lines[i]);
  }
  printf("\ngradient all-reduce alone (ms per step)\n");
  printf("%-6s %11s %6s %12s %12s %10s\n", "model", "params", "ranks", "bucketed", "plain", "bus GB/s");
  for (int i = 0; i < nar; i++) puts(ar_lines[i]);
  return 0;
}
