/* libFuzzer target: the TSV reader and every task's processor on arbitrary bytes, then the
 * tokenizer on what they accept. The input is written as train.tsv, dev.tsv and test.tsv
 * of a scratch data_dir (the readers take paths). Invariants: a TSV that reads has every
 * field NUL-terminated inside the buffer with no '\t' or '\n' in it; an example's texts are
 * tokenized without error; every id is inside the vocab. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "est/file.h"
#include "est/processors.h"
#include "est/tokenizer.h"

static char dir[256];
static est_tokenizer *tok;

static void put(const char *name, const uint8_t *data, size_t size) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f)) abort();
}

static void tokenize(const char *text) {
  if (!text) return;
  const int32_t *ids;
  size_t n;
  if (est_tokenizer_encode(tok, text, strlen(text), &ids, &n) != EST_OK) abort();
  for (size_t i = 0; i < n; i++)
    if (ids[i] < 0 || ids[i] >= est_vocab_size(est_tokenizer_vocab(tok))) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!tok) {
    snprintf(dir, sizeof dir, "%s/est-fuzz-tsv-%d", access("/dev/shm", W_OK) ? "/tmp" : "/dev/shm", (int)getpid());
    if (est_mkdirs(dir) != EST_OK) abort();
    if (est_tokenizer_open(&tok, EST_TEST_DATA "/vocab_uncased.txt", true) != EST_OK) abort();
  }
  put("train.tsv", data, size);
  put("dev.tsv", data, size);
  put("test.tsv", data, size);
  char path[512];
  snprintf(path, sizeof path, "%s/train.tsv", dir);
  est_tsv t;
  if (est_tsv_read(&t, path) == EST_OK) {
    for (size_t r = 0; r < t.nrows; r++)
      for (size_t c = 0; c < t.ncols[r]; c++) {
        const char *f = t.rows[r][c];
        if (f < t.data || f > t.data + size || strpbrk(f, "\t\n")) abort();
      }
    est_tsv_free(&t);
  }
  /* The byte after the first decides the generic task's columns and header. */
  est_tsv_task_config cfg = est_tsv_task_config_default();
  uint8_t k = size > 1 ? data[1] : 0;
  cfg.text_a_column = k & 3;
  cfg.text_b_column = (k >> 2) & 1 ? 1 + ((k >> 3) & 1) : -1;
  cfg.label_column = (k >> 4) & 1 ? -1 : 0;
  cfg.skip_header = (k >> 5) & 1;
  const char *tasks[] = {"cola", "mrpc", "mnli", "mnli-mm", "sst-2", "xnli", "qnli", "rte", "wnli", "tsv"};
  const char *task = tasks[(size ? data[0] : 0) % (sizeof tasks / sizeof *tasks)];
  est_processor *p;
  if (est_processor_create(&p, task, &cfg) != EST_OK) return 0;
  const char *const *labels;
  size_t nlabels;
  est_processor_get_labels(p, dir, &labels, &nlabels);
  for (int s = 0; s < 3; s++) {
    est_examples ex;
    est_examples_init(&ex);
    if (est_processor_get_examples(p, dir, (est_split)s, &ex) == EST_OK)
      for (size_t i = 0; i < ex.count; i++) {
        tokenize(ex.items[i].text_a);
        tokenize(ex.items[i].text_b);
      }
    est_examples_free(&ex);
  }
  est_processor_free(p);
  return 0;
}
