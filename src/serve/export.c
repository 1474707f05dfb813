/* Export: a checkpoint + vocab + what the model is -> <base>/<version>/ as TF's
 * export_saved_model lays a servable out (variables/, assets/), plus est_model.json. The
 * three parts are apart: the version directory (export_versions.c: numbered, built under a
 * hidden name and renamed into place), the weights (export_weights.c) and est_model.json
 * (model_meta.c); this file writes one version from them. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/file.h"
#include "est/log.h"
#include "est/serving.h"
#include "est/tokenizer.h"
#include "serve/export_internal.h"

est_status est_export_write(const char *export_base, const char *ckpt_prefix, const est_model_meta *meta,
                            const char *vocab_file, char *version_dir, size_t size) {
  char tmp[4096], final[4096], path[4096];
  int64_t version;
  est_status st = est_export_version_begin(export_base, tmp, sizeof tmp, &version);
  if (st != EST_OK) return st;
  uint8_t *tokenizer_json = NULL;
  size_t tokenizer_json_size = 0;
  char *json = NULL, source_json[4096];
  /* assets/vocab.txt (none from a tokenizer.json without a WordPiece vocab); a HuggingFace
   * tokenizer.json (--vocab_file=it or a model directory) also as it is, since its settings
   * (e.g. max_input_chars_per_word) are the model's, and it is the tokenizer of any other model */
  st = est_path_join(path, sizeof path, tmp, "assets");
  if (st == EST_OK) st = est_mkdirs(path);
  if (st == EST_OK) st = est_path_join(path, sizeof path, tmp, "assets/vocab.txt");
  if (st == EST_OK) st = est_vocab_file_write(path, vocab_file, meta->do_lower_case);
  if (st == EST_OK) st = est_tokenizer_json_of(vocab_file, source_json, sizeof source_json);
  if (st == EST_OK && source_json[0]) {
    st = est_read_file(source_json, &tokenizer_json, &tokenizer_json_size);
    if (st == EST_OK) st = est_path_join(path, sizeof path, tmp, "assets/tokenizer.json");
    if (st == EST_OK) st = est_write_file_atomic(path, tokenizer_json, tokenizer_json_size);
  }
  if (st == EST_OK) st = est_path_join(path, sizeof path, tmp, "variables/variables");
  if (st == EST_OK) st = est_export_weights(path, ckpt_prefix, meta);
  if (st == EST_OK) {
    json = est_model_meta_to_json(meta);
    if (!json) st = est_error(EST_ERR_NO_MEMORY, "writing est_model.json");
  }
  if (st == EST_OK) st = est_path_join(path, sizeof path, tmp, "est_model.json");
  if (st == EST_OK) st = est_write_file_atomic(path, json, strlen(json));
  if (st == EST_OK) st = est_path_join(path, sizeof path, tmp, "variables");
  if (st == EST_OK) st = est_export_sync_dir(path);
  if (st == EST_OK) st = est_export_version_publish(export_base, tmp, version, final, sizeof final);
  if (st != EST_OK) est_remove_tree(tmp);
  free(tokenizer_json);
  free(json);
  if (st == EST_OK) {
    EST_LOG_INFO("exported %s to %s", ckpt_prefix, final);
    if (version_dir) snprintf(version_dir, size, "%s", final);
  }
  return st;
}
