/* est/dataset.h — the input pipeline (tf.data as BERT's input_fn uses it), resumable.
 *
 *     // BERT's training input: file -> repeat forever -> shuffle(100) -> parse -> batch
 *     est_feature_spec specs[] = {
 *       {.key = "input_ids",   .dtype = EST_DT_INT64, .rank = 1, .shape = {128}},
 *       {.key = "input_mask",  .dtype = EST_DT_INT64, .rank = 1, .shape = {128}},
 *       {.key = "segment_ids", .dtype = EST_DT_INT64, .rank = 1, .shape = {128}},
 *       {.key = "label_ids",   .dtype = EST_DT_INT64, .rank = 0},
 *       {.key = "is_real_example", .dtype = EST_DT_INT64, .rank = 0},
 *     };
 *     const char *files[] = {"train.tf_record"};
 *     est_dataset *ds;
 *     est_dataset_from_tfrecords(&ds, files, 1, EST_COMPRESSION_NONE);  // NOT_FOUND: names the file
 *     est_dataset_parse(ds, specs, 5, EST_DATASET_CAST_INT32);            // every int64 -> int32
 *     est_dataset_shard_global_batches(ds, world_size, rank, 32);         // data parallel
 *     est_dataset_repeat(ds, -1);
 *     est_dataset_shuffle(ds, 100, seed);
 *     est_dataset_batch(ds, 32, 1);                                       // drop_remainder
 *     est_dataset_prefetch(ds, 2);                                        // background thread
 *     const est_batch *b; est_status st;
 *     while ((st = est_dataset_next(ds, &b)) == EST_OK) {
 *       const est_tensor *ids = est_batch_feature(b, "input_ids");      // int32 [b->size, 128]
 *       ...
 *       if (checkpointing) est_dataset_get_state(ds, state, cap, &n);   // position after b
 *     }
 *     if (st != EST_ERR_OUT_OF_RANGE) fail(est_error_message());
 *     est_dataset_free(ds);
 *
 * The stages always run in this order, whatever order they are configured in:
 *   source (files in order, or in-memory records) -> shard -> repeat -> shuffle
 *   -> global shard -> parse -> batch -> prefetch.
 * With est_dataset_interleave the source is run_pretraining's: the file LIST is repeated
 * (and shuffled), then the files are read k at a time, a record from each in turn; shard
 * and shuffle follow as above.
 * That is BERT's training order (repeat before shuffle, so epochs blur). Data parallelism
 * has two orders (one of the two shard stages is used, the one configured last):
 *   - global (est_dataset_shard_global_batches): every rank reads and shuffles the WHOLE
 *     input with the same seed, so all hold the same stream, and rank r of N keeps the
 *     r-th slice of per_shard elements of every N * per_shard: with batch(per_shard)
 *     its k-th batch is elements [k*N*b + r*b, k*N*b + (r+1)*b) of that stream (b =
 *     per_shard), i.e. rows [r*b, (r+1)*b) of the k-th batch of N*b that ONE process
 *     reading the same input unsharded gets. N ranks thus train on exactly the batches
 *     of one process (PyTorch's DistributedSampler does the same over a shuffled index).
 *     Costs: every rank reads every record (CRC + copy into its shuffle buffer; only its
 *     own are parsed), so input I/O is N times one process's, and the shuffle buffer is
 *     per rank over the whole input.
 *   - shard first (est_dataset_shard, TF's record-level sharding): every rank reads all
 *     files and keeps elements i with i % num_shards == index, counted within each
 *     epoch, then repeats and shuffles its own shard: disjoint data per rank and 1/N of
 *     the parsing and buffering, but the batches depend on the number of ranks.
 *
 * Shuffle is tf.data's: a buffer of N elements; each output is a uniformly random buffer
 * element (Philox stream keyed by the seed), whose place is taken by the last one; the
 * buffer is refilled from upstream before every pick. Deterministic for a given seed.
 *
 * Exact resume: est_dataset_get_state writes the position after the last batch returned
 * as a fixed-length int64 array (est_dataset_state_size(ds) values: counters, file index,
 * byte offset, epoch, RNG position, and the (file, offset, record) of every element in the
 * shuffle buffer). est_dataset_set_state on a dataset configured the same way re-reads
 * those buffered records by offset and continues with exactly the batches the original
 * run would have produced. A state from a differently configured dataset is refused
 * (FAILED_PRECONDITION naming the setting). Store it as an int64 tensor in a checkpoint.
 *
 * Batches are buffers owned by the dataset, reused: a batch stays valid until the next
 * est_dataset_next / set_state / free. Nothing is allocated per batch in steady state.
 * Errors name the file and record ("eval.tf_record record 17: Feature: label_ids (data
 * type: int64) is required but could not be found."); after an error the dataset keeps
 * returning it (until set_state). A FixedLenSequence feature whose value count is not a
 * multiple of prod(shape) fails as parse_single_example does ("f.tf_record record 3: Error
 * while parsing feature with key k: number of elements should be divisible by 2, found 3
 * instead").
 */
#ifndef EST_DATASET_H
#define EST_DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "est/example.h"
#include "est/status.h"
#include "est/tensor.h"
#include "est/tfrecord.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct est_dataset est_dataset;

/* One batch. Its fields match est_features (estimator.h) field for field.
 *   FixedLen          [size, shape...]; a missing feature takes its default_value.
 *   VarLen            [size, max_len]: row r holds lengths[r] values, then 0 / "" padding
 *                     (tf.sparse.to_dense of VarLenFeature's SparseTensor).
 *   FixedLenSequence  [size, max_steps, shape...]: row r holds lengths[r] steps of
 *                     prod(shape) values, then the padding value (spec default_value, or
 *                     0 / ""), as tf.io.parse_example pads; a missing feature has 0 steps.
 * STRING tensors hold est_bytes whose bytes belong to the batch (data never NULL, not
 * NUL-terminated); like the tensors, they stay valid until the next batch. */
typedef struct est_batch {
  int size;                       /* rows; < batch_size only for a final partial batch */
  size_t count;                   /* features, in spec order */
  const char *const *names;
  const est_tensor *tensors;
  const int64_t *const *lengths;  /* per feature: NULL for FixedLen; else [size] values / steps per row */
} est_batch;

/* ---- sources ---------------------------------------------------------------------- */

/* TFRecord files, read in the given order. Every path must exist now (NOT_FOUND names
 * the first that does not); paths are copied. */
est_status est_dataset_from_tfrecords(est_dataset **out, const char *const *paths, size_t n, est_compression c);

/* n serialized tf.train.Example records held in memory (copied): prediction on a user's
 * own inputs. Error messages call them "<memory> record <i>". */
est_status est_dataset_from_memory(est_dataset **out, const est_bytes *records, size_t n);

/* Same, from Examples (serialized here). */
est_status est_dataset_from_examples(est_dataset **out, const est_example *examples, size_t n);

/* tf.data.Dataset.from_tensor_slices({name: tensor}): n named tensors (copied) of dtype
 * INT32, INT64 or FLOAT that share their first dimension; element i is row i of each.
 * Batches hold the tensors' dtypes and shapes. Needs (and allows) no est_dataset_parse;
 * BERT's input_fn_builder for a user's own examples is this. */
est_status est_dataset_from_tensors(est_dataset **out, const char *const *names, const est_tensor *tensors,
                                    size_t n);

void est_dataset_free(est_dataset *ds); /* NULL is fine; stops the prefetch thread */

/* ---- stages (configure before the first est_dataset_next) -------------------------- */

enum {
  EST_DATASET_CAST_NONE = 0,
  EST_DATASET_CAST_INT32 = 1, /* every int64 feature is delivered as int32 (tf.to_int32);
                               * a value outside int32 is an error, never wrapped */
};

/* Feature specs (copied, string defaults included; validated with
 * est_feature_specs_validate). FixedLen, VarLen and FixedLenSequence of int64, float or
 * string (see est_batch for what each gives). cast: EST_DATASET_CAST_*. Record sources
 * need it (next() fails without); a from_tensors dataset refuses it. */
est_status est_dataset_parse(est_dataset *ds, const est_feature_spec *specs, size_t n, int cast);

/* Casts just the named int64 features to int32 (after est_dataset_parse, which then
 * normally has EST_DATASET_CAST_NONE). NOT_FOUND for a key not in the specs,
 * INVALID_ARGUMENT for one that is not int64. */
est_status est_dataset_cast_int32(est_dataset *ds, const char *const *keys, size_t n);

/* Shard first (TF's Dataset.shard on the records): keep elements i with
 * i % num_shards == index, before repeat and shuffle. */
est_status est_dataset_shard(est_dataset *ds, int num_shards, int index);

/* Global sharding: after repeat and shuffle, keep the elements i of the stream with
 * (i / per_shard) % num_shards == index (see above: with batch(per_shard), this rank's
 * slice of every global batch of num_shards * per_shard). per_shard >= 1. */
est_status est_dataset_shard_global_batches(est_dataset *ds, int num_shards, int index, int64_t per_shard);

/* google-research/bert run_pretraining.py's training files:
 *     from_tensor_slices(files).repeat().shuffle(len(files)).interleave(TFRecordDataset, k)
 * The list of files is repeated (est_dataset_repeat counts passes over the list), with
 * shuffle_files it passes a shuffle buffer of one list's length (tf.data's algorithm, a
 * Philox stream from `seed`, independent of est_dataset_shuffle's), and cycle_length files
 * are read at once, one record from each in turn (tf.data.Dataset.interleave with
 * block_length 1: at a file's end its slot takes the next file of the stream when the turn
 * comes back to it). The reference uses parallel_interleave(sloppy=True), whose order
 * depends on timing; est's is that deterministic one, src/data/interleave.c gives the
 * details. Files only (FAILED_PRECONDITION for memory); cycle_length in [1, 4096]. With
 * repeat -1 and every file empty the stream ends. The resume state covers the file stream
 * and every open file's position. */
est_status est_dataset_interleave(est_dataset *ds, int cycle_length, int shuffle_files, uint64_t seed);

/* count epochs; -1 forever (an empty input still ends). Default 1; 0 gives no data. */
est_status est_dataset_repeat(est_dataset *ds, int64_t count);

/* buffer_size >= 1 (1 = no shuffling); not called = no shuffle. */
est_status est_dataset_shuffle(est_dataset *ds, int64_t buffer_size, uint64_t seed);

/* batch_size >= 1. drop_remainder: a final short batch is dropped rather than returned. */
est_status est_dataset_batch(est_dataset *ds, int batch_size, int drop_remainder);

/* Produce up to `depth` batches ahead on a background thread (0: synchronous, default). */
est_status est_dataset_prefetch(est_dataset *ds, int depth);

/* ---- iteration -------------------------------------------------------------------- */

/* EST_OK and *batch; EST_ERR_OUT_OF_RANGE at the end (again on every later call); any
 * other code is an input error with its message. */
est_status est_dataset_next(est_dataset *ds, const est_batch **batch);

/* The feature called `name` in a batch, or NULL. */
const est_tensor *est_batch_feature(const est_batch *b, const char *name);
/* The row lengths of VarLen / FixedLenSequence feature `name`, or NULL (FixedLen or absent). */
const int64_t *est_batch_lengths(const est_batch *b, const char *name);

/* ---- exact resume ----------------------------------------------------------------- */

enum { EST_DATASET_STATE_HEADER = 24 };

/* Length of the state array: EST_DATASET_STATE_HEADER + 3 * shuffle buffer size (+ 10 +
 * files + 3 * cycle_length with est_dataset_interleave). Fixed once configured. */
size_t est_dataset_state_size(const est_dataset *ds);

/* Position after the last batch returned (the start, before any). capacity must be at
 * least est_dataset_state_size (INVALID_ARGUMENT otherwise); *n receives that size.
 * Signature as est_input.get_state. */
est_status est_dataset_get_state(est_dataset *ds, int64_t *state, size_t capacity, size_t *n);

/* Continue from a saved position. Any batches produced ahead are discarded. Errors: a
 * malformed array (INVALID_ARGUMENT), another configuration (FAILED_PRECONDITION), a
 * buffered record that cannot be read back (the reader's error: file + offset). */
est_status est_dataset_set_state(est_dataset *ds, const int64_t *state, size_t n);

/* Batches returned so far (after set_state: as recorded in the state). */
int64_t est_dataset_batches_produced(const est_dataset *ds);

#ifdef __cplusplus
}
#endif
#endif
