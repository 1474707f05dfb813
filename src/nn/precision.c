/* The --precision flag shared by every command (est/precision.h): the check and the one
 * place that applies it, so run_classifier, run_pretraining, predict, serve and
 * extract_features cannot drift apart in what they accept or log. */
#include <string.h>

#include "est/log.h"
#include "est/precision.h"
#include "est/threads.h"
#include "nn/cpu_peak.h"
#include "nn/kernel_choice.h" /* est_kernel_amx */

est_status est_precision_check_flag(const char *value) {
  est_precision p;
  if (value && est_precision_parse(value, &p))
    return est_error(EST_ERR_INVALID_ARGUMENT, "--precision=%s: must be fp32, bf16 or int8", value);
  return EST_OK;
}

est_status est_precision_apply_flag(const char *value, est_precision *out) {
  *out = EST_PRECISION_FP32;
  est_status st = est_precision_check_flag(value);
  if (st != EST_OK) return st;
  est_precision p = EST_PRECISION_FP32;
  if (value) est_precision_parse(value, &p);
  /* bf16 falls back to fp32, with a warning, without AVX512-BF16 */
  /* which BLAS kernels the fp32 GEMMs est leaves to OpenBLAS run on (est/threads.h) */
  EST_LOG_INFO("OpenBLAS kernels: %s", est_blas_corename());
  /* a forced kernel choice (nn/kernel_choice.h; an unusable EST_KERNEL logs its error here) */
  if (est_kernel_get() != EST_KERNEL_AUTO) EST_LOG_INFO("kernels: EST_KERNEL=%s", est_kernel_name(est_kernel_get()));
  if ((*out = est_precision_resolve(p)) == EST_PRECISION_INT8)
    EST_LOG_INFO("precision int8: dense layers quantized to int8 (weights per output channel, inputs per row), "
                 "int32 sums on %s, everything else fp32",
                 est_kernel_get() == EST_KERNEL_AMXEMU ? "AMX tiles emulated in C (EST_KERNEL=amxemu)"
                 : est_kernel_amx_int8()  ? "AMX tiles (TDPBUSD)"
                 : est_kernel_vnni512() ? "AVX512-VNNI (VPDPBUSD)"
                 : est_kernel_avxvnni() ? "AVX-VNNI (VPDPBUSD)"
                                        : "the plain-C reference (EST_KERNEL=int8ref)");
  if (*out != EST_PRECISION_BF16) return EST_OK;
  EST_LOG_INFO("precision bf16: matmul inputs in bfloat16, sums and everything else in fp32, on %s",
               est_kernel_amx() ? "AMX tiles (TDPBF16PS)" : "AVX512-BF16 (VDPBF16PS)");
  /* bf16 pays only where its instruction beats fp32 FMAs: AMX's tiles do by far (~16x the
   * FLOP rate); VDPBF16PS's 64 FLOP must issue nearly as often as an FMA's 32, and some
   * CPUs retire one for every four FMAs (bench/bench_peak.c). A ~10 ms probe says which;
   * it changes only this message, never the arithmetic. */
  double ratio = est_peak_bf16_fp32_ratio();
  if (ratio > 0 && ratio < 1.2)
    EST_LOG_WARN("precision bf16: this CPU's bf16 dot products run at %.2fx its fp32 FMA rate (measured now), "
                 "so bf16 will not be faster than fp32 here; --precision=fp32 is the faster choice",
                 ratio);
  return EST_OK;
}

est_status est_precision_check_training(const char *value, int trains) {
  if (trains && value && !strcmp(value, "int8"))
    return est_error(EST_ERR_INVALID_ARGUMENT,
                     "--precision=int8 is for inference (predict, eval, serve, export): training runs fp32 or bf16");
  return EST_OK;
}
