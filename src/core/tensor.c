/* dtype tables and the owned-tensor helpers behind est/tensor.h. */
#include "est/tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"

size_t est_dtype_size(est_dtype dtype) {
  switch (dtype) {
  case EST_DT_FLOAT: case EST_DT_INT32: case EST_DT_UINT32: return 4;
  case EST_DT_DOUBLE: case EST_DT_INT64: case EST_DT_UINT64: return 8;
  case EST_DT_INT16: case EST_DT_UINT16: case EST_DT_HALF: case EST_DT_BFLOAT16: return 2;
  case EST_DT_INT8: case EST_DT_UINT8: case EST_DT_BOOL: return 1;
  default: return 0;
  }
}

static const struct { est_dtype dtype; const char *name; } dtype_names[] = {
  {EST_DT_FLOAT, "float32"},  {EST_DT_DOUBLE, "float64"}, {EST_DT_INT32, "int32"},
  {EST_DT_UINT8, "uint8"},    {EST_DT_INT16, "int16"},    {EST_DT_INT8, "int8"},
  {EST_DT_STRING, "string"},  {EST_DT_INT64, "int64"},    {EST_DT_BOOL, "bool"},
  {EST_DT_BFLOAT16, "bfloat16"}, {EST_DT_UINT16, "uint16"}, {EST_DT_HALF, "float16"},
  {EST_DT_UINT32, "uint32"},  {EST_DT_UINT64, "uint64"},
};

const char *est_dtype_name(est_dtype dtype) {
  for (size_t i = 0; i < sizeof dtype_names / sizeof dtype_names[0]; i++)
    if (dtype_names[i].dtype == dtype) return dtype_names[i].name;
  return NULL;
}

est_dtype est_dtype_from_name(const char *name) {
  if (!name) return EST_DT_INVALID;
  if (!strcmp(name, "float")) return EST_DT_FLOAT;
  if (!strcmp(name, "half")) return EST_DT_HALF;
  if (!strcmp(name, "double")) return EST_DT_DOUBLE;
  for (size_t i = 0; i < sizeof dtype_names / sizeof dtype_names[0]; i++)
    if (!strcmp(dtype_names[i].name, name)) return dtype_names[i].dtype;
  return EST_DT_INVALID;
}

int64_t est_tensor_num_elements(const est_tensor *t) {
  int64_t n = 1;
  for (int i = 0; i < t->rank; i++) n *= t->dims[i];
  return n;
}

size_t est_tensor_num_bytes(const est_tensor *t) {
  return (size_t)est_tensor_num_elements(t) * est_dtype_size(t->dtype);
}

est_status est_tensor_alloc(est_tensor *t, est_dtype dtype, int rank, const int64_t *dims) {
  memset(t, 0, sizeof *t);
  if (rank < 0 || rank > EST_MAX_RANK)
    return est_error(EST_ERR_INVALID_ARGUMENT, "tensor rank %d outside [0, %d]", rank, EST_MAX_RANK);
  t->dtype = dtype;
  t->rank = rank;
  for (int i = 0; i < rank; i++) {
    if (dims[i] < 0) return est_error(EST_ERR_INVALID_ARGUMENT, "negative dimension %lld", (long long)dims[i]);
    t->dims[i] = dims[i];
  }
  size_t elem = dtype == EST_DT_STRING ? sizeof(est_bytes) : est_dtype_size(dtype);
  if (elem == 0) return est_error(EST_ERR_INVALID_ARGUMENT, "unsupported dtype %d", (int)dtype);
  size_t n = (size_t)est_tensor_num_elements(t);
  size_t bytes = n * elem;
  t->data = est_alloc(bytes > 0 ? bytes : 1);
  if (!t->data) return est_error(EST_ERR_NO_MEMORY, "cannot allocate %zu bytes for a tensor", bytes);
  return EST_OK;
}

void est_tensor_free(est_tensor *t) {
  if (!t || !t->data) return;
  if (t->dtype == EST_DT_STRING) {
    est_bytes *s = t->data;
    int64_t n = est_tensor_num_elements(t);
    for (int64_t i = 0; i < n; i++) free(s[i].data);
  }
  est_free(t->data);
  t->data = NULL;
}

char *est_shape_string(const est_tensor *t, char *buf, size_t size) {
  size_t used = 0;
  used += (size_t)snprintf(buf + used, size - used, "[");
  for (int i = 0; i < t->rank && used < size; i++)
    used += (size_t)snprintf(buf + used, size - used, i ? ",%lld" : "%lld", (long long)t->dims[i]);
  if (used < size) snprintf(buf + used, size - used, "]");
  return buf;
}

/* A float's IEEE bits and back (memcpy: no aliasing rules broken). */
static uint32_t float_bits(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  return x;
}

static float bits_float(uint32_t x) {
  float f;
  memcpy(&f, &x, 4);
  return f;
}

float est_half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
  if (exp == 0) {
    if (mant == 0) bits = sign;
    else { /* subnormal: normalise */
      int e = -1;
      do { mant <<= 1; e++; } while (!(mant & 0x400));
      bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((mant & 0x3ff) << 13);
    }
  } else if (exp == 31) bits = sign | 0x7f800000u | (mant << 13);
  else bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  return bits_float(bits);
}

uint16_t est_float_to_half(float f) {
  const uint32_t x = float_bits(f);
  uint32_t sign = (x >> 16) & 0x8000;
  int32_t exp = (int32_t)((x >> 23) & 0xff);
  uint32_t mant = x & 0x7fffff;
  if (exp == 0xff) return (uint16_t)(sign | 0x7c00 | (mant ? 0x200 : 0));
  int32_t e = exp - 127 + 15;
  if (e >= 31) return (uint16_t)(sign | 0x7c00);
  if (e <= 0) {
    if (e < -10) return (uint16_t)sign;
    mant |= 0x800000;
    uint32_t shift = (uint32_t)(14 - e);
    uint32_t half = mant >> shift, rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) half++;
    return (uint16_t)(sign | half);
  }
  uint32_t half = sign | ((uint32_t)e << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) half++; /* may carry into exponent: correct */
  return (uint16_t)half;
}

float est_bfloat16_to_float(uint16_t b) { return bits_float((uint32_t)b << 16); }

uint16_t est_float_to_bfloat16(float f) {
  uint32_t x = float_bits(f);
  if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40); /* quiet NaN */
  x += 0x7fff + ((x >> 16) & 1);
  return (uint16_t)(x >> 16);
}
