/* libFuzzer target: a HuggingFace config.json (est_bert_config_from_json_string, which hands
 * a config with "model_type" to est_hf_config_from_json, src/hf/hf_config.c: BERT, RoBERTa,
 * XLM-R, DistilBERT, ELECTRA, ModernBERT) on arbitrary text. Invariants: a config either fails with
 * INVALID_ARGUMENT and a message or is valid; an HF one (with "model_type"; Google's
 * bert_config.json is fuzz_bert_config's) written as est's HF export writes it
 * (est_hf_config_to_json_string, with labels) parses to a config of the same family,
 * activation and padding id that writes the same text again. */
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "est/bert_encoder.h"
#include "est/hf_model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = 0;
  est_bert_config c;
  est_status st = est_bert_config_from_json_string(&c, text, "fuzz-config.json");
  if (st != EST_OK) {
    if (st != EST_ERR_INVALID_ARGUMENT || !est_error_message()[0]) abort();
  } else {
    if (est_bert_config_validate(&c, "fuzz") != EST_OK) abort();
    json_t *root = json_loads(text, 0, NULL);
    const bool hf = json_object_get(root, "model_type") != NULL;
    json_decref(root);
    if (hf) {
      static const char *const labels[] = {"neg", "pos \"quoted\"", "caf\xc3\xa9"};
      char *a = est_hf_config_to_json_string(&c, "BertForSequenceClassification", labels, 3);
      est_bert_config d;
      if (!a || est_bert_config_from_json_string(&d, a, "fuzz-rewritten") != EST_OK) abort();
      char *b = est_hf_config_to_json_string(&d, "BertForSequenceClassification", labels, 3);
      if (!b || strcmp(a, b) || d.opt.family != c.opt.family || d.hidden_act != c.hidden_act ||
          d.pad_token_id != c.pad_token_id)
        abort();
      free(a);
      free(b);
    }
  }
  free(text);
  return 0;
}
