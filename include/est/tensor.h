/* est/tensor.h — dtypes (with TensorFlow's DataType numbers) and a plain tensor view.
 *
 * est_tensor does not own anything by itself: `data` points at memory someone else
 * manages (a parameter buffer, a checkpoint read buffer). Functions that return owned
 * tensors say so and pair with est_tensor_free.
 */
#ifndef EST_TENSOR_H
#define EST_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "est/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Values are TensorFlow's types.proto DataType numbers, so they go straight into
 * BundleEntryProto.dtype. */
typedef enum est_dtype {
  EST_DT_INVALID = 0,
  EST_DT_FLOAT = 1,
  EST_DT_DOUBLE = 2,
  EST_DT_INT32 = 3,
  EST_DT_UINT8 = 4,
  EST_DT_INT16 = 5,
  EST_DT_INT8 = 6,
  EST_DT_STRING = 7,
  EST_DT_INT64 = 9,
  EST_DT_BOOL = 10,
  EST_DT_BFLOAT16 = 14,
  EST_DT_UINT16 = 17,
  EST_DT_HALF = 19,
  EST_DT_UINT32 = 22,
  EST_DT_UINT64 = 23,
} est_dtype;

enum { EST_MAX_RANK = 8 };

/* Bytes per element; 0 for STRING (variable) and for unknown dtypes. */
size_t est_dtype_size(est_dtype dtype);

/* TensorFlow's name: "float32", "float16", "bfloat16", "int32", "int64", "string", ...;
 * NULL for an unknown value. */
const char *est_dtype_name(est_dtype dtype);

/* Inverse of est_dtype_name; EST_DT_INVALID when unknown. Also accepts "float"/"half". */
est_dtype est_dtype_from_name(const char *name);

/* A string element (STRING tensors hold an array of these). */
typedef struct est_bytes {
  size_t size;
  uint8_t *data;
} est_bytes;

typedef struct est_tensor {
  est_dtype dtype;
  int rank;                     /* 0 for a scalar */
  int64_t dims[EST_MAX_RANK];
  void *data;                   /* row-major; est_bytes[] for STRING */
} est_tensor;

/* Product of dims (1 for a scalar). */
int64_t est_tensor_num_elements(const est_tensor *t);

/* num_elements * dtype size (0 for STRING). */
size_t est_tensor_num_bytes(const est_tensor *t);

/* Allocates zeroed, 64-byte-aligned storage for `dtype` with the given shape, owned by
 * `t`; free with est_tensor_free. STRING tensors get an array of empty est_bytes. */
est_status est_tensor_alloc(est_tensor *t, est_dtype dtype, int rank, const int64_t *dims);

/* Frees storage made by est_tensor_alloc (and, for STRING, every element's data). */
void est_tensor_free(est_tensor *t);

/* "[2,3]" into buf (or "[]" for a scalar); returns buf. */
char *est_shape_string(const est_tensor *t, char *buf, size_t size);

/* IEEE half / bfloat16 conversions (round to nearest even on the way down). */
float est_half_to_float(uint16_t h);
uint16_t est_float_to_half(float f);
float est_bfloat16_to_float(uint16_t b);
uint16_t est_float_to_bfloat16(float f);

#ifdef __cplusplus
}
#endif
#endif
