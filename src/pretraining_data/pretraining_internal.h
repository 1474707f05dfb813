/* Internals of create_pretraining_data, shared by pretraining_corpus.c (text to documents),
 * pretraining_masking.c (documents to instances: the script's random choices) and
 * pretraining_data.c (the driver: shuffles, spill file, records). */
#ifndef EST_BERT_PRETRAINING_INTERNAL_H
#define EST_BERT_PRETRAINING_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "est/pretraining_data.h"
#include "est/pyrandom.h"
#include "est/tokenizer.h"

/* ---- corpus (pretraining_corpus.c) ------------------------------------------------ */

/* The script's all_documents, packed: sentence s is tokens[sent_start[s] .. sent_start[s+1]),
 * document d is sentences doc_start[d] .. doc_start[d+1]. Empty documents are dropped and
 * every sentence has at least one token, as in the script. */
typedef struct pt_corpus {
  int32_t *tokens;
  uint64_t ntokens, tokens_cap;
  uint64_t *sent_start;       /* [nsent + 1] */
  uint64_t nsent, sent_cap;
  uint64_t *doc_start;        /* [ndocs + 1] */
  uint64_t ndocs, doc_cap;
  uint64_t lines;             /* lines read, over all files */
  uint64_t empty_lines;       /* non-blank lines that tokenized to nothing (skipped) */
  uint64_t one_sentence_docs; /* documents of one sentence (kept; warned about) */
  /* where the open document's first sentence was read (for that warning); valid while
   * pt_corpus_read or pt_corpus_read_buffer runs */
  const char *doc_path;
  uint64_t doc_line;
} pt_corpus;

void pt_corpus_init(pt_corpus *c);
void pt_corpus_free(pt_corpus *c);

/* Reads the files in order into c (appending; documents continue across files). */
est_status pt_corpus_read(pt_corpus *c, est_tokenizer *tok, const char *const *files, size_t n,
                          double progress_seconds);
/* The same for one text in memory (`name` stands for its file in messages; no progress
 * log); for tests/fuzz/fuzz_pretraining_corpus.c. */
est_status pt_corpus_read_buffer(pt_corpus *c, est_tokenizer *tok, const char *data, size_t size, const char *name);

static inline uint64_t pt_doc_sentences(const pt_corpus *c, uint64_t d) {
  return c->doc_start[d + 1] - c->doc_start[d];
}

/* ---- instances (pretraining_masking.c) -------------------------------------------- */

/* One TrainingInstance as int32 words, fixed size PT_RECORD_WORDS(seq, pred):
 *   [0] number of tokens n (with [CLS] and both [SEP]), [1] len(tokens_a),
 *   [2] is_random_next, [3] number of masked positions m,
 *   [4 ..) seq token ids (masked; zero after n), then pred positions, then pred label ids
 *   (both sorted by position, zero after m). segment_ids follow from n and len(tokens_a). */
#define PT_REC_N 0
#define PT_REC_LEN_A 1
#define PT_REC_RANDOM_NEXT 2
#define PT_REC_MASKED 3
#define PT_REC_IDS 4
#define PT_RECORD_WORDS(seq, pred) (4 + (size_t)(seq) + 2 * (size_t)(pred))

typedef struct pt_generator {
  /* set by the caller */
  const pt_corpus *corpus;
  const uint32_t *doc_order;      /* [ndocs] position in all_documents -> corpus document */
  est_pyrandom *rng;
  int max_seq_length, max_predictions_per_seq;
  double masked_lm_prob, short_seq_prob;
  bool do_whole_word_mask;
  int32_t cls_id, sep_id, mask_id;
  const uint8_t *is_continuation; /* [vocab size] 1 when the token starts with "##" */
  const int32_t *vocab_words;     /* [n_vocab_words] list(vocab.keys()) as ids; NULL: 0..n-1 */
  int64_t n_vocab_words;
  /* scratch, grown on demand; free with pt_generator_free */
  int32_t *a, *b, *tokens, *cand_pos;
  size_t a_cap, b_cap;
  uint32_t *cand_start, *cand_order;
  int32_t *rec;
} pt_generator;

/* Allocates the scratch buffers once the fields above are set. */
est_status pt_generator_init(pt_generator *g);
void pt_generator_free(pt_generator *g);

/* Receives each instance record (PT_RECORD_WORDS words, valid during the call). */
typedef est_status (*pt_emit_fn)(void *ctx, const int32_t *rec);

/* create_instances_from_document(all_documents, doc_pos, ...): every instance of the
 * document at position doc_pos of the shuffled list, drawing from g->rng as the script. */
est_status pt_instances_from_document(pt_generator *g, uint64_t doc_pos, pt_emit_fn emit, void *ctx);

/* min(max_predictions, max(1, int(round(n_tokens * masked_lm_prob)))), Python's round():
 * halves go to the even neighbour. */
int pt_num_to_predict(int n_tokens, double masked_lm_prob, int max_predictions);

/* ---- records (pretraining_data.c) ------------------------------------------------- */

/* Serializes a record as the script's tf.train.Example under TF, features in the order
 * TF's protobuf map gave them (input_ids, masked_lm_weights, next_sentence_labels,
 * masked_lm_positions, input_mask, segment_ids, masked_lm_ids). out needs
 * pt_example_max_size bytes; returns the size written. */
size_t pt_example_max_size(int max_seq_length, int max_predictions);
size_t pt_example_serialize(const int32_t *rec, int max_seq_length, int max_predictions, uint8_t *out);

#endif
