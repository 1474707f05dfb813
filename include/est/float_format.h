/* est/float_format.h — float32 printed as NumPy prints it (and, below, a float and a string as
 * Python's json.dumps writes them).
 *
 * BERT's scripts write their numbers through str(np.float32(x)): eval_results.txt
 * ("eval_accuracy = 0.84558827"), test_results.tsv's probabilities, the "loss = ..." log
 * lines. est prints every float32 it writes for a person or a TF-era script this one way:
 *
 *     char buf[EST_FLOAT32_CHARS];
 *     est_format_float32(0.1f, buf, sizeof buf);     // "0.1"
 *     est_format_float32(1e-5f, buf, sizeof buf);    // "1e-05"
 *     est_format_float32(2.0f, buf, sizeof buf);     // "2.0"
 *
 * The digits are the shortest decimal that reads back (strtof) as the same float32, the
 * closest to the value when several of that length do (NumPy >= 1.14's Dragon4 "unique"
 * mode). Layout as numpy.float32's str/repr: positional when 1e-4 <= |v| < 1e16 (compared
 * in double, so float32(1e-4) = 9.99999975e-05 is "1e-04"), always with a fractional digit
 * ("1.0", "123456790.0"); otherwise d[.ddd]e+XX with at least two exponent digits
 * ("1.2e-05", "3.4028235e+38"); "nan", "inf", "-inf", "-0.0".
 */
#ifndef EST_FLOAT_FORMAT_H
#define EST_FLOAT_FORMAT_H

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Enough for every float32 ("-1.17549435e-38" is 15 characters, positional ones at most 22). */
enum { EST_FLOAT32_CHARS = 32 };

/* Writes v into buf (cut to size - 1 characters if smaller than EST_FLOAT32_CHARS) and
 * returns buf, so it can stand in a printf argument list. */
char *est_format_float32(float v, char *buf, size_t size);

/* ---- Python's json.dumps, for files and answers a Python script would have written ------ */

/* repr(round(v, ndigits)) for 0 <= ndigits <= 15: the value rounded half-even on its exact
 * binary value (as Python's round), printed as the shortest string that reads back
 * ("0.25", "-1.0", "1.2e-05", "-0.0"). Returns buf. */
char *est_py_round_repr(double v, int ndigits, char *buf, size_t size);

/* A JSON string as json.dumps(ensure_ascii=True) writes it: \" \\ \n \r \t \b \f, other
 * controls and every non-ASCII code point as \uXXXX (lower-case hex, surrogate pairs above
 * U+FFFF). `s` is UTF-8. */
void est_py_json_string(FILE *out, const char *s);

#ifdef __cplusplus
}
#endif
#endif
