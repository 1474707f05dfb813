/* Internal: the pieces of est/threads.h's default thread count, apart for tests. */
#ifndef EST_CORE_THREADS_INTERNAL_H
#define EST_CORE_THREADS_INTERNAL_H

/* Whole CPUs (rounded up) that a cgroup v2 cpu.max text ("200000 100000\n") allows;
 * 0 for "max ..." (no limit) or text that is not a quota. */
int est_threads_from_cpu_max(const char *text);

#endif
