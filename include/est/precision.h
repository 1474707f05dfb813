/* est/precision.h — the arithmetic of est's dense layers (matmuls).
 *
 *     est_precision p = est_precision_resolve(EST_PRECISION_BF16);  // FP32 on a CPU without bf16
 *     est_bert_encoder_set_precision(encoder, p);                   // the model holds it
 *
 * EST_PRECISION_FP32 (the default): every GEMM in fp32.
 * EST_PRECISION_BF16: the matmul layers' GEMMs (forward, input and weight gradients) take
 *   their inputs rounded to bfloat16 and sum in fp32: on AMX tiles where the CPU has them and
 *   Linux grants the process their state (TDPBF16PS, 14-18x the fp32 FMA rate on the Xeon
 *   this was measured on), else on AVX512-BF16 (VDPBF16PS does 64 FLOP to an FMA's 32: up to
 *   twice fp32's rate where it issues as often as an FMA; some CPUs issue it a quarter as
 *   often, and est_precision_apply_flag warns there, see bench/bench_peak.c). The attention's
 *   per-head products take bf16 inputs too: with AMX all six (forward: scores Q K^T, context
 *   P V; and the four of the backward) on the tiles, without it the forward's two on
 *   VDPBF16PS (the backward's stay fp32 there). Everything else stays fp32:
 *   master weights, optimizer state, LayerNorm, softmax, the loss and the gradients.
 *   Checkpoints are fp32 as always.
 * EST_PRECISION_INT8 (inference only): the dense layers' forward GEMMs (Q, K, V, attention
 *   output, intermediate, output, pooler) quantize their weights once per output channel and
 *   their input rows at run time to int8, sum in int32 on VNNI (VPDPBUSD) and dequantize into
 *   the fp32 epilogue (bias, GELU); the attention's per-head products run bf16 as in bf16
 *   mode where the CPU has AVX512-BF16 (fp32 elsewhere); the classifier output and everything
 *   else stays fp32 (docs/int8.md §1). Training
 *   refuses it (est_precision_check_training).
 *
 * The precision belongs to a model, not to the process: the encoder holds it
 * (est_bert_encoder_set_precision), its heads read it from the encoder, and every GEMM op
 * takes it as its last argument (est/nn.h), so one process can run an fp32 and a bf16 model
 * side by side (est serve with two versions). A new format (int8 next) adds its enum value
 * here, its name in est_precision_name / est_precision_parse (and the CPU check in
 * est_precision_resolve), and its case in the one place a precision picks its kernels, the
 * switch in est_sgemm_parallel_ep (src/nn/gemm.c; it has no default, so -Wswitch names a
 * precision left without kernels). Its weight form, if any, goes into src/core/frozen.c
 * beside the bf16 one, asked for only by its own kernels. */
#ifndef EST_PRECISION_H
#define EST_PRECISION_H

#include "est/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { EST_PRECISION_FP32 = 0, EST_PRECISION_BF16 = 1, EST_PRECISION_INT8 = 2 } est_precision;

/* The precision this CPU runs for a request: BF16 only where the CPU has AVX512-BF16, INT8
 * only where it has AVX512-VNNI or AVX-VNNI (and EST_KERNEL allows it); elsewhere it logs a
 * warning once and returns FP32. */
est_precision est_precision_resolve(est_precision p);

/* The precision of a head's output layer (the logits) in a model of precision p: p, but fp32
 * for int8: the logits are the result (the classifier, SQuAD, next-sentence and masked-LM
 * outputs stay fp32; a layer of 2-3 columns gains nothing from int8 anyway). */
est_precision est_precision_of_logits(est_precision p);

/* "fp32" / "bf16" / "int8" <-> the enum; parse returns 0 on success, -1 for anything else. */
const char *est_precision_name(est_precision p);
int est_precision_parse(const char *name, est_precision *out);

/* The --precision flag of every command that runs the model (run_classifier,
 * run_pretraining, predict, serve, extract_features): one help text and one place that
 * decides. Checkpoints never record it; an export's est_model.json records the precision the
 * model was trained with ("precision"), which est predict and est serve run unless their
 * --precision flag is given.
 *
 *     EST_FLAG_STRING("precision", &precision, EST_PRECISION_FLAG_HELP, 0),
 *     ...
 *     est_precision p;
 *     if (est_precision_apply_flag(precision, &p) != EST_OK) ...   // after the flags parse
 *     est_bert_encoder_set_precision(encoder, p); */
#define EST_PRECISION_FLAG_HELP                                                                  \
  "[est] fp32, or bf16: matmul inputs in bfloat16 with fp32 sums on CPUs with AMX or AVX512-BF16 " \
  "(weights, optimizer, LayerNorm, softmax and loss stay fp32; elsewhere it runs fp32), or int8 " \
  "(inference only): dense layers quantized to int8 with int32 sums on CPUs with VNNI."

/* Checks a --precision value: "fp32", "bf16" or "int8" (NULL counts as fp32); anything else
 * is EST_ERR_INVALID_ARGUMENT "--precision=X: must be fp32, bf16 or int8". Applies nothing. */
est_status est_precision_check_flag(const char *value);
/* EST_ERR_INVALID_ARGUMENT when value is "int8" and the command trains (int8 is for
 * inference: its weights are quantized copies that no gradient reaches); else EST_OK. */
est_status est_precision_check_training(const char *value, int trains);
/* Checks, then resolves it into *out (NULL counts as fp32): bf16 falls back to fp32 with a
 * logged warning on a CPU without AVX512-BF16, and logs one info line when bf16 is on, plus
 * a warning when a ~10 ms probe finds the CPU's bf16 dot products no faster than its fp32
 * FMAs (nn/cpu_peak.h). Sets nothing process-wide: the caller hands *out to its model. */
est_status est_precision_apply_flag(const char *value, est_precision *out);

#ifdef __cplusplus
}
#endif
#endif
