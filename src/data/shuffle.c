/* tf.data's shuffle: a buffer of up to N elements, refilled from upstream before every
 * pick; the pick is uniform over the buffer (Philox stream, so its whole state is one
 * position); the last element moves into the hole. Records are copied into per-slot
 * buffers that grow to the largest record seen and are then reused. */
#include <stdlib.h>
#include <string.h>

#include "data/dataset_internal.h"

est_status ds_shuffle_init(ds_shuffle *sh) {
  sh->slots = calloc((size_t)sh->buffer_size + 1, sizeof *sh->slots);
  if (!sh->slots)
    return est_error(EST_ERR_NO_MEMORY, "out of memory for a shuffle buffer of %lld elements", (long long)sh->buffer_size);
  est_rng_init(&sh->rng, sh->seed);
  sh->count = 0;
  return EST_OK;
}

void ds_shuffle_free(ds_shuffle *sh) {
  if (sh->slots)
    for (int64_t i = 0; i <= sh->buffer_size; i++) free(sh->slots[i].data);
  free(sh->slots);
  sh->slots = NULL;
}

est_status ds_shuffle_store(ds_shuffle *sh, int64_t k, const ds_element *e) {
  ds_slot *s = &sh->slots[k];
  if (e->size > s->cap) {
    size_t cap = e->size + e->size / 2 + 64;
    uint8_t *p = realloc(s->data, cap);
    if (!p) return est_error(EST_ERR_NO_MEMORY, "out of memory buffering a %zu-byte record for shuffle", e->size);
    s->data = p;
    s->cap = cap;
  }
  if (e->size) memcpy(s->data, e->data, e->size);
  s->size = e->size;
  s->file = e->file;
  s->offset = e->offset;
  s->record = e->record;
  return EST_OK;
}

static void swap_slots(ds_slot *a, ds_slot *b) {
  ds_slot t = *a;
  *a = *b;
  *b = t;
}

est_status ds_shuffle_next(ds_shuffle *sh, ds_source *src, ds_element *e) {
  est_status st;
  while (sh->count < sh->buffer_size && !src->pos.done) {
    ds_element in;
    st = ds_source_next(src, &in);
    if (st == EST_ERR_OUT_OF_RANGE) break;
    if (st) return st;
    if ((st = ds_shuffle_store(sh, sh->count, &in))) return st;
    sh->count++;
  }
  if (sh->count == 0) return est_error(EST_ERR_OUT_OF_RANGE, "End of sequence");
  int64_t j = (int64_t)est_rng_below(&sh->rng, (uint64_t)sh->count);
  /* The chosen element goes to the spare slot (index buffer_size) where it stays valid
   * until the next call; the last buffered element fills the hole. Only structs move. */
  ds_slot *spare = &sh->slots[sh->buffer_size];
  swap_slots(&sh->slots[j], spare);
  sh->count--;
  if (j != sh->count) swap_slots(&sh->slots[j], &sh->slots[sh->count]);
  *e = (ds_element){spare->data, spare->size, spare->file, spare->offset, spare->record};
  return EST_OK;
}
