/* The file interleave of google-research/bert run_pretraining.py's training input_fn:
 *
 *     d = tf.data.Dataset.from_tensor_slices(input_files).repeat()
 *     d = d.shuffle(buffer_size=len(input_files))
 *     d = d.apply(parallel_interleave(TFRecordDataset, sloppy=True, cycle_length=k))
 *
 * sloppy=True lets TF hand out records from whichever file is ready first, so TF's order
 * is not reproducible. est uses the deterministic order, that of
 * tf.data.Dataset.interleave(cycle_length=k, block_length=1) (and of parallel_interleave
 * with sloppy=False):
 *   - the file stream: the list repeated (`repeat` passes, -1 forever); with shuffle_files
 *     it goes through a shuffle buffer of one list's length (tf.data's algorithm as in
 *     shuffle.c, its own Philox stream from `seed`), so passes blur as in TF;
 *   - k cycle slots, visited in turn from slot 0. At a slot holding an open file: its
 *     next record is the output and the turn passes to the next slot; at its end the
 *     slot empties and the turn passes on without an output. At an empty slot the next
 *     file of the stream opens there and is read at once (when the stream has ended the
 *     turn passes on). The output ends when the stream has ended and every slot is empty.
 * tests/reference/interleave_order.py is the same in Python; its output is
 * tests/data/interleave_order.txt. Each slot keeps its own reader, so a file is read
 * sequentially even when compressed. */
#include <stdlib.h>
#include <string.h>

#include "data/dataset_internal.h"

/* Resume block layout (ds_interleave_state_size values). Configuration first. */
enum {
  IL_CYCLE, IL_SHUFFLE, IL_SEED, IL_NFILES,
  IL_TAKEN, IL_RNG_POSITION, IL_FCOUNT, IL_END, IL_CYCLE_INDEX, IL_NUM_OPEN,
  IL_FBUF, /* then nfiles buffered file indices (-1 unused), then (file, offset, record) per slot */
};

static void close_slot_readers(ds_interleave *il) {
  for (int k = 0; il->slots && k < il->cycle_length; k++) {
    est_tfrecord_reader_close(il->slots[k].reader);
    il->slots[k].reader = NULL;
  }
}

void ds_interleave_free(ds_interleave *il) {
  close_slot_readers(il);
  free(il->slots);
  free(il->fbuf);
  free(il->known_empty);
  memset(il, 0, sizeof *il);
}

static void reset(ds_interleave *il) {
  close_slot_readers(il);
  est_rng_init(&il->rng, il->seed);
  il->taken = il->fcount = il->end_of_input = il->cycle_index = il->num_open = 0;
  for (int k = 0; k < il->cycle_length; k++) il->slots[k] = (ds_cycle_slot){.file = -1};
}

est_status ds_interleave_configure(ds_source *s, int cycle_length, int shuffle_files, uint64_t seed) {
  if (s->mem)
    return est_error(EST_ERR_FAILED_PRECONDITION, "dataset interleave: needs TFRecord files, not memory records");
  if (cycle_length < 1 || cycle_length > 4096)
    return est_error(EST_ERR_INVALID_ARGUMENT, "dataset interleave: cycle_length %d outside [1, 4096]", cycle_length);
  ds_interleave_free(&s->il);
  ds_interleave *il = &s->il;
  const size_t n = s->nfiles ? s->nfiles : 1;
  il->slots = calloc((size_t)cycle_length, sizeof *il->slots);
  il->fbuf = calloc(n, sizeof *il->fbuf);
  il->known_empty = calloc(n, 1);
  if (!il->slots || !il->fbuf || !il->known_empty) {
    ds_interleave_free(il);
    return est_error(EST_ERR_NO_MEMORY, "out of memory for a dataset interleave of %d files", cycle_length);
  }
  il->cycle_length = cycle_length;
  il->shuffle_files = shuffle_files != 0;
  il->seed = seed;
  reset(il);
  return EST_OK;
}

/* The next file of the stream into *file; 0 when the stream has ended. */
static int next_file(ds_source *s, int64_t *file) {
  ds_interleave *il = &s->il;
  const int64_t n = (int64_t)s->nfiles;
  const int64_t total = s->repeat < 0 ? -1 : s->repeat * n; /* list entries in all passes */
  if (!il->shuffle_files) {
    if (n == 0 || (total >= 0 && il->taken >= total)) return 0;
    *file = il->taken++ % n;
    return 1;
  }
  while (il->fcount < n && (total < 0 || il->taken < total)) il->fbuf[il->fcount++] = il->taken++ % n;
  if (il->fcount == 0) return 0;
  const int64_t j = (int64_t)est_rng_below(&il->rng, (uint64_t)il->fcount);
  *file = il->fbuf[j];
  il->fbuf[j] = il->fbuf[--il->fcount]; /* the last fills the hole, as shuffle.c */
  return 1;
}

static void advance(ds_interleave *il) { il->cycle_index = (il->cycle_index + 1) % il->cycle_length; }

/* The next record of slot c, or OUT_OF_RANGE at its file's end. */
static est_status slot_next(ds_source *s, ds_cycle_slot *c, const uint8_t **data, size_t *size) {
  est_status st;
  if (!c->reader) {
    if ((st = est_tfrecord_reader_open(&c->reader, s->paths[c->file], s->compression))) return st;
    if (c->offset && (st = est_tfrecord_reader_seek(c->reader, (uint64_t)c->offset))) return st;
  }
  return est_tfrecord_reader_next(c->reader, data, size);
}

est_status ds_interleave_next(ds_source *s, ds_element *e) {
  ds_interleave *il = &s->il;
  ds_position *p = &s->pos;
  for (;;) {
    /* repeat(-1) over files that are all empty would never end (nor does it in TF):
     * once every file was read to its end without a record, the stream ends. */
    if (!p->done && ((il->end_of_input && il->num_open == 0) || il->nknown_empty == (int64_t)s->nfiles)) p->done = 1;
    if (p->done) return est_error(EST_ERR_OUT_OF_RANGE, "End of sequence");
    ds_cycle_slot *c = &il->slots[il->cycle_index];
    if (c->file < 0) {
      int64_t f;
      if (!next_file(s, &f)) {
        il->end_of_input = 1;
        advance(il);
      } else {
        *c = (ds_cycle_slot){.file = f};
        il->num_open++;
      }
      continue;
    }
    const uint8_t *data;
    size_t size;
    est_status st = slot_next(s, c, &data, &size);
    if (st == EST_ERR_OUT_OF_RANGE) {
      if (c->record == 0 && !il->known_empty[c->file]) {
        il->known_empty[c->file] = 1;
        il->nknown_empty++;
      }
      est_tfrecord_reader_close(c->reader);
      *c = (ds_cycle_slot){.file = -1};
      il->num_open--;
      advance(il);
      continue;
    }
    if (st) return st; /* DATA_LOSS etc.: the message names the file and offset */
    *e = (ds_element){data, size, c->file, c->offset, c->record};
    c->offset = (int64_t)est_tfrecord_reader_offset(c->reader);
    c->record++;
    advance(il);
    /* record-level sharding counts the interleaved stream (it has no epochs) */
    const int64_t ordinal = p->ordinal++;
    if (s->num_shards > 1 && s->shard_block == 0 && ordinal % s->num_shards != s->shard_index) continue;
    p->emitted++;
    return EST_OK;
  }
}

/* ---- resume ----------------------------------------------------------------------- */

size_t ds_interleave_state_size(const ds_source *s) {
  return s->il.cycle_length ? IL_FBUF + s->nfiles + 3 * (size_t)s->il.cycle_length : 0;
}

void ds_interleave_save(const ds_source *s, int64_t *b) {
  const ds_interleave *il = &s->il;
  if (!il->cycle_length) return;
  b[IL_CYCLE] = il->cycle_length;
  b[IL_SHUFFLE] = il->shuffle_files;
  b[IL_SEED] = (int64_t)il->seed;
  b[IL_NFILES] = (int64_t)s->nfiles;
  b[IL_TAKEN] = il->taken;
  b[IL_RNG_POSITION] = (int64_t)il->rng.position;
  b[IL_FCOUNT] = il->fcount;
  b[IL_END] = il->end_of_input;
  b[IL_CYCLE_INDEX] = il->cycle_index;
  b[IL_NUM_OPEN] = il->num_open;
  for (size_t i = 0; i < s->nfiles; i++) b[IL_FBUF + i] = (int64_t)i < il->fcount ? il->fbuf[i] : -1;
  int64_t *slot = b + IL_FBUF + s->nfiles;
  for (int k = 0; k < il->cycle_length; k++, slot += 3) {
    slot[0] = il->slots[k].file;
    slot[1] = il->slots[k].offset;
    slot[2] = il->slots[k].record;
  }
}

est_status ds_interleave_check(const ds_source *s, const int64_t *b) {
  const ds_interleave *il = &s->il;
  if (!il->cycle_length) return EST_OK;
  const int64_t want[4] = {il->cycle_length, il->shuffle_files, (int64_t)il->seed, (int64_t)s->nfiles};
  static const char *const names[4] = {"interleave cycle_length", "interleave shuffle_files", "interleave seed",
                                       "input files"};
  for (int i = 0; i < 4; i++)
    if (b[i] != want[i])
      return est_error(EST_ERR_FAILED_PRECONDITION, "dataset state was saved with %s %lld, this dataset has %lld",
                       names[i], (long long)b[i], (long long)want[i]);
  const int64_t n = (int64_t)s->nfiles;
  int open = 0;
  if (b[IL_TAKEN] < 0 || b[IL_RNG_POSITION] < 0 || b[IL_FCOUNT] < 0 || b[IL_FCOUNT] > n || b[IL_CYCLE_INDEX] < 0 ||
      b[IL_CYCLE_INDEX] >= il->cycle_length)
    return est_error(EST_ERR_INVALID_ARGUMENT, "dataset state: interleave position out of range");
  for (int64_t i = 0; i < b[IL_FCOUNT]; i++)
    if (b[IL_FBUF + i] < 0 || b[IL_FBUF + i] >= n)
      return est_error(EST_ERR_INVALID_ARGUMENT, "dataset state: buffered file %lld out of range",
                       (long long)b[IL_FBUF + i]);
  const int64_t *slot = b + IL_FBUF + n;
  for (int k = 0; k < il->cycle_length; k++, slot += 3) {
    if (slot[0] < -1 || slot[0] >= n || slot[1] < 0 || slot[2] < 0)
      return est_error(EST_ERR_INVALID_ARGUMENT, "dataset state: interleave slot %d out of range", k);
    open += slot[0] >= 0;
  }
  if (b[IL_NUM_OPEN] != open)
    return est_error(EST_ERR_INVALID_ARGUMENT, "dataset state: %lld open interleave slots recorded, %d found",
                     (long long)b[IL_NUM_OPEN], open);
  return EST_OK;
}

void ds_interleave_restore(ds_source *s, const int64_t *b) {
  ds_interleave *il = &s->il;
  if (!il->cycle_length) return;
  reset(il); /* closes the slot readers: they reopen at their offsets */
  il->taken = b[IL_TAKEN];
  il->rng.position = (uint64_t)b[IL_RNG_POSITION];
  il->fcount = b[IL_FCOUNT];
  il->end_of_input = b[IL_END] != 0;
  il->cycle_index = b[IL_CYCLE_INDEX];
  il->num_open = b[IL_NUM_OPEN];
  for (int64_t i = 0; i < il->fcount; i++) il->fbuf[i] = b[IL_FBUF + i];
  const int64_t *slot = b + IL_FBUF + s->nfiles;
  for (int k = 0; k < il->cycle_length; k++, slot += 3)
    il->slots[k] = (ds_cycle_slot){.file = slot[0], .offset = slot[1], .record = slot[2]};
}
