/* DataProcessors and _read_tsv: column choices, guids, header skipping and labels of every
 * task (docs/run_classifier.md §3) on excerpts of the real GLUE files (tests/data/glue_mini) and
 * on hand-written MNLI/XNLI files in GLUE's layout; malformed input is an error with file:line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <sys/stat.h>

#include "est/est.h"
#include "est/processors.h"
#include "test_util.h"

#define MINI EST_TEST_DATA "/glue_mini"

static void write_text(const char *dir, const char *name, const char *text) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  assert_int_equal(est_write_file_atomic(path, text, strlen(text)), EST_OK);
}

static est_examples load(const char *task, const est_tsv_task_config *cfg, const char *dir, est_split split) {
  est_processor *p;
  assert_int_equal(est_processor_create(&p, task, cfg), EST_OK);
  est_examples ex;
  est_examples_init(&ex);
  est_status st = est_processor_get_examples(p, dir, split, &ex);
  if (st != EST_OK) fprintf(stderr, "%s\n", est_error_message());
  assert_int_equal(st, EST_OK);
  est_processor_free(p);   /* examples must outlive their processor */
  return ex;
}

static void test_mrpc(void **state) {
  (void)state;
  est_examples ex = load("MRPC", NULL, MINI "/MRPC", EST_SPLIT_DEV);
  assert_int_equal(ex.count, 408);
  assert_string_equal(ex.items[0].guid, "dev-1");
  assert_string_equal(ex.items[0].label, "1");
  assert_string_equal(ex.items[0].text_a,
                      "He said the foodservice pie business doesn 't fit the company 's long-term growth strategy .");
  /* quotechar=None: the leading '"' is text. */
  assert_string_equal(ex.items[0].text_b, "\" The foodservice pie business does not fit our long-term growth strategy .");
  assert_string_equal(ex.items[407].guid, "dev-408");
  assert_int_equal(ex.items[407].line, 409);
  assert_non_null(strstr(ex.items[407].source, "MRPC/dev.tsv"));
  est_examples_free(&ex);

  ex = load("mrpc", NULL, MINI "/MRPC", EST_SPLIT_TRAIN);   /* BOM sits in the skipped header */
  assert_int_equal(ex.count, 10);
  assert_string_equal(ex.items[0].guid, "train-1");
  assert_string_equal(ex.items[0].text_a, "Amrozi accused his brother , whom he called \" the witness \" , of deliberately "
                                          "distorting his evidence .");
  est_examples_free(&ex);

  ex = load("mrpc", NULL, MINI "/MRPC", EST_SPLIT_TEST);
  assert_int_equal(ex.count, 10);
  assert_string_equal(ex.items[0].guid, "test-1");
  assert_string_equal(ex.items[0].label, "0");                /* test: dummy label */
  assert_string_equal(ex.items[0].text_b, "Current Chief Operating Officer Mike Butcher and Group Chief Financial "
                                          "Officer Alex Arena will report to So .");
  est_examples_free(&ex);

  est_processor *p;
  assert_int_equal(est_processor_create(&p, "MrPc", NULL), EST_OK);
  const char *const *labels;
  size_t n;
  assert_int_equal(est_processor_get_labels(p, NULL, &labels, &n), EST_OK);
  assert_int_equal(n, 2);
  assert_string_equal(labels[0], "0");
  assert_string_equal(labels[1], "1");
  assert_string_equal(est_processor_name(p), "mrpc");
  est_processor_free(p);
}

static void test_cola(void **state) {
  (void)state;
  est_examples ex = load("cola", NULL, MINI "/CoLA", EST_SPLIT_TRAIN);   /* no header */
  assert_int_equal(ex.count, 10);
  assert_string_equal(ex.items[0].guid, "train-0");
  assert_string_equal(ex.items[0].text_a, "Our friends won't buy this analysis, let alone the next one we propose.");
  assert_null(ex.items[0].text_b);
  assert_string_equal(ex.items[0].label, "1");
  assert_string_equal(ex.items[9].guid, "train-9");
  est_examples_free(&ex);
  ex = load("cola", NULL, MINI "/CoLA", EST_SPLIT_DEV);   /* last line has no newline */
  assert_int_equal(ex.count, 9);
  assert_string_equal(ex.items[8].text_a, "John talked to Bill about himself.");
  assert_string_equal(ex.items[8].guid, "dev-8");
  est_examples_free(&ex);
  ex = load("cola", NULL, MINI "/CoLA", EST_SPLIT_TEST);  /* header, text in column 1 */
  assert_int_equal(ex.count, 10);
  assert_string_equal(ex.items[0].guid, "test-1");
  assert_string_equal(ex.items[0].text_a, "Bill whistled past the house.");
  assert_string_equal(ex.items[0].label, "0");
  est_examples_free(&ex);
}

static void test_sst2(void **state) {
  (void)state;
  est_examples ex = load("SST-2", NULL, MINI "/SST-2", EST_SPLIT_TRAIN);
  assert_int_equal(ex.count, 10);
  assert_string_equal(ex.items[0].guid, "train-1");
  assert_string_equal(ex.items[0].text_a, "hide new secretions from the parental units ");   /* trailing space kept */
  assert_string_equal(ex.items[0].label, "0");
  est_examples_free(&ex);
  ex = load("sst2", NULL, MINI "/SST-2", EST_SPLIT_TEST);
  assert_int_equal(ex.count, 1);
  assert_non_null(strstr(ex.items[0].text_a, "cr\u00E8me br\u00FBl\u00E9e ."));
  assert_string_equal(ex.items[0].label, "0");
  est_examples_free(&ex);
}

/* GLUE MNLI layout: 12 columns in train (label last), 16 in dev (gold_label last), 10 in test. */
static const char MNLI_TRAIN[] =
    "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\t"
    "sentence2_parse\tsentence1\tsentence2\tlabel1\tgold_label\n"
    "0\t31193\t31193n\tgovernment\t(a)\t(b)\t(A)\t(B)\tConceptually cream skimming has two basic dimensions.\t"
    "Product and geography are what make cream skimming work.\tneutral\tneutral\n"
    "1\t101457\t101457e\ttelephone\t(a)\t(b)\t(A)\t(B)\tyou know during the season\tYou lose the things.\t"
    "entailment\tentailment\n";
static const char MNLI_DEV[] =
    "index\tpromptID\tpairID\tgenre\ts1b\ts2b\ts1p\ts2p\tsentence1\tsentence2\tlabel1\tlabel2\tlabel3\tlabel4\t"
    "label5\tgold_label\n"
    "7\t63735\t63735n\tslate\t(a)\t(b)\t(A)\t(B)\tThe new rights are nice enough\tEveryone really likes it.\t"
    "neutral\tentailment\tneutral\tneutral\tneutral\tneutral\n"
    "9\t91383\t91383c\tgovernment\t(a)\t(b)\t(A)\t(B)\tThis site includes a list\tThe Government Executive "
    "articles\tcontradiction\tcontradiction\tcontradiction\tcontradiction\tcontradiction\tcontradiction\n";
static const char MNLI_TEST[] =
    "index\tpromptID\tpairID\tgenre\ts1b\ts2b\ts1p\ts2p\tsentence1\tsentence2\n"
    "0\t31493\t31493\ttravel\t(a)\t(b)\t(A)\t(B)\tHierbas, ans seco\tThe drinks are herbal.\n";

static void test_mnli(void **state) {
  (void)state;
  char dir[256];
  test_make_tmpdir(dir, sizeof dir);
  write_text(dir, "train.tsv", MNLI_TRAIN);
  write_text(dir, "dev_matched.tsv", MNLI_DEV);
  write_text(dir, "test_matched.tsv", MNLI_TEST);
  write_text(dir, "dev_mismatched.tsv", MNLI_DEV);
  write_text(dir, "test_mismatched.tsv", MNLI_TEST);
  est_examples ex = load("mnli", NULL, dir, EST_SPLIT_TRAIN);
  assert_int_equal(ex.count, 2);
  assert_string_equal(ex.items[0].guid, "train-0");      /* guid from column 0, not the row */
  assert_string_equal(ex.items[0].text_a, "Conceptually cream skimming has two basic dimensions.");
  assert_string_equal(ex.items[0].text_b, "Product and geography are what make cream skimming work.");
  assert_string_equal(ex.items[1].label, "entailment");
  est_examples_free(&ex);
  ex = load("MNLI", NULL, dir, EST_SPLIT_DEV);
  assert_int_equal(ex.count, 2);
  assert_string_equal(ex.items[0].guid, "dev_matched-7");
  assert_string_equal(ex.items[0].label, "neutral");     /* the last column, gold_label */
  assert_string_equal(ex.items[1].guid, "dev_matched-9");
  assert_string_equal(ex.items[1].label, "contradiction");
  est_examples_free(&ex);
  ex = load("mnli", NULL, dir, EST_SPLIT_TEST);
  assert_int_equal(ex.count, 1);
  assert_string_equal(ex.items[0].guid, "test-0");
  assert_string_equal(ex.items[0].label, "contradiction");
  est_examples_free(&ex);
  ex = load("mnli-mm", NULL, dir, EST_SPLIT_DEV);
  assert_string_equal(ex.items[0].guid, "dev_mismatched-7");
  est_examples_free(&ex);
  ex = load("mnli-mm", NULL, dir, EST_SPLIT_TEST);
  assert_string_equal(ex.items[0].guid, "test-0");
  est_examples_free(&ex);
  test_remove_tree(dir);
}

static void test_xnli(void **state) {
  (void)state;
  char dir[256], sub[300];
  test_make_tmpdir(dir, sizeof dir);
  snprintf(sub, sizeof sub, "%s/multinli", dir);
  assert_int_equal(est_mkdirs(sub), EST_OK);
  write_text(dir, "multinli/multinli.train.zh.tsv",
             "premise\thypo\tlabel\n\u4ed6\u8bf4\t\u6211\u4eec\tcontradictory\n\u597d\t\u574f\tneutral\n");
  write_text(dir, "xnli.dev.tsv",
             "language\tgold_label\ts1b\ts2b\ts1p\ts2p\tpromptID\tpairID\n"   /* header: 8 cols is enough */
             "en\tneutral\t1\t2\t3\t4\tHe said\tShe said\n"
             "zh\tentailment\t1\t2\t3\t4\t\u4ed6\u8bf4\t\u5979\u8bf4\n"
             "de\tneutral\t1\t2\t3\t4\ter\tsie\n"
             "zh\tcontradiction\t1\t2\t3\t4\t\u662f\t\u4e0d\u662f\n");
  est_examples ex = load("xnli", NULL, dir, EST_SPLIT_TRAIN);
  assert_int_equal(ex.count, 2);
  assert_string_equal(ex.items[0].guid, "train-1");
  assert_string_equal(ex.items[0].label, "contradiction");   /* "contradictory" mapped */
  assert_string_equal(ex.items[0].text_a, "\u4ed6\u8bf4");
  assert_string_equal(ex.items[0].text_b, "\u6211\u4eec");
  est_examples_free(&ex);
  ex = load("xnli", NULL, dir, EST_SPLIT_DEV);
  assert_int_equal(ex.count, 2);                             /* only language zh */
  assert_string_equal(ex.items[0].guid, "dev-2");            /* guids keep the gaps */
  assert_string_equal(ex.items[1].guid, "dev-4");
  assert_string_equal(ex.items[1].label, "contradiction");
  assert_string_equal(ex.items[1].text_a, "\u662f");
  est_examples_free(&ex);
  est_processor *p;
  assert_int_equal(est_processor_create(&p, "xnli", NULL), EST_OK);
  est_examples_init(&ex);
  assert_int_equal(est_processor_get_examples(p, dir, EST_SPLIT_TEST, &ex), EST_ERR_UNIMPLEMENTED);
  est_processor_free(p);
  /* Another language through the config. */
  est_tsv_task_config cfg = est_tsv_task_config_default();
  cfg.language = "de";
  ex = load("xnli", &cfg, dir, EST_SPLIT_DEV);
  assert_int_equal(ex.count, 1);
  assert_string_equal(ex.items[0].text_a, "er");
  est_examples_free(&ex);
  test_remove_tree(dir);
}

static void test_generic_tsv(void **state) {
  (void)state;
  char dir[256];
  test_make_tmpdir(dir, sizeof dir);
  /* BOM, CRLF line ends, quotes, an empty text_b, labels in no particular order. */
  write_text(dir, "train.tsv", "\xEF\xBB\xBFid\tq\tanswer\tlabel\r\n"
                               "a1\tIs \"it\" ok?\tyes\tpos\r\n"
                               "a2\tno way\t\tneg\r\n"
                               "a3\tmaybe\tperhaps\tneutral\r\n");
  write_text(dir, "dev.tsv", "id\tq\tanswer\tlabel\nd1\tfine\tgood\tpos\n");
  write_text(dir, "test.tsv", "q\tanswer\nunknown\tthing");
  est_tsv_task_config cfg = est_tsv_task_config_default();
  cfg.text_a_column = 1;
  cfg.text_b_column = 2;
  cfg.label_column = 3;
  cfg.test_text_a_column = 0;
  cfg.test_text_b_column = 1;
  cfg.test_label_column = -1;
  est_processor *p;
  assert_int_equal(est_processor_create(&p, "tsv", &cfg), EST_OK);
  const char *const *labels;
  size_t n;
  assert_int_equal(est_processor_get_labels(p, dir, &labels, &n), EST_OK);
  assert_int_equal(n, 3);                      /* collected and sorted bytewise */
  assert_string_equal(labels[0], "neg");
  assert_string_equal(labels[1], "neutral");
  assert_string_equal(labels[2], "pos");
  est_examples ex;
  est_examples_init(&ex);
  assert_int_equal(est_processor_get_examples(p, dir, EST_SPLIT_TRAIN, &ex), EST_OK);
  assert_int_equal(ex.count, 3);
  assert_string_equal(ex.items[0].guid, "train-1");
  assert_string_equal(ex.items[0].text_a, "Is \"it\" ok?");
  assert_string_equal(ex.items[0].label, "pos");             /* no '\r' left */
  assert_string_equal(ex.items[1].text_b, "");
  assert_int_equal(est_processor_get_examples(p, dir, EST_SPLIT_TEST, &ex), EST_OK);
  assert_int_equal(ex.count, 4);
  assert_string_equal(ex.items[3].guid, "test-1");
  assert_string_equal(ex.items[3].text_a, "unknown");
  assert_string_equal(ex.items[3].text_b, "thing");
  assert_string_equal(ex.items[3].label, "neg");             /* first label as the dummy */
  est_processor_free(p);
  est_examples_free(&ex);

  /* An explicit label list keeps its order, and rejects other labels with file:line. */
  cfg.labels = "pos,neg";
  assert_int_equal(est_processor_create(&p, "tsv", &cfg), EST_OK);
  assert_int_equal(est_processor_get_labels(p, dir, &labels, &n), EST_OK);
  assert_int_equal(n, 2);
  assert_string_equal(labels[0], "pos");
  est_examples_init(&ex);
  assert_int_equal(est_processor_get_examples(p, dir, EST_SPLIT_TRAIN, &ex), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "train.tsv:4: label 'neutral' is not one of the task's labels (pos, neg)"));
  assert_int_equal(ex.count, 0);
  est_processor_free(p);
  est_examples_free(&ex);
  cfg.labels = "a,,b";
  assert_int_equal(est_processor_create(&p, "tsv", &cfg), EST_ERR_INVALID_ARGUMENT);
  test_remove_tree(dir);
}

static void expect_error(const char *task, const char *dir, est_split split, est_status code, const char *msg) {
  est_processor *p;
  assert_int_equal(est_processor_create(&p, task, NULL), EST_OK);
  est_examples ex;
  est_examples_init(&ex);
  assert_int_equal(est_processor_get_examples(p, dir, split, &ex), code);
  if (!strstr(est_error_message(), msg)) fprintf(stderr, "message: %s\n", est_error_message());
  assert_non_null(strstr(est_error_message(), msg));
  est_processor_free(p);
  est_examples_free(&ex);
}

static void test_bad_input(void **state) {
  (void)state;
  est_processor *p;
  assert_int_equal(est_processor_create(&p, "qqp", NULL), EST_ERR_NOT_FOUND);
  assert_non_null(strstr(est_error_message(), "Task not found: qqp"));
  char dir[256];
  test_make_tmpdir(dir, sizeof dir);
  write_text(dir, "train.tsv", "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t2\t3\ta\tb\n0\t2\t3\tonly four\n");
  expect_error("mrpc", dir, EST_SPLIT_TRAIN, EST_ERR_INVALID_ARGUMENT,
               "train.tsv:3: expected at least 5 tab-separated columns, found 4");
  write_text(dir, "train.tsv", "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t2\t3\ta\tb\n\n");
  expect_error("mrpc", dir, EST_SPLIT_TRAIN, EST_ERR_INVALID_ARGUMENT, "train.tsv:3: expected at least 5");
  write_text(dir, "train.tsv", "h\n2\t2\t3\ta\tb\n");
  expect_error("mrpc", dir, EST_SPLIT_TRAIN, EST_ERR_INVALID_ARGUMENT,
               "train.tsv:2: label '2' is not one of the task's labels (0, 1)");
  write_text(dir, "train.tsv", "h\n1\t2\t3\ta\xFF\tb\n");
  expect_error("mrpc", dir, EST_SPLIT_TRAIN, EST_ERR_INVALID_ARGUMENT, "train.tsv:2: invalid UTF-8");
  write_text(dir, "train.tsv", "h\n1\t2\t3\ta\rx\tb\n");
  expect_error("mrpc", dir, EST_SPLIT_TRAIN, EST_ERR_INVALID_ARGUMENT, "train.tsv:2: carriage return");
  expect_error("mrpc", dir, EST_SPLIT_DEV, EST_ERR_NOT_FOUND, "dev.tsv");
  /* Python csv's 131072-character field limit. */
  size_t big = 131073;
  char *text = malloc(big + 64);
  strcpy(text, "h\n1\t2\t3\t");
  size_t at = strlen(text);
  memset(text + at, 'x', big);
  strcpy(text + at + big, "\tb\n");
  write_text(dir, "train.tsv", text);
  expect_error("mrpc", dir, EST_SPLIT_TRAIN, EST_ERR_INVALID_ARGUMENT, "train.tsv:2: field 4 larger than field limit");
  text[at + big - 1] = '\t';                 /* 131072 characters is still fine */
  text[at + big] = 0;
  strcat(text, "b\n");
  write_text(dir, "train.tsv", text);
  free(text);
  est_examples ex = load("mrpc", NULL, dir, EST_SPLIT_TRAIN);
  assert_int_equal(ex.count, 1);
  assert_int_equal(strlen(ex.items[0].text_a), 131072);
  est_examples_free(&ex);
  test_remove_tree(dir);
}

/* Random files (tabs, newlines, CRs, NULs, bad UTF-8) give examples or a clean error that
 * names the file and a line; never a crash. */
static void test_random_files(void **state) {
  (void)state;
  char dir[256], path[512];
  test_make_tmpdir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/train.tsv", dir);
  static const char pool[] = {'a', 'b', '1', '0', '\t', '\t', '\n', '\r', '"', ' ', (char)0xC3, (char)0xA9,
                              (char)0xFF, 0};
  uint64_t x = 42;
  char text[600];
  int ok = 0, failed = 0;
  for (int iter = 0; iter < 300; iter++) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    size_t len = (size_t)(x >> 33) % sizeof text;
    for (size_t i = 0; i < len; i++) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      text[i] = pool[(x >> 33) % sizeof pool];
    }
    assert_int_equal(est_write_file_atomic(path, text, len), EST_OK);
    const char *tasks[] = {"mrpc", "cola", "sst-2", "mnli"};
    est_processor *p;
    assert_int_equal(est_processor_create(&p, tasks[iter % 4], NULL), EST_OK);
    est_examples ex;
    est_examples_init(&ex);
    est_status st = est_processor_get_examples(p, dir, EST_SPLIT_TRAIN, &ex);
    if (st == EST_OK) {
      ok++;
      for (size_t i = 0; i < ex.count; i++) assert_non_null(ex.items[i].text_a);
    } else {
      failed++;
      assert_int_equal(st, EST_ERR_INVALID_ARGUMENT);
      assert_non_null(strstr(est_error_message(), "train.tsv:"));
    }
    est_examples_free(&ex);
    est_processor_free(p);
  }
  assert_true(ok > 0 && failed > 0);
  test_remove_tree(dir);
}

/* QNLI / RTE / WNLI (GLUE layout, not in the reference): index, text, text, label. */
static void test_qnli_rte_wnli(void **state) {
  (void)state;
  char dir[256];
  test_make_tmpdir(dir, sizeof dir);
  write_text(dir, "train.tsv", "index\tquestion\tsentence\tlabel\n"
                               "0\tWhat came into force?\tThe law came into force.\tentailment\n"
                               "1\tWho?\tNobody knows.\tnot_entailment\n");
  write_text(dir, "test.tsv", "index\tquestion\tsentence\n5\tWhy?\tBecause.\n");
  est_examples ex = load("QNLI", NULL, dir, EST_SPLIT_TRAIN);
  assert_int_equal(ex.count, 2);
  assert_string_equal(ex.items[1].guid, "train-1");
  assert_string_equal(ex.items[1].text_a, "Who?");
  assert_string_equal(ex.items[1].text_b, "Nobody knows.");
  assert_string_equal(ex.items[1].label, "not_entailment");
  est_examples_free(&ex);
  ex = load("rte", NULL, dir, EST_SPLIT_TEST);
  assert_int_equal(ex.count, 1);
  assert_string_equal(ex.items[0].guid, "test-5");
  assert_string_equal(ex.items[0].label, "entailment");
  est_examples_free(&ex);
  /* WNLI's labels are 0/1: the QNLI file is refused with file and line. */
  expect_error("wnli", dir, EST_SPLIT_TRAIN, EST_ERR_INVALID_ARGUMENT,
               "train.tsv:2: label 'entailment' is not one of the task's labels (0, 1)");
  test_remove_tree(dir);
}

static void test_padding(void **state) {
  (void)state;
  est_examples ex;
  est_examples_init(&ex);
  for (int i = 0; i < 10; i++) assert_int_equal(est_examples_add(&ex, "g", "a", NULL, "0"), EST_OK);
  size_t added;
  assert_int_equal(est_examples_pad_to_multiple(&ex, 8, &added), EST_OK);
  assert_int_equal(added, 6);
  assert_int_equal(ex.count, 16);
  assert_true(ex.items[15].is_padding);
  assert_false(ex.items[9].is_padding);
  assert_int_equal(est_examples_pad_to_multiple(&ex, 8, &added), EST_OK);
  assert_int_equal(added, 0);
  est_examples_free(&ex);
}

/* What the task table says besides the layouts: the extra metric, the splits, the names. */
static void test_task_table(void **state) {
  (void)state;
  const struct {
    const char *name, *canonical;
    est_task_metric metric;
    bool has_test;
  } cases[] = {
    {"MRPC", "mrpc", EST_TASK_METRIC_F1, true},    {"CoLA", "cola", EST_TASK_METRIC_MCC, true},
    {"sst2", "sst-2", EST_TASK_METRIC_NONE, true}, {"mnli_mismatched", "mnli-mm", EST_TASK_METRIC_NONE, true},
    {"XNLI", "xnli", EST_TASK_METRIC_NONE, false}, {"rte", "rte", EST_TASK_METRIC_NONE, true},
    {"tsv", "tsv", EST_TASK_METRIC_NONE, true},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    est_processor *p;
    assert_int_equal(est_processor_create(&p, cases[i].name, NULL), EST_OK);
    assert_string_equal(est_processor_name(p), cases[i].canonical);
    assert_int_equal(est_processor_extra_metric(p), cases[i].metric);
    assert_true(est_processor_has_split(p, EST_SPLIT_TRAIN));
    assert_true(est_processor_has_split(p, EST_SPLIT_DEV));
    assert_int_equal(est_processor_has_split(p, EST_SPLIT_TEST), cases[i].has_test);
    est_processor_free(p);
  }
  /* The unknown-task message lists every task of the table. */
  est_processor *p;
  assert_int_equal(est_processor_create(&p, "qqp", NULL), EST_ERR_NOT_FOUND);
  assert_non_null(strstr(est_error_message(),
                         "(known: cola, mnli, mnli-mm, mrpc, qnli, rte, sst-2, wnli, xnli, tsv)"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_task_table),
    cmocka_unit_test(test_mrpc),        cmocka_unit_test(test_cola),      cmocka_unit_test(test_sst2),
    cmocka_unit_test(test_mnli),        cmocka_unit_test(test_xnli),      cmocka_unit_test(test_generic_tsv),
    cmocka_unit_test(test_bad_input),   cmocka_unit_test(test_padding),   cmocka_unit_test(test_qnli_rte_wnli),
    cmocka_unit_test(test_random_files),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
