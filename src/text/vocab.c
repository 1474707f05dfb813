/* WordPiece vocabulary: tokenization.py's load_vocab with its quirks, and an open-addressing
 * hash table so WordPiece can look up "##" + piece without building the string. */
#include <stdlib.h>
#include <string.h>

#include "est/file.h"
#include "est/tokenizer.h"
#include "text/unicode.h"

/* 8 bytes per slot so the whole table of a 30k vocab (64k slots) is 512 KiB; the tag (high
 * hash bits) rejects nearly every wrong slot without touching the token pool. */
typedef struct vocab_slot {
  uint32_t tag;
  int32_t id;                           /* -1: empty */
} vocab_slot;

struct est_vocab {
  char *pool;                           /* every stripped line, NUL-terminated, in order */
  uint32_t *offset;                     /* [size] start of line id's token in pool */
  uint32_t *length;                     /* [size] its byte length */
  uint8_t *shadowed;                    /* [size] 1: a later duplicate line took the token */
  int32_t size;
  vocab_slot *slots;
  size_t mask;                          /* slots = mask + 1, a power of two */
  size_t max_bytes;
  char *path;
};

/* FNV-1a, 64-bit; hashing continues across the "##" prefix so a continuation piece is hashed
 * in place. Vocab tokens are short, so a simple byte loop is as fast as anything here. */
#define HASH_SEED 0xcbf29ce484222325ULL
#define HASH_PRIME 0x100000001b3ULL
static inline uint64_t hash_bytes(uint64_t h, const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * HASH_PRIME;
  return h;
}
/* hash_bytes(HASH_SEED, "##", 2), folded at compile time. */
#define HASH_HASHHASH ((((HASH_SEED ^ 0x23ULL) * HASH_PRIME) ^ 0x23ULL) * HASH_PRIME)

/* FNV's low bits are weak for short keys; a splitmix64 finalizer spreads them over the slots. */
static inline size_t slot_of(uint64_t h) {
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 27;
  return (size_t)h;
}

static int32_t lookup(const est_vocab *v, uint64_t h, bool cont, const char *s, size_t n) {
  size_t full = n + (cont ? 2 : 0);
  for (size_t i = slot_of(h) & v->mask;; i = (i + 1) & v->mask) {
    const vocab_slot *sl = &v->slots[i];
    if (sl->id < 0) return -1;
    if (sl->tag != (uint32_t)(h >> 32) || v->length[sl->id] != full) continue;
    const char *t = v->pool + v->offset[sl->id];
    if (cont) {
      if (t[0] != '#' || t[1] != '#') continue;
      t += 2;
    }
    if (memcmp(t, s, n) == 0) return sl->id;
  }
}

int32_t vocab_find_piece(const est_vocab *v, bool cont, const char *s, size_t n) {
  uint64_t h = cont ? HASH_HASHHASH : HASH_SEED;
  return lookup(v, hash_bytes(h, s, n), cont, s, n);
}

int32_t est_vocab_find(const est_vocab *v, const char *token, size_t len) {
  if (len == SIZE_MAX) len = strlen(token);
  return lookup(v, hash_bytes(HASH_SEED, token, len), false, token, len);
}

size_t vocab_max_token_bytes(const est_vocab *v) { return v->max_bytes; }
int32_t est_vocab_size(const est_vocab *v) { return v->size; }
const char *est_vocab_path(const est_vocab *v) { return v->path; }

const char *est_vocab_token(const est_vocab *v, int32_t id) {
  if (id == EST_TOKEN_UNK_MISSING) return "[UNK]";
  if (id < 0 || id >= v->size || v->shadowed[id]) return NULL;
  return v->pool + v->offset[id];
}

void est_vocab_free(est_vocab *v) {
  if (!v) return;
  free(v->pool);
  free(v->offset);
  free(v->length);
  free(v->shadowed);
  free(v->slots);
  free(v->path);
  free(v);
}

/* Python's str.strip(): trims code points for which isspace() holds, from both ends. */
static void strip_py_space(const char *s, size_t n, size_t *b, size_t *e) {
  size_t i = 0;
  while (i < n) {
    size_t adv;
    uint32_t c = tok_utf8_next((const uint8_t *)s + i, n - i, &adv);
    if (!tok_py_isspace(c)) break;
    i += adv;
  }
  size_t j = n;
  while (j > i) {
    size_t k = j - 1;                   /* back up to the lead byte of the last char */
    while (k > i && ((uint8_t)s[k] & 0xC0) == 0x80) k--;
    size_t adv;
    uint32_t c = tok_utf8_next((const uint8_t *)s + k, j - k, &adv);
    if (!tok_py_isspace(c)) break;
    j = k;
  }
  *b = i;
  *e = j;
}

est_status est_vocab_load_buffer(est_vocab **out, const char *data, size_t size, const char *name) {
  *out = NULL;
  /* Lines: every '\n' ends one; a non-empty tail without '\n' is one more (readline). */
  size_t lines = 0;
  for (size_t i = 0; i < size; i++) lines += data[i] == '\n';
  if (size > 0 && data[size - 1] != '\n') lines++;
  const char *utf16 = tok_utf16_bom((const uint8_t *)data, size);
  if (utf16)
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s:1: the vocab is %s (it starts with a byte-order mark); it is "
                     "read as UTF-8: convert it, e.g. iconv -f UTF-16 -t UTF-8", name, utf16);
  if (lines > INT32_MAX / 2 || size >= UINT32_MAX)
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: vocab too large (%zu lines)", name, lines);

  est_vocab *v = calloc(1, sizeof *v);
  if (!v) return est_error(EST_ERR_NO_MEMORY, "loading vocab %s", name);
  size_t cap = 16;
  while (cap < 2 * lines + 2) cap <<= 1;
  v->pool = malloc(size + lines + 1);
  v->offset = malloc((lines + 1) * sizeof *v->offset);
  v->length = malloc((lines + 1) * sizeof *v->length);
  v->shadowed = calloc(lines + 1, 1);
  v->slots = malloc(cap * sizeof *v->slots);
  v->path = strdup(name);
  if (!v->pool || !v->offset || !v->length || !v->shadowed || !v->slots || !v->path) {
    est_vocab_free(v);
    return est_error(EST_ERR_NO_MEMORY, "loading vocab %s", name);
  }
  for (size_t i = 0; i < cap; i++) v->slots[i].id = -1;
  v->mask = cap - 1;

  size_t pos = 0, used = 0;
  for (size_t line = 0; line < lines; line++) {
    const char *nl = memchr(data + pos, '\n', size - pos);
    size_t end = nl ? (size_t)(nl - data) : size;
    const char *s = data + pos;
    size_t n = end - pos;
    size_t bad = est_utf8_first_invalid(s, n);
    if (bad != SIZE_MAX) {
      est_vocab_free(v);
      return est_error(EST_ERR_INVALID_ARGUMENT, "%s:%zu: invalid UTF-8 at byte %zu of the line", name,
                       line + 1, bad);
    }
    /* A NUL would cut the token short in est_vocab_token (the reference keeps it, but its
     * tokenizer deletes U+0000, so such a token never matches); it is most likely a UTF-16
     * file without byte-order mark. Found by fuzz_vocab. */
    const char *nul = memchr(s, 0, n);
    if (nul) {
      est_vocab_free(v);
      return est_error(EST_ERR_INVALID_ARGUMENT, "%s:%zu: NUL byte at byte %zu of the line (a UTF-16 file?)", name,
                       line + 1, (size_t)(nul - s) + 1);
    }
    size_t b, e;
    strip_py_space(s, n, &b, &e);
    memcpy(v->pool + used, s + b, e - b);
    v->pool[used + e - b] = 0;
    v->offset[line] = (uint32_t)used;
    v->length[line] = (uint32_t)(e - b);
    if (e - b > v->max_bytes) v->max_bytes = e - b;
    used += e - b + 1;
    pos = end + 1;

    /* Insert or, for a duplicate, move the token to this later id (dict assignment). */
    int32_t id = (int32_t)line;
    uint64_t h = hash_bytes(HASH_SEED, v->pool + v->offset[line], v->length[line]);
    for (size_t i = slot_of(h) & v->mask;; i = (i + 1) & v->mask) {
      vocab_slot *sl = &v->slots[i];
      if (sl->id < 0) {
        sl->id = id;
        sl->tag = (uint32_t)(h >> 32);
        break;
      }
      if (sl->tag == (uint32_t)(h >> 32) && v->length[sl->id] == v->length[line] &&
          !memcmp(v->pool + v->offset[sl->id], v->pool + v->offset[line], v->length[line])) {
        v->shadowed[sl->id] = 1;
        sl->id = id;
        break;
      }
    }
  }
  v->size = (int32_t)lines;
  *out = v;
  return EST_OK;
}

est_status est_vocab_load(est_vocab **out, const char *path) {
  uint8_t *data;
  size_t size;
  *out = NULL;
  est_status st = est_read_file(path, &data, &size);
  if (st != EST_OK) return est_error_prefix("loading vocab: ");
  st = est_vocab_load_buffer(out, (const char *)data, size, path);
  free(data);
  return st;
}
