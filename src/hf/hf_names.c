/* The one table between HuggingFace BERT tensor names and Google's TF names (docs/hf.md §2).
 *
 * "{n}" stands for a layer number. HF names are BertFor*'s, with the "bert." prefix that
 * BertModel alone (e.g. sentence-transformers' all-MiniLM-L6-v2) saves without. nn.Linear
 * stores weight[out,in] and TF's dense layers kernel[in,out]: those rows are transposed. The
 * output layers that BERT's TF code keeps as output_weights[labels,H] (used with
 * transpose_b) are stored as HF's Linear weight [labels,H] is: not transposed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/hf_model.h"

typedef struct {
  const char *hf, *tf;
  int transpose;
} hf_name_row;

static const hf_name_row TABLE[] = {
    {"bert.embeddings.word_embeddings.weight", "bert/embeddings/word_embeddings", 0},
    {"bert.embeddings.position_embeddings.weight", "bert/embeddings/position_embeddings", 0},
    {"bert.embeddings.token_type_embeddings.weight", "bert/embeddings/token_type_embeddings", 0},
    {"bert.embeddings.LayerNorm.weight", "bert/embeddings/LayerNorm/gamma", 0},
    {"bert.embeddings.LayerNorm.bias", "bert/embeddings/LayerNorm/beta", 0},
    {"bert.encoder.layer.{n}.attention.self.query.weight", "bert/encoder/layer_{n}/attention/self/query/kernel", 1},
    {"bert.encoder.layer.{n}.attention.self.query.bias", "bert/encoder/layer_{n}/attention/self/query/bias", 0},
    {"bert.encoder.layer.{n}.attention.self.key.weight", "bert/encoder/layer_{n}/attention/self/key/kernel", 1},
    {"bert.encoder.layer.{n}.attention.self.key.bias", "bert/encoder/layer_{n}/attention/self/key/bias", 0},
    {"bert.encoder.layer.{n}.attention.self.value.weight", "bert/encoder/layer_{n}/attention/self/value/kernel", 1},
    {"bert.encoder.layer.{n}.attention.self.value.bias", "bert/encoder/layer_{n}/attention/self/value/bias", 0},
    {"bert.encoder.layer.{n}.attention.output.dense.weight", "bert/encoder/layer_{n}/attention/output/dense/kernel",
     1},
    {"bert.encoder.layer.{n}.attention.output.dense.bias", "bert/encoder/layer_{n}/attention/output/dense/bias", 0},
    {"bert.encoder.layer.{n}.attention.output.LayerNorm.weight",
     "bert/encoder/layer_{n}/attention/output/LayerNorm/gamma", 0},
    {"bert.encoder.layer.{n}.attention.output.LayerNorm.bias", "bert/encoder/layer_{n}/attention/output/LayerNorm/beta",
     0},
    {"bert.encoder.layer.{n}.intermediate.dense.weight", "bert/encoder/layer_{n}/intermediate/dense/kernel", 1},
    {"bert.encoder.layer.{n}.intermediate.dense.bias", "bert/encoder/layer_{n}/intermediate/dense/bias", 0},
    {"bert.encoder.layer.{n}.output.dense.weight", "bert/encoder/layer_{n}/output/dense/kernel", 1},
    {"bert.encoder.layer.{n}.output.dense.bias", "bert/encoder/layer_{n}/output/dense/bias", 0},
    {"bert.encoder.layer.{n}.output.LayerNorm.weight", "bert/encoder/layer_{n}/output/LayerNorm/gamma", 0},
    {"bert.encoder.layer.{n}.output.LayerNorm.bias", "bert/encoder/layer_{n}/output/LayerNorm/beta", 0},
    {"bert.pooler.dense.weight", "bert/pooler/dense/kernel", 1},
    {"bert.pooler.dense.bias", "bert/pooler/dense/bias", 0},
    /* BertForPreTraining's heads; cls.predictions.decoder.weight is tied to the word
     * embeddings and its bias is cls.predictions.bias: both are skipped on reading. */
    {"cls.predictions.bias", "cls/predictions/output_bias", 0},
    {"cls.predictions.transform.dense.weight", "cls/predictions/transform/dense/kernel", 1},
    {"cls.predictions.transform.dense.bias", "cls/predictions/transform/dense/bias", 0},
    {"cls.predictions.transform.LayerNorm.weight", "cls/predictions/transform/LayerNorm/gamma", 0},
    {"cls.predictions.transform.LayerNorm.bias", "cls/predictions/transform/LayerNorm/beta", 0},
    {"cls.seq_relationship.weight", "cls/seq_relationship/output_weights", 0},
    {"cls.seq_relationship.bias", "cls/seq_relationship/output_bias", 0},
    /* BertForSequenceClassification (run_classifier's create_model) */
    {"classifier.weight", "output_weights", 0},
    {"classifier.bias", "output_bias", 0},
    /* BertForQuestionAnswering (run_squad's create_model) */
    {"qa_outputs.weight", "cls/squad/output_weights", 0},
    {"qa_outputs.bias", "cls/squad/output_bias", 0},
};

/* Matches `name` against `pattern` (at most one "{n}", a run of digits); *n gets the number.
 * Returns 1 on a match. */
static int match(const char *pattern, const char *name, long *n) {
  const char *hole = strstr(pattern, "{n}");
  if (!hole) return strcmp(pattern, name) == 0;
  size_t head = (size_t)(hole - pattern);
  if (strncmp(pattern, name, head)) return 0;
  const char *p = name + head;
  if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] >= '0' && p[1] <= '9')) return 0;
  char *end;
  *n = strtol(p, &end, 10);
  return strcmp(end, hole + 3) == 0;
}

/* pattern with "{n}" replaced by n, into out[size]; 0 when it does not fit. */
static int fill(const char *pattern, long n, char *out, size_t size) {
  const char *hole = strstr(pattern, "{n}");
  int len = hole ? snprintf(out, size, "%.*s%ld%s", (int)(hole - pattern), pattern, n, hole + 3)
                 : snprintf(out, size, "%s", pattern);
  return len >= 0 && (size_t)len < size;
}

static const char BERT_PREFIX[] = "bert.";

int est_hf_name_to_tf(const char *hf, char *tf, size_t size, int *transpose) {
  for (size_t i = 0; i < sizeof TABLE / sizeof *TABLE; i++) {
    const char *pattern = TABLE[i].hf;
    long n = 0;
    int hit = match(pattern, hf, &n);
    /* BertModel saved alone has no "bert." prefix */
    if (!hit && !strncmp(pattern, BERT_PREFIX, sizeof BERT_PREFIX - 1))
      hit = match(pattern + sizeof BERT_PREFIX - 1, hf, &n);
    if (!hit) continue;
    if (transpose) *transpose = TABLE[i].transpose;
    return fill(TABLE[i].tf, n, tf, size);
  }
  return 0;
}

int est_hf_name_from_tf(const char *tf, char *hf, size_t size, int *transpose) {
  for (size_t i = 0; i < sizeof TABLE / sizeof *TABLE; i++) {
    long n = 0;
    if (!match(TABLE[i].tf, tf, &n)) continue;
    if (transpose) *transpose = TABLE[i].transpose;
    return fill(TABLE[i].hf, n, hf, size);
  }
  return 0;
}
