/* Cross-encoder reranking (est run_rerank, docs/rerank.md):
 *   - est_rerank_evaluate's MRR@k / NDCG@k against tests/data/rerank/metrics_golden.txt
 *     (tests/reference/rerank_golden.py: numpy, written independently), ties and graded
 *     labels included;
 *   - est_rerank_read_file: TSV with and without a header and a label, JSON lines, the
 *     queries' numbering, and errors naming file:line;
 *   - the classifier head's pair losses (BCE, MSE): the loss against its formula on the
 *     head's own logits, and every checked gradient by central differences, dropout off and on;
 *   - est run_rerank end to end: eval_results.txt's keys, test_results.tsv's scores and ranks,
 *     --loss=mse, the est and HuggingFace exports, and the errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/est.h"
#include "test_util.h"

#define RR EST_TEST_DATA "/rerank"
#define SMALL_CONFIG EST_TEST_DATA "/run_classifier/bert_config_h32.json"
#define UNCASED EST_TEST_DATA "/vocab_uncased.txt"

/* ---- the metrics against the numpy reference ---- */

static char *line_after(char *para, const char *key) {
  char pat[64];
  snprintf(pat, sizeof pat, "\n%s ", key);
  char *at = strstr(para, pat);
  if (!at) fail_msg("golden lacks %s", key);
  return at + strlen(pat);
}

static void test_metrics_golden(void **state) {
  (void)state;
  char *text = test_read_file(RR "/metrics_golden.txt", NULL);
  int cases = 0;
  for (char *para = text; para && *para; cases++) {
    char *next = strstr(para + 1, "\ncase ");
    if (next) *next = 0;
    size_t n;
    int k;
    assert_int_equal(sscanf(para, "case %zu %d", &n, &k), 2);
    int64_t *q = malloc(n * sizeof *q);
    float *labels = malloc(n * sizeof *labels), *scores = malloc(n * sizeof *scores);
    char *p = line_after(para, "query");
    for (size_t i = 0; i < n; i++) q[i] = strtoll(p, &p, 10);
    p = line_after(para, "labels");
    for (size_t i = 0; i < n; i++) labels[i] = strtof(p, &p);
    p = line_after(para, "scores");
    for (size_t i = 0; i < n; i++) scores[i] = strtof(p, &p);
    est_rerank_report r;
    assert_int_equal(est_rerank_evaluate(&r, q, labels, scores, n, k), EST_OK);
    const double mrr = strtod(line_after(para, "mrr"), NULL), ndcg = strtod(line_after(para, "ndcg"), NULL);
    /* the same formula; only the order of the sums may differ */
    if (fabs(r.mrr - mrr) > 1e-12 || fabs(r.ndcg - ndcg) > 1e-12)
      fail_msg("case %d: mrr %.17g ndcg %.17g, numpy %.17g %.17g", cases, r.mrr, r.ndcg, mrr, ndcg);
    assert_int_equal(r.num_queries, strtol(line_after(para, "counted"), NULL, 10));
    assert_int_equal(r.num_skipped, strtol(line_after(para, "skipped"), NULL, 10));
    free(q), free(labels), free(scores);
    para = next ? next + 1 : NULL;
  }
  assert_int_equal(cases, 12);
  free(text);
  /* by hand: one query, the relevant passage ranked 2nd of 3 (a tie broken by input order) */
  const int64_t q[3] = {0, 0, 0};
  const float labels[3] = {0, 1, 0}, scores[3] = {0.5f, 0.5f, 0.1f};
  est_rerank_report r;
  assert_int_equal(est_rerank_evaluate(&r, q, labels, scores, 3, 10), EST_OK);
  assert_true(r.mrr == 0.5 && fabs(r.ndcg - 1.0 / log2(3.0)) < 1e-15);
  assert_int_equal(est_rerank_evaluate(&r, q, labels, scores, 3, 1), EST_OK);
  assert_true(r.mrr == 0.0 && r.ndcg == 0.0);
  assert_int_equal(est_rerank_evaluate(&r, q, labels, scores, 3, 0), EST_ERR_INVALID_ARGUMENT);
}

/* ---- reading ---- */

static void test_read(void **state) {
  (void)state;
  est_rerank_data d;
  const char *tsv = test_tmp_path("a.tsv");
  const char text[] = "query\tpassage\tscore\nq1\tp one\t1\nq2\tp two\t0.25\nq1\tp \"three\"\t0\r\n";
  test_write_bytes(tsv, text, strlen(text));
  assert_int_equal(est_rerank_read_file(&d, tsv), EST_OK);
  assert_int_equal(d.count, 3);
  assert_int_equal(d.num_queries, 2);
  assert_string_equal(d.items[2].passage, "p \"three\"");
  assert_true(d.items[1].label == 0.25f && d.items[0].query_index == 0 && d.items[1].query_index == 1 &&
              d.items[2].query_index == 0);
  est_rerank_data_free(&d);
  /* no label (a test set): 0 */
  const char nolabel[] = "q\tp\n";
  test_write_bytes(tsv, nolabel, strlen(nolabel));
  assert_int_equal(est_rerank_read_file(&d, tsv), EST_OK);
  assert_true(d.count == 1 && d.items[0].label == 0.0f);
  est_rerank_data_free(&d);
  const char *jsonl = test_tmp_path("a.jsonl");
  const char lines[] = "{\"query\": \"q\", \"passage\": \"p\", \"label\": 1}\n\n{\"query\": \"q\", \"text\": \"r\", "
                       "\"score\": 0.5}\n";
  test_write_bytes(jsonl, lines, strlen(lines));
  assert_int_equal(est_rerank_read_file(&d, jsonl), EST_OK);
  assert_true(d.count == 2 && d.num_queries == 1 && d.items[1].label == 0.5f);
  assert_string_equal(d.items[1].passage, "r");
  est_rerank_data_free(&d);
  /* errors name the file and line */
  const struct {
    const char *name, *text, *message;
  } bad[] = {
    {"b.tsv", "q\tp\t1\nq only\n", "b.tsv:2: expected query<TAB>passage<TAB>label"},
    {"c.tsv", "q\tp\t1\nq\tp\tyes\n", "c.tsv:2: label \"yes\" is not a finite number"},
    {"d.tsv", "q\tp\t1\tx\n", "d.tsv:1: more than 3 fields"},
    {"e.tsv", "q\tp\t1\n\nq\tp\t0\n", "e.tsv:2: an empty line"},
    {"f.tsv", "q\tp\t1\nq\t\xff\t0\n", "f.tsv:2: invalid UTF-8"},
    {"g.tsv", "q\tp\t1\nq\tp\tinf\n", "g.tsv:2: label \"inf\" is not a finite number"},
    {"h.jsonl", "{\"query\": \"q\", \"passage\": \"p\"}\n{\"query\": 3, \"passage\": \"p\"}\n",
     "h.jsonl:2: expected an object with string \"query\" and \"passage\""},
    {"i.jsonl", "{\"query\": \"q\", \"passage\": \"p\", \"label\": \"1\"}\n", "i.jsonl:1: \"label\" must be a finite number"},
    {"j.jsonl", "{\"query\": \"q\",\n", "j.jsonl:1: not JSON"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    const char *path = test_tmp_path(bad[i].name);
    test_write_bytes(path, bad[i].text, strlen(bad[i].text));
    assert_int_equal(est_rerank_read_file(&d, path), EST_ERR_INVALID_ARGUMENT);
    if (!strstr(est_error_message(), bad[i].message))
      fail_msg("%s: \"%s\" lacks \"%s\"", bad[i].name, est_error_message(), bad[i].message);
    assert_int_equal(d.count, 0);
  }
}

/* ---- the head's pair losses ---- */

typedef struct fixture {
  est_bert_config cfg;
  est_var_store *vs;
  est_bert_encoder *enc;
  void *head;
  int B, S;
  int32_t ids[24], mask[24], segs[24];
  float values[3];
  est_tensor tensors[4];
  const char *names[4];
  est_features features;
  est_bert_classifier_head_params params;
} fixture;

static void fixture_open(fixture *f, int loss, double dropout) {
  memset(f, 0, sizeof *f);
  f->B = 3, f->S = 8;
  f->cfg = est_bert_config_default();
  f->cfg.vocab_size = 40, f->cfg.hidden_size = 8, f->cfg.num_hidden_layers = 1, f->cfg.num_attention_heads = 2;
  f->cfg.intermediate_size = 16, f->cfg.max_position_embeddings = 16, f->cfg.type_vocab_size = 2;
  f->cfg.hidden_dropout_prob = dropout, f->cfg.attention_probs_dropout_prob = 0.0;
  f->params = (est_bert_classifier_head_params){.num_labels = 1, .pair_loss = loss};
  assert_int_equal(est_vars_create(&f->vs), EST_OK);
  assert_int_equal(est_bert_encoder_create(&f->enc, &f->cfg, f->vs), EST_OK);
  const est_bert_head_context ctx = {.mode = EST_MODE_EVAL, .max_batch = f->B, .max_seq_length = f->S,
                                     .encoder = f->enc, .vars = f->vs, .params = &f->params};
  assert_int_equal(est_bert_classifier_head_type.create(&f->head, &ctx), EST_OK);
  assert_int_equal(est_vars_finalize(f->vs, 5), EST_OK);
  /* a larger output layer than the 0.02 initializer, so that the logits are far from 0 */
  for (size_t i = 0; i < est_vars_count(f->vs); i++)
    if (!strcmp(est_vars_at(f->vs, i)->name, "output_weights"))
      for (size_t j = 0; j < est_vars_at(f->vs, i)->count; j++) est_vars_value(f->vs, i)[j] = 0.5f * (float)((int)(j % 5) - 2);
  assert_int_equal(est_bert_encoder_reserve(f->enc, f->B, f->S, 1), EST_OK);
  assert_int_equal(est_bert_classifier_head_type.reserve(f->head, &ctx), EST_OK);
  const float values[3] = {1.0f, 0.0f, loss == EST_PAIR_LOSS_MSE ? 2.5f : 0.3f};
  memcpy(f->values, values, sizeof values);
  for (int i = 0; i < f->B * f->S; i++)
    f->ids[i] = 5 + (7 * i) % 30, f->mask[i] = i % f->S < 6 + i / f->S % 2, f->segs[i] = i % f->S >= 4;
  const char *names[4] = {"input_ids", "input_mask", "segment_ids", "label_values"};
  for (int k = 0; k < 3; k++) {
    int32_t *data[3] = {f->ids, f->mask, f->segs};
    f->names[k] = names[k];
    f->tensors[k] = (est_tensor){.dtype = EST_DT_INT32, .rank = 2, .dims = {f->B, f->S}, .data = data[k]};
  }
  f->names[3] = names[3];
  f->tensors[3] = (est_tensor){.dtype = EST_DT_FLOAT, .rank = 1, .dims = {f->B}, .data = f->values};
  f->features = (est_features){.batch_size = f->B, .count = 4, .names = f->names, .tensors = f->tensors};
}

static void fixture_close(fixture *f) {
  est_bert_classifier_head_type.free(f->head);
  est_bert_encoder_free(f->enc);
  est_vars_free(f->vs);
}

static float forward(fixture *f, int training, est_mode mode) {
  assert_int_equal(est_bert_encoder_forward(f->enc, f->ids, f->mask, f->segs, f->B, f->S, training, 11, 3), EST_OK);
  const est_bert_head_batch b = {.mode = mode, .features = &f->features, .batch = f->B, .seq_len = f->S,
                                 .training = training, .seed = 11, .step = 3};
  float loss = NAN;
  if (est_bert_classifier_head_type.forward(f->head, &b, &loss) != EST_OK) fail_msg("%s", est_error_message());
  return loss;
}

/* The loss is its formula on the head's logits; PREDICT's probabilities are sigmoid (BCE) or
 * the logit (MSE); eval_loss is the mean loss. */
static void check_loss(int loss_kind) {
  fixture f;
  fixture_open(&f, loss_kind, 0.0);
  const float loss = forward(&f, 0, EST_MODE_EVAL);
  const est_bert_head_batch b = {.mode = EST_MODE_PREDICT, .features = &f.features, .batch = f.B, .seq_len = f.S};
  est_estimator_spec spec = {0};
  assert_int_equal(est_bert_classifier_head_type.predictions(f.head, &b, &spec), EST_OK);
  const float *p = spec.predictions[0].data, *z = spec.predictions[1].data;
  double want = 0.0;
  int far = 0;
  for (int i = 0; i < f.B; i++) {
    const double y = f.values[i], zi = z[i];
    far |= fabs(zi) > 0.1;
    want += loss_kind == EST_PAIR_LOSS_BCE ? -(y * log(1.0 / (1.0 + exp(-zi))) + (1 - y) * log(1.0 - 1.0 / (1.0 + exp(-zi))))
                                           : (zi - y) * (zi - y);
    const double want_p = loss_kind == EST_PAIR_LOSS_BCE ? 1.0 / (1.0 + exp(-zi)) : zi;
    if (fabs(p[i] - want_p) > 1e-6) fail_msg("probability %d: %.9g, want %.9g", i, p[i], want_p);
  }
  assert_true(far);
  want /= f.B;
  if (fabs(loss - want) > 1e-5 * fabs(want) + 1e-6) fail_msg("loss %.9g, formula %.9g", loss, want);
  assert_int_equal(est_bert_classifier_head_type.update_metrics(f.head, &b), EST_OK);
  est_metric *const *metrics;
  size_t n;
  assert_int_equal(est_bert_classifier_head_type.metrics(f.head, &metrics, &n), EST_OK);
  assert_int_equal(n, 1);
  const double v = est_metric_result(metrics[0]);
  if (fabs(v - want) > 1e-5 * fabs(want) + 1e-6) fail_msg("eval_loss %.9g, formula %.9g", v, want);
  fixture_close(&f);
}

static void test_loss_formula(void **state) {
  (void)state;
  check_loss(EST_PAIR_LOSS_BCE);
  check_loss(EST_PAIR_LOSS_MSE);
}

static void gradcheck(int loss_kind, int training) {
  fixture f;
  fixture_open(&f, loss_kind, training ? 0.2 : 0.0);
  est_vars_zero_grads(f.vs);
  forward(&f, training, EST_MODE_TRAIN);
  assert_int_equal(est_bert_classifier_head_type.backward(f.head), EST_OK);
  assert_int_equal(est_bert_encoder_backward(f.enc), EST_OK);
  const char *names[] = {"output_weights", "output_bias", "bert/pooler/dense/kernel",
                         "bert/encoder/layer_0/output/dense/bias"};
  for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
    size_t idx = SIZE_MAX;
    for (size_t i = 0; i < est_vars_count(f.vs); i++)
      if (!strcmp(est_vars_at(f.vs, i)->name, names[k])) idx = i;
    assert_true(idx != SIZE_MAX);
    float *w = est_vars_value(f.vs, idx);
    const float *g = est_vars_grad(f.vs, idx);
    const size_t count = est_vars_at(f.vs, idx)->count;
    for (size_t j = 0; j < count; j += count > 40 ? count / 11 : 1) {
      const float h = 1e-2f, w0 = w[j];
      w[j] = w0 + h;
      const double up = forward(&f, training, EST_MODE_TRAIN);
      w[j] = w0 - h;
      const double down = forward(&f, training, EST_MODE_TRAIN);
      w[j] = w0;
      const double fd = (up - down) / (2.0 * h);
      if (!(fabs(fd - g[j]) <= 1e-3 + 2e-2 * fabs(fd)))
        fail_msg("%s[%zu] (loss %d, dropout %d): backward %.6g, finite differences %.6g", names[k], j, loss_kind,
                 training, g[j], fd);
    }
  }
  /* BCE: a label outside [0, 1] is named */
  if (loss_kind == EST_PAIR_LOSS_BCE) {
    f.values[1] = 2.0f;
    assert_int_equal(est_bert_encoder_forward(f.enc, f.ids, f.mask, f.segs, f.B, f.S, 0, 0, 0), EST_OK);
    const est_bert_head_batch b = {.mode = EST_MODE_TRAIN, .features = &f.features, .batch = f.B, .seq_len = f.S};
    float loss;
    assert_int_equal(est_bert_classifier_head_type.forward(f.head, &b, &loss), EST_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(est_error_message(), "label_values[1] = 2"));
  }
  fixture_close(&f);
}

static void test_gradcheck(void **state) {
  (void)state;
  gradcheck(EST_PAIR_LOSS_BCE, 0);
  gradcheck(EST_PAIR_LOSS_BCE, 1);
  gradcheck(EST_PAIR_LOSS_MSE, 0);
  gradcheck(EST_PAIR_LOSS_MSE, 1);
}

static void test_head_errors(void **state) {
  (void)state;
  est_bert_config cfg = est_bert_config_default();
  cfg.vocab_size = 40, cfg.hidden_size = 8, cfg.num_hidden_layers = 1, cfg.num_attention_heads = 2;
  cfg.intermediate_size = 16, cfg.max_position_embeddings = 16;
  est_var_store *vs;
  est_bert_encoder *enc;
  assert_int_equal(est_vars_create(&vs), EST_OK);
  assert_int_equal(est_bert_encoder_create(&enc, &cfg, vs), EST_OK);
  est_bert_classifier_head_params p = {.num_labels = 2, .pair_loss = EST_PAIR_LOSS_BCE};
  const est_bert_head_context ctx = {.mode = EST_MODE_TRAIN, .max_batch = 2, .max_seq_length = 8, .encoder = enc,
                                     .vars = vs, .params = &p};
  void *head = NULL;
  assert_int_equal(est_bert_classifier_head_type.create(&head, &ctx), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "one output, not 2"));
  est_bert_classifier_head_type.free(head);
  est_bert_encoder_free(enc);
  est_vars_free(vs);
}

/* ---- est run_rerank ---- */

static double eval_value(const char *text, const char *key) {
  char pat[256];
  snprintf(pat, sizeof pat, "%s = ", key);
  for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
    if (!strncmp(p, pat, strlen(pat))) return strtod(p + strlen(pat), NULL);
  fail_msg("eval_results.txt has no %s:\n%s", key, text);
  return NAN;
}

#define RUN_FLAGS " --vocab_file=" UNCASED " --bert_config_file=" SMALL_CONFIG " --max_seq_length=16 --num_threads=2"

static void test_run_rerank(void **state) {
  (void)state;
  char out[600];
  snprintf(out, sizeof out, "%s/rr", test_tmpdir);
  free(test_run_ok(EST_BIN " run_rerank --data_dir=" RR RUN_FLAGS " --output_dir=%s --do_train --do_eval"
                   " --do_predict --train_batch_size=8 --learning_rate=1e-3 --num_train_epochs=20", out));
  char *text = test_read_in(out, "eval_results.txt");
  const double mrr = eval_value(text, "eval_mrr@10"), ndcg = eval_value(text, "eval_ndcg@10");
  assert_true(mrr > 0 && mrr <= 1 && ndcg > 0 && ndcg <= 1 && ndcg >= mrr * 0.5);
  assert_true(eval_value(text, "eval_num_queries") == 8); /* dev.tsv: 8 queries, each with 2 relevant */
  assert_true(eval_value(text, "eval_loss") < 0.69);      /* below chance (log 2): it learned something */
  free(text);
  /* test_results.tsv: 20 pairs of 4 queries, 5 each: scores in (0, 1); ranks 1..5 each once
   * per query (test.tsv's pairs of a query are adjacent), ordered by score */
  text = test_read_in(out, "test_results.tsv");
  float s[20];
  int rank[20], lines = 0;
  for (char *p = text; *p && lines < 21; p = strchr(p, '\n') + 1, lines++) {
    assert_int_equal(sscanf(p, "%f\t%d\n", &s[lines], &rank[lines]), 2);
    assert_true(s[lines] > 0 && s[lines] < 1);
  }
  assert_int_equal(lines, 20);
  for (int q = 0; q < 4; q++) {
    int seen = 0;
    for (int i = 5 * q; i < 5 * q + 5; i++) {
      seen |= 1 << rank[i];
      for (int j = 5 * q; j < 5 * q + 5; j++)
        if (s[j] > s[i]) assert_true(rank[j] < rank[i]);
    }
    assert_int_equal(seen, 0x3e);
  }
  free(text);
  /* exports: est's (a raw score, problem_type regression) and HuggingFace's (one label) */
  free(test_run_ok(EST_BIN " run_rerank --data_dir=" RR RUN_FLAGS " --output_dir=%s --do_export"
                   " --export_dir=%s/export", out, out));
  char *json = NULL;
  assert_int_equal(test_run(&json, 0, "cat %s/export/*/est_model.json", out), 0);
  assert_non_null(strstr(json, "\"problem_type\": \"regression\""));
  free(json);
  free(test_run_ok(EST_BIN " run_rerank --data_dir=" RR RUN_FLAGS " --output_dir=%s --do_export --export_format=hf"
                   " --export_dir=%s/hf", out, out));
  char hf[700];
  snprintf(hf, sizeof hf, "%s/hf", out);
  char *config = test_read_in(hf, "config.json");
  assert_non_null(strstr(config, "BertForSequenceClassification"));
  assert_non_null(strstr(config, "\"LABEL_0\""));
  assert_null(strstr(config, "LABEL_1"));
  free(config);
  /* the HF directory read back as --init_checkpoint: the same dev metrics */
  char out2[700];
  snprintf(out2, sizeof out2, "%s/from_hf", test_tmpdir);
  free(test_run_ok(EST_BIN " run_rerank --data_dir=" RR " --init_checkpoint=%s --bert_config_file=%s/config.json"
                   " --vocab_file=%s --output_dir=%s --do_eval --max_seq_length=16 --num_threads=2",
                   hf, hf, hf, out2));
  char *a = test_read_in(out, "eval_results.txt"), *b = test_read_in(out2, "eval_results.txt");
  if (fabs(eval_value(a, "eval_mrr@10") - eval_value(b, "eval_mrr@10")) > 1e-6 ||
      fabs(eval_value(a, "eval_loss") - eval_value(b, "eval_loss")) > 1e-4)
    fail_msg("trained:\n%s\nits HF export:\n%s", a, b);
  free(a), free(b);
}

static void test_run_rerank_mse(void **state) {
  (void)state;
  char dir[600], out[600];
  snprintf(dir, sizeof dir, "%s/mse_data", test_tmpdir);
  snprintf(out, sizeof out, "%s/mse", test_tmpdir);
  assert_int_equal(test_run(NULL, 0, "mkdir -p %s", dir), 0);
  /* JSON lines, graded scores 0..3 */
  const char lines[] = "{\"query\": \"about team game\", \"passage\": \"team game win\", \"label\": 3}\n"
                       "{\"query\": \"about team game\", \"passage\": \"team season\", \"label\": 1}\n"
                       "{\"query\": \"about team game\", \"passage\": \"vote law\", \"label\": 0}\n"
                       "{\"query\": \"about vote law\", \"passage\": \"vote law party\", \"label\": 3}\n"
                       "{\"query\": \"about vote law\", \"passage\": \"code cloud\", \"label\": 0}\n";
  char path[700];
  snprintf(path, sizeof path, "%s/train.jsonl", dir);
  test_write_bytes(path, lines, strlen(lines));
  snprintf(path, sizeof path, "%s/dev.jsonl", dir);
  test_write_bytes(path, lines, strlen(lines));
  free(test_run_ok(EST_BIN " run_rerank --loss=mse --data_dir=%s" RUN_FLAGS " --output_dir=%s --do_train --do_eval"
                   " --train_batch_size=5 --learning_rate=1e-2 --num_train_epochs=30", dir, out));
  char *text = test_read_in(out, "eval_results.txt");
  assert_true(eval_value(text, "eval_num_queries") == 2);
  /* below 19/5, the mean square at logit 0: the logit moved towards the scores */
  assert_true(eval_value(text, "eval_loss") < 3.0);
  eval_value(text, "eval_ndcg@10");
  free(text);
  /* BCE refuses a score of 3, naming the file and pair */
  char *log = NULL;
  assert_int_not_equal(test_run(&log, 1, EST_BIN " run_rerank --data_dir=%s" RUN_FLAGS " --output_dir=%s/bce"
                                " --do_train", dir, test_tmpdir), 0);
  assert_non_null(strstr(log, "train.jsonl: pair 1's label 3: --loss=bce needs labels in [0, 1]"));
  free(log);
}

/* est rerank: a HuggingFace cross-encoder served as it is gives transformers' logits
 * (tests/data/hf/cross_encoder/golden.tsv), sigmoid by default, ranked best first; an est
 * run_rerank export and its HF export give the same scores, and those of test_results.tsv. */
/* A command's stdout alone (its stderr, the log, dropped); fails unless it exits 0. */
static char *stdout_of(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *stdout_of(const char *fmt, ...) {
  char cmd[8192];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  char *out = NULL;
  const int rc = test_run(&out, 0, "%s 2>/dev/null", cmd);
  if (rc != 0) fail_msg("exit %d for: %s\n%s", rc, cmd, out);
  return out;
}

static void test_est_rerank(void **state) {
  (void)state;
  const char *passages = test_tmp_path("passages.txt");
  const char two[] = "the play was written by a man in london.\nparis is a city in france.\n";
  test_write_bytes(passages, two, strlen(two));
  const double want[2] = {-2.1816518306732178, -2.1716630458831787}; /* golden.tsv's first two */
  char *raw = stdout_of(EST_BIN " rerank --model_dir=" EST_TEST_DATA "/hf/cross_encoder --query='who wrote the play'"
                        " --input_file=%s --raw_scores", passages);
  size_t i0, i1;
  double s0, s1;
  assert_int_equal(sscanf(raw, "%zu\t%lf\n%zu\t%lf\n", &i0, &s0, &i1, &s1), 4);
  assert_true(i0 == 1 && i1 == 0); /* -2.17 > -2.18 */
  if (fabs(s0 - want[1]) > 1e-5 || fabs(s1 - want[0]) > 1e-5) fail_msg("est rerank --raw_scores:\n%s", raw);
  free(raw);
  char *json = stdout_of(EST_BIN " rerank --model_dir=" EST_TEST_DATA "/hf/cross_encoder --query='who wrote the play'"
                         " --input_file=%s --output_format=json --return_text", passages);
  double p0, p1;
  assert_int_equal(sscanf(json, "[{\"index\": 1, \"score\": %lf, \"text\": \"paris is a city in france.\"}, "
                                "{\"index\": 0, \"score\": %lf, ", &p0, &p1), 2);
  if (fabs(p0 - 1.0 / (1.0 + exp(-want[1]))) > 1e-6 || fabs(p1 - 1.0 / (1.0 + exp(-want[0]))) > 1e-6)
    fail_msg("est rerank's sigmoid:\n%s", json);
  free(json);

  /* a trained model, both exports: test.tsv's first query's 5 passages */
  char out[600];
  snprintf(out, sizeof out, "%s/rr2", test_tmpdir);
  free(test_run_ok(EST_BIN " run_rerank --data_dir=" RR RUN_FLAGS " --output_dir=%s --do_train --do_predict"
                   " --train_batch_size=8 --learning_rate=1e-3 --num_train_epochs=5", out));
  free(test_run_ok(EST_BIN " run_rerank --data_dir=" RR RUN_FLAGS " --output_dir=%s --do_export --export_dir=%s/export",
                   out, out));
  free(test_run_ok(EST_BIN " run_rerank --data_dir=" RR RUN_FLAGS " --output_dir=%s --do_export --export_format=hf"
                   " --export_dir=%s/hf", out, out));
  char *tsv = test_read_file(RR "/test.tsv", NULL), *results = test_read_in(out, "test_results.tsv");
  char query[256] = "";
  const char *five = test_tmp_path("five.txt");
  FILE *f = fopen(five, "w");
  float want_scores[5];
  int want_rank[5];
  const char *line = tsv + strcspn(tsv, "\n") + 1, *r = results; /* after the header */
  for (int i = 0; i < 5; i++) {
    const char *tab = strchr(line, '\t'), *tab2 = strchr(tab + 1, '\t');
    snprintf(query, sizeof query, "%.*s", (int)(tab - line), line);
    fprintf(f, "%.*s\n", (int)(tab2 - tab - 1), tab + 1);
    line = strchr(line, '\n') + 1;
    assert_int_equal(sscanf(r, "%f\t%d", &want_scores[i], &want_rank[i]), 2);
    r = strchr(r, '\n') + 1;
  }
  fclose(f);
  const char *dirs[2] = {"export", "hf"};
  for (int d = 0; d < 2; d++) {
    char *got = stdout_of(EST_BIN " rerank --model_dir=%s/%s --query='%s' --input_file=%s", out, dirs[d], query, five);
    char *p = got;
    for (int k = 0; k < 5; k++) {
      size_t index;
      double score;
      assert_int_equal(sscanf(p, "%zu\t%lf", &index, &score), 2);
      assert_true(index < 5);
      if (want_rank[index] != k + 1 || fabs(score - want_scores[index]) > 1e-5)
        fail_msg("%s: est rerank\n%s\ntest_results.tsv\n%s", dirs[d], got, results);
      p = strchr(p, '\n') + 1;
    }
    free(got);
  }
  free(tsv), free(results);
  /* a model that is no cross-encoder is named */
  char *log = NULL;
  assert_int_not_equal(test_run(&log, 1, EST_BIN " rerank --model_dir=" EST_TEST_DATA "/hf/cls_multi --query=q"
                                " --input_file=%s", passages), 0);
  assert_non_null(strstr(log, "a reranker needs a cross-encoder"));
  free(log);
}

static void test_cli_errors(void **state) {
  (void)state;
  const struct {
    const char *flags, *message;
  } bad[] = {
    {" --data_dir=" RR " --loss=hinge --do_train", "--loss=hinge: expected bce or mse"},
    {" --data_dir=" RR "/nope --do_train", "--data_dir=" RR "/nope: no such directory"},
    {" --data_dir=" EST_TEST_DATA " --do_eval", "no dev.tsv or dev.jsonl"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    char *log = NULL;
    assert_int_not_equal(test_run(&log, 1, EST_BIN " run_rerank%s" RUN_FLAGS " --output_dir=%s/e%zu", bad[i].flags,
                                  test_tmpdir, i), 0);
    if (!strstr(log, bad[i].message)) fail_msg("%s: output lacks \"%s\":\n%s", bad[i].flags, bad[i].message, log);
    free(log);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_metrics_golden), cmocka_unit_test(test_read),          cmocka_unit_test(test_loss_formula),
    cmocka_unit_test(test_gradcheck),      cmocka_unit_test(test_head_errors),   cmocka_unit_test(test_run_rerank),
    cmocka_unit_test(test_run_rerank_mse), cmocka_unit_test(test_est_rerank),    cmocka_unit_test(test_cli_errors),
  };
  return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
