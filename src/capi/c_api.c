/* est/c_api.h: whole batches in one call for a foreign-function binding (the Python package,
 * docs/python.md). Each function is a loop over what est already has — the tokenizer.json
 * pipeline, est embed's windows, est serve's served batches — so a binding's results are the
 * command line's. */
#include "est/c_api.h"

#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/log.h"
#include "est/precision.h"
#include "est/threads.h"
#include "est/tokenizer.h"

int est_capi_version(void) { return EST_CAPI_VERSION; }

/* The calling thread's OpenMP team size for the model calls that follow (est/c_api.h). */
static void use_threads(int threads) {
  if (threads < 0) threads = 0;
  est_set_num_threads(threads);
}

/* ---- logging --------------------------------------------------------------------------- */

/* est_log writes whole lines "X MMDD HH:MM:SS.mmm body\n" under its own lock; the cookie
 * stream gathers bytes up to each '\n' and hands the body (the binding's logger stamps its
 * own time) to the callback with the level its letter says. */
static est_capi_log_fn log_fn;
static FILE *log_stream;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char log_line[8192];
static size_t log_len;

static void log_emit(void) {
  log_line[log_len] = 0;
  int level = EST_LOG_INFO;
  const char *body = log_line;
  static const char letters[] = "DIWE";
  const char *at = log_len ? strchr(letters, log_line[0]) : NULL;
  /* "I1208 23:10:00.123 " is 19 bytes */
  if (at && log_len >= 19 && log_line[5] == ' ' && log_line[18] == ' ') level = (int)(at - letters), body += 19;
  if (log_fn) log_fn(level, body);
  log_len = 0;
}

static ssize_t log_write(void *cookie, const char *buf, size_t size) {
  (void)cookie;
  pthread_mutex_lock(&log_lock);
  for (size_t i = 0; i < size; i++) {
    if (buf[i] == '\n') {
      log_emit();
    } else if (log_len + 1 < sizeof log_line) {
      log_line[log_len++] = buf[i];
    }
  }
  pthread_mutex_unlock(&log_lock);
  return (ssize_t)size;
}

est_status est_capi_log_to(est_capi_log_fn fn) {
  if (!fn) {
    est_log_set_stream(NULL);
    log_fn = NULL;
    return EST_OK;
  }
  if (!log_stream) {
    cookie_io_functions_t io = {.write = log_write};
    log_stream = fopencookie(NULL, "w", io);
    if (!log_stream) return est_error(EST_ERR_NO_MEMORY, "a log stream");
    setvbuf(log_stream, NULL, _IONBF, 0);
  }
  log_fn = fn;
  est_log_set_stream(log_stream);
  return EST_OK;
}

/* ---- tokenizers ----------------------------------------------------------------------------- */

struct est_capi_tokenizer {
  char *path;
  pthread_mutex_t lock;         /* one batch at a time: the tokenizers below are its threads' */
  int count;                    /* tokenizers made so far (each parses the file once) */
  est_tokenizer **toks;         /* [cap] */
  int cap;
};

est_status est_capi_tokenizer_open(est_capi_tokenizer **out, const char *path) {
  *out = NULL;
  est_capi_tokenizer *t = calloc(1, sizeof *t);
  if (!t || !(t->path = strdup(path)) || !(t->toks = calloc(1, sizeof *t->toks))) {
    if (t) free(t->path);
    free(t);
    return est_error(EST_ERR_NO_MEMORY, "a tokenizer for %s", path);
  }
  t->cap = 1;
  est_status st = est_tokenizer_from_json(&t->toks[0], path);
  if (st != EST_OK) {
    free(t->toks), free(t->path), free(t);
    return st;
  }
  t->count = 1;
  pthread_mutex_init(&t->lock, NULL);
  *out = t;
  return EST_OK;
}

void est_capi_tokenizer_free(est_capi_tokenizer *t) {
  if (!t) return;
  for (int i = 0; i < t->count; i++) est_tokenizer_free(t->toks[i]);
  pthread_mutex_destroy(&t->lock);
  free(t->toks), free(t->path), free(t);
}

/* Tokenizers for `threads` threads (the file parsed once more for each new one). */
static est_status tokenizers_reserve(est_capi_tokenizer *t, int threads) {
  if (threads > t->cap) {
    est_tokenizer **toks = realloc(t->toks, (size_t)threads * sizeof *toks);
    if (!toks) return est_error(EST_ERR_NO_MEMORY, "%d tokenizers", threads);
    t->toks = toks, t->cap = threads;
  }
  for (; t->count < threads; t->count++) {
    est_status st = est_tokenizer_from_json(&t->toks[t->count], t->path);
    if (st != EST_OK) return st;
  }
  return EST_OK;
}

/* One encoding copied out of its tokenizer (which reuses its buffers on the next call). */
typedef struct one_encoding {
  size_t n;
  int32_t *ints;                /* 6 x n: ids, type_ids, special, attention, offset start, end */
  char *tokens;                 /* n NUL-terminated tokens end to end */
  size_t tokens_size;
} one_encoding;

static est_status keep_encoding(one_encoding *k, const est_encoding *e) {
  k->n = e->n;
  k->tokens_size = 0;
  for (size_t i = 0; i < e->n; i++) k->tokens_size += strlen(e->tokens[i]) + 1;
  k->ints = malloc((6 * e->n + 1) * sizeof(int32_t));
  k->tokens = malloc(k->tokens_size + 1);
  if (!k->ints || !k->tokens) return est_error(EST_ERR_NO_MEMORY, "an encoding of %zu tokens", e->n);
  const int32_t *src[6] = {e->ids, e->type_ids, e->special_tokens_mask, e->attention_mask, e->offset_start,
                           e->offset_end};
  for (int a = 0; a < 6; a++) memcpy(k->ints + a * e->n, src[a], e->n * sizeof(int32_t));
  char *p = k->tokens;
  for (size_t i = 0; i < e->n; i++) {
    size_t len = strlen(e->tokens[i]) + 1;
    memcpy(p, e->tokens[i], len);
    p += len;
  }
  return EST_OK;
}

void est_capi_encodings_free(est_capi_encodings *e) { free(e); }

/* The block of est_capi_encodings: the struct, start[], six int arrays, token pointers, token
 * bytes. Encodings shorter than `pad_to` are padded as tokenizers' BatchLongest does. */
static est_status gather(one_encoding *k, size_t n, size_t pad_to, const est_padding *pad,
                         est_capi_encodings **out) {
  size_t total = 0, bytes = 0;
  const size_t pad_token = pad && pad->pad_token ? strlen(pad->pad_token) + 1 : 1;
  for (size_t i = 0; i < n; i++) {
    const size_t extra = k[i].n < pad_to ? pad_to - k[i].n : 0;
    total += k[i].n + extra;
    bytes += k[i].tokens_size + extra * pad_token;
  }
  const size_t size = sizeof(est_capi_encodings) + (n + 1) * sizeof(size_t) + 6 * total * sizeof(int32_t) +
                      total * sizeof(char *) + bytes + 16;
  est_capi_encodings *e = calloc(1, size);
  if (!e) return est_error(EST_ERR_NO_MEMORY, "%zu encodings of %zu tokens", n, total);
  char *p = (char *)(e + 1);
  e->count = n;
  e->start = (size_t *)p, p += (n + 1) * sizeof(size_t);
  e->tokens = (const char **)p, p += total * sizeof(char *);
  int32_t **arrays[6] = {&e->ids, &e->type_ids, &e->special_tokens_mask, &e->attention_mask, &e->offset_start,
                         &e->offset_end};
  for (int a = 0; a < 6; a++) *arrays[a] = (int32_t *)p, p += total * sizeof(int32_t);
  char *text = p;
  size_t at = 0;
  for (size_t i = 0; i < n; i++) {
    e->start[i] = at;
    const size_t m = k[i].n, extra = m < pad_to ? pad_to - m : 0;
    const size_t first = pad && pad->left ? extra : 0; /* where the real tokens begin */
    for (size_t j = 0; j < m + extra; j++) {
      const int real = j >= first && j < first + m;
      const size_t r = j - first;
      const int32_t pads[6] = {pad ? pad->pad_id : 0, pad ? pad->pad_type_id : 0, 1, 0, 0, 0};
      for (int a = 0; a < 6; a++) (*arrays[a])[at + j] = real ? k[i].ints[a * m + r] : pads[a];
    }
    const char *src = k[i].tokens;
    for (size_t j = 0; j < m + extra; j++) {
      const int real = j >= first && j < first + m;
      const char *tok = real ? src : (pad && pad->pad_token ? pad->pad_token : "");
      size_t len = strlen(tok) + 1;
      memcpy(text, tok, len);
      e->tokens[at + j] = text;
      text += len;
      if (real) src += len;
    }
    at += m + extra;
  }
  e->start[n] = at;
  *out = e;
  return EST_OK;
}

est_status est_capi_tokenizer_encode_batch(est_capi_tokenizer *t, size_t n, const char *const *texts,
                                           const size_t *lens, const char *const *pairs, const size_t *pair_lens,
                                           int add_special_tokens, int threads, est_capi_encodings **out) {
  *out = NULL;
  if (threads <= 0) threads = est_default_num_threads();
  if ((size_t)threads > n) threads = n ? (int)n : 1;
  pthread_mutex_lock(&t->lock);
  one_encoding *k = calloc(n ? n : 1, sizeof *k);
  est_status st = k ? tokenizers_reserve(t, threads) : est_error(EST_ERR_NO_MEMORY, "%zu encodings", n);
  /* the first failure by input index wins, with its message (messages are per thread) */
  size_t bad = n;
  char msg[1024] = "";
  est_status bad_st = EST_OK;
  if (st == EST_OK) {
#pragma omp parallel for schedule(dynamic, 16) num_threads(threads)
    for (size_t i = 0; i < n; i++) {
      est_tokenizer *tok = t->toks[omp_get_thread_num()];
      const char *pair = pairs ? pairs[i] : NULL;
      est_encoding e;
      est_status s = est_tokenizer_encode_pair(tok, texts[i], lens ? lens[i] : strlen(texts[i]), pair,
                                               pair ? (pair_lens ? pair_lens[i] : strlen(pair)) : 0,
                                               add_special_tokens != 0, &e);
      if (s == EST_OK) s = keep_encoding(&k[i], &e);
      if (s != EST_OK) {
#pragma omp critical(est_capi_encode_error)
        if (i < bad) bad = i, bad_st = s, snprintf(msg, sizeof msg, "%s", est_error_message());
      }
    }
  }
  if (st == EST_OK && bad < n) st = est_error(bad_st, "inputs[%zu]: %s", bad, msg);
  if (st == EST_OK) {
    const est_padding *pad = est_tokenizer_padding(t->toks[0]);
    size_t longest = 0;
    if (pad && pad->enabled && !pad->fixed)
      for (size_t i = 0; i < n; i++) longest = k[i].n > longest ? k[i].n : longest;
    st = gather(k, n, longest, pad, out);
  }
  for (size_t i = 0; k && i < n; i++) free(k[i].ints), free(k[i].tokens);
  free(k);
  pthread_mutex_unlock(&t->lock);
  return st;
}

est_status est_capi_tokenizer_decode(est_capi_tokenizer *t, const int32_t *ids, size_t n, int skip_special_tokens,
                                     char **text, size_t *len) {
  pthread_mutex_lock(&t->lock);
  est_status st = est_tokenizer_decode(t->toks[0], ids, n, skip_special_tokens != 0, text, len);
  pthread_mutex_unlock(&t->lock);
  return st;
}

const char *est_capi_tokenizer_id_to_token(est_capi_tokenizer *t, int32_t id) {
  return est_tokenizer_id_to_token(t->toks[0], id);
}

/* ---- models ----------------------------------------------------------------------------------- */

est_status est_capi_set_precision(est_servable *s, const char *precision) {
  est_precision p = EST_PRECISION_FP32;
  const char *name = precision ? precision : est_servable_meta(s)->precision;
  est_status st = est_precision_apply_flag(name, &p);
  if (st != EST_OK) return st;
  est_servable_set_precision(s, p);
  return est_servable_check_precision(s);
}

est_status est_capi_embed_open(est_servable **out, const char *path, const char *precision, int max_batch) {
  *out = NULL;
  if (max_batch < 1 || max_batch > 65536)
    return est_error(EST_ERR_INVALID_ARGUMENT, "batch_size=%d: must be in [1, 65536]", max_batch);
  /* est embed's defaults: lower-casing (a tokenizer.json's own settings win), pooling and
   * normalisation as the directory's files say */
  est_embed_model_options o = {.model_dir = path, .do_lower_case = true, .normalize = -1, .max_batch = max_batch};
  o = est_embed_model_resolve(&o);
  est_status st = est_embed_model_open(out, &o);
  if (st == EST_OK) st = est_capi_set_precision(*out, precision);
  if (st != EST_OK && *out) est_servable_free(*out), *out = NULL;
  return st;
}

enum { EMBED_WINDOW = 1024 }; /* est embed's --window default */

/* qsort has no context argument: the window's lengths, per thread. */
static _Thread_local const int32_t *sort_lengths;
static int by_length(const void *a, const void *b) {
  int x = *(const int32_t *)a, y = *(const int32_t *)b;
  if (sort_lengths[x] != sort_lengths[y]) return sort_lengths[x] < sort_lengths[y] ? -1 : 1;
  return x < y ? -1 : x > y;
}

/* tools/cmd_embed.c's window_flush for texts [first, first + count), into out's rows. */
static est_status embed_window(est_servable *s, est_featurizer *f, const char *const *texts, const size_t *lens,
                               size_t first, int count, int batch, int32_t *rows, int32_t *len, int32_t *order,
                               int32_t *brows, float *bemb, float *out) {
  const size_t S = (size_t)est_servable_meta(s)->max_seq_length, W = (size_t)est_servable_output_width(s);
  int32_t *ids = rows, *mask = rows + (size_t)EMBED_WINDOW * S, *segs = rows + 2 * (size_t)EMBED_WINDOW * S;
  for (int r = 0; r < count; r++) {
    const size_t i = first + (size_t)r, size = lens ? lens[i] : strlen(texts[i]);
    const char *nul = memchr(texts[i], 0, size);
    if (nul) return est_error(EST_ERR_INVALID_ARGUMENT, "sentences[%zu]: a NUL byte at byte %zu", i,
                              (size_t)(nul - texts[i]));
    size_t bad = est_utf8_first_invalid(texts[i], size);
    if (bad != SIZE_MAX) return est_error(EST_ERR_INVALID_ARGUMENT, "sentences[%zu]: invalid UTF-8 at byte %zu", i, bad);
    /* the featurizer reads a NUL-terminated string: a text given by length is copied (its
     * buffer need not hold a byte past the length) */
    char *copy = NULL;
    const char *text = texts[i];
    if (lens) {
      if (!(copy = malloc(size + 1))) return est_error(EST_ERR_NO_MEMORY, "sentences[%zu]", i);
      memcpy(copy, texts[i], size), copy[size] = 0, text = copy;
    }
    int n;
    est_status st = est_featurizer_run(f, text, NULL, ids + r * S, mask + r * S, segs + r * S, &n);
    free(copy);
    if (st != EST_OK) return est_error_prefix("sentences[%zu]: ", i);
    len[r] = n, order[r] = r;
  }
  sort_lengths = len;
  qsort(order, (size_t)count, sizeof *order, by_length);
  int32_t *bids = brows, *bmask = brows + (size_t)batch * S, *bsegs = brows + 2 * (size_t)batch * S;
  for (int b0 = 0; b0 < count; b0 += batch) {
    const int nb = count - b0 < batch ? count - b0 : batch;
    int longest = 1;
    for (int i = 0; i < nb; i++) {
      const size_t src = (size_t)order[b0 + i] * S, dst = (size_t)i * S;
      memcpy(bids + dst, ids + src, S * sizeof(int32_t));
      memcpy(bmask + dst, mask + src, S * sizeof(int32_t));
      memcpy(bsegs + dst, segs + src, S * sizeof(int32_t));
      if (len[order[b0 + i]] > longest) longest = len[order[b0 + i]];
    }
    est_status st = est_servable_predict_strided(s, bids, bmask, bsegs, nb, (int)S,
                                                 est_serving_bucket_length(longest, (int)S), bemb);
    if (st != EST_OK) return st;
    for (int i = 0; i < nb; i++)
      memcpy(out + (first + (size_t)order[b0 + i]) * W, bemb + (size_t)i * W, W * sizeof(float));
  }
  return EST_OK;
}

est_status est_capi_embed(est_servable *s, size_t n, const char *const *texts, const size_t *lens, int batch_size,
                          int threads, float *out) {
  if (batch_size < 1 || batch_size > est_servable_max_batch(s))
    return est_error(EST_ERR_INVALID_ARGUMENT, "batch_size=%d: must be in [1, %d] (the batch size the model was "
                     "opened with)", batch_size, est_servable_max_batch(s));
  if (!est_model_meta_head(est_servable_meta(s))->embedding_normalized)
    return est_error(EST_ERR_FAILED_PRECONDITION, "%s: not an embedding model (its head is %s)", est_servable_dir(s),
                     est_capi_served_head(s));
  use_threads(threads);
  const size_t S = (size_t)est_servable_meta(s)->max_seq_length, W = (size_t)est_servable_output_width(s);
  const size_t window = n < EMBED_WINDOW ? n : EMBED_WINDOW;
  int32_t *rows = malloc(3 * EMBED_WINDOW * S * sizeof(int32_t));
  int32_t *len = malloc(EMBED_WINDOW * sizeof(int32_t)), *order = malloc(EMBED_WINDOW * sizeof(int32_t));
  int32_t *brows = malloc(3 * (size_t)batch_size * S * sizeof(int32_t));
  float *bemb = malloc((size_t)batch_size * W * sizeof(float));
  est_featurizer *f = NULL;
  est_status st = rows && len && order && brows && bemb
                      ? est_featurizer_create(&f, s)
                      : est_error(EST_ERR_NO_MEMORY, "a window of %zu sentences", window);
  for (size_t first = 0; st == EST_OK && first < n; first += EMBED_WINDOW) {
    const int count = (int)(n - first < EMBED_WINDOW ? n - first : EMBED_WINDOW);
    st = embed_window(s, f, texts, lens, first, count, batch_size, rows, len, order, brows, bemb, out);
  }
  est_featurizer_free(f);
  free(rows), free(len), free(order), free(brows), free(bemb);
  return st;
}

est_status est_capi_served_open(est_servable **out, const char *path, const char *precision, int max_batch) {
  *out = NULL;
  if (max_batch < 1 || max_batch > 65536)
    return est_error(EST_ERR_INVALID_ARGUMENT, "batch_size=%d: must be in [1, 65536]", max_batch);
  est_status st = est_servable_load(out, path, max_batch);
  if (st == EST_OK) st = est_capi_set_precision(*out, precision);
  if (st != EST_OK && *out) est_servable_free(*out), *out = NULL;
  return st;
}

const char *est_capi_served_head(const est_servable *s) { return est_model_meta_head(est_servable_meta(s))->name; }

int est_capi_served_inputs(const est_servable *s, const char **names, int max) {
  const est_served_head *h = est_model_meta_head(est_servable_meta(s));
  int k = 0;
  while (k < EST_SERVED_MAX_TEXTS && h->inputs.texts[k]) k++;
  for (int i = 0; i < max; i++) names[i] = i < k ? h->inputs.texts[i] : NULL;
  return k;
}

est_status est_capi_served_run(est_servable *s, size_t n, const char *const *texts, int threads, char **json,
                               size_t *size) {
  *json = NULL, *size = 0;
  const char *names[EST_SERVED_MAX_TEXTS];
  const int k = est_capi_served_inputs(s, names, EST_SERVED_MAX_TEXTS);
  const est_served_head *h = est_model_meta_head(est_servable_meta(s));
  if (k == 0 || h->embedding_normalized)
    return est_error(EST_ERR_FAILED_PRECONDITION, "%s: the %s head takes no texts to answer", est_servable_dir(s),
                     h->name);
  use_threads(threads);
  FILE *mem = open_memstream(json, size);
  if (!mem) return est_error(EST_ERR_NO_MEMORY, "the answers of %zu instances", n);
  const size_t per = (size_t)est_servable_max_batch(s);
  est_status st = EST_OK;
  for (size_t first = 0; st == EST_OK && first < n; first += per) {
    est_served_batch *b = NULL;
    st = est_served_batch_create(&b, s, NULL, NULL);
    const size_t end = n - first < per ? n : first + per;
    for (size_t i = first; st == EST_OK && i < end; i++) {
      est_instance in;
      memset(&in, 0, sizeof in);
      for (int j = 0; j < k; j++) in.texts[j] = texts[i * (size_t)k + j];
      if (!in.texts[0]) st = est_error(EST_ERR_INVALID_ARGUMENT, "instances[%zu]: no %s", i, names[0]);
      if (st == EST_OK && est_served_batch_add_instance(b, &in) != EST_OK)
        st = est_error_prefix("instances[%zu]: ", i);
    }
    if (st == EST_OK) st = est_served_batch_run(b, s);
    for (size_t i = 0; st == EST_OK && i < end - first; i++) {
      est_served_batch_write(b, i, EST_SERVED_PREDICT, mem);
      fputc('\n', mem);
    }
    est_served_batch_free(b);
  }
  if (fclose(mem) != 0 && st == EST_OK) st = est_error(EST_ERR_NO_MEMORY, "the answers of %zu instances", n);
  if (st != EST_OK) free(*json), *json = NULL, *size = 0;
  return st;
}
