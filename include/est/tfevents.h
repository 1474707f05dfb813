/* est/tfevents.h — TensorBoard event files (what tf.summary / tf.estimator write).
 *
 *     est_events_writer *w;
 *     est_events_writer_open(&w, "model_dir");     // model_dir/events.out.tfevents.<time>.<host>
 *     est_events_writer_add_scalar(w, 100, "loss", 0.693f);
 *     const char *tags[2] = {"eval_accuracy", "eval_loss"}; float v[2] = {0.8f, 0.41f};
 *     est_events_writer_add_scalars(w, 100, 2, tags, v); // one Event with two values
 *     est_events_writer_close(w);
 *
 * The file is TFRecord-framed (docs/events.md §1); the first record is an Event with
 * file_version "brain.Event:2". Event files are append-only logs that TensorBoard reads
 * while training runs, so they are not atomic files: every add is written through to the
 * OS at once (flush() additionally fsyncs).
 */
#ifndef EST_TFEVENTS_H
#define EST_TFEVENTS_H

#include <stddef.h>
#include <stdint.h>

#include "est/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct est_events_writer est_events_writer;

/* Creates `dir` if needed and a new event file in it. */
est_status est_events_writer_open(est_events_writer **out, const char *dir);
const char *est_events_writer_path(const est_events_writer *w);

est_status est_events_writer_add_scalar(est_events_writer *w, int64_t step, const char *tag, float value);
/* One Event at `step` whose Summary holds n scalar values. */
est_status est_events_writer_add_scalars(est_events_writer *w, int64_t step, size_t n,
                                         const char *const *tags, const float *values);
est_status est_events_writer_flush(est_events_writer *w);   /* fsync */
est_status est_events_writer_close(est_events_writer *w);   /* flush + close; frees w; NULL ok */

/* A decoded Event (scalars only; other summary kinds are skipped). */
typedef struct est_event {
  double wall_time;
  int64_t step;
  char *file_version;     /* NULL unless set */
  size_t count;           /* scalar values in the summary */
  char **tags;
  float *values;
} est_event;

/* Decodes one Event payload; free with est_event_clear. INVALID_ARGUMENT when malformed. */
est_status est_event_parse(est_event *ev, const uint8_t *data, size_t size);
void est_event_clear(est_event *ev);

/* Serializes an Event holding n scalars (file_version when not NULL instead); *out is
 * malloc'ed. Used by the writer and tests. */
est_status est_event_serialize_scalars(double wall_time, int64_t step, const char *file_version,
                                       size_t n, const char *const *tags, const float *values,
                                       uint8_t **out, size_t *size);

#ifdef __cplusplus
}
#endif
#endif
