/* Sentence-embedding pooling, in one file: sentence-transformers' models.Pooling forward and
 * models.Normalize on est's [B, S, H] sequence output (est/sentence_embedding.h), and the
 * pooling head around it (est/bert_head.h) for `est embed` and an embedding servable
 * (docs/embeddings.md). sentence-transformers' own files are read in
 * src/hf/pooling_sentence_transformers.c.
 *
 * Reference: sentence_transformers/models/Pooling.py (forward: the cls / max / mean /
 * mean_sqrt_len branches, concatenated in that order) and Normalize.py (F.normalize, p=2,
 * eps 1e-12). Sums run in double: a 512-token mean then matches float64 references to
 * well under 1e-6 relative, and float32 ones to their own rounding.
 *
 *   PREDICT  "embeddings" [B, W] = est_pooling_forward(sequence output [B, S, H], input_mask)
 *
 * The head declares no variables and has no loss: a sentence embedding is read off a trained
 * encoder as it is, so TRAIN and EVAL are refused with the head's name.
 *
 * Served (est/served_head.h): est_model.json's "pooling" holds its modes and normalisation;
 * requests of the text form answered with the vectors; the embedding APIs (est embed, POST
 * /embed, POST /v1/embeddings); no :classify, no est predict lines. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/sentence_embedding.h"
#include "est/served_head.h"

/* ---- the pooling --------------------------------------------------------------------- */

static const char *const MODE_NAMES[EST_POOLING_NUM_MODES] = {"cls", "max", "mean", "mean_sqrt_len"};

const char *est_pooling_mode_name(int k) { return k >= 0 && k < EST_POOLING_NUM_MODES ? MODE_NAMES[k] : NULL; }

est_status est_pooling_params_parse(est_pooling_params *p, const char *modes, bool normalize) {
  est_pooling_params q = {.modes = 0, .normalize = normalize};
  const char *s = modes ? modes : "";
  for (;;) {
    size_t n = strcspn(s, ",");
    int k = 0;
    while (k < EST_POOLING_NUM_MODES && (strlen(MODE_NAMES[k]) != n || strncmp(s, MODE_NAMES[k], n))) k++;
    if (k == EST_POOLING_NUM_MODES)
      return est_error(EST_ERR_INVALID_ARGUMENT, "pooling mode \"%.*s\" unknown (known: cls, max, mean, "
                       "mean_sqrt_len; several separated by commas)", (int)n, s);
    if (q.modes & (1u << k))
      return est_error(EST_ERR_INVALID_ARGUMENT, "pooling mode \"%s\" given twice in \"%s\"", MODE_NAMES[k], modes);
    q.modes |= 1u << k;
    if (!s[n]) break;
    s += n + 1;
  }
  *p = q;
  return EST_OK;
}

char *est_pooling_modes_string(const est_pooling_params *p, char *buf, size_t size) {
  size_t len = 0;
  if (size) buf[0] = 0;
  for (int k = 0; k < EST_POOLING_NUM_MODES; k++)
    if (p->modes & (1u << k) && len < size)
      len += (size_t)snprintf(buf + len, size - len, "%s%s", len ? "," : "", MODE_NAMES[k]);
  return buf;
}

int est_pooling_width(const est_pooling_params *p, int hidden) {
  int n = 0;
  for (int k = 0; k < EST_POOLING_NUM_MODES; k++) n += (p->modes >> k) & 1;
  return n * hidden;
}

/* One row: x [S, H], mask [S] -> out [W]. */
static void pool_row(float *out, const float *x, const int32_t *mask, int S, int H, const est_pooling_params *p) {
  int count = 0;
  for (int t = 0; t < S; t++) count += !mask || mask[t] != 0;
  float *o = out;
  if (p->modes & EST_POOLING_CLS) {
    memcpy(o, x, (size_t)H * sizeof(float));
    o += H;
  }
  if (p->modes & EST_POOLING_MAX) {
    for (int h = 0; h < H; h++) {
      float best = -INFINITY;
      for (int t = 0; t < S; t++)
        if ((!mask || mask[t]) && x[(size_t)t * H + h] > best) best = x[(size_t)t * H + h];
      o[h] = count ? best : 0.0f;
    }
    o += H;
  }
  if (p->modes & (EST_POOLING_MEAN | EST_POOLING_MEAN_SQRT_LEN)) {
    for (int h = 0; h < H; h++) {
      double sum = 0;
      for (int t = 0; t < S; t++)
        if (!mask || mask[t]) sum += x[(size_t)t * H + h];
      /* Pooling.py divides by clamp(count, min=1e-9): an empty row gives 0 */
      if (p->modes & EST_POOLING_MEAN) o[h] = count ? (float)(sum / count) : 0.0f;
      if (p->modes & EST_POOLING_MEAN_SQRT_LEN)
        o[h + (p->modes & EST_POOLING_MEAN ? H : 0)] = count ? (float)(sum / sqrt((double)count)) : 0.0f;
    }
  }
  if (p->normalize) {
    const int W = est_pooling_width(p, H);
    double sq = 0;
    for (int i = 0; i < W; i++) sq += (double)out[i] * out[i];
    double norm = sqrt(sq);
    if (norm < 1e-12) norm = 1e-12;
    for (int i = 0; i < W; i++) out[i] = (float)(out[i] / norm);
  }
}

void est_pooling_forward(float *out, const float *seq, const int32_t *input_mask, int batch, int seq_len, int hidden,
                         const est_pooling_params *p) {
  const int W = est_pooling_width(p, hidden);
  for (int b = 0; b < batch; b++)
    pool_row(out + (size_t)b * W, seq + (size_t)b * seq_len * hidden,
             input_mask ? input_mask + (size_t)b * seq_len : NULL, seq_len, hidden, p);
}

/* ---- the head ------------------------------------------------------------------------ */

typedef struct pooling_head {
  est_bert_encoder *enc;
  est_pooling_params params;
  int width;                    /* W */
  float *embeddings;            /* [max_batch, W] */
  est_tensor out;
} pooling_head;

static const char *const PREDICTION_NAMES[] = {"embeddings"};

static void pooling_free(void *head) {
  pooling_head *m = head;
  if (!m) return;
  free(m->embeddings);
  free(m);
}

static est_status pooling_create(void **out, const est_bert_head_context *ctx) {
  const est_pooling_params *p = ctx->params;
  if (ctx->mode != EST_MODE_PREDICT)
    return est_error(EST_ERR_INVALID_ARGUMENT, "the pooling head only predicts (sentence embeddings); it has no "
                     "loss to train or evaluate");
  if (!p || !p->modes || p->modes >> EST_POOLING_NUM_MODES)
    return est_error(EST_ERR_INVALID_ARGUMENT, "pooling head: no pooling mode (cls, max, mean, mean_sqrt_len)");
  pooling_head *m = calloc(1, sizeof *m);
  if (!m) return est_error(EST_ERR_NO_MEMORY, "pooling head");
  *out = m;
  m->enc = ctx->encoder;
  m->params = *p;
  m->width = est_pooling_width(p, est_bert_encoder_config(ctx->encoder)->hidden_size);
  return EST_OK;
}

static est_status pooling_reserve(void *head, const est_bert_head_context *ctx) {
  pooling_head *m = head;
  free(m->embeddings);
  m->embeddings = malloc((size_t)ctx->max_batch * (size_t)m->width * sizeof(float));
  return m->embeddings ? EST_OK : est_error(EST_ERR_NO_MEMORY, "pooling head: batch of %d", ctx->max_batch);
}

static est_status pooling_forward(void *head, const est_bert_head_batch *b, float *loss) {
  pooling_head *m = head;
  if (loss) return est_error(EST_ERR_INVALID_ARGUMENT, "the pooling head has no loss (PREDICT only)");
  /* input_mask is optional as for the encoder: absent means every position is real */
  const est_tensor *mask = NULL;
  if (est_features_find(b->features, "input_mask")) {
    est_status st = est_features_get(b->features, "input_mask", EST_DT_INT32, 2, &mask);
    if (st != EST_OK) return st;
  }
  const int H = est_bert_encoder_config(m->enc)->hidden_size;
  est_pooling_forward(m->embeddings, est_bert_encoder_sequence_output(m->enc), mask ? mask->data : NULL, b->batch,
                      b->seq_len, H, &m->params);
  return EST_OK;
}

static est_status pooling_predictions(void *head, const est_bert_head_batch *b, est_estimator_spec *spec) {
  pooling_head *m = head;
  m->out = (est_tensor){.dtype = EST_DT_FLOAT, .rank = 2, .dims = {b->batch, m->width}, .data = m->embeddings};
  spec->num_predictions = 1;
  spec->prediction_names = PREDICTION_NAMES;
  spec->predictions = &m->out;
  return EST_OK;
}

const est_bert_head_type est_bert_pooling_head_type = {
  .name = "pooling",
  .create = pooling_create,
  .reserve = pooling_reserve,
  .forward = pooling_forward,
  .predictions = pooling_predictions,
  .free = pooling_free,
};

/* ---- serving ----------------------------------------------------------------------------- */

/* est_model.json's "pooling": {"modes": "cls,mean", "normalize": false}. */
static est_status pooling_read_config(void *config, const json_t *root, const char *path) {
  const json_t *v = json_object_get(root, "pooling");
  const json_t *modes = json_object_get(v, "modes"), *normalize = json_object_get(v, "normalize");
  if (!json_is_object(v) || !json_is_string(modes) || !json_is_boolean(normalize))
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: a \"pooling\" head needs \"pooling\": {\"modes\": \"mean\", "
                     "\"normalize\": true} (modes: cls, max, mean, mean_sqrt_len, comma-separated)", path);
  est_status st = est_pooling_params_parse(config, json_string_value(modes), json_is_true(normalize));
  return st == EST_OK ? st : est_error_prefix("%s: \"pooling\".\"modes\": ", path);
}

static est_status pooling_write_config(const void *config, json_t *root) {
  const est_pooling_params *p = config;
  char modes[64];
  json_t *o = json_pack("{s:s,s:b}", "modes", est_pooling_modes_string(p, modes, sizeof modes), "normalize",
                        p->normalize);
  return o && !json_object_set_new(root, "pooling", o) ? EST_OK : est_error(EST_ERR_NO_MEMORY, "est_model.json");
}

/* The embedding's width. */
static int pooling_served_params(void *params, const est_model_meta *meta) {
  const est_pooling_params *p = est_model_meta_head_config(meta);
  *(est_pooling_params *)params = *p;
  return est_pooling_width(p, meta->bert_config.hidden_size);
}

/* TEI: an embedding model, {"embedding": {"pooling": "mean"}} (its modes as est_model.json
 * names them). */
static json_t *pooling_tei_model_type(const est_model_meta *meta) {
  char modes[64];
  return json_pack("{s:{s:s}}", "embedding", "pooling",
                   est_pooling_modes_string(est_model_meta_head_config(meta), modes, sizeof modes));
}

static bool pooling_normalized(const est_model_meta *meta) {
  return ((const est_pooling_params *)est_model_meta_head_config(meta))->normalize;
}

const est_served_head est_served_pooling = {
  .name = "pooling",
  .type = &est_bert_pooling_head_type,
  .config_size = sizeof(est_pooling_params),
  .read_config = pooling_read_config,
  .write_config = pooling_write_config,
  .params = pooling_served_params,
  .outputs = {"embeddings"},
  .inputs = EST_SERVED_TEXT_INPUTS,
  .signature = est_served_text_signature,
  .no_classify = "the model has no classification signature (its head is \"pooling\"); use :predict, POST /embed or "
                 "POST /v1/embeddings",
  EST_SERVED_TEXT_BATCH, /* without input lines */
  .write = est_served_text_write,
  .no_predict = "est predict answers a classifier's probabilities or a squad model's answers (an embedding export: "
                "est embed --model_dir)",
  .embedding_normalized = pooling_normalized,
  .tei_model_type = pooling_tei_model_type,
};
