/* Write faults on the writers tests/test_fault.c does not cover: an export version
 * (`run_classifier --do_export`), `est predict`'s output (it writes only to stdout),
 * `create_pretraining_data`'s record files (two --output_file shards),
 * `run_pretraining --do_eval`'s eval_results.txt over a previous one, and
 * `extract_features`' JSON lines over a previous output. The LD_PRELOAD shim
 * tests/fault/fault_inject.c fails call N of open, write, fsync, close or rename with ENOSPC
 * or EIO, for every N up to the writer's last call (a counting run learns the counts first).
 *
 * After each fault: a non-zero exit and a message naming the file and the error; nothing
 * half-written under a final name (an export version directory is complete or absent, the
 * reader resolves a complete one; a record file is the previous one or a complete new one);
 * the previous outputs intact; no temp file or directory left. Then the same command without
 * the fault completes and its outputs equal a run that never saw a fault.
 *
 * Sizes: the export writes 4 files (~1 MB of weights, 38 calls in all), predict 6 lines,
 * create_pretraining_data 2 small shards (12 calls), so every N of every op is tried: 56
 * faults, each a faulted run and a rerun of well under a second. MAXN guards the count: a
 * writer that grew past it would need sampling (as test_fault.c samples big data files). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "est/est.h"
#include "test_util.h"

#define D EST_TEST_DATA
static const char *const ops[] = {"open", "write", "fsync", "close", "rename"};
enum { NOPS = 5, MAXN = 200 };

/* Runs `cmd` (a shell command line) with the shim: fault op #n (op NULL: count into
 * count_file when given). stdout_fault wraps stdout (EST_FAULT_STDOUT). Returns the exit. */
static int run_shim(char **log, const char *cmd, const char *prefix, int stdout_fault, const char *op, long n,
                    const char *err, const char *count_file) {
  char env[4096];
  int k = snprintf(env, sizeof env, "LD_PRELOAD='%s' ASAN_OPTIONS=verify_asan_link_order=0 EST_FAULT_PATH='%s'%s",
                   EST_FAULT_SHIM, prefix, stdout_fault ? " EST_FAULT_STDOUT=1" : "");
  if (op) k += snprintf(env + k, sizeof env - k, " EST_FAULT_OP=%s EST_FAULT_N=%ld EST_FAULT_ERRNO=%s", op, n, err);
  if (count_file) snprintf(env + k, sizeof env - k, " EST_FAULT_COUNT='%s'", count_file);
  return test_run(log, 1, "{ env %s %s; }", env, cmd); /* braces: stderr reaches the log past a > in cmd */
}

static void sh(const char *fmt, const char *a, const char *b) {
  char *out = NULL;
  if (test_run(&out, 1, fmt, a, b, a) != 0) fail_msg("%s", out);
  free(out);
}

/* 1 when files a and b exist and are byte-equal. */
static int same_file(const char *a, const char *b) {
  if (!est_file_exists(a) || !est_file_exists(b)) return 0;
  size_t na, nb;
  char *x = test_read_file(a, &na), *y = test_read_file(b, &nb);
  int same = na == nb && memcmp(x, y, na) == 0;
  free(x);
  free(y);
  return same;
}

/* 1 when directory trees a and b hold the same names with the same bytes (diff -r). */
static int same_tree(const char *a, const char *b) {
  char *out = NULL;
  int rc = test_run(&out, 1, "diff -r '%s' '%s'", a, b);
  free(out);
  return rc == 0;
}

/* The basename of the file the shim failed a call on, without an atomic write's ".tmp." tail. */
static void faulted_name(const char *log, char *name, size_t size) {
  const char *p = strstr(log, "fault_inject: failing ");
  p = p ? strstr(p, " on ") : NULL;
  if (!p) fail_msg("the shim failed no call:\n%s", log);
  p += 4;
  const char *end = strstr(p, " with "), *slash = p;
  for (const char *q = p; q < end; q++)
    if (*q == '/') slash = q + 1;
  snprintf(name, size, "%.*s", (int)(end - slash), slash);
  char *tmp = strstr(name, ".tmp.");
  if (tmp) *tmp = 0;
  if (!strcmp(name, "<stdout>")) snprintf(name, size, "stdout");
}

static void read_counts(const char *path, long *counts) {
  char *text = test_read_file(path, NULL), buf[256];
  snprintf(buf, sizeof buf, "%s", text);
  free(text);
  for (int i = 0; i < NOPS; i++) {
    const char *p = strstr(buf, ops[i]);
    counts[i] = p ? atol(p + strlen(ops[i])) : 0;
  }
}

/* One writer: prepare() puts the previous outputs in place, cmd is the command, after_fault
 * and after_rerun check the outputs. Every N of every op is failed. */
typedef struct writer {
  const char *label, *cmd, *prefix;
  int stdout_fault;
  long min_calls;
  void (*prepare)(void);
  void (*after_fault)(const char *what);
  void (*after_rerun)(const char *what);
} writer;

static void fault_every_call(const writer *w) {
  char count_file[1024];
  snprintf(count_file, sizeof count_file, "%s/counts", test_tmpdir);
  char *log = NULL;
  w->prepare();
  if (run_shim(&log, w->cmd, w->prefix, w->stdout_fault, NULL, 0, NULL, count_file) != 0)
    fail_msg("%s: counting run failed:\n%s", w->label, log);
  free(log);
  long counts[NOPS], total = 0;
  read_counts(count_file, counts);
  for (int i = 0; i < NOPS; i++) total += counts[i];
  if (total < w->min_calls) fail_msg("%s: only %ld calls counted", w->label, total);
  int tried = 0;
  for (int i = 0; i < NOPS; i++) {
    if (counts[i] > MAXN) fail_msg("%s: %ld %s calls: more than this test tries", w->label, counts[i], ops[i]);
    for (long n = 1; n <= counts[i]; n++, tried++) {
      const char *err = n % 2 ? "ENOSPC" : "EIO";
      const char *errtext = n % 2 ? strerror(ENOSPC) : strerror(EIO);
      char what[512], name[512];
      snprintf(what, sizeof what, "%s: %s #%ld of %ld (%s)", w->label, ops[i], n, counts[i], err);
      w->prepare();
      int rc = run_shim(&log, w->cmd, w->prefix, w->stdout_fault, ops[i], n, err, NULL);
      faulted_name(log, name, sizeof name);
      const char *own = strchr(strstr(log, "fault_inject: failing "), '\n'); /* est's lines */
      if (rc == 0) fail_msg("%s: exit 0 after a failed call:\n%s", what, log);
      if (!own || !strstr(own, name) || !strstr(own, errtext))
        fail_msg("%s: no message naming %s and '%s':\n%s", what, name, errtext, log);
      free(log);
      w->after_fault(what);
      if (run_shim(&log, w->cmd, w->prefix, w->stdout_fault, NULL, 0, NULL, NULL) != 0)
        fail_msg("%s: rerun failed:\n%s", what, log);
      free(log);
      w->after_rerun(what);
    }
  }
  print_message("%s: %d faults tried (open %ld, write %ld, fsync %ld, close %ld, rename %ld calls)\n", w->label, tried,
                counts[0], counts[1], counts[2], counts[3], counts[4]);
}

/* ---- export: run/ holds a checkpoint and export/<v1>; ref_version is a second export -------- */

static char run_dir[1024], work[1024], cmd[8192], v1[256], ref_version[1200];

/* The version directories under dir/export (digit names), and whether anything else is there. */
static int versions(const char *dir, char names[][256], int max, int *other) {
  char p[1200];
  snprintf(p, sizeof p, "%s/export", dir);
  DIR *d = opendir(p);
  if (!d) fail_msg("%s: cannot list", p);
  int n = 0;
  *other = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    if (strspn(e->d_name, "0123456789") != strlen(e->d_name)) *other = 1;
    else if (n < max) snprintf(names[n++], 256, "%s", e->d_name);
  }
  closedir(d);
  return n;
}

static void export_prepare(void) { sh("rm -rf '%s' && cp -a '%s' '%s'", work, run_dir); }

static void export_after_fault(const char *what) {
  char names[8][256], a[4096], b[4096];
  int other, n = versions(work, names, 8, &other);
  if (other) fail_msg("%s: a temp entry is left in export/", what);
  snprintf(a, sizeof a, "%s/export/%s", work, v1);
  snprintf(b, sizeof b, "%s/export/%s", run_dir, v1);
  if (!same_tree(a, b)) fail_msg("%s: the previous version %s changed", what, v1);
  for (int i = 0; i < n; i++) {
    snprintf(a, sizeof a, "%s/export/%s", work, names[i]);
    if (strcmp(names[i], v1) && !same_tree(a, ref_version))
      fail_msg("%s: version %s is there but not complete", what, names[i]);
  }
  char found[2200];
  snprintf(a, sizeof a, "%s/export", work);
  if (est_export_resolve(a, found, sizeof found, NULL) != EST_OK) fail_msg("%s: %s", what, est_error_message());
}

static void export_after_rerun(const char *what) {
  export_after_fault(what);
  char names[8][256];
  int other;
  if (versions(work, names, 8, &other) < 2) fail_msg("%s: the rerun exported no new version", what);
}

/* ---- predict: six lines to stdout ---------------------------------------------------------- */

static char pred_cmd[8192], pred_out[1024], pred_ref[1024];

static void predict_prepare(void) { remove(pred_out); }
static void predict_after_fault(const char *what) { (void)what; }
static void predict_after_rerun(const char *what) {
  if (!same_file(pred_out, pred_ref)) {
    sh("diff '%s' '%s' >&2", pred_ref, pred_out);
    fail_msg("%s: the rerun's predictions differ", what);
  }
}

/* ---- create_pretraining_data: shards a and b over previous ones ---------------------------- */

static char cpd_cmd[8192], cpd_work[1024], cpd_base[1024], cpd_ref[1024];

static void cpd_prepare(void) { sh("rm -rf '%s' && cp -a '%s' '%s'", cpd_work, cpd_base); }

static void cpd_after_fault(const char *what) {
  const char *shards[] = {"a.tfrecord", "b.tfrecord"};
  char *out = NULL;
  if (test_run(&out, 1, "ls -A '%s' | grep -v -x -e a.tfrecord -e b.tfrecord", cpd_work) == 0)
    fail_msg("%s: temp files left: %s", what, out);
  free(out);
  for (int i = 0; i < 2; i++) {
    char p[1200], pb[1200], pr[1200];
    snprintf(p, sizeof p, "%s/%s", cpd_work, shards[i]);
    snprintf(pb, sizeof pb, "%s/%s", cpd_base, shards[i]);
    snprintf(pr, sizeof pr, "%s/%s", cpd_ref, shards[i]);
    if (!same_file(p, pb) && !same_file(p, pr)) fail_msg("%s: %s is neither the previous nor a complete new one", what, shards[i]);
  }
}

static void cpd_after_rerun(const char *what) {
  if (!same_tree(cpd_work, cpd_ref)) fail_msg("%s: the rerun's records differ from a run without faults", what);
}

/* ---- run_pretraining: eval_results.txt of a 1-batch eval over a 2-batch one's ------------- */

static char rp_cmd[8192], rp_work[1024], rp_base[1024], rp_ref[1024];

static void rp_prepare(void) { sh("rm -rf '%s' && cp -a '%s' '%s'", rp_work, rp_base); }

static void rp_after_fault(const char *what) {
  char p[1200], pb[1200], pr[1200], *out = NULL;
  snprintf(p, sizeof p, "%s/eval_results.txt", rp_work);
  snprintf(pb, sizeof pb, "%s/eval_results.txt", rp_base);
  snprintf(pr, sizeof pr, "%s/eval_results.txt", rp_ref);
  if (!same_file(p, pb) && !same_file(p, pr)) fail_msg("%s: eval_results.txt is neither the previous nor the new one", what);
  if (test_run(&out, 1, "ls -A '%s' | grep -F .tmp.", rp_work) == 0) fail_msg("%s: temp files left: %s", what, out);
  free(out);
}

static void rp_after_rerun(const char *what) {
  char p[1200], pr[1200];
  snprintf(p, sizeof p, "%s/eval_results.txt", rp_work);
  snprintf(pr, sizeof pr, "%s/eval_results.txt", rp_ref);
  if (!same_file(p, pr)) fail_msg("%s: the rerun's eval_results.txt differs from a run without faults", what);
}

static void setup_run_pretraining(void) {
  const char *json = "{\"vocab_size\": 30522, \"hidden_size\": 16, \"num_hidden_layers\": 1, \"num_attention_heads\": 2,"
                     " \"intermediate_size\": 32, \"hidden_act\": \"gelu\", \"max_position_embeddings\": 128,"
                     " \"type_vocab_size\": 2, \"initializer_range\": 0.02}\n";
  test_write_bytes(test_tmp_path("rp_config.json"), json, strlen(json));
  snprintf(rp_work, sizeof rp_work, "%s/rp", test_tmpdir);
  snprintf(rp_base, sizeof rp_base, "%s/rp_base", test_tmpdir);
  snprintf(rp_ref, sizeof rp_ref, "%s/rp_ref", test_tmpdir);
  char flags[4096];
  snprintf(flags, sizeof flags, "run_pretraining --bert_config_file=%s --input_file=" D
           "/pretraining/cola_seed12345.tfrecord --eval_batch_size=4 --seed=5 --num_threads=1",
           test_tmp_path("rp_config.json"));
  free(test_run_ok("%s %s --do_train --do_eval --train_batch_size=4 --num_train_steps=2 --max_eval_steps=2"
                   " --output_dir='%s'", EST_BIN, flags, rp_base));
  snprintf(rp_cmd, sizeof rp_cmd, "%s %s --do_eval --max_eval_steps=1 --output_dir='%s'", EST_BIN, flags, rp_work);
  rp_prepare();
  free(test_run_ok("%s", rp_cmd));
  sh("rm -rf '%s' && cp -a '%s' '%s'", rp_ref, rp_work);
  char pb[1200], pr[1200];
  snprintf(pb, sizeof pb, "%s/eval_results.txt", rp_base);
  snprintf(pr, sizeof pr, "%s/eval_results.txt", rp_ref);
  if (same_file(pb, pr)) fail_msg("the 1-batch eval wrote the same eval_results.txt as the 2-batch one");
}

/* ---- extract_features: 3 layers' JSON lines over a 1-layer output -------------------------- */

static char xf_cmd[8192], xf_work[1024], xf_base[1024], xf_ref[1024];

static void xf_prepare(void) { sh("rm -rf '%s' && cp -a '%s' '%s'", xf_work, xf_base); }

static void xf_after_fault(const char *what) {
  char p[1200], pb[1200], *out = NULL;
  snprintf(p, sizeof p, "%s/features.jsonl", xf_work);
  snprintf(pb, sizeof pb, "%s/features.jsonl", xf_base);
  if (!same_file(p, pb) && !same_file(p, xf_ref)) fail_msg("%s: features.jsonl is neither the previous nor the new one", what);
  if (test_run(&out, 1, "ls -A '%s' | grep -v -x features.jsonl", xf_work) == 0) fail_msg("%s: temp files left: %s", what, out);
  free(out);
}

static void xf_after_rerun(const char *what) {
  char p[1200];
  snprintf(p, sizeof p, "%s/features.jsonl", xf_work);
  if (!same_file(p, xf_ref)) fail_msg("%s: the rerun's features.jsonl differs from a run without faults", what);
}

static void setup_extract_features(void) {
  snprintf(xf_work, sizeof xf_work, "%s/xf", test_tmpdir);
  snprintf(xf_base, sizeof xf_base, "%s/xf_base", test_tmpdir);
  snprintf(xf_ref, sizeof xf_ref, "%s/xf_ref.jsonl", test_tmpdir);
  const char *flags = "extract_features --input_file=" D "/extract_features/input.txt --bert_config_file=" D
                      "/keras_bert_tiny/bert_config.json --init_checkpoint=" D "/keras_bert_tiny/bert_model.ckpt"
                      " --vocab_file=" D "/keras_bert_tiny/vocab.txt --max_seq_length=10 --batch_size=3 --num_threads=1";
  sh("mkdir -p '%s'", xf_base, "");
  free(test_run_ok("%s %s --layers=-1 --output_file='%s/features.jsonl'", EST_BIN, flags, xf_base));
  snprintf(xf_cmd, sizeof xf_cmd, "%s %s --layers=-1,-2,0 --output_file='%s/features.jsonl'", EST_BIN, flags, xf_work);
  xf_prepare();
  free(test_run_ok("%s", xf_cmd));
  char p[1200];
  snprintf(p, sizeof p, "%s/features.jsonl", xf_work);
  sh("cp '%s' '%s'", p, xf_ref);
}

static int setup(void **state) {
  test_tmpdir_setup(state);
  char *out = NULL;
  /* A 3000-word vocab and a config to match keep the exported weights at ~1 MB. */
  if (test_run(&out, 1, "head -3000 '%s' > '%s' && sed 's/30522/3000/' '%s' > '%s'", D "/vocab_uncased.txt",
               test_tmp_path("vocab.txt"), D "/run_classifier/bert_config_h32.json", test_tmp_path("config.json")))
    fail_msg("%s", out);
  free(out);
  snprintf(run_dir, sizeof run_dir, "%s/run", test_tmpdir);
  snprintf(work, sizeof work, "%s/work", test_tmpdir);
  char flags[4096];
  snprintf(flags, sizeof flags, "--task_name=cola --data_dir=" D "/glue_mini/CoLA --max_seq_length=32 --vocab_file=%s"
           " --bert_config_file=%s --num_threads=1", test_tmp_path("vocab.txt"), test_tmp_path("config.json"));
  free(test_run_ok("%s run_classifier %s --do_train --train_batch_size=4 --num_train_epochs=1 --output_dir='%s'"
                   " --do_export", EST_BIN, flags, run_dir));
  char names[8][256];
  int other;
  if (versions(run_dir, names, 8, &other) != 1 || other) fail_msg("the first export is not one version");
  snprintf(v1, sizeof v1, "%s", names[0]);
  snprintf(cmd, sizeof cmd, "%s run_classifier %s --do_export --output_dir='%s'", EST_BIN, flags, work);
  /* The reference second version: an export without faults, from a copy. */
  export_prepare();
  free(test_run_ok("%s", cmd));
  int n = versions(work, names, 8, &other);
  if (n != 2 || other) fail_msg("the reference export did not add one version");
  char ref_copy[1024];
  snprintf(ref_copy, sizeof ref_copy, "%s/ref_version", test_tmpdir);
  const char *v2 = strcmp(names[0], v1) ? names[0] : names[1];
  char from[4096];
  snprintf(from, sizeof from, "%s/export/%s", work, v2);
  sh("rm -rf '%s' && cp -a '%s' '%s'", ref_copy, from);
  snprintf(ref_version, sizeof ref_version, "%s", ref_copy);

  /* predict: six lines, the reference output without faults. */
  snprintf(pred_out, sizeof pred_out, "%s/pred.tsv", test_tmpdir);
  snprintf(pred_ref, sizeof pred_ref, "%s/pred_ref.tsv", test_tmpdir);
  const char *lines = "a good film\nbad\nthe cat sat\tyes\nno\nfine\nok\n";
  if (est_write_file_atomic(test_tmp_path("pred_in.tsv"), lines, strlen(lines)) != EST_OK) fail_msg("pred_in.tsv");
  snprintf(pred_cmd, sizeof pred_cmd, "%s predict --input_file='%s' --export_dir='%s/export' --batch_size=4"
           " --num_threads=1 > '%s'", EST_BIN, test_tmp_path("pred_in.tsv"), run_dir, pred_out);
  free(test_run_ok("{ %s; }", pred_cmd)); /* braces: the log (stderr) stays out of pred_out */
  sh("cp '%s' '%s'", pred_out, pred_ref);

  /* create_pretraining_data: base holds shards of another seed, ref the real ones. */
  snprintf(cpd_work, sizeof cpd_work, "%s/cpd", test_tmpdir);
  snprintf(cpd_base, sizeof cpd_base, "%s/cpd_base", test_tmpdir);
  snprintf(cpd_ref, sizeof cpd_ref, "%s/cpd_ref", test_tmpdir);
  const char *cpd_flags = "create_pretraining_data --input_file=" D "/pretraining/tiny_docs.txt --vocab_file=" D
                          "/pretraining/tiny_vocab.txt --max_seq_length=32 --max_predictions_per_seq=5 --dupe_factor=2";
  sh("mkdir -p '%s' '%s'", cpd_base, cpd_ref);
  free(test_run_ok("%s %s --random_seed=7 --output_file=%s/a.tfrecord,%s/b.tfrecord", EST_BIN, cpd_flags, cpd_base,
                   cpd_base));
  free(test_run_ok("%s %s --random_seed=12345 --output_file=%s/a.tfrecord,%s/b.tfrecord", EST_BIN, cpd_flags,
                   cpd_ref, cpd_ref));
  snprintf(cpd_cmd, sizeof cpd_cmd, "%s %s --random_seed=12345 --output_file=%s/a.tfrecord,%s/b.tfrecord", EST_BIN,
           cpd_flags, cpd_work, cpd_work);
  setup_run_pretraining();
  setup_extract_features();
  return 0;
}

/* Every call of the export counts (prefix ""): it is the command's only writer. */
static void test_export(void **s) {
  (void)s;
  writer w = {"export", cmd, "", 0, 10, export_prepare, export_after_fault, export_after_rerun};
  fault_every_call(&w);
}

/* The prefix matches no file: only stdout's writes count. */
static void test_predict_stdout(void **s) {
  (void)s;
  writer w = {"predict stdout", pred_cmd, "\x01", 1, 6, predict_prepare, predict_after_fault, predict_after_rerun};
  fault_every_call(&w);
}

/* A full disk under `> file`, without the shim: the first flush fails. */
static void test_predict_dev_full(void **s) {
  (void)s;
  char c[8192], *log = NULL;
  snprintf(c, sizeof c, "%s", pred_cmd);
  *strrchr(c, '>') = 0;
  int rc = test_run(&log, 1, "{ %s > /dev/full; }", c); /* stderr stays with the log */
  if (rc == 0 || !strstr(log, "stdout") || !strstr(log, strerror(ENOSPC)))
    fail_msg("predict > /dev/full: exit %d, want non-zero and a message naming stdout and ENOSPC:\n%s", rc, log);
  free(log);
}

/* Both shards' calls count (prefix ""): the spill file is written by stdio on an fd from
 * mkstemp, which the shim does not see. */
static void test_pretraining_records(void **s) {
  (void)s;
  writer w = {"create_pretraining_data", cpd_cmd, "", 0, 10, cpd_prepare, cpd_after_fault, cpd_after_rerun};
  fault_every_call(&w);
}

/* Only eval_results.txt's calls count: the checkpoint and state writers are the Estimator's
 * own, which test_fault.c faults through run_classifier. */
static void test_run_pretraining_eval_results(void **s) {
  (void)s;
  writer w = {"run_pretraining eval_results.txt", rp_cmd, "eval_results.txt", 0, 4, rp_prepare, rp_after_fault,
              rp_after_rerun};
  fault_every_call(&w);
}

static void test_extract_features_output(void **s) {
  (void)s;
  writer w = {"extract_features", xf_cmd, "features.jsonl", 0, 4, xf_prepare, xf_after_fault, xf_after_rerun};
  fault_every_call(&w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_export),
      cmocka_unit_test(test_predict_stdout),
      cmocka_unit_test(test_predict_dev_full),
      cmocka_unit_test(test_pretraining_records),
      cmocka_unit_test(test_run_pretraining_eval_results),
      cmocka_unit_test(test_extract_features_output),
  };
  return cmocka_run_group_tests(tests, setup, test_tmpdir_teardown);
}
