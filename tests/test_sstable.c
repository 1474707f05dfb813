/* LevelDB-format tables (docs/checkpoint.md §2, and its SSTable cases 46-56 in §10, from
 * TSL table_test.cc): builder round trips over block sizes, restart points, separators,
 * the oversized-entry rule, hand-made blocks (zero restarts, snappy, bad type/entries). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <snappy-c.h>
#include <string.h>

#include "est/crc32c.h"
#include "io/sstable.h"
#include "test_util.h"

typedef struct kv {
  const char *key;
  size_t key_len;
  const char *value;
  size_t value_len;
} kv;

static uint8_t *build(const kv *e, size_t n, size_t block_size, size_t *size) {
  est_sstable_builder b;
  est_sstable_builder_init(&b, block_size);
  for (size_t i = 0; i < n; i++)
    assert_int_equal(est_sstable_builder_add(&b, e[i].key, e[i].key_len, e[i].value, e[i].value_len), EST_OK);
  uint8_t *out;
  assert_int_equal(est_sstable_builder_finish(&b, &out, size), EST_OK);
  return out;
}

static void round_trip(const kv *e, size_t n, size_t block_size) {
  size_t size;
  uint8_t *data = build(e, n, block_size, &size);
  est_sstable t;
  assert_int_equal(est_sstable_parse(&t, data, size, "t"), EST_OK);
  assert_int_equal(t.count, n);
  for (size_t i = 0; i < n; i++) {
    assert_int_equal(t.key_lens[i], e[i].key_len);
    assert_memory_equal(t.keys[i], e[i].key, e[i].key_len);
    assert_int_equal(t.value_lens[i], e[i].value_len);
    if (e[i].value_len) assert_memory_equal(t.values[i], e[i].value, e[i].value_len);
    assert_int_equal(est_sstable_find(&t, e[i].key, e[i].key_len), (long)i);
  }
  est_sstable_free(&t);
  free(data);
}

/* The footer's index handle, and the index block's keys (restart interval 1, so each
 * entry is stored whole). */
static size_t index_keys(const uint8_t *data, size_t size, char keys[][64], uint64_t *offsets) {
  est_pw_reader r = est_pw_reader_make(data + size - 48, 40);
  uint64_t mo = 0, ms = 0, io = 0, is = 0;
  assert_true(est_pw_read_varint(&r, &mo) && est_pw_read_varint(&r, &ms));
  assert_true(est_pw_read_varint(&r, &io) && est_pw_read_varint(&r, &is));
  const uint8_t *blk = data + io;
  uint32_t restarts = est_pw_decode_fixed32(blk + is - 4);
  est_pw_reader e = est_pw_reader_make(blk, is - 4 - 4 * restarts);
  size_t n = 0;
  while (!est_pw_eof(&e)) {
    uint32_t shared = 0, ns = 0, vl = 0;
    assert_true(est_pw_read_varint32(&e, &shared) && est_pw_read_varint32(&e, &ns) &&
                est_pw_read_varint32(&e, &vl));
    assert_int_equal(shared, 0);
    memcpy(keys[n], e.pos, ns);
    keys[n][ns] = 0;
    est_pw_reader h = est_pw_reader_make(e.pos + ns, vl);
    assert_true(est_pw_read_varint(&h, &offsets[n]));
    e.pos += ns + vl;
    n++;
  }
  assert_int_equal(restarts, n ? n : 1);
  return n;
}

static void test_empty_table(void **state) {
  (void)state;
  size_t size;
  uint8_t *data = build(NULL, 0, 0, &size);
  /* Empty metaindex block @0, empty index block @13, footer. */
  assert_int_equal(size, 13 + 13 + 48);
  static const uint8_t empty_block[13] = {0, 0, 0, 0, 1, 0, 0, 0, 0, 0xc0, 0xf2, 0xa1, 0xb0};
  assert_memory_equal(data, empty_block, 13);
  assert_memory_equal(data + 13, empty_block, 13);
  static const uint8_t footer_start[4] = {0x00, 0x08, 0x0d, 0x08};
  assert_memory_equal(data + 26, footer_start, 4);
  static const uint8_t magic[8] = {0x57, 0xfb, 0x80, 0x8b, 0x24, 0x75, 0x47, 0xdb};
  assert_memory_equal(data + size - 8, magic, 8);
  est_sstable t;
  assert_int_equal(est_sstable_parse(&t, data, size, "t"), EST_OK);
  assert_int_equal(t.count, 0);
  assert_int_equal(est_sstable_find(&t, "", 0), -1);
  est_sstable_free(&t);
  free(data);
}

static void test_simple_tables(void **state) {
  (void)state;
  static const kv empty_key[] = {{"", 0, "v", 1}};
  static const kv single[] = {{"abc", 3, "v", 1}};
  static const kv multi[] = {{"abc", 3, "v", 1}, {"abcd", 4, "v", 1}, {"ac", 2, "v2", 2}};
  static const kv special[] = {{"\xff\xff", 2, "v3", 2}};
  const size_t sizes[] = {1, 256, 0};
  for (int s = 0; s < 3; s++) {
    round_trip(empty_key, 1, sizes[s]);
    round_trip(single, 1, sizes[s]);
    round_trip(multi, 3, sizes[s]);
    round_trip(special, 1, sizes[s]);
  }
  /* \xff\xff has no shorter successor: the index key stays "\xff\xff". */
  size_t size;
  uint8_t *data = build(special, 1, 0, &size);
  char keys[4][64];
  uint64_t offs[4];
  assert_int_equal(index_keys(data, size, keys, offs), 1);
  assert_string_equal(keys[0], "\xff\xff");
  free(data);
  /* Keys out of order are refused by the builder. */
  est_sstable_builder b;
  est_sstable_builder_init(&b, 0);
  assert_int_equal(est_sstable_builder_add(&b, "b", 1, "", 0), EST_OK);
  assert_int_equal(est_sstable_builder_add(&b, "a", 1, "", 0), EST_ERR_INVALID_ARGUMENT);
  assert_int_equal(est_sstable_builder_add(&b, "b", 1, "", 0), EST_ERR_INVALID_ARGUMENT);
  est_sstable_builder_free(&b);
}

static void test_restarts_every_16(void **state) {
  (void)state;
  kv e[40];
  char keys[40][16];
  for (int i = 0; i < 40; i++) {
    snprintf(keys[i], sizeof keys[i], "key%03d", i);
    e[i] = (kv){keys[i], strlen(keys[i]), "val", 3};
  }
  size_t size;
  uint8_t *data = build(e, 40, 0, &size);
  /* One data block at 0; its restart array is {0, off(16), off(32)} with count 3.
   * Entries 1..15 share "key0" (4 bytes) or more with their predecessor. */
  char ik[2][64];
  uint64_t offs[2];
  assert_int_equal(index_keys(data, size, ik, offs), 1);
  assert_string_equal(ik[0], "l"); /* FindShortSuccessor("key039") */
  est_sstable t;
  assert_int_equal(est_sstable_parse(&t, data, size, "t"), EST_OK);
  assert_int_equal(t.count, 40);
  est_sstable_free(&t);
  /* Locate the block's end from the footer's first handle (metaindex follows it). */
  est_pw_reader r = est_pw_reader_make(data + size - 48, 40);
  uint64_t mo = 0;
  assert_true(est_pw_read_varint(&r, &mo));
  size_t block_len = (size_t)mo - 5;
  assert_int_equal(est_pw_decode_fixed32(data + block_len - 4), 3);
  assert_int_equal(est_pw_decode_fixed32(data + block_len - 16), 0);
  uint32_t r16 = est_pw_decode_fixed32(data + block_len - 12);
  /* At a restart the whole key is stored: shared 0, non_shared 6. */
  assert_int_equal(data[r16], 0);
  assert_int_equal(data[r16 + 1], 6);
  assert_memory_equal(data + r16 + 3, "key016", 6);
  /* Entry 1 shares 5 bytes ("key00") with entry 0. */
  assert_int_equal(data[3 + 6 + 3], 5);
  free(data);
  round_trip(e, 40, 256);
  round_trip(e, 40, 1);
}

static void test_separators_and_big_entries(void **state) {
  (void)state;
  /* block_size 1 flushes after every entry, so each boundary gets a separator. */
  static const kv sep[] = {{"the quick brown fox", 19, "1", 1}, {"the who", 7, "2", 1}};
  size_t size;
  uint8_t *data = build(sep, 2, 1, &size);
  char keys[8][64];
  uint64_t offs[8];
  assert_int_equal(index_keys(data, size, keys, offs), 2);
  assert_string_equal(keys[0], "the r");
  assert_string_equal(keys[1], "u"); /* FindShortSuccessor("the who") */
  free(data);
  /* A prefix keeps the earlier key; adjacent bytes cannot be shortened. */
  static const kv prefix[] = {{"abc", 3, "", 0}, {"abcdef", 6, "", 0}, {"abd", 3, "", 0}};
  data = build(prefix, 3, 1, &size);
  assert_int_equal(index_keys(data, size, keys, offs), 3);
  assert_string_equal(keys[0], "abc");
  assert_string_equal(keys[1], "abcdef");
  assert_string_equal(keys[2], "b");
  free(data);
  round_trip(prefix, 3, 1);

  /* TSL's rule: an entry of at least 2 x block_size starts its own block. */
  char big[600];
  memset(big, 'z', sizeof big);
  kv bigs[3] = {{"a", 1, "x", 1}, {"b", 1, big, sizeof big}, {"c", 1, "y", 1}};
  data = build(bigs, 3, 256, &size);
  assert_int_equal(index_keys(data, size, keys, offs), 3);
  assert_string_equal(keys[0], "a"); /* "a" vs "b": adjacent, kept */
  assert_string_equal(keys[1], "b");
  assert_string_equal(keys[2], "d");
  free(data);
  round_trip(bigs, 3, 256);
}

static uint32_t lcg(uint32_t *s) { return *s = *s * 1664525u + 1013904223u; }

static int kv_cmp(const void *a, const void *b) {
  const kv *x = a, *y = b;
  int c = memcmp(x->key, y->key, x->key_len < y->key_len ? x->key_len : y->key_len);
  if (c) return c;
  return (x->key_len > y->key_len) - (x->key_len < y->key_len);
}

/* 56: 3000 entries, over 256 KiB, at the bundle writer's block size: several data
 * blocks, each flushed by TableBuilder's rule (the first entry that brings the block's
 * estimate, entries + 4 bytes per restart + 4, to 256 KiB or more closes it). */
static void test_multi_block_default_size(void **state) {
  (void)state;
  enum { N = 3000, VLEN = 100 };
  static char keys[N][16];
  static char value[VLEN];
  memset(value, 'v', sizeof value);
  kv *e = calloc(N, sizeof *e);
  for (int i = 0; i < N; i++) {
    snprintf(keys[i], sizeof keys[i], "key%05d", 2 * i);
    e[i] = (kv){keys[i], strlen(keys[i]), value, VLEN};
  }
  size_t size;
  uint8_t *data = build(e, N, 0, &size);
  assert_true(size > EST_SSTABLE_BLOCK_SIZE);
  char ik[8][64];
  uint64_t offs[9];
  size_t blocks = index_keys(data, size, ik, offs);
  assert_int_equal(blocks, 2);
  est_pw_reader r = est_pw_reader_make(data + size - 48, 40);
  assert_true(est_pw_read_varint(&r, &offs[blocks])); /* the metaindex follows the last block */
  /* An entry takes at most 3 varint bytes + 8 key bytes + the value, plus 4 for a restart. */
  const size_t max_entry = 3 + 8 + VLEN + 4;
  for (size_t b = 0; b < blocks; b++) {
    size_t len = (size_t)(offs[b + 1] - offs[b]) - EST_SSTABLE_TRAILER_SIZE;
    if (b + 1 < blocks) {
      assert_true(len >= EST_SSTABLE_BLOCK_SIZE);
      assert_true(len < EST_SSTABLE_BLOCK_SIZE + max_entry);
    } else {
      assert_true(len < EST_SSTABLE_BLOCK_SIZE);
    }
  }
  assert_int_equal(offs[0], 0);
  /* The separator after block 0 lies between its last key and the next block's first. */
  est_sstable t;
  assert_int_equal(est_sstable_parse(&t, data, size, "t"), EST_OK);
  assert_int_equal(t.count, N);
  size_t in_first = 0;
  while (in_first < N && strcmp(keys[in_first], ik[0]) <= 0) in_first++;
  assert_true(in_first > 0 && in_first < N);
  assert_true(strcmp(keys[in_first - 1], ik[0]) <= 0 && strcmp(ik[0], keys[in_first]) < 0);
  est_sstable_free(&t);
  free(data);
  round_trip(e, N, 0);
  free(e);
}

/* Randomized: ~2000 random binary keys and values of skewed sizes, several block sizes. */
static void test_randomized(void **state) {
  (void)state;
  uint32_t seed = 301;
  enum { N = 2000 };
  kv *e = calloc(N, sizeof *e);
  char *pool = malloc(N * 64 + N * 300);
  size_t used = 0, n = 0;
  for (int i = 0; i < N; i++) {
    size_t kl = 1 + lcg(&seed) % 24, vl = (lcg(&seed) % 8 == 0) ? lcg(&seed) % 300 : lcg(&seed) % 12;
    char *k = pool + used;
    for (size_t j = 0; j < kl; j++) k[j] = (char)(lcg(&seed) % 4 == 0 ? lcg(&seed) : 'a' + lcg(&seed) % 3);
    used += kl;
    char *v = pool + used;
    for (size_t j = 0; j < vl; j++) v[j] = (char)lcg(&seed);
    used += vl;
    e[n++] = (kv){k, kl, v, vl};
  }
  qsort(e, n, sizeof *e, kv_cmp);
  size_t m = 0; /* drop duplicate keys */
  for (size_t i = 0; i < n; i++)
    if (m == 0 || kv_cmp(&e[m - 1], &e[i]) != 0) e[m++] = e[i];
  const size_t sizes[] = {256, 4096, 0};
  for (int s = 0; s < 3; s++) round_trip(e, m, sizes[s]);
  size_t size;
  uint8_t *data = build(e, m, 256, &size);
  est_sstable t;
  assert_int_equal(est_sstable_parse(&t, data, size, "t"), EST_OK);
  assert_int_equal(est_sstable_find(&t, "zzz", 3), -1);
  assert_int_equal(est_sstable_find(&t, "", 0), -1);
  est_sstable_free(&t);
  free(data);
  free(pool);
  free(e);
}

/* ---- hand-made tables ------------------------------------------------------------------ */

static void append_block(est_pw_buf *out, const uint8_t *content, size_t n, uint8_t type) {
  est_pw_put_raw(out, content, n);
  uint32_t crc = est_crc32c_extend(est_crc32c(content, n), &type, 1);
  est_pw_put_raw(out, &type, 1);
  est_pw_put_fixed32(out, est_crc32c_mask(crc));
}

/* A table of one data block (`content`, stored with `type`) holding entries for `last_key`. */
static uint8_t *table_of(const uint8_t *content, size_t n, uint8_t type, size_t *size) {
  est_pw_buf out;
  est_pw_buf_init(&out);
  append_block(&out, content, n, type);
  uint64_t index_off = out.size;
  est_pw_buf idx;
  est_pw_buf_init(&idx);
  est_pw_put_raw(&idx, "\x00\x01", 2);
  uint8_t handle[20], *h = est_pw_encode_varint(handle, 0);
  h = est_pw_encode_varint(h, n);
  est_pw_put_varint(&idx, (uint64_t)(h - handle));
  est_pw_put_raw(&idx, "z", 1);
  est_pw_put_raw(&idx, handle, (size_t)(h - handle));
  est_pw_put_fixed32(&idx, 0);
  est_pw_put_fixed32(&idx, 1);
  append_block(&out, idx.data, idx.size, 0);
  uint8_t footer[48] = {0};
  uint8_t *p = est_pw_encode_varint(footer, index_off); /* metaindex: unused, point anywhere */
  p = est_pw_encode_varint(p, idx.size);
  p = est_pw_encode_varint(p, index_off);
  est_pw_encode_varint(p, idx.size);
  est_pw_encode_fixed64(footer + 40, 0xdb4775248b80fb57ull);
  est_pw_put_raw(&out, footer, 48);
  est_pw_buf_free(&idx);
  return est_pw_buf_release(&out, size);
}

static void expect_parse(const uint8_t *content, size_t n, uint8_t type, est_status code, size_t count,
                         const char *msg) {
  size_t size;
  uint8_t *data = table_of(content, n, type, &size);
  est_sstable t;
  assert_int_equal(est_sstable_parse(&t, data, size, "hand"), code);
  if (code == EST_OK) assert_int_equal(t.count, count);
  else if (!strstr(est_error_message(), msg)) fail_msg("'%s' lacks '%s'", est_error_message(), msg);
  est_sstable_free(&t);
  free(data);
}

static void test_hand_made_blocks(void **state) {
  (void)state;
  /* ZeroRestartPointsInBlock: a 4-byte block with restart count 0 reads as empty. */
  static const uint8_t zero_restarts[4] = {0, 0, 0, 0};
  expect_parse(zero_restarts, 4, 0, EST_OK, 0, NULL);
  /* Empty, as a raw block: the 8-byte block TF writes (one restart at 0, no entries). */
  static const uint8_t empty_block[8] = {0, 0, 0, 0, 1, 0, 0, 0};
  expect_parse(empty_block, 8, 0, EST_OK, 0, NULL);
  /* Two entries, "ab" -> "1" and "ac" -> "2" (sharing 1 byte). */
  static const uint8_t good[] = {0, 2, 1, 'a', 'b', '1', 1, 1, 1, 'c', '2', 0, 0, 0, 0, 1, 0, 0, 0};
  expect_parse(good, sizeof good, 0, EST_OK, 2, NULL);
  /* The same block snappy-compressed (type 1), as some TF files have it. */
  char comp[64];
  size_t clen = sizeof comp;
  assert_int_equal(snappy_compress((const char *)good, sizeof good, comp, &clen), SNAPPY_OK);
  expect_parse((uint8_t *)comp, clen, 1, EST_OK, 2, NULL);
  comp[0] = 0x7f; /* a wrong uncompressed length: the stream no longer validates */
  expect_parse((uint8_t *)comp, clen, 1, EST_ERR_DATA_LOSS, 0, "snappy");
  expect_parse(good, sizeof good, 2, EST_ERR_DATA_LOSS, 0, "bad block type");
  /* shared (3) larger than the previous key (2). */
  uint8_t bad_shared[sizeof good];
  memcpy(bad_shared, good, sizeof good);
  bad_shared[6] = 3;
  expect_parse(bad_shared, sizeof good, 0, EST_ERR_DATA_LOSS, 0, "bad entry in block");
  /* A value length running past the entries. */
  uint8_t bad_len[sizeof good];
  memcpy(bad_len, good, sizeof good);
  bad_len[8] = 9;
  expect_parse(bad_len, sizeof good, 0, EST_ERR_DATA_LOSS, 0, "bad entry in block");
  /* A restart count that cannot fit, and a block under 4 bytes. */
  uint8_t bad_restarts[sizeof good];
  memcpy(bad_restarts, good, sizeof good);
  bad_restarts[sizeof good - 4] = 200;
  expect_parse(bad_restarts, sizeof good, 0, EST_ERR_DATA_LOSS, 0, "bad block contents");
  expect_parse(good, 3, 0, EST_ERR_DATA_LOSS, 0, "bad block contents");
  /* Keys out of order ("ac" then "ab"). */
  static const uint8_t unordered[] = {0, 2, 1, 'a', 'c', '1', 1, 1, 1, 'b', '2', 0, 0, 0, 0, 1, 0, 0, 0};
  expect_parse(unordered, sizeof unordered, 0, EST_ERR_DATA_LOSS, 0, "out of order");
  /* A block handle past the end of the file. */
  size_t size;
  uint8_t *data = table_of(good, sizeof good, 0, &size);
  est_sstable t;
  assert_int_equal(est_sstable_parse(&t, data, size - 60, "cut"), EST_ERR_DATA_LOSS);
  free(data);
  /* A data block handle running past the end of the blocks: "truncated block read". */
  data = table_of(good, sizeof good, 0, &size);
  /* the index entry's handle is (0, sizeof good); claim 30 more bytes and re-seal the
   * index block's CRC, so that only the handle is wrong */
  size_t index_off = sizeof good + EST_SSTABLE_TRAILER_SIZE, index_len = 3 + 1 + 2 + 8;
  assert_int_equal(data[index_off + 5], sizeof good);
  data[index_off + 5] = (uint8_t)(sizeof good + 30);
  uint32_t crc = est_crc32c(data + index_off, index_len + 1);
  est_pw_encode_fixed32(data + index_off + index_len + 1, est_crc32c_mask(crc));
  assert_int_equal(est_sstable_parse(&t, data, size, "hand"), EST_ERR_DATA_LOSS);
  if (!strstr(est_error_message(), "hand: truncated block read"))
    fail_msg("'%s' lacks 'truncated block read'", est_error_message());
  free(data);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_empty_table),
    cmocka_unit_test(test_simple_tables),
    cmocka_unit_test(test_restarts_every_16),
    cmocka_unit_test(test_separators_and_big_entries),
    cmocka_unit_test(test_multi_block_default_size),
    cmocka_unit_test(test_randomized),
    cmocka_unit_test(test_hand_made_blocks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
