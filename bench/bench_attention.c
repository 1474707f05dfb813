/* The attention core alone (est_attention_forward / _backward, src/nn/attention.c) in fp32
 * and in bf16 (the per-head products on AMX tiles where the CPU has them), at BERT's shapes:
 * batch 32, 128 tokens, N heads of 64 (Small: 8, Base: 12), attention dropout 0.1 as in
 * training. Best of 10 wall-clock runs each, three rounds alternating the precisions.
 *
 *   bench_attention [THREADS] [HEADS]      (build: the bench_attention target) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "est/nn.h"
#include "est/precision.h"
#include "est/threads.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  const int threads = argc > 1 ? atoi(argv[1]) : 2, N = argc > 2 ? atoi(argv[2]) : 8;
  const int B = 32, S = 128, Dh = 64;
  const float drop = 0.1f;
  est_set_num_threads(threads);
  size_t n = (size_t)B * S * N * Dh, pp = (size_t)B * N * S * S;
  float *q = malloc(n * 4), *k = malloc(n * 4), *v = malloc(n * 4), *ctx = malloc(n * 4), *dctx = malloc(n * 4);
  float *dq = calloc(n, 4), *dk = calloc(n, 4), *dv = calloc(n, 4);
  float *probs = malloc(pp * 4), *scratch = malloc(est_attention_scratch_floats(B, N, S) * 4);
  uint8_t *mask = malloc(pp);
  if (!q || !k || !v || !ctx || !dctx || !dq || !dk || !dv || !probs || !scratch || !mask) return 1;
  for (size_t i = 0; i < n; i++)
    q[i] = (float)(i % 97) * 0.01f - 0.5f, k[i] = (float)(i % 89) * 0.01f - 0.4f, v[i] = (float)(i % 83) * 0.01f,
    dctx[i] = (float)(i % 79) * 0.01f - 0.3f;
  printf("attention B %d S %d heads %d x %d, dropout %.1f, %d threads (ms, best of 10)\n", B, S, N, Dh, drop, threads);
  for (int round = 0; round < 3; round++)
    for (int p = 0; p < 2; p++) {
      est_precision want = p ? EST_PRECISION_BF16 : EST_PRECISION_FP32;
      if (est_precision_resolve(want) != want) continue; /* no bf16 on this CPU: fp32 rows only */
      double fwd = 1e30, bwd = 1e30;
      for (int r = 0; r < 10; r++) {
        double t0 = now();
        est_attention_forward(ctx, probs, mask, scratch, q, k, v, NULL, B, S, N, Dh, drop, 1, 0, 0, want);
        double t1 = now();
        est_attention_backward(dq, dk, dv, scratch, dctx, q, k, v, probs, mask, B, S, N, Dh, drop, want);
        double t2 = now();
        if (t1 - t0 < fwd) fwd = t1 - t0;
        if (t2 - t1 < bwd) bwd = t2 - t1;
      }
      printf("round %d  %s  forward %7.2f  backward %7.2f\n", round + 1, p ? "bf16" : "fp32", fwd * 1e3, bwd * 1e3);
    }
  return 0;
}
