/* `est run_squad`: google-research/bert's run_squad.py, same flags, same files. The shared
 * flags of every run_* come from the task driver's group (task_cli.c); this file adds
 * run_squad.py's own. */
#include <stdio.h>

#include "commands.h"
#include "est/run_squad.h"
#include "task_cli.h"

static const char usage[] =
    "usage: est run_squad --vocab_file=FILE --bert_config_file=FILE --output_dir=DIR\n"
    "                     [--do_train --train_file=FILE] [--do_predict --predict_file=FILE]\n"
    "                     [flags...]\n\n"
    "Fine-tunes BERT for question answering on SQuAD 1.1 or 2.0 and predicts answer spans, as\n"
    "google-research/bert's run_squad.py. Writes under output_dir: train.tf_record,\n"
    "eval.tf_record, model.ckpt-N checkpoints, predictions.json, nbest_predictions.json,\n"
    "null_odds.json (--version_2_with_negative) and, when --predict_file has answers,\n"
    "eval_results.txt with the official evaluation script's metrics.\n"
    "Data parallel: `mpirun -np N est run_squad ...` (output_dir shared; batch sizes global).";

static est_status run_task(void *ctx) { return est_run_squad_main(ctx); }

int est_cmd_run_squad(int argc, char **argv) {
  est_run_squad_config config = est_run_squad_config_default(), *c = &config;
  const est_flag task_flags[] = {
    EST_FLAG_STRING("vocab_file", &c->vocab_file, "The vocabulary file that the BERT model was trained on.", 1),
    EST_FLAG_STRING("train_file", &c->train_file, "SQuAD json for training. E.g., train-v1.1.json", 0),
    EST_FLAG_STRING("predict_file", &c->predict_file,
                    "SQuAD json for predictions. E.g., dev-v1.1.json or test-v1.1.json", 0),
    EST_CLI_LOWER_CASE_FLAG(c),
    EST_FLAG_INT("doc_stride", &c->doc_stride,
                 "When splitting up a long document into chunks, how much stride to take between chunks.", 0),
    EST_FLAG_INT("max_query_length", &c->max_query_length,
                 "The maximum number of tokens for the question. Questions longer than this will be truncated to "
                 "this length.", 0),
    EST_CLI_EPOCH_FLAGS(c),
    EST_FLAG_BOOL("verbose_logging", &c->verbose_logging,
                  "If true, all of the warnings related to data processing will be printed. A number of warnings "
                  "are expected for a normal SQuAD evaluation.", 0),
    EST_FLAG_INT("n_best_size", &c->n_best_size,
                 "The total number of n-best predictions to generate in the nbest_predictions.json output file.",
                 0),
    EST_FLAG_INT("max_answer_length", &c->max_answer_length,
                 "The maximum length of an answer that can be generated. This is needed because the start and end "
                 "predictions are not conditioned on one another.", 0),
    EST_FLAG_BOOL("version_2_with_negative", &c->version_2_with_negative,
                  "If true, the SQuAD examples contain some that do not have an answer.", 0),
    EST_FLAG_FLOAT("null_score_diff_threshold", &c->null_score_diff_threshold,
                   "If null_score - best_non_null is greater than the threshold predict null.", 0),
    EST_FLAG_INT("num_train_steps", &c->num_train_steps,
                 "[est] Train this many steps instead of the count --num_train_epochs gives (int(examples / "
                 "train_batch_size * num_train_epochs)); --warmup_proportion is then a proportion of it. 0 = from "
                 "--num_train_epochs.", 0),
    EST_FLAG_STRING("raw_results_file", &c->raw_results_file,
                    "est: with do_predict, also write every feature's RawResult (unique_ids, start_logits, "
                    "end_logits) to this TFRecord of tf.train.Example, in eval.tf_record's order.", 0),
  };
  enum { NTASK = sizeof task_flags / sizeof *task_flags };
  est_flag flags[NTASK + EST_CLI_TASK_MAX_FLAGS];
  /* run_squad.py's order: its input flags, the shared group, then training and prediction */
  const size_t n = est_cli_task_flag_list(&c->common, task_flags, NTASK, 6,
                                          EST_CLI_TASK_PREDICT | EST_CLI_TASK_EXPORT | EST_CLI_TASK_NO_EVAL, flags);
  /* run_squad.py's words for its own shared flags */
  est_cli_flag_help(flags, n, "do_predict", "Whether to run eval on the dev set.");
  est_cli_flag_help(flags, n, "predict_batch_size", "Total batch size for predictions.");
  int rc = est_cli_task_parse("run_squad", usage, &c->common, flags, n, argc, argv);
  if (rc >= 0) return rc;
  if (est_run_squad_validate(c) != EST_OK) {
    fprintf(stderr, "est run_squad: %s\n", est_error_message());
    return 2;
  }
  return est_cli_task_run("run_squad", argc, argv, run_task, c);
}
