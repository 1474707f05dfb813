/* 64-byte aligned, zeroed allocations; huge pages for big ones. A small header before
 * the returned pointer remembers how the block was obtained so est_free can undo it. */
#include "core/alloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

enum { ALIGN = 64, HEADER = 64, HUGE_THRESHOLD = 2u << 20 };

typedef struct {
  size_t mapped_size;   /* 0 when the block came from aligned_alloc */
  void *base;
} block_header;

void *est_alloc(size_t size) {
  if (size > SIZE_MAX - HEADER - ALIGN) return NULL;
  size_t total = size + HEADER;
  if (total >= HUGE_THRESHOLD) {
    size_t len = (total + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
    void *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) return NULL;
#ifdef MADV_HUGEPAGE
    madvise(base, len, MADV_HUGEPAGE);
#endif
    block_header *h = base;
    h->mapped_size = len;
    h->base = base;
    return (char *)base + HEADER;  /* mmap memory is already zero */
  }
  size_t rounded = (total + ALIGN - 1) & ~(size_t)(ALIGN - 1);
  void *base = aligned_alloc(ALIGN, rounded);
  if (!base) return NULL;
  memset(base, 0, rounded);
  block_header *h = base;
  h->mapped_size = 0;
  h->base = base;
  return (char *)base + HEADER;
}

void est_free(void *ptr) {
  if (!ptr) return;
  block_header *h = (block_header *)((char *)ptr - HEADER);
  if (h->mapped_size) munmap(h->base, h->mapped_size);
  else free(h->base);
}

void est_release_pages(void *p, size_t bytes) {
  const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  uintptr_t lo = ((uintptr_t)p + page - 1) & ~(page - 1), hi = ((uintptr_t)p + bytes) & ~(page - 1);
  if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

void *est_grow(void *items, size_t *cap, size_t need, size_t item_size, size_t first_cap) {
  if (need <= *cap && items) return items;
  size_t grown = *cap ? *cap : (first_cap ? first_cap : 1);
  while (grown < need) {
    if (grown > SIZE_MAX / 2 / item_size) return NULL;
    grown *= 2;
  }
  if (grown > SIZE_MAX / item_size) return NULL;
  void *p = realloc(items, grown * item_size);
  if (p) *cap = grown;
  return p;
}
