/* `est run_pretraining`: google-research/bert's run_pretraining.py, same flags, same files.
 * The flag table mirrors the reference's tf.flags; est's own extras follow, marked "[est]".
 * TPU flags are accepted and ignored with a note. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "est/bert_pretraining.h"
#include "est/dist.h"
#include "est/flags.h"
#include "est/log.h"
#include "est/precision.h"

static const char usage[] =
    "usage: est run_pretraining --bert_config_file=FILE --input_file=GLOBS --output_dir=DIR\n"
    "                           [--do_train] [--do_eval] [flags...]\n\n"
    "Pretrains BERT (masked LM + next sentence) on records written by est create_pretraining_data,\n"
    "as google-research/bert's run_pretraining.py. --input_file is comma-separated, each a glob.\n"
    "Writes model.ckpt-N checkpoints (Google's variable names, cls/* heads included) and\n"
    "eval_results.txt under output_dir; the checkpoints fine-tune with est run_classifier\n"
    "--init_checkpoint. Data parallel: `mpirun -np N est run_pretraining ...`.";

int est_cmd_run_pretraining(int argc, char **argv) {
  est_run_pretraining_config c = est_run_pretraining_config_default();
  const char *precision = "fp32";
  est_flag flags[] = {
    EST_FLAG_STRING("bert_config_file", &c.bert_config_file,
                    "The config json file corresponding to the pre-trained BERT model. This specifies the model "
                    "architecture.", 1),
    EST_FLAG_STRING("input_file", &c.input_file, "Input TF example files (can be a glob or comma separated).", 1),
    EST_FLAG_STRING("output_dir", &c.output_dir,
                    "The output directory where the model checkpoints will be written.", 1),
    EST_FLAG_STRING("init_checkpoint", &c.init_checkpoint,
                    "Initial checkpoint (usually from a pre-trained BERT model).", 0),
    EST_FLAG_BOOL("init_checkpoint_partial", &c.init_checkpoint_partial,
                  "[est] Accept an --init_checkpoint that initialises only some of the encoder's variables (the "
                  "rest stay random); without it that is an error naming what did not match.", 0),
    EST_FLAG_INT("max_seq_length", &c.max_seq_length,
                 "The maximum total input sequence length after WordPiece tokenization. Sequences longer than "
                 "this will be truncated, and sequences shorter than this will be padded. Must match data "
                 "generation.", 0),
    EST_FLAG_INT("max_predictions_per_seq", &c.max_predictions_per_seq,
                 "Maximum number of masked LM predictions per sequence. Must match data generation.", 0),
    EST_FLAG_BOOL("do_train", &c.do_train, "Whether to run training.", 0),
    EST_FLAG_BOOL("do_eval", &c.do_eval, "Whether to run eval on the dev set.", 0),
    EST_FLAG_INT("train_batch_size", &c.train_batch_size, "Total batch size for training.", 0),
    EST_FLAG_INT("eval_batch_size", &c.eval_batch_size, "Total batch size for eval.", 0),
    EST_FLAG_FLOAT("learning_rate", &c.learning_rate, "The initial learning rate for Adam.", 0),
    EST_FLAG_INT("num_train_steps", &c.num_train_steps, "Number of training steps.", 0),
    EST_FLAG_INT("num_warmup_steps", &c.num_warmup_steps, "Number of warmup steps.", 0),
    EST_FLAG_INT("save_checkpoints_steps", &c.save_checkpoints_steps, "How often to save the model checkpoint.", 0),
    EST_FLAG_INT("iterations_per_loop", &c.iterations_per_loop,
                 "How many steps to make in each estimator call. [TPU only: accepted and ignored]", 0),
    EST_FLAG_INT("max_eval_steps", &c.max_eval_steps, "Maximum number of eval steps.", 0),
    EST_FLAG_BOOL("use_tpu", &c.use_tpu, "Whether to use TPU or GPU/CPU. [TPU only: accepted and ignored]", 0),
    EST_FLAG_STRING("tpu_name", &c.tpu_name, "The Cloud TPU to use for training. [TPU only: accepted and ignored]", 0),
    EST_FLAG_STRING("tpu_zone", &c.tpu_zone, "GCE zone where the Cloud TPU is located in. [TPU only: accepted and "
                    "ignored]", 0),
    EST_FLAG_STRING("gcp_project", &c.gcp_project, "Project name for the Cloud TPU-enabled project. [TPU only: "
                    "accepted and ignored]", 0),
    EST_FLAG_STRING("master", &c.master, "TensorFlow master URL. [TPU only: accepted and ignored]", 0),
    EST_FLAG_INT("num_tpu_cores", &c.num_tpu_cores,
                 "Only used if use_tpu is True. Total number of TPU cores to use. [TPU only: accepted and "
                 "ignored]", 0),
    EST_FLAG_INT("num_threads", &c.num_threads, "[est] Threads for the math kernels; 0 = OpenMP's default.", 0),
    EST_FLAG_INT("seed", &c.seed,
                 "[est] Seed for initialisation, dropout and shuffling; 0 = draw one from the clock and record it "
                 "in the checkpoint.", 0),
    EST_FLAG_INT("keep_checkpoint_max", &c.keep_checkpoint_max,
                 "[est] How many recent checkpoints to keep (tf.estimator.RunConfig); 0 = all.", 0),
    EST_FLAG_INT("log_step_count_steps", &c.log_step_count_steps,
                 "[est] Log loss, examples/sec and ETA every this many steps (tf.estimator.RunConfig).", 0),
    EST_FLAG_STRING("precision", &precision, EST_PRECISION_FLAG_HELP, 0),
    EST_FLAG_BOOL("recompute", &c.recompute,
                  "[est] Training keeps only each layer's output and runs each layer's forward again in "
                  "backward: the same numbers bit for bit, far less activation memory (about a third "
                  "for BERT-Base at 32x128), about a quarter more time per step.", 0),
  };
  const int nflags = (int)(sizeof flags / sizeof flags[0]);
  char *pos[1];
  int npos = 0;
  est_flags_result r = est_flags_parse(flags, nflags, argc - 1, argv + 1, pos, &npos, 0);
  if (r == EST_FLAGS_HELP) {
    est_flags_print_help(stdout, usage, flags, nflags);
    return 0;
  }
  if (r == EST_FLAGS_OK && est_precision_check_flag(precision) != EST_OK) r = EST_FLAGS_ERROR;
  if (r != EST_FLAGS_OK) {
    fprintf(stderr, "est run_pretraining: %s\n", est_error_message());
    return 2;
  }
  for (int i = 0; i < nflags; i++)
    if (flags[i].is_set && flags[i].help && strstr(flags[i].help, "[TPU only"))
      EST_LOG_INFO("note: --%s is a TPU flag; est runs on the CPU and ignores it", flags[i].name);
  est_status st = est_dist_init(&argc, &argv);
  /* After MPI's start-up, so its handlers (if any) do not replace these. */
  est_cli_install_stop_handlers();
  if (st == EST_OK) st = est_precision_apply_flag(precision);
  if (st == EST_OK) st = est_run_pretraining_main(&c);
  if (st == EST_ERR_CANCELLED) {
    /* Stopped on request after saving (the log said where); all ranks stopped together. */
    est_dist_finalize();
    return est_cli_exit_code(st);
  }
  if (st != EST_OK) {
    fprintf(stderr, "est run_pretraining: error: %s\n", est_error_message());
    est_dist_abort(1);
    est_dist_finalize();
    return 1;
  }
  est_dist_finalize();
  return 0;
}
