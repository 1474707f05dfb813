/* Exporters (est/exporter.h) under train_and_evaluate, on the scripted model of
 * scripted_eval_model.h (evaluation loss per checkpoint step: 1: 5.0, 2: 4.0, 3: 4.5,
 * 4: 3.0, 5: 3.5, 6: 3.2, 7: 3.1, 8: 2.0, 9 on: 1.0), every checkpoint evaluated:
 * - BestExporter (smaller loss) exports at steps 1, 2, 4, 8, 9 and nowhere else; killed
 *   with SIGKILL in step 6 and restarted, it exports at the same steps (TF's would export
 *   step 6 again: the first evaluation of a process, tensorflow #47396);
 * - LatestExporter keeps the newest N; FinalExporter exports the max_steps evaluation only;
 * - a reader polling export/best (another process) never sees a version without all its
 *   files while exports are written and dropped, though the export function writes its
 *   files one by one with pauses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "est/ckpt.h"
#include "est/est.h"
#include "estimator_test_model.h"
#include "scripted_eval_model.h"
#include "test_util.h"

enum { TRAIN_STEPS = 10 };

/* The export function: <base>/1/model.txt (the checkpoint prefix) and <base>/1/weights.bin,
 * written one after the other with a pause, non-atomically: only the exporter's staging
 * keeps a reader from seeing half of it. */
static est_status slow_export(void *ctx, const char *ckpt, const char *base, char *version_dir, size_t size) {
  (void)ctx;
  char dir[4096], path[4200];
  snprintf(dir, sizeof dir, "%s/1", base);
  est_status st = est_mkdirs(dir);
  const char *files[] = {"model.txt", "weights.bin"};
  for (int i = 0; st == EST_OK && i < 2; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, files[i]);
    FILE *f = fopen(path, "w");
    if (!f) return est_error(EST_ERR_IO, "%s", path);
    fprintf(f, "%s\n", ckpt);
    fclose(f);
    usleep(2000);
  }
  snprintf(version_dir, size, "%s", dir);
  return st;
}

/* train_and_evaluate to TRAIN_STEPS with the given exporters. */
static est_status run(const char *dir, int64_t kill_at, const est_exporter *xs, size_t n) {
  tm_data data;
  tm_data_make(&data, 40, 3, 1);
  est_estimator *e;
  est_status st = scripted_estimator_create(&e, dir, &kill_at);
  est_train_spec ts = {.input_fn = {.open = tm_open, .ctx = &data}, .max_steps = TRAIN_STEPS};
  est_eval_spec ev = {.input_fn = {.open = tm_open, .ctx = &data}, .every_n_steps = 1, .exporters = xs, .num_exporters = n};
  if (st == EST_OK) st = est_train_and_evaluate(e, &ts, &ev, NULL);
  est_estimator_free(e);
  tm_data_free(&data);
  return st;
}

/* The global steps of the versions under base, oldest version first, as "1,2,4". */
static void exported_steps(const char *base, char *out, size_t size) {
  out[0] = 0;
  for (int64_t v = 1; v < 100; v++) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%lld", base, (long long)v);
    if (!est_is_directory(dir)) continue;
    est_eval_result r;
    assert_int_equal(est_exporter_read_eval_result(dir, &r), EST_OK);
    char *model = test_read_in(dir, "model.txt");
    char want[64];
    snprintf(want, sizeof want, "model.ckpt-%lld\n", (long long)r.global_step);
    assert_non_null(strstr(model, want));   /* the evaluated checkpoint was exported */
    free(model);
    size_t len = strlen(out);
    snprintf(out + len, size - len, "%s%lld", len ? "," : "", (long long)r.global_step);
    est_eval_result_clear(&r);
  }
}

static void test_best_latest_final(void **state) {
  (void)state;
  const char *dir = test_tmp_path("plain");
  est_exporter xs[3];
  assert_int_equal(est_best_exporter(&xs[0], "best", slow_export, NULL, NULL, 0, 0), EST_OK);
  assert_int_equal(est_latest_exporter(&xs[1], "latest", slow_export, NULL, 3), EST_OK);
  assert_int_equal(est_final_exporter(&xs[2], "final", slow_export, NULL), EST_OK);
  assert_int_equal(run(dir, -1, xs, 3), EST_OK);
  char base[4096], steps[256];
  snprintf(base, sizeof base, "%s/export/best", dir);
  exported_steps(base, steps, sizeof steps);
  assert_string_equal(steps, "1,2,4,8,9");
  snprintf(base, sizeof base, "%s/export/latest", dir);
  exported_steps(base, steps, sizeof steps);
  assert_string_equal(steps, "8,9,10");
  snprintf(base, sizeof base, "%s/export/final", dir);
  exported_steps(base, steps, sizeof steps);
  assert_string_equal(steps, "10");
  /* bad settings are refused, naming what is wrong */
  est_exporter x;
  assert_int_equal(est_best_exporter(&x, "../x", slow_export, NULL, NULL, 0, 0), EST_ERR_INVALID_ARGUMENT);
  assert_int_equal(est_latest_exporter(&x, "l", slow_export, NULL, -1), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "exports_to_keep"));
  /* a metric the evaluation lacks is an error naming it */
  assert_int_equal(est_best_exporter(&x, "acc", slow_export, NULL, "eval_accuracy", 1, 0), EST_OK);
  est_eval_result r = {0};
  snprintf(base, sizeof base, "%s/export/best/5", dir);
  assert_int_equal(est_exporter_read_eval_result(base, &r), EST_OK);
  assert_int_equal(r.global_step, 9);
  assert_null(r.checkpoint_path);
  assert_int_equal(est_exporter_export(&x, base, &r, 0, NULL, 0), EST_ERR_INVALID_ARGUMENT);   /* no checkpoint */
  snprintf(base, sizeof base, "%s/model.ckpt-9", dir);
  r.checkpoint_path = strdup(base);
  snprintf(base, sizeof base, "%s/export/acc", dir);
  assert_int_equal(est_exporter_export(&x, base, &r, 0, NULL, 0), EST_OK);   /* the first: no best yet */
  assert_int_equal(est_exporter_export(&x, base, &r, 0, NULL, 0), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "no metric 'eval_accuracy'"));
  est_eval_result_clear(&r);
}

static void test_best_survives_kill_and_restart(void **state) {
  (void)state;
  const char *dir = test_tmp_path("killed");
  run_killed_child("test_exporters", dir);
  char base[4096], steps[256];
  snprintf(base, sizeof base, "%s/export/best", dir);
  exported_steps(base, steps, sizeof steps);
  assert_string_equal(steps, "1,2,4");   /* killed in step 6: evaluations 1..5 */
  est_exporter best;
  assert_int_equal(est_best_exporter(&best, "best", slow_export, NULL, NULL, 0, 0), EST_OK);
  assert_int_equal(run(dir, -1, &best, 1), EST_OK);
  exported_steps(base, steps, sizeof steps);
  assert_string_equal(steps, "1,2,4,8,9");   /* not 6 (3.2 > the best 3.0) */
}

/* The reader: until <dir>/stop exists, every version named under base must hold both
 * files and eval_result.txt; exits 0 when it saw some and never a partial one, else 1
 * (partial) or 2 (saw none). */
static int reader(const char *dir, const char *base) {
  char stop[4096];
  snprintf(stop, sizeof stop, "%s/stop", dir);
  long seen = 0;
  while (access(stop, F_OK) != 0) {
    DIR *d = opendir(base);
    struct dirent *e;
    while (d && (e = readdir(d))) {
      if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
      const char *files[] = {"model.txt", "weights.bin", "eval_result.txt"};
      for (int i = 0; i < 3; i++) {
        char p[4500], v[4400];
        snprintf(p, sizeof p, "%s/%s/%s", base, e->d_name, files[i]);
        snprintf(v, sizeof v, "%s/%s", base, e->d_name);
        if (access(p, F_OK) != 0 && est_is_directory(v)) {
          fprintf(stderr, "partial version: %s lacks %s\n", v, files[i]);
          return 1;
        }
      }
      seen++;
    }
    if (d) closedir(d);
  }
  return seen ? 0 : 2;
}

static void test_reader_never_sees_partial_version(void **state) {
  (void)state;
  const char *dir = test_tmp_path("reader");
  char base[4096], stop[4200];
  snprintf(base, sizeof base, "%s/export/best", dir);
  snprintf(stop, sizeof stop, "%s/stop", dir);
  assert_int_equal(est_mkdirs(base), EST_OK);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) _exit(reader(dir, base));   /* no threads yet in this process */
  est_exporter best;   /* keep 2: versions are dropped while the reader reads too */
  assert_int_equal(est_best_exporter(&best, "best", slow_export, NULL, NULL, 0, 2), EST_OK);
  assert_int_equal(run(dir, -1, &best, 1), EST_OK);
  assert_int_equal(est_write_file_atomic(stop, "", 0), EST_OK);
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  char steps[256];
  exported_steps(base, steps, sizeof steps);
  assert_string_equal(steps, "8,9");
}

int main(int argc, char **argv) {
  est_log_set_level(getenv("TEST_LOG") ? EST_LOG_INFO : EST_LOG_WARN);
  if (argc == 3 && !strcmp(argv[1], "--killed-child")) {
    est_exporter best;
    if (est_best_exporter(&best, "best", slow_export, NULL, NULL, 0, 0) != EST_OK) return 2;
    run(argv[2], 6, &best, 1);
    return 3;   /* not reached: killed in step 6 */
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_best_latest_final),
      cmocka_unit_test(test_best_survives_kill_and_restart),
      cmocka_unit_test(test_reader_never_sees_partial_version),
  };
  return cmocka_run_group_tests(tests, test_tmpdir_setup, test_tmpdir_teardown);
}
