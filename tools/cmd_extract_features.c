/* `est extract_features`: google-research/bert's extract_features.py, same flags, same
 * input lines ("text_a" or "text_a ||| text_b") and the same JSON lines out: per line its
 * linex_index, then per token (every real token, [CLS] and [SEP] included) the listed
 * encoder layers' values rounded to 6 places. Streams --batch_size lines at a time; the
 * output file is written atomically. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "est/classifier_features.h"
#include "est/file.h"
#include "est/flags.h"
#include "est/log.h"
#include "est/precision.h"
#include "est/serving.h"
#include "est/threads.h"
#include "est/tokenizer.h"

static const char usage[] =
    "usage: est extract_features --input_file=FILE --output_file=FILE --bert_config_file=FILE\n"
    "                            --init_checkpoint=CKPT --vocab_file=FILE [--layers=-1,-2,-3,-4]\n\n"
    "Pre-computed BERT feature vectors, as google-research/bert's extract_features.py: one input\n"
    "line per example (\"text_a\" or \"text_a ||| text_b\"), one JSON line out per example.";

/* Python's str.strip() for the ASCII whitespace a text line can carry. */
static char *strip(char *s) {
  while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r' || *s == '\v' || *s == '\f') s++;
  size_t n = strlen(s);
  while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == '\v' ||
               s[n - 1] == '\f'))
    s[--n] = 0;
  return s;
}

/* "--layers=-1,-2": python indexes into all_encoder_layers (negative from the end). */
static est_status parse_layers(const char *text, int num_hidden, int *idx, int *resolved, int *n) {
  *n = 0;
  const char *p = text;
  while (*p) {
    char *end;
    long v = strtol(p, &end, 10);
    if (end == p || (*end && *end != ','))
      return est_error(EST_ERR_INVALID_ARGUMENT, "--layers=%s: not a comma-separated list of integers", text);
    if (v < -num_hidden || v >= num_hidden)
      return est_error(EST_ERR_INVALID_ARGUMENT, "--layers=%s: layer %ld outside the model's %d layers", text, v,
                       num_hidden);
    if (*n >= 64) return est_error(EST_ERR_INVALID_ARGUMENT, "--layers=%s: at most 64 layers", text);
    idx[*n] = (int)v;
    resolved[*n] = v < 0 ? (int)(num_hidden + v) : (int)v;
    (*n)++;
    p = *end ? end + 1 : end;
  }
  if (*n == 0) return est_error(EST_ERR_INVALID_ARGUMENT, "--layers: empty");
  return EST_OK;
}

typedef struct xf {
  est_feature_converter conv;
  const est_vocab *vocab;           /* Google's, or NULL: tok's tokenizer.json names the ids */
  const est_tokenizer *tok;
  est_encoder_layers *enc;
  int S, H, B, nlayers, ndistinct;
  int idx[64], slot[64], distinct[64];
  int32_t *ids, *mask, *segs;
  float *out[64];
  int n;
  int64_t first_index;
} xf;

/* Runs the x->n gathered lines and writes their JSON lines to out (the atomic temp file of
 * `path`, named in a write error). */
static est_status run_batch(xf *x, FILE *out, const char *path) {
  if (!x->n) return EST_OK;
  est_status st = est_encoder_layers_run(x->enc, x->ids, x->mask, x->segs, x->n, x->S, x->out);
  if (st != EST_OK) return st;
  const char *tokens[1024];
  const float *values[64];
  for (int i = 0; i < x->n; i++) {
    int len = 0;
    for (int t = 0; t < x->S; t++) {
      if (!x->mask[(size_t)i * x->S + t]) continue;
      const int32_t id = x->ids[(size_t)i * x->S + t];
      const char *tok = x->vocab ? est_vocab_token(x->vocab, id) : est_tokenizer_id_to_token(x->tok, id);
      tokens[len++] = tok ? tok : "[UNK]";
    }
    for (int k = 0; k < x->nlayers; k++) values[k] = x->out[x->slot[k]] + (size_t)i * x->S * x->H;
    est_extract_features_write(out, x->first_index + i, tokens, len, x->idx, x->nlayers, values, x->H);
  }
  x->first_index += x->n;
  x->n = 0;
  /* stdio keeps no errno of its own: the failed write's is still errno here (nothing that
   * sets errno runs between the writes of one batch). */
  if (ferror(out)) return est_error(EST_ERR_IO, "writing %s: %s", path, errno ? strerror(errno) : "write error");
  return EST_OK;
}

int est_cmd_extract_features(int argc, char **argv) {
  const char *input_file = NULL, *output_file = NULL, *layers = "-1,-2,-3,-4", *bert_config_file = NULL;
  const char *init_checkpoint = NULL, *vocab_file = NULL, *master = NULL, *precision = "fp32";
  int64_t max_seq_length = 128, batch_size = 32, num_tpu_cores = 8, num_threads = 0;
  bool do_lower_case = true, use_tpu = false, one_hot = false;
  est_flag flags[] = {
    EST_FLAG_STRING("input_file", &input_file, "", 1),
    EST_FLAG_STRING("output_file", &output_file, "", 1),
    EST_FLAG_STRING("layers", &layers, "", 0),
    EST_FLAG_STRING("bert_config_file", &bert_config_file,
                    "The config json file corresponding to the pre-trained BERT model. This specifies the model "
                    "architecture.", 1),
    EST_FLAG_INT("max_seq_length", &max_seq_length,
                 "The maximum total input sequence length after WordPiece tokenization. Sequences longer than "
                 "this will be truncated, and sequences shorter than this will be padded.", 0),
    EST_FLAG_STRING("init_checkpoint", &init_checkpoint, "Initial checkpoint (usually from a pre-trained BERT model).", 1),
    EST_FLAG_STRING("vocab_file", &vocab_file, "The vocabulary file that the BERT model was trained on.", 1),
    EST_FLAG_BOOL("do_lower_case", &do_lower_case,
                  "Whether to lower case the input text. Should be True for uncased models and False for cased "
                  "models.", 0),
    EST_FLAG_INT("batch_size", &batch_size, "Batch size for predictions.", 0),
    EST_FLAG_BOOL("use_tpu", &use_tpu, "Whether to use TPU or GPU/CPU. [TPU only: accepted and ignored]", 0),
    EST_FLAG_STRING("master", &master, "If using a TPU, the address of the master. [TPU only: accepted and ignored]", 0),
    EST_FLAG_INT("num_tpu_cores", &num_tpu_cores, "Only used if `use_tpu` is True. [TPU only: accepted and ignored]", 0),
    EST_FLAG_BOOL("use_one_hot_embeddings", &one_hot, "If True, tf.one_hot will be used for embedding lookups. "
                  "[est: the same numbers either way; ignored]", 0),
    EST_CLI_RUNTIME_FLAGS(&num_threads, &precision),
  };
  int rc = EST_CLI_PARSE_FLAGS("extract_features", usage, flags, argc, argv, 0);
  if (rc >= 0) return rc;
  est_flags_result r = EST_FLAGS_OK; /* the checks below turn it into an error */
  if (r == EST_FLAGS_OK && (batch_size < 1 || batch_size > 65536))
    r = EST_FLAGS_ERROR, est_error(EST_ERR_INVALID_ARGUMENT, "--batch_size=%lld: must be in [1, 65536]", (long long)batch_size);
  if ((rc = est_cli_apply_runtime_flags("extract_features", r == EST_FLAGS_OK, precision, num_threads)) >= 0) return rc;

  est_precision prec = EST_PRECISION_FP32; /* checked above; the encoder resolves it */
  est_precision_parse(precision, &prec);
  xf x = {.B = (int)batch_size};
  est_bert_config cfg;
  est_tokenizer *tok = NULL;
  est_atomic_file *af = NULL;
  FILE *in = NULL;
  static const char *const labels[1] = {"0"};
  int resolved[64];
  est_status st = est_bert_config_from_json_file(&cfg, bert_config_file);
  if (st != EST_OK) est_error_prefix("--bert_config_file: ");
  if (st == EST_OK && (max_seq_length < 3 || max_seq_length > cfg.max_position_embeddings || max_seq_length > 1024))
    st = est_error(EST_ERR_INVALID_ARGUMENT, "--max_seq_length=%lld: must be in [3, %d]", (long long)max_seq_length,
                   cfg.max_position_embeddings < 1024 ? cfg.max_position_embeddings : 1024);
  if (st == EST_OK) st = parse_layers(layers, cfg.num_hidden_layers, x.idx, resolved, &x.nlayers);
  if (st == EST_OK) st = est_tokenizer_open_any(&tok, vocab_file, do_lower_case);
  if (st == EST_OK) st = est_feature_converter_init(&x.conv, tok, labels, 1, (int)max_seq_length);
  if (st == EST_OK) {
    x.vocab = est_tokenizer_vocab(tok);
    x.tok = tok;
    x.S = (int)max_seq_length;
    x.H = cfg.hidden_size;
    for (int k = 0; k < x.nlayers; k++) { /* each distinct layer runs once */
      int j = 0;
      while (j < x.ndistinct && x.distinct[j] != resolved[k]) j++;
      if (j == x.ndistinct) x.distinct[x.ndistinct++] = resolved[k];
      x.slot[k] = j;
    }
    st = est_encoder_layers_open(&x.enc, &cfg, init_checkpoint, x.distinct, x.ndistinct, x.B, x.S, prec);
    if (st != EST_OK) est_error_prefix("--init_checkpoint=%s: ", init_checkpoint);
  }
  size_t rows = (size_t)x.B * x.S;
  if (st == EST_OK) {
    x.ids = malloc(rows * sizeof(int32_t));
    x.mask = malloc(rows * sizeof(int32_t));
    x.segs = malloc(rows * sizeof(int32_t));
    if (!x.ids || !x.mask || !x.segs) st = est_error(EST_ERR_NO_MEMORY, "buffers");
    for (int k = 0; st == EST_OK && k < x.ndistinct; k++)
      if (!(x.out[k] = malloc(rows * x.H * sizeof(float)))) st = est_error(EST_ERR_NO_MEMORY, "buffers");
  }
  if (st == EST_OK && !(in = fopen(input_file, "rb")))
    st = est_error(EST_ERR_NOT_FOUND, "--input_file=%s: cannot open", input_file);
  if (st == EST_OK) st = est_atomic_open(&af, output_file);
  char *line = NULL;
  size_t cap = 0;
  int64_t lineno = 0;
  while (st == EST_OK && getline(&line, &cap, in) >= 0) {
    char *text = strip(line), *text_b = NULL;
    /* re.match(r"^(.*) \|\|\| (.*)$"): the greedy first group splits at the LAST " ||| ". */
    char *sep = NULL;
    for (char *p = strstr(text, " ||| "); p; p = strstr(p + 1, " ||| ")) sep = p;
    if (sep) *sep = 0, text_b = sep + 5;
    char guid[32];
    snprintf(guid, sizeof guid, "%lld", (long long)lineno);
    est_input_example ex = {.guid = guid, .text_a = text, .text_b = text_b, .label = "0", .source = input_file,
                            .line = lineno + 1};
    size_t off = (size_t)x.n * x.S;
    int32_t label, real;
    st = est_convert_single_example(&x.conv, lineno, &ex, x.ids + off, x.mask + off, x.segs + off, &label, &real);
    lineno++;
    if (st == EST_OK && ++x.n == x.B) st = run_batch(&x, est_atomic_stream(af), output_file);
  }
  if (st == EST_OK && ferror(in)) st = est_error(EST_ERR_IO, "reading %s failed", input_file);
  if (st == EST_OK) st = run_batch(&x, est_atomic_stream(af), output_file);
  if (st == EST_OK) {
    st = est_atomic_commit(af);
    af = NULL;
  }
  est_atomic_abort(af);
  if (st == EST_OK) EST_LOG_INFO("wrote %lld lines to %s", (long long)lineno, output_file);
  free(line);
  if (in) fclose(in);
  free(x.ids), free(x.mask), free(x.segs);
  for (int k = 0; k < x.ndistinct; k++) free(x.out[k]);
  est_encoder_layers_free(x.enc);
  est_tokenizer_free(tok);
  if (st != EST_OK) {
    fprintf(stderr, "est extract_features: error: %s\n", est_error_message());
    return 1;
  }
  return 0;
}
