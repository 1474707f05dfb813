/* validate_case_matches_checkpoint (tokenization.py): refuse a do_lower_case that
 * contradicts one of Google's released checkpoints, recognised by its directory name. */
#include <stdbool.h>
#include <string.h>

#include "est/tokenizer.h"

static bool name_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

/* The reference's pattern is "/bert_model.ckpt" with an unescaped '.', so any char matches. */
static bool at_ckpt(const char *s) {
  static const char pat[] = "/bert_model.ckpt";
  for (size_t i = 0; pat[i]; i++) {
    if (!s[i]) return false;
    if (pat[i] != '.' && s[i] != pat[i]) return false;
  }
  return true;
}

est_status est_validate_case_matches_checkpoint(bool do_lower_case, const char *init_checkpoint) {
  if (!init_checkpoint || !*init_checkpoint) return EST_OK;
  /* re.match("^.*?([A-Za-z0-9_-]+)/bert_model.ckpt"): the lazy prefix makes the leftmost run
   * of name characters that is directly followed by the pattern the model name. */
  const char *p = init_checkpoint, *name = NULL;
  size_t len = 0;
  for (; *p && !name; p++) {
    if (!name_char(*p)) continue;
    const char *e = p;
    while (name_char(*e)) e++;
    if (at_ckpt(e)) {
      name = p;
      len = (size_t)(e - p);
    }
  }
  if (!name) return EST_OK;
  static const char *lower_models[] = {"uncased_L-24_H-1024_A-16", "uncased_L-12_H-768_A-12",
                                       "multilingual_L-12_H-768_A-12", "chinese_L-12_H-768_A-12"};
  static const char *cased_models[] = {"cased_L-12_H-768_A-12", "cased_L-24_H-1024_A-16",
                                       "multi_cased_L-12_H-768_A-12"};
  bool is_lower = false, is_cased = false;
  for (size_t i = 0; i < sizeof lower_models / sizeof *lower_models; i++)
    is_lower |= strlen(lower_models[i]) == len && !strncmp(name, lower_models[i], len);
  for (size_t i = 0; i < sizeof cased_models / sizeof *cased_models; i++)
    is_cased |= strlen(cased_models[i]) == len && !strncmp(name, cased_models[i], len);
  if ((is_lower && !do_lower_case) || (is_cased && do_lower_case))
    return est_error(EST_ERR_INVALID_ARGUMENT,
                     "You passed in `--do_lower_case=%s` with `--init_checkpoint=%s`. However, "
                     "`%.*s` seems to be a %s model, so you should pass in `--do_lower_case=%s` so "
                     "that the fine-tuning matches how the model was pre-trained.",
                     do_lower_case ? "True" : "False", init_checkpoint, (int)len, name,
                     is_lower ? "lowercased" : "cased", do_lower_case ? "False" : "True");
  return EST_OK;
}
