/* bench_bert: examples/second of est's BERT classifier, training step (forward + backward
 * + AdamWeightDecay with clipping) and inference (forward, no dropout), on random tokens.
 *
 *   bench_bert --model tiny|mini|small|base [--mode train|infer] [--batch 32] [--seq 128]
 *              [--iters N] [--warmup W] [--threads 2] [--precision fp32|bf16|int8]
 *              [--gemm KERNEL (EST_KERNEL's names)] [--recompute 0|1]
 *              [--head classifier|squad] [--perf-ctl FIFO]
 *
 * --head squad: run_squad.py's model instead (est_bert_squad_head_type through the one BERT
 * model_fn, the code `est run_squad` trains and predicts with: cls/squad weights [2, H] on
 * every position, loss = mean of the start and end cross-entropies); "infer" is its PREDICT
 * call (start and end logits). bench/run_squad_model.sh runs it next to bert_torch.py
 * --head squad.
 * Both heads run through the one BERT model_fn, as `est run_classifier` and `est run_squad` run
 * them. Prints one line: "est <model> <mode> <ex/s> ex/s (<ms> ms/step, <MiB> MiB activations,
 * ...)" (the activations: the encoder's).
 * bench/run_bert.sh runs it next to bench/bert_torch.py and prints the ratios; see
 * bench/README.md for how to read them.
 * --perf-ctl FIFO: writes "enable" to FIFO when the timed steps start and "disable" when they
 * end, so `perf record -D -1 --control fifo:FIFO` samples those steps only, not the model's
 * build, random initialisation and warm-up (bench/profile_train.sh). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "est/bert_classifier.h"
#include "est/bert_head.h"
#include "est/log.h"
#include "est/optimizer.h"
#include "est/precision.h"
#include "est/rng.h"
#include "est/threads.h"
#include "est/variables.h"
#include "nn/kernel_choice.h" /* est_kernel_set: --gemm blas is the OpenBLAS-only "before" */

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int usage(void) {
  fprintf(stderr, "usage: bench_bert --model tiny|mini|small|base [--mode train|infer] [--batch N] [--seq N]\n"
                  "                  [--iters N] [--warmup N] [--threads N] [--precision fp32|bf16|int8]\n"
                  "                  [--gemm KERNEL (EST_KERNEL's names)] [--recompute 0|1]\n"
                  "                  [--head classifier|squad] [--perf-ctl FIFO]\n");
  return 2;
}

#define CHECK(x)                                                    \
  do {                                                              \
    if ((x) != EST_OK) {                                            \
      fprintf(stderr, "bench_bert: %s\n", est_error_message());     \
      return 1;                                                     \
    }                                                               \
  } while (0)

/* Full-length examples, two segments, as a GLUE pair batch: input_ids, input_mask,
 * segment_ids [batch, seq], malloc'ed. */
static void random_batch(int batch, int seq, int vocab_size, int32_t **ids, int32_t **mask, int32_t **segs) {
  size_t T = (size_t)batch * seq;
  *ids = malloc(T * sizeof(int32_t)), *mask = malloc(T * sizeof(int32_t)), *segs = malloc(T * sizeof(int32_t));
  est_rng r;
  est_rng_init(&r, 3);
  for (size_t i = 0; i < T; i++) {
    (*ids)[i] = (int32_t)est_rng_below(&r, (uint64_t)vocab_size);
    (*mask)[i] = 1;
    (*segs)[i] = (int)(i % (size_t)seq) >= seq / 2;
  }
}

/* One head through est_bert_model_fn, driven as the Estimator drives it (build, finalize,
 * create_optimizer; per step: zero grads, call, apply), on the random batch of
 * random_batch(), plus label_ids [B] for the classifier and start_positions / end_positions /
 * unique_ids [B] for the SQuAD head (each head reads its own). Inference reserves what est
 * serve and est predict reserve (PREDICT: forward-only activations) and its weights are
 * read-only, as theirs are (packed weights kept; the warm-up packs them). Prints the line
 * main() prints. */
static int bench_model_fn(const est_bert_model_params *p, const char *model, int train, int batch, int iters,
                          int warmup, const char *perf_ctl) {
  const int seq = p->max_seq_length;
  est_log_set_level(EST_LOG_ERROR); /* the model_fn's "*** Features ***" and variable logs */
  est_model_fn fn = est_bert_model_fn(p);
  const est_mode mode = train ? EST_MODE_TRAIN : EST_MODE_PREDICT;
  const est_model_context ctx = {.mode = mode, .batch_size = batch, .seed = 1, .params = fn.params};
  est_var_store *vs;
  void *m = NULL;
  est_optimizer *opt = NULL;
  CHECK(est_vars_create(&vs));
  CHECK(fn.build(&ctx, vs, &m));
  CHECK(est_vars_finalize(vs, 1));
  if (train) CHECK(fn.create_optimizer(m, vs, &opt));
  else est_vars_set_read_only(vs, 1);
  int32_t *ids, *mask, *segs;
  random_batch(batch, seq, p->bert_config.vocab_size, &ids, &mask, &segs);
  /* start, end positions; unique ids; labels */
  int32_t *rows = malloc(4 * (size_t)batch * sizeof(int32_t));
  est_rng r;
  est_rng_init(&r, 5);
  for (int b = 0; b < batch; b++) {
    rows[b] = (int32_t)est_rng_below(&r, (uint64_t)seq);
    rows[batch + b] = (int32_t)est_rng_below(&r, (uint64_t)seq);
    rows[2 * batch + b] = 1000000000 + b;
    rows[3 * batch + b] = b % 2;
  }
  const char *names[7] = {"input_ids", "input_mask", "segment_ids", "start_positions", "end_positions", "unique_ids",
                          "label_ids"};
  int32_t *data[7] = {ids, mask, segs, rows, rows + batch, rows + 2 * batch, rows + 3 * batch};
  est_tensor tensors[7];
  for (int k = 0; k < 7; k++)
    tensors[k] = k < 3 ? (est_tensor){.dtype = EST_DT_INT32, .rank = 2, .dims = {batch, seq}, .data = data[k]}
                       : (est_tensor){.dtype = EST_DT_INT32, .rank = 1, .dims = {batch}, .data = data[k]};
  const est_features features = {.batch_size = batch, .count = 7, .names = names, .tensors = tensors};
  est_estimator_spec spec;
  double t0 = 0;
  FILE *ctl = NULL;
  if (perf_ctl && !(ctl = fopen(perf_ctl, "w"))) {
    fprintf(stderr, "bench_bert: --perf-ctl %s: cannot open for writing\n", perf_ctl);
    return 1;
  }
  for (int it = 0; it < warmup + iters; it++) {
    if (it == warmup) {
      if (ctl) fputs("enable\n", ctl), fflush(ctl);
      t0 = now();
    }
    memset(&spec, 0, sizeof spec);
    if (train) est_vars_zero_grads(vs);
    CHECK(fn.call(m, vs, &features, mode, it, &spec));
    if (train) CHECK(est_optimizer_apply(opt, it));
  }
  double dt = now() - t0;
  if (ctl) fputs("disable\n", ctl), fclose(ctl);
  printf("est %s %s %.2f ex/s (%.1f ms/step, %d iters, %.0f MiB activations, %s head, loss %.4f)\n", model,
         train ? "train" : "infer", (double)batch * iters / dt, 1e3 * dt / iters, iters,
         (double)est_bert_encoder_activation_bytes(est_bert_model_encoder(m)) / 1048576.0, p->head->name, spec.loss);
  est_optimizer_free(opt);
  fn.destroy(m);
  est_vars_free(vs);
  free(ids), free(mask), free(segs), free(rows);
  return 0;
}

int main(int argc, char **argv) {
  const char *model = "tiny", *mode = "train", *head = "classifier", *perf_ctl = NULL;
  int batch = 32, seq = 128, iters = 0, warmup = 1, threads = 2, recompute = 0;
  est_precision precision = EST_PRECISION_FP32;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help")) return usage() == 2 ? 0 : 1;
    if (i + 1 >= argc) return usage();
    if (!strcmp(argv[i], "--model")) model = argv[++i];
    else if (!strcmp(argv[i], "--mode")) mode = argv[++i];
    else if (!strcmp(argv[i], "--batch")) batch = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--seq")) seq = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--iters")) iters = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--warmup")) warmup = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--recompute")) recompute = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--head")) head = argv[++i];
    else if (!strcmp(argv[i], "--perf-ctl")) perf_ctl = argv[++i];
    else if (!strcmp(argv[i], "--precision")) {
      if (est_precision_parse(argv[++i], &precision) || est_precision_resolve(precision) != precision) return usage();
    } else if (!strcmp(argv[i], "--gemm")) { /* the kernel choice (nn/kernel_choice.h), as EST_KERNEL */
      est_kernel k;
      if (est_kernel_parse(argv[++i], &k)) return usage();
      if (est_kernel_set(k) != EST_OK) {
        fprintf(stderr, "bench_bert: --gemm %s: %s\n", argv[i], est_error_message());
        return 2;
      }
    } else return usage();
  }
  est_bert_config cfg = est_bert_config_default();
  cfg.vocab_size = 30522;
  cfg.type_vocab_size = 2;
  /* the published small models: L/H/A, I = 4H */
  if (!strcmp(model, "tiny")) cfg.num_hidden_layers = 2, cfg.hidden_size = 128;
  else if (!strcmp(model, "mini")) cfg.num_hidden_layers = 4, cfg.hidden_size = 256;
  else if (!strcmp(model, "small")) cfg.num_hidden_layers = 4, cfg.hidden_size = 512;
  else if (!strcmp(model, "base")) cfg.num_hidden_layers = 12, cfg.hidden_size = 768;
  else return usage();
  cfg.num_attention_heads = cfg.hidden_size / 64;
  cfg.intermediate_size = 4 * cfg.hidden_size;
  int train = !strcmp(mode, "train");
  if (!train && strcmp(mode, "infer")) return usage();
  if (iters <= 0) iters = !strcmp(model, "base") ? (train ? 3 : 6) : (train ? 20 : 50);
  est_set_num_threads(threads);
  est_bert_model_params p = {.bert_config = cfg, .max_seq_length = seq, .learning_rate = 2e-5,
                             .num_train_steps = 1000, .num_warmup_steps = 100, .recompute = recompute,
                             .precision = precision};
  const est_bert_classifier_head_params classifier = {.num_labels = 2};
  if (!strcmp(head, "squad")) p.head = &est_bert_squad_head_type;
  else if (!strcmp(head, "classifier")) p.head = &est_bert_classifier_head_type, p.head_params = &classifier;
  else return usage();
  return bench_model_fn(&p, model, train, batch, iters, warmup, perf_ctl);
}
