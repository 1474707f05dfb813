/* jansson's parse errors in the input's terms (core/json_error.h). */
#include <stdio.h>
#include <string.h>

#include "core/json_error.h"

/* est's strings are C strings: a NUL inside one would cut it short, so jansson is never asked
 * to accept \u0000 (JSON_ALLOW_NUL) and reports it, naming that flag. */
static const char NUL_IN_STRING[] = "a string holds \\u0000 (the NUL character), which est does not accept in text";
static const char NUL_IN_KEY[] = "an object key holds \\u0000 (the NUL character), which est does not accept";

/* "<what>" plus jansson's " near '<token>'" when it gave one; per thread, until the next call. */
static const char *with_near(const char *what, const char *text) {
  static _Thread_local char buf[sizeof NUL_IN_STRING + JSON_ERROR_TEXT_LENGTH];
  const char *near = strstr(text, " near '");
  snprintf(buf, sizeof buf, "%s%s", what, near ? near : "");
  return buf;
}

const char *est_json_error_text(const json_error_t *err) {
  int nul_in_string = 0, nul_in_key = 0;
#if JANSSON_VERSION_HEX >= 0x020b00 /* json_error_code: jansson 2.11 */
  nul_in_string = json_error_code(err) == json_error_null_character;
  nul_in_key = json_error_code(err) == json_error_null_byte_in_key;
#else /* older jansson: its two messages as they read */
  nul_in_string = strstr(err->text, "JSON_ALLOW_NUL") != NULL;
  nul_in_key = strstr(err->text, "NUL byte in object key") != NULL;
#endif
  if (nul_in_string) return with_near(NUL_IN_STRING, err->text);
  if (nul_in_key) return with_near(NUL_IN_KEY, err->text);
  return err->text;
}
