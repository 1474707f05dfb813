/* Test-only write-fault injector, loaded with LD_PRELOAD into `est` by tests/test_fault.c.
 *
 * It counts, and can fail, the calls a writer makes on its way to the disk: open (with
 * write intent), write, fsync, close, rename. Only calls on files whose name (basename of
 * the path; for rename, either path) starts with EST_FAULT_PATH count, so one writer's calls
 * can be numbered apart from the rest (e.g. "model.ckpt", "checkpoint", "eval_results").
 * A directory opened read-only (to fsync it after a rename) counts only its fsync calls, so
 * the prefix of the output directory's name numbers the directory syncs.
 *
 *   EST_FAULT_PATH   basename prefix that selects the files (unset: every file)
 *   EST_FAULT_OP     open | write | fsync | close | rename: the op to fail (unset: count only)
 *   EST_FAULT_N      fail the Nth call of that op (1-based); later calls pass again
 *   EST_FAULT_ERRNO  ENOSPC (default) or EIO
 *   EST_FAULT_COUNT  file that gets "open N\nwrite N\n..." at exit, so a test can learn
 *                    how many calls of each op a run makes before it iterates over them
 *   EST_FAULT_STDOUT set: stdout becomes a line-buffered stream through the counted write()
 *                    on fd 1 (counted whatever EST_FAULT_PATH says), so `est predict`'s Nth
 *                    output line can be failed as a full disk under `> file` would fail it
 *
 * glibc's stdio writes through internal, non-interposable calls, so fopen for writing is
 * replaced: the file is opened with the counted open() and wrapped in fopencookie, whose
 * write and close callbacks go through the counted write() and close(); fileno() of such a
 * stream returns the real descriptor, so fsync(fileno(f)) is counted too. A failing close
 * still closes the descriptor.
 *
 * Crashes and signals at chosen points of training (EST_FAULT_KILL_SAVE,
 * EST_FAULT_SIGNAL_AT_STEP) are not this shim's: tests/fault/fault_hooks.c drives libest's
 * fault seam (est/fault_hooks.h) for them, and libest itself reads no test-only variable.
 * docs/testing.md, "Fault injection", describes both shims. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { OP_OPEN, OP_WRITE, OP_FSYNC, OP_CLOSE, OP_RENAME, OP_COUNT, MAX_FD = 4096 };
static const char *const op_names[OP_COUNT] = {"open", "write", "fsync", "close", "rename"};

static int (*real_open)(const char *, int, ...);
static ssize_t (*real_write)(int, const void *, size_t);
static int (*real_fsync)(int);
static int (*real_close)(int);
static int (*real_rename)(const char *, const char *);
static int (*real_fileno)(FILE *);

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long counts[OP_COUNT];
static int fault_op = -1;
static long fault_n;
static int fault_errno = ENOSPC;
static const char *prefix;
static unsigned char watched[MAX_FD]; /* fd -> 1: a matching file opened to write; 2: a matching directory */
static char *fd_paths[MAX_FD];        /* fd -> its path, for the report of a failed call */

static int stdout_wrapped;
static void wrap_stdout(void);

__attribute__((constructor)) static void fault_init(void) {
  real_open = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, "open");
  real_write = (ssize_t(*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
  real_fsync = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
  real_close = (int (*)(int))dlsym(RTLD_NEXT, "close");
  real_rename = (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename");
  real_fileno = (int (*)(FILE *))dlsym(RTLD_NEXT, "fileno");
  const char *op = getenv("EST_FAULT_OP"), *n = getenv("EST_FAULT_N"), *e = getenv("EST_FAULT_ERRNO");
  for (int i = 0; op && i < OP_COUNT; i++)
    if (!strcmp(op, op_names[i])) fault_op = i;
  fault_n = n ? atol(n) : 0;
  if (e && !strcmp(e, "EIO")) fault_errno = EIO;
  prefix = getenv("EST_FAULT_PATH");
  if (getenv("EST_FAULT_STDOUT") && !stdout_wrapped) {
    stdout_wrapped = 1;
    wrap_stdout();
  }
}

__attribute__((destructor)) static void fault_report(void) {
  const char *path = getenv("EST_FAULT_COUNT");
  if (!path) return;
  /* The real calls: the report itself must not count. */
  int fd = real_open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  char text[256];
  int n = 0;
  for (int i = 0; i < OP_COUNT; i++) n += snprintf(text + n, sizeof text - n, "%s %ld\n", op_names[i], counts[i]);
  if (real_write(fd, text, (size_t)n) != n) perror("fault_inject: count file");
  real_close(fd);
}

static int matches(const char *path) {
  if (!prefix) return 1;
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  return strncmp(base, prefix, strlen(prefix)) == 0;
}

/* Counts one call of `op`; nonzero when this is the one to fail (errno is then set). */
static int hit(int op, const char *path) {
  pthread_mutex_lock(&lock);
  long k = ++counts[op];
  pthread_mutex_unlock(&lock);
  if (op == fault_op && k == fault_n) {
    fprintf(stderr, "fault_inject: failing %s #%ld on %s with %s\n", op_names[op], k, path ? path : "?",
            strerror(fault_errno));
    errno = fault_errno;
    return 1;
  }
  return 0;
}

static int is_watched(int fd) { return fd >= 0 && fd < MAX_FD && watched[fd]; }

static const char *fd_path(int fd) { return fd >= 0 && fd < MAX_FD ? fd_paths[fd] : NULL; }

static int open_impl(const char *path, int flags, mode_t mode) {
  if (!real_open) fault_init();
  int writing = (flags & (O_WRONLY | O_RDWR | O_CREAT)) != 0;
  int dir = (flags & O_DIRECTORY) != 0; /* opened to fsync a rename: only its fsync counts */
  int m = matches(path);
  if (writing && m && hit(OP_OPEN, path)) return -1;
  int fd = real_open(path, flags, mode);
  if (fd >= 0 && fd < MAX_FD) {
    watched[fd] = (unsigned char)(m ? (writing ? 1 : dir ? 2 : 0) : 0);
    free(fd_paths[fd]);
    fd_paths[fd] = watched[fd] ? strdup(path) : NULL;
  }
  return fd;
}

int open(const char *path, int flags, ...) {
  mode_t mode = 0;
  if (flags & (O_CREAT | O_TMPFILE)) {
    va_list ap;
    va_start(ap, flags);
    mode = (mode_t)va_arg(ap, int);
    va_end(ap);
  }
  return open_impl(path, flags, mode);
}

int open64(const char *path, int flags, ...) __attribute__((alias("open")));

ssize_t write(int fd, const void *buf, size_t n) {
  if (!real_write) fault_init();
  if (is_watched(fd) && hit(OP_WRITE, fd_path(fd))) return -1;
  return real_write(fd, buf, n);
}

int fsync(int fd) {
  if (!real_fsync) fault_init();
  if (is_watched(fd) && hit(OP_FSYNC, fd_path(fd))) return -1;
  return real_fsync(fd);
}

int close(int fd) {
  if (!real_close) fault_init();
  int failed = is_watched(fd) && watched[fd] == 1 && hit(OP_CLOSE, fd_path(fd));
  int saved = errno;
  if (fd >= 0 && fd < MAX_FD) watched[fd] = 0;
  int r = real_close(fd);
  if (failed) {
    errno = saved;
    return -1;
  }
  return r;
}

int rename(const char *from, const char *to) {
  if (!real_rename) fault_init();
  if ((matches(from) || matches(to)) && hit(OP_RENAME, to)) return -1;
  return real_rename(from, to);
}

/* ---- stdio for writing, through the counted calls --------------------------------------- */

typedef struct {
  int fd;
} cookie;

static ssize_t cookie_write(void *c, const char *buf, size_t n) {
  size_t done = 0;
  while (done < n) {
    ssize_t k = write(((cookie *)c)->fd, buf + done, n - done);
    if (k < 0 && errno == EINTR) continue;
    /* A short count (0 included), not -1: glibc's cookie streams mark the error either way,
     * but take -1 as a byte count in fwrite's large-write path and overrun their buffer. */
    if (k <= 0) return (ssize_t)done;
    done += (size_t)k;
  }
  return (ssize_t)done;
}

static FILE *cookie_files[MAX_FD]; /* fd -> the stream wrapping it, for fileno() */

static int cookie_close(void *c) {
  int fd = ((cookie *)c)->fd;
  if (fd < MAX_FD) cookie_files[fd] = NULL;
  int r = close(fd);
  free(c);
  return r;
}

FILE *fopen(const char *path, const char *mode) {
  if (!real_open) fault_init();
  int flags;
  switch (mode[0]) {
  case 'r': flags = strchr(mode, '+') ? O_RDWR : O_RDONLY; break;
  case 'w': flags = (strchr(mode, '+') ? O_RDWR : O_WRONLY) | O_CREAT | O_TRUNC; break;
  case 'a': flags = (strchr(mode, '+') ? O_RDWR : O_WRONLY) | O_CREAT | O_APPEND; break;
  default: errno = EINVAL; return NULL;
  }
  if (flags == O_RDONLY) {
    FILE *(*real_fopen)(const char *, const char *) = (FILE * (*)(const char *, const char *)) dlsym(RTLD_NEXT, "fopen");
    return real_fopen(path, mode);
  }
  int fd = open_impl(path, flags | O_CLOEXEC, 0666);
  if (fd < 0) return NULL;
  cookie *c = malloc(sizeof *c);
  cookie_io_functions_t io = {NULL, cookie_write, NULL, cookie_close};
  FILE *f = c ? fopencookie(c, mode, io) : NULL;
  if (!f) {
    free(c);
    real_close(fd);
    if (fd < MAX_FD) watched[fd] = 0;
    errno = ENOMEM;
    return NULL;
  }
  c->fd = fd;
  if (fd < MAX_FD) cookie_files[fd] = f;
  return f;
}

FILE *fopen64(const char *path, const char *mode) __attribute__((alias("fopen")));

int fileno(FILE *f) {
  if (!real_fileno) fault_init();
  for (int fd = 0; fd < MAX_FD; fd++)
    if (cookie_files[fd] == f) return fd;
  return real_fileno(f);
}

/* EST_FAULT_STDOUT: fd 1 is watched and stdout writes through it, a line at a time. */
static void wrap_stdout(void) {
  /* Static: stdout's cookie lives as long as the process (LeakSanitizer would report a
   * malloc'ed one, which nothing could free before exit). */
  static cookie stdout_cookie;
  cookie *c = &stdout_cookie;
  cookie_io_functions_t io = {NULL, cookie_write, NULL, NULL}; /* fd 1 stays open at exit */
  FILE *f = fopencookie(c, "w", io);
  if (!f) return;
  c->fd = 1;
  watched[1] = 1;
  fd_paths[1] = strdup("<stdout>");
  setvbuf(f, NULL, _IOLBF, 0);
  stdout = f;
}
