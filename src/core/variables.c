/* The variable store behind est/variables.h: a name table over two flat buffers. */
#include "est/variables.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/frozen.h"
#include "est/rng.h"

enum { FLOATS_PER_LINE = 16 };  /* 64 bytes: every variable starts on a cache line */

struct est_var_store {
  est_variable *vars;
  size_t count, capacity;
  size_t total;                 /* floats, padding included */
  float *params;
  float *grads;
  int finalized;
  int read_only; /* params registered with core/frozen.h */
};

est_status est_vars_create(est_var_store **out) {
  *out = calloc(1, sizeof **out);
  return *out ? EST_OK : est_error(EST_ERR_NO_MEMORY, "out of memory creating a variable store");
}

void est_vars_free(est_var_store *vs) {
  if (!vs) return;
  est_vars_set_read_only(vs, 0); /* before the buffer goes: its packed copies go with it */
  est_free(vs->params);
  est_free(vs->grads);
  free(vs->vars);
  free(vs);
}

static est_status declare(est_var_store *vs, const char *name, int rank, const int64_t *dims,
                          est_initializer init, int trainable, int *index) {
  if (vs->finalized) return est_error(EST_ERR_FAILED_PRECONDITION, "variable %s declared after finalize", name);
  if (!name || !*name || strlen(name) >= EST_VAR_NAME_MAX)
    return est_error(EST_ERR_INVALID_ARGUMENT, "variable name '%s' is empty or too long", name ? name : "");
  if (rank < 0 || rank > EST_MAX_RANK)
    return est_error(EST_ERR_INVALID_ARGUMENT, "variable %s: rank %d outside [0, %d]", name, rank, EST_MAX_RANK);
  if (est_vars_find(vs, name) >= 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "variable %s declared twice", name);
  size_t count = 1;
  for (int i = 0; i < rank; i++) {
    if (dims[i] <= 0)
      return est_error(EST_ERR_INVALID_ARGUMENT, "variable %s: dimension %d is %lld", name, i, (long long)dims[i]);
    count *= (size_t)dims[i];
  }
  est_variable *grown = est_grow(vs->vars, &vs->capacity, vs->count + 1, sizeof *grown, 64);
  if (!grown) return est_error(EST_ERR_NO_MEMORY, "out of memory declaring %s", name);
  vs->vars = grown;
  est_variable *v = &vs->vars[vs->count];
  memset(v, 0, sizeof *v);
  strcpy(v->name, name);
  v->rank = rank;
  for (int i = 0; i < rank; i++) v->dims[i] = dims[i];
  v->count = count;
  v->init = init;
  v->trainable = trainable;
  v->offset = vs->total;
  vs->total += (count + FLOATS_PER_LINE - 1) / FLOATS_PER_LINE * FLOATS_PER_LINE;
  if (index) *index = (int)vs->count;
  vs->count++;
  return EST_OK;
}

est_status est_vars_declare(est_var_store *vs, const char *name, int rank, const int64_t *dims,
                            est_initializer init, int *index) {
  return declare(vs, name, rank, dims, init, 1, index);
}

est_status est_vars_declare_frozen(est_var_store *vs, const char *name, int rank, const int64_t *dims,
                                   est_initializer init, int *index) {
  return declare(vs, name, rank, dims, init, 0, index);
}

/* FNV-1a: a stable per-name stream id, so values don't depend on declaration order. */
static uint64_t name_hash(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
  return h;
}

/* The value of element i is a pure function of (seed, variable name, i): one Philox
 * block per element (redrawn with a new attempt counter when a truncated normal falls
 * outside 2 stddev). So initialisation runs in parallel, gives the same values for any
 * thread count, and BERT-Base's 110M parameters take a fraction of a second. */
static double element_normal(uint64_t key, size_t i, uint32_t attempt) {
  /* Elements 2j and 2j+1 share one block and take Box-Muller's cosine and sine halves. */
  uint64_t pair = (uint64_t)i >> 1;
  uint32_t w[4];
  est_philox4x32(key, (est_philox_counter){{(uint32_t)pair, (uint32_t)(pair >> 32), attempt, 0x1417u}}, w);
  /* Two 53-bit uniforms; u1 in (0, 1] keeps log finite. */
  double u1 = ((double)((((uint64_t)w[0] << 32) | w[1]) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
  double u2 = (double)((((uint64_t)w[2] << 32) | w[3]) >> 11) * (1.0 / 9007199254740992.0);
  double r = sqrt(-2.0 * log(u1));
  return r * ((i & 1) ? sin(2.0 * M_PI * u2) : cos(2.0 * M_PI * u2));
}

static float element_value(const est_initializer *init, uint64_t key, size_t i) {
  switch (init->kind) {
  case EST_INIT_ZEROS: return 0.0f;
  case EST_INIT_ONES: return 1.0f;
  case EST_INIT_CONSTANT: return init->value;
  case EST_INIT_NORMAL: return (float)(element_normal(key, i, 0) * init->value);
  case EST_INIT_TRUNCATED_NORMAL:
    for (uint32_t attempt = 0;; attempt++) {
      double z = element_normal(key, i, attempt);
      if (z >= -2.0 && z <= 2.0) return (float)(z * init->value);
    }
  case EST_INIT_UNIFORM: {
    uint32_t w[4];
    est_philox4x32(key, (est_philox_counter){{(uint32_t)i, (uint32_t)((uint64_t)i >> 32), 0, 0x1417u}}, w);
    return (2.0f * est_u32_to_unit_float(w[0]) - 1.0f) * init->value;
  }
  }
  return 0.0f;
}

static void initialize_one(est_variable *v, float *data, uint64_t seed) {
  uint64_t key = seed ^ name_hash(v->name);
  long n = (long)v->count;
  /* Pairs (2j, 2j+1) are computed together: one Philox block, one log, one sincos. */
  if (v->init.kind == EST_INIT_TRUNCATED_NORMAL || v->init.kind == EST_INIT_NORMAL) {
    float stddev = v->init.value;
    int truncated = v->init.kind == EST_INIT_TRUNCATED_NORMAL;
#pragma omp parallel for schedule(static) if (n > 65536)
    for (long j = 0; j < (n + 1) / 2; j++) {
      uint32_t w[4];
      est_philox4x32(key, (est_philox_counter){{(uint32_t)j, (uint32_t)((uint64_t)j >> 32), 0, 0x1417u}}, w);
      double u1 = ((double)((((uint64_t)w[0] << 32) | w[1]) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
      double u2 = (double)((((uint64_t)w[2] << 32) | w[3]) >> 11) * (1.0 / 9007199254740992.0);
      double r = sqrt(-2.0 * log(u1)), sn, cs;
      sincos(2.0 * M_PI * u2, &sn, &cs);
      double z[2] = {r * cs, r * sn};
      for (long k = 0; k < 2 && 2 * j + k < n; k++) {
        size_t i = (size_t)(2 * j + k);
        double value = z[k];
        /* Rejected draws are redrawn from attempts 1, 2, ... of the same element. */
        for (uint32_t attempt = 1; truncated && (value < -2.0 || value > 2.0); attempt++)
          value = element_normal(key, i, attempt);
        data[i] = (float)(value * stddev);
      }
    }
    return;
  }
#pragma omp parallel for schedule(static) if (n > 65536)
  for (long i = 0; i < n; i++) data[i] = element_value(&v->init, key, (size_t)i);
}

void est_vars_initialize(est_var_store *vs, uint64_t seed) {
  est_vars_set_read_only(vs, 0); /* new values: no packed copy of the old may be used */
  for (size_t i = 0; i < vs->count; i++) {
    initialize_one(&vs->vars[i], vs->params + vs->vars[i].offset, seed);
    vs->vars[i].from_checkpoint = 0;
  }
}

est_status est_vars_finalize(est_var_store *vs, uint64_t seed) {
  est_status st = est_vars_finalize_zero(vs);
  if (st == EST_OK) est_vars_initialize(vs, seed);
  return st;
}

est_status est_vars_finalize_zero(est_var_store *vs) {
  if (vs->finalized) return est_error(EST_ERR_FAILED_PRECONDITION, "variable store finalized twice");
  size_t bytes = (vs->total ? vs->total : FLOATS_PER_LINE) * sizeof(float);
  vs->params = est_alloc(bytes);
  vs->grads = est_alloc(bytes);
  if (!vs->params || !vs->grads)
    return est_error(EST_ERR_NO_MEMORY, "cannot allocate %zu bytes for %zu variables", 2 * bytes, vs->count);
  vs->finalized = 1;
  return EST_OK;
}

int est_vars_finalized(const est_var_store *vs) { return vs->finalized; }
size_t est_vars_count(const est_var_store *vs) { return vs->count; }
const est_variable *est_vars_at(const est_var_store *vs, size_t index) { return &vs->vars[index]; }
est_variable *est_vars_at_mutable(est_var_store *vs, size_t index) { return &vs->vars[index]; }

int est_vars_find(const est_var_store *vs, const char *name) {
  for (size_t i = 0; i < vs->count; i++)
    if (!strcmp(vs->vars[i].name, name)) return (int)i;
  return -1;
}

void est_vars_set_read_only(est_var_store *vs, int read_only) {
  read_only = read_only && vs->finalized && vs->params;
  if (read_only == vs->read_only) return;
  if (read_only) vs->read_only = est_frozen_add(vs->params, vs->total * sizeof(float)) == 0;
  else est_frozen_remove(vs->params), vs->read_only = 0;
}

int est_vars_read_only(const est_var_store *vs) { return vs->read_only; }

float *est_vars_value(est_var_store *vs, size_t index) { return vs->params + vs->vars[index].offset; }
float *est_vars_grad(est_var_store *vs, size_t index) { return vs->grads + vs->vars[index].offset; }
float *est_vars_params(est_var_store *vs) { return vs->params; }
float *est_vars_grads(est_var_store *vs) { return vs->grads; }
size_t est_vars_size(const est_var_store *vs) { return vs->total; }

size_t est_vars_num_parameters(const est_var_store *vs) {
  size_t n = 0;
  for (size_t i = 0; i < vs->count; i++) n += vs->vars[i].count;
  return n;
}

void est_vars_zero_grads(est_var_store *vs) {
  if (vs->grads) memset(vs->grads, 0, vs->total * sizeof(float));
}

static est_tensor view(const est_variable *v, float *data) {
  est_tensor t;
  memset(&t, 0, sizeof t);
  t.dtype = EST_DT_FLOAT;
  t.rank = v->rank;
  for (int i = 0; i < v->rank; i++) t.dims[i] = v->dims[i];
  t.data = data;
  return t;
}

est_tensor est_vars_tensor(est_var_store *vs, size_t index) {
  return view(&vs->vars[index], est_vars_value(vs, index));
}

est_tensor est_vars_grad_tensor(est_var_store *vs, size_t index) {
  return view(&vs->vars[index], est_vars_grad(vs, index));
}
