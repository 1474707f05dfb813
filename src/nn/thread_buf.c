/* Per-thread scratch buffers (thread_buf.h). */
#include "nn/thread_buf.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct {
  float *p[EST_TBUF_COUNT];
  size_t cap[EST_TBUF_COUNT];
} thread_bufs;

static pthread_key_t key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static void bufs_free(void *p) {
  thread_bufs *b = p;
  for (int i = 0; i < EST_TBUF_COUNT; i++) free(b->p[i]);
  free(b);
}

static void key_init(void) { (void)pthread_key_create(&key, bufs_free); }

float *est_thread_buf(est_thread_buf_slot slot, size_t floats) {
  pthread_once(&key_once, key_init);
  thread_bufs *b = pthread_getspecific(key);
  if (!b) {
    b = calloc(1, sizeof *b);
    if (!b) return NULL;
    if (pthread_setspecific(key, b) != 0) {
      free(b);
      return NULL;
    }
  }
  if (b->cap[slot] < floats) {
    free(b->p[slot]);
    b->p[slot] = aligned_alloc(64, (floats * sizeof(float) + 63) / 64 * 64);
    b->cap[slot] = b->p[slot] ? floats : 0;
  }
  return b->p[slot];
}
