/* est/rerank.h — cross-encoder reranking data and metrics (est run_rerank, docs/rerank.md).
 *
 *     est_rerank_data d;
 *     if (est_rerank_read_file(&d, "dev.tsv") != EST_OK) fprintf(stderr, "%s\n", est_error_message());
 *     // ... one score per pair (a cross-encoder's logit or sigmoid) into scores[d.count] ...
 *     est_rerank_report r;
 *     est_rerank_evaluate(&r, query_of, labels, scores, d.count, 10);  // r.mrr, r.ndcg
 *     est_rerank_data_free(&d);
 *
 * Files: (query, passage, label) rows, one pair a row.
 *   - TSV (any name but *.jsonl / *.json): query TAB passage TAB label; the label may be
 *     left out (test.tsv: 0). A first line whose third field is not a number is a header
 *     and skipped. Quotes are text (run_classifier's TSV reading).
 *   - JSON lines (*.jsonl, *.json): {"query": ..., "passage": ..., "label": number} a line
 *     ("text" for "passage", "score" for "label" also accepted, as sentence-transformers'
 *     datasets name them); blank lines skipped.
 * A label is a 0/1 relevance (binary cross-entropy), a graded relevance or any score (MSE).
 * Pairs of one query need not be adjacent: queries are grouped by their exact text, numbered
 * in order of first appearance. */
#ifndef EST_RERANK_H
#define EST_RERANK_H

#include <stddef.h>
#include <stdint.h>

#include "est/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct est_rerank_pair {
  char *query, *passage;
  float label;
  int64_t query_index;   /* the query's number (first appearance order) */
} est_rerank_pair;

typedef struct est_rerank_data {
  est_rerank_pair *items;
  size_t count, num_queries;
} est_rerank_data;

/* Reads path (TSV or JSON lines, by its name). Errors name path:line and what was expected:
 * too few fields, a label that is not a finite number, invalid UTF-8, a JSON line that is not
 * an object with string "query" and "passage". An empty file is an empty set. */
est_status est_rerank_read_file(est_rerank_data *out, const char *path);
void est_rerank_data_free(est_rerank_data *d);

/* The ranking metrics, per query then averaged over the queries that have a relevant passage
 * (label >= 0.5); the others are left out of both means (they have no first relevant rank and
 * no ideal DCG), as sentence-transformers' reranking evaluators skip a query without positives.
 * A query's passages are ordered by score, highest first; equal scores keep input order.
 *   mrr   MRR@k: 1 / rank of the first relevant passage when it is in the top k, else 0.
 *   ndcg  NDCG@k with linear gains (scikit-learn's ndcg_score): DCG@k = sum over the top k of
 *         max(label, 0) / log2(rank + 1), divided by the DCG@k of the labels sorted.
 * k >= 1. */
typedef struct est_rerank_report {
  double mrr, ndcg;
  size_t num_queries;    /* queries with a relevant passage: the means' count */
  size_t num_skipped;    /* queries without one */
} est_rerank_report;

est_status est_rerank_evaluate(est_rerank_report *r, const int64_t *query_index, const float *labels,
                               const float *scores, size_t n, int k);

#ifdef __cplusplus
}
#endif
#endif
