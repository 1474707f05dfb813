/* libFuzzer target: create_pretraining_data's document reader (src/pretraining_data/pretraining_corpus.c)
 * on arbitrary text, and the instances the script's generator makes of what it reads.
 *
 * Input: byte 0 holds options (bit 0 do_lower_case, bit 1 do_whole_word_mask, bit 2 a vocab
 * without [UNK]), byte 1 max_seq_length (5 + b % 60), byte 2 max_predictions_per_seq
 * (b % 12), byte 3 the random seed; the rest is the corpus text (documents separated by blank
 * lines, one sentence per line), tokenized with a tiny vocab.
 *
 * Invariants: the packed corpus is consistent (sentence and document starts rising, every
 * sentence >= 1 token, every document >= 1 sentence, ids inside the vocab); each instance is
 * [CLS] a [SEP] b [SEP] with both segments non-empty, n <= max_seq_length, masked positions
 * sorted, distinct, never on [CLS]/[SEP], their labels the original ids, zeros past n and m. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pretraining_data/pretraining_internal.h"
#include "est/log.h"

static const char vocab_text[] =
    "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\nquick\nbrown\nfox\njump\n##s\n##ed\n##ing\nover\nlazy\ndog\n"
    "a\nb\nc\n##a\n##b\n.\n,\n!\n?\n'\"\n-\n\xe4\xb8\xad\n\xe6\x96\x87\ncaf\xc3\xa9\nna\xc3\xafve\nun\n##want\n";

typedef struct {
  int seq, pred;
  int32_t vsize, cls, sep;
} check_ctx;

static const pt_generator *current; /* its tokens: the instance before masking */

static est_status check_instance(void *p, const int32_t *rec) {
  const check_ctx *c = p;
  int n = rec[PT_REC_N], la = rec[PT_REC_LEN_A], m = rec[PT_REC_MASKED];
  const int32_t *ids = rec + PT_REC_IDS, *pos = ids + c->seq, *lab = pos + c->pred;
  if (n < 5 || n > c->seq || la < 1 || n - la - 3 < 1 || m < 0 || m > c->pred) abort();
  if (rec[PT_REC_RANDOM_NEXT] != 0 && rec[PT_REC_RANDOM_NEXT] != 1) abort();
  /* [CLS] and the [SEP]s are never candidates, so they are never masked. */
  if (ids[0] != c->cls || ids[la + 1] != c->sep || ids[n - 1] != c->sep) abort();
  for (int i = 0; i < c->seq; i++)
    if (i < n ? (ids[i] < 0 || ids[i] >= c->vsize) : ids[i] != 0) abort();
  const int32_t *orig = current->tokens; /* the generator's unmasked [CLS] a [SEP] b [SEP] */
  for (int j = 0; j < c->pred; j++) {
    if (j >= m) {
      if (pos[j] != 0 || lab[j] != 0) abort();
      continue;
    }
    if (pos[j] <= 0 || pos[j] >= n - 1 || pos[j] == la + 1 || (j && pos[j] <= pos[j - 1])) abort();
    if (lab[j] != orig[pos[j]]) abort();
  }
  return EST_OK;
}

/* The corpus's packed arrays agree with each other. */
static void check_corpus(const pt_corpus *c, int32_t vsize) {
  if (c->ndocs && c->doc_start[c->ndocs] != c->nsent) abort();
  if (c->sent_start[c->nsent] != c->ntokens) abort();
  for (uint64_t d = 0; d < c->ndocs; d++)
    if (c->doc_start[d + 1] <= c->doc_start[d]) abort();
  for (uint64_t s = 0; s < c->nsent; s++)
    if (c->sent_start[s + 1] <= c->sent_start[s]) abort();
  for (uint64_t t = 0; t < c->ntokens; t++)
    if (c->tokens[t] < 0 || c->tokens[t] >= vsize) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  est_log_set_level(EST_LOG_OFF); /* the reader warns per empty line */
  if (size < 4) return 0;
  int opts = data[0], seq = 5 + data[1] % 60, pred = data[2] % 12, seed = data[3];
  data += 4, size -= 4;

  /* Without [UNK]: the vocab minus its second line. */
  char vtext[sizeof vocab_text];
  size_t vlen = sizeof vocab_text - 1;
  memcpy(vtext, vocab_text, sizeof vocab_text);
  if (opts & 4) {
    const size_t drop = sizeof "[UNK]\n" - 1, at = sizeof "[PAD]\n" - 1;
    memmove(vtext + at, vtext + at + drop, vlen - at - drop);
    vlen -= drop;
  }
  est_vocab *v = NULL;
  est_tokenizer *tok = NULL;
  if (est_vocab_load_buffer(&v, vtext, vlen, "fuzz-vocab") != EST_OK) abort();
  if (est_tokenizer_create(&tok, v, opts & 1) != EST_OK) abort();
  int32_t vsize = est_vocab_size(v);

  pt_corpus corpus;
  pt_corpus_init(&corpus);
  if (pt_corpus_read_buffer(&corpus, tok, (const char *)data, size, "fuzz-corpus") == EST_OK &&
      corpus.ndocs > 0) {
    check_corpus(&corpus, vsize);
    uint8_t *cont = calloc((size_t)vsize, 1);
    uint32_t *order = malloc(corpus.ndocs * sizeof *order);
    if (!cont || !order) abort();
    for (int32_t i = 0; i < vsize; i++) cont[i] = !strncmp(est_vocab_token(v, i), "##", 2);
    for (uint64_t d = 0; d < corpus.ndocs; d++) order[d] = (uint32_t)(corpus.ndocs - 1 - d);
    est_pyrandom rng;
    est_pyrandom_seed(&rng, seed);
    pt_generator g;
    memset(&g, 0, sizeof g);
    g.corpus = &corpus;
    g.doc_order = order;
    g.rng = &rng;
    g.max_seq_length = seq;
    g.max_predictions_per_seq = pred;
    g.masked_lm_prob = 0.15;
    g.short_seq_prob = 0.25;
    g.do_whole_word_mask = (opts & 2) != 0;
    g.cls_id = est_vocab_find(v, "[CLS]", 5);
    g.sep_id = est_vocab_find(v, "[SEP]", 5);
    g.mask_id = est_vocab_find(v, "[MASK]", 6);
    g.is_continuation = cont;
    g.n_vocab_words = vsize;
    if (pt_generator_init(&g) != EST_OK) abort();
    current = &g;
    check_ctx c = {seq, pred, vsize, g.cls_id, g.sep_id};
    for (uint64_t d = 0; d < corpus.ndocs; d++)
      if (pt_instances_from_document(&g, d, check_instance, &c) != EST_OK) abort();
    pt_generator_free(&g);
    free(order);
    free(cont);
  }
  pt_corpus_free(&corpus);
  est_tokenizer_free(tok);
  est_vocab_free(v);
  return 0;
}
