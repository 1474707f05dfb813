/* est/file.h — whole-file reads, directory creation, and atomic writes.
 *
 * Every file est writes that a later run or another program reads (checkpoints, the
 * `checkpoint` state file, TFRecords, eval_results.txt) goes through est_atomic_file:
 * data goes to "<path>.tmp.<pid>.<n>", is fsync'ed, and is renamed over <path>, and the
 * directory is fsync'ed. A crash at any moment leaves either the old file or the new
 * one where a reader looks, never half of one.
 *
 *     est_atomic_file *f;
 *     if (est_atomic_open(&f, "out/eval_results.txt") != EST_OK) return est_error_code();
 *     fprintf(est_atomic_stream(f), "eval_accuracy = %g\n", acc);
 *     return est_atomic_commit(f);      // or est_atomic_abort(f) on a failure path
 */
#ifndef EST_FILE_H
#define EST_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "est/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct est_atomic_file est_atomic_file;

est_status est_atomic_open(est_atomic_file **out, const char *path);
FILE *est_atomic_stream(est_atomic_file *f);
/* The temporary path being written (useful in messages). */
const char *est_atomic_temp_path(const est_atomic_file *f);
/* Flush, fsync, rename over the final path, fsync the directory; frees f either way. */
est_status est_atomic_commit(est_atomic_file *f);
/* Removes the temporary file and frees f; the final path is untouched. NULL is fine. */
void est_atomic_abort(est_atomic_file *f);

/* Writes `size` bytes to `path` atomically. */
est_status est_write_file_atomic(const char *path, const void *data, size_t size);

/* Reads a whole file into a malloc'ed buffer (NUL-terminated for convenience; the
 * terminator is not counted in *size). Caller frees *data with free(). */
est_status est_read_file(const char *path, uint8_t **data, size_t *size);

/* mkdir -p. */
est_status est_mkdirs(const char *path);

int est_file_exists(const char *path);
int est_is_directory(const char *path);

/* dir + "/" + name into buf (no double slash; an empty dir gives name). A result longer than
 * size - 1 bytes is EST_ERR_INVALID_ARGUMENT naming the whole path, and buf is left "" (never a
 * truncated path, which would name some other file). */
/* Removes dir and everything under it (symlinks unlinked, not followed); best effort. */
void est_remove_tree(const char *dir);

est_status est_path_join(char *buf, size_t size, const char *dir, const char *name);

#ifdef __cplusplus
}
#endif
#endif
