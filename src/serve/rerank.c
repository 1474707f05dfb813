/* A cross-encoder servable's scores of (query, passage) pairs (est/serving.h; est rerank,
 * POST /rerank; docs/rerank.md). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "est/serving.h"

bool est_servable_is_cross_encoder(const est_servable *s) {
  const est_model_meta *meta = est_servable_meta(s);
  const est_served_head *head = est_model_meta_head(meta);
  return head->pair_score && head->pair_score(meta);
}

est_status est_servable_rerank(est_servable *s, est_featurizer *f, const char *query, const char *const *texts,
                               size_t n, bool raw_scores, float *scores) {
  const est_model_meta *meta = est_servable_meta(s);
  if (!est_servable_is_cross_encoder(s))
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: the model's head is \"%s\" with %zu output(s); a reranker needs a "
                     "cross-encoder (one raw score: est run_rerank --do_export, or a HuggingFace "
                     "*ForSequenceClassification directory of one label)", est_servable_dir(s),
                     est_model_meta_head(meta)->name, meta->num_labels);
  if (!query) return est_error(EST_ERR_INVALID_ARGUMENT, "rerank: no query");
  const size_t S = (size_t)meta->max_seq_length, B = (size_t)est_servable_max_batch(s);
  int32_t *rows = malloc(3 * B * S * sizeof *rows);
  if (!rows) return est_error(EST_ERR_NO_MEMORY, "rerank: out of memory for a batch of %zu", B);
  est_status st = EST_OK;
  for (size_t at = 0; st == EST_OK && at < n; at += B) {
    const size_t m = n - at < B ? n - at : B;
    int longest = 1;
    for (size_t i = 0; st == EST_OK && i < m; i++) {
      int len = 0;
      if (!texts[at + i]) {
        st = est_error(EST_ERR_INVALID_ARGUMENT, "rerank: text %zu is missing", at + i);
        break;
      }
      st = est_featurizer_run(f, query, texts[at + i], rows + i * S, rows + (B + i) * S, rows + (2 * B + i) * S, &len);
      longest = len > longest ? len : longest;
    }
    if (st == EST_OK)
      st = est_servable_predict_strided(s, rows, rows + B * S, rows + 2 * B * S, (int)m, (int)S,
                                        est_serving_bucket_length(longest, (int)S), scores + at);
  }
  free(rows);
  for (size_t i = 0; st == EST_OK && !raw_scores && i < n; i++) {
    const double z = scores[i];
    scores[i] = (float)(z >= 0 ? 1.0 / (1.0 + exp(-z)) : exp(z) / (1.0 + exp(z)));
  }
  return st;
}

typedef struct by_score_item {
  float score;
  size_t index;
} by_score_item;

static int by_score(const void *a, const void *b) {
  const by_score_item *x = a, *y = b;
  if (x->score != y->score) return x->score > y->score ? -1 : 1;
  return x->index < y->index ? -1 : x->index > y->index;
}

void est_rerank_order(const float *scores, size_t n, size_t *order) {
  by_score_item *items = malloc((n + 1) * sizeof *items);
  if (!items) { /* an insertion sort in place, without memory */
    for (size_t i = 0; i < n; i++) {
      size_t j = i;
      for (; j > 0 && scores[order[j - 1]] < scores[i]; j--) order[j] = order[j - 1];
      order[j] = i;
    }
    return;
  }
  for (size_t i = 0; i < n; i++) items[i] = (by_score_item){scores[i], i};
  qsort(items, n, sizeof *items, by_score);
  for (size_t i = 0; i < n; i++) order[i] = items[i].index;
  free(items);
}
