/* Write faults: every writer of `est run_classifier` and `est convert`, failed at every
 * write-side call (open, write, fsync, close, rename, and the fsync of the directory after
 * a rename) with ENOSPC or EIO by the LD_PRELOAD
 * shim tests/fault/fault_inject.c.
 *
 * The scenario per writer: `base` is a finished 5-step run (checkpoints 0 and 5, records,
 * results, events); the command under test continues it to 10 steps (`ref` is that
 * continuation without faults). A counting run learns how many calls of each op the writer
 * makes; then for every N (every call of every op; the checkpoint's data writes are sampled,
 * see below) a copy of base runs the continuation with call N failing. It must exit non-zero
 * with a message naming the file and the error; afterwards every file under a final name
 * equals either base's (the previous checkpoint, state file and results, untouched) or
 * ref's (a complete new one), and no temp file is left. Then the same command without the
 * fault completes, resuming from the previous checkpoint, and the directory equals ref byte
 * for byte: resume is exact, so a fault costs nothing but the rerun.
 *
 * TensorBoard events are a report, not state (src/train/summaries.c): a fault there is a
 * warning naming the file and training carries on with exit 0. */
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
static char run_args[4096];  /* the continuation's flags, without --output_dir */
static char conv_args[4096]; /* est convert's flags, without --output_dir */

static const char *const ops[] = {"open", "write", "fsync", "close", "rename"};
enum { NOPS = 5 };

static int skip_name(const char *name) { return strncmp(name, "events.out", 10) == 0; }

/* Byte-compares file `rel` under dirs a and b; 1 when both exist and are equal. */
static int same_file(const char *a, const char *b, const char *rel) {
  char pa[4200], pb[4200];
  snprintf(pa, sizeof pa, "%s/%s", a, rel);
  snprintf(pb, sizeof pb, "%s/%s", b, rel);
  if (!est_file_exists(pa) || !est_file_exists(pb)) return 0;
  size_t na, nb;
  char *x = test_read_file(pa, &na), *y = test_read_file(pb, &nb);
  int same = na == nb && memcmp(x, y, na) == 0;
  free(x);
  free(y);
  return same;
}

/* Calls fn(rel) for every regular file under dir/sub (recursively), events excluded. */
typedef void (*file_fn)(const char *rel, void *ctx);
static void walk(const char *dir, const char *sub, file_fn fn, void *ctx) {
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", dir, sub);
  DIR *d = opendir(path);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.' || skip_name(e->d_name)) continue;
    char rel[2048], full[6300];
    if ((size_t)snprintf(rel, sizeof rel, "%s%s%s", sub, *sub ? "/" : "", e->d_name) >= sizeof rel) fail_msg("path too long");
    snprintf(full, sizeof full, "%s/%s", dir, rel);
    if (est_is_directory(full)) walk(dir, rel, fn, ctx);
    else fn(rel, ctx);
  }
  closedir(d);
}

typedef struct {
  const char *dir, *base, *ref, *what;
} check_ctx;

/* After a fault: no temp file, and every file is base's or ref's, byte for byte. */
static void check_after_fault(const char *rel, void *p) {
  check_ctx *c = p;
  if (strstr(rel, ".tmp.")) fail_msg("%s: temp file %s left behind", c->what, rel);
  if (!same_file(c->dir, c->base, rel) && !same_file(c->dir, c->ref, rel))
    fail_msg("%s: %s is neither the previous version nor a complete new one", c->what, rel);
}

/* Every file of base is still there (the previous checkpoint and results). */
static void check_base_kept(const char *rel, void *p) {
  check_ctx *c = p;
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", c->dir, rel);
  if (!est_file_exists(path)) fail_msg("%s: %s of the previous run is gone", c->what, rel);
}

/* After the rerun: the same files as ref, equal. */
static void check_equals(const char *rel, void *p) {
  check_ctx *c = p;
  if (!same_file(c->dir, c->ref, rel)) fail_msg("%s: %s differs from the run without faults", c->what, rel);
}

static void copy_tree(const char *from, const char *to) {
  char *out = NULL;
  if (test_run(&out, 1, "rm -rf '%s' && cp -a '%s' '%s'", to, from, to) != 0) fail_msg("copy: %s", out);
  free(out);
}

/* Runs `est <args> --output_dir=dir` with the shim; returns the exit status. */
static int run_est(char **log, const char *args, const char *dir, const char *prefix, const char *op, long n,
                   const char *err, const char *count_file) {
  char env[4096] = "";
  int k = snprintf(env, sizeof env, "LD_PRELOAD='%s' ASAN_OPTIONS=verify_asan_link_order=0 EST_FAULT_PATH='%s'",
                   EST_FAULT_SHIM, prefix);
  if (op) k += snprintf(env + k, sizeof env - k, " EST_FAULT_OP=%s EST_FAULT_N=%ld EST_FAULT_ERRNO=%s", op, n, err);
  if (count_file) snprintf(env + k, sizeof env - k, " EST_FAULT_COUNT='%s'", count_file);
  return test_run(log, 1, "%s %s %s --output_dir='%s'", env, EST_BIN, args, dir);
}

/* The file the shim failed a call on ("fault_inject: failing OP #N on PATH with ..."),
 * as its final name: the basename, without an atomic write's ".tmp.<pid>.<n>" suffix. */
static void faulted_name(const char *log, char *name, size_t size) {
  const char *p = strstr(log, "fault_inject: failing ");
  p = p ? strstr(p, " on ") : NULL;
  if (!p) fail_msg("the shim failed no call:\n%s", log);
  p += 4;
  const char *end = strstr(p, " with ");
  const char *slash = p;
  for (const char *q = p; q < end; q++)
    if (*q == '/') slash = q + 1;
  snprintf(name, size, "%.*s", (int)(end - slash), slash);
  char *tmp = strstr(name, ".tmp.");
  if (tmp) *tmp = 0;
}

/* The Ns to fail out of `count` calls: all of them (the checkpoint's data file makes ~29
 * buffered writes here); an op with more than 64 calls would get its first 8, 8 spread
 * over the middle and its last 8. */
static int pick(long count, long *ns) {
  int k = 0;
  for (long n = 1; n <= count; n++)
    if (count <= 64 || n <= 8 || n > count - 8 || (n - 8) % ((count - 16) / 8 + 1) == 0) ns[k++] = n;
  return k;
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

/* One writer (the files whose basename starts with `prefix`) under every fault. */
static void fault_every_call(const char *args, const char *base, const char *ref, const char *prefix,
                             int events, long min_calls) {
  const char *label = *prefix ? prefix : "every file";
  char dir[1024], count_file[1024];
  snprintf(dir, sizeof dir, "%s/work", test_tmpdir);
  snprintf(count_file, sizeof count_file, "%s/counts", test_tmpdir);
  copy_tree(base, dir);
  char *log = NULL;
  if (run_est(&log, args, dir, prefix, NULL, 0, NULL, count_file) != 0) fail_msg("counting run failed:\n%s", log);
  free(log);
  long counts[NOPS], total = 0;
  read_counts(count_file, counts);
  for (int i = 0; i < NOPS; i++) total += counts[i];
  if (total < min_calls) fail_msg("%s: only %ld calls counted", label, total);
  int tried = 0;
  for (int i = 0; i < NOPS; i++) {
    long ns[64];
    int k = pick(counts[i], ns);
    for (int j = 0; j < k; j++, tried++) {
      const char *err = ns[j] % 2 ? "ENOSPC" : "EIO";
      const char *errtext = ns[j] % 2 ? strerror(ENOSPC) : strerror(EIO);
      char what[1024];
      snprintf(what, sizeof what, "%s: %s #%ld of %ld (%s)", label, ops[i], ns[j], counts[i], err);
      copy_tree(base, dir);
      int rc = run_est(&log, args, dir, prefix, ops[i], ns[j], err, NULL);
      char name[512];
      faulted_name(log, name, sizeof name);
      /* est's own message, after the shim's line: names the file and the error. */
      const char *own = strstr(strstr(log, "fault_inject: failing ") + 1, "\n");
      int named = own && strstr(own, name) && strstr(own, errtext);
      if (events) {
        if (rc != 0) fail_msg("%s: exit %d, want 0 (events are a report):\n%s", what, rc, log);
        if (!named) fail_msg("%s: no warning naming %s and '%s':\n%s", what, name, errtext, log);
      } else {
        if (rc == 0) fail_msg("%s: exit 0 after a failed write:\n%s", what, log);
        if (!named) fail_msg("%s: no message naming %s and '%s':\n%s", what, name, errtext, log);
      }
      free(log);
      check_ctx c = {dir, base, ref, what};
      walk(dir, "", check_after_fault, &c);
      walk(base, "", check_base_kept, &c);
      if (run_est(&log, args, dir, prefix, NULL, 0, NULL, NULL) != 0) fail_msg("%s: rerun failed:\n%s", what, log);
      free(log);
      walk(dir, "", check_equals, &c);
      walk(ref, "", check_equals, &c);
    }
  }
  print_message("%s: %d faults tried (open %ld, write %ld, fsync %ld, close %ld, rename %ld calls)\n", label, tried,
                counts[0], counts[1], counts[2], counts[3], counts[4]);
}

static char base_dir[1024], ref_dir[1024], conv_base[1024], conv_ref[1024];

static int setup(void **state) {
  test_tmpdir_setup(state);
  /* A 3000-word vocab and a config to match keep the checkpoint at ~1 MB. */
  char *out = NULL;
  if (test_run(&out, 1, "head -3000 '%s' > '%s' && sed 's/30522/3000/' '%s' > '%s'", D "/vocab_uncased.txt",
               test_tmp_path("vocab.txt"), D "/run_classifier/bert_config_h32.json", test_tmp_path("config.json")))
    fail_msg("%s", out);
  free(out);
  const char *common = "--data_dir=" D "/glue_mini/CoLA --max_seq_length=32";
  snprintf(run_args, sizeof run_args,
           "run_classifier --task_name=cola --do_train --do_eval --do_predict %s --vocab_file=%s --bert_config_file=%s"
           " --train_batch_size=4 --eval_batch_size=4 --predict_batch_size=3 --learning_rate=1e-3 --num_threads=1"
           " --num_train_epochs=",
           common, test_tmp_path("vocab.txt"), test_tmp_path("config.json"));
  snprintf(conv_args, sizeof conv_args, "convert --task_name=cola %s --vocab_file=%s", common,
           test_tmp_path("vocab.txt"));
  snprintf(base_dir, sizeof base_dir, "%s/base", test_tmpdir);
  snprintf(ref_dir, sizeof ref_dir, "%s/ref", test_tmpdir);
  snprintf(conv_base, sizeof conv_base, "%s/conv_base", test_tmpdir);
  snprintf(conv_ref, sizeof conv_ref, "%s/conv_ref", test_tmpdir);
  char args[4200];
  snprintf(args, sizeof args, "%s2", run_args); /* 10 examples / batch 4 * 2 epochs = 5 steps */
  if (run_est(&out, args, base_dir, "", NULL, 0, NULL, NULL) != 0) fail_msg("base run:\n%s", out);
  free(out);
  copy_tree(base_dir, ref_dir);
  strcat(run_args, "4"); /* the continuation: steps 5..10 */
  if (run_est(&out, run_args, ref_dir, "", NULL, 0, NULL, NULL) != 0) fail_msg("ref run:\n%s", out);
  free(out);
  /* convert: base holds records of a 2-sequence-length-shorter conversion, ref the real one. */
  char short_args[4200];
  snprintf(short_args, sizeof short_args, "%s --max_seq_length=16", conv_args);
  if (run_est(&out, short_args, conv_base, "", NULL, 0, NULL, NULL) != 0) fail_msg("convert base:\n%s", out);
  free(out);
  copy_tree(conv_base, conv_ref);
  if (run_est(&out, conv_args, conv_ref, "", NULL, 0, NULL, NULL) != 0) fail_msg("convert ref:\n%s", out);
  free(out);
  return 0;
}

static void test_checkpoint_save(void **s) { (void)s; fault_every_call(run_args, base_dir, ref_dir, "model.ckpt", 0, 10); }
static void test_checkpoint_state(void **s) { (void)s; fault_every_call(run_args, base_dir, ref_dir, "checkpoint", 0, 5); }
static void test_eval_results(void **s) { (void)s; fault_every_call(run_args, base_dir, ref_dir, "eval_results.txt", 0, 5); }
static void test_test_results(void **s) { (void)s; fault_every_call(run_args, base_dir, ref_dir, "test_results.tsv", 0, 5); }
static void test_run_classifier_records(void **s) {
  (void)s;
  fault_every_call(run_args, base_dir, ref_dir, "train.tf_record", 0, 5);
  fault_every_call(run_args, base_dir, ref_dir, "eval.tf_record", 0, 5);
  fault_every_call(run_args, base_dir, ref_dir, "predict.tf_record", 0, 5);
}
static void test_events(void **s) { (void)s; fault_every_call(run_args, base_dir, ref_dir, "events.out", 1, 3); }
/* The fsync of the output directory after each rename (the files are complete under their
 * final names by then, but not durable): base and ref are copied to "work". */
static void test_directory_sync(void **s) { (void)s; fault_every_call(run_args, base_dir, ref_dir, "work", 0, 5); }
static void test_convert_records(void **s) { (void)s; fault_every_call(conv_args, conv_base, conv_ref, "", 0, 15); }

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_checkpoint_save), cmocka_unit_test(test_checkpoint_state),
      cmocka_unit_test(test_eval_results),    cmocka_unit_test(test_test_results),
      cmocka_unit_test(test_run_classifier_records), cmocka_unit_test(test_events),
      cmocka_unit_test(test_directory_sync),
      cmocka_unit_test(test_convert_records),
  };
  return cmocka_run_group_tests(tests, setup, test_tmpdir_teardown);
}
