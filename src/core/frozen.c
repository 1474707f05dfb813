/* Read-only ranges and their derived copies (core/frozen.h). A handful of ranges (one per
 * live inference model) and a few dozen copies (one per weight matrix), so a lock and two
 * lists are enough: a lookup is a few dozen comparisons next to a GEMM's millions of FLOPs.
 * Every bf16 GEMM asks, the attention's small per-head products from all threads at once
 * included: with no range at all (training) the answer is one atomic load, and lookups
 * share a read lock; only making a copy or changing the ranges takes it exclusively. */
#include "core/frozen.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"

enum { MAX_RANGES = 64 };

typedef struct {
  const char *base;
  size_t bytes;
} frozen_range;

typedef struct derived_copy {
  const char *src;
  uint64_t key[4];
  void *copy;
  size_t bytes;
  int range; /* index into ranges */
  struct derived_copy *next;
} derived_copy;

static pthread_rwlock_t lock = PTHREAD_RWLOCK_INITIALIZER;
static atomic_int live_ranges;           /* ranges in use */
static frozen_range ranges[MAX_RANGES]; /* base NULL: free slot */
static derived_copy *copies;
static size_t copy_bytes;

int est_frozen_add(const void *base, size_t bytes) {
  if (!base || !bytes) return 0;
  int slot = -1;
  pthread_rwlock_wrlock(&lock);
  for (int i = 0; i < MAX_RANGES && slot < 0; i++)
    if (!ranges[i].base) slot = i;
  if (slot >= 0) ranges[slot] = (frozen_range){base, bytes}, atomic_fetch_add(&live_ranges, 1);
  pthread_rwlock_unlock(&lock);
  return slot >= 0 ? 0 : -1;
}

void est_frozen_remove(const void *base) {
  if (!base) return;
  pthread_rwlock_wrlock(&lock);
  for (int i = 0; i < MAX_RANGES; i++) {
    if (ranges[i].base != base) continue;
    for (derived_copy **p = &copies; *p;) {
      derived_copy *d = *p;
      if (d->range != i) {
        p = &d->next;
        continue;
      }
      *p = d->next;
      copy_bytes -= d->bytes;
      est_free(d->copy);
      free(d);
    }
    ranges[i] = (frozen_range){NULL, 0};
    atomic_fetch_sub(&live_ranges, 1);
  }
  pthread_rwlock_unlock(&lock);
}

/* The range holding all of [p, p + n), or -1. */
static int range_of(const char *p, size_t n) {
  for (int i = 0; i < MAX_RANGES; i++) {
    const frozen_range *r = &ranges[i];
    if (r->base && p >= r->base && (size_t)(p - r->base) <= r->bytes && n <= r->bytes - (size_t)(p - r->base))
      return i;
  }
  return -1;
}

/* The copy of (src, key) made before, or NULL. Under the lock. */
static void *find_copy(const char *src, const uint64_t key[4]) {
  for (derived_copy *d = copies; d; d = d->next)
    if (d->src == src && !memcmp(d->key, key, sizeof d->key)) return d->copy;
  return NULL;
}

const void *est_frozen_derived(const void *src, size_t extent, const uint64_t key[4], size_t bytes,
                               void (*make)(void *copy, void *ctx), void *ctx) {
  if (atomic_load(&live_ranges) == 0) return NULL;
  const char *s = src;
  pthread_rwlock_rdlock(&lock);
  int r = range_of(s, extent);
  void *found = r >= 0 ? find_copy(s, key) : NULL;
  pthread_rwlock_unlock(&lock);
  if (r < 0 || found) return found;
  /* first use: made under the exclusive lock, after looking again (another thread may
   * have made it, or the range may have gone, in between) */
  pthread_rwlock_wrlock(&lock);
  r = range_of(s, extent);
  found = r >= 0 ? find_copy(s, key) : NULL;
  if (r >= 0 && !found) {
    derived_copy *d = malloc(sizeof *d);
    void *copy = d ? est_alloc(bytes) : NULL;
    if (copy) {
      make(copy, ctx);
      *d = (derived_copy){s, {key[0], key[1], key[2], key[3]}, copy, bytes, r, copies};
      copies = d;
      copy_bytes += bytes;
      found = copy;
    } else {
      free(d);
    }
  }
  pthread_rwlock_unlock(&lock);
  return found;
}

int est_frozen_adopt(const void *src, size_t extent, const uint64_t key[4], void *copy, size_t bytes) {
  const char *s = src;
  derived_copy *d = malloc(sizeof *d);
  pthread_rwlock_wrlock(&lock);
  int r = range_of(s, extent);
  int taken = d && r >= 0 && !find_copy(s, key);
  if (taken) {
    *d = (derived_copy){s, {key[0], key[1], key[2], key[3]}, copy, bytes, r, copies};
    copies = d;
    copy_bytes += bytes;
  }
  pthread_rwlock_unlock(&lock);
  if (!taken) free(d);
  return taken ? 0 : -1;
}

size_t est_frozen_derived_bytes(void) {
  pthread_rwlock_rdlock(&lock);
  size_t n = copy_bytes;
  pthread_rwlock_unlock(&lock);
  return n;
}
