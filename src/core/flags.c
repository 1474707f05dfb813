/* absl-style flag parsing behind est/flags.h. */
#include "est/flags.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int est_parse_bool(const char *text) {
  if (!strcasecmp(text, "true") || !strcmp(text, "1") || !strcasecmp(text, "yes") || !strcasecmp(text, "t"))
    return 1;
  if (!strcasecmp(text, "false") || !strcmp(text, "0") || !strcasecmp(text, "no") || !strcasecmp(text, "f"))
    return 0;
  return -1;
}

static est_flag *find_flag(est_flag *flags, int nflags, const char *name, size_t len) {
  for (int i = 0; i < nflags; i++)
    if (strlen(flags[i].name) == len && !strncmp(flags[i].name, name, len)) return &flags[i];
  return NULL;
}

static int set_value(est_flag *f, const char *text) {
  char *end = NULL;
  errno = 0;
  switch (f->type) {
  case EST_FLAG_TYPE_STRING:
    *(const char **)f->value = text;
    break;
  case EST_FLAG_TYPE_INT: {
    long long v = strtoll(text, &end, 10);
    if (!*text || *end || errno) {
      est_error(EST_ERR_INVALID_ARGUMENT, "flag --%s: '%s' is not an integer", f->name, text);
      return -1;
    }
    *(int64_t *)f->value = v;
    break;
  }
  case EST_FLAG_TYPE_FLOAT: {
    double v = strtod(text, &end);
    if (!*text || *end || errno || !isfinite(v)) {
      est_error(EST_ERR_INVALID_ARGUMENT, "flag --%s: '%s' is not a finite number", f->name, text);
      return -1;
    }
    *(double *)f->value = v;
    break;
  }
  case EST_FLAG_TYPE_BOOL: {
    int b = est_parse_bool(text);
    if (b < 0) {
      est_error(EST_ERR_INVALID_ARGUMENT, "flag --%s: '%s' is not a boolean (true or false)", f->name, text);
      return -1;
    }
    *(bool *)f->value = b;
    break;
  }
  }
  f->is_set = 1;
  return 0;
}

est_flags_result est_flags_parse(est_flag *flags, int nflags, int argc, char **argv,
                                 char **pos, int *npos, int max_pos) {
  *npos = 0;
  int only_positional = 0;
  for (int i = 0; i < argc; i++) {
    char *arg = argv[i];
    if (only_positional || arg[0] != '-' || arg[1] == '\0') {
      if (*npos >= max_pos) {
        est_error(EST_ERR_INVALID_ARGUMENT, "unexpected argument '%s'", arg);
        return EST_FLAGS_ERROR;
      }
      pos[(*npos)++] = arg;
      continue;
    }
    if (!strcmp(arg, "--")) {
      only_positional = 1;
      continue;
    }
    const char *name = arg + 1;
    if (*name == '-') name++;
    if (!strcmp(name, "help") || !strcmp(name, "h") || !strcmp(name, "helpfull")) return EST_FLAGS_HELP;
    const char *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    est_flag *f = find_flag(flags, nflags, name, len);
    if (!f && len > 2 && !strncmp(name, "no", 2)) {
      est_flag *negated = find_flag(flags, nflags, name + 2, len - 2);
      if (negated && negated->type == EST_FLAG_TYPE_BOOL) {
        if (eq) {
          est_error(EST_ERR_INVALID_ARGUMENT, "flag --no%s takes no value", negated->name);
          return EST_FLAGS_ERROR;
        }
        *(bool *)negated->value = false;
        negated->is_set = 1;
        continue;
      }
    }
    if (!f) {
      est_error(EST_ERR_INVALID_ARGUMENT, "unknown flag --%.*s (see --help)", (int)len, name);
      return EST_FLAGS_ERROR;
    }
    const char *value;
    if (eq) value = eq + 1;
    else if (f->type == EST_FLAG_TYPE_BOOL) {
      /* absl: a bare boolean flag means true; the value never comes from the next arg. */
      value = "true";
    } else if (i + 1 < argc) value = argv[++i];
    else {
      est_error(EST_ERR_INVALID_ARGUMENT, "flag --%s needs a value", f->name);
      return EST_FLAGS_ERROR;
    }
    if (set_value(f, value) != 0) return EST_FLAGS_ERROR;
  }
  for (int i = 0; i < nflags; i++) {
    if (flags[i].required && !flags[i].is_set) {
      est_error(EST_ERR_INVALID_ARGUMENT, "flag --%s must be specified", flags[i].name);
      return EST_FLAGS_ERROR;
    }
  }
  return EST_FLAGS_OK;
}

void est_flags_print_help(FILE *out, const char *usage, const est_flag *flags, int nflags) {
  fprintf(out, "%s\n", usage);
  if (nflags) fprintf(out, "\nflags:\n");
  for (int i = 0; i < nflags; i++) {
    const est_flag *f = &flags[i];
    fprintf(out, "  --%s: %s\n", f->name, f->help ? f->help : "");
    if (f->default_rule) {
      fprintf(out, "    (default: %s)\n", f->default_rule);
      continue;
    }
    switch (f->type) {
    case EST_FLAG_TYPE_STRING: {
      const char *v = *(const char *const *)f->value;
      if (f->required) fprintf(out, "    (a string; required)\n");
      else if (v) fprintf(out, "    (default: '%s')\n", v);
      else fprintf(out, "    (a string)\n");
      break;
    }
    case EST_FLAG_TYPE_INT:
      fprintf(out, "    (default: '%lld')%s\n", (long long)*(const int64_t *)f->value,
              f->required ? " (required)" : "");
      break;
    case EST_FLAG_TYPE_FLOAT:
      fprintf(out, "    (default: '%g')%s\n", *(const double *)f->value, f->required ? " (required)" : "");
      break;
    case EST_FLAG_TYPE_BOOL:
      fprintf(out, "    (default: '%s')\n", *(const bool *)f->value ? "true" : "false");
      break;
    }
  }
}
