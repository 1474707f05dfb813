/* Internal: base64 (RFC 4648's standard alphabet), decoded; the one decoder est has, used by
 * tokenizer.json's precompiled_charsmap (src/text/precompiled.c) and `est tfrecord`'s
 * --spec defaults (tools/tfrecord_parse.c). */
#ifndef EST_CORE_BASE64_H
#define EST_CORE_BASE64_H

#include <stdint.h>

/* Decodes s up to its end or its first '=' (padding is optional) into out, which must hold
 * strlen(s) * 3 / 4 bytes (6 bits a character). Returns the number of bytes written, or -1 - i where s[i] is
 * the first character outside the alphabet. */
long est_base64_decode(const char *s, uint8_t *out);

#endif
