/* create_pretraining_data.py's main(): vocab checks, documents, the two shuffles, and the
 * records, written round robin. The instances go to an unlinked spill file (fixed-size
 * records, see pretraining_internal.h) and are read back with pread in the order of the
 * final shuffle, so memory holds the documents and 4 bytes per instance (est/pretraining_data.h);
 * the spilled data sits in the page cache, which the kernel may drop, not in our heap. */
#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pretraining_data/pretraining_internal.h"
#include "text/unicode.h"
#include "est/file.h"
#include "est/log.h"
#include "est/tfrecord.h"

est_pretraining_config est_pretraining_config_default(void) {
  est_pretraining_config c = {
    .do_lower_case = true,
    .do_whole_word_mask = false,
    .max_seq_length = 128,
    .max_predictions_per_seq = 20,
    .random_seed = 12345,
    .dupe_factor = 10,
    .masked_lm_prob = 0.15,
    .short_seq_prob = 0.1,
    .progress_seconds = 10.0,
  };
  return c;
}

/* ---- tf.train.Example, in the script's byte order ------------------------------------ */

static size_t varint_len(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    n++;
  }
  return n;
}

static uint8_t *put_varint(uint8_t *p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *p++ = (uint8_t)v;
  return p;
}

/* One map entry of Features.feature: key, then a Feature whose list (int64_list, field 3,
 * or float_list, field 2) holds `payload` bytes of packed values (field 1; omitted when
 * empty, as protobuf does). Writes the framing; the caller writes the payload after it. */
static size_t entry_size(const char *key, size_t payload) {
  size_t klen = strlen(key);
  size_t list = payload ? 1 + varint_len(payload) + payload : 0;
  size_t feature = 1 + varint_len(list) + list;
  size_t entry = 1 + varint_len(klen) + klen + 1 + varint_len(feature) + feature;
  return 1 + varint_len(entry) + entry;
}

static uint8_t *put_entry_header(uint8_t *p, const char *key, bool is_float, size_t payload) {
  size_t klen = strlen(key);
  size_t list = payload ? 1 + varint_len(payload) + payload : 0;
  size_t feature = 1 + varint_len(list) + list;
  size_t entry = 1 + varint_len(klen) + klen + 1 + varint_len(feature) + feature;
  *p++ = 0x0a;                       /* Features.feature (map entry), field 1 */
  p = put_varint(p, entry);
  *p++ = 0x0a;                       /* entry key, field 1 */
  p = put_varint(p, klen);
  memcpy(p, key, klen);
  p += klen;
  *p++ = 0x12;                       /* entry value (Feature), field 2 */
  p = put_varint(p, feature);
  *p++ = is_float ? 0x12 : 0x1a;     /* Feature.float_list = 2, int64_list = 3 */
  p = put_varint(p, list);
  if (payload) {
    *p++ = 0x0a;                     /* value, packed, field 1 */
    p = put_varint(p, payload);
  }
  return p;
}

static size_t ints_size(const int32_t *v, size_t n) {
  size_t s = 0;
  for (size_t i = 0; i < n; i++) s += varint_len((uint64_t)(int64_t)v[i]);
  return s;
}

static uint8_t *put_ints(uint8_t *p, const int32_t *v, size_t n) {
  for (size_t i = 0; i < n; i++) p = put_varint(p, (uint64_t)(int64_t)v[i]);
  return p;
}

size_t pt_example_max_size(int max_seq_length, int max_predictions) {
  /* Values are < 2^31 (5 varint bytes); 64 bytes of framing per feature is ample. */
  return 16 + 7 * 64 + 5 * (3 * (size_t)max_seq_length + 2 * (size_t)max_predictions + 1) +
         4 * (size_t)max_predictions;
}

size_t pt_example_serialize(const int32_t *rec, int max_seq_length, int max_predictions, uint8_t *out) {
  const size_t seq = (size_t)max_seq_length, pred = (size_t)max_predictions;
  const int32_t n = rec[PT_REC_N], len_a = rec[PT_REC_LEN_A], m = rec[PT_REC_MASKED];
  const int32_t *ids = rec + PT_REC_IDS, *positions = ids + seq, *labels = positions + pred;
  const int32_t label = rec[PT_REC_RANDOM_NEXT];
  /* Payload sizes: input_mask and segment_ids are 0/1, one byte each. */
  size_t p_ids = ints_size(ids, seq), p_pos = ints_size(positions, pred), p_lab = ints_size(labels, pred);
  size_t body = entry_size("input_ids", p_ids) + entry_size("masked_lm_weights", 4 * pred) +
                entry_size("next_sentence_labels", 1) + entry_size("masked_lm_positions", p_pos) +
                entry_size("input_mask", seq) + entry_size("segment_ids", seq) + entry_size("masked_lm_ids", p_lab);
  uint8_t *p = out;
  *p++ = 0x0a;                        /* Example.features, field 1 */
  p = put_varint(p, body);

  p = put_ints(put_entry_header(p, "input_ids", false, p_ids), ids, seq);
  p = put_entry_header(p, "masked_lm_weights", true, 4 * pred);
  for (size_t j = 0; j < pred; j++) {  /* 1.0f = 00 00 80 3f little-endian, 0.0f = 0 */
    p[0] = p[1] = 0;
    p[2] = (int32_t)j < m ? 0x80 : 0;
    p[3] = (int32_t)j < m ? 0x3f : 0;
    p += 4;
  }
  p = put_entry_header(p, "next_sentence_labels", false, 1);
  *p++ = (uint8_t)label;
  p = put_ints(put_entry_header(p, "masked_lm_positions", false, p_pos), positions, pred);
  p = put_entry_header(p, "input_mask", false, seq);
  for (size_t i = 0; i < seq; i++) *p++ = (int32_t)i < n;
  p = put_entry_header(p, "segment_ids", false, seq);
  for (size_t i = 0; i < seq; i++) *p++ = (int32_t)i >= len_a + 2 && (int32_t)i < n;
  p = put_ints(put_entry_header(p, "masked_lm_ids", false, p_lab), labels, pred);
  return (size_t)(p - out);
}

/* ---- vocab ------------------------------------------------------------------------- */

/* list(tokenizer.vocab.keys()) as ids. vocab is an OrderedDict filled line by line, so a
 * token that appears twice keeps its first line's place but its last line's id. With no
 * duplicate the list is 0..size-1 (*words = NULL); else the file is read again to learn
 * each line's token (est_vocab only keeps the last). */
static est_status vocab_words_list(const est_vocab *v, int32_t **words, int64_t *count) {
  int32_t size = est_vocab_size(v), unique = 0;
  for (int32_t i = 0; i < size; i++) unique += est_vocab_token(v, i) != NULL;
  *words = NULL;
  *count = unique;
  if (unique == size) return EST_OK;
  uint8_t *data;
  size_t len;
  est_status st = est_read_file(est_vocab_path(v), &data, &len);
  if (st != EST_OK) return st;
  int32_t *out = malloc((size_t)unique * sizeof *out);
  uint8_t *seen = calloc((size_t)size, 1);
  if (!out || !seen) {
    free(out);
    free(seen);
    free(data);
    return est_error(EST_ERR_NO_MEMORY, "vocab %s: out of memory", est_vocab_path(v));
  }
  int64_t k = 0;
  for (size_t i = 0; i < len;) {
    size_t e = i;
    while (e < len && data[e] != '\n') e++;
    /* strip(): Python whitespace at both ends (the file is valid UTF-8: it loaded). */
    size_t b = i, t = e;
    for (size_t adv; b < t; b += adv)
      if (!tok_py_isspace(tok_utf8_next(data + b, t - b, &adv))) break;
    while (t > b) {
      size_t s = t - 1, adv;
      while (s > b && (data[s] & 0xC0) == 0x80) s--;
      if (!tok_py_isspace(tok_utf8_next(data + s, t - s, &adv))) break;
      t = s;
    }
    int32_t id = est_vocab_find(v, (const char *)data + b, t - b);
    if (id >= 0 && !seen[id] && k < unique) {
      seen[id] = 1;
      out[k++] = id;
    }
    i = e + 1;
  }
  free(seen);
  free(data);
  if (k != unique) {
    free(out);
    return est_error(EST_ERR_INTERNAL, "vocab %s: re-reading found %lld distinct tokens, expected %d",
                     est_vocab_path(v), (long long)k, unique);
  }
  *words = out;
  return EST_OK;
}

/* ---- the run ------------------------------------------------------------------------ */

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct spill {
  FILE *f;
  const char *dir;
  size_t record_bytes;
  uint64_t count;
} spill;

static est_status spill_emit(void *ctx, const int32_t *rec) {
  spill *s = ctx;
  if (fwrite(rec, 1, s->record_bytes, s->f) != s->record_bytes)
    return est_error(EST_ERR_IO, "writing the instance spill file in %s: %s", s->dir, strerror(errno));
  s->count++;
  return EST_OK;
}

static est_status check_config(const est_pretraining_config *c) {
  if (c->max_seq_length < 5 || c->max_seq_length > (1 << 20))
    return est_error(EST_ERR_INVALID_ARGUMENT, "--max_seq_length=%d: must be in [5, 1048576] ([CLS] and two [SEP] "
                     "leave at least one token for each segment; the script fails an assertion below 5)",
                     c->max_seq_length);
  if (c->max_predictions_per_seq < 0 || c->max_predictions_per_seq > (1 << 20))
    return est_error(EST_ERR_INVALID_ARGUMENT, "--max_predictions_per_seq=%d: must be in [0, 1048576]",
                     c->max_predictions_per_seq);
  if (c->dupe_factor < 0) return est_error(EST_ERR_INVALID_ARGUMENT, "--dupe_factor=%d: must be >= 0", c->dupe_factor);
  if (!isfinite(c->masked_lm_prob) || c->masked_lm_prob < 0 || c->masked_lm_prob > 1)
    return est_error(EST_ERR_INVALID_ARGUMENT, "--masked_lm_prob=%g: must be in [0, 1]", c->masked_lm_prob);
  if (!isfinite(c->short_seq_prob) || c->short_seq_prob < 0 || c->short_seq_prob > 1)
    return est_error(EST_ERR_INVALID_ARGUMENT, "--short_seq_prob=%g: must be in [0, 1]", c->short_seq_prob);
  return EST_OK;
}

static est_status special_id(const est_vocab *v, const char *token, int32_t *id) {
  *id = est_vocab_find(v, token, strlen(token));
  if (*id < 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "vocab %s has no %s token (create_pretraining_data needs [CLS], "
                     "[SEP] and [MASK])", est_vocab_path(v), token);
  return EST_OK;
}

/* Creates the instances of every dupe round into the spill file. */
static est_status generate(pt_generator *g, const est_pretraining_config *cfg, spill *sp) {
  est_status st;
  double last = now_seconds();
  uint64_t ndocs = g->corpus->ndocs;
  for (int round = 0; round < cfg->dupe_factor; round++)
    for (uint64_t d = 0; d < ndocs; d++) {
      if ((st = pt_instances_from_document(g, d, spill_emit, sp)) != EST_OK) return st;
      if (cfg->progress_seconds > 0 && (d & 1023) == 0 && now_seconds() - last >= cfg->progress_seconds) {
        last = now_seconds();
        EST_LOG_INFO("dupe round %d/%d: document %llu/%llu, %llu instances so far", round + 1, cfg->dupe_factor,
                     (unsigned long long)d, (unsigned long long)ndocs, (unsigned long long)sp->count);
      }
    }
  return EST_OK;
}

/* Writes the spilled instances in the order of the final shuffle, round robin. */
static est_status write_records(const est_pretraining_config *cfg, const spill *sp, const uint32_t *perm,
                                est_tfrecord_writer **w, size_t nw) {
  uint8_t *buf = malloc(pt_example_max_size(cfg->max_seq_length, cfg->max_predictions_per_seq));
  int32_t *rec = malloc(sp->record_bytes);
  if (!buf || !rec) {
    free(buf);
    free(rec);
    return est_error(EST_ERR_NO_MEMORY, "create_pretraining_data: out of memory");
  }
  est_status st = EST_OK;
  double last = now_seconds();
  const uint64_t count = sp->count;
  for (uint64_t i = 0; i < count && st == EST_OK; i++) {
    off_t at = (off_t)perm[i] * (off_t)sp->record_bytes;
    ssize_t got = pread(fileno(sp->f), rec, sp->record_bytes, at);
    if (got != (ssize_t)sp->record_bytes) {
      st = est_error(EST_ERR_IO, "reading instance %u back from the spill file in %s: %s", perm[i], sp->dir,
                     got < 0 ? strerror(errno) : "short read");
      break;
    }
    size_t n = pt_example_serialize(rec, cfg->max_seq_length, cfg->max_predictions_per_seq, buf);
    st = est_tfrecord_writer_write(w[i % nw], buf, n);
    if (cfg->progress_seconds > 0 && (i & 4095) == 0 && now_seconds() - last >= cfg->progress_seconds) {
      last = now_seconds();
      EST_LOG_INFO("wrote %llu/%llu instances", (unsigned long long)i, (unsigned long long)count);
    }
  }
  free(buf);
  free(rec);
  return st;
}

est_status est_create_pretraining_data(const est_pretraining_config *cfg, const char *vocab_file,
                                       const char *const *input_files, size_t n_inputs,
                                       const char *const *output_files, size_t n_outputs,
                                       uint64_t *written) {
  if (written) *written = 0;
  est_status st = check_config(cfg);
  if (st != EST_OK) return st;
  if (n_outputs == 0) return est_error(EST_ERR_INVALID_ARGUMENT, "--output_file: no file given");
  for (size_t i = 0; i < n_outputs; i++)
    if (!output_files[i] || !*output_files[i])
      return est_error(EST_ERR_INVALID_ARGUMENT, "--output_file: name %zu of the comma-separated list is empty", i + 1);
  if (n_inputs == 0) return est_error(EST_ERR_INVALID_ARGUMENT, "--input_file: no file given");

  est_tokenizer *tok = NULL;
  pt_corpus corpus;
  pt_corpus_init(&corpus);
  pt_generator g;
  memset(&g, 0, sizeof g);
  uint8_t *cont = NULL;
  int32_t *vocab_words = NULL;
  uint32_t *order = NULL, *perm = NULL;
  est_tfrecord_writer **w = NULL;
  spill sp = {0};
  char *dir_copy = NULL;

  if ((st = est_tokenizer_open(&tok, vocab_file, cfg->do_lower_case)) != EST_OK) goto done;
  const est_vocab *v = est_tokenizer_vocab(tok);
  if ((st = special_id(v, "[CLS]", &g.cls_id)) != EST_OK || (st = special_id(v, "[SEP]", &g.sep_id)) != EST_OK ||
      (st = special_id(v, "[MASK]", &g.mask_id)) != EST_OK)
    goto done;
  int32_t vsize = est_vocab_size(v);
  if (!(cont = calloc((size_t)vsize, 1))) {
    st = est_error(EST_ERR_NO_MEMORY, "vocab %s: out of memory", vocab_file);
    goto done;
  }
  for (int32_t i = 0; i < vsize; i++) {
    const char *t = est_vocab_token(v, i);
    cont[i] = t && t[0] == '#' && t[1] == '#';
  }
  if ((st = vocab_words_list(v, &vocab_words, &g.n_vocab_words)) != EST_OK) goto done;

  /* Writers first, so a bad output path fails before the work. */
  if (!(w = calloc(n_outputs, sizeof *w))) {
    st = est_error(EST_ERR_NO_MEMORY, "create_pretraining_data: out of memory");
    goto done;
  }
  for (size_t i = 0; i < n_outputs; i++)
    if ((st = est_tfrecord_writer_open(&w[i], output_files[i], EST_COMPRESSION_NONE)) != EST_OK) goto done;

  if ((st = pt_corpus_read(&corpus, tok, input_files, n_inputs, cfg->progress_seconds)) != EST_OK) goto done;
  if (corpus.ndocs == 0) {
    st = est_error(EST_ERR_INVALID_ARGUMENT, "--input_file %s%s: no document (%llu lines, all blank or without "
                   "tokens); the script would write empty files", input_files[0], n_inputs > 1 ? ",..." : "",
                   (unsigned long long)corpus.lines);
    goto done;
  }
  if (corpus.ndocs > UINT32_MAX) {
    st = est_error(EST_ERR_INVALID_ARGUMENT, "--input_file: %llu documents; at most %u in one run: split the "
                   "corpus into shards", (unsigned long long)corpus.ndocs, UINT32_MAX);
    goto done;
  }

  est_pyrandom rng;
  est_pyrandom_seed(&rng, cfg->random_seed);
  if (!(order = malloc((size_t)corpus.ndocs * sizeof *order))) {
    st = est_error(EST_ERR_NO_MEMORY, "create_pretraining_data: out of memory for %llu documents",
                   (unsigned long long)corpus.ndocs);
    goto done;
  }
  for (uint64_t d = 0; d < corpus.ndocs; d++) order[d] = (uint32_t)d;
  est_pyrandom_shuffle(&rng, order, (size_t)corpus.ndocs, sizeof *order);   /* rng.shuffle(all_documents) */

  g.corpus = &corpus;
  g.doc_order = order;
  g.rng = &rng;
  g.max_seq_length = cfg->max_seq_length;
  g.max_predictions_per_seq = cfg->max_predictions_per_seq;
  g.masked_lm_prob = cfg->masked_lm_prob;
  g.short_seq_prob = cfg->short_seq_prob;
  g.do_whole_word_mask = cfg->do_whole_word_mask;
  g.is_continuation = cont;
  g.vocab_words = vocab_words;
  if ((st = pt_generator_init(&g)) != EST_OK) goto done;

  /* The spill file lives beside the first output (same file system, room for the data). */
  if (!(dir_copy = strdup(output_files[0]))) {
    st = est_error(EST_ERR_NO_MEMORY, "create_pretraining_data: out of memory");
    goto done;
  }
  sp.dir = dirname(dir_copy);
  sp.record_bytes = PT_RECORD_WORDS(cfg->max_seq_length, cfg->max_predictions_per_seq) * sizeof(int32_t);
  char tmpl[4200];
  snprintf(tmpl, sizeof tmpl, "%s/.est-pretraining-instances-XXXXXX", sp.dir);
  int fd = mkstemp(tmpl);
  if (fd < 0 || !(sp.f = fdopen(fd, "w+b"))) {
    st = est_error(EST_ERR_IO, "creating the instance spill file %s: %s", tmpl, strerror(errno));
    if (fd >= 0) close(fd);
    goto done;
  }
  unlink(tmpl);   /* gone whatever happens; the data lives while the file is open */
  setvbuf(sp.f, NULL, _IOFBF, 1 << 20);

  EST_LOG_INFO("creating instances: %llu documents x dupe_factor %d", (unsigned long long)corpus.ndocs,
               cfg->dupe_factor);
  if ((st = generate(&g, cfg, &sp)) != EST_OK) goto done;
  if (fflush(sp.f) != 0) {
    st = est_error(EST_ERR_IO, "writing the instance spill file in %s: %s", sp.dir, strerror(errno));
    goto done;
  }
  if (sp.count > UINT32_MAX) {
    st = est_error(EST_ERR_INVALID_ARGUMENT, "%llu instances: at most %u in one run: split the corpus into shards "
                   "or lower --dupe_factor", (unsigned long long)sp.count, UINT32_MAX);
    goto done;
  }
  if (!(perm = malloc((size_t)(sp.count ? sp.count : 1) * sizeof *perm))) {
    st = est_error(EST_ERR_NO_MEMORY, "create_pretraining_data: out of memory for %llu instances",
                   (unsigned long long)sp.count);
    goto done;
  }
  for (uint64_t i = 0; i < sp.count; i++) perm[i] = (uint32_t)i;
  est_pyrandom_shuffle(&rng, perm, (size_t)sp.count, sizeof *perm);   /* rng.shuffle(instances) */

  EST_LOG_INFO("*** Writing to output files ***");
  for (size_t i = 0; i < n_outputs; i++) EST_LOG_INFO("  %s", output_files[i]);
  if ((st = write_records(cfg, &sp, perm, w, n_outputs)) != EST_OK) goto done;
  for (size_t i = 0; i < n_outputs; i++) {
    est_tfrecord_writer *wi = w[i];
    w[i] = NULL;
    if ((st = est_tfrecord_writer_close(wi)) != EST_OK) goto done;
  }
  EST_LOG_INFO("Wrote %llu total instances", (unsigned long long)sp.count);
  if (written) *written = sp.count;

done:
  if (w) {
    for (size_t i = 0; i < n_outputs; i++) est_tfrecord_writer_abort(w[i]);
    free(w);
  }
  if (sp.f) fclose(sp.f);
  free(dir_copy);
  free(perm);
  free(order);
  pt_generator_free(&g);
  free(vocab_words);
  free(cont);
  pt_corpus_free(&corpus);
  est_tokenizer_free(tok);
  return st;
}
