/* est_examples: a growable array of InputExamples plus the memory behind their strings
 * (whole TSV buffers adopted from est_tsv, and bump-allocated chunks for guids and copies). */
#include <stdlib.h>
#include <string.h>

#include "glue/processors_internal.h"

#define CHUNK_SIZE (64 * 1024)

void est_examples_init(est_examples *ex) { memset(ex, 0, sizeof *ex); }

void est_examples_free(est_examples *ex) {
  for (size_t i = 0; i < ex->nblocks; i++) free(ex->blocks[i]);
  free(ex->blocks);
  free(ex->items);
  memset(ex, 0, sizeof *ex);
}

/* Takes ownership of a malloc'ed block (freed with the list). */
static bool adopt(est_examples *ex, void *block) {
  if (ex->nblocks == ex->block_cap) {
    size_t cap = ex->block_cap ? 2 * ex->block_cap : 16;
    void **b = realloc(ex->blocks, cap * sizeof *b);
    if (!b) return false;
    ex->blocks = b;
    ex->block_cap = cap;
  }
  ex->blocks[ex->nblocks++] = block;
  return true;
}

bool est_examples_adopt_block(est_examples *ex, void *block) { return adopt(ex, block); }

const char *est_examples_strdup(est_examples *ex, const char *s, size_t len) {
  if (len == SIZE_MAX) len = strlen(s);
  if (len + 1 > ex->chunk_cap - ex->chunk_used || !ex->chunk) {
    size_t cap = len + 1 > CHUNK_SIZE ? len + 1 : CHUNK_SIZE;
    char *c = malloc(cap);
    if (!c || !adopt(ex, c)) {
      free(c);
      return NULL;
    }
    ex->chunk = c;
    ex->chunk_cap = cap;
    ex->chunk_used = 0;
  }
  char *d = ex->chunk + ex->chunk_used;
  memcpy(d, s, len);
  d[len] = 0;
  ex->chunk_used += len + 1;
  return d;
}

static est_input_example *push(est_examples *ex) {
  if (ex->count == ex->cap) {
    size_t cap = ex->cap ? 2 * ex->cap : 64;
    est_input_example *p = realloc(ex->items, cap * sizeof *p);
    if (!p) return NULL;
    ex->items = p;
    ex->cap = cap;
  }
  est_input_example *e = &ex->items[ex->count++];
  memset(e, 0, sizeof *e);
  return e;
}

est_input_example *est_examples_push(est_examples *ex) { return push(ex); }

est_status est_examples_add(est_examples *ex, const char *guid, const char *text_a, const char *text_b,
                            const char *label) {
  const char *g = est_examples_strdup(ex, guid ? guid : "", SIZE_MAX);
  const char *a = est_examples_strdup(ex, text_a ? text_a : "", SIZE_MAX);
  const char *b = text_b ? est_examples_strdup(ex, text_b, SIZE_MAX) : NULL;
  const char *l = label ? est_examples_strdup(ex, label, SIZE_MAX) : NULL;
  est_input_example *e = (g && a && (b || !text_b) && (l || !label)) ? push(ex) : NULL;
  if (!e) return est_error(EST_ERR_NO_MEMORY, "adding example %s", guid ? guid : "");
  e->guid = g;
  e->text_a = a;
  e->text_b = b;
  e->label = l;
  return EST_OK;
}

est_status est_examples_add_padding(est_examples *ex, size_t n) {
  for (size_t i = 0; i < n; i++) {
    est_input_example *e = push(ex);
    if (!e) return est_error(EST_ERR_NO_MEMORY, "adding padding examples");
    e->is_padding = true;
  }
  return EST_OK;
}

est_status est_examples_pad_to_multiple(est_examples *ex, int64_t batch_size, size_t *added) {
  size_t n = 0;
  if (batch_size > 0) {
    size_t b = (size_t)batch_size;
    n = (b - ex->count % b) % b;
  }
  if (added) *added = n;
  return est_examples_add_padding(ex, n);
}
