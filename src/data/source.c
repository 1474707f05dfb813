/* The pipeline's first stages: records from TFRecord files (or memory), in order, with
 * record-level sharding and repeat (or the files interleaved: interleave.c). All position lives in ds_position, so the stream can
 * be restarted from any element boundary. */
#include <stdlib.h>

#include "data/dataset_internal.h"

size_t ds_source_num_files(const ds_source *s) { return s->mem ? 1 : s->nfiles; }
int64_t ds_source_fingerprint(const ds_source *s) { return (int64_t)(s->mem ? s->nmem : s->nfiles); }

const char *ds_source_name(const ds_source *s, int64_t file) {
  if (s->mem) return "<memory>";
  return file >= 0 && (size_t)file < s->nfiles ? s->paths[file] : "<no file>";
}

void ds_source_close_reader(ds_source *s) {
  est_tfrecord_reader_close(s->reader);
  s->reader = NULL;
  s->reader_file = -1;
}

void ds_source_free(ds_source *s) {
  ds_source_close_reader(s);
  ds_interleave_free(&s->il);
  for (size_t i = 0; i < s->nfiles; i++) free(s->paths[i]);
  free(s->paths);
  free(s->mem);
  free(s->mem_offset);
  free(s->mem_size);
}

/* Makes the reader read `file` from `offset`. Re-opening costs nothing for plain files;
 * for compressed ones a seek decompresses from the start, so sequential reading keeps
 * the open reader. */
static est_status reader_at(ds_source *s, int64_t file, int64_t offset) {
  est_status st;
  if (s->reader && s->reader_file == file && (int64_t)est_tfrecord_reader_offset(s->reader) == offset) return EST_OK;
  if (!s->reader || s->reader_file != file) {
    ds_source_close_reader(s);
    if ((st = est_tfrecord_reader_open(&s->reader, s->paths[file], s->compression))) return st;
    s->reader_file = file;
  }
  if ((int64_t)est_tfrecord_reader_offset(s->reader) != offset &&
      (st = est_tfrecord_reader_seek(s->reader, (uint64_t)offset)))
    return st;
  return EST_OK;
}

est_status ds_source_next(ds_source *s, ds_element *e) {
  ds_position *p = &s->pos;
  const int64_t nfiles = (int64_t)ds_source_num_files(s);
  est_status st;
  if (s->il.cycle_length) return ds_interleave_next(s, e);
  for (;;) {
    if (p->done) return est_error(EST_ERR_OUT_OF_RANGE, "End of sequence");
    if (s->repeat >= 0 && p->epoch >= s->repeat) {
      p->done = 1;
      continue;
    }
    if (p->file >= nfiles) {
      /* End of an epoch. As tf.data's repeat, an epoch that produced nothing ends the
       * stream (otherwise repeat(-1) over empty input would spin forever). */
      int empty = p->emitted == 0;
      *p = (ds_position){.epoch = p->epoch + 1};
      if (empty) p->done = 1;
      continue;
    }
    const uint8_t *data;
    size_t size;
    const int64_t offset = p->offset;
    if (s->mem) {
      if ((size_t)offset >= s->nmem) {
        p->file++, p->offset = 0, p->record = 0;
        continue;
      }
      data = s->mem + s->mem_offset[offset];
      size = s->mem_size[offset];
      p->offset++;
    } else {
      if ((st = reader_at(s, p->file, offset))) return st;
      st = est_tfrecord_reader_next(s->reader, &data, &size);
      if (st == EST_ERR_OUT_OF_RANGE) {
        ds_source_close_reader(s);
        p->file++, p->offset = 0, p->record = 0;
        continue;
      }
      if (st) return st; /* DATA_LOSS etc.: the message names the file and offset */
      p->offset = (int64_t)est_tfrecord_reader_offset(s->reader);
    }
    const int64_t record = p->record++, ordinal = p->ordinal++;
    if (s->num_shards > 1 && s->shard_block == 0 && ordinal % s->num_shards != s->shard_index) continue;
    p->emitted++;
    *e = (ds_element){data, size, p->file, offset, record};
    return EST_OK;
  }
}

est_status ds_source_read_at(ds_source *s, int64_t file, int64_t offset, ds_element *e) {
  if (s->mem) {
    if (file != 0 || offset < 0 || (size_t)offset >= s->nmem)
      return est_error(EST_ERR_INVALID_ARGUMENT, "dataset state: memory record %lld of file %lld does not exist (%zu records)",
                       (long long)offset, (long long)file, s->nmem);
    *e = (ds_element){s->mem + s->mem_offset[offset], s->mem_size[offset], 0, offset, offset};
    return EST_OK;
  }
  if (file < 0 || (size_t)file >= s->nfiles || offset < 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "dataset state: file %lld offset %lld out of range (%zu files)",
                     (long long)file, (long long)offset, s->nfiles);
  est_status st = reader_at(s, file, offset);
  if (!st) st = est_tfrecord_reader_next(s->reader, &e->data, &e->size);
  if (st == EST_ERR_OUT_OF_RANGE)
    return est_error(EST_ERR_DATA_LOSS, "%s: no record at offset %lld (the file changed since the state was saved?)",
                     s->paths[file], (long long)offset);
  if (st) return st;
  e->file = file;
  e->offset = offset;
  e->record = -1; /* the caller knows it from the state */
  return EST_OK;
}
