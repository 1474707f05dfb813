/* The command-line side of the task driver (est/bert_task.h): the flag group every
 * `est run_*` shares, with the reference scripts' names, help and defaults, the one note for
 * the TPU flags, and the one way a task command starts MPI, runs and exits. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "est/dist.h"
#include "est/file.h"
#include "est/hf_model.h"
#include "est/log.h"
#include "est/precision.h"
#include "task_cli.h"

#define TPU_IGNORED " [TPU only: accepted and ignored]"

size_t est_cli_task_flags(est_task_flags *f, est_flag *out, unsigned groups) {
  const est_flag google[] = {
    EST_FLAG_STRING("bert_config_file", &f->bert_config_file,
                    "The config json file corresponding to the pre-trained BERT model. This specifies the model "
                    "architecture.", 1),
    EST_FLAG_STRING("output_dir", &f->output_dir, "The output directory where the model checkpoints will be written.",
                    1),
    EST_FLAG_STRING("init_checkpoint", &f->init_checkpoint,
                    "Initial checkpoint (usually from a pre-trained BERT model).", 0),
    EST_FLAG_INT("max_seq_length", &f->max_seq_length,
                 "The maximum total input sequence length after WordPiece tokenization. Sequences longer than "
                 "this will be truncated, and sequences shorter than this will be padded.", 0),
    EST_FLAG_BOOL("do_train", &f->do_train, "Whether to run training.", 0),
    EST_FLAG_BOOL("do_eval", &f->do_eval, "Whether to run eval on the dev set.", 0),
    EST_FLAG_BOOL("do_predict", &f->do_predict, "Whether to run the model in inference mode on the test set.", 0),
    EST_FLAG_INT("train_batch_size", &f->train_batch_size, "Total batch size for training.", 0),
    EST_FLAG_INT("eval_batch_size", &f->eval_batch_size, "Total batch size for eval.", 0),
    EST_FLAG_INT("predict_batch_size", &f->predict_batch_size, "Total batch size for predict.", 0),
    EST_FLAG_FLOAT("learning_rate", &f->learning_rate, "The initial learning rate for Adam.", 0),
    EST_FLAG_INT("save_checkpoints_steps", &f->save_checkpoints_steps, "How often to save the model checkpoint.", 0),
    EST_FLAG_INT("iterations_per_loop", &f->iterations_per_loop,
                 "How many steps to make in each estimator call." TPU_IGNORED, 0),
    EST_FLAG_BOOL("use_tpu", &f->use_tpu, "Whether to use TPU or GPU/CPU." TPU_IGNORED, 0),
    EST_FLAG_STRING("tpu_name", &f->tpu_name, "The Cloud TPU to use for training." TPU_IGNORED, 0),
    EST_FLAG_STRING("tpu_zone", &f->tpu_zone, "GCE zone where the Cloud TPU is located in." TPU_IGNORED, 0),
    EST_FLAG_STRING("gcp_project", &f->gcp_project, "Project name for the Cloud TPU-enabled project." TPU_IGNORED, 0),
    EST_FLAG_STRING("master", &f->master, "TensorFlow master URL." TPU_IGNORED, 0),
    EST_FLAG_INT("num_tpu_cores", &f->num_tpu_cores,
                 "Only used if use_tpu is True. Total number of TPU cores to use." TPU_IGNORED, 0),
  };
  const est_flag own[] = {
    EST_FLAG_BOOL("init_checkpoint_partial", &f->init_checkpoint_partial,
                  "[est] Accept an --init_checkpoint that initialises only some of the encoder's variables (the "
                  "rest stay random); without it that is an error naming what did not match.", 0),
    EST_CLI_RUNTIME_FLAGS(&f->num_threads, &f->precision),
    EST_FLAG_BOOL("recompute", &f->recompute,
                  "[est] Training keeps only each layer's output and runs each layer's forward again in "
                  "backward: the same numbers bit for bit, far less activation memory (about a third "
                  "for BERT-Base at 32x128), about a quarter more time per step.", 0),
    EST_FLAG_INT("seed", &f->seed,
                 "[est] Seed for initialisation, dropout and shuffling (the reference sets none, so its runs "
                 "are not reproducible); 0 = draw one from the clock and record it in the checkpoint.", 0),
    EST_FLAG_INT("keep_checkpoint_max", &f->keep_checkpoint_max,
                 "[est] How many recent checkpoints to keep (tf.estimator.RunConfig); 0 = all.", 0),
    EST_FLAG_INT("log_step_count_steps", &f->log_step_count_steps,
                 "[est] Log loss, examples/sec and ETA every this many steps (tf.estimator.RunConfig).", 0),
    EST_FLAG_STRING("input_sharding", &f->input_sharding,
                    "[est] Under mpirun: global = every rank reads the whole training input in one "
                    "shuffled order and takes its slice of each global batch, so N ranks train exactly "
                    "what one process trains (default); shard_first = TF's order, each rank shuffles its "
                    "own record shard (reads 1/N of the input; the model depends on the rank count).", 0),
  };
  const est_flag eval_flags[] = {
    EST_FLAG_INT("eval_every_steps", &f->eval_every_steps,
                 "[est] With --do_train --do_eval: evaluate during training, a checkpoint and an evaluation "
                 "every this many steps (tf.estimator.train_and_evaluate; results per step in "
                 "output_dir/eval/results.txt); 0 = evaluate once after training.", 0),
    EST_FLAG_STRING("early_stopping_metric", &f->early_stopping_metric,
                    "[est] With --eval_every_steps: stop training when this evaluation metric (e.g. eval_loss, "
                    "eval_accuracy) has not improved for --early_stopping_patience_steps steps; a name ending "
                    "in loss must decrease, any other increase.", 0),
    EST_FLAG_INT("early_stopping_patience_steps", &f->early_stopping_patience_steps,
                 "[est] With --early_stopping_metric: the steps without improvement that stop training.", 0),
  };
  const est_flag best_export_flags[] = {
    EST_FLAG_BOOL("export_best", &f->export_best,
                  "[est] With --eval_every_steps: export each evaluated checkpoint better than the best so far "
                  "(smaller loss, or --early_stopping_metric in its direction) to output_dir/export/best/<version>/, "
                  "for est serve --model_base_path=output_dir/export/best; the best survives restarts.", 0),
    EST_FLAG_INT("exports_to_keep", &f->exports_to_keep,
                 "[est] How many versions --export_best keeps; 0 = all.", 0),
  };
  const est_flag export_flags[] = {
    EST_FLAG_BOOL("do_export", &f->do_export,
                  "[est] After the other steps, export the newest checkpoint of output_dir as a servable "
                  "(export_dir/<version>/: variables/, assets/vocab.txt, est_model.json) for est predict / "
                  "est serve. Alone, it only exports.", 0),
    EST_FLAG_STRING("export_dir", &f->export_dir, "[est] Where --do_export writes versions; default output_dir/export.",
                    0),
    EST_FLAG_STRING("export_format", &f->export_format,
                    "[est] est: a servable version; hf: a HuggingFace model directory (config.json, "
                    "model.safetensors, vocab.txt, ...) at export_dir, default output_dir/hf.", 0),
  };
  size_t n = 0;
  for (size_t i = 0; i < sizeof google / sizeof *google; i++) {
    const int predict_only = google[i].value == &f->do_predict || google[i].value == &f->predict_batch_size;
    if (predict_only && !(groups & EST_CLI_TASK_PREDICT)) continue;
    const int eval_only = google[i].value == &f->do_eval || google[i].value == &f->eval_batch_size;
    if (eval_only && (groups & EST_CLI_TASK_NO_EVAL)) continue;
    out[n++] = google[i];
  }
  for (size_t i = 0; i < sizeof own / sizeof *own; i++) out[n++] = own[i];
  for (size_t i = 0; !(groups & EST_CLI_TASK_NO_EVAL) && i < sizeof eval_flags / sizeof *eval_flags; i++)
    out[n++] = eval_flags[i];
  for (size_t i = 0; (groups & EST_CLI_TASK_EXPORT) && i < sizeof export_flags / sizeof *export_flags; i++)
    out[n++] = export_flags[i];
  const int best_export = (groups & EST_CLI_TASK_EXPORT) && !(groups & EST_CLI_TASK_NO_EVAL);
  for (size_t i = 0; best_export && i < sizeof best_export_flags / sizeof *best_export_flags; i++)
    out[n++] = best_export_flags[i];
  return n;
}

void est_cli_flag_help(est_flag *flags, size_t n, const char *name, const char *help) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(flags[i].name, name)) flags[i].help = help;
}

size_t est_cli_task_flag_list(est_task_flags *f, const est_flag *task_flags, size_t ntask, size_t lead,
                              unsigned groups, est_flag *out) {
  size_t n = 0;
  for (size_t i = 0; i < lead && i < ntask; i++) out[n++] = task_flags[i];
  n += est_cli_task_flags(f, out + n, groups);
  for (size_t i = lead; i < ntask; i++) out[n++] = task_flags[i];
  return n;
}

const char *est_cli_task_vocab(const char *vocab_file, const est_task_flags *f) {
  if (vocab_file && *vocab_file) return vocab_file;
  const char *dir = f->init_checkpoint;
  return dir && est_is_directory(dir) && est_hf_is_checkpoint(dir) ? dir : vocab_file;
}

int est_cli_task_main(const est_cli_task_command *t, int argc, char **argv) {
  est_flag flags[64 + EST_CLI_TASK_MAX_FLAGS];
  if (t->num_task_flags > 64) {
    fprintf(stderr, "est %s: %zu flags, more than the 64 a task command may have\n", t->name, t->num_task_flags);
    return 2;
  }
  const size_t n = est_cli_task_flag_list(t->common, t->task_flags, t->num_task_flags, t->lead, t->groups, flags);
  int rc = est_cli_task_parse(t->name, t->usage, t->common, flags, n, argc, argv);
  if (rc >= 0) return rc;
  if (t->vocab_file) *t->vocab_file = est_cli_task_vocab(*t->vocab_file, t->common);
  if (t->validate(t->ctx) != EST_OK) {
    fprintf(stderr, "est %s: %s\n", t->name, est_error_message());
    return 2;
  }
  return est_cli_task_run(t->name, argc, argv, t->run, t->ctx);
}

/* The TPU flags of the group: bound to these fields of f. */
static int is_tpu_flag(const est_task_flags *f, const void *value) {
  const void *const tpu[] = {&f->iterations_per_loop, &f->use_tpu,   &f->tpu_name,     &f->tpu_zone,
                             &f->gcp_project,         &f->master,    &f->num_tpu_cores};
  for (size_t i = 0; i < sizeof tpu / sizeof *tpu; i++)
    if (value == tpu[i]) return 1;
  return 0;
}

int est_cli_task_parse(const char *cmd, const char *usage, const est_task_flags *f, est_flag *flags, size_t n,
                       int argc, char **argv) {
  int rc = est_cli_parse(cmd, usage, flags, (int)n, argc, argv, NULL, NULL, 0, 0);
  if (rc >= 0) return rc;
  /* TPU-only flags change nothing here; say so instead of failing a copied command line. */
  for (size_t i = 0; i < n; i++)
    if (flags[i].is_set && is_tpu_flag(f, flags[i].value))
      EST_LOG_INFO("note: --%s is a TPU flag; est runs on the CPU and ignores it", flags[i].name);
  return -1;
}

int est_cli_task_run(const char *cmd, int argc, char **argv, est_status (*run)(void *ctx), void *ctx) {
  /* Under mpirun every rank runs this same command on its shard (est/dist.h); otherwise
   * this is a single process and the dist calls are no-ops. */
  est_status st = est_dist_init(&argc, &argv);
  /* After MPI's start-up, so its handlers (if any) do not replace these. */
  est_cli_install_stop_handlers();
  if (st == EST_OK) st = run(ctx);
  if (st == EST_ERR_CANCELLED) {
    /* Stopped on request after saving (the log said where); all ranks stopped together. */
    est_dist_finalize();
    return est_cli_exit_code(st);
  }
  if (st != EST_OK) {
    fprintf(stderr, "est %s: error: %s\n", cmd, est_error_message());
    est_dist_abort(1); /* the other ranks would wait for this one until their timeout */
    est_dist_finalize();
    return 1;
  }
  est_dist_finalize();
  return 0;
}
