/* tf.estimator's exporters (tensorflow_estimator: exporter.py): LatestExporter,
 * BestExporter, FinalExporter (est/exporter.h). A version is staged under
 * <base>/.tmp-export-<pid>/ (the export function writes there, then eval_result.txt is
 * added) and renamed to <base>/<version>; a version dropped by exports_to_keep is renamed
 * to <base>/.tmp-drop-<version> before it is deleted: a reader of <base> only ever sees
 * complete versions. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "est/exporter.h"
#include "est/file.h"
#include "est/log.h"

static est_status check_common(const char *name, est_export_fn fn, int64_t keep) {
  if (!name || !*name || strchr(name, '/') || name[0] == '.' || strlen(name) >= 256)
    return est_error(EST_ERR_INVALID_ARGUMENT, "exporter name '%s': must be a non-empty directory name without "
                     "'/' not starting with '.'", name ? name : "");
  if (!fn) return est_error(EST_ERR_INVALID_ARGUMENT, "exporter '%s': export_fn is NULL", name);
  if (keep < 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "exporter '%s': exports_to_keep=%lld must be >= 0 (0 keeps all)",
                     name, (long long)keep);
  return EST_OK;
}

static est_status init(est_exporter *x, est_exporter_kind kind, const char *name, est_export_fn fn, void *ctx,
                       int64_t keep) {
  memset(x, 0, sizeof *x);
  est_status st = check_common(name, fn, keep);
  if (st != EST_OK) return st;
  x->kind = kind;
  snprintf(x->name, sizeof x->name, "%s", name);
  x->export_fn = fn;
  x->export_ctx = ctx;
  x->exports_to_keep = keep;
  snprintf(x->metric, sizeof x->metric, "loss");
  return EST_OK;
}

est_status est_latest_exporter(est_exporter *x, const char *name, est_export_fn fn, void *ctx,
                               int64_t exports_to_keep) {
  return init(x, EST_EXPORTER_LATEST, name, fn, ctx, exports_to_keep);
}

est_status est_best_exporter(est_exporter *x, const char *name, est_export_fn fn, void *ctx, const char *metric,
                             int higher_is_better, int64_t exports_to_keep) {
  est_status st = init(x, EST_EXPORTER_BEST, name, fn, ctx, exports_to_keep);
  if (st != EST_OK) return st;
  if (metric && strlen(metric) >= sizeof x->metric)
    return est_error(EST_ERR_INVALID_ARGUMENT, "exporter '%s': metric name too long", name);
  if (metric && *metric) snprintf(x->metric, sizeof x->metric, "%s", metric);
  x->higher_is_better = higher_is_better != 0;
  return EST_OK;
}

est_status est_final_exporter(est_exporter *x, const char *name, est_export_fn fn, void *ctx) {
  return init(x, EST_EXPORTER_FINAL, name, fn, ctx, 0);
}

/* ---- versions under a base ---------------------------------------------------------------- */

static int version_number(const char *s, int64_t *v) {
  size_t n = strlen(s);
  if (n == 0 || n > 18) return 0;
  for (const char *c = s; *c; c++)
    if (*c < '0' || *c > '9') return 0;
  *v = strtoll(s, NULL, 10);
  return 1;
}

static int cmp_desc(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? 1 : x > y ? -1 : 0;
}

/* The version numbers under base, newest first (malloc'ed; none: *n = 0). */
static est_status list_versions(const char *base, int64_t **out, size_t *n) {
  *out = NULL, *n = 0;
  DIR *d = opendir(base);
  if (!d) return errno == ENOENT ? EST_OK : est_error(EST_ERR_IO, "opendir %s: %s", base, strerror(errno));
  size_t cap = 0;
  struct dirent *e;
  int64_t v;
  while ((e = readdir(d)))
    if (version_number(e->d_name, &v)) {
      if (*n == cap) {
        int64_t *grown = realloc(*out, (cap = cap ? 2 * cap : 16) * sizeof *grown);
        if (!grown) {
          closedir(d);
          free(*out);
          *out = NULL, *n = 0;
          return est_error(EST_ERR_NO_MEMORY, "listing %s", base);
        }
        *out = grown;
      }
      (*out)[(*n)++] = v;
    }
  closedir(d);
  if (*n) qsort(*out, *n, sizeof **out, cmp_desc); /* *out is NULL when there are none */
  return EST_OK;
}

static est_status version_path(char *buf, size_t size, const char *base, int64_t v) {
  char name[32];
  snprintf(name, sizeof name, "%lld", (long long)v);
  return est_path_join(buf, size, base, name);
}

static est_status sync_dir(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY);
  if (fd < 0) return est_error(EST_ERR_IO, "open %s: %s", dir, strerror(errno));
  int rc = fsync(fd);
  close(fd);
  return rc == 0 ? EST_OK : est_error(EST_ERR_IO, "fsync %s: %s", dir, strerror(errno));
}

/* ---- a version's evaluation ------------------------------------------------------------- */

est_status est_exporter_read_eval_result(const char *version_dir, est_eval_result *out) {
  memset(out, 0, sizeof *out);
  char path[4200];
  est_status st = est_path_join(path, sizeof path, version_dir, "eval_result.txt");
  if (st != EST_OK) return st;
  if (!est_file_exists(path)) return est_error(EST_ERR_NOT_FOUND, "%s does not exist", path);
  uint8_t *text = NULL;
  size_t size = 0;
  if ((st = est_read_file(path, &text, &size)) != EST_OK) return st;
  size_t lines = 0;
  for (size_t i = 0; i < size; i++) lines += text[i] == '\n';
  out->names = calloc(lines + 1, sizeof *out->names);
  out->values = calloc(lines + 1, sizeof *out->values);
  if (!out->names || !out->values) st = est_error(EST_ERR_NO_MEMORY, "%s", path);
  char *save = NULL;
  int line_no = 0;
  for (char *line = strtok_r((char *)text, "\n", &save); st == EST_OK && line; line = strtok_r(NULL, "\n", &save)) {
    line_no++;
    char *eq = strstr(line, " = "), *end = NULL;
    double v = eq ? strtod(eq + 3, &end) : 0;
    if (!eq || eq == line || end == eq + 3 || *end) {
      st = est_error(EST_ERR_DATA_LOSS, "%s line %d: expected '<name> = <number>', got '%s'", path, line_no, line);
      break;
    }
    *eq = 0;
    if (!(out->names[out->count] = strdup(line))) st = est_error(EST_ERR_NO_MEMORY, "%s", path);
    else out->values[out->count++] = v;
    if (!strcmp(line, "global_step")) out->global_step = (int64_t)v;
  }
  free(text);
  if (st != EST_OK) est_eval_result_clear(out);
  return st;
}

est_status est_exporter_best_so_far(const est_exporter *x, const char *export_base, est_eval_result *best,
                                    int *found) {
  memset(best, 0, sizeof *best);
  *found = 0;
  int64_t *versions;
  size_t n;
  est_status st = list_versions(export_base, &versions, &n);
  for (size_t i = 0; st == EST_OK && i < n && !*found; i++) {
    char dir[4096];
    st = version_path(dir, sizeof dir, export_base, versions[i]);
    if (st != EST_OK) break;
    st = est_exporter_read_eval_result(dir, best);
    if (st == EST_OK) *found = 1;
    else if (est_error_code() == EST_ERR_NOT_FOUND) st = EST_OK; /* exported by something else */
  }
  free(versions);
  (void)x;
  return st;
}

/* BestExporter's compare: x->compare, else x->metric smaller (or higher) is better; a
 * metric missing from either result is an error naming it. */
static est_status is_better(const est_exporter *x, const est_eval_result *best, const est_eval_result *cur,
                            int *better) {
  if (x->compare) {
    *better = x->compare(x->compare_ctx, best, cur) != 0;
    return EST_OK;
  }
  double b, c;
  if (est_eval_result_get(cur, x->metric, &c) != EST_OK)
    return est_error(EST_ERR_INVALID_ARGUMENT, "BestExporter '%s': the evaluation has no metric '%s'", x->name,
                     x->metric);
  if (est_eval_result_get(best, x->metric, &b) != EST_OK)
    return est_error(EST_ERR_DATA_LOSS, "BestExporter '%s': the best export so far has no metric '%s'", x->name,
                     x->metric);
  *better = x->higher_is_better ? c > b : c < b;
  return EST_OK;
}

/* ---- exporting ------------------------------------------------------------------------------ */

/* Removes the staging and dropping directories a killed exporter left behind. */
static void remove_leftovers(const char *base) {
  DIR *d = opendir(base);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    char p[4096];
    if ((!strncmp(e->d_name, ".tmp-export-", 12) || !strncmp(e->d_name, ".tmp-drop-", 10)) &&
        est_path_join(p, sizeof p, base, e->d_name) == EST_OK)
      est_remove_tree(p);
  }
  closedir(d);
}

/* Writes the version: the export function into a staging base, eval_result.txt beside
 * it, then one rename to the first free number >= what the function chose. */
static est_status write_version(const est_exporter *x, const char *base, const est_eval_result *r, char *out,
                                size_t size) {
  char stage[4096], staged[4096] = "", record[4200], final[4096];
  char stage_name[64];
  snprintf(stage_name, sizeof stage_name, ".tmp-export-%ld", (long)getpid());
  est_status st = est_path_join(stage, sizeof stage, base, stage_name);
  if (st == EST_OK) st = x->export_fn(x->export_ctx, r->checkpoint_path, stage, staged, sizeof staged);
  if (st != EST_OK) st = est_error_prefix("exporter '%s', checkpoint %s: ", x->name, r->checkpoint_path);
  if (st == EST_OK && !staged[0]) {   /* the function did not say: the one version it wrote */
    int64_t *found = NULL;
    size_t nfound = 0;
    st = list_versions(stage, &found, &nfound);
    if (st == EST_OK && nfound == 1) st = version_path(staged, sizeof staged, stage, found[0]);
    free(found);
  }
  const char *leaf = strrchr(staged, '/');
  int64_t version = 0;
  if (st == EST_OK && (!leaf || !version_number(leaf + 1, &version)))
    st = est_error(EST_ERR_INTERNAL, "exporter '%s': the export function gave '%s', not a version under %s", x->name,
                   staged, stage);
  if (st == EST_OK) st = est_path_join(record, sizeof record, staged, "eval_result.txt");
  if (st == EST_OK) st = est_eval_result_write(r, record);
  if (st == EST_OK) st = sync_dir(staged);
  int64_t *versions = NULL;
  size_t n = 0;
  if (st == EST_OK) st = list_versions(base, &versions, &n);
  if (st == EST_OK && n && versions[0] >= version) version = versions[0] + 1;
  free(versions);
  for (int tries = 0; st == EST_OK; tries++, version++) {
    if ((st = version_path(final, sizeof final, base, version)) != EST_OK) break;
    if (rename(staged, final) == 0) break;
    if ((errno != EEXIST && errno != ENOTEMPTY) || tries > 100)
      st = est_error(EST_ERR_IO, "rename %s -> %s: %s", staged, final, strerror(errno));
  }
  if (st == EST_OK) st = sync_dir(base);
  est_remove_tree(stage);
  if (st == EST_OK) {
    EST_LOG_INFO("exporter '%s': exported %s (global step %lld) to %s", x->name, r->checkpoint_path,
                 (long long)r->global_step, final);
    snprintf(out, size, "%s", final);
  }
  return st;
}

/* exports_to_keep: the newest versions stay; each older one is renamed out of sight first. */
static est_status drop_old_versions(const est_exporter *x, const char *base) {
  if (x->exports_to_keep <= 0) return EST_OK;
  int64_t *versions;
  size_t n;
  est_status st = list_versions(base, &versions, &n);
  for (size_t i = (size_t)x->exports_to_keep; st == EST_OK && i < n; i++) {
    char dir[4096], hidden[4096], name[64];
    snprintf(name, sizeof name, ".tmp-drop-%lld", (long long)versions[i]);
    st = version_path(dir, sizeof dir, base, versions[i]);
    if (st == EST_OK) st = est_path_join(hidden, sizeof hidden, base, name);
    if (st == EST_OK && rename(dir, hidden) != 0)
      st = est_error(EST_ERR_IO, "rename %s -> %s: %s", dir, hidden, strerror(errno));
    if (st == EST_OK) est_remove_tree(hidden);
  }
  free(versions);
  return st;
}

est_status est_exporter_export(const est_exporter *x, const char *export_base, const est_eval_result *r,
                               int is_the_final_export, char *version_dir, size_t size) {
  char scratch[8];
  if (!version_dir) version_dir = scratch, size = sizeof scratch;
  version_dir[0] = 0;
  if (x->kind == EST_EXPORTER_FINAL && !is_the_final_export) return EST_OK;
  if (!r->checkpoint_path)
    return est_error(EST_ERR_INVALID_ARGUMENT, "exporter '%s': the evaluation names no checkpoint", x->name);
  est_status st = est_mkdirs(export_base);
  if (st != EST_OK) return st;
  remove_leftovers(export_base);
  if (x->kind == EST_EXPORTER_BEST) {
    est_eval_result best;
    int found = 0, better = 1;
    st = est_exporter_best_so_far(x, export_base, &best, &found);
    if (st == EST_OK && found) st = is_better(x, &best, r, &better);
    est_eval_result_clear(&best);
    if (st != EST_OK) return st;
    if (!better) {
      EST_LOG_INFO("exporter '%s': global step %lld is not better than the best export; not exported", x->name,
                   (long long)r->global_step);
      return EST_OK;
    }
  }
  char dir[4096];
  st = write_version(x, export_base, r, dir, sizeof dir);
  if (st == EST_OK) st = drop_old_versions(x, export_base);
  if (st == EST_OK) snprintf(version_dir, size, "%s", dir);
  return st;
}
