/* Learning-rate schedules (est/optimizer.h), op by op in float32 as the TF graph
 * evaluates them: tf.compat.v1.train.polynomial_decay / exponential_decay / cosine_decay
 * (TF's learning_rate_schedule.py: every operand is cast to the initial rate's float32),
 * and BERT's warmup in front (google-research/bert optimization.py create_optimizer). */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off") /* TF rounds every op: a fused a*b + c is another number */
#endif

#include <math.h>

#include "est/optimizer.h"

est_lr_schedule est_lr_schedule_bert(int64_t num_train_steps, int64_t num_warmup_steps) {
  return (est_lr_schedule){.decay = EST_LR_POLYNOMIAL, .decay_steps = num_train_steps, .end_learning_rate = 0.0,
                           .power = 1.0, .warmup_steps = num_warmup_steps};
}

est_lr_schedule est_lr_schedule_constant(void) { return (est_lr_schedule){.decay = EST_LR_CONSTANT, .power = 1.0}; }

est_status est_lr_schedule_validate(const est_lr_schedule *s) {
  switch (s->decay) {
    case EST_LR_CONSTANT: break;
    case EST_LR_POLYNOMIAL:
      if (!(s->power >= 0) || !isfinite(s->power) || !isfinite(s->end_learning_rate))
        return est_error(EST_ERR_INVALID_ARGUMENT, "learning-rate schedule: polynomial power %g (>= 0) / end %g",
                         s->power, s->end_learning_rate);
      break;
    case EST_LR_EXPONENTIAL:
      if (!(s->decay_rate > 0) || !isfinite(s->decay_rate))
        return est_error(EST_ERR_INVALID_ARGUMENT, "learning-rate schedule: exponential decay_rate %g must be > 0",
                         s->decay_rate);
      break;
    case EST_LR_COSINE:
      if (!(s->alpha >= 0 && s->alpha <= 1))
        return est_error(EST_ERR_INVALID_ARGUMENT, "learning-rate schedule: cosine alpha %g outside [0, 1]", s->alpha);
      break;
    default:
      return est_error(EST_ERR_INVALID_ARGUMENT, "learning-rate schedule: unknown decay %d", (int)s->decay);
  }
  if (s->warmup_steps > INT32_MAX)
    return est_error(EST_ERR_INVALID_ARGUMENT,
                     "learning-rate schedule: warmup_steps %lld does not fit int32 (as in BERT)",
                     (long long)s->warmup_steps);
  return EST_OK;
}

/* The decay alone at `step`. */
static float decayed(const est_lr_schedule *s, float lr0, int64_t step) {
  if (s->decay == EST_LR_CONSTANT || s->decay_steps <= 0) return lr0;
  const float t = (float)step, T = (float)s->decay_steps;
  switch (s->decay) {
    case EST_LR_POLYNOMIAL: {
      /* cycle=False: t clamped to T, (lr0 - end) * pow(1 - t/T, power) + end. pow(x, 1)
       * is x exactly, so BERT's power 1 skips the call. */
      const float end = (float)s->end_learning_rate, power = (float)s->power;
      const float p = (t < T ? t : T) / T;
      const float base = 1.0f - p;
      return (lr0 - end) * (power == 1.0f ? base : powf(base, power)) + end;
    }
    case EST_LR_EXPONENTIAL: {
      float p = t / T;
      if (s->staircase) p = floorf(p);
      return lr0 * powf((float)s->decay_rate, p);
    }
    case EST_LR_COSINE: {
      /* (1 - alpha) is formed in double (a Python float) before the cast, as in TF. */
      const float fraction = (t < T ? t : T) / T;
      const float cosine = 0.5f * (1.0f + cosf((float)M_PI * fraction));
      return lr0 * ((float)(1.0 - s->alpha) * cosine + (float)s->alpha);
    }
    default: return lr0;
  }
}

float est_lr_schedule_value(const est_lr_schedule *s, double init_lr, int64_t step) {
  const float lr0 = (float)init_lr; /* tf.constant(init_lr, dtype=float32) */
  float lr = decayed(s, lr0, step);
  if (s->warmup_steps > 0) {
    /* global_step and num_warmup_steps go through int32 (as in BERT) then float32. */
    int32_t t = (int32_t)step, w = (int32_t)s->warmup_steps;
    float warmup_percent_done = (float)t / (float)w;
    float warmup_lr = lr0 * warmup_percent_done;
    float is_warmup = t < w ? 1.0f : 0.0f;
    lr = (1.0f - is_warmup) * lr + is_warmup * warmup_lr;
  }
  return lr;
}

float est_learning_rate_bert(int64_t step, double init_lr, int64_t num_train_steps, int64_t num_warmup_steps) {
  const est_lr_schedule s = est_lr_schedule_bert(num_train_steps, num_warmup_steps);
  return est_lr_schedule_value(&s, init_lr, step);
}
