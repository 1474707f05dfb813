/* Internals of the input pipeline (est/dataset.h), shared by its stage files:
 * source.c (records from files or memory, shard, repeat), shuffle.c (the buffer),
 * dataset.c's global sharding after the shuffle,
 * batch.c (parse into reusable batch buffers) and dataset.c (API, state, prefetch). */
#ifndef EST_DATA_DATASET_INTERNAL_H
#define EST_DATA_DATASET_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "est/dataset.h"
#include "est/rng.h"

/* One element on its way from the source to the batch: a serialized Example plus where it
 * came from (for error messages and for the resume state). `data` is valid until the next
 * call on the stage that returned it. */
typedef struct ds_element {
  const uint8_t *data;
  size_t size;
  int64_t file;     /* index into the file list (0 for memory) */
  int64_t offset;   /* byte offset of the record in the file (memory: record index) */
  int64_t record;   /* record index within the file */
} ds_element;

/* ---- source + shard + repeat ---------------------------------------------------- */

typedef struct ds_position {
  int64_t epoch;    /* completed passes over all files */
  int64_t file;     /* file being read */
  int64_t offset;   /* offset of its next record */
  int64_t record;   /* index of its next record */
  int64_t ordinal;  /* elements read in this epoch, before sharding */
  int64_t emitted;  /* elements kept in this epoch, after sharding */
  int64_t done;     /* 1 once the last epoch ended */
} ds_position;

/* run_pretraining's file interleave (interleave.c): the file list repeated (the source's
 * `repeat` counts passes over the list), optionally shuffled with a buffer of one list
 * (tf.data shuffle, its own Philox stream), read cycle_length files at a time, one record
 * from each open file in turn (tf.data interleave, block_length 1). */
typedef struct ds_cycle_slot {
  int64_t file;                 /* -1: empty */
  int64_t offset, record;       /* of its next record */
  est_tfrecord_reader *reader;  /* opened lazily at offset */
} ds_cycle_slot;

typedef struct ds_interleave {
  int cycle_length;             /* 0: not interleaving (files in order) */
  int shuffle_files;
  uint64_t seed;
  est_rng rng;
  int64_t taken;                /* entries taken from the repeated file list */
  int64_t *fbuf, fcount;        /* the file shuffle buffer [nfiles] */
  int64_t end_of_input;         /* the file stream has ended */
  ds_cycle_slot *slots;         /* [cycle_length] */
  int64_t cycle_index, num_open;
  uint8_t *known_empty;         /* [nfiles]: read to its end without a record (not in the state) */
  int64_t nknown_empty;
} ds_interleave;

typedef struct ds_source {
  /* files, or memory records (mem != NULL) */
  char **paths;
  size_t nfiles;
  est_compression compression;
  uint8_t *mem;
  size_t *mem_offset, *mem_size;
  size_t nmem;
  int num_shards, shard_index;
  /* 0: the records are sharded here (TF's Dataset.shard, before shuffle). > 0: global
   * sharding (est_dataset_shard_global_batches): the source passes every record and the
   * dataset keeps its slices of `shard_block` after shuffle. */
  int64_t shard_block;
  int64_t repeat;   /* -1 forever */
  ds_position pos;
  est_tfrecord_reader *reader;  /* NULL, or open on reader_file */
  int64_t reader_file;
  ds_interleave il;
} ds_source;

size_t ds_source_num_files(const ds_source *s);      /* memory counts as one file */
int64_t ds_source_fingerprint(const ds_source *s);   /* files, or memory records */
const char *ds_source_name(const ds_source *s, int64_t file);
est_status ds_source_next(ds_source *s, ds_element *e);  /* OUT_OF_RANGE at the end */
/* Reads the one record at (file, offset): restoring the shuffle buffer. */
est_status ds_source_read_at(ds_source *s, int64_t file, int64_t offset, ds_element *e);
void ds_source_close_reader(ds_source *s);
void ds_source_free(ds_source *s);

/* interleave.c. configure: files only, cycle_length >= 1 (reconfiguring replaces). */
est_status ds_interleave_configure(ds_source *s, int cycle_length, int shuffle_files, uint64_t seed);
est_status ds_interleave_next(ds_source *s, ds_element *e);
void ds_interleave_free(ds_interleave *il);
/* The resume block after the shuffle slots: 0 values when not interleaving. save writes
 * it; check validates one against this configuration; restore applies a checked one. */
size_t ds_interleave_state_size(const ds_source *s);
void ds_interleave_save(const ds_source *s, int64_t *block);
est_status ds_interleave_check(const ds_source *s, const int64_t *block);
void ds_interleave_restore(ds_source *s, const int64_t *block);

/* ---- shuffle -------------------------------------------------------------------- */

typedef struct ds_slot {
  uint8_t *data;
  size_t size, cap;
  int64_t file, offset, record;
} ds_slot;

typedef struct ds_shuffle {
  int64_t buffer_size;   /* 0: no shuffle stage */
  uint64_t seed;
  est_rng rng;
  ds_slot *slots;        /* buffer_size + 1: the extra one holds the element just output */
  int64_t count;
} ds_shuffle;

est_status ds_shuffle_init(ds_shuffle *sh);
est_status ds_shuffle_next(ds_shuffle *sh, ds_source *src, ds_element *e);
/* Copies an element into slot k (restore). */
est_status ds_shuffle_store(ds_shuffle *sh, int64_t k, const ds_element *e);
void ds_shuffle_free(ds_shuffle *sh);

/* ---- parse + batch -------------------------------------------------------------- */

typedef struct ds_features {
  est_feature_spec *specs;   /* keys owned; defaults owned (STRING: est_bytes + their bytes in one block) */
  size_t n;
  int cast_int32;
  size_t *elems;             /* FixedLen: values per row; FixedLenSequence: per sequence step; VarLen: 1 */
  est_dtype *out_dtype;      /* what the batch holds */
  int64_t **scratch_i64;     /* FixedLen int64 cast to int32: one row */
  est_varlen_value *var;     /* VarLen / FixedLenSequence: this record's values */
  void **out;                /* parse targets for est_example_parse_specs */
  void **tensor_data;        /* from_tensors: owned copies, [rows, elems]; element i = row i */
} ds_features;

typedef struct ds_batchbuf {
  est_batch batch;           /* the public view */
  est_tensor *tensors;
  const char **names;
  const int64_t **lengths_view;
  void **fixed;              /* FixedLen: [batch_size, elems] */
  int64_t **lengths;         /* VarLen: values per row; FixedLenSequence: steps per row; [batch_size] */
  void **values;             /* VarLen / FixedLenSequence: values of all rows, concatenated */
  size_t *nvalues, *values_cap;
  void **dense;              /* VarLen: [size, max_len]; FixedLenSequence: [size, max_steps, elems]; padded */
  size_t *dense_cap;
  /* STRING features: the bytes of every value of this batch, in value order (row by
   * row, element by element), copied out of the records. While parsing, the est_bytes
   * in fixed / values hold sizes only (data NULL); finish points them into the arena by
   * a running offset, so the arena may move while it grows. Reused batch after batch:
   * steady state allocates nothing. */
  uint8_t **arena;
  size_t *arena_len, *arena_cap;
  /* filled by the producer with the batch */
  est_status status;
  char message[1024];
  int64_t *state;
} ds_batchbuf;

est_status ds_features_init(ds_features *f, const est_feature_spec *specs, size_t n, int cast);
/* from_tensors: FixedLen specs from the tensors' shapes, their data copied. */
est_status ds_features_init_tensors(ds_features *f, const char *const *names, const est_tensor *tensors, size_t n);
/* Delivers int64 feature `key` as int32 from now on. */
est_status ds_features_cast_int32(ds_features *f, const char *key);
void ds_features_free(ds_features *f);
est_status ds_batchbuf_init(ds_batchbuf *b, const ds_features *f, int batch_size, size_t state_len);
void ds_batchbuf_free(ds_batchbuf *b, const ds_features *f);
void ds_batchbuf_begin(ds_batchbuf *b, const ds_features *f);
/* Parses one element into row b->batch.size (not yet counted). `name` names its source. */
est_status ds_batchbuf_parse(ds_batchbuf *b, ds_features *f, const ds_element *e, const char *name);
/* Sets every tensor's leading dimension (and pads VarLen rows) for b->batch.size rows. */
est_status ds_batchbuf_finish(ds_batchbuf *b, const ds_features *f);

#endif
