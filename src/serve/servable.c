/* The serving adapter: the one file that turns an export (or a BERT checkpoint) into a
 * forward pass, through the public APIs only: the encoder and a head (est/bert_head.h, servable_model.c) for
 * a servable, est_bert_encoder_* (est/bert_encoder.h) for extract_features.
 *
 * est_servable: est_model.json + variables/ -> the encoder and the head est_model.json names
 * (servable_model.c), restored by name, activations reserved for [max_batch, max_seq_length];
 * a batch may run at any shorter length (the attention mask hides padding, so probabilities
 * do not depend on the padded length).
 *
 * est_encoder_layers: all_encoder_layers[l] for extract_features, from one est_bert_encoder
 * pass (est/bert_encoder.h exposes every layer's output), the encoder cut after the deepest
 * layer asked for.
 */
#include <stdlib.h>
#include <string.h>

#include "est/bert_encoder.h"
#include "est/ckpt.h"
#include "est/hf_model.h"
#include "est/classifier_features.h"
#include "est/file.h"
#include "est/serving.h"
#include "est/tokenizer.h"
#include "est/variables.h"
#include "nn/kernel_choice.h" /* est_kernel_get: the int8 reference reads fp32 weights */
#include "serve/int8_weights.h"
#include "serve/servable_model.h"

struct est_servable {
  char dir[4096];
  int64_t version;
  est_model_meta meta;
  est_tokenizer *tokenizer;   /* owns the vocab; featurizers copy its options (a tokenizer.json's) */
  est_var_store *vs;
  est_servable_model model;   /* the encoder and the head est_model.json names */
  int int8_weights;           /* variables stored int8 (an int8 export): their fp32 values are gone */
  int max_batch;
  int32_t *scratch;           /* [3, max_batch, max_seq_length]: rows cut to a run length */
  uint64_t forwards;          /* forward passes run */
};

/* The int8-stored variables est_servable_model_restore left: their packed form from the bundle (vs read-only). */
static est_status restore_int8(est_var_store *vs, const char *prefix) {
  est_ckpt_reader *r = NULL;
  est_status st = est_ckpt_reader_open(&r, prefix);
  for (size_t i = 0; st == EST_OK && i < est_vars_count(vs); i++)
    if (!est_ckpt_reader_has(r, est_vars_at(vs, i)->name)) st = est_int8_weights_restore(r, prefix, vs, i);
  est_ckpt_reader_close(r);
  return st;
}

/* The servable of meta's model from the bundle at ckpt_prefix and vocab_file. Takes meta over
 * (cleared on failure too). */
static est_status servable_build(est_servable *s, est_model_meta *meta, const char *ckpt_prefix,
                                 const char *vocab_file) {
  s->meta = *meta;
  memset(meta, 0, sizeof *meta);
  /* a vocab.txt, a tokenizer.json or a HuggingFace model directory (its tokenizer.json wins) */
  est_status st = est_tokenizer_open_any(&s->tokenizer, vocab_file, s->meta.do_lower_case);
  if (st == EST_OK) s->meta.do_lower_case = est_tokenizer_do_lower_case(s->tokenizer);
  if (st == EST_OK && est_tokenizer_size(s->tokenizer) > s->meta.bert_config.vocab_size)
    st = est_error(EST_ERR_INVALID_ARGUMENT, "%s has %d tokens, above vocab_size %d", vocab_file,
                   est_tokenizer_size(s->tokenizer), s->meta.bert_config.vocab_size);
  if (st == EST_OK) st = est_vars_create(&s->vs);
  if (st == EST_OK) st = est_servable_model_create(&s->model, &s->meta, s->vs);
  /* every value is restored, but a HuggingFace model may lack the pooler, which then keeps
   * its initial values (est_hf_require_vars) */
  if (st == EST_OK) st = est_hf_is_checkpoint(ckpt_prefix) ? est_vars_finalize(s->vs, 1) : est_vars_finalize_zero(s->vs);
  if (st == EST_OK) st = est_servable_model_restore(s->vs, ckpt_prefix, &s->int8_weights);
  if (st == EST_OK) est_vars_set_read_only(s->vs, 1); /* served weights never change */
  if (st == EST_OK && s->int8_weights && !est_vars_read_only(s->vs))
    st = est_error(EST_ERR_NO_MEMORY, "%s: too many models loaded to keep an int8 export's weights", ckpt_prefix);
  if (st == EST_OK && s->int8_weights) st = restore_int8(s->vs, ckpt_prefix);
  if (st == EST_OK && s->int8_weights) est_bert_encoder_set_precision(s->model.enc, EST_PRECISION_INT8); /* its only one */
  if (st == EST_OK) st = est_servable_model_reserve(&s->model, s->max_batch, s->meta.max_seq_length);
  if (st == EST_OK && !(s->scratch = malloc(3 * (size_t)s->max_batch * s->meta.max_seq_length * sizeof(int32_t))))
    st = est_error(EST_ERR_NO_MEMORY, "servable scratch");
  return st;
}

static est_status servable_new(est_servable **out, int max_batch) {
  *out = NULL;
  if (max_batch < 1) return est_error(EST_ERR_INVALID_ARGUMENT, "servable: max_batch %d must be >= 1", max_batch);
  if (!(*out = calloc(1, sizeof **out))) return est_error(EST_ERR_NO_MEMORY, "servable");
  (*out)->max_batch = max_batch;
  return EST_OK;
}

est_status est_servable_load(est_servable **out, const char *path, int max_batch) {
  est_servable *s;
  est_status st = servable_new(&s, max_batch);
  if (st != EST_OK) return st;
  char json[4096], vocab[4096], vars[4096];
  est_model_meta meta = {0};
  st = est_export_resolve(path, s->dir, sizeof s->dir, &s->version);
  if (st == EST_OK) st = est_path_join(json, sizeof json, s->dir, "est_model.json");
  if (st == EST_OK && !est_file_exists(json) && est_hf_is_checkpoint(s->dir)) {
    /* a HuggingFace directory as it is (servable_hf.c): its config, its tokenizer, its weights */
    st = est_hf_servable_meta(&meta, s->dir);
    if (st == EST_OK) st = servable_build(s, &meta, s->dir, s->dir);
    if (st != EST_OK) {
      est_error_prefix("loading %s: ", path);
      est_servable_free(s);
      return st;
    }
    *out = s;
    return EST_OK;
  }
  /* a HuggingFace model's export keeps its tokenizer.json beside vocab.txt: it wins */
  if (st == EST_OK) st = est_path_join(vocab, sizeof vocab, s->dir, "assets/tokenizer.json");
  if (st == EST_OK && !est_file_exists(vocab)) st = est_path_join(vocab, sizeof vocab, s->dir, "assets/vocab.txt");
  if (st == EST_OK) st = est_path_join(vars, sizeof vars, s->dir, "variables/variables");
  if (st == EST_OK) st = est_model_meta_read(&meta, json);
  if (st == EST_OK) st = servable_build(s, &meta, vars, vocab);
  if (st != EST_OK) {
    est_error_prefix("loading %s: ", path);
    est_servable_free(s);
    return st;
  }
  *out = s;
  return EST_OK;
}

est_status est_servable_open(est_servable **out, const est_model_meta *meta, const char *ckpt_prefix,
                             const char *vocab_file, int max_batch) {
  est_servable *s;
  est_status st = servable_new(&s, max_batch);
  if (st != EST_OK) return st;
  /* a deep copy of meta: the servable owns its labels */
  est_model_meta copy = *meta;
  copy.labels = calloc(meta->num_labels ? meta->num_labels : 1, sizeof *copy.labels);
  copy.num_labels = 0;
  if (!copy.labels) st = est_error(EST_ERR_NO_MEMORY, "servable labels");
  for (size_t i = 0; st == EST_OK && i < meta->num_labels; i++, copy.num_labels++)
    if (!(copy.labels[i] = strdup(meta->labels[i]))) st = est_error(EST_ERR_NO_MEMORY, "servable labels");
  if (st == EST_OK) st = servable_build(s, &copy, ckpt_prefix, vocab_file);
  est_model_meta_clear(&copy);
  if (st != EST_OK) {
    est_error_prefix("opening %s: ", ckpt_prefix);
    est_servable_free(s);
    return st;
  }
  *out = s;
  return EST_OK;
}

void est_servable_free(est_servable *s) {
  if (!s) return;
  est_servable_model_free(&s->model);
  est_vars_free(s->vs);
  est_tokenizer_free(s->tokenizer);
  est_model_meta_clear(&s->meta);
  free(s->scratch);
  free(s);
}

const est_model_meta *est_servable_meta(const est_servable *s) { return &s->meta; }
int64_t est_servable_version(const est_servable *s) { return s->version; }
const char *est_servable_dir(const est_servable *s) { return s->dir; }
int est_servable_max_batch(const est_servable *s) { return s->max_batch; }
int est_servable_vocab_size(const est_servable *s) { return s->meta.bert_config.vocab_size; }
const est_vocab *est_servable_vocab(const est_servable *s) { return est_tokenizer_vocab(s->tokenizer); }
est_status est_servable_tokenizer_create(const est_servable *s, est_tokenizer **out) {
  return est_tokenizer_twin(out, s->tokenizer);
}
uint64_t est_servable_forward_count(const est_servable *s) { return s->forwards; }
est_precision est_servable_set_precision(est_servable *s, est_precision precision) {
  return est_bert_encoder_set_precision(s->model.enc, precision);
}
est_precision est_servable_precision(const est_servable *s) { return est_bert_encoder_precision(s->model.enc); }
int est_servable_int8_weights(const est_servable *s) { return s->int8_weights > 0; }

est_status est_servable_check_precision(const est_servable *s) {
  if (!s->int8_weights) return EST_OK;
  est_precision p = est_servable_precision(s);
  if (p == EST_PRECISION_INT8 && est_kernel_get() != EST_KERNEL_INT8REF) return EST_OK;
  return est_error(EST_ERR_FAILED_PRECONDITION,
                   "%s is an int8 export (its dense layers are stored as int8, without their fp32 weights): it runs "
                   "only with --precision=int8 on a CPU with AVX512-VNNI or AVX-VNNI, not %s; export the checkpoint "
                   "again without --precision=int8 to run it %s",
                   s->dir[0] ? s->dir : "the model",
                   p != EST_PRECISION_INT8 ? est_precision_name(p) : "the plain-C reference (EST_KERNEL=int8ref)",
                   p != EST_PRECISION_INT8 ? est_precision_name(p) : "so");
}
/* A head whose second output is served only beside the first (est_served_head.second_output_extra:
 * the classifier's logits) answers the first alone through est_servable_predict. */
int est_servable_output_width(const est_servable *s) {
  return s->model.served->second_output_extra ? s->model.output_width / 2 : s->model.output_width;
}
int est_servable_row_width(const est_servable *s) { return s->model.output_width; }

/* rows [batch, row width] (full) or the answered part of each ([batch, output width]);
 * tokens (NULL: none) [batch, token_stride] gets each row's encoder sequence output, seq_len
 * x hidden_size floats, zeros after. */
static est_status predict(est_servable *s, const int32_t *input_ids, const int32_t *input_mask,
                          const int32_t *segment_ids, int batch, int seq_len, float *out, bool full, float *tokens,
                          size_t token_stride) {
  if (seq_len < 1 || seq_len > s->meta.max_seq_length)
    return est_error(EST_ERR_INVALID_ARGUMENT, "sequence length %d outside [1, %d]", seq_len, s->meta.max_seq_length);
  est_status checked = est_servable_check_precision(s);
  if (checked != EST_OK) return checked;
  const int R = s->model.output_width; /* floats per example of the served outputs */
  const int C = full ? R : est_servable_output_width(s);
  const int types = s->meta.bert_config.type_vocab_size;
  for (size_t i = 0; i < (size_t)batch * seq_len; i++)
    if (segment_ids && (segment_ids[i] < 0 || segment_ids[i] >= types))
      return est_error(EST_ERR_INVALID_ARGUMENT, "segment id %d at example %zu, position %zu outside [0, %d)",
                       segment_ids[i], i / seq_len, i % seq_len, types);
  float *rows = NULL;
  if (C != R && !(rows = malloc((size_t)s->max_batch * (size_t)R * sizeof(float))))
    return est_error(EST_ERR_NO_MEMORY, "outputs of %d rows", s->max_batch);
  est_status st = EST_OK;
  for (int b0 = 0; st == EST_OK && b0 < batch; b0 += s->max_batch) {
    int n = batch - b0 < s->max_batch ? batch - b0 : s->max_batch;
    size_t off = (size_t)b0 * seq_len;
    st = est_servable_model_run(&s->model, input_ids + off, input_mask ? input_mask + off : NULL,
                                segment_ids ? segment_ids + off : NULL, n, seq_len, rows ? rows : out + (size_t)b0 * C);
    for (int i = 0; st == EST_OK && rows && i < n; i++)
      memcpy(out + (size_t)(b0 + i) * C, rows + (size_t)i * R, (size_t)C * sizeof(float));
    const size_t LH = (size_t)seq_len * (size_t)s->meta.bert_config.hidden_size;
    for (int i = 0; st == EST_OK && tokens && i < n; i++) {
      float *dst = tokens + (size_t)(b0 + i) * token_stride;
      memcpy(dst, est_bert_encoder_sequence_output(s->model.enc) + (size_t)i * LH, LH * sizeof(float));
      memset(dst + LH, 0, (token_stride - LH) * sizeof(float));
    }
    if (st == EST_OK) s->forwards++;
  }
  free(rows);
  return st;
}

est_status est_servable_predict(est_servable *s, const int32_t *input_ids, const int32_t *input_mask,
                                const int32_t *segment_ids, int batch, int seq_len, float *probabilities) {
  return predict(s, input_ids, input_mask, segment_ids, batch, seq_len, probabilities, false, NULL, 0);
}

int est_serving_bucket_length(int longest, int max_seq_length) {
  int L = (longest + 7) / 8 * 8;
  if (L > max_seq_length) L = max_seq_length;
  return L < 1 ? 1 : L;
}

static est_status predict_strided(est_servable *s, const int32_t *input_ids, const int32_t *input_mask,
                                  const int32_t *segment_ids, int batch, int stride, int seq_len, float *out,
                                  bool full, float *tokens) {
  const size_t token_stride = (size_t)stride * (size_t)s->meta.bert_config.hidden_size;
  if (stride == seq_len)
    return predict(s, input_ids, input_mask, segment_ids, batch, seq_len, out, full, tokens, token_stride);
  if (seq_len > stride) return est_error(EST_ERR_INVALID_ARGUMENT, "run length %d above row length %d", seq_len, stride);
  const size_t plane = (size_t)s->max_batch * seq_len;
  const int C = full ? est_servable_row_width(s) : est_servable_output_width(s);
  int32_t *ids = s->scratch, *mask = s->scratch + plane, *segs = s->scratch + 2 * plane;
  for (int b0 = 0; b0 < batch; b0 += s->max_batch) {
    int n = batch - b0 < s->max_batch ? batch - b0 : s->max_batch;
    for (int i = 0; i < n; i++) {
      size_t src = (size_t)(b0 + i) * stride, dst = (size_t)i * seq_len;
      memcpy(ids + dst, input_ids + src, seq_len * sizeof(int32_t));
      if (input_mask) memcpy(mask + dst, input_mask + src, seq_len * sizeof(int32_t));
      if (segment_ids) memcpy(segs + dst, segment_ids + src, seq_len * sizeof(int32_t));
    }
    est_status st = predict(s, ids, input_mask ? mask : NULL, segment_ids ? segs : NULL, n, seq_len,
                            out + (size_t)b0 * C, full, tokens ? tokens + (size_t)b0 * token_stride : NULL,
                            token_stride);
    if (st != EST_OK) return st;
  }
  return EST_OK;
}

est_status est_servable_predict_strided(est_servable *s, const int32_t *input_ids, const int32_t *input_mask,
                                        const int32_t *segment_ids, int batch, int stride, int seq_len,
                                        float *probabilities) {
  return predict_strided(s, input_ids, input_mask, segment_ids, batch, stride, seq_len, probabilities, false, NULL);
}

est_status est_servable_predict_rows(est_servable *s, const int32_t *input_ids, const int32_t *input_mask,
                                     const int32_t *segment_ids, int batch, int stride, int seq_len, float *rows,
                                     float *tokens) {
  return predict_strided(s, input_ids, input_mask, segment_ids, batch, stride, seq_len, rows, true, tokens);
}

/* ---- featurizer ------------------------------------------------------------------------ */

struct est_featurizer {
  est_tokenizer *tok;
  est_feature_converter conv;
  const char *label;           /* any label of the list: convert_single_example wants one */
};

est_status est_featurizer_create(est_featurizer **out, const est_servable *s) {
  *out = NULL;
  est_featurizer *f = calloc(1, sizeof *f);
  if (!f) return est_error(EST_ERR_NO_MEMORY, "featurizer");
  /* convert_single_example maps a label to an id; an export without labels (sentence
   * embeddings) gets a one-label list so that it has one to map. */
  static const char *const NO_LABELS[1] = {"none"};
  const char *const *labels = s->meta.num_labels ? (const char *const *)s->meta.labels : NO_LABELS;
  const size_t nlabels = s->meta.num_labels ? s->meta.num_labels : 1;
  est_status st = est_servable_tokenizer_create(s, &f->tok);
  if (st == EST_OK) st = est_feature_converter_init(&f->conv, f->tok, labels, nlabels, s->meta.max_seq_length);
  if (st != EST_OK) {
    est_featurizer_free(f);
    return st;
  }
  f->label = labels[0];
  *out = f;
  return EST_OK;
}

void est_featurizer_free(est_featurizer *f) {
  if (!f) return;
  est_tokenizer_free(f->tok);
  free(f);
}

est_status est_featurizer_run(est_featurizer *f, const char *text_a, const char *text_b, int32_t *input_ids,
                              int32_t *input_mask, int32_t *segment_ids, int *length) {
  est_input_example ex = {.guid = "request", .text_a = text_a ? text_a : "", .text_b = text_b, .label = f->label};
  int32_t label, real;
  /* ex_index 5: past the five examples convert_single_example logs. */
  est_status st = est_convert_single_example(&f->conv, 5, &ex, input_ids, input_mask, segment_ids, &label, &real);
  if (st != EST_OK) return st;
  if (length) {
    int n = 0;
    for (int i = 0; i < f->conv.max_seq_length; i++) n += input_mask[i] != 0;
    *length = n;
  }
  return EST_OK;
}

est_status est_featurizer_count_tokens(est_featurizer *f, const char *text_a, const char *text_b, int *tokens) {
  if (!est_tokenizer_vocab(f->tok)) { /* the tokenizer's own special tokens, before truncation */
    est_truncation *t = est_tokenizer_truncation(f->tok), keep = *t;
    est_encoding e;
    t->enabled = false;
    est_status st = est_tokenizer_encode_pair(f->tok, text_a ? text_a : "", SIZE_MAX, text_b && *text_b ? text_b : NULL,
                                              SIZE_MAX, true, &e);
    *t = keep;
    *tokens = st != EST_OK ? 0 : e.n > INT32_MAX ? INT32_MAX : (int)e.n;
    return st;
  }
  const int32_t *ids;
  size_t na = 0, nb = 0;
  est_status st = est_tokenizer_encode(f->tok, text_a ? text_a : "", SIZE_MAX, &ids, &na);
  if (st == EST_OK && text_b && *text_b) st = est_tokenizer_encode(f->tok, text_b, SIZE_MAX, &ids, &nb);
  /* [CLS] a [SEP], plus b [SEP] when b has tokens (convert_single_example's layout) */
  size_t n = na + 2 + (nb ? nb + 1 : 0);
  *tokens = n > INT32_MAX ? INT32_MAX : (int)n;
  return st;
}

/* ---- encoder layers --------------------------------------------------------------------- */

/* One encoder, one pass: est_bert_encoder keeps every layer's output (est/bert_encoder.h),
 * so all requested layers come from the same forward. The encoder is cut after the deepest
 * requested layer (layers above it would not change the ones below). */
struct est_encoder_layers {
  int n;
  int hidden;
  int *layers;                    /* [n], 0-based */
  est_var_store *vs;
  est_bert_encoder *enc;
};

void est_encoder_layers_free(est_encoder_layers *e) {
  if (!e) return;
  est_bert_encoder_free(e->enc);
  est_vars_free(e->vs);
  free(e->layers);
  free(e);
}

est_status est_encoder_layers_open(est_encoder_layers **out, const est_bert_config *cfg, const char *ckpt_prefix,
                                   const int *layers, int num_layers, int max_batch, int seq_len,
                                   est_precision precision) {
  *out = NULL;
  est_encoder_layers *e = calloc(1, sizeof *e);
  if (!e) return est_error(EST_ERR_NO_MEMORY, "encoder layers");
  e->n = num_layers;
  e->hidden = cfg->hidden_size;
  e->layers = malloc((size_t)(num_layers > 0 ? num_layers : 1) * sizeof *e->layers);
  est_status st = e->layers ? EST_OK : est_error(EST_ERR_NO_MEMORY, "encoder layers");
  int deepest = 0;
  for (int k = 0; st == EST_OK && k < num_layers; k++) {
    if (layers[k] < 0 || layers[k] >= cfg->num_hidden_layers) {
      st = est_error(EST_ERR_INVALID_ARGUMENT, "layer %d outside [0, %d)", layers[k], cfg->num_hidden_layers);
      break;
    }
    e->layers[k] = layers[k];
    if (layers[k] > deepest) deepest = layers[k];
  }
  est_bert_config cut = *cfg;
  cut.num_hidden_layers = deepest + 1;
  if (st == EST_OK) st = est_vars_create(&e->vs);
  if (st == EST_OK) st = est_bert_encoder_create(&e->enc, &cut, e->vs);
  if (st == EST_OK) est_bert_encoder_set_precision(e->enc, precision);
  if (st == EST_OK) st = est_vars_finalize(e->vs, 1);
  if (st == EST_OK) st = est_servable_model_restore(e->vs, ckpt_prefix, NULL);
  if (st == EST_OK) est_vars_set_read_only(e->vs, 1);
  if (st == EST_OK) st = est_bert_encoder_reserve(e->enc, max_batch, seq_len, 0);
  if (st != EST_OK) {
    est_encoder_layers_free(e);
    return st;
  }
  *out = e;
  return EST_OK;
}

est_status est_encoder_layers_run(est_encoder_layers *e, const int32_t *input_ids, const int32_t *input_mask,
                                  const int32_t *segment_ids, int batch, int seq_len, float *const *out) {
  est_status st = est_bert_encoder_forward(e->enc, input_ids, input_mask, segment_ids, batch, seq_len, 0, 0, 0);
  if (st != EST_OK) return st;
  for (int k = 0; k < e->n; k++)
    memcpy(out[k], est_bert_encoder_layer_output(e->enc, e->layers[k]),
           (size_t)batch * seq_len * e->hidden * sizeof(float));
  return EST_OK;
}
