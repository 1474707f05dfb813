/* est/sentence_embedding.h — sentence embeddings: pooling the encoder's token outputs into
 * one vector per text, as sentence-transformers' Pooling and Normalize modules do
 * (docs/embeddings.md).
 *
 *     est_pooling_params p;
 *     est_pooling_params_parse(&p, "mean", 1);                // mean over the mask, L2-normalised
 *     // or, from a sentence-transformers directory (modules.json, 1_Pooling/config.json):
 *     int found;
 *     est_pooling_read_sentence_transformers(&p, "all-MiniLM-L6-v2", &found);
 *     float emb[2 * 384];
 *     est_pooling_forward(emb, sequence_output, input_mask, 2, S, 384, &p);   // [B, W]
 *
 * As a head on the BERT model_fn (est/bert_head.h): est_bert_pooling_head_type, params an
 * est_pooling_params; no variables, PREDICT only, prediction "embeddings" [B, W] with
 * W = est_pooling_width(&p, H). `est embed` and `est serve` (an export whose est_model.json
 * says "head": "pooling") run it.
 *
 * Modes, in the order sentence-transformers concatenates them when several are set:
 *   cls            the [CLS] token's output (position 0)
 *   max            per dimension, the maximum over the positions whose mask is 1 (padding never
 *                  wins: sentence-transformers sets it to -1e9 first)
 *   mean           the sum over the masked positions / their count ([CLS] and [SEP] included)
 *   mean_sqrt_len  the same sum / sqrt(count)
 * then, with normalize, the whole vector / max(||v||_2, 1e-12) (torch.nn.functional.normalize).
 */
#ifndef EST_SENTENCE_EMBEDDING_H
#define EST_SENTENCE_EMBEDDING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "est/bert_head.h"
#include "est/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum est_pooling_mode {
  EST_POOLING_CLS = 1 << 0,
  EST_POOLING_MAX = 1 << 1,
  EST_POOLING_MEAN = 1 << 2,
  EST_POOLING_MEAN_SQRT_LEN = 1 << 3,
} est_pooling_mode;
enum { EST_POOLING_NUM_MODES = 4 };

typedef struct est_pooling_params {
  unsigned modes;               /* est_pooling_mode bits; at least one */
  bool normalize;               /* L2-normalise the (concatenated) vector */
} est_pooling_params;

/* "cls", "max", "mean", "mean_sqrt_len" (bit k of est_pooling_mode is name k). */
const char *est_pooling_mode_name(int k);
/* A comma-separated list of mode names ("mean", "cls,mean"); an unknown or repeated name,
 * or an empty list, is INVALID_ARGUMENT naming it and the known ones. */
est_status est_pooling_params_parse(est_pooling_params *p, const char *modes, bool normalize);
/* The modes as that comma-separated list, in concatenation order. Returns buf. */
char *est_pooling_modes_string(const est_pooling_params *p, char *buf, size_t size);
/* Floats per text: H times the number of modes. */
int est_pooling_width(const est_pooling_params *p, int hidden);

/* out [B, W] from the encoder's sequence output seq [B, S, H] and input_mask [B, S] (NULL:
 * all ones). A row whose mask is all zeros gives zeros for max and mean (no position to
 * pool; sentence-transformers would give -1e9 and 0). The readable reference: one pass per
 * row and mode, in double for the sums. */
void est_pooling_forward(float *out, const float *seq, const int32_t *input_mask, int batch, int seq_len, int hidden,
                         const est_pooling_params *p);

/* sentence-transformers' configuration in `dir`: modules.json lists the modules
 * (sentence_transformers.models.Transformer, then Pooling at its "path", then optionally
 * Normalize); the Pooling module's config.json sets the modes (pooling_mode_cls_token,
 * pooling_mode_max_tokens, pooling_mode_mean_tokens, pooling_mode_mean_sqrt_len_tokens).
 * A mode est lacks set true (pooling_mode_weightedmean_tokens, pooling_mode_lasttoken), a
 * module est cannot run (Dense, ...), or a file that is not what it should be is an error
 * naming the file and the field. *found = 0 and p untouched when dir has no modules.json
 * (and no 1_Pooling/config.json); with only 1_Pooling/config.json, its modes and no
 * normalisation. */
est_status est_pooling_read_sentence_transformers(est_pooling_params *p, const char *dir, int *found);

/* The pooling head (est/bert_head.h): head params an est_pooling_params. No variables, no
 * backward; PREDICT gives "embeddings" [B, W]. */
extern const est_bert_head_type est_bert_pooling_head_type;

#ifdef __cplusplus
}
#endif
#endif
