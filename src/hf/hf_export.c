/* Writing a HuggingFace BERT directory from a TF checkpoint (docs/hf.md §6): config.json,
 * model.safetensors, vocab.txt, tokenizer_config.json, special_tokens_map.json, built in a
 * temporary directory beside the target and renamed onto it, so a reader sees the old
 * directory or the whole new one. */
#include <jansson.h>
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

/* The class written into arch[size]: the caller's `given` class when there is one (the
 * variables alone cannot tell a token classifier's output_weights / output_bias from a
 * sequence classifier's), else the one the checkpoint's variables make: the family's (Bert,
 * Roberta, XLMRoberta, DistilBert, Electra) ForQuestionAnswering, ForSequenceClassification,
 * BertForPreTraining (BERT's heads only: the other families' masked-LM heads are not
 * mapped), else its Model. */
typedef enum { ARCH_MODEL, ARCH_QA, ARCH_SEQ_CLS, ARCH_PRETRAINING, ARCH_TOKEN_CLS } arch_kind;

static arch_kind architecture(est_ckpt_reader *r, est_model_family family, const char *given, char *arch,
                              size_t size) {
  static const char *const PREFIX[] = {"Bert", "Roberta", "XLMRoberta", "DistilBert", "Electra", "ModernBert"};
  static const char *const SUFFIX[] = {"Model", "ForQuestionAnswering", "ForSequenceClassification", "ForPreTraining",
                                       "ForTokenClassification"};
  arch_kind k = ARCH_MODEL;
  if (est_ckpt_reader_has(r, "cls/squad/output_weights")) k = ARCH_QA;
  else if (est_ckpt_reader_has(r, "output_weights")) k = ARCH_SEQ_CLS;
  else if (family == EST_FAMILY_BERT && est_ckpt_reader_has(r, "cls/predictions/output_bias")) k = ARCH_PRETRAINING;
  if (given && *given) {
    const size_t n = strlen(given);
    for (size_t s = 0; s < sizeof SUFFIX / sizeof *SUFFIX; s++)
      if (n >= strlen(SUFFIX[s]) && !strcmp(given + n - strlen(SUFFIX[s]), SUFFIX[s])) k = (arch_kind)s;
    snprintf(arch, size, "%s", given);
    return k;
  }
  snprintf(arch, size, "%s%s", PREFIX[family], SUFFIX[k]);
  return k;
}

/* Whether the class has BERT's pooler: BertModel and RobertaModel do (and BERT's heads but
 * QA and token classification, built with add_pooling_layer=False); RoBERTa's heads,
 * DistilBERT and ELECTRA do not. */
static int has_pooler(est_model_family family, arch_kind k) {
  if (k == ARCH_QA || k == ARCH_TOKEN_CLS || family == EST_FAMILY_DISTILBERT || family == EST_FAMILY_ELECTRA ||
      family == EST_FAMILY_MODERNBERT)
    return 0;
  return family == EST_FAMILY_BERT || k == ARCH_MODEL;
}

/* model.safetensors: every tensor the family's table names, Linear kernels transposed back;
 * DistilBERT's sinusoidal table (no variable in est) written as transformers saves it. */
static est_status write_weights(est_ckpt_reader *r, const char *path, const est_bert_config *cfg, const char *given,
                                int *num_labels) {
  const est_model_family family = cfg ? cfg->opt.family : EST_FAMILY_BERT;
  char arch[64];
  const arch_kind kind = architecture(r, family, given, arch, sizeof arch);
  est_safetensors_writer *w;
  est_status st = est_safetensors_writer_open(&w, path);
  if (st != EST_OK) return st;
  size_t n = est_ckpt_reader_count(r);
  est_tensor *held = calloc(n + 1, sizeof *held); /* data must live until finish */
  if (!held) st = est_error(EST_ERR_NO_MEMORY, "%s: out of memory", path);
  const int bare = kind == ARCH_MODEL, pooler = has_pooler(family, kind);
  /* the encoder's prefix ("bert.", "roberta.", ...), which a *Model saves without */
  char prefix[128] = "";
  if (est_hf_family_name_from_tf(family, "bert/embeddings/word_embeddings", prefix, sizeof prefix, NULL))
    strchr(prefix, '.')[1] = '\0';
  const size_t plen = strlen(prefix);
  if (st == EST_OK && cfg && cfg->opt.positions == EST_POS_SINUSOIDAL) {
    const int64_t dims[2] = {cfg->max_position_embeddings, cfg->hidden_size};
    char name[sizeof prefix + 64];
    snprintf(name, sizeof name, "%sembeddings.position_embeddings.weight", bare ? "" : prefix);
    st = est_tensor_alloc(&held[n], EST_DT_FLOAT, 2, dims);
    if (st == EST_OK) est_sinusoidal_positions(held[n].data, (int)dims[0], (int)dims[1]);
    if (st == EST_OK) st = est_safetensors_writer_add(w, name, &held[n]);
  }
  for (size_t i = 0; st == EST_OK && i < n; i++) {
    const char *tf = est_ckpt_reader_name(r, i);
    char hf[EST_VAR_NAME_MAX + 32];
    int transpose = 0;
    if (!est_hf_family_name_from_tf(family, tf, hf, sizeof hf, &transpose)) continue; /* global_step, Adam slots */
    if (!pooler && !strncmp(tf, "bert/pooler/", 12)) continue;
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
    /* a *Model's own names have no "bert." ("roberta.", ...) prefix */
    st = est_safetensors_writer_add(w, bare && plen && !strncmp(hf, prefix, plen) ? hf + plen : hf, &held[i]);
  }
  if (st == EST_OK) st = est_safetensors_writer_set_metadata(w, "format", "pt");
  if (st == EST_OK) st = est_safetensors_writer_finish(w);
  else est_safetensors_writer_abort(w);
  for (size_t i = 0; held && i <= n; i++) est_tensor_free(&held[i]);
  free(held);
  return st;
}

static est_status write_text(const char *dir, const char *name, const char *text) {
  char path[4096];
  est_status st = est_path_join(path, sizeof path, dir, name);
  return st == EST_OK ? est_write_file_atomic(path, text, strlen(text)) : st;
}

/* The tokenizer files transformers' BertTokenizer(Fast) reads beside vocab.txt: est's models
 * are WordPiece until the tokenizer.json export (issue 47). DistilBERT's and ELECTRA's
 * WordPiece classes are BertTokenizer's with their model's inputs (DistilBERT takes no
 * token_type_ids); RoBERTa's own tokenizers are not WordPiece, so theirs stays BertTokenizer. */
static est_status write_tokenizer_files(const char *dir, const est_hf_export_params *p) {
  const est_model_family family = p->cfg ? p->cfg->opt.family : EST_FAMILY_BERT;
  const char *cls = family == EST_FAMILY_DISTILBERT ? "DistilBertTokenizer"
                    : family == EST_FAMILY_ELECTRA  ? "ElectraTokenizer"
                                                    : "BertTokenizer";
  char text[1024];
  snprintf(text, sizeof text,
           "{\n  \"cls_token\": \"[CLS]\",\n  \"do_lower_case\": %s,\n  \"mask_token\": \"[MASK]\",\n"
           "  \"model_max_length\": %d,\n  \"pad_token\": \"[PAD]\",\n  \"sep_token\": \"[SEP]\",\n"
           "  \"strip_accents\": null,\n  \"tokenize_chinese_chars\": true,\n"
           "  \"tokenizer_class\": \"%s\",\n  \"unk_token\": \"[UNK]\"\n}\n",
           p->do_lower_case ? "true" : "false", est_bert_config_max_seq_length(p->cfg), cls);
  est_status st = write_text(dir, "tokenizer_config.json", text);
  if (st != EST_OK) return st;
  return write_text(dir, "special_tokens_map.json",
                    "{\n  \"cls_token\": \"[CLS]\",\n  \"mask_token\": \"[MASK]\",\n  \"pad_token\": \"[PAD]\",\n"
                    "  \"sep_token\": \"[SEP]\",\n  \"unk_token\": \"[UNK]\"\n}\n");
}

/* A tokenizer.json with no Google vocab (est_vocab_file_write wrote no vocab.txt: Unigram,
 * BPE, ...; docs/tokenizer.md §9) goes as it is, with a tokenizer_config.json that makes
 * AutoTokenizer read it (PreTrainedTokenizerFast: the file's ids, special tokens and offsets). */
static est_status copy_tokenizer_json(const char *dir, const est_hf_export_params *p) {
  char from[4096], path[4096], text[256];
  uint8_t *data = NULL;
  size_t size = 0;
  est_status st = est_tokenizer_json_of(p->vocab_file, from, sizeof from);
  if (st == EST_OK && !from[0]) st = est_error(EST_ERR_INTERNAL, "%s: no vocab.txt and no tokenizer.json", p->vocab_file);
  if (st == EST_OK) st = est_read_file(from, &data, &size);
  if (st == EST_OK) st = est_path_join(path, sizeof path, dir, "tokenizer.json");
  if (st == EST_OK) st = est_write_file_atomic(path, data, size);
  free(data);
  snprintf(text, sizeof text, "{\n  \"model_max_length\": %d,\n  \"tokenizer_class\": \"PreTrainedTokenizerFast\"\n}\n",
           est_bert_config_max_seq_length(p->cfg));
  return st == EST_OK ? write_text(dir, "tokenizer_config.json", text) : st;
}

static est_status fill_dir(const char *dir, const char *ckpt_prefix, const est_hf_export_params *p) {
  est_ckpt_reader *r;
  if (est_ckpt_reader_open(&r, ckpt_prefix) != EST_OK) return est_error_code();
  char path[4096], arch[64];
  const arch_kind kind = architecture(r, p->cfg ? p->cfg->opt.family : EST_FAMILY_BERT, p->architecture, arch,
                                      sizeof arch);
  int num_labels = 0;
  est_status st = est_path_join(path, sizeof path, dir, "model.safetensors");
  /* ModernBERT's name table maps its encoder and its sequence classifier only */
  if (st == EST_OK && p->cfg && p->cfg->opt.family == EST_FAMILY_MODERNBERT && kind != ARCH_MODEL &&
      kind != ARCH_SEQ_CLS)
    st = est_error(EST_ERR_UNIMPLEMENTED, "--export_format=hf: est writes ModernBertModel and "
                   "ModernBertForSequenceClassification, not %s", arch);
  if (st == EST_OK) st = write_weights(r, path, p->cfg, p->architecture, &num_labels);
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
  if (config && p->problem_type) { /* the same text with "problem_type" among its sorted keys */
    json_t *o = json_loads(config, 0, NULL);
    free(config);
    config = o && !json_object_set_new(o, "problem_type", json_string(p->problem_type))
                 ? json_dumps(o, JSON_SORT_KEYS | JSON_INDENT(2) | JSON_REAL_PRECISION(15))
                 : NULL;
    json_decref(o);
  }
  if (st == EST_OK) st = config ? write_text(dir, "config.json", config) : est_error(EST_ERR_NO_MEMORY, "config");
  free(config);
  for (int i = 0; names && i < num_labels; i++) free(names[i]);
  free(names);
  if (st == EST_OK) st = est_path_join(path, sizeof path, dir, "vocab.txt");
  if (st == EST_OK) st = est_vocab_file_write(path, p->vocab_file, p->do_lower_case);
  if (st == EST_OK && !est_file_exists(path)) return copy_tokenizer_json(dir, p);
  if (st == EST_OK) st = write_tokenizer_files(dir, p);
  return st;
}

/* The options a family's transformers class computes (what its config.json reader sets), or
 * NULL when the config is that; else the first that differs: such a model (est's own
 * bert_config.json can combine options freely) would load in transformers with other maths. */
static const char *unexportable(const est_bert_config *c) {
  const est_encoder_options *o = &c->opt;
  const est_model_family f = o->family;
  if (f == EST_FAMILY_BERT)
    return o->embedding_size || o->position_ids || o->token_types || o->positions ? "a BERT with other encoder options"
           : (float)c->layer_norm_eps != EST_LAYERNORM_EPS                       ? "a BERT with another layer_norm_eps"
                                                                                 : NULL;
  if (f == EST_FAMILY_MODERNBERT)
    return o->norm != EST_NORM_PRE || o->positions != EST_POS_ROTARY || o->ffn != EST_FFN_GLU || !o->qkv_fused
               ? "its norm, positions, FFN or Q/K/V layout"
           : o->token_types != EST_TYPES_NONE || o->embedding_size || o->position_ids ? "its embeddings"
           : c->hidden_dropout_prob != 0.0 || c->attention_probs_dropout_prob != 0.0 ? "its dropout"
                                                                                       : NULL;
  if (o->norm != EST_NORM_POST || o->ffn != EST_FFN_DENSE || o->no_bias || o->qkv_fused ||
      o->global_attn_every_n_layers)
    return "its norm, FFN, biases or attention";
  if (f != EST_FAMILY_ELECTRA && o->embedding_size) return "an embedding projection";
  if (f != EST_FAMILY_DISTILBERT && o->positions != EST_POS_LEARNED) return "its position encoding";
  const int after_padding = f == EST_FAMILY_ROBERTA || f == EST_FAMILY_XLM_ROBERTA;
  if ((o->position_ids == EST_POS_IDS_AFTER_PADDING) != after_padding) return "its position ids";
  const est_token_types types = f == EST_FAMILY_DISTILBERT            ? EST_TYPES_NONE
                                : after_padding && c->type_vocab_size == 1 ? EST_TYPES_ZERO
                                                                           : EST_TYPES_SEGMENTS;
  if (o->token_types != types) return "its token types";
  if (f == EST_FAMILY_DISTILBERT && (float)c->layer_norm_eps != EST_LAYERNORM_EPS) return "its layer_norm_eps";
  return NULL;
}

est_status est_hf_export(const char *ckpt_prefix, const char *out_dir, const est_hf_export_params *p) {
  /* the family's names, config.json and class: the model must be what that class computes */
  const char *why = p->cfg ? unexportable(p->cfg) : NULL;
  if (why)
    return est_error(EST_ERR_UNIMPLEMENTED, "--export_format=hf: this \"%s\" model differs from transformers' in %s; "
                     "its HuggingFace directory would compute something else",
                     est_model_family_name(p->cfg->opt.family), why);
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
