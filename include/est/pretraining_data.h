/* est/pretraining_data.h — google-research/bert's create_pretraining_data.py: a text corpus to
 * masked-LM + next-sentence TFRecords, the same records as the script for the same flags.
 *
 *     est_pretraining_config cfg = est_pretraining_config_default();
 *     cfg.random_seed = 12345; cfg.dupe_factor = 2;
 *     char **inputs; size_t n;
 *     est_pretraining_expand_inputs("wiki/part-?.txt,extra.txt", &inputs, &n);
 *     const char *outputs[] = {"out-0.tfrecord", "out-1.tfrecord"};   // round robin
 *     uint64_t written;
 *     if (est_create_pretraining_data(&cfg, "vocab.txt", (const char *const *)inputs, n,
 *                                     outputs, 2, &written) != EST_OK)
 *       fprintf(stderr, "%s\n", est_error_message());
 *     est_pretraining_free_inputs(inputs, n);
 *
 * Input: one sentence per line, a blank line (after Python's strip()) between documents;
 * files are read in order as one stream (a file boundary is not a document boundary, as in
 * the script). A line that is not blank but tokenizes to nothing is skipped, as the script
 * does silently; est also warns with its file and line.
 *
 * Output records (byte for byte the script's under TF, whose protobuf map order is kept):
 * int64 input_ids, input_mask, segment_ids [max_seq_length]; masked_lm_positions,
 * masked_lm_ids [max_predictions_per_seq]; float masked_lm_weights [max_predictions_per_seq];
 * int64 next_sentence_labels [1].
 *
 * Randomness: one CPython random.Random(random_seed) (est/pyrandom.h) drawn in the script's
 * order: shuffle the documents, per dupe round and document the segment choices,
 * truncation and masks, then shuffle all instances.
 *
 * Memory: the script keeps every document of the run (a random "next" sentence may come from
 * any of them, and the documents are shuffled together) and every instance. est keeps the
 * documents as packed token ids (4 bytes a WordPiece, 8 a sentence, 8 a document) and 4
 * bytes per instance for the final shuffle; the instances themselves go to an unlinked
 * temporary file beside the first output (4 * (4 + max_seq_length +
 * 2 * max_predictions_per_seq) bytes each) and are read back in shuffled order. So memory
 * grows with the input of one run (a shard, as BERT's README runs the script once per
 * shard of a big corpus), not with dupe_factor or the output.
 */
#ifndef EST_PRETRAINING_DATA_H
#define EST_PRETRAINING_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "est/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct est_pretraining_config {
  bool do_lower_case;            /* true */
  bool do_whole_word_mask;       /* false: mask WordPieces; true: whole words ("##" pieces) */
  int max_seq_length;            /* 128, at least 5 */
  int max_predictions_per_seq;   /* 20 */
  int64_t random_seed;           /* 12345 */
  int dupe_factor;               /* 10: passes over the documents, each with new masks */
  double masked_lm_prob;         /* 0.15 */
  double short_seq_prob;         /* 0.1 */
  double progress_seconds;       /* 10: at most one progress line per phase this often; 0: none */
} est_pretraining_config;

est_pretraining_config est_pretraining_config_default(void);

/* The script's main(): reads input_files in order, writes the instances round robin over
 * output_files (each written atomically; on failure none is created). *written gets the
 * number of instances (may be NULL). Errors name the flag, the file and line at fault:
 * a bad value, an input without any document, invalid UTF-8, a vocab without [CLS], [SEP]
 * or [MASK], a word that becomes [UNK] when the vocab has no [UNK]. */
est_status est_create_pretraining_data(const est_pretraining_config *cfg, const char *vocab_file,
                                       const char *const *input_files, size_t n_inputs,
                                       const char *const *output_files, size_t n_outputs,
                                       uint64_t *written);

/* --input_file: comma-separated patterns, each expanded with glob(3) (sorted; a name
 * without wildcards is kept as is when it exists). A pattern that matches nothing is
 * NOT_FOUND naming it (tf.gfile.Glob would silently match nothing). *files is malloc'ed:
 * free with est_pretraining_free_inputs. */
est_status est_pretraining_expand_inputs(const char *patterns, char ***files, size_t *n);
void est_pretraining_free_inputs(char **files, size_t n);

#ifdef __cplusplus
}
#endif
#endif
