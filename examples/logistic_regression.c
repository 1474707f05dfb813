/* examples/logistic_regression.c — a custom model written against est's public API: the
 * tutorial that examples/README.md walks through.
 *
 * The model is logistic regression, p(y = 1 | x) = sigmoid(x . w + b), trained with Adam
 * on TFRecord files of tf.train.Example {"x": float_list [F], "label": int64_list [1]}.
 *
 *     example_logistic_regression make_data --data_dir=/tmp/lr            # writes the data
 *     example_logistic_regression train_and_evaluate --data_dir=/tmp/lr --model_dir=/tmp/lr/model
 *     example_logistic_regression predict --data_dir=/tmp/lr --model_dir=/tmp/lr/model
 *
 * Kill a training run at any moment and start the same command again: it resumes from
 * its last checkpoint and ends with the same parameters, bit for bit.
 *
 * --log_loss_every_n=N adds a custom training hook (est_session_run_hook, docs/hooks.md),
 * as tf.estimator's LoggingTensorHook: "step S: loss L, learning_rate R" every N steps.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/dataset.h"
#include "est/estimator.h"
#include "est/example.h"
#include "est/file.h"
#include "est/flags.h"
#include "est/float_format.h"
#include "est/log.h"
#include "est/metrics.h"
#include "est/optimizer.h"
#include "est/rng.h"
#include "est/tfrecord.h"

enum { MAX_FEATURES = 256 };

/* ==== 1. The model_fn ================================================================
 *
 * build: declare the variables by TF name (the var store lays them out in one buffer and
 *        checkpoints them under these names) and allocate activations for the batch size.
 * call:  one batch; forward, then per mode: gradients (TRAIN), metrics (EVAL) or
 *        predictions (PREDICT). */

typedef struct lr_params {
  int num_features;
  double learning_rate;
} lr_params;

typedef struct lr_model {
  int num_features;
  double learning_rate;
  int w, b;                   /* variable indices in the store */
  float *logits, *probs;      /* [batch] */
  float *losses;              /* [batch] per-example loss */
  int32_t *classes;           /* [batch] argmax */
  est_metric *metrics[5];     /* EVAL only */
  size_t num_metrics;
  const char *pred_names[2];
  est_tensor preds[2];
} lr_model;

static void lr_destroy(void *model) {
  lr_model *m = model;
  for (size_t i = 0; i < m->num_metrics; i++) est_metric_free(m->metrics[i]);
  free(m->logits);
  free(m->probs);
  free(m->losses);
  free(m->classes);
  free(m);
}

static est_status lr_build(const est_model_context *ctx, est_var_store *vars, void **out) {
  const lr_params *p = ctx->params;
  lr_model *m = calloc(1, sizeof *m);
  if (!m) return est_error(EST_ERR_NO_MEMORY, "out of memory");
  *out = m;   /* the estimator calls destroy on failure too */
  m->num_features = p->num_features;
  m->learning_rate = p->learning_rate;
  /* tf.layers.dense names: "dense/kernel" [in, out] and "dense/bias" [out]. */
  est_status st = est_vars_declare(vars, "dense/kernel", 2, (int64_t[]){p->num_features, 1},
                                   est_init_truncated_normal(0.02f), &m->w);
  if (st == EST_OK) st = est_vars_declare(vars, "dense/bias", 1, (int64_t[]){1}, est_init_zeros(), &m->b);
  if (st != EST_OK) return st;
  size_t B = (size_t)ctx->batch_size;
  m->logits = calloc(B, sizeof(float));
  m->probs = calloc(B, sizeof(float));
  m->losses = calloc(B, sizeof(float));
  m->classes = calloc(B, sizeof(int32_t));
  if (!m->logits || !m->probs || !m->losses || !m->classes) return est_error(EST_ERR_NO_MEMORY, "out of memory");
  if (ctx->mode == EST_MODE_EVAL) {
    /* Reported under these names, next to the estimator's "loss" and "global_step". */
    const est_metric_kind kinds[5] = {EST_METRIC_ACCURACY, EST_METRIC_AUC, EST_METRIC_PRECISION, EST_METRIC_RECALL,
                                      EST_METRIC_MEAN};
    const char *names[5] = {"accuracy", "auc", "precision", "recall", "eval_loss"};
    for (int i = 0; i < 5; i++) {
      st = est_metric_create(&m->metrics[i], kinds[i], names[i]);
      if (st != EST_OK) return st;
      m->num_metrics++;
    }
  }
  return EST_OK;
}

/* The train op: Adam (tf.train.AdamOptimizer; checkpoint slots "<var>/Adam", "<var>/Adam_1"). */
static est_status lr_optimizer(void *model, est_var_store *vars, est_optimizer **out) {
  lr_model *m = model;
  est_adam_config c = est_adam_config_default();
  c.learning_rate = m->learning_rate;
  return est_optimizer_create_adam(out, vars, &c);
}

static est_status lr_metrics(void *model, est_metric *const **metrics, size_t *n) {
  lr_model *m = model;
  *metrics = m->metrics;
  *n = m->num_metrics;
  return EST_OK;
}

static est_status lr_call(void *model, est_var_store *vars, const est_features *features, est_mode mode,
                          int64_t global_step, est_estimator_spec *spec) {
  (void)global_step;   /* no dropout here; a model with randomness keys it on (seed, step) */
  lr_model *m = model;
  const int B = features->batch_size, F = m->num_features;
  const est_tensor *x, *label = NULL;
  est_status st = est_features_get(features, "x", EST_DT_FLOAT, 2, &x);       /* [B, F] */
  if (st != EST_OK) return st;
  if (x->dims[1] != F)
    return est_error(EST_ERR_INVALID_ARGUMENT, "feature x has %lld values per example, the model %d",
                     (long long)x->dims[1], F);
  if (mode != EST_MODE_PREDICT) {
    st = est_features_get(features, "label", EST_DT_INT32, 1, &label);          /* [B] */
    if (st != EST_OK) return st;
  }
  const float *X = x->data;
  const int32_t *Y = label ? label->data : NULL;
  const float *w = est_vars_value(vars, (size_t)m->w), *b = est_vars_value(vars, (size_t)m->b);

  /* forward: z = x . w + b; p = sigmoid(z); loss_i = log(1 + e^z) - y z (stable form) */
  double total = 0.0;
  for (int i = 0; i < B; i++) {
    float z = b[0];
    for (int j = 0; j < F; j++) z += X[(size_t)i * F + j] * w[j];
    m->logits[i] = z;
    m->probs[i] = 1.0f / (1.0f + expf(-z));
    m->classes[i] = z > 0.0f;
    if (Y) {
      m->losses[i] = (z > 0 ? z + log1pf(expf(-z)) : log1pf(expf(z))) - (float)Y[i] * z;
      total += m->losses[i];
    }
  }
  spec->loss = (float)(total / B);

  if (mode == EST_MODE_TRAIN) {
    /* backward of the mean loss: dz_i = (p_i - y_i) / B; gradients ACCUMULATE (+=). */
    float *dw = est_vars_grad(vars, (size_t)m->w), *db = est_vars_grad(vars, (size_t)m->b);
    for (int i = 0; i < B; i++) {
      float dz = (m->probs[i] - (float)Y[i]) / (float)B;
      db[0] += dz;
      for (int j = 0; j < F; j++) dw[j] += dz * X[(size_t)i * F + j];
    }
  } else if (mode == EST_MODE_EVAL) {
    st = est_metric_update_classes(m->metrics[0], Y, m->classes, NULL, (size_t)B);
    if (st == EST_OK) st = est_metric_update_scores(m->metrics[1], Y, m->probs, NULL, (size_t)B);
    if (st == EST_OK) st = est_metric_update_classes(m->metrics[2], Y, m->classes, NULL, (size_t)B);
    if (st == EST_OK) st = est_metric_update_classes(m->metrics[3], Y, m->classes, NULL, (size_t)B);
    if (st == EST_OK) st = est_metric_update_values(m->metrics[4], m->losses, NULL, (size_t)B);
  } else {
    m->pred_names[0] = "probabilities";
    m->pred_names[1] = "class_ids";
    m->preds[0] = (est_tensor){.dtype = EST_DT_FLOAT, .rank = 1, .dims = {B}, .data = m->probs};
    m->preds[1] = (est_tensor){.dtype = EST_DT_INT32, .rank = 1, .dims = {B}, .data = m->classes};
    spec->num_predictions = 2;
    spec->prediction_names = m->pred_names;
    spec->predictions = m->preds;
  }
  return st;
}

/* ==== 2. Data: a synthetic problem written as TFRecords ==============================
 *
 * y = [x . w_true + noise > 0] with x ~ N(0, I), noise ~ N(0, 0.5^2). w_true is drawn
 * once from the seed; train and eval share it. */

static est_status write_split(const char *path, int n, int F, const float *w_true, uint64_t seed) {
  est_tfrecord_writer *wr;
  est_status st = est_tfrecord_writer_open(&wr, path, EST_COMPRESSION_NONE);
  if (st != EST_OK) return st;
  est_rng rng;
  est_rng_init(&rng, seed);
  est_example ex;
  est_example_init(&ex);
  float x[MAX_FEATURES];
  for (int i = 0; i < n && st == EST_OK; i++) {
    double z = 0.5 * est_rng_normal(&rng);
    for (int j = 0; j < F; j++) {
      x[j] = (float)est_rng_normal(&rng);
      z += x[j] * w_true[j];
    }
    int64_t y = z > 0;
    est_example_clear(&ex);
    uint8_t *bytes = NULL;
    size_t size = 0;
    st = est_example_set_float(&ex, "x", x, (size_t)F);
    if (st == EST_OK) st = est_example_set_int64(&ex, "label", &y, 1);
    if (st == EST_OK) st = est_example_serialize(&ex, &bytes, &size);
    if (st == EST_OK) st = est_tfrecord_writer_write(wr, bytes, size);
    free(bytes);
  }
  est_example_clear(&ex);
  if (st != EST_OK) {
    est_tfrecord_writer_abort(wr);
    return st;
  }
  return est_tfrecord_writer_close(wr);
}

static est_status make_data(const char *dir, int num_train, int num_eval, int F, uint64_t seed) {
  est_status st = est_mkdirs(dir);
  if (st != EST_OK) return st;
  est_rng rng;
  est_rng_init(&rng, seed);
  float w_true[MAX_FEATURES];
  for (int j = 0; j < F; j++) w_true[j] = (float)est_rng_normal(&rng);
  char path[4096];
  st = est_path_join(path, sizeof path, dir, "train.tf_record");
  if (st == EST_OK) st = write_split(path, num_train, F, w_true, seed + 1);
  if (st == EST_OK) st = est_path_join(path, sizeof path, dir, "eval.tf_record");
  if (st == EST_OK) st = write_split(path, num_eval, F, w_true, seed + 2);
  if (st == EST_OK) EST_LOG_INFO("Wrote %d train and %d eval examples to %s", num_train, num_eval, dir);
  return st;
}

/* ==== 3. The input_fn: est_tfrecord_input_fn over the files =========================== */

typedef struct inputs {
  char train_path[4096], eval_path[4096];
  const char *train_paths[1], *eval_paths[1];
  est_feature_spec specs[2];
  est_tfrecord_input train, eval;
} inputs;

static est_status make_inputs(inputs *in, const char *data_dir, int F) {
  memset(in, 0, sizeof *in);
  est_status st = est_path_join(in->train_path, sizeof in->train_path, data_dir, "train.tf_record");
  if (st == EST_OK) st = est_path_join(in->eval_path, sizeof in->eval_path, data_dir, "eval.tf_record");
  in->train_paths[0] = in->train_path;
  in->eval_paths[0] = in->eval_path;
  /* tf.io.FixedLenFeature([F], tf.float32) and FixedLenFeature([], tf.int64) -> int32. */
  in->specs[0] = (est_feature_spec){.key = "x", .dtype = EST_DT_FLOAT, .rank = 1, .shape = {F}};
  in->specs[1] = (est_feature_spec){.key = "label", .dtype = EST_DT_INT64, .rank = 0};
  in->train = (est_tfrecord_input){.paths = in->train_paths, .num_paths = 1, .specs = in->specs, .num_specs = 2,
                                   .cast = EST_DATASET_CAST_INT32, .shuffle_buffer = 100, .prefetch = 2};
  in->eval = in->train;
  in->eval.paths = in->eval_paths;
  return st;
}

/* ==== 4. The command line =========================================================== */

static est_status write_prediction(void *ctx, const est_prediction *p) {
  FILE *f = ctx;
  char prob[EST_FLOAT32_CHARS];
  fprintf(f, "%s\t%d\n", est_format_float32(*(const float *)p->values[0].data, prob, sizeof prob),
          *(const int32_t *)p->values[1].data);
  return EST_OK;
}

static est_status report(const est_eval_result *r, const char *model_dir) {
  est_eval_result_log(r);
  char path[4096];
  est_status st = est_path_join(path, sizeof path, model_dir, "eval_results.txt");
  return st == EST_OK ? est_eval_result_write(r, path) : st;
}

/* A training hook: after every N-th step, the step record's loss and learning rate. */
typedef struct loss_logger {
  int64_t every_n;
} loss_logger;

static est_status log_loss_after_run(void *self, est_hook_run *run, const est_step_record *step) {
  (void)run;
  const loss_logger *l = self;
  if (step->has_batch && step->global_step % l->every_n == 0)
    printf("step %lld: loss %.6g, learning_rate %.6g\n", (long long)step->global_step, step->loss,
           step->learning_rate);
  return EST_OK;
}

static int usage(void) {
  fprintf(stderr,
          "usage: example_logistic_regression COMMAND [--flags]\n"
          "commands: make_data, train, evaluate, train_and_evaluate, predict (--help for flags)\n");
  return 2;
}

int main(int argc, char **argv) {
  if (argc < 2) return usage();
  const char *cmd = argv[1];
  const char *data_dir = NULL, *model_dir = NULL;
  int64_t features = 8, num_train = 2000, num_eval = 500, seed = 42, data_seed = 1;
  int64_t max_steps = 400, batch = 32, save_steps = 100, keep = 5, log_steps = 100, log_loss_every_n = 0;
  double lr = 0.05;
  est_flag flags[] = {
      EST_FLAG_STRING("data_dir", &data_dir, "Where train.tf_record and eval.tf_record live.", 1),
      EST_FLAG_STRING("model_dir", &model_dir, "Checkpoints, events and results (not for make_data).", 0),
      EST_FLAG_INT("num_features", &features, "Length of the feature vector x.", 0),
      EST_FLAG_INT("num_train", &num_train, "make_data: training examples.", 0),
      EST_FLAG_INT("num_eval", &num_eval, "make_data: evaluation examples.", 0),
      EST_FLAG_INT("data_seed", &data_seed, "make_data: seed of the synthetic problem.", 0),
      EST_FLAG_INT("seed", &seed, "tf_random_seed: initial values and shuffling.", 0),
      EST_FLAG_INT("max_steps", &max_steps, "Train until global_step reaches this.", 0),
      EST_FLAG_INT("batch_size", &batch, "Train, eval and predict batch size.", 0),
      EST_FLAG_FLOAT("learning_rate", &lr, "Adam's learning rate.", 0),
      EST_FLAG_INT("save_checkpoints_steps", &save_steps, "Checkpoint every this many steps.", 0),
      EST_FLAG_INT("keep_checkpoint_max", &keep, "Checkpoints kept (0: all).", 0),
      EST_FLAG_INT("log_step_count_steps", &log_steps, "Log loss and speed every this many steps.", 0),
      EST_FLAG_INT("log_loss_every_n", &log_loss_every_n, "A custom hook prints the loss every N steps (0: none).",
                   0),
  };
  const int nflags = (int)(sizeof flags / sizeof *flags);
  char *pos[1];
  int npos = 0;
  est_flags_result fr = est_flags_parse(flags, nflags, argc - 2, argv + 2, pos, &npos, 0);
  if (fr == EST_FLAGS_HELP) {
    est_flags_print_help(stdout, "example_logistic_regression COMMAND [--flags]", flags, nflags);
    return 0;
  }
  if (fr != EST_FLAGS_OK) {
    fprintf(stderr, "error: %s\n", est_error_message());
    return 2;
  }
  if (features < 1 || features > MAX_FEATURES) {
    fprintf(stderr, "error: --num_features must be in [1, %d]\n", MAX_FEATURES);
    return 2;
  }
  if (!strcmp(cmd, "make_data")) {
    if (make_data(data_dir, (int)num_train, (int)num_eval, (int)features, (uint64_t)data_seed) != EST_OK) {
      fprintf(stderr, "error: %s\n", est_error_message());
      return 1;
    }
    return 0;
  }
  if (!model_dir) {
    fprintf(stderr, "error: --model_dir is required for %s\n", cmd);
    return 2;
  }

  /* The Estimator: model_fn + params + RunConfig. */
  lr_params params = {.num_features = (int)features, .learning_rate = lr};
  const est_model_fn model_fn = {.name = "logistic_regression", .params = &params, .build = lr_build,
                                 .create_optimizer = lr_optimizer, .call = lr_call, .metrics = lr_metrics,
                                 .destroy = lr_destroy};
  est_run_config rc = est_run_config_default();
  rc.model_dir = model_dir;
  rc.seed = (uint64_t)seed;
  rc.train_batch_size = rc.eval_batch_size = rc.predict_batch_size = (int)batch;
  rc.save_checkpoints_steps = save_steps;
  rc.keep_checkpoint_max = (int)keep;
  rc.log_step_count_steps = log_steps;
  inputs in;
  if (make_inputs(&in, data_dir, (int)features) != EST_OK) {
    fprintf(stderr, "error: %s\n", est_error_message());
    return 2;
  }
  est_input_fn train_input = est_tfrecord_input_fn(&in.train), eval_input = est_tfrecord_input_fn(&in.eval);

  est_estimator *e;
  est_status st = est_estimator_create(&e, &model_fn, &rc);
  est_eval_result result = {0};
  loss_logger logger = {.every_n = log_loss_every_n};
  est_session_run_hook hook = {.name = "loss_logger", .self = &logger, .after_run = log_loss_after_run};
  const size_t num_hooks = log_loss_every_n > 0 ? 1 : 0;
  if (st == EST_OK && !strcmp(cmd, "train")) {
    st = est_estimator_train_with_hooks(e, &train_input, 0, max_steps, &hook, num_hooks);
  } else if (st == EST_OK && !strcmp(cmd, "evaluate")) {
    st = est_estimator_evaluate(e, &eval_input, 0, NULL, NULL, &result);
    if (st == EST_OK) st = report(&result, model_dir);
  } else if (st == EST_OK && !strcmp(cmd, "train_and_evaluate")) {
    est_train_spec ts = {.input_fn = train_input, .max_steps = max_steps, .hooks = &hook, .num_hooks = num_hooks};
    est_eval_spec es = {.input_fn = eval_input};
    st = est_train_and_evaluate(e, &ts, &es, &result);
    if (st == EST_OK) st = report(&result, model_dir);
  } else if (st == EST_OK && !strcmp(cmd, "predict")) {
    char path[4096];
    est_atomic_file *f;
    st = est_path_join(path, sizeof path, model_dir, "predictions.tsv");
    if (st == EST_OK) st = est_atomic_open(&f, path);
    if (st == EST_OK) {
      st = est_estimator_predict(e, &eval_input, NULL, write_prediction, est_atomic_stream(f));
      if (st == EST_OK) st = est_atomic_commit(f);
      else est_atomic_abort(f);
    }
  } else if (st == EST_OK) {
    est_estimator_free(e);
    est_input_fn_release(&train_input), est_input_fn_release(&eval_input);
    return usage();
  }
  if (st != EST_OK) fprintf(stderr, "error: %s\n", est_error_message());
  est_eval_result_clear(&result);
  est_estimator_free(e);
  est_input_fn_release(&train_input), est_input_fn_release(&eval_input);
  return st == EST_OK ? 0 : 1;
}
