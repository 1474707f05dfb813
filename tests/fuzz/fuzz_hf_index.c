/* libFuzzer target: a sharded HuggingFace checkpoint's model.safetensors.index.json
 * ({"metadata": {...}, "weight_map": {"tensor": "shard file"}}, add_index in
 * src/hf/hf_checkpoint.c) on arbitrary bytes. A temporary directory holds two small shards,
 * written once (model-00001-of-00002.safetensors with the word embeddings and a Linear
 * weight, model-00002-of-00002.safetensors with the pooler bias and a tensor no table row
 * names); each input becomes the directory's index, and the directory is opened as
 * --init_checkpoint=DIR opens it (est_hf_checkpoint_open).
 *
 * Invariants: an index either fails with an error and a message, opening nothing, or opens
 * 1..4 tensors with distinct names, each a tensor of one of the shards, each readable
 * (est_hf_checkpoint_read) in TF's layout with its element count. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "est/hf_model.h"
#include "est/log.h"
#include "est/safetensors.h"

static char dir[64], index_path[128];
static const char *const shard_names[2] = {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"};

static void remove_dir(void) {
  char p[160];
  for (int i = 0; i < 2; i++) {
    snprintf(p, sizeof p, "%s/%s", dir, shard_names[i]);
    unlink(p);
  }
  unlink(index_path);
  rmdir(dir);
}

static void write_shard(const char *name, const char *const *tensors, const int64_t (*dims)[2], int count) {
  char path[160];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  est_safetensors_writer *w;
  est_tensor t[2];
  if (count > 2 || est_safetensors_writer_open(&w, path) != EST_OK) abort();
  for (int i = 0; i < count; i++) {
    if (est_tensor_alloc(&t[i], EST_DT_FLOAT, dims[i][1] ? 2 : 1, dims[i]) != EST_OK) abort();
    float *v = t[i].data;
    for (int64_t k = 0; k < est_tensor_num_elements(&t[i]); k++) v[k] = (float)k - 1.5f;
    if (est_safetensors_writer_add(w, tensors[i], &t[i]) != EST_OK) abort(); /* borrowed until finish */
  }
  if (est_safetensors_writer_set_metadata(w, "format", "pt") != EST_OK || est_safetensors_writer_finish(w) != EST_OK)
    abort();
  for (int i = 0; i < count; i++) est_tensor_free(&t[i]);
}

static void make_dir(void) {
  snprintf(dir, sizeof dir, "/tmp/est_fuzz_hf_index_XXXXXX");
  if (!mkdtemp(dir)) abort();
  snprintf(index_path, sizeof index_path, "%s/model.safetensors.index.json", dir);
  atexit(remove_dir);
  static const char *const one[] = {"bert.embeddings.word_embeddings.weight",
                                    "bert.encoder.layer.0.attention.self.query.weight"};
  static const int64_t one_dims[][2] = {{5, 4}, {4, 3}};
  static const char *const two[] = {"bert.pooler.dense.bias", "qa_outputs.extra"};
  static const int64_t two_dims[][2] = {{4, 0}, {3, 0}};
  write_shard(shard_names[0], one, one_dims, 2);
  write_shard(shard_names[1], two, two_dims, 2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!dir[0]) {
    est_log_set_level(EST_LOG_OFF);
    make_dir();
  }
  FILE *f = fopen(index_path, "wb"); /* not est_write_file_atomic: an fsync per input */
  if (!f || fwrite(data, 1, size, f) != size || fclose(f)) abort();
  est_hf_checkpoint *h = NULL;
  est_status st = est_hf_checkpoint_open(&h, dir);
  if (st != EST_OK) {
    if (h || !est_error_message()[0]) abort();
    return 0;
  }
  const size_t n = est_hf_checkpoint_count(h);
  if (n < 1 || n > 4) abort();
  for (size_t i = 0; i < n; i++) {
    const char *name = est_hf_checkpoint_hf_name(h, i);
    for (size_t j = 0; j < i; j++)
      if (!strcmp(name, est_hf_checkpoint_hf_name(h, j))) abort();
    est_tensor t;
    if (est_hf_checkpoint_read(h, i, &t) != EST_OK) abort();
    const int64_t want = !strcmp(name, "bert.embeddings.word_embeddings.weight")             ? 20
                         : !strcmp(name, "bert.encoder.layer.0.attention.self.query.weight") ? 12
                         : !strcmp(name, "bert.pooler.dense.bias")                           ? 4
                         : !strcmp(name, "qa_outputs.extra")                                 ? 3
                                                                                             : -1;
    if (t.dtype != EST_DT_FLOAT || est_tensor_num_elements(&t) != want) abort();
    est_tensor_free(&t);
  }
  est_hf_checkpoint_close(h);
  return 0;
}
