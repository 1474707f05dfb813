/* Internal: memory declared read-only, and copies derived from it that are kept while it is.
 *
 * Inference never writes a model's weights, yet every GEMM would re-pack its weight operand
 * (bf16 tiles for AMX) on every call: at one example of 128 tokens that packing is most of
 * a bf16 BERT step (bench/README.md, "Weights packed once"). A store made read-only
 * (est_vars_set_read_only, est/variables.h) registers its parameter buffer here; a kernel
 * then asks est_frozen_derived for its packed form of an operand, made once on first use
 * and dropped when the range is made writable again or freed. An operand outside every
 * read-only range (activations; weights while training) gets NULL and is packed per call.
 * All functions are thread-safe. */
#ifndef EST_CORE_FROZEN_H
#define EST_CORE_FROZEN_H

#include <stddef.h>
#include <stdint.h>

/* [base, base + bytes) is read-only until est_frozen_remove(base): the caller promises no
 * writes. Returns 0, or -1 when the table of ranges is full (nothing is then cached). */
int est_frozen_add(const void *base, size_t bytes);
/* The range that starts at base is writable again; every copy derived from it is freed.
 * Unknown bases are ignored. */
void est_frozen_remove(const void *base);

/* The copy named by (src, key) of `bytes` bytes, made by make(copy, ctx) on first use: the
 * kernel's own layout of the operand that occupies [src, src + extent), `key` telling its
 * shape and layout apart from other copies of the same src. NULL when that extent is not
 * inside one read-only range, or when memory for the copy cannot be had: the caller then
 * does its per-call work. The copy stays valid until its range is removed. make runs with
 * a lock held (it may start an OpenMP region; it must not call back in here). */
const void *est_frozen_derived(const void *src, size_t extent, const uint64_t key[4], size_t bytes,
                               void (*make)(void *copy, void *ctx), void *ctx);

/* Registers `copy` (est_alloc'd, `bytes` long, taken over: freed with the range) as the copy
 * named by (src, key), made by the caller from elsewhere than src: an int8 export's stored
 * codes (serve/servable.c), so that src's fp32 values need never be read. Returns 0, or -1
 * (copy not taken) when the extent is not inside one read-only range or the copy exists. */
int est_frozen_adopt(const void *src, size_t extent, const uint64_t key[4], void *copy, size_t bytes);

/* Bytes held by derived copies now (for tests and logs). */
size_t est_frozen_derived_bytes(void);

#endif
