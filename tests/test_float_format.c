/* est_format_float32 (est/float_format.h), the one float32 formatter: str(np.float32(v))
 * as BERT's scripts write eval_results.txt, test_results.tsv and their logs. Expected
 * strings were printed by NumPy 1.24 / 1.26 for the listed values and bit patterns
 * (tests/reference/float32_str.py prints them; it also compares est with NumPy on 1.5 M
 * patterns, every exponent's lowest and highest 64 mantissas among them). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/float_format.h"

static const struct {
  uint32_t bits;
  const char *text;
} numpy_str[] = {
  {0x3f587879u, "0.84558827"}, {0x3749539cu, "1.2e-05"},     {0x38d1b717u, "1e-04"},
  {0x38d18167u, "9.99e-05"},   {0x3f000000u, "0.5"},         {0x3f800000u, "1.0"},
  {0x47c35000u, "100000.0"},   {0x58635fa9u, "1000000000000000.0"},
  {0x5a0e1bcau, "1e+16"},      {0x5ad529afu, "3e+16"},       {0x4ceb79a3u, "123456790.0"},
  {0xb48637bdu, "-2.5e-07"},   {0x3dcccccdu, "0.1"},         {0x3eaaaaabu, "0.33333334"},
  {0x4b800000u, "16777216.0"}, {0x00000001u, "1e-45"},       {0x7f7fc99eu, "3.4e+38"},
  {0x3901725bu, "0.00012345"}, {0x3f26cfd3u, "0.65160865"},  {0x3f3a5a5au, "0.72794116"},
  {0x40000000u, "2.0"},        {0xc0e00000u, "-7.0"},        {0x2edbe6ffu, "1e-10"},
  {0x38d1b725u, "0.0001000001"}, {0x477fe000u, "65504.0"},   {0x449a5000u, "1234.5"},
  {0x4557fd79u, "3455.842"},   {0x42a452d9u, "82.16181"},    {0x330debf1u, "3.3043708e-08"},
  {0xb25fe176u, "-1.3031572e-08"}, {0x4e57da89u, "905355840.0"}, {0x4a883903u, "4463745.5"},
  {0xcc4cd4d7u, "-53695324.0"}, {0x4268727eu, "58.11181"},   {0x3ea8d298u, "0.3297317"},
  {0x3f49d677u, "0.7884287"},  {0x3e9b3c5au, "0.30319482"},  {0x3ee830e0u, "0.4534979"},
  {0x3e09423au, "0.1340417"},  {0x3ece64d3u, "0.40311298"},
  {0x00000000u, "0.0"},        {0x80000000u, "-0.0"},        {0x7fc00000u, "nan"},
  {0x7f800000u, "inf"},        {0xff800000u, "-inf"},
  /* Powers of two: the rounding interval below is half the one above, and the shortest
   * digits lie above the value, farther than the nearest 8-digit decimal (which does not
   * read back). "%.*e" alone gives 9 digits: 1.26217745e-29. */
  {0x0f800000u, "1.2621775e-29"}, {0x6b000000u, "1.5474251e+26"}, {0x6c800000u, "1.2379401e+27"},
};

static void test_matches_numpy_bits(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof numpy_str / sizeof numpy_str[0]; i++) {
    float v;
    memcpy(&v, &numpy_str[i].bits, 4);
    char buf[EST_FLOAT32_CHARS];
    est_format_float32(v, buf, sizeof buf);
    if (strcmp(buf, numpy_str[i].text) != 0)
      fail_msg("bits 0x%08x: got '%s', NumPy prints '%s'", numpy_str[i].bits, buf, numpy_str[i].text);
  }
}

/* The same contract from float literals: eval_results.txt and the log lines. */
static void test_matches_numpy_values(void **state) {
  (void)state;
  const struct { float v; const char *text; } cases[] = {
      {1.0f, "1.0"},          {0.5f, "0.5"},           {2.0f, "2.0"},         {100.0f, "100.0"},
      {0.0f, "0.0"},          {-0.0f, "-0.0"},         {0.84558824f, "0.84558827"}, {0.505248f, "0.505248"},
      {1.2e-05f, "1.2e-05"},  {1e-05f, "1e-05"},       {0.0001f, "1e-04"}, {0.00012f, "0.00012"},   {123456.0f, "123456.0"},
      {1e16f, "1e+16"},       {0.6931472f, "0.6931472"}, {-3.25f, "-3.25"},    {1.5e+15f, "1500000000000000.0"},
      {3.4028235e38f, "3.4028235e+38"}, {1.4e-45f, "1e-45"}, {NAN, "nan"},     {-INFINITY, "-inf"}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char buf[64];
    assert_string_equal(est_format_float32(cases[i].v, buf, sizeof buf), cases[i].text);
  }
}

/* Does some decimal with `p` significant digits read back as a > 0? Only decimals inside
 * a's rounding interval can: each grid of p-digit decimals (step 10^(E-p+1) for the
 * decimal exponents E of the interval's ends) is tried at the points next to the
 * interval's low end, and strtof is the judge. */
static int p_digits_read_back(float a, int p) {
  const double lo = ((double)a + (double)nextafterf(a, 0.0f)) / 2;
  const double hi = ((double)a + (double)nextafterf(a, INFINITY)) / 2;
  for (int end = 0; end < 2; end++) {
    const int E = (int)floor(log10(end ? hi : lo));
    const int q = E - p + 1;                              /* the grid step is 10^q */
    const double k0 = ceil(lo / pow(10.0, q));
    for (double k = k0 - 1; k <= k0 + 1; k++) {
      if (k < 1 || k >= pow(10.0, p)) continue;
      char s[48];
      snprintf(s, sizeof s, "%.0fe%d", k, q);
      if (strtof(s, NULL) == a) return 1;
    }
  }
  return 0;
}

/* Every printed value must parse back to the same float32 (the round-trip half of the
 * contract), and no decimal with fewer significant digits may (the shortest half), over
 * a sweep of bit patterns. */
static void test_round_trips_and_is_shortest(void **state) {
  (void)state;
  for (uint32_t bits = 0x00000001u; bits < 0x7f800000u; bits += 0x000f4243u) {
    float v;
    memcpy(&v, &bits, 4);
    char buf[EST_FLOAT32_CHARS];
    est_format_float32(v, buf, sizeof buf);
    if (strtof(buf, NULL) != v) fail_msg("0x%08x: '%s' does not read back", bits, buf);
    /* significant digits as printed: leading zeros, the point, the exponent and (in
     * positional form) the trailing zeros do not count */
    int nd = 0, trailing = 0, started = 0;
    for (const char *c = buf; *c && *c != 'e'; c++) {
      if (*c < '0' || *c > '9') continue;
      if (*c != '0') started = 1;
      if (!started) continue;
      nd++;
      trailing = *c == '0' ? trailing + 1 : 0;
    }
    nd -= trailing;
    if (nd > 1 && p_digits_read_back(v, nd - 1)) fail_msg("0x%08x: '%s' is not the shortest", bits, buf);
    char neg[EST_FLOAT32_CHARS + 1];
    est_format_float32(-v, neg, sizeof neg);
    if (neg[0] != '-' || strcmp(neg + 1, buf) != 0) fail_msg("0x%08x: -v is '%s', v is '%s'", bits, neg, buf);
  }
}

/* A buffer smaller than EST_FLOAT32_CHARS gets a cut, NUL-terminated string. */
static void test_small_buffer(void **state) {
  (void)state;
  char buf[4];
  memset(buf, 'x', sizeof buf);
  assert_string_equal(est_format_float32(0.84558824f, buf, sizeof buf), "0.8");
  char one[1] = {'x'};
  assert_string_equal(est_format_float32(1.0f, one, 1), "");
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_matches_numpy_bits),
    cmocka_unit_test(test_matches_numpy_values),
    cmocka_unit_test(test_round_trips_and_is_shortest),
    cmocka_unit_test(test_small_buffer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
