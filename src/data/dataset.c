/* The dataset object: configuration, the producer (shuffle/source -> parse -> batch), the
 * prefetch thread with its ring of batch buffers, and the resume state.
 *
 * Threading: with prefetch, one background thread runs produce() into free buffers and
 * queues them; the consumer takes them in order and returns each to the free list on its
 * next call. Every produced buffer carries the state snapshot taken right after it was
 * made, so get_state describes exactly what the consumer has seen, however far ahead the
 * producer runs. Producer-side fields (source, shuffle, counters, features scratch) are
 * touched only by whoever runs produce(): the thread while it lives, else the caller. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/dataset_internal.h"

/* State layout (est_dataset_state_size values). Configuration first, checked on restore. */
enum {
  S_MAGIC, S_LENGTH, S_SOURCES, S_BATCH_SIZE, S_DROP_REMAINDER, S_BUFFER_SIZE, S_SEED, S_NUM_SHARDS,
  S_SHARD_INDEX, S_REPEAT,
  S_BATCHES, S_ELEMENTS, S_FINISHED,
  S_EPOCH, S_FILE, S_OFFSET, S_RECORD, S_ORDINAL, S_EMITTED, S_SOURCE_DONE,
  S_RNG_POSITION, S_SHUFFLE_COUNT,
  /* Global sharding: its block (0 = none: a state from before it existed reads as that)
   * and the elements seen after the shuffle. num_shards / shard_index above are its N, r. */
  S_SHARD_BLOCK, S_GLOBAL_POSITION,
  S_SLOTS = EST_DATASET_STATE_HEADER, /* then (file, offset, record) per buffered element */
};
static const int64_t STATE_MAGIC = 0x4553544453000001; /* "ESTDS", version 1 */
_Static_assert((int)S_GLOBAL_POSITION < (int)EST_DATASET_STATE_HEADER, "state header overflow");

struct est_dataset {
  /* configuration */
  ds_source src;
  ds_shuffle sh;
  ds_features feat;
  int parsed;
  int from_tensors;   /* features come from est_dataset_from_tensors, not from parsing */
  int batch_size, drop_remainder, prefetch;
  int started;
  est_status start_error; /* allocation failed in start(): repeated */
  size_t state_len;

  /* producer side */
  int64_t batches, elements;
  int64_t global_position;  /* elements out of the shuffle so far (global sharding) */
  int finished;

  /* buffers and queues (guarded by mu while the thread runs) */
  ds_batchbuf *bufs;
  int nbufs;
  int *ready;          /* FIFO of buffer indices */
  int ready_head, ready_count;
  int *free_list;
  int free_count;
  pthread_mutex_t mu;
  pthread_cond_t cv_ready, cv_free;
  pthread_t thread;
  int thread_running, stop;

  /* consumer side */
  int held;            /* buffer the caller holds, or -1 */
  int64_t *cstate;     /* state after the last batch returned */
  int64_t cbatches;
  est_status sticky;   /* end or error already returned: repeat it */
  char sticky_msg[1024];
};

/* ---- creation and configuration ---------------------------------------------------- */

static est_status new_dataset(est_dataset **out) {
  est_dataset *ds = calloc(1, sizeof *ds);
  if (!ds) return est_error(EST_ERR_NO_MEMORY, "out of memory creating a dataset");
  ds->src.repeat = 1;
  ds->src.num_shards = 1;
  ds->src.reader_file = -1;
  ds->batch_size = 1;
  ds->held = -1;
  pthread_mutex_init(&ds->mu, NULL);
  pthread_cond_init(&ds->cv_ready, NULL);
  pthread_cond_init(&ds->cv_free, NULL);
  *out = ds;
  return EST_OK;
}

est_status est_dataset_from_tfrecords(est_dataset **out, const char *const *paths, size_t n, est_compression c) {
  est_status st;
  *out = NULL;
  /* Fail now, naming the file, rather than at the first read somewhere in training. */
  for (size_t i = 0; i < n; i++) {
    if (!paths[i]) return est_error(EST_ERR_INVALID_ARGUMENT, "dataset: input file %zu is NULL", i);
    est_tfrecord_reader *r;
    if ((st = est_tfrecord_reader_open(&r, paths[i], c))) return st;
    est_tfrecord_reader_close(r);
  }
  est_dataset *ds = NULL;
  if ((st = new_dataset(&ds))) return st;
  ds->src.compression = c;
  ds->src.paths = calloc(n ? n : 1, sizeof *ds->src.paths);
  if (!ds->src.paths) goto oom;
  for (size_t i = 0; i < n; i++) {
    if (!(ds->src.paths[i] = strdup(paths[i]))) goto oom;
    ds->src.nfiles = i + 1;
  }
  *out = ds;
  return EST_OK;
oom:
  est_dataset_free(ds);
  return est_error(EST_ERR_NO_MEMORY, "out of memory creating a dataset");
}

est_status est_dataset_from_memory(est_dataset **out, const est_bytes *records, size_t n) {
  est_status st;
  *out = NULL;
  est_dataset *ds = NULL;
  if ((st = new_dataset(&ds))) return st;
  size_t total = 0;
  for (size_t i = 0; i < n; i++) total += records[i].size;
  ds->src.mem = malloc(total + 1);
  ds->src.mem_offset = calloc(n + 1, sizeof(size_t));
  ds->src.mem_size = calloc(n + 1, sizeof(size_t));
  if (!ds->src.mem || !ds->src.mem_offset || !ds->src.mem_size) {
    est_dataset_free(ds);
    return est_error(EST_ERR_NO_MEMORY, "out of memory copying %zu records (%zu bytes)", n, total);
  }
  size_t off = 0;
  for (size_t i = 0; i < n; i++) {
    if (records[i].size) memcpy(ds->src.mem + off, records[i].data, records[i].size);
    ds->src.mem_offset[i] = off;
    ds->src.mem_size[i] = records[i].size;
    off += records[i].size;
  }
  ds->src.nmem = n;
  *out = ds;
  return EST_OK;
}

est_status est_dataset_from_examples(est_dataset **out, const est_example *examples, size_t n) {
  est_status st = EST_OK;
  *out = NULL;
  est_bytes *recs = calloc(n ? n : 1, sizeof *recs);
  if (!recs) return est_error(EST_ERR_NO_MEMORY, "out of memory serializing %zu examples", n);
  for (size_t i = 0; i < n && !st; i++)
    if ((st = est_example_serialize(&examples[i], &recs[i].data, &recs[i].size)))
      est_error_prefix("example %zu: ", i);
  if (!st) st = est_dataset_from_memory(out, recs, n);
  for (size_t i = 0; i < n; i++) free(recs[i].data);
  free(recs);
  return st;
}

est_status est_dataset_from_tensors(est_dataset **out, const char *const *names, const est_tensor *tensors,
                                    size_t n) {
  est_status st;
  *out = NULL;
  est_dataset *ds = NULL;
  if ((st = new_dataset(&ds))) return st;
  if ((st = ds_features_init_tensors(&ds->feat, names, tensors, n))) {
    est_dataset_free(ds);
    return st;
  }
  ds->parsed = 1;
  /* The element source is the memory one with empty records: an element is its row
   * index (the offset), which is also all the resume state needs. */
  size_t rows = (size_t)tensors[0].dims[0];
  ds->src.mem = malloc(1);
  ds->src.mem_offset = calloc(rows + 1, sizeof(size_t));
  ds->src.mem_size = calloc(rows + 1, sizeof(size_t));
  if (!ds->src.mem || !ds->src.mem_offset || !ds->src.mem_size) {
    est_dataset_free(ds);
    return est_error(EST_ERR_NO_MEMORY, "out of memory creating a dataset of %zu rows", rows);
  }
  ds->src.nmem = rows;
  ds->from_tensors = 1;
  *out = ds;
  return EST_OK;
}

static est_status configurable(const est_dataset *ds, const char *what) {
  if (ds->started)
    return est_error(EST_ERR_FAILED_PRECONDITION, "dataset: %s must be configured before the first batch is read", what);
  return EST_OK;
}

est_status est_dataset_parse(est_dataset *ds, const est_feature_spec *specs, size_t n, int cast) {
  est_status st;
  if ((st = configurable(ds, "parse"))) return st;
  if (ds->from_tensors)
    return est_error(EST_ERR_FAILED_PRECONDITION, "dataset parse: a from_tensors dataset holds parsed values already");
  if (cast != EST_DATASET_CAST_NONE && cast != EST_DATASET_CAST_INT32)
    return est_error(EST_ERR_INVALID_ARGUMENT, "dataset parse: unknown cast %d", cast);
  if (ds->parsed) ds_features_free(&ds->feat);
  ds->parsed = 0;
  if ((st = ds_features_init(&ds->feat, specs, n, cast))) return st;
  ds->parsed = 1;
  return EST_OK;
}

est_status est_dataset_cast_int32(est_dataset *ds, const char *const *keys, size_t n) {
  est_status st;
  if ((st = configurable(ds, "cast"))) return st;
  if (!ds->parsed || ds->from_tensors)
    return est_error(EST_ERR_FAILED_PRECONDITION, "dataset cast: call est_dataset_parse first");
  for (size_t i = 0; i < n; i++)
    if ((st = ds_features_cast_int32(&ds->feat, keys[i]))) return st;
  return EST_OK;
}

est_status est_dataset_shard(est_dataset *ds, int num_shards, int index) {
  est_status st;
  if ((st = configurable(ds, "shard"))) return st;
  if (num_shards < 1 || index < 0 || index >= num_shards)
    return est_error(EST_ERR_INVALID_ARGUMENT, "dataset shard: index %d is not in [0, num_shards %d)", index, num_shards);
  ds->src.num_shards = num_shards;
  ds->src.shard_index = index;
  ds->src.shard_block = 0;
  return EST_OK;
}

est_status est_dataset_shard_global_batches(est_dataset *ds, int num_shards, int index, int64_t per_shard) {
  est_status st;
  if ((st = configurable(ds, "shard"))) return st;
  if (num_shards < 1 || index < 0 || index >= num_shards)
    return est_error(EST_ERR_INVALID_ARGUMENT, "dataset shard: index %d is not in [0, num_shards %d)", index, num_shards);
  if (per_shard < 1 || per_shard > (INT64_C(1) << 40))
    return est_error(EST_ERR_INVALID_ARGUMENT, "dataset shard: per_shard %lld must be >= 1", (long long)per_shard);
  ds->src.num_shards = num_shards;
  ds->src.shard_index = index;
  ds->src.shard_block = per_shard;
  return EST_OK;
}

est_status est_dataset_interleave(est_dataset *ds, int cycle_length, int shuffle_files, uint64_t seed) {
  est_status st;
  if ((st = configurable(ds, "interleave"))) return st;
  return ds_interleave_configure(&ds->src, cycle_length, shuffle_files, seed);
}

est_status est_dataset_repeat(est_dataset *ds, int64_t count) {
  est_status st;
  if ((st = configurable(ds, "repeat"))) return st;
  if (count < -1) return est_error(EST_ERR_INVALID_ARGUMENT, "dataset repeat: count %lld (use -1 for forever)", (long long)count);
  ds->src.repeat = count;
  return EST_OK;
}

est_status est_dataset_shuffle(est_dataset *ds, int64_t buffer_size, uint64_t seed) {
  est_status st;
  if ((st = configurable(ds, "shuffle"))) return st;
  if (buffer_size < 1 || buffer_size > (INT64_C(1) << 26))
    return est_error(EST_ERR_INVALID_ARGUMENT, "dataset shuffle: buffer_size %lld outside [1, 2^26]", (long long)buffer_size);
  ds->sh.buffer_size = buffer_size;
  ds->sh.seed = seed;
  return EST_OK;
}

est_status est_dataset_batch(est_dataset *ds, int batch_size, int drop_remainder) {
  est_status st;
  if ((st = configurable(ds, "batch"))) return st;
  if (batch_size < 1) return est_error(EST_ERR_INVALID_ARGUMENT, "dataset batch: batch_size %d must be >= 1", batch_size);
  ds->batch_size = batch_size;
  ds->drop_remainder = drop_remainder != 0;
  return EST_OK;
}

est_status est_dataset_prefetch(est_dataset *ds, int depth) {
  est_status st;
  if ((st = configurable(ds, "prefetch"))) return st;
  if (depth < 0 || depth > 1024) return est_error(EST_ERR_INVALID_ARGUMENT, "dataset prefetch: depth %d outside [0, 1024]", depth);
  ds->prefetch = depth;
  return EST_OK;
}

size_t est_dataset_state_size(const est_dataset *ds) {
  return EST_DATASET_STATE_HEADER + 3 * (size_t)ds->sh.buffer_size + ds_interleave_state_size(&ds->src);
}

int64_t est_dataset_batches_produced(const est_dataset *ds) { return ds->cbatches; }

/* ---- producing batches ------------------------------------------------------------ */

static void capture_state(const est_dataset *ds, int64_t *s) {
  memset(s, 0, ds->state_len * sizeof *s);
  const ds_position *p = &ds->src.pos;
  s[S_MAGIC] = STATE_MAGIC;
  s[S_LENGTH] = (int64_t)ds->state_len;
  s[S_SOURCES] = ds_source_fingerprint(&ds->src);
  s[S_BATCH_SIZE] = ds->batch_size;
  s[S_DROP_REMAINDER] = ds->drop_remainder;
  s[S_BUFFER_SIZE] = ds->sh.buffer_size;
  s[S_SEED] = (int64_t)ds->sh.seed;
  s[S_NUM_SHARDS] = ds->src.num_shards;
  s[S_SHARD_INDEX] = ds->src.shard_index;
  s[S_REPEAT] = ds->src.repeat;
  s[S_BATCHES] = ds->batches;
  s[S_ELEMENTS] = ds->elements;
  s[S_FINISHED] = ds->finished;
  s[S_EPOCH] = p->epoch;
  s[S_FILE] = p->file;
  s[S_OFFSET] = p->offset;
  s[S_RECORD] = p->record;
  s[S_ORDINAL] = p->ordinal;
  s[S_EMITTED] = p->emitted;
  s[S_SOURCE_DONE] = p->done;
  s[S_RNG_POSITION] = (int64_t)ds->sh.rng.position;
  s[S_SHUFFLE_COUNT] = ds->sh.count;
  s[S_SHARD_BLOCK] = ds->src.shard_block;
  s[S_GLOBAL_POSITION] = ds->global_position;
  for (int64_t k = 0; k < ds->sh.buffer_size; k++) {
    int64_t *slot = &s[S_SLOTS + 3 * k];
    if (k < ds->sh.count) {
      slot[0] = ds->sh.slots[k].file;
      slot[1] = ds->sh.slots[k].offset;
      slot[2] = ds->sh.slots[k].record;
    } else {
      slot[0] = slot[1] = slot[2] = -1;
    }
  }
  ds_interleave_save(&ds->src, &s[S_SLOTS + 3 * ds->sh.buffer_size]);
}

/* The next element this dataset keeps: out of the shuffle buffer (or the source), and
 * with global sharding only those of this shard's slices: element i of the shuffled
 * stream when (i / block) % num_shards == shard_index. Every shard reads (and shuffles)
 * the whole stream; only the kept elements are parsed. */
static est_status next_element(est_dataset *ds, ds_element *e) {
  const ds_source *src = &ds->src;
  for (;;) {
    est_status st = ds->sh.buffer_size ? ds_shuffle_next(&ds->sh, &ds->src, e) : ds_source_next(&ds->src, e);
    if (st || src->shard_block == 0 || src->num_shards == 1) return st;
    const int64_t i = ds->global_position++;
    if ((i / src->shard_block) % src->num_shards == src->shard_index) return EST_OK;
  }
}

/* Fills b with the next batch (or the end / an error) and the state after it. */
static void produce(est_dataset *ds, ds_batchbuf *b) {
  est_status st = EST_OK;
  ds_batchbuf_begin(b, &ds->feat);
  if (ds->finished) {
    st = est_error(EST_ERR_OUT_OF_RANGE, "End of sequence");
  } else {
    while (b->batch.size < ds->batch_size) {
      ds_element e;
      st = next_element(ds, &e);
      if (st) break;
      if ((st = ds_batchbuf_parse(b, &ds->feat, &e, ds_source_name(&ds->src, e.file)))) break;
      b->batch.size++;
      ds->elements++;
    }
    if (st == EST_ERR_OUT_OF_RANGE) {
      if (b->batch.size > 0 && !ds->drop_remainder) st = EST_OK; /* final short batch */
      else ds->finished = 1;
    }
    if (st == EST_OK) st = ds_batchbuf_finish(b, &ds->feat);
    if (st == EST_OK) ds->batches++;
  }
  b->status = st;
  b->message[0] = 0;
  if (st) snprintf(b->message, sizeof b->message, "%s", est_error_message());
  capture_state(ds, b->state);
}

static void *producer_main(void *arg) {
  est_dataset *ds = arg;
  pthread_mutex_lock(&ds->mu);
  for (;;) {
    while (!ds->stop && ds->free_count == 0) pthread_cond_wait(&ds->cv_free, &ds->mu);
    if (ds->stop) break;
    int idx = ds->free_list[--ds->free_count];
    pthread_mutex_unlock(&ds->mu);
    produce(ds, &ds->bufs[idx]);
    pthread_mutex_lock(&ds->mu);
    ds->ready[(ds->ready_head + ds->ready_count) % ds->nbufs] = idx;
    ds->ready_count++;
    pthread_cond_signal(&ds->cv_ready);
    if (ds->bufs[idx].status != EST_OK) break; /* the end or an error: nothing follows */
  }
  pthread_mutex_unlock(&ds->mu);
  return NULL;
}

static void stop_thread(est_dataset *ds) {
  if (!ds->thread_running) return;
  pthread_mutex_lock(&ds->mu);
  ds->stop = 1;
  pthread_cond_broadcast(&ds->cv_free);
  pthread_mutex_unlock(&ds->mu);
  pthread_join(ds->thread, NULL);
  ds->thread_running = 0;
  ds->stop = 0;
}

/* All buffers back to the free list (thread stopped). */
static void reset_queues(est_dataset *ds) {
  ds->ready_head = ds->ready_count = 0;
  ds->free_count = 0;
  for (int i = ds->nbufs - 1; i >= 0; i--) ds->free_list[ds->free_count++] = i;
  ds->held = -1;
}

/* First use: freezes the configuration and allocates everything. */
static est_status start(est_dataset *ds) {
  est_status st;
  if (ds->started) return EST_OK;
  if (ds->start_error) return est_error(ds->start_error, "dataset: could not allocate its buffers");
  if (!ds->parsed) return est_error(EST_ERR_FAILED_PRECONDITION, "dataset: est_dataset_parse was not called");
  ds->start_error = EST_ERR_NO_MEMORY; /* until everything below succeeded */
  if (ds->sh.buffer_size && (st = ds_shuffle_init(&ds->sh))) return st;
  ds->state_len = est_dataset_state_size(ds);
  ds->nbufs = ds->prefetch + 1;
  ds->bufs = calloc((size_t)ds->nbufs, sizeof *ds->bufs);
  ds->ready = calloc((size_t)ds->nbufs, sizeof *ds->ready);
  ds->free_list = calloc((size_t)ds->nbufs, sizeof *ds->free_list);
  ds->cstate = calloc(ds->state_len, sizeof *ds->cstate);
  if (!ds->bufs || !ds->ready || !ds->free_list || !ds->cstate)
    return est_error(EST_ERR_NO_MEMORY, "out of memory starting a dataset");
  for (int i = 0; i < ds->nbufs; i++)
    if ((st = ds_batchbuf_init(&ds->bufs[i], &ds->feat, ds->batch_size, ds->state_len))) return st;
  reset_queues(ds);
  capture_state(ds, ds->cstate);
  ds->started = 1;
  ds->start_error = EST_OK;
  return EST_OK;
}

void est_dataset_free(est_dataset *ds) {
  if (!ds) return;
  stop_thread(ds);
  if (ds->bufs)
    for (int i = 0; i < ds->nbufs; i++) ds_batchbuf_free(&ds->bufs[i], &ds->feat);
  free(ds->bufs);
  free(ds->ready);
  free(ds->free_list);
  free(ds->cstate);
  if (ds->parsed) ds_features_free(&ds->feat);
  ds_shuffle_free(&ds->sh);
  ds_source_free(&ds->src);
  pthread_mutex_destroy(&ds->mu);
  pthread_cond_destroy(&ds->cv_ready);
  pthread_cond_destroy(&ds->cv_free);
  free(ds);
}

/* ---- the consumer ----------------------------------------------------------------- */

est_status est_dataset_next(est_dataset *ds, const est_batch **batch) {
  est_status st;
  *batch = NULL;
  if ((st = start(ds))) return st;
  if (ds->sticky) return est_error(ds->sticky, "%s", ds->sticky_msg);
  int idx;
  if (ds->prefetch == 0) {
    idx = 0;
    produce(ds, &ds->bufs[0]);
  } else {
    pthread_mutex_lock(&ds->mu);
    if (ds->held >= 0) {
      ds->free_list[ds->free_count++] = ds->held;
      ds->held = -1;
      pthread_cond_signal(&ds->cv_free);
    }
    pthread_mutex_unlock(&ds->mu);
    if (!ds->thread_running) {
      if (pthread_create(&ds->thread, NULL, producer_main, ds))
        return est_error(EST_ERR_INTERNAL, "dataset: cannot start the prefetch thread");
      ds->thread_running = 1;
    }
    pthread_mutex_lock(&ds->mu);
    while (ds->ready_count == 0) pthread_cond_wait(&ds->cv_ready, &ds->mu);
    idx = ds->ready[ds->ready_head];
    ds->ready_head = (ds->ready_head + 1) % ds->nbufs;
    ds->ready_count--;
    pthread_mutex_unlock(&ds->mu);
  }
  ds_batchbuf *b = &ds->bufs[idx];
  memcpy(ds->cstate, b->state, ds->state_len * sizeof *ds->cstate);
  ds->cbatches = b->state[S_BATCHES];
  if (b->status != EST_OK) {
    /* The producer thread has exited after queueing this; keep answering the same. */
    ds->sticky = b->status;
    snprintf(ds->sticky_msg, sizeof ds->sticky_msg, "%s", b->message);
    if (ds->thread_running) {
      pthread_join(ds->thread, NULL);
      ds->thread_running = 0;
    }
    return est_error(ds->sticky, "%s", ds->sticky_msg);
  }
  ds->held = idx;
  *batch = &b->batch;
  return EST_OK;
}

const est_tensor *est_batch_feature(const est_batch *b, const char *name) {
  for (size_t i = 0; i < b->count; i++)
    if (!strcmp(b->names[i], name)) return &b->tensors[i];
  return NULL;
}

const int64_t *est_batch_lengths(const est_batch *b, const char *name) {
  for (size_t i = 0; i < b->count; i++)
    if (!strcmp(b->names[i], name)) return b->lengths[i];
  return NULL;
}

/* ---- resume ----------------------------------------------------------------------- */

est_status est_dataset_get_state(est_dataset *ds, int64_t *state, size_t capacity, size_t *n) {
  est_status st;
  if ((st = start(ds))) return st;
  *n = ds->state_len;
  if (capacity < ds->state_len)
    return est_error(EST_ERR_INVALID_ARGUMENT, "dataset state needs %zu int64 values, capacity is %zu", ds->state_len,
                     capacity);
  memcpy(state, ds->cstate, ds->state_len * sizeof *state);
  return EST_OK;
}

static est_status check_config(const int64_t *s, int field, int64_t have, const char *name) {
  if (s[field] != have)
    return est_error(EST_ERR_FAILED_PRECONDITION, "dataset state was saved with %s %lld, this dataset has %lld", name,
                     (long long)s[field], (long long)have);
  return EST_OK;
}

static est_status bad_state(const char *what, int64_t v) {
  return est_error(EST_ERR_INVALID_ARGUMENT, "dataset state: %s %lld is out of range", what, (long long)v);
}

est_status est_dataset_set_state(est_dataset *ds, const int64_t *s, size_t n) {
  est_status st;
  if ((st = start(ds))) return st;
  if (n != ds->state_len || n < EST_DATASET_STATE_HEADER || s[S_MAGIC] != STATE_MAGIC || s[S_LENGTH] != (int64_t)n)
    return est_error(EST_ERR_INVALID_ARGUMENT,
                     "dataset state: %zu values not recognised (expected %zu starting with the est dataset magic)", n,
                     ds->state_len);
  if ((st = check_config(s, S_SOURCES, ds_source_fingerprint(&ds->src), ds->src.mem ? "memory records" : "input files")) ||
      (st = check_config(s, S_BATCH_SIZE, ds->batch_size, "batch_size")) ||
      (st = check_config(s, S_DROP_REMAINDER, ds->drop_remainder, "drop_remainder")) ||
      (st = check_config(s, S_BUFFER_SIZE, ds->sh.buffer_size, "shuffle buffer_size")) ||
      (st = check_config(s, S_SEED, (int64_t)ds->sh.seed, "shuffle seed")) ||
      (st = check_config(s, S_NUM_SHARDS, ds->src.num_shards, "num_shards")) ||
      (st = check_config(s, S_SHARD_INDEX, ds->src.shard_index, "shard index")) ||
      (st = check_config(s, S_SHARD_BLOCK, ds->src.shard_block, "global sharding per_shard")) ||
      (st = check_config(s, S_REPEAT, ds->src.repeat, "repeat count")) ||
      (st = ds_interleave_check(&ds->src, &s[S_SLOTS + 3 * ds->sh.buffer_size])))
    return st;
  const int64_t nfiles = (int64_t)ds_source_num_files(&ds->src);
  if (s[S_BATCHES] < 0) return bad_state("batch count", s[S_BATCHES]);
  if (s[S_ELEMENTS] < 0) return bad_state("element count", s[S_ELEMENTS]);
  if (s[S_EPOCH] < 0) return bad_state("epoch", s[S_EPOCH]);
  if (s[S_FILE] < 0 || s[S_FILE] > nfiles) return bad_state("file index", s[S_FILE]);
  if (s[S_OFFSET] < 0) return bad_state("offset", s[S_OFFSET]);
  if (s[S_RECORD] < 0 || s[S_ORDINAL] < 0 || s[S_EMITTED] < 0) return bad_state("record counter", s[S_RECORD]);
  if (s[S_RNG_POSITION] < 0) return bad_state("rng position", s[S_RNG_POSITION]);
  if (s[S_GLOBAL_POSITION] < 0) return bad_state("global position", s[S_GLOBAL_POSITION]);
  if (s[S_SHUFFLE_COUNT] < 0 || s[S_SHUFFLE_COUNT] > ds->sh.buffer_size)
    return bad_state("shuffle buffer count", s[S_SHUFFLE_COUNT]);

  stop_thread(ds);
  reset_queues(ds);
  ds->sticky = EST_OK;
  /* Refill the shuffle buffer by re-reading each buffered record at its offset, in file
   * order so a compressed file is decompressed once, not once per record. */
  int64_t count = s[S_SHUFFLE_COUNT];
  int64_t *order = NULL;
  if (count) {
    order = malloc((size_t)count * sizeof *order);
    if (!order) {
      /* Batches produced ahead were dropped: continuing would skip them, so fail for good. */
      ds->sticky = est_error(EST_ERR_NO_MEMORY, "out of memory restoring a dataset");
      snprintf(ds->sticky_msg, sizeof ds->sticky_msg, "%s", est_error_message());
      return ds->sticky;
    }
    for (int64_t k = 0; k < count; k++) order[k] = k;
    /* insertion sort by (file, offset): buffers are small and mostly in order already */
    for (int64_t i = 1; i < count; i++) {
      int64_t k = order[i], j = i - 1;
      const int64_t *a = &s[S_SLOTS + 3 * k];
      while (j >= 0) {
        const int64_t *c = &s[S_SLOTS + 3 * order[j]];
        if (c[0] < a[0] || (c[0] == a[0] && c[1] <= a[1])) break;
        order[j + 1] = order[j];
        j--;
      }
      order[j + 1] = k;
    }
  }
  ds->sh.count = 0;
  for (int64_t i = 0; i < count; i++) {
    int64_t k = order[i];
    const int64_t *slot = &s[S_SLOTS + 3 * k];
    ds_element e;
    if ((st = ds_source_read_at(&ds->src, slot[0], slot[1], &e))) break;
    e.record = slot[2];
    if ((st = ds_shuffle_store(&ds->sh, k, &e))) break;
  }
  free(order);
  ds_source_close_reader(&ds->src);
  if (st) {
    /* Leave the dataset failed rather than half-restored. */
    ds->sticky = st;
    snprintf(ds->sticky_msg, sizeof ds->sticky_msg, "%s", est_error_message());
    return st;
  }
  ds->sh.count = count;
  if (ds->sh.buffer_size) {
    est_rng_init(&ds->sh.rng, ds->sh.seed);
    ds->sh.rng.position = (uint64_t)s[S_RNG_POSITION];
  }
  ds->src.pos = (ds_position){s[S_EPOCH], s[S_FILE], s[S_OFFSET], s[S_RECORD], s[S_ORDINAL], s[S_EMITTED],
                              s[S_SOURCE_DONE] != 0};
  ds_interleave_restore(&ds->src, &s[S_SLOTS + 3 * ds->sh.buffer_size]);
  ds->batches = s[S_BATCHES];
  ds->elements = s[S_ELEMENTS];
  ds->global_position = s[S_GLOBAL_POSITION];
  ds->finished = s[S_FINISHED] != 0;
  memcpy(ds->cstate, s, n * sizeof *s);
  ds->cbatches = ds->batches;
  return EST_OK;
}
