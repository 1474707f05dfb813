/* The encoder's options against transformers (docs/bert.md §11): tests/data/encoders' tiny
 * RobertaModel, XLMRobertaModel, DistilBertModel and ElectraModel directories, written with
 * their outputs and gradients by tests/reference/encoder_golden.py (transformers 4.44.2,
 * torch 2.4.1), load through config.json and model.safetensors as any HF directory does;
 * est's embeddings and every layer's hidden states (and RoBERTa's pooled output) are
 * transformers' within 1e-5, and a training step's parameter gradients torch autograd's
 * within 1e-4 (both absolute, on values of order 1; fp32). Also: what each config.json turns
 * on, est's own bert_config.json round trip of the options, the position-id rule, the
 * sinusoidal table. ModernBERT's two directories (tests/reference/modernbert_golden.py,
 * transformers 4.48.3) the same way, and its config.json's refusals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/bert_encoder.h"
#include "est/hf_model.h"
#include "est/nn.h"
#include "est/precision.h"
#include "est/safetensors.h"
#include "test_util.h"

#define ENC_DIR EST_TEST_DATA "/encoders"

typedef struct {
  const char *dir;
  est_bert_config cfg;
  est_safetensors *golden;
  est_var_store *vs;
  est_bert_encoder *enc;
} model;

static est_tensor read_golden(est_safetensors *g, const char *name) {
  est_tensor t;
  if (est_safetensors_read(g, name, &t) != EST_OK) fail_msg("golden tensor %s: %s", name, est_error_message());
  return t;
}

static void open_model(model *m, const char *name) {
  static char dir[1024];
  snprintf(dir, sizeof dir, ENC_DIR "/%s", name);
  m->dir = dir;
  if (est_bert_config_from_json_file(&m->cfg, dir) != EST_OK) fail_msg("%s: %s", dir, est_error_message());
  char path[1200];
  snprintf(path, sizeof path, "%s/golden.safetensors", dir);
  assert_int_equal(est_safetensors_open(&m->golden, path), EST_OK);
  assert_int_equal(est_vars_create(&m->vs), EST_OK);
  assert_int_equal(est_bert_encoder_create(&m->enc, &m->cfg, m->vs), EST_OK);
  assert_int_equal(est_vars_finalize(m->vs, 1), EST_OK);
  size_t loaded = 0;
  if (est_hf_load_vars(m->vs, dir, &loaded) != EST_OK) fail_msg("%s: %s", dir, est_error_message());
  /* every encoder variable but the pooler, which only RoBERTa's models have */
  assert_int_equal(est_hf_require_vars(m->vs, est_bert_encoder_first_variable(m->enc),
                                       est_bert_encoder_last_variable(m->enc), dir),
                   EST_OK);
}

static void close_model(model *m) {
  est_bert_encoder_free(m->enc);
  est_vars_free(m->vs);
  est_safetensors_close(m->golden);
}

static void assert_close(const char *what, const float *got, const est_tensor *want, double tol) {
  size_t n = (size_t)est_tensor_num_elements(want);
  const float *w = want->data;
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)got[i] - w[i]);
    if (!(d <= worst)) worst = d, at = i;
  }
  if (!(worst <= tol)) fail_msg("%s: max |est - transformers| = %g at %zu (est %g, transformers %g) > %g", what, worst,
                                at, got[at], w[at], tol);
}

/* Forward every hidden state, then a backward of sum(seq * probe) + sum(pooled * probe):
 * each gradient the golden has, mapped by the family's name table (at least min_grads of
 * them). A golden with last_hidden_state (ModernBERT's, after its final norm; its last
 * hidden_states entry is before it) checks the sequence output too. */
static void check_model(const char *name, int has_pooler, size_t min_grads) {
  model m;
  open_model(&m, name);
  est_tensor ids = read_golden(m.golden, "input_ids"), mask = read_golden(m.golden, "input_mask"),
             segs = read_golden(m.golden, "segment_ids");
  const int B = (int)ids.dims[0], S = (int)ids.dims[1], H = m.cfg.hidden_size, L = m.cfg.num_hidden_layers;
  assert_int_equal(est_bert_encoder_reserve(m.enc, B, S, 1), EST_OK);
  assert_int_equal(est_bert_encoder_forward(m.enc, ids.data, mask.data, segs.data, B, S, 0, 0, 0), EST_OK);
  char key[64], what[128];
  for (int i = 0; i <= L; i++) {
    snprintf(key, sizeof key, "hidden_states.%d", i);
    est_tensor want = read_golden(m.golden, key);
    assert_int_equal(est_tensor_num_elements(&want), (int64_t)B * S * H);
    snprintf(what, sizeof what, "%s %s", name, key);
    assert_close(what, i ? est_bert_encoder_layer_output(m.enc, i - 1) : est_bert_encoder_embedding_output(m.enc),
                 &want, 1e-5);
    est_tensor_free(&want);
  }
  if (est_safetensors_has(m.golden, "last_hidden_state")) {
    est_tensor want = read_golden(m.golden, "last_hidden_state");
    snprintf(what, sizeof what, "%s last_hidden_state", name);
    assert_close(what, est_bert_encoder_sequence_output(m.enc), &want, 1e-5);
    est_tensor_free(&want);
  }
  if (has_pooler) {
    est_tensor want = read_golden(m.golden, "pooled_output");
    snprintf(what, sizeof what, "%s pooled_output", name);
    assert_close(what, est_bert_encoder_pooled_output(m.enc), &want, 1e-5);
    est_tensor_free(&want);
  }

  /* the training step */
  est_vars_zero_grads(m.vs);
  est_tensor probe = read_golden(m.golden, "probe_sequence");
  float *dseq = est_bert_encoder_sequence_output_grad(m.enc);
  for (size_t i = 0; i < (size_t)B * S * H; i++) dseq[i] += ((const float *)probe.data)[i];
  est_tensor_free(&probe);
  if (has_pooler) {
    probe = read_golden(m.golden, "probe_pooled");
    float *dpool = est_bert_encoder_pooled_output_grad(m.enc);
    for (size_t i = 0; i < (size_t)B * H; i++) dpool[i] += ((const float *)probe.data)[i];
    est_tensor_free(&probe);
  }
  assert_int_equal(est_bert_encoder_backward(m.enc), EST_OK);
  size_t checked = 0;
  for (size_t i = 0; i < est_safetensors_count(m.golden); i++) {
    const char *gname = est_safetensors_name(m.golden, i);
    if (strncmp(gname, "grad.", 5)) continue;
    char tf[EST_VAR_NAME_MAX];
    int transpose = 0;
    if (!est_hf_family_name_to_tf(m.cfg.opt.family, gname + 5, tf, sizeof tf, &transpose))
      fail_msg("%s: no est name for %s", name, gname + 5);
    int v = est_vars_find(m.vs, tf);
    if (v < 0) fail_msg("%s: %s maps to %s, which est does not declare", name, gname + 5, tf);
    const est_variable *var = est_vars_at(m.vs, (size_t)v);
    est_tensor want = read_golden(m.golden, gname);
    assert_int_equal((size_t)est_tensor_num_elements(&want), var->count);
    const float *g = est_vars_grad(m.vs, (size_t)v);
    float *got = malloc(var->count * sizeof(float));
    if (transpose) { /* est's kernel [in,out] -> torch's weight [out,in] */
      const int64_t I = var->dims[0], O = var->dims[1];
      for (int64_t o = 0; o < O; o++)
        for (int64_t k = 0; k < I; k++) got[o * I + k] = g[k * O + o];
    } else {
      memcpy(got, g, var->count * sizeof(float));
    }
    snprintf(what, sizeof what, "%s d %s", name, gname + 5);
    assert_close(what, got, &want, 1e-4);
    free(got);
    est_tensor_free(&want);
    checked++;
  }
  if (checked < min_grads) fail_msg("%s: %zu gradients checked, expected %zu", name, checked, min_grads);
  est_tensor_free(&ids), est_tensor_free(&mask), est_tensor_free(&segs);
  close_model(&m);
}

static void test_roberta(void **state) {
  (void)state;
  check_model("roberta", 1, 30);
}
static void test_xlm_roberta(void **state) {
  (void)state;
  check_model("xlm_roberta", 1, 30);
}
static void test_distilbert_sinusoidal(void **state) {
  (void)state;
  check_model("distilbert", 0, 30);
}
static void test_electra_embeddings_project(void **state) {
  (void)state;
  check_model("electra", 0, 30);
}
/* ModernBERT: pre-LN (layer 0 without attn_norm), rotary positions with two thetas, GeGLU,
 * the fused Wqkv, a sliding window on layer 1 over inputs three times its width, the final
 * norm; without biases (20 tensors: tok_embeddings, its norm, 3 x (Wqkv, Wo, mlp_norm, Wi,
 * Wo), 2 attn_norms, final_norm), then with every bias (36). */
static void test_modernbert(void **state) {
  (void)state;
  check_model("modernbert", 0, 20);
}
static void test_modernbert_with_biases(void **state) {
  (void)state;
  check_model("modernbert_bias", 0, 36);
}

/* What each config.json turns on. */
static void test_configs_set_the_options(void **state) {
  (void)state;
  est_bert_config c;
  assert_int_equal(est_bert_config_from_json_file(&c, ENC_DIR "/roberta"), EST_OK);
  assert_int_equal(c.opt.family, EST_FAMILY_ROBERTA);
  assert_int_equal(c.opt.position_ids, EST_POS_IDS_AFTER_PADDING);
  assert_int_equal(c.opt.token_types, EST_TYPES_ZERO);
  assert_int_equal(c.pad_token_id, 1);
  assert_true(fabs(c.layer_norm_eps - 1e-5) < 1e-12);
  assert_int_equal(est_bert_config_max_seq_length(&c), c.max_position_embeddings - 2);
  assert_int_equal(est_bert_config_from_json_file(&c, ENC_DIR "/distilbert/config.json"), EST_OK);
  assert_int_equal(c.opt.family, EST_FAMILY_DISTILBERT);
  assert_int_equal(c.opt.positions, EST_POS_SINUSOIDAL);
  assert_int_equal(c.opt.token_types, EST_TYPES_NONE);
  assert_int_equal(c.hidden_size, 21);
  assert_int_equal(c.num_attention_heads, 3);
  assert_int_equal(c.intermediate_size, 37);
  assert_int_equal(c.num_hidden_layers, 2);
  assert_int_equal(c.hidden_act, EST_ACT_GELU_EXACT);
  assert_int_equal(est_bert_config_from_json_file(&c, ENC_DIR "/electra"), EST_OK);
  assert_int_equal(c.opt.family, EST_FAMILY_ELECTRA);
  assert_int_equal(c.opt.embedding_size, 13);
  assert_int_equal(c.opt.token_types, EST_TYPES_SEGMENTS);
  assert_int_equal(est_hf_family_of(ENC_DIR "/electra/model.safetensors"), EST_FAMILY_ELECTRA);
  assert_int_equal(est_hf_family_of(EST_TEST_DATA "/hf/cls_gelu"), EST_FAMILY_BERT);
  assert_int_equal(est_bert_config_from_json_file(&c, ENC_DIR "/modernbert"), EST_OK);
  assert_int_equal(c.opt.family, EST_FAMILY_MODERNBERT);
  assert_int_equal(c.opt.norm, EST_NORM_PRE);
  assert_int_equal(c.opt.positions, EST_POS_ROTARY);
  assert_int_equal(c.opt.ffn, EST_FFN_GLU);
  assert_int_equal(c.opt.token_types, EST_TYPES_NONE);
  assert_true(c.opt.qkv_fused && c.opt.no_bias && c.opt.pad_rows_frozen);
  assert_int_equal(c.opt.global_attn_every_n_layers, 2);
  assert_int_equal(c.opt.local_attention, 8);
  assert_true(c.opt.rotary_theta == 160000.0 && c.opt.rotary_theta_local == 10000.0);
  assert_int_equal(c.hidden_act, EST_ACT_GELU_EXACT);
  assert_true(fabs(c.layer_norm_eps - 1e-5) < 1e-12);
  assert_true(c.hidden_dropout_prob == 0.0 && c.attention_probs_dropout_prob == 0.0);
  assert_int_equal(est_bert_config_from_json_file(&c, ENC_DIR "/modernbert_bias"), EST_OK);
  assert_false(c.opt.no_bias);
}

/* est's own bert_config.json (exports) keeps the options: written only when they differ
 * from BERT's, read back equal. */
static void test_bert_config_json_keeps_the_options(void **state) {
  (void)state;
  const char *names[] = {"roberta", "xlm_roberta", "distilbert", "electra", "modernbert"};
  for (size_t i = 0; i < 5; i++) {
    char dir[512];
    snprintf(dir, sizeof dir, ENC_DIR "/%s", names[i]);
    est_bert_config c, back;
    assert_int_equal(est_bert_config_from_json_file(&c, dir), EST_OK);
    char *text = est_bert_config_to_json_string(&c);
    assert_non_null(strstr(text, "\"encoder_options\""));
    if (est_bert_config_from_json_string(&back, text, "est") != EST_OK) fail_msg("%s: %s", text, est_error_message());
    assert_memory_equal(&back.opt, &c.opt, sizeof c.opt);
    assert_true((float)back.layer_norm_eps == (float)c.layer_norm_eps); /* est runs a float eps */
    assert_int_equal(back.pad_token_id, c.pad_token_id);
    free(text);
  }
  est_bert_config bert = est_bert_config_default();
  bert.vocab_size = 10;
  char *text = est_bert_config_to_json_string(&bert);
  assert_null(strstr(text, "encoder_options"));
  assert_null(strstr(text, "layer_norm_eps"));
  free(text);
  /* an option's bad value is named */
  const char *rope = "{\"vocab_size\": 9, \"hidden_size\": 9, \"num_attention_heads\": 3, "
                     "\"encoder_options\": {\"positions\": \"rotary\", \"rotary_theta\": 10000.0}}";
  assert_int_equal(est_bert_config_from_json_string(&bert, rope, "rope.json"), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "rope.json: rotary positions need an even head size, got 3"));
  const char *bad = "{\"vocab_size\": 9, \"encoder_options\": {\"positions\": \"alibi\"}}";
  assert_int_equal(est_bert_config_from_json_string(&bert, bad, "bad.json"), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "encoder_options.positions"));
}

/* transformers' create_position_ids_from_input_ids, and DistilBERT's fixed table. */
static void test_position_ids_and_sinusoid(void **state) {
  (void)state;
  const int32_t ids[2 * 5] = {0, 7, 8, 2, 1, 1, 7, 1, 9, 1};
  int32_t pos[10];
  est_position_ids_after_padding(pos, ids, 2, 5, 1);
  const int32_t want[10] = {2, 3, 4, 5, 1, 1, 2, 1, 3, 1};
  assert_memory_equal(pos, want, sizeof want);
  float t[3 * 4];
  est_sinusoidal_positions(t, 3, 4);
  assert_true(t[0] == 0.0f && t[1] == 1.0f && t[2] == 0.0f && t[3] == 1.0f);
  assert_true(t[4] == (float)sin(1.0) && t[5] == (float)cos(1.0));
  assert_true(t[6] == (float)sin(1.0 / 100.0) && t[7] == (float)cos(1.0 / 100.0));
}

/* A position past the table is an error naming it; RoBERTa's reservation allows 2 fewer. */
static void test_position_limits(void **state) {
  (void)state;
  model m;
  open_model(&m, "roberta");
  const int P = m.cfg.max_position_embeddings;
  assert_int_equal(est_bert_encoder_reserve(m.enc, 1, P - 1, 0), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "Cannot use sequence length"));
  assert_int_equal(est_bert_encoder_reserve(m.enc, 1, P - 2, 0), EST_OK);
  close_model(&m);
}

/* `est embed --model_dir=DIR` opens each family's directory (WordPiece vocab.txt; their own
 * tokenizers are issue 47's) and prints one hidden_size-wide vector; the default 128 tokens
 * beyond RoBERTa's 10 positions is refused naming them. */
static void test_embed_opens_each_family(void **state) {
  (void)state;
  const char *names[] = {"roberta", "xlm_roberta", "distilbert", "electra", "modernbert"};
  const int widths[] = {21, 30, 21, 21, 24};
  for (size_t i = 0; i < 5; i++) {
    char *out = test_run_ok("echo 'the movie was good' | " EST_BIN " embed --model_dir=" ENC_DIR "/%s "
                            "--max_seq_length=10 --num_threads=1 2>/dev/null", names[i]);
    int commas = 0;
    for (const char *p = out; *p; p++) commas += *p == ',';
    if (commas != widths[i] - 1) fail_msg("%s: %d numbers in: %s", names[i], commas + 1, out);
    free(out);
  }
  char *log = NULL;
  int rc = test_run(&log, 1, "echo hi | " EST_BIN " embed --model_dir=" ENC_DIR "/roberta --max_seq_length=11");
  assert_int_equal(rc, 1);
  if (!strstr(log, "--max_seq_length=11: must be in [3, max_position_embeddings 10]")) fail_msg("%s", log);
  free(log);
}

/* The pre-LN layers under est's recompute (each layer's forward again in its backward) give
 * the same gradients bit for bit, dropouts on (est's own config may set them); a forward-only
 * reservation the same outputs. */
static void run_step(est_bert_config cfg, int recompute, int with_backward, float **grads, float **seq,
                     size_t *ngrads) {
  est_var_store *vs;
  est_bert_encoder *enc;
  assert_int_equal(est_vars_create(&vs), EST_OK);
  assert_int_equal(est_bert_encoder_create(&enc, &cfg, vs), EST_OK);
  assert_int_equal(est_vars_finalize(vs, 1), EST_OK);
  assert_int_equal(est_hf_load_vars(vs, ENC_DIR "/modernbert_bias", NULL), EST_OK);
  est_bert_encoder_set_recompute(enc, recompute);
  enum { B = 2, S = 24 };
  int32_t ids[B * S], mask[B * S];
  for (int i = 0; i < B * S; i++) ids[i] = 5 + (i * 7) % 30, mask[i] = i < S || i % S < 19;
  assert_int_equal(est_bert_encoder_reserve(enc, B, S, with_backward), EST_OK);
  assert_int_equal(est_bert_encoder_forward(enc, ids, mask, NULL, B, S, with_backward, 9, 3), EST_OK);
  const size_t TH = (size_t)B * S * cfg.hidden_size;
  *seq = malloc(TH * sizeof(float));
  memcpy(*seq, est_bert_encoder_sequence_output(enc), TH * sizeof(float));
  *grads = NULL;
  if (with_backward) {
    est_vars_zero_grads(vs);
    float *d = est_bert_encoder_sequence_output_grad(enc);
    for (size_t i = 0; i < TH; i++) d[i] = (float)((i % 13) - 6) * 0.1f;
    assert_int_equal(est_bert_encoder_backward(enc), EST_OK);
    *ngrads = est_vars_size(vs);
    *grads = malloc(*ngrads * sizeof(float));
    memcpy(*grads, est_vars_grads(vs), *ngrads * sizeof(float));
  }
  est_bert_encoder_free(enc);
  est_vars_free(vs);
}

static void test_modernbert_recompute_and_forward_only(void **state) {
  (void)state;
  est_bert_config cfg;
  assert_int_equal(est_bert_config_from_json_file(&cfg, ENC_DIR "/modernbert_bias"), EST_OK);
  cfg.hidden_dropout_prob = 0.1, cfg.attention_probs_dropout_prob = 0.1;
  float *g0, *g1, *s0, *s1, *g2, *s2;
  size_t n0, n1, n2;
  run_step(cfg, 0, 1, &g0, &s0, &n0);
  run_step(cfg, 1, 1, &g1, &s1, &n1);
  assert_int_equal(n0, n1);
  assert_memory_equal(s0, s1, sizeof(float) * 2 * 24 * cfg.hidden_size);
  assert_memory_equal(g0, g1, sizeof(float) * n0);
  double norm = 0;
  for (size_t i = 0; i < n0; i++) norm += fabs(g0[i]);
  assert_true(norm > 0);
  cfg.hidden_dropout_prob = cfg.attention_probs_dropout_prob = 0.0;
  free(g0), free(s0);
  run_step(cfg, 0, 1, &g0, &s0, &n0);
  run_step(cfg, 0, 0, &g2, &s2, &n2);
  assert_memory_equal(s0, s2, sizeof(float) * 2 * 24 * cfg.hidden_size);
  free(g0), free(g1), free(s0), free(s1), free(s2);
}

/* bf16 and int8 inference on every family: the sequence output against transformers' fp32
 * one within test_bert_golden_bf16's and test_bert_golden_int8's tolerances (docs/precision.md
 * §6; the derivations are in those tests): 6 sigma of the chained rounding, relative to the
 * tensor's largest |value|, for a depth of 6 products per layer in bf16 (Q/K/V, attention
 * scores and context, output, FFN in and out; ModernBERT's fused Wqkv and GeGLU Wi are one
 * product each) and 4 int8 ones per layer in int8 (the attention's per-head products run
 * bf16 there, a tenth of int8's error). And the precision ran: the output differs from fp32
 * somewhere by more than fp32's own 1e-5. Each precision is skipped where the CPU runs it in
 * fp32. */
static double scaled_error(const float *a, const float *b, size_t n, double rel, double *raw) {
  double scale = 0, worst = 0;
  *raw = 0;
  for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(b[i]));
  for (size_t i = 0; i < n; i++) {
    worst = fmax(worst, fabs((double)a[i] - b[i]) / (rel * scale));
    *raw = fmax(*raw, fabs((double)a[i] - b[i]));
  }
  return worst;
}

static void check_precision(est_precision precision) {
  if (est_precision_resolve(precision) != precision) skip(); /* fp32 on this CPU: nothing to check */
  const char *names[] = {"roberta", "xlm_roberta", "distilbert", "electra", "modernbert", "modernbert_bias"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    model m;
    open_model(&m, names[i]);
    est_tensor ids = read_golden(m.golden, "input_ids"), mask = read_golden(m.golden, "input_mask"),
               segs = read_golden(m.golden, "segment_ids");
    const int B = (int)ids.dims[0], S = (int)ids.dims[1], L = m.cfg.num_hidden_layers;
    char key[64];
    snprintf(key, sizeof key, "hidden_states.%d", L);
    est_tensor want = read_golden(m.golden, est_safetensors_has(m.golden, "last_hidden_state") ? "last_hidden_state"
                                                                                              : key);
    est_vars_set_read_only(m.vs, 1); /* as inference runs it: the weights packed once */
    assert_int_equal((int)est_bert_encoder_set_precision(m.enc, precision), (int)precision);
    assert_int_equal(est_bert_encoder_reserve(m.enc, B, S, 0), EST_OK);
    assert_int_equal(est_bert_encoder_forward(m.enc, ids.data, mask.data, segs.data, B, S, 0, 0, 0), EST_OK);
    const double u = 1.0 / 256;
    const double tol = precision == EST_PRECISION_BF16 ? 6.0 * sqrt(2.0 / 3.0) * u * sqrt(6.0 * L)
                                                       : 6.0 * sqrt(50.0 / 12.0) / 127.0 * sqrt(4.0 * L);
    double raw;
    const double r = scaled_error(est_bert_encoder_sequence_output(m.enc), want.data,
                                  (size_t)est_tensor_num_elements(&want), tol, &raw);
    printf("%s %s: at %.3f of the tolerance (%.2f%% of the scale), max |diff| %.3g\n", names[i],
           est_precision_name(precision), r, 100 * tol, raw);
    if (r > 1) fail_msg("%s: %s sequence output off by %.2fx its tolerance", names[i], est_precision_name(precision), r);
    if (!(raw > 1e-5)) fail_msg("%s: %s gave fp32's numbers (max |diff| %g)", names[i], est_precision_name(precision),
                                raw);
    est_tensor_free(&want), est_tensor_free(&ids), est_tensor_free(&mask), est_tensor_free(&segs);
    close_model(&m);
  }
}

static void test_families_bf16(void **state) {
  (void)state;
  check_precision(EST_PRECISION_BF16);
}
static void test_families_int8(void **state) {
  (void)state;
  check_precision(EST_PRECISION_INT8);
}

/* Long inputs: the tiny ModernBERT (rotary: no position table, so any max_position_embeddings
 * loads its weights) at 1300 tokens, the second example padded after 1000. Beyond
 * EST_ATTENTION_FULL_MAX_SEQ without attention dropout the tiled attention runs (no [S, S]
 * probabilities): forward-only and with a backward, every layer's output equals the
 * probability-keeping path's within 1e-5 on the real tokens (that path taken by a config with
 * attention dropout, run with training off), a backward's gradients within 1e-4 of its scale,
 * and the activations grow linearly with S. */
static est_bert_encoder *long_encoder(est_var_store **vs, int P, double attention_dropout) {
  est_bert_config cfg;
  assert_int_equal(est_bert_config_from_json_file(&cfg, ENC_DIR "/modernbert_bias"), EST_OK);
  cfg.max_position_embeddings = P;
  cfg.attention_probs_dropout_prob = attention_dropout;
  est_bert_encoder *enc;
  assert_int_equal(est_vars_create(vs), EST_OK);
  assert_int_equal(est_bert_encoder_create(&enc, &cfg, *vs), EST_OK);
  assert_int_equal(est_vars_finalize(*vs, 1), EST_OK);
  assert_int_equal(est_hf_load_vars(*vs, ENC_DIR "/modernbert_bias", NULL), EST_OK);
  return enc;
}

static void assert_layers_close(est_bert_encoder *x, est_bert_encoder *y, const int32_t *mask, int B, int S) {
  const int H = est_bert_encoder_config(x)->hidden_size, L = est_bert_encoder_config(x)->num_hidden_layers;
  for (int l = -1; l < L; l++) {
    const float *a = l < 0 ? est_bert_encoder_sequence_output(x) : est_bert_encoder_layer_output(x, l);
    const float *b = l < 0 ? est_bert_encoder_sequence_output(y) : est_bert_encoder_layer_output(y, l);
    double worst = 0; /* the real tokens' rows (a padded query whose window holds only padded
                         keys has its scores near -10000, where fp32 keeps 3 digits) */
    for (size_t t = 0; t < (size_t)B * S; t++)
      for (size_t j = 0; mask[t] && j < (size_t)H; j++) worst = fmax(worst, fabs((double)a[t * H + j] - b[t * H + j]));
    if (!(worst <= 1e-5)) fail_msg("layer %d: tiled vs full attention differ by %g", l, worst);
  }
}

static void test_long_inputs_tiled_attention(void **state) {
  (void)state;
  enum { B = 2, S = 1300, P = 4096 };
  int32_t *ids = malloc(B * S * sizeof(int32_t)), *mask = malloc(B * S * sizeof(int32_t));
  for (int i = 0; i < B * S; i++) ids[i] = 5 + (i * 11) % 35, mask[i] = i < S || i % S < 1000;
  est_var_store *vs[3];
  est_bert_encoder *fwd = long_encoder(&vs[0], P, 0.0), *train = long_encoder(&vs[1], P, 0.0),
                   *full = long_encoder(&vs[2], P, 0.1);
  assert_int_equal(est_bert_encoder_reserve(fwd, B, S, 0), EST_OK);
  assert_int_equal(est_bert_encoder_reserve(train, B, S, 1), EST_OK);
  assert_int_equal(est_bert_encoder_reserve(full, B, S, 1), EST_OK);
  est_bert_encoder *encs[3] = {fwd, train, full};
  for (int i = 0; i < 3; i++)
    assert_int_equal(est_bert_encoder_forward(encs[i], ids, mask, NULL, B, S, 0, 0, 0), EST_OK);
  assert_layers_close(fwd, full, mask, B, S);
  assert_layers_close(train, full, mask, B, S);
  /* the backward: the same probe on the real tokens' rows, every parameter's gradient */
  const int H = est_bert_encoder_config(full)->hidden_size;
  for (int i = 1; i < 3; i++) {
    est_vars_zero_grads(vs[i]);
    float *d = est_bert_encoder_sequence_output_grad(encs[i]);
    for (size_t t = 0; t < (size_t)B * S; t++)
      for (int j = 0; j < H; j++) d[t * H + j] = mask[t] ? (float)(((t * 7 + (size_t)j) % 13) - 6) * 0.01f : 0.0f;
    assert_int_equal(est_bert_encoder_backward(encs[i]), EST_OK);
  }
  size_t checked = 0;
  for (size_t v = 0; v < est_vars_count(vs[2]); v++) {
    const est_variable *var = est_vars_at(vs[2], v);
    if (!strncmp(var->name, "bert/pooler/", 12)) continue;
    const float *g1 = est_vars_grad(vs[1], v), *g2 = est_vars_grad(vs[2], v);
    double scale = 0, worst = 0;
    for (size_t i = 0; i < var->count; i++) scale = fmax(scale, fabs(g2[i]));
    for (size_t i = 0; i < var->count; i++) worst = fmax(worst, fabs((double)g1[i] - g2[i]));
    if (!(worst <= 1e-4 * fmax(scale, 1.0))) fail_msg("d %s: tiled vs full differ by %g (scale %g)", var->name, worst, scale);
    checked++;
  }
  assert_true(checked >= 36);
  /* no S x S: forward-only activations at 2S within a few percent of twice those at S */
  est_var_store *v1, *v2;
  est_bert_encoder *e1 = long_encoder(&v1, P, 0.0), *e2 = long_encoder(&v2, P, 0.0);
  assert_int_equal(est_bert_encoder_reserve(e1, 1, 2048, 1), EST_OK);
  assert_int_equal(est_bert_encoder_reserve(e2, 1, 4096, 1), EST_OK);
  const double r = (double)est_bert_encoder_activation_bytes(e2) / (double)est_bert_encoder_activation_bytes(e1);
  printf("activations with backward: %.1f KiB at 2048 tokens, %.1f KiB at 4096 (x%.3f)\n",
         est_bert_encoder_activation_bytes(e1) / 1024.0, est_bert_encoder_activation_bytes(e2) / 1024.0, r);
  assert_true(r < 2.05);
  est_bert_encoder_free(e1), est_bert_encoder_free(e2), est_vars_free(v1), est_vars_free(v2);
  for (int i = 0; i < 3; i++) est_bert_encoder_free(encs[i]), est_vars_free(vs[i]);
  free(ids), free(mask);
}

/* ModernBERT's config.json: a field est cannot honour is refused by name. */
static void test_modernbert_config_refusals(void **state) {
  (void)state;
  est_bert_config c;
  static const struct {
    const char *fields, *message;
  } cases[] = {
      {"\"mlp_dropout\": 0.1", "mb/config.json: field \"mlp_dropout\" = 0.1 is not supported"},
      {"\"attention_dropout\": 0.1", "field \"attention_dropout\" = 0.1 is not supported"},
      {"\"mlp_bias\": true", "fields \"attention_bias\" (false), \"mlp_bias\" (true) and \"norm_bias\" (false) must "
                             "be equal"},
      {"\"hidden_activation\": \"swish\"", "field \"hidden_activation\" must be one of"},
      {"\"num_attention_heads\": 8", "rotary positions need an even head size, got 3"},
      {"\"local_attention\": 0", "local_attention >= 2"},
      {"\"global_rope_theta\": 0", "positive rotary_theta"},
      {"\"model_type\": \"gpt2\"", "field \"model_type\" = \"gpt2\" is not supported"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char text[512];
    snprintf(text, sizeof text, "{\"model_type\": \"modernbert\", \"vocab_size\": 9, \"hidden_size\": 24, "
             "\"num_attention_heads\": 4, %s}", cases[i].fields);
    assert_int_equal(est_bert_config_from_json_string(&c, text, "mb/config.json"), EST_ERR_INVALID_ARGUMENT);
    if (!strstr(est_error_message(), cases[i].message)) fail_msg("%s: %s", text, est_error_message());
  }
  /* local_rope_theta null: the local layers take the global theta */
  const char *ok = "{\"model_type\": \"modernbert\", \"vocab_size\": 9, \"hidden_size\": 24, "
                   "\"num_attention_heads\": 4, \"local_rope_theta\": null, \"global_rope_theta\": 5000.0}";
  assert_int_equal(est_bert_config_from_json_string(&c, ok, "mb/config.json"), EST_OK);
  assert_true(c.opt.rotary_theta_local == 5000.0);
  assert_int_equal(c.max_position_embeddings, 8192);
  assert_int_equal(c.num_hidden_layers, 22);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_roberta),
      cmocka_unit_test(test_xlm_roberta),
      cmocka_unit_test(test_distilbert_sinusoidal),
      cmocka_unit_test(test_electra_embeddings_project),
      cmocka_unit_test(test_configs_set_the_options),
      cmocka_unit_test(test_bert_config_json_keeps_the_options),
      cmocka_unit_test(test_position_ids_and_sinusoid),
      cmocka_unit_test(test_position_limits),
      cmocka_unit_test(test_modernbert),
      cmocka_unit_test(test_modernbert_with_biases),
      cmocka_unit_test(test_modernbert_config_refusals),
      cmocka_unit_test(test_modernbert_recompute_and_forward_only),
      cmocka_unit_test(test_families_bf16),
      cmocka_unit_test(test_families_int8),
      cmocka_unit_test(test_long_inputs_tiled_attention),
      cmocka_unit_test(test_embed_opens_each_family),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
