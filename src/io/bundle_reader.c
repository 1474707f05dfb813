/* est_ckpt_reader: a checkpoint's .index parsed once into memory, data shards read with
 * pread on demand (docs/checkpoint.md §1-§5). */
#include "est/ckpt.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "est/file.h"
#include "io/bundle.h"

struct est_ckpt_reader {
  char *prefix;
  char *index_path;
  est_bundle_index ix;
  int *fds;            /* one per shard, -1 until first needed */
};

est_status est_ckpt_reader_open(est_ckpt_reader **out, const char *prefix) {
  *out = NULL;
  est_ckpt_reader *r = calloc(1, sizeof *r);
  size_t n = strlen(prefix) + 16;
  if (!r || !(r->prefix = strdup(prefix)) || !(r->index_path = malloc(n))) {
    est_ckpt_reader_close(r);
    return est_error(EST_ERR_NO_MEMORY, "out of memory opening checkpoint %s", prefix);
  }
  snprintf(r->index_path, n, "%s.index", prefix);
  uint8_t *data;
  size_t size;
  est_status st = est_read_file(r->index_path, &data, &size);
  if (st == EST_ERR_NOT_FOUND) {
    est_ckpt_reader_close(r);
    return est_error(EST_ERR_NOT_FOUND, "checkpoint %s not found (no %s.index)", prefix, prefix);
  }
  if (st == EST_OK) {
    st = est_bundle_index_parse(&r->ix, data, size, r->index_path);
    free(data);
  }
  if (st == EST_OK) {
    int shards = r->ix.num_shards > 0 ? r->ix.num_shards : 1;
    r->fds = malloc((size_t)shards * sizeof *r->fds);
    if (!r->fds) st = est_error(EST_ERR_NO_MEMORY, "out of memory opening checkpoint %s", prefix);
    else
      for (int i = 0; i < shards; i++) r->fds[i] = -1;
  }
  if (st != EST_OK) {
    est_ckpt_reader_close(r);
    return st;
  }
  *out = r;
  return EST_OK;
}

void est_ckpt_reader_close(est_ckpt_reader *r) {
  if (!r) return;
  if (r->fds)
    for (int i = 0; i < (r->ix.num_shards > 0 ? r->ix.num_shards : 1); i++)
      if (r->fds[i] >= 0) close(r->fds[i]);
  free(r->fds);
  est_bundle_index_free(&r->ix);
  free(r->prefix);
  free(r->index_path);
  free(r);
}

size_t est_ckpt_reader_count(const est_ckpt_reader *r) { return r->ix.count; }

const char *est_ckpt_reader_name(const est_ckpt_reader *r, size_t i) {
  return i < r->ix.count ? r->ix.entries[i].name : NULL;
}

int est_ckpt_reader_has(const est_ckpt_reader *r, const char *name) {
  return est_bundle_index_find(&r->ix, name) != NULL;
}

int est_ckpt_reader_num_shards(const est_ckpt_reader *r) { return r->ix.num_shards; }

static est_status find(const est_ckpt_reader *r, const char *name, const est_bundle_entry **e) {
  *e = est_bundle_index_find(&r->ix, name);
  if (!*e) return est_error(EST_ERR_NOT_FOUND, "Key %s not found in checkpoint %s", name, r->prefix);
  return EST_OK;
}

est_status est_ckpt_reader_info(const est_ckpt_reader *r, const char *name, est_dtype *dtype, int *rank,
                                int64_t dims[EST_MAX_RANK]) {
  const est_bundle_entry *e;
  est_status st = find(r, name, &e);
  if (st != EST_OK) return st;
  if (dtype) *dtype = (est_dtype)e->dtype;
  if (rank) *rank = e->rank;
  if (dims)
    for (int i = 0; i < e->rank; i++) dims[i] = e->dims[i];
  return EST_OK;
}

/* Only what est_tensor can hold is readable: fixed-size est dtypes and strings, whole
 * or partitioned. */
static est_status check_readable(const est_ckpt_reader *r, const est_bundle_entry *e) {
  if (e->dtype != EST_DT_STRING && est_dtype_size((est_dtype)e->dtype) == 0)
    return est_error(EST_ERR_UNIMPLEMENTED, "%s: '%s' has TF dtype %d, which est does not read",
                     r->index_path, e->name, e->dtype);
  return EST_OK;
}

/* Reads the entry's e->size bytes from its shard into dst. A data file shorter than the
 * entry says is OUT_OF_RANGE, as TF reports it. */
static est_status read_bytes(est_ckpt_reader *r, const est_bundle_entry *e, uint8_t *dst) {
  char path[4096];
  snprintf(path, sizeof path, "%s.data-%05d-of-%05d", r->prefix, (int)e->shard_id, r->ix.num_shards);
  if (e->size == 0) return EST_OK;
  int *fd = &r->fds[e->shard_id];
  if (*fd < 0) {
    *fd = open(path, O_RDONLY | O_CLOEXEC);
    if (*fd < 0)
      return est_error(errno == ENOENT ? EST_ERR_NOT_FOUND : EST_ERR_IO, "cannot open %s: %s", path,
                       strerror(errno));
  }
  uint64_t done = 0;
  while (done < e->size) {
    uint64_t want = e->size - done;
    if (want > (1u << 30)) want = 1u << 30;
    ssize_t got = pread(*fd, dst + done, (size_t)want, (off_t)(e->offset + done));
    if (got < 0) {
      if (errno == EINTR) continue;
      return est_error(EST_ERR_IO, "reading '%s' from %s: %s", e->name, path, strerror(errno));
    }
    if (got == 0) {
      struct stat sb;
      long long fsize = fstat(*fd, &sb) == 0 ? (long long)sb.st_size : -1;
      return est_error(EST_ERR_OUT_OF_RANGE,
                       "%s: '%s' needs bytes [%llu, %llu) but the file has %lld bytes (truncated?)", path,
                       e->name, (unsigned long long)e->offset, (unsigned long long)(e->offset + e->size),
                       fsize);
    }
    done += (uint64_t)got;
  }
  return EST_OK;
}

static est_status read_slice_bytes(void *ctx, const est_bundle_entry *e, uint8_t *dst) {
  return read_bytes(ctx, e, dst);
}

/* A numeric tensor's elements x dtype-size bytes, in host order, into dst: one entry's
 * bytes, or a partitioned variable assembled from its slices. */
static est_status read_numeric(est_ckpt_reader *r, const est_bundle_entry *e, void *dst) {
  if (e->num_slices) return est_bundle_assemble(&r->ix, e, dst, read_slice_bytes, r, r->index_path);
  est_status st = read_bytes(r, e, dst);
  if (st == EST_OK) st = est_bundle_check_numeric(e, r->ix.big_endian, dst, r->index_path);
  return st;
}

est_status est_ckpt_reader_read(est_ckpt_reader *r, const char *name, est_tensor *out) {
  memset(out, 0, sizeof *out);
  const est_bundle_entry *e;
  est_status st = find(r, name, &e);
  if (st == EST_OK) st = check_readable(r, e);
  /* Check the slices before allocating what the full shape asks for. */
  if (st == EST_OK && e->num_slices) st = est_bundle_slices_check(e, r->index_path);
  if (st != EST_OK) return st;
  if (e->dtype == EST_DT_STRING && e->num_slices) {
    st = est_tensor_alloc(out, EST_DT_STRING, e->rank, e->dims);
    if (st == EST_OK) st = est_bundle_assemble(&r->ix, e, out->data, read_slice_bytes, r, r->index_path);
    if (st != EST_OK) est_tensor_free(out);
    return st;
  }
  if (e->dtype == EST_DT_STRING) {
    uint8_t *buf = malloc(e->size ? (size_t)e->size : 1);
    if (!buf) return est_error(EST_ERR_NO_MEMORY, "out of memory reading '%s'", name);
    st = read_bytes(r, e, buf);
    if (st == EST_OK) st = est_bundle_decode_strings(e, buf, out, r->index_path);
    free(buf);
    return st;
  }
  st = est_tensor_alloc(out, (est_dtype)e->dtype, e->rank, e->dims);
  if (st == EST_OK) st = read_numeric(r, e, out->data);
  if (st != EST_OK) est_tensor_free(out);
  return st;
}

static void shape_text(const est_bundle_entry *e, char *buf, size_t size) {
  est_tensor t = {.rank = e->rank};
  memcpy(t.dims, e->dims, sizeof t.dims);
  est_shape_string(&t, buf, size);
}

est_status est_ckpt_reader_read_into(est_ckpt_reader *r, const char *name, est_dtype dtype, void *dst,
                                     size_t dst_bytes) {
  const est_bundle_entry *e;
  est_status st = find(r, name, &e);
  if (st == EST_OK) st = check_readable(r, e);
  if (st != EST_OK) return st;
  char shape[256];
  shape_text(e, shape, sizeof shape);
  const char *stored = est_dtype_name((est_dtype)e->dtype);
  int widen = dtype == EST_DT_FLOAT && (e->dtype == EST_DT_HALF || e->dtype == EST_DT_BFLOAT16);
  if (e->dtype == EST_DT_STRING || (dtype != (est_dtype)e->dtype && !widen))
    return est_error(EST_ERR_FAILED_PRECONDITION, "%s: '%s' is %s %s, not %s", r->prefix, name, stored,
                     shape, est_dtype_name(dtype) ? est_dtype_name(dtype) : "an est dtype");
  uint64_t want = (uint64_t)e->num_elements * est_dtype_size(dtype);
  if (want != dst_bytes)
    return est_error(EST_ERR_FAILED_PRECONDITION,
                     "%s: '%s' is %s %s (%llu bytes as %s) but the destination holds %zu bytes",
                     r->prefix, name, stored, shape, (unsigned long long)want, est_dtype_name(dtype),
                     dst_bytes);
  if (e->num_slices) {
    st = est_bundle_slices_check(e, r->index_path);
    if (st != EST_OK) return st;
  }
  if (!widen) return read_numeric(r, e, dst);
  /* elements x 2 bytes: e->size is 0 in a partitioned variable's entry */
  uint16_t *tmp = malloc(e->num_elements ? (size_t)e->num_elements * 2 : 1);
  if (!tmp) return est_error(EST_ERR_NO_MEMORY, "out of memory reading '%s'", name);
  st = read_numeric(r, e, tmp);
  if (st == EST_OK) {
    float *f = dst;
    for (int64_t i = 0; i < e->num_elements; i++)
      f[i] = e->dtype == EST_DT_HALF ? est_half_to_float(tmp[i]) : est_bfloat16_to_float(tmp[i]);
  }
  free(tmp);
  return st;
}
