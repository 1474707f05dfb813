/* libFuzzer target: bert_config.json parsing on arbitrary text. Invariant: a config that
 * parses is valid, and writing it out and parsing that gives the same text again. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "est/bert_classifier.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = 0;
  est_bert_config c;
  if (est_bert_config_from_json_string(&c, text, "fuzz") == EST_OK) {
    if (est_bert_config_validate(&c, "fuzz") != EST_OK) abort();
    char *a = est_bert_config_to_json_string(&c);
    est_bert_config d;
    if (!a || est_bert_config_from_json_string(&d, a, "fuzz-rewritten") != EST_OK) abort();
    char *b = est_bert_config_to_json_string(&d);
    if (!b || strcmp(a, b)) abort();
    free(a);
    free(b);
  }
  free(text);
  return 0;
}
