/* `est run_ner` end to end on tests/data/ner/conll (dev.txt = test.txt, so the evaluated and
 * the predicting checkpoint are one): eval_results.txt's keys, test_predictions.txt in CoNLL
 * form with one line a word of test.txt, and seqeval over that file (est/ner.h, checked
 * against seqeval 1.2.2 in test_ner_data) equal to eval_results.txt's numbers; windows
 * (max_seq_length 16 cuts the long sentences); JSON lines with --label_all_tokens; the
 * errors naming flags, files and lines. The real CoNLL-2003 (../shared/data/ner/) is read
 * only by an optional check: EST_NER_CONLL2003=DIR. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "est/est.h"
#include "test_util.h"

#define SMALL_CONFIG EST_TEST_DATA "/run_classifier/bert_config_h32.json"
#define UNCASED EST_TEST_DATA "/vocab_uncased.txt"
#define CONLL EST_TEST_DATA "/ner/conll"

/* eval_results.txt as key -> value; fails on a missing key. */
static double eval_value(const char *text, const char *key) {
  char pat[256];
  snprintf(pat, sizeof pat, "%s = ", key);
  for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
    if (!strncmp(p, pat, strlen(pat))) return strtod(p + strlen(pat), NULL);
  fail_msg("eval_results.txt has no %s:\n%s", key, text);
  return NAN;
}

/* test_predictions.txt against test.txt: the same words in order, sentences apart by one
 * blank line, every tag one of train's labels; returns seqeval of the predictions. */
static void check_predictions(const char *out, const char *data_dir, est_ner_report *r) {
  char path[1024];
  snprintf(path, sizeof path, "%s/test.txt", data_dir);
  est_ner_data gold, pred;
  assert_int_equal(est_ner_read_file(&gold, path), EST_OK);
  char *text = test_read_in(out, "test_predictions.txt");
  assert_int_equal(est_ner_read_buffer(&pred, text, strlen(text), "test_predictions.txt"), EST_OK);
  assert_int_equal(pred.count, gold.count);
  /* no blank line at the start or the end, exactly one between sentences */
  assert_true(text[0] != '\n' && !strstr(text, "\n\n\n"));
  /* each other line is "word tag": two columns */
  for (const char *line = text; *line;) {
    const char *end = strchr(line, '\n');
    assert_non_null(end);
    const char *sp = memchr(line, ' ', (size_t)(end - line));
    assert_true(end == line || (sp && sp > line && sp + 1 < end && !memchr(sp + 1, ' ', (size_t)(end - sp - 1))));
    line = end + 1;
  }
  free(text);
  const char *const **g = calloc(gold.count, sizeof *g), *const **p = calloc(gold.count, sizeof *p);
  size_t *lens = calloc(gold.count, sizeof *lens);
  for (size_t k = 0; k < gold.count; k++) {
    assert_int_equal(pred.sentences[k].num_words, gold.sentences[k].num_words);
    for (size_t w = 0; w < gold.sentences[k].num_words; w++) {
      assert_string_equal(pred.sentences[k].words[w], gold.sentences[k].words[w]);
      assert_non_null(pred.sentences[k].tags[w]);
    }
    g[k] = (const char *const *)gold.sentences[k].tags, p[k] = (const char *const *)pred.sentences[k].tags;
    lens[k] = gold.sentences[k].num_words;
  }
  assert_int_equal(est_ner_evaluate(r, g, p, lens, gold.count), EST_OK);
  free(g), free(p), free(lens);
  est_ner_data_free(&gold), est_ner_data_free(&pred);
}

static void test_train_eval_predict(void **state) {
  (void)state;
  char out[512];
  snprintf(out, sizeof out, "%s/out", test_tmpdir);
  char *log = test_run_ok(EST_BIN " run_ner --data_dir=" CONLL " --vocab_file=" UNCASED " --bert_config_file=" SMALL_CONFIG
                          " --output_dir=%s --do_train --do_eval --do_predict --max_seq_length=16"
                          " --train_batch_size=8 --learning_rate=1e-3 --num_train_epochs=2 --num_threads=2",
                          out);
  /* 8 dev sentences, 3 of them long: more windows than sentences */
  assert_non_null(strstr(log, "***** Running evaluation *****"));
  const char *n = strstr(log, "Num examples = ");
  assert_non_null(n);
  assert_non_null(strstr(log, "(8 sentences)"));
  free(log);
  char *text = test_read_in(out, "eval_results.txt");
  /* every key, sorted: per type (LOC, ORG, PER) then the micro ones */
  const char *keys[] = {"eval_LOC_f1", "eval_LOC_number", "eval_LOC_precision", "eval_LOC_recall", "eval_ORG_f1",
                        "eval_ORG_number", "eval_ORG_precision", "eval_ORG_recall", "eval_PER_f1", "eval_PER_number",
                        "eval_PER_precision", "eval_PER_recall", "eval_accuracy", "eval_f1", "eval_loss",
                        "eval_precision", "eval_recall", "global_step", "loss"};
  const char *p = text;
  for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
    if (strncmp(p, keys[i], strlen(keys[i])) || strncmp(p + strlen(keys[i]), " = ", 3))
      fail_msg("eval_results.txt line %zu: want %s:\n%s", i + 1, keys[i], text);
    p = strchr(p, '\n') + 1;
  }
  assert_int_equal(*p, 0);
  assert_true(eval_value(text, "eval_LOC_number") == 13 && eval_value(text, "eval_PER_number") == 13 &&
              eval_value(text, "eval_ORG_number") == 6); /* dev.txt's entities */
  est_ner_report r;
  check_predictions(out, CONLL, &r);
  /* the same checkpoint, the same words: the file's seqeval is eval_results.txt's (as str
   * of a float32 there) */
  const double tol = 1e-6;
  assert_true(fabs(eval_value(text, "eval_f1") - r.f1) < tol);
  assert_true(fabs(eval_value(text, "eval_precision") - r.precision) < tol);
  assert_true(fabs(eval_value(text, "eval_recall") - r.recall) < tol);
  assert_true(fabs(eval_value(text, "eval_accuracy") - r.accuracy) < tol);
  for (size_t i = 0; i < r.num_types; i++) {
    char key[128];
    snprintf(key, sizeof key, "eval_%s_f1", r.types[i].type);
    assert_true(fabs(eval_value(text, key) - r.types[i].f1) < tol);
  }
  est_ner_report_free(&r);
  free(text);

  /* --do_export --export_format=hf alone: BertForTokenClassification, train.txt's labels as
   * id2label in order ("O" first), no pooler */
  char hf[600];
  snprintf(hf, sizeof hf, "%s/hf", test_tmpdir);
  free(test_run_ok(EST_BIN " run_ner --data_dir=" CONLL " --vocab_file=" UNCASED " --bert_config_file=" SMALL_CONFIG
                   " --output_dir=%s --do_export --export_format=hf --export_dir=%s", out, hf));
  char *config = test_read_in(hf, "config.json");
  assert_non_null(strstr(config, "\"BertForTokenClassification\""));
  assert_non_null(strstr(config, "\"id2label\""));
  const char *order[] = {"\"0\": \"O\"", "\"1\": \"B-LOC\"", "\"3\": \"B-PER\"", "\"6\": \"I-PER\""};
  for (size_t i = 0; i < 4; i++)
    if (!strstr(config, order[i])) fail_msg("config.json lacks %s:\n%s", order[i], config);
  free(config);
  char st_path[1024];
  snprintf(st_path, sizeof st_path, "%s/model.safetensors", hf);
  est_safetensors *sf;
  assert_int_equal(est_safetensors_open(&sf, st_path), EST_OK);
  assert_true(est_safetensors_has(sf, "classifier.weight"));
  assert_true(!est_safetensors_has(sf, "bert.pooler.dense.weight"));
  est_safetensors_close(sf);
  /* and back in: the directory as --init_checkpoint (its config.json, its vocab.txt) evaluates
   * to the same numbers; --init_checkpoint_partial because BertForTokenClassification has no
   * pooler, which the head never reads */
  char out2[600];
  snprintf(out2, sizeof out2, "%s/from_hf", test_tmpdir);
  free(test_run_ok(EST_BIN " run_ner --data_dir=" CONLL " --init_checkpoint=%s --init_checkpoint_partial"
                   " --bert_config_file=%s/config.json --output_dir=%s --do_eval --max_seq_length=16 --num_threads=2",
                   hf, hf, out2));
  char *again = test_read_in(out2, "eval_results.txt");
  const char *same[] = {"eval_f1", "eval_precision", "eval_recall", "eval_accuracy", "eval_PER_f1"};
  text = test_read_in(out, "eval_results.txt");
  for (size_t i = 0; i < sizeof same / sizeof *same; i++)
    if (eval_value(again, same[i]) != eval_value(text, same[i])) fail_msg("%s differs after the HF round trip", same[i]);
  free(again), free(text);
  /* id2label in: the same directory whose config.json swaps B-LOC (1) and B-PER (3) reads its
   * classifier rows by those names, so dev's LOC entities come out as PER */
  char path[1024];
  snprintf(path, sizeof path, "%s/config.json", hf);
  uint8_t *bytes;
  size_t nbytes;
  assert_int_equal(est_read_file(path, &bytes, &nbytes), EST_OK);
  config = (char *)bytes;
  char *a = strstr(config, "\"1\": \"B-LOC\""), *b = strstr(config, "\"3\": \"B-PER\"");
  assert_non_null(a), assert_non_null(b);
  memcpy(a + 6, "B-PER", 5), memcpy(b + 6, "B-LOC", 5);
  test_write_bytes(path, config, strlen(config));
  free(config);
  snprintf(out2, sizeof out2, "%s/from_hf_swapped", test_tmpdir);
  log = test_run_ok(EST_BIN " run_ner --data_dir=" CONLL " --init_checkpoint=%s --init_checkpoint_partial"
                    " --bert_config_file=%s/config.json --output_dir=%s --do_eval --max_seq_length=16 --num_threads=2",
                    hf, hf, out2);
  assert_non_null(strstr(log, "Labels in the order of"));
  free(log);
  again = test_read_in(out2, "eval_results.txt");
  assert_true(eval_value(again, "eval_LOC_recall") == 0.0 && eval_value(again, "eval_f1") < 1.0);
  free(again);
  /* the trained order is kept in output_dir */
  text = test_read_in(out, "label_list.txt");
  assert_string_equal(text, "O\nB-LOC\nB-ORG\nB-PER\nI-LOC\nI-ORG\nI-PER\n");
  free(text);
  /* an est servable: the token classifier head with train.txt's labels, which est predict
   * answers with entities (a JSON list a line; test_token_classifier_serving checks them
   * against transformers' pipeline) */
  free(test_run_ok(EST_BIN " run_ner --data_dir=" CONLL " --vocab_file=" UNCASED " --bert_config_file=" SMALL_CONFIG
                   " --output_dir=%s --do_export --max_seq_length=16 --export_dir=%s/export", out, test_tmpdir));
  char export_dir[700];
  snprintf(export_dir, sizeof export_dir, "%s/export", test_tmpdir);
  char *json = NULL;
  assert_int_equal(test_run(&json, 0, "ls %s/*/est_model.json | head -1 | xargs cat", export_dir), 0);
  assert_non_null(strstr(json, "\"head\": \"token_classifier\""));
  assert_non_null(strstr(json, "\"aggregation_strategy\": \"simple\""));
  assert_non_null(strstr(json, "\"O\",\n    \"B-LOC\""));
  free(json);
  snprintf(path, sizeof path, "%s/lines.txt", test_tmpdir);
  const char lines[] = "Mary Smith met Reuters in Berlin .\n{\"text_a\": \"x\"}\n";
  test_write_bytes(path, lines, strlen(lines));
  char *predicted = NULL;
  assert_int_equal(test_run(&predicted, 0, EST_BIN " predict --export_dir=%s --input_file=%s 2>/dev/null", export_dir,
                            path), 0);
  /* two lines, each a JSON list (the second line's text is the JSON itself under tsv) */
  const char *second = strchr(predicted, '\n');
  assert_non_null(second);
  assert_true(predicted[0] == '[' && second[-1] == ']' && second[1] == '[');
  free(predicted);
}

/* JSON lines files (named .txt, found by their content), --label_all_tokens, predict only
 * after training in the same output_dir. */
static void test_jsonl_label_all_tokens(void **state) {
  (void)state;
  char data[512], out[512], path[1024];
  snprintf(data, sizeof data, "%s/jsonl", test_tmpdir);
  snprintf(out, sizeof out, "%s/out_jsonl", test_tmpdir);
  assert_int_equal(est_mkdirs(data), EST_OK);
  const char *lines = "{\"tokens\": [\"Peter\", \"Blackburn\", \"visited\", \"Brussels\"], "
                      "\"tags\": [\"B-PER\", \"I-PER\", \"O\", \"B-LOC\"]}\n"
                      "{\"tokens\": [\"the\", \"report\", \".\"], \"tags\": [\"O\", \"O\", \"O\"]}\n";
  const char *names[] = {"train.txt", "dev.txt", "test.txt"};
  for (int i = 0; i < 3; i++) {
    est_path_join(path, sizeof path, data, names[i]);
    test_write_bytes(path, lines, strlen(lines));
  }
  free(test_run_ok(EST_BIN " run_ner --data_dir=%s --vocab_file=" UNCASED " --bert_config_file=" SMALL_CONFIG
                   " --output_dir=%s --do_train --label_all_tokens --train_batch_size=2 --num_train_epochs=1"
                   " --num_threads=2", data, out));
  free(test_run_ok(EST_BIN " run_ner --data_dir=%s --vocab_file=" UNCASED " --bert_config_file=" SMALL_CONFIG
                   " --output_dir=%s --do_predict --num_threads=2", data, out));
  est_ner_report r;
  check_predictions(out, data, &r);
  est_ner_report_free(&r);
  char *text = test_read_in(out, "test_predictions.txt");
  assert_true(!strncmp(text, "Peter ", 6));
  assert_int_equal(test_count_lines_with(text, "Brussels ", NULL), 1);
  free(text);
}

static void expect_exit2(const char *flags, const char *message) {
  char *log = NULL;
  int rc = test_run(&log, 1, EST_BIN " run_ner --vocab_file=" UNCASED " --bert_config_file=" SMALL_CONFIG
                    " --output_dir=%s/bad %s", test_tmpdir, flags);
  if (rc == 0 || !strstr(log, message)) fail_msg("flags %s: exit %d, want '%s' in:\n%s", flags, rc, message, log);
  free(log);
}

static void test_errors_name_the_fault(void **state) {
  (void)state;
  expect_exit2("--do_train", "--data_dir must be specified");
  expect_exit2("--do_train --data_dir=" CONLL " --max_seq_length=2", "--max_seq_length=2");
  expect_exit2("--do_eval --data_dir=" EST_TEST_DATA "/ner", "dev.txt");
  expect_exit2("--data_dir=" CONLL, "At least one of `do_train`");
  /* a bad line of a JSON lines file: the file and the line */
  char data[512], path[1024];
  snprintf(data, sizeof data, "%s/badjson", test_tmpdir);
  assert_int_equal(est_mkdirs(data), EST_OK);
  const char *bad = "{\"tokens\": [\"a\"], \"tags\": [\"O\"]}\n{\"tokens\": [\"a\", \"b\"], \"tags\": [\"O\"]}\n";
  est_path_join(path, sizeof path, data, "train.txt");
  test_write_bytes(path, bad, strlen(bad));
  char flags[1200];
  snprintf(flags, sizeof flags, "--do_train --data_dir=%s", data);
  expect_exit2(flags, "train.txt:2: 2 tokens but 1 tags");
}

/* Optional: the real CoNLL-2003 English files (eng.train, eng.testa, eng.testb), read from
 * EST_NER_CONLL2003=DIR (e.g. ../shared/data/ner): read whole, labels and sentence counts. */
static void test_conll2003_if_given(void **state) {
  (void)state;
  const char *dir = getenv("EST_NER_CONLL2003");
  if (!dir || !*dir) skip();
  char path[1024];
  snprintf(path, sizeof path, "%s/eng.train", dir);
  est_ner_data d;
  assert_int_equal(est_ner_read_file(&d, path), EST_OK);
  char **labels;
  size_t n;
  assert_int_equal(est_ner_labels_from(&d, &labels, &n), EST_OK);
  assert_int_equal(d.count, 14041); /* ../shared/data/ner/README.md's count */
  assert_string_equal(labels[0], "O");
  printf("eng.train: %zu sentences, %zu labels\n", d.count, n);
  est_ner_labels_free(labels, n);
  est_ner_data_free(&d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_train_eval_predict),
    cmocka_unit_test(test_jsonl_label_all_tokens),
    cmocka_unit_test(test_errors_name_the_fault),
    cmocka_unit_test(test_conll2003_if_given),
  };
  return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
