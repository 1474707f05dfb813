/* GEMM speed on BERT's dense-layer shapes: est's fp32 GEMMs (OpenBLAS sgemm under est's
 * OpenMP split, and est's own AVX-512 kernel, src/nn/gemm_f32.c) against est's bf16
 * kernel (src/nn/gemm_bf16.c) and, forward only, its int8 one (src/nn/gemm_int8.c, weights
 * frozen as in inference), forward (NN), input
 * gradient (NT) and weight gradient (TN), best of 5, in GFLOP per CPU-second of the
 * process (CLOCK_PROCESS_CPUTIME_ID): on a machine shared with other people's jobs, time
 * spent descheduled does not count, so the figure is what the cores do while est runs;
 * with THREADS > 1 it is the per-core rate.
 *
 *   bench_gemm [THREADS]      (build: the bench_gemm target)
 *   bench_gemm THREADS M N K [LDA]
 *       one forward product C[M,N] = A[M,K] B[K,N], B kept as an inference weight (packed
 *       once), A's rows LDA floats apart (default K): wall-clock GFLOP/s, best of 30, of
 *       OpenBLAS fp32, est's own fp32 kernel and the bf16 one (the cache-set experiments of
 *       bench/README.md, "A's rows on distinct cache sets")
 *
 * A fair fp32 figure needs OpenBLAS's AVX-512 kernels: unset OPENBLAS_CORETYPE where
 * OpenBLAS recognises the CPU; on a VM where it does not (it falls back to SSE3 Prescott
 * kernels), set it, e.g. OPENBLAS_CORETYPE=Cooperlake (bench/README.md, "bf16 GEMM"). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "est/precision.h"
#include "est/threads.h"
#include "core/frozen.h"
#include "nn/cpu_peak.h"
#include "nn/gemm.h"
#include "nn/kernel_choice.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Best GFLOP/s of 5 runs of C[M,N] (+)= op(A) op(B), K inner. */
static double run(est_precision p, est_kernel g, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K,
                  float *A, float *B, float *C) {
  p = est_precision_resolve(p);
  est_kernel_set(g); /* refused without AVX-512F (own): auto, i.e. OpenBLAS, as main says */
  double best = 1e30;
  for (int r = 0; r < 5; r++) {
    double t0 = now();
    est_sgemm_parallel(ta, tb, M, N, K, 1.0f, A, ta == CblasNoTrans ? K : M, B, tb == CblasNoTrans ? N : K, 1.0f, C,
                       N, p);
    double t = now() - t0;
    if (t < best) best = t;
  }
  est_kernel_set(EST_KERNEL_AUTO);
  return 2.0 * M * N * K / best * 1e-9;
}

/* int8 (forward only, the one product int8 runs): best G int ops per CPU-second of 5 runs of
 * C = A B, B frozen as an inference model's weights are (packed once, core/frozen.h). */
static double run_int8(int M, int N, int K, float *A, float *B, float *C) {
  if (est_precision_resolve(EST_PRECISION_INT8) != EST_PRECISION_INT8) return 0;
  est_frozen_add(B, (size_t)K * N * sizeof(float));
  double best = 1e30;
  for (int r = 0; r < 6; r++) { /* the first packs the weights: not counted */
    double t0 = now();
    est_sgemm_parallel(CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, A, K, B, N, 0.0f, C, N, EST_PRECISION_INT8);
    double t = now() - t0;
    if (r > 0 && t < best) best = t;
  }
  est_frozen_remove(B);
  return 2.0 * M * N * K / best * 1e-9;
}

/* VPDPBUSD's ceiling on one core, G int ops per CPU-second (nn/cpu_peak.h); 0 without it. */
static double int8_peak(void) {
  const long blocks = 2000 * 1000;
  double best = 1e30;
  for (int r = 0; r < 3; r++) {
    double t0 = now();
    if (est_peak_dpbusd_loop(blocks) != 0) return 0;
    double t = now() - t0;
    if (t < best) best = t;
  }
  return (double)blocks * EST_PEAK_BLOCK * EST_PEAK_DPBUSD_OPS / best * 1e-9;
}

static double wall_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Best wall-clock GFLOP/s of 30 runs of C = A B (lda apart), B frozen; the first run packs B. */
static double run_one(est_precision p, est_kernel g, int M, int N, int K, const float *A, int lda, float *B, float *C) {
  p = est_precision_resolve(p);
  est_kernel_set(g);
  est_frozen_add(B, (size_t)K * N * sizeof(float));
  double best = 1e30;
  for (int r = 0; r < 31; r++) {
    double t0 = wall_now();
    est_sgemm_parallel(CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, A, lda, B, N, 0.0f, C, N, p);
    double t = wall_now() - t0;
    if (r > 0 && t < best) best = t;
  }
  est_frozen_remove(B);
  est_kernel_set(EST_KERNEL_AUTO);
  return 2.0 * M * N * K / best * 1e-9;
}

static int one_shape(int threads, int M, int N, int K, int lda) {
  if (M <= 0 || N <= 0 || K <= 0 || lda < K) {
    fprintf(stderr, "bench_gemm: M, N, K must be positive and LDA at least K\n");
    return 2;
  }
  float *A = malloc((size_t)M * lda * 4), *B = malloc((size_t)K * N * 4), *C = malloc((size_t)M * N * 4);
  if (!A || !B || !C) return fprintf(stderr, "bench_gemm: out of memory\n"), 1;
  for (size_t i = 0; i < (size_t)M * lda; i++) A[i] = (float)(i % 97) * 0.01f;
  for (size_t i = 0; i < (size_t)K * N; i++) B[i] = (float)(i % 89) * 0.01f;
  double f = run_one(EST_PRECISION_FP32, EST_KERNEL_BLAS, M, N, K, A, lda, B, C);
  double o = run_one(EST_PRECISION_FP32, EST_KERNEL_OWN, M, N, K, A, lda, B, C);
  double b = run_one(EST_PRECISION_BF16, EST_KERNEL_AUTO, M, N, K, A, lda, B, C);
  double q = est_precision_resolve(EST_PRECISION_INT8) == EST_PRECISION_INT8
                 ? run_one(EST_PRECISION_INT8, EST_KERNEL_AUTO, M, N, K, A, lda, B, C)
                 : 0.0;
  printf("NN fwd %dx%dx%d lda %d, %d threads, wall GFLOP/s: blas fp32 %.1f  own fp32 %.1f  bf16 %.1f  int8 %.1f\n", M,
         N, K, lda, threads, f, o, b, q);
  free(A), free(B), free(C);
  return 0;
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 1;
  est_set_num_threads(threads);
  if (argc >= 5)
    return one_shape(threads, atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), argc > 5 ? atoi(argv[5]) : atoi(argv[4]));
  if (!est_kernel_avx512_bf16()) fprintf(stderr, "bench_gemm: no AVX512-BF16 here; bf16 runs in fp32\n");
  /* tokens x out x in: BERT-Base's attention output/FFN, Tiny's */
  static const int shapes[][3] = {{4096, 768, 768}, {4096, 3072, 768}, {4096, 768, 3072}, {4096, 128, 128},
                                  {4096, 512, 128}, {4096, 128, 512}};
  static const char *names[] = {"NN fwd", "NT dinp", "TN dW"};
  size_t max = (size_t)4096 * 3072;
  float *A = malloc(max * 4), *B = malloc(max * 4), *C = malloc(max * 4);
  for (size_t i = 0; i < max; i++) A[i] = (float)(i % 97) * 0.01f, B[i] = (float)(i % 89) * 0.01f, C[i] = 0.0f;
  if (!est_kernel_avx512f()) fprintf(stderr, "bench_gemm: no AVX-512F here; 'own' runs OpenBLAS\n");
  double peak8 = int8_peak();
  printf("%-8s %-18s %10s %10s %7s %10s %7s %10s %8s %9s   (threads %d, GFLOP per CPU-second; int8: G int ops, "
         "%% of VPDPBUSD's %.0f per core)\n",
         "op", "M x N x K", "blas fp32", "own fp32", "own/blas", "bf16", "bf16/blas", "int8", "int8/own", "int8 peak",
         threads, peak8);
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int op = 0; op < 3; op++) {
      int tok = shapes[s][0], out = shapes[s][1], in = shapes[s][2];
      /* fwd: [tok,in].[in,out]; dinp: [tok,out].[in,out]^T; dW: [tok,in]^T.[tok,out] */
      int M = op == 2 ? in : tok, N = op == 1 ? in : out, K = op == 0 ? in : op == 1 ? out : tok;
      CBLAS_TRANSPOSE ta = op == 2 ? CblasTrans : CblasNoTrans, tb = op == 1 ? CblasTrans : CblasNoTrans;
      double f = run(EST_PRECISION_FP32, EST_KERNEL_BLAS, ta, tb, M, N, K, A, B, C);
      double o = run(EST_PRECISION_FP32, EST_KERNEL_OWN, ta, tb, M, N, K, A, B, C);
      double b = run(EST_PRECISION_BF16, EST_KERNEL_AUTO, ta, tb, M, N, K, A, B, C);
      char dims[32];
      snprintf(dims, sizeof dims, "%dx%dx%d", M, N, K);
      double q = op == 0 ? run_int8(M, N, K, A, B, C) : 0;
      printf("%-8s %-18s %10.1f %10.1f %7.2fx %10.1f %8.2fx", names[op], dims, f, o, o / f, b, b / f);
      if (q > 0 && peak8 > 0) printf(" %10.1f %7.2fx %8.0f%%", q, q / o, 100 * q / peak8);
      printf("\n");
    }
  free(A), free(B), free(C);
  return 0;
}
