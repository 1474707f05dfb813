/* Sentence embeddings of a HuggingFace model directory (docs/embeddings.md, docs/hf.md):
 * tests/data/hf/qa_tanh (tests/reference/hf_bert_golden.py) with sentence-transformers'
 * modules.json (Transformer, Pooling, Normalize), 1_Pooling/config.json (mean) and
 * sentence_bert_config.json (max_seq_length 16) added by hand. est_embed_model_open on the
 * directory gives the L2-normalised mean over the mask of transformers' last_hidden_state
 * (golden.safetensors); `est embed --model_dir=DIR`, `--init_checkpoint=DIR` and the export
 * `--export_dir` writes from it (served by est serve) give one and the same output. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <math.h>

#include "est/safetensors.h"
#include "est/sentence_embedding.h"
#include "est/serving.h"
#include "test_util.h"

#define QA_DIR EST_TEST_DATA "/hf/qa_tanh"

static est_tensor golden(const char *name) {
  est_safetensors *st;
  assert_int_equal(est_safetensors_open(&st, QA_DIR "/golden.safetensors"), EST_OK);
  est_tensor t;
  assert_int_equal(est_safetensors_read(st, name, &t), EST_OK);
  est_safetensors_close(st);
  return t;
}

/* The directory's files decide everything: mean pooling, normalised, 16 tokens, the golden's
 * vectors for its two rows (one padded after 5 tokens, one with segment ids 1). */
static void test_directory_embeds_like_transformers(void **state) {
  (void)state;
  est_embed_model_options o = {.model_dir = QA_DIR, .do_lower_case = true, .normalize = -1, .max_batch = 2};
  est_servable *s;
  if (est_embed_model_open(&s, &o) != EST_OK) fail_msg("%s", est_error_message());
  const est_model_meta *meta = est_servable_meta(s);
  assert_string_equal(meta->head->name, "pooling");
  const est_pooling_params *pooling = est_model_meta_head_config(meta);
  assert_int_equal(pooling->modes, EST_POOLING_MEAN);
  assert_true(pooling->normalize);
  assert_int_equal(meta->max_seq_length, 16);
  enum { B = 2, S = 8, H = 32 };
  assert_int_equal(est_servable_output_width(s), H);
  est_tensor ids = golden("input_ids"), mask = golden("input_mask"), segs = golden("segment_ids"),
             seq = golden("sequence_output");
  float got[B * H];
  assert_int_equal(est_servable_predict(s, ids.data, mask.data, segs.data, B, S, got), EST_OK);
  const int32_t *m = mask.data;
  const float *x = seq.data;
  for (int b = 0; b < B; b++) {
    double want[H] = {0}, norm = 0;
    int n = 0;
    for (int t = 0; t < S; t++) {
      if (!m[b * S + t]) continue;
      n++;
      for (int h = 0; h < H; h++) want[h] += x[((size_t)b * S + t) * H + h];
    }
    for (int h = 0; h < H; h++) norm += (want[h] / n) * (want[h] / n);
    for (int h = 0; h < H; h++) {
      const double w = want[h] / n / sqrt(norm);
      if (fabs(got[b * H + h] - w) > 1e-5) fail_msg("row %d [%d]: est %g, transformers %g", b, h, got[b * H + h], w);
    }
  }
  est_tensor_free(&ids), est_tensor_free(&mask), est_tensor_free(&segs), est_tensor_free(&seq);
  est_servable_free(s);
}

/* est embed on the directory, as --model_dir or --init_checkpoint, and on the export written
 * from it: the same lines (tokenizer.json's WordPiece, CJK, an accent, an empty line). */
static void test_cli_routes_agree(void **state) {
  (void)state;
  char in[4096], exp[4096];
  snprintf(in, sizeof in, "%s", test_tmp_path("in.txt"));
  snprintf(exp, sizeof exp, "%s", test_tmp_path("export"));
  FILE *f = fopen(in, "w");
  assert_non_null(f);
  fputs("The movie was not very good!\n\nunwanted running\n\xe4\xb8\xad\xe6\x96\x87 caf\xc3\xa9 fun\n", f);
  fclose(f);
  char *a = test_run_ok(EST_BIN " embed --model_dir=" QA_DIR " --input_file=%s --num_threads=1 2>/dev/null", in);
  char *b = test_run_ok(EST_BIN " embed --init_checkpoint=" QA_DIR " --input_file=%s --num_threads=1 2>/dev/null",
                        in);
  assert_string_equal(a, b);
  assert_int_equal(test_count_lines_with(a, "[", NULL), 4);
  free(test_run_ok("rm -rf %s && " EST_BIN " embed --model_dir=" QA_DIR " --export_dir=%s 2>/dev/null", exp, exp));
  char *c = test_run_ok("ls %s/*/assets/tokenizer.json %s/*/assets/vocab.txt && " EST_BIN
                        " embed --model_dir=%s --input_file=%s --num_threads=1 2>/dev/null | tee %s",
                        exp, exp, exp, in, test_tmp_path("c.out"));
  free(c);
  c = test_read_file(test_tmp_path("c.out"), NULL);
  assert_string_equal(a, c);
  /* the flags still win over the directory's files */
  char *d = test_run_ok(EST_BIN " embed --model_dir=" QA_DIR " --pooling=cls --normalize=false --input_file=%s "
                        "--num_threads=1 2>/dev/null", in);
  assert_string_not_equal(a, d);
  free(a), free(b), free(c), free(d);
}

/* A directory whose config.json is another architecture's: the error names the flag given
 * (--model_dir / --init_checkpoint), the directory's config.json and its model_type, never
 * --bert_config_file, which the user did not give. (GPT-2's: RoBERTa, XLM-R, DistilBERT, ELECTRA
 * and ModernBERT run since issue 48, test_encoder_golden.) */
static void test_unsupported_model_type_names_the_directory(void **state) {
  (void)state;
  char dir[1024];
  snprintf(dir, sizeof dir, "%s", test_tmp_path("gpt2"));
  free(test_run_ok("mkdir -p %s && cp -r " QA_DIR "/. %s/ && sed -i 's/\"model_type\": \"bert\"/\"model_type\": "
                   "\"gpt2\"/' %s/config.json && grep -c gpt2 %s/config.json", dir, dir, dir, dir));
  static const char *const flags[] = {"model_dir", "init_checkpoint"};
  for (size_t i = 0; i < 2; i++) {
    char *log = NULL, want[2200];
    int rc = test_run(&log, 1, "echo hi | " EST_BIN " embed --%s=%s --num_threads=1", flags[i], dir);
    assert_int_equal(rc, 1);
    snprintf(want, sizeof want, "--%s=%s: %s/config.json: field \"model_type\" = \"gpt2\" is not supported",
             flags[i], dir, dir);
    if (!strstr(log, want)) fail_msg("wanted \"%s\" in:\n%s", want, log);
    assert_null(strstr(log, "bert_config_file"));
    free(log);
  }
  /* given explicitly, --bert_config_file is the flag to blame */
  char *log = NULL;
  int rc = test_run(&log, 1, "echo hi | " EST_BIN " embed --init_checkpoint=%s --bert_config_file=%s/config.json",
                    dir, dir);
  assert_int_equal(rc, 1);
  assert_non_null(strstr(log, "--bert_config_file: "));
  assert_non_null(strstr(log, "\"model_type\" = \"gpt2\" is not supported"));
  free(log);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_directory_embeds_like_transformers),
    cmocka_unit_test(test_cli_routes_agree),
    cmocka_unit_test(test_unsupported_model_type_names_the_directory),
  };
  /* a fresh test_tmpdir: test_tmp_path's files were written to / without one */
  return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
