/* Replays committed inputs through a libFuzzer target's entry point without libFuzzer, so
 * `make test` reruns every seed (and every input that once found a bug, kept among the seeds)
 * under the normal build, and under ASan + UBSan with `make test SAN=1`.
 *
 *   replay_fuzz_<name> DIR_OR_FILE...   runs LLVMFuzzerTestOneInput on each file (directories:
 *                                       their regular files, not recursively), in name order
 *
 * A target signals a broken invariant by abort(), which fails the test; exit 1 when no input
 * was found (a missing seed directory is a defect, not a pass). */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The binary targets flip io/fuzzing.h's checksum switch (they are compiled with the fuzz
 * build's define, see replay.cmake). The normal library has no such switch and checks every
 * checksum, so here the flag is a dead variable and their second pass checks again. */
int est_fuzz_ignore_checksums;

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "replay: cannot open %s\n", path);
    exit(1);
  }
  size_t cap = 1 << 16, n = 0, got;
  uint8_t *buf = malloc(cap);
  while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0)
    if ((n += got) == cap) buf = realloc(buf, cap *= 2);
  fclose(f);
  if (!buf) {
    fprintf(stderr, "replay: out of memory reading %s\n", path);
    exit(1);
  }
  /* An exact-size copy, so ASan sees a read past the input as libFuzzer's run would. */
  uint8_t *exact = malloc(n ? n : 1);
  memcpy(exact, buf, n);
  free(buf);
  fprintf(stderr, "replay: %s (%zu bytes)\n", path, n);
  LLVMFuzzerTestOneInput(exact, n);
  free(exact);
  return 1;
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int run_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) {
    fprintf(stderr, "replay: cannot open directory %s\n", dir);
    exit(1);
  }
  char **names = NULL;
  size_t n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    names = realloc(names, (n + 1) * sizeof *names);
    names[n] = malloc(strlen(dir) + strlen(e->d_name) + 2);
    sprintf(names[n], "%s/%s", dir, e->d_name);
    n++;
  }
  closedir(d);
  qsort(names, n, sizeof *names, cmp_names);
  int runs = 0;
  for (size_t i = 0; i < n; i++) {
    struct stat sb;
    if (stat(names[i], &sb) == 0 && S_ISREG(sb.st_mode)) runs += run_file(names[i]);
    free(names[i]);
  }
  free(names);
  return runs;
}

int main(int argc, char **argv) {
  int runs = 0;
  for (int i = 1; i < argc; i++) {
    struct stat sb;
    runs += stat(argv[i], &sb) == 0 && S_ISDIR(sb.st_mode) ? run_dir(argv[i]) : run_file(argv[i]);
  }
  if (runs == 0) {
    fprintf(stderr, "replay: no input found\n");
    return 1;
  }
  printf("replay: %d inputs, all passed\n", runs);
  return 0;
}
