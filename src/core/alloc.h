/* Internal allocation helpers.
 *
 * est_alloc returns zeroed memory aligned to 64 bytes (one cache line, one zmm load).
 * Blocks of 2 MiB and more are mmap'ed with MADV_HUGEPAGE: first touch of fresh 4 KiB
 * pages costs ~0.35 GB/s in this VM (docs/performance.md §3), so big buffers
 * (parameters, activations, Adam moments) are allocated once, huge-paged, and reused. */
#ifndef EST_CORE_ALLOC_H
#define EST_CORE_ALLOC_H

#include <stddef.h>
#include <stdlib.h>

void *est_alloc(size_t size);   /* NULL on failure (no error message set) */
void est_free(void *ptr);       /* NULL is fine */
/* Gives the whole pages inside [p, p + bytes) back to the OS (MADV_DONTNEED): they read as
 * zeros afterwards and hold no memory until written. For values never read again, e.g. the
 * fp32 weights of an int8 export, whose packed int8 form is all that runs. */
void est_release_pages(void *p, size_t bytes);

/* The growing array of every table that is appended to one item at a time: items (of
 * item_size bytes, *cap of them) grown by doubling, from first_cap, until need fit. Returns
 * the array to use from now on (items itself when it was big enough), or NULL out of
 * memory, when items and *cap are left as they were:
 *
 *     pending *grown = est_grow(w->items, &w->cap, w->count + 1, sizeof *grown, 64);
 *     if (!grown) return est_error(EST_ERR_NO_MEMORY, ...);
 *     w->items = grown; */
void *est_grow(void *items, size_t *cap, size_t need, size_t item_size, size_t first_cap);

/* Resizes a heap array to count (> 0) items of its own type; out of memory it is left as it
 * was (still the caller's to free) and the value is false. Parallel arrays grow together
 * with one test, the capacity raised only when all grew (one that grew before another
 * failed is only larger):
 *
 *     if (!EST_RESIZE(b->ids, n) || !EST_RESIZE(b->mask, n)) return est_error(EST_ERR_NO_MEMORY, ...);
 *     b->cap = n;
 *
 * A GNU C statement expression, so the array keeps its type (no cast through void **). */
#define EST_RESIZE(array, count)                                                           \
  __extension__({                                                                         \
    __typeof__(array) est_resized_ = realloc((array), (size_t)(count) * sizeof *(array)); \
    if (est_resized_) (array) = est_resized_;                                             \
    est_resized_ != NULL;                                                                 \
  })

#endif
