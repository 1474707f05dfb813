/* libFuzzer target: arbitrary bytes as the text, through real tokenizer.json files (issue 47):
 * the five of ../shared/data/tokenizers (bert-base-multilingual-cased WordPiece, albert-base-v2
 * and t5 Unigram with Precompiled, gpt2 byte-level BPE, open-llama-3b byte-fallback BPE; the
 * directory is EST_SHARED_TOKENIZERS, else ../shared/data/tokenizers beside the repository:
 * absent files are left out, so the replay under `make test` runs without them) and the small
 * files of tests/data/tokenizers, loaded once.
 *
 * The first input byte picks a truncation (none, or max_length 3..34 with a stride under it,
 * LongestFirst / OnlyFirst / OnlySecond, Right or Left); the rest is the text, also cut in two
 * as a pair. Invariants, for every file: an encoding either fails with INVALID_ARGUMENT and a
 * message (a truncation tokenizers refuses too) or gives ids with a token, masks of 0 and 1,
 * offsets start <= end inside the code points of its text, no more tokens than max_length
 * (padding off), and the same for each overflowing window but its length (a side cut to 0
 * tokens goes to the overflowing windows whole, as Encoding::truncate(0) does); invalid UTF-8 is never a crash: the
 * text encodes exactly as its valid bytes alone do (the bytes Python's decode(errors="ignore")
 * drops are dropped); a twin (est_tokenizer_twin, one per thread in est serve) encodes alike; and
 * the ids decode (est_tokenizer_decode) to a string. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/file.h"
#include "est/tokenizer.h"

#ifndef EST_TEST_DATA
#define EST_TEST_DATA "tests/data"
#endif

static const char *const REAL[] = {"bert-base-multilingual-cased", "albert-base-v2", "gpt2", "t5", "open-llama-3b"};
static const char *const SMALL[] = {"unigram.json", "bpe.json", "wordlevel.json", "wordpiece.json", "suffix.json",
                                    "fallback.json", "roberta_tiny.json", "xlmr_tiny.json"};
enum { MAX_TOK = 16 };
static est_tokenizer *toks[MAX_TOK];
static char names[MAX_TOK][1024];
static int ntoks;

static void load(const char *path) {
  if (!est_file_exists(path)) return;
  if (est_tokenizer_from_json(&toks[ntoks], path) != EST_OK) {
    fprintf(stderr, "fuzz_tokenizer_text: %s\n", est_error_message());
    abort();
  }
  snprintf(names[ntoks++], sizeof names[0], "%s", path);
}

static void load_all(void) {
  const char *dir = getenv("EST_SHARED_TOKENIZERS");
  char path[1024];
  for (size_t i = 0; i < sizeof REAL / sizeof *REAL; i++) {
    if (dir) snprintf(path, sizeof path, "%s/%s.tokenizer.json", dir, REAL[i]);
    else snprintf(path, sizeof path, EST_TEST_DATA "/../../../shared/data/tokenizers/%s.tokenizer.json", REAL[i]);
    load(path);
  }
  for (size_t i = 0; i < sizeof SMALL / sizeof *SMALL; i++) {
    snprintf(path, sizeof path, EST_TEST_DATA "/tokenizers/%s", SMALL[i]);
    load(path);
  }
  if (ntoks < (int)(sizeof SMALL / sizeof *SMALL)) abort(); /* the committed files at least */
}

/* s[0, n) without the bytes a lossy UTF-8 decode drops, in *out (malloc'd); its code points. */
static int32_t valid_only(const char *s, size_t n, char **out, size_t *out_n) {
  uint32_t *cps = malloc((n + 1) * sizeof *cps);
  char *b = malloc(4 * n + 1);
  if (!cps || !b) abort();
  size_t m = est_utf8_decode_lossy(s, n, cps), k = 0;
  for (size_t i = 0; i < m; i++) {
    uint32_t c = cps[i];
    if (c < 0x80) b[k++] = (char)c;
    else if (c < 0x800) b[k++] = (char)(0xC0 | c >> 6), b[k++] = (char)(0x80 | (c & 0x3F));
    else if (c < 0x10000)
      b[k++] = (char)(0xE0 | c >> 12), b[k++] = (char)(0x80 | (c >> 6 & 0x3F)), b[k++] = (char)(0x80 | (c & 0x3F));
    else
      b[k++] = (char)(0xF0 | c >> 18), b[k++] = (char)(0x80 | (c >> 12 & 0x3F)), b[k++] = (char)(0x80 | (c >> 6 & 0x3F)),
      b[k++] = (char)(0x80 | (c & 0x3F));
  }
  free(cps);
  *out = b;
  *out_n = k;
  return (int32_t)m;
}

static void fail(int t, const char *what, size_t i) {
  fprintf(stderr, "fuzz_tokenizer_text: %s: %s (token %zu)\n", names[t], what, i);
  abort();
}

static void check_one(int t, const est_tokenizer *tok, const est_encoding *e, int32_t bound, size_t max_length) {
  if (max_length && e->n > max_length) fail(t, "longer than max_length", e->n);
  for (size_t i = 0; i < e->n; i++) {
    if ((e->attention_mask[i] != 0 && e->attention_mask[i] != 1) ||
        (e->special_tokens_mask[i] != 0 && e->special_tokens_mask[i] != 1) || e->type_ids[i] < 0 || !e->tokens[i])
      fail(t, "a mask, type id or token name", i);
    if (e->offset_start[i] < 0 || e->offset_start[i] > e->offset_end[i] || e->offset_end[i] > bound)
      fail(t, "offsets", i);
    if (!e->special_tokens_mask[i] && !est_tokenizer_id_to_token(tok, e->ids[i])) fail(t, "an id with no token", i);
  }
}

/* A copy of an encoding's ids, to compare with another tokenizer's. */
static int32_t *ids_copy(const est_encoding *e) {
  int32_t *c = malloc((e->n + 1) * sizeof *c);
  if (!c) abort();
  if (e->n) memcpy(c, e->ids, e->n * sizeof *c);
  return c;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!ntoks) load_all();
  if (size < 1 || size > 4096) return 0;
  const uint8_t knob = data[0];
  const char *text = (const char *)data + 1;
  const size_t n = size - 1, half = n / 2;
  est_truncation trunc = {0};
  if (knob & 1) {
    trunc.enabled = true;
    trunc.max_length = 3 + (knob >> 1 & 31);
    trunc.stride = (knob >> 6) % trunc.max_length;
    trunc.strategy = (est_truncation_strategy)((knob >> 3) % 3);
    trunc.left = knob & 0x80;
  }
  char *clean;
  size_t clean_n;
  const int32_t whole = valid_only(text, n, &clean, &clean_n);
  char *c1, *c2;
  size_t n1, n2;
  const int32_t first = valid_only(text, half, &c1, &n1), second = valid_only(text + half, n - half, &c2, &n2);
  free(c1), free(c2);
  for (int t = 0; t < ntoks; t++) {
    est_tokenizer *tok = toks[t];
    *est_tokenizer_truncation(tok) = trunc;
    est_tokenizer_padding(tok)->enabled = false;
    for (int pair = 0; pair < 2; pair++) {
      est_encoding e;
      est_status st = pair ? est_tokenizer_encode_pair(tok, text, half, text + half, n - half, true, &e)
                           : est_tokenizer_encode_pair(tok, text, n, NULL, 0, true, &e);
      if (st != EST_OK) {
        if (st != EST_ERR_INVALID_ARGUMENT || !est_error_message()[0] || !trunc.enabled) abort();
        continue;
      }
      const int32_t bound = pair ? (first > second ? first : second) : whole;
      check_one(t, tok, &e, bound, trunc.max_length);
      for (size_t k = 0; k < est_tokenizer_num_overflowing(tok); k++) {
        est_encoding o;
        if (!est_tokenizer_overflowing(tok, k, &o)) abort();
        check_one(t, tok, &o, bound, 0); /* a side cut to 0 tokens overflows whole, as in tokenizers */
      }
      if (pair) continue;
      char *decoded;
      size_t decoded_n;
      if (est_tokenizer_decode(tok, e.ids, e.n, false, &decoded, &decoded_n) != EST_OK || decoded[decoded_n]) abort();
      free(decoded);
      /* the valid bytes alone, and a twin, encode alike */
      int32_t *ids = ids_copy(&e);
      const size_t count = e.n;
      est_encoding v;
      if (est_tokenizer_encode_pair(tok, clean, clean_n, NULL, 0, true, &v) != EST_OK || v.n != count ||
          (count && memcmp(ids, v.ids, count * sizeof *ids)))
        fail(t, "the valid bytes alone encode otherwise", count);
      if (t == (int)(knob % ntoks)) {
        est_tokenizer *twin;
        if (est_tokenizer_twin(&twin, tok) != EST_OK ||
            est_tokenizer_encode_pair(twin, text, n, NULL, 0, true, &v) != EST_OK || v.n != count ||
            (count && memcmp(ids, v.ids, count * sizeof *ids)))
          fail(t, "the twin encodes otherwise", count);
        est_tokenizer_free(twin);
      }
      free(ids);
    }
  }
  free(clean);
  return 0;
}
