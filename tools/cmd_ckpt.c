/* `est ckpt ls|get|convert`: look inside TF checkpoints and safetensors files, and convert
 * between them. A path ending in ".safetensors" is a safetensors file; anything else is a
 * TF checkpoint prefix (model.ckpt-343 for model.ckpt-343.index + .data-*). */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "est/ckpt.h"
#include "est/file.h"
#include "est/flags.h"
#include "est/hf_model.h"
#include "est/safetensors.h"

static const char *USAGE =
    "usage: est ckpt ls PREFIX|FILE.safetensors\n"
    "       est ckpt get PREFIX|FILE.safetensors NAME\n"
    "       est ckpt convert IN OUT [--skip_strings]\n"
    "       est ckpt export_hf PREFIX OUT_DIR --bert_config_file=F --vocab_file=V [--labels=A,B,...]\n"
    "                          [--do_lower_case=true]\n\n"
    "PREFIX names a TF checkpoint (model.ckpt-343 for model.ckpt-343.index + .data-*); a\n"
    "directory means its latest checkpoint (from its `checkpoint` file, or its only\n"
    "*.index when it has no such file), and the .index file's own path is accepted too.\n\n"
    "ls:      one line per tensor, sorted by name: name<TAB>dtype<TAB>[d0,d1,...]\n"
    "         (dtype as TF names it: float32, float16, bfloat16, int32, int64, string...;\n"
    "         [] for a scalar). ls reads only the index (or the safetensors header).\n"
    "get:     the tensor's values, flattened in row-major order, as one JSON array.\n"
    "         Floats print with %.9g (%.17g for float64); NaN and infinities as NaN,\n"
    "         Infinity, -Infinity (as Python's json module does); bool as true/false.\n"
    "         Strings that are valid UTF-8 print as JSON strings (\", \\ and control\n"
    "         characters escaped); any other string prints as {\"base64\": \"...\"}.\n"
    "convert: TF checkpoint -> safetensors when OUT ends in .safetensors, safetensors -> TF\n"
    "         checkpoint (OUT is the prefix) when IN does. Tensor names are kept as they\n"
    "         are. safetensors cannot hold strings: a string tensor is an error unless\n"
    "         --skip_strings drops it. safetensors __metadata__ is not carried into TF.\n"
    "export_hf: a HuggingFace model directory from a TF checkpoint (docs/hf.md section 6): config.json,\n"
    "         model.safetensors, vocab.txt, tokenizer_config.json, special_tokens_map.json;\n"
    "         BertForSequenceClassification (id2label from --labels, else LABEL_i),\n"
    "         BertForQuestionAnswering, BertForPreTraining or BertModel by the variables.\n";

static int is_safetensors(const char *path) {
  size_t n = strlen(path);
  return n >= 12 && !strcmp(path + n - 12, ".safetensors");
}

static int fail(const char *what) {
  fprintf(stderr, "est ckpt: %s%s\n", what ? what : "", est_error_message());
  return 1;
}

/* A source of tensors: a TF checkpoint or a safetensors file, behind one small API. */
typedef struct source {
  est_ckpt_reader *ckpt;
  est_safetensors *st;
} source;

/* A directory without a `checkpoint` state file (a downloaded bert_model.ckpt, say) that
 * holds exactly one *.index: that checkpoint. Several: an error listing two of them. */
static est_status single_index_in(const char *dir, char *prefix, size_t size) {
  DIR *d = opendir(dir);
  if (!d) return est_error(EST_ERR_NOT_FOUND, "cannot open directory %s", dir);
  char first[1024] = "", second[1024] = "";
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t n = strlen(e->d_name);
    if (n <= 6 || strcmp(e->d_name + n - 6, ".index") || n - 6 >= sizeof first) continue;
    char *slot = first[0] ? second : first;
    memcpy(slot, e->d_name, n - 6);
    slot[n - 6] = 0;
    if (second[0]) break;
  }
  closedir(d);
  if (!first[0]) return est_error(EST_ERR_NOT_FOUND, "%s has no `checkpoint` state file and no *.index file", dir);
  if (second[0])
    return est_error(EST_ERR_INVALID_ARGUMENT,
                     "%s has no `checkpoint` state file and several checkpoints (%s, %s, ...): name one prefix", dir,
                     first, second);
  return est_path_join(prefix, size, dir, first);
}

/* Like tf.train.load_checkpoint: a directory means its latest checkpoint, and a path to
 * the .index file means its prefix. */
static est_status resolve_prefix(const char *path, char *prefix, size_t size) {
  size_t n = strlen(path);
  if (est_is_directory(path)) {
    est_status st = est_ckpt_latest(path, prefix, size);
    char state_file[4200];
    if (est_path_join(state_file, sizeof state_file, path, "checkpoint") != EST_OK) return est_error_code();
    if (st == EST_ERR_NOT_FOUND && !est_file_exists(state_file)) st = single_index_in(path, prefix, size);
    return st;
  }
  if (n > 6 && n < size && !strcmp(path + n - 6, ".index") && est_file_exists(path)) {
    memcpy(prefix, path, n - 6);
    prefix[n - 6] = 0;
  } else {
    snprintf(prefix, size, "%s", path);
  }
  return EST_OK;
}

static est_status source_open(source *s, const char *path) {
  memset(s, 0, sizeof *s);
  if (is_safetensors(path)) return est_safetensors_open(&s->st, path);
  char prefix[4096];
  est_status st = resolve_prefix(path, prefix, sizeof prefix);
  return st == EST_OK ? est_ckpt_reader_open(&s->ckpt, prefix) : st;
}

static void source_close(source *s) {
  est_ckpt_reader_close(s->ckpt);
  est_safetensors_close(s->st);
}

static size_t source_count(const source *s) {
  return s->ckpt ? est_ckpt_reader_count(s->ckpt) : est_safetensors_count(s->st);
}

static const char *source_name(const source *s, size_t i) {
  return s->ckpt ? est_ckpt_reader_name(s->ckpt, i) : est_safetensors_name(s->st, i);
}

static est_status source_info(const source *s, const char *name, est_dtype *dt, int *rank, int64_t *dims) {
  return s->ckpt ? est_ckpt_reader_info(s->ckpt, name, dt, rank, dims)
                 : est_safetensors_info(s->st, name, dt, rank, dims);
}

static est_status source_read(source *s, const char *name, est_tensor *t) {
  return s->ckpt ? est_ckpt_reader_read(s->ckpt, name, t) : est_safetensors_read(s->st, name, t);
}

static int cmd_ls(const char *path) {
  source s;
  if (source_open(&s, path) != EST_OK) return fail(NULL);
  for (size_t i = 0; i < source_count(&s); i++) {
    const char *name = source_name(&s, i);
    est_tensor t = {0};
    if (source_info(&s, name, &t.dtype, &t.rank, t.dims) != EST_OK) {
      source_close(&s);
      return fail(NULL);
    }
    char shape[512], other[32];
    const char *dt = est_dtype_name(t.dtype);
    if (s.st && t.dtype == EST_DT_INVALID) dt = est_safetensors_dtype_string(s.st, name);
    if (!dt) {
      snprintf(other, sizeof other, "dtype_%d", (int)t.dtype);
      dt = other;
    }
    printf("%s\t%s\t%s\n", name, dt, est_shape_string(&t, shape, sizeof shape));
  }
  source_close(&s);
  return fflush(stdout) == 0 ? 0 : 1;
}

static void print_float(double v, const char *fmt) {
  if (isnan(v)) fputs("NaN", stdout);
  else if (isinf(v)) fputs(v > 0 ? "Infinity" : "-Infinity", stdout);
  else printf(fmt, v);
}

static int valid_utf8(const uint8_t *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    uint8_t c = s[i];
    size_t len;
    uint32_t cp;
    if (c < 0x80) {
      i++;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      len = 2;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return 0;
    }
    if (i + len > n) return 0;
    for (size_t k = 1; k < len; k++) {
      if ((s[i + k] & 0xc0) != 0x80) return 0;
      cp = cp << 6 | (s[i + k] & 0x3f);
    }
    /* Overlong forms, surrogates and values past U+10FFFF are not UTF-8. */
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
      return 0;
    i += len;
  }
  return 1;
}

static void print_string(const est_bytes *b) {
  if (!valid_utf8(b->data, b->size)) {
    static const char *tbl = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    fputs("{\"base64\": \"", stdout);
    for (size_t i = 0; i < b->size; i += 3) {
      uint32_t v = (uint32_t)b->data[i] << 16;
      if (i + 1 < b->size) v |= (uint32_t)b->data[i + 1] << 8;
      if (i + 2 < b->size) v |= b->data[i + 2];
      putchar(tbl[v >> 18 & 63]);
      putchar(tbl[v >> 12 & 63]);
      putchar(i + 1 < b->size ? tbl[v >> 6 & 63] : '=');
      putchar(i + 2 < b->size ? tbl[v & 63] : '=');
    }
    fputs("\"}", stdout);
    return;
  }
  putchar('"');
  for (size_t i = 0; i < b->size; i++) {
    uint8_t c = b->data[i];
    if (c == '"' || c == '\\') printf("\\%c", c);
    else if (c == '\n') fputs("\\n", stdout);
    else if (c == '\t') fputs("\\t", stdout);
    else if (c == '\r') fputs("\\r", stdout);
    else if (c < 0x20 || c == 0x7f) printf("\\u%04x", c);
    else putchar(c);
  }
  putchar('"');
}

static int cmd_get(const char *path, const char *name) {
  source s;
  if (source_open(&s, path) != EST_OK) return fail(NULL);
  est_tensor t;
  if (source_read(&s, name, &t) != EST_OK) {
    source_close(&s);
    return fail(NULL);
  }
  int64_t n = est_tensor_num_elements(&t);
  putchar('[');
  for (int64_t i = 0; i < n; i++) {
    if (i) fputs(", ", stdout);
    switch (t.dtype) {
    case EST_DT_FLOAT: print_float(((float *)t.data)[i], "%.9g"); break;
    case EST_DT_DOUBLE: print_float(((double *)t.data)[i], "%.17g"); break;
    case EST_DT_HALF: print_float(est_half_to_float(((uint16_t *)t.data)[i]), "%.9g"); break;
    case EST_DT_BFLOAT16: print_float(est_bfloat16_to_float(((uint16_t *)t.data)[i]), "%.9g"); break;
    case EST_DT_INT32: printf("%d", ((int32_t *)t.data)[i]); break;
    case EST_DT_INT64: printf("%lld", (long long)((int64_t *)t.data)[i]); break;
    case EST_DT_INT16: printf("%d", ((int16_t *)t.data)[i]); break;
    case EST_DT_INT8: printf("%d", ((int8_t *)t.data)[i]); break;
    case EST_DT_UINT8: printf("%u", ((uint8_t *)t.data)[i]); break;
    case EST_DT_UINT16: printf("%u", ((uint16_t *)t.data)[i]); break;
    case EST_DT_UINT32: printf("%u", ((uint32_t *)t.data)[i]); break;
    case EST_DT_UINT64: printf("%llu", (unsigned long long)((uint64_t *)t.data)[i]); break;
    case EST_DT_BOOL: fputs(((uint8_t *)t.data)[i] ? "true" : "false", stdout); break;
    case EST_DT_STRING: print_string(&((est_bytes *)t.data)[i]); break;
    default: break;
    }
  }
  puts("]");
  est_tensor_free(&t);
  source_close(&s);
  return fflush(stdout) == 0 ? 0 : 1;
}

/* Reads every tensor of `in` and writes them to `out` in the other format. */
static int cmd_convert(const char *in, const char *out, int skip_strings) {
  int to_safetensors = is_safetensors(out);
  if (to_safetensors == is_safetensors(in)) {
    fprintf(stderr, "est ckpt: convert needs exactly one side ending in .safetensors (got %s -> %s)\n\n%s", in,
            out, USAGE);
    return 2;
  }
  source s;
  if (source_open(&s, in) != EST_OK) return fail(NULL);
  size_t n = source_count(&s);
  est_tensor *ts = calloc(n ? n : 1, sizeof *ts);
  if (!ts) {
    source_close(&s);
    fprintf(stderr, "est ckpt: out of memory\n");
    return 1;
  }
  est_safetensors_writer *sw = NULL;
  est_ckpt_writer *cw = NULL;
  est_status st = to_safetensors ? est_safetensors_writer_open(&sw, out) : est_ckpt_writer_open(&cw, out);
  size_t kept = 0;
  for (size_t i = 0; i < n && st == EST_OK; i++) {
    const char *name = source_name(&s, i);
    est_dtype dt = EST_DT_INVALID;
    st = source_info(&s, name, &dt, NULL, NULL);
    if (st != EST_OK) break;
    if (to_safetensors && dt == EST_DT_STRING) {
      if (skip_strings) {
        fprintf(stderr, "est ckpt: skipping string tensor '%s'\n", name);
        continue;
      }
      st = est_error(EST_ERR_INVALID_ARGUMENT,
                     "'%s' is a string tensor, which safetensors cannot hold (use --skip_strings to drop it)",
                     name);
      break;
    }
    st = source_read(&s, name, &ts[kept]);
    if (st != EST_OK) break;
    kept++; /* the writers keep pointers: the tensors live until finish */
    st = to_safetensors ? est_safetensors_writer_add(sw, name, &ts[kept - 1])
                        : est_ckpt_writer_add(cw, name, &ts[kept - 1]);
  }
  if (st == EST_OK) {
    st = to_safetensors ? est_safetensors_writer_finish(sw) : est_ckpt_writer_finish(cw);
  } else {
    est_safetensors_writer_abort(sw);
    est_ckpt_writer_abort(cw);
  }
  for (size_t i = 0; i < kept; i++) est_tensor_free(&ts[i]);
  free(ts);
  source_close(&s);
  if (st != EST_OK) return fail(NULL);
  fprintf(stderr, "est ckpt: wrote %zu tensors to %s\n", kept, out);
  return 0;
}

/* export_hf: the checkpoint (a directory: its latest) as a HuggingFace model directory. */
static int cmd_export_hf(const char *in, const char *out, const char *config_file, const char *vocab_file,
                         const char *labels, bool do_lower_case) {
  if (!config_file || !vocab_file) {
    fprintf(stderr, "est ckpt: export_hf needs --bert_config_file and --vocab_file\n\n%s", USAGE);
    return 2;
  }
  char prefix[4096];
  est_bert_config cfg;
  if (resolve_prefix(in, prefix, sizeof prefix) != EST_OK ||
      est_bert_config_from_json_file(&cfg, config_file) != EST_OK)
    return fail(NULL);
  char *copy = labels ? strdup(labels) : NULL, *names[1024], *save = NULL;
  int n = 0;
  for (char *t = copy ? strtok_r(copy, ",", &save) : NULL; t && n < 1024; t = strtok_r(NULL, ",", &save))
    names[n++] = t;
  est_hf_export_params p = {.cfg = &cfg, .vocab_file = vocab_file, .do_lower_case = do_lower_case,
                            .labels = copy ? (const char *const *)names : NULL, .num_labels = n};
  est_status st = est_hf_export(prefix, out, &p);
  free(copy);
  if (st != EST_OK) return fail(NULL);
  fprintf(stderr, "est ckpt: wrote %s\n", out);
  return 0;
}

int est_cmd_ckpt(int argc, char **argv) {
  bool skip_strings = false, do_lower_case = true;
  const char *config_file = NULL, *vocab_file = NULL, *labels = NULL;
  est_flag flags[] = {
    EST_FLAG_BOOL("skip_strings", &skip_strings, "convert: drop string tensors instead of failing.", 0),
    EST_FLAG_STRING("bert_config_file", &config_file, "export_hf: the checkpoint's bert_config.json.", 0),
    EST_FLAG_STRING("vocab_file", &vocab_file, "export_hf: its vocab.txt, copied.", 0),
    EST_FLAG_STRING("labels", &labels, "export_hf: comma-separated label names, in output order.", 0),
    EST_FLAG_BOOL("do_lower_case", &do_lower_case, "export_hf: tokenizer_config.json's do_lower_case.", 0),
  };
  const int nflags = (int)(sizeof flags / sizeof *flags);
  char *pos[4];
  int npos = 0;
  int rc = est_cli_parse("ckpt", USAGE, flags, nflags, argc, argv, pos, &npos, 4, 1);
  if (rc >= 0) return rc;
  const char *sub = npos ? pos[0] : "";
  int want = !strcmp(sub, "ls") ? 2
             : !strcmp(sub, "get") || !strcmp(sub, "convert") || !strcmp(sub, "export_hf") ? 3
                                                                                              : -1;
  if (want < 0 || npos != want) {
    fprintf(stderr, "est ckpt: %s\n\n%s",
            npos == 0 ? "missing subcommand (ls, get, convert or export_hf)"
            : want < 0 ? "unknown subcommand"
            : npos < want ? "missing arguments"
                          : "too many arguments",
            USAGE);
    return 2;
  }
  if (skip_strings && strcmp(sub, "convert")) {
    fprintf(stderr, "est ckpt: --skip_strings only applies to convert\n\n%s", USAGE);
    return 2;
  }
  if (!strcmp(sub, "ls")) return cmd_ls(pos[1]);
  if (!strcmp(sub, "get")) return cmd_get(pos[1], pos[2]);
  if (!strcmp(sub, "export_hf")) return cmd_export_hf(pos[1], pos[2], config_file, vocab_file, labels, do_lower_case);
  return cmd_convert(pos[1], pos[2], skip_strings);
}
