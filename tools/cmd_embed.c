/* `est embed`: one sentence embedding per input line (docs/embeddings.md).
 *
 * Lines are read in windows of --window lines; inside a window they are tokenized, sorted
 * by length and run in batches of --batch_size at each batch's own length (its longest row
 * rounded up to 8), so short lines never pay for long ones; the window's vectors are then
 * written in input order and flushed. A line is its text without the '\n' (and a '\r'
 * before it); an empty line embeds "" ([CLS] [SEP]). A line longer than max_seq_length
 * tokens is cut, as the model would see it, with one log line naming it; invalid UTF-8 or a
 * NUL byte stops the run with the line and byte offset (what came before is written).
 * With --export_dir it writes the model as an embedding export for `est serve` instead. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "est/float_format.h"
#include "est/log.h"
#include "est/precision.h"
#include "est/serving.h"
#include "est/tokenizer.h"

static const char usage[] =
    "usage: est embed (--model_dir=EXPORT | --model_dir=HF_DIR | --init_checkpoint=CKPT --bert_config_file=FILE\n"
    "                 --vocab_file=FILE)\n"
    "                 [--input_file=FILE] [--output_format=json|tsv] [--pooling=mean] [--normalize] [flags...]\n"
    "       est embed --init_checkpoint=CKPT --bert_config_file=FILE --vocab_file=FILE --export_dir=DIR\n\n"
    "Sentence embeddings: one line of text in (stdin or --input_file), one line out (stdout): a JSON\n"
    "array of floats, or TAB-separated floats with --output_format=tsv, in input order. The model is\n"
    "a BERT checkpoint pooled as --pooling says (cls, max, mean, mean_sqrt_len; several: concatenated;\n"
    "default: sentence-transformers' modules.json / 1_Pooling/config.json beside the config, else mean),\n"
    "or an embedding export (--model_dir). A HuggingFace model directory (--model_dir or --init_checkpoint)\n"
    "brings its config.json, tokenizer.json or vocab.txt and sentence-transformers' files. --export_dir\n"
    "writes that export (for est serve) and exits.";

typedef struct embed_run {
  est_servable *s;
  est_featurizer *f;
  FILE *out;
  int tsv, S, W, batch_size;
  int64_t first_line;           /* 1-based number of the window's first line */
  /* one window of n lines: rows [n, S], lengths, then batches gathered in sorted order */
  int n, cap;
  int32_t *ids, *mask, *segs, *len, *order;
  int32_t *bids, *bmask, *bsegs;
  float *emb, *bemb;            /* [cap, W] in input order; [batch_size, W] */
} embed_run;

static est_status window_reserve(embed_run *r) {
  const size_t rows = (size_t)r->cap * r->S, B = (size_t)r->batch_size;
  r->ids = malloc(rows * sizeof(int32_t)), r->mask = malloc(rows * sizeof(int32_t));
  r->segs = malloc(rows * sizeof(int32_t)), r->len = malloc((size_t)r->cap * sizeof(int32_t));
  r->order = malloc((size_t)r->cap * sizeof(int32_t)), r->emb = malloc((size_t)r->cap * r->W * sizeof(float));
  r->bids = malloc(B * r->S * sizeof(int32_t)), r->bmask = malloc(B * r->S * sizeof(int32_t));
  r->bsegs = malloc(B * r->S * sizeof(int32_t)), r->bemb = malloc(B * r->W * sizeof(float));
  if (!r->ids || !r->mask || !r->segs || !r->len || !r->order || !r->emb || !r->bids || !r->bmask || !r->bsegs ||
      !r->bemb)
    return est_error(EST_ERR_NO_MEMORY, "a window of %d lines", r->cap);
  return EST_OK;
}

static void window_free(embed_run *r) {
  free(r->ids), free(r->mask), free(r->segs), free(r->len), free(r->order), free(r->emb);
  free(r->bids), free(r->bmask), free(r->bsegs), free(r->bemb);
}

/* Tokenizes one line into row r->n, checking its bytes first. */
static est_status add_line(embed_run *r, const char *text, size_t size) {
  const int64_t line = r->first_line + r->n;
  const char *nul = memchr(text, 0, size);
  if (nul) return est_error(EST_ERR_INVALID_ARGUMENT, "input line %lld: a NUL byte at byte %zu", (long long)line,
                            (size_t)(nul - text));
  size_t bad = est_utf8_first_invalid(text, size);
  if (bad != SIZE_MAX)
    return est_error(EST_ERR_INVALID_ARGUMENT, "input line %lld: invalid UTF-8 at byte %zu", (long long)line, bad);
  int tokens, len;
  est_status st = est_featurizer_count_tokens(r->f, text, NULL, &tokens);
  const size_t row = (size_t)r->n * r->S;
  if (st == EST_OK) st = est_featurizer_run(r->f, text, NULL, r->ids + row, r->mask + row, r->segs + row, &len);
  if (st != EST_OK) return est_error_prefix("input line %lld: ", (long long)line);
  if (tokens > r->S)
    EST_LOG_WARN("input line %lld: %d tokens, truncated to max_seq_length %d", (long long)line, tokens, r->S);
  r->len[r->n] = len;
  r->order[r->n] = r->n;
  r->n++;
  return EST_OK;
}

/* qsort has no context argument; est embed sorts one window at a time on one thread. */
static const int32_t *sort_lengths;
static int by_length(const void *a, const void *b) {
  int x = *(const int32_t *)a, y = *(const int32_t *)b;
  if (sort_lengths[x] != sort_lengths[y]) return sort_lengths[x] < sort_lengths[y] ? -1 : 1;
  return x < y ? -1 : x > y;
}

/* Runs the window's lines shortest first, then writes them in input order. */
static est_status window_flush(embed_run *r) {
  sort_lengths = r->len;
  qsort(r->order, (size_t)r->n, sizeof *r->order, by_length);
  const size_t S = (size_t)r->S, W = (size_t)r->W;
  for (int b0 = 0; b0 < r->n; b0 += r->batch_size) {
    const int nb = r->n - b0 < r->batch_size ? r->n - b0 : r->batch_size;
    int longest = 1;
    for (int i = 0; i < nb; i++) {
      const size_t src = (size_t)r->order[b0 + i] * S, dst = (size_t)i * S;
      memcpy(r->bids + dst, r->ids + src, S * sizeof(int32_t));
      memcpy(r->bmask + dst, r->mask + src, S * sizeof(int32_t));
      memcpy(r->bsegs + dst, r->segs + src, S * sizeof(int32_t));
      if (r->len[r->order[b0 + i]] > longest) longest = r->len[r->order[b0 + i]];
    }
    est_status st = est_servable_predict_strided(r->s, r->bids, r->bmask, r->bsegs, nb, r->S,
                                                 est_serving_bucket_length(longest, r->S), r->bemb);
    if (st != EST_OK) return st;
    for (int i = 0; i < nb; i++)
      memcpy(r->emb + (size_t)r->order[b0 + i] * W, r->bemb + (size_t)i * W, W * sizeof(float));
  }
  char num[48];
  for (int i = 0; i < r->n; i++) {
    fputs(r->tsv ? "" : "[", r->out);
    for (size_t k = 0; k < W; k++)
      fprintf(r->out, "%s%s", k ? (r->tsv ? "\t" : ", ") : "",
              est_format_float32(r->emb[i * W + k], num, sizeof num));
    fputs(r->tsv ? "\n" : "]\n", r->out);
  }
  if (fflush(r->out) != 0 || ferror(r->out))
    return est_error(EST_ERR_IO, "writing the embeddings: %s", strerror(errno));
  r->first_line += r->n;
  r->n = 0;
  return EST_OK;
}

static est_status embed_lines(embed_run *r, FILE *in) {
  char *line = NULL;
  size_t cap = 0;
  ssize_t got;
  est_status st = EST_OK;
  while (st == EST_OK && (got = getline(&line, &cap, in)) >= 0) {
    size_t n = (size_t)got;
    if (n && line[n - 1] == '\n') line[--n] = 0;
    if (n && line[n - 1] == '\r') line[--n] = 0;
    st = add_line(r, line, n);
    if (st != EST_OK && r->n) { /* the lines before the bad one are still written */
      char msg[1024];
      snprintf(msg, sizeof msg, "%s", est_error_message());
      est_status code = st;
      if ((st = window_flush(r)) == EST_OK) st = est_error(code, "%s", msg);
    } else if (st == EST_OK && r->n == r->cap) {
      st = window_flush(r);
    }
  }
  if (st == EST_OK && ferror(in)) st = est_error(EST_ERR_IO, "reading the input: %s", strerror(errno));
  if (st == EST_OK && r->n) st = window_flush(r);
  free(line);
  return st;
}

int est_cmd_embed(int argc, char **argv) {
  est_embed_model_options o = {.do_lower_case = true, .normalize = -1};
  const char *input = NULL, *format = "json", *export_dir = NULL, *precision = NULL;
  int64_t max_seq = 0, batch = 32, window = 1024, threads = 0;
  bool lower = true, normalize = false;
  est_flag flags[] = {
    EST_FLAG_STRING("model_dir", &o.model_dir, "An embedding export (base or version directory).", 0),
    EST_FLAG_STRING("init_checkpoint", &o.init_checkpoint, "BERT checkpoint (TF) to embed with.", 0),
    EST_FLAG_STRING("bert_config_file", &o.bert_config_file, "Its bert_config.json.", 0),
    EST_FLAG_STRING("vocab_file", &o.vocab_file, "Its vocab.txt.", 0),
    EST_FLAG_BOOL("do_lower_case", &lower, "Lower-case the input (uncased models).", 0),
    EST_FLAG_STRING("pooling", &o.pooling, "cls, max, mean, mean_sqrt_len, or several comma-separated "
                    "(concatenated). Default: sentence-transformers' files beside the config, else mean.", 0),
    /* their defaults are worked out from the model's files (est_embed_model_meta): --help says how */
    EST_FLAG_RULE(EST_FLAG_TYPE_BOOL, "normalize", &normalize,
                  "L2-normalise each vector; --nonormalize: never.",
                  "on when sentence-transformers' modules.json beside the model's config lists a Normalize "
                  "module (all-MiniLM-L6-v2's does), else off; an export (--model_dir) as its est_model.json "
                  "records"),
    EST_FLAG_RULE(EST_FLAG_TYPE_INT, "max_seq_length", &max_seq,
                  "Tokens per line, [CLS] and [SEP] included; longer lines are cut.",
                  "sentence_bert_config.json's beside the model's config, else 128; an export (--model_dir) as "
                  "its est_model.json records"),
    EST_FLAG_INT("batch_size", &batch, "Lines per forward pass.", 0),
    EST_FLAG_INT("window", &window, "Lines read, sorted by length and written at a time.", 0),
    EST_FLAG_STRING("input_file", &input, "Text, one input per line (default: stdin).", 0),
    EST_FLAG_STRING("output_format", &format, "json (one array per line) or tsv.", 0),
    EST_FLAG_STRING("export_dir", &export_dir, "Write the model as an embedding export under DIR (for est serve) "
                    "instead of embedding.", 0),
    EST_CLI_RUNTIME_FLAGS(&threads, &precision),
  };
  const int nflags = (int)(sizeof flags / sizeof *flags);
  int rc = est_cli_parse("embed", usage, flags, nflags, argc, argv, NULL, NULL, 0, 0);
  if (rc >= 0) return rc;
  o = est_embed_model_resolve(&o); /* a HuggingFace model directory is a checkpoint, not an export */
  int ok = 1;
  if (strcmp(format, "json") && strcmp(format, "tsv"))
    ok = 0, est_error(EST_ERR_INVALID_ARGUMENT, "--output_format=%s: must be json or tsv", format);
  else if (batch < 1 || batch > 65536)
    ok = 0, est_error(EST_ERR_INVALID_ARGUMENT, "--batch_size=%lld: must be in [1, 65536]", (long long)batch);
  else if (window < 1 || window > 1 << 20)
    ok = 0, est_error(EST_ERR_INVALID_ARGUMENT, "--window=%lld: must be in [1, 1048576]", (long long)window);
  else if (max_seq < 0 || max_seq > 1 << 20)
    ok = 0, est_error(EST_ERR_INVALID_ARGUMENT, "--max_seq_length=%lld: out of range", (long long)max_seq);
  else if (!o.model_dir == !o.init_checkpoint && !export_dir)
    ok = 0, est_error(EST_ERR_INVALID_ARGUMENT, "give --model_dir (an embedding export) or --init_checkpoint with "
                      "--bert_config_file and --vocab_file");
  else if (export_dir && o.model_dir) ok = 0, est_error(EST_ERR_INVALID_ARGUMENT, "--export_dir exports a checkpoint; "
                                                        "--model_dir is already an export");
  if ((rc = est_cli_apply_runtime_flags("embed", ok, precision, threads)) >= 0) return rc;
  o.do_lower_case = lower;
  o.normalize = -1; /* unset: as the model's files say */
  for (int i = 0; i < nflags; i++)
    if (!strcmp(flags[i].name, "normalize") && flags[i].is_set) o.normalize = normalize;
  o.max_seq_length = (int)max_seq;
  o.max_batch = (int)batch;

  est_status st;
  if (export_dir) {
    est_model_meta meta;
    char version_dir[4096];
    st = est_embed_model_meta(&meta, &o);
    if (st == EST_OK && precision) snprintf(meta.precision, sizeof meta.precision, "%s", precision);
    if (st == EST_OK) st = est_export_write(export_dir, o.init_checkpoint, &meta, o.vocab_file, version_dir,
                                            sizeof version_dir);
    est_model_meta_clear(&meta);
    if (st == EST_OK) printf("%s\n", version_dir);
    if (st != EST_OK) fprintf(stderr, "est embed: error: %s\n", est_error_message());
    return st == EST_OK ? 0 : 1;
  }
  embed_run r = {.out = stdout, .tsv = !strcmp(format, "tsv"), .batch_size = (int)batch, .first_line = 1,
                 .cap = (int)window};
  FILE *in = input ? fopen(input, "rb") : stdin;
  st = in ? EST_OK : est_error(EST_ERR_IO, "--input_file=%s: %s", input, strerror(errno));
  if (st == EST_OK) st = est_embed_model_open(&r.s, &o);
  /* a checkpoint has no recorded precision: fp32 unless --precision says otherwise */
  if (st == EST_OK) st = est_cli_apply_model_precision(precision || o.model_dir ? precision : "fp32", r.s);
  if (st == EST_OK) st = est_featurizer_create(&r.f, r.s);
  if (st == EST_OK) {
    r.S = est_servable_meta(r.s)->max_seq_length;
    r.W = est_servable_output_width(r.s);
    st = window_reserve(&r);
  }
  if (st == EST_OK) st = embed_lines(&r, in);
  if (in && in != stdin) fclose(in);
  window_free(&r);
  est_featurizer_free(r.f);
  est_servable_free(r.s);
  if (st != EST_OK) {
    fprintf(stderr, "est embed: error: %s\n", est_error_message());
    return 1;
  }
  return 0;
}
