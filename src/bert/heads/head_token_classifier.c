/* Token classification (NER) as an est_bert_head_type (est/bert_head.h): transformers'
 * BertForTokenClassification, and the TF BERT-NER forks' create_model, on every position of
 * the encoder's sequence output (docs/heads.md §1; issue 49).
 *
 *   seq_d[B*S, H]  = dropout(sequence_output, hidden_dropout_prob)        (TRAIN only)
 *   logits[B*S, C] = seq_d . output_weights[C, H]^T + output_bias[C]
 *
 * output_weights / output_bias are run_classifier's names (truncated normal 0.02, zeros), so
 * a HuggingFace directory's classifier.weight / classifier.bias map onto them through the
 * same table line as BertForSequenceClassification (src/hf/hf_names.c).
 *
 *   TRAIN    loss = the mean over the labelled positions of -log softmax(logits)[label]:
 *            torch's CrossEntropyLoss(ignore_index=-100, reduction="mean"), which
 *            BertForTokenClassification uses. A position whose label_ids is -100 (the
 *            sub-tokens after a word's first, [CLS], [SEP], padding) adds nothing; a batch
 *            without labelled positions has loss 0 and zero gradients.
 *            Feature label_ids [B, S] int32.
 *   EVAL     eval_accuracy: token accuracy over the labelled positions; eval_loss: the mean
 *            per-token loss over them. (Entity-level precision / recall / F1 need the label
 *            names and whole words: the task computes them from predictions, src/ner.)
 *   PREDICT  "probabilities" [B, S, C] = softmax(logits) at every position. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "core/json_error.h"
#include "est/bert_head.h"
#include "est/float_format.h"
#include "est/metrics.h"
#include "est/nn.h"
#include "est/served_head.h"
#include "est/tokenizer.h"

enum { IGNORE_INDEX = -100 };

typedef struct token_classifier {
  est_bert_encoder *enc;
  est_var_store *vs;
  int H, C, w, b;                /* output_weights [C, H], output_bias [C] */
  int max_B, max_S;
  float dropout;                 /* the config's hidden_dropout_prob */
  /* one batch, T = B * S positions */
  float *seq_d;                  /* [T, H] dropout output (TRAIN with dropout) */
  uint8_t *mask;                 /* [T, H] */
  float *logits, *probs, *dlogits; /* [T, C] */
  float *d_seq_d;                /* [T, H] */
  float *losses, *weights;       /* [T]: per-token loss; 1 labelled, 0 ignored */
  int32_t *labels, *predictions; /* [T]: the label (0 where ignored), argmax */
  int B, S, valid, num_labelled;
  float p;
  int64_t first_row;
  est_tensor prob_tensor;
  est_metric *metric_objs[2];
  size_t num_metrics;
  est_bert_grads_ready_fn ready_fn;
  void *ready_ctx;
} token_classifier;

static const char *const PREDICTION_NAMES[] = {"probabilities"};

static void free_buffers(token_classifier *h) {
  free(h->seq_d), free(h->mask), free(h->logits), free(h->probs), free(h->dlogits), free(h->d_seq_d);
  free(h->losses), free(h->weights), free(h->labels), free(h->predictions);
}

static void tc_free(void *head) {
  token_classifier *h = head;
  if (!h) return;
  free_buffers(h);
  for (size_t i = 0; i < h->num_metrics; i++) est_metric_free(h->metric_objs[i]);
  free(h);
}

static est_status tc_create(void **out, const est_bert_head_context *ctx) {
  const est_bert_token_classifier_head_params *p = ctx->params;
  if (!p || p->num_labels <= 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "token classifier head: num_labels must be positive, got %d",
                     p ? p->num_labels : 0);
  token_classifier *h = calloc(1, sizeof *h);
  if (!h) return est_error(EST_ERR_NO_MEMORY, "token classifier head: out of memory");
  *out = h;
  h->enc = ctx->encoder;
  h->vs = ctx->vars;
  const est_bert_config *cfg = est_bert_encoder_config(ctx->encoder);
  h->H = cfg->hidden_size;
  h->C = p->num_labels;
  /* BertForTokenClassification: classifier_dropout, else hidden_dropout_prob */
  h->dropout = (float)cfg->hidden_dropout_prob;
  int64_t wdims[2] = {h->C, h->H}, bdims[1] = {h->C};
  est_status st = est_vars_declare(h->vs, "output_weights", 2, wdims, est_init_truncated_normal(0.02f), &h->w);
  if (st == EST_OK) st = est_vars_declare(h->vs, "output_bias", 1, bdims, est_init_zeros(), &h->b);
  return st == EST_OK ? EST_OK : est_error_prefix("declaring the token classifier's variables: ");
}

static est_status add_metric(token_classifier *h, est_metric_kind kind, const char *name) {
  est_metric *m;
  est_status st = est_metric_create(&m, kind, name);
  if (st != EST_OK) return st;
  h->metric_objs[h->num_metrics++] = m;
  return EST_OK;
}

static est_status tc_reserve(void *head, const est_bert_head_context *ctx) {
  token_classifier *h = head;
  free_buffers(h);
  h->max_B = ctx->max_batch;
  h->max_S = ctx->max_seq_length;
  const size_t T = (size_t)h->max_B * (size_t)h->max_S, H = (size_t)h->H, C = (size_t)h->C;
  const int train = ctx->mode == EST_MODE_TRAIN;
  h->seq_d = train ? malloc(T * H * sizeof(float)) : NULL;
  h->mask = train ? malloc(T * H) : NULL;
  h->d_seq_d = train ? malloc(T * H * sizeof(float)) : NULL;
  h->dlogits = train ? malloc(T * C * sizeof(float)) : NULL;
  h->logits = malloc(T * C * sizeof(float));
  h->probs = malloc(T * C * sizeof(float));
  h->losses = malloc(T * sizeof(float));
  h->weights = malloc(T * sizeof(float));
  h->labels = malloc(T * sizeof(int32_t));
  h->predictions = malloc(T * sizeof(int32_t));
  if ((train && (!h->seq_d || !h->mask || !h->d_seq_d || !h->dlogits)) || !h->logits || !h->probs || !h->losses ||
      !h->weights || !h->labels || !h->predictions)
    return est_error(EST_ERR_NO_MEMORY, "token classifier head: out of memory for %zu positions", T);
  if (ctx->mode != EST_MODE_EVAL || h->num_metrics) return EST_OK;
  est_status st = add_metric(h, EST_METRIC_ACCURACY, "eval_accuracy");
  return st == EST_OK ? add_metric(h, EST_METRIC_MEAN, "eval_loss") : st;
}

/* label_ids [B, S]: each in [0, C) or -100, into h->labels / h->weights. */
static est_status read_labels(token_classifier *h, const est_features *f, int B, int S) {
  const est_tensor *t;
  est_status st = est_features_get(f, "label_ids", EST_DT_INT32, 2, &t);
  if (st != EST_OK) return st;
  if (t->dims[1] != S)
    return est_error(EST_ERR_INVALID_ARGUMENT, "label_ids has %lld positions per row, the batch has %d",
                     (long long)t->dims[1], S);
  const int32_t *v = t->data;
  h->num_labelled = 0;
  for (size_t i = 0; i < (size_t)B * S; i++) {
    if (v[i] == IGNORE_INDEX) {
      h->labels[i] = 0, h->weights[i] = 0.0f;
      continue;
    }
    if (v[i] < 0 || v[i] >= h->C)
      return est_error(EST_ERR_INVALID_ARGUMENT, "label_ids[%zu][%zu] = %d: expected a label in [0, %d) or -100",
                       i / S, i % S, (int)v[i], h->C);
    h->labels[i] = v[i], h->weights[i] = 1.0f;
    h->num_labelled++;
  }
  return EST_OK;
}

static est_status tc_forward(void *head, const est_bert_head_batch *b, float *loss) {
  token_classifier *h = head;
  h->valid = 0;
  const int B = b->batch, S = b->seq_len, H = h->H, C = h->C;
  if (B <= 0 || B > h->max_B || S > h->max_S)
    return est_error(EST_ERR_INVALID_ARGUMENT, "token classifier head: a batch of %d x %d exceeds the reservation "
                     "%d x %d", B, S, h->max_B, h->max_S);
  const size_t T = (size_t)B * S;
  const float *seq = est_bert_encoder_sequence_output(h->enc);
  h->p = b->training && h->seq_d ? h->dropout : 0.0f;
  if (h->p > 0.0f) {
    est_dropout_forward_at(h->seq_d, h->mask, seq, T * H, (size_t)h->first_row * S * H, h->p, b->seed, b->step,
                           EST_BERT_DROPOUT_HEAD_FIRST);
    seq = h->seq_d;
  }
  est_matmul_forward(h->logits, seq, est_vars_value(h->vs, (size_t)h->w), est_vars_value(h->vs, (size_t)h->b),
                     (int)T, H, C, 1, est_precision_of_logits(est_bert_encoder_precision(h->enc)));
  h->B = B, h->S = S;
  if (b->mode == EST_MODE_PREDICT || !loss) return EST_OK;
  est_status st = read_labels(h, b->features, B, S);
  if (st != EST_OK) return st;
  /* softmax of every position (the probabilities, and argmax for metrics); the loss only
   * at labelled ones */
  double sum = 0.0;
  for (size_t t = 0; t < T; t++) {
    est_crossentropy_forward(h->losses + t, h->probs + t * C, h->logits + t * C, h->labels + t, 1, C);
    if (h->weights[t] != 0.0f) sum += h->losses[t];
  }
  *loss = h->num_labelled ? (float)(sum / h->num_labelled) : 0.0f;
  h->valid = 1;
  return EST_OK;
}

static est_status tc_backward(void *head) {
  token_classifier *h = head;
  if (!h->valid)
    return est_error(EST_ERR_FAILED_PRECONDITION,
                     "token classifier head backward needs a forward with label_ids just before it");
  float *dseq = est_bert_encoder_sequence_output_grad(h->enc);
  if (!dseq || !h->dlogits)
    return est_error(EST_ERR_FAILED_PRECONDITION, "BERT backward: the activations were reserved forward-only");
  h->valid = 0;
  const int H = h->H, C = h->C;
  const size_t T = (size_t)h->B * h->S;
  /* loss = sum over labelled t of losses[t] / n: d logits[t] = (p - onehot) / n there, 0 elsewhere */
  memset(h->dlogits, 0, T * C * sizeof(float));
  if (h->num_labelled) {
    const float scale = 1.0f / (float)h->num_labelled;
    for (size_t t = 0; t < T; t++)
      if (h->weights[t] != 0.0f)
        est_crossentropy_backward(h->dlogits + t * C, h->probs + t * C, h->labels + t, scale, 1, C);
  }
  float *dW = est_vars_grad(h->vs, (size_t)h->w), *db = est_vars_grad(h->vs, (size_t)h->b);
  const float *inp = h->p > 0.0f ? h->seq_d : est_bert_encoder_sequence_output(h->enc);
  /* without dropout the input gradient goes straight into the encoder's (added); with it,
   * into d_seq_d (written), then through the mask into the encoder's (added) */
  float *dinp = h->p > 0.0f ? h->d_seq_d : dseq;
  est_matmul_backward_mode(dinp, dW, db, h->dlogits, inp, est_vars_value(h->vs, (size_t)h->w), (int)T, H, C, 1,
                           h->p > 0.0f ? EST_GRAD_WRITE : EST_GRAD_ADD, est_bert_encoder_precision(h->enc));
  est_bert_report_grads_ready(h->vs, (size_t)h->w, (size_t)h->b, h->ready_fn, h->ready_ctx);
  if (h->p > 0.0f) est_dropout_backward(dseq, h->d_seq_d, h->mask, T * H, h->p);
  return EST_OK;
}

static est_status tc_update_metrics(void *head, const est_bert_head_batch *b) {
  token_classifier *h = head;
  (void)b;
  const int C = h->C;
  const size_t T = (size_t)h->B * h->S;
  for (size_t t = 0; t < T; t++) { /* the first maximum, as tf.argmax / torch.argmax */
    const float *z = h->logits + t * C;
    int best = 0;
    for (int c = 1; c < C; c++)
      if (z[c] > z[best]) best = c;
    h->predictions[t] = best;
  }
  for (size_t k = 0; k < h->num_metrics; k++) {
    est_metric *m = h->metric_objs[k];
    est_status st = est_metric_get_kind(m) == EST_METRIC_MEAN
                        ? est_metric_update_values(m, h->losses, h->weights, T)
                        : est_metric_update_classes(m, h->labels, h->predictions, h->weights, T);
    if (st != EST_OK) return st;
  }
  return EST_OK;
}

static est_status tc_metrics(void *head, est_metric *const **metrics, size_t *n) {
  token_classifier *h = head;
  *metrics = h->metric_objs;
  *n = h->num_metrics;
  return EST_OK;
}

static est_status tc_predictions(void *head, const est_bert_head_batch *b, est_estimator_spec *spec) {
  token_classifier *h = head;
  est_softmax_forward(h->probs, h->logits, b->batch * b->seq_len, h->C);
  h->prob_tensor = (est_tensor){.dtype = EST_DT_FLOAT, .rank = 3, .dims = {b->batch, b->seq_len, h->C},
                                .data = h->probs};
  spec->num_predictions = 1;
  spec->prediction_names = PREDICTION_NAMES;
  spec->predictions = &h->prob_tensor;
  return EST_OK;
}

static void tc_set_grads_ready(void *head, est_bert_grads_ready_fn fn, void *ctx) {
  token_classifier *h = head;
  h->ready_fn = fn;
  h->ready_ctx = fn ? ctx : NULL;
}

static void tc_set_first_row(void *head, int64_t first_row) {
  ((token_classifier *)head)->first_row = first_row > 0 ? first_row : 0;
}

const est_bert_head_type est_bert_token_classifier_head_type = {
  .name = "token_classifier",
  .create = tc_create,
  .reserve = tc_reserve,
  .forward = tc_forward,
  .backward = tc_backward,
  .update_metrics = tc_update_metrics,
  .metrics = tc_metrics,
  .predictions = tc_predictions,
  .set_grads_ready = tc_set_grads_ready,
  .set_first_row = tc_set_first_row,
  .free = tc_free,
};

/* ---- serving: entities, as transformers' token-classification pipeline --------------------
 *
 * A text -> BertTokenizerFast's tokens with their character offsets -> one row of
 * max_seq_length tokens ([CLS] ... [SEP], truncated) -> probabilities [S, C] -> the entities
 * of transformers 4.44.2's TokenClassificationPipeline.postprocess (docs/ner.md §6):
 * gather_pre_entities, then aggregate with the instance's aggregation_strategy, then "O"
 * dropped (ignore_labels). Nothing of a sentence's windows: a text longer than the model is
 * cut at max_seq_length - 2 tokens.
 *
 * Offsets. The served tokenizer is BERT's FullTokenizer (its vocab and options), which gives
 * ids only. The offsets are found the way BertPreTokenizer + WordPiece find them: the text's
 * code points split at whitespace and around each punctuation and CJK character (the
 * FullTokenizer's words), each word tokenized alone (the same ids as in context), and each
 * sub-token mapped back through the word's normalized characters: a code point counts the
 * characters BasicTokenizer makes of it (1 for most; 0 for what clean-up or accent stripping
 * removes), so a sub-token's span runs from the code point holding its first normalized
 * character to the one holding its last, end exclusive, as tokenizers' alignments do. */

enum {
  AGG_NONE = EST_AGGREGATION_NONE, AGG_SIMPLE = EST_AGGREGATION_SIMPLE, AGG_FIRST = EST_AGGREGATION_FIRST,
  AGG_AVERAGE = EST_AGGREGATION_AVERAGE, AGG_MAX = EST_AGGREGATION_MAX, NUM_AGG
};
static const char *const AGGREGATIONS[NUM_AGG] = {"none", "simple", "first", "average", "max"};

static int aggregation_parse(const char *name) {
  for (int a = 0; name && a < NUM_AGG; a++)
    if (!strcmp(name, AGGREGATIONS[a])) return a;
  return -1;
}

/* est_model.json's "token_classifier": {"aggregation_strategy": "simple"}: the strategy of
 * an instance that names none (absent: "simple"). */
static est_status tc_read_config(void *config, const json_t *root, const char *path) {
  est_model_token_classifier *c = config;
  c->aggregation_strategy = EST_AGGREGATION_SIMPLE;
  const json_t *o = json_object_get(root, "token_classifier");
  if (!o) return EST_OK;
  const json_t *v = json_is_object(o) ? json_object_get(o, "aggregation_strategy") : NULL;
  const int a = json_is_string(v) ? aggregation_parse(json_string_value(v)) : -1;
  if (a < 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: \"token_classifier\".\"aggregation_strategy\" must be one of "
                     "\"none\", \"simple\", \"first\", \"average\", \"max\"", path);
  c->aggregation_strategy = (est_aggregation_strategy)a;
  return EST_OK;
}

/* A *ForTokenClassification directory: the strategy est_model.json's absence gives. */
static est_status tc_hf_config(void *config, const json_t *root, const char *path) {
  (void)root, (void)path;
  ((est_model_token_classifier *)config)->aggregation_strategy = EST_AGGREGATION_SIMPLE;
  return EST_OK;
}

static est_status tc_write_config(const void *config, json_t *root) {
  const est_model_token_classifier *c = config;
  const int a = (int)c->aggregation_strategy >= 0 && (int)c->aggregation_strategy < NUM_AGG ? (int)c->aggregation_strategy
                                                                                   : AGG_SIMPLE;
  json_t *o = json_pack("{s:s}", "aggregation_strategy", AGGREGATIONS[a]);
  return o && !json_object_set_new(root, "token_classifier", o) ? EST_OK : est_error(EST_ERR_NO_MEMORY, "est_model.json");
}

/* probabilities [max_seq_length, num_labels] a row */
static int tc_served_params(void *params, const est_model_meta *meta) {
  *(est_bert_token_classifier_head_params *)params =
    (est_bert_token_classifier_head_params){.num_labels = (int)meta->num_labels};
  return meta->max_seq_length * (int)meta->num_labels;
}

static void tc_signature(const est_model_meta *meta, int width, json_t *outputs, json_t *metadata) {
  (void)width;
  const char *names[5] = {"entity_group", "score", "word", "start", "end"};
  const char *types[5] = {"DT_STRING", "DT_FLOAT", "DT_STRING", "DT_INT64", "DT_INT64"};
  for (int k = 0; k < 5; k++) json_object_set_new(outputs, names[k], est_served_tensor_info(names[k], types[k], -1, -1));
  json_t *labels = json_array();
  for (size_t i = 0; i < meta->num_labels; i++) json_array_append_new(labels, json_string(meta->labels[i]));
  json_object_set_new(metadata, "labels", labels);
}

/* One instance: its text, its strategy, and its row's tokens with their offsets. */
typedef struct tc_item {
  char *text;
  int aggregation;
  int n;                        /* tokens in the row, [CLS] and [SEP] included */
  int *start, *end;             /* [n]: code-point offsets in text; -1 at [CLS] and [SEP] */
} tc_item;

typedef struct tc_batch {
  const est_served_context *ctx;
  int S, C;
  int32_t unk;                  /* the vocab's unk_token id, or -2 */
  tc_item *items;
  size_t count, cap;
  int32_t *ids, *mask, *segs;   /* [cap, S] */
  int longest;
  const float *outputs;         /* [count, S * C] after answer */
} tc_batch;

static void tc_batch_free(void *batch) {
  tc_batch *b = batch;
  if (!b) return;
  for (size_t i = 0; i < b->count; i++) free(b->items[i].text), free(b->items[i].start), free(b->items[i].end);
  free(b->items), free(b->ids), free(b->mask), free(b->segs);
  free(b);
}

static est_status tc_batch_create(void **batch, const est_served_context *ctx) {
  const est_vocab *v = est_tokenizer_vocab(ctx->tokenizer);
  if (!v) return est_error(EST_ERR_FAILED_PRECONDITION, "token classification needs a WordPiece vocab");
  tc_batch *b = calloc(1, sizeof *b);
  if (!b) return est_error(EST_ERR_NO_MEMORY, "token classification");
  b->ctx = ctx;
  b->S = ctx->meta->max_seq_length;
  b->C = (int)ctx->meta->num_labels;
  const est_tokenizer_options o = est_tokenizer_get_options(ctx->tokenizer);
  const char *unk = o.unk_token ? o.unk_token : "[UNK]";
  b->unk = est_vocab_find(v, unk, strlen(unk));
  if (b->unk < 0) b->unk = EST_TOKEN_UNK_MISSING;
  *batch = b;
  return EST_OK;
}

/* Code points in s[0, n) of valid UTF-8. */
static size_t cp_count(const char *s, size_t n) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xC0) != 0x80;
  return k;
}

/* Decodes valid UTF-8 text: cps[k] and the byte where it starts, at[k] (at[ncp] = len). */
static size_t utf8_cps(const char *text, size_t len, uint32_t *cps, size_t *at) {
  size_t k = 0;
  for (size_t i = 0; i < len; k++) {
    const unsigned char c = (unsigned char)text[i];
    const int n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    uint32_t cp = n == 1 ? c : n == 2 ? c & 0x1F : n == 3 ? c & 0x0F : c & 0x07;
    for (int j = 1; j < n; j++) cp = cp << 6 | ((unsigned char)text[i + (size_t)j] & 0x3F);
    cps[k] = cp, at[k] = i;
    i += (size_t)n;
  }
  at[k] = len;
  return k;
}

/* The code point (of m) holding normalized character x, prefix[i] normalized characters
 * before code point i; the last when x is past the end. */
static size_t holder(const size_t *prefix, size_t m, size_t x) {
  size_t h = 0;
  while (h + 1 < m && prefix[h + 1] <= x) h++;
  return h;
}

/* The text's row: [CLS], each word's sub-tokens with their offsets, [SEP]. */
static est_status featurize_text(tc_batch *b, tc_item *it, int32_t *ids, int32_t *mask) {
  est_tokenizer *tok = b->ctx->tokenizer;
  const est_vocab *v = est_tokenizer_vocab(tok);
  const char *text = it->text;
  const size_t len = strlen(text);
  const size_t bad = est_utf8_first_invalid(text, len);
  if (bad != SIZE_MAX) return est_error(EST_ERR_INVALID_ARGUMENT, "the text is not valid UTF-8 (byte %zu)", bad);
  const int32_t cls = est_vocab_find(v, "[CLS]", 5), sep = est_vocab_find(v, "[SEP]", 5);
  if (cls < 0 || sep < 0) return est_error(EST_ERR_FAILED_PRECONDITION, "the vocab has no [CLS] or [SEP]");
  uint32_t *cps = malloc((len + 1) * sizeof *cps);
  size_t *at = malloc((len + 1) * sizeof *at), *prefix = malloc((len + 2) * sizeof *prefix);
  it->start = malloc((size_t)b->S * sizeof *it->start);
  it->end = malloc((size_t)b->S * sizeof *it->end);
  est_status st = EST_OK;
  if (!cps || !at || !prefix || !it->start || !it->end) st = est_error(EST_ERR_NO_MEMORY, "token classification");
  const size_t ncp = st == EST_OK ? utf8_cps(text, len, cps, at) : 0;
  int n = 0;
  ids[n] = cls, it->start[n] = it->end[n] = -1, n++;
  for (size_t k = 0; st == EST_OK && k < ncp && n < b->S - 1;) {
    const uint32_t c = cps[k];
    if (est_tok_is_whitespace(c)) {
      k++;
      continue;
    }
    /* a word: [w0, w1) */
    const size_t w0 = k;
    if (est_tok_is_punctuation(c) || est_tok_is_cjk(c)) k++;
    else
      while (k < ncp && !est_tok_is_whitespace(cps[k]) && !est_tok_is_punctuation(cps[k]) && !est_tok_is_cjk(cps[k]))
        k++;
    const size_t w1 = k, m = w1 - w0;
    /* the normalized characters of each code point */
    prefix[0] = 0;
    for (size_t i = 0; i < m; i++) {
      size_t ntok = 0;
      const char *norm = est_tokenizer_basic(tok, text + at[w0 + i], at[w0 + i + 1] - at[w0 + i], &ntok);
      if (!norm) {
        st = est_error(EST_ERR_NO_MEMORY, "token classification");
        break;
      }
      size_t chars = 0;
      for (const char *p = norm; *p; p++) chars += *p != ' ' && ((unsigned char)*p & 0xC0) != 0x80;
      prefix[i + 1] = prefix[i] + chars;
    }
    const int32_t *wids = NULL;
    size_t nw = 0;
    if (st == EST_OK) st = est_tokenizer_encode(tok, text + at[w0], at[w1] - at[w0], &wids, &nw);
    size_t pos = 0;
    for (size_t j = 0; st == EST_OK && j < nw && n < b->S - 1; j++, n++) {
      ids[n] = wids[j];
      if (wids[j] == b->unk && nw == 1) { /* the whole word, from its first normalized character to its last */
        const size_t total = prefix[m];
        it->start[n] = (int)(w0 + (total ? holder(prefix, m, 0) : 0));
        it->end[n] = (int)(w0 + (total ? holder(prefix, m, total - 1) + 1 : m));
        continue;
      }
      const char *t = est_vocab_token(v, wids[j]);
      size_t chars = t ? cp_count(t, strlen(t)) : 1;
      if (j > 0 && t && !strncmp(t, "##", 2)) chars -= 2;
      const size_t first = holder(prefix, m, pos);
      pos += chars;
      const size_t last = chars ? holder(prefix, m, pos - 1) : first;
      it->start[n] = (int)(w0 + first), it->end[n] = (int)(w0 + (chars ? last + 1 : first));
    }
  }
  if (st == EST_OK) {
    ids[n] = sep, it->start[n] = it->end[n] = -1, n++;
    for (int i = 0; i < n; i++) mask[i] = 1;
    it->n = n;
  }
  free(cps), free(at), free(prefix);
  return st;
}

static est_status add_text(tc_batch *b, const char *text, const char *strategy) {
  const int agg = strategy ? aggregation_parse(strategy)
                           : (int)((const est_model_token_classifier *)est_model_meta_head_config(b->ctx->meta))
                               ->aggregation_strategy;
  if (agg < 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "aggregation_strategy \"%s\": expected none, simple, first, average "
                     "or max", strategy);
  if (b->count == b->cap) {
    const size_t cap = b->cap ? 2 * b->cap : 8, cells = cap * (size_t)b->S;
    tc_item *items = realloc(b->items, cap * sizeof *items);
    if (items) b->items = items;
    int32_t *grown[3] = {realloc(b->ids, cells * sizeof(int32_t)), NULL, NULL};
    if (grown[0]) b->ids = grown[0];
    if ((grown[1] = realloc(b->mask, cells * sizeof(int32_t)))) b->mask = grown[1];
    if ((grown[2] = realloc(b->segs, cells * sizeof(int32_t)))) b->segs = grown[2];
    if (!items || !grown[0] || !grown[1] || !grown[2]) return est_error(EST_ERR_NO_MEMORY, "%zu texts", cap);
    b->cap = cap;
  }
  const size_t off = b->count * (size_t)b->S;
  memset(b->ids + off, 0, (size_t)b->S * sizeof(int32_t));
  memset(b->mask + off, 0, (size_t)b->S * sizeof(int32_t));
  memset(b->segs + off, 0, (size_t)b->S * sizeof(int32_t));
  tc_item *it = &b->items[b->count++];
  *it = (tc_item){.text = strdup(text), .aggregation = agg};
  if (!it->text) return est_error(EST_ERR_NO_MEMORY, "token classification");
  est_status st = featurize_text(b, it, b->ids + off, b->mask + off);
  if (st == EST_OK && it->n > b->longest) b->longest = it->n;
  return st;
}

static est_status tc_add_instance(void *batch, const est_instance *in, size_t i) {
  est_status st = add_text(batch, in->texts[0], in->texts[1]);
  return st == EST_OK ? st : est_error_prefix("instance %zu: ", i);
}

/* est predict: a line is the text (tsv), or {"text_a": "...", "aggregation_strategy": "..."}
 * (jsonl). */
static est_status tc_add_line(void *batch, char *line, const char *src, long lineno) {
  tc_batch *b = batch;
  if (!b->ctx->input_format || strcmp(b->ctx->input_format, "jsonl")) {
    est_status st = add_text(b, line, NULL);
    return st == EST_OK ? st : est_error_prefix("%s:%ld: ", src, lineno);
  }
  json_error_t err;
  json_t *o = json_loads(line, JSON_REJECT_DUPLICATES, &err);
  const json_t *text = json_object_get(o, "text_a"), *agg = json_object_get(o, "aggregation_strategy");
  est_status st = EST_OK;
  if (!json_is_object(o))
    st = est_error(EST_ERR_INVALID_ARGUMENT, "%s:%ld: not a JSON object {\"text_a\": ...} (%s)", src, lineno,
                   o ? "another JSON value" : est_json_error_text(&err));
  else if (!json_is_string(text) || (agg && !json_is_string(agg)))
    st = est_error(EST_ERR_INVALID_ARGUMENT, "%s:%ld: needs a string \"text_a\" (and optionally a string "
                   "\"aggregation_strategy\")", src, lineno);
  else if ((st = add_text(b, json_string_value(text), agg ? json_string_value(agg) : NULL)) != EST_OK)
    est_error_prefix("%s:%ld: ", src, lineno);
  json_decref(o);
  return st;
}

static est_status tc_rows(void *batch, est_served_rows *rows) {
  const tc_batch *b = batch;
  *rows = (est_served_rows){.input_ids = b->ids, .input_mask = b->mask, .segment_ids = b->segs, .n = (int)b->count,
                            .longest = b->longest};
  return EST_OK;
}

static est_status tc_answer(void *batch, const float *outputs) {
  ((tc_batch *)batch)->outputs = outputs;
  return EST_OK;
}

/* ---- the pipeline's postprocess ---- */

/* An entity: per token (none), per word (first / average / max) or a group. */
typedef struct entity {
  int label, index;             /* index: the token's position (none only) */
  double score;
  char *word;
  int start, end;
  bool subword;
  const float *scores;          /* per token: its probabilities [C] */
  float *own;                   /* average: the word's mean probabilities [C] */
} entity;

static int argmax(const float *p, int C) {
  int best = 0;
  for (int c = 1; c < C; c++)
    if (p[c] > p[best]) best = c;
  return best;
}

/* tokenizers' WordPiece decoder (prefix "##", cleanup): convert_tokens_to_string. */
static char *wordpiece_join(char *const *tokens, size_t n) {
  static const char *const CLEANUP[][2] = {{" .", "."},   {" ?", "?"},     {" !", "!"},     {" ,", ","},
                                           {" ' ", "'"},  {" n't", "n't"}, {" 'm", "'m"},   {" do not", " don't"},
                                           {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  size_t cap = 1;
  for (size_t i = 0; i < n; i++) cap += strlen(tokens[i]) + 2;
  char *out = malloc(cap), *piece = malloc(cap);
  if (!out || !piece) return free(out), free(piece), NULL;
  out[0] = 0;
  size_t len = 0;
  for (size_t i = 0; i < n; i++) {
    const char *t = tokens[i];
    if (i && !strncmp(t, "##", 2)) snprintf(piece, cap, "%s", t + 2);
    else snprintf(piece, cap, "%s%s", i ? " " : "", t);
    /* each replacement over the piece, in order (str.replace: left to right, no overlap) */
    for (size_t r = 0; r < sizeof CLEANUP / sizeof *CLEANUP; r++) {
      const char *from = CLEANUP[r][0], *to = CLEANUP[r][1];
      const size_t fl = strlen(from), tl = strlen(to);
      char *w = piece, *s = piece;
      while (*s) {
        if (!strncmp(s, from, fl)) memmove(w, to, tl), w += tl, s += fl;
        else *w++ = *s++;
      }
      *w = 0;
    }
    len += (size_t)snprintf(out + len, cap - len, "%s", piece);
  }
  free(piece);
  return out;
}

static char *join_words(const entity *e, size_t n) {
  char **words = malloc((n ? n : 1) * sizeof *words);
  if (!words) return NULL;
  for (size_t i = 0; i < n; i++) words[i] = e[i].word;
  char *out = wordpiece_join(words, n);
  free(words);
  return out;
}

static char *substring(const char *text, const size_t *at, int start, int end) {
  const size_t bytes = at[end] - at[start];
  char *s = malloc(bytes + 1);
  if (s) memcpy(s, text + at[start], bytes), s[bytes] = 0;
  return s;
}

static void free_entities(entity *e, size_t n) {
  for (size_t i = 0; e && i < n; i++) free(e[i].word), free(e[i].own);
  free(e);
}

/* "B-PER" -> (B, "PER"); "I-PER" -> (I, "PER"); anything else -> (I, the label): get_tag. */
static const char *get_tag(const char *label, char *bi) {
  if (!strncmp(label, "B-", 2) || !strncmp(label, "I-", 2)) {
    *bi = label[0];
    return label + 2;
  }
  *bi = 'I';
  return label;
}

/* group_entities: adjacent entities of one tag (a B- starts a new group) -> groups, each
 * {entity_group: the first's label after its first "-", score: the mean, word: the words
 * joined, start: the first's, end: the last's}. */
static entity *group_entities(const est_model_meta *meta, entity *e, size_t n, size_t *out_n) {
  entity *g = calloc(n ? n : 1, sizeof *g);
  size_t ng = 0;
  for (size_t i = 0; g && i < n;) {
    size_t j = i + 1;
    char bi0, bi;
    for (; j < n; j++) {
      const char *last = get_tag(meta->labels[e[j - 1].label], &bi0), *tag = get_tag(meta->labels[e[j].label], &bi);
      if (strcmp(tag, last) || bi == 'B') break;
    }
    double sum = 0;
    for (size_t k = i; k < j; k++) sum += (float)e[k].score;
    g[ng] = (entity){.label = e[i].label, .score = (float)(sum / (double)(j - i)), .word = join_words(e + i, j - i),
                     .start = e[i].start, .end = e[j - 1].end};
    ng++;
    i = j;
  }
  *out_n = ng;
  return g;
}

/* aggregate_word over the tokens [i, j) of one word. */
static entity aggregate_word(const entity *t, size_t n, int strategy, int C) {
  entity w = {.word = join_words(t, n), .start = t[0].start, .end = t[n - 1].end};
  const float *p = t[0].scores;
  if (strategy == AGG_MAX) {
    float best = -1;
    for (size_t k = 0; k < n; k++) {
      const float m = t[k].scores[argmax(t[k].scores, C)];
      if (m > best) best = m, p = t[k].scores;
    }
  } else if (strategy == AGG_AVERAGE) {
    w.own = malloc((size_t)C * sizeof *w.own);
    if (w.own) {
      for (int c = 0; c < C; c++) {
        double s = 0;
        for (size_t k = 0; k < n; k++) s += t[k].scores[c];
        w.own[c] = (float)(s / (double)n);
      }
      p = w.own;
    }
  }
  w.label = argmax(p, C);
  w.score = p[w.label];
  return w;
}

/* Instance i's entities as the pipeline's list: [{"entity_group", "score", "word", "start",
 * "end"}, ...] ("entity" and "index" per token under "none"), "O" left out. */
static void tc_write(const void *batch, size_t i, est_served_form form, FILE *out) {
  (void)form;
  const tc_batch *b = batch;
  const tc_item *it = &b->items[i];
  const est_model_meta *meta = b->ctx->meta;
  const est_vocab *v = est_tokenizer_vocab(b->ctx->tokenizer);
  const int C = b->C;
  const float *row = b->outputs + i * (size_t)b->ctx->output_width;
  const size_t len = strlen(it->text);
  uint32_t *cps = malloc((len + 1) * sizeof *cps);
  size_t *at = malloc((len + 1) * sizeof *at);
  entity *tokens = calloc((size_t)it->n, sizeof *tokens), *words = NULL, *groups = NULL;
  size_t nt = 0, nw = 0, ng = 0;
  if (!cps || !at || !tokens) goto done;
  utf8_cps(it->text, len, cps, at);
  const int32_t *ids = b->ids + i * (size_t)b->S;
  /* gather_pre_entities: every token but [CLS] and [SEP] */
  for (int t = 0; t < it->n; t++) {
    if (it->start[t] < 0) continue;
    entity *e = &tokens[nt++];
    const char *tokstr = est_vocab_token(v, ids[t]);
    const int ref_chars = it->end[t] - it->start[t];
    e->index = t, e->start = it->start[t], e->end = it->end[t], e->scores = row + (size_t)t * C;
    if (ids[t] == b->unk || !tokstr) { /* the text it stands for */
      e->word = substring(it->text, at, e->start, e->end);
    } else {
      e->word = strdup(tokstr);
      e->subword = (int)cp_count(tokstr, strlen(tokstr)) != ref_chars;
    }
    if (!e->word) goto done;
    e->label = argmax(e->scores, C);
    e->score = e->scores[e->label];
  }
  if (it->aggregation == AGG_NONE) {
    fputc('[', out);
    int first = 1;
    char num[48];
    for (size_t k = 0; k < nt; k++) {
      const entity *e = &tokens[k];
      if (!strcmp(meta->labels[e->label], "O")) continue;
      fputs(first ? "{\"entity\": " : ", {\"entity\": ", out);
      est_py_json_string(out, meta->labels[e->label]);
      fprintf(out, ", \"score\": %s, \"index\": %d, \"word\": ", est_format_float32((float)e->score, num, sizeof num),
              e->index);
      est_py_json_string(out, e->word);
      fprintf(out, ", \"start\": %d, \"end\": %d}", e->start, e->end);
      first = 0;
    }
    fputc(']', out);
    goto done;
  }
  if (it->aggregation == AGG_SIMPLE) {
    groups = group_entities(meta, tokens, nt, &ng);
  } else { /* aggregate_words: a word is a token and the subwords after it */
    words = calloc(nt ? nt : 1, sizeof *words);
    if (!words) goto done;
    for (size_t k = 0; k < nt;) {
      size_t j = k + 1;
      while (j < nt && tokens[j].subword) j++;
      words[nw++] = aggregate_word(tokens + k, j - k, it->aggregation, C);
      k = j;
    }
    groups = group_entities(meta, words, nw, &ng);
  }
  fputc('[', out);
  int first = 1;
  char num[48];
  for (size_t k = 0; groups && k < ng; k++) {
    const entity *g = &groups[k];
    const char *label = meta->labels[g->label], *dash = strchr(label, '-');
    const char *group = dash ? dash + 1 : label;
    if (!strcmp(group, "O")) continue;
    fputs(first ? "{\"entity_group\": " : ", {\"entity_group\": ", out);
    est_py_json_string(out, group);
    fprintf(out, ", \"score\": %s, \"word\": ", est_format_float32((float)g->score, num, sizeof num));
    est_py_json_string(out, g->word ? g->word : "");
    fprintf(out, ", \"start\": %d, \"end\": %d}", g->start, g->end);
    first = 0;
  }
  fputc(']', out);
done:
  free_entities(tokens, nt), free_entities(words, nw), free_entities(groups, ng);
  free(cps), free(at);
}

const est_served_head est_served_token_classifier = {
  .name = "token_classifier",
  .type = &est_bert_token_classifier_head_type,
  .labels = true,
  .config_size = sizeof(est_model_token_classifier),
  .read_config = tc_read_config,
  .write_config = tc_write_config,
  .params = tc_served_params,
  .outputs = {"probabilities"},
  .inputs = {.texts = {"text_a", "aggregation_strategy"}, .required = 1, .bare_string = true, .columnar = true,
             .model = "a token classification model"},
  .signature = tc_signature,
  .no_classify = "the model labels tokens: it has no classification signature; use :predict",
  .batch_create = tc_batch_create,
  .add_instance = tc_add_instance,
  .add_line = tc_add_line,
  .rows = tc_rows,
  .answer = tc_answer,
  .write = tc_write,
  .batch_free = tc_batch_free,
  .hf_architecture = "ForTokenClassification",
  .hf_config = tc_hf_config,
};
