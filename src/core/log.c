/* Line-oriented logging behind est/log.h. One fprintf per line, under a lock, so lines
 * from the prefetch thread and the main thread never interleave mid-line. */
#include "est/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>

static est_log_level current_level = EST_LOG_INFO;
static int level_from_env_done = 0;
static FILE *log_stream = NULL;
static int log_rank = 0, log_world = 1;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static void read_env_level(void) {
  const char *env = getenv("EST_LOG_LEVEL");
  level_from_env_done = 1;
  if (!env) return;
  if (!strcasecmp(env, "debug")) current_level = EST_LOG_DEBUG;
  else if (!strcasecmp(env, "info")) current_level = EST_LOG_INFO;
  else if (!strcasecmp(env, "warn") || !strcasecmp(env, "warning")) current_level = EST_LOG_WARN;
  else if (!strcasecmp(env, "error")) current_level = EST_LOG_ERROR;
  else if (!strcasecmp(env, "off")) current_level = EST_LOG_OFF;
}

void est_log_set_level(est_log_level level) {
  level_from_env_done = 1;
  current_level = level;
}

est_log_level est_log_get_level(void) {
  if (!level_from_env_done) read_env_level();
  return current_level;
}

void est_log_set_stream(FILE *stream) { log_stream = stream; }

void est_log_set_rank(int rank, int world_size) {
  log_rank = rank;
  log_world = world_size;
}

void est_log(est_log_level level, const char *fmt, ...) {
  if (level < est_log_get_level()) return;
  static const char letters[] = "DIWE";
  char body[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(body, sizeof body, fmt, ap);
  va_end(ap);

  struct timeval tv;
  gettimeofday(&tv, NULL);
  struct tm tm;
  localtime_r(&tv.tv_sec, &tm);
  char rank[32] = "";
  if (log_world > 1) snprintf(rank, sizeof rank, "[rank %d] ", log_rank);

  FILE *out = log_stream ? log_stream : stderr;
  pthread_mutex_lock(&log_lock);
  fprintf(out, "%c%02d%02d %02d:%02d:%02d.%03d %s%s\n", letters[level < 4 ? level : 3],
          tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(tv.tv_usec / 1000),
          rank, body);
  fflush(out);
  pthread_mutex_unlock(&log_lock);
}
