/* est/log.h — logs a person can follow.
 *
 * One line per message on stderr: "I1202 11:50:27.123 message" (level letter, month+day,
 * wall time), the same shape as TensorFlow's C++ logs. Under MPI with more than one rank
 * each line also carries "[rank r] " after the time.
 */
#ifndef EST_LOG_H
#define EST_LOG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum est_log_level {
  EST_LOG_DEBUG = 0,
  EST_LOG_INFO = 1,
  EST_LOG_WARN = 2,
  EST_LOG_ERROR = 3,
  EST_LOG_OFF = 4,
} est_log_level;

void est_log(est_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Messages below `level` are dropped. The default is INFO, or EST_LOG_LEVEL from the
 * environment (debug, info, warn, error, off) when set. */
void est_log_set_level(est_log_level level);
est_log_level est_log_get_level(void);

/* Where lines go (default stderr). */
void est_log_set_stream(FILE *stream);

/* Rank shown on each line when world_size > 1 (set by the MPI layer). */
void est_log_set_rank(int rank, int world_size);

/* ---- progress of work of a known size ----------------------------------------------------- */

/* "1h02m03s", "4m05s", "7s" (rounded); "?" for a negative or unbounded time. */
void est_format_duration(double seconds, char *buf, size_t size);

/* Progress lines with a rate and an ETA, as training's step log has them:
 *
 *     est_progress p;
 *     est_progress_start(&p, "Predicting feature", "features", 10833, 8, 10.0);
 *     ... est_progress_update(&p, done);   // "Predicting feature 800/10833 (7.4%), 2.9 features/sec, ETA 57m36s"
 *
 * A line when `done` first reaches `first` (e.g. the first batch: an ETA early), when it
 * reaches `total`, and otherwise at most every `every_seconds` (0: only those two). The rate
 * is the average since est_progress_start. Lines go to the log only. */
typedef struct est_progress {
  const char *what, *unit;
  int64_t total, first;
  double every_seconds;
  double t_start, t_last;
  int first_logged;
} est_progress;

void est_progress_start(est_progress *p, const char *what, const char *unit, int64_t total, int64_t first,
                        double every_seconds);
void est_progress_update(est_progress *p, int64_t done);

#define EST_LOG_DEBUG(...) est_log(EST_LOG_DEBUG, __VA_ARGS__)
#define EST_LOG_INFO(...) est_log(EST_LOG_INFO, __VA_ARGS__)
#define EST_LOG_WARN(...) est_log(EST_LOG_WARN, __VA_ARGS__)
#define EST_LOG_ERROR(...) est_log(EST_LOG_ERROR, __VA_ARGS__)

#ifdef __cplusplus
}
#endif
#endif
