/* bench_ckpt: save / restore throughput of a BERT-shaped TF checkpoint and safetensors file.
 *
 *   bench_ckpt DIR [LAYERS HIDDEN VOCAB]     (default 12 768 30522: BERT-base, 110M floats)
 *
 * Builds the 206 BERT pre-training variables (run_pretraining.py names and shapes) in one
 * float buffer, then times: est_ckpt_save (data + index, fsync'ed, renamed), a full restore
 * with est_ckpt_reader_read_into (CRC checked) from a warm page cache, and the same two for
 * safetensors. Prints one line per measurement: name, seconds, MB/s. bench/bench_ckpt.sh
 * runs it next to PyTorch's torch.save / torch.load of the same tensors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "est/ckpt.h"
#include "est/file.h"
#include "est/safetensors.h"

#define MAXV 512

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static char *names[MAXV];
static est_tensor vars[MAXV];
static int nv;

static void add(const char *name, int rank, int64_t d0, int64_t d1) {
  names[nv] = strdup(name);
  vars[nv] = (est_tensor){.dtype = EST_DT_FLOAT, .rank = rank, .dims = {d0, d1}};
  nv++;
}

static void add_dense(const char *scope, int64_t in, int64_t out) {
  char n[300];
  snprintf(n, sizeof n, "%s/kernel", scope);
  add(n, 2, in, out);
  snprintf(n, sizeof n, "%s/bias", scope);
  add(n, 1, out, 0);
}

static void add_ln(const char *scope, int64_t h) {
  char n[300];
  snprintf(n, sizeof n, "%s/beta", scope);
  add(n, 1, h, 0);
  snprintf(n, sizeof n, "%s/gamma", scope);
  add(n, 1, h, 0);
}

static void report(const char *what, double secs, double bytes) {
  printf("%-28s %8.3f s %9.1f MB/s\n", what, secs, bytes / secs / 1e6);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: bench_ckpt DIR [LAYERS HIDDEN VOCAB]\n");
    return 2;
  }
  const char *dir = argv[1];
  int layers = argc > 2 ? atoi(argv[2]) : 12;
  int64_t h = argc > 3 ? atoll(argv[3]) : 768, vocab = argc > 4 ? atoll(argv[4]) : 30522;
  char n[200];
  add("bert/embeddings/word_embeddings", 2, vocab, h);
  add("bert/embeddings/token_type_embeddings", 2, 2, h);
  add("bert/embeddings/position_embeddings", 2, 512, h);
  add_ln("bert/embeddings/LayerNorm", h);
  for (int l = 0; l < layers; l++) {
    const char *parts[] = {"attention/self/query", "attention/self/key", "attention/self/value",
                           "attention/output/dense"};
    for (int p = 0; p < 4; p++) {
      snprintf(n, sizeof n, "bert/encoder/layer_%d/%s", l, parts[p]);
      add_dense(n, h, h);
    }
    snprintf(n, sizeof n, "bert/encoder/layer_%d/attention/output/LayerNorm", l);
    add_ln(n, h);
    snprintf(n, sizeof n, "bert/encoder/layer_%d/intermediate/dense", l);
    add_dense(n, h, 4 * h);
    snprintf(n, sizeof n, "bert/encoder/layer_%d/output/dense", l);
    add_dense(n, 4 * h, h);
    snprintf(n, sizeof n, "bert/encoder/layer_%d/output/LayerNorm", l);
    add_ln(n, h);
  }
  add_dense("bert/pooler/dense", h, h);
  add("cls/predictions/output_bias", 1, vocab, 0);
  add_dense("cls/predictions/transform/dense", h, h);
  add_ln("cls/predictions/transform/LayerNorm", h);
  add("cls/seq_relationship/output_weights", 2, 2, h);
  add("cls/seq_relationship/output_bias", 1, 2, 0);

  /* One contiguous parameter buffer, as the trainer keeps it. */
  size_t total = 0;
  for (int i = 0; i < nv; i++) total += (size_t)est_tensor_num_elements(&vars[i]);
  float *params = malloc(total * sizeof(float)), *back = malloc(total * sizeof(float));
  if (!params || !back) return 1;
  for (size_t i = 0; i < total; i++) params[i] = (float)((i * 2654435761u) % 1000) * 1e-3f;
  size_t off = 0;
  for (int i = 0; i < nv; i++) {
    vars[i].data = params + off;
    off += (size_t)est_tensor_num_elements(&vars[i]);
  }
  /* Touch the restore buffer now: first touch of fresh pages is slow in this VM and is
   * not what a restore into an existing parameter buffer pays. */
  memset(back, 0, total * sizeof(float));
  double bytes = (double)total * 4;
  printf("%d tensors, %zu floats (%.1f MB)\n", nv, total, bytes / 1e6);

  char prefix[4096], st_path[4096];
  if (est_path_join(prefix, sizeof prefix, dir, "model.ckpt-1") != EST_OK ||
      est_path_join(st_path, sizeof st_path, dir, "model.safetensors") != EST_OK)
    goto fail;
  double t0 = now();
  if (est_ckpt_save(prefix, (size_t)nv, (const char *const *)names, vars) != EST_OK) goto fail;
  report("ckpt save (fsync)", now() - t0, bytes);

  /* Twice: the first restore may find part of the file evicted from the page cache (the
   * container's memory limit), the second shows the reader's own cost. */
  for (int pass = 0; pass < 2; pass++) {
    t0 = now();
    est_ckpt_reader *r;
    if (est_ckpt_reader_open(&r, prefix) != EST_OK) goto fail;
    off = 0;
    for (int i = 0; i < nv; i++) {
      size_t k = (size_t)est_tensor_num_elements(&vars[i]);
      if (est_ckpt_reader_read_into(r, names[i], EST_DT_FLOAT, back + off, k * 4) != EST_OK) goto fail;
      off += k;
    }
    est_ckpt_reader_close(r);
    report(pass ? "ckpt restore (CRC, 2nd)" : "ckpt restore (CRC, 1st)", now() - t0, bytes);
  }
  if (memcmp(params, back, total * 4)) {
    fprintf(stderr, "restore differs\n");
    return 1;
  }

  t0 = now();
  est_safetensors_writer *w;
  if (est_safetensors_writer_open(&w, st_path) != EST_OK) goto fail;
  for (int i = 0; i < nv; i++)
    if (est_safetensors_writer_add(w, names[i], &vars[i]) != EST_OK) goto fail;
  if (est_safetensors_writer_finish(w) != EST_OK) goto fail;
  report("safetensors save (fsync)", now() - t0, bytes);

  memset(back, 0, total * 4);
  t0 = now();
  est_safetensors *st;
  if (est_safetensors_open(&st, st_path) != EST_OK) goto fail;
  off = 0;
  for (int i = 0; i < nv; i++) {
    size_t k = (size_t)est_tensor_num_elements(&vars[i]);
    if (est_safetensors_read_into(st, names[i], EST_DT_FLOAT, back + off, k * 4) != EST_OK) goto fail;
    off += k;
  }
  est_safetensors_close(st);
  report("safetensors load (warm)", now() - t0, bytes);
  if (memcmp(params, back, total * 4)) {
    fprintf(stderr, "safetensors load differs\n");
    return 1;
  }
  free(params);
  free(back);
  for (int i = 0; i < nv; i++) free(names[i]);
  return 0;
fail:
  fprintf(stderr, "bench_ckpt: %s\n", est_error_message());
  return 1;
}
