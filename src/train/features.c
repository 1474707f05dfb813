/* A batch's features by name (est_features, est/estimator.h): what a model_fn and its heads
 * read their inputs with. Apart from the Estimator so that code which only reads features (a
 * head's layer in a servable, the fuzzed parsers' heads) does not link the training loop. */
#include <stdio.h>
#include <string.h>

#include "est/estimator.h"

const est_tensor *est_features_find(const est_features *f, const char *name) {
  for (size_t i = 0; i < f->count; i++)
    if (!strcmp(f->names[i], name)) return &f->tensors[i];
  return NULL;
}

const int64_t *est_features_lengths(const est_features *f, const char *name) {
  if (!f->lengths) return NULL;
  for (size_t i = 0; i < f->count; i++)
    if (!strcmp(f->names[i], name)) return f->lengths[i];
  return NULL;
}

est_status est_features_get(const est_features *f, const char *name, est_dtype dtype, int rank,
                            const est_tensor **out) {
  *out = NULL;
  const est_tensor *t = est_features_find(f, name);
  if (!t) {
    char have[512];
    size_t len = 0;
    have[0] = 0;
    for (size_t i = 0; i < f->count && len < sizeof have; i++)
      len += (size_t)snprintf(have + len, sizeof have - len, "%s%s", i ? ", " : "", f->names[i]);
    return est_error(EST_ERR_NOT_FOUND, "feature '%s' not found in the input batch (has: %s)", name,
                     f->count ? have : "nothing");
  }
  char shape[128];
  if (t->dtype != dtype)
    return est_error(EST_ERR_INVALID_ARGUMENT, "feature '%s' is %s, the model wants %s", name,
                     est_dtype_name(t->dtype) ? est_dtype_name(t->dtype) : "?",
                     est_dtype_name(dtype) ? est_dtype_name(dtype) : "?");
  if ((rank >= 0 && t->rank != rank) || t->rank < 1 || t->dims[0] != f->batch_size)
    return est_error(EST_ERR_INVALID_ARGUMENT, "feature '%s' has shape %s; the model wants rank %d with %d rows", name,
                     est_shape_string(t, shape, sizeof shape), rank, f->batch_size);
  *out = t;
  return EST_OK;
}
