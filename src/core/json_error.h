/* jansson's parse errors, in the input's terms.
 *
 * Most of jansson's messages say what is wrong with the text ("unexpected token near ','",
 * "premature end of input", "duplicate object key"), and est passes them on with the file /
 * request and the line and column. A few instead name jansson's own API: a string holding
 * \u0000 is "\u0000 is not allowed without JSON_ALLOW_NUL", a flag the user of est cannot
 * set. est_json_error_text gives those in the input's terms and every other one as it is:
 *
 *     json_error_t err;
 *     json_t *root = json_loadb(body, size, JSON_REJECT_DUPLICATES, &err);
 *     if (!root) return est_error(..., "%s:%d:%d: %s", name, err.line, err.column, est_json_error_text(&err));
 *
 * Every json_load* of a request body or a user's file reports through it. */
#ifndef EST_CORE_JSON_ERROR_H
#define EST_CORE_JSON_ERROR_H

#include <jansson.h>

/* err's message for a person who wrote the JSON, jansson's " near '<token>'" kept; err's own
 * text, or this thread's buffer until its next call. */
const char *est_json_error_text(const json_error_t *err);

#endif
