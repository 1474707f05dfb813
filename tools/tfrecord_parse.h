/* `est tfrecord parse` (tools/tfrecord_parse.c), called from tools/cmd_tfrecord.c. */
#ifndef EST_TOOLS_TFRECORD_PARSE_H
#define EST_TOOLS_TFRECORD_PARSE_H
#include "est/tfrecord.h"

/* Parses every record of path against spec (syntax in tfrecord_parse.c) and prints one
 * JSON line per record. Returns the exit code: 0, 1 (the file failed), 2 (bad spec). */
int est_tfrecord_parse_file(const char *path, est_compression c, const char *spec);

#endif
