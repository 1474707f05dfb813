/* Parse + batch: each element is parsed straight into its row of a reusable batch
 * buffer (FixedLen features need no copy at all unless cast to int32); VarLen features
 * collect their values per row and are padded into a dense [rows, max_len] tensor when
 * the batch is complete. Buffers only grow, so steady state allocates nothing. */
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "data/dataset_internal.h"

static int is_fixed(const est_feature_spec *s) { return s->var_len == EST_FIXED_LEN; }

void ds_features_free(ds_features *f) {
  for (size_t i = 0; i < f->n; i++) {
    free((void *)f->specs[i].key);
    free((void *)f->specs[i].default_value);
    if (f->scratch_i64) free(f->scratch_i64[i]);
    if (f->var) free(f->var[i].values);
    if (f->tensor_data) est_free(f->tensor_data[i]);
  }
  free(f->tensor_data);
  free(f->specs);
  free(f->elems);
  free(f->out_dtype);
  free(f->scratch_i64);
  free(f->var);
  free(f->out);
  memset(f, 0, sizeof *f);
}

est_status ds_features_init(ds_features *f, const est_feature_spec *specs, size_t n, int cast) {
  est_status st;
  memset(f, 0, sizeof *f);
  if (n == 0) return est_error(EST_ERR_INVALID_ARGUMENT, "dataset parse: no feature specs");
  if ((st = est_feature_specs_validate(specs, n))) return st;
  for (size_t i = 0; i < n; i++) {
    if (specs[i].dtype == EST_DT_STRING)
      return est_error(EST_ERR_UNIMPLEMENTED, "dataset parse: feature %s: string features are not supported", specs[i].key);
    if (specs[i].var_len == EST_FIXED_LEN_SEQUENCE)
      return est_error(EST_ERR_UNIMPLEMENTED, "dataset parse: feature %s: FixedLenSequenceFeature is not supported",
                       specs[i].key);
  }
  f->n = n;
  f->cast_int32 = cast == EST_DATASET_CAST_INT32;
  f->specs = calloc(n, sizeof *f->specs);
  f->elems = calloc(n, sizeof *f->elems);
  f->out_dtype = calloc(n, sizeof *f->out_dtype);
  f->scratch_i64 = calloc(n, sizeof *f->scratch_i64);
  f->var = calloc(n, sizeof *f->var);
  f->out = calloc(n, sizeof *f->out);
  if (!f->specs || !f->elems || !f->out_dtype || !f->scratch_i64 || !f->var || !f->out) goto oom;
  for (size_t i = 0; i < n; i++) {
    est_feature_spec *s = &f->specs[i];
    *s = specs[i];
    s->key = NULL;
    s->default_value = NULL;
    if (!(s->key = strdup(specs[i].key))) goto oom;
    size_t esize = est_dtype_size(s->dtype);
    f->elems[i] = 1;
    if (is_fixed(s))
      for (int d = 0; d < s->rank; d++) f->elems[i] *= (size_t)s->shape[d];
    if (specs[i].default_value) {
      void *copy = malloc(specs[i].default_count * esize + 1);
      if (!copy) goto oom;
      memcpy(copy, specs[i].default_value, specs[i].default_count * esize);
      s->default_value = copy;
    }
    f->out_dtype[i] = s->dtype == EST_DT_INT64 && f->cast_int32 ? EST_DT_INT32 : s->dtype;
    if (is_fixed(s) && f->out_dtype[i] != s->dtype &&
        !(f->scratch_i64[i] = malloc(f->elems[i] * sizeof(int64_t) + 1)))
      goto oom;
  }
  return EST_OK;
oom:
  ds_features_free(f);
  return est_error(EST_ERR_NO_MEMORY, "out of memory setting up dataset features");
}

est_status ds_features_init_tensors(ds_features *f, const char *const *names, const est_tensor *tensors, size_t n) {
  memset(f, 0, sizeof *f);
  if (n == 0) return est_error(EST_ERR_INVALID_ARGUMENT, "dataset from_tensors: no tensors");
  for (size_t i = 0; i < n; i++) {
    const est_tensor *t = &tensors[i];
    if (!names[i]) return est_error(EST_ERR_INVALID_ARGUMENT, "dataset from_tensors: tensor %zu has no name", i);
    for (size_t j = 0; j < i; j++)
      if (!strcmp(names[j], names[i]))
        return est_error(EST_ERR_INVALID_ARGUMENT, "dataset from_tensors: name %s given twice", names[i]);
    if (t->dtype != EST_DT_INT32 && t->dtype != EST_DT_INT64 && t->dtype != EST_DT_FLOAT)
      return est_error(EST_ERR_INVALID_ARGUMENT, "dataset from_tensors: %s has dtype %s (int32, int64 or float32 only)",
                       names[i], est_dtype_name(t->dtype) ? est_dtype_name(t->dtype) : "invalid");
    if (t->rank < 1 || t->rank > EST_MAX_RANK)
      return est_error(EST_ERR_INVALID_ARGUMENT, "dataset from_tensors: %s has rank %d; slicing needs rank >= 1",
                       names[i], t->rank);
    for (int d = 0; d < t->rank; d++)
      if (t->dims[d] < 0)
        return est_error(EST_ERR_INVALID_ARGUMENT, "dataset from_tensors: %s dimension %d is %lld", names[i], d,
                         (long long)t->dims[d]);
    if (t->dims[0] != tensors[0].dims[0])
      return est_error(EST_ERR_INVALID_ARGUMENT,
                       "dataset from_tensors: %s has %lld rows but %s has %lld (first dimensions must match)", names[i],
                       (long long)t->dims[0], names[0], (long long)tensors[0].dims[0]);
  }
  f->n = n;
  f->specs = calloc(n, sizeof *f->specs);
  f->elems = calloc(n, sizeof *f->elems);
  f->out_dtype = calloc(n, sizeof *f->out_dtype);
  f->scratch_i64 = calloc(n, sizeof *f->scratch_i64);
  f->var = calloc(n, sizeof *f->var);
  f->out = calloc(n, sizeof *f->out);
  f->tensor_data = calloc(n, sizeof *f->tensor_data);
  if (!f->specs || !f->elems || !f->out_dtype || !f->scratch_i64 || !f->var || !f->out || !f->tensor_data) goto oom;
  for (size_t i = 0; i < n; i++) {
    const est_tensor *t = &tensors[i];
    est_feature_spec *s = &f->specs[i];
    if (!(s->key = strdup(names[i]))) goto oom;
    s->dtype = t->dtype;
    s->var_len = EST_FIXED_LEN;
    s->rank = t->rank - 1;
    f->elems[i] = 1;
    for (int d = 1; d < t->rank; d++) {
      s->shape[d - 1] = t->dims[d];
      f->elems[i] *= (size_t)t->dims[d];
    }
    f->out_dtype[i] = t->dtype;
    size_t bytes = (size_t)t->dims[0] * f->elems[i] * est_dtype_size(t->dtype);
    if (!(f->tensor_data[i] = est_alloc(bytes ? bytes : 64))) goto oom;
    if (bytes) memcpy(f->tensor_data[i], t->data, bytes);
  }
  return EST_OK;
oom:
  ds_features_free(f);
  return est_error(EST_ERR_NO_MEMORY, "out of memory copying tensors into a dataset");
}

est_status ds_features_cast_int32(ds_features *f, const char *key) {
  for (size_t i = 0; i < f->n; i++) {
    est_feature_spec *s = &f->specs[i];
    if (strcmp(s->key, key) != 0) continue;
    if (s->dtype != EST_DT_INT64 || f->tensor_data)
      return est_error(EST_ERR_INVALID_ARGUMENT, "dataset cast: feature %s is not a parsed int64 feature", key);
    if (f->out_dtype[i] == EST_DT_INT32) return EST_OK;
    if (s->var_len == EST_FIXED_LEN && !(f->scratch_i64[i] = malloc(f->elems[i] * sizeof(int64_t) + 1)))
      return est_error(EST_ERR_NO_MEMORY, "out of memory setting up dataset features");
    f->out_dtype[i] = EST_DT_INT32;
    return EST_OK;
  }
  return est_error(EST_ERR_NOT_FOUND, "dataset cast: no feature %s in the parse specs", key);
}

void ds_batchbuf_free(ds_batchbuf *b, const ds_features *f) {
  for (size_t i = 0; i < f->n; i++) {
    if (b->fixed) est_free(b->fixed[i]);
    if (b->lengths) free(b->lengths[i]);
    if (b->values) free(b->values[i]);
    if (b->dense) free(b->dense[i]);
  }
  free(b->tensors);
  free(b->names);
  free(b->lengths_view);
  free(b->fixed);
  free(b->lengths);
  free(b->values);
  free(b->nvalues);
  free(b->values_cap);
  free(b->dense);
  free(b->dense_cap);
  free(b->state);
  memset(b, 0, sizeof *b);
}

est_status ds_batchbuf_init(ds_batchbuf *b, const ds_features *f, int batch_size, size_t state_len) {
  size_t n = f->n;
  memset(b, 0, sizeof *b);
  b->tensors = calloc(n, sizeof *b->tensors);
  b->names = calloc(n, sizeof *b->names);
  b->lengths_view = calloc(n, sizeof *b->lengths_view);
  b->fixed = calloc(n, sizeof *b->fixed);
  b->lengths = calloc(n, sizeof *b->lengths);
  b->values = calloc(n, sizeof *b->values);
  b->nvalues = calloc(n, sizeof *b->nvalues);
  b->values_cap = calloc(n, sizeof *b->values_cap);
  b->dense = calloc(n, sizeof *b->dense);
  b->dense_cap = calloc(n, sizeof *b->dense_cap);
  b->state = calloc(state_len, sizeof *b->state);
  if (!b->tensors || !b->names || !b->lengths_view || !b->fixed || !b->lengths || !b->values || !b->nvalues ||
      !b->values_cap || !b->dense || !b->dense_cap || !b->state)
    goto oom;
  for (size_t i = 0; i < n; i++) {
    const est_feature_spec *s = &f->specs[i];
    est_tensor *t = &b->tensors[i];
    b->names[i] = s->key;
    t->dtype = f->out_dtype[i];
    t->dims[0] = batch_size;
    if (is_fixed(s)) {
      t->rank = 1 + s->rank;
      for (int d = 0; d < s->rank; d++) t->dims[1 + d] = s->shape[d];
      size_t bytes = (size_t)batch_size * f->elems[i] * est_dtype_size(t->dtype);
      if (!(b->fixed[i] = est_alloc(bytes ? bytes : 64))) goto oom;
      t->data = b->fixed[i];
    } else {
      t->rank = 2;
      if (!(b->lengths[i] = calloc((size_t)batch_size, sizeof(int64_t)))) goto oom;
      b->lengths_view[i] = b->lengths[i];
    }
  }
  b->batch = (est_batch){0, n, b->names, b->tensors, b->lengths_view};
  return EST_OK;
oom:
  ds_batchbuf_free(b, f);
  return est_error(EST_ERR_NO_MEMORY, "out of memory allocating dataset batch buffers");
}

void ds_batchbuf_begin(ds_batchbuf *b, const ds_features *f) {
  b->batch.size = 0;
  for (size_t i = 0; i < f->n; i++) b->nvalues[i] = 0;
}

static est_status grow(void **p, size_t *cap, size_t need, size_t esize) {
  if (need <= *cap) return EST_OK;
  size_t ncap = *cap ? *cap : 256;
  while (ncap < need) ncap *= 2;
  void *q = realloc(*p, ncap * esize);
  if (!q) return est_error(EST_ERR_NO_MEMORY, "out of memory growing a batch buffer to %zu values", ncap);
  *p = q;
  *cap = ncap;
  return EST_OK;
}

/* int64 -> int32 as tf.to_int32, but a value that does not fit is an error, not a wrap. */
static est_status narrow(int32_t *dst, const int64_t *src, size_t n, const char *name, const ds_element *e,
                         const char *key) {
  for (size_t k = 0; k < n; k++) {
    if (src[k] < INT32_MIN || src[k] > INT32_MAX)
      return est_error(EST_ERR_INVALID_ARGUMENT, "%s record %lld: feature %s value %lld does not fit int32", name,
                       (long long)e->record, key, (long long)src[k]);
    dst[k] = (int32_t)src[k];
  }
  return EST_OK;
}

est_status ds_batchbuf_parse(ds_batchbuf *b, ds_features *f, const ds_element *e, const char *name) {
  const size_t row = (size_t)b->batch.size;
  est_status st;
  if (f->tensor_data) {
    /* from_tensors: the element is row e->offset of every tensor */
    for (size_t i = 0; i < f->n; i++) {
      size_t bytes = f->elems[i] * est_dtype_size(f->out_dtype[i]);
      memcpy((uint8_t *)b->fixed[i] + row * bytes, (const uint8_t *)f->tensor_data[i] + (size_t)e->offset * bytes, bytes);
    }
    return EST_OK;
  }
  for (size_t i = 0; i < f->n; i++) {
    if (!is_fixed(&f->specs[i])) f->out[i] = &f->var[i];
    else if (f->scratch_i64[i]) f->out[i] = f->scratch_i64[i];
    else f->out[i] = (uint8_t *)b->fixed[i] + row * f->elems[i] * est_dtype_size(f->out_dtype[i]);
  }
  if ((st = est_example_parse_specs(f->specs, f->n, e->data, e->size, f->out, NULL)))
    return est_error_prefix("%s record %lld: ", name, (long long)e->record);
  for (size_t i = 0; i < f->n; i++) {
    const est_feature_spec *s = &f->specs[i];
    if (is_fixed(s)) {
      if (f->scratch_i64[i] &&
          (st = narrow((int32_t *)b->fixed[i] + row * f->elems[i], f->scratch_i64[i], f->elems[i], name, e, s->key)))
        return st;
      continue;
    }
    const size_t count = f->var[i].count, esize = est_dtype_size(f->out_dtype[i]);
    if ((st = grow(&b->values[i], &b->values_cap[i], b->nvalues[i] + count, esize))) return st;
    void *dst = (uint8_t *)b->values[i] + b->nvalues[i] * esize;
    if (f->out_dtype[i] != s->dtype) {
      if ((st = narrow(dst, f->var[i].values, count, name, e, s->key))) return st;
    } else if (count) {
      memcpy(dst, f->var[i].values, count * esize);
    }
    b->nvalues[i] += count;
    b->lengths[i][row] = (int64_t)count;
  }
  return EST_OK;
}

est_status ds_batchbuf_finish(ds_batchbuf *b, const ds_features *f) {
  const size_t rows = (size_t)b->batch.size;
  for (size_t i = 0; i < f->n; i++) {
    est_tensor *t = &b->tensors[i];
    t->dims[0] = (int64_t)rows;
    if (is_fixed(&f->specs[i])) continue;
    /* tf.sparse.to_dense of the VarLen SparseTensor: rows padded with zeros to the
     * longest row of this batch. */
    size_t max_len = 0, esize = est_dtype_size(t->dtype);
    for (size_t r = 0; r < rows; r++)
      if ((size_t)b->lengths[i][r] > max_len) max_len = (size_t)b->lengths[i][r];
    est_status st = grow(&b->dense[i], &b->dense_cap[i], rows * max_len + 1, esize);
    if (st) return st;
    memset(b->dense[i], 0, rows * max_len * esize);
    const uint8_t *src = b->values[i];
    for (size_t r = 0; r < rows; r++) {
      size_t len = (size_t)b->lengths[i][r];
      if (len) memcpy((uint8_t *)b->dense[i] + r * max_len * esize, src, len * esize);
      src += len * esize;
    }
    t->dims[1] = (int64_t)max_len;
    t->data = b->dense[i];
  }
  return EST_OK;
}
