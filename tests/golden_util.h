/* Golden-tensor files of the tests/reference golden scripts (tests/reference/README.md) and the
 * tolerance check both golden tests use. A directory tests/data/golden/<name>/ holds
 * manifest.txt ("meta <key> <value>" lines, then "<tensor> <offset> <count>" lines, in
 * floats) and tensors.bin (every tensor as little-endian float32, one blob).
 * Include after cmocka.h; everything is static, one copy per test. */
#ifndef EST_TESTS_GOLDEN_UTIL_H
#define EST_TESTS_GOLDEN_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/bert_classifier.h"
#include "est/variables.h"
#include "bert_fn_util.h"

/* ---- golden files --------------------------------------------------------------------- */

typedef struct entry {
  char name[300];
  size_t offset, count;
} entry;

typedef struct golden {
  char dir[1024];
  entry *entries;
  int n;
  float *data;
  int num_labels, max_predictions, batch, seq_len, steps; /* meta; 0 when absent */
  int64_t num_train_steps, num_warmup_steps;
  double init_lr;
} golden;

static void golden_load(golden *g, const char *name) {
  memset(g, 0, sizeof *g);
  snprintf(g->dir, sizeof g->dir, "%s/golden/%s", EST_TEST_DATA, name);
  char path[1200];
  snprintf(path, sizeof path, "%s/manifest.txt", g->dir);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  char line[1024];
  int cap = 0;
  size_t total = 0;
  while (fgets(line, sizeof line, f)) {
    char key[300];
    double value;
    if (sscanf(line, "meta %299s %lf", key, &value) == 2) {
      if (!strcmp(key, "num_labels")) g->num_labels = (int)value;
      else if (!strcmp(key, "max_predictions")) g->max_predictions = (int)value;
      else if (!strcmp(key, "batch")) g->batch = (int)value;
      else if (!strcmp(key, "seq_len")) g->seq_len = (int)value;
      else if (!strcmp(key, "init_lr")) g->init_lr = value;
      else if (!strcmp(key, "num_train_steps")) g->num_train_steps = (int64_t)value;
      else if (!strcmp(key, "num_warmup_steps")) g->num_warmup_steps = (int64_t)value;
      else if (!strcmp(key, "steps")) g->steps = (int)value;
      continue;
    }
    if (g->n == cap) {
      cap = cap ? 2 * cap : 128;
      g->entries = realloc(g->entries, (size_t)cap * sizeof *g->entries);
    }
    entry *e = &g->entries[g->n];
    assert_int_equal(sscanf(line, "%299s %zu %zu", e->name, &e->offset, &e->count), 3);
    if (e->offset + e->count > total) total = e->offset + e->count;
    g->n++;
  }
  fclose(f);
  snprintf(path, sizeof path, "%s/tensors.bin", g->dir);
  f = fopen(path, "rb");
  assert_non_null(f);
  g->data = malloc(total * sizeof(float) + 1);
  /* the blob is little-endian float32, as is every machine this runs on */
  assert_int_equal(fread(g->data, sizeof(float), total, f), total);
  fclose(f);
}

static void golden_free(golden *g) {
  free(g->entries);
  free(g->data);
}

static const float *golden_get(const golden *g, const char *name, size_t *count) {
  for (int i = 0; i < g->n; i++)
    if (!strcmp(g->entries[i].name, name)) {
      if (count) *count = g->entries[i].count;
      return g->data + g->entries[i].offset;
    }
  fail_msg("golden tensor %s missing", name);
  return NULL;
}

static int32_t *golden_ints(const golden *g, const char *name) {
  size_t n = 0;
  const float *f = golden_get(g, name, &n);
  int32_t *out = malloc(n * sizeof(int32_t));
  for (size_t i = 0; i < n; i++) out[i] = (int32_t)f[i];
  return out;
}

/* Every variable of vs set to the golden's "param:<name>" (counts must match). */
static inline void golden_set_params(const golden *g, est_var_store *vs) {
  char key[400];
  for (size_t i = 0; i < est_vars_count(vs); i++) {
    const est_variable *v = est_vars_at(vs, i);
    size_t n = 0;
    snprintf(key, sizeof key, "param:%s", v->name);
    const float *src = golden_get(g, key, &n);
    assert_int_equal(n, v->count);
    memcpy(est_vars_value(vs, i), src, n * sizeof(float));
  }
}

/* The golden holds exactly vs's variables (as many "param:" entries as variables; each
 * name and size is then checked by golden_set_params). */
static inline void golden_expect_exactly_params(const golden *g, const est_var_store *vs) {
  int nparams = 0;
  for (int i = 0; i < g->n; i++) nparams += !strncmp(g->entries[i].name, "param:", 6);
  assert_int_equal(nparams, (int)est_vars_count(vs));
}

/* The golden `name` loaded into *g, and its classifier (the BERT model_fn with the classifier
 * head, bert_fn_util.h) built for `mode` in precision p (which this CPU must run: the caller
 * skips otherwise), dropout off as the reference runs, with the golden's parameters. */
static inline void golden_classifier_open(golden *g, const char *name, est_precision p, est_mode mode, bert_fn *m) {
  golden_load(g, name);
  char path[1200];
  est_bert_config cfg;
  snprintf(path, sizeof path, "%s/bert_config.json", g->dir);
  assert_int_equal(est_bert_config_from_json_file(&cfg, path), EST_OK);
  bert_fn_init(m, &cfg, g->num_labels, g->seq_len);
  m->params.precision = p;
  m->params.no_dropout = 1;
  m->params.learning_rate = g->init_lr;
  m->params.num_train_steps = g->num_train_steps;
  m->params.num_warmup_steps = g->num_warmup_steps;
  assert_int_equal(bert_fn_build(m, mode, g->batch, 1), EST_OK);
  assert_int_equal(est_bert_encoder_precision(bert_fn_encoder(m)), p);
  golden_expect_exactly_params(g, m->vs);
  golden_set_params(g, m->vs);
}

/* log_softmax of each row of logits [rows, C], into out (what a model's probabilities give
 * back: log p = logit - logsumexp, in double). */
static inline void golden_log_softmax(double *out, const float *logits, int rows, int C) {
  for (int r = 0; r < rows; r++) {
    const float *z = logits + (size_t)r * C;
    double mx = z[0], sum = 0;
    for (int c = 1; c < C; c++) mx = fmax(mx, z[c]);
    for (int c = 0; c < C; c++) sum += exp((double)z[c] - mx);
    for (int c = 0; c < C; c++) out[(size_t)r * C + c] = (double)z[c] - mx - log(sum);
  }
}

/* Largest |log p - log_softmax(ref_logits)| over [rows, C], relative to `tol` times the
 * largest |ref logit|: a log-probability moves with its logit and the row's logsumexp, so
 * each is off by at most twice the logits' error, and the scale is the logits'. <= 1 passes. */
static inline double golden_logp_error(const float *probabilities, const float *ref_logits, int rows, int C,
                                       double tol) {
  double *ref = malloc((size_t)rows * C * sizeof(double)), scale = 0, worst = 0;
  golden_log_softmax(ref, ref_logits, rows, C);
  for (int i = 0; i < rows * C; i++) scale = fmax(scale, fabs(ref_logits[i]));
  for (int i = 0; i < rows * C; i++) {
    double r = fabs(log((double)probabilities[i]) - ref[i]) / (2 * tol * scale + 1e-30);
    if (!(r <= worst)) worst = isnan(r) ? INFINITY : r;
  }
  free(ref);
  return worst;
}

/* ---- comparisons ---------------------------------------------------------------------- */

/* Absolute floor shared by all tensors of one comparison (see check_config). */
static double g_abs_floor;

/* Largest |a - b| / (rtol |b| + floor * max|b| + g_abs_floor) over the tensor: <= 1 passes. */
static double worst_ratio(const float *a, const float *b, size_t n, double rtol, double floor_frac,
                          size_t *where) {
  double scale = 0;
  for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(b[i]));
  double worst = 0;
  for (size_t i = 0; i < n; i++) {
    double tol = rtol * fabs(b[i]) + floor_frac * scale + g_abs_floor + 1e-30;
    double r = fabs((double)a[i] - b[i]) / tol;
    if (!(r <= worst)) {  /* also catches NaN */
      worst = isnan(r) ? INFINITY : r;
      if (where) *where = i;
    }
  }
  return worst;
}

/* Some gradients are exactly zero in exact arithmetic (e.g. the key bias: adding a constant
 * to every score of a row leaves the softmax unchanged), so both sides hold pure float32
 * rounding noise there: g_abs_floor = frac times the largest "grad:<name>" of vs's
 * variables in the golden covers that noise; everywhere else the relative term rules. */
static inline void golden_grad_floor(const golden *g, const est_var_store *vs, double frac) {
  char key[400];
  double gmax = 0;
  for (size_t i = 0; i < est_vars_count(vs); i++) {
    snprintf(key, sizeof key, "grad:%s", est_vars_at(vs, i)->name);
    size_t n = 0;
    const float *ref = golden_get(g, key, &n);
    for (size_t j = 0; j < n; j++) gmax = fmax(gmax, fabs(ref[j]));
  }
  g_abs_floor = frac * gmax;
}

static void expect_close(const char *what, const float *a, const float *b, size_t n, double rtol, double floor_frac) {
  size_t at = 0;
  double r = worst_ratio(a, b, n, rtol, floor_frac, &at);
  if (r > 1.0) fail_msg("%s[%zu]: est %.9g vs torch %.9g (%.2fx the tolerance)", what, at, a[at], b[at], r);
}


#endif
