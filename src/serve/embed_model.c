/* Opening a sentence-embedding model (est/serving.h, docs/embeddings.md): every way est
 * takes one ends in an est_servable whose head is the pooling head, so `est embed` and
 * `est serve` run the same code on the same weights.
 *   - an export (est_model.json "head": "pooling"): loaded as it is;
 *   - a HuggingFace model directory (--init_checkpoint or --model_dir; docs/hf.md): its
 *     config.json, tokenizer.json / vocab.txt and sentence-transformers' files;
 *   - a TF checkpoint + bert_config + vocab (as extract_features takes a model): the
 *     pooling from --pooling, or from sentence-transformers' files beside the config, and
 *     max_seq_length from --max_seq_length, or sentence_bert_config.json there, or 128. */
#include <jansson.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>

#include "core/json_error.h"
#include "est/file.h"
#include "est/hf_model.h"
#include "est/serving.h"
#include "est/tokenizer.h"

/* sentence-transformers' sentence_bert_config.json in dir: its "max_seq_length" (the length
 * SentenceTransformer truncates to: 256 for all-MiniLM-L6-v2), or 0 when the file is absent. */
static est_status sentence_bert_max_seq_length(const char *dir, int *out) {
  char path[4096];
  *out = 0;
  est_status st = est_path_join(path, sizeof path, dir, "sentence_bert_config.json");
  if (st != EST_OK || !est_file_exists(path)) return st;
  json_error_t err;
  json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
  if (!root)
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s:%d:%d: %s", path, err.line, err.column, est_json_error_text(&err));
  const json_t *v = json_object_get(root, "max_seq_length");
  if (v && !(json_is_integer(v) && json_integer_value(v) >= 3 && json_integer_value(v) <= 1 << 20))
    st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: \"max_seq_length\" must be an integer >= 3", path);
  else if (v)
    *out = (int)json_integer_value(v);
  json_decref(root);
  return st;
}

est_embed_model_options est_embed_model_resolve(const est_embed_model_options *given) {
  est_embed_model_options o = *given;
  const char *dir_flag = "init_checkpoint";
  if (o.model_dir && !o.init_checkpoint && est_hf_is_checkpoint(o.model_dir) && est_is_directory(o.model_dir))
    o.init_checkpoint = o.model_dir, o.model_dir = NULL, dir_flag = "model_dir";
  if (o.init_checkpoint && est_is_directory(o.init_checkpoint) && est_hf_is_checkpoint(o.init_checkpoint)) {
    if (!o.bert_config_file) o.bert_config_file = o.init_checkpoint, o.config_flag = dir_flag;
    if (!o.vocab_file) o.vocab_file = o.init_checkpoint;
  }
  return o;
}

est_status est_embed_model_meta(est_model_meta *meta, const est_embed_model_options *given) {
  memset(meta, 0, sizeof *meta);
  const est_embed_model_options resolved = est_embed_model_resolve(given), *o = &resolved;
  const struct {
    const char *name, *value;
  } required[] = {{"init_checkpoint", o->init_checkpoint}, {"bert_config_file", o->bert_config_file},
                  {"vocab_file", o->vocab_file}};
  for (size_t i = 0; i < sizeof required / sizeof *required; i++)
    if (!required[i].value || !*required[i].value)
      return est_error(EST_ERR_INVALID_ARGUMENT, "flag --%s must be specified (or --model_dir=an embedding export)",
                       required[i].name);
  est_status st = est_bert_config_from_json_file(&meta->bert_config, o->bert_config_file);
  if (st != EST_OK && o->config_flag) return est_error_prefix("--%s=%s: ", o->config_flag, o->bert_config_file);
  if (st != EST_OK) return est_error_prefix("--bert_config_file: ");
  char config_path[4096];
  snprintf(config_path, sizeof config_path, "%s", o->bert_config_file);
  /* the model's directory: --bert_config_file=DIR itself, else its config's ("." for a bare name) */
  const char *dir = est_is_directory(config_path) ? config_path : dirname(config_path);
  meta->max_seq_length = o->max_seq_length;
  if (!meta->max_seq_length && (st = sentence_bert_max_seq_length(dir, &meta->max_seq_length)) != EST_OK) return st;
  if (!meta->max_seq_length) meta->max_seq_length = 128;
  if (meta->max_seq_length < 3 || meta->max_seq_length > est_bert_config_max_seq_length(&meta->bert_config))
    return est_error(EST_ERR_INVALID_ARGUMENT, "--max_seq_length=%d: must be in [3, max_position_embeddings %d]",
                     meta->max_seq_length, est_bert_config_max_seq_length(&meta->bert_config));
  meta->do_lower_case = o->do_lower_case;
  char tokenizer_json[4096]; /* a tokenizer.json's lower-casing is the model's (est_tokenizer_open_any) */
  if ((st = est_tokenizer_json_of(o->vocab_file, tokenizer_json, sizeof tokenizer_json)) != EST_OK) return st;
  if (tokenizer_json[0]) {
    est_tokenizer *tok;
    if ((st = est_tokenizer_from_json(&tok, tokenizer_json)) != EST_OK) return est_error_prefix("--vocab_file: ");
    meta->do_lower_case = est_tokenizer_do_lower_case(tok);
    est_tokenizer_free(tok);
  }
  snprintf(meta->task, sizeof meta->task, "embed");
  snprintf(meta->precision, sizeof meta->precision, "fp32");
  /* sentence-transformers' own files, in the directory of the model's config */
  int found = 0;
  est_pooling_params from_files = {.modes = EST_POOLING_MEAN, .normalize = false}, pooling = {0};
  st = est_pooling_read_sentence_transformers(&from_files, dir, &found);
  if (st != EST_OK) return st;
  if (o->pooling) {
    st = est_pooling_params_parse(&pooling, o->pooling, false);
    if (st != EST_OK) return est_error_prefix("--pooling=%s: ", o->pooling);
  } else {
    pooling.modes = from_files.modes;
  }
  pooling.normalize = o->normalize >= 0 ? o->normalize != 0 : from_files.normalize;
  est_model_meta_set_head(meta, &est_served_pooling, &pooling);
  return EST_OK;
}

est_status est_embed_model_open(est_servable **out, const est_embed_model_options *given) {
  *out = NULL;
  const est_embed_model_options resolved = est_embed_model_resolve(given), *o = &resolved;
  if (o->model_dir) {
    const char *set = o->init_checkpoint ? "init_checkpoint" : o->bert_config_file ? "bert_config_file"
                    : o->vocab_file ? "vocab_file" : o->pooling ? "pooling" : o->normalize >= 0 ? "normalize"
                    : o->max_seq_length ? "max_seq_length" : NULL;
    if (set)
      return est_error(EST_ERR_INVALID_ARGUMENT, "--model_dir=%s and --%s: an export fixes its weights, pooling and "
                       "max_seq_length (its est_model.json); give one or the other", o->model_dir, set);
    est_status st = est_servable_load(out, o->model_dir, o->max_batch);
    if (st != EST_OK) return st;
    const est_served_head *head = est_model_meta_head(est_servable_meta(*out));
    if (!head->embedding_normalized) { /* not an embedding model */
      st = est_error(EST_ERR_INVALID_ARGUMENT, "--model_dir=%s: the export's head is \"%s\"; an embedding export "
                     "(\"head\": \"pooling\") is written by est embed --export_dir", est_servable_dir(*out),
                     head->name);
      est_servable_free(*out);
      *out = NULL;
    }
    return st;
  }
  est_model_meta meta;
  est_status st = est_embed_model_meta(&meta, o);
  if (st == EST_OK) st = est_servable_open(out, &meta, o->init_checkpoint, o->vocab_file, o->max_batch);
  est_model_meta_clear(&meta);
  return st;
}
