/* TensorBoard scalars for the estimator: a lazily opened event file per directory
 * (model_dir for training, model_dir/eval[_name] for evaluation), written by the chief
 * only. A failure to write a summary is logged once and never stops training. */
#ifndef EST_TRAIN_SUMMARIES_H
#define EST_TRAIN_SUMMARIES_H

#include <stddef.h>
#include <stdint.h>

#include "est/tfevents.h"

typedef struct est_summaries {
  char *dir;
  int enabled;                 /* 0 on non-chief ranks */
  int failed;                  /* an error was already logged */
  est_events_writer *writer;   /* opened at the first scalar */
} est_summaries;

void est_summaries_init(est_summaries *s, const char *dir, int enabled);
void est_summaries_scalars(est_summaries *s, int64_t step, size_t n, const char *const *tags, const float *values);
void est_summaries_scalar(est_summaries *s, int64_t step, const char *tag, float value);
void est_summaries_flush(est_summaries *s);
void est_summaries_close(est_summaries *s);

#endif
