/* create_pretraining_data's input: text files to the packed all_documents list, read as the
 * script reads them through tf.gfile.GFile (google-research/bert create_pretraining_data.py,
 * create_training_instances):
 * - lines end at '\n' only, and GFile's readline drops every '\r' byte, wherever it is;
 * - a line that is empty after Python's str.strip() starts a new document;
 * - any other line is tokenized; a line with no tokens is skipped (not a boundary);
 * - files follow each other with no boundary between them; empty documents go;
 * - a document of one sentence stays (create_instances_from_document makes every one of its
 *   chunks a "random next": segment B always comes from another document), with a warning
 *   naming the file and line, as for a line that tokenizes to nothing.
 * GFile decodes strictly, so invalid UTF-8 stops the script with a UnicodeDecodeError; here
 * it is an error naming the file, line and byte. */
#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pretraining_data/pretraining_internal.h"
#include "text/unicode.h"
#include "est/log.h"

/* Warnings for skipped lines and one-sentence documents: the first few by file and line,
 * then only the count. */
#define PT_MAX_LINE_WARNINGS 5

void pt_corpus_init(pt_corpus *c) { memset(c, 0, sizeof *c); }

void pt_corpus_free(pt_corpus *c) {
  free(c->tokens);
  free(c->sent_start);
  free(c->doc_start);
  memset(c, 0, sizeof *c);
}

static est_status grow(void **p, uint64_t *cap, uint64_t need, size_t elem) {
  if (need <= *cap) return EST_OK;
  uint64_t cap2 = *cap ? *cap : 1024;
  while (cap2 < need) cap2 *= 2;
  void *q = realloc(*p, (size_t)cap2 * elem);
  if (!q) return est_error(EST_ERR_NO_MEMORY, "create_pretraining_data: out of memory holding the documents "
                                              "(%llu entries)", (unsigned long long)need);
  *p = q;
  *cap = cap2;
  return EST_OK;
}

/* Closes the current document (sentences since the last close), dropping it when empty. */
static est_status close_document(pt_corpus *c) {
  if (c->nsent == c->doc_start[c->ndocs]) return EST_OK;
  if (c->nsent - c->doc_start[c->ndocs] == 1 && c->one_sentence_docs++ < PT_MAX_LINE_WARNINGS)
    EST_LOG_WARN("%s:%llu: a document of one sentence (this line, then a blank line or the end of the input); "
                 "kept, as the script does, but every instance from it takes segment B from another document "
                 "(next_sentence_labels 1)", c->doc_path, (unsigned long long)c->doc_line);
  est_status st = grow((void **)&c->doc_start, &c->doc_cap, c->ndocs + 2, sizeof *c->doc_start);
  if (st != EST_OK) return st;
  c->doc_start[++c->ndocs] = c->nsent;
  return EST_OK;
}

static est_status add_sentence(pt_corpus *c, const int32_t *ids, size_t n) {
  est_status st = grow((void **)&c->tokens, &c->tokens_cap, c->ntokens + n, sizeof *c->tokens);
  if (st == EST_OK) st = grow((void **)&c->sent_start, &c->sent_cap, c->nsent + 2, sizeof *c->sent_start);
  if (st != EST_OK) return st;
  memcpy(c->tokens + c->ntokens, ids, n * sizeof *ids);
  c->ntokens += n;
  c->sent_start[++c->nsent] = c->ntokens;
  return EST_OK;
}

/* Checks strict UTF-8 and whether every code point is Python whitespace (strip() leaves
 * nothing). Returns the byte offset of the first invalid sequence, or len when valid. */
static size_t scan_line(const char *s, size_t len, bool *blank) {
  *blank = true;
  for (size_t i = 0; i < len;) {
    size_t adv;
    uint32_t cp = tok_utf8_next((const uint8_t *)s + i, len - i, &adv);
    if (cp == UINT32_MAX) return i;
    if (*blank && !tok_py_isspace(cp)) *blank = false;
    i += adv;
  }
  return len;
}

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The lines of stream f (named `path` in messages) into c. */
static est_status read_stream(pt_corpus *c, est_tokenizer *tok, FILE *f, const char *path, double progress_seconds,
                              double *last_report) {
  char *line = NULL;
  size_t cap = 0;
  ssize_t got;
  uint64_t lineno = 0;
  est_status st = EST_OK;
  errno = 0;
  while ((got = getline(&line, &cap, f)) >= 0) {
    lineno++;
    c->lines++;
    /* Drop every '\r' (GFile's readline does) and the final '\n' (strip() would). */
    size_t n = 0;
    for (ssize_t i = 0; i < got; i++)
      if (line[i] != '\r') line[n++] = line[i];
    if (n && line[n - 1] == '\n') n--;
    const char *utf16 = lineno == 1 ? tok_utf16_bom((const uint8_t *)line, n) : NULL;
    if (utf16) {
      st = est_error(EST_ERR_INVALID_ARGUMENT, "%s:1: the file is %s (it starts with a byte-order mark); the "
                     "script reads UTF-8 text: convert it, e.g. iconv -f %s -t UTF-8", path, utf16, utf16);
      break;
    }
    bool blank;
    size_t bad = scan_line(line, n, &blank);
    if (bad < n) {
      st = est_error(EST_ERR_INVALID_ARGUMENT, "%s:%llu: invalid UTF-8 at byte %zu of the line (the script's "
                     "tf.gfile reader decodes strictly)", path, (unsigned long long)lineno, bad);
      break;
    }
    if (blank) {
      if ((st = close_document(c)) != EST_OK) break;
      continue;
    }
    const int32_t *ids;
    size_t nids;
    if ((st = est_tokenizer_encode(tok, line, n, &ids, &nids)) != EST_OK) break;
    if (nids == 0) {
      if (c->empty_lines++ < PT_MAX_LINE_WARNINGS)
        EST_LOG_WARN("%s:%llu: the line has no tokens after BERT's cleaning (e.g. only control or format "
                     "characters); skipped, as the script does", path, (unsigned long long)lineno);
      continue;
    }
    for (size_t k = 0; k < nids; k++)
      if (ids[k] == EST_TOKEN_UNK_MISSING) {
        st = est_error(EST_ERR_INVALID_ARGUMENT, "%s:%llu: a word becomes [UNK] but the vocab %s has no [UNK] "
                       "(the script fails with a KeyError)", path, (unsigned long long)lineno,
                       est_vocab_path(est_tokenizer_vocab(tok)));
        break;
      }
    if (st != EST_OK) break;
    if (c->nsent == c->doc_start[c->ndocs]) {   /* the first sentence of a document */
      c->doc_path = path;
      c->doc_line = lineno;
    }
    if ((st = add_sentence(c, ids, nids)) != EST_OK) break;
    if (progress_seconds > 0 && (lineno & 4095) == 0 && now_seconds() - *last_report >= progress_seconds) {
      *last_report = now_seconds();
      EST_LOG_INFO("read %llu lines: %llu documents, %llu sentences, %llu tokens so far",
                   (unsigned long long)c->lines, (unsigned long long)c->ndocs, (unsigned long long)c->nsent,
                   (unsigned long long)c->ntokens);
    }
  }
  if (st == EST_OK && ferror(f)) st = est_error(EST_ERR_IO, "--input_file %s: read error after line %llu: %s", path,
                                                (unsigned long long)lineno, strerror(errno));
  free(line);
  return st;
}

static est_status read_file(pt_corpus *c, est_tokenizer *tok, const char *path, double progress_seconds,
                            double *last_report) {
  FILE *f = fopen(path, "rb");
  if (!f) return est_error(EST_ERR_NOT_FOUND, "--input_file %s: %s", path, strerror(errno));
  EST_LOG_INFO("  %s", path);
  est_status st = read_stream(c, tok, f, path, progress_seconds, last_report);
  fclose(f);
  return st;
}

static est_status begin_read(pt_corpus *c) {
  est_status st = grow((void **)&c->sent_start, &c->sent_cap, 1, sizeof *c->sent_start);
  if (st == EST_OK) st = grow((void **)&c->doc_start, &c->doc_cap, 1, sizeof *c->doc_start);
  if (st != EST_OK) return st;
  c->sent_start[c->nsent] = c->ntokens;
  c->doc_start[c->ndocs] = c->nsent;
  return EST_OK;
}

est_status pt_corpus_read_buffer(pt_corpus *c, est_tokenizer *tok, const char *data, size_t size, const char *name) {
  est_status st = begin_read(c);
  if (st != EST_OK || size == 0) return st == EST_OK ? close_document(c) : st;
  FILE *f = fmemopen((void *)data, size, "rb");
  if (!f) return est_error(EST_ERR_NO_MEMORY, "%s: fmemopen: %s", name, strerror(errno));
  double last = 0;
  st = read_stream(c, tok, f, name, 0, &last);
  fclose(f);
  if (st == EST_OK) st = close_document(c);
  c->doc_path = NULL;
  return st;
}

est_status pt_corpus_read(pt_corpus *c, est_tokenizer *tok, const char *const *files, size_t n,
                          double progress_seconds) {
  est_status st = begin_read(c);
  if (st != EST_OK) return st;
  double last = now_seconds();
  EST_LOG_INFO("*** Reading from input files ***");
  for (size_t i = 0; i < n; i++)
    if ((st = read_file(c, tok, files[i], progress_seconds, &last)) != EST_OK) return st;
  st = close_document(c);
  c->doc_path = NULL;
  if (st != EST_OK) return st;
  if (c->empty_lines > PT_MAX_LINE_WARNINGS)
    EST_LOG_WARN("%llu lines in all had no tokens and were skipped", (unsigned long long)c->empty_lines);
  if (c->one_sentence_docs > PT_MAX_LINE_WARNINGS)
    EST_LOG_WARN("%llu documents in all have one sentence (segment B of their instances always comes from "
                 "another document)", (unsigned long long)c->one_sentence_docs);
  EST_LOG_INFO("read %llu lines: %llu documents, %llu sentences, %llu tokens", (unsigned long long)c->lines,
               (unsigned long long)c->ndocs, (unsigned long long)c->nsent, (unsigned long long)c->ntokens);
  return EST_OK;
}

/* ---- --input_file patterns ---------------------------------------------------------- */

void est_pretraining_free_inputs(char **files, size_t n) {
  for (size_t i = 0; files && i < n; i++) free(files[i]);
  free(files);
}

static est_status push_file(char ***files, size_t *n, size_t *cap, const char *name) {
  if (*n == *cap) {
    size_t cap2 = *cap ? *cap * 2 : 8;
    char **p = realloc(*files, cap2 * sizeof *p);
    if (!p) return est_error(EST_ERR_NO_MEMORY, "--input_file: out of memory");
    *files = p;
    *cap = cap2;
  }
  if (!((*files)[*n] = strdup(name))) return est_error(EST_ERR_NO_MEMORY, "--input_file: out of memory");
  (*n)++;
  return EST_OK;
}

est_status est_pretraining_expand_inputs(const char *patterns, char ***files, size_t *n) {
  *files = NULL;
  *n = 0;
  if (!patterns || !*patterns) return est_error(EST_ERR_INVALID_ARGUMENT, "--input_file is empty");
  char *copy = strdup(patterns);
  if (!copy) return est_error(EST_ERR_NO_MEMORY, "--input_file: out of memory");
  size_t cap = 0;
  est_status st = EST_OK;
  /* split(",") keeps empty fields; an empty pattern matches nothing and is reported. */
  for (char *p = copy, *end; st == EST_OK && p; p = end ? end + 1 : NULL) {
    end = strchr(p, ',');
    if (end) *end = 0;
    glob_t g;
    int rc = *p ? glob(p, 0, NULL, &g) : GLOB_NOMATCH;
    if (rc == 0) {
      for (size_t i = 0; st == EST_OK && i < g.gl_pathc; i++) st = push_file(files, n, &cap, g.gl_pathv[i]);
      globfree(&g);
    } else {
      if (rc != GLOB_NOMATCH) globfree(&g);
      st = est_error(EST_ERR_NOT_FOUND, "--input_file: '%s' matches no file", p);
    }
  }
  free(copy);
  if (st != EST_OK) {
    est_pretraining_free_inputs(*files, *n);
    *files = NULL;
    *n = 0;
  }
  return st;
}
