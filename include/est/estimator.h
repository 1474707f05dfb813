/* est/estimator.h — tf.estimator in C: a user writes a model_fn and an input_fn; the
 * Estimator trains, evaluates and predicts with them, saves and restores checkpoints in
 * TensorFlow's format, resumes exactly after a crash, and reports (logs + TensorBoard).
 *
 * C has no graph, so a model is a small vtable. `build` declares the model's variables
 * (by TF name, in the var store the estimator owns) and allocates its activations once
 * for the mode's batch size; `call` runs one batch. A logistic regression:
 *
 *     typedef struct { int w, b; int batch; float *logits; est_metric *acc; } logreg;
 *
 *     static est_status lr_build(const est_model_context *ctx, est_var_store *vs, void **out) {
 *       logreg *m = calloc(1, sizeof *m);                 // (error checks left out)
 *       const int NF = ((const lr_params *)ctx->params)->num_features;
 *       est_vars_declare(vs, "dense/kernel", 2, (int64_t[]){NF, 1}, est_init_zeros(), &m->w);
 *       est_vars_declare(vs, "dense/bias", 1, (int64_t[]){1}, est_init_zeros(), &m->b);
 *       m->logits = calloc(ctx->batch_size, sizeof(float));
 *       *out = m;
 *       return EST_OK;
 *     }
 *     static est_status lr_call(void *model, est_var_store *vs, const est_features *f,
 *                               est_mode mode, int64_t global_step, est_estimator_spec *spec) {
 *       const est_tensor *x, *y;      // x: [B, NF] float32, y: [B] int64
 *       est_status st = est_features_get(f, "x", EST_DT_FLOAT, 2, &x);
 *       ... forward: logits = x.w + b; in TRAIN (and EVAL) the loss, in TRAIN the
 *       ... gradients, ACCUMULATED into est_vars_grad(vs, m->w) / (vs, m->b);
 *       ... in EVAL update the metrics; in PREDICT point spec->predictions at outputs.
 *       spec->loss = mean_loss;
 *       return EST_OK;
 *     }
 *     const est_model_fn logreg_fn = {
 *       .name = "logreg", .params = &params, .build = lr_build, .call = lr_call, .destroy = lr_destroy,
 *       .create_optimizer = lr_optimizer,   // e.g. est_optimizer_create_adam_weight_decay
 *       .metrics = lr_metrics,              // EVAL: its est_metric*s
 *     };
 *
 *     est_run_config rc = est_run_config_default();
 *     rc.model_dir = "out"; rc.save_checkpoints_steps = 100; rc.seed = 1;
 *     est_estimator *e;
 *     est_estimator_create(&e, &logreg_fn, &rc);
 *     est_estimator_train(e, &train_input, 0, 1000);          // steps=0, max_steps=1000
 *     est_eval_result r;
 *     est_estimator_evaluate(e, &eval_input, 0, NULL, NULL, &r);  // latest checkpoint
 *     est_estimator_free(e);
 *
 * examples/logistic_regression.c is this model in full; examples/README.md walks through it.
 *
 * What the estimator owns, so that a model never has to care:
 *   - the var store: est_vars_finalize(seed) runs the initialisers, then variables are
 *     restored from model_dir's latest checkpoint, or (fresh start only) warm-started /
 *     initialised by the model's `init` (BERT's init_checkpoint);
 *   - the optimizer and its slots (saved as "<var>/<suffix>", e.g. "<var>/adam_m");
 *   - global_step (int64 scalar "global_step" in the checkpoint);
 *   - the seed (est/seed) and every rank's input position (est/input_state, int64
 *     [world_size, n]). Randomness inside a model must be a pure function of
 *     (ctx->seed, global_step, ...), e.g. est_philox4x32(seed, {step, layer, i, 0}):
 *     then a run killed at any moment and restarted ends bit-identical to an
 *     uninterrupted one. TensorFlow reads these extra tensors as ordinary int64 tensors
 *     and a TF graph restoring the checkpoint ignores them.
 *
 * Training step: zero gradients -> call(TRAIN) -> distribution->allreduce_mean(gradients)
 * -> est_optimizer_apply(opt, global_step) -> global_step += 1, then the hooks' after_run
 * (below): loss finite? (else ABORTED, "NaN loss during training", nothing saved) ->
 * clipping's global norm finite? (else ABORTED, nothing saved) -> summary / log / save
 * (never a checkpoint holding a non-finite parameter) -> a stop requested
 * (est_request_stop)? save, CANCELLED.
 *
 * With a distribution (N ranks, est/dist.h) every rank runs the same loop on its slice of
 * every global batch (est_input_params says which; by default N ranks train on exactly
 * the batches of one process, and model randomness keyed by est_model_context.first_row
 * keeps them equal, so they end with one process's model up to float reassociation).
 * One process runs the same loop on the one-rank distribution (est_dist_one_rank).
 *   - each step ends with one small all-reduce of (has a batch, failed, loss) after the
 *     gradient reduction, so all ranks take the same decision: a rank whose input ended
 *     ends training for all (as TF's input exhaustion: training stops when the FIRST
 *     shard runs out; the other ranks' partial step is discarded), a rank whose model
 *     or input failed makes all return an error, a NaN anywhere stops all;
 *   - gradients combine as config.grad_reduction says: the mean (N ranks with equal
 *     local batches = one process with the global batch) or the TPU-style sum;
 *   - the chief writes each checkpoint and every rank waits for it (with its status)
 *     before going on, so an evaluation right after train() or inside
 *     train_and_evaluate restores the same checkpoint on every rank (checked);
 *   - evaluate shards the input, and its "loss" and metrics equal one process's (see
 *     est_estimator_evaluate for when exactly); predict gathers every rank's rows to
 *     the chief in input order.
 */
#ifndef EST_ESTIMATOR_H
#define EST_ESTIMATOR_H

#include <stddef.h>
#include <stdint.h>

#include "est/run_config.h"
#include "est/status.h"
#include "est/tensor.h"
#include "est/variables.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct est_optimizer est_optimizer;   /* est/optimizer.h */
typedef struct est_metric est_metric;         /* est/metrics.h */

/* tf.estimator.ModeKeys. */
typedef enum est_mode {
  EST_MODE_TRAIN = 0,
  EST_MODE_EVAL = 1,
  EST_MODE_PREDICT = 2,
} est_mode;

/* "train", "eval", "infer" (ModeKeys' string values). */
const char *est_mode_name(est_mode mode);

/* ---- features: one batch of named tensors ------------------------------------------ */

/* Labels travel as features too (BERT's "label_ids"); PREDICT batches may lack them.
 * A VarLen feature arrives as a [batch_size, max_len] tensor padded with 0 / "" and a
 * FixedLenSequence feature as [batch_size, max_steps, shape...] padded with its
 * padding value; `lengths` says how much of each row is real. est_batch (dataset.h)
 * has the same five fields, so an input over a dataset hands them over as they are. */
typedef struct est_features {
  int batch_size;              /* rows in this batch; the last eval/predict batch may be short */
  size_t count;
  const char *const *names;
  const est_tensor *tensors;   /* each [batch_size, ...] */
  /* Per feature, [batch_size] row lengths (VarLen: values, FixedLenSequence: steps), or
   * NULL for a FixedLen feature; the array itself may be NULL (no feature has lengths:
   * inputs that set only the fields above stay valid). */
  const int64_t *const *lengths;
} est_features;

/* The tensor called `name`, or NULL. */
const est_tensor *est_features_find(const est_features *f, const char *name);

/* The row lengths of feature `name` ([batch_size]), or NULL: FixedLen, absent, or an
 * input that gives no lengths. */
const int64_t *est_features_lengths(const est_features *f, const char *name);

/* The tensor called `name`, checked: NOT_FOUND when absent ("feature 'x' not found in the
 * input batch (has: a, b)"), INVALID_ARGUMENT when its dtype is not `dtype` or its rank
 * is not `rank` (-1: any rank) or its first dimension is not batch_size. */
est_status est_features_get(const est_features *f, const char *name, est_dtype dtype, int rank,
                            const est_tensor **out);

/* ---- input_fn ---------------------------------------------------------------------- */

/* How a rank's slice of the input is chosen (est_input_shard_dataset does exactly this):
 *   TRAIN, sharding GLOBAL (the default): every rank reads the whole input, repeats and
 *     shuffles it with `seed` (so all ranks hold one stream, the one a single process
 *     reads), and rank shard_index takes elements [k*B + r*b, k*B + (r+1)*b) of it for
 *     its k-th batch (b = batch_size, the per-rank batch; B = num_shards * b, the global
 *     batch): rows [r*b, (r+1)*b) of the single process's k-th batch of B. The model's
 *     context says where its rows sit (est_model_context.first_row = r * b).
 *   TRAIN, sharding SHARD_FIRST (TF's order) and always EVAL / PREDICT: element i of the
 *     input goes to rank i % num_shards (Dataset.shard on the records, before any repeat
 *     or shuffle), which predict's in-order gather and eval's "loss" rely on. */
typedef struct est_input_params {
  est_mode mode;
  int batch_size;              /* the mode's (per-rank) batch size from the run config */
  uint64_t seed;               /* for shuffling: the run's seed */
  int num_shards;              /* world_size */
  int shard_index;             /* rank */
  est_input_sharding sharding; /* run_config.input_sharding */
} est_input_params;

/* An open input: a stream of batches. `next` returns EST_ERR_OUT_OF_RANGE at the end of
 * the data; the batch's memory stays valid until the next call. state_size, get_state
 * and set_state (optional, all three or none) capture and restore the position after the
 * last batch returned as state_size() int64 values; without them a resumed run restarts
 * its input from the beginning. est_input_from_dataset wires them to est_dataset. */
typedef struct est_input {
  void *self;
  est_status (*next)(void *self, est_features *batch);
  size_t (*state_size)(void *self);
  est_status (*get_state)(void *self, int64_t *state, size_t capacity, size_t *n);
  est_status (*set_state)(void *self, const int64_t *state, size_t n);
  void (*close)(void *self);
} est_input;

/* tf.estimator's input_fn(params): opens a fresh input for one train/evaluate/predict.
 *
 * Ownership (the rule every input_fn builder follows): an input_fn owns, or copies when it
 * is built, every path, buffer and config it reads. Nothing it reads may be memory its
 * builder's caller goes on to change, so that building or opening another input (the EVAL
 * input of train_and_evaluate, built after the TRAIN one and opened between its steps)
 * never changes an input that is already built or open. An input_fn that owns `ctx` sets
 * `release`, and its builder's caller ends it with est_input_fn_release once no input it
 * opened is in use; an input_fn whose ctx is static or plainly owned by the caller (a
 * test's fixture) leaves `release` NULL. Copies of the struct share one ctx: release once.
 * What `open` returns (est_input) owns its own state in turn: it reads nothing of ctx
 * after `open` returns. */
typedef struct est_input_fn {
  est_status (*open)(void *ctx, const est_input_params *params, est_input *out);
  void *ctx;
  void (*release)(void *ctx);  /* frees ctx; NULL: ctx is not the input_fn's */
} est_input_fn;

/* Frees what the input_fn owns (its release) and clears it; NULL or cleared: nothing. */
void est_input_fn_release(est_input_fn *fn);

/* Wraps a configured dataset (est/dataset.h) as an input; the input owns it from then
 * on (close frees it, also when this fails). Batches map to est_features one to one and
 * the dataset's exact-resume state becomes the input's state. */
typedef struct est_dataset est_dataset;
est_status est_input_from_dataset(est_dataset *ds, est_input *out);

/* Configures `ds` (before its first batch) as the params say a rank's input is chosen
 * (est_input_params above): est_dataset_shard_global_batches(ds, num_shards,
 * shard_index, batch_size) for TRAIN with GLOBAL sharding, else est_dataset_shard(ds,
 * num_shards, shard_index); nothing on one shard. */
est_status est_input_shard_dataset(est_dataset *ds, const est_input_params *p);

/* A ready-made input_fn over TFRecord files of tf.train.Example, shaped like BERT's
 * file_based_input_fn_builder: TRAIN reads the files -> repeat forever ->
 * shuffle(shuffle_buffer, seed) -> parse -> batch(drop_remainder = 1); EVAL and PREDICT
 * read them once in order -> parse -> batch(drop_remainder as configured). Batch size,
 * seed and sharding (est_input_shard_dataset) come from the estimator.
 *
 * run_pretraining.py's input_fn_builder is the same with two options: TRAIN with
 * interleave_cycle_length k >= 1 repeats the file list, shuffles it (seed: the run's, in a
 * stream of its own) and reads k files at a time, a record from each in turn
 * (est_dataset_interleave), before shuffle(shuffle_buffer); EVAL with eval_repeat reads the
 * files in order forever, so evaluate(steps) may take more batches than one pass holds.
 *
 * The input_fn copies the config when it is built (the paths, the specs with their keys and
 * default values): `config` and what it points to may change or go as soon as this returns.
 * Out of memory, the input_fn's open says so. End it with est_input_fn_release.
 *
 *     est_tfrecord_input cfg = {.paths = files, .num_paths = 1, .specs = specs,
 *                               .num_specs = 3, .shuffle_buffer = 100, .prefetch = 2};
 *     est_input_fn train_input = est_tfrecord_input_fn(&cfg);   // a copy of cfg
 *     ...
 *     est_input_fn_release(&train_input); */
typedef struct est_tfrecord_input {
  const char *const *paths;
  size_t num_paths;
  int compression;                   /* an est_compression */
  const struct est_feature_spec *specs;
  size_t num_specs;
  int cast;                          /* EST_DATASET_CAST_NONE or _INT32 */
  int64_t shuffle_buffer;            /* TRAIN; <= 1: no shuffling */
  int drop_remainder;                /* EVAL / PREDICT (TRAIN always drops) */
  int prefetch;                      /* batches produced ahead on a thread; 0: none */
  int interleave_cycle_length;       /* TRAIN: 0 reads the files in order; k >= 1 as above */
  int eval_repeat;                   /* EVAL: 1 repeats the files forever */
} est_tfrecord_input;

est_input_fn est_tfrecord_input_fn(const est_tfrecord_input *config);

/* ---- model_fn ---------------------------------------------------------------------- */

/* Owned by the estimator; lets a model's backward report gradients that are final. */
typedef struct est_grads_notifier est_grads_notifier;

typedef struct est_model_context {
  est_mode mode;
  int batch_size;              /* the largest batch `call` will see */
  uint64_t seed;               /* the run's seed (dropout etc. = f(seed, global_step)) */
  void *params;                /* the model_fn's params */
  const est_run_config *config;
  /* TRAIN: valid for the model's lifetime. A model may keep it and call
   * est_grads_ready(grads, offset, count) in `call` as soon as a range of the gradient
   * buffer holds its final value for the batch (after each layer's backward, last layer
   * first): with data parallelism that range's all-reduce then overlaps the rest of
   * backward. Reporting nothing is correct too (the reduction then runs after `call`). */
  est_grads_notifier *grads;
  /* TRAIN: this rank's rows are rows [first_row, first_row + batch_size) of every global
   * batch (rank * batch_size; 0 in one process; see est_input_params). Randomness per
   * example drawn at first_row + row (BERT's dropout masks are) is then the same on any
   * number of ranks. 0 in EVAL / PREDICT. */
  int64_t first_row;
} est_model_context;

/* Floats [offset, offset + count) of the var store's gradient buffer (est_variable.offset,
 * .count for one variable) are final for this step. Each float at most once per call,
 * within the trainable variables. NULL `n`, or outside a TRAIN call: does nothing. */
est_status est_grads_ready(est_grads_notifier *n, size_t offset, size_t count);

/* What `call` returns for one batch (the EstimatorSpec). */
typedef struct est_estimator_spec {
  float loss;                        /* TRAIN, EVAL: the batch's mean loss */
  /* PREDICT: named outputs, each [batch_size, ...]; valid until the next call. */
  size_t num_predictions;
  const char *const *prediction_names;
  const est_tensor *predictions;
} est_estimator_spec;

typedef struct est_model_fn {
  const char *name;            /* for logs */
  void *params;                /* passed to build as ctx->params (BERT: the bert config etc.) */

  /* Declares variables in `vars` (not yet finalized), allocates activations for
   * ctx->batch_size and, in EVAL, creates the metrics. When *model was set, destroy is
   * called on it whether build succeeds or not. */
  est_status (*build)(const est_model_context *ctx, est_var_store *vars, void **model);

  /* Optional Scaffold: runs after the random initialisers on a fresh start only (when
   * model_dir has a checkpoint, that is restored instead), e.g. BERT's init_checkpoint:
   * est_init_from_checkpoint(vars, path, NULL, 0). */
  est_status (*init)(void *model, est_var_store *vars);

  /* TRAIN: the train op's optimizer over vars (est/optimizer.h), created once after the
   * variables hold their values. The estimator frees it (est_optimizer_free). */
  est_status (*create_optimizer)(void *model, est_var_store *vars, est_optimizer **out);

  /* One batch. TRAIN: loss, and gradients ACCUMULATED (+=) into vars' gradient buffer,
   * which the estimator zeroed. EVAL: loss, and updates of the metrics. PREDICT: fills
   * spec->predictions. global_step is the value before this step's update. */
  est_status (*call)(void *model, est_var_store *vars, const est_features *features, est_mode mode,
                     int64_t global_step, est_estimator_spec *spec);

  /* EVAL: the streaming metrics `call` updates (est/metrics.h; owned by the model). Each
   * is reported under its est_metric_name ("eval_accuracy"), next to the estimator's
   * "loss" (mean of the batch losses) and "global_step". */
  est_status (*metrics)(void *model, est_metric *const **metrics, size_t *n);

  void (*destroy)(void *model);
} est_model_fn;

/* ---- the Estimator ------------------------------------------------------------------- */

typedef struct est_estimator est_estimator;

/* Validates the config (copied, strings too) and creates model_dir. */
est_status est_estimator_create(est_estimator **out, const est_model_fn *model_fn, const est_run_config *config);
void est_estimator_free(est_estimator *e);   /* NULL is fine */
const est_run_config *est_estimator_config(const est_estimator *e);

/* Trains from model_dir's latest checkpoint (or from scratch). steps > 0: that many more
 * steps; max_steps > 0: until global_step reaches it (at most one of the two; both 0:
 * until the input ends). Saves at the configured cadence and at the end; stops early at
 * the end of input. A NaN/Inf loss, a non-finite gradient norm (with clipping) or a
 * non-finite parameter about to be saved returns EST_ERR_ABORTED naming the global step
 * and leaves the last good checkpoint as it was. A stop request (below) returns
 * EST_ERR_CANCELLED after saving the step it ended. */
est_status est_estimator_train(est_estimator *e, const est_input_fn *input_fn, int64_t steps, int64_t max_steps);

/* ---- hooks (tf.train.SessionRunHook; docs/hooks.md) ------------------------------------
 *
 * A train call is a short sequence over one step function and a list of hooks:
 *
 *   begin -> restore or initialise -> after_create_session -> loop {
 *     before_run(global_step) -> step -> after_run(step record) -> stop requested? }
 *   -> end (only when training ends without an error)
 *
 * The built-in behaviours are hooks too, run before the caller's in this order: NaN guard
 * (NanTensorHook), summaries (SummarySaverHook), logging with ETA (LoggingTensorHook +
 * StepCounterHook), checkpoint saver (CheckpointSaverHook, whose listener is
 * train_and_evaluate's evaluation), stop on signal, stop at step (StopAtStepHook). So in
 * after_run a caller's hook sees a step that was checked, logged and, when due, saved; in
 * end it sees the final checkpoint on disk.
 *
 * Hooks run on every rank of a distribution. The step record is the same on all ranks (it
 * comes from the step's all-reduce). A stop requested by a hook on any rank (in
 * after_create_session or after_run) stops every rank after the same step: with N > 1
 * ranks and caller hooks, the ranks sum their requests (and their hooks' failures) once
 * more after after_run. A hook returning an error ends training with that error (not
 * calling end). */

/* One training step, as every rank saw it. */
typedef struct est_step_record {
  int64_t global_step;         /* the step run: global_step before its update */
  float loss;                  /* the mean of the ranks' losses (valid when has_batch) */
  float learning_rate;         /* the rate the update applied */
  float global_norm;           /* clipping's global gradient norm; 0 when clipping is off */
  int has_batch;               /* 0: some rank's input ended, nothing was applied, training ends */
  int64_t examples;            /* examples in this step over all ranks (0 without a batch) */
  double time;                 /* est's monotonic clock (seconds) when the step ended */
  int stop_signal_ranks;       /* ranks asked to stop (est_request_stop) by this step's check */
  int stop_signo;              /* the signal they name (this rank's own when it was asked) */
} est_step_record;

/* The train call a hook runs in (opaque). */
typedef struct est_hook_run est_hook_run;

typedef struct est_session_run_hook {
  const char *name;            /* for errors: "hook '<name>' after_run at step N: ..." */
  void *self;                  /* passed to every callback; owned by the caller */
  /* Every callback is optional (NULL). global_step in before_run is the step about to run. */
  est_status (*begin)(void *self, est_hook_run *run);
  est_status (*after_create_session)(void *self, est_hook_run *run);
  est_status (*before_run)(void *self, est_hook_run *run, int64_t global_step);
  est_status (*after_run)(void *self, est_hook_run *run, const est_step_record *step);
  est_status (*end)(void *self, est_hook_run *run);
} est_session_run_hook;

/* run_context.request_stop(): training ends after the current step (end is called and the
 * final checkpoint saved); train returns OK. */
void est_hook_request_stop(est_hook_run *run);
/* The estimator, the current global_step (after restore; after the step's update in
 * after_run), and the last checkpoint written or restored ("" when none). */
est_estimator *est_hook_estimator(const est_hook_run *run);
int64_t est_hook_global_step(const est_hook_run *run);
const char *est_hook_last_checkpoint(const est_hook_run *run);
int est_hook_rank(const est_hook_run *run);

/* est_estimator_train with the caller's hooks (run after the built-in ones, in order). */
est_status est_estimator_train_with_hooks(est_estimator *e, const est_input_fn *input_fn, int64_t steps,
                                          int64_t max_steps, const est_session_run_hook *hooks, size_t num_hooks);

/* ---- stopping on request (preemption, docs/estimator.md §7) ------------------------------
 *
 * est_request_stop asks training to stop: the step in progress finishes (at most the next
 * one, when the request comes after this step's check), a checkpoint of it is written as
 * any other (input position included), the log says "Received SIGTERM at step N; saved
 * checkpoint DIR/model.ckpt-N; exiting" and train / train_and_evaluate return
 * EST_ERR_CANCELLED with that message. Running the same training again resumes from that
 * checkpoint and ends bit-identical to a run never stopped. Evaluate and predict return
 * CANCELLED at their next batch, with no results. With N ranks the request of any rank is
 * summed into the all-reduce every step already makes, so all ranks stop after the same
 * step (a rank that was not asked adopts the asker's signo).
 *
 * It only stores to a volatile sig_atomic_t, so a signal handler may call it. The library
 * installs no signal handler: a program that wants SIGTERM to stop training installs one
 * that calls est_request_stop(signo) (the est command line does for run_classifier and
 * run_pretraining, and restores the default action so a second signal ends the process
 * at once). `signo` is the signal that asked (named in the log), or 0 for a plain request.
 * The request stays set until est_clear_stop_request. */
void est_request_stop(int signo);

/* 1 when a stop is requested, with *signo (may be NULL) the signal named; else 0. */
int est_stop_requested(int *signo);

void est_clear_stop_request(void);

/* Streaming evaluation results: the model's metrics, "loss" and "global_step". */
typedef struct est_eval_result {
  size_t count;
  char **names;                /* sorted (bytewise), as eval_results.txt lists them */
  double *values;
  int64_t global_step;
  char *checkpoint_path;
} est_eval_result;

void est_eval_result_clear(est_eval_result *r);
/* Sets `name` to value, adding the entry when it is absent (the writer sorts by name). */
est_status est_eval_result_set(est_eval_result *r, const char *name, double value);
/* The value called `name`; NOT_FOUND when absent. */
est_status est_eval_result_get(const est_eval_result *r, const char *name, double *value);
/* eval_results.txt as BERT's scripts write it (run_classifier.py, run_pretraining.py:
 * `for key in sorted(result): writer.write("%s = %s\n" % (key, str(result[key])))`):
 * "<name> = <value>\n" per entry in sorted order, atomically; values as str(np.float32)
 * (est/float_format.h), global_step as an integer. The one writer of that file. */
est_status est_eval_result_write(const est_eval_result *r, const char *path);
/* The same lines logged (INFO) after "***** Eval results *****", as the scripts log them. */
void est_eval_result_log(const est_eval_result *r);

/* Restores checkpoint_path (NULL: the latest in model_dir; NOT_FOUND when there is none),
 * runs the input to its end (or `steps` batches when > 0) and fills *out. Summaries go
 * to model_dir/eval (name NULL) or model_dir/eval_<name>.
 *
 * "loss" is tf.estimator's: the unweighted mean over batches of each batch's mean loss.
 * With N ranks, each rank reads shard(N, rank) of the input in batches of
 * eval_batch_size (per rank); the k-th batches of all ranks together are treated as the
 * k-th global batch (its loss: the row-weighted mean of the ranks' k-th batch losses).
 * When the global batch size B divides by N (est_dist_configure_run_config then gives
 * each rank B / N), those rows are exactly the single process's k-th batch of B, so
 * "loss" equals one process's (to float rounding), the short last batch included. When
 * it does not, each rank keeps batches of B and a global batch holds N * B rows: "loss"
 * then differs from one process unless every batch's loss is the same function of the
 * same rows (the metrics, being sums over rows, are exact either way). All ranks must
 * restore the same checkpoint (checked: FAILED_PRECONDITION otherwise).
 *
 * Non-finite numbers are reported, not written: a checkpoint holding a NaN or Inf in a
 * variable is INVALID_ARGUMENT naming the checkpoint, the first such variable and the
 * element (every restore checks this: train and predict too), and a "loss" or metric that
 * comes out NaN or Inf is ABORTED naming it and the checkpoint. */
est_status est_estimator_evaluate(est_estimator *e, const est_input_fn *input_fn, int64_t steps,
                                  const char *checkpoint_path, const char *name, est_eval_result *out);

/* One example's predictions: each value is the row of a [batch, ...] output. */
typedef struct est_prediction {
  int64_t index;               /* position in the input, from 0 */
  size_t count;
  const char *const *names;
  const est_tensor *values;    /* shape without the batch dimension; valid during the callback */
} est_prediction;

typedef est_status (*est_prediction_fn)(void *ctx, const est_prediction *p);

/* Restores (as evaluate), then calls on_prediction once per example in input order. A
 * status other than OK from the callback stops prediction and is returned.
 *
 * With a distribution of N ranks each rank predicts shard(N, rank) of the input (global
 * example g on rank g % N, in order: Dataset.shard) in batches of predict_batch_size;
 * after each batch the ranks' rows are gathered to the chief (distribution->gather_rows),
 * so on_prediction runs on the chief only, once per example of the whole input, in
 * input order with its global index; other ranks get no callback. An input that is not
 * sharded that way is detected (FAILED_PRECONDITION) when the row counts cannot come
 * from one shard() of one input. A callback error on the chief stops every rank. */
est_status est_estimator_predict(est_estimator *e, const est_input_fn *input_fn, const char *checkpoint_path,
                                 est_prediction_fn on_prediction, void *ctx);

/* tf.estimator.train_and_evaluate: trains to max_steps, evaluating after each checkpoint
 * saved (throttled by throttle_secs and start_delay_secs) and once at the end (unless that
 * step was just evaluated). Each evaluation's scalars go to the eval directory's events
 * file (model_dir/eval or eval_<name>, at the checkpoint's global step, as TF writes them:
 * what est_read_eval_metrics and the early-stopping hooks read) and, on the chief, a line
 * "global_step = N, loss = L, <metric> = V, ..." is appended (atomically) to results.txt
 * there. `last` (may be NULL) receives the final results. */
typedef struct est_train_spec {
  est_input_fn input_fn;
  int64_t max_steps;
  const est_session_run_hook *hooks;   /* TrainSpec.hooks; may be NULL */
  size_t num_hooks;
} est_train_spec;

typedef struct est_eval_spec {
  est_input_fn input_fn;
  int64_t steps;               /* 0: the whole input */
  const char *name;            /* NULL: model_dir/eval */
  double throttle_secs;        /* skip checkpoints saved sooner than this after the last
                                * evaluation (the final one is always evaluated); 0: none */
  /* est's: > 0 saves a checkpoint every n steps during this call (in place of the run
   * config's cadence), so each is evaluated: evaluation on steps. 0: the config's. */
  int64_t every_n_steps;
  double start_delay_secs;     /* skip checkpoints saved sooner than this after training
                                * started (TF's evaluator waits this long); 0: none */
  /* EvalSpec.exporters (est/exporter.h): after each evaluation the chief runs each, in
   * order, into model_dir/export/<its name>; is_the_final_export when the evaluated
   * step is >= max_steps. May be NULL. */
  const struct est_exporter *exporters;
  size_t num_exporters;
} est_eval_spec;

est_status est_train_and_evaluate(est_estimator *e, const est_train_spec *train, const est_eval_spec *eval,
                                  est_eval_result *last);

/* The latest checkpoint prefix in model_dir; NOT_FOUND when none. */
est_status est_estimator_latest_checkpoint(const est_estimator *e, char *prefix, size_t size);

/* ---- initialising from a checkpoint (BERT's init_checkpoint, warm start) -------------- */

/* One assignment: checkpoint tensor -> model variable. A pair whose names both end in '/'
 * maps a whole scope (tf.train.init_from_checkpoint's {'old/': 'new/'}). */
typedef struct est_assignment {
  char *checkpoint_name;
  char *variable_name;
} est_assignment;

/* BERT's get_assignment_map_from_checkpoint: every checkpoint tensor whose name is a
 * trainable variable's name (":0" suffixes ignored), in the checkpoint's (sorted) order.
 * Shapes are not compared here. Free with est_assignment_map_free. */
est_status est_assignment_map_from_checkpoint(const est_var_store *vars, const char *checkpoint,
                                              est_assignment **map, size_t *n);
void est_assignment_map_free(est_assignment *map, size_t n);

/* tf.train.init_from_checkpoint: loads each assigned variable and marks it
 * from_checkpoint (the "*INIT_FROM_CKPT*" log). map = NULL uses BERT's map above. A
 * variable or checkpoint tensor that is named but absent is NOT_FOUND; a shape or dtype
 * mismatch is FAILED_PRECONDITION naming the variable and both shapes. `*loaded` (may be
 * NULL) receives the number of variables loaded. */
est_status est_init_from_checkpoint(est_var_store *vars, const char *checkpoint, const est_assignment *map, size_t n,
                                    size_t *loaded);

/* Warm start: loads every variable whose name matches `vars_regex` (POSIX ERE; NULL =
 * all) and exists in the checkpoint; others keep their initial values. */
est_status est_warm_start(est_var_store *vars, const char *checkpoint, const char *vars_regex, size_t *loaded);

/* "**** Trainable Variables ****" then "  name = X:0, shape = (768, 768)[, *INIT_FROM_CKPT*]". */
void est_log_variables(const est_var_store *vars);

#ifdef __cplusplus
}
#endif
#endif
