/* Version directories of an export base (est/serving.h): <base>/<version>/, <version> all
 * digits. A new version is built under a hidden <base>/.tmp-<version>-<pid>/ and renamed into
 * place (rename of a directory is atomic on POSIX), so a server polling <base> sees either no
 * version or a complete one; readers take the highest complete version and ignore every
 * other entry. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "est/file.h"
#include "est/hf_model.h"
#include "est/serving.h"
#include "serve/export_internal.h"

static int all_digits(const char *s) {
  if (!*s) return 0;
  for (; *s; s++)
    if (*s < '0' || *s > '9') return 0;
  return 1;
}

/* fsync a directory so a rename inside it survives a crash. */
est_status est_export_sync_dir(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY);
  if (fd < 0) return est_error(EST_ERR_IO, "open %s: %s", dir, strerror(errno));
  int rc = fsync(fd);
  close(fd);
  if (rc != 0) return est_error(EST_ERR_IO, "fsync %s: %s", dir, strerror(errno));
  return EST_OK;
}

/* The newest version number present under base (0 when none). */
static int64_t newest_version(const char *base) {
  int64_t best = 0;
  DIR *d = opendir(base);
  if (!d) return 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!all_digits(e->d_name) || strlen(e->d_name) > 18) continue;
    int64_t v = strtoll(e->d_name, NULL, 10);
    if (v > best) best = v;
  }
  closedir(d);
  return best;
}

est_status est_export_version_begin(const char *export_base, char *tmp, size_t size, int64_t *version) {
  est_status st = est_mkdirs(export_base);
  if (st != EST_OK) return st;
  *version = (int64_t)time(NULL);
  int64_t newest = newest_version(export_base);
  if (*version <= newest) *version = newest + 1;
  char name[64];
  snprintf(name, sizeof name, ".tmp-%lld-%ld", (long long)*version, (long)getpid());
  if (strlen(export_base) + 80 > size)
    return est_error(EST_ERR_INVALID_ARGUMENT, "export dir %s: path too long", export_base);
  st = est_path_join(tmp, size, export_base, name);
  if (st == EST_OK) est_remove_tree(tmp);
  return st;
}

est_status est_export_version_publish(const char *export_base, const char *tmp, int64_t version, char *final,
                                      size_t size) {
  est_status st = est_export_sync_dir(tmp);
  /* A concurrent exporter may have taken the number meanwhile: take the next one. */
  for (int tries = 0; st == EST_OK; tries++, version++) {
    char name[32];
    snprintf(name, sizeof name, "%lld", (long long)version);
    st = est_path_join(final, size, export_base, name);
    if (st != EST_OK) break;
    if (rename(tmp, final) == 0) break;
    if ((errno != EEXIST && errno != ENOTEMPTY) || tries > 100)
      st = est_error(EST_ERR_IO, "rename %s -> %s: %s", tmp, final, strerror(errno));
  }
  return st == EST_OK ? est_export_sync_dir(export_base) : st;
}

/* ---- finding a version ------------------------------------------------------------------ */

static int is_complete_version(const char *dir) {
  char p[4096];
  return (est_path_join(p, sizeof p, dir, "est_model.json") == EST_OK && est_file_exists(p)) &&
         (est_path_join(p, sizeof p, dir, "variables/variables.index") == EST_OK && est_file_exists(p));
}

est_status est_export_resolve(const char *path, char *version_dir, size_t size, int64_t *version) {
  return est_export_resolve_below(path, INT64_MAX, version_dir, size, version);
}

est_status est_export_resolve_below(const char *path, int64_t below, char *version_dir, size_t size,
                                    int64_t *version) {
  char p[4096];
  /* a HuggingFace model directory (config.json and weights, no versions): version 1 */
  if (below > 1 && est_is_directory(path) && !(est_path_join(p, sizeof p, path, "est_model.json") == EST_OK &&
                                                 est_file_exists(p)) &&
      est_path_join(p, sizeof p, path, "config.json") == EST_OK && est_file_exists(p) && est_hf_is_checkpoint(path)) {
    if (version) *version = 1;
    snprintf(version_dir, size, "%s", path);
    return EST_OK;
  }
  if (below == INT64_MAX && (est_path_join(p, sizeof p, path, "est_model.json") == EST_OK && est_file_exists(p))) {
    const char *slash = strrchr(path, '/');
    const char *leaf = slash ? slash + 1 : path;
    if (version) *version = all_digits(leaf) && strlen(leaf) <= 18 ? strtoll(leaf, NULL, 10) : 0;
    snprintf(version_dir, size, "%s", path);
    return EST_OK;
  }
  DIR *d = opendir(path);
  if (!d) return est_error(EST_ERR_NOT_FOUND, "export dir %s: %s", path, strerror(errno));
  int64_t best = -1;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!all_digits(e->d_name) || strlen(e->d_name) > 18) continue;
    int64_t v = strtoll(e->d_name, NULL, 10);
    if (v <= best || v >= below || est_path_join(p, sizeof p, path, e->d_name) != EST_OK || !is_complete_version(p)) continue;
    best = v;
  }
  closedir(d);
  if (best < 0)
    return below == INT64_MAX ? est_error(EST_ERR_NOT_FOUND, "export dir %s holds no complete version", path)
                              : est_error(EST_ERR_NOT_FOUND, "export dir %s holds no complete version below %lld",
                                          path, (long long)below);
  char name[32];
  snprintf(name, sizeof name, "%lld", (long long)best);
  if (strlen(path) + strlen(name) + 2 > size)
    return est_error(EST_ERR_INVALID_ARGUMENT, "export dir %s: path too long", path);
  est_status st = est_path_join(version_dir, size, path, name);
  if (st != EST_OK) return st;
  if (version) *version = best;
  return EST_OK;
}
