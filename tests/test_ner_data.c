/* Token classification data (est/ner.h, src/ner/): CoNLL and JSON lines files read, bad
 * lines named, the label list, sub-token features (first sub-token labelled, the rest -100
 * or, with label_all_tokens, labelled with B- turned into I-), windows of whole words for
 * long sentences merged back one tag a word; and seqeval's default-mode metrics on hand-made
 * sequences whose values follow from seqeval 1.2.2's rules (worked out beside each case). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "est/ner.h"

#define UNCASED EST_TEST_DATA "/vocab_uncased.txt"

static void expect_sentence(const est_ner_sentence *s, const char *words, const char *tags) {
  char buf[512] = "", tbuf[512] = "";
  for (size_t i = 0; i < s->num_words; i++) {
    strcat(buf, i ? " " : ""), strcat(buf, s->words[i]);
    strcat(tbuf, i ? " " : ""), strcat(tbuf, s->tags[i] ? s->tags[i] : "-");
  }
  assert_string_equal(buf, words);
  assert_string_equal(tbuf, tags);
}

static void test_conll_and_jsonl(void **state) {
  (void)state;
  est_ner_data d;
  /* -DOCSTART- lines skipped, any number of columns with the tag last, CRLF, runs of blank lines */
  assert_int_equal(est_ner_read_file(&d, EST_TEST_DATA "/ner/train.txt"), EST_OK);
  assert_int_equal(d.count, 3);
  expect_sentence(&d.sentences[0], "EU rejects German call .", "B-ORG O B-MISC O O");
  expect_sentence(&d.sentences[1], "Peter Blackburn", "B-PER I-PER");
  expect_sentence(&d.sentences[2], "BRUSSELS 1996-08-22", "B-LOC O");
  char **labels;
  size_t n;
  assert_int_equal(est_ner_labels_from(&d, &labels, &n), EST_OK);
  const char *expected[] = {"O", "B-LOC", "B-MISC", "B-ORG", "B-PER", "I-PER"}; /* "O" first, then sorted */
  assert_int_equal(n, 6);
  for (size_t i = 0; i < n; i++) assert_string_equal(labels[i], expected[i]);
  assert_int_equal(est_ner_label_index((const char *const *)labels, n, "I-PER"), 5);
  assert_int_equal(est_ner_label_index((const char *const *)labels, n, "I-LOC"), -1);
  est_ner_labels_free(labels, n);
  est_ner_data_free(&d);

  /* JSON lines, "ner_tags" for "tags", blank lines skipped */
  assert_int_equal(est_ner_read_file(&d, EST_TEST_DATA "/ner/train.jsonl"), EST_OK);
  assert_int_equal(d.count, 2);
  expect_sentence(&d.sentences[0], "EU rejects German call", "B-ORG O B-MISC O");
  expect_sentence(&d.sentences[1], "Peter Blackburn", "B-PER I-PER");
  est_ner_data_free(&d);

  /* a token without a tag column: an unlabelled word */
  const char one[] = "Hello\nworld O\n";
  assert_int_equal(est_ner_read_buffer(&d, one, strlen(one), "x"), EST_OK);
  expect_sentence(&d.sentences[0], "Hello world", "- O");
  est_ner_data_free(&d);
  assert_int_equal(est_ner_read_buffer(&d, "", 0, "empty"), EST_OK);
  assert_int_equal(d.count, 0);
  assert_int_not_equal(est_ner_labels_from(&d, &labels, &n), EST_OK);
}

static void test_bad_lines_are_named(void **state) {
  (void)state;
  est_ner_data d;
  const char *bad[][2] = {
    {"{\"tokens\": [\"a\"], \"tags\": [\"O\"]}\n{\"tokens\": [\"a\", \"b\"], \"tags\": [\"O\"]}\n", "f.jsonl:2: 2 tokens but 1 tags"},
    {"{\"tokens\": [\"a\"]}\n{\"tokens\": \"a b\"}\n", "f.jsonl:2: expected {\"tokens\""},
    {"{\"tokens\": [\"a\"]}\n\n{oops\n", "f.jsonl:3: not JSON"},
    {"{\"tokens\": [1], \"tags\": [\"O\"]}\n", "f.jsonl:1: token 0: expected strings"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    assert_int_not_equal(est_ner_read_buffer(&d, bad[i][0], strlen(bad[i][0]), "f.jsonl"), EST_OK);
    if (!strstr(est_error_message(), bad[i][1])) fail_msg("case %zu: %s", i, est_error_message());
    assert_int_equal(d.count, 0);
  }
  assert_int_not_equal(est_ner_read_buffer(&d, "a O\0", 4, "nul.txt"), EST_OK);
  assert_non_null(strstr(est_error_message(), "nul.txt"));
  assert_int_not_equal(est_ner_read_file(&d, EST_TEST_DATA "/ner/no_such_file.txt"), EST_OK);
}

/* The tokenizer's sub-token count of a word, to place the expected labels. */
static size_t pieces(est_tokenizer *tok, const char *word) {
  const int32_t *ids;
  size_t n;
  assert_int_equal(est_tokenizer_encode(tok, word, strlen(word), &ids, &n), EST_OK);
  return n ? n : 1;
}

static void test_first_sub_token_labelled(void **state) {
  (void)state;
  est_tokenizer *tok;
  assert_int_equal(est_tokenizer_open(&tok, UNCASED, true), EST_OK);
  const char text[] = "Johanson B-PER\nJohanson I-PER\nvisited O\nKrakow B-LOC\n";
  est_ner_data d;
  assert_int_equal(est_ner_read_buffer(&d, text, strlen(text), "t"), EST_OK);
  const char *labels[] = {"O", "B-LOC", "B-PER", "I-PER"};
  for (int all = 0; all < 2; all++) {
    est_ner_features f;
    const est_ner_feature_options o = {.max_seq_length = 24, .label_all_tokens = all};
    assert_int_equal(est_ner_features_build(&f, &d, labels, 4, tok, &o), EST_OK);
    assert_int_equal(f.count, 1);
    const est_ner_feature *x = &f.items[0];
    assert_int_equal(x->input_ids[0], 101); /* [CLS] */
    size_t pos = 1;
    const int word_labels[] = {2, 3, 0, 1};
    size_t n0 = pieces(tok, "Johanson");
    assert_true(n0 > 1); /* the case under test: a word of several sub-tokens */
    for (int w = 0; w < 4; w++) {
      const size_t n = pieces(tok, d.sentences[0].words[w]);
      for (size_t q = 0; q < n; q++, pos++) {
        int expect = q == 0 ? word_labels[w] : EST_NER_IGNORE;
        if (q > 0 && all) expect = word_labels[w] == 2 ? 3 : word_labels[w]; /* B-PER -> I-PER */
        assert_int_equal(x->label_ids[pos], expect);
        assert_int_equal(x->word_index[pos], q == 0 ? w : -1);
        assert_int_equal(x->input_mask[pos], 1);
      }
    }
    assert_int_equal(x->input_ids[pos], 102); /* [SEP] */
    assert_int_equal(x->label_ids[0], EST_NER_IGNORE);
    assert_int_equal(x->label_ids[pos], EST_NER_IGNORE);
    assert_int_equal(x->input_mask[pos + 1], 0);
    assert_int_equal(x->input_ids[pos + 1], 0);
    est_ner_features_free(&f);
  }
  est_ner_data_free(&d);
  est_tokenizer_free(tok);
}

/* A sentence longer than a window: windows of whole words, overlapping by the stride, each
 * word owned (labelled, predicted) by exactly one window, merged back word by word. */
static void test_windows_merge_back(void **state) {
  (void)state;
  est_tokenizer *tok;
  assert_int_equal(est_tokenizer_open(&tok, UNCASED, true), EST_OK);
  char text[4096] = "";
  const char *words[] = {"the", "Johanson", "river", "flows", "through", "Krakow", "and", "unbelievably",
                         "on", "to", "the", "sea"};
  enum { W = 12 };
  for (int round = 0; round < 2; round++)
    for (int w = 0; w < W; w++) {
      char line[64];
      snprintf(line, sizeof line, "%s %s\n", words[w], w % 3 ? "O" : "B-LOC");
      strcat(text, line);
      if (w == W - 1) strcat(text, "\n");
    }
  est_ner_data d;
  assert_int_equal(est_ner_read_buffer(&d, text, strlen(text), "t"), EST_OK);
  assert_int_equal(d.count, 2);
  const char *labels[] = {"O", "B-LOC"};
  for (int stride = 0; stride <= 3; stride += 3) {
    est_ner_features f;
    const est_ner_feature_options o = {.max_seq_length = 8, .doc_stride = stride};
    assert_int_equal(est_ner_features_build(&f, &d, labels, 2, tok, &o), EST_OK);
    assert_true(f.count > 4);
    int owned[2][W] = {{0}};
    float *probs = calloc(f.count * 8 * 2, sizeof(float));
    const float **rows = calloc(f.count, sizeof *rows);
    for (size_t j = 0; j < f.count; j++) {
      const est_ner_feature *x = &f.items[j];
      rows[j] = probs + j * 16;
      int real = 0;
      for (int p = 0; p < 8; p++) real += x->input_mask[p];
      assert_true(real <= 8);
      for (int p = 0; p < 8; p++) {
        if (x->word_index[p] < 0) continue;
        const int w = x->word_index[p];
        owned[x->sentence][w]++;
        assert_int_equal(x->label_ids[p], w % 3 ? 0 : 1);
        probs[j * 16 + p * 2 + (w % 2)] = 1.0f; /* "predict" the word's parity */
      }
    }
    for (int s = 0; s < 2; s++)
      for (int w = 0; w < W; w++) assert_int_equal(owned[s][w], 1);
    int32_t tags0[W], tags1[W];
    int32_t *const tags[2] = {tags0, tags1};
    assert_int_equal(est_ner_merge_predictions(tags, &d, &f, rows, 2), EST_OK);
    for (int s = 0; s < 2; s++)
      for (int w = 0; w < W; w++) assert_int_equal(tags[s][w], w % 2);
    free(probs), free(rows);
    est_ner_features_free(&f);
  }
  est_ner_data_free(&d);
  est_tokenizer_free(tok);
}

/* ---- seqeval ---------------------------------------------------------------------------- */

static void expect_entities(const char *const *seq, size_t n, const char *expected) {
  est_ner_entity *e;
  size_t ne;
  const char *const *sents[1] = {seq};
  assert_int_equal(est_ner_get_entities(&e, &ne, sents, &n, 1), EST_OK);
  char buf[512] = "";
  for (size_t i = 0; i < ne; i++)
    snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s(%s,%zu,%zu)", i ? " " : "", e[i].type, e[i].begin,
             e[i].end);
  est_ner_entities_free(e, ne);
  assert_string_equal(buf, expected);
}

static void test_seqeval_get_entities(void **state) {
  (void)state;
  /* seqeval's docstring */
  const char *a[] = {"B-PER", "I-PER", "O", "B-LOC"};
  expect_entities(a, 4, "(PER,0,1) (LOC,3,3)");
  /* IOB1: I after O starts; a type change ends and starts; B after I starts */
  const char *b[] = {"I-PER", "I-PER", "I-LOC", "O", "I-PER", "B-PER"};
  expect_entities(b, 6, "(PER,0,1) (LOC,2,2) (PER,4,4) (PER,5,5)");
  /* IOBES */
  const char *c[] = {"S-PER", "B-LOC", "E-LOC", "B-ORG", "I-ORG", "E-ORG", "S-X"};
  expect_entities(c, 7, "(PER,0,0) (LOC,1,2) (ORG,3,5) (X,6,6)");
  /* BILOU in the default mode: L and U chunk only by the type rules, so two U-PER in a row
   * are one entity (seqeval's strict mode would say two) */
  const char *d[] = {"B-PER", "L-PER", "U-LOC", "O", "U-PER", "U-PER"};
  expect_entities(d, 6, "(PER,0,1) (LOC,2,2) (PER,4,5)");
  /* types: after the first '-' past the chunk tag; none: "_" */
  const char *e[] = {"B-PER-X", "I-PER-X", "B", "I", "BLOC"};
  expect_entities(e, 5, "(PER-X,0,1) (_,2,3) (LOC,4,4)");
  /* sentences are joined with an "O" between them: no entity crosses */
  const char *s1[] = {"B-PER"}, *s2[] = {"I-PER"};
  const char *const *sents[2] = {s1, s2};
  const size_t lens[2] = {1, 1};
  est_ner_entity *ent;
  size_t ne;
  assert_int_equal(est_ner_get_entities(&ent, &ne, sents, lens, 2), EST_OK);
  assert_int_equal(ne, 2);
  assert_int_equal(ent[0].begin, 0), assert_int_equal(ent[1].begin, 2);
  est_ner_entities_free(ent, ne);
}

static void test_seqeval_scores(void **state) {
  (void)state;
  /* seqeval's README example: MISC predicted one word early (wrong), PER right.
   * precision = recall = f1 = 1/2; accuracy 8/10; MISC 0/0/0, PER 1/1/1, support 1 each. */
  const char *t1[] = {"O", "O", "O", "B-MISC", "I-MISC", "I-MISC", "O"}, *t2[] = {"B-PER", "I-PER", "O"};
  const char *p1[] = {"O", "O", "B-MISC", "I-MISC", "I-MISC", "I-MISC", "O"}, *p2[] = {"B-PER", "I-PER", "O"};
  const char *const *gold[2] = {t1, t2}, *const *pred[2] = {p1, p2};
  const size_t lens[2] = {7, 3};
  est_ner_report r;
  assert_int_equal(est_ner_evaluate(&r, gold, pred, lens, 2), EST_OK);
  assert_true(r.precision == 0.5 && r.recall == 0.5 && r.f1 == 0.5 && r.accuracy == 0.8);
  assert_int_equal(r.num_types, 2);
  assert_string_equal(r.types[0].type, "MISC");
  assert_true(r.types[0].precision == 0 && r.types[0].recall == 0 && r.types[0].f1 == 0);
  assert_int_equal(r.types[0].support, 1);
  assert_string_equal(r.types[1].type, "PER");
  assert_true(r.types[1].f1 == 1.0);
  est_ner_report_free(&r);

  /* gold: PER(0,1) LOC(3,3) ORG(5,5) | LOC(8,8)  (an "O" joins at 7)
   * pred: PER(0,1) LOC(3,4)          | LOC(8,8) PER(9,9) ORG(10,10)
   * correct: PER(0,1), LOC(8,8) -> tp 2, pred 5, true 4: P = 0.4, R = 0.5, F = 2*.2/.9;
   * per type: LOC 1/2, 1/2; ORG 0/1, 0/1; PER 1/2, 1/1. accuracy: 6 of 10 tokens equal */
  const char *g1[] = {"B-PER", "I-PER", "O", "B-LOC", "O", "B-ORG", "O"}, *g2[] = {"B-LOC", "O", "O"};
  const char *q1[] = {"B-PER", "I-PER", "O", "B-LOC", "I-LOC", "O", "O"}, *q2[] = {"B-LOC", "B-PER", "S-ORG"};
  const char *const *gold2[2] = {g1, g2}, *const *pred2[2] = {q1, q2};
  assert_int_equal(est_ner_evaluate(&r, gold2, pred2, lens, 2), EST_OK);
  assert_int_equal(r.num_true, 4), assert_int_equal(r.num_pred, 5), assert_int_equal(r.num_correct, 2);
  assert_true(fabs(r.precision - 0.4) < 1e-15 && fabs(r.recall - 0.5) < 1e-15);
  assert_true(fabs(r.f1 - 0.4 / 0.9) < 1e-15);
  assert_true(fabs(r.accuracy - 0.6) < 1e-15);
  assert_int_equal(r.num_types, 3);
  assert_string_equal(r.types[0].type, "LOC");
  assert_true(r.types[0].precision == 0.5 && r.types[0].recall == 0.5);
  assert_string_equal(r.types[1].type, "ORG");
  assert_true(r.types[1].precision == 0 && r.types[1].recall == 0 && r.types[1].support == 1);
  assert_string_equal(r.types[2].type, "PER");
  assert_true(r.types[2].precision == 0.5 && r.types[2].recall == 1.0);
  est_ner_report_free(&r);

  /* nothing predicted, nothing true: zeros (zero_division "warn" acts as 0) */
  const char *o[] = {"O", "O"};
  const char *const *oo[1] = {o};
  const size_t two = 2;
  assert_int_equal(est_ner_evaluate(&r, oo, oo, &two, 1), EST_OK);
  assert_true(r.precision == 0 && r.recall == 0 && r.f1 == 0 && r.accuracy == 1.0 && r.num_types == 0);
  est_ner_report_free(&r);
}

/* Split s at sep (in place) into at most max parts. */
static size_t split_at(char *s, const char *sep, char **parts, size_t max) {
  size_t n = 0;
  const size_t k = strlen(sep);
  while (n < max) {
    parts[n++] = s;
    char *x = strstr(s, sep);
    if (!x) break;
    *x = 0;
    s = x + k;
  }
  return n;
}

/* tests/data/ner/seqeval_golden.txt (tests/reference/ner_seqeval_golden.py, seqeval 1.2.2):
 * every score equal to the last bit. */
static void test_seqeval_golden(void **state) {
  (void)state;
  FILE *f = fopen(EST_TEST_DATA "/ner/seqeval_golden.txt", "r");
  assert_non_null(f);
  static char gold_line[8192], pred_line[8192], line[8192];
  int cases = 0;
  while (fgets(gold_line, sizeof gold_line, f)) {
    assert_non_null(fgets(pred_line, sizeof pred_line, f));
    gold_line[strcspn(gold_line, "\n")] = 0, pred_line[strcspn(pred_line, "\n")] = 0;
    assert_true(!strncmp(gold_line, "gold\t", 5) && !strncmp(pred_line, "pred\t", 5));
    char *gs[64], *ps[64];
    const size_t ns = split_at(gold_line + 5, " | ", gs, 64);
    assert_int_equal(split_at(pred_line + 5, " | ", ps, 64), ns);
    const char **gold[64], **pred[64];
    size_t lens[64];
    for (size_t i = 0; i < ns; i++) {
      gold[i] = calloc(64, sizeof(char *)), pred[i] = calloc(64, sizeof(char *));
      lens[i] = split_at(gs[i], " ", (char **)gold[i], 64);
      assert_int_equal(split_at(ps[i], " ", (char **)pred[i], 64), lens[i]);
    }
    est_ner_report r;
    assert_int_equal(est_ner_evaluate(&r, (const char *const *const *)gold, (const char *const *const *)pred, lens, ns),
                     EST_OK);
    double p, rc, f1, acc;
    assert_non_null(fgets(line, sizeof line, f));
    assert_int_equal(sscanf(line, "micro\t%lf %lf %lf %lf", &p, &rc, &f1, &acc), 4);
    if (r.precision != p || r.recall != rc || r.f1 != f1 || r.accuracy != acc)
      fail_msg("case %d: est %.17g %.17g %.17g %.17g, seqeval %.17g %.17g %.17g %.17g", cases, r.precision, r.recall,
               r.f1, r.accuracy, p, rc, f1, acc);
    size_t t = 0;
    while (fgets(line, sizeof line, f) && strncmp(line, "end", 3)) {
      char name[64];
      long long support;
      assert_int_equal(sscanf(line, "type\t%63s\t%lf %lf %lf %lld", name, &p, &rc, &f1, &support), 5);
      assert_true(t < r.num_types);
      assert_string_equal(r.types[t].type, name);
      if (r.types[t].precision != p || r.types[t].recall != rc || r.types[t].f1 != f1 || r.types[t].support != support)
        fail_msg("case %d type %s: est differs from seqeval", cases, name);
      t++;
    }
    assert_int_equal(t, r.num_types);
    est_ner_report_free(&r);
    for (size_t i = 0; i < ns; i++) free(gold[i]), free(pred[i]);
    cases++;
  }
  fclose(f);
  assert_int_equal(cases, 40);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_conll_and_jsonl),
    cmocka_unit_test(test_bad_lines_are_named),
    cmocka_unit_test(test_first_sub_token_labelled),
    cmocka_unit_test(test_windows_merge_back),
    cmocka_unit_test(test_seqeval_get_entities),
    cmocka_unit_test(test_seqeval_scores),
    cmocka_unit_test(test_seqeval_golden),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
