/* `est embed` (tools/cmd_embed.c): its vectors against the encoder pooled apart from the
 * head (embed_test_model.h), JSON and TSV, windows and batches (output in input order),
 * pooling flags, truncation, bad bytes, bad flags, and the export it writes for est serve. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "embed_test_model.h"
#include "serving_test_model.h"

/* stdout of a command that must exit 0 (stderr dropped). */
static char *stdout_of(const char *fmt, const char *a, const char *b) {
  char *out = NULL;
  char cmd[4096];
  snprintf(cmd, sizeof cmd, fmt, a, b);
  int rc = test_run(&out, 0, "%s 2>/dev/null", cmd);
  if (rc != 0) fail_msg("exit %d: %s", rc, cmd);
  return out;
}

/* The texts as an input file, one per line. */
static const char *input_file(void) {
  const char *path = test_tmp_path("input.txt");
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  for (int i = 0; i < EMBED_NTEXTS; i++) fprintf(f, "%s\n", embed_texts[i]);
  fclose(f);
  return path;
}

/* Runs est embed with `flags` over the texts; checks stdout against p's expected vectors. */
static char *embed_and_check(const char *flags, const est_pooling_params *p) {
  const int W = est_pooling_width(p, EMBED_H);
  float want[EMBED_NTEXTS * 16];
  double got[EMBED_NTEXTS * 16 + 1];
  embed_expected(embed_texts, EMBED_NTEXTS, p, want, NULL);
  char *out = NULL;
  int rc = test_run(&out, 0, EST_BIN " embed" EMBED_MODEL_FLAGS " --input_file=%s %s 2> %s", input_file(), flags,
                    test_tmp_path("embed.err"));
  if (rc != 0) fail_msg("est embed %s: exit %d\n%s", flags, rc, test_read_file(test_tmp_path("embed.err"), NULL));
  assert_int_equal(test_count_lines_with(out, "", NULL), EMBED_NTEXTS);
  assert_int_equal(serving_parse_floats(out, got, EMBED_NTEXTS * W + 1), EMBED_NTEXTS * W);
  embed_assert_close(got, want, EMBED_NTEXTS * W, 2e-6, flags);
  return out;
}

static void test_json_mean_matches_the_encoder(void **state) {
  (void)state;
  est_pooling_params p = {.modes = EST_POOLING_MEAN};
  char *out = embed_and_check("", &p);
  /* one JSON array per line */
  const char *line = out;
  for (int i = 0; i < EMBED_NTEXTS; i++) {
    assert_int_equal(line[0], '[');
    line = strchr(line, '\n') + 1;
    assert_int_equal(line[-2], ']');
  }
  free(out);
  char *err = test_read_file(test_tmp_path("embed.err"), NULL);
  assert_non_null(strstr(err, "input line 4: 24 tokens, truncated to max_seq_length 16"));
  assert_int_equal(test_count_lines_with(err, "truncated", NULL), 1);
  free(err);
}

static void test_tsv_windows_batches_and_modes(void **state) {
  (void)state;
  est_pooling_params p = {.modes = EST_POOLING_CLS | EST_POOLING_MAX, .normalize = true};
  /* windows of 4 lines sorted by length, batches of 3: the order must still be the input's */
  char *out = embed_and_check("--output_format=tsv --window=4 --batch_size=3 --pooling=max,cls --normalize", &p);
  assert_null(strchr(out, '['));
  assert_int_equal(test_count_lines_with(out, "\t", NULL), EMBED_NTEXTS);
  free(out);
  p = (est_pooling_params){.modes = EST_POOLING_MEAN_SQRT_LEN};
  free(embed_and_check("--window=1 --batch_size=1 --pooling=mean_sqrt_len", &p));
}

static void test_bad_lines_and_flags(void **state) {
  (void)state;
  char *log = NULL;
  /* invalid UTF-8 on line 3: lines 1-2 are written, then the error names line and byte */
  int rc = test_run(&log, 0, "printf 'all work\\n\\nplay \\377x\\nboy\\n' | " EST_BIN " embed" EMBED_MODEL_FLAGS
                    " 2> %s", test_tmp_path("bad.err"));
  assert_int_equal(rc, 1);
  assert_int_equal(test_count_lines_with(log, "[", NULL), 2);
  free(log);
  char *err = test_read_file(test_tmp_path("bad.err"), NULL);
  assert_non_null(strstr(err, "input line 3: invalid UTF-8 at byte 5"));
  free(err);
  rc = test_run(&log, 1, "printf 'ab\\000c\\n' | " EST_BIN " embed" EMBED_MODEL_FLAGS);
  assert_int_equal(rc, 1);
  assert_non_null(strstr(log, "input line 1: a NUL byte at byte 2"));
  free(log);
  /* CRLF lines are the same texts */
  char *a = stdout_of("printf 'jack is a dull boy\\r\\n' | %s%s embed" EMBED_MODEL_FLAGS, "", EST_BIN);
  char *b = stdout_of("printf 'jack is a dull boy\\n' | %s%s embed" EMBED_MODEL_FLAGS, "", EST_BIN);
  assert_string_equal(a, b);
  free(a), free(b);
  const struct {
    const char *flags, *message;
    int rc;
  } bad[] = {
    {EMBED_MODEL_FLAGS " --pooling=weightedmean", "pooling mode \"weightedmean\" unknown", 1},
    {EMBED_MODEL_FLAGS " --output_format=xml", "--output_format=xml: must be json or tsv", 2},
    {EMBED_MODEL_FLAGS " --batch_size=0", "--batch_size=0", 2},
    {EMBED_MODEL_FLAGS " --max_seq_length=17", "--max_seq_length=17: must be in [3, max_position_embeddings 16]", 1},
    {" --vocab_file=x", "give --model_dir", 2},
    {" --init_checkpoint=" EMBED_KBT "/bert_model.ckpt", "flag --bert_config_file must be specified", 1},
    {EMBED_MODEL_FLAGS " --input_file=/nonexistent/x", "--input_file=/nonexistent/x", 1},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    rc = test_run(&log, 1, "echo hi | " EST_BIN " embed%s", bad[i].flags);
    if (rc != bad[i].rc || !strstr(log, bad[i].message))
      fail_msg("est embed%s: exit %d, want %d with '%s':\n%s", bad[i].flags, rc, bad[i].rc, bad[i].message, log);
    free(log);
  }
}

static void test_export_then_model_dir(void **state) {
  (void)state;
  const char *base = test_tmp_path("export");
  char *log = test_run_ok(EST_BIN " embed" EMBED_MODEL_FLAGS " --pooling=cls,mean --normalize --export_dir=%s", base);
  free(log);
  char dir[1024];
  int64_t version;
  assert_int_equal(est_export_resolve(base, dir, sizeof dir, &version), EST_OK);
  est_model_meta meta;
  char json[1100];
  snprintf(json, sizeof json, "%s/est_model.json", dir);
  assert_int_equal(est_model_meta_read(&meta, json), EST_OK);
  assert_ptr_equal(meta.head, &est_served_pooling);
  assert_int_equal(meta.num_labels, 0);
  const est_pooling_params *pooling = est_model_meta_head_config(&meta);
  assert_int_equal(pooling->modes, EST_POOLING_CLS | EST_POOLING_MEAN);
  assert_true(pooling->normalize);
  assert_int_equal(meta.max_seq_length, 16);
  est_model_meta_clear(&meta);
  /* the export embeds exactly as the checkpoint it came from */
  char *want = stdout_of(EST_BIN " embed" EMBED_MODEL_FLAGS " --pooling=cls,mean --normalize --input_file=%s%s",
                         input_file(), "");
  char *got = stdout_of(EST_BIN " embed --model_dir=%s --num_threads=1 --input_file=%s", base, input_file());
  assert_string_equal(got, want);
  free(want), free(got);
  /* est predict answers probabilities: an embedding export is refused, by its head */
  int rc = test_run(&log, 1, "echo hi | " EST_BIN " predict --export_dir=%s", base);
  assert_int_equal(rc, 1);
  assert_non_null(strstr(log, "the export's head is \"pooling\"; est predict answers a classifier's"));
  free(log);
  /* an export fixes its pooling */
  rc = test_run(&log, 1, "echo hi | " EST_BIN " embed --model_dir=%s --pooling=max", base);
  assert_int_equal(rc, 1);
  assert_non_null(strstr(log, "an export fixes its weights, pooling and max_seq_length"));
  free(log);
  /* a broken "pooling" field is named */
  FILE *f = fopen(json, "r+");
  assert_non_null(f);
  char text[8192] = {0};
  size_t n = fread(text, 1, sizeof text - 1, f);
  char *at = strstr(text, "\"cls,mean\"");
  assert_non_null(at);
  memcpy(at, "\"cls,mode\"", 10);
  fseek(f, 0, SEEK_SET);
  fwrite(text, 1, n, f);
  fclose(f);
  rc = test_run(&log, 1, "echo hi | " EST_BIN " embed --model_dir=%s", base);
  assert_int_equal(rc, 1);
  assert_non_null(strstr(log, "\"pooling\".\"modes\": pooling mode \"mode\" unknown"));
  free(log);
}

/* sentence-transformers' files beside the config set the defaults: sentence_bert_config.json's
 * max_seq_length, 1_Pooling's modes and modules.json's Normalize; flags still win. */
static void test_sentence_transformers_defaults(void **state) {
  (void)state;
  const char *dir = test_tmp_path("st");
  char *log = test_run_ok("mkdir -p %s/1_Pooling && cp " EMBED_KBT "/bert_config.json %s/ && "
                          "printf '{\"max_seq_length\": 8, \"do_lower_case\": false}' > "
                          "%s/sentence_bert_config.json && "
                          "printf '{\"pooling_mode_cls_token\": true}' > %s/1_Pooling/config.json",
                          dir, dir, dir, dir);
  free(log);
  char flags[2048];
  snprintf(flags, sizeof flags, " --init_checkpoint=" EMBED_KBT "/bert_model.ckpt --vocab_file=" EMBED_KBT
           "/vocab.txt --num_threads=1 --bert_config_file=%s/bert_config.json", dir);
  int rc = test_run(&log, 1, "echo 'all work and no play makes jack a dull boy' | " EST_BIN " embed%s", flags);
  assert_int_equal(rc, 0);
  assert_non_null(strstr(log, "input line 1: 12 tokens, truncated to max_seq_length 8"));
  free(log);
  /* cls of 4 floats, not normalised (no modules.json): the [CLS] output itself */
  char *out = stdout_of("echo 'jack is a dull boy' | " EST_BIN " embed%s%s", flags, "");
  est_pooling_params cls = {.modes = EST_POOLING_CLS};
  float want[EMBED_H];
  const char *text = "jack is a dull boy";
  embed_expected(&text, 1, &cls, want, NULL);
  double got[EMBED_H + 1];
  assert_int_equal(serving_parse_floats(out, got, EMBED_H + 1), EMBED_H);
  embed_assert_close(got, want, EMBED_H, 2e-6, "cls from 1_Pooling");
  free(out);
  /* a bad sentence_bert_config.json is named */
  free(test_run_ok("printf '{\"max_seq_length\": 1}' > %s/sentence_bert_config.json", dir));
  rc = test_run(&log, 1, "echo hi | " EST_BIN " embed%s", flags);
  assert_int_equal(rc, 1);
  assert_non_null(strstr(log, "sentence_bert_config.json: \"max_seq_length\" must be an integer >= 3"));
  free(log);
}

/* --help states the defaults that the model's files decide, not the flags' unset values:
 * --normalize is on by modules.json's Normalize (all-MiniLM-L6-v2's), so "(default: 'false')"
 * was wrong; and the rule holds: unset follows modules.json, --nonormalize turns it off. */
static void test_help_states_the_default_rule(void **state) {
  (void)state;
  char *help = NULL;
  assert_int_equal(test_run(&help, 0, EST_BIN " embed --help"), 0);
  const char *n = strstr(help, "  --normalize:"), *m = strstr(help, "  --max_seq_length:");
  assert_non_null(n);
  assert_non_null(m);
  const char *n_end = strstr(n + 1, "\n  --"), *m_end = strstr(m + 1, "\n  --");
  assert_non_null(n_end);
  assert_non_null(m_end);
  char nb[1024], mb[1024];
  snprintf(nb, sizeof nb, "%.*s", (int)(n_end - n), n);
  snprintf(mb, sizeof mb, "%.*s", (int)(m_end - m), m);
  assert_null(strstr(nb, "(default: 'false')"));
  assert_non_null(strstr(nb, "(default: on when sentence-transformers' modules.json beside the model's config lists "
                             "a Normalize module"));
  assert_null(strstr(mb, "(default: '0')"));
  assert_non_null(strstr(mb, "(default: sentence_bert_config.json's beside the model's config, else 128"));
  free(help);

  const char *dir = test_tmp_path("st_normalize");
  free(test_run_ok("mkdir -p %s/1_Pooling && cp " EMBED_KBT "/bert_config.json %s/ && "
                   "printf '{\"pooling_mode_mean_tokens\": true}' > %s/1_Pooling/config.json && "
                   "printf '[{\"path\": \"\", \"type\": \"sentence_transformers.models.Transformer\"}, "
                   "{\"path\": \"1_Pooling\", \"type\": \"sentence_transformers.models.Pooling\"}, "
                   "{\"path\": \"2_Normalize\", \"type\": \"sentence_transformers.models.Normalize\"}]' "
                   "> %s/modules.json", dir, dir, dir, dir));
  char flags[2048];
  snprintf(flags, sizeof flags, " --init_checkpoint=" EMBED_KBT "/bert_model.ckpt --vocab_file=" EMBED_KBT
           "/vocab.txt --num_threads=1 --max_seq_length=16 --bert_config_file=%s/bert_config.json", dir);
  const char *text = "jack is a dull boy";
  double got[EMBED_H + 1];
  float want[EMBED_H];
  const struct {
    const char *flag;
    bool normalize;
  } cases[] = {{"", true}, {" --nonormalize", false}, {" --normalize", true}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char *out = stdout_of("echo 'jack is a dull boy' | " EST_BIN " embed%s%s", flags, cases[i].flag);
    est_pooling_params p = {.modes = EST_POOLING_MEAN, .normalize = cases[i].normalize};
    embed_expected(&text, 1, &p, want, NULL);
    assert_int_equal(serving_parse_floats(out, got, EMBED_H + 1), EMBED_H);
    embed_assert_close(got, want, EMBED_H, 2e-6, cases[i].flag);
    free(out);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_json_mean_matches_the_encoder),
    cmocka_unit_test(test_tsv_windows_batches_and_modes),
    cmocka_unit_test(test_bad_lines_and_flags),
    cmocka_unit_test(test_export_then_model_dir),
    cmocka_unit_test(test_sentence_transformers_defaults),
    cmocka_unit_test(test_help_states_the_default_rule),
  };
  return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
