/* est/ner.h — token classification data (issue 49): CoNLL and JSON lines files, the label
 * list, sub-token features in windows, and seqeval's entity-level metrics.
 *
 *     est_ner_data train;
 *     est_ner_read_file(&train, "data/train.txt");      // CoNLL, or JSON lines
 *     char **labels; size_t nl;
 *     est_ner_labels_from(&train, &labels, &nl);        // "O" first, the rest sorted
 *     est_ner_features fs;
 *     est_ner_feature_options o = {.max_seq_length = 128};
 *     est_ner_features_build(&fs, &train, (const char *const *)labels, nl, tok, &o);
 *     // ... predictions [S, C] per feature -> est_ner_merge_predictions -> tags per word
 *     est_ner_report r;
 *     est_ner_evaluate(&r, gold_tags, pred_tags, ...);  // seqeval's default mode
 *
 * Files (est_ner_read_*):
 *   CoNLL       one token a line, any number of whitespace-separated columns, the tag last
 *               (a line of one column is a token without a tag); blank lines end sentences;
 *               lines starting with "-DOCSTART-" are skipped (and end a sentence).
 *   JSON lines  one object a line, {"tokens": [str...], "tags": [str...]} of equal length
 *               ("ner_tags" is taken for "tags", as the HF datasets name it); chosen when the
 *               first non-blank byte of the file is '{'.
 *
 * Features (est_ner_features_build): each word is tokenized alone ([UNK] when it gives no
 * sub-token); [CLS] sub-tokens... [SEP], padded to max_seq_length. label_ids are the word's
 * label at its first sub-token and -100 elsewhere (the BERT paper, transformers' run_ner);
 * with label_all_tokens the later sub-tokens get the word's label too, B-X turned into I-X
 * when I-X is a label (run_ner's b_to_i_label). A sentence longer than max_seq_length - 2
 * sub-tokens is cut into windows of whole words, each starting doc_stride sub-tokens (or the
 * next word boundary after) past the previous one; every word belongs to the window where
 * it has the most context on its shorter side (run_squad's _check_is_max_context, per word,
 * the first such window on ties), and only there is it labelled and predicted, so merging
 * the windows back gives each word exactly one tag. */
#ifndef EST_NER_H
#define EST_NER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "est/status.h"
#include "est/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { EST_NER_IGNORE = -100 }; /* label_ids of a position the loss skips */

typedef struct est_ner_sentence {
  size_t num_words;
  char **words;
  char **tags;                  /* [num_words]; a tag may be NULL (an unlabelled CoNLL line) */
} est_ner_sentence;

typedef struct est_ner_data {
  size_t count;
  est_ner_sentence *sentences;
} est_ner_data;

/* Reads a CoNLL or JSON lines file (format by content, above). Errors name the file and the
 * line. An empty file is zero sentences. */
est_status est_ner_read_file(est_ner_data *out, const char *path);
est_status est_ner_read_buffer(est_ner_data *out, const char *text, size_t len, const char *name);
void est_ner_data_free(est_ner_data *d);

/* The distinct tags of d: "O" first when present, then the others sorted bytewise. *labels
 * (each string too) is the caller's: est_ner_labels_free. An empty list is an error. */
est_status est_ner_labels_from(const est_ner_data *d, char ***labels, size_t *n);
void est_ner_labels_free(char **labels, size_t n);
/* The index of tag in labels, or -1. */
int est_ner_label_index(const char *const *labels, size_t n, const char *tag);

typedef struct est_ner_feature_options {
  int max_seq_length;           /* S, at least 3 */
  int doc_stride;               /* sub-tokens between window starts; 0: (S - 2) / 2 */
  bool label_all_tokens;
} est_ner_feature_options;

/* One window: [S] each. word_index[s] is the sentence's word whose first sub-token is at s
 * when this window owns that word, else -1. */
typedef struct est_ner_feature {
  int64_t sentence;
  int32_t *input_ids, *input_mask, *segment_ids, *label_ids, *word_index;
} est_ner_feature;

typedef struct est_ner_features {
  size_t count;
  int seq_length;
  est_ner_feature *items;
  void *block_;                 /* the features' arrays */
} est_ner_features;

/* Tags outside labels (or absent) get label_ids -100. */
est_status est_ner_features_build(est_ner_features *out, const est_ner_data *d, const char *const *labels,
                                  size_t num_labels, est_tokenizer *tok, const est_ner_feature_options *o);
void est_ner_features_free(est_ner_features *f);

/* Merges window predictions back into one label index a word: probs[i] is feature i's
 * [S, C] probabilities (argmax, the first maximum); tags_out[k][w] of sentence k, word w
 * (arrays the caller allocated with d's shapes). A word no window owns (none: a bug) is -1. */
est_status est_ner_merge_predictions(int32_t *const *tags_out, const est_ner_data *d, const est_ner_features *f,
                                     const float *const *probs, int num_labels);

/* ---- seqeval (src/ner/ner_metrics.c) ------------------------------------------------------ */

/* One entity of a flattened tag sequence: type, first and last index (inclusive). */
typedef struct est_ner_entity {
  char *type;
  size_t begin, end;
} est_ner_entity;

/* seqeval.metrics.sequence_labeling.get_entities (default mode, suffix=False) over the
 * sentences concatenated with an "O" after each (seqeval's nested-list flattening). A NULL
 * tag reads as "O". *out is the caller's: est_ner_entities_free. */
est_status est_ner_get_entities(est_ner_entity **out, size_t *n, const char *const *const *sentences,
                                const size_t *lengths, size_t num_sentences);
void est_ner_entities_free(est_ner_entity *e, size_t n);

typedef struct est_ner_type_score {
  char *type;
  double precision, recall, f1;
  int64_t support;              /* gold entities of the type ("number" in transformers' run_ner) */
} est_ner_type_score;

typedef struct est_ner_report {
  double precision, recall, f1, accuracy; /* micro average; token accuracy */
  int64_t num_true, num_pred, num_correct;
  size_t num_types;
  est_ner_type_score *types;    /* sorted by type, bytewise */
} est_ner_report;

/* seqeval's precision_score / recall_score / f1_score (micro), classification_report's rows
 * and accuracy_score, of gold against pred (same shapes; a zero denominator gives 0, as
 * zero_division="warn"). */
est_status est_ner_evaluate(est_ner_report *r, const char *const *const *gold, const char *const *const *pred,
                            const size_t *lengths, size_t num_sentences);
void est_ner_report_free(est_ner_report *r);

#ifdef __cplusplus
}
#endif
#endif
