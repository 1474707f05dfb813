/* safetensors writer: the Rust reference's prepare() + serialize() order and padding, written
 * atomically (docs/safetensors.md; huggingface/safetensors safetensors/src/tensor.rs). */
#include "est/safetensors.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "est/file.h"
#include "io/protowire.h"
#include "io/safetensors_internal.h"

static int by_string(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

typedef struct w_tensor {
  char *name;
  est_tensor t;
  const est_st_dtype_info *dt;
} w_tensor;

struct est_safetensors_writer {
  char *path;
  w_tensor *items;
  size_t count, cap;
  char **meta;               /* key NUL value NUL, one block per entry */
  size_t meta_count, meta_cap;
};

est_status est_safetensors_writer_open(est_safetensors_writer **out, const char *path) {
  *out = calloc(1, sizeof **out);
  if (!*out || !((*out)->path = strdup(path))) {
    free(*out);
    *out = NULL;
    return est_error(EST_ERR_NO_MEMORY, "out of memory opening %s", path);
  }
  return EST_OK;
}

void est_safetensors_writer_abort(est_safetensors_writer *w) {
  if (!w) return;
  for (size_t i = 0; i < w->count; i++) free(w->items[i].name);
  for (size_t i = 0; i < w->meta_count; i++) free(w->meta[i]);
  free(w->items);
  free(w->meta);
  free(w->path);
  free(w);
}

est_status est_safetensors_writer_add(est_safetensors_writer *w, const char *name, const est_tensor *t) {
  const est_st_dtype_info *dt = est_st_dtype_by_est(t->dtype);
  if (!dt)
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: tensor '%s' has dtype %s, which safetensors cannot hold",
                     w->path, name, est_dtype_name(t->dtype) ? est_dtype_name(t->dtype) : "(unknown)");
  if (!est_st_valid_utf8((const uint8_t *)name, strlen(name)) || !strcmp(name, "__metadata__"))
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: '%s' cannot be a safetensors tensor name", w->path, name);
  if (t->rank < 0 || t->rank > EST_MAX_RANK)
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: tensor '%s' has rank %d", w->path, name, t->rank);
  for (int i = 0; i < t->rank; i++)
    if (t->dims[i] < 0)
      return est_error(EST_ERR_INVALID_ARGUMENT, "%s: tensor '%s' has a negative dimension", w->path, name);
  if (est_tensor_num_elements(t) > 0 && !t->data)
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: tensor '%s' has no data", w->path, name);
  for (size_t i = 0; i < w->count; i++)
    if (!strcmp(w->items[i].name, name))
      return est_error(EST_ERR_INVALID_ARGUMENT, "%s: duplicate tensor name '%s'", w->path, name);
  w_tensor *grown = est_grow(w->items, &w->cap, w->count + 1, sizeof *grown, 32);
  if (!grown) return est_error(EST_ERR_NO_MEMORY, "out of memory adding '%s'", name);
  w->items = grown;
  w_tensor *it = &w->items[w->count];
  if (!(it->name = strdup(name))) return est_error(EST_ERR_NO_MEMORY, "out of memory adding '%s'", name);
  it->t = *t;
  it->dt = dt;
  w->count++;
  return EST_OK;
}

est_status est_safetensors_writer_set_metadata(est_safetensors_writer *w, const char *key, const char *value) {
  size_t kl = strlen(key), vl = strlen(value);
  if (!est_st_valid_utf8((const uint8_t *)key, kl) || !est_st_valid_utf8((const uint8_t *)value, vl))
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: __metadata__ entries must be UTF-8", w->path);
  char *kv = malloc(kl + vl + 2);
  if (!kv) return est_error(EST_ERR_NO_MEMORY, "out of memory");
  memcpy(kv, key, kl + 1);
  memcpy(kv + kl + 1, value, vl + 1);
  for (size_t i = 0; i < w->meta_count; i++)
    if (!strcmp(w->meta[i], key)) {
      free(w->meta[i]);
      w->meta[i] = kv;
      return EST_OK;
    }
  if (w->meta_count == w->meta_cap) {
    size_t cap = w->meta_cap ? 2 * w->meta_cap : 8;
    char **p = realloc(w->meta, cap * sizeof *p);
    if (!p) {
      free(kv);
      return est_error(EST_ERR_NO_MEMORY, "out of memory");
    }
    w->meta = p;
    w->meta_cap = cap;
  }
  w->meta[w->meta_count++] = kv;
  return EST_OK;
}

/* serde_json's string escaping: \" \\ \b \f \n \r \t, other controls as \u00xx. */
static void put_json_string(est_pw_buf *b, const char *s) {
  est_pw_put_raw(b, "\"", 1);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    /* Copy a run of bytes that need no escape in one go. */
    const unsigned char *run = p;
    while (*p >= 0x20 && *p != '"' && *p != '\\') p++;
    if (p > run) est_pw_put_raw(b, run, (size_t)(p - run));
    if (!*p) break;
    char esc[8];
    const char *e = NULL;
    switch (*p) {
    case '"': e = "\\\""; break;
    case '\\': e = "\\\\"; break;
    case '\b': e = "\\b"; break;
    case '\f': e = "\\f"; break;
    case '\n': e = "\\n"; break;
    case '\r': e = "\\r"; break;
    case '\t': e = "\\t"; break;
    default:
      if (*p < 0x20) {
        snprintf(esc, sizeof esc, "\\u%04x", *p);
        e = esc;
      }
    }
    if (e) est_pw_put_raw(b, e, strlen(e));
    else est_pw_put_raw(b, p, 1);
  }
  est_pw_put_raw(b, "\"", 1);
}

static void put_text(est_pw_buf *b, const char *s) { est_pw_put_raw(b, s, strlen(s)); }

static void put_u64(est_pw_buf *b, uint64_t v) {
  char num[24];
  snprintf(num, sizeof num, "%llu", (unsigned long long)v);
  put_text(b, num);
}

/* prepare(): largest dtype first (the enum's order, descending), then by name. */
static int by_dtype_then_name(const void *a, const void *b) {
  const w_tensor *x = a, *y = b;
  if (x->dt->order != y->dt->order) return y->dt->order - x->dt->order;
  return strcmp(x->name, y->name);
}

/* Sorts the tensors and builds the 8-byte length + padded JSON header. */
static est_status build_header(est_safetensors_writer *w, est_pw_buf *b) {
  if (w->count) qsort(w->items, w->count, sizeof *w->items, by_dtype_then_name);
  if (w->meta_count) qsort(w->meta, w->meta_count, sizeof *w->meta, by_string);
  est_pw_buf_init(b);
  est_pw_put_fixed64(b, 0); /* N, filled in below */
  put_text(b, "{");
  int first = 1;
  if (w->meta_count) {
    put_text(b, "\"__metadata__\":{");
    for (size_t i = 0; i < w->meta_count; i++) {
      if (i) put_text(b, ",");
      put_json_string(b, w->meta[i]);
      put_text(b, ":");
      put_json_string(b, w->meta[i] + strlen(w->meta[i]) + 1);
    }
    put_text(b, "}");
    first = 0;
  }
  uint64_t offset = 0;
  for (size_t i = 0; i < w->count; i++) {
    const w_tensor *it = &w->items[i];
    if (!first) put_text(b, ",");
    first = 0;
    put_json_string(b, it->name);
    put_text(b, ":{\"dtype\":");
    put_json_string(b, it->dt->name);
    put_text(b, ",\"shape\":[");
    for (int k = 0; k < it->t.rank; k++) {
      if (k) put_text(b, ",");
      put_u64(b, (uint64_t)it->t.dims[k]);
    }
    uint64_t size = est_tensor_num_bytes(&it->t);
    put_text(b, "],\"data_offsets\":[");
    put_u64(b, offset);
    put_text(b, ",");
    put_u64(b, offset + size);
    put_text(b, "]}");
    offset += size;
  }
  put_text(b, "}");
  /* Pad with spaces so the byte buffer starts 8-aligned. */
  while ((b->size - 8) % 8) put_text(b, " ");
  if (b->failed) {
    est_pw_buf_free(b);
    return est_error(EST_ERR_NO_MEMORY, "out of memory writing %s", w->path);
  }
  uint64_t n = b->size - 8;
  if (n > EST_ST_MAX_HEADER_SIZE) {
    est_pw_buf_free(b);
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: HeaderTooLarge: the header would be %llu bytes", w->path,
                     (unsigned long long)n);
  }
  est_pw_encode_fixed64(b->data, n);
  return EST_OK;
}

est_status est_safetensors_writer_serialize(est_safetensors_writer *w, uint8_t **data, size_t *size) {
  est_pw_buf b;
  est_status s = build_header(w, &b);
  if (s != EST_OK) return s;
  for (size_t i = 0; i < w->count; i++) est_pw_put_raw(&b, w->items[i].t.data, est_tensor_num_bytes(&w->items[i].t));
  if (b.failed) {
    est_pw_buf_free(&b);
    return est_error(EST_ERR_NO_MEMORY, "out of memory writing %s", w->path);
  }
  *data = est_pw_buf_release(&b, size);
  return EST_OK;
}

est_status est_safetensors_writer_finish(est_safetensors_writer *w) {
  est_pw_buf b;
  est_status s = build_header(w, &b);
  est_atomic_file *f = NULL;
  if (s == EST_OK) s = est_atomic_open(&f, w->path);
  if (s == EST_OK) {
    /* Stream the tensors after the header: no second copy of a large model in memory. */
    FILE *out = est_atomic_stream(f);
    if (fwrite(b.data, 1, b.size, out) != b.size)
      s = est_error(EST_ERR_IO, "writing %s: %s", est_atomic_temp_path(f), strerror(errno));
    for (size_t i = 0; i < w->count && s == EST_OK; i++) {
      size_t n = est_tensor_num_bytes(&w->items[i].t);
      if (n && fwrite(w->items[i].t.data, 1, n, out) != n)
        s = est_error(EST_ERR_IO, "writing %s: %s", est_atomic_temp_path(f), strerror(errno));
    }
    if (s == EST_OK) s = est_atomic_commit(f);
    else est_atomic_abort(f);
  }
  est_pw_buf_free(&b);
  est_safetensors_writer_abort(w);
  return s;
}
