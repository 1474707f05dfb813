/* Estimator summaries over est/tfevents.h (see summaries.h). */
#include "train/summaries.h"

#include <stdlib.h>
#include <string.h>

#include "est/log.h"

void est_summaries_init(est_summaries *s, const char *dir, int enabled) {
  memset(s, 0, sizeof *s);
  s->dir = dir ? strdup(dir) : NULL;
  s->enabled = enabled && s->dir;
}

static int ready(est_summaries *s) {
  if (!s->enabled || s->failed) return 0;
  if (s->writer) return 1;
  if (est_events_writer_open(&s->writer, s->dir) != EST_OK) {
    /* TensorBoard output is a report, not state: warn and carry on. */
    EST_LOG_WARN("summaries disabled: %s", est_error_message());
    s->failed = 1;
    s->writer = NULL;
    return 0;
  }
  return 1;
}

void est_summaries_scalars(est_summaries *s, int64_t step, size_t n, const char *const *tags, const float *values) {
  if (!ready(s)) return;
  if (est_events_writer_add_scalars(s->writer, step, n, tags, values) != EST_OK) {
    EST_LOG_WARN("summaries disabled: %s", est_error_message());
    s->failed = 1;
  }
}

void est_summaries_scalar(est_summaries *s, int64_t step, const char *tag, float value) {
  est_summaries_scalars(s, step, 1, &tag, &value);
}

void est_summaries_flush(est_summaries *s) {
  if (s->writer && !s->failed && est_events_writer_flush(s->writer) != EST_OK) {
    EST_LOG_WARN("summaries disabled: %s", est_error_message());
    s->failed = 1;
  }
}

void est_summaries_close(est_summaries *s) {
  if (s->writer && est_events_writer_close(s->writer) != EST_OK && !s->failed)
    EST_LOG_WARN("summaries: %s", est_error_message());
  s->writer = NULL;
  free(s->dir);
  s->dir = NULL;
}
