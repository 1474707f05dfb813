/* The --precision flag shared by every command (est/precision.h): the check and the one
 * place that applies it, so run_classifier, run_pretraining, predict, serve and
 * extract_features cannot drift apart in what they accept or log. */
#include "est/log.h"
#include "est/precision.h"

est_status est_precision_check_flag(const char *value) {
  est_precision p;
  if (value && est_precision_parse(value, &p))
    return est_error(EST_ERR_INVALID_ARGUMENT, "--precision=%s: must be fp32 or bf16", value);
  return EST_OK;
}

est_status est_precision_apply_flag(const char *value) {
  est_status st = est_precision_check_flag(value);
  if (st != EST_OK) return st;
  est_precision p = EST_PRECISION_FP32;
  if (value) est_precision_parse(value, &p);
  /* bf16 falls back to fp32, with a warning, without AVX512-BF16 */
  if (est_set_precision(p) == EST_PRECISION_BF16)
    EST_LOG_INFO("precision bf16: matmul inputs in bfloat16, sums and everything else in fp32");
  return EST_OK;
}
