/* The layers of src/ hold, by #include lines (docs/README.md §3).
 *
 * Each rule of RULES names the files it binds (directories or files) and what they must not
 * include: a layer ("src/io/": its internal headers "io/..." and the public headers it
 * implements) or one header ("est/file.h"). A public header include/est/x.h belongs to the
 * layer that implements it (PUBLIC_LAYER), so no layer reaches upward through one, and its
 * own includes are bound by its layer's rules. Two layers have an order inside (STEPS): the
 * GEMM code of src/nn, probes -> choice -> kernels -> dispatch, and src/text, unicode ->
 * vocabulary -> tokenizers; there a file includes the headers of its own step and of the
 * steps before it only.
 *
 * test_layers_hold scans src/ and include/est/ under EST_SOURCE_DIR; test_checker_catches_
 * violations runs the same checker on a small tree of known good and bad includes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/file.h"
#include "test_util.h"

/* ---- the rules ------------------------------------------------------------------------ */

#define MODEL "src/bert/ src/hf/"
#define TEXT_FORMATS "src/glue/ src/squad/ src/ner/ src/pretraining_data/"
#define SERVE_AND_TASKS "src/serve/ src/tasks/"
#define BELOW_TASKS                                                                                 \
  "src/core/ src/io/ src/data/ src/nn/ src/train/ src/dist/ src/text/ " MODEL " " TEXT_FORMATS " " \
  "src/serve/"

typedef struct {
  const char *files;    /* the files bound: directories or files, space-separated ("src/": all of src) */
  const char *must_not; /* layers ("src/io/", ending in '/') or headers ("est/file.h") */
  const char *why;
} layer_rule;

/* The first rule an include breaks is the one reported. A word of `files` ending in '/' binds
 * the files under it, any other word that file. */
static const layer_rule RULES[] = {
    {BELOW_TASKS, "src/tasks/",
     "the tasks stand on top (the task driver, run_*): nothing below src/tasks includes them"},
    {"src/bert/ src/text/ src/hf/ " TEXT_FORMATS, "src/serve/",
     "bert includes nothing from serve: export, predict and serve stand above the model and its data"},
    {"src/nn/", "src/io/ src/data/ est/file.h", "nn knows nothing of files"},
    {"src/nn/", "src/train/ src/dist/ src/text/ " MODEL " " TEXT_FORMATS " " SERVE_AND_TASKS,
     "nn knows nothing of training, text or models: its ops are forward/backward pairs on arrays"},
    {"src/io/", "src/data/ src/nn/ src/train/ src/dist/ src/text/ " MODEL " " TEXT_FORMATS " " SERVE_AND_TASKS,
     "io knows nothing of BERT: it reads and writes file formats only"},
    {"src/core/",
     "src/io/ src/data/ src/nn/ src/train/ src/dist/ src/text/ " MODEL " " TEXT_FORMATS " " SERVE_AND_TASKS,
     "core is the bottom: status, logging, allocation, threads, flags"},
    {"src/text/", "src/nn/ src/train/ " MODEL " " TEXT_FORMATS " " SERVE_AND_TASKS,
     "the tokenizers know nothing of models, training or the tasks' formats"},
    {TEXT_FORMATS, "src/nn/ src/train/ " MODEL " " SERVE_AND_TASKS,
     "the tasks' text formats and records know nothing of the model"},
    {"src/bert/model/config.c src/bert/model/config_internal.h src/bert/model/encoder.c "
     "src/bert/model/encoder_backward.c src/bert/model/encoder_internal.h",
     "src/hf/", "the encoder and its config know nothing of HuggingFace: src/hf reads HF's files into them"},
    {"src/", "est/est.h", "the umbrella header hides which layers a file uses"},
    {BELOW_TASKS " src/tasks/", "src/capi/",
     "the C API for bindings (est/c_api.h) stands on top: nothing else in src/ includes it"},
};

/* Each public header's layer: the directory whose files implement it. est/est.h, which
 * includes them all, has none. */
static const struct {
  const char *header, *layer;
} PUBLIC_LAYER[] = {
    {"est/status.h", "src/core/"},          {"est/log.h", "src/core/"},
    {"est/float_format.h", "src/core/"},    {"est/tensor.h", "src/core/"},
    {"est/file.h", "src/core/"},            {"est/rng.h", "src/core/"},
    {"est/flags.h", "src/core/"},           {"est/threads.h", "src/core/"},
    {"est/variables.h", "src/core/"},       {"est/pyrandom.h", "src/core/"},
    {"est/crc32c.h", "src/io/"},            {"est/tfrecord.h", "src/io/"},
    {"est/example.h", "src/io/"},           {"est/tfevents.h", "src/io/"},
    {"est/ckpt.h", "src/io/"},              {"est/safetensors.h", "src/io/"},
    {"est/dataset.h", "src/data/"},         {"est/nn.h", "src/nn/"},
    {"est/precision.h", "src/nn/"},         {"est/metrics.h", "src/train/"},
    {"est/optimizer.h", "src/train/"},      {"est/run_config.h", "src/train/"},
    {"est/estimator.h", "src/train/"},      {"est/fault_hooks.h", "src/train/"},
    {"est/early_stopping.h", "src/train/"}, {"est/exporter.h", "src/train/"},
    {"est/dist.h", "src/dist/"},            {"est/tokenizer.h", "src/text/"},
    {"est/bert_encoder.h", "src/bert/model/"},
    {"est/bert_classifier.h", "src/bert/heads/"},
    {"est/bert_head.h", "src/bert/heads/"},
    {"est/bert_pretraining.h", "src/bert/heads/"},
    {"est/sentence_embedding.h", "src/bert/heads/"},
    {"est/served_head.h", "src/bert/heads/"},
    {"est/hf_model.h", "src/hf/"},          {"est/processors.h", "src/glue/"},
    {"est/classifier_features.h", "src/glue/"}, {"est/multi_label.h", "src/glue/"},
    {"est/rerank.h", "src/glue/"},
    {"est/squad.h", "src/squad/"},          {"est/pretraining_data.h", "src/pretraining_data/"},
    {"est/ner.h", "src/ner/"},
    {"est/bert_task.h", "src/tasks/"},      {"est/run_classifier.h", "src/tasks/"},
    {"est/run_squad.h", "src/tasks/"},      {"est/run_ner.h", "src/tasks/"},      {"est/run_pretraining.h", "src/tasks/"},
    {"est/run_rerank.h", "src/tasks/"},     {"est/serving.h", "src/serve/"},      {"est/c_api.h", "src/capi/"},
    {"est/est.h", NULL},
};

/* The orders inside a layer, each step's files in the order of the steps (nn/cpu_features.h
 * says what the GEMM code's steps are). */
static const struct {
  const char *dir, *step, *files;
} STEPS[] = {
    {"src/nn/", "probes", "cpu_features.h cpu_features.c"},
    {"src/nn/", "choice", "kernel_choice.h kernel_choice.c"},
    {"src/nn/", "kernels", /* and the helpers they share */
     "gemm_kernels.h gemm_f32.c gemm_f32_ref.c gemm_bf16.c gemm_bf16_ref.c gemm_amx.c amx.h "
     "quant_int8.h quant_int8.c gemm_int8_vnni512.c gemm_int8_avxvnni.c gemm_int8_ymm.h gemm_int8_ymm_evex.c "
     "gemm_int8_amx.c gemm_int8_amx.h gemm_int8_amx_emulated.c gemm_int8_ref.c gemm_util.h "
     "thread_buf.h thread_buf.c fastmath.h gelu_avx512.h cpu_peak.h cpu_peak.c"},
    {"src/nn/", "dispatch", "gemm.h gemm.c gemm_int8.h gemm_int8.c precision.c"},
    {"src/text/", "unicode", "unicode.h unicode.c"},
    {"src/text/", "vocabulary", "vocab_internal.h vocab.c"},
    {"src/text/", "tokenizer.json's pipeline", /* normalizers -> pre-tokenizers -> model -> post-processor; decoders */
     "hf_internal.h normalizers.c precompiled.c pretokenizers.c models_internal.h models.c unigram.c bpe.c "
     "post_processors.c decoders.c hf_tokenizer.h hf_tokenizer.c"},
    {"src/text/", "tokenizers", "tokenizer.c tokenizer_case.c tokenizer_json.c"},
};
enum { NSTEPS = sizeof STEPS / sizeof *STEPS };

/* The files of those layers that must have a step: the names starting with one of the
 * words (NULL: every file). */
static const struct {
  const char *dir, *prefixes;
} STEPPED[] = {
    {"src/nn/", "gemm quant amx cpu_ kernel_"},
    {"src/text/", NULL},
};

/* Includes that break a rule today and are on their way out: each must still occur (so this
 * list only shrinks), and is not reported. */
static const struct {
  const char *file, *include, *until;
} KNOWN[] = {
};
enum { NKNOWN = sizeof KNOWN / sizeof *KNOWN };

/* The layer directories of src/: the first part of an internal header's path. */
static const char *const SRC_DIRS[] = {"core", "io",  "data", "nn",   "train",           "dist",  "text",
                                       "bert", "hf",  "glue", "squad", "ner", "pretraining_data", "tasks", "serve",
                                       "capi"};

/* ---- the checker ------------------------------------------------------------------------ */

static const char *g_root;  /* the tree checked */
static int g_violations, g_files, g_known_hits[NKNOWN];
static int g_quiet;        /* the fixture's violations are counted, not printed */

/* 1 when word (len bytes) is one of the space-separated words of list. */
static int in_list(const char *list, const char *word, size_t len) {
  for (const char *p = list; *p;) {
    while (*p == ' ') p++;
    size_t n = strcspn(p, " ");
    if (n == len && !strncmp(p, word, len)) return 1;
    p += n;
  }
  return 0;
}

/* 1 when a place (a layer, "src/nn/") or a header matches one of the words of list: a word
 * ending in '/' matches the places under it, any other word that header only. */
static int matches(const char *list, const char *place, const char *header) {
  for (const char *p = list; *p;) {
    while (*p == ' ') p++;
    size_t n = strcspn(p, " ");
    if (n && p[n - 1] == '/' ? place && !strncmp(place, p, n) : header && n == strlen(header) && !strncmp(p, header, n))
      return 1;
    p += n;
  }
  return 0;
}

/* 1 when a rule's `files` bind the file rel (in layer): a directory word the files under it,
 * any other word that file; a public header is bound by its layer's directory words. */
static int binds(const char *files, const char *rel, const char *layer) {
  for (const char *p = files; *p;) {
    while (*p == ' ') p++;
    size_t n = strcspn(p, " ");
    if (n && p[n - 1] == '/' ? !strncmp(layer, p, n) : n == strlen(rel) && !strncmp(p, rel, n)) return 1;
    p += n;
  }
  return 0;
}

/* The layer of a public header "est/x.h"; *known = 0 when it has no entry. */
static const char *public_layer(const char *header, int *known) {
  for (size_t i = 0; i < sizeof PUBLIC_LAYER / sizeof *PUBLIC_LAYER; i++)
    if (!strcmp(PUBLIC_LAYER[i].header, header)) {
      *known = 1;
      return PUBLIC_LAYER[i].layer;
    }
  *known = 0;
  return NULL;
}

/* The layer an included header belongs to, into buf: a public header's, or "src/<its
 * directory>/" for an internal one; NULL for a system header or one without a directory. */
static const char *include_layer(const char *inc, char *buf, size_t size) {
  int known;
  if (!strncmp(inc, "est/", 4)) return public_layer(inc, &known);
  const char *slash = strrchr(inc, '/');
  if (!slash) return NULL;
  size_t first = strcspn(inc, "/");
  for (size_t i = 0; i < sizeof SRC_DIRS / sizeof *SRC_DIRS; i++)
    if (strlen(SRC_DIRS[i]) == first && !strncmp(inc, SRC_DIRS[i], first)) {
      snprintf(buf, size, "src/%.*s", (int)(slash - inc + 1), inc);
      return buf;
    }
  return NULL;
}

/* The step (an index of STEPS) of the file dir + name, or -1. */
static int step_of(const char *dir, const char *name, size_t len) {
  for (int s = 0; s < NSTEPS; s++)
    if (!strcmp(STEPS[s].dir, dir) && in_list(STEPS[s].files, name, len)) return s;
  return -1;
}

static void violation(const char *rel, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void violation(const char *rel, int line, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (!g_quiet) print_error("%s:%d: %s\n", rel, line, msg);
  g_violations++;
}

/* One include of the file rel (in layer `layer`, kernel step `step` or -1). */
static void check_include(const char *rel, int line, const char *layer, int step, const char *inc) {
  for (int k = 0; k < NKNOWN; k++)
    if (!strcmp(KNOWN[k].file, rel) && !strcmp(KNOWN[k].include, inc)) {
      g_known_hits[k]++;
      return;
    }
  char buf[256];
  const char *target = include_layer(inc, buf, sizeof buf);
  for (size_t r = 0; r < sizeof RULES / sizeof *RULES; r++)
    if (binds(RULES[r].files, rel, layer) && matches(RULES[r].must_not, target, inc)) {
      violation(rel, line, "includes \"%s\"%s%s%s: %s", inc, target ? " (" : "", target ? target : "",
                target ? ")" : "", RULES[r].why);
      return;
    }
  if (step >= 0) { /* an internal header of the same ordered directory: not of a later step */
    const char *dir = STEPS[step].dir + 4; /* "nn/" of "src/nn/" */
    size_t dn = strlen(dir);
    int to = !strncmp(inc, dir, dn) ? step_of(STEPS[step].dir, inc + dn, strlen(inc + dn)) : -1;
    if (to > step)
      violation(rel, line, "includes \"%s\": a file of %s's %s step includes nothing of the later %s step",
                inc, STEPS[step].dir, STEPS[step].step, STEPS[to].step);
  }
}

/* The #include lines of one file (path under g_root: rel). */
static void check_file(const char *path, const char *rel) {
  char layer_buf[256];
  const char *layer = NULL;
  int step = -1;
  if (!strncmp(rel, "include/", 8)) {
    int known;
    layer = public_layer(rel + 8, &known);
    if (!known) {
      violation(rel, 1, "a public header without a layer: give it one in PUBLIC_LAYER (tests/test_layout.c)");
      return;
    }
    if (!layer) return; /* est/est.h */
  } else {
    const char *slash = strrchr(rel, '/');
    snprintf(layer_buf, sizeof layer_buf, "%.*s", (int)(slash - rel + 1), rel);
    layer = layer_buf;
    step = step_of(layer, slash + 1, strlen(slash + 1));
    for (size_t i = 0; step < 0 && i < sizeof STEPPED / sizeof *STEPPED; i++) {
      if (strcmp(STEPPED[i].dir, layer)) continue;
      int must = !STEPPED[i].prefixes;
      for (const char *p = STEPPED[i].prefixes; p && *p && !must;) {
        while (*p == ' ') p++;
        size_t n = strcspn(p, " ");
        must = n && !strncmp(slash + 1, p, n);
        p += n;
      }
      if (must) violation(rel, 1, "a file of %s without a step: give it one in STEPS (tests/test_layout.c)", layer);
    }
  }
  g_files++;
  size_t n;
  char *text = test_read_file(path, &n);
  assert_non_null(text);
  int line = 1;
  for (char *p = text; *p; line++) {
    char *end = strchr(p, '\n');
    if (end) *end = 0;
    const char *q = p + strspn(p, " \t");
    if (*q == '#') {
      q += 1 + strspn(q + 1, " \t");
      if (!strncmp(q, "include", 7)) {
        q += 7 + strspn(q + 7, " \t");
        char close = *q == '"' ? '"' : *q == '<' ? '>' : 0;
        const char *e = close ? strchr(q + 1, close) : NULL;
        if (e) {
          char inc[256];
          snprintf(inc, sizeof inc, "%.*s", (int)(e - q - 1), q + 1);
          check_include(rel, line, layer, step, inc);
        }
      }
    }
    if (!end) break;
    p = end + 1;
  }
  free(text);
}

static int visit(const char *path, const struct stat *sb, int type, struct FTW *ftw) {
  (void)sb, (void)ftw;
  size_t len = strlen(path);
  if (type != FTW_F || len < 2 || path[len - 2] != '.' || (path[len - 1] != 'c' && path[len - 1] != 'h')) return 0;
  check_file(path, path + strlen(g_root) + 1);
  return 0;
}

/* Checks every .c and .h of root/src and root/include/est; returns the violations. */
static int check_tree(const char *root) {
  g_root = root;
  g_violations = g_files = 0;
  memset(g_known_hits, 0, sizeof g_known_hits);
  static const char *const dirs[] = {"src", "include/est"};
  for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s", root, dirs[i]);
    if (est_is_directory(dir)) assert_int_equal(nftw(dir, visit, 16, FTW_PHYS), 0);
  }
  return g_violations;
}

/* ---- tests ------------------------------------------------------------------------------ */

static void test_layers_hold(void **state) {
  (void)state;
  int bad = check_tree(EST_SOURCE_DIR);
  assert_true(g_files > 200); /* it read the tree */
  for (int k = 0; k < NKNOWN; k++)
    if (!g_known_hits[k]) {
      print_error("%s no longer includes \"%s\": delete that entry from KNOWN (tests/test_layout.c)\n", KNOWN[k].file,
                  KNOWN[k].include);
      bad++;
    }
  assert_int_equal(bad, 0);
}

/* The tables name what exists: a renamed directory, header or kernel file would otherwise
 * leave a rule that binds nothing. */
static void test_tables_name_what_exists(void **state) {
  (void)state;
  char path[4096];
  for (size_t r = 0; r < sizeof RULES / sizeof *RULES; r++)
    for (int side = 0; side < 2; side++)
      for (const char *p = side ? RULES[r].must_not : RULES[r].files; *p;) {
        while (*p == ' ') p++;
        size_t n = strcspn(p, " ");
        /* a directory or a file of the tree, or a header: est/ under include/, others under src/ */
        const char *under = p[n - 1] == '/' || !strncmp(p, "src/", 4) ? "" : !strncmp(p, "est/", 4) ? "include/" : "src/";
        snprintf(path, sizeof path, "%s/%s%.*s", EST_SOURCE_DIR, under, (int)n, p);
        if (!est_file_exists(path)) fail_msg("RULES names %.*s, which does not exist", (int)n, p);
        p += n;
      }
  for (size_t i = 0; i < sizeof PUBLIC_LAYER / sizeof *PUBLIC_LAYER; i++) {
    snprintf(path, sizeof path, "%s/include/%s", EST_SOURCE_DIR, PUBLIC_LAYER[i].header);
    if (!est_file_exists(path)) fail_msg("PUBLIC_LAYER names %s, which does not exist", PUBLIC_LAYER[i].header);
    if (PUBLIC_LAYER[i].layer) {
      snprintf(path, sizeof path, "%s/%s", EST_SOURCE_DIR, PUBLIC_LAYER[i].layer);
      if (!est_is_directory(path)) fail_msg("PUBLIC_LAYER's %s is not a directory", PUBLIC_LAYER[i].layer);
    }
  }
  for (int s = 0; s < NSTEPS; s++)
    for (const char *p = STEPS[s].files; *p;) {
      while (*p == ' ') p++;
      size_t n = strcspn(p, " ");
      snprintf(path, sizeof path, "%s/%s%.*s", EST_SOURCE_DIR, STEPS[s].dir, (int)n, p);
      if (!est_file_exists(path)) fail_msg("STEPS names %s%.*s, which does not exist", STEPS[s].dir, (int)n, p);
      p += n;
    }
}

/* A tree of known includes: the checker reports each bad one once and no good one. */
static void test_checker_catches_violations(void **state) {
  (void)state;
  static const struct {
    const char *file, *text;
    int bad;
  } tree[] = {
      /* nn: a kernel including the dispatch, and a file helper */
      {"src/nn/gemm_f32.c", "#include \"nn/gemm_kernels.h\"\n#include \"nn/gemm.h\"\n#include \"est/file.h\"\n", 2},
      /* the choice including a kernel's header */
      {"src/nn/kernel_choice.c", "#include \"nn/cpu_features.h\"\n#include \"nn/gemm_kernels.h\"\n", 1},
      /* the dispatch may include every step */
      {"src/nn/gemm.c", "#include \"nn/cpu_features.h\"\n#include \"nn/kernel_choice.h\"\n#include \"nn/gemm_kernels.h\"\n",
       0},
      /* a new GEMM file needs a step */
      {"src/nn/gemm_new.c", "#include <immintrin.h>\n", 1},
      /* spaces after '#' still make an include; a comment that mentions one does not */
      {"src/nn/layernorm.c", "#  include \"io/protowire.h\"\n * #include \"est/tfrecord.h\"\n", 1},
      /* io reaching for BERT, publicly and internally */
      {"src/io/tfrecord_reader.c", "#include \"est/bert_encoder.h\"\n#include \"bert/model/config_internal.h\"\n", 2},
      /* bert and hf reaching for serve */
      {"src/bert/model/encoder.c", "#include \"est/nn.h\"\n#include \"est/serving.h\"\n", 1},
      {"src/hf/hf_export.c", "#include \"serve/servable_model.h\"\n#include \"bert/model/config_internal.h\"\n", 1},
      /* serve below the tasks */
      {"src/serve/export.c", "#include \"est/run_classifier.h\"\n#include \"tasks/run_classifier_internal.h\"\n"
                             "#include \"est/hf_model.h\"\n", 2},
      /* the tasks may include anything */
      {"src/tasks/run_classifier.c", "#include \"est/serving.h\"\n#include \"nn/gemm.h\"\n#include <stdio.h>\n", 0},
      /* the umbrella; a layer's own internal header and a lower layer's are fine */
      {"src/glue/tsv.c", "#include \"est/est.h\"\n#include \"text/unicode.h\"\n#include \"glue/processors_internal.h\"\n",
       1},
      /* a public header is bound by its layer's rules */
      {"include/est/squad.h", "#include \"est/tokenizer.h\"\n#include \"est/serving.h\"\n", 1},
      /* and must have a layer */
      {"include/est/new_thing.h", "#include \"est/status.h\"\n", 1},
      /* text's order: unicode below the vocabulary; every file of src/text has a step */
      {"src/text/unicode.c", "#include \"text/unicode.h\"\n#include \"text/vocab_internal.h\"\n", 1},
      {"src/text/tokenizer.c", "#include \"text/unicode.h\"\n#include \"text/vocab_internal.h\"\n", 0},
      {"src/text/tokenizer_internal.h", "#include \"est/tokenizer.h\"\n", 1},
      /* the encoder's config below hf; the model_fn, which loads HF checkpoints, is not bound */
      {"src/bert/model/config.c", "#include \"est/bert_encoder.h\"\n#include \"est/hf_model.h\"\n", 1},
      {"src/bert/model/bert_model_fn.c", "#include \"est/hf_model.h\"\n#include \"est/bert_head.h\"\n", 0},
  };
  char root[256];
  test_make_tmpdir(root, sizeof root);
  g_quiet = 1;
  int expected = 0;
  for (size_t i = 0; i < sizeof tree / sizeof *tree; i++) {
    char path[512], dir[512];
    snprintf(path, sizeof path, "%s/%s", root, tree[i].file);
    snprintf(dir, sizeof dir, "%.*s", (int)(strrchr(path, '/') - path), path);
    assert_int_equal(est_mkdirs(dir), EST_OK);
    test_write_bytes(path, tree[i].text, strlen(tree[i].text));
    expected += tree[i].bad;
  }
  /* each file alone, so that a miscount names the file */
  for (size_t i = 0; i < sizeof tree / sizeof *tree; i++) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, tree[i].file);
    g_root = root;
    g_violations = 0;
    check_file(path, tree[i].file);
    if (g_violations != tree[i].bad) fail_msg("%s: %d violations, expected %d", tree[i].file, g_violations, tree[i].bad);
  }
  assert_int_equal(check_tree(root), expected);
  g_quiet = 0;
  test_remove_tree(root);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_checker_catches_violations),
      cmocka_unit_test(test_tables_name_what_exists),
      cmocka_unit_test(test_layers_hold),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
