/* est/variables.h — a model's named float32 variables in contiguous buffers.
 *
 * A model declares each variable once, by TensorFlow name and shape, as tf.get_variable
 * would; est_vars_finalize then lays them out in ONE parameter buffer and ONE gradient
 * buffer with the same layout (each variable starts on a 64-byte boundary). So a
 * checkpoint is a sweep over a name table, an all-reduce is one call on the gradient
 * buffer, clipping and the optimizer are flat loops, and the step loop allocates nothing.
 *
 *     est_var_store *vs;
 *     int w, b;
 *     est_vars_create(&vs);
 *     est_vars_declare(vs, "dense/kernel", 2, (int64_t[]){784, 10}, est_init_truncated_normal(0.02f), &w);
 *     est_vars_declare(vs, "dense/bias", 1, (int64_t[]){10}, est_init_zeros(), &b);
 *     est_vars_finalize(vs, seed);            // allocates + initialises
 *     float *kernel = est_vars_value(vs, w);  // [784, 10] row-major
 *     float *dkernel = est_vars_grad(vs, w);  // same shape; backward passes accumulate (+=)
 *
 * Initial values depend only on (seed, variable name), not on declaration order.
 */
#ifndef EST_VARIABLES_H
#define EST_VARIABLES_H

#include <stddef.h>
#include <stdint.h>

#include "est/status.h"
#include "est/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum est_init_kind {
  EST_INIT_ZEROS,
  EST_INIT_ONES,
  EST_INIT_CONSTANT,          /* every element = value */
  EST_INIT_TRUNCATED_NORMAL,  /* N(0, value^2), redrawn outside +-2 value (TF1 semantics) */
  EST_INIT_NORMAL,            /* N(0, value^2) */
  EST_INIT_UNIFORM,           /* U(-value, value) */
} est_init_kind;

typedef struct est_initializer {
  est_init_kind kind;
  float value;                /* stddev, bound or constant, depending on kind */
} est_initializer;

static inline est_initializer est_init_zeros(void) { return (est_initializer){EST_INIT_ZEROS, 0.0f}; }
static inline est_initializer est_init_ones(void) { return (est_initializer){EST_INIT_ONES, 1.0f}; }
static inline est_initializer est_init_constant(float v) { return (est_initializer){EST_INIT_CONSTANT, v}; }
static inline est_initializer est_init_truncated_normal(float stddev) {
  return (est_initializer){EST_INIT_TRUNCATED_NORMAL, stddev};
}
static inline est_initializer est_init_normal(float stddev) { return (est_initializer){EST_INIT_NORMAL, stddev}; }
static inline est_initializer est_init_uniform(float bound) { return (est_initializer){EST_INIT_UNIFORM, bound}; }

enum { EST_VAR_NAME_MAX = 256 };

typedef struct est_variable {
  char name[EST_VAR_NAME_MAX];   /* checkpoint key, e.g. "bert/encoder/layer_0/attention/self/query/kernel" */
  int rank;
  int64_t dims[EST_MAX_RANK];
  size_t offset;                 /* in floats from the start of the parameter (and gradient) buffer */
  size_t count;                  /* elements */
  est_initializer init;
  int trainable;                 /* gets a gradient and optimizer slots */
  int from_checkpoint;           /* set by checkpoint initialisation, for the "*INIT_FROM_CKPT*" log */
} est_variable;

typedef struct est_var_store est_var_store;

est_status est_vars_create(est_var_store **out);
void est_vars_free(est_var_store *vs);

/* Declares a trainable float32 variable. Errors: duplicate name, name too long, bad
 * shape, or the store already finalized. *index (may be NULL) receives its index. */
est_status est_vars_declare(est_var_store *vs, const char *name, int rank, const int64_t *dims,
                            est_initializer init, int *index);

/* Same, but not trainable (no gradient is kept, the optimizer skips it). */
est_status est_vars_declare_frozen(est_var_store *vs, const char *name, int rank, const int64_t *dims,
                                   est_initializer init, int *index);

/* Allocates the parameter and gradient buffers and runs every initializer. */
est_status est_vars_finalize(est_var_store *vs, uint64_t seed);

/* Allocates the buffers like est_vars_finalize but runs no initializer: every value is 0
 * and no page is touched, for a store whose values are all restored next (a servable: an
 * int8 export's dense kernels are then never written, so they take no memory at all). */
est_status est_vars_finalize_zero(est_var_store *vs);

/* Re-runs every initializer with `seed` (after finalize). */
void est_vars_initialize(est_var_store *vs, uint64_t seed);

int est_vars_finalized(const est_var_store *vs);
size_t est_vars_count(const est_var_store *vs);
const est_variable *est_vars_at(const est_var_store *vs, size_t index);
est_variable *est_vars_at_mutable(est_var_store *vs, size_t index);
/* Index of the variable called `name`, or -1. */
int est_vars_find(const est_var_store *vs, const char *name);

float *est_vars_value(est_var_store *vs, size_t index);
float *est_vars_grad(est_var_store *vs, size_t index);

/* The whole buffers (est_vars_size floats each, padding included and kept at zero). */
float *est_vars_params(est_var_store *vs);
float *est_vars_grads(est_var_store *vs);
size_t est_vars_size(const est_var_store *vs);
/* Sum of every variable's element count (no padding). */
size_t est_vars_num_parameters(const est_var_store *vs);

void est_vars_zero_grads(est_var_store *vs);

/* Read-only (1) from now on, or writable again (0). The caller promises that no value
 * changes while the store is read-only (inference: predict, evaluate, serve,
 * extract_features); the GEMMs may then keep their own packed copies of the weights (the
 * bf16 tiles of the AMX kernel) instead of packing them again on every call: memory for
 * speed, about half the weights' size. Making it writable again, or freeing the store,
 * drops those copies. No effect before est_vars_finalize. */
void est_vars_set_read_only(est_var_store *vs, int read_only);
int est_vars_read_only(const est_var_store *vs);

/* A tensor view (float32, the variable's shape) of a variable's value or gradient. */
est_tensor est_vars_tensor(est_var_store *vs, size_t index);
est_tensor est_vars_grad_tensor(est_var_store *vs, size_t index);

#ifdef __cplusplus
}
#endif
#endif
