/* est/optimizer.h — BERT's AdamWeightDecay, tf.train.AdamOptimizer and
 * tf.train.MomentumOptimizer over a variable store, each with its learning-rate schedule
 * (BERT's linear warmup + linear decay, constant, polynomial, exponential, cosine) and
 * global-norm gradient clipping.
 *
 *     static const char *const no_decay[] = {"LayerNorm", "layer_norm", "bias"};  // the model's
 *     est_adam_weight_decay_config c = est_adam_weight_decay_config_default();
 *     c.init_lr = 2e-5;
 *     c.schedule = est_lr_schedule_bert(343, 34);             // 343 steps, 34 of warmup
 *     c.exclude_from_weight_decay = no_decay; c.num_exclude = 3;
 *     est_optimizer *opt;
 *     est_optimizer_create_adam_weight_decay(&opt, vs, &c);   // after est_vars_finalize
 *     for (int64_t step = 0; step < 343; step++) {
 *       est_vars_zero_grads(vs);
 *       forward_backward(vs, batch);                         // fills est_vars_grads(vs)
 *       est_optimizer_apply(opt, step);                       // clip, then update; lr(step)
 *     }                                                       // the caller owns global_step
 *     // checkpointing: every trainable variable V has slots "V/<suffix>"
 *     for (int k = 0; k < est_optimizer_num_slots(opt); k++)
 *       write(est_optimizer_slot_suffix(opt, k), est_optimizer_slot(opt, k));  // store layout
 *     est_optimizer_free(opt);
 *
 * Slots are buffers with exactly the store's layout (est_vars_size floats, each variable
 * at its est_variable.offset), so an update is one flat loop over the buffers (split in
 * chunks across OpenMP threads, the same chunks whatever the thread count, so results do
 * not depend on it). All arithmetic is float32 in TensorFlow's op order with no fused
 * multiply-adds, matching the TF kernels term by term (docs/optimizer.md; TF's
 * training_ops.cc for Adam and Momentum). Frozen (non-trainable) variables are skipped.
 */
#ifndef EST_OPTIMIZER_H
#define EST_OPTIMIZER_H

#include <stddef.h>
#include <stdint.h>

#include "est/status.h"
#include "est/variables.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- learning rate ------------------------------------------------------------------ */

/* The decay of a schedule: tf.compat.v1.train's functions of the same names, op by op in
 * float32 (t = global_step before this step's increment, T = decay_steps, lr0 = the
 * optimizer's initial rate as float32):
 *   CONSTANT     lr0
 *   POLYNOMIAL   (lr0 - end) * pow(1 - min(t, T) / T, power) + end     (cycle=False)
 *   EXPONENTIAL  lr0 * pow(decay_rate, t / T)       (staircase: floor(t / T))
 *   COSINE       lr0 * ((1 - alpha) * 0.5 * (1 + cos(pi * min(t, T) / T)) + alpha)
 * A decay with decay_steps <= 0 is CONSTANT. */
typedef enum est_lr_decay {
  EST_LR_CONSTANT = 0,
  EST_LR_POLYNOMIAL = 1,
  EST_LR_EXPONENTIAL = 2,
  EST_LR_COSINE = 3,
} est_lr_decay;

/* A learning-rate schedule, optionally with BERT's linear warmup in front (optimization.py
 * create_optimizer; docs/optimizer.md §1): with W = warmup_steps > 0,
 *   lr(t) = t < W ? lr0 * (t / W) : decay(t)       (t and W through int32, as in BERT)
 * so lr(0) = 0 and the decay is not shifted by the warmup (at t = W it is decay(W)). */
typedef struct est_lr_schedule {
  est_lr_decay decay;
  int64_t decay_steps;        /* T; <= 0: constant */
  double end_learning_rate;   /* POLYNOMIAL: 0 (BERT's; TF's default is 0.0001) */
  double power;               /* POLYNOMIAL: 1 */
  double decay_rate;          /* EXPONENTIAL */
  int staircase;              /* EXPONENTIAL: 0 */
  double alpha;               /* COSINE: the final fraction of lr0; 0 */
  int64_t warmup_steps;       /* W; <= 0: no warmup; at most INT32_MAX */
} est_lr_schedule;

/* BERT's create_optimizer: POLYNOMIAL power 1 to 0 over num_train_steps, after
 * num_warmup_steps of linear warmup. AdamWeightDecay's default is est_lr_schedule_bert(0, 0)
 * (the BERT kind without steps yet, i.e. constant until they are set). */
est_lr_schedule est_lr_schedule_bert(int64_t num_train_steps, int64_t num_warmup_steps);
/* lr0 at every step (Adam's and Momentum's default). */
est_lr_schedule est_lr_schedule_constant(void);

/* The rate at `step` for an initial rate `init_lr`. */
float est_lr_schedule_value(const est_lr_schedule *s, double init_lr, int64_t step);
/* INVALID_ARGUMENT naming the field: an unknown decay, a negative power, a decay_rate
 * <= 0, an alpha outside [0, 1], warmup_steps above INT32_MAX. */
est_status est_lr_schedule_validate(const est_lr_schedule *s);

/* est_lr_schedule_value(est_lr_schedule_bert(T, W), init_lr, step): BERT's schedule in
 * float32; T <= 0 means no decay (constant init_lr), W <= 0 no warmup. */
float est_learning_rate_bert(int64_t step, double init_lr, int64_t num_train_steps, int64_t num_warmup_steps);

/* ---- configs ---------------------------------------------------------------------- */

/* BERT's optimization.py AdamWeightDecayOptimizer + create_optimizer. Slots "adam_m",
 * "adam_v". Update per element (no bias correction, eps outside the square root):
 *   m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g*g;  u = m / (sqrt(v) + eps)
 *   u += weight_decay_rate * theta   (unless the name matches an exclusion pattern)
 *   theta -= lr(t) * u */
typedef struct est_adam_weight_decay_config {
  double init_lr;                 /* 5e-5 (run_classifier's default learning_rate) */
  est_lr_schedule schedule;       /* est_lr_schedule_bert(0, 0): set its steps */
  double weight_decay_rate;       /* 0.01 */
  double beta1, beta2, epsilon;   /* 0.9, 0.999, 1e-6 */
  /* Variables not decayed, chosen by the model (its model_fn passes them; BERT's are
   * {"LayerNorm", "layer_norm", "bias"}): POSIX extended regexes searched anywhere in the
   * variable name (Python's re.search; a plain word is a substring test). Used at
   * creation only. NULL / 0: every trainable variable is decayed. */
  const char *const *exclude_from_weight_decay;
  size_t num_exclude;             /* entries of exclude_from_weight_decay */
  double clip_norm;               /* clip by global norm before the update; 1.0; 0 = off */
} est_adam_weight_decay_config;

/* tf.train.AdamOptimizer (TF1 ApplyAdam): slots "Adam" (m) and "Adam_1" (v), plus the
 * float32 scalars beta1_power / beta2_power (start at beta1 / beta2, multiplied by the
 * betas after every apply):
 *   alpha = lr * sqrt(1 - beta2_power) / (1 - beta1_power)
 *   m += (g - m) * (1 - b1);  v += (g*g - v) * (1 - b2);  theta -= m * alpha / (sqrt(v) + eps) */
typedef struct est_adam_config {
  double learning_rate;           /* 0.001 */
  est_lr_schedule schedule;       /* est_lr_schedule_constant() */
  double beta1, beta2, epsilon;   /* 0.9, 0.999, 1e-8 */
  double clip_norm;               /* 0 = off */
} est_adam_config;

/* tf.train.MomentumOptimizer (TF1 ApplyMomentum): slot "Momentum".
 *   accum = accum * momentum + g
 *   theta -= accum * lr                                   (use_nesterov = 0)
 *   theta -= g * lr + accum * momentum * lr               (use_nesterov = 1) */
typedef struct est_momentum_config {
  double learning_rate;           /* 0.01 */
  est_lr_schedule schedule;       /* est_lr_schedule_constant() */
  double momentum;                /* 0.9 */
  int use_nesterov;               /* 0 */
  double clip_norm;               /* 0 = off */
} est_momentum_config;

est_adam_weight_decay_config est_adam_weight_decay_config_default(void);
est_adam_config est_adam_config_default(void);
est_momentum_config est_momentum_config_default(void);

/* ---- the optimizer ------------------------------------------------------------------ */

typedef struct est_optimizer est_optimizer;

/* The store must be finalized; slots are allocated once (zeroed) and reused. Errors: a
 * store not finalized, a bad hyper-parameter or schedule, an exclusion pattern that is
 * not a regex. */
est_status est_optimizer_create_adam_weight_decay(est_optimizer **out, est_var_store *vs,
                                                  const est_adam_weight_decay_config *config);
est_status est_optimizer_create_adam(est_optimizer **out, est_var_store *vs, const est_adam_config *config);
est_status est_optimizer_create_momentum(est_optimizer **out, est_var_store *vs,
                                         const est_momentum_config *config);
void est_optimizer_free(est_optimizer *opt); /* NULL is fine */

/* One step at global step `global_step` (the value before the caller increments it):
 * reads the store's gradients, scales them by the global-norm clip factor when
 * clip_norm > 0 (on the fly: the gradient buffer is left as it was, saving a write of
 * every gradient in this memory-bound loop), then updates parameters and slots. A
 * non-finite global norm makes every clipped gradient NaN, as tf.clip_by_global_norm,
 * so the parameters become NaN; the caller's NaN-loss check is what stops training. */
est_status est_optimizer_apply(est_optimizer *opt, int64_t global_step);

/* The learning rate the update at `global_step` uses (the config's schedule). */
float est_optimizer_learning_rate(const est_optimizer *opt, int64_t global_step);

/* sqrt(sum of g^2) over the trainable variables' gradients (float32 result of a double sum,
 * in a fixed order). */
float est_optimizer_global_norm(est_var_store *vs);

/* The global norm of the gradients before clipping, as computed by the last apply
 * (0 before the first apply or when clipping is off). */
float est_optimizer_last_global_norm(const est_optimizer *opt);

/* Slots, each a buffer in the store's layout. Suffix: "adam_m", "adam_v" / "Adam",
 * "Adam_1" / "Momentum"; the checkpoint name of variable V's slot is "V/<suffix>". */
int est_optimizer_num_slots(const est_optimizer *opt);
const char *est_optimizer_slot_suffix(const est_optimizer *opt, int k);
float *est_optimizer_slot(est_optimizer *opt, int k);

/* Scalar float32 state beyond the slots: Adam's "beta1_power" and "beta2_power" (TF
 * checkpoint names, written as float32 [] tensors); none for the others. The pointer is
 * writable so a restore can set it. */
int est_optimizer_num_scalars(const est_optimizer *opt);
const char *est_optimizer_scalar_name(const est_optimizer *opt, int k);
float *est_optimizer_scalar(est_optimizer *opt, int k);

/* Whether weight decay applies to variable `index` of the store (AdamWeightDecay only). */
int est_optimizer_decays(const est_optimizer *opt, size_t index);

/* "AdamWeightDecay", "Adam" or "Momentum". */
const char *est_optimizer_name(const est_optimizer *opt);

#ifdef __cplusplus
}
#endif
#endif
