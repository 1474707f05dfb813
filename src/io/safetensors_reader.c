/* safetensors reader: header parsing and validation as the Rust reference's read_metadata +
 * Metadata::validate, then tensors read on demand (docs/safetensors.md; huggingface/safetensors
 * safetensors/src/tensor.rs). */
#include "est/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/json_error.h"
#include "io/protowire.h"
#include "io/safetensors_internal.h"

typedef struct st_tensor {
  char *name;
  const est_st_dtype_info *dt;
  int rank;
  int64_t dims[EST_MAX_RANK];
  int64_t num_elements;
  uint64_t begin, end;        /* relative to the byte buffer */
} st_tensor;

struct est_safetensors {
  char *what;
  int fd;                     /* -1 when reading from `mem` */
  uint8_t *mem;
  uint64_t data_start;        /* 8 + N */
  st_tensor *tensors;         /* sorted by name */
  size_t count;
  char **meta_keys, **meta_values;
  size_t meta_count;
};

static est_status bad(const est_safetensors *st, const char *kind, const char *fmt, const char *arg) {
  char detail[512];
  snprintf(detail, sizeof detail, fmt, arg);
  return est_error(EST_ERR_DATA_LOSS, "%s: %s: %s", st->what, kind, detail);
}

static int by_offsets(const void *a, const void *b) {
  const st_tensor *x = a, *y = b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  if (x->end != y->end) return x->end < y->end ? -1 : 1;
  return 0;
}

static int by_tensor_name(const void *a, const void *b) {
  return strcmp(((const st_tensor *)a)->name, ((const st_tensor *)b)->name);
}

static int by_string(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* A JSON array of non-negative integers into v (at most `max`); -1 when it is not one. */
static long int_array(json_t *a, uint64_t *v, size_t max) {
  if (!json_is_array(a)) return -1;
  size_t n = json_array_size(a);
  for (size_t i = 0; i < n; i++) {
    json_t *x = json_array_get(a, i);
    if (!json_is_integer(x) || json_integer_value(x) < 0) return -1;
    if (i < max) v[i] = (uint64_t)json_integer_value(x);
  }
  return (long)n;
}

static est_status parse_metadata(est_safetensors *st, json_t *meta) {
  if (json_is_null(meta)) return EST_OK; /* Option<HashMap>: null means none */
  if (!json_is_object(meta))
    return bad(st, "InvalidHeaderDeserialization", "%s is not an object", "__metadata__");
  size_t n = json_object_size(meta);
  st->meta_keys = calloc(n ? n : 1, sizeof(char *));
  st->meta_values = calloc(n ? n : 1, sizeof(char *));
  if (!st->meta_keys || !st->meta_values) return est_error(EST_ERR_NO_MEMORY, "%s: out of memory", st->what);
  const char *key;
  json_t *v;
  json_object_foreach(meta, key, v) {
    if (!json_is_string(v))
      return bad(st, "InvalidHeaderDeserialization", "__metadata__ value of '%s' is not a string", key);
    /* Keep key and value together so sorting the keys keeps them paired. */
    size_t kl = strlen(key), vl = json_string_length(v);
    if (memchr(json_string_value(v), 0, vl))
      return bad(st, "InvalidHeaderDeserialization", "__metadata__ value of '%s' holds a NUL", key);
    char *kv = malloc(kl + vl + 2);
    if (!kv) return est_error(EST_ERR_NO_MEMORY, "%s: out of memory", st->what);
    memcpy(kv, key, kl + 1);
    memcpy(kv + kl + 1, json_string_value(v), vl + 1);
    st->meta_keys[st->meta_count++] = kv;
  }
  qsort(st->meta_keys, st->meta_count, sizeof(char *), by_string);
  for (size_t i = 0; i < st->meta_count; i++)
    st->meta_values[i] = st->meta_keys[i] + strlen(st->meta_keys[i]) + 1;
  return EST_OK;
}

static est_status parse_tensor(est_safetensors *st, st_tensor *t, const char *name, json_t *info) {
  if (!json_is_object(info)) return bad(st, "InvalidHeaderDeserialization", "'%s' is not an object", name);
  json_t *dtype = json_object_get(info, "dtype"), *shape = json_object_get(info, "shape");
  json_t *offsets = json_object_get(info, "data_offsets");
  if (!json_is_string(dtype) || !(t->dt = est_st_dtype_by_name(json_string_value(dtype))))
    return bad(st, "InvalidHeaderDeserialization", "'%s' has a missing or unknown dtype", name);
  uint64_t dims[EST_MAX_RANK], off[2];
  long rank = int_array(shape, dims, EST_MAX_RANK);
  if (rank < 0) return bad(st, "InvalidHeaderDeserialization", "'%s' has a bad shape", name);
  if (int_array(offsets, off, 2) != 2)
    return bad(st, "InvalidHeaderDeserialization", "'%s' has bad data_offsets", name);
  if (!(t->name = strdup(name))) return est_error(EST_ERR_NO_MEMORY, "%s: out of memory", st->what);
  t->begin = off[0];
  t->end = off[1];
  /* Element count and overflow are checked in validate(); the shape is kept here. */
  uint64_t n = 1;
  int overflow = 0;
  for (long i = 0; i < rank; i++) {
    uint64_t d = (uint64_t)json_integer_value(json_array_get(shape, (size_t)i));
    overflow |= __builtin_mul_overflow(n, d, &n);
    if (i < EST_MAX_RANK) t->dims[i] = (int64_t)d;
  }
  uint64_t bits;
  if (overflow || __builtin_mul_overflow(n, (uint64_t)t->dt->bits, &bits))
    return bad(st, "ValidationOverflow", "the shape of '%s' overflows", name);
  if (bits % 8) return bad(st, "MisalignedSlice", "'%s' does not fill a whole number of bytes", name);
  if (t->end < t->begin) return bad(st, "InvalidOffset", "'%s' ends before it begins", name);
  if (t->end - t->begin != bits / 8)
    return bad(st, "TensorInvalidInfo", "the byte size of '%s' does not match its dtype and shape", name);
  if (rank > EST_MAX_RANK)
    return est_error(EST_ERR_UNIMPLEMENTED, "%s: tensor '%s' has rank %ld; est supports at most %d", st->what,
                     name, rank, EST_MAX_RANK);
  t->rank = (int)rank;
  t->num_elements = (int64_t)n;
  return EST_OK;
}

/* Parses the N header bytes; `data_len` is how many bytes follow the header. */
static est_status parse_header(est_safetensors *st, const uint8_t *hdr, size_t n, uint64_t data_len) {
  if (!est_st_valid_utf8(hdr, n)) return bad(st, "InvalidHeader", "%s", "the header is not valid UTF-8");
  json_error_t jerr;
  json_t *root = json_loadb((const char *)hdr, n, JSON_REJECT_DUPLICATES, &jerr);
  if (!root) return bad(st, "InvalidHeaderDeserialization", "%s", est_json_error_text(&jerr));
  est_status s = EST_OK;
  if (!json_is_object(root)) {
    s = bad(st, "InvalidHeaderDeserialization", "%s", "the header is not a JSON object");
    goto done;
  }
  size_t total = json_object_size(root);
  st->tensors = calloc(total ? total : 1, sizeof *st->tensors);
  if (!st->tensors) {
    s = est_error(EST_ERR_NO_MEMORY, "%s: out of memory", st->what);
    goto done;
  }
  const char *key;
  json_t *v;
  json_object_foreach(root, key, v) {
    if (!strcmp(key, "__metadata__")) s = parse_metadata(st, v);
    else s = parse_tensor(st, &st->tensors[st->count++], key, v);
    if (s != EST_OK) goto done;
  }
  /* Metadata::validate: in offset order, each tensor starts where the previous ended. */
  qsort(st->tensors, st->count, sizeof *st->tensors, by_offsets);
  uint64_t end = 0;
  for (size_t i = 0; i < st->count; i++) {
    if (st->tensors[i].begin != end) {
      s = bad(st, "InvalidOffset", "'%s' does not start where the previous tensor ends", st->tensors[i].name);
      goto done;
    }
    end = st->tensors[i].end;
  }
  if (end != data_len) {
    char detail[96];
    snprintf(detail, sizeof detail, "tensors cover %llu bytes, the file holds %llu after the header",
             (unsigned long long)end, (unsigned long long)data_len);
    s = bad(st, "MetadataIncompleteBuffer", "%s", detail);
    goto done;
  }
  qsort(st->tensors, st->count, sizeof *st->tensors, by_tensor_name);
done:
  json_decref(root);
  return s;
}

/* Checks the 8-byte length against the file size; *n gets N. */
static est_status check_length(est_safetensors *st, const uint8_t *first8, uint64_t file_size, uint64_t *n) {
  if (file_size < 8) return bad(st, "HeaderTooSmall", "%s", "the file is shorter than 8 bytes");
  *n = est_pw_decode_fixed64(first8);
  if (*n > EST_ST_MAX_HEADER_SIZE) return bad(st, "HeaderTooLarge", "%s", "the header length exceeds 100000000");
  if (*n > file_size - 8) return bad(st, "InvalidHeaderLength", "%s", "the header runs past the end of the file");
  return EST_OK;
}

static est_safetensors *new_reader(const char *what) {
  est_safetensors *st = calloc(1, sizeof *st);
  if (!st) return NULL;
  st->fd = -1;
  if (!(st->what = strdup(what))) {
    free(st);
    return NULL;
  }
  return st;
}

est_status est_safetensors_open_memory(est_safetensors **out, const void *data, size_t size, const char *what) {
  *out = NULL;
  est_safetensors *st = new_reader(what);
  if (!st) return est_error(EST_ERR_NO_MEMORY, "out of memory opening %s", what);
  uint64_t n = 0;
  est_status s = check_length(st, data, size, &n);
  if (s == EST_OK) s = parse_header(st, (const uint8_t *)data + 8, (size_t)n, size - 8 - n);
  if (s == EST_OK) {
    st->data_start = 8 + n;
    st->mem = malloc(size - st->data_start + 1);
    if (!st->mem) s = est_error(EST_ERR_NO_MEMORY, "out of memory opening %s", what);
    else memcpy(st->mem, (const uint8_t *)data + st->data_start, size - st->data_start);
  }
  if (s != EST_OK) {
    est_safetensors_close(st);
    return s;
  }
  *out = st;
  return EST_OK;
}

static est_status pread_all(int fd, void *dst, uint64_t n, uint64_t off, const char *what) {
  uint8_t *p = dst;
  while (n > 0) {
    size_t want = n > (1u << 30) ? (1u << 30) : (size_t)n;
    ssize_t got = pread(fd, p, want, (off_t)off);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return est_error(EST_ERR_IO, "reading %s: %s", what, strerror(errno));
    if (got == 0) return est_error(EST_ERR_DATA_LOSS, "%s: unexpected end of file at byte %llu", what,
                                   (unsigned long long)off);
    p += got;
    n -= (uint64_t)got;
    off += (uint64_t)got;
  }
  return EST_OK;
}

est_status est_safetensors_open(est_safetensors **out, const char *path) {
  *out = NULL;
  est_safetensors *st = new_reader(path);
  if (!st) return est_error(EST_ERR_NO_MEMORY, "out of memory opening %s", path);
  st->fd = open(path, O_RDONLY | O_CLOEXEC);
  if (st->fd < 0) {
    est_status s = est_error(errno == ENOENT ? EST_ERR_NOT_FOUND : EST_ERR_IO, "cannot open %s: %s", path,
                             strerror(errno));
    est_safetensors_close(st);
    return s;
  }
  struct stat sb;
  uint8_t first8[8] = {0};
  uint64_t n = 0;
  est_status s = fstat(st->fd, &sb) == 0 ? EST_OK : est_error(EST_ERR_IO, "stat %s: %s", path, strerror(errno));
  if (s == EST_OK && sb.st_size >= 8) s = pread_all(st->fd, first8, 8, 0, path);
  if (s == EST_OK) s = check_length(st, first8, (uint64_t)sb.st_size, &n);
  uint8_t *hdr = NULL;
  if (s == EST_OK && !(hdr = malloc(n ? (size_t)n : 1))) s = est_error(EST_ERR_NO_MEMORY, "out of memory reading %s", path);
  if (s == EST_OK) s = pread_all(st->fd, hdr, n, 8, path);
  if (s == EST_OK) s = parse_header(st, hdr, (size_t)n, (uint64_t)sb.st_size - 8 - n);
  free(hdr);
  if (s != EST_OK) {
    est_safetensors_close(st);
    return s;
  }
  st->data_start = 8 + n;
  *out = st;
  return EST_OK;
}

void est_safetensors_close(est_safetensors *st) {
  if (!st) return;
  if (st->fd >= 0) close(st->fd);
  for (size_t i = 0; i < st->count; i++) free(st->tensors[i].name);
  free(st->tensors);
  for (size_t i = 0; i < st->meta_count; i++) free(st->meta_keys[i]); /* values share the block */
  free(st->meta_keys);
  free(st->meta_values);
  free(st->mem);
  free(st->what);
  free(st);
}

size_t est_safetensors_count(const est_safetensors *st) { return st->count; }

const char *est_safetensors_name(const est_safetensors *st, size_t i) {
  return i < st->count ? st->tensors[i].name : NULL;
}

static const st_tensor *find(const est_safetensors *st, const char *name) {
  size_t lo = 0, hi = st->count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = strcmp(st->tensors[mid].name, name);
    if (c == 0) return &st->tensors[mid];
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  return NULL;
}

int est_safetensors_has(const est_safetensors *st, const char *name) { return find(st, name) != NULL; }

const char *est_safetensors_dtype_string(const est_safetensors *st, const char *name) {
  const st_tensor *t = find(st, name);
  return t ? t->dt->name : NULL;
}

static est_status find_or_fail(const est_safetensors *st, const char *name, const st_tensor **t) {
  *t = find(st, name);
  if (!*t) return est_error(EST_ERR_NOT_FOUND, "%s: no tensor named '%s'", st->what, name);
  return EST_OK;
}

est_status est_safetensors_info(const est_safetensors *st, const char *name, est_dtype *dtype, int *rank,
                                int64_t dims[EST_MAX_RANK]) {
  const st_tensor *t;
  est_status s = find_or_fail(st, name, &t);
  if (s != EST_OK) return s;
  if (dtype) *dtype = t->dt->dtype;
  if (rank) *rank = t->rank;
  if (dims)
    for (int i = 0; i < t->rank; i++) dims[i] = t->dims[i];
  return EST_OK;
}

static est_status read_bytes(est_safetensors *st, const st_tensor *t, void *dst) {
  uint64_t n = t->end - t->begin;
  if (n == 0) return EST_OK;
  if (st->fd < 0) {
    memcpy(dst, st->mem + t->begin, (size_t)n);
    return EST_OK;
  }
  return pread_all(st->fd, dst, n, st->data_start + t->begin, st->what);
}

est_status est_safetensors_read(est_safetensors *st, const char *name, est_tensor *out) {
  memset(out, 0, sizeof *out);
  const st_tensor *t;
  est_status s = find_or_fail(st, name, &t);
  if (s != EST_OK) return s;
  if (t->dt->dtype == EST_DT_INVALID)
    return est_error(EST_ERR_UNIMPLEMENTED, "%s: '%s' has dtype %s, which est does not read", st->what, name,
                     t->dt->name);
  s = est_tensor_alloc(out, t->dt->dtype, t->rank, t->dims);
  if (s == EST_OK) s = read_bytes(st, t, out->data);
  if (s != EST_OK) est_tensor_free(out);
  return s;
}

est_status est_safetensors_read_into(est_safetensors *st, const char *name, est_dtype dtype, void *dst,
                                     size_t dst_bytes) {
  const st_tensor *t;
  est_status s = find_or_fail(st, name, &t);
  if (s != EST_OK) return s;
  int widen = dtype == EST_DT_FLOAT && (t->dt->dtype == EST_DT_HALF || t->dt->dtype == EST_DT_BFLOAT16);
  if (t->dt->dtype == EST_DT_INVALID || (dtype != t->dt->dtype && !widen))
    return est_error(EST_ERR_FAILED_PRECONDITION, "%s: '%s' is %s, not %s", st->what, name, t->dt->name,
                     est_dtype_name(dtype) ? est_dtype_name(dtype) : "an est dtype");
  uint64_t want = (uint64_t)t->num_elements * est_dtype_size(dtype);
  if (want != dst_bytes)
    return est_error(EST_ERR_FAILED_PRECONDITION, "%s: '%s' needs %llu bytes as %s, the destination holds %zu",
                     st->what, name, (unsigned long long)want, est_dtype_name(dtype), dst_bytes);
  if (!widen) return read_bytes(st, t, dst);
  uint16_t *tmp = malloc((size_t)(t->end - t->begin) + 1);
  if (!tmp) return est_error(EST_ERR_NO_MEMORY, "out of memory reading '%s'", name);
  s = read_bytes(st, t, tmp);
  if (s == EST_OK) {
    float *f = dst;
    for (int64_t i = 0; i < t->num_elements; i++)
      f[i] = t->dt->dtype == EST_DT_HALF ? est_half_to_float(tmp[i]) : est_bfloat16_to_float(tmp[i]);
  }
  free(tmp);
  return s;
}

size_t est_safetensors_metadata_count(const est_safetensors *st) { return st->meta_count; }

const char *est_safetensors_metadata_key(const est_safetensors *st, size_t i) {
  return i < st->meta_count ? st->meta_keys[i] : NULL;
}

const char *est_safetensors_metadata_value(const est_safetensors *st, size_t i) {
  return i < st->meta_count ? st->meta_values[i] : NULL;
}

const char *est_safetensors_metadata_get(const est_safetensors *st, const char *key) {
  for (size_t i = 0; i < st->meta_count; i++)
    if (!strcmp(st->meta_keys[i], key)) return st->meta_values[i];
  return NULL;
}
