/* Shared by the safetensors reader and writer: the dtype table and the header limits
 * (docs/safetensors.md; huggingface/safetensors safetensors/src/tensor.rs). */
#ifndef EST_IO_SAFETENSORS_INTERNAL_H
#define EST_IO_SAFETENSORS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "est/tensor.h"

/* The reference refuses headers above this (MAX_HEADER_SIZE). */
#define EST_ST_MAX_HEADER_SIZE 100000000ull

/* Every safetensors dtype, in the Rust enum's order (`order`), which is what the
 * writer sorts by; `dtype` is est's equivalent or INVALID. */
typedef struct est_st_dtype_info {
  const char *name;
  int bits;
  int order;
  est_dtype dtype;
} est_st_dtype_info;

/* NULL when the name is no safetensors dtype / est's dtype has no safetensors equivalent. */
const est_st_dtype_info *est_st_dtype_by_name(const char *name);
const est_st_dtype_info *est_st_dtype_by_est(est_dtype dt);

/* 1 when s[0..n) is well-formed UTF-8 (the header and every name must be). */
int est_st_valid_utf8(const uint8_t *s, size_t n);

#endif
