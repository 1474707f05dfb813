/* A small model_fn + in-memory input_fn for the Estimator's tests (test_estimator.c,
 * test_resume.c). Header-only; include after est/est.h.
 *
 * Model: logistic regression with input dropout (keep 0.9, a pure function of (seed,
 * global_step, row, column), so exact resume also covers "RNG state"), trained with
 * BERT's AdamWeightDecay. Input: N examples x [F] float, label int64, is_real float;
 * TRAIN repeats forever with a fresh Philox permutation per epoch and drops the last
 * partial batch; EVAL/PREDICT read once in order. Its state is one int64: examples
 * consumed. */
#ifndef EST_TESTS_ESTIMATOR_TEST_MODEL_H
#define EST_TESTS_ESTIMATOR_TEST_MODEL_H

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "est/estimator.h"
#include "est/metrics.h"
#include "est/optimizer.h"
#include "est/rng.h"

/* BERT's exclusions from weight decay (a model_fn passes its own; the optimizer has no
 * list of its own), for the models here that name variables as BERT does. */
static const char *const BERT_NO_DECAY[] = {"LayerNorm", "layer_norm", "bias"};
static inline est_adam_weight_decay_config bert_awd_config(void) {
  est_adam_weight_decay_config c = est_adam_weight_decay_config_default();
  c.exclude_from_weight_decay = BERT_NO_DECAY;
  c.num_exclude = 3;
  return c;
}

/* ---- data ------------------------------------------------------------------------------ */

typedef struct tm_data {
  int n, f;
  float *x;          /* [n, f] */
  int64_t *y;        /* [n] */
  float *w;          /* [n] is_real_example */
  int drop_label;    /* batches lack "label" (a feature missing from records) */
  int64_t train_limit; /* > 0: TRAIN input ends after this many examples (no partial batch) */
  const char *path;  /* when set and not an existing file: open fails like a missing input */
} tm_data;

/* y = [x . w_true + 0.3 noise > 0]; x and noise deterministic in `seed`. */
static inline void tm_data_make(tm_data *d, int n, int f, uint64_t seed) {
  memset(d, 0, sizeof *d);
  d->n = n;
  d->f = f;
  d->x = calloc((size_t)n * f, sizeof(float));
  d->y = calloc((size_t)n, sizeof(int64_t));
  d->w = calloc((size_t)n, sizeof(float));
  /* The true weights are the same for every data set (train and eval agree). */
  est_rng rng;
  est_rng_init(&rng, 999);
  float wt[64];
  for (int j = 0; j < f; j++) wt[j] = (float)est_rng_normal(&rng);
  est_rng_init(&rng, seed);
  for (int i = 0; i < n; i++) {
    double z = 0.3 * est_rng_normal(&rng);
    for (int j = 0; j < f; j++) {
      d->x[i * f + j] = (float)est_rng_normal(&rng);
      z += d->x[i * f + j] * wt[j];
    }
    d->y[i] = z > 0;
    d->w[i] = 1.0f;
  }
}

static inline void tm_data_free(tm_data *d) {
  free(d->x);
  free(d->y);
  free(d->w);
}

typedef struct tm_input {
  const tm_data *d;
  est_mode mode;
  int batch;
  uint64_t seed;
  int64_t pos;              /* examples consumed (TRAIN: across epochs) */
  int *perm;                /* current epoch's order (TRAIN) */
  int64_t perm_epoch;
  float *bx, *bw;
  int64_t *by;
  const char *names[3];
  est_tensor t[3];
} tm_input;

static inline void tm_permute(tm_input *in, int64_t epoch) {
  int n = in->d->n;
  for (int i = 0; i < n; i++) in->perm[i] = i;
  /* Fisher-Yates with Philox words addressed by (epoch, i): no hidden RNG state. */
  for (int i = n - 1; i > 0; i--) {
    uint32_t r[4];
    est_philox4x32(in->seed, (est_philox_counter){{(uint32_t)epoch, (uint32_t)i, 77, 0}}, r);
    int j = (int)(r[0] % (uint32_t)(i + 1));
    int t = in->perm[i];
    in->perm[i] = in->perm[j];
    in->perm[j] = t;
  }
  in->perm_epoch = epoch;
}

static inline est_status tm_next(void *self, est_features *out) {
  tm_input *in = self;
  const tm_data *d = in->d;
  int rows;
  if (in->mode == EST_MODE_TRAIN) {
    rows = in->batch;
    if (d->n < rows || (d->train_limit > 0 && in->pos + rows > d->train_limit))
      return est_error(EST_ERR_OUT_OF_RANGE, "end of input");
  } else {
    if (in->pos >= d->n) return est_error(EST_ERR_OUT_OF_RANGE, "end of input");
    rows = (int)(d->n - in->pos < in->batch ? d->n - in->pos : in->batch);
  }
  for (int r = 0; r < rows; r++) {
    int64_t p = in->pos + r;
    int idx;
    if (in->mode == EST_MODE_TRAIN) {
      int64_t epoch = p / d->n;
      if (epoch != in->perm_epoch) tm_permute(in, epoch);
      idx = in->perm[p % d->n];
    } else {
      idx = (int)p;
    }
    memcpy(in->bx + (size_t)r * d->f, d->x + (size_t)idx * d->f, (size_t)d->f * sizeof(float));
    in->by[r] = d->y[idx];
    in->bw[r] = d->w[idx];
  }
  in->pos += rows;
  in->t[0] = (est_tensor){.dtype = EST_DT_FLOAT, .rank = 2, .dims = {rows, d->f}, .data = in->bx};
  in->t[1] = (est_tensor){.dtype = EST_DT_FLOAT, .rank = 1, .dims = {rows}, .data = in->bw};
  in->t[2] = (est_tensor){.dtype = EST_DT_INT64, .rank = 1, .dims = {rows}, .data = in->by};
  in->names[0] = "x";
  in->names[1] = "is_real_example";
  in->names[2] = "label";
  *out = (est_features){.batch_size = rows, .count = d->drop_label ? 2 : 3, .names = in->names, .tensors = in->t};
  return EST_OK;
}

static inline est_status tm_get_state(void *self, int64_t *state, size_t cap, size_t *n) {
  tm_input *in = self;
  if (cap < 1) return est_error(EST_ERR_INVALID_ARGUMENT, "state buffer too small");
  state[0] = in->pos;
  *n = 1;
  return EST_OK;
}

static inline size_t tm_state_size(void *self) {
  (void)self;
  return 1;
}

static inline est_status tm_set_state(void *self, const int64_t *state, size_t n) {
  tm_input *in = self;
  if (n != 1 || state[0] < 0) return est_error(EST_ERR_INVALID_ARGUMENT, "bad input state");
  in->pos = state[0];
  in->perm_epoch = -1;
  return EST_OK;
}

static inline void tm_close(void *self) {
  tm_input *in = self;
  free(in->perm);
  free(in->bx);
  free(in->by);
  free(in->bw);
  free(in);
}

static inline est_status tm_open(void *ctx, const est_input_params *p, est_input *out) {
  const tm_data *d = ctx;
  if (d->path && access(d->path, R_OK) != 0)
    return est_error(EST_ERR_NOT_FOUND, "%s: No such file or directory", d->path);
  tm_input *in = calloc(1, sizeof *in);
  in->d = d;
  in->mode = p->mode;
  in->batch = p->batch_size;
  in->seed = p->seed;
  in->perm = calloc((size_t)d->n, sizeof(int));
  in->perm_epoch = -1;
  in->bx = calloc((size_t)p->batch_size * d->f, sizeof(float));
  in->by = calloc((size_t)p->batch_size, sizeof(int64_t));
  in->bw = calloc((size_t)p->batch_size, sizeof(float));
  *out = (est_input){.self = in, .next = tm_next, .state_size = tm_state_size, .get_state = tm_get_state, .set_state = tm_set_state,
                     .close = tm_close};
  return EST_OK;
}

/* ---- model --------------------------------------------------------------------------- */

typedef struct tm_params {
  int f;
  double lr;
  int64_t num_train_steps, num_warmup_steps;
  int64_t nan_at_step;        /* -1: never; else the loss is NaN at that global step */
  int64_t kill_at_step;       /* -1: never; else SIGKILL in the middle of that step */
  float dropout_keep;         /* 1: none */
  const char *init_checkpoint;/* BERT-style Scaffold init */
} tm_params;

static inline tm_params tm_params_default(int f) {
  return (tm_params){.f = f, .lr = 0.1, .num_train_steps = 0, .num_warmup_steps = 0, .nan_at_step = -1,
                     .kill_at_step = -1, .dropout_keep = 0.9f, .init_checkpoint = NULL};
}

typedef struct tm_model {
  const tm_params *p;
  uint64_t seed;
  int w, b;
  int batch;
  float *z, *prob, *ploss;
  int32_t *labels, *pred;
  est_metric *metrics[7];
  size_t nmetrics;
  const char *pred_names[2];
  est_tensor preds[2];
} tm_model;

static inline est_status tm_build(const est_model_context *ctx, est_var_store *vs, void **out) {
  const tm_params *p = ctx->params;
  tm_model *m = calloc(1, sizeof *m);
  m->p = p;
  m->seed = ctx->seed;
  m->batch = ctx->batch_size;
  est_status st = est_vars_declare(vs, "dense/kernel", 2, (int64_t[]){p->f, 1}, est_init_truncated_normal(0.02f), &m->w);
  if (st == EST_OK) st = est_vars_declare(vs, "dense/bias", 1, (int64_t[]){1}, est_init_zeros(), &m->b);
  size_t B = (size_t)m->batch;
  m->z = calloc(B, sizeof(float));
  m->prob = calloc(B, sizeof(float));
  m->ploss = calloc(B, sizeof(float));
  m->labels = calloc(B, sizeof(int32_t));
  m->pred = calloc(B, sizeof(int32_t));
  if (st == EST_OK && ctx->mode == EST_MODE_EVAL) {
    static const struct { est_metric_kind k; const char *name; } specs[] = {
        {EST_METRIC_ACCURACY, "eval_accuracy"}, {EST_METRIC_MEAN, "eval_loss"}, {EST_METRIC_PRECISION, "precision"},
        {EST_METRIC_RECALL, "recall"},          {EST_METRIC_F1, "f1"},          {EST_METRIC_MCC, "mcc"},
        {EST_METRIC_AUC, "auc"}};
    for (size_t i = 0; i < 7 && st == EST_OK; i++) {
      st = est_metric_create(&m->metrics[i], specs[i].k, specs[i].name);
      m->nmetrics += st == EST_OK;
    }
  }
  *out = m;
  return st;
}

static inline void tm_destroy(void *model) {
  tm_model *m = model;
  for (size_t i = 0; i < m->nmetrics; i++) est_metric_free(m->metrics[i]);
  free(m->z);
  free(m->prob);
  free(m->ploss);
  free(m->labels);
  free(m->pred);
  free(m);
}

static inline est_status tm_init(void *model, est_var_store *vs) {
  tm_model *m = model;
  if (!m->p->init_checkpoint) return EST_OK;
  return est_init_from_checkpoint(vs, m->p->init_checkpoint, NULL, 0, NULL);
}

static inline est_status tm_optimizer(void *model, est_var_store *vs, est_optimizer **out) {
  tm_model *m = model;
  est_adam_weight_decay_config c = bert_awd_config();
  c.init_lr = m->p->lr;
  c.schedule = est_lr_schedule_bert(m->p->num_train_steps, m->p->num_warmup_steps);
  return est_optimizer_create_adam_weight_decay(out, vs, &c);
}

static inline est_status tm_metrics(void *model, est_metric *const **metrics, size_t *n) {
  tm_model *m = model;
  *metrics = m->metrics;
  *n = m->nmetrics;
  return EST_OK;
}

static inline est_status tm_call(void *model, est_var_store *vs, const est_features *f, est_mode mode,
                                 int64_t global_step, est_estimator_spec *spec) {
  tm_model *m = model;
  const tm_params *p = m->p;
  if (mode == EST_MODE_TRAIN && global_step == p->kill_at_step) raise(SIGKILL);
  const est_tensor *x, *y = NULL, *wt = NULL;
  est_status st = est_features_get(f, "x", EST_DT_FLOAT, 2, &x);
  if (st != EST_OK) return st;
  if (x->dims[1] != p->f) return est_error(EST_ERR_INVALID_ARGUMENT, "x has %lld columns", (long long)x->dims[1]);
  if (mode != EST_MODE_PREDICT) {
    st = est_features_get(f, "label", EST_DT_INT64, 1, &y);
    if (st != EST_OK) return st;
    wt = est_features_find(f, "is_real_example");
  }
  const int B = f->batch_size, F = p->f;
  const float *X = x->data, *W = est_vars_value(vs, (size_t)m->w), *bias = est_vars_value(vs, (size_t)m->b);
  const float keep = mode == EST_MODE_TRAIN ? p->dropout_keep : 1.0f;
  double loss = 0;
  for (int i = 0; i < B; i++) {
    float z = bias[0];
    for (int j = 0; j < F; j++) {
      float xv = X[i * F + j];
      if (keep < 1.0f) {
        uint32_t r[4];
        est_philox4x32(m->seed, (est_philox_counter){{(uint32_t)global_step, (uint32_t)i, (uint32_t)j, 1}}, r);
        xv = est_u32_to_unit_float(r[0]) < keep ? xv / keep : 0.0f;
      }
      z += xv * W[j];
    }
    m->z[i] = z;
    m->prob[i] = 1.0f / (1.0f + expf(-z));
    m->pred[i] = z > 0;
    if (y) {
      float yi = (float)((const int64_t *)y->data)[i];
      /* log(1 + e^z) - y z, stable */
      m->ploss[i] = (z > 0 ? z + log1pf(expf(-z)) : log1pf(expf(z))) - yi * z;
      m->labels[i] = (int32_t)yi;
      loss += m->ploss[i];
    }
  }
  spec->loss = (float)(loss / B);
  if (mode == EST_MODE_TRAIN && global_step == p->nan_at_step) spec->loss = NAN;
  if (mode == EST_MODE_TRAIN) {
    float *dW = est_vars_grad(vs, (size_t)m->w), *db = est_vars_grad(vs, (size_t)m->b);
    for (int i = 0; i < B; i++) {
      float dz = (m->prob[i] - (float)m->labels[i]) / (float)B;
      db[0] += dz;
      for (int j = 0; j < F; j++) {
        float xv = X[i * F + j];
        if (keep < 1.0f) {
          uint32_t r[4];
          est_philox4x32(m->seed, (est_philox_counter){{(uint32_t)global_step, (uint32_t)i, (uint32_t)j, 1}}, r);
          xv = est_u32_to_unit_float(r[0]) < keep ? xv / keep : 0.0f;
        }
        dW[j] += dz * xv;
      }
    }
  } else if (mode == EST_MODE_EVAL) {
    const float *wr = wt ? wt->data : NULL;
    est_metric_update_classes(m->metrics[0], m->labels, m->pred, wr, (size_t)B);
    est_metric_update_values(m->metrics[1], m->ploss, wr, (size_t)B);
    for (int k = 2; k <= 5; k++) est_metric_update_classes(m->metrics[k], m->labels, m->pred, wr, (size_t)B);
    est_metric_update_scores(m->metrics[6], m->labels, m->prob, wr, (size_t)B);
  } else {
    m->pred_names[0] = "probabilities";
    m->pred_names[1] = "logits";
    m->preds[0] = (est_tensor){.dtype = EST_DT_FLOAT, .rank = 1, .dims = {B}, .data = m->prob};
    m->preds[1] = (est_tensor){.dtype = EST_DT_FLOAT, .rank = 1, .dims = {B}, .data = m->z};
    spec->num_predictions = 2;
    spec->prediction_names = m->pred_names;
    spec->predictions = m->preds;
  }
  return EST_OK;
}

static inline est_model_fn tm_model_fn(tm_params *p) {
  return (est_model_fn){.name = "test_logreg", .params = p, .build = tm_build, .init = tm_init,
                        .create_optimizer = tm_optimizer, .call = tm_call, .metrics = tm_metrics,
                        .destroy = tm_destroy};
}

#endif
