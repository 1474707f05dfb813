/* `est create_pretraining_data`: google-research/bert's create_pretraining_data.py with its
 * flags, names and defaults; the same flags write the same records (est/pretraining_data.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "est/flags.h"
#include "est/log.h"
#include "est/pretraining_data.h"

static const char *USAGE =
    "usage: est create_pretraining_data --input_file=F[,F...] --output_file=O[,O...] --vocab_file=V\n"
    "                   [--do_lower_case=true] [--do_whole_word_mask=false] [--max_seq_length=128]\n"
    "                   [--max_predictions_per_seq=20] [--random_seed=12345] [--dupe_factor=10]\n"
    "                   [--masked_lm_prob=0.15] [--short_seq_prob=0.1]\n\n"
    "Masked-LM and next-sentence TFRecords for BERT pretraining from raw text (one sentence per line,\n"
    "a blank line between documents), record for record what create_pretraining_data.py writes with\n"
    "the same flags. Input patterns may use globs; instances go round robin over the output files.\n";

/* Splits a comma-separated list in place (empty names kept, as Python's split(",")). */
static char **split_commas(char *s, size_t *n) {
  size_t count = 1;
  for (const char *p = s; *p; p++) count += *p == ',';
  char **out = malloc(count * sizeof *out);
  if (!out) return NULL;
  *n = 0;
  for (char *p = s, *end;; p = end + 1) {
    out[(*n)++] = p;
    if (!(end = strchr(p, ','))) break;
    *end = 0;
  }
  return out;
}

static bool fits_int(int64_t v) { return v >= -2147483647 && v <= 2147483647; }

int est_cmd_create_pretraining_data(int argc, char **argv) {
  const char *input = NULL, *output = NULL, *vocab = NULL;
  est_pretraining_config cfg = est_pretraining_config_default();
  bool lower = cfg.do_lower_case, wwm = cfg.do_whole_word_mask;
  int64_t seq = cfg.max_seq_length, pred = cfg.max_predictions_per_seq, seed = cfg.random_seed,
          dupe = cfg.dupe_factor;
  double mlm = cfg.masked_lm_prob, short_prob = cfg.short_seq_prob;
  est_flag flags[] = {
    EST_FLAG_STRING("input_file", &input, "Input raw text file (or comma-separated list of files; globs allowed).", 1),
    EST_FLAG_STRING("output_file", &output, "Output TF example file (or comma-separated list of files, filled "
                                            "round robin).", 1),
    EST_FLAG_STRING("vocab_file", &vocab, "The vocabulary file that the BERT model was trained on.", 1),
    EST_FLAG_BOOL("do_lower_case", &lower, "Whether to lower case the input text. Should be True for uncased "
                                           "models and False for cased models.", 0),
    EST_FLAG_BOOL("do_whole_word_mask", &wwm, "Whether to use whole word masking rather than per-WordPiece "
                                              "masking.", 0),
    EST_FLAG_INT("max_seq_length", &seq, "Maximum sequence length.", 0),
    EST_FLAG_INT("max_predictions_per_seq", &pred, "Maximum number of masked LM predictions per sequence.", 0),
    EST_FLAG_INT("random_seed", &seed, "Random seed for data generation.", 0),
    EST_FLAG_INT("dupe_factor", &dupe, "Number of times to duplicate the input data (with different masks).", 0),
    EST_FLAG_FLOAT("masked_lm_prob", &mlm, "Masked LM probability.", 0),
    EST_FLAG_FLOAT("short_seq_prob", &short_prob, "Probability of creating sequences which are shorter than the "
                                                  "maximum length.", 0),
  };
  int rc = EST_CLI_PARSE_FLAGS("create_pretraining_data", USAGE, flags, argc, argv, 1);
  if (rc >= 0) return rc;
  if (!fits_int(seq) || !fits_int(pred) || !fits_int(dupe)) {
    fprintf(stderr, "est create_pretraining_data: --max_seq_length, --max_predictions_per_seq and --dupe_factor "
                    "must fit in 32 bits\n");
    return 2;
  }
  cfg.do_lower_case = lower;
  cfg.do_whole_word_mask = wwm;
  cfg.max_seq_length = (int)seq;
  cfg.max_predictions_per_seq = (int)pred;
  cfg.random_seed = seed;
  cfg.dupe_factor = (int)dupe;
  cfg.masked_lm_prob = mlm;
  cfg.short_seq_prob = short_prob;

  char **inputs = NULL, *out_copy = strdup(output), **outputs = NULL;
  size_t n_inputs = 0, n_outputs = 0;
  rc = 1;
  if (!out_copy || !(outputs = split_commas(out_copy, &n_outputs))) {
    fprintf(stderr, "est create_pretraining_data: out of memory\n");
    goto done;
  }
  if (est_pretraining_expand_inputs(input, &inputs, &n_inputs) != EST_OK) {
    fprintf(stderr, "est create_pretraining_data: %s\n", est_error_message());
    rc = 2;
    goto done;
  }
  uint64_t written = 0;
  if (est_create_pretraining_data(&cfg, vocab, (const char *const *)inputs, n_inputs, (const char *const *)outputs,
                                  n_outputs, &written) != EST_OK) {
    fprintf(stderr, "est create_pretraining_data: %s\n", est_error_message());
    goto done;
  }
  rc = 0;
done:
  est_pretraining_free_inputs(inputs, n_inputs);
  free(outputs);
  free(out_copy);
  return rc;
}
