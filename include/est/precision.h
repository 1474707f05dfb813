/* est/precision.h — the arithmetic of est's dense layers (matmuls).
 *
 *     if (est_set_precision(EST_PRECISION_BF16) != EST_PRECISION_BF16) ...  // fp32 on this CPU
 *
 * EST_PRECISION_FP32 (the default): every GEMM in fp32.
 * EST_PRECISION_BF16: the matmul layers' GEMMs (forward, input and weight gradients) take
 *   their inputs rounded to bfloat16 and sum in fp32, on AVX512-BF16 (twice the FLOP rate
 *   of fp32). Everything else stays fp32: master weights, optimizer state, LayerNorm,
 *   softmax, the loss and the gradients. Checkpoints are fp32 as always.
 *
 * The setting is process-wide, like the thread count; set it before training starts. */
#ifndef EST_PRECISION_H
#define EST_PRECISION_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { EST_PRECISION_FP32 = 0, EST_PRECISION_BF16 = 1 } est_precision;

/* Returns the precision now in effect: BF16 only where the CPU has AVX512-BF16; elsewhere
 * it logs a warning once and stays at FP32. */
est_precision est_set_precision(est_precision p);
est_precision est_get_precision(void);

/* "fp32" / "bf16" <-> the enum; parse returns 0 on success, -1 for anything else. */
const char *est_precision_name(est_precision p);
int est_precision_parse(const char *name, est_precision *out);

#ifdef __cplusplus
}
#endif
#endif
