/* est/classifier_features.h — run_classifier.py's convert_single_example and
 * file_based_convert_examples_to_features: InputExamples -> [CLS] a [SEP] (b [SEP]) ids,
 * mask, segment ids, zero padding, label id, is_real_example.
 *
 *     est_input_features f;
 *     est_convert_examples_to_features(&examples, labels, nlabels, 128, tok, &f);
 *     // f.input_ids[i * 128 + t], f.label_ids[i], ...   (in-memory, for prediction)
 *     est_input_features_free(&f);
 *
 *     est_file_based_convert_examples_to_features(&examples, labels, nlabels, 128, tok,
 *                                                 "out/train.tf_record");
 *     // one tf.train.Example per example: int64 input_ids[S], input_mask[S],
 *     // segment_ids[S], label_ids[1], is_real_example[1]; written atomically.
 *
 * Rules (docs/run_classifier.md §4): text_b is used only when non-NULL and non-empty, and a text_b
 * that tokenizes to nothing also gives the single-sentence layout; pairs are truncated to S-3
 * tokens by dropping the last token of the longer side (ties: from b); singles keep their first
 * S-2 tokens. PaddingInputExamples become all zeros with is_real_example 0. The first 5
 * examples of each call are logged as the reference does ("*** Example ***" ...).
 * A tokenizer.json without Google's vocab (est_tokenizer_vocab NULL; docs/tokenizer.md §9): rows
 * are its Encoding with special tokens and type ids, truncated LongestFirst to max_seq_length
 * by the tokenizer (est_feature_converter_init sets its truncation and turns its padding off).
 * Errors: the vocab lacks [CLS]/[SEP] (or [UNK] where an unknown word survives truncation),
 * a label outside the list, max_seq_length < 3 — each naming the example's guid and line.
 */
#ifndef EST_CLASSIFIER_FEATURES_H
#define EST_CLASSIFIER_FEATURES_H

#include <stddef.h>
#include <stdint.h>

#include "est/example.h"
#include "est/processors.h"
#include "est/status.h"
#include "est/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* _truncate_seq_pair on lengths: while *len_a + *len_b > max_length, shorten the longer one
 * (b on a tie). Tokens are always removed from the end, so lengths say it all. */
void est_truncate_seq_pair(size_t *len_a, size_t *len_b, size_t max_length);

/* Fixed context for converting many examples. */
typedef struct est_feature_converter {
  est_tokenizer *tok;
  const char *const *labels;
  size_t nlabels;
  int max_seq_length;
  int32_t cls_id, sep_id;
  /* Multi-label (set after init): an example's label is a field of comma-separated labels
   * (est_multi_label_ids), checked by the caller; est_convert_single_example's label_id is
   * then 0. */
  bool multi_label;
} est_feature_converter;

/* Looks up [CLS] and [SEP] (errors name the vocab file) and checks max_seq_length >= 3. */
est_status est_feature_converter_init(est_feature_converter *c, est_tokenizer *tok, const char *const *labels,
                                      size_t nlabels, int max_seq_length);

/* convert_single_example for one example into rows of max_seq_length int32s. ex_index < 5
 * logs the example. */
est_status est_convert_single_example(const est_feature_converter *c, int64_t ex_index,
                                      const est_input_example *ex, int32_t *input_ids, int32_t *input_mask,
                                      int32_t *segment_ids, int32_t *label_id, int32_t *is_real_example);

/* Features of n examples, row-major [count, max_seq_length] (int32, the dtype the model
 * consumes after the input pipeline's cast). */
typedef struct est_input_features {
  size_t count;
  int max_seq_length;
  int32_t *input_ids;         /* [count, S] */
  int32_t *input_mask;        /* [count, S] */
  int32_t *segment_ids;       /* [count, S] */
  int32_t *label_ids;         /* [count] */
  int32_t *is_real_example;   /* [count] */
} est_input_features;

/* The in-memory variant (convert_examples_to_features, plus is_real_example). */
est_status est_convert_examples_to_features(const est_examples *examples, const char *const *labels,
                                            size_t nlabels, int max_seq_length, est_tokenizer *tok,
                                            est_input_features *out);
void est_input_features_free(est_input_features *f);

/* file_based_convert_examples_to_features: one TFRecord of tf.train.Examples, replaced
 * atomically (a failure leaves any previous file untouched). */
est_status est_file_based_convert_examples_to_features(const est_examples *examples, const char *const *labels,
                                                       size_t nlabels, int max_seq_length, est_tokenizer *tok,
                                                       const char *output_file);

/* file_based_input_fn_builder's name_to_features: how to read those records back, e.g.
 * with est_tfrecord_input_fn (and EST_DATASET_CAST_INT32, the reference's int64 -> int32
 * cast): input_ids, input_mask, segment_ids FixedLen int64 [max_seq_length]; label_ids,
 * is_real_example FixedLen int64 scalars. */
enum { EST_CLASSIFIER_NUM_FEATURES = 5 };
void est_classifier_feature_specs(int64_t max_seq_length, est_feature_spec specs[EST_CLASSIFIER_NUM_FEATURES]);

/* The multi-label records (--multi_label, docs/run_classifier.md §12): as
 * est_file_based_convert_examples_to_features, with label_ids the example's labels as
 * num_labels int64s, 1 for each label its field names (est_multi_label_ids); a field naming
 * an unknown label fails naming the example. Read back with label_ids FixedLen int64
 * [num_labels] (est_classifier_feature_specs_multi_label). */
est_status est_file_based_convert_multi_label(const est_examples *examples, const char *const *labels, size_t nlabels,
                                              int max_seq_length, est_tokenizer *tok, const char *output_file);
void est_classifier_feature_specs_multi_label(int64_t max_seq_length, int64_t num_labels,
                                              est_feature_spec specs[EST_CLASSIFIER_NUM_FEATURES]);

/* Long documents (run_classifier --long_documents, docs/run_classifier.md §13): each
 * example's text_a in windows of max_seq_length - 2 tokens, each min(its length, doc_stride)
 * tokens after the previous until one reaches the end (run_squad's doc spans), one record a
 * window ([CLS] window [SEP], the example's label or labels, is_real_example 1), read back
 * with the same specs. *window_example (malloc'd, *num_windows entries) is each window's
 * example index. A text pair is refused. */
est_status est_file_based_convert_windows(const est_examples *examples, const char *const *labels, size_t nlabels,
                                          int max_seq_length, est_tokenizer *tok, int doc_stride, bool multi_label,
                                          const char *output_file, int64_t **window_example, size_t *num_windows);

#ifdef __cplusplus
}
#endif
#endif
