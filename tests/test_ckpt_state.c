/* The `checkpoint` state file, tf.train.latest_checkpoint and est_ckpt_remove. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "est/ckpt.h"
#include "est/file.h"
#include "test_util.h"

static void write_text(const char *dir, const char *name, const char *text) {
  char p[512];
  est_path_join(p, sizeof p, dir, name);
  assert_int_equal(est_write_file_atomic(p, text, strlen(text)), EST_OK);
}

static void test_read_real_file(void **state) {
  (void)state;
  est_ckpt_state st;
  assert_int_equal(est_ckpt_state_read(EST_TEST_DATA "/mrpc_bert_tiny_run", &st), EST_OK);
  assert_string_equal(st.model_checkpoint_path, "model.ckpt-343");
  assert_int_equal(st.count, 2);
  assert_string_equal(st.all_model_checkpoint_paths[0], "model.ckpt-0");
  assert_string_equal(st.all_model_checkpoint_paths[1], "model.ckpt-343");
  est_ckpt_state_clear(&st);
  char prefix[512];
  assert_int_equal(est_ckpt_latest(EST_TEST_DATA "/mrpc_bert_tiny_run", prefix, sizeof prefix), EST_OK);
  assert_string_equal(prefix, EST_TEST_DATA "/mrpc_bert_tiny_run/model.ckpt-343");
  /* Writing the same state reproduces TF 1.15's file byte for byte. */
  char dir[256];
  test_make_tmpdir(dir, sizeof dir);
  char *all[2] = {"model.ckpt-0", "model.ckpt-343"};
  est_ckpt_state same = {"model.ckpt-343", 2, all};
  assert_int_equal(est_ckpt_state_write(dir, &same), EST_OK);
  char *ours = test_read_in(dir, "checkpoint"), *tfs = test_read_in(EST_TEST_DATA "/mrpc_bert_tiny_run", "checkpoint");
  assert_string_equal(ours, tfs);
  free(ours);
  free(tfs);
  test_remove_tree(dir);
  /* Too small a buffer is an error, not a cut path. */
  assert_int_equal(est_ckpt_latest(EST_TEST_DATA "/mrpc_bert_tiny_run", prefix, 8), EST_ERR_INVALID_ARGUMENT);
}

static void test_write_like_tf(void **state) {
  (void)state;
  char dir[256], p10[300], p5[300];
  test_make_tmpdir(dir, sizeof dir);
  est_path_join(p10, sizeof p10, dir, "model.ckpt-10");
  est_path_join(p5, sizeof p5, dir, "model.ckpt-5");
  char *all[2] = {p5, p10};
  est_ckpt_state st = {p10, 2, all};
  assert_int_equal(est_ckpt_state_write(dir, &st), EST_OK);
  char *text = test_read_in(dir, "checkpoint");
  assert_string_equal(text, "model_checkpoint_path: \"model.ckpt-10\"\n"
                            "all_model_checkpoint_paths: \"model.ckpt-5\"\n"
                            "all_model_checkpoint_paths: \"model.ckpt-10\"\n");
  free(text);
  /* A list not ending with the current checkpoint gets it appended, as TF does; paths
   * outside the directory stay as given. */
  char *one[1] = {"/elsewhere/model.ckpt-1"};
  est_ckpt_state st2 = {"model.ckpt-20", 1, one};
  assert_int_equal(est_ckpt_state_write(dir, &st2), EST_OK);
  text = test_read_in(dir, "checkpoint");
  assert_string_equal(text, "model_checkpoint_path: \"model.ckpt-20\"\n"
                            "all_model_checkpoint_paths: \"/elsewhere/model.ckpt-1\"\n"
                            "all_model_checkpoint_paths: \"model.ckpt-20\"\n");
  free(text);
  /* Text-format escapes round-trip: quote, backslash, newline, apostrophe, UTF-8. */
  char odd[] = "we\"ird\\na\nme's-caf\xc3\xa9";
  est_ckpt_state st3 = {odd, 0, NULL};
  assert_int_equal(est_ckpt_state_write(dir, &st3), EST_OK);
  text = test_read_in(dir, "checkpoint");
  assert_string_equal(text, "model_checkpoint_path: \"we\\\"ird\\\\na\\nme\\'s-caf\\303\\251\"\n"
                            "all_model_checkpoint_paths: \"we\\\"ird\\\\na\\nme\\'s-caf\\303\\251\"\n");
  free(text);
  est_ckpt_state back;
  assert_int_equal(est_ckpt_state_read(dir, &back), EST_OK);
  assert_string_equal(back.model_checkpoint_path, odd);
  assert_int_equal(back.count, 1);
  est_ckpt_state_clear(&back);
  est_ckpt_state empty = {0};
  assert_int_equal(est_ckpt_state_write(dir, &empty), EST_ERR_INVALID_ARGUMENT);
  test_remove_tree(dir);
}

static void test_read_variants_and_errors(void **state) {
  (void)state;
  char dir[256];
  test_make_tmpdir(dir, sizeof dir);
  est_ckpt_state st;
  char prefix[512];
  assert_int_equal(est_ckpt_state_read(dir, &st), EST_ERR_NOT_FOUND);
  assert_int_equal(est_ckpt_latest(dir, prefix, sizeof prefix), EST_ERR_NOT_FOUND);
  /* TF2 CheckpointManager's extra fields, a comment, single quotes, \x and octal escapes,
   * adjacent strings. */
  write_text(dir, "checkpoint",
             "# written by TF 2\n"
             "model_checkpoint_path: 'ckpt-\\x33'\n"
             "all_model_checkpoint_paths: \"ckpt-\\061\" \"\"\n"
             "all_model_checkpoint_paths:\"ckpt-3\"\n"
             "all_model_checkpoint_timestamps: 1601611588.861176\n"
             "all_model_checkpoint_timestamps: 1601611590.5\n"
             "last_preserved_timestamp: 1601611587.9\n");
  assert_int_equal(est_ckpt_state_read(dir, &st), EST_OK);
  assert_string_equal(st.model_checkpoint_path, "ckpt-3");
  assert_int_equal(st.count, 2);
  assert_string_equal(st.all_model_checkpoint_paths[0], "ckpt-1");
  est_ckpt_state_clear(&st);
  /* The named checkpoint has no .index yet: latest says NOT_FOUND. */
  assert_int_equal(est_ckpt_latest(dir, prefix, sizeof prefix), EST_ERR_NOT_FOUND);
  write_text(dir, "ckpt-3.index", "x");
  assert_int_equal(est_ckpt_latest(dir, prefix, sizeof prefix), EST_OK);
  char want[512];
  est_path_join(want, sizeof want, dir, "ckpt-3");
  assert_string_equal(prefix, want);
  /* Absolute model path. */
  char text[1200];
  snprintf(text, sizeof text, "model_checkpoint_path: \"%s\"\n", want);
  write_text(dir, "checkpoint", text);
  assert_int_equal(est_ckpt_latest(dir, prefix, sizeof prefix), EST_OK);
  assert_string_equal(prefix, want);

  const char *bad[] = {
    "model_checkpoint_path \"x\"\n",                /* no colon */
    "model_checkpoint_path: \"x\n",                 /* unterminated */
    "model_checkpoint_path: x\n",                   /* not a string */
    "model_checkpoint_path: \"\"\n",                /* empty */
    "all_model_checkpoint_paths: \"a\"\n",          /* no model path */
    "model_checkpoint_path: \"a\\q\"\n",            /* bad escape */
    "model_checkpoint_path: \"a\\000b\"\n",         /* NUL in a path */
    "\n\nmodel_checkpoint_path: \"a\"\n%%\n",       /* junk on line 4 */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    write_text(dir, "checkpoint", bad[i]);
    assert_int_equal(est_ckpt_state_read(dir, &st), EST_ERR_INVALID_ARGUMENT);
    assert_null(st.model_checkpoint_path);
    assert_int_equal(est_ckpt_latest(dir, prefix, sizeof prefix), EST_ERR_INVALID_ARGUMENT);
  }
  assert_non_null(strstr(est_error_message(), "checkpoint:4:"));
  test_remove_tree(dir);
}

static void test_remove(void **state) {
  (void)state;
  char dir[256], prefix[300];
  test_make_tmpdir(dir, sizeof dir);
  const char *files[] = {"model.ckpt-1.index", "model.ckpt-1.data-00000-of-00002",
                         "model.ckpt-1.data-00001-of-00002", "model.ckpt-1.meta",
                         "model.ckpt-10.index", "model.ckpt-10.data-00000-of-00001",
                         "model.ckpt-1.data-notashard", "checkpoint"};
  for (int i = 0; i < 8; i++) write_text(dir, files[i], "x");
  est_path_join(prefix, sizeof prefix, dir, "model.ckpt-1");
  assert_int_equal(est_ckpt_remove(prefix), EST_OK);
  for (int i = 0; i < 8; i++) {
    char p[512];
    est_path_join(p, sizeof p, dir, files[i]);
    assert_int_equal(est_file_exists(p), i >= 4);
  }
  assert_int_equal(est_ckpt_remove(prefix), EST_OK); /* nothing left: still fine */
  test_remove_tree(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_read_real_file),
    cmocka_unit_test(test_write_like_tf),
    cmocka_unit_test(test_read_variants_and_errors),
    cmocka_unit_test(test_remove),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
