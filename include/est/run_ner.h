/* est/run_ner.h — token classification (NER) fine-tuning, as transformers' run_ner and the
 * BERT-NER forks of run_classifier.py, on the task driver (est/bert_task.h; issue 49).
 *
 *     est_run_ner_config c = est_run_ner_config_default();
 *     c.data_dir = "conll2003"; c.vocab_file = "vocab.txt";  // train.txt, dev.txt, test.txt
 *     c.common.bert_config_file = "bert_config.json"; c.common.output_dir = "out";
 *     c.common.do_train = c.common.do_eval = c.common.do_predict = true;
 *     if (est_run_ner_main(&c) != EST_OK) fprintf(stderr, "%s\n", est_error_message());
 *
 * Data (est/ner.h): data_dir's train.txt, dev.txt, test.txt, each CoNLL or JSON lines. The
 * labels are train.txt's tags ("O" first, the rest sorted), so train.txt is read by every
 * mode. Each word's first sub-token carries its label (label_all_tokens: every sub-token);
 * sentences longer than max_seq_length are windows doc_stride sub-tokens apart.
 * Head: est_bert_token_classifier_head_type (est/bert_head.h).
 *
 * The classifier's label order: output_dir's label_list.txt (written when training starts)
 * when present, else a HuggingFace --init_checkpoint's id2label (the same labels), else
 * train.txt's (docs/ner.md §2).
 *
 * Files under output_dir: label_list.txt, train/eval/predict.tf_record (one window a record: input_ids,
 * input_mask, segment_ids, label_ids [max_seq_length]), the checkpoints, eval_results.txt and
 * test_predictions.txt.
 *   eval_results.txt  the Estimator's eval_loss, loss and global_step, and seqeval's default
 *                     mode over dev.txt's words (src/ner/ner_metrics.c): eval_precision,
 *                     eval_recall, eval_f1 (entity-level, micro), eval_accuracy (tokens: one
 *                     a word), and per entity type eval_<TYPE>_precision, _recall, _f1 and
 *                     _number (its gold entities), transformers' run_ner's keys.
 *   test_predictions.txt  one "word tag" line a word of test.txt, in order, a blank line
 *                     between sentences. */
#ifndef EST_RUN_NER_H
#define EST_RUN_NER_H

#include <stdbool.h>
#include <stdint.h>

#include "est/bert_task.h"
#include "est/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct est_run_ner_config {
  est_task_flags common;        /* the shared flags, run_classifier's defaults */
  const char *data_dir;         /* required: train.txt, dev.txt, test.txt */
  const char *vocab_file;       /* required */
  bool do_lower_case;           /* true, as run_classifier.py (cased models: false) */
  double num_train_epochs;      /* 3.0 */
  double warmup_proportion;     /* 0.1 */
  bool label_all_tokens;        /* false: only a word's first sub-token is labelled */
  int64_t doc_stride;           /* sub-tokens between windows' starts; 0: half a window */
} est_run_ner_config;

est_run_ner_config est_run_ner_config_default(void);
/* Every flag and input file checked, no work done (what `est run_ner` runs before MPI). */
est_status est_run_ner_validate(const est_run_ner_config *c);
est_status est_run_ner_main(const est_run_ner_config *c);

#ifdef __cplusplus
}
#endif
#endif
