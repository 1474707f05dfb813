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

/* The input_fn's own copy of its est_tfrecord_input (est/estimator.h's ownership rule):
 * config's paths and specs point into paths / specs here. */
typedef struct tfrecord_ctx {
  est_tfrecord_input config;
  char **paths;
  est_feature_spec *specs;
} tfrecord_ctx;

static est_status tfrecord_open(void *ctx, const est_input_params *p, est_input *out) {
  const est_tfrecord_input *c = &((const tfrecord_ctx *)ctx)->config;
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

static void tfrecord_release(void *ctx) {
  tfrecord_ctx *t = ctx;
  if (!t) return;
  for (size_t i = 0; t->paths && i < t->config.num_paths; i++) free(t->paths[i]);
  free(t->paths);
  est_feature_specs_free(t->specs, t->config.num_specs);
  free(t);
}

/* What est_tfrecord_input_fn returns when it could not copy its config: every open says so. */
static est_status tfrecord_no_memory(void *ctx, const est_input_params *p, est_input *out) {
  (void)ctx, (void)p, (void)out;
  return est_error(EST_ERR_NO_MEMORY, "out of memory copying the TFRecord input's config (file names and specs)");
}

est_input_fn est_tfrecord_input_fn(const est_tfrecord_input *config) {
  tfrecord_ctx *t = calloc(1, sizeof *t);
  if (!t) return (est_input_fn){.open = tfrecord_no_memory};
  t->config = *config;
  t->config.paths = NULL;
  t->config.specs = NULL;
  int ok = (t->paths = calloc(config->num_paths ? config->num_paths : 1, sizeof *t->paths)) != NULL;
  for (size_t i = 0; ok && config->paths && i < config->num_paths; i++)
    ok = !config->paths[i] || (t->paths[i] = strdup(config->paths[i])) != NULL;
  /* a NULL path stays NULL (est_dataset_from_tfrecords names it when the input is opened),
   * and so do NULL specs (est_dataset_parse refuses them) */
  ok = ok && (!config->specs || (t->specs = est_feature_specs_copy(config->specs, config->num_specs)) != NULL);
  if (!ok) {
    tfrecord_release(t);
    return (est_input_fn){.open = tfrecord_no_memory};
  }
  t->config.paths = (const char *const *)t->paths;
  t->config.specs = config->specs ? t->specs : NULL;
  return (est_input_fn){.open = tfrecord_open, .ctx = t, .release = tfrecord_release};
}

void est_input_fn_release(est_input_fn *fn) {
  if (!fn) return;
  if (fn->release) fn->release(fn->ctx);
  *fn = (est_input_fn){0};
}
