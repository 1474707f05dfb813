/* bench_tokenizer: single-thread FullTokenizer throughput (est side of bench_tokenizer.sh).
 *
 *   bench_tokenizer VOCAB SENTENCES [IDS_OUT] [REPEATS] [LOWER]
 *
 * SENTENCES has one input per line. Every line is tokenized into ids REPEATS times (default
 * 5, best time reported); IDS_OUT, when given, gets one line of space-separated ids per input
 * so another tokenizer's output can be compared line by line. Vocab loading and file reading
 * are outside the timed loop, as on the HuggingFace side. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "est/est.h"
#include "est/tokenizer.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: bench_tokenizer VOCAB SENTENCES [IDS_OUT] [REPEATS] [LOWER 0|1]\n");
    return 2;
  }
  int repeats = argc > 4 ? atoi(argv[4]) : 5;
  bool lower = argc > 5 ? atoi(argv[5]) != 0 : true;
  est_tokenizer *tok;
  uint8_t *data;
  size_t size;
  if (est_tokenizer_open(&tok, argv[1], lower) != EST_OK || est_read_file(argv[2], &data, &size) != EST_OK) {
    fprintf(stderr, "bench_tokenizer: %s\n", est_error_message());
    return 1;
  }
  /* Split into lines once: starts[i] .. starts[i] + lens[i]. */
  size_t n = 0, cap = 1024;
  const char **starts = malloc(cap * sizeof *starts);
  size_t *lens = malloc(cap * sizeof *lens);
  for (size_t pos = 0; pos < size;) {
    const char *s = (const char *)data + pos;
    const char *nl = memchr(s, '\n', size - pos);
    size_t len = nl ? (size_t)(nl - s) : size - pos;
    if (n == cap) {
      cap *= 2;
      starts = realloc(starts, cap * sizeof *starts);
      lens = realloc(lens, cap * sizeof *lens);
    }
    starts[n] = s;
    lens[n++] = len;
    pos += len + 1;
  }
  double best = 1e30;
  size_t total_ids = 0;
  for (int r = 0; r < repeats; r++) {
    double t0 = now();
    size_t count = 0;
    for (size_t i = 0; i < n; i++) {
      const int32_t *ids;
      size_t k;
      est_tokenizer_encode(tok, starts[i], lens[i], &ids, &k);
      count += k;
    }
    double dt = now() - t0;
    if (dt < best) best = dt;
    total_ids = count;
  }
  printf("est: %zu sentences, %zu bytes, %zu ids: best of %d %.4f s = %.0f sentences/s, %.1f MB/s\n", n, size,
         total_ids, repeats, best, (double)n / best, (double)size / best / 1e6);
  if (argc > 3 && argv[3][0]) {
    FILE *f = fopen(argv[3], "w");
    if (!f) {
      perror(argv[3]);
      return 1;
    }
    for (size_t i = 0; i < n; i++) {
      const int32_t *ids;
      size_t k;
      est_tokenizer_encode(tok, starts[i], lens[i], &ids, &k);
      for (size_t j = 0; j < k; j++) fprintf(f, j ? " %d" : "%d", ids[j]);
      fputc('\n', f);
    }
    fclose(f);
  }
  free(starts);
  free(lens);
  free(data);
  est_tokenizer_free(tok);
  return 0;
}
