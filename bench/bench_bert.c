/* bench_bert: examples/second of est's BERT classifier, training step (forward + backward
 * + AdamWeightDecay with clipping) and inference (forward, no dropout), on random tokens.
 *
 *   bench_bert --model tiny|mini|small|base [--mode train|infer] [--batch 32] [--seq 128]
 *              [--iters N] [--warmup W] [--threads 2] [--precision fp32|bf16|int8]
 *              [--gemm auto|blas|own|bf16dp|amx|noavx512] [--recompute 0|1]
 *
 * Prints one line: "est <model> <mode> <ex/s> ex/s (<ms> ms/step, <MiB> MiB activations)".
 * bench/run_bert.sh runs it next to bench/bert_torch.py and prints the ratios; see
 * bench/README.md for how to read them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "est/bert_classifier.h"
#include "est/optimizer.h"
#include "est/precision.h"
#include "est/rng.h"
#include "est/threads.h"
#include "est/variables.h"
#include "nn/kernel_choice.h" /* est_kernel_set: --gemm blas is the OpenBLAS-only "before" */

/* AdamWeightDecay as BERT's create_optimizer sets it up, with the model's exclusions. */
static inline est_adam_weight_decay_config bert_awd_config(void) {
  est_adam_weight_decay_config c = est_adam_weight_decay_config_default();
  c.exclude_from_weight_decay = est_bert_exclude_from_weight_decay;
  c.num_exclude = EST_BERT_NUM_EXCLUDE_FROM_WEIGHT_DECAY;
  return c;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int usage(void) {
  fprintf(stderr, "usage: bench_bert --model tiny|mini|small|base [--mode train|infer] [--batch N] [--seq N]\n"
                  "                  [--iters N] [--warmup N] [--threads N] [--precision fp32|bf16|int8]\n"
                  "                  [--gemm auto|blas|own|bf16dp|amx|noavx512] [--recompute 0|1]\n");
  return 2;
}

#define CHECK(x)                                                    \
  do {                                                              \
    if ((x) != EST_OK) {                                            \
      fprintf(stderr, "bench_bert: %s\n", est_error_message());     \
      return 1;                                                     \
    }                                                               \
  } while (0)

int main(int argc, char **argv) {
  const char *model = "tiny", *mode = "train";
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

  est_var_store *vs;
  est_bert_classifier *m;
  CHECK(est_vars_create(&vs));
  CHECK(est_bert_classifier_create(&m, &cfg, 2, vs));
  est_bert_classifier_set_precision(m, precision);
  CHECK(est_vars_finalize(vs, 1));
  est_bert_encoder_set_recompute(est_bert_classifier_encoder(m), recompute);
  /* Inference reserves what est serve and est predict reserve: forward-only activations. */
  CHECK(train ? est_bert_classifier_reserve(m, batch, seq) : est_bert_classifier_reserve_forward_only(m, batch, seq));
  /* and its weights are read-only, as theirs are (packed weights kept; the warm-up packs them) */
  if (!train) est_vars_set_read_only(vs, 1);
  est_optimizer *opt = NULL;
  if (train) {
    est_adam_weight_decay_config oc = bert_awd_config();
    oc.init_lr = 2e-5;
    oc.schedule = est_lr_schedule_bert(1000, 100);
    CHECK(est_optimizer_create_adam_weight_decay(&opt, vs, &oc));
  }

  /* full-length examples, two segments, as a GLUE pair batch at seq 128 */
  size_t T = (size_t)batch * seq;
  int32_t *ids = malloc(T * sizeof(int32_t)), *mask = malloc(T * sizeof(int32_t));
  int32_t *segs = malloc(T * sizeof(int32_t)), *labels = malloc((size_t)batch * sizeof(int32_t));
  est_rng r;
  est_rng_init(&r, 3);
  for (size_t i = 0; i < T; i++) {
    ids[i] = (int32_t)est_rng_below(&r, (uint64_t)cfg.vocab_size);
    mask[i] = 1;
    segs[i] = (int)(i % (size_t)seq) >= seq / 2;
  }
  for (int b = 0; b < batch; b++) labels[b] = b % 2;
  float *logits = malloc((size_t)batch * 2 * sizeof(float)), loss = 0;

  double t0 = 0;
  for (int it = 0; it < warmup + iters; it++) {
    if (it == warmup) t0 = now();
    if (train) {
      est_vars_zero_grads(vs);
      CHECK(est_bert_classifier_forward(m, ids, mask, segs, labels, batch, seq, 1, 42, (uint64_t)it, logits, NULL,
                                        &loss));
      CHECK(est_bert_classifier_backward(m));
      CHECK(est_optimizer_apply(opt, it));
    } else {
      CHECK(est_bert_classifier_forward(m, ids, mask, segs, NULL, batch, seq, 0, 0, 0, logits, NULL, NULL));
    }
  }
  double dt = now() - t0;
  printf("est %s %s %.2f ex/s (%.1f ms/step, %d iters, %.0f MiB activations, loss %.4f)\n", model, mode,
         (double)batch * iters / dt, 1e3 * dt / iters, iters,
         (double)est_bert_classifier_activation_bytes(m) / 1048576.0, loss);
  est_optimizer_free(opt);
  est_bert_classifier_free(m);
  est_vars_free(vs);
  free(ids);
  free(mask);
  free(segs);
  free(labels);
  free(logits);
  return 0;
}
