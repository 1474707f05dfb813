/* est/hf_model.h — HuggingFace BERT models in and out (docs/hf.md).
 *
 * A HuggingFace BERT is a directory: config.json + model.safetensors (or a sharded
 * model.safetensors.index.json + its shards) + vocab.txt or tokenizer.json. est reads one
 * wherever it takes a model: --init_checkpoint=DIR (or the .safetensors file, or the index)
 * and --bert_config_file=DIR/config.json (or DIR). The tensors are renamed to Google's TF
 * names by one table (src/hf/hf_names.c), nn.Linear weights transposed to TF kernels.
 *
 *     est_hf_checkpoint *h;
 *     if (est_hf_checkpoint_open(&h, "all-MiniLM-L6-v2") != EST_OK) die(est_error_message());
 *     est_bert_config cfg;
 *     est_bert_config_from_json_file(&cfg, "all-MiniLM-L6-v2");   // reads DIR/config.json
 *     // ... create the encoder (and heads) in a var store vs, finalize it ...
 *     size_t loaded;
 *     est_hf_checkpoint_load_vars(h, vs, &loaded);   // every variable the file names
 *     est_hf_checkpoint_close(h);
 *
 * Errors name the file and the tensor: a tensor the model needs that the file lacks, a
 * wrong shape, a dtype other than F32 / F16 / BF16 (the half types are widened to fp32), a
 * directory with only pytorch_model.bin (the message gives the one-line conversion).
 */
#ifndef EST_HF_MODEL_H
#define EST_HF_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "est/bert_encoder.h"
#include "est/status.h"
#include "est/tensor.h"
#include "est/variables.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- names (src/hf/hf_names.c) ------------------------------------------------------ */

/* The TF name of a HuggingFace tensor name ("bert." prefix optional), into tf[size].
 * *transpose is 1 when the HF tensor is a nn.Linear weight [out,in] whose TF kernel is
 * [in,out]. Returns 0 for a name the table does not know (e.g. embeddings.position_ids,
 * cls.predictions.decoder.weight, which is tied to the word embeddings). */
int est_hf_name_to_tf(const char *hf, char *tf, size_t size, int *transpose);
/* The HF name (BertFor*'s, with the "bert." prefix) of a TF variable name; 0 if none. */
int est_hf_name_from_tf(const char *tf, char *hf, size_t size, int *transpose);

/* The same under model_type `family`'s table (one per model_type: RoBERTa's "roberta."
 * names, DistilBERT's q_lin / ffn.lin1 / sa_layer_norm, ELECTRA's embeddings_project; the
 * prefix optional on reading). The two above are BERT's. */
int est_hf_family_name_to_tf(est_model_family family, const char *hf, char *tf, size_t size, int *transpose);
int est_hf_family_name_from_tf(est_model_family family, const char *tf, char *hf, size_t size, int *transpose);

/* The family of a HuggingFace directory's config.json "model_type" (path: the directory, a
 * file in it, or config.json): EST_FAMILY_BERT when there is no config.json or no model_type
 * est runs (the config reader refuses those by name). */
est_model_family est_hf_family_of(const char *path);

/* ---- reading ---------------------------------------------------------------------------- */

/* 1 when `path` is a HuggingFace model est can open: a directory with config.json or
 * *.safetensors / pytorch_model.bin, a .safetensors file, or a *.index.json. */
int est_hf_is_checkpoint(const char *path);

typedef struct est_hf_checkpoint est_hf_checkpoint;

/* Opens DIR (model.safetensors, else model.safetensors.index.json), a .safetensors file or
 * an index (its shards beside it). Names map by the table of the model_type in the
 * config.json of DIR (or beside the file): est_hf_family_of. */
est_status est_hf_checkpoint_open(est_hf_checkpoint **out, const char *path);
void est_hf_checkpoint_close(est_hf_checkpoint *h);   /* NULL is fine */

/* The tensors, in the files' name order: the HF name, the TF name ("" when unmapped). */
size_t est_hf_checkpoint_count(const est_hf_checkpoint *h);
const char *est_hf_checkpoint_hf_name(const est_hf_checkpoint *h, size_t i);
const char *est_hf_checkpoint_tf_name(const est_hf_checkpoint *h, size_t i);

/* Tensor i as float32 in TF's layout (a Linear weight transposed to its kernel), owned by
 * out (est_tensor_free): e.g. to write a TF checkpoint of a HuggingFace model. */
est_status est_hf_checkpoint_read(est_hf_checkpoint *h, size_t i, est_tensor *out);

/* Loads every mapped tensor whose TF name is a trainable variable of vs (checking dtype
 * and shape, transposing Linear weights) and marks it from_checkpoint; *loaded counts them.
 * A task head (a variable outside bert/) of another shape is skipped with a warning: it
 * starts fresh, as with from_pretrained(ignore_mismatched_sizes=True). */
est_status est_hf_checkpoint_load_vars(est_hf_checkpoint *h, est_var_store *vs, size_t *loaded);

/* NOT_FOUND naming `path` and the HF tensor (its "bert."-prefixed name) when a trainable
 * variable of vs[first..last] was not loaded: the missing-tensor error. The pooler
 * (bert/pooler/...) may be absent: BertForQuestionAnswering saves none. */
est_status est_hf_require_vars(const est_var_store *vs, size_t first, size_t last, const char *path);

/* One open-load-close: the same as the three calls above. */
est_status est_hf_load_vars(est_var_store *vs, const char *path, size_t *loaded);

/* ---- config.json (src/hf/hf_config.c) ------------------------------------------------ */

/* est_bert_config_from_json_* call this for a config with "model_type" (HF's): model_type
 * "bert", "roberta", "xlm-roberta", "distilbert" or "electra" (the encoder's options, docs/hf.md
 * §3), any other an error naming it; hidden_act "gelu" is the erf GELU, "gelu_new" / "gelu_pytorch_tanh" the
 * tanh one; layer_norm_eps, pad_token_id read; a field est cannot honour
 * (position_embedding_type other than "absolute", is_decoder, add_cross_attention, ...) is
 * an error naming it. `root` is a jansson json_t *. */
est_status est_hf_config_from_json(est_bert_config *cfg, const void *root, const char *source);

/* config.json text for cfg: BertConfig's fields, hidden_act in HF's spelling, and
 * `architectures` = {architecture} when not NULL; labels (num_labels of them, may be NULL)
 * give id2label / label2id. Free with free(). */
char *est_hf_config_to_json_string(const est_bert_config *cfg, const char *architecture, const char *const *labels,
                                   int num_labels);

/* ---- writing (src/hf/hf_export.c) ----------------------------------------------------- */

typedef struct est_hf_export_params {
  const est_bert_config *cfg;     /* the checkpoint's */
  const char *vocab_file;         /* vocab.txt (copied), tokenizer.json or a model dir (its vocab written) */
  int do_lower_case;              /* tokenizer_config.json */
  const char *const *labels;      /* id2label / label2id; NULL: LABEL_0, ... */
  int num_labels;
  /* The BertFor* class to write (e.g. "BertForTokenClassification", which has no pooler);
   * NULL: the one the checkpoint's variables make (below). */
  const char *architecture;
  /* config.json's problem_type ("multi_label_classification", ...); NULL: none written. */
  const char *problem_type;
} est_hf_export_params;

/* Writes out_dir (config.json, model.safetensors, vocab.txt, tokenizer_config.json,
 * special_tokens_map.json; for a vocab_file whose tokenizer.json has no WordPiece vocab, that
 * tokenizer.json and a tokenizer_config.json naming PreTrainedTokenizerFast instead of the
 * vocab files) from a TF checkpoint, in cfg's family's classes and names (Bert,
 * Roberta, XLMRoberta, DistilBert, Electra): *ForQuestionAnswering when it has
 * cls/squad/output_weights, *ForSequenceClassification with output_weights,
 * BertForPreTraining with cls/predictions (BERT only), else *Model. A config whose options no
 * such class computes is refused (EST_ERR_UNIMPLEMENTED, naming the option). Built beside
 * out_dir and renamed onto it; an existing out_dir is replaced only when it is a model
 * directory (config.json). */
est_status est_hf_export(const char *ckpt_prefix, const char *out_dir, const est_hf_export_params *p);

#ifdef __cplusplus
}
#endif
#endif
