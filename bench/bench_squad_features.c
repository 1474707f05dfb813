/* bench_squad_features: est's side of the SQuAD feature-conversion comparison (bench/run_squad_features.sh):
 * what `est run_squad` does before training or predicting, as one process: read the JSON
 * (read_squad_examples), for training draw random.Random(12345)'s shuffle, convert every
 * example into its windows (convert_examples_to_features) and write them (FeatureWriter).
 *
 *   bench_squad_features --vocab_file V --input F --output R [--mode train|predict]
 *                        [--version_2_with_negative 0|1] [--max_seq_length 384]
 *                        [--doc_stride 128] [--max_query_length 64]
 *
 * Prints "est <mode> <examples> examples <features> features <seconds> s" (read + convert +
 * write, measured inside the process; the script also times the whole process). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "est/log.h"
#include "est/pyrandom.h"
#include "est/squad.h"
#include "est/tokenizer.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#define USAGE                                                                                               \
  "usage: bench_squad_features --vocab_file V --input F --output R [--mode train|predict]\n"                   \
  "         [--version_2_with_negative 0|1] [--max_seq_length N] [--doc_stride N] [--max_query_length N]\n"

/* Reads, (shuffles,) converts and writes; returns the status, the counts through the pointers. */
static est_status convert_file(const char *vocab_file, const char *input, const char *output,
                               const est_squad_feature_config *fc, bool v2, size_t *num_examples,
                               int64_t *num_features) {
  est_squad_examples *ex = NULL;
  est_tokenizer *tok = NULL;
  est_squad_converter *conv = NULL;
  est_squad_feature_writer *w = NULL;
  size_t *order = NULL;
  est_status st = est_squad_read_examples(input, fc->is_training, v2, &ex);
  if (st == EST_OK) st = est_tokenizer_open(&tok, vocab_file, true);
  if (st == EST_OK) st = est_squad_converter_create(&conv, tok, fc);
  if (st == EST_OK) st = est_squad_feature_writer_open(&w, output, fc->max_seq_length, fc->is_training);
  if (st == EST_OK && !(order = malloc((ex->count ? ex->count : 1) * sizeof *order)))
    st = est_error(EST_ERR_NO_MEMORY, "bench_squad_features: out of memory");
  if (st == EST_OK) {
    /* run_squad.py main(): random.Random(12345).shuffle(train_examples) */
    for (size_t i = 0; i < ex->count; i++) order[i] = i;
    if (fc->is_training) {
      est_pyrandom rng;
      est_pyrandom_seed(&rng, 12345);
      est_pyrandom_shuffle(&rng, order, ex->count, sizeof *order);
    }
    for (size_t i = 0; i < ex->count && st == EST_OK; i++)
      st = est_squad_converter_convert(conv, &ex->examples[order[i]], i, est_squad_feature_writer_write, w);
    *num_examples = ex->count;
    *num_features = est_squad_feature_writer_count(w);
  }
  if (w) {
    if (st == EST_OK) st = est_squad_feature_writer_close(w);
    else est_squad_feature_writer_abort(w);
  }
  free(order);
  est_squad_converter_free(conv);
  est_tokenizer_free(tok);
  est_squad_examples_free(ex);
  return st;
}

int main(int argc, char **argv) {
  const char *vocab_file = NULL, *input = NULL, *output = NULL, *mode = "predict";
  int v2 = 0;
  est_squad_feature_config fc = est_squad_feature_config_default();
  for (int i = 1; i < argc; i++) {
    if (i + 1 >= argc) return fprintf(stderr, USAGE), 2;
    if (!strcmp(argv[i], "--vocab_file")) vocab_file = argv[++i];
    else if (!strcmp(argv[i], "--input")) input = argv[++i];
    else if (!strcmp(argv[i], "--output")) output = argv[++i];
    else if (!strcmp(argv[i], "--mode")) mode = argv[++i];
    else if (!strcmp(argv[i], "--version_2_with_negative")) v2 = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--max_seq_length")) fc.max_seq_length = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--doc_stride")) fc.doc_stride = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--max_query_length")) fc.max_query_length = atoi(argv[++i]);
    else return fprintf(stderr, USAGE), 2;
  }
  if (!vocab_file || !input || !output || (strcmp(mode, "train") && strcmp(mode, "predict")))
    return fprintf(stderr, USAGE), 2;
  fc.is_training = !strcmp(mode, "train");
  est_log_set_level(EST_LOG_ERROR); /* the skipped-answer warnings, as the peer's are silenced */
  size_t num_examples = 0;
  int64_t num_features = 0;
  double t0 = now();
  est_status st = convert_file(vocab_file, input, output, &fc, v2 != 0, &num_examples, &num_features);
  double dt = now() - t0;
  if (st != EST_OK) {
    fprintf(stderr, "bench_squad_features: %s\n", est_error_message());
    return 1;
  }
  printf("est %s %zu examples %lld features %.3f s\n", mode, num_examples, (long long)num_features, dt);
  return 0;
}
