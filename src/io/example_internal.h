/* Helpers shared by example.c, example_parse.c and example_json.c. */
#ifndef EST_IO_EXAMPLE_INTERNAL_H
#define EST_IO_EXAMPLE_INTERNAL_H

#include "est/example.h"
#include "io/protowire.h"

/* The feature for `key` (created empty, or an existing one with its values freed), or
 * NULL when out of memory. */
est_feature *est_example_slot(est_example *ex, const uint8_t *key, size_t n);

/* Reads one Features map entry (exactly one key and one value, any order, as TF's fast
 * parser demands). Returns 0 when malformed. */
int est_example_next_entry(est_pw_reader *features, const uint8_t **key, size_t *key_size,
                           const uint8_t **value, size_t *value_size);

/* C-escapes at most 64 bytes of data into dst for error messages ("..." when cut). */
void est_example_escape(char *dst, size_t cap, const uint8_t *data, size_t size);

#endif
