/* The tables between HuggingFace tensor names and Google's TF names (docs/hf.md §2), one per
 * model_type: every family's encoder maps onto est's one encoder's bert/... variables.
 *
 * "{n}" stands for a layer number. HF names are BertFor*'s, with the "bert." prefix that
 * BertModel alone (e.g. sentence-transformers' all-MiniLM-L6-v2) saves without ("roberta.",
 * "distilbert.", "electra.", ModernBERT's "model." likewise). nn.Linear
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

/* BertModel's own tensors, without the "bert." prefix that BertFor* adds. RobertaModel,
 * XLMRobertaModel and ElectraModel name their encoders the same way. */
static const hf_name_row BERT_BODY[] = {
    {"embeddings.word_embeddings.weight", "bert/embeddings/word_embeddings", 0},
    {"embeddings.position_embeddings.weight", "bert/embeddings/position_embeddings", 0},
    {"embeddings.token_type_embeddings.weight", "bert/embeddings/token_type_embeddings", 0},
    {"embeddings.LayerNorm.weight", "bert/embeddings/LayerNorm/gamma", 0},
    {"embeddings.LayerNorm.bias", "bert/embeddings/LayerNorm/beta", 0},
    {"encoder.layer.{n}.attention.self.query.weight", "bert/encoder/layer_{n}/attention/self/query/kernel", 1},
    {"encoder.layer.{n}.attention.self.query.bias", "bert/encoder/layer_{n}/attention/self/query/bias", 0},
    {"encoder.layer.{n}.attention.self.key.weight", "bert/encoder/layer_{n}/attention/self/key/kernel", 1},
    {"encoder.layer.{n}.attention.self.key.bias", "bert/encoder/layer_{n}/attention/self/key/bias", 0},
    {"encoder.layer.{n}.attention.self.value.weight", "bert/encoder/layer_{n}/attention/self/value/kernel", 1},
    {"encoder.layer.{n}.attention.self.value.bias", "bert/encoder/layer_{n}/attention/self/value/bias", 0},
    {"encoder.layer.{n}.attention.output.dense.weight", "bert/encoder/layer_{n}/attention/output/dense/kernel", 1},
    {"encoder.layer.{n}.attention.output.dense.bias", "bert/encoder/layer_{n}/attention/output/dense/bias", 0},
    {"encoder.layer.{n}.attention.output.LayerNorm.weight", "bert/encoder/layer_{n}/attention/output/LayerNorm/gamma",
     0},
    {"encoder.layer.{n}.attention.output.LayerNorm.bias", "bert/encoder/layer_{n}/attention/output/LayerNorm/beta", 0},
    {"encoder.layer.{n}.intermediate.dense.weight", "bert/encoder/layer_{n}/intermediate/dense/kernel", 1},
    {"encoder.layer.{n}.intermediate.dense.bias", "bert/encoder/layer_{n}/intermediate/dense/bias", 0},
    {"encoder.layer.{n}.output.dense.weight", "bert/encoder/layer_{n}/output/dense/kernel", 1},
    {"encoder.layer.{n}.output.dense.bias", "bert/encoder/layer_{n}/output/dense/bias", 0},
    {"encoder.layer.{n}.output.LayerNorm.weight", "bert/encoder/layer_{n}/output/LayerNorm/gamma", 0},
    {"encoder.layer.{n}.output.LayerNorm.bias", "bert/encoder/layer_{n}/output/LayerNorm/beta", 0},
    {"pooler.dense.weight", "bert/pooler/dense/kernel", 1},
    {"pooler.dense.bias", "bert/pooler/dense/bias", 0},
    /* ElectraModel's embeddings_project (embedding_size != hidden_size); no other model has it */
    {"embeddings_project.weight", "bert/embeddings_project/kernel", 1},
    {"embeddings_project.bias", "bert/embeddings_project/bias", 0},
};

/* DistilBertModel's tensors (transformers' modeling_distilbert.py), without "distilbert.".
 * With sinusoidal_pos_embds the position table is saved but est computes it (no variable):
 * the row maps it, and loading skips it. */
static const hf_name_row DISTILBERT_BODY[] = {
    {"embeddings.word_embeddings.weight", "bert/embeddings/word_embeddings", 0},
    {"embeddings.position_embeddings.weight", "bert/embeddings/position_embeddings", 0},
    {"embeddings.LayerNorm.weight", "bert/embeddings/LayerNorm/gamma", 0},
    {"embeddings.LayerNorm.bias", "bert/embeddings/LayerNorm/beta", 0},
    {"transformer.layer.{n}.attention.q_lin.weight", "bert/encoder/layer_{n}/attention/self/query/kernel", 1},
    {"transformer.layer.{n}.attention.q_lin.bias", "bert/encoder/layer_{n}/attention/self/query/bias", 0},
    {"transformer.layer.{n}.attention.k_lin.weight", "bert/encoder/layer_{n}/attention/self/key/kernel", 1},
    {"transformer.layer.{n}.attention.k_lin.bias", "bert/encoder/layer_{n}/attention/self/key/bias", 0},
    {"transformer.layer.{n}.attention.v_lin.weight", "bert/encoder/layer_{n}/attention/self/value/kernel", 1},
    {"transformer.layer.{n}.attention.v_lin.bias", "bert/encoder/layer_{n}/attention/self/value/bias", 0},
    {"transformer.layer.{n}.attention.out_lin.weight", "bert/encoder/layer_{n}/attention/output/dense/kernel", 1},
    {"transformer.layer.{n}.attention.out_lin.bias", "bert/encoder/layer_{n}/attention/output/dense/bias", 0},
    {"transformer.layer.{n}.sa_layer_norm.weight", "bert/encoder/layer_{n}/attention/output/LayerNorm/gamma", 0},
    {"transformer.layer.{n}.sa_layer_norm.bias", "bert/encoder/layer_{n}/attention/output/LayerNorm/beta", 0},
    {"transformer.layer.{n}.ffn.lin1.weight", "bert/encoder/layer_{n}/intermediate/dense/kernel", 1},
    {"transformer.layer.{n}.ffn.lin1.bias", "bert/encoder/layer_{n}/intermediate/dense/bias", 0},
    {"transformer.layer.{n}.ffn.lin2.weight", "bert/encoder/layer_{n}/output/dense/kernel", 1},
    {"transformer.layer.{n}.ffn.lin2.bias", "bert/encoder/layer_{n}/output/dense/bias", 0},
    {"transformer.layer.{n}.output_layer_norm.weight", "bert/encoder/layer_{n}/output/LayerNorm/gamma", 0},
    {"transformer.layer.{n}.output_layer_norm.bias", "bert/encoder/layer_{n}/output/LayerNorm/beta", 0},
};

/* ModernBertModel's tensors (transformers >= 4.48, modeling_modernbert.py), without the
 * "model." prefix of ModernBertFor*. layers.0 has no attn_norm (an Identity: the embeddings'
 * norm stands for it); Wqkv is the fused [3H, H] (est's attention/self/qkv, qkv_fused) and
 * mlp.Wi the GeGLU's [2I, H] (input rows, then gate rows). The biases exist only with
 * attention_bias / mlp_bias / norm_bias. */
static const hf_name_row MODERNBERT_BODY[] = {
    {"embeddings.tok_embeddings.weight", "bert/embeddings/word_embeddings", 0},
    {"embeddings.norm.weight", "bert/embeddings/LayerNorm/gamma", 0},
    {"embeddings.norm.bias", "bert/embeddings/LayerNorm/beta", 0},
    {"layers.{n}.attn_norm.weight", "bert/encoder/layer_{n}/attention/output/LayerNorm/gamma", 0},
    {"layers.{n}.attn_norm.bias", "bert/encoder/layer_{n}/attention/output/LayerNorm/beta", 0},
    {"layers.{n}.attn.Wqkv.weight", "bert/encoder/layer_{n}/attention/self/qkv/kernel", 1},
    {"layers.{n}.attn.Wqkv.bias", "bert/encoder/layer_{n}/attention/self/qkv/bias", 0},
    {"layers.{n}.attn.Wo.weight", "bert/encoder/layer_{n}/attention/output/dense/kernel", 1},
    {"layers.{n}.attn.Wo.bias", "bert/encoder/layer_{n}/attention/output/dense/bias", 0},
    {"layers.{n}.mlp_norm.weight", "bert/encoder/layer_{n}/output/LayerNorm/gamma", 0},
    {"layers.{n}.mlp_norm.bias", "bert/encoder/layer_{n}/output/LayerNorm/beta", 0},
    {"layers.{n}.mlp.Wi.weight", "bert/encoder/layer_{n}/intermediate/dense/kernel", 1},
    {"layers.{n}.mlp.Wi.bias", "bert/encoder/layer_{n}/intermediate/dense/bias", 0},
    {"layers.{n}.mlp.Wo.weight", "bert/encoder/layer_{n}/output/dense/kernel", 1},
    {"layers.{n}.mlp.Wo.bias", "bert/encoder/layer_{n}/output/dense/bias", 0},
    {"final_norm.weight", "bert/encoder/final/LayerNorm/gamma", 0},
    {"final_norm.bias", "bert/encoder/final/LayerNorm/beta", 0},
};

/* BertFor*'s heads: the names outside "bert.". */
static const hf_name_row BERT_HEADS[] = {
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

/* The heads of the other families: *ForQuestionAnswering's qa_outputs, a Linear on the
 * sequence output (BERT's), and *ForSequenceClassification's dense + act + output layer on
 * the first token, est's classifier head of that kind (est/bert_classifier.h: classifier/dense
 * then output_weights). Their masked-LM heads stay unmapped. */
static const hf_name_row ROBERTA_HEADS[] = {
    /* RobertaClassificationHead, XLM-R's and ElectraClassificationHead: dense + out_proj */
    {"classifier.dense.weight", "classifier/dense/kernel", 1},
    {"classifier.dense.bias", "classifier/dense/bias", 0},
    {"classifier.out_proj.weight", "output_weights", 0},
    {"classifier.out_proj.bias", "output_bias", 0},
    {"qa_outputs.weight", "cls/squad/output_weights", 0},
    {"qa_outputs.bias", "cls/squad/output_bias", 0},
};

static const hf_name_row DISTILBERT_HEADS[] = {
    /* DistilBertForSequenceClassification: pre_classifier + classifier */
    {"pre_classifier.weight", "classifier/dense/kernel", 1},
    {"pre_classifier.bias", "classifier/dense/bias", 0},
    {"classifier.weight", "output_weights", 0},
    {"classifier.bias", "output_bias", 0},
    {"qa_outputs.weight", "cls/squad/output_weights", 0},
    {"qa_outputs.bias", "cls/squad/output_bias", 0},
};

/* ModernBertForSequenceClassification: head (dense + act + norm, ModernBertPredictionHead)
 * on the cls token or the mean of the tokens, then classifier (est's classifier head of the
 * ModernBERT kind: classifier/dense, classifier/LayerNorm, output_weights). */
static const hf_name_row MODERNBERT_HEADS[] = {
    {"head.dense.weight", "classifier/dense/kernel", 1},
    {"head.dense.bias", "classifier/dense/bias", 0},
    {"head.norm.weight", "classifier/LayerNorm/gamma", 0},
    {"head.norm.bias", "classifier/LayerNorm/beta", 0},
    {"classifier.weight", "output_weights", 0},
    {"classifier.bias", "output_bias", 0},
};

#define ROWS(a) a, sizeof a / sizeof *a

/* One table per model_type: the encoder's rows (prefix optional on reading: a *Model saved
 * alone has none; written with it) and the heads' rows. */
static const struct {
  est_model_family family;
  const char *prefix;
  const hf_name_row *body;
  size_t nbody;
  const hf_name_row *heads;
  size_t nheads;
} TABLES[] = {
    {EST_FAMILY_BERT, "bert.", ROWS(BERT_BODY), ROWS(BERT_HEADS)},
    {EST_FAMILY_ROBERTA, "roberta.", ROWS(BERT_BODY), ROWS(ROBERTA_HEADS)},
    {EST_FAMILY_XLM_ROBERTA, "roberta.", ROWS(BERT_BODY), ROWS(ROBERTA_HEADS)},
    {EST_FAMILY_DISTILBERT, "distilbert.", ROWS(DISTILBERT_BODY), ROWS(DISTILBERT_HEADS)},
    {EST_FAMILY_ELECTRA, "electra.", ROWS(BERT_BODY), ROWS(ROBERTA_HEADS)},
    {EST_FAMILY_MODERNBERT, "model.", ROWS(MODERNBERT_BODY), ROWS(MODERNBERT_HEADS)},
};

static size_t table_of(est_model_family family) {
  for (size_t t = 0; t < sizeof TABLES / sizeof *TABLES; t++)
    if (TABLES[t].family == family) return t;
  return 0;
}

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

int est_hf_family_name_to_tf(est_model_family family, const char *hf, char *tf, size_t size, int *transpose) {
  const size_t t = table_of(family);
  const char *prefix = TABLES[t].prefix;
  const size_t plen = strlen(prefix);
  /* the encoder: with its prefix (*For*), or without (a *Model saved alone) */
  const char *bare = strncmp(hf, prefix, plen) ? hf : hf + plen;
  for (size_t i = 0; i < TABLES[t].nbody; i++) {
    long n = 0;
    if (!match(TABLES[t].body[i].hf, bare, &n)) continue;
    if (transpose) *transpose = TABLES[t].body[i].transpose;
    return fill(TABLES[t].body[i].tf, n, tf, size);
  }
  for (size_t i = 0; i < TABLES[t].nheads; i++) {
    long n = 0;
    if (!match(TABLES[t].heads[i].hf, hf, &n)) continue;
    if (transpose) *transpose = TABLES[t].heads[i].transpose;
    return fill(TABLES[t].heads[i].tf, n, tf, size);
  }
  return 0;
}

int est_hf_family_name_from_tf(est_model_family family, const char *tf, char *hf, size_t size, int *transpose) {
  const size_t t = table_of(family);
  for (size_t i = 0; i < TABLES[t].nbody; i++) {
    long n = 0;
    if (!match(TABLES[t].body[i].tf, tf, &n)) continue;
    if (transpose) *transpose = TABLES[t].body[i].transpose;
    char bare[512];
    return fill(TABLES[t].body[i].hf, n, bare, sizeof bare) &&
           (size_t)snprintf(hf, size, "%s%s", TABLES[t].prefix, bare) < size;
  }
  for (size_t i = 0; i < TABLES[t].nheads; i++) {
    long n = 0;
    if (!match(TABLES[t].heads[i].tf, tf, &n)) continue;
    if (transpose) *transpose = TABLES[t].heads[i].transpose;
    return fill(TABLES[t].heads[i].hf, n, hf, size);
  }
  return 0;
}

int est_hf_name_to_tf(const char *hf, char *tf, size_t size, int *transpose) {
  return est_hf_family_name_to_tf(EST_FAMILY_BERT, hf, tf, size, transpose);
}

int est_hf_name_from_tf(const char *tf, char *hf, size_t size, int *transpose) {
  return est_hf_family_name_from_tf(EST_FAMILY_BERT, tf, hf, size, transpose);
}
