/* The input pipeline's feature kinds beyond FixedLen / VarLen numbers: string features
 * (FixedLen with and without defaults, VarLen), FixedLenSequenceFeature (padding by the
 * default value, allow_missing, the multiple-of error), strings through shuffle + exact
 * resume, and row lengths reaching a model_fn through the Estimator. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/dataset.h"
#include "est/estimator.h"
#include "est/example.h"
#include "est/tfrecord.h"
#include "est/log.h"
#include "est/variables.h"
#include "test_util.h"

static char tmpdir[256];
static char feat_path[512];

enum { NREC = 11 };

/* ---- the records: record i of feat.tf_record --------------------------------------- */

/* name: i+1 copies of 'a'+i (600 for i = 4: the arena has to grow); absent when i%3 == 2 */
static int has_name(int i) { return i % 3 != 2; }
static size_t name_of(int i, char *buf) {
  size_t n = i == 4 ? 600 : (size_t)i + 1;
  memset(buf, 'a' + i, n);
  return n;
}
/* pair: {"p<i>", ""}; pair2: {"q<i>", "r"} when i is even */
/* toks: i%4 values "t<i>_<k>", the one at k = 1 empty; absent when i%4 == 0 */
static size_t tok_of(int i, int k, char *buf) { return k == 1 ? 0 : (size_t)sprintf(buf, "t%d_%d", i, k); }
/* seq (int64 steps of []): i%3 values 100i+k; pts (float steps of [2]): 2*(i%3) values
 * i+0.25k; words (string steps of []): i%3 values "w<i>_<k>"; all absent when i%3 == 0 */
static int steps_of(int i) { return i % 3; }

static void make_record(est_example *ex, int i) {
  char buf[700];
  est_example_init(ex);
  int64_t id = i;
  assert_int_equal(est_example_set_int64(ex, "id", &id, 1), EST_OK);
  if (has_name(i)) {
    est_bytes b = {name_of(i, buf), (uint8_t *)buf};
    assert_int_equal(est_example_set_bytes(ex, "name", &b, 1), EST_OK);
  }
  char p0[16], q0[16];
  est_bytes pair[2] = {{(size_t)sprintf(p0, "p%d", i), (uint8_t *)p0}, {0, (uint8_t *)""}};
  assert_int_equal(est_example_set_bytes(ex, "pair", pair, 2), EST_OK);
  if (i % 2 == 0) {
    est_bytes pair2[2] = {{(size_t)sprintf(q0, "q%d", i), (uint8_t *)q0}, {1, (uint8_t *)"r"}};
    assert_int_equal(est_example_set_bytes(ex, "pair2", pair2, 2), EST_OK);
  }
  if (i % 4) {
    char t[3][16];
    est_bytes toks[3];
    for (int k = 0; k < i % 4; k++) toks[k] = (est_bytes){tok_of(i, k, t[k]), (uint8_t *)t[k]};
    assert_int_equal(est_example_set_bytes(ex, "toks", toks, (size_t)(i % 4)), EST_OK);
  }
  int n = steps_of(i);
  if (n) {
    int64_t seq[2];
    float pts[4];
    char w[2][16];
    est_bytes words[2];
    for (int k = 0; k < n; k++) {
      seq[k] = 100 * i + k;
      words[k] = (est_bytes){(size_t)sprintf(w[k], "w%d_%d", i, k), (uint8_t *)w[k]};
    }
    for (int k = 0; k < 2 * n; k++) pts[k] = (float)i + 0.25f * (float)k;
    assert_int_equal(est_example_set_int64(ex, "seq", seq, (size_t)n), EST_OK);
    assert_int_equal(est_example_set_float(ex, "pts", pts, (size_t)(2 * n)), EST_OK);
    assert_int_equal(est_example_set_bytes(ex, "words", words, (size_t)n), EST_OK);
  }
}

static void write_records(const char *path, est_example *ex, int n) {
  est_tfrecord_writer *w;
  assert_int_equal(est_tfrecord_writer_open(&w, path, EST_COMPRESSION_NONE), EST_OK);
  for (int i = 0; i < n; i++) {
    uint8_t *buf;
    size_t size;
    assert_int_equal(est_example_serialize(&ex[i], &buf, &size), EST_OK);
    assert_int_equal(est_tfrecord_writer_write(w, buf, size), EST_OK);
    free(buf);
  }
  assert_int_equal(est_tfrecord_writer_close(w), EST_OK);
}

static int setup(void **state) {
  (void)state;
  test_make_tmpdir(tmpdir, sizeof tmpdir);
  snprintf(feat_path, sizeof feat_path, "%s/feat.tf_record", tmpdir);
  est_example ex[NREC];
  for (int i = 0; i < NREC; i++) make_record(&ex[i], i);
  write_records(feat_path, ex, NREC);
  for (int i = 0; i < NREC; i++) est_example_clear(&ex[i]);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  test_remove_tree(tmpdir);
  return 0;
}

static est_dataset *open_feat(const est_feature_spec *specs, size_t n, int cast) {
  est_dataset *ds;
  const char *paths[1] = {feat_path};
  assert_int_equal(est_dataset_from_tfrecords(&ds, paths, 1, EST_COMPRESSION_NONE), EST_OK);
  assert_int_equal(est_dataset_parse(ds, specs, n, cast), EST_OK);
  return ds;
}

static void assert_bytes(est_bytes b, const char *want, size_t n) {
  assert_non_null(b.data);
  assert_int_equal(b.size, n);
  if (n) assert_memory_equal(b.data, want, n);
}

static int64_t row_id(const est_batch *b, int r) { return ((const int64_t *)est_batch_feature(b, "id")->data)[r]; }

/* ---- FixedLen strings ---------------------------------------------------------------- */

static void test_fixed_len_strings(void **state) {
  (void)state;
  char name_default[2] = "?";
  est_bytes pair2_default[2] = {{1, (uint8_t *)"x"}, {2, (uint8_t *)"yy"}};
  est_feature_spec specs[4] = {
    {.key = "id", .dtype = EST_DT_INT64, .rank = 0},
    {.key = "name", .dtype = EST_DT_STRING, .rank = 0,
     .default_value = &(est_bytes){1, (uint8_t *)name_default}, .default_count = 1},
    {.key = "pair", .dtype = EST_DT_STRING, .rank = 1, .shape = {2}},
    {.key = "pair2", .dtype = EST_DT_STRING, .rank = 1, .shape = {2}, .default_value = pair2_default, .default_count = 2},
  };
  for (int prefetch = 0; prefetch <= 2; prefetch += 2) {
    est_dataset *ds = open_feat(specs, 4, EST_DATASET_CAST_NONE);
    name_default[0] = '!'; /* the default's bytes were copied */
    assert_int_equal(est_dataset_batch(ds, 3, 0), EST_OK);
    assert_int_equal(est_dataset_prefetch(ds, prefetch), EST_OK);
    const est_batch *b;
    int seen = 0, batches = 0;
    est_status st;
    while ((st = est_dataset_next(ds, &b)) == EST_OK) {
      batches++;
      const est_tensor *name = est_batch_feature(b, "name"), *pair = est_batch_feature(b, "pair"),
                       *pair2 = est_batch_feature(b, "pair2");
      assert_int_equal(name->dtype, EST_DT_STRING);
      assert_int_equal(name->rank, 1);
      assert_int_equal(name->dims[0], b->size);
      assert_int_equal(pair->dtype, EST_DT_STRING);
      assert_int_equal(pair->rank, 2);
      assert_int_equal(pair->dims[0], b->size);
      assert_int_equal(pair->dims[1], 2);
      assert_int_equal(pair2->rank, 2);
      assert_null(est_batch_lengths(b, "name"));
      assert_null(est_batch_lengths(b, "pair"));
      for (int r = 0; r < b->size; r++) {
        int i = (int)row_id(b, r);
        assert_int_equal(i, seen + r);
        char buf[700];
        const est_bytes *nv = name->data, *pv = pair->data, *qv = pair2->data;
        if (has_name(i)) assert_bytes(nv[r], buf, name_of(i, buf));
        else assert_bytes(nv[r], "?", 1);
        assert_bytes(pv[2 * r], buf, (size_t)sprintf(buf, "p%d", i));
        assert_bytes(pv[2 * r + 1], "", 0);
        if (i % 2 == 0) {
          assert_bytes(qv[2 * r], buf, (size_t)sprintf(buf, "q%d", i));
          assert_bytes(qv[2 * r + 1], "r", 1);
        } else {
          assert_bytes(qv[2 * r], "x", 1);
          assert_bytes(qv[2 * r + 1], "yy", 2);
        }
      }
      seen += b->size;
    }
    assert_int_equal(st, EST_ERR_OUT_OF_RANGE);
    assert_int_equal(seen, NREC);
    assert_int_equal(batches, 4);
    est_dataset_free(ds);
    name_default[0] = '?';
  }

  /* TF's errors, naming the file, record and feature */
  const est_feature_spec three[1] = {{.key = "pair", .dtype = EST_DT_STRING, .rank = 1, .shape = {3}}};
  const est_feature_spec required[1] = {{.key = "pair2", .dtype = EST_DT_STRING, .rank = 1, .shape = {2}}};
  const est_feature_spec as_int[1] = {{.key = "name", .dtype = EST_DT_INT64, .rank = 0}};
  const struct { const est_feature_spec *spec; const char *msg; } bad[] = {
    {three, "feat.tf_record record 0: Key: pair.  Can't parse serialized Example: Some bytes_list slice was not parsed."},
    {required, "feat.tf_record record 1: Feature: pair2 (data type: string) is required but could not be found."},
    {as_int, "feat.tf_record record 0: Key: name.  Data types don't match. Data type: string but expected type: int64"},
  };
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    est_dataset *ds = open_feat(bad[k].spec, 1, EST_DATASET_CAST_NONE);
    assert_int_equal(est_dataset_batch(ds, 4, 0), EST_OK);
    const est_batch *b;
    assert_int_equal(est_dataset_next(ds, &b), EST_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(est_error_message(), bad[k].msg));
    est_dataset_free(ds);
  }
}

/* ---- VarLen strings ------------------------------------------------------------------ */

static void test_varlen_strings(void **state) {
  (void)state;
  const est_feature_spec specs[2] = {
    {.key = "id", .dtype = EST_DT_INT64, .rank = 0},
    {.key = "toks", .dtype = EST_DT_STRING, .var_len = EST_VAR_LEN},
  };
  est_dataset *ds = open_feat(specs, 2, EST_DATASET_CAST_INT32);
  assert_int_equal(est_dataset_batch(ds, 4, 0), EST_OK);
  const est_batch *b;
  int seen = 0;
  int64_t widest = 0;
  while (est_dataset_next(ds, &b) == EST_OK) {
    const est_tensor *t = est_batch_feature(b, "toks");
    const int64_t *len = est_batch_lengths(b, "toks");
    assert_non_null(len);
    assert_int_equal(t->dtype, EST_DT_STRING);
    assert_int_equal(t->rank, 2);
    assert_int_equal(t->dims[0], b->size);
    int64_t max_len = 0;
    for (int r = 0; r < b->size; r++) max_len = len[r] > max_len ? len[r] : max_len;
    assert_int_equal(t->dims[1], max_len);
    widest = max_len > widest ? max_len : widest;
    const est_bytes *v = t->data;
    for (int r = 0; r < b->size; r++) {
      int i = seen + r;
      assert_int_equal(((const int32_t *)est_batch_feature(b, "id")->data)[r], i);
      assert_int_equal(len[r], i % 4);
      for (int64_t k = 0; k < max_len; k++) {
        char buf[16];
        if (k < len[r]) assert_bytes(v[r * max_len + k], buf, tok_of(i, (int)k, buf));
        else assert_bytes(v[r * max_len + k], "", 0); /* padding: "" */
      }
    }
    seen += b->size;
  }
  assert_int_equal(seen, NREC);
  assert_int_equal(widest, 3);
  est_dataset_free(ds);
}

/* ---- FixedLenSequenceFeature ---------------------------------------------------------- */

static void check_sequences(const est_batch *b, int first, int cast) {
  const est_tensor *seq = est_batch_feature(b, "seq"), *pts = est_batch_feature(b, "pts"),
                   *words = est_batch_feature(b, "words");
  const int64_t *ls = est_batch_lengths(b, "seq"), *lp = est_batch_lengths(b, "pts"), *lw = est_batch_lengths(b, "words");
  assert_non_null(ls);
  assert_non_null(lp);
  assert_non_null(lw);
  int64_t max_steps = 0;
  for (int r = 0; r < b->size; r++) max_steps = steps_of(first + r) > max_steps ? steps_of(first + r) : max_steps;
  assert_int_equal(seq->dtype, cast ? EST_DT_INT32 : EST_DT_INT64);
  assert_int_equal(seq->rank, 2); /* [B, steps] */
  assert_int_equal(seq->dims[0], b->size);
  assert_int_equal(seq->dims[1], max_steps);
  assert_int_equal(pts->dtype, EST_DT_FLOAT);
  assert_int_equal(pts->rank, 3); /* [B, steps, 2] */
  assert_int_equal(pts->dims[0], b->size);
  assert_int_equal(pts->dims[1], max_steps);
  assert_int_equal(pts->dims[2], 2);
  assert_int_equal(words->dtype, EST_DT_STRING);
  assert_int_equal(words->dims[1], max_steps);
  for (int r = 0; r < b->size; r++) {
    const int i = first + r, n = steps_of(i);
    assert_int_equal(row_id(b, r), i);
    assert_int_equal(ls[r], n);
    assert_int_equal(lp[r], n);
    assert_int_equal(lw[r], n);
    for (int k = 0; k < max_steps; k++) {
      int64_t want = k < n ? 100 * i + k : -1; /* padded with the default value */
      int64_t got = cast ? ((const int32_t *)seq->data)[r * max_steps + k] : ((const int64_t *)seq->data)[r * max_steps + k];
      assert_int_equal(got, want);
      for (int c = 0; c < 2; c++) {
        float fw = k < n ? (float)i + 0.25f * (float)(2 * k + c) : 0.0f; /* no default: 0 */
        assert_true(((const float *)pts->data)[(r * max_steps + k) * 2 + c] == fw);
      }
      char buf[16];
      const est_bytes *wv = words->data;
      if (k < n) assert_bytes(wv[r * max_steps + k], buf, (size_t)sprintf(buf, "w%d_%d", i, k));
      else assert_bytes(wv[r * max_steps + k], "<pad>", 5);
    }
  }
}

static void test_fixed_len_sequence(void **state) {
  (void)state;
  int64_t seq_pad = -1;
  est_bytes word_pad = {5, (uint8_t *)"<pad>"};
  est_feature_spec specs[4] = {
    {.key = "id", .dtype = EST_DT_INT64, .rank = 0},
    {.key = "seq", .dtype = EST_DT_INT64, .var_len = EST_FIXED_LEN_SEQUENCE, .rank = 0, .default_value = &seq_pad,
     .default_count = 1},
    {.key = "pts", .dtype = EST_DT_FLOAT, .var_len = EST_FIXED_LEN_SEQUENCE, .rank = 1, .shape = {2}},
    {.key = "words", .dtype = EST_DT_STRING, .var_len = EST_FIXED_LEN_SEQUENCE, .rank = 0, .default_value = &word_pad,
     .default_count = 1},
  };
  for (int cast = 0; cast <= 1; cast++) {
    est_dataset *ds = open_feat(specs, 4, EST_DATASET_CAST_NONE);
    if (cast) assert_int_equal(est_dataset_cast_int32(ds, (const char *[]){"seq"}, 1), EST_OK);
    assert_int_equal(est_dataset_batch(ds, 3, 0), EST_OK);
    const est_batch *b;
    int seen = 0;
    while (est_dataset_next(ds, &b) == EST_OK) {
      check_sequences(b, seen, cast);
      seen += b->size;
    }
    assert_int_equal(seen, NREC);
    est_dataset_free(ds);
  }

  /* allow_missing: a batch where no record has the feature is [1, 0, ...] */
  est_example ex[3];
  make_record(&ex[0], 0);
  est_dataset *ds;
  assert_int_equal(est_dataset_from_examples(&ds, ex, 1), EST_OK);
  assert_int_equal(est_dataset_parse(ds, specs, 4, EST_DATASET_CAST_NONE), EST_OK);
  const est_batch *b;
  assert_int_equal(est_dataset_next(ds, &b), EST_OK);
  assert_int_equal(est_batch_feature(b, "pts")->dims[1], 0);
  assert_int_equal(est_batch_feature(b, "pts")->dims[2], 2);
  assert_int_equal(est_batch_lengths(b, "seq")[0], 0);
  est_dataset_free(ds);
  est_example_clear(&ex[0]);

  /* the count must be a multiple of prod(shape): parse_single_example's error, named */
  for (int i = 0; i < 3; i++) make_record(&ex[i], i + 1);
  float three[3] = {1, 2, 3};
  assert_int_equal(est_example_set_float(&ex[2], "pts", three, 3), EST_OK);
  char bad_path[512];
  snprintf(bad_path, sizeof bad_path, "%s/bad.tf_record", tmpdir);
  write_records(bad_path, ex, 3);
  const char *paths[1] = {bad_path};
  assert_int_equal(est_dataset_from_tfrecords(&ds, paths, 1, EST_COMPRESSION_NONE), EST_OK);
  assert_int_equal(est_dataset_parse(ds, specs, 4, EST_DATASET_CAST_NONE), EST_OK);
  assert_int_equal(est_dataset_batch(ds, 3, 0), EST_OK);
  assert_int_equal(est_dataset_next(ds, &b), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "bad.tf_record record 2: Error while parsing feature with key pts: number "
                                              "of elements should be divisible by 2, found 3 instead"));
  est_dataset_free(ds);
  for (int i = 0; i < 3; i++) est_example_clear(&ex[i]);

  /* an int64 padding value must fit the int32 cast like the values */
  seq_pad = (int64_t)1 << 40;
  ds = open_feat(specs, 4, EST_DATASET_CAST_INT32);
  assert_int_equal(est_dataset_next(ds, &b), EST_ERR_INVALID_ARGUMENT);
  assert_string_equal(est_error_message(), "dataset parse: feature seq padding value 1099511627776 does not fit int32");
  est_dataset_free(ds);
}

/* ---- shuffle + exact resume with strings ------------------------------------------- */

/* Appends a text form of every value of a batch to out (id, name, toks, words per row). */
static void digest(const est_batch *b, char *out, size_t cap) {
  const est_tensor *name = est_batch_feature(b, "name"), *toks = est_batch_feature(b, "toks"),
                   *words = est_batch_feature(b, "words");
  const int64_t *lt = est_batch_lengths(b, "toks"), *lw = est_batch_lengths(b, "words");
  size_t o = strlen(out);
  for (int r = 0; r < b->size; r++) {
    const est_bytes *n = (const est_bytes *)name->data + r;
    o += (size_t)snprintf(out + o, cap - o, "%lld:%.*s:%lld", (long long)row_id(b, r), (int)n->size,
                          (const char *)n->data, (long long)lw[r]);
    for (int64_t k = 0; k < lt[r]; k++) {
      const est_bytes *t = (const est_bytes *)toks->data + r * toks->dims[1] + k;
      o += (size_t)snprintf(out + o, cap - o, ",%.*s", (int)t->size, (const char *)t->data);
    }
    for (int64_t k = 0; k < words->dims[1]; k++) {
      const est_bytes *w = (const est_bytes *)words->data + r * words->dims[1] + k;
      o += (size_t)snprintf(out + o, cap - o, "/%.*s", (int)w->size, (const char *)w->data);
    }
    o += (size_t)snprintf(out + o, cap - o, ";");
  }
}

static est_dataset *shuffled_strings(void) {
  const est_feature_spec specs[4] = {
    {.key = "id", .dtype = EST_DT_INT64, .rank = 0},
    {.key = "name", .dtype = EST_DT_STRING, .rank = 0, .default_value = &(est_bytes){1, (uint8_t *)"-"},
     .default_count = 1},
    {.key = "toks", .dtype = EST_DT_STRING, .var_len = EST_VAR_LEN},
    {.key = "words", .dtype = EST_DT_STRING, .var_len = EST_FIXED_LEN_SEQUENCE, .rank = 0},
  };
  est_dataset *ds = open_feat(specs, 4, EST_DATASET_CAST_NONE);
  assert_int_equal(est_dataset_repeat(ds, 3), EST_OK);
  assert_int_equal(est_dataset_shuffle(ds, 5, 77), EST_OK);
  assert_int_equal(est_dataset_batch(ds, 4, 0), EST_OK);
  assert_int_equal(est_dataset_prefetch(ds, 2), EST_OK);
  return ds;
}

static void test_shuffle_resume_strings(void **state) {
  (void)state;
  enum { CAP = 1 << 16 };
  char *full = calloc(CAP, 1), *resumed = calloc(CAP, 1);
  est_dataset *ds = shuffled_strings();
  const est_batch *b;
  int batches = 0, in_order = 1;
  while (est_dataset_next(ds, &b) == EST_OK) {
    for (int r = 0; r < b->size; r++)
      if (row_id(b, r) != (batches * 4 + r) % NREC) in_order = 0;
    digest(b, full, CAP);
    batches++;
  }
  assert_int_equal(batches, (3 * NREC + 3) / 4);
  assert_false(in_order); /* it did shuffle */
  est_dataset_free(ds);

  /* stop after 3 batches, keep the state, continue in a new dataset */
  ds = shuffled_strings();
  for (int k = 0; k < 3; k++) {
    assert_int_equal(est_dataset_next(ds, &b), EST_OK);
    digest(b, resumed, CAP);
  }
  size_t n = est_dataset_state_size(ds), got;
  int64_t *st = calloc(n, sizeof *st);
  assert_int_equal(est_dataset_get_state(ds, st, n, &got), EST_OK);
  est_dataset_free(ds);
  ds = shuffled_strings();
  assert_int_equal(est_dataset_set_state(ds, st, n), EST_OK);
  while (est_dataset_next(ds, &b) == EST_OK) digest(b, resumed, CAP);
  est_dataset_free(ds);
  assert_string_equal(resumed, full);
  assert_non_null(strstr(full, ",t1_0/w1_0")); /* strings really are in the digest */
  assert_non_null(strstr(full, "3:dddd:0,t3_0,,t3_2"));
  free(st);
  free(full);
  free(resumed);
}

/* ---- the Estimator: a model_fn sees the row lengths -------------------------------- */

typedef struct len_model {
  int64_t out[3][16];
  est_tensor t[3];
  int calls;
} len_model;

static est_status len_build(const est_model_context *ctx, est_var_store *vs, void **out) {
  assert_true(ctx->batch_size <= 16);
  len_model *m = calloc(1, sizeof *m);
  *out = m;
  int w;
  return est_vars_declare(vs, "w", 1, (int64_t[]){1}, est_init_zeros(), &w);
}

/* PREDICT: per row, the length of toks, the sum of its real values, and the steps of seq */
static est_status len_call(void *model, est_var_store *vs, const est_features *f, est_mode mode, int64_t step,
                           est_estimator_spec *spec) {
  (void)vs, (void)mode, (void)step;
  len_model *m = model;
  const est_tensor *vals, *seq;
  est_status st;
  if ((st = est_features_get(f, "vals", EST_DT_INT64, 2, &vals))) return st;
  if ((st = est_features_get(f, "seq", EST_DT_INT64, 2, &seq))) return st;
  const int64_t *len = est_features_lengths(f, "vals"), *steps = est_features_lengths(f, "seq");
  if (!len || !steps || est_features_lengths(f, "id") || est_features_lengths(f, "nope"))
    return est_error(EST_ERR_INTERNAL, "row lengths missing");
  for (int r = 0; r < f->batch_size; r++) {
    int64_t sum = 0;
    for (int64_t k = 0; k < len[r]; k++) sum += ((const int64_t *)vals->data)[r * vals->dims[1] + k];
    m->out[0][r] = len[r];
    m->out[1][r] = sum;
    m->out[2][r] = steps[r];
  }
  for (int k = 0; k < 3; k++) m->t[k] = (est_tensor){.dtype = EST_DT_INT64, .rank = 1, .dims = {f->batch_size}, .data = m->out[k]};
  static const char *const names[3] = {"len", "sum", "steps"};
  spec->num_predictions = 3;
  spec->prediction_names = names;
  spec->predictions = m->t;
  m->calls++;
  return EST_OK;
}

static est_status check_prediction(void *ctx, const est_prediction *p) {
  int *seen = ctx;
  const int64_t i = p->index;
  const int64_t len = i % 4, want_sum = len * i + len * (len - 1) / 2; /* vals: i, i+1, ... */
  assert_int_equal(*(const int64_t *)p->values[0].data, len);
  assert_int_equal(*(const int64_t *)p->values[1].data, want_sum);
  assert_int_equal(*(const int64_t *)p->values[2].data, steps_of((int)i));
  (*seen)++;
  return EST_OK;
}

static void test_estimator_sees_lengths(void **state) {
  (void)state;
  enum { N = 23 };
  est_example ex[N];
  for (int i = 0; i < N; i++) {
    make_record(&ex[i], i);
    int64_t vals[3] = {i, i + 1, i + 2};
    if (i % 4) assert_int_equal(est_example_set_int64(&ex[i], "vals", vals, (size_t)(i % 4)), EST_OK);
  }
  char path[512], dir[256];
  snprintf(path, sizeof path, "%s/vals.tf_record", tmpdir);
  write_records(path, ex, N);
  for (int i = 0; i < N; i++) est_example_clear(&ex[i]);
  test_make_tmpdir(dir, sizeof dir);

  const est_feature_spec specs[3] = {
    {.key = "id", .dtype = EST_DT_INT64, .rank = 0},
    {.key = "vals", .dtype = EST_DT_INT64, .var_len = EST_VAR_LEN},
    {.key = "seq", .dtype = EST_DT_INT64, .var_len = EST_FIXED_LEN_SEQUENCE, .rank = 0},
  };
  const char *paths[1] = {path};
  est_tfrecord_input cfg = {.paths = paths, .num_paths = 1, .specs = specs, .num_specs = 3, .prefetch = 1};
  est_input_fn in = est_tfrecord_input_fn(&cfg);
  est_model_fn fn = {.name = "lengths", .build = len_build, .call = len_call, .destroy = free};
  est_run_config rc = est_run_config_default();
  rc.model_dir = dir;
  rc.predict_batch_size = 5;
  est_estimator *e;
  assert_int_equal(est_estimator_create(&e, &fn, &rc), EST_OK);
  int seen = 0;
  assert_int_equal(est_estimator_predict(e, &in, NULL, check_prediction, &seen), EST_OK);
  assert_int_equal(seen, N);
  est_input_fn_release(&in);
  est_estimator_free(e);
  test_remove_tree(dir);
}

/* est/estimator.h's ownership rule: est_tfrecord_input_fn copies its config. Everything the
 * config points to (the path, a spec's key, a STRING default) is overwritten after the
 * input_fn is built, as run_classifier once reused one path buffer for its TRAIN and EVAL
 * inputs; the input still reads the first file with the first specs. */
static void test_input_fn_owns_its_config(void **state) {
  (void)state;
  enum { N = 5 };
  est_example ex[N];
  for (int i = 0; i < N; i++) make_record(&ex[i], 100 + i);
  char other[512];
  snprintf(other, sizeof other, "%s/other.tf_record", tmpdir);
  write_records(other, ex, N);
  for (int i = 0; i < N; i++) est_example_clear(&ex[i]);

  char path[512], key[8] = "id", fallback[8] = "dflt";
  snprintf(path, sizeof path, "%s", feat_path);
  const char *paths[1] = {path};
  est_bytes fallback_bytes = {4, (uint8_t *)fallback};
  est_feature_spec specs[2] = {
    {.key = key, .dtype = EST_DT_INT64, .rank = 0},
    {.key = "absent", .dtype = EST_DT_STRING, .rank = 0, .default_value = &fallback_bytes, .default_count = 1},
  };
  est_tfrecord_input cfg = {.paths = paths, .num_paths = 1, .specs = specs, .num_specs = 2};
  est_input_fn fn = est_tfrecord_input_fn(&cfg);
  assert_non_null(fn.release);

  snprintf(path, sizeof path, "%s", other);   /* the next input's file in the same buffer */
  snprintf(key, sizeof key, "name");
  snprintf(fallback, sizeof fallback, "XXXX");
  specs[1] = (est_feature_spec){0};
  cfg.num_specs = 1;

  const est_input_params params = {.mode = EST_MODE_EVAL, .batch_size = 4, .num_shards = 1};
  est_input in;
  assert_int_equal(fn.open(fn.ctx, &params, &in), EST_OK);
  est_features batch;
  assert_int_equal(in.next(in.self, &batch), EST_OK);
  const est_tensor *id = est_features_find(&batch, "id"), *absent = est_features_find(&batch, "absent");
  assert_non_null(id), assert_non_null(absent);
  assert_null(est_features_find(&batch, "name"));
  for (int r = 0; r < 4; r++) {
    assert_int_equal(((const int64_t *)id->data)[r], r);                     /* feat.tf_record's rows */
    assert_bytes(((const est_bytes *)absent->data)[r], "dflt", 4);
  }
  in.close(in.self);
  est_input_fn_release(&fn);
  assert_null(fn.ctx), assert_null(fn.open);
  est_input_fn_release(&fn);   /* cleared: nothing left to release */
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_fixed_len_strings),
    cmocka_unit_test(test_varlen_strings),
    cmocka_unit_test(test_fixed_len_sequence),
    cmocka_unit_test(test_shuffle_resume_strings),
    cmocka_unit_test(test_estimator_sees_lengths),
    cmocka_unit_test(test_input_fn_owns_its_config),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
