/* Shared internals of the Estimator (estimator.c, estimator_train.c, estimator_eval.c).
 *
 * A "session" is what tf.estimator builds per call of train/evaluate/predict: the model
 * built for one mode and batch size, its var store, and in TRAIN the optimizer. */
#ifndef EST_TRAIN_ESTIMATOR_INTERNAL_H
#define EST_TRAIN_ESTIMATOR_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "est/estimator.h"
#include "est/float_format.h"
#include "train/checkpoint_manager.h"
#include "train/summaries.h"

/* An input's state: at most this many int64 (a dataset with a shuffle buffer of 100 needs
 * 324). */
enum { EST_MAX_EVAL_WRITERS = 8, EST_INPUT_STATE_MAX = 1 << 20 };

struct est_estimator {
  est_model_fn fn;
  est_run_config config;     /* strings point at the copies below; distribution at dist */
  est_distribution dist;     /* the config's, or est_dist_one_rank's; never NULL */
  char *model_dir;
  char *warm_start_from;
  char *warm_start_vars;
  est_summaries train_summaries;
  /* One event file per eval directory for the estimator's life (TF's FileWriterCache). */
  size_t num_eval_summaries;
  est_summaries eval_summaries[EST_MAX_EVAL_WRITERS];
};

/* The model's handle for est_grads_ready: forwards to the distribution inside a step. */
struct est_grads_notifier {
  const est_distribution *dist;   /* NULL, or a distribution with grads_begin etc. */
  int in_step;                    /* between grads_begin and grads_finish */
  est_status failed;              /* first grads_ready failure of the step */
};

typedef struct est_session {
  est_mode mode;
  est_grads_notifier notifier;   /* ctx.grads points here */
  est_model_context ctx;
  est_var_store *vars;
  void *model;
  est_optimizer *opt;        /* TRAIN only */
  int64_t global_step;
} est_session;

/* Checkpoint tensor names for est's own resume state. */
#define EST_CKPT_GLOBAL_STEP "global_step"
#define EST_CKPT_SEED "est/seed"
#define EST_CKPT_INPUT_STATE "est/input_state"

double est_now_seconds(void);
int est_is_chief(const est_estimator *e);
int est_world_size(const est_estimator *e);
int est_rank(const est_estimator *e);

/* Builds the model for `mode` and finalizes its variables with `seed`. */
est_status est_session_create(est_estimator *e, est_mode mode, uint64_t seed, est_session *s);
void est_session_free(est_estimator *e, est_session *s);

/* What a checkpoint holds besides the variables. */
typedef struct est_restored {
  int64_t global_step;
  int has_seed;
  uint64_t seed;
  int64_t *input_state;      /* [world, n] as saved, malloc'ed; NULL when absent */
  int64_t input_world;
  size_t input_n;
} est_restored;

/* Reads global_step, est/seed and est/input_state from `prefix`, not the variables. */
est_status est_read_train_state(const char *prefix, est_restored *out);
void est_restored_clear(est_restored *r);

/* Restores every variable of the session from `prefix` (a missing or mismatched
 * variable is an error naming it); with_optimizer also restores the optimizer's slots
 * and scalars. Sets s->global_step (0 with a warning when the checkpoint has none). */
est_status est_session_restore(est_estimator *e, est_session *s, const char *prefix, int with_optimizer);

/* Fresh start: warm start from the config, then the model's init (Scaffold). */
est_status est_session_initialize(est_estimator *e, est_session *s);

/* Writes model.ckpt-<global_step> through the manager: variables, optimizer slots and
 * scalars, global_step, est/seed, and (when n > 0) est/input_state [world, n]. */
est_status est_session_save(est_estimator *e, est_session *s, est_ckpt_manager *m, const int64_t *input_state,
                            int64_t world, size_t n, char *prefix, size_t size);

/* Opens the input for a mode with the run config's batch size and sharding. */
est_status est_open_input(est_estimator *e, const est_input_fn *fn, est_mode mode, uint64_t seed, est_input *in);
void est_close_input(est_input *in);

est_summaries *est_eval_summaries(est_estimator *e, const char *name);

/* "global_step = 5, loss = 0.25, ..." in bytewise name order (truncated to size). */
void est_eval_result_format_line(const est_eval_result *r, char *line, size_t size);

/* Resolves the checkpoint for evaluate/predict (given, or model_dir's latest, or none:
 * prefix[0] = 0 when model_dir has no checkpoint). */
est_status est_find_checkpoint(est_estimator *e, const char *given, char *prefix, size_t size);

/* ---- collectives of the estimator (estimator_dist.c); no-ops in one process ---- */

/* Every rank passes its local status; all return OK only when all are OK. A rank that
 * failed returns its own status and message; the others EST_ERR_ABORTED naming the
 * first failed rank and `what`. One allgather of world_size int64. */
est_status est_agree(est_estimator *e, est_status local, const char *what);

/* The gradient reduction of one training step: begin before the model call, finish
 * after it (also on a rank that had no batch or failed, so the collectives match). */
est_status est_grads_step_begin(est_estimator *e, est_session *s);
est_status est_grads_step_finish(est_estimator *e, est_session *s);

/* ---- stop requests and non-finite numbers (stop.c, finite.c) ---- */

/* "SIGTERM", "SIGINT", ..., "signal N", or "a stop request" for 0; returns buf. */
const char *est_stop_signal_name(int signo, char *buf, size_t size);

/* 1 when some variable's value holds a NaN or Inf: the first such variable's index, the
 * element and its value go to the (optional) out-parameters; 0 when all are finite. */
int est_first_nonfinite(est_var_store *vs, size_t *var, size_t *elem, float *value);

/* Train with the caller's hooks and a callback after every checkpoint the saver writes
 * (train_and_evaluate's listener). */
typedef est_status (*est_after_save_fn)(void *ctx, const char *prefix, int64_t global_step);
est_status est_train_impl(est_estimator *e, const est_input_fn *input_fn, int64_t steps, int64_t max_steps,
                          const est_session_run_hook *hooks, size_t num_hooks, est_after_save_fn after_save, void *ctx,
                          int64_t *final_step, char *last_saved, size_t size);

/* est_read_eval_metric with, per step that has scalars, whether the metric is among them
 * (present[i]; the value is 0 when not): early stopping fails on a missing metric only at
 * a step it looks at (from min_steps on), as TF's KeyError. */
est_status est_read_eval_metric_steps(const char *eval_dir, const char *metric_name, int64_t **steps,
                                      double **values, unsigned char **present, size_t *n);

#endif
