/* safetensors dtypes and the checks the reader and the writer share (docs/safetensors.md;
 * huggingface/safetensors safetensors/src/tensor.rs, enum Dtype). The reader is
 * safetensors_reader.c, the writer safetensors_writer.c. */
#include "est/safetensors.h"

#include <string.h>
#include <utf8proc.h>

#include "io/safetensors_internal.h"

static const est_st_dtype_info dtypes[] = {
  {"BOOL", 8, 0, EST_DT_BOOL},         {"F4", 4, 1, EST_DT_INVALID},
  {"F6_E2M3", 6, 2, EST_DT_INVALID},   {"F6_E3M2", 6, 3, EST_DT_INVALID},
  {"U8", 8, 4, EST_DT_UINT8},          {"I8", 8, 5, EST_DT_INT8},
  {"F8_E5M2", 8, 6, EST_DT_INVALID},   {"F8_E4M3", 8, 7, EST_DT_INVALID},
  {"F8_E8M0", 8, 8, EST_DT_INVALID},   {"F8_E4M3FNUZ", 8, 9, EST_DT_INVALID},
  {"F8_E5M2FNUZ", 8, 10, EST_DT_INVALID}, {"I16", 16, 11, EST_DT_INT16},
  {"U16", 16, 12, EST_DT_UINT16},      {"F16", 16, 13, EST_DT_HALF},
  {"BF16", 16, 14, EST_DT_BFLOAT16},   {"I32", 32, 15, EST_DT_INT32},
  {"U32", 32, 16, EST_DT_UINT32},      {"F32", 32, 17, EST_DT_FLOAT},
  {"C64", 64, 18, EST_DT_INVALID},     {"F64", 64, 19, EST_DT_DOUBLE},
  {"I64", 64, 20, EST_DT_INT64},       {"U64", 64, 21, EST_DT_UINT64},
};
enum { NUM_DTYPES = sizeof dtypes / sizeof dtypes[0] };

const est_st_dtype_info *est_st_dtype_by_name(const char *name) {
  for (int i = 0; i < NUM_DTYPES; i++)
    if (!strcmp(dtypes[i].name, name)) return &dtypes[i];
  return NULL;
}

const est_st_dtype_info *est_st_dtype_by_est(est_dtype dt) {
  if (dt == EST_DT_INVALID) return NULL;
  for (int i = 0; i < NUM_DTYPES; i++)
    if (dtypes[i].dtype == dt) return &dtypes[i];
  return NULL;
}

const char *est_safetensors_dtype_name(est_dtype dtype) {
  const est_st_dtype_info *d = est_st_dtype_by_est(dtype);
  return d ? d->name : NULL;
}

est_dtype est_safetensors_dtype_from_name(const char *name) {
  const est_st_dtype_info *d = est_st_dtype_by_name(name);
  return d ? d->dtype : EST_DT_INVALID;
}

int est_st_valid_utf8(const uint8_t *s, size_t n) {
  while (n > 0) {
    utf8proc_int32_t cp;
    utf8proc_ssize_t k = utf8proc_iterate(s, (utf8proc_ssize_t)n, &cp);
    if (k <= 0) return 0;
    s += k;
    n -= (size_t)k;
  }
  return 1;
}
