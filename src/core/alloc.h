/* Internal allocation helpers.
 *
 * est_alloc returns zeroed memory aligned to 64 bytes (one cache line, one zmm load).
 * Blocks of 2 MiB and more are mmap'ed with MADV_HUGEPAGE: first touch of fresh 4 KiB
 * pages costs ~0.35 GB/s in this VM (docs/performance.md §3), so big buffers
 * (parameters, activations, Adam moments) are allocated once, huge-paged, and reused. */
#ifndef EST_CORE_ALLOC_H
#define EST_CORE_ALLOC_H

#include <stddef.h>

void *est_alloc(size_t size);   /* NULL on failure (no error message set) */
void est_free(void *ptr);       /* NULL is fine */
/* Gives the whole pages inside [p, p + bytes) back to the OS (MADV_DONTNEED): they read as
 * zeros afterwards and hold no memory until written. For values never read again, e.g. the
 * fp32 weights of an int8 export, whose packed int8 form is all that runs. */
void est_release_pages(void *p, size_t bytes);

#endif
