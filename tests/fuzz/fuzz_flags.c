/* libFuzzer target: the command-line flag parser. The input, split at NUL bytes, is argv
 * (at most 64 words) against flags of every type. Invariants: a parse that succeeds leaves
 * string flags pointing into argv and at most max_pos positionals; errors leave a message. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/flags.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *buf = malloc(size + 1);
  if (!buf) return 0;
  memcpy(buf, data, size);
  buf[size] = 0;
  char *argv[64];
  int argc = 0;
  for (size_t i = 0; i <= size && argc < 64;) {
    argv[argc++] = buf + i;
    i += strlen(buf + i) + 1;
  }
  const char *s = NULL, *t = "default";
  int64_t n = 128;
  double x = 0.5;
  bool b = true, c = false;
  est_flag flags[] = {
      EST_FLAG_STRING("vocab_file", &s, "a string", 0), EST_FLAG_STRING("task_name", &t, "a string", 0),
      EST_FLAG_INT("max_seq_length", &n, "an int", 0),  EST_FLAG_FLOAT("learning_rate", &x, "a float", 0),
      EST_FLAG_BOOL("do_lower_case", &b, "a bool", 0),  EST_FLAG_BOOL("do_train", &c, "a bool", 0),
  };
  char *pos[4];
  int npos = 0;
  est_flags_result r = est_flags_parse(flags, 6, argc, argv, pos, &npos, 4);
  if (r == EST_FLAGS_OK) {
    if (npos < 0 || npos > 4) abort();
    const char *strs[2] = {s, t};
    for (int k = 0; k < 2; k++)
      if (strs[k] && strcmp(strs[k], "default") && (strs[k] < buf || strs[k] > buf + size)) abort();
  }
  if (r == EST_FLAGS_ERROR && !*est_error_message()) abort();
  est_parse_bool(argv[0]);
  free(buf);
  return 0;
}
