/* est_pyrandom against CPython's random.Random. Every expected value below was printed by
 * `python3 tests/reference/pyrandom_vectors.py` (CPython 3.11.7); each test names the line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "est/pyrandom.h"

/* "seed S u32 ...": the first three words after random.Random(S) (getrandbits(32)). */
static void test_seed_words(void **state) {
  (void)state;
  static const struct {
    int64_t seed;
    uint32_t w[3];
  } cases[] = {
    {12345, {0x6aa79987u, 0xbb91433au, 0x029a7245u}},
    {0, {0xd82c07cdu, 0x629f6fbeu, 0xc2094cacu}},
    {-7, {0x52e6b438u, 0xf2a74de4u, 0x269e0d37u}},          /* |seed| is used */
    {1099511627781, {0x811f1124u, 0x8454f73cu, 0x44c342a9u}}, /* 2^40 + 5: a two-word key */
    {INT64_MAX, {0x510fa39fu, 0xa81394c8u, 0xa19a35cbu}},
  };
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    est_pyrandom r;
    est_pyrandom_seed(&r, cases[c].seed);
    for (int i = 0; i < 3; i++) assert_int_equal(est_pyrandom_u32(&r), cases[c].w[i]);
    est_pyrandom_seed(&r, cases[c].seed);
    assert_int_equal(est_pyrandom_getrandbits(&r, 32), cases[c].w[0]);
  }
}

/* "random ..." and "after1000": random() is 53 bits from two words; the 1001st call lies
 * past the first regeneration of the state. Compared exactly, as doubles. */
static void test_random(void **state) {
  (void)state;
  est_pyrandom r;
  est_pyrandom_seed(&r, 12345);
  assert_true(est_pyrandom_random(&r) == 0.41661987254534116);
  assert_true(est_pyrandom_random(&r) == 0.010169169457068361);
  assert_true(est_pyrandom_random(&r) == 0.8252065092537432);
  est_pyrandom_seed(&r, 12345);
  for (int i = 0; i < 1000; i++) est_pyrandom_random(&r);
  assert_true(est_pyrandom_random(&r) == 0.06275586230470376);
}

/* "bits1 0 bits7 75 bits33 2337446730 bits64 16896199536424608164" after Random(3). */
static void test_getrandbits(void **state) {
  (void)state;
  est_pyrandom r;
  est_pyrandom_seed(&r, 3);
  assert_int_equal(est_pyrandom_getrandbits(&r, 1), 0);
  assert_int_equal(est_pyrandom_getrandbits(&r, 7), 75);
  assert_int_equal(est_pyrandom_getrandbits(&r, 33), 2337446730u);
  assert_true(est_pyrandom_getrandbits(&r, 64) == UINT64_C(16896199536424608164));
  /* getrandbits(0) draws nothing. */
  est_pyrandom a, b;
  est_pyrandom_seed(&a, 3);
  est_pyrandom_seed(&b, 3);
  assert_int_equal(est_pyrandom_getrandbits(&a, 0), 0);
  assert_int_equal(est_pyrandom_u32(&a), est_pyrandom_u32(&b));
}

/* "randint 32 0 1 30013 4 144228661501" for randint(2,125), (0,0), (1,1), (0,30521), (-5,5),
 * (0,2^40) in a row after Random(3): randint(a, a) still draws (else the later values
 * would shift). */
static void test_randint(void **state) {
  (void)state;
  est_pyrandom r;
  est_pyrandom_seed(&r, 3);
  assert_int_equal(est_pyrandom_randint(&r, 2, 125), 32);
  assert_int_equal(est_pyrandom_randint(&r, 0, 0), 0);
  assert_int_equal(est_pyrandom_randint(&r, 1, 1), 1);
  assert_int_equal(est_pyrandom_randint(&r, 0, 30521), 30013);
  assert_int_equal(est_pyrandom_randint(&r, -5, 5), 4);
  assert_true(est_pyrandom_randint(&r, 0, INT64_C(1) << 40) == INT64_C(144228661501));
}

/* "shuffle10 [8, 7, 3, 5, 1, 2, 9, 4, 0, 6] next 0.1616878239293682" after Random(12345). */
static void test_shuffle(void **state) {
  (void)state;
  est_pyrandom r;
  est_pyrandom_seed(&r, 12345);
  int x[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  const int want[10] = {8, 7, 3, 5, 1, 2, 9, 4, 0, 6};
  est_pyrandom_shuffle(&r, x, 10, sizeof *x);
  for (int i = 0; i < 10; i++) assert_int_equal(x[i], want[i]);
  assert_true(est_pyrandom_random(&r) == 0.1616878239293682);
  /* Elements of another size move whole. */
  est_pyrandom_seed(&r, 12345);
  int64_t y[10];
  for (int i = 0; i < 10; i++) y[i] = (int64_t)i << 40;
  est_pyrandom_shuffle(&r, y, 10, sizeof *y);
  for (int i = 0; i < 10; i++) assert_true(y[i] == (int64_t)want[i] << 40);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_seed_words), cmocka_unit_test(test_random), cmocka_unit_test(test_getrandbits),
    cmocka_unit_test(test_randint), cmocka_unit_test(test_shuffle),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
