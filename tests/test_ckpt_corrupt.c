/* Corruption sweeps over small checkpoints: every single-byte change and every truncation
 * of the index and of the data file must give an error or exactly the original tensors,
 * never a crash and never different data. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "est/ckpt.h"
#include "est/file.h"
#include "io/bundle.h"
#include "test_util.h"

typedef struct fixture {
  char dir[256], prefix[300], index_path[400], data_path[400];
  uint8_t *index, *data;
  size_t index_size, data_size;
  size_t count;
  char **names;
  est_tensor *want;
} fixture;

/* Writes a checkpoint with floats, an int64 scalar, strings and an empty tensor. */
static void make_fixture(fixture *f) {
  test_make_tmpdir(f->dir, sizeof f->dir);
  est_path_join(f->prefix, sizeof f->prefix, f->dir, "model.ckpt-7");
  float we[6] = {1, 2, 3, 4, 5, 6}, m[6] = {0.5f, 0, 0, 0, 0, -1};
  int64_t step = 7;
  est_bytes s[2] = {{5, (uint8_t *)"hello"}, {0, NULL}};
  const char *names[5] = {"bert/w", "bert/w/adam_m", "global_step", "s", "empty"};
  est_tensor ts[5] = {{EST_DT_FLOAT, 2, {2, 3}, we}, {EST_DT_FLOAT, 2, {2, 3}, m},
                      {EST_DT_INT64, 0, {0}, &step}, {EST_DT_STRING, 1, {2}, s}, {EST_DT_FLOAT, 2, {0, 3}, NULL}};
  assert_int_equal(est_ckpt_save(f->prefix, 5, names, ts), EST_OK);
  snprintf(f->index_path, sizeof f->index_path, "%s.index", f->prefix);
  snprintf(f->data_path, sizeof f->data_path, "%s.data-00000-of-00001", f->prefix);
  assert_int_equal(est_read_file(f->index_path, &f->index, &f->index_size), EST_OK);
  assert_int_equal(est_read_file(f->data_path, &f->data, &f->data_size), EST_OK);
  est_ckpt_reader *r;
  assert_int_equal(est_ckpt_reader_open(&r, f->prefix), EST_OK);
  f->count = est_ckpt_reader_count(r);
  assert_int_equal(f->count, 5);
  f->names = calloc(f->count, sizeof *f->names);
  f->want = calloc(f->count, sizeof *f->want);
  for (size_t i = 0; i < f->count; i++) {
    f->names[i] = strdup(est_ckpt_reader_name(r, i));
    assert_int_equal(est_ckpt_reader_read(r, f->names[i], &f->want[i]), EST_OK);
  }
  est_ckpt_reader_close(r);
}

static void free_fixture(fixture *f) {
  for (size_t i = 0; i < f->count; i++) {
    free(f->names[i]);
    est_tensor_free(&f->want[i]);
  }
  free(f->names);
  free(f->want);
  free(f->index);
  free(f->data);
  test_remove_tree(f->dir);
}

static int same_tensor(const est_tensor *a, const est_tensor *b) {
  if (a->dtype != b->dtype || a->rank != b->rank) return 0;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i]) return 0;
  if (a->dtype != EST_DT_STRING) return !memcmp(a->data, b->data, est_tensor_num_bytes(a));
  for (int64_t i = 0; i < est_tensor_num_elements(a); i++) {
    const est_bytes *x = &((const est_bytes *)a->data)[i], *y = &((const est_bytes *)b->data)[i];
    if (x->size != y->size || (x->size && memcmp(x->data, y->data, x->size))) return 0;
  }
  return 1;
}

/* Opens the checkpoint as it is on disk now and reads everything: each tensor must read
 * back identical or fail; the whole open may fail. Returns how many tensors failed
 * (or -1 when the open failed). */
static int check_all(const fixture *f) {
  est_ckpt_reader *r;
  if (est_ckpt_reader_open(&r, f->prefix) != EST_OK) return -1;
  int failed = 0;
  for (size_t i = 0; i < est_ckpt_reader_count(r); i++) {
    est_tensor t;
    const char *name = est_ckpt_reader_name(r, i);
    if (est_ckpt_reader_read(r, name, &t) != EST_OK) {
      failed++;
      continue;
    }
    size_t k = 0;
    while (k < f->count && strcmp(f->names[k], name)) k++;
    /* A tensor under a name the original did not have would be silent corruption. */
    if (k == f->count) fail_msg("corrupt index produced a new tensor name '%s'", name);
    if (!same_tensor(&t, &f->want[k])) fail_msg("tensor '%s' read back different data", name);
    est_tensor_free(&t);
  }
  if (est_ckpt_reader_count(r) != f->count) failed += (int)(f->count - est_ckpt_reader_count(r));
  est_ckpt_reader_close(r);
  return failed;
}

static void test_flip_every_index_byte(void **state) {
  (void)state;
  fixture f;
  make_fixture(&f);
  int opened = 0;
  for (size_t i = 0; i < f.index_size; i++) {
    static const uint8_t masks[2] = {0x01, 0xff};
    for (int m = 0; m < 2; m++) {
      f.index[i] ^= masks[m];
      test_write_bytes(f.index_path, f.index, f.index_size);
      if (check_all(&f) >= 0) opened++;
      f.index[i] ^= masks[m];
    }
  }
  /* Only bytes TF never reads are unchecked: the metaindex block and its handle, and
   * the footer's zero padding (13 + 48 - 8 magic bytes at most). */
  assert_true(opened > 0 && opened <= 2 * 53);
  for (size_t len = 0; len < f.index_size; len++) {
    test_write_bytes(f.index_path, f.index, len);
    assert_int_equal(check_all(&f), -1);
  }
  free_fixture(&f);
}

static void test_flip_every_data_byte(void **state) {
  (void)state;
  fixture f;
  make_fixture(&f);
  for (size_t i = 0; i < f.data_size; i++) {
    f.data[i] ^= 0x10;
    test_write_bytes(f.data_path, f.data, f.data_size);
    /* Exactly the tensor holding byte i fails (the index is intact). */
    assert_int_equal(check_all(&f), 1);
    f.data[i] ^= 0x10;
  }
  for (size_t len = 0; len < f.data_size; len++) {
    test_write_bytes(f.data_path, f.data, len);
    assert_true(check_all(&f) >= 1);
  }
  test_write_bytes(f.data_path, f.data, f.data_size);
  assert_int_equal(check_all(&f), 0);
  free_fixture(&f);
}

/* The same over the real TF-written keras-bert index (4497 bytes), in memory through the
 * parser the reader uses: any surviving change leaves all 139 entries exactly as they were. */
static void test_flip_real_index(void **state) {
  (void)state;
  uint8_t *idx;
  size_t n;
  assert_int_equal(est_read_file(EST_TEST_DATA "/keras_bert_tiny/bert_model.ckpt.index", &idx, &n), EST_OK);
  est_bundle_index want;
  assert_int_equal(est_bundle_index_parse(&want, idx, n, "orig"), EST_OK);
  assert_int_equal(want.count, 139);
  int opened = 0;
  for (size_t i = 0; i < n; i++) {
    idx[i] ^= 0x04;
    est_bundle_index got;
    if (est_bundle_index_parse(&got, idx, n, "flipped") == EST_OK) {
      opened++;
      assert_int_equal(got.count, 139);
      for (size_t k = 0; k < 139; k++) {
        const est_bundle_entry *a = &got.entries[k], *b = &want.entries[k];
        assert_string_equal(a->name, b->name);
        assert_true(a->dtype == b->dtype && a->rank == b->rank && a->offset == b->offset &&
                    a->size == b->size && a->masked_crc == b->masked_crc);
        for (int d = 0; d < a->rank; d++) assert_int_equal(a->dims[d], b->dims[d]);
      }
      est_bundle_index_free(&got);
    }
    idx[i] ^= 0x04;
  }
  assert_true(opened > 0 && opened <= 53);
  for (size_t len = 0; len < n; len++) {
    est_bundle_index got;
    assert_int_equal(est_bundle_index_parse(&got, idx, len, "cut"), EST_ERR_DATA_LOSS);
  }
  est_bundle_index_free(&want);
  free(idx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_flip_every_index_byte),
    cmocka_unit_test(test_flip_every_data_byte),
    cmocka_unit_test(test_flip_real_index),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
