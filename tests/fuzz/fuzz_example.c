/* libFuzzer target: tf.train.Example parsing (generic and against feature specs) and
 * TensorBoard Event decoding on arbitrary bytes. Invariant: whatever the generic parser
 * accepts, our serializer re-encodes into bytes that parse to the same content. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "est/example.h"
#include "est/tfevents.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  est_example ex, back;
  est_example_init(&ex);
  est_example_init(&back);
  if (est_example_parse(&ex, data, size) == EST_OK) {
    uint8_t *ser;
    size_t n;
    char *a, *b;
    size_t an, bn;
    if (est_example_serialize(&ex, &ser, &n) != EST_OK) abort();
    if (est_example_parse(&back, ser, n) != EST_OK) abort();
    if (est_example_to_json(&ex, &a, &an) != EST_OK || est_example_to_json(&back, &b, &bn) != EST_OK) abort();
    if (an != bn || memcmp(a, b, an)) abort();
    free(a);
    free(b);
    free(ser);
  }
  est_example_clear(&ex);
  est_example_clear(&back);

  /* The spec parser: every spec kind and dtype, keys short enough to be hit. */
  static const int64_t dflt_i[2] = {7, 8};
  est_feature_spec specs[6] = {
      {.key = "a", .dtype = EST_DT_INT64, .rank = 1, .shape = {2}, .default_value = dflt_i, .default_count = 2},
      {.key = "b", .dtype = EST_DT_FLOAT, .rank = 0},
      {.key = "c", .dtype = EST_DT_STRING, .rank = 2, .shape = {1, 2}},
      {.key = "d", .dtype = EST_DT_INT64, .var_len = EST_VAR_LEN},
      {.key = "e", .dtype = EST_DT_FLOAT, .var_len = EST_FIXED_LEN_SEQUENCE, .rank = 1, .shape = {2}},
      {.key = "", .dtype = EST_DT_STRING, .var_len = EST_VAR_LEN},
  };
  int64_t a[2];
  float b;
  est_bytes c[2];
  est_varlen_value d = {0}, e = {0}, f = {0};
  void *out[6] = {a, &b, c, &d, &e, &f};
  if (est_example_parse_specs(specs, 6, data, size, out, "fuzz") == EST_OK) {
    for (size_t i = 0; i < 2; i++) /* string views must lie inside the input */
      if (c[i].size && (c[i].data < data || c[i].data + c[i].size > data + size)) abort();
    if (e.count % 2) abort();
  }
  free(d.values);
  free(e.values);
  free(f.values);

  est_event ev;
  if (est_event_parse(&ev, data, size) == EST_OK) est_event_clear(&ev);
  return 0;
}
