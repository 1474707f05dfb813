/* Dense layers: out = inp . W + b through OpenBLAS sgemm, plus a plain reference.
 *
 * Row-major throughout. With W [IC,OC] (TF kernel layout) the three products are
 *   forward   out[N,OC]  = inp[N,IC] . W[IC,OC]          sgemm NN
 *   dinp      dinp[N,IC] += dout[N,OC] . W^T             sgemm NT, beta 1 (0 to write)
 *   dweight   dW[IC,OC]  += inp^T . dout                 sgemm TN, beta 1
 * and with W [OC,IC] (weight_transposed) the roles of N/T on W swap. */
#include <string.h>

#include "est/nn.h"
#include "nn/gemm.h"

/* The bias is the GEMM's epilogue: est's own kernel adds it to C's tiles in registers;
 * the BLAS path fills out with it first and lets the GEMM add into it (gemm.c). */
void est_matmul_forward(float *out, const float *inp, const float *weight, const float *bias,
                        int N, int IC, int OC, int weight_transposed, est_precision precision) {
  est_gemm_epilogue ep = {.bias = bias};
  est_sgemm_parallel_ep(CblasNoTrans, weight_transposed ? CblasTrans : CblasNoTrans, N, OC, IC, 1.0f, inp, IC,
                        weight, weight_transposed ? IC : OC, 0.0f, out, OC, &ep, precision);
}

void est_matmul_forward_shared(const float *inp, int N, int IC, const est_dense_output *outs, int count,
                               est_precision precision) {
  if (count > 0 && count <= EST_GEMM_MAX_SHARED) {
    est_gemm_epilogue eps[EST_GEMM_MAX_SHARED] = {{0}};
    est_gemm_product prods[EST_GEMM_MAX_SHARED] = {{0}};
    for (int j = 0; j < count; j++) {
      eps[j] = (est_gemm_epilogue){.bias = outs[j].bias};
      prods[j] = (est_gemm_product){outs[j].weight, outs[j].OC, outs[j].OC, outs[j].out, outs[j].OC, &eps[j]};
    }
    if (est_sgemm_forward_shared(N, IC, inp, prods, count, precision) == 0) return;
  }
  for (int j = 0; j < count; j++)
    est_matmul_forward(outs[j].out, inp, outs[j].weight, outs[j].bias, N, IC, outs[j].OC, 0, precision);
}

/* pre = inp . W + b and act = tanh-GELU(pre) in one pass over the output: GELU is applied
 * to each C tile as it leaves the kernel's registers (BERT's FFN: h = gelu(A Wi + bi)). */
void est_matmul_forward_gelu(float *act, float *pre, const float *inp, const float *weight, const float *bias,
                             int N, int IC, int OC, int weight_transposed, est_precision precision) {
  est_gemm_epilogue ep = {.bias = bias, .gelu_out = act, .ld_gelu = OC};
  est_sgemm_parallel_ep(CblasNoTrans, weight_transposed ? CblasTrans : CblasNoTrans, N, OC, IC, 1.0f, inp, IC,
                        weight, weight_transposed ? IC : OC, 0.0f, pre, OC, &ep, precision);
}

void est_ffn_forward(float *out, float *act, float *pre, const float *inp, const float *wi, const float *bi,
                     const float *wo, const float *bo, int N, int IC, int IM, est_precision precision) {
  const est_gemm_epilogue ep_in = {.bias = bi, .gelu_out = act, .ld_gelu = IM}, ep_out = {.bias = bo};
  const est_gemm_product in = {wi, IM, IM, pre, IM, &ep_in}, second = {wo, IC, IC, out, IC, &ep_out};
  if (est_sgemm_forward_ffn(N, IC, inp, &in, &second, precision) == 0) return;
  est_matmul_forward_gelu(act, pre, inp, wi, bi, N, IC, IM, 0, precision);
  est_matmul_forward(out, act, wo, bo, N, IM, IC, 0, precision);
}

/* dbias[o] += sum_n dout[n,o]. Split by column blocks, each summed over n in order, so
 * the result does not depend on the thread count. */
static void bias_grad(float *dbias, const float *dout, int N, int OC) {
  enum { BLOCK = 64 };
  int nblocks = (OC + BLOCK - 1) / BLOCK;
#pragma omp parallel for schedule(static)
  for (int blk = 0; blk < nblocks; blk++) {
    int c0 = blk * BLOCK, c1 = c0 + BLOCK < OC ? c0 + BLOCK : OC;
    float acc[BLOCK] = {0};
    for (int n = 0; n < N; n++) {
      const float *row = dout + (size_t)n * OC;
#pragma omp simd
      for (int c = c0; c < c1; c++) acc[c - c0] += row[c];
    }
    for (int c = c0; c < c1; c++) dbias[c] += acc[c - c0];
  }
}

void est_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                         const float *weight, int N, int IC, int OC, int weight_transposed, est_precision precision) {
  est_matmul_backward_mode(dinp, dweight, dbias, dout, inp, weight, N, IC, OC, weight_transposed, EST_GRAD_ADD,
                           precision);
}

void est_matmul_backward_mode(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                              const float *weight, int N, int IC, int OC, int weight_transposed,
                              est_grad_mode mode, est_precision precision) {
  if (dinp) {
    /* dinp[N,IC] (+)= dout[N,OC] . W^T (W [IC,OC]) or dout . W (W [OC,IC]); beta 0 never
     * reads C (BLAS's contract, and est's kernels') */
    float beta = mode == EST_GRAD_WRITE ? 0.0f : 1.0f;
    est_sgemm_parallel(CblasNoTrans, weight_transposed ? CblasNoTrans : CblasTrans, N, IC, OC, 1.0f,
                dout, OC, weight, weight_transposed ? IC : OC, beta, dinp, IC, precision);
  }
  if (dweight) {
    if (weight_transposed) /* dW[OC,IC] += dout^T . inp */
      est_sgemm_parallel(CblasTrans, CblasNoTrans, OC, IC, N, 1.0f, dout, OC, inp, IC, 1.0f, dweight, IC, precision);
    else /* dW[IC,OC] += inp^T . dout */
      est_sgemm_parallel(CblasTrans, CblasNoTrans, IC, OC, N, 1.0f, inp, IC, dout, OC, 1.0f, dweight, OC, precision);
  }
  if (dbias) bias_grad(dbias, dout, N, OC);
}

/* The dinp GEMM first, its epilogue turning d act into d pre and recomputing act, then
 * the weight gradient from that act. */
void est_matmul_backward_gelu(float *dpre, float *act, float *dweight, float *dbias, const float *dout,
                              const float *pre, const float *weight, int N, int IC, int OC, int weight_transposed,
                              est_precision precision) {
  est_gemm_epilogue ep = {.gelu_pre = pre, .gelu_act = act, .ld_pre = IC};
  est_sgemm_parallel_ep(CblasNoTrans, weight_transposed ? CblasNoTrans : CblasTrans, N, IC, OC, 1.0f, dout, OC,
                        weight, weight_transposed ? IC : OC, 0.0f, dpre, IC, &ep, precision);
  est_matmul_backward(NULL, dweight, dbias, dout, act, weight, N, IC, OC, weight_transposed, precision);
}

/* Weight element (i = input index, o = output index) in either layout. */
static inline float w_at(const float *w, int i, int o, int IC, int OC, int transposed) {
  return transposed ? w[(size_t)o * IC + i] : w[(size_t)i * OC + o];
}

void est_matmul_forward_ref(float *out, const float *inp, const float *weight, const float *bias,
                            int N, int IC, int OC, int weight_transposed) {
  for (int n = 0; n < N; n++)
    for (int o = 0; o < OC; o++) {
      double acc = bias ? bias[o] : 0.0;
      for (int i = 0; i < IC; i++) acc += (double)inp[(size_t)n * IC + i] * w_at(weight, i, o, IC, OC, weight_transposed);
      out[(size_t)n * OC + o] = (float)acc;
    }
}

void est_matmul_backward_ref(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                             const float *weight, int N, int IC, int OC, int weight_transposed) {
  if (dinp)
    for (int n = 0; n < N; n++)
      for (int i = 0; i < IC; i++) {
        double acc = 0.0;
        for (int o = 0; o < OC; o++)
          acc += (double)dout[(size_t)n * OC + o] * w_at(weight, i, o, IC, OC, weight_transposed);
        dinp[(size_t)n * IC + i] += (float)acc;
      }
  if (dweight)
    for (int i = 0; i < IC; i++)
      for (int o = 0; o < OC; o++) {
        double acc = 0.0;
        for (int n = 0; n < N; n++) acc += (double)inp[(size_t)n * IC + i] * dout[(size_t)n * OC + o];
        if (weight_transposed) dweight[(size_t)o * IC + i] += (float)acc;
        else dweight[(size_t)i * OC + o] += (float)acc;
      }
  if (dbias)
    for (int o = 0; o < OC; o++) {
      double acc = 0.0;
      for (int n = 0; n < N; n++) acc += dout[(size_t)n * OC + o];
      dbias[o] += (float)acc;
    }
}
