/* BERT's learning-rate schedule (optimization.py create_optimizer), op by op in float32. */
#include "est/optimizer.h"

float est_learning_rate_bert(int64_t step, double init_lr, int64_t num_train_steps, int64_t num_warmup_steps) {
  const float lr0 = (float)init_lr;  /* tf.constant(init_lr, dtype=float32) */
  float lr = lr0;
  if (num_train_steps > 0) {
    /* tf.train.polynomial_decay(lr0, t, T, end=0, power=1, cycle=False): both steps cast
     * to float32, t clamped to T, (lr0 - end) * pow(1 - t/T, 1) + end. pow(x, 1) == x. */
    float t = (float)step, decay_steps = (float)num_train_steps;
    if (t > decay_steps) t = decay_steps;
    float p = t / decay_steps;
    lr = (lr0 - 0.0f) * (1.0f - p) + 0.0f;
  }
  if (num_warmup_steps > 0) {
    /* global_step and num_warmup_steps go through int32 (as in BERT) then float32. */
    int32_t t = (int32_t)step, w = (int32_t)num_warmup_steps;
    float warmup_percent_done = (float)t / (float)w;
    float warmup_lr = lr0 * warmup_percent_done;
    float is_warmup = t < w ? 1.0f : 0.0f;
    lr = (1.0f - is_warmup) * lr + is_warmup * warmup_lr;
  }
  return lr;
}
