/* Writing a HuggingFace BERT directory from a TF checkpoint (docs/hf.md §6): config.json,
 * model.safetensors, vocab.txt, tokenizer_config.json, special_tokens_map.json, built in a
 * temporary directory beside the target and renamed onto it, so a reader sees the old
 * directory or the whole new one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "est/ckpt.h"
#include "est/file.h"
#include "est/hf_model.h"
#include "est/log.h"
#include "est/safetensors.h"
#include "est/tokenizer.h"

/* The BertFor* class the checkpoint's variables make. */
static const char *architecture(est_ckpt_reader *r) {
  if (est_ckpt_reader_has(r, "cls/squad/output_weights")) return "BertForQuestionAnswering";
  if (est_ckpt_reader_has(r, "output_weights")) return "BertForSequenceClassification";
  if (est_ckpt_reader_has(r, "cls/predictions/output_bias")) return "BertForPreTraining";
  return "BertModel";
}

/* model.safetensors: every tensor the table names, Linear kernels transposed back. */
static est_status write_weights(est_ckpt_reader *r, const char *path, const char *arch, int *num_labels) {
  est_safetensors_writer *w;
  est_status st = est_safetensors_writer_open(&w, path);
  if (st != EST_OK) return st;
  size_t n = est_ckpt_reader_count(r);
  est_tensor *held = calloc(n ? n : 1, sizeof *held); /* data must live until finish */
  if (!held) st = est_error(EST_ERR_NO_MEMORY, "%s: out of memory", path);
  const int bare = !strcmp(arch, "BertModel");
  /* BertForQuestionAnswering and BertForTokenClassification have no pooler (add_pooling_layer=False) */
  const int qa = !strcmp(arch, "BertForQuestionAnswering") || !strcmp(arch, "BertForTokenClassification");
  for (size_t i = 0; st == EST_OK && i < n; i++) {
    const char *tf = est_ckpt_reader_name(r, i);
    char hf[EST_VAR_NAME_MAX + 32];
    int transpose = 0;
    if (!est_hf_name_from_tf(tf, hf, sizeof hf, &transpose)) continue; /* global_step, Adam slots */
    if (qa && !strncmp(tf, "bert/pooler/", 12)) continue;                /* no pooler there */
    if ((st = est_ckpt_reader_read(r, tf, &held[i])) != EST_OK) break;
    if (held[i].dtype != EST_DT_FLOAT) {
      st = est_error(EST_ERR_INVALID_ARGUMENT, "checkpoint tensor %s is not float32", tf);
      break;
    }
    if (!strcmp(tf, "output_weights")) *num_labels = (int)held[i].dims[0];
    if (transpose && held[i].rank == 2) { /* TF kernel [in, out] -> Linear weight [out, in] */
      const int64_t I = held[i].dims[0], O = held[i].dims[1], dims[2] = {O, I};
      est_tensor t;
      if ((st = est_tensor_alloc(&t, EST_DT_FLOAT, 2, dims)) != EST_OK) break;
      const float *src = held[i].data;
      float *dst = t.data;
      for (int64_t a = 0; a < I; a++)
        for (int64_t b = 0; b < O; b++) dst[b * I + a] = src[a * O + b];
      est_tensor_free(&held[i]);
      held[i] = t;
    }
    /* BertModel's own names have no "bert." prefix */
    st = est_safetensors_writer_add(w, bare && !strncmp(hf, "bert.", 5) ? hf + 5 : hf, &held[i]);
  }
  if (st == EST_OK) st = est_safetensors_writer_set_metadata(w, "format", "pt");
  if (st == EST_OK) st = est_safetensors_writer_finish(w);
  else est_safetensors_writer_abort(w);
  for (size_t i = 0; held && i < n; i++) est_tensor_free(&held[i]);
  free(held);
  return st;
}

static est_status write_text(const char *dir, const char *name, const char *text) {
  char path[4096];
  est_status st = est_path_join(path, sizeof path, dir, name);
  return st == EST_OK ? est_write_file_atomic(path, text, strlen(text)) : st;
}

/* The tokenizer files transformers' BertTokenizer(Fast) reads beside vocab.txt. */
static est_status write_tokenizer_files(const char *dir, const est_hf_export_params *p) {
  char text[1024];
  snprintf(text, sizeof text,
           "{\n  \"cls_token\": \"[CLS]\",\n  \"do_lower_case\": %s,\n  \"mask_token\": \"[MASK]\",\n"
           "  \"model_max_length\": %d,\n  \"pad_token\": \"[PAD]\",\n  \"sep_token\": \"[SEP]\",\n"
           "  \"strip_accents\": null,\n  \"tokenize_chinese_chars\": true,\n"
           "  \"tokenizer_class\": \"BertTokenizer\",\n  \"unk_token\": \"[UNK]\"\n}\n",
           p->do_lower_case ? "true" : "false", p->cfg->max_position_embeddings);
  est_status st = write_text(dir, "tokenizer_config.json", text);
  if (st != EST_OK) return st;
  return write_text(dir, "special_tokens_map.json",
                    "{\n  \"cls_token\": \"[CLS]\",\n  \"mask_token\": \"[MASK]\",\n  \"pad_token\": \"[PAD]\",\n"
                    "  \"sep_token\": \"[SEP]\",\n  \"unk_token\": \"[UNK]\"\n}\n");
}

static est_status fill_dir(const char *dir, const char *ckpt_prefix, const est_hf_export_params *p) {
  est_ckpt_reader *r;
  if (est_ckpt_reader_open(&r, ckpt_prefix) != EST_OK) return est_error_code();
  char path[4096];
  /* the caller's class when the variables alone cannot tell (a token classifier's are a
   * sequence classifier's: output_weights / output_bias) */
  const char *arch = p->architecture && *p->architecture ? p->architecture : architecture(r);
  int num_labels = 0;
  est_status st = est_path_join(path, sizeof path, dir, "model.safetensors");
  if (st == EST_OK) st = write_weights(r, path, arch, &num_labels);
  est_ckpt_reader_close(r);
  if (st == EST_OK && p->labels && num_labels != p->num_labels)
    st = est_error(EST_ERR_INVALID_ARGUMENT, "%s has %d labels (output_weights) but %d label names were given",
                   ckpt_prefix, num_labels, p->num_labels);
  char **names = NULL; /* LABEL_0.. as transformers names them when none are given */
  if (st == EST_OK && num_labels > 0 && !p->labels) {
    names = calloc((size_t)num_labels, sizeof *names);
    for (int i = 0; names && i < num_labels; i++)
      if ((names[i] = malloc(32))) snprintf(names[i], 32, "LABEL_%d", i);
  }
  char *config = est_hf_config_to_json_string(p->cfg, arch, p->labels ? p->labels : (const char *const *)names,
                                              num_labels);
  if (st == EST_OK) st = config ? write_text(dir, "config.json", config) : est_error(EST_ERR_NO_MEMORY, "config");
  free(config);
  for (int i = 0; names && i < num_labels; i++) free(names[i]);
  free(names);
  if (st == EST_OK) st = est_path_join(path, sizeof path, dir, "vocab.txt");
  if (st == EST_OK) st = est_vocab_file_write(path, p->vocab_file, p->do_lower_case);
  if (st == EST_OK) st = write_tokenizer_files(dir, p);
  return st;
}

est_status est_hf_export(const char *ckpt_prefix, const char *out_dir, const est_hf_export_params *p) {
  /* the names, config.json and heads written are BertFor*'s: another family's export would
   * load in transformers as a BERT with the wrong maths (issue 48's later stage) */
  if (p->cfg && (p->cfg->opt.family != EST_FAMILY_BERT || p->cfg->opt.embedding_size ||
                 p->cfg->opt.position_ids || p->cfg->opt.token_types || p->cfg->opt.positions ||
                 (float)p->cfg->layer_norm_eps != EST_LAYERNORM_EPS))
    return est_error(EST_ERR_UNIMPLEMENTED, "--export_format=hf: est writes BERT directories only; this model is "
                     "\"%s\" (its HuggingFace export is not written yet)", est_model_family_name(p->cfg->opt.family));
  char tmp[4096], old[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp-%ld", out_dir, (long)getpid());
  snprintf(old, sizeof old, "%s.old-%ld", out_dir, (long)getpid());
  est_remove_tree(tmp);
  est_status st = est_mkdirs(tmp);
  if (st == EST_OK) st = fill_dir(tmp, ckpt_prefix, p);
  if (st == EST_OK && est_file_exists(out_dir)) {
    /* only a directory this function wrote is replaced */
    char cfg[4096];
    if (!est_is_directory(out_dir) || est_path_join(cfg, sizeof cfg, out_dir, "config.json") != EST_OK ||
        !est_file_exists(cfg))
      st = est_error(EST_ERR_FAILED_PRECONDITION, "%s exists and is not a HuggingFace model directory", out_dir);
    else if (rename(out_dir, old) != 0)
      st = est_error(EST_ERR_IO, "moving %s aside: cannot rename", out_dir);
  }
  if (st == EST_OK && rename(tmp, out_dir) != 0) st = est_error(EST_ERR_IO, "renaming %s to %s", tmp, out_dir);
  est_remove_tree(old);
  if (st != EST_OK) {
    est_remove_tree(tmp);
    return est_error_prefix("writing HuggingFace model %s: ", out_dir);
  }
  EST_LOG_INFO("wrote HuggingFace model %s from %s", out_dir, ckpt_prefix);
  return EST_OK;
}
