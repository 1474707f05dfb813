/* For the targets whose parser takes a path (est_tokenizer_from_json, est_squad_evaluate):
 * bytes put where a path opens them, in memory. A fuzz_file is an anonymous memory file
 * (memfd) opened once; fuzz_file_put rewrites its contents and gives "/proc/self/fd/N",
 * which fopen() opens afresh at offset 0 each time. No disk is touched and nothing is left
 * behind when the process ends. */
#ifndef EST_FUZZ_FILE_H
#define EST_FUZZ_FILE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct fuzz_file {
  int fd;                         /* 0: not opened yet */
  char path[32];
} fuzz_file;

static const char *fuzz_file_put(fuzz_file *f, const void *data, size_t size) {
  if (!f->fd) {
    f->fd = memfd_create("est-fuzz", 0);
    if (f->fd < 0) abort();
    snprintf(f->path, sizeof f->path, "/proc/self/fd/%d", f->fd);
  }
  if (ftruncate(f->fd, 0) || (size && pwrite(f->fd, data, size, 0) != (ssize_t)size)) abort();
  return f->path;
}

#endif
