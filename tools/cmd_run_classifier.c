/* `est run_classifier`: google-research/bert's run_classifier.py, same flags, same files.
 * The flag table mirrors the reference's tf.flags (names, types, defaults, help); est's own
 * extras follow, marked "[est]". TPU flags are accepted and ignored with a note. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "est/dist.h"
#include "est/flags.h"
#include "est/log.h"
#include "est/precision.h"
#include "est/run_classifier.h"
#include "est/serving.h"

static const char usage[] =
    "usage: est run_classifier --task_name=TASK --data_dir=DIR --vocab_file=FILE\n"
    "                          --bert_config_file=FILE --output_dir=DIR [--do_train]\n"
    "                          [--do_eval] [--do_predict] [flags...]\n\n"
    "Fine-tunes BERT for sequence classification, as google-research/bert's run_classifier.py.\n"
    "Tasks: cola, mnli, mnli-mm, mrpc, qnli, rte, sst-2 (or sst2), wnli, xnli, and tsv (a generic\n"
    "TSV file set: "
    "train.tsv, dev.tsv, test.tsv, columns chosen by the --tsv_* flags).\n"
    "Writes under output_dir: train.tf_record, eval.tf_record, predict.tf_record,\n"
    "model.ckpt-N checkpoints, eval_results.txt and test_results.tsv.\n"
    "Data parallel: `mpirun -np N est run_classifier ...` trains on N ranks (output_dir shared;\n"
    "the batch sizes are global, train_batch_size a multiple of N; rank 0 writes the files).";

int est_cmd_run_classifier(int argc, char **argv) {
  est_run_classifier_config c = est_run_classifier_config_default();
  bool do_export = false;       /* [est] serving export (est/serving.h) */
  const char *export_dir = NULL;
  est_flag flags[] = {
    /* Required parameters (run_classifier.py) */
    EST_FLAG_STRING("data_dir", &c.data_dir,
                    "The input data dir. Should contain the .tsv files (or other data files) for the task.", 1),
    EST_FLAG_STRING("bert_config_file", &c.bert_config_file,
                    "The config json file corresponding to the pre-trained BERT model. This specifies the model "
                    "architecture.", 1),
    EST_FLAG_STRING("task_name", &c.task_name, "The name of the task to train.", 1),
    EST_FLAG_STRING("vocab_file", &c.vocab_file, "The vocabulary file that the BERT model was trained on.", 1),
    EST_FLAG_STRING("output_dir", &c.output_dir,
                    "The output directory where the model checkpoints will be written.", 1),
    /* Other parameters (run_classifier.py) */
    EST_FLAG_STRING("init_checkpoint", &c.init_checkpoint,
                    "Initial checkpoint (usually from a pre-trained BERT model).", 0),
    EST_FLAG_BOOL("init_checkpoint_partial", &c.init_checkpoint_partial,
                  "[est] Accept an --init_checkpoint that initialises only some of the encoder's variables (the "
                  "rest stay random); without it that is an error naming what did not match.", 0),
    EST_FLAG_BOOL("do_lower_case", &c.do_lower_case,
                  "Whether to lower case the input text. Should be True for uncased models and False for cased "
                  "models.", 0),
    EST_FLAG_INT("max_seq_length", &c.max_seq_length,
                 "The maximum total input sequence length after WordPiece tokenization. Sequences longer than "
                 "this will be truncated, and sequences shorter than this will be padded.", 0),
    EST_FLAG_BOOL("do_train", &c.do_train, "Whether to run training.", 0),
    EST_FLAG_BOOL("do_eval", &c.do_eval, "Whether to run eval on the dev set.", 0),
    EST_FLAG_BOOL("do_predict", &c.do_predict, "Whether to run the model in inference mode on the test set.", 0),
    EST_FLAG_INT("train_batch_size", &c.train_batch_size, "Total batch size for training.", 0),
    EST_FLAG_INT("eval_batch_size", &c.eval_batch_size, "Total batch size for eval.", 0),
    EST_FLAG_INT("predict_batch_size", &c.predict_batch_size, "Total batch size for predict.", 0),
    EST_FLAG_FLOAT("learning_rate", &c.learning_rate, "The initial learning rate for Adam.", 0),
    EST_FLAG_FLOAT("num_train_epochs", &c.num_train_epochs, "Total number of training epochs to perform.", 0),
    EST_FLAG_FLOAT("warmup_proportion", &c.warmup_proportion,
                   "Proportion of training to perform linear learning rate warmup for. E.g., 0.1 = 10% of "
                   "training.", 0),
    EST_FLAG_INT("save_checkpoints_steps", &c.save_checkpoints_steps, "How often to save the model checkpoint.", 0),
    EST_FLAG_INT("iterations_per_loop", &c.iterations_per_loop,
                 "How many steps to make in each estimator call. [TPU only: accepted and ignored]", 0),
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
    /* est's own */
    EST_FLAG_INT("num_threads", &c.num_threads, "[est] Threads for the math kernels; 0 = OpenMP's default.", 0),
    EST_FLAG_STRING("precision", &c.precision, EST_PRECISION_FLAG_HELP, 0),
    EST_FLAG_BOOL("recompute", &c.recompute,
                  "[est] Training keeps only each layer's output and runs each layer's forward again in "
                  "backward: the same numbers bit for bit, far less activation memory (about a third "
                  "for BERT-Base at 32x128), about a quarter more time per step.", 0),
    EST_FLAG_INT("seed", &c.seed,
                 "[est] Seed for initialisation, dropout and shuffling (the reference sets none, so its runs "
                 "are not reproducible); 0 = draw one from the clock and record it in the checkpoint.", 0),
    EST_FLAG_INT("keep_checkpoint_max", &c.keep_checkpoint_max,
                 "[est] How many recent checkpoints to keep (tf.estimator.RunConfig); 0 = all.", 0),
    EST_FLAG_INT("log_step_count_steps", &c.log_step_count_steps,
                 "[est] Log loss, examples/sec and ETA every this many steps (tf.estimator.RunConfig).", 0),
    EST_FLAG_STRING("input_sharding", &c.input_sharding,
                    "[est] Under mpirun: global = every rank reads the whole training input in one "
                    "shuffled order and takes its slice of each global batch, so N ranks train exactly "
                    "what one process trains (default); shard_first = TF's order, each rank shuffles its "
                    "own record shard (reads 1/N of the input; the model depends on the rank count).", 0),
    EST_FLAG_INT("tsv_text_a_column", &c.tsv_text_a_column,
                 "[est] task tsv: 0-based column of text_a in train.tsv/dev.tsv/test.tsv.", 0),
    EST_FLAG_INT("tsv_text_b_column", &c.tsv_text_b_column,
                 "[est] task tsv: 0-based column of text_b; -1 = single-sentence task.", 0),
    EST_FLAG_INT("tsv_label_column", &c.tsv_label_column,
                 "[est] task tsv: 0-based column of the label; -1 = no label column.", 0),
    EST_FLAG_INT("tsv_test_text_a_column", &c.tsv_test_text_a_column,
                 "[est] task tsv: text_a's column in test.tsv; -2 = as --tsv_text_a_column.", 0),
    EST_FLAG_INT("tsv_test_text_b_column", &c.tsv_test_text_b_column,
                 "[est] task tsv: text_b's column in test.tsv; -2 = as --tsv_text_b_column.", 0),
    EST_FLAG_INT("tsv_test_label_column", &c.tsv_test_label_column,
                 "[est] task tsv: the label's column in test.tsv; -2 = as --tsv_label_column, -1 = none.", 0),
    EST_FLAG_STRING("tsv_labels", &c.tsv_labels,
                    "[est] task tsv: comma-separated label list; its order is the column order of "
                    "test_results.tsv. Unset: the distinct labels of train.tsv, sorted.", 0),
    EST_FLAG_BOOL("tsv_skip_header", &c.tsv_skip_header, "[est] task tsv: skip the first line of each file.", 0),
    EST_FLAG_BOOL("do_export", &do_export,
                  "[est] After the other steps, export the newest checkpoint of output_dir as a servable "
                  "(export_dir/<version>/: variables/, assets/vocab.txt, est_model.json) for est predict / "
                  "est serve. Alone, it only exports.", 0),
    EST_FLAG_STRING("export_dir", &export_dir, "[est] Where --do_export writes versions; default output_dir/export.", 0),
  };
  const int nflags = (int)(sizeof flags / sizeof flags[0]);
  char *pos[1];
  int npos = 0;
  est_flags_result r = est_flags_parse(flags, nflags, argc - 1, argv + 1, pos, &npos, 0);
  if (r == EST_FLAGS_HELP) {
    est_flags_print_help(stdout, usage, flags, nflags);
    return 0;
  }
  if (r != EST_FLAGS_OK) {
    fprintf(stderr, "est run_classifier: %s\n", est_error_message());
    return 2;
  }
  /* TPU-only flags change nothing here; say so instead of failing a copied command line. */
  for (int i = 0; i < nflags; i++) {
    if (flags[i].is_set && flags[i].help && strstr(flags[i].help, "[TPU only"))
      EST_LOG_INFO("note: --%s is a TPU flag; est runs on the CPU and ignores it", flags[i].name);
  }
  if (do_export && !c.do_train && !c.do_eval && !c.do_predict) {
    if (est_export_classifier(&c, export_dir, NULL, 0) == EST_OK) return 0;
    fprintf(stderr, "est run_classifier: error: %s\n", est_error_message());
    return 1;
  }
  est_status st = est_run_classifier_validate(&c);
  if (st != EST_OK) {
    fprintf(stderr, "est run_classifier: %s\n", est_error_message());
    return 2;
  }
  /* Under mpirun every rank runs this same command on its shard (est/dist.h); otherwise
   * this is a single process and the dist calls are no-ops. */
  st = est_dist_init(&argc, &argv);
  /* After MPI's start-up, so its handlers (if any) do not replace these. */
  est_cli_install_stop_handlers();
  if (st == EST_OK) st = est_run_classifier_main(&c);
  if (st == EST_OK && do_export && est_dist_is_chief()) st = est_export_classifier(&c, export_dir, NULL, 0);
  if (st == EST_ERR_CANCELLED) {
    /* Stopped on request after saving (the log said where); all ranks stopped together. */
    est_dist_finalize();
    return est_cli_exit_code(st);
  }
  if (st != EST_OK) {
    fprintf(stderr, "est run_classifier: error: %s\n", est_error_message());
    est_dist_abort(1); /* the other ranks would wait for this one until their timeout */
    est_dist_finalize();
    return 1;
  }
  est_dist_finalize();
  return 0;
}
