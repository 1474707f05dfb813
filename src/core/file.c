/* Atomic writes (temp + fsync + rename + fsync dir) and small file helpers. */
#include "est/file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct est_atomic_file {
  FILE *stream;
  char *final_path;
  char *temp_path;
};

static atomic_uint temp_counter;

est_status est_atomic_open(est_atomic_file **out, const char *path) {
  *out = NULL;
  est_atomic_file *f = calloc(1, sizeof *f);
  if (!f) return est_error(EST_ERR_NO_MEMORY, "out of memory opening %s", path);
  size_t n = strlen(path) + 64;
  f->final_path = strdup(path);
  f->temp_path = malloc(n);
  if (!f->final_path || !f->temp_path) {
    est_atomic_abort(f);
    return est_error(EST_ERR_NO_MEMORY, "out of memory opening %s", path);
  }
  snprintf(f->temp_path, n, "%s.tmp.%d.%u", path, (int)getpid(), atomic_fetch_add(&temp_counter, 1));
  f->stream = fopen(f->temp_path, "wb");
  if (!f->stream) {
    est_status st = est_error(EST_ERR_IO, "cannot create %s: %s", f->temp_path, strerror(errno));
    free(f->final_path);
    free(f->temp_path);
    free(f);
    return st;
  }
  *out = f;
  return EST_OK;
}

FILE *est_atomic_stream(est_atomic_file *f) { return f->stream; }

const char *est_atomic_temp_path(const est_atomic_file *f) { return f->temp_path; }

/* The rename is durable only once the directory holding it is synced. Returns 0, or -1 with
 * errno set; a file system that cannot sync directories (EINVAL) counts as done, and so does
 * a directory that cannot be opened for reading (nothing more can be done for it). */
static int fsync_parent_dir(const char *path) {
  char *copy = strdup(path);
  if (!copy) return 0;
  int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY);
  free(copy);
  if (fd < 0) return 0;
  int r = fsync(fd);
  int saved = errno;
  close(fd);
  errno = saved;
  return r != 0 && saved != EINVAL ? -1 : 0;
}

est_status est_atomic_commit(est_atomic_file *f) {
  est_status st = EST_OK;
  if (fflush(f->stream) != 0 || ferror(f->stream))
    st = est_error(EST_ERR_IO, "writing %s: %s", f->temp_path, strerror(errno));
  else if (fsync(fileno(f->stream)) != 0)
    st = est_error(EST_ERR_IO, "fsync %s: %s", f->temp_path, strerror(errno));
  if (fclose(f->stream) != 0 && st == EST_OK)
    st = est_error(EST_ERR_IO, "closing %s: %s", f->temp_path, strerror(errno));
  f->stream = NULL;
  if (st == EST_OK && rename(f->temp_path, f->final_path) != 0)
    st = est_error(EST_ERR_IO, "renaming %s to %s: %s", f->temp_path, f->final_path, strerror(errno));
  if (st != EST_OK) unlink(f->temp_path);
  else if (fsync_parent_dir(f->final_path) != 0)
    st = est_error(EST_ERR_IO, "syncing the directory of %s (renamed into place, not yet durable): %s", f->final_path,
                   strerror(errno));
  free(f->final_path);
  free(f->temp_path);
  free(f);
  return st;
}

void est_atomic_abort(est_atomic_file *f) {
  if (!f) return;
  if (f->stream) fclose(f->stream);
  if (f->temp_path) unlink(f->temp_path);
  free(f->final_path);
  free(f->temp_path);
  free(f);
}

est_status est_write_file_atomic(const char *path, const void *data, size_t size) {
  est_atomic_file *f;
  est_status st = est_atomic_open(&f, path);
  if (st != EST_OK) return st;
  if (size && fwrite(data, 1, size, f->stream) != size) {
    st = est_error(EST_ERR_IO, "writing %s: %s", f->temp_path, strerror(errno));
    est_atomic_abort(f);
    return st;
  }
  return est_atomic_commit(f);
}

est_status est_read_file(const char *path, uint8_t **data, size_t *size) {
  *data = NULL;
  *size = 0;
  FILE *fp = fopen(path, "rb");
  if (!fp)
    return est_error(errno == ENOENT ? EST_ERR_NOT_FOUND : EST_ERR_IO, "cannot open %s: %s", path,
                     strerror(errno));
  size_t cap = 1 << 16, len = 0;
  uint8_t *buf = malloc(cap + 1);
  while (buf) {
    size_t got = fread(buf + len, 1, cap - len, fp);
    len += got;
    if (len < cap) break;
    cap *= 2;
    uint8_t *grown = realloc(buf, cap + 1);
    if (!grown) { free(buf); buf = NULL; break; }
    buf = grown;
  }
  int failed = ferror(fp);
  fclose(fp);
  if (!buf) return est_error(EST_ERR_NO_MEMORY, "out of memory reading %s", path);
  if (failed) {
    free(buf);
    return est_error(EST_ERR_IO, "error reading %s", path);
  }
  buf[len] = 0;
  *data = buf;
  *size = len;
  return EST_OK;
}

est_status est_mkdirs(const char *path) {
  char buf[4096];
  size_t n = strlen(path);
  if (n == 0 || n >= sizeof buf) return est_error(EST_ERR_INVALID_ARGUMENT, "bad directory path '%s'", path);
  memcpy(buf, path, n + 1);
  for (size_t i = 1; i <= n; i++) {
    if (buf[i] == '/' || buf[i] == '\0') {
      char saved = buf[i];
      buf[i] = '\0';
      if (mkdir(buf, 0777) != 0 && errno != EEXIST)
        return est_error(EST_ERR_IO, "cannot create directory %s: %s", buf, strerror(errno));
      buf[i] = saved;
    }
  }
  if (!est_is_directory(path)) return est_error(EST_ERR_IO, "%s exists and is not a directory", path);
  return EST_OK;
}

int est_file_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

int est_is_directory(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

est_status est_path_join(char *buf, size_t size, const char *dir, const char *name) {
  size_t d = strlen(dir);
  const char *sep = (d == 0 || dir[d - 1] == '/') ? "" : "/";
  int n = snprintf(buf, size, "%s%s%s", dir, sep, name);
  if (n < 0 || (size_t)n >= size) {
    /* A cut path names another file (or a directory above it): never hand one back. */
    if (size > 0) buf[0] = 0;
    return est_error(EST_ERR_INVALID_ARGUMENT, "path %s%s%s (%d bytes) does not fit a %zu-byte buffer", dir, sep,
                     name, n, size);
  }
  return EST_OK;
}

void est_remove_tree(const char *dir) {
  DIR *d = opendir(dir);
  if (d) {
    struct dirent *e;
    while ((e = readdir(d))) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
      char p[4096];
      if (est_path_join(p, sizeof p, dir, e->d_name) != EST_OK) continue;
      struct stat sb;
      if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode)) est_remove_tree(p);
      else unlink(p);
    }
    closedir(d);
  }
  rmdir(dir);
}
