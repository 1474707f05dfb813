/* `est`: dispatches to one subcommand per file (see commands.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "est/log.h"
#include "est/threads.h"
#include "nn/kernel_choice.h"

static const est_command commands[] = {
  /* Each subcommand adds its line here. */
  {"tfrecord", "dump, count, copy or parse TFRecord files", est_cmd_tfrecord},
  {"ckpt", "list, print or convert TF checkpoints and safetensors files", est_cmd_ckpt},
  {"tokenize", "BERT FullTokenizer: stdin lines to WordPiece tokens or ids", est_cmd_tokenize},
  {"convert", "GLUE/TSV task files to run_classifier's train/eval/predict.tf_record", est_cmd_convert},
  {"create_pretraining_data", "raw text to masked-LM/next-sentence TFRecords, as create_pretraining_data.py", est_cmd_create_pretraining_data},
  {"run_classifier", "fine-tune / evaluate / predict with BERT, as run_classifier.py", est_cmd_run_classifier},
  {"predict", "class probabilities of new text with an exported classifier", est_cmd_predict},
  {"rerank", "scores and ranks of passages for a query with a cross-encoder", est_cmd_rerank},
  {"serve", "serve an exported classifier with TensorFlow Serving's REST API", est_cmd_serve},
  {"extract_features", "BERT feature vectors of text, as extract_features.py", est_cmd_extract_features},
  {"embed", "sentence embeddings of text lines (pooled BERT outputs), or an embedding export", est_cmd_embed},
  {"run_pretraining", "pretrain BERT (masked LM + next sentence), as run_pretraining.py", est_cmd_run_pretraining},
  {"run_squad", "fine-tune / predict question answering on SQuAD, as run_squad.py", est_cmd_run_squad},
  {"run_ner", "fine-tune / evaluate / predict token classification (NER) on CoNLL files", est_cmd_run_ner},
  {"run_rerank", "fine-tune / evaluate / predict a cross-encoder reranker on (query, passage, label) pairs",
   est_cmd_run_rerank},
  {"squad_eval", "score SQuAD predictions as the official evaluate-v1.1.py / evaluate-v2.0.py", est_cmd_squad_eval},
  {NULL, NULL, NULL},
};

/* Commands that run math kernels on OpenMP threads (a new one adds its name here). */
static const char *const math_commands[] = {"run_classifier", "run_pretraining", "run_squad", "run_ner", "run_rerank", "predict", "rerank", "serve",
                                            "extract_features", "embed", NULL};

/* libgomp's threads wait at each barrier by spinning ~300000 iterations (milliseconds here)
 * before they sleep. With a busy neighbour on a core, the spinning thread eats the CPU
 * share its descheduled partner needs, and 2 threads ran Tiny training 10-20x slower than
 * 1 (bench/README.md, "Sharing the machine"). OMP_WAIT_POLICY=PASSIVE (no spin) avoids that
 * but pays a futex wake-up per parallel region, ~55% on a quiet machine. A short spin,
 * enough to bridge the gap between two regions of one op, keeps both. (A PAUSE takes
 * 120-170 ns in this VM, where it exits to the hypervisor, ~20 ns on bare metal: libgomp's
 * default then spins 40 ms, 1000 spins 0.02-0.2 ms.)
 *
 * libgomp reads GOMP_SPINCOUNT only in its library constructor, before main() (and even an
 * executable's .preinit_array cannot set it: libc's own start-up resets the environment
 * after it), so a math command that finds neither GOMP_SPINCOUNT nor OMP_WAIT_POLICY set
 * sets the spin count and executes itself again, once (~1 ms). If the exec fails, it runs
 * on with libgomp's default.
 *
 * The same exec fixes OpenBLAS's kernel choice, which it also makes in its constructor:
 * where OpenBLAS did not recognise the CPU and fell back to its SSE3 "Prescott" kernels,
 * OPENBLAS_CORETYPE names the family the CPU can run (est_blas_coretype_fix, est/threads.h;
 * never when the user set OPENBLAS_CORETYPE). */
enum { SPIN_COUNT = 1000 }; /* libgomp's own choice when its threads outnumber the CPUs */

static void tune_runtime(char **argv) {
  int spin = !getenv("GOMP_SPINCOUNT") && !getenv("OMP_WAIT_POLICY"); /* else the user's choice, or done */
  const char *core = est_blas_coretype_fix();
  if (!spin && !core) return;
  char count[16];
  snprintf(count, sizeof count, "%d", SPIN_COUNT);
  if (spin && setenv("GOMP_SPINCOUNT", count, 1) != 0) return;
  if (core) {
    if (setenv("OPENBLAS_CORETYPE", core, 1) != 0) return;
    EST_LOG_INFO("OpenBLAS did not recognise this CPU and chose its generic %s kernels; running with "
                 "OPENBLAS_CORETYPE=%s (set OPENBLAS_CORETYPE to choose yourself)",
                 est_blas_corename(), core);
  }
  execv("/proc/self/exe", argv);
  if (spin) unsetenv("GOMP_SPINCOUNT");
  if (core) unsetenv("OPENBLAS_CORETYPE");
}

static void print_usage(FILE *out) {
  fprintf(out,
          "usage: est COMMAND [ARGS...]\n\n"
          "est: tf.estimator and Google BERT's programs (run_classifier, run_pretraining, ...) in plain C.\n\ncommands:\n");
  for (const est_command *c = commands; c->name; c++) fprintf(out, "  %-16s %s\n", c->name, c->summary);
  fprintf(out, "\nRun 'est COMMAND --help' for a command's flags.\n");
}

int main(int argc, char **argv) {
  for (const char *const *m = math_commands; argc >= 2 && *m; m++)
    if (!strcmp(argv[1], *m)) tune_runtime(argv);
  /* No thread of any pool runs until a command does math (see est/threads.h); the default
   * thread count is the CPUs this process may use, not the machine's. */
  est_blas_stop_threads();
  est_set_num_threads(0);
  if (argc < 2) {
    print_usage(stderr);
    return 2;
  }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
    print_usage(stdout);
    return 0;
  }
  if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
    printf("est 0.1.0\n");
    return 0;
  }
  /* EST_KERNEL forces a kernel (docs/testing.md §3): a name est does not know, or a kernel
   * this CPU lacks, stops the command instead of running another kernel than the one named. */
  if (est_kernel_env_status() != EST_OK) {
    fprintf(stderr, "est: %s\n", est_error_message());
    return 2;
  }
  for (const est_command *c = commands; c->name; c++)
    if (!strcmp(argv[1], c->name)) return c->run(argc - 1, argv + 1);
  fprintf(stderr, "est: unknown command '%s'\n\n", argv[1]);
  print_usage(stderr);
  return 2;
}
