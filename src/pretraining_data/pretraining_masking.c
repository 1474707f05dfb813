/* create_pretraining_data.py's create_instances_from_document, truncate_seq_pair and
 * create_masked_lm_predictions over packed documents. Every random draw is the script's, in
 * its order (google-research/bert create_pretraining_data.py):
 *
 *   per document: random() < short_seq_prob ? target = randint(2, max_num_tokens)
 *   per chunk:    a_end = randint(1, len(chunk) - 1) when the chunk has >= 2 segments;
 *                 random() < 0.5 (skipped when the chunk has 1 segment: random next);
 *                 random next: up to 10 x randint(0, ndocs - 1) until another document,
 *                 then randint(0, len(doc) - 1) for the first segment taken;
 *                 truncation: random() < 0.5 per token dropped (front : back);
 *   masking:      shuffle(candidates); per masked piece random() < 0.8 ([MASK]), else
 *                 random() < 0.5 (keep), else randint(0, len(vocab_words) - 1).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pretraining_data/pretraining_internal.h"

int pt_num_to_predict(int n_tokens, double masked_lm_prob, int max_predictions) {
  /* Python's float round(): round half away from zero, then fix exact halves to even. */
  double x = (double)n_tokens * masked_lm_prob;
  double r = round(x);
  if (fabs(x - r) == 0.5) r = 2.0 * round(x / 2.0);
  int k = r < 1.0 ? 1 : (r > (double)max_predictions ? max_predictions : (int)r);
  return k < max_predictions ? k : max_predictions;
}

est_status pt_generator_init(pt_generator *g) {
  size_t seq = (size_t)g->max_seq_length, pred = (size_t)g->max_predictions_per_seq;
  g->a_cap = g->b_cap = seq;
  g->a = malloc(g->a_cap * sizeof *g->a);
  g->b = malloc(g->b_cap * sizeof *g->b);
  g->tokens = malloc(seq * sizeof *g->tokens);
  g->cand_pos = malloc(seq * sizeof *g->cand_pos);
  g->cand_start = malloc((seq + 1) * sizeof *g->cand_start);
  g->cand_order = malloc((seq + 1) * sizeof *g->cand_order);
  g->rec = calloc(PT_RECORD_WORDS(seq, pred), sizeof *g->rec);
  if (!g->a || !g->b || !g->tokens || !g->cand_pos || !g->cand_start || !g->cand_order || !g->rec) {
    pt_generator_free(g);
    return est_error(EST_ERR_NO_MEMORY, "create_pretraining_data: out of memory for max_seq_length %zu", seq);
  }
  return EST_OK;
}

void pt_generator_free(pt_generator *g) {
  free(g->a);
  free(g->b);
  free(g->tokens);
  free(g->cand_pos);
  free(g->cand_start);
  free(g->cand_order);
  free(g->rec);
  g->a = g->b = g->tokens = g->cand_pos = g->rec = NULL;
  g->cand_start = g->cand_order = NULL;
}

/* Appends sentence s of the corpus to buf[*len ..), growing it. */
static est_status append_sentence(const pt_corpus *c, uint64_t s, int32_t **buf, size_t *cap, size_t *len) {
  size_t n = (size_t)(c->sent_start[s + 1] - c->sent_start[s]);
  if (*len + n > *cap) {
    size_t cap2 = *cap * 2 > *len + n ? *cap * 2 : *len + n;
    int32_t *p = realloc(*buf, cap2 * sizeof *p);
    if (!p) return est_error(EST_ERR_NO_MEMORY, "create_pretraining_data: out of memory for a segment of %zu tokens", *len + n);
    *buf = p;
    *cap = cap2;
  }
  memcpy(*buf + *len, c->tokens + c->sent_start[s], n * sizeof **buf);
  *len += n;
  return EST_OK;
}

static int cmp_pos(const void *x, const void *y) {
  int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
  return (a > b) - (a < b);
}

/* create_masked_lm_predictions on g->tokens[0..n) with [SEP] at len_a + 1 and n - 1: fills
 * the record's ids, positions and labels. */
static void mask_tokens(pt_generator *g, int n, int len_a) {
  int32_t *rec = g->rec, *ids = rec + PT_REC_IDS;
  int seq = g->max_seq_length, pred = g->max_predictions_per_seq;
  int32_t *positions = ids + seq, *labels = positions + pred;
  const int32_t *tok = g->tokens;

  /* Candidates: every position but [CLS] and the two [SEP]s. With whole-word masking a
   * "##" piece joins the previous candidate, even across the [SEP] after tokens_a, as in
   * the script. Candidate k is cand_pos[cand_start[k] .. cand_start[k+1]). */
  uint32_t ncand = 0, npos = 0;
  for (int i = 0; i < n; i++) {
    if (i == 0 || i == len_a + 1 || i == n - 1) continue;
    if (!(g->do_whole_word_mask && ncand >= 1 && g->is_continuation[tok[i]])) g->cand_start[ncand++] = npos;
    g->cand_pos[npos++] = i;
  }
  g->cand_start[ncand] = npos;
  for (uint32_t k = 0; k < ncand; k++) g->cand_order[k] = k;
  est_pyrandom_shuffle(g->rng, g->cand_order, ncand, sizeof *g->cand_order);

  memcpy(ids, tok, (size_t)n * sizeof *ids);
  memset(ids + n, 0, (size_t)(seq - n) * sizeof *ids);
  int num_to_predict = pt_num_to_predict(n, g->masked_lm_prob, pred);
  int m = 0;
  /* Candidates are disjoint, so the script's covered_indexes check never fires. */
  for (uint32_t k = 0; k < ncand; k++) {
    if (m >= num_to_predict) break;
    uint32_t c = g->cand_order[k], lo = g->cand_start[c], hi = g->cand_start[c + 1];
    if (m + (int)(hi - lo) > num_to_predict) continue;  /* a whole word would not fit */
    for (uint32_t q = lo; q < hi; q++) {
      int32_t i = g->cand_pos[q], replacement;
      if (est_pyrandom_random(g->rng) < 0.8) replacement = g->mask_id;
      else if (est_pyrandom_random(g->rng) < 0.5) replacement = tok[i];
      else {
        int64_t w = est_pyrandom_randint(g->rng, 0, g->n_vocab_words - 1);
        replacement = g->vocab_words ? g->vocab_words[w] : (int32_t)w;
      }
      ids[i] = replacement;
      positions[m] = i;
      m++;
    }
  }
  /* sorted(masked_lms, key=index): positions are distinct; labels are the original tokens. */
  qsort(positions, (size_t)m, sizeof *positions, cmp_pos);
  for (int j = 0; j < m; j++) labels[j] = tok[positions[j]];
  memset(positions + m, 0, (size_t)(pred - m) * sizeof *positions);
  memset(labels + m, 0, (size_t)(pred - m) * sizeof *labels);
  rec[PT_REC_N] = n;
  rec[PT_REC_LEN_A] = len_a;
  rec[PT_REC_MASKED] = m;
}

est_status pt_instances_from_document(pt_generator *g, uint64_t doc_pos, pt_emit_fn emit, void *ctx) {
  const pt_corpus *c = g->corpus;
  est_pyrandom *rng = g->rng;
  uint64_t ndocs = c->ndocs, doc = g->doc_order[doc_pos];
  uint64_t first = c->doc_start[doc], nseg = pt_doc_sentences(c, doc);
  const int64_t max_num_tokens = g->max_seq_length - 3;   /* room for [CLS], [SEP], [SEP] */

  int64_t target = max_num_tokens;
  if (est_pyrandom_random(rng) < g->short_seq_prob) target = est_pyrandom_randint(rng, 2, max_num_tokens);

  /* current_chunk is always the segments chunk_begin .. i of this document. */
  uint64_t chunk_begin = 0;
  int64_t current_length = 0;
  for (int64_t i = 0; i < (int64_t)nseg; i++) {
    current_length += (int64_t)(c->sent_start[first + i + 1] - c->sent_start[first + i]);
    if (!(i == (int64_t)nseg - 1 || current_length >= target)) continue;
    int64_t chunk_len = i - (int64_t)chunk_begin + 1;
    int64_t a_end = 1;
    if (chunk_len >= 2) a_end = est_pyrandom_randint(rng, 1, chunk_len - 1);
    size_t la = 0, lb = 0;
    est_status st;
    for (int64_t j = 0; j < a_end; j++)
      if ((st = append_sentence(c, first + chunk_begin + j, &g->a, &g->a_cap, &la)) != EST_OK) return st;

    int is_random_next = 0;
    if (chunk_len == 1 || est_pyrandom_random(rng) < 0.5) {
      is_random_next = 1;
      int64_t target_b = target - (int64_t)la;
      /* Ten tries at another document; with one document the last try stands. */
      uint64_t rdoc_pos = 0;
      for (int t = 0; t < 10; t++) {
        rdoc_pos = (uint64_t)est_pyrandom_randint(rng, 0, (int64_t)ndocs - 1);
        if (rdoc_pos != doc_pos) break;
      }
      uint64_t rdoc = g->doc_order[rdoc_pos], rfirst = c->doc_start[rdoc], rn = pt_doc_sentences(c, rdoc);
      int64_t start = est_pyrandom_randint(rng, 0, (int64_t)rn - 1);
      for (uint64_t j = (uint64_t)start; j < rn; j++) {
        if ((st = append_sentence(c, rfirst + j, &g->b, &g->b_cap, &lb)) != EST_OK) return st;
        if ((int64_t)lb >= target_b) break;
      }
      /* The chunk's unused segments are "put back": the next chunk starts at them. */
      i -= chunk_len - a_end;
    } else {
      for (int64_t j = a_end; j < chunk_len; j++)
        if ((st = append_sentence(c, first + chunk_begin + j, &g->b, &g->b_cap, &lb)) != EST_OK) return st;
    }

    /* truncate_seq_pair: shorten the longer side (b on a tie), front or back at random. */
    size_t a0 = 0, a1 = la, b0 = 0, b1 = lb;
    while ((int64_t)((a1 - a0) + (b1 - b0)) > max_num_tokens) {
      bool trunc_a = a1 - a0 > b1 - b0;
      bool front = est_pyrandom_random(rng) < 0.5;
      if (trunc_a) {
        if (front) a0++;
        else a1--;
      } else {
        if (front) b0++;
        else b1--;
      }
    }
    /* [CLS] a [SEP] b [SEP]; both sides keep >= 1 token as max_num_tokens >= 2. */
    size_t na = a1 - a0, nb = b1 - b0;
    int32_t *t = g->tokens;
    t[0] = g->cls_id;
    memcpy(t + 1, g->a + a0, na * sizeof *t);
    t[na + 1] = g->sep_id;
    memcpy(t + na + 2, g->b + b0, nb * sizeof *t);
    t[na + nb + 2] = g->sep_id;
    mask_tokens(g, (int)(na + nb + 3), (int)na);
    g->rec[PT_REC_RANDOM_NEXT] = is_random_next;
    if ((st = emit(ctx, g->rec)) != EST_OK) return st;

    chunk_begin = (uint64_t)(i + 1);
    current_length = 0;
  }
  return EST_OK;
}
