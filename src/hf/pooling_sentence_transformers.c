/* sentence-transformers' own files -> est_pooling_params (est/sentence_embedding.h).
 *
 * A sentence-transformers model directory (what SentenceTransformer.save writes, and what
 * all-MiniLM-L6-v2 and most embedding models ship) holds, next to the HF BERT files:
 *   modules.json          [{"idx": 0, "name": "0", "path": "", "type":
 *                           "sentence_transformers.models.Transformer"},
 *                          {"idx": 1, "name": "1", "path": "1_Pooling", "type":
 *                           "sentence_transformers.models.Pooling"},
 *                          {"idx": 2, "name": "2", "path": "2_Normalize", "type":
 *                           "sentence_transformers.models.Normalize"}]
 *   1_Pooling/config.json {"word_embedding_dimension": 384, "pooling_mode_cls_token": false,
 *                          "pooling_mode_mean_tokens": true, "pooling_mode_max_tokens": false,
 *                          "pooling_mode_mean_sqrt_len_tokens": false, ...}
 * est runs exactly Transformer -> Pooling -> (Normalize); any other module (Dense, LayerNorm,
 * a second Pooling) would change the vector, so it is refused rather than skipped. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "core/json_error.h"
#include "est/file.h"
#include "est/sentence_embedding.h"

/* Pooling config.json keys in est_pooling_mode bit order; the two after them are modes est
 * does not run (an error when true). */
static const char *const MODE_KEYS[EST_POOLING_NUM_MODES] = {
    "pooling_mode_cls_token", "pooling_mode_max_tokens", "pooling_mode_mean_tokens",
    "pooling_mode_mean_sqrt_len_tokens"};
static const char *const UNSUPPORTED_KEYS[] = {"pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken"};

static est_status load_json(json_t **out, const char *path) {
  json_error_t err;
  *out = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
  if (!*out)
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s:%d:%d: %s", path, err.line, err.column, est_json_error_text(&err));
  return EST_OK;
}

static est_status read_pooling_config(unsigned *modes, const char *path) {
  json_t *root;
  est_status st = load_json(&root, path);
  if (st != EST_OK) return st;
  *modes = 0;
  if (!json_is_object(root)) st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: must be a JSON object", path);
  for (int k = 0; st == EST_OK && k < EST_POOLING_NUM_MODES; k++) {
    const json_t *v = json_object_get(root, MODE_KEYS[k]);
    if (v && !json_is_boolean(v)) st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: \"%s\" must be true or false", path,
                                                 MODE_KEYS[k]);
    else if (json_is_true(v)) *modes |= 1u << k;
  }
  for (size_t k = 0; st == EST_OK && k < sizeof UNSUPPORTED_KEYS / sizeof *UNSUPPORTED_KEYS; k++)
    if (json_is_true(json_object_get(root, UNSUPPORTED_KEYS[k])))
      st = est_error(EST_ERR_UNIMPLEMENTED, "%s: \"%s\": true is a pooling mode est does not run (it runs cls, max, "
                     "mean, mean_sqrt_len)", path, UNSUPPORTED_KEYS[k]);
  const json_t *prompt = st == EST_OK ? json_object_get(root, "include_prompt") : NULL;
  if (prompt && !json_is_true(prompt))
    st = est_error(EST_ERR_UNIMPLEMENTED, "%s: \"include_prompt\": false is not supported (est pools every token)",
                   path);
  if (st == EST_OK && !*modes)
    st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: no pooling mode is true (%s, %s, %s or %s)", path, MODE_KEYS[0],
                   MODE_KEYS[1], MODE_KEYS[2], MODE_KEYS[3]);
  json_decref(root);
  return st;
}

/* modules.json -> the Pooling module's directory (relative to dir) and Normalize's presence. */
static est_status read_modules(const char *path, char *pooling_path, size_t size, bool *normalize) {
  json_t *root;
  est_status st = load_json(&root, path);
  if (st != EST_OK) return st;
  static const char prefix[] = "sentence_transformers.models.";
  int pooling_seen = 0;
  *normalize = false;
  if (!json_is_array(root)) st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: must be a JSON list of modules", path);
  for (size_t i = 0; st == EST_OK && i < json_array_size(root); i++) {
    const json_t *m = json_array_get(root, i);
    const json_t *type = json_object_get(m, "type"), *mpath = json_object_get(m, "path");
    if (!json_is_string(type) || (mpath && !json_is_string(mpath))) {
      st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: module [%zu]: \"type\" and \"path\" must be strings", path, i);
      break;
    }
    const char *t = json_string_value(type);
    const char *name = strncmp(t, prefix, sizeof prefix - 1) ? t : t + sizeof prefix - 1;
    const int expect_transformer = i == 0, after_pooling = pooling_seen && !*normalize;
    if (expect_transformer && !strcmp(name, "Transformer")) continue;
    if (!expect_transformer && !pooling_seen && !strcmp(name, "Pooling")) {
      pooling_seen = 1;
      snprintf(pooling_path, size, "%s", mpath ? json_string_value(mpath) : "");
      continue;
    }
    if (after_pooling && !strcmp(name, "Normalize")) {
      *normalize = true;
      continue;
    }
    st = est_error(EST_ERR_UNIMPLEMENTED, "%s: module [%zu] \"%s\": est runs Transformer, then Pooling, then "
                   "optionally Normalize, nothing else", path, i, t);
  }
  if (st == EST_OK && !pooling_seen)
    st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: no sentence_transformers.models.Pooling module", path);
  json_decref(root);
  return st;
}

est_status est_pooling_read_sentence_transformers(est_pooling_params *p, const char *dir, int *found) {
  char modules[4096], pooling_dir[1024] = "1_Pooling", config[4096], sub[2048];
  bool normalize = false;
  *found = 0;
  est_status st = est_path_join(modules, sizeof modules, dir, "modules.json");
  if (st != EST_OK) return st;
  if (est_file_exists(modules)) {
    st = read_modules(modules, pooling_dir, sizeof pooling_dir, &normalize);
    if (st != EST_OK) return st;
  }
  snprintf(sub, sizeof sub, "%s%sconfig.json", pooling_dir, *pooling_dir ? "/" : "");
  st = est_path_join(config, sizeof config, dir, sub);
  if (st != EST_OK) return st;
  if (!est_file_exists(config)) {
    if (est_file_exists(modules))
      return est_error(EST_ERR_NOT_FOUND, "%s names a Pooling module, but %s is missing", modules, config);
    return EST_OK;
  }
  unsigned modes;
  st = read_pooling_config(&modes, config);
  if (st != EST_OK) return st;
  p->modes = modes;
  p->normalize = normalize;
  *found = 1;
  return EST_OK;
}
