/* examples/regression_head.c — the smallest BERT head (docs/heads.md §2): one float per
 * example from the pooled output, trained with mean squared error by the one BERT model_fn
 * (est/bert_head.h), which brings the encoder, init_checkpoint, the optimizer, checkpoints,
 * resume and MPI. Built against the installed library like any user program.
 *
 *     example_regression_head --model_dir=/tmp/reg [--max_steps=60]
 *
 * It writes a synthetic data set under model_dir/data (random token ids; the target is the
 * share of a sentence's tokens in the upper half of the vocabulary, something the encoder
 * can learn to count), trains a 2-layer BERT with the head, evaluates it and prints
 * eval_results.txt. Kill it at any point and run it again: it resumes.
 *
 * The head, for a batch of B examples and hidden size H:
 *   y [B] = pooled [B, H] . regression/kernel [H, 1] + regression/bias [1]
 *   loss  = mean_b (y_b - target_b)^2
 *   d y_b = 2 (y_b - target_b) / B
 *   d kernel += pooled^T d y,  d bias += sum_b d y_b,  d pooled += d y kernel^T */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/bert_head.h"
#include "est/dataset.h"
#include "est/example.h"
#include "est/file.h"
#include "est/flags.h"
#include "est/log.h"
#include "est/metrics.h"
#include "est/rng.h"
#include "est/tfrecord.h"

enum { SEQ = 16, VOCAB = 64 };

/* ==== the head ======================================================================== */

typedef struct regression {
  est_bert_encoder *enc;
  est_var_store *vars;
  int H, kernel, bias;       /* variable indices */
  float *y, *dy, *sq_err;    /* [max_batch] */
  const float *target;       /* the last forward's [B] */
  int B;
  est_metric *mse;           /* EVAL: "eval_mse" */
  const char *pred_names[1];
  est_tensor pred;
} regression;

static est_status reg_create(void **out, const est_bert_head_context *ctx) {
  regression *h = calloc(1, sizeof *h);
  if (!h) return est_error(EST_ERR_NO_MEMORY, "regression head: out of memory");
  *out = h;
  h->enc = ctx->encoder;
  h->vars = ctx->vars;
  h->H = est_bert_encoder_config(ctx->encoder)->hidden_size;
  est_status st = est_vars_declare(ctx->vars, "regression/kernel", 2, (int64_t[]){h->H, 1},
                                   est_init_truncated_normal(0.02f), &h->kernel);
  return st ? st : est_vars_declare(ctx->vars, "regression/bias", 1, (int64_t[]){1}, est_init_zeros(), &h->bias);
}

static est_status reg_reserve(void *head, const est_bert_head_context *ctx) {
  regression *h = head;
  h->y = calloc((size_t)ctx->max_batch, sizeof(float));
  h->dy = calloc((size_t)ctx->max_batch, sizeof(float));
  h->sq_err = calloc((size_t)ctx->max_batch, sizeof(float));
  if (!h->y || !h->dy || !h->sq_err) return est_error(EST_ERR_NO_MEMORY, "regression head: out of memory");
  return ctx->mode == EST_MODE_EVAL ? est_metric_create(&h->mse, EST_METRIC_MEAN, "eval_mse") : EST_OK;
}

static est_status reg_forward(void *head, const est_bert_head_batch *b, float *loss) {
  regression *h = head;
  const float *pooled = est_bert_encoder_pooled_output(h->enc); /* [B, H] */
  const float *w = est_vars_value(h->vars, (size_t)h->kernel), *bias = est_vars_value(h->vars, (size_t)h->bias);
  h->B = b->batch;
  for (int i = 0; i < b->batch; i++) {
    float y = bias[0];
    for (int j = 0; j < h->H; j++) y += pooled[(size_t)i * h->H + j] * w[j];
    h->y[i] = y;
  }
  if (!loss) return EST_OK; /* PREDICT: no target needed */
  const est_tensor *t;
  est_status st = est_features_get(b->features, "target", EST_DT_FLOAT, 1, &t);
  if (st != EST_OK) return st;
  h->target = t->data;
  double sum = 0;
  for (int i = 0; i < b->batch; i++) {
    float e = h->y[i] - h->target[i];
    h->sq_err[i] = e * e;
    h->dy[i] = 2.0f * e / (float)b->batch;
    sum += h->sq_err[i];
  }
  *loss = (float)(sum / b->batch);
  return EST_OK;
}

static est_status reg_backward(void *head) {
  regression *h = head;
  const float *pooled = est_bert_encoder_pooled_output(h->enc), *w = est_vars_value(h->vars, (size_t)h->kernel);
  float *d_pooled = est_bert_encoder_pooled_output_grad(h->enc); /* heads ADD into it */
  float *dw = est_vars_grad(h->vars, (size_t)h->kernel), *db = est_vars_grad(h->vars, (size_t)h->bias);
  for (int i = 0; i < h->B; i++) {
    db[0] += h->dy[i];
    for (int j = 0; j < h->H; j++) {
      dw[j] += pooled[(size_t)i * h->H + j] * h->dy[i];
      d_pooled[(size_t)i * h->H + j] += h->dy[i] * w[j];
    }
  }
  return EST_OK; /* a head that reports nothing is correct too: the all-reduce then waits */
}

static est_status reg_update_metrics(void *head, const est_bert_head_batch *b) {
  regression *h = head;
  return est_metric_update_values(h->mse, h->sq_err, NULL, (size_t)b->batch);
}

static est_status reg_metrics(void *head, est_metric *const **metrics, size_t *n) {
  regression *h = head;
  *metrics = &h->mse;
  *n = 1;
  return EST_OK;
}

static est_status reg_predictions(void *head, const est_bert_head_batch *b, est_estimator_spec *spec) {
  regression *h = head;
  h->pred_names[0] = "prediction";
  h->pred = (est_tensor){.dtype = EST_DT_FLOAT, .rank = 1, .dims = {b->batch}, .data = h->y};
  spec->num_predictions = 1;
  spec->prediction_names = h->pred_names;
  spec->predictions = &h->pred;
  return EST_OK;
}

static void reg_free(void *head) {
  regression *h = head;
  est_metric_free(h->mse);
  free(h->y), free(h->dy), free(h->sq_err);
  free(h);
}

static const est_bert_head_type regression_head = {
  .name = "regression", .create = reg_create, .reserve = reg_reserve, .forward = reg_forward,
  .backward = reg_backward, .update_metrics = reg_update_metrics, .metrics = reg_metrics,
  .predictions = reg_predictions, .free = reg_free,
};

/* ==== data and the run ================================================================= */

static est_status write_records(const char *path, int n, uint64_t seed) {
  est_tfrecord_writer *wr;
  est_status st = est_tfrecord_writer_open(&wr, path, EST_COMPRESSION_NONE);
  est_rng rng;
  est_rng_init(&rng, seed);
  est_example ex;
  est_example_init(&ex);
  for (int i = 0; st == EST_OK && i < n; i++) {
    int64_t ids[SEQ], mask[SEQ], segs[SEQ] = {0};
    int len = 4 + (int)(est_rng_uniform(&rng) * (SEQ - 4)), upper = 0;
    for (int s = 0; s < SEQ; s++) {
      ids[s] = s < len ? 1 + (int64_t)(est_rng_uniform(&rng) * (VOCAB - 1)) : 0;
      mask[s] = s < len;
      upper += s < len && ids[s] >= VOCAB / 2;
    }
    float target = (float)upper / (float)len;
    uint8_t *bytes = NULL;
    size_t size = 0;
    est_example_clear(&ex);
    st = est_example_set_int64(&ex, "input_ids", ids, SEQ);
    if (!st) st = est_example_set_int64(&ex, "input_mask", mask, SEQ);
    if (!st) st = est_example_set_int64(&ex, "segment_ids", segs, SEQ);
    if (!st) st = est_example_set_float(&ex, "target", &target, 1);
    if (!st) st = est_example_serialize(&ex, &bytes, &size);
    if (!st) st = est_tfrecord_writer_write(wr, bytes, size);
    free(bytes);
  }
  est_example_clear(&ex);
  if (st != EST_OK) {
    est_tfrecord_writer_abort(wr);
    return st;
  }
  return est_tfrecord_writer_close(wr);
}

int main(int argc, char **argv) {
  const char *model_dir = NULL;
  int64_t max_steps = 60;
  est_flag flags[] = {
    EST_FLAG_STRING("model_dir", &model_dir, "Data, checkpoints and eval_results.txt.", 1),
    EST_FLAG_INT("max_steps", &max_steps, "Train until global_step reaches this.", 0),
  };
  char *pos[1];
  int npos = 0;
  if (est_flags_parse(flags, 2, argc - 1, argv + 1, pos, &npos, 0) != EST_FLAGS_OK) {
    fprintf(stderr, "usage: example_regression_head --model_dir=DIR [--max_steps=N]\n");
    return 2;
  }
  char data[4096], train_path[4096], eval_path[4096], results[4096];
  est_status st = est_path_join(data, sizeof data, model_dir, "data");
  if (!st) st = est_mkdirs(data);
  if (!st) st = est_path_join(train_path, sizeof train_path, data, "train.tf_record");
  if (!st) st = est_path_join(eval_path, sizeof eval_path, data, "eval.tf_record");
  if (!st) st = est_path_join(results, sizeof results, model_dir, "eval_results.txt");
  if (!st) st = write_records(train_path, 512, 1);
  if (!st) st = write_records(eval_path, 128, 2);

  /* A 2-layer BERT (est/bert_encoder.h) with the head; BERT's optimizer and schedule. */
  est_bert_model_params p = {.head = &regression_head, .max_seq_length = SEQ, .learning_rate = 1e-3,
                             .num_train_steps = max_steps, .num_warmup_steps = max_steps / 10};
  p.bert_config = est_bert_config_default();
  p.bert_config.vocab_size = VOCAB;
  p.bert_config.hidden_size = 32, p.bert_config.num_hidden_layers = 2, p.bert_config.num_attention_heads = 2;
  p.bert_config.intermediate_size = 64, p.bert_config.max_position_embeddings = SEQ;
  p.bert_config.type_vocab_size = 2;
  p.bert_config.hidden_dropout_prob = p.bert_config.attention_probs_dropout_prob = 0.0;
  est_feature_spec specs[4] = {
    {.key = "input_ids", .dtype = EST_DT_INT64, .rank = 1, .shape = {SEQ}},
    {.key = "input_mask", .dtype = EST_DT_INT64, .rank = 1, .shape = {SEQ}},
    {.key = "segment_ids", .dtype = EST_DT_INT64, .rank = 1, .shape = {SEQ}},
    {.key = "target", .dtype = EST_DT_FLOAT, .rank = 0},
  };
  const char *train_paths[1] = {train_path}, *eval_paths[1] = {eval_path};
  est_tfrecord_input train = {.paths = train_paths, .num_paths = 1, .specs = specs, .num_specs = 4,
                              .cast = EST_DATASET_CAST_INT32, .shuffle_buffer = 100};
  est_tfrecord_input eval = train;
  eval.paths = eval_paths;
  est_input_fn train_fn = est_tfrecord_input_fn(&train), eval_fn = est_tfrecord_input_fn(&eval); /* copies */

  est_run_config rc = est_run_config_default();
  rc.model_dir = model_dir;
  rc.seed = 7;
  rc.train_batch_size = rc.eval_batch_size = rc.predict_batch_size = 32;
  rc.save_checkpoints_steps = 20;
  rc.log_step_count_steps = 20;
  est_model_fn fn = est_bert_model_fn(&p);
  est_estimator *e = NULL;
  est_eval_result r = {0};
  if (!st) st = est_estimator_create(&e, &fn, &rc);
  if (!st) st = est_estimator_train(e, &train_fn, 0, max_steps);
  if (!st) st = est_estimator_evaluate(e, &eval_fn, 0, NULL, NULL, &r);
  if (!st) st = est_eval_result_write(&r, results);
  if (!st) est_eval_result_log(&r);
  est_eval_result_clear(&r);
  est_estimator_free(e);
  est_input_fn_release(&train_fn), est_input_fn_release(&eval_fn);
  if (st != EST_OK) {
    fprintf(stderr, "error: %s\n", est_error_message());
    return 1;
  }
  return 0;
}
