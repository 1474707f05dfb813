/* Progress lines with a rate and an ETA (est/log.h): the shape of training's step log
 * (est_logging_hook), for work whose size is known before it starts. */
#include <stdio.h>
#include <time.h>

#include "est/log.h"

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void est_format_duration(double seconds, char *buf, size_t size) {
  if (!(seconds >= 0) || seconds > 1e9) {
    snprintf(buf, size, "?");
    return;
  }
  long s = (long)(seconds + 0.5);
  if (s >= 3600) snprintf(buf, size, "%ldh%02ldm%02lds", s / 3600, (s / 60) % 60, s % 60);
  else if (s >= 60) snprintf(buf, size, "%ldm%02lds", s / 60, s % 60);
  else snprintf(buf, size, "%lds", s);
}

void est_progress_start(est_progress *p, const char *what, const char *unit, int64_t total, int64_t first,
                        double every_seconds) {
  *p = (est_progress){.what = what, .unit = unit, .total = total, .first = first, .every_seconds = every_seconds};
  p->t_start = p->t_last = now_seconds();
}

void est_progress_update(est_progress *p, int64_t done) {
  if (p->total <= 0 || done <= 0) return;
  const double now = now_seconds();
  const int first = !p->first_logged && done >= p->first, last = done == p->total;
  if (!first && !last && !(p->every_seconds > 0 && now - p->t_last >= p->every_seconds)) return;
  if (first) p->first_logged = 1;
  p->t_last = now;
  /* the average since the start: prediction's batches all cost about the same */
  const double elapsed = now - p->t_start, rate = elapsed > 0 ? (double)done / elapsed : 0.0;
  char eta[32];
  est_format_duration(done >= p->total ? 0.0 : rate > 0 ? (double)(p->total - done) / rate : -1.0, eta, sizeof eta);
  EST_LOG_INFO("%s %lld/%lld (%.1f%%), %.1f %s/sec, ETA %s", p->what, (long long)done, (long long)p->total,
               100.0 * (double)done / (double)p->total, rate, p->unit, eta);
}
