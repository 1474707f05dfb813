/* est/run_rerank.h — cross-encoder reranking fine-tuning, as sentence-transformers'
 * CrossEncoder (num_labels 1) trains, on the task driver (est/bert_task.h; issue 49).
 *
 *     est_run_rerank_config c = est_run_rerank_config_default();
 *     c.data_dir = "pairs"; c.vocab_file = "vocab.txt";  // train.tsv, dev.tsv, test.tsv (or .jsonl)
 *     c.common.bert_config_file = "bert_config.json"; c.common.output_dir = "out";
 *     c.common.do_train = c.common.do_eval = true;
 *     if (est_run_rerank_main(&c) != EST_OK) fprintf(stderr, "%s\n", est_error_message());
 *
 * Data (est/rerank.h): data_dir's train / dev / test, each <split>.tsv (query TAB passage TAB
 * label) or else <split>.jsonl. Each pair is one record, [CLS] query [SEP] passage [SEP]
 * (run_classifier's pair layout and truncation). Head: the classifier (est/bert_head.h) with
 * one output and pair_loss: "bce" (labels in [0, 1]; CrossEncoder's default for num_labels 1)
 * or "mse" (any score).
 *
 * Files under output_dir: train/eval/predict.tf_record (input_ids, input_mask, segment_ids
 * [max_seq_length] int64, label_values [1] float), the checkpoints, and
 *   eval_results.txt  eval_loss, loss, global_step, and over dev's pairs grouped by query
 *                     eval_mrr@10, eval_ndcg@10 (est_rerank_evaluate), eval_num_queries;
 *   test_results.tsv  one line a test pair, in order: its score (sigmoid of the logit under
 *                     bce, the logit under mse) TAB its 1-based rank among its query's pairs.
 * --do_export: an est servable (the classifier, one raw-logit output, problem_type
 * regression), or --export_format=hf a BertForSequenceClassification directory of one label
 * that CrossEncoder(DIR) loads. */
#ifndef EST_RUN_RERANK_H
#define EST_RUN_RERANK_H

#include <stdbool.h>

#include "est/bert_task.h"
#include "est/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct est_run_rerank_config {
  est_task_flags common;        /* the shared flags, run_classifier's defaults */
  const char *data_dir;         /* required */
  const char *vocab_file;       /* required (or a HuggingFace --init_checkpoint's) */
  bool do_lower_case;           /* true */
  double num_train_epochs;      /* 3.0 */
  double warmup_proportion;     /* 0.1 */
  const char *loss;             /* "bce" (NULL) or "mse" */
} est_run_rerank_config;

est_run_rerank_config est_run_rerank_config_default(void);
/* Every flag and input file checked, no work done. */
est_status est_run_rerank_validate(const est_run_rerank_config *c);
est_status est_run_rerank_main(const est_run_rerank_config *c);

#ifdef __cplusplus
}
#endif
#endif
