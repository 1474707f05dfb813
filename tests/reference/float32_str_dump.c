/* Developer check (not part of `make test`): reads "bits text" lines (float32_str.py's
 * output) and prints "bits est_format_float32(v)" for the same bits, for a diff against
 * NumPy's; see float32_str.py for the commands. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "est/float_format.h"

int main(void) {
  char line[128];
  unsigned bits;
  while (fgets(line, sizeof line, stdin)) {
    if (sscanf(line, "%x", &bits) != 1) continue;
    uint32_t u = bits;
    float v;
    memcpy(&v, &u, 4);
    char buf[EST_FLOAT32_CHARS];
    printf("%08x %s\n", bits, est_format_float32(v, buf, sizeof buf));
  }
  return 0;
}
