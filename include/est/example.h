/* est/example.h — tf.train.Example: build, serialize, parse, and parse against feature
 * specs the way tf.io.parse_single_example does (with TF's error texts).
 *
 * Building and writing (the text pipeline):
 *
 *     est_example ex; est_example_init(&ex);
 *     int64_t ids[3] = {101, 2023, 102}, label = 1;
 *     est_example_set_int64(&ex, "input_ids", ids, 3);
 *     est_example_set_int64(&ex, "label_ids", &label, 1);
 *     uint8_t *buf; size_t n;
 *     est_example_serialize(&ex, &buf, &n);        // deterministic: keys sorted bytewise
 *     est_tfrecord_writer_write(w, buf, n); free(buf); est_example_clear(&ex);
 *
 * Parsing against specs (the input pipeline's hot path; no malloc per record for
 * fixed-length features):
 *
 *     est_feature_spec specs[2] = {
 *       {.key = "input_ids", .dtype = EST_DT_INT64, .rank = 1, .shape = {128}},
 *       {.key = "label_ids", .dtype = EST_DT_INT64, .rank = 0},       // FixedLenFeature([], int64)
 *     };
 *     if (est_feature_specs_validate(specs, 2)) fail();            // "Missing shape ..." etc.
 *     int64_t ids[128], label;
 *     void *out[2] = {ids, &label};
 *     st = est_example_parse_specs(specs, 2, rec, n, out, "train.tf_record record 17");
 *     // error: "train.tf_record record 17: Feature: label_ids (data type: int64) is required
 *     //         but could not be found."
 *
 * Wire format and parser rules: docs/example.md §2-§3 (packed or unpacked lists, concatenated
 * Examples merge with the last duplicate key winning, a Feature with no kind is missing,
 * map entries must hold exactly a key and a value).
 */
#ifndef EST_EXAMPLE_H
#define EST_EXAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include "est/status.h"
#include "est/tensor.h"
#include "est/tfrecord.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum est_feature_kind {
  EST_FEATURE_NONE = 0, /* a Feature with no list set (counts as missing when parsing) */
  EST_FEATURE_BYTES,
  EST_FEATURE_FLOAT,
  EST_FEATURE_INT64,
} est_feature_kind;

typedef struct est_feature {
  char *key;             /* NUL-terminated copy; key_size excludes the NUL */
  size_t key_size;
  est_feature_kind kind;
  size_t count;          /* number of values of `kind` */
  int64_t *int64s;       /* kind INT64 */
  float *floats;         /* kind FLOAT */
  est_bytes *bytes;      /* kind BYTES: each element owns its data */
} est_feature;

/* An Example owns all its memory. Features are kept sorted by key (bytewise). */
typedef struct est_example {
  size_t count;
  size_t cap;
  est_feature *features;
} est_example;

void est_example_init(est_example *ex);
void est_example_clear(est_example *ex); /* frees everything; ex is empty and reusable */

/* Each set replaces an existing feature of the same key. Values are copied. */
est_status est_example_set_int64(est_example *ex, const char *key, const int64_t *v, size_t n);
/* An int64 list from int32 values (a feature row of ids, masks or labels), widened. */
est_status est_example_set_int32(est_example *ex, const char *key, const int32_t *v, size_t n);
est_status est_example_set_float(est_example *ex, const char *key, const float *v, size_t n);
est_status est_example_set_bytes(est_example *ex, const char *key, const est_bytes *v, size_t n);
/* A Feature with no kind set (serializes as `12 00`). */
est_status est_example_set_none(est_example *ex, const char *key);

const est_feature *est_example_find(const est_example *ex, const char *key);

/* Deterministic serialization (== TF's SerializeToString(deterministic=True)): keys sorted,
 * int64/float packed as one run, nothing emitted for an empty list, both key and value in
 * every map entry. An example with no features serializes to `0a 00` (features set).
 * *out is malloc'ed (free()). */
est_status est_example_serialize(const est_example *ex, uint8_t **out, size_t *size);
/* ex serialized as one record of w. */
est_status est_example_write(est_tfrecord_writer *w, const est_example *ex);

/* Generic parse of a serialized Example (any map order, packed or unpacked lists,
 * concatenation, unknown fields skipped) into ex, which is cleared first. Errors are
 * INVALID_ARGUMENT "Could not parse example input, value: '...'" (with a reason). */
est_status est_example_parse(est_example *ex, const uint8_t *data, size_t size);

/* One line of JSON: {"key": {"int64": [1, 2]}, "f": {"float": [0.5]}, "b": {"bytes": ["YWI="]}}
 * in key order; floats as %.9g (round-trips float32), bytes as base64, a kind-less feature
 * as {}. *json is malloc'ed and NUL-terminated. */
est_status est_example_to_json(const est_example *ex, char **json, size_t *size);

/* ---- parsing against feature specs (tf.io.parse_single_example) -------------------- */

typedef enum est_feature_spec_type {
  EST_FIXED_LEN = 0,          /* tf.io.FixedLenFeature(shape, dtype, default_value) */
  EST_VAR_LEN = 1,            /* tf.io.VarLenFeature(dtype) */
  EST_FIXED_LEN_SEQUENCE = 2, /* tf.io.FixedLenSequenceFeature(shape, dtype, allow_missing=True) */
} est_feature_spec_type;

typedef struct est_feature_spec {
  const char *key;
  est_dtype dtype;            /* EST_DT_INT64, EST_DT_FLOAT or EST_DT_STRING */
  int var_len;                /* an est_feature_spec_type */
  int rank;                   /* FixedLen / FixedLenSequence element shape; -1: "None" */
  int64_t shape[EST_MAX_RANK];
  /* FixedLen: prod(shape) elements of dtype (int64_t, float or est_bytes), or NULL for a
   * required feature. FixedLenSequence: one element, the padding value when batching
   * (est_dataset; NULL pads with 0 / ""); parsing one Example ignores it. */
  const void *default_value;
  size_t default_count;
} est_feature_spec;

/* Output of a VarLen or FixedLenSequence feature: `count` values of the spec's dtype in
 * `values` (int64_t / float / est_bytes). The buffer grows with realloc and is reused
 * across records; start from {0} and free `values` with free() when done. For
 * FixedLenSequence, count is n_rows * prod(shape). STRING values point into the
 * serialized input (valid as long as it is). */
typedef struct est_varlen_value {
  size_t count;
  size_t cap;
  void *values;
} est_varlen_value;

/* The checks tf.io does when the graph is built (parsing_config.py): dtype is one of the
 * three, the shape is given ("Missing shape for feature <key>") and fully defined, and a
 * default has exactly prod(shape) elements (FixedLenSequence: exactly one). INVALID_ARGUMENT with TF's wording otherwise. */
est_status est_feature_specs_validate(const est_feature_spec *specs, size_t n);

/* Deep copies of specs[0, n): every key and default value copied (a STRING default with its
 * bytes), so the copies outlive what they were made from (an input_fn keeps them: est/
 * estimator.h's ownership rule). NULL when out of memory. Free with est_feature_specs_free. */
est_feature_spec *est_feature_specs_copy(const est_feature_spec *specs, size_t n);
void est_feature_specs_free(est_feature_spec *specs, size_t n);

/* Parses one serialized Example against `specs` (validated beforehand). out[i]:
 *   FIXED_LEN: a buffer of prod(shape) elements of the dtype (int64_t, float, est_bytes),
 *              filled row-major; est_bytes point into `data` (zero copy).
 *   VAR_LEN / FIXED_LEN_SEQUENCE: an est_varlen_value *.
 * Errors are INVALID_ARGUMENT with TF's texts ("Feature: k (data type: int64) is
 * required but could not be found.", "Key: k.  Data types don't match. ...", "Key: k.
 * Can't parse serialized Example: Some int64_list slice was not parsed.", ...),
 * prefixed by "<record_desc>: " when record_desc is not NULL. */
est_status est_example_parse_specs(const est_feature_spec *specs, size_t n, const uint8_t *data,
                                   size_t size, void *const *out, const char *record_desc);

#ifdef __cplusplus
}
#endif
#endif
