/* est_ckpt_writer: one-shard bundles as TF1's Saver writes them (docs/checkpoint.md §11):
 * data in name order without padding, then an uncompressed index with masked CRCs. */
#include "est/ckpt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "est/crc32c.h"
#include "est/file.h"
#include "io/bundle.h"

typedef struct pending_tensor {
  char *name;
  est_tensor t;      /* shallow copy; data owned by the caller */
  uint64_t offset, size;
  uint32_t crc;      /* unmasked */
} pending_tensor;

struct est_ckpt_writer {
  char *prefix;
  pending_tensor *items;
  size_t count, cap;
};

est_status est_ckpt_writer_open(est_ckpt_writer **out, const char *prefix) {
  *out = NULL;
  if (!prefix || !*prefix) return est_error(EST_ERR_INVALID_ARGUMENT, "empty checkpoint prefix");
  /* Create the directory part now so a bad path fails early, not after a long save. */
  const char *slash = strrchr(prefix, '/');
  if (slash && slash != prefix) {
    char dir[4096];
    size_t n = (size_t)(slash - prefix);
    if (n >= sizeof dir) return est_error(EST_ERR_INVALID_ARGUMENT, "checkpoint prefix too long: %s", prefix);
    memcpy(dir, prefix, n);
    dir[n] = 0;
    est_status st = est_mkdirs(dir);
    if (st != EST_OK) return st;
  }
  est_ckpt_writer *w = calloc(1, sizeof *w);
  if (!w || !(w->prefix = strdup(prefix))) {
    free(w);
    return est_error(EST_ERR_NO_MEMORY, "out of memory opening checkpoint writer %s", prefix);
  }
  *out = w;
  return EST_OK;
}

est_status est_ckpt_writer_add(est_ckpt_writer *w, const char *name, const est_tensor *t) {
  if (!name || !*name)
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: the empty tensor name is reserved for the header",
                     w->prefix);
  if (t->dtype != EST_DT_STRING && est_dtype_size(t->dtype) == 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: tensor '%s' has unsupported dtype %d", w->prefix, name,
                     (int)t->dtype);
  if (t->rank < 0 || t->rank > EST_MAX_RANK)
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: tensor '%s' has rank %d", w->prefix, name, t->rank);
  for (int i = 0; i < t->rank; i++)
    if (t->dims[i] < 0)
      return est_error(EST_ERR_INVALID_ARGUMENT, "%s: tensor '%s' has negative dimension %lld", w->prefix,
                       name, (long long)t->dims[i]);
  if (est_tensor_num_elements(t) > 0 && !t->data)
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: tensor '%s' has no data", w->prefix, name);
  for (size_t i = 0; i < w->count; i++)
    if (!strcmp(w->items[i].name, name))
      return est_error(EST_ERR_INVALID_ARGUMENT, "%s: Adding duplicate key: %s", w->prefix, name);
  pending_tensor *grown = est_grow(w->items, &w->cap, w->count + 1, sizeof *grown, 64);
  if (!grown) return est_error(EST_ERR_NO_MEMORY, "out of memory adding '%s'", name);
  w->items = grown;
  pending_tensor *p = &w->items[w->count];
  memset(p, 0, sizeof *p);
  if (!(p->name = strdup(name))) return est_error(EST_ERR_NO_MEMORY, "out of memory adding '%s'", name);
  p->t = *t;
  w->count++;
  return EST_OK;
}

void est_ckpt_writer_abort(est_ckpt_writer *w) {
  if (!w) return;
  for (size_t i = 0; i < w->count; i++) free(w->items[i].name);
  free(w->items);
  free(w->prefix);
  free(w);
}

static int by_name(const void *a, const void *b) {
  /* strcmp compares as unsigned char: the bytewise order of TF's std::map keys. */
  return strcmp(((const pending_tensor *)a)->name, ((const pending_tensor *)b)->name);
}

/* Appends every tensor to the data file, recording offset, size and CRC. */
static est_status write_data(est_ckpt_writer *w, const char *path) {
  est_atomic_file *f;
  est_status st = est_atomic_open(&f, path);
  if (st != EST_OK) return st;
  FILE *out = est_atomic_stream(f);
  uint64_t offset = 0;
  est_pw_buf strings;
  est_pw_buf_init(&strings);
  for (size_t i = 0; i < w->count && st == EST_OK; i++) {
    pending_tensor *p = &w->items[i];
    const void *bytes;
    size_t n;
    if (p->t.dtype == EST_DT_STRING) {
      strings.size = 0;
      if (!est_bundle_encode_strings(&strings, p->t.data, est_tensor_num_elements(&p->t), &p->crc)) {
        st = est_error(EST_ERR_NO_MEMORY, "out of memory encoding string tensor '%s'", p->name);
        break;
      }
      bytes = strings.data;
      n = strings.size;
    } else {
      bytes = p->t.data;
      n = est_tensor_num_bytes(&p->t);
      p->crc = est_crc32c(bytes, n);
    }
    if (n && fwrite(bytes, 1, n, out) != n)
      st = est_error(EST_ERR_IO, "writing '%s' to %s: %s", p->name, est_atomic_temp_path(f), strerror(errno));
    p->offset = offset;
    p->size = n;
    offset += n;
  }
  est_pw_buf_free(&strings);
  if (st != EST_OK) {
    est_atomic_abort(f);
    return st;
  }
  return est_atomic_commit(f);
}

static est_status write_index(est_ckpt_writer *w, const char *path) {
  est_sstable_builder b;
  est_sstable_builder_init(&b, 0);
  est_pw_buf v;
  est_pw_buf_init(&v);
  /* BundleHeaderProto: num_shards 1, endianness only when big (LITTLE is the default),
   * version {producer 1}: "08 01 1a 02 08 01" on little-endian hosts. */
  est_pw_put_varint_field(&v, 1, 1);
  if (__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__) est_pw_put_varint_field(&v, 2, 1);
  size_t m = est_pw_begin_sub(&v, 3);
  est_pw_put_varint_field(&v, 1, 1);
  est_pw_end_sub(&v, m);
  est_status st = v.failed ? est_error(EST_ERR_NO_MEMORY, "out of memory writing %s", path)
                           : est_sstable_builder_add(&b, "", 0, v.data, v.size);
  for (size_t i = 0; i < w->count && st == EST_OK; i++) {
    const pending_tensor *p = &w->items[i];
    v.size = 0;
    if (!est_bundle_encode_entry(&v, p->t.dtype, p->t.rank, p->t.dims, 0, p->offset, p->size,
                                 est_crc32c_mask(p->crc)))
      st = est_error(EST_ERR_NO_MEMORY, "out of memory writing %s", path);
    else
      st = est_sstable_builder_add(&b, p->name, strlen(p->name), v.data, v.size);
  }
  est_pw_buf_free(&v);
  if (st != EST_OK) {
    est_sstable_builder_free(&b);
    return st;
  }
  uint8_t *table;
  size_t size;
  st = est_sstable_builder_finish(&b, &table, &size);
  if (st != EST_OK) return st;
  st = est_write_file_atomic(path, table, size);
  free(table);
  return st;
}

est_status est_ckpt_writer_finish(est_ckpt_writer *w) {
  if (w->count) qsort(w->items, w->count, sizeof *w->items, by_name);
  size_t n = strlen(w->prefix) + 32;
  char *data_path = malloc(n), *index_path = malloc(n);
  est_status st = EST_OK;
  if (!data_path || !index_path) {
    st = est_error(EST_ERR_NO_MEMORY, "out of memory writing checkpoint %s", w->prefix);
  } else {
    snprintf(data_path, n, "%s.data-00000-of-00001", w->prefix);
    snprintf(index_path, n, "%s.index", w->prefix);
    /* Data first: an index is only ever visible next to the data it describes. */
    st = write_data(w, data_path);
    if (st == EST_OK) st = write_index(w, index_path);
  }
  if (st != EST_OK) est_error_prefix("saving checkpoint %s: ", w->prefix);
  free(data_path);
  free(index_path);
  est_ckpt_writer_abort(w);
  return st;
}

est_status est_ckpt_save(const char *prefix, size_t n, const char *const *names, const est_tensor *tensors) {
  est_ckpt_writer *w;
  est_status st = est_ckpt_writer_open(&w, prefix);
  if (st != EST_OK) return st;
  for (size_t i = 0; i < n; i++) {
    st = est_ckpt_writer_add(w, names[i], &tensors[i]);
    if (st != EST_OK) {
      est_ckpt_writer_abort(w);
      return st;
    }
  }
  return est_ckpt_writer_finish(w);
}
