/* The `checkpoint` state file (text-format CheckpointState, docs/checkpoint.md §8),
 * tf.train.latest_checkpoint, and deleting a checkpoint's files. */
#include "est/ckpt.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "est/file.h"

/* ---- reading the text format -------------------------------------------------------- */

typedef struct text_parser {
  const char *p, *end;
  int line;
  const char *path;
} text_parser;

static void skip_space(text_parser *t) {
  while (t->p < t->end) {
    if (*t->p == '\n') {
      t->line++;
      t->p++;
    } else if (isspace((unsigned char)*t->p)) {
      t->p++;
    } else if (*t->p == '#') { /* comment to end of line */
      while (t->p < t->end && *t->p != '\n') t->p++;
    } else {
      break;
    }
  }
}

static est_status syntax(const text_parser *t, const char *what) {
  return est_error(EST_ERR_INVALID_ARGUMENT, "%s:%d: cannot parse CheckpointState: %s", t->path, t->line,
                   what);
}

static int octal(char c) { return c >= '0' && c <= '7'; }

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* One or more adjacent quoted strings (text format concatenates them), C escapes
 * undone, into a malloc'ed NUL-terminated buffer. */
static est_status parse_string(text_parser *t, char **out) {
  size_t cap = 64, len = 0;
  char *s = malloc(cap);
  if (!s) return est_error(EST_ERR_NO_MEMORY, "out of memory reading %s", t->path);
  while (t->p < t->end && (*t->p == '"' || *t->p == '\'')) {
    char quote = *t->p++;
    for (;;) {
      if (t->p >= t->end || *t->p == '\n') {
        free(s);
        return syntax(t, "unterminated string");
      }
      char c = *t->p++;
      if (c == quote) break;
      if (c == '\\') {
        if (t->p >= t->end) {
          free(s);
          return syntax(t, "unterminated escape");
        }
        char e = *t->p++;
        switch (e) {
        case 'n': c = '\n'; break;
        case 't': c = '\t'; break;
        case 'r': c = '\r'; break;
        case 'a': c = '\a'; break;
        case 'b': c = '\b'; break;
        case 'f': c = '\f'; break;
        case 'v': c = '\v'; break;
        case '\\': case '\'': case '"': case '?': c = e; break;
        case 'x': {
          int v = 0, k = 0;
          while (k < 2 && t->p < t->end && hexval(*t->p) >= 0) v = v * 16 + hexval(*t->p++), k++;
          if (!k) {
            free(s);
            return syntax(t, "bad \\x escape");
          }
          c = (char)v;
          break;
        }
        default:
          if (!octal(e)) {
            free(s);
            return syntax(t, "unknown escape in string");
          } else {
            int v = e - '0', k = 1;
            while (k < 3 && t->p < t->end && octal(*t->p)) v = v * 8 + (*t->p++ - '0'), k++;
            c = (char)v;
          }
        }
      }
      if (len + 2 > cap) {
        char *g = realloc(s, cap *= 2);
        if (!g) {
          free(s);
          return est_error(EST_ERR_NO_MEMORY, "out of memory reading %s", t->path);
        }
        s = g;
      }
      s[len++] = c;
    }
    skip_space(t);
  }
  s[len] = 0;
  if (memchr(s, 0, len)) { /* a path cannot hold a NUL */
    free(s);
    return syntax(t, "NUL byte in a path");
  }
  *out = s;
  return EST_OK;
}

est_status est_ckpt_state_read(const char *dir, est_ckpt_state *out) {
  memset(out, 0, sizeof *out);
  char path[4096];
  if (est_path_join(path, sizeof path, dir, "checkpoint") != EST_OK) return est_error_code();
  uint8_t *data;
  size_t size;
  est_status st = est_read_file(path, &data, &size);
  if (st != EST_OK) return st; /* NOT_FOUND when there is no state file */
  text_parser t = {(const char *)data, (const char *)data + size, 1, path};
  size_t cap = 0;
  for (;;) {
    skip_space(&t);
    if (t.p >= t.end) break;
    const char *name = t.p;
    while (t.p < t.end && (isalnum((unsigned char)*t.p) || *t.p == '_')) t.p++;
    size_t name_len = (size_t)(t.p - name);
    if (!name_len) {
      st = syntax(&t, "expected a field name");
      break;
    }
    skip_space(&t);
    if (t.p >= t.end || *t.p != ':') {
      st = syntax(&t, "expected ':' after the field name");
      break;
    }
    t.p++;
    skip_space(&t);
    if (t.p < t.end && (*t.p == '"' || *t.p == '\'')) {
      char *s = NULL;
      st = parse_string(&t, &s);
      if (st != EST_OK) break;
      if (name_len == 21 && !memcmp(name, "model_checkpoint_path", 21)) {
        free(out->model_checkpoint_path); /* a repeated singular field: the last wins */
        out->model_checkpoint_path = s;
      } else if (name_len == 26 && !memcmp(name, "all_model_checkpoint_paths", 26)) {
        if (out->count == cap) {
          size_t c = cap ? 2 * cap : 8;
          char **g = realloc(out->all_model_checkpoint_paths, c * sizeof *g);
          if (!g) {
            free(s);
            st = est_error(EST_ERR_NO_MEMORY, "out of memory reading %s", path);
            break;
          }
          out->all_model_checkpoint_paths = g;
          cap = c;
        }
        out->all_model_checkpoint_paths[out->count++] = s;
      } else {
        free(s); /* a string field we do not know */
      }
    } else {
      /* A scalar (the timestamps of newer TF): consume the token, ignore it. */
      const char *v = t.p;
      while (t.p < t.end && !isspace((unsigned char)*t.p) && *t.p != ';' && *t.p != ',') t.p++;
      if (t.p == v) {
        st = syntax(&t, "expected a value");
        break;
      }
      int is_path = (name_len == 21 && !memcmp(name, "model_checkpoint_path", 21)) ||
                    (name_len == 26 && !memcmp(name, "all_model_checkpoint_paths", 26));
      if (is_path) {
        st = syntax(&t, "a path must be a quoted string");
        break;
      }
    }
    skip_space(&t);
    if (t.p < t.end && (*t.p == ';' || *t.p == ',')) t.p++;
  }
  free(data);
  if (st == EST_OK && (!out->model_checkpoint_path || !*out->model_checkpoint_path))
    st = est_error(EST_ERR_INVALID_ARGUMENT, "Invalid checkpoint state loaded from %s: no model_checkpoint_path",
                   path);
  if (st != EST_OK) est_ckpt_state_clear(out);
  return st;
}

void est_ckpt_state_clear(est_ckpt_state *st) {
  if (!st) return;
  free(st->model_checkpoint_path);
  for (size_t i = 0; i < st->count; i++) free(st->all_model_checkpoint_paths[i]);
  free(st->all_model_checkpoint_paths);
  memset(st, 0, sizeof *st);
}

/* ---- writing ------------------------------------------------------------------------- */

/* A path inside dir is written relative to it (save_relative_paths, as Estimator does). */
static const char *relative_to(const char *dir, const char *path) {
  size_t d = strlen(dir);
  while (d > 1 && dir[d - 1] == '/') d--;
  if (d && !strncmp(path, dir, d) && path[d] == '/' && path[d + 1]) return path + d + 1;
  return path;
}

/* Python text_format's CEscape (as_utf8=False): \n \r \t \" \' \\ and octal for the rest
 * outside printable ASCII. */
static void write_quoted(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    switch (*p) {
    case '\n': fputs("\\n", f); break;
    case '\r': fputs("\\r", f); break;
    case '\t': fputs("\\t", f); break;
    case '"': fputs("\\\"", f); break;
    case '\'': fputs("\\'", f); break;
    case '\\': fputs("\\\\", f); break;
    default:
      if (*p < 0x20 || *p >= 0x7f) fprintf(f, "\\%03o", *p);
      else fputc(*p, f);
    }
  }
  fputs("\"\n", f);
}

est_status est_ckpt_state_write(const char *dir, const est_ckpt_state *st) {
  if (!st->model_checkpoint_path || !*st->model_checkpoint_path)
    return est_error(EST_ERR_INVALID_ARGUMENT, "checkpoint state for %s has no model_checkpoint_path", dir);
  char path[4096];
  if (est_path_join(path, sizeof path, dir, "checkpoint") != EST_OK) return est_error_code();
  est_atomic_file *f;
  est_status s = est_atomic_open(&f, path);
  if (s != EST_OK) return s;
  FILE *out = est_atomic_stream(f);
  const char *model = relative_to(dir, st->model_checkpoint_path);
  fputs("model_checkpoint_path: ", out);
  write_quoted(out, model);
  for (size_t i = 0; i < st->count; i++) {
    fputs("all_model_checkpoint_paths: ", out);
    write_quoted(out, relative_to(dir, st->all_model_checkpoint_paths[i]));
  }
  /* TF's generate_checkpoint_state_proto: the list always ends with the current one. */
  if (st->count == 0 || strcmp(relative_to(dir, st->all_model_checkpoint_paths[st->count - 1]), model)) {
    fputs("all_model_checkpoint_paths: ", out);
    write_quoted(out, model);
  }
  return est_atomic_commit(f);
}

/* ---- latest / remove ------------------------------------------------------------------ */

est_status est_ckpt_latest(const char *dir, char *prefix, size_t size) {
  est_ckpt_state st;
  est_status s = est_ckpt_state_read(dir, &st);
  if (s == EST_ERR_NOT_FOUND) return est_error(EST_ERR_NOT_FOUND, "no checkpoint state file in %s", dir);
  if (s != EST_OK) return s;
  char full[4096], index[4200];
  if (st.model_checkpoint_path[0] == '/') snprintf(full, sizeof full, "%s", st.model_checkpoint_path);
  else s = est_path_join(full, sizeof full, dir, st.model_checkpoint_path);
  est_ckpt_state_clear(&st);
  if (s != EST_OK) return s;
  snprintf(index, sizeof index, "%s.index", full);
  if (!est_file_exists(index))
    return est_error(EST_ERR_NOT_FOUND, "%s/checkpoint names %s, but %s does not exist", dir, full, index);
  if (strlen(full) >= size)
    return est_error(EST_ERR_INVALID_ARGUMENT, "checkpoint path %s does not fit a %zu-byte buffer", full, size);
  memcpy(prefix, full, strlen(full) + 1);
  return EST_OK;
}

/* "data-00000-of-00001": 5+ digits, "-of-", 5+ digits. */
static int is_shard_suffix(const char *s) {
  if (strncmp(s, "data-", 5)) return 0;
  s += 5;
  int d = 0;
  while (isdigit((unsigned char)*s)) s++, d++;
  if (d < 5 || strncmp(s, "-of-", 4)) return 0;
  s += 4;
  d = 0;
  while (isdigit((unsigned char)*s)) s++, d++;
  return d >= 5 && *s == 0;
}

static est_status remove_file(const char *path) {
  if (unlink(path) != 0 && errno != ENOENT)
    return est_error(EST_ERR_IO, "cannot remove %s: %s", path, strerror(errno));
  return EST_OK;
}

est_status est_ckpt_remove(const char *prefix) {
  char path[4200];
  snprintf(path, sizeof path, "%s.index", prefix);
  /* Index first: once it is gone no reader sees a half-deleted checkpoint. */
  est_status st = remove_file(path);
  snprintf(path, sizeof path, "%s.meta", prefix);
  if (st == EST_OK) st = remove_file(path);
  if (st != EST_OK) return st;
  const char *slash = strrchr(prefix, '/');
  char dir[4096];
  const char *base = slash ? slash + 1 : prefix;
  if (slash) {
    size_t n = (size_t)(slash - prefix);
    if (n >= sizeof dir) return est_error(EST_ERR_INVALID_ARGUMENT, "prefix too long: %s", prefix);
    memcpy(dir, prefix, n);
    dir[n] = 0;
    if (n == 0) strcpy(dir, "/");
  } else {
    strcpy(dir, ".");
  }
  DIR *d = opendir(dir);
  if (!d) return est_error(EST_ERR_IO, "cannot list %s: %s", dir, strerror(errno));
  size_t bn = strlen(base);
  struct dirent *ent;
  while (st == EST_OK && (ent = readdir(d))) {
    if (!strncmp(ent->d_name, base, bn) && ent->d_name[bn] == '.' && is_shard_suffix(ent->d_name + bn + 1)) {
      st = est_path_join(path, sizeof path, dir, ent->d_name);
      if (st == EST_OK) st = remove_file(path);
    }
  }
  closedir(d);
  return st;
}
