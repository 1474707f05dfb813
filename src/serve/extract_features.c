/* extract_features.py's JSON lines, digit for digit: Python's json.dumps of an OrderedDict
 * (separators ", " and ": ", ensure_ascii) with float values round(float(x), 6), which
 * json prints with float.__repr__ (est_py_round_repr, est/float_format.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/float_format.h"
#include "est/serving.h"

void est_extract_features_write(FILE *out, int64_t linex_index, const char *const *tokens, int num_tokens,
                                const int *layer_indexes, int num_layers, const float *const *values, int hidden) {
  char num[64];
  fprintf(out, "{\"linex_index\": %lld, \"features\": [", (long long)linex_index);
  for (int t = 0; t < num_tokens; t++) {
    fputs(t ? ", {\"token\": " : "{\"token\": ", out);
    est_py_json_string(out, tokens[t]);
    fputs(", \"layers\": [", out);
    for (int k = 0; k < num_layers; k++) {
      fprintf(out, "%s{\"index\": %d, \"values\": [", k ? ", " : "", layer_indexes[k]);
      const float *v = values[k] + (size_t)t * hidden;
      for (int h = 0; h < hidden; h++) {
        if (h) fputs(", ", out);
        fputs(est_py_round_repr((double)v[h], 6, num, sizeof num), out);
      }
      fputs("]}", out);
    }
    fputs("]}", out);
  }
  fputs("]}\n", out);
}
