/* bench_tokenizer_json: tokenizer.json encode throughput (est side of bench_tokenizer_json.sh).
 *
 *   bench_tokenizer_json TOKENIZER_JSON LINES [THREADS] [REPEATS] [IDS_OUT]
 *
 * Encodes every line of LINES (Tokenizer.encode(line), special tokens added, with the file's
 * truncation and padding turned off: some of the real files keep a training run's, e.g.
 * OnlySecond that refuses a single text) REPEATS times (default 3) and prints the best time. THREADS > 1
 * splits the lines into contiguous shares, one est_tokenizer_twin per thread, as
 * `tokenizers`' encode_batch shares its lines out over rayon's threads. IDS_OUT, when given,
 * gets one line of space-separated ids per input for comparison with the peer. Loading the file
 * and reading the lines are outside the timed loop, as on the peer's side. */
#include <pthread.h>
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

typedef struct share {
  est_tokenizer *tok;
  const char **starts;
  const size_t *lens;
  size_t from, to, ids;
  int failed;
} share;

static void *run_share(void *arg) {
  share *s = arg;
  s->ids = 0;
  for (size_t i = s->from; i < s->to; i++) {
    est_encoding e;
    if (est_tokenizer_encode_pair(s->tok, s->starts[i], s->lens[i], NULL, 0, true, &e) != EST_OK) {
      fprintf(stderr, "bench_tokenizer_json: line %zu: %s\n", i + 1, est_error_message());
      s->failed = 1;
      return NULL;
    }
    s->ids += e.n;
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: bench_tokenizer_json TOKENIZER_JSON LINES [THREADS] [REPEATS] [IDS_OUT]\n");
    return 2;
  }
  int threads = argc > 3 ? atoi(argv[3]) : 1, repeats = argc > 4 ? atoi(argv[4]) : 3;
  if (threads < 1 || threads > 64 || repeats < 1) {
    fprintf(stderr, "bench_tokenizer_json: THREADS in [1, 64], REPEATS >= 1\n");
    return 2;
  }
  est_tokenizer *tok;
  uint8_t *data;
  size_t size;
  double t_load = now();
  if (est_tokenizer_from_json(&tok, argv[1]) != EST_OK) {
    fprintf(stderr, "bench_tokenizer_json: %s\n", est_error_message());
    return 1;
  }
  t_load = now() - t_load;
  est_tokenizer_truncation(tok)->enabled = false;
  est_tokenizer_padding(tok)->enabled = false;
  if (est_read_file(argv[2], &data, &size) != EST_OK) {
    fprintf(stderr, "bench_tokenizer_json: %s\n", est_error_message());
    return 1;
  }
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
  share sh[64];
  pthread_t th[64];
  for (int t = 0; t < threads; t++) {
    sh[t] = (share){.starts = starts, .lens = lens, .from = n * (size_t)t / (size_t)threads,
                    .to = n * (size_t)(t + 1) / (size_t)threads};
    if (t == 0) sh[t].tok = tok;
    else if (est_tokenizer_twin(&sh[t].tok, tok) != EST_OK) {
      fprintf(stderr, "bench_tokenizer_json: %s\n", est_error_message());
      return 1;
    }
  }
  double best = 1e30;
  size_t total = 0;
  for (int r = 0; r < repeats; r++) {
    double t0 = now();
    for (int t = 1; t < threads; t++) pthread_create(&th[t], NULL, run_share, &sh[t]);
    run_share(&sh[0]);
    for (int t = 1; t < threads; t++) pthread_join(th[t], NULL);
    double dt = now() - t0;
    total = 0;
    for (int t = 0; t < threads; t++) {
      if (sh[t].failed) return 1;
      total += sh[t].ids;
    }
    if (dt < best) best = dt;
  }
  printf("est: %zu lines, %zu bytes, %zu ids, %d thread(s): best of %d %.4f s = %.0f lines/s, %.2f MB/s "
         "(load %.3f s)\n", n, size, total, threads, repeats, best, (double)n / best, (double)size / best / 1e6, t_load);
  if (argc > 5 && argv[5][0]) {
    FILE *f = fopen(argv[5], "w");
    if (!f) {
      perror(argv[5]);
      return 1;
    }
    for (size_t i = 0; i < n; i++) {
      est_encoding e;
      est_tokenizer_encode_pair(tok, starts[i], lens[i], NULL, 0, true, &e);
      for (size_t k = 0; k < e.n; k++) fprintf(f, k ? " %d" : "%d", e.ids[k]);
      fputc('\n', f);
    }
    fclose(f);
  }
  for (int t = 1; t < threads; t++) est_tokenizer_free(sh[t].tok);
  est_tokenizer_free(tok);
  free(starts);
  free(lens);
  free(data);
  return 0;
}
