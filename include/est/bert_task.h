/* est/bert_task.h — the one driver of the `est run_*` tasks (docs/heads.md §5).
 *
 * Google's run_classifier.py, run_pretraining.py and run_squad.py each repeat the same
 * main(): the flags every task has (bert_config_file, output_dir, init_checkpoint, do_train /
 * do_eval / do_predict, batch sizes, learning rate, checkpoint cadence, the TPU flags), their
 * checks, the RunConfig, the Estimator, eval_results.txt. est keeps that once: a task supplies
 * only its own flags' checks, how it reads its data into a model (a BERT head with its
 * parameters, est/bert_head.h) and input_fns, and how it writes its predictions.
 *
 *     est_run_classifier_config c = est_run_classifier_config_default();   // task flags +
 *     c.common.output_dir = "out"; ...                                     //   c.common (shared)
 *     est_run_classifier_main(&c);      // = est_task_run(&classifier_task, &c.common)
 *
 * What the driver does, in order (est_task_run):
 *   1. est_task_flags_validate (the shared flags), then the task's validate: every flag and
 *      input file checked before any work or output;
 *   2. --precision applied; bert_config_file read; max_seq_length <= max_position_embeddings;
 *   3. the task's prepare: reads its data (a malformed input fails now), says which head and
 *      how many training steps;
 *   4. output_dir created; the RunConfig from the shared flags; under mpirun the batch flags
 *      are global (train_batch_size a multiple of the ranks);
 *   5. do_train, do_eval (eval_results.txt from the chief), do_predict (the task's writer), each
 *      through the task's input_fn for that mode, with the task's log lines before it; with
 *      eval_every_steps, do_train + do_eval are one est_train_and_evaluate (early stopping,
 *      export_best) and eval_results.txt holds its final evaluation.
 *   6. do_export: the task's export of output_dir's newest checkpoint as a servable (from the
 *      chief); --do_export alone only exports. */
#ifndef EST_BERT_TASK_H
#define EST_BERT_TASK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "est/bert_encoder.h"
#include "est/bert_head.h"
#include "est/estimator.h"
#include "est/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The flags every run_* task shares, with the reference scripts' names. Defaults that are
 * the same in every reference script come from est_task_flags_default; a task changes the
 * ones its script sets otherwise (its config_default). */
typedef struct est_task_flags {
  /* ---- the reference scripts' ---- */
  const char *bert_config_file;   /* required */
  const char *output_dir;         /* required; created; the Estimator's model_dir */
  const char *init_checkpoint;    /* NULL: from scratch */
  int64_t max_seq_length;         /* 128 (run_squad.py: 384); <= max_position_embeddings */
  bool do_train, do_eval, do_predict;
  int64_t train_batch_size;       /* 32 */
  int64_t eval_batch_size;        /* 8 */
  int64_t predict_batch_size;     /* 8 */
  double learning_rate;           /* 5e-5 */
  int64_t save_checkpoints_steps; /* 1000 */
  int64_t iterations_per_loop;    /* 1000, TPU only: accepted and ignored */
  bool use_tpu;                   /* TPU only: accepted and ignored */
  const char *tpu_name, *tpu_zone, *gcp_project, *master; /* TPU only */
  int64_t num_tpu_cores;          /* 8, TPU only */
  /* ---- est's own ---- */
  bool init_checkpoint_partial;   /* accept an init_checkpoint that leaves encoder variables random */
  int64_t num_threads;            /* 0: OpenMP's default */
  const char *precision;          /* "fp32" (default) or "bf16" (est/precision.h) */
  bool recompute;                 /* per-layer recomputation in training (est_bert_encoder_set_recompute) */
  int64_t seed;                   /* initialisation, dropout, shuffling; 0: drawn and recorded */
  int64_t keep_checkpoint_max;    /* 5, as tf.estimator.RunConfig */
  int64_t log_step_count_steps;   /* 100, as tf.estimator.RunConfig */
  /* Under mpirun: "global" (NULL too): N ranks train on one process's batches; or
   * "shard_first": TF's record sharding (est_input_sharding, est/run_config.h). */
  const char *input_sharding;
  /* After the other steps, export the newest checkpoint of output_dir as a servable
   * (est/serving.h) under export_dir (NULL: output_dir/export); alone, only that. A task
   * without an export callback refuses it. */
  bool do_export;
  const char *export_dir;
  /* Evaluation during training (docs/hooks.md §7): with do_train and do_eval, > 0 runs
   * est_train_and_evaluate, evaluating (and checkpointing) every this many steps; 0: train
   * then evaluate, as the reference scripts. The rest need it: */
  int64_t eval_every_steps;
  /* Early stopping on an evaluation metric (NULL: none): a name ending in "loss" stops when
   * it has not decreased for early_stopping_patience_steps steps (stop_if_no_decrease_hook),
   * any other when it has not increased (stop_if_no_increase_hook). */
  const char *early_stopping_metric;
  int64_t early_stopping_patience_steps;
  /* BestExporter into output_dir/export/best: the smaller "loss", or the
   * early_stopping_metric in its direction; keeps exports_to_keep versions (5; 0: all). */
  bool export_best;
  int64_t exports_to_keep;
  /* The checkpoint the task's export writes (NULL: output_dir's newest); --export_best's
   * exporter sets it to the evaluated checkpoint. */
  const char *export_checkpoint;
  /* "est" (NULL too): a servable version; "hf": a HuggingFace model directory (docs/hf.md §6),
   * export_dir itself (NULL: output_dir/hf), replaced on each export */
  const char *export_format;
} est_task_flags;

est_task_flags est_task_flags_default(void);

/* The shared flags' checks: required strings, a do_* set (allowed names the task's: e.g.
 * "`do_train`, `do_eval` or `do_predict'" as run_classifier.py words it), positive batch
 * sizes and cadences for the modes asked for, learning rate, threads, precision, seed,
 * keep_checkpoint_max, input_sharding. INVALID_ARGUMENT naming the flag. (The files,
 * bert_config_file and init_checkpoint's .index, est_task_validate checks after the task's
 * own checks.) */
est_status est_task_flags_validate(const est_task_flags *f, const char *do_flags_message);

/* What a task decides once it has read its data. */
typedef struct est_task_model {
  const est_bert_head_type *head;
  const void *head_params;        /* must live until est_task_run returns */
  int64_t num_train_steps, num_warmup_steps;
} est_task_model;

typedef struct est_task {
  const char *name;               /* "run_classifier": for messages */
  void *self;
  /* The reference's error when no do_* flag is set, e.g. run_classifier.py's
   * "At least one of `do_train`, `do_eval` or `do_predict' must be True." */
  const char *do_flags_message;
  /* Optional: the task's own flags and inputs, after the shared checks. No work, no output. */
  est_status (*validate)(void *self, const est_task_flags *f);
  /* Reads the data of the modes asked for, checks it against cfg (e.g. the vocabulary's size),
   * fills *m. Nothing written yet. */
  est_status (*prepare)(void *self, const est_task_flags *f, const est_bert_config *cfg, est_task_model *m);
  /* The input of `mode`, writing its records first if the task converts data (on the chief
   * only; every rank then reads them). *eval_steps: EVAL's step bound (0: the whole input).
   * Logs the "***** Running ... *****" lines of the reference. *out owns what it reads
   * (est/estimator.h's ownership rule): opening another mode's input, before or after,
   * never changes it. The driver releases it (est_input_fn_release) when the mode is done. */
  est_status (*open_input)(void *self, est_mode mode, est_input_fn *out, int64_t *eval_steps);
  /* PREDICT (required with do_predict): each prediction in input order on the chief, then
   * the files written. */
  est_status (*on_prediction)(void *self, const est_prediction *p);
  est_status (*write_predictions)(void *self, const char *output_dir);
  /* --do_export and --export_best (optional): writes a new servable version of checkpoint
   * f->export_checkpoint (NULL: output_dir's newest) under export_dir (NULL:
   * output_dir/export); on the chief only. It checks the flags it needs itself: export alone
   * runs nothing else. */
  est_status (*export)(void *self, const est_task_flags *f);
  /* Optional, after the final evaluation (of result->checkpoint_path) and before
   * eval_results.txt: adds metrics that the head's streaming metrics cannot give, e.g.
   * run_ner's entity-level F1 over whole sentences from predictions over the eval input.
   * Called on every rank (predict is collective); the chief's result is written. */
  est_status (*finish_eval)(void *self, est_estimator *e, est_eval_result *result);
  /* Optional: frees what self gathered (data, tokenizer, predictions); est_task_main calls it
   * last, whether the run succeeded or not. */
  void (*release)(void *self);
} est_task;

/* est_task_flags_validate with the task's message, the task's validate, the shared files
 * (bert_config_file readable, init_checkpoint's .index present, output_dir not a file),
 * then bert_config_file read and max_seq_length <= its max_position_embeddings: what
 * `est run_*` calls before starting MPI, so a usage error exits 2 at once. */
est_status est_task_validate(const est_task *t, const est_task_flags *f);

/* Runs the task as its reference's main() does (steps above; validation included). */
est_status est_task_run(const est_task *t, const est_task_flags *f);

/* The records of one mode, output_dir/{train,eval,predict}.tf_record (path, of size bytes):
 * written on the chief by write(ctx, split, path), split = mode (train/dev/test), then every
 * rank waits for them (est_dist_barrier) and reads that one file. A failure on the chief is
 * returned before the barrier: the caller aborts the job, releasing the other ranks. */
typedef est_status (*est_task_write_records_fn)(void *ctx, int split, const char *path);
est_status est_task_mode_records(const est_task_flags *f, est_mode mode, est_task_write_records_fn write, void *ctx,
                                 char *path, size_t size);

/* With do_train: --num_train_epochs > 0 and --warmup_proportion in [0, 1] (INVALID_ARGUMENT
 * naming the flag). */
est_status est_task_check_epochs(const est_task_flags *f, double num_train_epochs, double warmup_proportion);

/* The reference's lines before a mode runs: "***** Running training *****" (evaluation,
 * prediction), "  Num examples = N" and note (e.g. " (12 sentences)"; "" for none), the batch
 * size and, in training, "  Num steps = num_train_steps". */
void est_task_log_running(const est_task_flags *f, est_mode mode, long long num_examples, const char *note,
                          int64_t num_train_steps);

/* A task command's two entry points in one: est_task_validate (validate_only) or
 * est_task_run, then t->release. */
est_status est_task_main(const est_task *t, const est_task_flags *f, int validate_only);

/* `path` must be a readable file; `flag`=`value` is what the user typed that led to it
 * ("--data_dir=glue/MRPC: glue/MRPC/train.tsv: No such file or directory"). */
est_status est_task_need_file(const char *flag, const char *value, const char *path);

/* ---- --do_export (src/tasks/task_export.c) ---------------------------------------------- */

struct est_model_meta; /* est_model.json (est/serving.h) */

/* What every task's --do_export shares: checks the flags it needs (vocab_file,
 * bert_config_file, output_dir, max_seq_length <= max_position_embeddings), fills meta's
 * bert_config, max_seq_length and precision from them, and exports output_dir's newest
 * checkpoint (or --export_checkpoint) to f->export_dir (default <output_dir>/export) with
 * est_export_write. The caller has filled the head's own fields (the head and its settings,
 * task, labels, do_lower_case). */
est_status est_export_task(const est_task_flags *f, const char *vocab_file, struct est_model_meta *meta,
                           char *version_dir, size_t size);
/* Its first half, for exports of other formats (--export_format=hf): the checks, meta's
 * bert_config, max_seq_length and precision, and the checkpoint to export in ckpt. */
est_status est_export_prepare(const est_task_flags *f, const char *vocab_file, struct est_model_meta *meta, char *ckpt,
                              size_t ckpt_size);

#ifdef __cplusplus
}
#endif
#endif
