/* Inputs for the Estimator built on est/dataset.h: the adapter from a dataset to the
 * est_input contract, and the TFRecord input_fn (BERT's file_based_input_fn_builder, and
 * run_pretraining's input_fn_builder with its options). */
#include <stdlib.h>
#include <string.h>

#include "est/dataset.h"
#include "est/estimator.h"

static est_status ds_next(void *self, est_features *out) {
  const est_batch *b;
  est_status st = est_dataset_next(self, &b);
  if (st != EST_OK) return st;
  *out = (est_features){
    .batch_size = b->size, .count = b->count, .names = b->names, .tensors = b->tensors, .lengths = b->lengths};
  return EST_OK;
}

static size_t ds_state_size(void *self) { return est_dataset_state_size(self); }

static est_status ds_get_state(void *self, int64_t *state, size_t capacity, size_t *n) {
  return est_dataset_get_state(self, state, capacity, n);
}

static est_status ds_set_state(void *self, const int64_t *state, size_t n) {
  return est_dataset_set_state(self, state, n);
}

static void ds_close(void *self) { est_dataset_free(self); }

est_status est_input_from_dataset(est_dataset *ds, est_input *out) {
  if (!ds) return est_error(EST_ERR_INVALID_ARGUMENT, "est_input_from_dataset: no dataset");
  *out = (est_input){.self = ds, .next = ds_next, .state_size = ds_state_size, .get_state = ds_get_state,
                     .set_state = ds_set_state, .close = ds_close};
  return EST_OK;
}

est_status est_input_shard_dataset(est_dataset *ds, const est_input_params *p) {
  if (p->num_shards <= 1) return EST_OK;
  if (p->mode == EST_MODE_TRAIN && p->sharding == EST_INPUT_SHARDING_GLOBAL)
    return est_dataset_shard_global_batches(ds, p->num_shards, p->shard_index, p->batch_size);
  return est_dataset_shard(ds, p->num_shards, p->shard_index);
}

static est_status tfrecord_open(void *ctx, const est_input_params *p, est_input *out) {
  const est_tfrecord_input *c = ctx;
  est_dataset *ds;
  est_status st = est_dataset_from_tfrecords(&ds, c->paths, c->num_paths, (est_compression)c->compression);
  if (st != EST_OK) return st;
  const int training = p->mode == EST_MODE_TRAIN;
  const int repeat = training || (p->mode == EST_MODE_EVAL && c->eval_repeat);
  st = est_dataset_parse(ds, c->specs, c->num_specs, c->cast);
  /* the file shuffle draws from its own stream: "files" in ASCII, xor the run's seed */
  if (st == EST_OK && training && c->interleave_cycle_length > 0)
    st = est_dataset_interleave(ds, c->interleave_cycle_length, 1, p->seed ^ 0x66696c6573ull);
  if (st == EST_OK) st = est_input_shard_dataset(ds, p);
  if (st == EST_OK && repeat) st = est_dataset_repeat(ds, -1);
  if (st == EST_OK && training && c->shuffle_buffer > 1) st = est_dataset_shuffle(ds, c->shuffle_buffer, p->seed);
  if (st == EST_OK) st = est_dataset_batch(ds, p->batch_size, training ? 1 : c->drop_remainder);
  if (st == EST_OK && c->prefetch > 0) st = est_dataset_prefetch(ds, c->prefetch);
  if (st != EST_OK) {
    est_dataset_free(ds);
    return st;
  }
  return est_input_from_dataset(ds, out);
}

est_input_fn est_tfrecord_input_fn(const est_tfrecord_input *config) {
  return (est_input_fn){.open = tfrecord_open, .ctx = (void *)config};
}
