/* Parse + batch: each element is parsed straight into its row of a reusable batch
 * buffer (FixedLen features need no copy at all unless cast to int32 or STRING);
 * VarLen and FixedLenSequence features collect their values per row and are padded into
 * a dense tensor when the batch is complete. Buffers only grow, so steady state
 * allocates nothing.
 *
 * STRING values (est_bytes) point into the serialized record while it is parsed, and the
 * record is gone by the next element, so their bytes are copied into one growable arena
 * per feature per batch buffer (ds_batchbuf.arena). The arena may move as it grows, so
 * rows keep only sizes until ds_batchbuf_finish points every est_bytes into it by a
 * running offset (values are appended in exactly the order they are laid out). The
 * arena is reused by the next batch in that buffer: the batch owns its bytes until then. */
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "data/dataset_internal.h"

static int is_fixed(const est_feature_spec *s) { return s->var_len == EST_FIXED_LEN; }
static int is_sequence(const est_feature_spec *s) { return s->var_len == EST_FIXED_LEN_SEQUENCE; }

/* Bytes per element of a batch tensor (est_bytes for STRING, which est_dtype_size
 * calls variable). */
static size_t elem_size(est_dtype t) { return t == EST_DT_STRING ? sizeof(est_bytes) : est_dtype_size(t); }

void ds_features_free(ds_features *f) {
  if (f->specs) est_feature_specs_free(f->specs, f->n);
  for (size_t i = 0; i < f->n; i++) {
    if (f->scratch_i64) free(f->scratch_i64[i]);
    if (f->var) free(f->var[i].values);
    if (f->tensor_data) est_free(f->tensor_data[i]);
  }
  free(f->tensor_data);
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
    /* batch tensors: FixedLen [B, shape...], FixedLenSequence [B, steps, shape...],
     * VarLen [B, max_len] */
    const int rank = is_fixed(&specs[i]) ? 1 + specs[i].rank : is_sequence(&specs[i]) ? 2 + specs[i].rank : 2;
    if (rank > EST_MAX_RANK)
      return est_error(EST_ERR_INVALID_ARGUMENT, "dataset parse: feature %s: shape of rank %d gives batches of rank %d, more than %d",
                       specs[i].key, specs[i].rank, rank, (int)EST_MAX_RANK);
  }
  f->n = n;
  f->cast_int32 = cast == EST_DATASET_CAST_INT32;
  f->specs = est_feature_specs_copy(specs, n);
  f->elems = calloc(n, sizeof *f->elems);
  f->out_dtype = calloc(n, sizeof *f->out_dtype);
  f->scratch_i64 = calloc(n, sizeof *f->scratch_i64);
  f->var = calloc(n, sizeof *f->var);
  f->out = calloc(n, sizeof *f->out);
  if (!f->specs || !f->elems || !f->out_dtype || !f->scratch_i64 || !f->var || !f->out) goto oom;
  for (size_t i = 0; i < n; i++) {
    est_feature_spec *s = &f->specs[i];
    f->elems[i] = 1;
    if (s->var_len != EST_VAR_LEN)
      for (int d = 0; d < s->rank; d++) f->elems[i] *= (size_t)s->shape[d];
    /* VarLen has no default (TF's VarLenFeature takes none): ignored */
    if (s->var_len == EST_VAR_LEN) {
      free((void *)s->default_value);
      s->default_value = NULL;
    }
    if (!s->default_value) s->default_count = 0;
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
    if (b->arena) free(b->arena[i]);
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
  free(b->arena);
  free(b->arena_len);
  free(b->arena_cap);
  free(b->state);
  memset(b, 0, sizeof *b);
}

est_status ds_batchbuf_init(ds_batchbuf *b, const ds_features *f, int batch_size, size_t state_len) {
  size_t n = f->n;
  memset(b, 0, sizeof *b);
  for (size_t i = 0; i < n; i++) {
    /* a FixedLenSequence int64 padding value must survive the int32 cast like the data */
    const est_feature_spec *s = &f->specs[i];
    if (is_sequence(s) && s->default_value && f->out_dtype[i] == EST_DT_INT32) {
      int64_t pad = *(const int64_t *)s->default_value;
      if (pad < INT32_MIN || pad > INT32_MAX)
        return est_error(EST_ERR_INVALID_ARGUMENT, "dataset parse: feature %s padding value %lld does not fit int32",
                         s->key, (long long)pad);
    }
  }
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
  b->arena = calloc(n, sizeof *b->arena);
  b->arena_len = calloc(n, sizeof *b->arena_len);
  b->arena_cap = calloc(n, sizeof *b->arena_cap);
  b->state = calloc(state_len, sizeof *b->state);
  if (!b->tensors || !b->names || !b->lengths_view || !b->fixed || !b->lengths || !b->values || !b->nvalues ||
      !b->values_cap || !b->dense || !b->dense_cap || !b->arena || !b->arena_len || !b->arena_cap || !b->state)
    goto oom;
  for (size_t i = 0; i < n; i++) {
    const est_feature_spec *s = &f->specs[i];
    est_tensor *t = &b->tensors[i];
    b->names[i] = s->key;
    t->dtype = f->out_dtype[i];
    t->dims[0] = batch_size;
    if (s->dtype == EST_DT_STRING) {
      /* allocated up front so that every est_bytes.data, even of "", is a valid pointer */
      b->arena_cap[i] = 256;
      if (!(b->arena[i] = malloc(b->arena_cap[i]))) goto oom;
    }
    if (is_fixed(s)) {
      t->rank = 1 + s->rank;
      for (int d = 0; d < s->rank; d++) t->dims[1 + d] = s->shape[d];
      size_t bytes = (size_t)batch_size * f->elems[i] * elem_size(t->dtype);
      if (!(b->fixed[i] = est_alloc(bytes ? bytes : 64))) goto oom;
      t->data = b->fixed[i];
    } else {
      t->rank = 2;
      if (is_sequence(s)) {
        t->rank = 2 + s->rank;
        for (int d = 0; d < s->rank; d++) t->dims[2 + d] = s->shape[d];
      }
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
  for (size_t i = 0; i < f->n; i++) b->nvalues[i] = 0, b->arena_len[i] = 0;
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

/* Copies the bytes of n string values into feature i's arena and leaves only their sizes
 * in dst (data NULL until ds_batchbuf_finish). dst may be src. */
static est_status arena_append(ds_batchbuf *b, size_t i, const est_bytes *src, size_t n, est_bytes *dst) {
  for (size_t k = 0; k < n; k++) {
    const size_t size = src[k].size;
    void *arena = b->arena[i];
    est_status st = grow(&arena, &b->arena_cap[i], b->arena_len[i] + size, 1);
    if (st) return st;
    b->arena[i] = arena;
    if (size) memcpy(b->arena[i] + b->arena_len[i], src[k].data, size);
    b->arena_len[i] += size;
    dst[k] = (est_bytes){.size = size, .data = NULL};
  }
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
    else f->out[i] = (uint8_t *)b->fixed[i] + row * f->elems[i] * elem_size(f->out_dtype[i]);
  }
  if ((st = est_example_parse_specs(f->specs, f->n, e->data, e->size, f->out, NULL)))
    return est_error_prefix("%s record %lld: ", name, (long long)e->record);
  for (size_t i = 0; i < f->n; i++) {
    const est_feature_spec *s = &f->specs[i];
    if (is_fixed(s)) {
      if (f->scratch_i64[i] &&
          (st = narrow((int32_t *)b->fixed[i] + row * f->elems[i], f->scratch_i64[i], f->elems[i], name, e, s->key)))
        return st;
      if (s->dtype == EST_DT_STRING) {
        /* the row's est_bytes point into the record (or the default): keep the bytes */
        est_bytes *v = (est_bytes *)b->fixed[i] + row * f->elems[i];
        if ((st = arena_append(b, i, v, f->elems[i], v))) return st;
      }
      continue;
    }
    const size_t count = f->var[i].count, esize = elem_size(f->out_dtype[i]);
    if ((st = grow(&b->values[i], &b->values_cap[i], b->nvalues[i] + count, esize))) return st;
    void *dst = (uint8_t *)b->values[i] + b->nvalues[i] * esize;
    if (s->dtype == EST_DT_STRING) {
      if ((st = arena_append(b, i, f->var[i].values, count, dst))) return st;
    } else if (f->out_dtype[i] != s->dtype) {
      if ((st = narrow(dst, f->var[i].values, count, name, e, s->key))) return st;
    } else if (count) {
      memcpy(dst, f->var[i].values, count * esize);
    }
    b->nvalues[i] += count;
    /* VarLen: values; FixedLenSequence: steps of elems values (the parser checked that
     * count is a multiple; a zero-sized step shape has none) */
    b->lengths[i][row] = (int64_t)(!is_sequence(s) ? count : f->elems[i] ? count / f->elems[i] : 0);
  }
  return EST_OK;
}

/* Fills n elements of a padded tensor with the padding value: VarLen pads with zeros /
 * "" (tf.sparse.to_dense), FixedLenSequence with its default_value, else 0 / ""
 * (parse_example's FillAndCopyVarLen). Empty strings point at the arena. */
static void fill_padding(void *dst, size_t n, const ds_features *f, size_t i, const uint8_t *arena) {
  const est_feature_spec *s = &f->specs[i];
  const est_dtype out = f->out_dtype[i];
  const void *dflt = is_sequence(s) ? s->default_value : NULL;
  if (s->dtype == EST_DT_STRING) {
    est_bytes pad = dflt ? *(const est_bytes *)dflt : (est_bytes){.size = 0, .data = (uint8_t *)arena};
    for (size_t k = 0; k < n; k++) ((est_bytes *)dst)[k] = pad;
  } else if (!dflt) {
    memset(dst, 0, n * elem_size(out));
  } else if (out == EST_DT_INT32) { /* int64 cast to int32: checked to fit in ds_batchbuf_init */
    int32_t pad = (int32_t) * (const int64_t *)dflt;
    for (size_t k = 0; k < n; k++) ((int32_t *)dst)[k] = pad;
  } else if (out == EST_DT_INT64) {
    int64_t pad = *(const int64_t *)dflt;
    for (size_t k = 0; k < n; k++) ((int64_t *)dst)[k] = pad;
  } else {
    float pad = *(const float *)dflt;
    for (size_t k = 0; k < n; k++) ((float *)dst)[k] = pad;
  }
}

est_status ds_batchbuf_finish(ds_batchbuf *b, const ds_features *f) {
  const size_t rows = (size_t)b->batch.size;
  for (size_t i = 0; i < f->n; i++) {
    const est_feature_spec *s = &f->specs[i];
    est_tensor *t = &b->tensors[i];
    t->dims[0] = (int64_t)rows;
    if (s->dtype == EST_DT_STRING) {
      /* the arena holds the bytes of every value in order: point each at its own */
      est_bytes *v = is_fixed(s) ? b->fixed[i] : b->values[i];
      const size_t nv = is_fixed(s) ? rows * f->elems[i] : b->nvalues[i];
      size_t off = 0;
      for (size_t k = 0; k < nv; k++) {
        v[k].data = b->arena[i] + off;
        off += v[k].size;
      }
    }
    if (is_fixed(s)) continue;
    /* VarLen: tf.sparse.to_dense of the SparseTensor, rows padded to the longest row of
     * this batch, [rows, max_len]. FixedLenSequence: tf.io.parse_example's dense
     * [rows, max_steps, shape...], each row padded with the padding value. */
    const size_t step = is_sequence(s) ? f->elems[i] : 1, esize = elem_size(t->dtype);
    size_t max_len = 0;
    for (size_t r = 0; r < rows; r++)
      if ((size_t)b->lengths[i][r] > max_len) max_len = (size_t)b->lengths[i][r];
    const size_t row_elems = max_len * step;
    est_status st = grow(&b->dense[i], &b->dense_cap[i], rows * row_elems + 1, esize);
    if (st) return st;
    fill_padding(b->dense[i], rows * row_elems, f, i, b->arena ? b->arena[i] : NULL);
    const uint8_t *src = b->values[i];
    for (size_t r = 0; r < rows; r++) {
      size_t len = (size_t)b->lengths[i][r] * step;
      if (len) memcpy((uint8_t *)b->dense[i] + r * row_elems * esize, src, len * esize);
      src += len * esize;
    }
    t->dims[1] = (int64_t)max_len;
    t->data = b->dense[i];
  }
  return EST_OK;
}
