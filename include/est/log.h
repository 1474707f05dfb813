/* est/log.h — logs a person can follow.
 *
 * One line per message on stderr: "I1202 11:50:27.123 message" (level letter, month+day,
 * wall time), the same shape as TensorFlow's C++ logs. Under MPI with more than one rank
 * each line also carries "[rank r] " after the time.
 */
#ifndef EST_LOG_H
#define EST_LOG_H

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

#define EST_LOG_DEBUG(...) est_log(EST_LOG_DEBUG, __VA_ARGS__)
#define EST_LOG_INFO(...) est_log(EST_LOG_INFO, __VA_ARGS__)
#define EST_LOG_WARN(...) est_log(EST_LOG_WARN, __VA_ARGS__)
#define EST_LOG_ERROR(...) est_log(EST_LOG_ERROR, __VA_ARGS__)

#ifdef __cplusplus
}
#endif
#endif
