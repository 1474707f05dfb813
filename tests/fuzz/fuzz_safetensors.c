/* libFuzzer target: safetensors header parsing and validation on arbitrary bytes.
 * Invariant: a file that opens reads every tensor, and our writer re-serializes it into a
 * file that opens to the same names, dtypes, shapes, bytes and metadata. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "est/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  est_safetensors *st;
  if (est_safetensors_open_memory(&st, data, size, "fuzz") != EST_OK) return 0;
  size_t n = est_safetensors_count(st);
  est_tensor *ts = calloc(n ? n : 1, sizeof *ts);
  est_safetensors_writer *w;
  if (est_safetensors_writer_open(&w, "unused") != EST_OK) abort();
  for (size_t i = 0; i < est_safetensors_metadata_count(st); i++)
    if (est_safetensors_writer_set_metadata(w, est_safetensors_metadata_key(st, i),
                                            est_safetensors_metadata_value(st, i)) != EST_OK)
      abort();
  size_t kept = 0;
  for (size_t i = 0; i < n; i++) {
    const char *name = est_safetensors_name(st, i);
    est_status s = est_safetensors_read(st, name, &ts[i]);
    if (s == EST_ERR_UNIMPLEMENTED) continue; /* F8 / F4 / C64: listed, not readable */
    if (s != EST_OK) abort();
    if (est_safetensors_writer_add(w, name, &ts[i]) != EST_OK) abort();
    kept++;
  }
  uint8_t *out;
  size_t outn;
  if (est_safetensors_writer_serialize(w, &out, &outn) != EST_OK) abort();
  est_safetensors *back;
  if (est_safetensors_open_memory(&back, out, outn, "fuzz-rebuilt") != EST_OK) abort();
  if (est_safetensors_count(back) != kept) abort();
  if (est_safetensors_metadata_count(back) != est_safetensors_metadata_count(st)) abort();
  for (size_t i = 0; i < n; i++) {
    const char *name = est_safetensors_name(st, i);
    if (!ts[i].data) continue;
    est_tensor t;
    if (est_safetensors_read(back, name, &t) != EST_OK) abort();
    if (t.dtype != ts[i].dtype || t.rank != ts[i].rank) abort();
    for (int k = 0; k < t.rank; k++)
      if (t.dims[k] != ts[i].dims[k]) abort();
    if (memcmp(t.data, ts[i].data, est_tensor_num_bytes(&t))) abort();
    est_tensor_free(&t);
  }
  est_safetensors_close(back);
  free(out);
  est_safetensors_writer_abort(w);
  for (size_t i = 0; i < n; i++) est_tensor_free(&ts[i]);
  free(ts);
  est_safetensors_close(st);
  return 0;
}
