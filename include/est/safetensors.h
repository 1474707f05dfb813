/* est/safetensors.h — HuggingFace safetensors files (docs/safetensors.md).
 *
 * Layout: u64 LE header length N, N bytes of JSON
 *   {"__metadata__":{"k":"v"}, "name":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}, ...}
 * padded with spaces to a multiple of 8, then the tensor bytes (row-major, little-endian).
 *
 *     est_safetensors *st;
 *     if (est_safetensors_open(&st, "model.safetensors") != EST_OK) return est_error_code();
 *     for (size_t i = 0; i < est_safetensors_count(st); i++) puts(est_safetensors_name(st, i));
 *     est_tensor t;
 *     est_safetensors_read(st, "bert.pooler.dense.bias", &t);   // est_tensor_free(&t)
 *     est_safetensors_close(st);
 *
 *     est_safetensors_writer *w;
 *     est_safetensors_writer_open(&w, "out.safetensors");
 *     est_safetensors_writer_set_metadata(w, "format", "pt");
 *     est_safetensors_writer_add(w, "w", &t);                   // data must outlive finish
 *     est_safetensors_writer_finish(w);                         // atomic; frees w
 *
 * The reader validates like the Rust reference (read_metadata + Metadata::validate):
 * header size limits, UTF-8, JSON schema, duplicate keys, contiguous non-overlapping
 * offsets, sizes that match dtype x shape, and no bytes after the last tensor. Failures
 * are EST_ERR_DATA_LOSS with the Rust error's name in the message ("InvalidOffset: ...").
 * The writer is byte-identical to the Rust serializer (tensors sorted by dtype, largest
 * first, then by name; compact JSON; __metadata__ keys sorted bytewise; space padding).
 */
#ifndef EST_SAFETENSORS_H
#define EST_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "est/status.h"
#include "est/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct est_safetensors est_safetensors;

/* Reads and validates the header; tensor bytes are read (pread) when asked for. */
est_status est_safetensors_open(est_safetensors **out, const char *path);

/* The same over a whole file held in memory (copied; the caller keeps `data`).
 * `what` names it in messages. */
est_status est_safetensors_open_memory(est_safetensors **out, const void *data, size_t size,
                                       const char *what);

void est_safetensors_close(est_safetensors *st);   /* NULL is fine */

/* Tensors sorted by name (bytewise). */
size_t est_safetensors_count(const est_safetensors *st);
const char *est_safetensors_name(const est_safetensors *st, size_t i);
int est_safetensors_has(const est_safetensors *st, const char *name);

/* The safetensors dtype string ("F32", "BF16", ...) of a tensor, or NULL if absent. */
const char *est_safetensors_dtype_string(const est_safetensors *st, const char *name);

/* dtype / rank / dims (any may be NULL). dtype is EST_DT_INVALID for safetensors types
 * est has no dtype for (F8_*, F4, F6_*, C64); those can be listed but not read. */
est_status est_safetensors_info(const est_safetensors *st, const char *name, est_dtype *dtype, int *rank,
                                int64_t dims[EST_MAX_RANK]);

/* Reads a tensor into storage owned by `out` (est_tensor_free). */
est_status est_safetensors_read(est_safetensors *st, const char *name, est_tensor *out);

/* Into caller memory; dtype must match, dst_bytes must equal the tensor's byte size
 * (FAILED_PRECONDITION otherwise). FLOAT may be asked of F16 / BF16 tensors (widened). */
est_status est_safetensors_read_into(est_safetensors *st, const char *name, est_dtype dtype, void *dst,
                                     size_t dst_bytes);

/* __metadata__: entries sorted by key; get returns NULL when the key is absent. */
size_t est_safetensors_metadata_count(const est_safetensors *st);
const char *est_safetensors_metadata_key(const est_safetensors *st, size_t i);
const char *est_safetensors_metadata_value(const est_safetensors *st, size_t i);
const char *est_safetensors_metadata_get(const est_safetensors *st, const char *key);

/* safetensors dtype string for an est dtype ("F32" for FLOAT), NULL when there is none
 * (STRING); and back (EST_DT_INVALID when unknown or not representable). */
const char *est_safetensors_dtype_name(est_dtype dtype);
est_dtype est_safetensors_dtype_from_name(const char *name);

/* ---- writer ------------------------------------------------------------------------ */

typedef struct est_safetensors_writer est_safetensors_writer;

est_status est_safetensors_writer_open(est_safetensors_writer **out, const char *path);

/* Registers a tensor (struct copied, data not: it must stay valid until finish). Names
 * must be valid UTF-8, unique and not "__metadata__"; STRING tensors are refused. */
est_status est_safetensors_writer_add(est_safetensors_writer *w, const char *name, const est_tensor *t);

/* Sets (or replaces) a __metadata__ entry; both strings must be UTF-8. */
est_status est_safetensors_writer_set_metadata(est_safetensors_writer *w, const char *key,
                                               const char *value);

/* Serializes the whole file into memory (malloc'ed; the caller frees *data). w stays open. */
est_status est_safetensors_writer_serialize(est_safetensors_writer *w, uint8_t **data, size_t *size);

/* Writes the file atomically (temp + fsync + rename). Frees w either way. */
est_status est_safetensors_writer_finish(est_safetensors_writer *w);
void est_safetensors_writer_abort(est_safetensors_writer *w);   /* NULL is fine */

#ifdef __cplusplus
}
#endif
#endif
