/* Thread-local error messages behind est/status.h. */
#include "est/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum { EST_ERROR_CAPACITY = 2048 };

static _Thread_local char error_text[EST_ERROR_CAPACITY];
static _Thread_local est_status error_code = EST_OK;

est_status est_error(est_status code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(error_text, sizeof error_text, fmt, ap);
  va_end(ap);
  error_code = code;
  return code;
}

est_status est_error_prefix(const char *fmt, ...) {
  char prefix[EST_ERROR_CAPACITY];
  char old[EST_ERROR_CAPACITY];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  memcpy(old, error_text, sizeof old);
  size_t used = strlen(prefix);
  if (used >= sizeof error_text) used = sizeof error_text - 1;
  memcpy(error_text, prefix, used);
  size_t rest = strlen(old);
  if (rest > sizeof error_text - 1 - used) rest = sizeof error_text - 1 - used;
  memcpy(error_text + used, old, rest);
  error_text[used + rest] = '\0';
  return error_code;
}

const char *est_error_message(void) { return error_text; }

est_status est_error_code(void) { return error_code; }

void est_error_clear(void) {
  error_text[0] = '\0';
  error_code = EST_OK;
}

const char *est_status_name(est_status code) {
  switch (code) {
  case EST_OK: return "OK";
  case EST_ERR_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
  case EST_ERR_NOT_FOUND: return "NOT_FOUND";
  case EST_ERR_OUT_OF_RANGE: return "OUT_OF_RANGE";
  case EST_ERR_DATA_LOSS: return "DATA_LOSS";
  case EST_ERR_IO: return "IO";
  case EST_ERR_NO_MEMORY: return "RESOURCE_EXHAUSTED";
  case EST_ERR_FAILED_PRECONDITION: return "FAILED_PRECONDITION";
  case EST_ERR_UNIMPLEMENTED: return "UNIMPLEMENTED";
  case EST_ERR_ABORTED: return "ABORTED";
  case EST_ERR_INTERNAL: return "INTERNAL";
  case EST_ERR_CANCELLED: return "CANCELLED";
  }
  return "UNKNOWN";
}
