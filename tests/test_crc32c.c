/* CRC32C: published vectors (docs/encoding.md §2, crc32c_test.cc), Extend, Mask, and the
 * hardware path against the table path at every length and alignment. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "est/crc32c.h"

typedef uint32_t (*crc_fn)(uint32_t, const void *, size_t);

static void check_vectors(crc_fn f) {
  uint8_t buf[48];
  assert_int_equal(f(0, "123456789", 9), 0xE3069283u);
  assert_int_equal(f(0, "", 0), 0);
  assert_int_equal(f(0, "a", 1), 0xC1D04330u);
  assert_int_equal(f(0, "hello", 5), 0x9A71BB4Cu);
  memset(buf, 0, 8);
  assert_int_equal(f(0, buf, 8), 0x8C28B28Au);
  memset(buf, 0, 32);
  assert_int_equal(f(0, buf, 32), 0x8A9136AAu);
  memset(buf, 0xff, 32);
  assert_int_equal(f(0, buf, 32), 0x62A8AB43u);
  for (int i = 0; i < 32; i++) buf[i] = (uint8_t)i;
  assert_int_equal(f(0, buf, 32), 0x46DD794Eu);
  for (int i = 0; i < 32; i++) buf[i] = (uint8_t)(31 - i);
  assert_int_equal(f(0, buf, 32), 0x113FDB5Cu);
  /* The 48-byte iSCSI read PDU from RFC 3720 (crc32c_test.cc). */
  static const uint8_t pdu[48] = {
      0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18,
      0x28, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  assert_int_equal(f(0, pdu, 48), 0xD9963A56u);
  /* Unaligned start and length over the same PDU (crc32c_test.cc StandardResults). */
  assert_int_equal(f(0, pdu, 48 - 7), 0xDD1B19BEu);
  assert_int_equal(f(0, pdu + 1, 48 - 4), 0x4930C4B1u);
}

static uint32_t fast_extend(uint32_t c, const void *d, size_t n) { return est_crc32c_extend(c, d, n); }

static void test_standard_results_both_paths(void **state) {
  (void)state;
  check_vectors(est_crc32c_portable_extend);
  check_vectors(fast_extend);
  assert_int_equal(est_crc32c("123456789", 9), 0xE3069283u);
}

static void test_extend(void **state) {
  (void)state;
  assert_int_equal(est_crc32c("hello world", 11), est_crc32c_extend(est_crc32c("hello ", 6), "world", 5));
  assert_int_equal(est_crc32c("hello world", 11),
                   est_crc32c_portable_extend(est_crc32c_portable_extend(0, "hello ", 6), "world", 5));
}

static void test_mask(void **state) {
  (void)state;
  uint32_t crc = est_crc32c("foo", 3);
  assert_int_not_equal(crc, est_crc32c_mask(crc));
  assert_int_not_equal(crc, est_crc32c_mask(est_crc32c_mask(crc)));
  assert_int_equal(crc, est_crc32c_unmask(est_crc32c_mask(crc)));
  assert_int_equal(crc, est_crc32c_unmask(est_crc32c_unmask(est_crc32c_mask(est_crc32c_mask(crc)))));
  assert_int_equal(est_crc32c_mask(0), 0xA282EAD8u);
  assert_int_equal(est_crc32c_mask(0x8C28B28Au), 0x07980329u);
}

/* Lengths around the 256 / 8192-byte block sizes of the three-stream path, from every
 * alignment, and split points for Extend: the fast path must equal the table path. */
static void test_fast_path_matches_table(void **state) {
  (void)state;
  size_t max = 3 * 8192 * 2 + 3 * 256 + 64;
  uint8_t *buf = malloc(max + 8);
  uint32_t x = 12345;
  for (size_t i = 0; i < max + 8; i++) buf[i] = (uint8_t)((x = x * 1103515245u + 12345u) >> 16);
  size_t lens[] = {0, 1, 7, 8, 9, 255, 256, 767, 768, 769, 1000, 8191, 8192, 24575, 24576, 24577, 30000, max};
  for (size_t a = 0; a < 8; a++)
    for (size_t k = 0; k < sizeof lens / sizeof *lens; k++) {
      size_t n = lens[k];
      uint32_t want = est_crc32c_portable_extend(0, buf + a, n);
      assert_int_equal(est_crc32c(buf + a, n), want);
      size_t cut = n / 3;
      assert_int_equal(est_crc32c_extend(est_crc32c(buf + a, cut), buf + a + cut, n - cut), want);
    }
  free(buf);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_standard_results_both_paths),
      cmocka_unit_test(test_extend),
      cmocka_unit_test(test_mask),
      cmocka_unit_test(test_fast_path_matches_table),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
