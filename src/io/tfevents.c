/* TensorBoard event files: TFRecord-framed Event protos (tensorboard's event.proto and
 * summary.proto). Each Event goes to the OS in one write() so a reader (TensorBoard,
 * running alongside training) sees whole records. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "est/file.h"
#include "est/tfevents.h"
#include "est/tfrecord.h"
#include "core/alloc.h"
#include "io/protowire.h"

/* Event fields */
enum { EV_WALL_TIME = 1, EV_STEP = 2, EV_FILE_VERSION = 3, EV_SUMMARY = 5 };
/* Summary.value = 1; Summary.Value: tag = 1, simple_value = 2 */
enum { SUM_VALUE = 1, VAL_TAG = 1, VAL_SIMPLE = 2 };

struct est_events_writer {
  int fd;
  char *path;
};

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

est_status est_event_serialize_scalars(double wall_time, int64_t step, const char *file_version, size_t n,
                                       const char *const *tags, const float *values, uint8_t **out, size_t *size) {
  est_pw_buf b;
  est_pw_buf_init(&b);
  /* proto3: scalars equal to their default are omitted */
  if (wall_time != 0) est_pw_put_double_field(&b, EV_WALL_TIME, wall_time);
  if (step != 0) est_pw_put_varint_field(&b, EV_STEP, (uint64_t)step);
  if (file_version) {
    est_pw_put_string_field(&b, EV_FILE_VERSION, file_version);
  } else {
    size_t summary = est_pw_begin_sub(&b, EV_SUMMARY);
    for (size_t i = 0; i < n; i++) {
      size_t value = est_pw_begin_sub(&b, SUM_VALUE);
      est_pw_put_string_field(&b, VAL_TAG, tags[i]);
      est_pw_put_float_field(&b, VAL_SIMPLE, values[i]); /* in a oneof: written even when 0 */
      est_pw_end_sub(&b, value);
    }
    est_pw_end_sub(&b, summary);
  }
  if (b.failed) {
    est_pw_buf_free(&b);
    return est_error(EST_ERR_NO_MEMORY, "events: out of memory serializing an Event");
  }
  *out = est_pw_buf_release(&b, size);
  return EST_OK;
}

/* Frames and writes one payload with a single write(). */
static est_status write_record(est_events_writer *w, const uint8_t *payload, size_t n) {
  size_t total = n + EST_TFRECORD_HEADER_SIZE + EST_TFRECORD_FOOTER_SIZE;
  uint8_t *rec = malloc(total);
  if (!rec) return est_error(EST_ERR_NO_MEMORY, "%s: out of memory", w->path);
  est_tfrecord_frame(rec, rec + EST_TFRECORD_HEADER_SIZE + n, payload, n);
  memcpy(rec + EST_TFRECORD_HEADER_SIZE, payload, n);
  size_t done = 0;
  while (done < total) {
    ssize_t k = write(w->fd, rec + done, total - done);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      free(rec);
      return est_error(EST_ERR_IO, "%s: write failed: %s", w->path, strerror(errno));
    }
    done += (size_t)k;
  }
  free(rec);
  return EST_OK;
}

static est_status write_event(est_events_writer *w, int64_t step, const char *file_version, size_t n,
                              const char *const *tags, const float *values) {
  uint8_t *payload = NULL;
  size_t size = 0;
  est_status st = est_event_serialize_scalars(now_seconds(), step, file_version, n, tags, values, &payload, &size);
  if (st != EST_OK) return st;
  st = write_record(w, payload, size);
  free(payload);
  return st;
}

est_status est_events_writer_open(est_events_writer **out, const char *dir) {
  *out = NULL;
  est_status st = est_mkdirs(dir);
  if (st != EST_OK) return st;
  char host[256] = "localhost";
  if (gethostname(host, sizeof host - 1) != 0) strcpy(host, "localhost");
  host[sizeof host - 1] = 0;
  est_events_writer *w = calloc(1, sizeof *w);
  if (!w) return est_error(EST_ERR_NO_MEMORY, "events: out of memory");
  size_t cap = strlen(dir) + strlen(host) + 64;
  w->path = malloc(cap);
  if (!w->path) {
    free(w);
    return est_error(EST_ERR_NO_MEMORY, "events: out of memory");
  }
  /* TF's name: <dir>/events.out.tfevents.<%010d seconds>.<hostname>. A second writer in the
   * same second gets a ".N" suffix instead of clobbering the first file. */
  long long t = (long long)time(NULL);
  for (int k = 0; k < 1000; k++) {
    if (k == 0) snprintf(w->path, cap, "%s/events.out.tfevents.%010lld.%s", dir, t, host);
    else snprintf(w->path, cap, "%s/events.out.tfevents.%010lld.%s.%d", dir, t, host, k);
    w->fd = open(w->path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    if (w->fd >= 0 || errno != EEXIST) break;
  }
  if (w->fd < 0) {
    st = est_error(EST_ERR_IO, "cannot create event file %s: %s", w->path, strerror(errno));
    free(w->path);
    free(w);
    return st;
  }
  st = write_event(w, 0, "brain.Event:2", 0, NULL, NULL);
  if (st != EST_OK) {
    close(w->fd);
    unlink(w->path);
    free(w->path);
    free(w);
    return st;
  }
  *out = w;
  return EST_OK;
}

const char *est_events_writer_path(const est_events_writer *w) { return w->path; }

est_status est_events_writer_add_scalars(est_events_writer *w, int64_t step, size_t n, const char *const *tags,
                                         const float *values) {
  return write_event(w, step, NULL, n, tags, values);
}

est_status est_events_writer_add_scalar(est_events_writer *w, int64_t step, const char *tag, float value) {
  return write_event(w, step, NULL, 1, &tag, &value);
}

est_status est_events_writer_flush(est_events_writer *w) {
  if (fsync(w->fd) != 0 && errno != EINVAL)
    return est_error(EST_ERR_IO, "%s: fsync failed: %s", w->path, strerror(errno));
  return EST_OK;
}

est_status est_events_writer_close(est_events_writer *w) {
  if (!w) return EST_OK;
  est_status st = est_events_writer_flush(w);
  if (close(w->fd) != 0 && st == EST_OK) st = est_error(EST_ERR_IO, "%s: close failed: %s", w->path, strerror(errno));
  free(w->path);
  free(w);
  return st;
}

/* ---- decoding ------------------------------------------------------------------------ */

void est_event_clear(est_event *ev) {
  for (size_t i = 0; i < ev->count; i++) free(ev->tags[i]);
  free(ev->tags);
  free(ev->values);
  free(ev->file_version);
  memset(ev, 0, sizeof *ev);
}

static char *dup_bytes(const uint8_t *d, size_t n) {
  char *s = malloc(n + 1);
  if (!s) return NULL;
  if (n) memcpy(s, d, n);
  s[n] = 0;
  return s;
}

/* One Summary.Value: keeps it when it is a simple_value. Returns 0 when malformed. */
static int parse_value(est_event *ev, est_pw_reader r, size_t *cap) {
  const uint8_t *tag = NULL;
  size_t tag_size = 0;
  int has_simple = 0;
  float simple = 0;
  while (!est_pw_eof(&r)) {
    uint32_t field;
    int wt;
    if (!est_pw_read_tag(&r, &field, &wt)) return 0;
    if (field == VAL_TAG && wt == EST_PW_LEN) {
      if (!est_pw_read_bytes(&r, &tag, &tag_size)) return 0;
    } else if (field == VAL_SIMPLE && wt == EST_PW_FIXED32) {
      uint32_t u;
      if (!est_pw_read_fixed32(&r, &u)) return 0;
      simple = est_pw_float_from_bits(u);
      has_simple = 1;
    } else if (!est_pw_skip(&r, wt)) {
      return 0;
    }
  }
  if (!has_simple) return 1;
  if (ev->count == *cap) {
    size_t ncap = *cap ? *cap * 2 : 4;
    if (!EST_RESIZE(ev->tags, ncap) || !EST_RESIZE(ev->values, ncap)) return 0;
    *cap = ncap;
  }
  ev->tags[ev->count] = dup_bytes(tag ? tag : (const uint8_t *)"", tag_size);
  if (!ev->tags[ev->count]) return 0;
  ev->values[ev->count++] = simple;
  return 1;
}

est_status est_event_parse(est_event *ev, const uint8_t *data, size_t size) {
  memset(ev, 0, sizeof *ev);
  est_pw_reader r = est_pw_reader_make(data, size);
  size_t cap = 0;
  while (!est_pw_eof(&r)) {
    const uint8_t *at = r.pos;
    uint32_t field;
    int wt;
    int ok = est_pw_read_tag(&r, &field, &wt);
    if (ok && field == EV_WALL_TIME && wt == EST_PW_FIXED64) {
      uint64_t u = 0;
      ok = est_pw_read_fixed64(&r, &u);
      ev->wall_time = est_pw_double_from_bits(u);
    } else if (ok && field == EV_STEP && wt == EST_PW_VARINT) {
      uint64_t u = 0;
      ok = est_pw_read_varint(&r, &u);
      ev->step = (int64_t)u;
    } else if (ok && field == EV_FILE_VERSION && wt == EST_PW_LEN) {
      const uint8_t *d;
      size_t n;
      ok = est_pw_read_bytes(&r, &d, &n);
      free(ev->file_version);
      ev->file_version = ok ? dup_bytes(d, n) : NULL;
      ok = ok && ev->file_version;
    } else if (ok && field == EV_SUMMARY && wt == EST_PW_LEN) {
      est_pw_reader summary, value;
      ok = est_pw_read_sub(&r, &summary);
      while (ok && !est_pw_eof(&summary)) {
        uint32_t f2;
        int wt2;
        ok = est_pw_read_tag(&summary, &f2, &wt2);
        if (ok && f2 == SUM_VALUE && wt2 == EST_PW_LEN) ok = est_pw_read_sub(&summary, &value) && parse_value(ev, value, &cap);
        else if (ok) ok = est_pw_skip(&summary, wt2);
      }
    } else if (ok) {
      ok = est_pw_skip(&r, wt);
    }
    if (!ok) {
      est_event_clear(ev);
      return est_error(EST_ERR_INVALID_ARGUMENT, "malformed Event at byte %zu of %zu", (size_t)(at - data), size);
    }
  }
  return EST_OK;
}
