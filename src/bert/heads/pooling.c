/* Sentence-embedding pooling (est/sentence_embedding.h): sentence-transformers'
 * models.Pooling forward and models.Normalize, on est's [B, S, H] sequence output.
 * Reference: sentence_transformers/models/Pooling.py (forward: the cls / max / mean /
 * mean_sqrt_len branches, concatenated in that order) and Normalize.py (F.normalize, p=2,
 * eps 1e-12). Sums run in double: a 512-token mean then matches float64 references to
 * well under 1e-6 relative, and float32 ones to their own rounding. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "est/sentence_embedding.h"

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
