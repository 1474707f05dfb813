/* Internal: an int8 export's stored weights (docs/int8.md §4). `--do_export --precision=int8`
 * stores each dense layer that runs int8 as its codes and per-column scales instead of its fp32
 * kernel, in the same TF bundle (variables/variables):
 *
 *   <kernel>/int8_codes   DT_INT8  [in, out]  qb = rint(w * 127 / max_k |w[k][n]|), in [-127, 127]
 *   <kernel>/int8_scales  DT_FLOAT [out]      sw[n] = max_k |w[k][n]| / 127
 *
 * (nn/quant_int8.h's quantization, so a servable loading them packs the very operand it would
 * have made from the fp32 kernel: the same outputs, bit for bit). Everything else stays fp32. */
#ifndef EST_SERVE_INT8_WEIGHTS_H
#define EST_SERVE_INT8_WEIGHTS_H

#include "est/ckpt.h"
#include "est/variables.h"

/* Whether an int8 export stores v as codes + scales: the rank-2 "bert/.../kernel" variables,
 * i.e. the encoder's Q, K, V, attention output, intermediate and output layers and the pooler,
 * which --precision=int8 runs on int8 (docs/int8.md §1); the heads' logits layers stay fp32. */
int est_int8_stored(const est_variable *v);

/* Adds v's codes and scales (quantized from `values`, its fp32 [in, out]) to w. The tensors'
 * memory is returned in *keep, to be freed (free) after est_ckpt_writer_finish. */
est_status est_int8_weights_add(est_ckpt_writer *w, const est_variable *v, const float *values, void **keep);

/* Whether the bundle holds v as codes + scales (either of the two tensors). */
int est_int8_weights_present(const est_ckpt_reader *r, const est_variable *v);

/* Reads v's codes and scales from r (prefix names the bundle in errors), checks their shapes
 * and values, makes their packed form the int8 operand of v (vs must be read-only) and gives
 * v's fp32 pages back (core/alloc.h): v's fp32 values are not there afterwards. */
est_status est_int8_weights_restore(est_ckpt_reader *r, const char *prefix, est_var_store *vs, size_t index);

#endif
