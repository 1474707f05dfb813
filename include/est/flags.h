/* est/flags.h — absl/tf.flags-style command-line parsing for est's commands.
 *
 * Accepted forms: --name=value, --name value, -name=value (single dash, as absl), and for
 * booleans --name, --noname, --name=true|false|1|0|yes|no. "--" ends flags. Anything not
 * starting with '-' is positional. Errors name the flag and say why.
 *
 *     const char *vocab = NULL; int64_t seq = 128; bool lower = true;
 *     est_flag flags[] = {
 *       EST_FLAG_STRING("vocab_file", &vocab, "The vocabulary file.", 1),
 *       EST_FLAG_INT("max_seq_length", &seq, "Maximum sequence length.", 0),
 *       EST_FLAG_BOOL("do_lower_case", &lower, "Lower-case the input.", 0),
 *     };
 *     est_flags_result r = est_flags_parse(flags, 3, argc - 1, argv + 1, pos, &npos, 8);
 */
#ifndef EST_FLAGS_H
#define EST_FLAGS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "est/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum est_flag_type {
  EST_FLAG_TYPE_STRING,   /* value: const char ** (points into argv) */
  EST_FLAG_TYPE_INT,      /* value: int64_t * */
  EST_FLAG_TYPE_FLOAT,    /* value: double * */
  EST_FLAG_TYPE_BOOL,     /* value: bool * */
} est_flag_type;

typedef struct est_flag {
  const char *name;
  est_flag_type type;
  void *value;
  const char *help;
  int required;           /* parse fails when a required flag is absent */
  int is_set;             /* out: 1 when given on the command line */
  const char *default_rule; /* --help prints this as the default instead of *value: for a flag
                           * whose unset value the command works out (e.g. from the model's files) */
} est_flag;

/* EST_FLAG_AS(T, p) is p, and a compile error when p is not a T *: an `int` behind
 * EST_FLAG_INT would have its neighbour overwritten by the int64_t the parser stores. */
#define EST_FLAG_AS(T, p) _Generic((p), T *: (p))
#define EST_FLAG_STRING(n, p, h, req) {(n), EST_FLAG_TYPE_STRING, EST_FLAG_AS(const char *, p), (h), (req), 0, NULL}
#define EST_FLAG_INT(n, p, h, req) {(n), EST_FLAG_TYPE_INT, EST_FLAG_AS(int64_t, p), (h), (req), 0, NULL}
#define EST_FLAG_FLOAT(n, p, h, req) {(n), EST_FLAG_TYPE_FLOAT, EST_FLAG_AS(double, p), (h), (req), 0, NULL}
#define EST_FLAG_BOOL(n, p, h, req) {(n), EST_FLAG_TYPE_BOOL, EST_FLAG_AS(bool, p), (h), (req), 0, NULL}
/* An optional flag whose default is a rule, not *p: check is_set to tell "unset" apart. */
#define EST_FLAG_RULE(type, n, p, h, rule) {(n), (type), (p), (h), 0, 0, (rule)}

typedef enum est_flags_result {
  EST_FLAGS_OK = 0,
  EST_FLAGS_HELP = 1,     /* --help / -h / --helpfull was given */
  EST_FLAGS_ERROR = 2,    /* message in est_error_message(); exit code 2 is conventional */
} est_flags_result;

/* Parses argv[0..argc) (no program name). Positional arguments are stored in `pos`
 * (at most max_pos; more is an error). */
est_flags_result est_flags_parse(est_flag *flags, int nflags, int argc, char **argv,
                                 char **pos, int *npos, int max_pos);

/* Prints "usage" then one block per flag: --name (type, default ...): help. The default is
 * the flag's value before parsing, or its default_rule when it has one. */
void est_flags_print_help(FILE *out, const char *usage, const est_flag *flags, int nflags);

/* Parses "true/false/1/0/yes/no" (case-insensitive); -1 when neither. */
int est_parse_bool(const char *text);

#ifdef __cplusplus
}
#endif
#endif
