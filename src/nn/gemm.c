/* sgemm over OpenMP blocks; see gemm.h for why OpenBLAS stays single-threaded. */
#include "nn/gemm.h"

#include <omp.h>
#include <string.h>

#include "est/log.h"
#include "nn/cpu_features.h"
#include "nn/fastmath.h"
#include "nn/gelu_avx512.h"
#include "nn/gemm_int8.h"
#include "nn/kernel_choice.h"
#include "est/threads.h"

est_precision est_precision_resolve(est_precision p) {
  if (p == EST_PRECISION_BF16 && !est_kernel_avx512_bf16()) {
    static int warned;
    if (!warned)
      EST_LOG_WARN("precision bf16: %sthis CPU has no AVX512-BF16, so the matmuls run in fp32",
                   est_cpu_has_avx512_bf16() ? "as EST_KERNEL=noavx512 simulates, " : "");
    warned = 1;
    p = EST_PRECISION_FP32;
  }
  if (p == EST_PRECISION_INT8 && !est_kernel_int8()) {
    static int warned;
    if (!warned)
      EST_LOG_WARN("precision int8: %sthis CPU has neither AVX512-VNNI nor AVX-VNNI, so the matmuls run in fp32",
                   est_cpu_has_avx512_vnni() ? "as EST_KERNEL=noavx512 simulates, " : "");
    warned = 1;
    p = EST_PRECISION_FP32;
  }
  return p;
}

const char *est_precision_name(est_precision p) {
  return p == EST_PRECISION_BF16 ? "bf16" : p == EST_PRECISION_INT8 ? "int8" : "fp32";
}

est_precision est_precision_of_logits(est_precision p) {
  return p == EST_PRECISION_INT8 ? EST_PRECISION_FP32 : p;
}

int est_precision_parse(const char *name, est_precision *out) {
  if (!strcmp(name, "fp32")) *out = EST_PRECISION_FP32;
  else if (!strcmp(name, "bf16")) *out = EST_PRECISION_BF16;
  else if (!strcmp(name, "int8")) *out = EST_PRECISION_INT8;
  else return -1;
  return 0;
}

void est_blas_use_one_thread(void) {
  if (est_blas_get_num_threads() != 1) est_blas_set_num_threads(1);
}

/* Below this many multiply-adds a GEMM is not worth a parallel region. */
enum { PARALLEL_MIN_FLOPS = 1 << 20, ALIGN = 16 };
/* Blocks per thread, each at least MIN_BLOCK rows/columns of C, handed out dynamically:
 * when a thread is descheduled (a busy neighbour on its core), the others take its
 * blocks instead of waiting for a fixed half. Smaller blocks cost little on BERT's shapes
 * (M = tokens in the thousands); below MIN_BLOCK the re-packed operand starts to show. */
enum { BLOCKS_PER_THREAD = 4, MIN_BLOCK = 128 };

/* Whether est's own fp32 kernel may run at all: AVX-512F there, and EST_KERNEL
 * (nn/kernel_choice.h) not forcing OpenBLAS or no AVX-512. */
static int own_kernel_allowed(void) { return est_kernel_get() != EST_KERNEL_BLAS && est_kernel_avx512f(); }

/* Whether est's own fp32 kernel runs this shape (see bench/README.md, "fp32 GEMM"), unless
 * EST_KERNEL forces OpenBLAS, the own kernel, or no AVX-512. */
static int own_kernel_for(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, const float *B, int ldb,
                          const est_gemm_epilogue *ep) {
  if (!own_kernel_allowed()) return 0;
  if (est_kernel_get() == EST_KERNEL_OWN) return 1;
  /* An inference weight (read-only, core/frozen.h) is packed once and kept: every shape is
   * then the own kernel's, where OpenBLAS would copy the whole weight on every call (half
   * of a 16-token Base request's time; bench/README.md, "Inference weights packed once,
   * panel-major"). The 3072-deep products of many rows, once OpenBLAS's, measure level with
   * it since the kernel reads A's rows apart from each other's cache sets (gemm_f32.c). */
  if (ta == CblasNoTrans && est_f32_frozen_packed(B, ldb, tb, K, N)) return 1;
  /* Measured on BERT's shapes, 2 threads (bench/README.md, "fp32 GEMM"): own kernel ahead
   * for NoTrans A with N and K up to 1024 (Tiny/Mini/Small, Base's 768x768), on par at
   * N = 3072 where the fused GELU then saves a pass over the [T, 3072] activation;
   * OpenBLAS ahead on the weight gradients (Trans A: its packing of both operands pays
   * off when K = tokens is long) and on NT with N or K = 3072. */
  if (ta != CblasNoTrans || M < 64 || N < 64 || K < 64) return 0;
  if (ep && ep->gelu_out) return 1;
  return N <= 1024 && K <= 1024;
}

static void fill_rows(float *C, int ldc, const float *bias, int M, int N) {
#pragma omp parallel for schedule(static)
  for (int m = 0; m < M; m++) memcpy(C + (size_t)m * ldc, bias, (size_t)N * sizeof(float));
}

/* The epilogue done as passes over C, for the GEMMs that cannot fuse it. */
static void epilogue_passes(int M, int N, float *C, int ldc, const est_gemm_epilogue *ep) {
  if (ep->bias)
#pragma omp parallel for schedule(static)
    for (int m = 0; m < M; m++)
#pragma omp simd
      for (int n = 0; n < N; n++) C[(size_t)m * ldc + n] += ep->bias[n];
  if (ep->gelu_out)
#pragma omp parallel for schedule(static)
    for (int m = 0; m < M; m++) est_gelu_row(ep->gelu_out + (size_t)m * ep->ld_gelu, C + (size_t)m * ldc, N);
  if (ep->gelu_pre)
#pragma omp parallel for schedule(static)
    for (int m = 0; m < M; m++)
      est_gelu_backward_row(C + (size_t)m * ldc, ep->gelu_act ? ep->gelu_act + (size_t)m * ep->ld_pre : NULL,
                            ep->gelu_pre + (size_t)m * ep->ld_pre, N);
}

/* A GEMM kernel without an epilogue, cblas_sgemm's arguments (row-major): OpenBLAS split
 * over the threads (blas_parallel) or est_sgemm_bf16. */
typedef void plain_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha, const float *A,
                        int lda, const float *B, int ldb, float beta, float *C, int ldc);
static plain_gemm blas_parallel;

void est_sgemm_parallel(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha, const float *A,
                        int lda, const float *B, int ldb, float beta, float *C, int ldc, est_precision precision) {
  est_sgemm_parallel_ep(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, NULL, precision);
}

void est_sgemm_parallel_ep(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha,
                           const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc,
                           const est_gemm_epilogue *ep, est_precision precision) {
  /* The one place a precision picks its kernels (est/precision.h). Each case tries the
   * kernel that fuses the epilogue and otherwise names its plain kernel, which runs with
   * the epilogue done around it. A new format adds its case: the switch has no default,
   * so -Wswitch names a precision left without one. */
  if (precision == EST_PRECISION_BF16 && !est_kernel_avx512_bf16()) precision = EST_PRECISION_FP32;
  plain_gemm *plain = blas_parallel;
  switch (precision) {
  case EST_PRECISION_INT8:
    /* a layer's forward product (inputs times a weight, C written; bias and GELU fused) */
    if (ta == CblasNoTrans && alpha == 1.0f && beta == 0.0f && !(ep && ep->gelu_pre) &&
        est_sgemm_int8(tb, M, N, K, A, lda, B, ldb, C, ldc, ep) == 0)
      return;
    /* any other product of an int8 model (none in inference) runs fp32 */
    __attribute__((fallthrough));
  case EST_PRECISION_FP32:
    if (own_kernel_for(ta, tb, M, N, K, B, ldb, ep) &&
        est_sgemm_f32(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, ep) == 0)
      return; /* the kernel applied the epilogue */
    break;
  case EST_PRECISION_BF16:
    if (est_sgemm_bf16_ep(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, ep) == 0)
      return; /* so did the bf16 kernel (AMX: any product; VDPBF16PS: a forward one) */
    plain = est_sgemm_bf16;
    break;
  }
  est_gemm_epilogue rest = ep ? *ep : (est_gemm_epilogue){0};
  if (rest.bias && beta == 0.0f) { /* C = bias first, then the GEMM adds into it (beta 1) */
    fill_rows(C, ldc, rest.bias, M, N);
    beta = 1.0f;
    rest.bias = NULL;
  }
  plain(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  if (ep) epilogue_passes(M, N, C, ldc, &rest);
}

int est_sgemm_forward_shared(int M, int K, const float *A, const est_gemm_product *prods, int count,
                             est_precision precision) {
  switch (precision) {
  case EST_PRECISION_INT8: return est_sgemm_int8_shared(CblasNoTrans, M, K, A, K, prods, count);
  case EST_PRECISION_FP32: /* inference weights, which own_kernel_for gives the own kernel: one team for all */
    return own_kernel_allowed() ? est_sgemm_f32_shared(M, K, A, K, prods, count) : -1;
  case EST_PRECISION_BF16: /* VDPBF16PS converts A once for all (the tile kernel: per product) */
    if (!est_kernel_avx512_bf16() || est_kernel_amx()) return -1;
    return est_sgemm_bf16_shared(M, K, A, K, prods, count);
  }
  return -1;
}

int est_sgemm_forward_ffn(int M, int K, const float *A, const est_gemm_product *in, const est_gemm_product *out,
                          est_precision precision) {
  switch (precision) {
  case EST_PRECISION_INT8: return est_sgemm_int8_ffn(M, K, A, in, out);
  case EST_PRECISION_FP32: /* their GELU is already the first GEMM's epilogue */
  case EST_PRECISION_BF16: return -1;
  }
  return -1;
}

static void blas_parallel(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha, const float *A,
                          int lda, const float *B, int ldb, float beta, float *C, int ldc) {
  est_blas_use_one_thread();
  int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  if (threads <= 1 || (double)M * N * K < PARALLEL_MIN_FLOPS) {
    cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  /* Split the longer side of C into blocks (multiples of 16 = one zmm). */
  int split_m = M >= N;
  int len = split_m ? M : N;
  int chunk = (len + threads * BLOCKS_PER_THREAD - 1) / (threads * BLOCKS_PER_THREAD);
  int even = (len + threads - 1) / threads; /* never coarser than one block per thread */
  if (chunk < MIN_BLOCK) chunk = MIN_BLOCK < even ? MIN_BLOCK : even;
  /* A weight gradient (Trans A, K = tokens): every block's sgemm packs the operand the
   * blocks share, K x the other side of C, i.e. a whole [tokens, H] activation or gradient;
   * with four blocks a thread those copies were 9-10% of a Small or Base fp32 training step's
   * CPU time (perf, bench/profile_train.sh). One block a thread packs it twice, not eight
   * times: ~10% less CPU for those products (bench/README.md, "Where a training step's time
   * goes, and the weight gradients in one block a thread"). Blocks split C, never K; on
   * BERT's weight-gradient shapes OpenBLAS 0.3.21 gave byte-identical C and checkpoints
   * either way, though in general its bits may depend on the block (docs/testing.md §2). */
  if (ta != CblasNoTrans) chunk = even;
  chunk = (chunk + ALIGN - 1) / ALIGN * ALIGN;
  int nblocks = (len + chunk - 1) / chunk;
#pragma omp parallel for schedule(dynamic, 1) num_threads(nblocks < threads ? nblocks : threads)
  for (int blk = 0; blk < nblocks; blk++) {
    int lo = blk * chunk, n = len - lo < chunk ? len - lo : chunk;
    if (split_m) {
      /* rows lo.. of C: rows of A (NoTrans) or columns of A (Trans, A stored [K,M]) */
      const float *a = ta == CblasNoTrans ? A + (size_t)lo * lda : A + lo;
      cblas_sgemm(CblasRowMajor, ta, tb, n, N, K, alpha, a, lda, B, ldb, beta, C + (size_t)lo * ldc, ldc);
    } else {
      /* columns lo.. of C: columns of B (NoTrans) or rows of B (Trans, B stored [N,K]) */
      const float *b = tb == CblasNoTrans ? B + lo : B + (size_t)lo * ldb;
      cblas_sgemm(CblasRowMajor, ta, tb, M, n, K, alpha, A, lda, b, ldb, beta, C + lo, ldc);
    }
  }
}
