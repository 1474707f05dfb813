/* libFuzzer target: est_model.json, the description of an exported servable (written by
 * est_export_write, read by est_servable_load through est_model_meta_read), on arbitrary
 * text. Invariants: what parses has >= 1 label, max_seq_length in [3, max_position_embeddings]
 * and a valid bert_config; writing it out (est_model_meta_to_json) and parsing that gives
 * the same text again. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "est/serving.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  est_model_meta m;
  if (est_model_meta_parse(&m, (const char *)data, size, "fuzz-est_model.json") != EST_OK) return 0;
  if (m.num_labels < 1 || !m.labels || m.max_seq_length < 3 ||
      m.max_seq_length > m.bert_config.max_position_embeddings ||
      est_bert_config_validate(&m.bert_config, "fuzz") != EST_OK)
    abort();
  for (size_t i = 0; i < m.num_labels; i++)
    if (!m.labels[i]) abort();
  char *a = est_model_meta_to_json(&m);
  est_model_meta back;
  if (!a || est_model_meta_parse(&back, a, strlen(a), "fuzz-rewritten") != EST_OK) abort();
  char *b = est_model_meta_to_json(&back);
  if (!b || strcmp(a, b)) abort();
  free(a);
  free(b);
  est_model_meta_clear(&back);
  est_model_meta_clear(&m);
  return 0;
}
